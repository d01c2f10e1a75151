//! The measurements themselves: callgrind's instruction counts, the grace's lateness, health
//! requests, and the small process helpers (pinning, kill, /proc reads) the sections share.
//!
//! May import: contenders.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use crate::contenders::{health_port, Init};

pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Pins this thread to `cpu`, or lets it run on all `cpus` again with None.
pub fn pin_self(cpu: Option<usize>, cpus: usize) {
    // SAFETY: cpu_set_t is plain data; sched_setaffinity reads it from our stack.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for c in 0..cpus {
            if cpu.is_none_or(|only| only == c) {
                libc::CPU_SET(c, &mut set);
            }
        }
        libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
    }
}

pub fn valgrind_works() -> bool {
    Command::new("valgrind").arg("--version").stdout(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// Until `pid` sleeps (state S), or is gone: an init sleeps only in its one wait, so it is done
/// with the last signal (orphan). A signal sent while the init is still on its way back to its
/// wait is taken in the same pass, and how often that happens depends on how slowly valgrind
/// runs on the machine at that moment.
pub fn await_asleep(pid: i32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next());
        if state.is_none_or(|s| s == "S") || Instant::now() > deadline {
            return;
        }
        std::thread::sleep(Duration::from_micros(20));
    }
}

/// User-space instructions `init` runs per forwarded signal: callgrind's total with `signals`
/// signals, minus the total with none (start-up and exit), divided by `signals`. Each signal
/// goes to a sleeping init (`await_asleep`), so that each costs one whole wake-up.
pub fn instructions_per_signal(init: &Init, fixture: &Path, signals: usize) -> Option<f64> {
    let total = |count: usize| {
        callgrind_total(init, fixture, &["record"], false, |child| {
            let mut stdout = child.stdout.take()?;
            let mut buf = [0u8; 8];
            stdout.read_exact(&mut buf[..1]).ok()?;
            for _ in 0..count {
                await_asleep(child.id() as i32);
                kill(child.id() as i32, libc::SIGUSR1);
                stdout.read_exact(&mut buf).ok()?;
            }
            await_asleep(child.id() as i32);
            kill(child.id() as i32, libc::SIGTERM);
            child.wait().ok().map(drop)
        })
    };
    Some((total(signals)? - total(0)?) / signals as f64)
}

/// User-space instructions `init`, as PID 1, runs per orphan it reaps: as above, with a child
/// that leaves `orphans` orphans against one that leaves one. Each orphan comes only once the
/// init has reaped the one before and sleeps again (`fixture orphans N sync`), so that each
/// SIGCHLD stands for one exit however slowly the init runs under valgrind (a burst, or a
/// fixed pause that a slow pass overruns, lets it reap several per SIGCHLD and look cheaper).
pub fn instructions_per_orphan(init: &Init, fixture: &Path, orphans: usize) -> Option<f64> {
    let total = |count: usize| {
        callgrind_total(init, fixture, &["orphans", &format!("{count:05}"), "sync"], true, |child| child.wait().ok().map(drop))
    };
    Some((total(orphans + 1)? - total(1)?) / orphans as f64)
}

/// callgrind's instruction total for `init` around `fixture mode`, as PID 1 of a new namespace
/// if `pid1`. `drive` runs it to the end (the child handed over is valgrind, or unshare).
pub fn callgrind_total(init: &Init, fixture: &Path, mode: &[&str], pid1: bool, drive: impl FnOnce(&mut Child) -> Option<()>) -> Option<f64> {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("callgrind.{}", init.name.replace(|c: char| !c.is_alphanumeric(), "_")));
    let mut out_file = std::ffi::OsString::from("--callgrind-out-file=");
    out_file.push(&out);
    let mut command = if pid1 {
        let mut c = Command::new("unshare");
        c.args(["--pid", "--fork", "--kill-child", "--mount-proc", "--", "valgrind"]);
        c
    } else {
        Command::new("valgrind")
    };
    command.arg("--tool=callgrind").arg(out_file).arg(&init.path).args(&init.args).arg(fixture).args(mode);
    // The same environment on every machine: its size places the init's stack, and the stack's
    // alignment moved the count per orphan (tests/instructions.rs does the same).
    command.env_clear().env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin").envs(init.env.iter().map(|(k, v)| (k, v)));
    let mut child = command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().ok()?;
    drive(&mut child)?;
    let text = fs::read_to_string(&out).ok()?;
    let _ = fs::remove_file(&out);
    text.lines().find_map(|l| l.strip_prefix("summary: "))?.trim().parse().ok()
}

pub fn kill(pid: i32, sig: i32) -> bool {
    // SAFETY: kill takes plain integers.
    unsafe { libc::kill(pid, sig) == 0 }
}

/// The init's own pid: the child of unshare.
pub fn init_pid(unshare: &Child) -> i32 {
    let outer = unshare.id();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(kids) = fs::read_to_string(format!("/proc/{outer}/task/{outer}/children")) {
            if let Some(pid) = kids.split_whitespace().next().and_then(|p| p.parse().ok()) {
                return pid;
            }
        }
        assert!(Instant::now() < deadline, "unshare did not start its child");
        std::thread::sleep(Duration::from_millis(1));
    }
}

pub fn status_field(pid: i32, field: &str) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .filter(|l| l.starts_with(field))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

/// One GET /ready, read to the end (the endpoint closes the connection).
pub fn health_request(port: u16) -> bool {
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return false };
    let mut answer = Vec::new();
    stream.write_all(b"GET /ready HTTP/1.0\r\n\r\n").is_ok() && stream.read_to_end(&mut answer).is_ok() && answer.starts_with(b"HTTP/1.1 200")
}

/// User-space instructions lastcall runs per health request: as per signal, with requests.
pub fn instructions_per_health_request(init: &Init, fixture: &Path, port: u16, requests: usize) -> Option<f64> {
    let total = |count: usize| {
        callgrind_total(init, fixture, &["record"], false, |child| {
            let mut stdout = child.stdout.take()?;
            let mut buf = [0u8; 8];
            // The endpoint listens before the command starts.
            stdout.read_exact(&mut buf[..1]).ok()?;
            for _ in 0..count {
                if !health_request(port) {
                    return None;
                }
            }
            kill(child.id() as i32, libc::SIGTERM);
            stdout.read_exact(&mut buf).ok()?;
            child.wait().ok().map(drop)
        })
    };
    Some((total(requests)? - total(0)?) / requests as f64)
}

/// How late (ms) the SIGKILL of `--grace 300ms` ends `init` as PID 1 around `fixture mode`
/// (which ignores TERM), with two threads flooding its health endpoint if `health_flood`.
pub fn grace_lateness(init: &Init, fixture: &Path, mode: &str, health_flood: bool) -> f64 {
    let grace = Duration::from_millis(300);
    // Its own /proc, so that the notify relay finds the app's messages to be the service's.
    let mut child = init.as_pid1(fixture, &["--grace", "300ms"], &[mode], true, None).stdin(Stdio::null()).stdout(Stdio::piped()).spawn().unwrap();
    let mut ready = [0u8; 1];
    child.stdout.take().unwrap().read_exact(&mut ready).unwrap();
    let pid = init_pid(&child);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flooders: Vec<_> = match health_port(init).filter(|_| health_flood) {
        Some(port) => (0..2)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        health_request(port);
                    }
                })
            })
            .collect(),
        None => vec![],
    };
    let t = Instant::now();
    kill(pid, libc::SIGTERM);
    let status = child.wait().unwrap();
    let late = (t.elapsed().as_secs_f64() - grace.as_secs_f64()) * 1000.0;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    flooders.into_iter().for_each(|f| drop(f.join()));
    assert_eq!(status.code().or(status.signal().map(|s| 128 + s)), Some(137), "{} {mode}", init.name);
    late
}

/// A second reader for the same pipe, so a thread can drain it while this one keeps the Child.
pub trait TryCloneFd {
    fn try_clone_fd(&self) -> fs::File;
}

impl TryCloneFd for ChildStdout {
    fn try_clone_fd(&self) -> fs::File {
        use std::os::fd::AsFd;
        fs::File::from(self.as_fd().try_clone_to_owned().unwrap())
    }
}
