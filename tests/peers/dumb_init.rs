//! dumb-init: setsid and single-child modes, rewrites, job control, exit codes, leftovers at the
//! child's exit, and verbosity.

use super::*;

/// dumb-init's default, setsid mode: the child leads a session of its own, every signal goes to
/// its group (not to a daemon that left it), and when the child exits the group gets TERM and
/// dumb-init exits at once with the child's status. DUMB_INIT_SETSID turns this off only for
/// exactly "0".
#[test]
fn dumb_init_setsid_mode_signals_the_group_and_terms_it_at_the_end() {
    for variant in [
        scenario(Peer::DumbInit, &["--"]),
        scenario(Peer::DumbInit, &[]).env("DUMB_INIT_SETSID", "1"),
        scenario(Peer::DumbInit, &[]).env("DUMB_INIT_SETSID", "false"),
    ] {
        let outcome = variant.roles(&["grp", "sess"]).env("MAIN_SURVIVES", "1").env("MAIN_EXIT", "7").same(|run| {
            let main = run.pid("main");
            run.pid("grp");
            run.pid("sess");
            let leads = run.session_of(main) == main;
            run.signal_init(HUP);
            run.wait_for("main", "SIGHUP", 1);
            run.wait_for("grp", "SIGHUP", 1);
            run.settle("sess");
            run.signal_init(TERM);
            run.wait_for("main", "SIGTERM", 1);
            run.wait_for("grp", "SIGTERM", 1);
            common::kill(main, USR2);
            vec![format!("main leads a session: {leads}")]
        });
        assert_eq!(outcome.observed, ["main leads a session: true"]);
        assert_eq!(outcome.of("main"), ["SIGHUP", "SIGTERM", "SIGUSR2"]);
        assert_eq!(outcome.of("grp"), ["SIGHUP", "SIGTERM", "SIGTERM", "mark"], "TERM again at the child's exit");
        assert_eq!(outcome.of("sess"), ["mark", "mark"]);
        assert_eq!(outcome.code, 7);
        assert_eq!(outcome.left, ["grp S", "sess S"]);
    }
}

/// `-c`, `--single-child` and DUMB_INIT_SETSID=0: no session, the child alone gets signals, and
/// nobody gets TERM at its exit.
#[test]
fn dumb_init_single_child_mode() {
    for variant in [
        scenario(Peer::DumbInit, &["-c", "--"]),
        scenario(Peer::DumbInit, &["--single-child"]),
        scenario(Peer::DumbInit, &[]).env("DUMB_INIT_SETSID", "0"),
    ] {
        let outcome = variant.roles(&["grp"]).same(|run| {
            let main = run.pid("main");
            run.pid("grp");
            let leads = run.session_of(main) == main;
            let own_group = run.group_of(main) == main;
            run.signal_init(HUP);
            run.wait_for("main", "SIGHUP", 1);
            run.settle("grp");
            run.signal_init(TERM);
            vec![format!("main leads a session: {leads}"), format!("main has a group of its own: {own_group}")]
        });
        assert_eq!(outcome.observed, ["main leads a session: false", "main has a group of its own: false"]);
        assert_eq!(outcome.of("main"), ["SIGHUP", "SIGTERM"]);
        assert_eq!(outcome.of("grp"), ["mark", "mark"]);
        assert_eq!(outcome.code, 143);
        assert_eq!(outcome.left, ["grp S"]);
    }
}

/// `-r s:r` rewrites what is forwarded, the TERM sent at the child's exit too; `r` = 0 drops it.
#[test]
fn dumb_init_rewrites() {
    let outcome = scenario(Peer::DumbInit, &["-r", "15:3", "--rewrite", "1:0", "--"])
        .roles(&["grp"])
        .env("MAIN_SURVIVES", "1")
        .same(|run| {
            let main = run.pid("main");
            run.pid("grp");
            run.signal_init(HUP);
            run.settle("main");
            run.settle("grp");
            run.signal_init(TERM);
            run.wait_for("main", "SIGQUIT", 1);
            run.wait_for("grp", "SIGQUIT", 1);
            common::kill(main, USR2);
            vec![]
        });
    assert_eq!(outcome.of("main"), ["mark", "SIGQUIT", "SIGUSR2"]);
    assert_eq!(outcome.of("grp"), ["mark", "SIGQUIT", "SIGQUIT", "mark"]);
    assert_eq!(outcome.code, 0);
}

/// Job control in both modes: TSTP, TTIN and TTOU are forwarded (as SIGSTOP in setsid mode,
/// unless rewritten) and then dumb-init stops itself; CONT wakes it and is forwarded.
#[test]
fn dumb_init_job_control() {
    /// (args, signal, main's state, grp's state, what main records before TERM)
    type Case = (&'static [&'static str], i32, char, char, &'static [&'static str]);
    let cases: [Case; 4] = [
        (&["--"], libc::SIGTSTP, 'T', 'T', &[]),
        (&["--"], libc::SIGTTIN, 'T', 'T', &[]),
        (&["-c", "--"], libc::SIGTSTP, 'T', 'S', &[]),
        (&["-r", "20:10", "--"], libc::SIGTSTP, 'S', 'S', &["SIGUSR1"]),
    ];
    for (args, sig, main_state, grp_state, recorded) in cases {
        let outcome = scenario(Peer::DumbInit, args).roles(&["grp"]).env("MAIN_SURVIVES", "1").same(|run| {
            let (main, grp) = (run.pid("main"), run.pid("grp"));
            run.signal_init(sig);
            let mut seen = vec![run.wait_state("init", run.init_pid, 'T')];
            for role in recorded {
                run.wait_for("main", role, 1);
            }
            if grp_state == 'S' && recorded.is_empty() {
                run.settle("grp");
            }
            seen.push(run.wait_state("main", main, main_state));
            seen.push(run.wait_state("grp", grp, grp_state));
            run.signal_init(libc::SIGCONT);
            seen.push(run.wait_state("init after CONT", run.init_pid, 'S'));
            seen.push(run.wait_state("main after CONT", main, 'S'));
            seen.push(run.wait_state("grp after CONT", grp, 'S'));
            run.signal_init(TERM);
            run.wait_for("main", "SIGTERM", 1);
            if grp_state == 'T' || !recorded.is_empty() {
                // Signalled as a group: grp records this TERM before the one at main's exit.
                run.wait_for("grp", "SIGTERM", 1);
            }
            common::kill(main, USR2);
            seen
        });
        let expected = [
            "init T".to_string(),
            format!("main {main_state}"),
            format!("grp {grp_state}"),
            "init after CONT S".into(),
            "main after CONT S".into(),
            "grp after CONT S".into(),
        ];
        assert_eq!(outcome.observed, expected, "{args:?} {sig}");
        assert_eq!(outcome.code, 0);
        let mut main_saw: Vec<&str> = recorded.to_vec();
        main_saw.extend(["SIGTERM", "SIGUSR2"]);
        assert_eq!(outcome.of("main"), main_saw, "{args:?} {sig}");
    }
}

/// An exec failure is the forked child's exit code: 2, whatever the reason; usage errors exit 1.
#[test]
fn dumb_init_exit_codes() {
    for command in ["/nonexistent/command", "/etc", "/etc/passwd", "/etc/passwd/x"] {
        let outcome = scenario(Peer::DumbInit, &["--"]).command(&[command]).same(|_| vec![]);
        assert_eq!(outcome.code, 2, "{command}");
    }
    // -r takes numbers only, FROM 1-31, TO 0-31.
    for bad in [&["-s", "true"][..], &["-r", "TERM", "true"], &[], &["-r", "1:32", "true"], &["-r", "TERM:INT", "true"], &["-r", "15:RTMIN", "true"]] {
        let outcome = scenario(Peer::DumbInit, bad).command(&[]).same(|_| vec![]);
        assert_eq!(outcome.code, 1, "{bad:?}");
    }
    // getopt_long: an unambiguous prefix is the option; an ambiguous one is an error.
    for (args, code) in [(&["--ver", "true"][..], 1), (&["--single", "--rew=15:3", "--verb", "true"], 0), (&["--vers"], 0)] {
        let outcome = scenario(Peer::DumbInit, args).command(&[]).same(|_| vec![]);
        assert_eq!(outcome.code, code, "{args:?}");
    }
    for fine in [&["-V"][..], &["--version", "anything"], &["-h"]] {
        let outcome = scenario(Peer::DumbInit, fine).command(&[]).same(|_| vec![]);
        assert_eq!(outcome.code, 0, "{fine:?}");
    }
    let outcome = scenario(Peer::DumbInit, &[]).command(&["sh", "-c", "kill -KILL $$"]).same(|_| vec![]);
    assert_eq!(outcome.code, 137);
}

/// When the child exits while others run: TERM to its group (setsid mode) or to nobody (`-c`),
/// then an exit at once, leaving them running.
#[test]
fn dumb_init_child_exit_with_leftovers() {
    for (args, grp_saw) in [(&["--"][..], &["SIGTERM", "mark"][..]), (&["-c", "--"], &["mark"])] {
        let outcome = scenario(Peer::DumbInit, args).roles(&["grp", "sess"]).env("MAIN_EXIT", "4").same(|run| {
            run.pid("grp");
            run.pid("sess");
            common::kill(run.pid("main"), USR2);
            vec![]
        });
        assert_eq!(outcome.of("grp"), grp_saw, "{args:?}");
        assert_eq!(outcome.of("sess"), ["mark"]);
        assert_eq!(outcome.code, 4);
        assert_eq!(outcome.left, ["grp S", "sess S"]);
    }
}

/// Quiet by default; `-v` and DUMB_INIT_DEBUG=1 (exactly 1) say what happens.
#[test]
fn dumb_init_verbosity() {
    let said = |args: &[&str], debug: Option<&str>| {
        let mut s = scenario(Peer::DumbInit, args).command(&["true"]);
        if let Some(v) = debug {
            s = s.env("DUMB_INIT_DEBUG", v);
        }
        s.same(|run| vec![format!("said something: {}", !run_output_after_exit(run).is_empty())]).observed
    };
    assert_eq!(said(&[], None), ["said something: false"]);
    assert_eq!(said(&[], Some("yes")), ["said something: false"]);
    assert_eq!(said(&["-v"], None), ["said something: true"]);
    assert_eq!(said(&[], Some("1")), ["said something: true"]);
}
