//! A container's life under lastcall, as `--init` and as ENTRYPOINT: `docker info`, `docker stop`
//! and its timeout, the stop signal and rewrites, exit codes, orphans and OOM kills.

use super::*;

pub(crate) const CASES: &[Case] = cases![
    docker_info_reads_lastcalls_version,
    docker_stop_waits_for_the_pre_stop_and_the_drain,
    docker_stop_of_a_term_ignoring_app_ends_at_lastcalls_grace,
    docker_stop_timeout_sets_the_grace,
    docker_each_timeline_line_once_in_ten_stops,
    docker_stopsignal_and_lastcall_stop_signal,
    docker_lastcall_rewrite,
    docker_exit_codes,
    docker_orphans_are_reaped,
    docker_oom_kill_is_named_in_both_log_formats,
    docker_init_in_front_of_lastcall_leaves_the_user_switch_to_the_inner_one,
];

fn docker_info_reads_lastcalls_version(hosts: &mut Hosts) {
    let docker = hosts.docker();
    let commit = lastcall_commit();
    assert_eq!(docker.ok(&["info", "--format", "{{.InitCommit.ID}}"]), commit);
    assert_eq!(docker.ok(&["info", "--format", "{{.InitBinary}}"]), docker.init.display().to_string());
    let info = docker.ok(&["info"]);
    assert!(info.contains(&format!("init version: {commit}")), "{info}");
    let log = fs::read_to_string(docker.run.path().join("dockerd.log")).unwrap();
    assert!(!log.contains("failed to retrieve"), "dockerd could not read the init's version:\n{log}");
}

fn docker_stop_waits_for_the_pre_stop_and_the_drain(hosts: &mut Hosts) {
    let docker = hosts.docker();
    for mode in MODES {
        let c = run_sh(docker, mode, &["-e", "LASTCALL_PRE_STOP=1s"], &draining_app("2"));
        c.wait_log("app ready", 20 * SEC);
        let took = c.stop(None);
        let log = c.logs(true);
        assert_eq!(c.exit_code(), 0, "{mode:?}:\n{log}");
        // pre-stop 1 s + drain 2 s held. Inside Docker's 10 s is for the exit code to say, not
        // a wall clock that a busy host stretches: Docker's SIGKILL would have made it 137.
        assert!(took >= Duration::from_millis(2900), "{mode:?}: docker stop took {took:?}\n{log}");
        let held = seconds_between(&log, "received SIGTERM", "app got TERM");
        assert!(held >= 0.95, "{mode:?}: the app got TERM {held}s after lastcall did:\n{log}");
        assert_timeline_once(&log, &["received SIGTERM", "pre-stop: the app keeps running for 1.000s", "pre-stop ended", "forwarded SIGTERM", "child exited with status 0"]);
        assert!(log.contains("app drained"), "{log}");
    }
}

fn docker_stop_of_a_term_ignoring_app_ends_at_lastcalls_grace(hosts: &mut Hosts) {
    let docker = hosts.docker();
    // No settings at all, Docker's default timeout: lastcall's own SIGKILL comes first.
    let c = run_sh(docker, Mode::Init, &[], "trap '' TERM; echo app ready; while :; do sleep 1; done");
    c.wait_log("app ready", 20 * SEC);
    let took = c.stop(None);
    let log = c.logs(false);
    assert_eq!(c.exit_code(), 137, "{log}");
    assert!(took >= Duration::from_millis(7800), "docker stop took {took:?}:\n{log}");
    // lastcall's SIGKILL came before Docker's (at its 10 s), on events rather than `took`: only
    // lastcall writes these lines, and had Docker killed it first the last would be missing.
    assert_timeline_once(&log, &["received SIGTERM", "forwarded SIGTERM", "grace expired: sent SIGKILL", "child killed by SIGKILL"]);
    let last = log.lines().filter(|l| l.starts_with("lastcall:")).last().unwrap_or_default();
    assert!(last.ends_with("child killed by SIGKILL"), "the timeline's last line is there: {last}\n{log}");
}

fn docker_stop_timeout_sets_the_grace(hosts: &mut Hosts) {
    let docker = hosts.docker();
    // docker stop -t 4 and the same budget told to lastcall: grace = 4 - 1 (pre-stop) - 2.
    let env = ["-e", "LASTCALL_STOP_TIMEOUT=4s", "-e", "LASTCALL_PRE_STOP=1s"];
    let c = run_sh(docker, Mode::Entrypoint, &env, "trap '' TERM; echo app ready; while :; do sleep 1; done");
    c.wait_log("app ready", 20 * SEC);
    let took = c.stop(Some(4));
    let log = c.logs(false);
    assert_eq!(c.exit_code(), 137, "{log}");
    assert!(took >= Duration::from_millis(1900), "docker stop -t 4 took {took:?}:\n{log}");
    // Only lastcall writes these: had Docker's SIGKILL come first, the last one would be missing.
    assert_timeline_once(&log, &["grace expired: sent SIGKILL", "child killed by SIGKILL"]);
    // One that cannot fit is refused before the app starts.
    let out = docker.output(&["run", "--rm", "--network", "none", "-e", "LASTCALL_STOP_TIMEOUT=5s", "-e", "LASTCALL_GRACE=6s", "lc-entry", "echo", "started"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("LASTCALL_GRACE 6s") && err.contains("LASTCALL_STOP_TIMEOUT 5s"), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("started"));
}

/// The escalation's line was once printed twice in 3 of 10 Docker stops.
fn docker_each_timeline_line_once_in_ten_stops(hosts: &mut Hosts) {
    let docker = hosts.docker();
    for round in 0..10 {
        let mode = MODES[round % 2];
        let c = run_sh(docker, mode, &["-e", "LASTCALL_GRACE=300ms"], "trap '' TERM; echo app ready; while :; do sleep 1; done");
        c.wait_log("app ready", 20 * SEC);
        c.stop(None);
        let log = c.logs(false);
        assert_eq!(c.exit_code(), 137, "{mode:?}: {log}");
        assert_timeline_once(&log, &["received SIGTERM", "SIGKILL at ", "forwarded SIGTERM", "grace expired: sent SIGKILL", "child killed by SIGKILL"]);
        assert_eq!(log.lines().filter(|l| l.starts_with("lastcall:")).count(), 5, "round {round}, {mode:?}: only the timeline:\n{log}");
    }
}

fn docker_stopsignal_and_lastcall_stop_signal(hosts: &mut Hosts) {
    let docker = hosts.docker();
    let app = "trap 'echo app got USR1; exit 0' USR1; trap 'echo app got QUIT' QUIT; trap 'echo app got TERM' TERM; \
               echo app ready; while :; do sleep 1 & wait $!; done";
    docker.build(
        "lc-stopsignal",
        &format!(
            "FROM lc-entry\nSTOPSIGNAL SIGQUIT\nENV LASTCALL_STOP_SIGNAL=USR1 LASTCALL_PRE_STOP=500ms\nCMD [\"sh\", \"-c\", \"{}\"]\n",
            app.replace('"', "\\\"")
        ),
        &[],
    );
    let c = docker.run(&["--network", "none", "lc-stopsignal"]);
    c.wait_log("app ready", 20 * SEC);
    c.stop(None);
    let log = c.logs(false);
    assert_eq!(c.exit_code(), 0, "{log}");
    assert_timeline_once(&log, &["received SIGQUIT", "forwarded SIGUSR1"]);
    assert!(log.contains("app got USR1") && !log.contains("app got QUIT") && !log.contains("app got TERM"), "{log}");
}

fn docker_lastcall_rewrite(hosts: &mut Hosts) {
    let docker = hosts.docker();
    let app = "trap 'echo app got QUIT; exit 0' QUIT; trap 'echo app got USR2' USR2; trap 'echo app got HUP' HUP; \
               trap 'echo app got TERM' TERM; echo app ready; while :; do sleep 1 & wait $!; done";
    for mode in MODES {
        let c = run_sh(docker, mode, &["-e", "LASTCALL_REWRITE=TERM:QUIT,HUP:USR2"], app);
        c.wait_log("app ready", 20 * SEC);
        docker.ok(&["kill", "-s", "HUP", &c.name]);
        c.wait_log("app got USR2", 10 * SEC);
        c.stop(None);
        let log = c.logs(false);
        assert_eq!(c.exit_code(), 0, "{mode:?}: {log}");
        assert!(log.contains("app got QUIT") && !log.contains("app got TERM") && !log.contains("app got HUP"), "{mode:?}: {log}");
        assert_timeline_once(&log, &["received SIGTERM", "forwarded SIGQUIT"]);
    }
}

fn docker_exit_codes(hosts: &mut Hosts) {
    let docker = hosts.docker();
    let cases: [(&[&str], i32); 5] = [
        (&["sh", "-c", "exit 3"], 3),
        (&["sh", "-c", "kill -SEGV $$"], 139),
        (&["sh", "-c", "kill -TERM $$"], 143),
        (&["/no/such/program"], 127),
        (&["/etc/passwd"], 126),
    ];
    for mode in MODES {
        for (command, expected) in cases {
            let mut args = vec!["--network", "none"];
            args.extend_from_slice(mode.image());
            args.extend_from_slice(command);
            let c = docker.run(&args);
            let code = c.wait_exited(30 * SEC);
            let log = c.logs(false);
            assert_eq!(code, expected, "{mode:?} {command:?}:\n{log}");
            if expected >= 126 && expected <= 127 {
                assert!(log.contains("lastcall:") && log.contains(command[0]), "{mode:?}: the error names the command:\n{log}");
            } else {
                assert_eq!(log, "", "{mode:?} {command:?}: an app that simply ends is no news");
            }
        }
    }
}

fn docker_orphans_are_reaped(hosts: &mut Hosts) {
    let docker = hosts.docker();
    // Five orphans re-parented to PID 1 (lastcall) exit; then the app lists every process.
    let script = "for i in 1 2 3 4 5; do sh -c 'sleep 0.2 &'; done; sleep 2; \
                  for f in /proc/[0-9]*/stat; do read l < $f && echo \"stat $l\"; done";
    for mode in MODES {
        let c = run_sh(docker, mode, &[], script);
        assert_eq!(c.wait_exited(30 * SEC), 0);
        let log = c.logs(false);
        let stats: Vec<&str> = log.lines().filter(|l| l.starts_with("stat ")).collect();
        assert!(stats.len() >= 2, "{mode:?}: {log}");
        let zombies: Vec<&&str> = stats.iter().filter(|l| l.rsplit_once(')').is_some_and(|(_, r)| r.trim_start().starts_with('Z'))).collect();
        assert!(zombies.is_empty(), "{mode:?}: zombies left: {zombies:?}");
        assert!(!stats.iter().any(|l| l.contains("(sleep)")), "{mode:?}: the orphans are gone: {stats:?}");
    }
}

/// `input` through `cmd`'s stdin: its stdout, which must succeed.
fn pipe_through(mut cmd: Command, input: &str) -> String {
    use std::io::Write;
    let mut child = cmd.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}\n--- input:\n{input}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `docker run --memory 64m`: the app (dd with a 256 MiB buffer) is OOM-killed, and lastcall says
/// so, in text and in json (every line of which python's json module parses), with the exit code
/// still 137.
fn docker_oom_kill_is_named_in_both_log_formats(hosts: &mut Hosts) {
    let docker = hosts.docker();
    for mode in MODES {
        for format in ["text", "json"] {
            let env = format!("LASTCALL_LOG_FORMAT={format}");
            let mut args = vec!["--network", "none", "--memory", "64m", "--memory-swap", "64m", "-e", &env];
            args.extend_from_slice(mode.image());
            args.extend(["dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1"]);
            let c = docker.run(&args);
            let code = c.wait_exited(60 * SEC);
            let log = c.logs(false);
            assert_eq!(code, 137, "{mode:?} {format}:\n{log}");
            if format == "text" {
                assert!(log.lines().any(|l| l == "lastcall: app killed by the OOM killer (limit 64 MiB)"), "{mode:?}:\n{log}");
                continue;
            }
            let mut check = Command::new("python3");
            check.args([
                "-c",
                "import json, sys\nfor line in sys.stdin: print(json.loads(line)['event'])",
            ]);
            let events = pipe_through(check, &log);
            assert!(events.lines().any(|e| e == "oom_kill"), "{mode:?} json:\n{log}");
            assert!(log.contains("\"message\":\"app killed by the OOM killer (limit 64 MiB)\""), "{mode:?} json:\n{log}");
        }
    }
    // An orphan OOM-killed (lastcall, PID 1, reaps it): a warning, and /metrics counts it.
    let port = free_port();
    let listen = format!("LASTCALL_HEALTH_LISTEN=127.0.0.1:{port}");
    let extra = ["--network", "host", "--memory", "64m", "--memory-swap", "64m", "-e", &listen];
    let c = run_sh(docker, Mode::Entrypoint, &extra, "(dd if=/dev/zero of=/dev/null bs=256M count=1 &); while :; do sleep 1; done");
    c.wait_log("killed by the OOM killer (limit 64 MiB); the app runs on without it", 60 * SEC);
    let (status, metrics) = http_get(port, "/metrics", 5 * SEC).expect("/metrics answers");
    assert_eq!(status, 200);
    assert!(metrics.lines().any(|l| l == "lastcall_oom_kills_total 1"), "{metrics}");
    assert!(c.running(), "the app lives on");
}

/// `docker run --init` in front of a lastcall ENTRYPOINT, with LASTCALL_USER and a ready file in a
/// root-owned directory: the inner lastcall, which creates the file and does the grace and the
/// SIGKILL, stays root; only the app runs as the user, and cannot signal the inner one.
fn docker_init_in_front_of_lastcall_leaves_the_user_switch_to_the_inner_one(hosts: &mut Hosts) {
    let docker = hosts.docker();
    docker.build("lc-entry-ready", "FROM lc-entry\nRUN mkdir -m 0755 /r\n", &[]);
    let app = "echo app uid $(id -u); echo app ready; trap 'echo app got TERM; exit 0' TERM; while :; do sleep 1 & wait $!; done";
    let c = docker.run(&["--init", "--network", "none", "-e", "LASTCALL_USER=1000", "-e", "LASTCALL_READY_FILE=/r/ready", "lc-entry-ready", "sh", "-c", app]);
    c.wait_log("app ready", 20 * SEC);
    let log = c.logs(false);
    assert!(log.contains("app uid 1000"), "{log}");
    assert!(docker.output(&["exec", &c.name, "test", "-f", "/r/ready"]).status.success(), "no ready file:\n{log}");
    // The app's uid cannot signal the inner lastcall (the outer's child, pid 2 or so).
    let inner = docker.ok(&["exec", &c.name, "sh", "-c", "grep -l '^PPid:[[:space:]]*1$' /proc/[0-9]*/status | head -1 | cut -d/ -f3"]);
    let inner = inner.trim();
    assert!(!inner.is_empty(), "no child of pid 1:\n{log}");
    let uid = docker.ok(&["exec", &c.name, "sh", "-c", &format!("grep '^Uid:' /proc/{inner}/status")]);
    assert!(uid.split_whitespace().nth(1) == Some("0"), "the inner lastcall runs as {uid}:\n{log}");
    let kill = docker.output(&["exec", "-u", "1000", &c.name, "kill", "-0", inner]);
    assert!(!kill.status.success(), "the app's uid can signal the inner lastcall");
    c.stop(None);
    let log = c.logs(false);
    assert_eq!(c.exit_code(), 0, "{log}");
    assert!(!log.contains("cannot create the ready file") && log.contains("app got TERM"), "{log}");
}
