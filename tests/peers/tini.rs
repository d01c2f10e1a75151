//! tini: who gets the signals, the subreaper, warnings, exit codes, the parent-death signal, job
//! control signals and verbosity; and the init's own working directory under either peer.

use super::*;

/// tini signals the child alone, exits with it at once, and leaves the rest running untouched;
/// not PID 1 and not a subreaper, it warns. Options are permuted as glibc's getopt does, so
/// without `--` nothing changes here.
#[test]
fn tini_signals_the_child_only_and_exits_with_it() {
    for args in [&["--"][..], &[]] {
        let outcome = scenario(Peer::Tini, args).roles(&["grp"]).same(|run| {
            run.pid("grp");
            let main = run.pid("main");
            let own_group = run.group_of(main) == main && run.session_of(main) != main;
            run.signal_init(HUP);
            run.wait_for("main", "SIGHUP", 1);
            run.settle("grp");
            run.signal_init(TERM);
            vec![format!("main has a group of its own: {own_group}"), format!("warned: {}", run_output_after_exit(run).contains(WARNING))]
        });
        assert_eq!(outcome.of("main"), ["SIGHUP", "SIGTERM"]);
        assert_eq!(outcome.of("grp"), ["mark", "mark"], "nothing reached the grandchild");
        assert_eq!(outcome.code, 143);
        assert_eq!(outcome.left, ["grp S"]);
        assert_eq!(outcome.observed, ["main has a group of its own: true", "warned: true"]);
    }
}

/// The init's own working directory while the app runs: tini stays where it was started,
/// dumb-init moves to / (so that it keeps no mount busy); the app keeps the one it was given.
#[test]
fn the_inits_working_directory() {
    for (peer, expected) in [(Peer::Tini, false), (Peer::DumbInit, true)] {
        let outcome = scenario(peer, &["--"]).same(|run| {
            let main = run.pid("main");
            let cwd = |pid: i32| fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default();
            let observed = vec![format!("init at /: {}", cwd(run.init_pid) == Path::new("/")), format!("app at /: {}", cwd(main) == Path::new("/"))];
            run.signal_init(TERM);
            let _ = run_output_after_exit(run);
            observed
        });
        assert_eq!(outcome.observed, [format!("init at /: {expected}"), "app at /: false".to_string()], "{peer:?}");
    }
}

/// `-g` and TINI_KILL_PROCESS_GROUP (set to anything, even 0 or nothing) signal the group.
#[test]
fn tini_g_and_its_variable_signal_the_group() {
    let variants = [
        scenario(Peer::Tini, &["-g", "--"]),
        scenario(Peer::Tini, &["--"]).env("TINI_KILL_PROCESS_GROUP", "1"),
        scenario(Peer::Tini, &["--"]).env("TINI_KILL_PROCESS_GROUP", "0"),
        scenario(Peer::Tini, &[]).env("TINI_KILL_PROCESS_GROUP", ""),
    ];
    for variant in variants {
        // main outlives TERM, so that each process has recorded it before main's exit ends the
        // run: a signal still pending when the harness marks a leftover could otherwise be
        // counted on either side of the mark.
        let outcome = variant.roles(&["grp", "sess"]).env("MAIN_SURVIVES", "1").env("MAIN_EXIT", "3").same(|run| {
            run.pid("grp");
            run.pid("sess");
            run.signal_init(HUP);
            run.wait_for("main", "SIGHUP", 1);
            run.wait_for("grp", "SIGHUP", 1);
            run.signal_init(TERM);
            run.wait_for("main", "SIGTERM", 1);
            run.wait_for("grp", "SIGTERM", 1);
            common::kill(run.pid("main"), USR2);
            vec![]
        });
        assert_eq!(outcome.of("main"), ["SIGHUP", "SIGTERM", "SIGUSR2"]);
        assert_eq!(outcome.of("grp"), ["SIGHUP", "SIGTERM", "mark"], "nothing more at the exit");
        assert_eq!(outcome.of("sess"), ["mark"], "a session of its own is not in the group");
        assert_eq!(outcome.code, 3);
        assert_eq!(outcome.left, ["grp S", "sess S"]);
    }
}

/// `-s` and TINI_SUBREAPER (any value, even 0) make the init the subreaper: an orphan comes back
/// to it, and there is no warning. Without either, the orphan goes elsewhere (here, to the
/// harness) and tini warns. Either way what is left runs on after the main child's exit.
/// The last variant puts `-s` after the command: glibc's getopt still takes it as tini's.
#[test]
fn tini_s_and_its_variable_adopt_orphans() {
    let variants = [
        (scenario(Peer::Tini, &["--"]).roles(&["mid"]), false),
        (scenario(Peer::Tini, &["-s", "--"]).roles(&["mid"]), true),
        (scenario(Peer::Tini, &["--"]).roles(&["mid"]).env("TINI_SUBREAPER", "0"), true),
        (scenario(Peer::Tini, &["--"]).roles(&["mid"]).env("TINI_SUBREAPER", ""), true),
        (scenario(Peer::Tini, &[]).roles(&["mid", "-s"]), true),
    ];
    for (variant, adopts) in variants {
        let outcome = variant.same(|run| {
            let mid = run.pid("mid");
            let orph = run.pid("orph");
            run.pid("gone");
            wait_until(LIMIT, "mid to exit", || (!alive(mid)).then_some(()));
            let adopted = wait_until(LIMIT, "orph to be re-parented", || {
                let parent = run.parent_of(orph);
                (parent != mid && parent != 0).then_some(parent == run.init_pid)
            });
            common::kill(run.pid("main"), USR2);
            let warned = run_output_after_exit(run).contains(WARNING);
            vec![format!("adopted: {adopted}"), format!("warned: {warned}")]
        });
        assert_eq!(outcome.observed, [format!("adopted: {adopts}"), format!("warned: {}", !adopts)]);
        assert_eq!(outcome.of("main"), ["SIGUSR2"]);
        assert_eq!(outcome.of("orph"), ["mark"]);
        assert_eq!(outcome.code, 0);
        assert_eq!(outcome.left, ["orph S"]);
    }
}

/// `-w` warns of each orphan the init reaps; without it, nothing is said.
#[test]
fn tini_w_warns_of_reaped_zombies() {
    for (args, warns) in [(&["-s", "-w", "--"][..], true), (&["-s", "--"], false)] {
        let outcome = scenario(Peer::Tini, args).roles(&["mid"]).same(|run| {
            let gone = run.pid("gone");
            // Re-parented to the init, exited, and reaped by it: gone from /proc.
            wait_until(LIMIT, "gone to be reaped", || (!Path::new(&format!("/proc/{gone}")).exists()).then_some(()));
            common::kill(run.pid("main"), USR2);
            let output = run_output_after_exit(run).to_lowercase();
            vec![format!("warned of the zombie: {}", output.contains("reaped zombie process"))]
        });
        assert_eq!(outcome.observed, [format!("warned of the zombie: {warns}")]);
        assert_eq!(outcome.code, 0);
    }
}

/// Exit codes: the child's, 128+N, `-e` maps one to 0, and exec failures are 127 (not found),
/// 126 (EACCES) or 1 (anything else), which `-e` maps too: they are the forked child's status.
#[test]
fn tini_exit_codes() {
    for (args, main_exit, code) in [(&["--"][..], "3", 3), (&["-e", "143", "--"], "143", 0), (&["-e", "3", "--"], "143", 143)] {
        let outcome = scenario(Peer::Tini, args).env("MAIN_EXIT", main_exit).same(|run| {
            common::kill(run.pid("main"), USR2);
            vec![]
        });
        assert_eq!(outcome.code, code, "{args:?} MAIN_EXIT={main_exit}");
    }
    let missing = "/nonexistent/command";
    for (args, command, code) in [
        (&["--"][..], missing, 127),
        (&["--"], "/etc", 126),
        (&["--"], "/etc/passwd", 126),
        (&["--"], "/etc/passwd/x", 1),
        (&["-e", "127", "--"], missing, 0),
        (&["-e", "126", "--"], "/etc", 0),
    ] {
        let outcome = scenario(Peer::Tini, args).command(&[command]).same(|_| vec![]);
        assert_eq!(outcome.code, code, "{args:?} {command}");
    }
    // Usage errors exit 1: an unknown option (also one permuted from the command's arguments),
    // a bad -e, a -p signal not spelled as tini spells it, no command at all, --version with
    // company.
    let p_bad: [&[&str]; 3] = [&["-p", "USR1", "true"], &["-p", "10", "true"], &["-p", "SIGRTMIN", "true"]];
    for bad in [&["-c", "true"][..], &["sh", "-c", "true"], &["-e", "256", "true"], &[], &["--version", "true"]].into_iter().chain(p_bad) {
        let outcome = scenario(Peer::Tini, bad).command(&[]).same(|_| vec![]);
        assert_eq!(outcome.code, 1, "{bad:?}");
    }
    for fine in [&["--version"][..], &["-h"], &["-l"]] {
        let outcome = scenario(Peer::Tini, fine).command(&[]).same(|_| vec![]);
        assert_eq!(outcome.code, 0, "{fine:?}");
    }
}

/// `-p SIGNAL`: when the init's parent dies, the kernel sends the init SIGNAL, which it forwards.
#[test]
fn tini_p_forwards_the_parent_death_signal() {
    let outcome = scenario(Peer::Tini, &["-p", "SIGUSR1", "--"]).via_parent().same(|run| {
        run.pid("main");
        let parent = wait_until(LIMIT, "the init's parent", || fs::read_to_string(run.dir.join("parent.pid")).ok()?.parse().ok());
        common::kill(parent, libc::SIGKILL);
        run.wait_for("main", "SIGUSR1", 1);
        run.signal_init(TERM);
        vec![]
    });
    assert_eq!(outcome.of("main"), ["SIGUSR1", "SIGTERM"]);
    assert_eq!(outcome.code, 143);
}

/// TSTP is forwarded (the child stops, the init does not); TTIN and TTOU, which mean "you touched
/// the terminal" to the init itself, are not. CONT is forwarded like any other signal.
#[test]
fn tini_job_control_signals() {
    let outcome = scenario(Peer::Tini, &["--"]).roles(&["grp"]).same(|run| {
        let main = run.pid("main");
        run.pid("grp");
        run.signal_init(libc::SIGTTIN);
        run.signal_init(libc::SIGTTOU);
        // WINCH is numbered above both: it is forwarded after them, if they were.
        run.signal_init(libc::SIGWINCH);
        run.wait_for("main", "SIGWINCH", 1);
        let mut seen = vec![format!("main after TTIN, TTOU {}", run.state(main))];
        run.signal_init(libc::SIGTSTP);
        seen.push(run.wait_state("main after TSTP", main, 'T'));
        seen.push(format!("init {}", run.state(run.init_pid)));
        run.signal_init(libc::SIGCONT);
        seen.push(run.wait_state("main after CONT", main, 'S'));
        run.signal_init(TERM);
        seen
    });
    assert_eq!(outcome.observed, ["main after TTIN, TTOU S", "main after TSTP T", "init S", "main after CONT S"]);
    assert_eq!(outcome.of("main"), ["SIGWINCH", "SIGTERM"]);
    assert_eq!(outcome.code, 143);
}

/// tini's verbosity: warnings by default (the subreaper warning here), TINI_VERBOSITY=0 hides
/// them, -v says more. Where and in what words may differ; whether anything is said may not.
#[test]
fn tini_verbosity() {
    let said = |args: &[&str], env: Option<&str>| {
        let mut s = scenario(Peer::Tini, args).command(&["true"]);
        if let Some(v) = env {
            s = s.env("TINI_VERBOSITY", v);
        }
        s.same(|run| {
            let output = run_output_after_exit(run);
            // Anything but the subreaper warning (three lines from tini, one from lastcall).
            let warning = ["PID 1", WARNING, "To fix the problem"];
            let more = output.lines().any(|l| !warning.iter().any(|w| l.contains(w)));
            vec![format!("warned: {}", output.contains(WARNING)), format!("more: {more}")]
        })
        .observed
    };
    assert_eq!(said(&["--"], None), ["warned: true", "more: false"]);
    assert_eq!(said(&["--"], Some("0")), ["warned: false", "more: false"]);
    assert_eq!(said(&["-vv", "--"], Some("0")), ["warned: false", "more: false"], "the variable wins over -v");
    assert_eq!(said(&["-vv", "--"], None), ["warned: true", "more: true"]);
}
