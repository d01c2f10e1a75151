//! Timing verdicts on a shared machine: how much of a window the host took away (steal from
//! /proc/stat, and the run-queue delay of the processes that matter from /proc/PID/schedstat),
//! a retry only when that covers a measured excess, and the run-wide lock that the flood and
//! timing tests hold so that they never measure each other.
#![allow(dead_code)]

use std::fmt;
use std::fs;
use std::time::{Duration, Instant};

/// Host steal so far, summed over every CPU, from /proc/stat's `cpu` line (USER_HZ ticks).
fn host_steal() -> Duration {
    let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: u64 = stat
        .lines()
        .find(|l| l.starts_with("cpu "))
        .and_then(|l| l.split_whitespace().nth(8))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf takes a plain integer.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_nanos(ticks.saturating_mul(1_000_000_000 / hz))
}

/// Time a task spent runnable but waiting for a CPU: the second field of its schedstat.
fn run_delay(schedstat: &str) -> Option<Duration> {
    schedstat.split_whitespace().nth(1)?.parse().ok().map(Duration::from_nanos)
}

/// The run-queue delay of every thread of `pid` so far (None once it is gone).
fn process_run_delay(pid: i32) -> Option<Duration> {
    let tasks = fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut sum = Duration::ZERO;
    for task in tasks.flatten() {
        if let Some(d) = fs::read_to_string(task.path().join("schedstat")).ok().as_deref().and_then(run_delay) {
            sum += d;
        }
    }
    Some(sum)
}

/// An open measurement window over the test's own thread and the processes it names.
pub struct Window {
    started: Instant,
    steal: Duration,
    /// Each watched process: its delay at the start, and the latest reading while it lived.
    watched: Vec<(i32, Duration, Duration)>,
    own_start: Duration,
}

/// What the host took from a window: the figures every timing failure prints.
#[derive(Clone, Copy, Debug)]
pub struct Contention {
    pub wall: Duration,
    pub steal: Duration,
    pub run_delay: Duration,
}

impl Window {
    /// Opens a window over the calling thread and `pids` (lastcall, usually).
    pub fn open(pids: &[i32]) -> Window {
        let watched = pids.iter().map(|&p| {
            let d = process_run_delay(p).unwrap_or_default();
            (p, d, d)
        });
        Window {
            started: Instant::now(),
            steal: host_steal(),
            watched: watched.collect(),
            own_start: own_delay(),
        }
    }

    /// Reads the watched processes again: call it before one of them is reaped, since the
    /// figures go with it.
    pub fn sample(&mut self) {
        for (pid, _, latest) in &mut self.watched {
            if let Some(d) = process_run_delay(*pid) {
                *latest = d;
            }
        }
    }

    pub fn close(mut self) -> Contention {
        self.sample();
        let watched = self.watched.iter().map(|(_, start, latest)| latest.saturating_sub(*start)).max().unwrap_or_default();
        Contention {
            wall: self.started.elapsed(),
            steal: host_steal().saturating_sub(self.steal),
            run_delay: watched.max(own_delay().saturating_sub(self.own_start)),
        }
    }
}

fn own_delay() -> Duration {
    fs::read_to_string("/proc/thread-self/schedstat").ok().as_deref().and_then(run_delay).unwrap_or_default()
}

impl Contention {
    /// Whether the host took at least `excess` from the window: then an excess that large says
    /// nothing about the code.
    pub fn covers(&self, excess: Duration) -> bool {
        self.steal + self.run_delay >= excess
    }
}

impl fmt::Display for Contention {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "host steal {:?}, run-queue delay {:?} over {:?}", self.steal, self.run_delay, self.wall)
    }
}

/// One attempt at a timing verdict that went over its bound by `excess`.
pub struct Late {
    pub excess: Duration,
    pub contention: Contention,
    pub detail: String,
}

/// Runs `attempt` until it passes, at most `tries` times. A failed attempt is tried again only
/// when the host's steal plus the run-queue delay in its window covers its excess (a classified
/// stall); any other failure fails the test at once. Every failure is printed, the first
/// included, with both figures.
pub fn unless_stalled<T>(what: &str, tries: usize, mut attempt: impl FnMut() -> Result<T, Late>) -> T {
    for n in 1..=tries {
        match attempt() {
            Ok(value) => return value,
            Err(late) => {
                let stalled = late.contention.covers(late.excess);
                eprintln!(
                    "{what}: attempt {n} of {tries} over by {:?} ({}): {}; {}",
                    late.excess,
                    late.contention,
                    late.detail,
                    if stalled { "the host took that much: a stall" } else { "not a stall" }
                );
                assert!(stalled && n < tries, "{what}: over by {:?} ({}): {}", late.excess, late.contention, late.detail);
            }
        }
    }
    unreachable!("the last attempt either passed or failed its assertion")
}

/// The run-wide lock for flood, fork-bomb and timing tests: held, nothing else that floods or
/// measures runs, in this test binary or in another one of the same build (the same target
/// directory) running at the same time.
pub struct Alone(fs::File);

pub fn alone() -> Alone {
    use std::os::fd::AsRawFd;
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("timing-tests.lock");
    let file = fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).unwrap();
    // SAFETY: flock takes the descriptor we own; each open file description is its own lock
    // holder, so threads of this process exclude each other as other processes do.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
    assert_eq!(rc, 0, "flock {}: {}", path.display(), std::io::Error::last_os_error());
    Alone(file)
}
