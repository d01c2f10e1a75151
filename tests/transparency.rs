//! lastcall is invisible: the app gets what lastcall was started with (mask, dispositions, fds,
//! the terminal), the parent sees the app's own end, and no signal from 1 to 64 that another
//! process sends ends lastcall by accident. Each test runs the built binary around real
//! processes.

mod common;

use std::fs;
use std::io::ErrorKind;
use std::net::TcpStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const SEC: Duration = Duration::from_secs(1);

/// lastcall as a plain child (or PID 1 of a new namespace), started with default dispositions.
fn lastcall(pid1: bool, args: &[&str]) -> Command {
    let mut cmd = if pid1 {
        let mut c = Command::new("unshare");
        c.args(["--pid", "--fork", "--mount-proc", "--kill-child", "--"]).arg(LASTCALL);
        c
    } else {
        Command::new(LASTCALL)
    };
    cmd.args(args).stdin(Stdio::null());
    // SAFETY: the hook makes only system calls (async-signal-safe).
    unsafe { cmd.pre_exec(default_dispositions) };
    cmd
}

#[test]
fn every_signal_an_app_dies_of_is_decoded_and_passed_on() {
    for n in (1..=64).filter(|n| ![libc::SIGCHLD, libc::SIGCONT, libc::SIGURG, libc::SIGWINCH].contains(n)) {
        if [libc::SIGSTOP, libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU].contains(&n) {
            continue;
        }
        let script = format!("ulimit -c 0; kill -{n} $$; exit 99");
        // As PID 1 (which the kernel will not let kill itself): 128+N.
        let out = lastcall(true, &["--", "sh", "-c", &script]).output().unwrap();
        assert_eq!(out.status.code(), Some(128 + n), "PID 1, signal {n}: {}", String::from_utf8_lossy(&out.stderr));
        // Otherwise lastcall ends by the same signal, so its parent reads the app's status.
        let out = lastcall(false, &["--", "sh", "-c", &script]).output().unwrap();
        assert_eq!(out.status.signal(), Some(n), "signal {n}: {:?} {}", out.status, String::from_utf8_lossy(&out.stderr));
        assert!(!out.status.core_dumped(), "signal {n}: lastcall dumped a core of its own");
    }
}

#[test]
fn a_term_death_reaches_the_parent_as_a_term_death_and_lastcall_dumps_no_core() {
    let dir = scratch("term-death");
    // The app dies of the TERM lastcall forwards: a clean TERM death to systemd, not 143.
    let mut child = lastcall(false, &["--", "sleep", "30"]).current_dir(&dir).spawn().unwrap();
    wait_until(10 * SEC, "sleep to start", || descendants(child.id() as i32).first().copied());
    kill(child.id() as i32, libc::SIGTERM);
    let status = wait_child(&mut child, 10 * SEC);
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");

    // A crash: lastcall ends by SEGV too, but writes no core of its own even where cores are on.
    fn cores_on() -> std::io::Result<()> {
        let unlimited = libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY };
        // SAFETY: setrlimit reads the struct we own.
        unsafe { libc::setrlimit(libc::RLIMIT_CORE, &unlimited) };
        default_dispositions()
    }
    let mut cmd = Command::new(LASTCALL);
    cmd.args(["--", "sh", "-c", "ulimit -c 0; kill -SEGV $$"]).current_dir(&dir);
    // SAFETY: the hook makes only system calls.
    unsafe { cmd.pre_exec(cores_on) };
    let status = cmd.status().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGSEGV), "{status:?}");
    assert!(!status.core_dumped());
    let cores: Vec<_> = fs::read_dir(&dir).unwrap().flatten().filter(|e| e.file_name().to_string_lossy().starts_with("core")).collect();
    assert!(cores.is_empty(), "{cores:?}");

    // -e maps the code, and a mapped code exits 0 rather than by the signal.
    let status = lastcall(false, &["-e", "143", "--", "sh", "-c", "kill -TERM $$"]).status().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
}

#[test]
fn fault_signals_from_another_process_reach_the_app() {
    let dir = scratch("faults");
    let out = dir.join("report");
    // The app catches every fault signal and reports it.
    let app = "import os, signal, sys\n\
               def on(n, _): open(sys.argv[1], 'a').write(f'got {n}\\n')\n\
               for s in ('SEGV', 'BUS', 'FPE', 'ILL', 'ABRT', 'TRAP', 'SYS'): signal.signal(getattr(signal, 'SIG' + s), on)\n\
               open(sys.argv[1], 'a').write('ready\\n')\n\
               while True: signal.pause()";
    for pid1 in [false, true] {
        let _ = fs::remove_file(&out);
        let mut child = lastcall(pid1, &["--", "python3", "-c", app, &out.display().to_string()]).spawn().unwrap();
        let _guard = KillTree(child.id() as i32);
        wait_line(&out, "ready", 10 * SEC);
        let target = if pid1 { pid_of_lastcall_in(child.id() as i32) } else { child.id() as i32 };
        for sig in [libc::SIGSEGV, libc::SIGBUS, libc::SIGFPE, libc::SIGILL, libc::SIGABRT, libc::SIGTRAP, libc::SIGSYS] {
            kill(target, sig);
            wait_line(&out, &format!("got {sig}"), 10 * SEC);
        }
        assert!(child.try_wait().unwrap().is_none(), "lastcall ended");
        kill(target, libc::SIGTERM);
        wait_child(&mut child, 10 * SEC);
    }
}

#[test]
fn signals_32_to_34_do_not_kill_lastcall_and_are_forwarded() {
    // The app has 32-34 blocked (inherited through lastcall), so what lastcall forwards stays
    // pending there, where /proc shows it.
    fn block_32_to_34() -> std::io::Result<()> {
        default_dispositions()?;
        let mask: u64 = 0b111 << 31;
        // SAFETY: rt_sigprocmask reads the 8-byte mask we own (signal n is bit n-1).
        unsafe { libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_BLOCK, &mask as *const u64, std::ptr::null_mut::<u64>(), 8usize) };
        Ok(())
    }
    let mut cmd = Command::new(LASTCALL);
    cmd.args(["--", "sleep", "60"]).stdin(Stdio::null());
    // SAFETY: the hook makes only system calls.
    unsafe { cmd.pre_exec(block_32_to_34) };
    let mut child = cmd.spawn().unwrap();
    let _guard = KillTree(child.id() as i32);
    let pid = child.id() as i32;
    // Sent over and over while lastcall starts and spawns the app (musl's posix_spawn would
    // unblock them in lastcall for a moment), and once more after.
    let app = wait_until(10 * SEC, "sleep to start", || {
        for sig in [32, 33, 34] {
            // SAFETY: kill takes plain integers.
            unsafe { libc::kill(pid, sig) };
        }
        let app = *descendants(pid).first()?;
        (fs::read_to_string(format!("/proc/{app}/comm")).ok()?.trim() == "sleep").then_some(app)
    });
    for sig in [32, 33, 34] {
        kill(pid, sig);
    }
    let pending = wait_until(10 * SEC, "32-34 pending in the app", || {
        let status = fs::read_to_string(format!("/proc/{app}/status")).ok()?;
        let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| u64::from_str_radix(v.trim(), 16).ok());
        let pending = field("SigPnd:")? | field("ShdPnd:")?;
        (pending & 0b111 << 31 == 0b111 << 31).then_some(pending)
    });
    assert!(child.try_wait().unwrap().is_none(), "lastcall died (pending in the app: {pending:x})");
    kill(pid, libc::SIGKILL);
    let _ = child.wait();
}

#[test]
fn nohup_keeps_hup_ignored_in_the_app() {
    let out = Command::new("nohup").args([LASTCALL, "--", "grep", "SigIgn", "/proc/self/status"]).stdin(Stdio::null()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let ignored = u64::from_str_radix(text.trim().strip_prefix("SigIgn:").unwrap_or("0").trim(), 16).unwrap();
    assert_ne!(ignored & 1 << (libc::SIGHUP - 1), 0, "{text}");
}

#[test]
fn an_inherited_blocked_mask_survives_into_the_app() {
    fn block_usr1_and_40() -> std::io::Result<()> {
        let mask: u64 = 1 << (libc::SIGUSR1 - 1) | 1 << (40 - 1);
        // SAFETY: rt_sigprocmask reads the 8-byte mask we own.
        unsafe { libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_BLOCK, &mask as *const u64, std::ptr::null_mut::<u64>(), 8usize) };
        Ok(())
    }
    for pid1 in [false, true] {
        let mut cmd = lastcall(pid1, &["--", "grep", "SigBlk", "/proc/self/status"]);
        // SAFETY: the hook makes only system calls.
        unsafe { cmd.pre_exec(block_usr1_and_40) };
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(text.trim(), format!("SigBlk:\t{:016x}", 1u64 << (libc::SIGUSR1 - 1) | 1 << (40 - 1)), "PID 1: {pid1}");
    }
}

#[test]
fn after_socket_activation_a_closed_listener_refuses_connections() {
    let dir = scratch("socket-activation");
    let out = dir.join("report");
    let port = free_port();
    // The app takes one connection on the inherited listener (fd 3), closes the listener to
    // drain, and goes on running.
    let app = "import socket, sys, time\n\
               s = socket.socket(fileno=3)\n\
               c, _ = s.accept(); c.close(); s.close()\n\
               open(sys.argv[1], 'a').write('closed\\n')\n\
               time.sleep(60)";
    let mut activator = Command::new("systemd-socket-activate")
        .args(["-l", &format!("127.0.0.1:{port}"), LASTCALL, "--", "python3", "-c", app, &out.display().to_string()])
        .stdin(Stdio::null())
        .stderr(fs::File::create(dir.join("stderr")).unwrap())
        .spawn()
        .unwrap();
    let _guard = KillTree(activator.id() as i32);
    // systemd-socket-activate execs lastcall at the first connection.
    let first = wait_until(10 * SEC, "the activator to listen", || TcpStream::connect(("127.0.0.1", port)).ok());
    drop(first);
    wait_line(&out, "closed", 10 * SEC);
    match TcpStream::connect_timeout(&(std::net::Ipv4Addr::LOCALHOST, port).into(), 2 * SEC) {
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => {}
        other => panic!("a connect after the app closed its listener gave {other:?}"),
    }
    kill(activator.id() as i32, libc::SIGTERM);
    wait_child(&mut activator, 10 * SEC);
}

#[test]
fn a_stopped_app_runs_its_term_handler_in_the_shutdown() {
    let dir = scratch("stopped");
    let out = dir.join("report");
    let mut spec = Spec::new(Mode::Plain, &dir, &[]);
    spec.args = ["--grace", "30s", "--", "python3", &fixture(), "record", &out.display().to_string()].map(String::from).to_vec();
    let mut run = spec.start();
    let app: i32 = wait_line(&out, "child ready", 10 * SEC).split_whitespace().nth(2).unwrap().parse().unwrap();
    kill(app, libc::SIGSTOP);
    wait_until(10 * SEC, "the app to stop", || process_state(app).filter(|s| *s == 'T'));
    let sent = Instant::now();
    run.signal(libc::SIGTERM);
    // The handler runs and exits 0, long before the 30 s grace would SIGKILL it.
    wait_line(&out, &format!("child signal {}", libc::SIGTERM), 10 * SEC);
    assert_eq!(run.wait(10 * SEC), 0, "{}", run.stderr());
    assert!(sent.elapsed() < 10 * SEC);
}

#[test]
fn with_single_child_the_group_gets_the_stop_signal_when_the_app_exits_mid_shutdown() {
    let dir = scratch("single-child");
    let out = dir.join("report");
    let mut spec = Spec::new(Mode::Plain, &dir, &[]);
    spec.args = ["-c", "--grace", "30s", "--", "python3", &fixture(), "record", &out.display().to_string(), "grandchild"]
        .map(String::from)
        .to_vec();
    let mut run = spec.start();
    wait_line(&out, "child ready", 10 * SEC);
    wait_line(&out, "grandchild ready", 10 * SEC);
    run.signal(libc::SIGTERM);
    // -c: TERM goes to the app alone, which exits; then its group's leftover gets it too,
    // instead of only the SIGKILL 30 s later.
    wait_line(&out, &format!("grandchild signal {}", libc::SIGTERM), 10 * SEC);
    assert_eq!(run.wait(10 * SEC), 0, "{}", run.stderr());
}

#[test]
fn setsid_bash_in_a_pty_led_by_lastcall_has_job_control_and_gets_ctrl_c() {
    // pty-session makes lastcall a session leader with the pty as its controlling terminal, as
    // `docker run -it` does. Ctrl-Z must stop a job (job control), Ctrl-C must end the
    // foreground job and leave bash (and lastcall) running.
    // Each job prints RUNNING-N once it runs in the foreground (the echo of what was typed
    // holds only the sum), and the key goes only then.
    let steps = r#"[["expect","lc$ "],["send","sh -c 'echo RUNNING-$((40+1)); exec sleep 30'\n"],["expect","RUNNING-41"],
        ["send","\u001a"],["expect","Stopped"],
        ["expect","lc$ "],["send","kill %1\n"],["expect","lc$ "],["send","sh -c 'echo RUNNING-$((40+3)); exec sleep 30'\n"],
        ["expect","RUNNING-43"],["send","\u0003"],
        ["expect","lc$ "],["send","echo alive-$((40+2))\n"],["expect","alive-42"],["send","exit 3\n"],["eof"]]"#;
    let session = repo().join("tests/hosts/pty-session");
    let out = Command::new("python3")
        .arg(session)
        .arg(steps)
        .args(["--", "env", "PS1=lc$ ", LASTCALL, "-v", "--setsid", "--", "bash", "--norc", "--noprofile", "-i"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let transcript = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{transcript}");
    assert!(!transcript.contains("no job control"), "{transcript}");
    assert!(!transcript.contains("received SIGINT"), "Ctrl-C went to lastcall: {transcript}");
}

#[test]
fn lastcalls_own_fork_and_fd_failures_exit_125() {
    // Starting the command takes lastcall no fd (no pipe): with four, `true` gets the one it
    // needs to load its libc. With three, the health socket cannot be made: lastcall's own.
    let status = Command::new("sh").args(["-c", r#"ulimit -n 4; exec "$0" -- true"#, LASTCALL]).status().unwrap();
    assert_eq!(status.code(), Some(0));
    let port = free_port().to_string();
    let script = r#"ulimit -n 3; exec "$0" --health-listen "127.0.0.1:$1" -- true"#;
    let status = Command::new("sh").args(["-c", script, LASTCALL, &port]).stderr(Stdio::null()).status().unwrap();
    assert_eq!(status.code(), Some(125));
    // One pid: lastcall itself, so it cannot start another process.
    let cgroup = Cgroup::pids(1);
    let status = cgroup.command(LASTCALL).args(["--", "true"]).status().unwrap();
    assert_eq!(status.code(), Some(125));
    // The command's own failures stay 126/127.
    assert_eq!(Command::new(LASTCALL).args(["--", "/no/such/program"]).stderr(Stdio::null()).status().unwrap().code(), Some(127));
    assert_eq!(Command::new(LASTCALL).args(["--", "/"]).stderr(Stdio::null()).status().unwrap().code(), Some(126));
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The state letter in /proc/PID/stat (R, S, T, Z, ...).
fn process_state(pid: i32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// lastcall's pid as seen here when unshare started it as PID 1 of a new namespace.
fn pid_of_lastcall_in(unshare: i32) -> i32 {
    wait_until(10 * SEC, "lastcall under unshare", || {
        let pid = *descendants(unshare).first()?;
        (fs::read_to_string(format!("/proc/{pid}/comm")).ok()?.trim() == "lastcall").then_some(pid)
    })
}
