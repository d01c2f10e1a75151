//! lastcall at its trust boundaries (issue 10), each with real processes: hostile values, a
//! hostile local user next to the notify relay and the ready file, a log pipe nobody reads, and
//! floods of health clients.

mod common;

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const SEC: Duration = Duration::from_secs(1);

fn start(mode: Mode, dir: &Path, opts: &[&str], cmd: &[&str]) -> Run {
    let mut spec = Spec::new(mode, dir, opts);
    spec.args.push("--".into());
    spec.args.extend(cmd.iter().map(|s| s.to_string()));
    spec.start()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The whole response to `request`, or None if nothing answered in time.
fn http(port: u16, request: &str, limit: Duration) -> Option<String> {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut s = TcpStream::connect_timeout(&addr, limit).ok()?;
    s.set_read_timeout(Some(limit)).ok()?;
    s.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    s.read_to_string(&mut response).ok()?;
    Some(response)
}

fn status_of(response: &str) -> Option<u16> {
    response.split_whitespace().nth(1)?.parse().ok()
}

/// Point 3: a duration whose deadline would not fit the clock is refused at parse, naming where
/// it came from, instead of aborting lastcall at the first TERM.
#[test]
fn huge_durations_are_refused_at_parse() {
    let cases: [(&[&str], &[(&str, &str)], &str); 5] = [
        (&["--grace", "1e19", "sleep", "5"], &[], "--grace"),
        (&["--pre-stop", "1e19", "sleep", "5"], &[], "--pre-stop"),
        (&["sleep", "5"], &[("LASTCALL_GRACE", "1e19")], "LASTCALL_GRACE"),
        (&["sleep", "5"], &[("LASTCALL_PRE_STOP", "9000000000000000000s")], "LASTCALL_PRE_STOP"),
        (&["--grace", "8761h", "sleep", "5"], &[], "--grace"),
    ];
    for (args, env, needle) in cases {
        let start = Instant::now();
        let mut cmd = Command::new(LASTCALL);
        cmd.args(args).envs(env.iter().copied()).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let pid = child.id() as i32;
        // On the old code lastcall starts the app; its first TERM then overflows the clock.
        std::thread::sleep(Duration::from_millis(300));
        if alive(pid) {
            kill(pid, libc::SIGTERM);
        }
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {stderr}");
        let first = stderr.lines().next().unwrap_or_default();
        assert!(first.contains(needle) && first.contains("a year"), "{args:?} {env:?}: {stderr}");
        assert!(start.elapsed() < 10 * SEC);
    }
    // The maximum itself is fine, and its deadline is far away: TERM, then the app exits.
    let (code, _, stderr) = run_to_end(Mode::Plain, &["--grace", "8760h", "--pre-stop", "8760h", "true"], &[]);
    assert_eq!(code, 0, "{stderr}");
}

/// Point 11: a bad value with a newline or an escape sequence in it gives one line, escaped.
#[test]
fn a_bad_value_with_control_characters_gives_one_line() {
    for (args, env) in [
        (vec!["--grace", "1\nlastcall: fake line", "true"], vec![]),
        (vec!["true"], vec![("LASTCALL_STOP_SIGNAL", "TERM\r\n\x1b[2Jx")]),
        (vec!["--bogus\nx", "true"], vec![]),
    ] {
        let (code, _, stderr) = run_to_end(Mode::Plain, &args, &env);
        assert_eq!(code, 2, "{stderr}");
        let first = stderr.lines().next().unwrap();
        assert!(first.starts_with("lastcall: ") && first.contains("\\n") | first.contains("\\r"), "{stderr:?}");
        assert!(!stderr.contains('\x1b') && !stderr.contains('\r'), "{stderr:?}");
        // The line, the usage line and the hint: nothing more.
        assert_eq!(stderr.lines().count(), 3, "{stderr:?}");
    }
}

/// Point 11: HEAD gets GET's headers and no body.
#[test]
fn head_gets_headers_without_a_body() {
    let dir = scratch("head");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let _run = start(Mode::Plain, &dir, &["--health-listen", &listen], &["sleep", "30"]);
    let get = wait_until(10 * SEC, "the health endpoint", || http(port, "GET /ready HTTP/1.1\r\n\r\n", SEC));
    assert!(get.ends_with("\r\n\r\nready\n"), "{get:?}");
    let head = http(port, "HEAD /ready HTTP/1.1\r\n\r\n", 5 * SEC).expect("an answer to HEAD");
    assert_eq!(status_of(&head), Some(200), "{head:?}");
    assert!(head.contains("Content-Length: 6\r\n"), "{head:?}");
    assert!(head.ends_with("\r\n\r\n"), "HEAD got a body: {head:?}");
}

/// Point 5: a user who can write the ready file's directory plants symlinks to a root-owned
/// file at every name lastcall could predict (the old temporary name came from the pid, which
/// is 1 in a container); lastcall must neither truncate nor write through them.
#[test]
fn planted_symlinks_do_not_redirect_the_ready_file() {
    use std::os::unix::fs::{lchown, symlink, MetadataExt, PermissionsExt};
    let dir = scratch("ready-symlinks");
    let victim = dir.join("victim");
    fs::write(&victim, "root's precious data\n").unwrap();
    let shared = dir.join("shared");
    fs::create_dir(&shared).unwrap();
    let nobody = 65534;
    std::os::unix::fs::chown(&shared, Some(nobody), Some(nobody)).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o755)).unwrap();
    let ready = shared.join("ready");
    let mut planted = vec![ready.clone()];
    for pid in 1..=64 {
        planted.push(shared.join(format!("ready.lastcall-{pid}.tmp")));
    }
    for link in &planted {
        symlink(&victim, link).unwrap();
        lchown(link, Some(nobody), Some(nobody)).unwrap();
    }
    let ready_arg = ready.display().to_string();
    let mut run = start(Mode::Pid1, &dir, &["--ready-file", &ready_arg], &["sleep", "30"]);
    wait_until(10 * SEC, "the ready file", || {
        fs::symlink_metadata(&ready).ok().filter(|m| m.file_type().is_file()).map(|_| ())
    });
    assert_eq!(fs::read_to_string(&victim).unwrap(), "root's precious data\n");
    assert_eq!(fs::read_to_string(&ready).unwrap(), "1\n");
    assert_eq!(fs::metadata(&ready).unwrap().uid(), 0);
    run.signal(libc::SIGTERM);
    assert_eq!(run.wait(10 * SEC), 143);
    assert!(fs::symlink_metadata(&ready).is_err(), "the ready file is gone");
    assert_eq!(fs::read_to_string(&victim).unwrap(), "root's precious data\n");
    // Only the planted links are left: no temporary file, and the victim is where it was.
    let left: Vec<_> = fs::read_dir(&shared).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), planted.len() - 1, "{left:?}");
}
