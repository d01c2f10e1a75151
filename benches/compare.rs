//! lastcall against tini, tini-static, dumb-init and catatonit, all measured in the same run.
//!
//!     cargo bench --bench compare            # SCALE=0.2 for a quick look
//!     ONLY=instructions cargo bench --bench compare   # only the callgrind rows
//!
//! `ONLY` takes a comma-separated list of sections: size, startup, latency, instructions, idle,
//! storm, reaping, grace. A run counts only on a quiet machine: the load average (/proc/loadavg)
//! is recorded before and after every section, and a run with a timed section refuses to start
//! above 1.0 (LASTCALL_BENCH_LOADED=1 runs it anyway, every section above 1.0 marked in the
//! output). Instruction counts (callgrind) and sizes do not depend on the load.
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
/// The column of benches/floor.c.
const FLOOR: &str = "floor (C)";

struct Init {
    name: String,
    path: String,
    /// What comes between the init and the command.
    args: Vec<String>,
    /// A peer, as opposed to lastcall or a build of it being compared: ratios are to the best
    /// peer.
    peer: bool,
    /// Set in the init's environment.
    env: Vec<(String, String)>,
}

impl Init {
    fn command(&self, fixture: &Path, mode: &[&str]) -> Command {
        let mut c = Command::new(&self.path);
        c.args(&self.args).arg(fixture).args(mode).envs(self.env.iter().map(|(k, v)| (k, v)));
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
        c.envs(self.env.iter().map(|(k, v)| (k, v)));
        c
    }
}

/// lastcall; lastcall with a health endpoint and with a notify socket, the README's recommended
/// set-ups, whose sockets share the loop with the signals; with --setsid and -c (dumb-init's
/// modes: a session, lastcall's own group); the peers that are installed;
/// and the builds or options named in LASTCALL_BENCH_EXTRA (`NAME=PATH[,ARG...];...`, e.g.
/// `old=/tmp/lastcall-old,--`). Everything that is not a peer gets its own ratio to the best
/// peer. `notify_socket` is where the notify variant's NOTIFY_SOCKET points.
fn contenders(notify_socket: &Path) -> Vec<Init> {
    let owned = |args: &[&str]| args.iter().map(|a| a.to_string()).collect();
    // A port nobody uses now; only one health variant runs at a time.
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port");
    let health = format!("127.0.0.1:{port}");
    let mut inits = vec![
        Init { name: "lastcall".into(), path: LASTCALL.into(), args: owned(&["--"]), peer: false, env: vec![] },
        Init { name: "lastcall --health-listen".into(), path: LASTCALL.into(), args: owned(&["--health-listen", &health, "--"]), peer: false, env: vec![] },
        Init {
            name: "lastcall, NOTIFY_SOCKET".into(),
            path: LASTCALL.into(),
            args: owned(&["--"]),
            peer: false,
            env: vec![("NOTIFY_SOCKET".into(), notify_socket.display().to_string())],
        },
        Init { name: "lastcall --setsid".into(), path: LASTCALL.into(), args: owned(&["--setsid", "--"]), peer: false, env: vec![] },
        Init { name: "lastcall -c".into(), path: LASTCALL.into(), args: owned(&["-c", "--"]), peer: false, env: vec![] },
    ];
    for (name, path, args) in [
        ("tini", "/usr/bin/tini", &["-s", "--"][..]),
        ("tini-static", "/usr/bin/tini-static", &["-s", "--"]),
        ("dumb-init", "/usr/bin/dumb-init", &["--"]),
        ("catatonit", "/usr/bin/catatonit", &["--"]),
    ] {
        if Path::new(path).exists() {
            inits.push(Init { name: name.into(), path: path.into(), args: owned(args), peer: true, env: vec![] });
        } else {
            eprintln!("note: {path} is missing (apt-get install tini dumb-init catatonit); leaving {name} out");
        }
    }
    // The physical floor (benches/floor.c): a column of its own and a ratio of its own, not a peer.
    let floor = build_static("floor").display().to_string();
    inits.push(Init { name: FLOOR.into(), path: floor, args: owned(&["--"]), peer: false, env: vec![] });
    let extra = std::env::var("LASTCALL_BENCH_EXTRA").unwrap_or_default();
    for spec in extra.split(';').filter(|s| !s.is_empty()) {
        let (name, command) = spec.split_once('=').expect("LASTCALL_BENCH_EXTRA: NAME=PATH[,ARG...];...");
        let mut words = command.split(',').map(String::from);
        let path = words.next().unwrap_or_default();
        inits.push(Init { name: name.into(), path, args: words.collect(), peer: false, env: vec![] });
    }
    inits
}

/// Whether `ONLY` (comma-separated) names `section`; without ONLY, every section runs.
fn wanted(section: &str) -> bool {
    std::env::var("ONLY").map_or(true, |only| only.split(',').any(|s| s.trim() == section))
}

/// The sections whose figures are times, which a loaded machine makes noise of.
const TIMED: [&str; 6] = ["startup", "latency", "idle", "storm", "reaping", "grace"];

/// The 1-minute load average.
fn loadavg() -> f64 {
    fs::read_to_string("/proc/loadavg").ok().and_then(|l| l.split_whitespace().next()?.parse().ok()).unwrap_or(f64::NAN)
}

/// Above this load average a timed section is no measurement.
const QUIET: f64 = 1.0;

/// The load average before and after each section that ran.
struct LoadLog(Vec<(&'static str, f64, f64)>);

impl LoadLog {
    /// Runs `section` if ONLY asks for it, recording the load around it.
    fn section(&mut self, name: &'static str, run: impl FnOnce()) {
        if !wanted(name) {
            return;
        }
        let before = loadavg();
        run();
        self.0.push((name, before, loadavg()));
    }
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

fn valgrind_works() -> bool {
    Command::new("valgrind").arg("--version").stdout(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// User-space instructions `init` runs per forwarded signal: callgrind's total with `signals`
/// signals, minus the total with none (start-up and exit), divided by `signals`.
fn instructions_per_signal(init: &Init, fixture: &Path, signals: usize) -> Option<f64> {
    let total = |count: usize| {
        callgrind_total(init, fixture, &["record"], false, |child| {
            let mut stdout = child.stdout.take()?;
            let mut buf = [0u8; 8];
            stdout.read_exact(&mut buf[..1]).ok()?;
            for _ in 0..count {
                kill(child.id() as i32, libc::SIGUSR1);
                stdout.read_exact(&mut buf).ok()?;
            }
            kill(child.id() as i32, libc::SIGTERM);
            child.wait().ok().map(drop)
        })
    };
    Some((total(signals)? - total(0)?) / signals as f64)
}

/// User-space instructions `init`, as PID 1, runs per orphan it reaps: as above, with a child
/// that leaves `orphans` orphans against one that leaves one. The orphans come 2 ms apart, so
/// that each SIGCHLD stands for one exit however slowly the init runs under valgrind (a burst
/// lets a slow init reap several per SIGCHLD and look cheaper).
fn instructions_per_orphan(init: &Init, fixture: &Path, orphans: usize) -> Option<f64> {
    let total = |count: usize| {
        callgrind_total(init, fixture, &["orphans", &count.to_string(), "2000"], true, |child| child.wait().ok().map(drop))
    };
    Some((total(orphans + 1)? - total(1)?) / orphans as f64)
}

/// callgrind's instruction total for `init` around `fixture mode`, as PID 1 of a new namespace
/// if `pid1`. `drive` runs it to the end (the child handed over is valgrind, or unshare).
fn callgrind_total(init: &Init, fixture: &Path, mode: &[&str], pid1: bool, drive: impl FnOnce(&mut Child) -> Option<()>) -> Option<f64> {
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
    command.envs(init.env.iter().map(|(k, v)| (k, v)));
    let mut child = command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().ok()?;
    drive(&mut child)?;
    let text = fs::read_to_string(&out).ok()?;
    let _ = fs::remove_file(&out);
    text.lines().find_map(|l| l.strip_prefix("summary: "))?.trim().parse().ok()
}

/// The 95% interval of each non-peer's ratio to the best peer at percentile `p`, by bootstrap
/// over rounds: every init had one turn per round (a signal, a reaping run), so sample `k` of
/// each init comes from the same stretch of the run, and resampling rounds keeps that pairing.
/// Shows whether a ratio of, say, 0.99 means anything. None for the peers.
fn bootstrap_ratio_cis(samples: &[Vec<f64>], peers: &[bool], p: f64) -> Vec<Option<(f64, f64)>> {
    (0..samples.len()).map(|i| if peers[i] { None } else { bootstrap_ratio_ci(samples, peers, p, i) }).collect()
}

fn bootstrap_ratio_ci(samples: &[Vec<f64>], peers: &[bool], p: f64, ours: usize) -> Option<(f64, f64)> {
    let rounds = samples.iter().map(Vec::len).min()?;
    if !peers.contains(&true) || rounds < 10 {
        return None;
    }
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut ratios = Vec::new();
    let mut scratch = vec![0.0; rounds];
    let mut picks = vec![0usize; rounds];
    for _ in 0..400 {
        for pick in picks.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *pick = (x % rounds as u64) as usize;
        }
        let mut at = |init: &[f64]| {
            for (slot, &k) in scratch.iter_mut().zip(&picks) {
                *slot = init[k];
            }
            let i = ((rounds as f64 - 1.0) * p).round() as usize;
            *scratch.select_nth_unstable_by(i, |a, b| a.total_cmp(b)).1
        };
        let ours = at(&samples[ours]);
        let best = samples.iter().zip(peers).filter(|(_, &peer)| peer).map(|(s, _)| at(s)).fold(f64::INFINITY, f64::min);
        ratios.push(ours / best);
    }
    let ratios = sorted(ratios);
    Some((percentile(&ratios, 0.025), percentile(&ratios, 0.975)))
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

/// benches/NAME.c, built static.
fn build_static(name: &str) -> PathBuf {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("bench-{name}"));
    let src = format!("{}/benches/{name}.c", env!("CARGO_MANIFEST_DIR"));
    let status = Command::new("cc").args(["-static", "-O2", "-o"]).arg(&out).arg(&src).status().expect("cc");
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

/// One figure: a value per contender (lower is better), and optionally a text per contender
/// or a 95% confidence interval for lastcall's ratio to the best peer.
struct Row {
    figure: String,
    values: Vec<Option<f64>>,
    unit: &'static str,
    text: Option<Vec<String>>,
    /// By contender; empty when there are none.
    ratio_ci: Vec<Option<(f64, f64)>>,
}

impl Row {
    fn new(figure: impl Into<String>, values: Vec<Option<f64>>, unit: &'static str) -> Row {
        Row { figure: figure.into(), values, unit, text: None, ratio_ci: vec![] }
    }

    fn with_text(mut self, text: Vec<String>) -> Row {
        self.text = Some(text);
        self
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench -- --list` and `cargo test --benches` ask for test names: none here
    }
    let timed = TIMED.iter().any(|s| wanted(s));
    let load = loadavg();
    if timed && load > QUIET {
        if std::env::var_os("LASTCALL_BENCH_LOADED").is_none() {
            eprintln!(
                "the load average is {load:.2} (above {QUIET}): timings now would be noise. Wait for a quiet machine, \
                 run ONLY=instructions (callgrind counts do not depend on the load), or set LASTCALL_BENCH_LOADED=1 \
                 to run anyway with every loaded section marked"
            );
            std::process::exit(1);
        }
        eprintln!("note: load average {load:.2}, above {QUIET}: this run's timings are marked as not a measurement");
    }
    let mut load_log = LoadLog(Vec::new());
    let scale: f64 = std::env::var("SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1.0);
    let n = |full: usize| ((full as f64 * scale).round() as usize).max(5);
    let fixture = build_static("fixture");
    // The notify variant's service manager: a socket kept open for the whole run (lastcall
    // writes to it at shutdown, and relays the app's messages).
    let notify_path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-notify.sock");
    let _ = fs::remove_file(&notify_path);
    let _notify_socket = std::os::unix::net::UnixDatagram::bind(&notify_path).expect("a notify socket");
    // Read as a service manager would, so that a flood relayed to it does not fill its buffer.
    let manager = _notify_socket.try_clone().expect("a notify socket");
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while manager.recv(&mut buf).is_ok() {}
    });
    let inits = contenders(&notify_path);
    let peers: Vec<bool> = inits.iter().map(|i| i.peer).collect();
    let mut rows: Vec<Row> = Vec::new();

    // Size, and whether the binary is static (always: the table's size ratio needs it).
    let before = loadavg();
    let mut static_text = Vec::new();
    rows.push(Row::new(
        "binary size (ratio: to the static peers)",
        inits.iter().map(|i| Some(fs::metadata(&i.path).unwrap().len() as f64 / 1024.0)).collect(),
        "KiB",
    ));
    for init in &inits {
        let out = Command::new("file").arg("-L").arg(&init.path).output().map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
        static_text.push(if out.contains("statically linked") || out.contains("static-pie") { "yes".into() } else { "no".into() });
    }
    rows.push(Row::new("static?", vec![None; inits.len()], "").with_text(static_text));
    load_log.0.push(("size", before, loadavg()));

    // Start-up overhead: INIT -- true against true alone, spawn by spawn.
    load_log.section("startup", || {
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
    rows.push(Row::new(format!("start-up overhead, mean of {runs} (total − true alone)"), with.iter().map(|w| Some((w.iter().sum::<f64>() - alone_total) / runs as f64)).collect(), "µs"));
    rows.push(Row::new("start-up overhead, median", with.iter().map(|w| Some(percentile(&sorted(w.clone()), 0.5) - alone_median)).collect(), "µs"));
    });

    let start_one = |init: &Init, cpu: Option<usize>| -> (Child, i32, ChildStdout) {
        let mut child = init.as_pid1(&fixture, &[], &["record"], false, cpu).stdin(Stdio::null()).stdout(Stdio::piped()).spawn().unwrap();
        let mut out = child.stdout.take().unwrap();
        let mut ready = [0u8; 1];
        out.read_exact(&mut ready).unwrap();
        let pid = init_pid(&child);
        (child, pid, out)
    };
    let start_all = |cpu: Option<usize>| -> Vec<(Child, i32, ChildStdout)> { inits.iter().map(|init| start_one(init, cpu)).collect() };

    // Forwarding latency, with every init as PID 1 at once, taking turns signal by signal. Where
    // the scheduler happens to place each process costs more than any init's own work (a
    // wake-up on an idle core of a VM takes tens of µs), so placement is fixed: all on one
    // core, then the sender on one core and each init with its child on the other.
    load_log.section("latency", || {
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let placements: Vec<(&str, usize, usize)> =
        if cpus >= 2 { vec![("same core", 0, 0), ("across cores", 0, 1)] } else { vec![("same core", 0, 0)] };
    // Contenders differ by a few percent of a few µs here, so the medians need many samples.
    let signals = n(10_000).max(300);
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
        let (ci50, ci99) = (bootstrap_ratio_cis(&latency, &peers, 0.5), bootstrap_ratio_cis(&latency, &peers, 0.99));
        let latency: Vec<Vec<f64>> = latency.into_iter().map(sorted).collect();
        let mut p50 = Row::new(format!("forwarding latency p50, {label} ({} signals)", latency[0].len()), latency.iter().map(|l| Some(percentile(l, 0.5))).collect(), "µs");
        p50.ratio_ci = ci50;
        let mut p99 = Row::new(format!("forwarding latency p99, {label}"), latency.iter().map(|l| Some(percentile(l, 0.99))).collect(), "µs");
        p99.ratio_ci = ci99;
        rows.extend([p50, p99]);
    }
    });

    // The work behind those figures, without the noise: instructions each init runs per
    // forwarded signal, as counted by callgrind (the same count on every run).
    load_log.section("instructions", || {
    if !valgrind_works() {
        eprintln!("note: valgrind is missing (apt-get install valgrind); leaving out the instruction counts");
        return;
    }
    let signals = n(1000);
    let counts = inits.iter().map(|init| instructions_per_signal(init, &fixture, signals)).collect();
    rows.push(Row::new(format!("instructions per forwarded signal (callgrind, {signals} signals)"), counts, ""));
    let orphans = n(300);
    let counts = inits.iter().map(|init| instructions_per_orphan(init, &fixture, orphans)).collect();
    rows.push(Row::new(format!("instructions per reaped orphan (callgrind, {orphans} orphans 2 ms apart)"), counts, ""));
    // The health endpoint's own cost, in the one set-up that has it.
    let requests = n(200);
    let counts = inits.iter().map(|init| health_port(init).and_then(|port| instructions_per_health_request(init, &fixture, port, requests))).collect();
    rows.push(Row::new(format!("instructions per health request (callgrind, {requests} GET /ready)"), counts, ""));
    });

    // Idle wake-ups and idle RSS, all idle at once.
    load_log.section("idle", || {
    let running = start_all(None);
    let idle = Duration::from_secs_f64(5.0 * scale.min(1.0)).max(Duration::from_secs(2));
    let before: Vec<u64> = running.iter().map(|(_, pid, _)| status_field(*pid, "voluntary_ctxt_switches") + status_field(*pid, "nonvoluntary_ctxt_switches")).collect();
    std::thread::sleep(idle);
    let after: Vec<u64> = running.iter().map(|(_, pid, _)| status_field(*pid, "voluntary_ctxt_switches") + status_field(*pid, "nonvoluntary_ctxt_switches")).collect();
    rows.push(Row::new(format!("idle wake-ups in {:.0}s", idle.as_secs_f64()), before.iter().zip(&after).map(|(b, a)| Some((a - b) as f64)).collect(), ""));
    rows.push(Row::new("idle RSS", running.iter().map(|(_, pid, _)| Some(status_field(*pid, "VmRSS:") as f64)).collect(), "KiB"));
    for (mut child, pid, _) in running {
        kill(pid, libc::SIGKILL);
        let _ = child.wait();
    }
    });

    // Signal storm: 10k signals in a burst, then TERM; the init must survive and pass TERM on.
    // Standard signals pending twice are merged, so how many reach the child depends on how
    // fast the init takes them: a quick init forwards more, and the child's handler then
    // writes more. The time is therefore shown, not compared.
    load_log.section("storm", || {
    let mut running = start_all(None);
    let mut storm_text = Vec::new();
    for (child, pid, out) in running.iter_mut() {
        let mut reader = out.try_clone_fd();
        let drain = std::thread::spawn(move || {
            let (mut buf, mut delivered) = ([0u8; 8], 0u32);
            loop {
                if reader.read_exact(&mut buf).is_err() {
                    return (false, delivered);
                }
                if u64::from_ne_bytes(buf) == 0 {
                    return (true, delivered); // the child's TERM marker
                }
                delivered += 1;
            }
        });
        let t = Instant::now();
        for _ in 0..10_000 {
            kill(*pid, libc::SIGUSR1);
        }
        let survived = kill(*pid, 0);
        kill(*pid, libc::SIGTERM);
        let (got_term, delivered) = drain.join().unwrap();
        let status = child.wait().unwrap();
        let clean = status.code() == Some(0);
        storm_text.push(format!(
            "{}{}{}, {delivered} reached the child, {:.0}ms",
            if survived { "alive" } else { "DIED" },
            if got_term { ", TERM passed" } else { ", TERM LOST" },
            if clean { ", exit 0" } else { ", BAD EXIT" },
            t.elapsed().as_secs_f64() * 1000.0
        ));
    }
    rows.push(Row::new("signal storm (10k USR1, then TERM)", vec![None; inits.len()], "").with_text(storm_text));
    });

    // Reaping: a child leaves 2000 orphans; time until none is left, and the most at once. The
    // time is mostly the child's own forking, so it is noisy: 15 rounds, each init in turn.
    load_log.section("reaping", || {
    let orphans = n(2000).to_string();
    let rounds = 15;
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
    let mut reaping = Row::new(format!("reaping {orphans} orphans, median of {rounds}"), reap_ms.iter().map(|v| Some(percentile(&sorted(v.clone()), 0.5))).collect(), "ms");
    reaping.ratio_ci = bootstrap_ratio_cis(&reap_ms, &peers, 0.5);
    rows.push(reaping);
    rows.push(Row::new(format!("most zombies at once (sampled every 100 forks), median of {rounds}"), most.into_iter().map(|v| Some(percentile(&sorted(v), 0.5))).collect(), ""));
    });

    // Shutdown accuracy: only lastcall has a grace deadline to measure. Quiet, then with the app
    // flooding lastcall's notify socket, then with clients flooding its health endpoint: the
    // deadline must hold whatever the sockets bring.
    load_log.section("grace", || {
    let plain = inits.iter().position(|i| i.name == "lastcall").unwrap();
    let health = inits.iter().position(|i| health_port(i).is_some()).unwrap();
    let notify = inits.iter().position(|i| i.name == "lastcall, NOTIFY_SOCKET").unwrap();
    for (i, mode, flood, label) in [
        (plain, "ignore-term", false, ""),
        (notify, "notify-flood", false, " during a notify flood"),
        (health, "ignore-term", true, " during a health flood"),
    ] {
        let overshoot = sorted((0..n(40)).map(|_| grace_lateness(&inits[i], &fixture, mode, flood)).collect());
        let mut p50 = vec![None; inits.len()];
        p50[i] = Some(percentile(&overshoot, 0.5));
        let mut p99 = vec![None; inits.len()];
        p99[i] = Some(percentile(&overshoot, 0.99));
        rows.push(Row::new(format!("SIGKILL after --grace 300ms{label}, p50 late by"), p50, "ms"));
        rows.push(Row::new(format!("SIGKILL after --grace 300ms{label}, p99 late by"), p99, "ms"));
    }
    });

    print_table(&inits, &rows);
    print_load(&load_log);
}

/// The load average around each section, and whether a timed one ran on a loaded machine.
fn print_load(log: &LoadLog) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "\n| section | load average before | after | |\n|---|---|---|---|");
    for &(name, before, after) in &log.0 {
        let mark = if TIMED.contains(&name) && (before > QUIET || after > QUIET) { "**loaded: not a measurement**" } else { "" };
        let _ = writeln!(out, "| {name} | {before:.2} | {after:.2} | {mark} |");
    }
}

/// The port of an init's --health-listen, if it has one.
fn health_port(init: &Init) -> Option<u16> {
    let at = init.args.iter().position(|a| a == "--health-listen")?;
    init.args.get(at + 1)?.rsplit_once(':')?.1.parse().ok()
}

/// One GET /ready, read to the end (the endpoint closes the connection).
fn health_request(port: u16) -> bool {
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return false };
    let mut answer = Vec::new();
    stream.write_all(b"GET /ready HTTP/1.0\r\n\r\n").is_ok() && stream.read_to_end(&mut answer).is_ok() && answer.starts_with(b"HTTP/1.1 200")
}

/// User-space instructions lastcall runs per health request: as per signal, with requests.
fn instructions_per_health_request(init: &Init, fixture: &Path, port: u16, requests: usize) -> Option<f64> {
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
fn grace_lateness(init: &Init, fixture: &Path, mode: &str, health_flood: bool) -> f64 {
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
    let names: Vec<&str> = inits.iter().map(|i| i.name.as_str()).collect();
    // A ratio column for each contender that is not a peer: lastcall, its variants, the extras.
    let ours: Vec<usize> = (0..inits.len()).filter(|&i| !inits[i].peer).collect();
    let ratio_names: Vec<String> = ours.iter().map(|&i| format!("{} / best peer", inits[i].name)).collect();
    // And lastcall's distance to the floor: what any init must pay.
    let floor = inits.iter().position(|i| i.name == FLOOR);
    let _ = writeln!(out, "| figure | {} | {} | lastcall / floor |", names.join(" | "), ratio_names.join(" | "));
    let _ = writeln!(out, "|---|{}---|", "---|".repeat(names.len() + ours.len()));
    for row in rows {
        let cells: Vec<String> = (0..inits.len())
            .map(|i| match (&row.text, row.values[i]) {
                (Some(text), _) => text[i].clone(),
                (None, Some(v)) => format!("{} {}", fmt(v), row.unit).trim().to_string(),
                (None, None) => "n/a".into(),
            })
            .collect();
        // Size is compared with the static peers only: a dynamic binary needs a libc beside it.
        let comparable = |i: usize| inits[i].peer && (!row.figure.starts_with("binary size") || statics.get(i) == Some(&true));
        let best_peer = row.values
            .iter()
            .enumerate()
            .filter(|&(i, _)| comparable(i))
            .filter_map(|(_, v)| *v)
            .filter(|v| v.is_finite())
            .fold(None, |best: Option<f64>, v| Some(best.map_or(v, |b| b.min(v))));
        let ratios: Vec<String> = ours
            .iter()
            .map(|&i| match (row.values[i], best_peer) {
                (Some(ours), Some(best)) if best > 0.0 => match row.ratio_ci.get(i).copied().flatten() {
                    // Three places: across cores the whole lead is 0.5 %.
                    Some((low, high)) => format!("{:.3} ({low:.3}–{high:.3})", ours / best),
                    None => format!("{:.2}", ours / best),
                },
                (Some(ours), Some(best)) if best == 0.0 && ours == 0.0 => "equal (0)".into(),
                _ => "-".into(),
            })
            .collect();
        let to_floor = match (row.values[0], floor.and_then(|f| row.values[f])) {
            (Some(ours), Some(floor)) if floor > 0.0 => format!("{:.2}", ours / floor),
            (Some(ours), Some(floor)) if floor == 0.0 && ours == 0.0 => "equal (0)".into(),
            _ => "-".into(),
        };
        let _ = writeln!(out, "| {} | {} | {} | {to_floor} |", row.figure, cells.join(" | "), ratios.join(" | "));
    }
}

fn fmt(v: f64) -> String {
    if !v.is_finite() {
        "?".into()
    } else if v.abs() < 10.0 && v != v.trunc() {
        format!("{v:.2}")
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
