//! lastcall as PID 1 (and as a plain subreaper) around real processes: forwarding, reaping,
//! exit codes, the shutdown sequence, and bad input.

mod common;

use std::collections::HashSet;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use common::*;

const SEC: Duration = Duration::from_secs(1);

/// lastcall with `opts` around a fixture mode, once the fixture says it is ready; its report file.
fn with_ready_fixture(name: &str, mode: Mode, opts: &[&str], fixture_mode: &str, extra: &[&str]) -> (Run, std::path::PathBuf) {
    let dir = scratch(name);
    let out = dir.join("report");
    let run = start(mode, &dir, opts, fixture_cmd(fixture_mode, &out, extra));
    wait_line(&out, "child ready", 10 * SEC);
    (run, out)
}

/// The monotonic time in a "ROLE signal N T" report line.
fn signal_time(line: &str) -> u64 {
    line.split_whitespace().nth(3).unwrap().parse().unwrap()
}

#[test]
fn every_forwarded_signal_reaches_the_child_and_a_grandchild_in_its_group() {
    let (mut run, out) = with_ready_fixture("forward", Mode::Pid1, &[], "record", &["grandchild"]);
    wait_line(&out, "grandchild ready", 10 * SEC);

    let signals = [
        libc::SIGHUP,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGWINCH,
        libc::SIGALRM,
        libc::SIGURG,
        libc::SIGPWR,
        libc::SIGCONT,
        libc::SIGTSTP,
        libc::SIGPIPE,
        libc::SIGVTALRM,
        libc::SIGPROF,
        libc::SIGXCPU,
        libc::SIGIO,
        40,
        50,
        64,
    ];
    for sig in signals {
        run.signal(sig);
        for role in ["child", "grandchild"] {
            wait_line(&out, &format!("{role} signal {sig} "), 5 * SEC);
        }
    }
    run.signal(libc::SIGTERM);
    assert_eq!(run.wait(10 * SEC), 0, "{}", run.stderr());
    for role in ["child", "grandchild"] {
        assert_eq!(count_lines(&out, &format!("{role} signal {} ", libc::SIGTERM)), 1);
    }
    // TTIN/TTOU are lastcall's own business and CHLD is never forwarded.
    assert_eq!(count_lines(&out, &format!("child signal {} ", libc::SIGCHLD)), 0);
}

#[test]
fn the_child_starts_with_the_inherited_mask_and_dispositions_in_its_own_group() {
    // lastcall's own parent ignores and blocks some signals: the app gets exactly those (tini's
    // rule), except an ignored SIGCHLD, which would hide the app's exit status from lastcall.
    fn ignore_and_block_some() -> std::io::Result<()> {
        // SAFETY: signal() with SIG_IGN and sigprocmask on a set on our stack are
        // async-signal-safe.
        unsafe {
            libc::signal(libc::SIGINT, libc::SIG_IGN);
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            libc::signal(libc::SIGCHLD, libc::SIG_IGN);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGUSR2);
            libc::sigaddset(&mut set, 40);
            libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
        }
        Ok(())
    }
    for mode in [Mode::Pid1, Mode::Plain] {
        let dir = scratch("mask");
        // bash, not dash, which clears the mask it starts with.
        let mut spec = Spec::new(mode, &dir, &["--", "bash", "-c", "cat /proc/self/status; echo stat $(cat /proc/self/stat); exit 7"]);
        spec.pre_exec = Some(ignore_and_block_some);
        let mut run = spec.start();
        assert_eq!(run.wait(10 * SEC), 7, "{}", run.stderr());
        let out = run.stdout();
        let field = |name: &str| {
            out.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name} in {out}")).to_string()
        };
        assert_eq!(field("SigBlk:"), format!("SigBlk:\t{:016x}", 1u64 << (libc::SIGUSR2 - 1) | 1 << (40 - 1)));
        // Plus what this test binary's own musl ignores among 32-34 and passes on.
        let own = fs::read_to_string("/proc/self/status").unwrap();
        let own_ignored = u64::from_str_radix(own.lines().find_map(|l| l.strip_prefix("SigIgn:\t")).unwrap(), 16).unwrap();
        let expected = 1u64 << (libc::SIGHUP - 1) | 1 << (libc::SIGINT - 1) | own_ignored & 0b111 << 31;
        assert_eq!(field("SigIgn:"), format!("SigIgn:\t{expected:016x}"));
        // cat's pid and group, under sh: sh is the group leader, not lastcall.
        let stat: Vec<String> = field("stat ").split_whitespace().map(str::to_string).collect();
        let (ppid, pgrp) = (&stat[4], &stat[5]);
        assert_eq!(ppid, pgrp, "sh (the child) leads its own group: {stat:?}");
    }
}

#[test]
fn exit_codes_follow_the_child() {
    let dir = scratch("codes");
    let not_exec = dir.join("not-executable");
    fs::write(&not_exec, "#!/bin/sh\n").unwrap();
    let cases: Vec<(Vec<String>, i32)> = vec![
        (vec!["true".into()], 0),
        (vec!["sh".into(), "-c".into(), "exit 42".into()], 42),
        (vec!["sh".into(), "-c".into(), "kill -USR1 $$".into()], 128 + libc::SIGUSR1),
        (vec!["sh".into(), "-c".into(), "kill -KILL $$".into()], 137),
        (vec![not_exec.display().to_string()], 126),
        (vec!["/".into()], 126),
        (vec!["no-such-command-lastcall".into()], 127),
        (vec!["/no/such/path".into()], 127),
    ];
    for (cmd, expected) in cases {
        let (code, _, stderr) = run_to_end(Mode::Pid1, &cmd, &[]);
        assert_eq!(code, expected, "{cmd:?}: {stderr}");
        if expected >= 126 && cmd[0] != "sh" {
            assert!(stderr.contains(&cmd[0]), "the message names the command: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
        } else {
            assert_eq!(stderr, "", "a normal run prints nothing");
        }
    }
}

#[test]
fn hundreds_of_orphans_are_reaped_and_no_zombie_is_left() {
    let _alone = common::contention::alone(); // a fork flood
    let dir = scratch("orphans");
    let out = dir.join("report");
    let mut run = start(Mode::Pid1, &dir, &[], fixture_cmd("orphans", &out, &["400"]));
    assert_eq!(run.wait(30 * SEC), 0, "{}\n{:?}", run.stderr(), lines(&out));
    let report = wait_line(&out, "child zombies", SEC);
    assert!(report.starts_with("child zombies 0 "), "{report}");
}

#[test]
fn pre_stop_delays_the_forwarded_signal_by_its_duration() {
    let _alone = common::contention::alone();
    let (mut run, out) = with_ready_fixture("prestop", Mode::Pid1, &["--pre-stop", "1500ms"], "record", &[]);
    let sent = monotonic_ns();
    run.signal(libc::SIGTERM);
    let line = wait_line(&out, &format!("child signal {} ", libc::SIGTERM), 10 * SEC);
    let delay = Duration::from_nanos(signal_time(&line) - sent);
    assert!(delay >= Duration::from_millis(1500), "forwarded after {delay:?}");
    // Generous: a few ms are expected past the pre-stop; 1.5 s more would be a second pre-stop.
    assert!(delay < Duration::from_millis(1500) + Duration::from_millis(1400), "forwarded after {delay:?}");
    assert_eq!(run.wait(10 * SEC), 0);
    // The timeline, at the default level.
    let log = run.stderr();
    for entry in ["received SIGTERM", "pre-stop", "pre-stop ended", "forwarded SIGTERM", "child exited with status 0"] {
        assert!(log.contains(entry), "no '{entry}' in:\n{log}");
    }
}

#[test]
fn the_app_gets_the_timelines_clock() {
    let _alone = common::contention::alone();
    let dir = scratch("clock");
    let out = dir.join("report");
    let before = monotonic_ns();
    let mut cmd: Vec<String> = ["sh", "-c", r#"echo "$LASTCALL_CLOCK_ZERO_NS" > zero; exec "$@""#, "sh"].map(String::from).to_vec();
    cmd.extend(fixture_cmd("record", &out, &[]));
    let mut run = start(Mode::Pid1, &dir, &["--pre-stop", "300ms"], cmd);
    wait_line(&out, "child ready", 10 * SEC);
    let zero: u64 = fs::read_to_string(dir.join("zero")).unwrap().trim().parse().expect("LASTCALL_CLOCK_ZERO_NS, in ns");
    assert!(before <= zero && zero <= monotonic_ns(), "the zero is lastcall's start: {before} <= {zero}");
    run.signal(libc::SIGTERM);
    let got = signal_time(&wait_line(&out, &format!("child signal {} ", libc::SIGTERM), 10 * SEC));
    assert_eq!(run.wait(10 * SEC), 0);
    // The app's reading of the clock when the TERM came, against the timeline's line for it.
    let log = run.stderr();
    let at = |entry: &str| timeline_seconds(&log, entry);
    let app = (got - zero) as f64 / 1e9;
    let (forwarded, exited) = (at("forwarded SIGTERM"), at("child exited with status 0"));
    assert!(forwarded - 0.001 <= app && app <= exited + 0.001, "the app's +{app:.3}s between +{forwarded}s and +{exited}s:\n{log}");
    // The pre-stop on the same clock: at least its 300 ms (less the millisecond the timeline
    // truncates), and a generous bound above, since a busy host may wake lastcall late.
    let pre_stop = forwarded - at("received SIGTERM");
    assert!((0.299..1.3).contains(&pre_stop), "the pre-stop took {pre_stop:.3}s on the timeline's clock:\n{log}");
}

#[test]
fn a_second_termination_signal_cuts_the_pre_stop_short() {
    let _alone = common::contention::alone();
    let (mut run, out) = with_ready_fixture("prestop-skip", Mode::Pid1, &["--pre-stop", "30s"], "record", &[]);
    run.signal(libc::SIGTERM);
    // The first signal must not reach the app during the pre-stop...
    let deadline = Instant::now() + Duration::from_millis(300);
    while Instant::now() < deadline {
        assert_eq!(count_lines(&out, "child signal"), 0, "forwarded during the pre-stop");
        std::thread::sleep(Duration::from_millis(10));
    }
    let sent = monotonic_ns();
    run.signal(libc::SIGINT);
    let line = wait_line(&out, &format!("child signal {} ", libc::SIGTERM), 20 * SEC);
    let delay = Duration::from_nanos(signal_time(&line) - sent);
    // Generous: ms are expected; the pre-stop it cuts short would have taken 30 s.
    assert!(delay < 10 * SEC, "forwarded {delay:?} after the second signal");
    assert_eq!(run.wait(10 * SEC), 0);
    // The timeline, each line once.
    let log = run.stderr();
    let lines: Vec<&str> = log.lines().collect();
    for entry in ["received SIGTERM", "received SIGINT", "pre-stop cut short", "forwarded SIGTERM", "child exited with status 0"] {
        assert_eq!(lines.iter().filter(|l| l.ends_with(entry) || l.contains(&format!("{entry} "))).count(), 1, "'{entry}' in:\n{log}");
    }
    assert!(lines.iter().all(|l| l.starts_with("lastcall: +")), "{log}");
}

#[test]
fn quiet_silences_the_timeline() {
    let (mut run, _) = with_ready_fixture("quiet", Mode::Pid1, &["-q", "--pre-stop", "100ms"], "record", &[]);
    run.signal(libc::SIGTERM);
    assert_eq!(run.wait(10 * SEC), 0);
    assert_eq!(run.stderr(), "");
}

#[test]
fn a_term_ignoring_child_is_killed_at_the_grace_deadline_with_137() {
    let _alone = common::contention::alone();
    let (mut run, _) = with_ready_fixture("grace", Mode::Pid1, &["--grace", "1s"], "ignore-term", &[]);
    let sent = Instant::now();
    run.signal(libc::SIGTERM);
    let code = run.wait(20 * SEC);
    let took = sent.elapsed();
    assert_eq!(code, 137, "{}", run.stderr());
    // At the 1 s grace, not before; generous above (tens of ms are expected past it), while a
    // child left to run would have been stopped only by the test's 20 s.
    assert!(took >= SEC && took < SEC + 9 * SEC, "killed after {took:?}");
}

#[test]
fn a_termination_signal_during_the_grace_is_forwarded_again() {
    let dir = scratch("again");
    let out = dir.join("report");
    let run = start(Mode::Pid1, &dir, &["--grace", "20s"], fixture_cmd("record", &out, &["keep"]));
    wait_line(&out, "child ready", 10 * SEC);
    run.signal(libc::SIGTERM);
    wait_line(&out, &format!("child signal {} ", libc::SIGTERM), 5 * SEC);
    run.signal(libc::SIGTERM);
    wait_until(5 * SEC, "the second TERM", || (count_lines(&out, "child signal 15 ") == 2).then_some(()));
    run.signal(libc::SIGKILL);
}

#[test]
fn an_escaped_descendant_does_not_outlive_lastcall() {
    let dir = scratch("escape");
    let out = dir.join("report");
    let mut run = start(Mode::Pid1, &dir, &["--grace", "1s"], fixture_cmd("escape", &out, &[]));
    let ready = wait_line(&out, "escapee ready", 10 * SEC);
    let escapee_ns_pid: i32 = ready.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert_ne!(escapee_ns_pid, 1);
    // The main child exits 0 on its own; the escapee ignores TERM and is killed at the deadline.
    let started = Instant::now();
    assert_eq!(run.wait(10 * SEC), 0, "{}", run.stderr());
    assert!(started.elapsed() >= Duration::from_millis(800), "lastcall did not wait for the escapee");
}

#[test]
fn not_as_pid_1_an_escaped_descendant_is_killed_before_lastcall_exits() {
    // As a plain subreaper nothing kills the escapee for lastcall: it must do it itself.
    let dir = scratch("escape-plain");
    let out = dir.join("report");
    let mut run = start(Mode::Plain, &dir, &["-v", "--grace", "1s"], fixture_cmd("escape", &out, &[]));
    let escapee: i32 = wait_line(&out, "escapee ready", 10 * SEC).split_whitespace().nth(2).unwrap().parse().unwrap();
    assert_eq!(run.wait(10 * SEC), 0, "{}", run.stderr());
    assert!(!alive(escapee), "the escapee outlived lastcall");
    let log = run.stderr();
    assert!(log.contains("sent SIGTERM to every remaining process"), "{log}");
    assert!(log.contains("grace expired: sent SIGKILL"), "{log}");
}

#[test]
fn workers_left_behind_by_the_main_child_get_the_stop_signal_and_time_to_finish() {
    let dir = scratch("linger");
    let out = dir.join("report");
    let mut run = start(Mode::Pid1, &dir, &["--grace", "10s"], fixture_cmd("linger", &out, &[]));
    assert_eq!(run.wait(10 * SEC), 0, "{}", run.stderr());
    // The worker was told to stop and finished its work before lastcall (and so the namespace) ended.
    wait_line(&out, "worker term", SEC);
    wait_line(&out, "worker finished", SEC);
}

#[test]
fn a_signal_sent_during_start_up_is_not_lost() {
    // The signal is already pending (and blocked) when lastcall's code starts running: it must
    // reach the child rather than kill lastcall or vanish.
    fn pending_term() -> std::io::Result<()> {
        // SAFETY: sigprocmask and raise are async-signal-safe; the set lives on this stack.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            libc::raise(libc::SIGTERM);
        }
        Ok(())
    }
    let dir = scratch("startup");
    // The app inherits TERM blocked, as lastcall was started with it: it unblocks it itself.
    let unblock_and_wait = "import signal, time; signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM]); time.sleep(30)";
    let mut spec = Spec::new(Mode::Plain, &dir, &["--", "python3", "-c", unblock_and_wait]);
    spec.pre_exec = Some(pending_term);
    let mut run = spec.start();
    assert_eq!(run.wait(10 * SEC), 143, "{}", run.stderr());
}

#[test]
fn not_as_pid_1_orphaned_grandchildren_come_back_to_lastcall() {
    let dir = scratch("subreaper");
    let out = dir.join("report");
    let mut run = start(Mode::Plain, &dir, &[], fixture_cmd("daemon", &out, &[]));
    let daemon: i32 = wait_line(&out, "daemon ready", 10 * SEC).split_whitespace().nth(2).unwrap().parse().unwrap();
    wait_line(&out, "child ready", 10 * SEC);
    let stat = fs::read_to_string(format!("/proc/{daemon}/stat")).unwrap();
    let ppid: i32 = stat.rsplit_once(')').unwrap().1.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert_eq!(ppid, run.pid, "the daemon was re-parented to lastcall");
    run.signal(libc::SIGTERM);
    assert_eq!(run.wait(10 * SEC), 0, "{}", run.stderr());
    wait_line(&out, &format!("daemon signal {} ", libc::SIGTERM), SEC);
    assert!(!alive(daemon), "the daemon outlived lastcall");
}

#[test]
fn idle_means_zero_wake_ups() {
    for mode in [Mode::Pid1, Mode::Plain] {
        let dir = scratch("idle");
        let mut run = start(mode, &dir, &[], ["sleep", "60"]);
        // Let start-up settle: the child is sleeping and lastcall is asleep waiting for a signal.
        wait_until(10 * SEC, "lastcall to block", || {
            let stat = fs::read_to_string(format!("/proc/{}/stat", run.pid)).ok()?;
            let state = stat.rsplit_once(')')?.1.split_whitespace().next()?.to_string();
            let wchan = fs::read_to_string(format!("/proc/{}/wchan", run.pid)).unwrap_or_default();
            (state == "S" && wchan != "0").then_some(())
        });
        let before = run.context_switches();
        std::thread::sleep(3 * SEC); // the measurement itself: three idle seconds
        let after = run.context_switches();
        assert_eq!(after - before, 0, "lastcall woke up while idle");
        run.signal(libc::SIGTERM);
        assert_eq!(run.wait(10 * SEC), 143);
    }
}

#[test]
fn lastcall_leaves_the_working_directory_and_leaks_no_descriptor() {
    fn extra_fd() -> std::io::Result<()> {
        // SAFETY: dup2 is async-signal-safe.
        unsafe { libc::dup2(2, 7) };
        Ok(())
    }
    let dir = scratch("fds");
    let mut spec = Spec::new(Mode::Plain, &dir, &["--", "sh", "-c", "ls /proc/$$/fd; pwd; sleep 30"]);
    spec.pre_exec = Some(extra_fd);
    let mut run = spec.start();
    // Complete once pwd's line (the only one starting with '/') has followed ls's.
    let fds = wait_until(10 * SEC, "the child's listing", || {
        let out = run.stdout();
        let lines: Vec<String> = out.lines().map(str::to_string).collect();
        lines.last().is_some_and(|l| l.starts_with('/')).then_some(lines)
    });
    let listed: HashSet<String> = fds[..fds.len() - 1].iter().cloned().collect();
    // What lastcall holds: stdin, stdout, stderr, its spare fd (on "/", for reading /proc
    // when fds run out), its memory cgroup's OOM counter and limit files, and the main child's
    // pidfd. The child gets those three and every other fd lastcall
    // was started with (here 7, plus whatever the test runner itself passed on), of which
    // lastcall keeps no copy once the child has them.
    // The child may have listed its fds before lastcall, on a busy machine, ran again.
    let std_fds: HashSet<String> = ["0", "1", "2"].map(String::from).into_iter().collect();
    let own = |link: &String| link == "/" || link.starts_with("/sys/fs/cgroup/") || link == "anon_inode:[pidfd]";
    let (held, kept) = wait_until(10 * SEC, "lastcall to close its copies of the inherited fds", || {
        let held = fd_links(run.pid);
        let kept: HashSet<String> = held.iter().filter(|(_, link)| !own(link)).map(|(fd, _)| fd.clone()).collect();
        (kept == std_fds && held.iter().any(|(_, link)| link == "/")).then_some((held, kept))
    });
    assert!(listed.contains("7"), "{listed:?}");
    let flags: Vec<String> = held
        .iter()
        .map(|(fd, link)| {
            let info = fs::read_to_string(format!("/proc/{}/fdinfo/{fd}", run.pid)).unwrap_or_default();
            format!("{fd} {link} {}", info.lines().find(|l| l.starts_with("flags")).unwrap_or(""))
        })
        .collect();
    assert!(listed.is_superset(&kept), "inherited fds pass, lastcall's own do not: {flags:?}");
    assert!(!listed.iter().any(|fd| held.iter().any(|(n, link)| n == fd && own(link))), "{flags:?}");
    assert_eq!(fds.last().unwrap(), &dir.canonicalize().unwrap().display().to_string(), "the child keeps its cwd");
    let cwd = fs::read_link(format!("/proc/{}/cwd", run.pid)).unwrap();
    assert_eq!(cwd, std::path::Path::new("/"), "lastcall moved to /");
    run.signal(libc::SIGTERM);
    run.wait(10 * SEC);
}

fn fd_links(pid: i32) -> Vec<(String, String)> {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let link = fs::read_link(e.path()).ok()?;
            Some((e.file_name().to_string_lossy().into_owned(), link.display().to_string()))
        })
        .collect()
}

#[test]
fn non_utf8_arguments_reach_the_child_intact() {
    let arg = std::ffi::OsStr::from_bytes(b"caf\xe9-\xff");
    let (code, stdout, _) = run_to_end(Mode::Plain, &[std::ffi::OsStr::new("printf"), std::ffi::OsStr::new("%s"), arg], &[]);
    assert_eq!(code, 0);
    assert_eq!(stdout, arg.as_bytes());
}

#[test]
fn option_parsing_stops_at_the_command() {
    let (code, stdout, _) = run_to_end(Mode::Plain, &["sh", "-c", "echo $0 $1", "-v", "--grace"], &[]);
    assert_eq!(code, 0);
    assert_eq!(String::from_utf8_lossy(&stdout), "-v --grace\n");
}

#[test]
fn bad_input_exits_2_with_one_line_naming_it() {
    let cases: &[(&[&str], &[(&str, &str)], &str)] = &[
        (&["--grace", "abc", "true"], &[], "'abc' for --grace"),
        (&["--pre-stop", "5x", "true"], &[], "'5x' for --pre-stop"),
        (&["--stop-signal", "SIGNOPE", "true"], &[], "'SIGNOPE' for --stop-signal"),
        (&["true"], &[("LASTCALL_GRACE", "ten")], "'ten' for LASTCALL_GRACE"),
        (&["true"], &[("LASTCALL_PRE_STOP", "soon")], "'soon' for LASTCALL_PRE_STOP"),
        (&["true"], &[("LASTCALL_STOP_SIGNAL", "99")], "'99' for LASTCALL_STOP_SIGNAL"),
        (&["true"], &[("LASTCALL_LOG", "loud")], "'loud' for LASTCALL_LOG"),
        (&["--frobnicate", "true"], &[], "--frobnicate"),
        (&["-Z", "true"], &[], "-Z"),
        (&["--grace"], &[], "--grace"),
        (&[], &[], "no command"),
        (&["--"], &[], "no command"),
    ];
    for (args, env, needle) in cases {
        let (code, stdout, stderr) = run_to_end(Mode::Plain, args, env);
        assert_eq!(code, 2, "{args:?} {env:?}: {stderr}");
        assert!(stdout.is_empty());
        let first = stderr.lines().next().unwrap_or_default();
        assert!(first.starts_with("lastcall: ") && first.contains(needle), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    }
}

#[test]
fn help_and_version() {
    let (code, stdout, _) = run_to_end(Mode::Plain, &["--help"], &[]);
    assert_eq!(code, 0);
    let help = String::from_utf8_lossy(&stdout);
    for var in ["LASTCALL_PRE_STOP", "LASTCALL_GRACE", "LASTCALL_STOP_SIGNAL", "LASTCALL_LOG"] {
        assert!(help.contains(var), "help shows {var}");
    }
    let (code, stdout, _) = run_to_end(Mode::Plain, &["--version"], &[]);
    assert_eq!(code, 0);
    assert!(String::from_utf8_lossy(&stdout).starts_with("lastcall 0."));
}

#[test]
fn the_environment_configures_what_flags_would() {
    // LASTCALL_STOP_SIGNAL=INT: a child that dies on INT reports 130 after a TERM.
    let dir = scratch("env");
    let mut spec = Spec::new(Mode::Pid1, &dir, &["--", "sleep", "30"]).env("LASTCALL_STOP_SIGNAL", "INT");
    spec = spec.env("LASTCALL_LOG", "info");
    let mut run = spec.start();
    wait_until(10 * SEC, "sleep to start", || {
        let kids = fs::read_to_string(format!("/proc/{0}/task/{0}/children", run.pid)).ok()?;
        (!kids.trim().is_empty()).then_some(())
    });
    run.signal(libc::SIGTERM);
    assert_eq!(run.wait(10 * SEC), 130);
    assert!(run.stderr().contains("forwarded SIGINT"), "{}", run.stderr());
}

#[test]
fn the_child_gets_the_terminal_foreground() {
    if std::process::Command::new("script").arg("--version").output().is_err() {
        panic!("util-linux's script is needed for the terminal test");
    }
    // script gives lastcall a pseudo-terminal as stdin; the child must own its foreground.
    let cmd = format!("{LASTCALL} -- sh -c 'echo stat $(cat /proc/$$/stat)'");
    let out = std::process::Command::new("script").args(["-qec", &cmd, "/dev/null"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.starts_with("stat ")).unwrap_or_else(|| panic!("{text}"));
    let fields: Vec<&str> = line.rsplit_once(')').unwrap().1.split_whitespace().collect();
    // After the command name: state ppid pgrp session tty_nr tpgid.
    let (pgrp, tpgid) = (fields[2], fields[5]);
    assert_eq!(pgrp, tpgid, "the child's group is the terminal's foreground: {line}");
    assert!(out.status.success());
}
