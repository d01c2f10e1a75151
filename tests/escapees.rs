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
    let _alone = common::contention::alone();
    let cgroup = Cgroup::pids(300);
    let dir = scratch("fork-bomb");
    let stderr = dir.join("lastcall.stderr");
    // The shell joins the cgroup and becomes lastcall, which is then a plain subreaper in it.
    let mut lastcall = cgroup
        .command(LASTCALL)
        .args(["--grace", "1s", "--", "perl", "-e", FORK_BOMB])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let pid = lastcall.id() as i32;
    let guard = KillTree(pid);
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
    let _escapee = KillTree(escapee);
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

/// The init of a fresh PID namespace (so the host's pid counter is never touched): lastcall, not
/// PID 1, runs an app that leaves a session leader behind (ignoring TERM and HUP, and forking
/// nothing, so no other pid is taken meanwhile) and exits. Once lastcall has reaped the app, the
/// app's pid is handed out again through ns_last_pid to an unrelated process that leads a group
/// of its own. lastcall gets SIGHUP, then its grace runs out: neither the HUP nor the SIGKILL
/// may reach that process.
const PID_REUSE: &str = r#"
import os, signal, subprocess, sys, time
lastcall, d = sys.argv[1], sys.argv[2]
def wait(cond, what, limit=20):
    end = time.time() + limit
    while not cond():
        if time.time() > end:
            sys.exit("timed out waiting for " + what)
        time.sleep(0.005)
def read(name):
    try:
        with open(os.path.join(d, name)) as f:
            return f.read()
    except OSError:
        return ""
def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
app = ("setsid sh -c 'trap \"\" TERM HUP; echo $$ > \"$1/leftover\"; exec sleep 1000' sh \"$1\" & "
       "while [ ! -s \"$1/leftover\" ]; do sleep 0.01; done; echo $$ > \"$1/app\"")
err = open(os.path.join(d, "lastcall.stderr"), "w")
lc = subprocess.Popen([lastcall, "--grace", "2s", "--", "sh", "-c", app, "sh", d], stderr=err,
                      env=dict(os.environ, LASTCALL_LOG="debug"))
wait(lambda: read("app").strip(), "the app")
app_pid = int(read("app"))
wait(lambda: not os.path.exists("/proc/%d" % app_pid), "lastcall to reap the app")
with open("/proc/sys/kernel/ns_last_pid", "w") as f:
    f.write(str(app_pid - 1))
victim = subprocess.Popen(["sh", "-c", "trap 'echo HUP >> \"$1/victim\"' HUP; trap 'echo TERM >> \"$1/victim\"' TERM; "
                           "trap 'echo WINCH >> \"$1/victim\"' WINCH; "
                           "echo $$ > \"$1/victim-pid\"; while :; do sleep 0.02; done", "sh", d], start_new_session=True)
wait(lambda: read("victim-pid").strip(), "the victim")
os.kill(lc.pid, signal.SIGHUP)
wait(lambda: "SIGHUP" in read("lastcall.stderr"), "lastcall to handle SIGHUP")
code = lc.wait(timeout=20)
# A marker instead of a pause: the shell runs pending traps in signal-number order, so once the
# victim has written WINCH (28), a HUP or TERM that reached it is written too; a victim that
# the SIGKILL reached never writes it.
pgid = os.getpgid(victim.pid)
os.kill(victim.pid, signal.SIGWINCH)
wait(lambda: "WINCH" in read("victim") or not alive(victim.pid), "the victim's WINCH, or its death")
print("app", app_pid)
print("victim", victim.pid, pgid)
print("lastcall", code)
print("victim-alive", alive(victim.pid))
print("victim-got", [w for w in read("victim").split() if w != "WINCH"])
"#;

#[test]
fn a_recycled_pid_gets_neither_the_forwarded_signal_nor_the_sigkill() {
    let dir = scratch("pid-reuse");
    let out = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "--kill-child", "--", "python3", "-c", PID_REUSE, LASTCALL])
        .arg(&dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let log = fs::read_to_string(dir.join("lastcall.stderr")).unwrap_or_default();
    let report = format!("{stdout}{}\nlastcall's log:\n{log}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{report}");
    let field = |name: &str| stdout.lines().find_map(|l| l.strip_prefix(&format!("{name} "))).unwrap_or_default().to_string();
    let app = field("app");
    // The reuse happened: the victim has the app's pid, and leads a group with that id.
    assert_eq!(field("victim"), format!("{app} {app}"), "{report}");
    assert_eq!(field("victim-alive"), "True", "the grace's SIGKILL reached the recycled pid: {report}");
    assert_eq!(field("victim-got"), "[]", "a forwarded signal reached the recycled pid: {report}");
    // lastcall did its job for what was really the app's: the leftover got the SIGKILL.
    assert!(log.contains("grace expired"), "{report}");
}
