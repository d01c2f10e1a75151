//! Not as PID 1, nothing lastcall could have killed outlives it: a fork bomb whose children
//! setsid() away from the app's group (held to a pids limit by a real cgroup), and an escapee
//! that must be found in /proc while lastcall is out of file descriptors.

mod common;

use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

const SEC: Duration = Duration::from_secs(1);

/// Forks forever; every child starts a session of its own (out of reach of the app's process
/// group) and ignores TERM. A failed fork (the pids limit) waits 50 ms to spare the machine.
const FORK_BOMB: &str = r#"use POSIX; $SIG{TERM} = "IGNORE"; $| = 1; print "started\n";
while (1) { my $p = fork(); if (!defined $p) { select(undef, undef, undef, 0.05) } elsif ($p == 0) { POSIX::setsid() } }"#;

#[test]
fn a_setsid_fork_bomb_does_not_outlive_lastcall() {
    let cgroup = PidsCgroup::new(300);
    let dir = scratch("fork-bomb");
    let stderr = dir.join("lastcall.stderr");
    // The shell joins the cgroup and becomes lastcall, which is then a plain subreaper in it.
    let mut lastcall = Command::new("sh")
        .args(["-c", r#"echo $$ > "$0" && exec "$@""#])
        .arg(cgroup.procs_file())
        .args([LASTCALL, "--grace", "1s", "--", "perl", "-e", FORK_BOMB])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let pid = lastcall.id() as i32;
    let guard = KillOnDrop(pid);
    wait_until(30 * SEC, "the fork bomb to fill the cgroup", || (cgroup.living().len() >= 250).then_some(()));
    kill(pid, libc::SIGTERM);
    let status = wait_until(60 * SEC, "lastcall to exit", || lastcall.try_wait().unwrap());
    std::mem::forget(guard);
    let log = fs::read_to_string(&stderr).unwrap_or_default();
    // The app died of the SIGKILL, and so does lastcall (not PID 1): its parent sees the same.
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{log}");
    // Whatever lastcall SIGKILLed may take a moment to finish dying; the rest never would.
    let until = std::time::Instant::now() + 10 * SEC;
    let mut left = cgroup.living();
    while !left.is_empty() && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
        left = cgroup.living();
    }
    assert!(left.is_empty(), "{} processes outlived lastcall: {log}", left.len());
    assert_eq!(log.matches("grace expired: sent SIGKILL").count(), 1, "each timeline line once: {log}");
}

#[test]
fn out_of_file_descriptors_lastcall_still_finds_and_kills_an_escapee() {
    let dir = scratch("no-fds");
    let out = dir.join("report");
    let mut spec = Spec::new(Mode::Plain, &dir, &[]);
    spec.args = ["-v", "--grace", "2s", "--", "python3", &fixture(), "escape", &out.display().to_string()].map(String::from).to_vec();
    let mut run = spec.start();
    let escapee: i32 = wait_line(&out, "escapee ready", 10 * SEC).split_whitespace().nth(2).unwrap().parse().unwrap();
    let _escapee = KillOnDrop(escapee);
    // No new fd for lastcall from now on: the limit is its lowest free descriptor.
    let held: Vec<i32> = fs::read_dir(format!("/proc/{}/fd", run.pid)).unwrap().filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
    let lowest_free = (0..).find(|fd| !held.contains(fd)).unwrap() as u64;
    let limit = libc::rlimit64 { rlim_cur: lowest_free, rlim_max: lowest_free };
    // SAFETY: prlimit64 reads the struct we own and writes nothing (old limit: null).
    let rc = unsafe { libc::prlimit64(run.pid, libc::RLIMIT_NOFILE, &limit, std::ptr::null_mut()) };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
    // The main child exits 0 by itself; the escapee ignores TERM and must be killed at the grace.
    assert_eq!(run.wait(20 * SEC), 0, "{}", run.stderr());
    assert!(!alive(escapee), "the escapee outlived lastcall: {}", run.stderr());
}

/// SIGKILLs a process at the end of the test if it is still there (a failed test leaves nothing).
struct KillOnDrop(i32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if alive(self.0) {
            // SAFETY: kill takes plain integers.
            unsafe { libc::kill(self.0, libc::SIGKILL) };
        }
    }
}
