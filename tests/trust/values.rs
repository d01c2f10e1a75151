//! Hostile and inexact values: refused at parse in one escaped line, under every name; and
//! what a duration or a death by signal says is what it is.

use super::*;

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
        let child = cmd.spawn().unwrap();
        let pid = child.id() as i32;
        // On the old code lastcall starts the app and runs on; its first TERM then overflows the
        // clock. Refused at parse, it is gone at once: milliseconds are expected, 4 s allowed
        // (the old code's app, `sleep 5`, would still be running then).
        let settled = Instant::now() + 4 * SEC;
        while alive(pid) && Instant::now() < settled {
            std::thread::sleep(Duration::from_millis(5));
        }
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
        // The line and nothing more.
        assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
    }
}

/// A peer's name is no way around the checks: under every name a hostile LASTCALL_* value is
/// refused before the app starts, in one escaped line naming it, with that name's usage exit
/// (the peers' 1, lastcall's 2); so is a peer's own option out of range.
#[test]
fn hostile_values_are_refused_under_every_name() {
    let dir = scratch("names");
    let cases: [(&str, i32, &[&str]); 5] = [
        ("lastcall", 2, &[]),
        ("docker-init", 2, &[]),
        ("tini", 1, &["-e", "256", "--"]),
        ("tini-static", 1, &["-e", "-1", "--"]),
        ("dumb-init", 1, &["-r", "15:99"]),
    ];
    for (name, usage, bad_option) in cases {
        let bin = dir.join(name);
        std::os::unix::fs::symlink(LASTCALL, &bin).unwrap();
        let bad_env: [(&str, &str, &str); 3] = [
            ("LASTCALL_GRACE", "1e19", "LASTCALL_GRACE"),
            ("LASTCALL_STOP_SIGNAL", "TERM\r\n\x1b[2Jx", "LASTCALL_STOP_SIGNAL"),
            ("LASTCALL_PRE_STOP", "5s\nlastcall: fake line", "LASTCALL_PRE_STOP"),
        ];
        for (key, value, needle) in bad_env {
            let out = Command::new(&bin).arg("true").env(key, value).stdin(Stdio::null()).output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(usage), "{name} {key}={value:?}: {stderr}");
            assert!(stderr.lines().next().unwrap_or_default().contains(needle), "{name} {key}: {stderr:?}");
            assert!(!stderr.contains('\x1b') && !stderr.contains('\r') && !stderr.contains("\nlastcall: fake"), "{name}: {stderr:?}");
        }
        if !bad_option.is_empty() {
            let out = Command::new(&bin).args(bad_option).arg("true").stdin(Stdio::null()).output().unwrap();
            assert_eq!(out.status.code(), Some(usage), "{name} {bad_option:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
    let _ = fs::remove_dir_all(&dir);
}

/// A duration is what it says: a value that is not 0 but rounds to 0 (which for the grace would
/// mean "never SIGKILL") is a usage error, as is a signal spelling that is not exact (before:
/// `--grace 1e-10` ran with no SIGKILL at all, `RTMAX-+1` was taken as 63). And the app tells
/// "never" from "under a millisecond" in its environment (before: both read 0).
#[test]
fn durations_and_signals_are_what_they_say() {
    for (args, env, needle) in [
        (vec!["--grace", "1e-10", "true"], vec![], "--grace"),
        (vec!["--grace", "0.0000001ms", "true"], vec![], "--grace"),
        (vec!["true"], vec![("LASTCALL_PRE_STOP", "0.0000000001s")], "LASTCALL_PRE_STOP"),
        (vec!["--stop-signal", "RTMAX-+1", "true"], vec![], "--stop-signal"),
        (vec!["--stop-signal", "+15", "true"], vec![], "--stop-signal"),
        (vec!["--rewrite", "TERM:RTMIN+-1", "true"], vec![], "--rewrite"),
    ] {
        let (code, _, stderr) = run_to_end(Mode::Plain, &args, &env);
        assert_eq!(code, 2, "{args:?} {env:?}: {stderr}");
        assert!(stderr.lines().next().unwrap_or_default().contains(needle), "{args:?}: {stderr}");
    }
    let env_of = |grace: &str| {
        let (code, stdout, stderr) = run_to_end(Mode::Plain, &["--grace", grace, "sh", "-c", "echo $LASTCALL_GRACE_MS"], &[]);
        assert_eq!(code, 0, "{stderr}");
        String::from_utf8_lossy(&stdout).trim().to_string()
    };
    assert_eq!(env_of("0"), "0", "never");
    assert_eq!(env_of("0.5ms"), "1", "under a millisecond");
    assert_eq!(env_of("1.5ms"), "1");
}

/// An app that dies of a signal is said to have been killed by it in the timeline, even one
/// with no name: signal 32 (before: "child exited with status 160").
#[test]
fn a_death_by_signal_32_reads_as_a_death_by_signal() {
    let dir = scratch("signal-32");
    // A shell, whose signal 32 is at its default (Python's is not), which ends a process.
    let marker = dir.join("ready").display().to_string();
    let script = "trap 'kill -32 $$' TERM; touch \"$1\"; while :; do sleep 0.05; done";
    let mut spec = Spec::new(Mode::Plain, &dir, &["--", "sh", "-c", script, "sh", &marker]);
    spec.pre_exec = Some(default_dispositions);
    let mut run = spec.start();
    wait_until(10 * SEC, "the app", || dir.join("ready").exists().then_some(()));
    run.signal(libc::SIGTERM);
    assert_eq!(run.wait(10 * SEC), 128 + 32);
    let stderr = run.stderr();
    assert!(stderr.contains("child killed by signal 32"), "{stderr}");
    assert!(!stderr.contains("status 160"), "{stderr}");
}
