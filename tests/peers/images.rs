//! What an image gains with one ENV line: lastcall's own variables under a peer's name; and both
//! peers as PID 1 of a PID namespace, as in a container.

use super::*;

impl Scenario {
    /// Runs under lastcall by the peer's name only: for what the peer cannot do.
    fn ours_only(&self, drive: impl Fn(&mut Run) -> Vec<String>) -> Outcome {
        let dir = scratch(&format!("peers-ours-{}", self.peer.name()));
        let outcome = self.run(&self.peer.ours(&dir), &dir.join("ours"), &drive);
        let _ = fs::remove_dir_all(&dir);
        outcome
    }
}

/// A dumb-init image with `ENV LASTCALL_PRE_STOP=1s`: TERM reaches the group a second later,
/// everything else as dumb-init does it (the group, TERM again at the exit, the exit at once).
#[test]
fn lastcall_pre_stop_under_dumb_init_s_name() {
    let outcome = scenario(Peer::DumbInit, &[]).roles(&["grp"]).env("LASTCALL_PRE_STOP", "1s").env("MAIN_SURVIVES", "1").ours_only(|run| {
        let main = run.pid("main");
        run.pid("grp");
        let sent = Instant::now();
        run.signal_init(TERM);
        run.wait_for("main", "SIGTERM", 1);
        let waited = sent.elapsed();
        run.wait_for("grp", "SIGTERM", 1);
        common::kill(main, USR2);
        vec![format!("pre-stop kept: {}", waited >= Duration::from_millis(1000))]
    });
    assert_eq!(outcome.observed, ["pre-stop kept: true"]);
    assert_eq!(outcome.of("main"), ["SIGTERM", "SIGUSR2"]);
    assert_eq!(outcome.of("grp"), ["SIGTERM", "SIGTERM", "mark"]);
    assert_eq!(outcome.code, 0);
}

/// A tini image with `ENV LASTCALL_GRACE=1s`: an app that ignores TERM is SIGKILLed after a
/// second, where tini would wait for ever.
#[test]
fn lastcall_grace_under_tini_s_name() {
    let outcome = scenario(Peer::Tini, &["--"]).env("LASTCALL_GRACE", "1s").env("MAIN_SURVIVES", "1").ours_only(|run| {
        run.pid("main");
        run.signal_init(TERM);
        run.wait_for("main", "SIGTERM", 1);
        vec![]
    });
    assert_eq!(outcome.of("main"), ["SIGTERM"]);
    assert_eq!(outcome.code, 137);
}

/// The app's environment is what the init was given: nothing of lastcall's is added under a
/// peer's name (its deadlines appear only once LASTCALL_PRE_STOP or LASTCALL_GRACE is set).
#[test]
fn the_apps_environment_is_the_peers() {
    let check = r#"env | grep -v '^MAIN_' | sort > "$0"; test -z "$(grep ^LASTCALL_ "$0")""#;
    for peer in [Peer::Tini, Peer::DumbInit] {
        let dir = scratch("peers-env");
        let file = dir.join("env").to_string_lossy().into_owned();
        let outcome = scenario(peer, &["--"]).command(&["sh", "-c", check, &file]).same(|_| vec![]);
        assert_eq!(outcome.code, 0, "{peer:?}: {}", fs::read_to_string(&file).unwrap_or_default());
        let outcome = scenario(peer, &["--"]).env("LASTCALL_GRACE", "2s").command(&["sh", "-c", check, &file]).ours_only(|_| vec![]);
        assert_eq!(outcome.code, 1, "{peer:?}: the deadlines are announced once set");
        let _ = fs::remove_dir_all(&dir);
    }
}

/// As PID 1 neither peer warns about reaping, both forward to the child, and both exit with the
/// child: the kernel then kills whatever was left, so nothing survives the container. (dumb-init's
/// setsid mode is left out here: its TERM to the group at the exit races the kernel's SIGKILL.)
#[test]
fn as_pid1_of_a_container() {
    for variant in [scenario(Peer::Tini, &["--"]), scenario(Peer::DumbInit, &["-c", "--"])] {
        let peer = variant.peer;
        let outcome = variant.roles(&["grp", "sess"]).env("MAIN_SURVIVES", "1").env("MAIN_EXIT", "9").pid1().same(|run| {
            let main = run.pid("main");
            run.pid("grp");
            run.pid("sess");
            run.signal_init(HUP);
            run.wait_for("main", "SIGHUP", 1);
            run.settle("grp");
            run.settle("sess");
            common::kill(main, USR2);
            let output = run_output_after_exit(run);
            vec![format!("warned: {}", output.contains(WARNING))]
        });
        assert_eq!(outcome.observed, ["warned: false"], "{peer:?}");
        assert_eq!(outcome.of("main"), ["SIGHUP", "SIGUSR2"], "{peer:?}");
        assert_eq!(outcome.of("grp"), ["mark"], "{peer:?}");
        assert_eq!(outcome.of("sess"), ["mark"], "{peer:?}");
        assert_eq!(outcome.code, 9, "{peer:?}");
        assert!(outcome.left.is_empty(), "{peer:?}: {:?}", outcome.left);
    }
}
