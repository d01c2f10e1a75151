//! Stepping aside for an inner lastcall never weakens what the outer was asked to do: its flags
//! reach the inner one, it keeps a last SIGKILL of its own, the user switch is the inner one's,
//! and a command it cannot read is not bound twice.

#[allow(unused_imports)]
use super::*;

const LIMIT: Duration = Duration::from_secs(20);

/// A copy of lastcall named `name` in `dir`, made by `cp` (see tests/nesting.rs: a copy this
/// multithreaded process held open for writing could fail to run with ETXTBSY).
fn inner_copy(dir: &Path, name: &str) -> String {
    let path = dir.join(name);
    assert!(Command::new("cp").arg(LASTCALL).arg(&path).status().unwrap().success());
    path.to_str().unwrap().to_string()
}

/// The first child of `pid`.
fn first_child(pid: i32) -> Option<i32> {
    fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?.split_whitespace().next()?.parse().ok()
}

fn uid_of(pid: i32) -> Option<u32> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find(|l| l.starts_with("Uid:"))?.split_whitespace().nth(2)?.parse().ok()
}

fn probe_ready(port: u16) -> bool {
    run_to_end(Mode::Plain, &["probe", "ready", "--health-listen", &format!("127.0.0.1:{port}")], &[]).0 == 0
}

fn app_pid(out: &Path) -> i32 {
    wait_line(out, "child ready", LIMIT).split_whitespace().nth(2).unwrap().parse().unwrap()
}

#[test]
fn the_outers_flags_reach_the_inner_one() {
    // lastcall installed as tini, and lastcall's flags in front of it.
    let dir = scratch("aside-flags");
    let inner = inner_copy(&dir, "tini");
    let (out, ready) = (dir.join("out"), dir.join("ready"));
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let app = fixture_cmd("ignore_term", &out, &[]);
    let mut args = vec!["--grace", "1s", "--health-listen", &listen, "--ready-file", ready.to_str().unwrap(), "--", &inner, "--"];
    args.extend(app.iter().map(String::as_str));
    let mut run = Spec::new(Mode::Plain, &dir, &args).env("LASTCALL_GRACE", "30s").start();
    let app = app_pid(&out);
    wait_until(LIMIT, "the ready file and /ready", || (ready.exists() && probe_ready(port)).then_some(()));
    // The outer's flag won over the inherited variable, as it did for the outer.
    let environ = fs::read(format!("/proc/{app}/environ")).unwrap();
    assert!(environ.split(|&b| b == 0).any(|v| v == b"LASTCALL_GRACE_MS=1000"), "{}", String::from_utf8_lossy(&environ));
    run.signal(libc::SIGTERM);
    let code = run.wait(LIMIT);
    let log = run.stderr();
    assert_eq!(code, 128 + libc::SIGKILL, "the inner one's SIGKILL after 1s\n{log}");
    assert!(!ready.exists(), "{log}");
    assert!(log.contains("handed down as LASTCALL_GRACE, LASTCALL_HEALTH_LISTEN, LASTCALL_READY_FILE"), "{log}");
    assert!(!log.contains("cannot listen"), "{log}");
}

#[test]
fn an_inner_one_killed_leaves_the_outer_to_escalate() {
    // outer → inner → an app that ignores TERM; the inner dies as the OOM killer would kill it.
    let dir = scratch("aside-killed");
    let inner = inner_copy(&dir, "entrypoint");
    let out = dir.join("out");
    let mut args = vec!["--", inner.as_str(), "--"];
    let app = fixture_cmd("ignore_term", &out, &[]);
    args.extend(app.iter().map(String::as_str));
    let mut run = Spec::new(Mode::Plain, &dir, &args).env("LASTCALL_GRACE", "1s").start();
    let app = app_pid(&out);
    let inner = first_child(run.pid).expect("the inner lastcall");
    kill(inner, libc::SIGKILL);
    let code = run.wait(LIMIT);
    let log = run.stderr();
    assert_eq!(code, 128 + libc::SIGKILL, "the inner one's status\n{log}");
    // The outer's SIGKILL: nothing else was left to send one.
    wait_until(LIMIT, "the app to be gone", || (!alive(app)).then_some(()));
}

#[test]
fn a_lastcall_that_never_escalates_still_meets_the_outers_sigkill() {
    // Anything carrying the note is stepped aside for; told never to escalate by its own flag,
    // it leaves a TERM-deaf app running, and the outer's backstop ends it.
    let dir = scratch("aside-backstop");
    let inner = inner_copy(&dir, "entrypoint");
    let out = dir.join("out");
    let mut args = vec!["--grace", "1s", "--", inner.as_str(), "--grace", "0", "--"];
    let app = fixture_cmd("ignore_term", &out, &[]);
    args.extend(app.iter().map(String::as_str));
    let mut run = Spec::new(Mode::Plain, &dir, &args).start();
    let app = app_pid(&out);
    run.signal(libc::SIGTERM);
    let code = run.wait(LIMIT);
    let log = run.stderr();
    assert_eq!(code, 128 + libc::SIGKILL, "{log}");
    wait_until(LIMIT, "the app to be gone", || (!alive(app)).then_some(()));
    assert!(log.contains("keeps a backstop (SIGKILL to what is left 3s after"), "grace + margin\n{log}");
}

#[test]
fn the_user_switch_is_the_inner_ones() {
    // `docker run --init` with LASTCALL_USER: the inner one, which does the SIGKILL and the
    // ready file in a directory only root may write, stays root; the app runs as the user.
    let dir = scratch("aside-user");
    let inner = inner_copy(&dir, "entrypoint");
    let ready = dir.join("ready");
    let mut run = Spec::new(Mode::Plain, &dir, &["--", &inner, "--", "sleep", "1000"])
        .env("LASTCALL_USER", "65534")
        .env("LASTCALL_READY_FILE", ready.to_str().unwrap())
        .start();
    wait_until(LIMIT, "the ready file", || {
        assert!(!run.try_exited(), "lastcall exited:\n{}", run.stderr());
        ready.exists().then_some(())
    });
    let inner = first_child(run.pid).expect("the inner lastcall");
    let app = wait_until(LIMIT, "the app", || first_child(inner));
    assert_eq!(uid_of(inner), Some(0), "{}", run.stderr());
    wait_until(LIMIT, "the app as 65534", || (uid_of(app) == Some(65534)).then_some(()));
    run.signal(libc::SIGTERM);
    let code = run.wait(LIMIT);
    assert_eq!(code, 128 + libc::SIGTERM, "{}", run.stderr());
    assert!(!ready.exists());
}

#[test]
fn an_execute_only_inner_one_is_not_bound_twice() {
    // A non-root outer cannot read a 0711 lastcall: it says so and steps aside all the same.
    let dir = scratch("aside-0711");
    let inner = inner_copy(&dir, "entrypoint");
    fs::set_permissions(&inner, std::os::unix::fs::PermissionsExt::from_mode(0o711)).unwrap();
    let port = free_port();
    let stderr = dir.join("stderr");
    let mut outer = Command::new("setpriv");
    outer
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", LASTCALL, "--", &inner, "--", "sleep", "1000"])
        .env("LASTCALL_HEALTH_LISTEN", format!("127.0.0.1:{port}"))
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stderr(fs::File::create(&stderr).unwrap());
    let mut outer = ChildGuard(outer.spawn().unwrap());
    let log = || fs::read_to_string(&stderr).unwrap_or_default();
    wait_until(LIMIT, "/ready", || {
        assert!(outer.0.try_wait().unwrap().is_none(), "lastcall exited:\n{}", log());
        probe_ready(port).then_some(())
    });
    // Bound by the inner one alone: the outer is still there with its command.
    let inner = first_child(outer.0.id() as i32).expect("the inner lastcall");
    wait_until(LIMIT, "the app", || first_child(inner));
    assert!(outer.0.try_wait().unwrap().is_none(), "{}", log());
    kill(outer.0.id() as i32, libc::SIGTERM);
    let code = exit_code(wait_child(&mut outer.0, LIMIT));
    let log = log();
    assert_eq!(code, 128 + libc::SIGTERM, "{log}");
    assert_eq!(log.matches("cannot read").count(), 1, "{log}");
    assert!(!log.contains("cannot listen"), "{log}");
}
