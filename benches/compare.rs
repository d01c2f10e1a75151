//! lastcall against tini, tini-static, dumb-init and catatonit, all measured in the same run.
//!
//!     cargo bench --bench compare            # SCALE=0.2 for a quick look
//!
//! The machine is shared and noisy, so contenders take turns (spawn by spawn, signal by
//! signal) rather than running one after another, and the table reports medians and ratios to
//! the best peer. Peers come from Debian (`apt-get install tini dumb-init catatonit`); a
//! missing one is left out. The child programs are benches/fixture.c, built static here.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const LASTCALL: &str = env!("CARGO_BIN_EXE_lastcall");

struct Init {
    name: &'static str,
    path: String,
    /// What comes between the init and the command.
    args: Vec<&'static str>,
}

impl Init {
    fn command(&self, fixture: &Path, mode: &[&str]) -> Command {
        let mut c = Command::new(&self.path);
        c.args(&self.args).arg(fixture).args(mode);
        c
    }

    /// As PID 1 of a new PID namespace, the way a container runs it; on `cpu` if given.
    fn as_pid1(&self, fixture: &Path, extra: &[&str], mode: &[&str], mount_proc: bool, cpu: Option<usize>) -> Command {
        let mut c = match cpu {
            Some(cpu) => {
                let mut c = Command::new("taskset");
                c.args(["-c", &cpu.to_string(), "unshare"]);
                c
            }
            None => Command::new("unshare"),
        };
        c.args(["--pid", "--fork", "--kill-child"]);
        if mount_proc {
            c.arg("--mount-proc");
        }
        c.arg("--").arg(&self.path).args(extra).args(&self.args).arg(fixture).args(mode);
        c
    }
}

fn contenders() -> Vec<Init> {
    let mut inits = vec![Init { name: "lastcall", path: LASTCALL.into(), args: vec!["--"] }];
    for (name, path, args) in [
        ("tini", "/usr/bin/tini", vec!["-s", "--"]),
        ("tini-static", "/usr/bin/tini-static", vec!["-s", "--"]),
        ("dumb-init", "/usr/bin/dumb-init", vec!["--"]),
        ("catatonit", "/usr/bin/catatonit", vec!["--"]),
    ] {
        if Path::new(path).exists() {
            inits.push(Init { name, path: path.into(), args });
        } else {
            eprintln!("note: {path} is missing (apt-get install tini dumb-init catatonit); leaving {name} out");
        }
    }
    inits
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Pins this thread to `cpu`, or lets it run on all `cpus` again with None.
fn pin_self(cpu: Option<usize>, cpus: usize) {
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

/// A permutation of 0..n that changes from turn to turn, so that no init always follows the same
/// one (xorshift, seeded by the turn).
fn turn_order(n: usize, turn: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut x = (turn as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    order
}

fn kill(pid: i32, sig: i32) -> bool {
    // SAFETY: kill takes plain integers.
    unsafe { libc::kill(pid, sig) == 0 }
}

fn build_fixture() -> PathBuf {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-fixture");
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/fixture.c");
    let status = Command::new("cc").args(["-static", "-O2", "-o"]).arg(&out).arg(src).status().expect("cc");
    assert!(status.success(), "building {src} needs gcc and a static libc (libc6-dev)");
    out
}

/// The init's own pid: the child of unshare.
fn init_pid(unshare: &Child) -> i32 {
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

fn status_field(pid: i32, field: &str) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .filter(|l| l.starts_with(field))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v
}

/// One figure: a value per contender, and whether lower is better.
struct Row {
    figure: String,
    values: Vec<Option<f64>>,
    unit: &'static str,
    lower_is_better: bool,
    text: Option<Vec<String>>,
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench -- --list` and `cargo test --benches` ask for test names: none here
    }
    let scale: f64 = std::env::var("SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1.0);
    let n = |full: usize| ((full as f64 * scale).round() as usize).max(5);
    let fixture = build_fixture();
    let inits = contenders();
    let mut rows: Vec<Row> = Vec::new();

    // Size, and whether the binary is static.
    let mut static_text = Vec::new();
    rows.push(Row {
        figure: "binary size (ratio: to the static peers)".into(),
        values: inits.iter().map(|i| Some(fs::metadata(&i.path).unwrap().len() as f64 / 1024.0)).collect(),
        unit: "KiB",
        lower_is_better: true,
        text: None,
    });
    for init in &inits {
        let out = Command::new("file").arg("-L").arg(&init.path).output().map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
        static_text.push(if out.contains("statically linked") || out.contains("static-pie") { "yes".into() } else { "no".into() });
    }
    rows.push(Row { figure: "static?".into(), values: vec![None; inits.len()], unit: "", lower_is_better: true, text: Some(static_text) });

    // Start-up overhead: INIT -- true against true alone, spawn by spawn.
    let runs = n(500);
    let mut alone = Vec::new();
    let mut with: Vec<Vec<f64>> = vec![Vec::new(); inits.len()];
    let quiet = |mut c: Command| {
        c.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        c
    };
    for round in 0..runs {
        let t = Instant::now();
        quiet(Command::new(&fixture)).status().unwrap();
        alone.push(t.elapsed().as_secs_f64() * 1e6);
        for k in 0..inits.len() {
            let i = (k + round) % inits.len();
            let t = Instant::now();
            let status = quiet(inits[i].command(&fixture, &["true"])).status().unwrap();
            with[i].push(t.elapsed().as_secs_f64() * 1e6);
            assert!(status.success(), "{} -- true failed", inits[i].name);
        }
    }
    let alone_total: f64 = alone.iter().sum();
    let alone_median = percentile(&sorted(alone.clone()), 0.5);
    rows.push(Row {
        figure: format!("start-up overhead, mean of {runs} (total − true alone)"),
        values: with.iter().map(|w| Some((w.iter().sum::<f64>() - alone_total) / runs as f64)).collect(),
        unit: "µs",
        lower_is_better: true,
        text: None,
    });
    rows.push(Row {
        figure: "start-up overhead, median".into(),
        values: with.iter().map(|w| Some(percentile(&sorted(w.clone()), 0.5) - alone_median)).collect(),
        unit: "µs",
        lower_is_better: true,
        text: None,
    });

    // Forwarding latency, with every init as PID 1 at once, taking turns signal by signal. Where
    // the scheduler happens to place each process costs more than any init's own work (a
    // wake-up on an idle core of a VM takes tens of µs), so placement is fixed: all on one
    // core, then the sender on one core and each init with its child on the other.
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let placements: Vec<(&str, usize, usize)> =
        if cpus >= 2 { vec![("same core", 0, 0), ("across cores", 0, 1)] } else { vec![("same core", 0, 0)] };
    let signals = n(2000).max(300);
    let start_one = |init: &Init, cpu: Option<usize>| -> (Child, i32, ChildStdout) {
        let mut child = init.as_pid1(&fixture, &[], &["record"], false, cpu).stdin(Stdio::null()).stdout(Stdio::piped()).spawn().unwrap();
        let mut out = child.stdout.take().unwrap();
        let mut ready = [0u8; 1];
        out.read_exact(&mut ready).unwrap();
        let pid = init_pid(&child);
        (child, pid, out)
    };
    let start_all = |cpu: Option<usize>| -> Vec<(Child, i32, ChildStdout)> { inits.iter().map(|init| start_one(init, cpu)).collect() };
    for (label, sender_cpu, init_cpu) in placements {
        pin_self(Some(sender_cpu), cpus);
        let mut latency: Vec<Vec<f64>> = vec![Vec::new(); inits.len()];
        // Where a process stands in the start order alone moved its figure by 2 µs (the first
        // one started was slower, whichever init it was), so every init takes every position.
        for session in 0..inits.len() {
            let order: Vec<usize> = (0..inits.len()).map(|k| (k + session) % inits.len()).collect();
            let mut pinned: Vec<Option<(Child, i32, ChildStdout)>> = (0..inits.len()).map(|_| None).collect();
            for &i in &order {
                pinned[i] = Some(start_one(&inits[i], Some(init_cpu)));
            }
            for round in 0..signals / inits.len() {
                for i in turn_order(inits.len(), session * 7919 + round) {
                    let Some((_, pid, out)) = pinned[i].as_mut() else { continue };
                    let sent = monotonic_ns();
                    kill(*pid, libc::SIGUSR1);
                    let mut buf = [0u8; 8];
                    out.read_exact(&mut buf).unwrap();
                    latency[i].push((u64::from_ne_bytes(buf).saturating_sub(sent)) as f64 / 1000.0);
                    // The child's handler has run, but it and the init may still have a few µs
                    // left before they sleep again. perf sched showed that tail running inside
                    // the next init's measurement, so each init paid for its predecessor's.
                    // Let it finish first, yielding rather than sleeping: an idle core would
                    // start the next measurement with cold caches.
                    let settle = Instant::now();
                    while settle.elapsed() < Duration::from_micros(200) {
                        std::thread::yield_now();
                    }
                }
            }
            for (mut child, pid, _) in pinned.into_iter().flatten() {
                kill(pid, libc::SIGKILL);
                let _ = child.wait();
            }
        }
        pin_self(None, cpus);
        let latency: Vec<Vec<f64>> = latency.into_iter().map(sorted).collect();
        rows.push(Row {
            figure: format!("forwarding latency p50, {label} ({} signals)", latency[0].len()),
            values: latency.iter().map(|l| Some(percentile(l, 0.5))).collect(),
            unit: "µs",
            lower_is_better: true,
            text: None,
        });
        rows.push(Row {
            figure: format!("forwarding latency p99, {label}"),
            values: latency.iter().map(|l| Some(percentile(l, 0.99))).collect(),
            unit: "µs",
            lower_is_better: true,
            text: None,
        });
    }

    // Idle wake-ups and idle RSS, all idle at once; then the signal storm.
    let mut running = start_all(None);
    let idle = Duration::from_secs_f64(5.0 * scale.min(1.0)).max(Duration::from_secs(2));
    let before: Vec<u64> = running.iter().map(|(_, pid, _)| status_field(*pid, "voluntary_ctxt_switches") + status_field(*pid, "nonvoluntary_ctxt_switches")).collect();
    std::thread::sleep(idle);
    let after: Vec<u64> = running.iter().map(|(_, pid, _)| status_field(*pid, "voluntary_ctxt_switches") + status_field(*pid, "nonvoluntary_ctxt_switches")).collect();
    rows.push(Row {
        figure: format!("idle wake-ups in {:.0}s", idle.as_secs_f64()),
        values: before.iter().zip(&after).map(|(b, a)| Some((a - b) as f64)).collect(),
        unit: "",
        lower_is_better: true,
        text: None,
    });
    rows.push(Row {
        figure: "idle RSS".into(),
        values: running.iter().map(|(_, pid, _)| Some(status_field(*pid, "VmRSS:") as f64)).collect(),
        unit: "KiB",
        lower_is_better: true,
        text: None,
    });

    // Signal storm: 10k signals in a burst, then TERM; the init must survive and pass TERM on.
    let mut storm_text = Vec::new();
    let mut storm_values = Vec::new();
    for (i, (child, pid, out)) in running.iter_mut().enumerate() {
        let mut reader = out.try_clone_fd();
        let drain = std::thread::spawn(move || {
            let mut buf = [0u8; 8];
            loop {
                if reader.read_exact(&mut buf).is_err() {
                    return false;
                }
                if u64::from_ne_bytes(buf) == 0 {
                    return true; // the child's TERM marker
                }
            }
        });
        let t = Instant::now();
        for _ in 0..10_000 {
            kill(*pid, libc::SIGUSR1);
        }
        let survived = kill(*pid, 0);
        kill(*pid, libc::SIGTERM);
        let got_term = drain.join().unwrap();
        let status = child.wait().unwrap();
        let clean = status.code() == Some(0);
        storm_values.push(Some(t.elapsed().as_secs_f64() * 1000.0));
        storm_text.push(format!(
            "{}{}{} {:.0}ms",
            if survived { "alive" } else { "DIED" },
            if got_term { ", TERM passed" } else { ", TERM LOST" },
            if clean { ", exit 0" } else { ", BAD EXIT" },
            t.elapsed().as_secs_f64() * 1000.0
        ));
        let _ = i;
    }
    rows.push(Row { figure: "signal storm (10k, then TERM)".into(), values: storm_values, unit: "ms", lower_is_better: true, text: Some(storm_text) });

    // Reaping: a child leaves 2000 orphans; time until none is left, and the most at once.
    let orphans = n(2000).to_string();
    let rounds = 9;
    let mut reap_ms: Vec<Vec<f64>> = vec![Vec::new(); inits.len()];
    let mut most: Vec<Vec<f64>> = vec![Vec::new(); inits.len()];
    for round in 0..rounds {
        for k in 0..inits.len() {
            let i = (k + round) % inits.len();
            let out = inits[i].as_pid1(&fixture, &[], &["orphans", &orphans], true, None).stdin(Stdio::null()).stderr(Stdio::null()).output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let mut parts = text.split_whitespace();
            let ms: f64 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(f64::NAN);
            let at_once: u64 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
            reap_ms[i].push(ms);
            most[i].push(at_once as f64);
        }
    }
    rows.push(Row {
        figure: format!("reaping {orphans} orphans, median of {rounds}"),
        values: reap_ms.into_iter().map(|v| Some(percentile(&sorted(v), 0.5))).collect(),
        unit: "ms",
        lower_is_better: true,
        text: None,
    });
    rows.push(Row {
        figure: format!("most zombies at once (sampled every 100 forks), median of {rounds}"),
        values: most.into_iter().map(|v| Some(percentile(&sorted(v), 0.5))).collect(),
        unit: "",
        lower_is_better: true,
        text: None,
    });

    // Shutdown accuracy: only lastcall has a grace deadline to measure.
    let grace = Duration::from_millis(300);
    let mut overshoot = Vec::new();
    for _ in 0..n(40) {
        let mut child = inits[0]
            .as_pid1(&fixture, &["--grace", "300ms"], &["ignore-term"], false, None)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = [0u8; 1];
        child.stdout.take().unwrap().read_exact(&mut ready).unwrap();
        let pid = init_pid(&child);
        let t = Instant::now();
        kill(pid, libc::SIGTERM);
        let status = child.wait().unwrap();
        assert_eq!(status.code().or(status.signal().map(|s| 128 + s)), Some(137));
        overshoot.push((t.elapsed().as_secs_f64() - grace.as_secs_f64()) * 1000.0);
    }
    let overshoot = sorted(overshoot);
    let mut accuracy = vec![None; inits.len()];
    accuracy[0] = Some(percentile(&overshoot, 0.5));
    let mut accuracy99 = vec![None; inits.len()];
    accuracy99[0] = Some(percentile(&overshoot, 0.99));
    rows.push(Row { figure: "SIGKILL after --grace 300ms, p50 late by".into(), values: accuracy, unit: "ms", lower_is_better: true, text: None });
    rows.push(Row { figure: "SIGKILL after --grace 300ms, p99 late by".into(), values: accuracy99, unit: "ms", lower_is_better: true, text: None });

    print_table(&inits, &rows);
}

fn print_table(inits: &[Init], rows: &[Row]) {
    let statics: Vec<bool> = rows
        .iter()
        .find(|r| r.figure == "static?")
        .and_then(|r| r.text.as_ref())
        .map(|t| t.iter().map(|s| s == "yes").collect())
        .unwrap_or_default();
    let uname = Command::new("uname").arg("-srm").output().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default();
    let cpu = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| c.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string()))
        .unwrap_or_default();
    let date = Command::new("date").arg("-u").arg("+%Y-%m-%d").output().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default();
    let mut out = std::io::stdout().lock();
    let cores = fs::read_to_string("/proc/cpuinfo").map(|c| c.matches("\nprocessor").count() + usize::from(c.starts_with("processor"))).unwrap_or(0);
    let _ = writeln!(out, "\nlastcall benchmark, {date}, {uname}, {cores} cores, {cpu}\n");
    let names: Vec<&str> = inits.iter().map(|i| i.name).collect();
    let _ = writeln!(out, "| figure | {} | lastcall / best peer |", names.join(" | "));
    let _ = writeln!(out, "|---|{}---|", "---|".repeat(names.len()));
    for row in rows {
        let cells: Vec<String> = (0..inits.len())
            .map(|i| match (&row.text, row.values[i]) {
                (Some(text), _) => text[i].clone(),
                (None, Some(v)) => format!("{} {}", fmt(v), row.unit).trim().to_string(),
                (None, None) => "n/a".into(),
            })
            .collect();
        // Size is compared with the static peers only: a dynamic binary needs a libc beside it.
        let comparable = |i: usize| !row.figure.starts_with("binary size") || statics.get(i) == Some(&true);
        let best_peer = row.values[1..]
            .iter()
            .enumerate()
            .filter(|(i, _)| comparable(i + 1))
            .filter_map(|(_, v)| *v)
            .filter(|v| v.is_finite())
            .fold(None, |best: Option<f64>, v| Some(best.map_or(v, |b| if row.lower_is_better { b.min(v) } else { b.max(v) })));
        let ratio = match (row.values[0], best_peer) {
            (Some(ours), Some(best)) if best > 0.0 => format!("{:.2}", ours / best),
            (Some(ours), Some(best)) if best == 0.0 && ours == 0.0 => "equal (0)".into(),
            _ => "-".into(),
        };
        let _ = writeln!(out, "| {} | {} | {ratio} |", row.figure, cells.join(" | "));
    }
}

fn fmt(v: f64) -> String {
    if !v.is_finite() {
        "?".into()
    } else if v.abs() >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// A second reader for the same pipe, so a thread can drain it while this one keeps the Child.
trait TryCloneFd {
    fn try_clone_fd(&self) -> fs::File;
}

impl TryCloneFd for ChildStdout {
    fn try_clone_fd(&self) -> fs::File {
        use std::os::fd::AsFd;
        fs::File::from(self.as_fd().try_clone_to_owned().unwrap())
    }
}
