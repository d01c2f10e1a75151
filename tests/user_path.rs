//! What a new user meets first, run through the built binary: a failing probe says why on
//! stderr (Docker keeps it in the health log), a misspelt variable is warned about, and under a
//! peer's name the help and the errors are the peer's.

mod common;

#[path = "user_path/errors.rs"]
mod errors;
#[path = "user_path/exec.rs"]
mod exec;

use std::os::unix::fs::symlink;
use std::process::Command;

use common::{free_port, run_to_end, scratch, Mode, LASTCALL};

#[test]
fn a_failing_probe_says_why_in_one_line() {
    let port = free_port();
    let (code, stdout, stderr) = run_to_end(Mode::Plain, &["probe", "ready", "--health-listen", &format!("127.0.0.1:{port}")], &[]);
    assert_eq!(code, 1);
    assert!(stdout.is_empty());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("lastcall: probe failed: ") && stderr.contains("refused"), "{stderr}");
    let dir = scratch("probe-file");
    let missing = dir.join("ready");
    let (code, _, stderr) = run_to_end(Mode::Plain, &["probe", "ready", "--ready-file", missing.to_str().unwrap()], &[]);
    assert_eq!(code, 1);
    assert!(stderr.contains("does not exist") && stderr.lines().count() == 1, "{stderr}");
    // A 503 is said as such.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 256];
        let _ = s.read(&mut buf);
        s.write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n").unwrap();
    });
    let (code, _, stderr) = run_to_end(Mode::Plain, &["probe", "ready", "--health-listen", &format!("127.0.0.1:{port}")], &[]);
    server.join().unwrap();
    assert_eq!(code, 1);
    assert!(stderr.contains("answered HTTP/1.1 503"), "{stderr}");
}

#[test]
fn a_misspelt_variable_is_never_silent() {
    let env = [("LASTCALL_PRESTOP", "2s")];
    let (code, _, stderr) = run_to_end(Mode::Plain, &["true"], &env);
    assert_eq!(code, 0);
    assert_eq!(stderr, "lastcall: warning: LASTCALL_PRESTOP: not a lastcall variable; did you mean LASTCALL_PRE_STOP?\n");
    let (code, _, stderr) = run_to_end(Mode::Plain, &["true"], &[("LASTCALL_PRESTOP", "2s"), ("LASTCALL_STRICT", "1")]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.starts_with("lastcall: LASTCALL_PRESTOP: not a lastcall variable"), "{stderr}");
}

#[test]
fn under_a_peers_name_help_and_errors_are_the_peers() {
    let dir = scratch("peer-names");
    for (name, usage) in [("tini", "Usage: tini [OPTIONS] PROGRAM -- [ARGS] | --version"), ("dumb-init", "Usage: dumb-init [option] command [[arg] ...]")] {
        let link = dir.join(name);
        symlink(LASTCALL, &link).unwrap();
        let help = Command::new(&link).arg("-h").output().unwrap();
        assert!(help.status.success());
        // Where the peer prints it: dumb-init on stderr, tini on stdout.
        let text = String::from_utf8_lossy(if name == "dumb-init" { &help.stderr } else { &help.stdout });
        assert!(text.starts_with(usage) && !text.contains("--pre-stop"), "{text}");
        let bad = Command::new(&link).args(["--frobnicate", "x"]).output().unwrap();
        let err = String::from_utf8_lossy(&bad.stderr);
        assert_eq!(bad.status.code(), Some(1), "{err}");
        assert!(err.starts_with(&format!("{name}: ")) && err.contains(usage) && err.contains(&format!("Try '{name} -h'")), "{err}");
        assert!(!err.contains("lastcall --help"), "{err}");
    }
}
