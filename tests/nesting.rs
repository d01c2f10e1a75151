//! lastcall inside lastcall, and next to tini: `docker run --init` (or Compose's `init: true`)
//! in front of an image whose ENTRYPOINT is lastcall gives two of them, reading the same
//! variables. The outer one must step aside: forward, reap and exit with the inner one's status,
//! leaving pre-stop, grace, readiness and health to the inner one, and say so once. It knows the
//! inner one by the ELF note lastcall carries, not by its name.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use common::{fixture, free_port, run_to_end, scratch, wait_line, Mode, Spec, LASTCALL};

const LIMIT: Duration = Duration::from_secs(20);
const STEPS_ASIDE: &str = "the command is lastcall too";

/// A copy of lastcall under another name, in `dir`: what an image's ENTRYPOINT may call it.
/// A copy made by `cp`, so that this multithreaded test process never holds the copy open for
/// writing: a child that another test forks meanwhile would inherit that descriptor until its
/// exec, and running the copy then fails with ETXTBSY.
fn renamed_copy(dir: &Path, name: &str) -> String {
    let path = dir.join(name);
    let status = std::process::Command::new("cp").arg(LASTCALL).arg(&path).status().unwrap();
    assert!(status.success(), "cp {LASTCALL} {}: {status}", path.display());
    path.to_str().unwrap().to_string()
}

fn probe_ready(port: u16) -> i32 {
    run_to_end(Mode::Plain, &["probe", "ready", "--health-listen", &format!("127.0.0.1:{port}")], &[]).0
}

#[test]
fn a_nested_lastcall_steps_aside_and_the_inner_one_does_the_shutdown() {
    let _alone = common::contention::alone();
    let dir = scratch("nested");
    let inner = renamed_copy(&dir, "entrypoint");
    let out = dir.join("out");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    // As `docker run --init` runs it: `docker-init -- ENTRYPOINT CMD`, with the image's variables.
    let mut run = Spec::new(Mode::Pid1, &dir, &["--", &inner, "--", "python3", &fixture(), "record", out.to_str().unwrap()])
        .env("LASTCALL_PRE_STOP", "2s")
        .env("LASTCALL_HEALTH_LISTEN", &listen)
        .env("LASTCALL_PRESTOP", "typo")
        .start();
    common::wait_until(LIMIT, "'child ready'", || {
        assert!(!run.try_exited(), "lastcall exited before the app was ready:\n{}", run.stderr());
        common::lines(&out).iter().any(|l| l.starts_with("child ready")).then_some(())
    });
    // The health port was bound once, by the inner one: no "Address in use", and it answers.
    common::wait_until(LIMIT, "the inner lastcall's /ready", || (probe_ready(port) == 0).then_some(()));
    let sent = common::monotonic_ns();
    run.signal(libc::SIGTERM);
    let code = run.wait(LIMIT);
    let log = run.stderr();
    assert_eq!(code, 0, "the inner one's status: the app left on TERM\n{log}");
    assert_eq!(log.matches(STEPS_ASIDE).count(), 1, "{log}");
    assert_eq!(log.matches("pre-stop: the app keeps running for 2.000s").count(), 1, "one pre-stop, the inner one's\n{log}");
    assert_eq!(log.matches("did you mean LASTCALL_PRE_STOP?").count(), 1, "the typo warned about once\n{log}");
    assert!(!log.contains("Address in use") && !log.contains("cannot listen"), "{log}");
    assert_eq!(common::count_lines(&out, "child signal 15 "), 1, "the app got one TERM\n{log}");
    // One pre-stop of 2 s, not two of them (the outer one's timeline is not shown): from the
    // TERM to the app's handler, on the app's own clock. Tens of ms are expected past the 2 s;
    // a second pre-stop would add 2 s, so 1.9 s of room tells them apart on a busy host.
    let line = wait_line(&out, "child signal 15 ", LIMIT);
    let got: u64 = line.split_whitespace().nth(3).unwrap().parse().unwrap();
    let took = Duration::from_nanos(got - sent);
    assert!(took >= Duration::from_secs(2) && took < Duration::from_millis(3900), "{took:?}\n{log}");
    // Each timeline line once: the outer one leaves the timeline to the inner one.
    for entry in ["received SIGTERM", "pre-stop ended", "forwarded SIGTERM", "child exited with status 0"] {
        assert_eq!(log.matches(entry).count(), 1, "'{entry}' in:\n{log}");
    }
}

#[test]
fn the_outer_one_exits_with_the_inner_ones_status() {
    let dir = scratch("nested-status");
    let inner = renamed_copy(&dir, "init-by-any-name");
    let (code, _, log) = run_to_end(Mode::Pid1, &["--", &inner, "--", "sh", "-c", "exit 7"], &[]);
    assert_eq!(code, 7, "{log}");
    // Found through PATH too, as exec finds it.
    let path = format!("{}:/usr/bin:/bin", dir.display());
    let (code, _, log) = run_to_end(Mode::Plain, &["--", "init-by-any-name", "--", "sh", "-c", "kill -TERM $$"], &[("PATH", &path)]);
    assert_eq!(code, 128 + libc::SIGTERM, "the app's death, passed up by both\n{log}");
    assert_eq!(log.matches(STEPS_ASIDE).count(), 1, "{log}");
}

#[test]
fn a_program_merely_named_lastcall_is_not_lastcall() {
    let dir = scratch("not-nested");
    let fake = dir.join("lastcall");
    fs::write(&fake, "#!/bin/sh\nexit 4\n").unwrap();
    fs::set_permissions(&fake, fs::Permissions::from_mode(0o755)).unwrap();
    let port = free_port();
    let (code, _, log) =
        run_to_end(Mode::Plain, &[fake.to_str().unwrap()], &[("LASTCALL_HEALTH_LISTEN", &format!("127.0.0.1:{port}"))]);
    assert_eq!(code, 4, "{log}");
    assert!(!log.contains(STEPS_ASIDE), "{log}");
    // A FIFO where the command should be neither blocks the check nor counts.
    let fifo = dir.join("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let (code, _, log) = run_to_end(Mode::Plain, &[fifo.to_str().unwrap()], &[]);
    assert_eq!(code, 126, "{log}");
}

#[test]
fn lastcall_under_tini_does_the_shutdown() {
    let dir = scratch("under-tini");
    let out = dir.join("out");
    let mut cmd = std::process::Command::new("/usr/bin/tini");
    cmd.args(["-s", "--", LASTCALL, "--pre-stop", "500ms", "--", "python3", &fixture(), "record", out.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .stderr(fs::File::create(dir.join("stderr")).unwrap());
    let mut tini = common::ChildGuard(cmd.spawn().expect("/usr/bin/tini: run scripts/setup-test-machine"));
    wait_line(&out, "child ready", LIMIT);
    common::kill(tini.0.id() as i32, libc::SIGTERM);
    let status = common::wait_until(LIMIT, "tini to exit", || tini.0.try_wait().unwrap());
    let log = fs::read_to_string(dir.join("stderr")).unwrap();
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(log.contains("pre-stop ended") && !log.contains(STEPS_ASIDE), "{log}");
    assert_eq!(common::count_lines(&out, "child signal 15 "), 1, "{log}");
}

#[test]
fn tini_under_lastcall_is_an_ordinary_command() {
    let dir = scratch("over-tini");
    let out = dir.join("out");
    let mut run = Spec::new(Mode::Pid1, &dir, &["--pre-stop", "500ms", "--", "/usr/bin/tini", "--", "python3", &fixture(), "record", out.to_str().unwrap()]).start();
    wait_line(&out, "child ready", LIMIT);
    run.signal(libc::SIGTERM);
    let code = run.wait(LIMIT);
    let log = run.stderr();
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("pre-stop ended") && !log.contains(STEPS_ASIDE), "tini has no marker\n{log}");
    assert_eq!(common::count_lines(&out, "child signal 15 "), 1, "{log}");
}
