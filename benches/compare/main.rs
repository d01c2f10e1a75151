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
//! missing one is left out. The child programs are benches/fixture.c, built static here. The
//! run takes place in a cgroup of its own (`cgroup`), as containers run; the header says where,
//! with the kernel's sched_autogroup_enabled, and each section's host steal is printed with its
//! load. LASTCALL_BENCH_DIST names the `scripts/dist` binary to show beside the host build (else
//! it is looked for in dist/ and target/dist/).
//!
//! This file runs the sections; `contenders` says who runs, `probes` measures, `stats` and
//! `report` turn the samples into the table, `cgroup` places the run.

mod cgroup;
mod contenders;
mod probes;
mod report;
mod stats;

use std::fs;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use contenders::{build_static, contenders, dist_binary, health_port, with_full_env, Init, NO_REAPING};
use probes::{
    grace_lateness, init_pid, instructions_per_health_request, instructions_per_orphan, instructions_per_signal, kill, monotonic_ns,
    pin_self, status_field, valgrind_works, TryCloneFd,
};
use report::{autogroup, cpu_ticks, loadavg, print_load, print_notes, print_table, wanted, LoadLog, Row, Steal, QUIET, TIMED};
use stats::{bootstrap_ratio_ci, bootstrap_ratio_cis, percentile, sorted, turn_order};

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
    // Before any thread starts, so that every thread of the harness moves with it.
    let placement = cgroup::enter();
    let mut header = vec![placement.describe(), format!("kernel.sched_autogroup_enabled = {}", autogroup())];
    let mut notes: Vec<String> = Vec::new();
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
    let dist = dist_binary();
    match &dist {
        Ok(path) => header.push(format!(
            "dist build: {} ({} bytes), a column of its own for size, start-up, idle and instructions, not a peer",
            path.display(),
            fs::metadata(path).map(|m| m.len()).unwrap_or(0)
        )),
        Err(why) => {
            eprintln!("note: no dist build to compare: {why}");
            header.push(format!("**dist build absent**: {why}"));
        }
    }
    let inits = contenders(&notify_path, dist.as_ref().ok().map(|p| p.as_path()));
    let peers: Vec<bool> = inits.iter().map(|i| i.peer).collect();
    // Who takes part in `figure`, by index.
    let taking = |figure: &str| -> Vec<usize> { (0..inits.len()).filter(|&i| inits[i].takes(figure)).collect() };
    let mut rows: Vec<Row> = Vec::new();

    // Size, and whether the binary is static (always: the table's size ratio needs it).
    let before = loadavg();
    let mut static_text = Vec::new();
    rows.push(Row::new(
        "binary size (ratio: to the static peers)",
        inits.iter().map(|i| i.takes("size").then(|| fs::metadata(&i.path).unwrap().len() as f64 / 1024.0)).collect(),
        "KiB",
    ));
    for init in &inits {
        let out = Command::new("file").arg("-L").arg(&init.path).output().map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
        static_text.push(if out.contains("statically linked") || out.contains("static-pie") { "yes".into() } else { "no".into() });
    }
    rows.push(Row::new("static?", vec![None; inits.len()], "").with_text(static_text));
    load_log.0.push(report::Conditions { name: "size", before, after: loadavg(), others: 0.0, steal: Steal::default() });

    // Start-up overhead: INIT -- true against true alone, spawn by spawn.
    load_log.section("startup", || {
    let runs = n(500);
    let mut alone = Vec::new();
    let mut with: Vec<Vec<f64>> = vec![Vec::new(); inits.len()];
    let quiet = |mut c: Command| {
        c.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        c
    };
    let starting = taking("startup");
    // A new order every round, `true` alone included: a spawn right after another of the same
    // binary finds its pages warm, and in a fixed rotation each lastcall set-up but the first
    // always followed another lastcall, and each peer a binary of its own.
    for round in 0..runs {
        for k in turn_order(starting.len() + 1, round) {
            let Some(&i) = starting.get(k) else {
                let t = Instant::now();
                let mut true_alone = Command::new(&fixture);
                with_full_env(&mut true_alone);
                quiet(true_alone).status().unwrap();
                alone.push(t.elapsed().as_secs_f64() * 1e6);
                continue;
            };
            let t = Instant::now();
            let status = quiet(inits[i].command(&fixture, &["true"])).status().unwrap();
            with[i].push(t.elapsed().as_secs_f64() * 1e6);
            assert!(status.success(), "{} -- true failed", inits[i].name);
        }
    }
    let alone_total: f64 = alone.iter().sum();
    rows.push(Row::new(format!("start-up overhead, mean of {runs} (total − true alone)"), with.iter().map(|w| (!w.is_empty()).then(|| (w.iter().sum::<f64>() - alone_total) / runs as f64)).collect(), "µs"));
    // Each spawn less `true` alone in the same round: paired, so that a slow stretch of the
    // run moves both, and the ratio's interval comes from resampling rounds.
    let overheads: Vec<Vec<f64>> = with.iter().map(|w| w.iter().zip(&alone).map(|(w, a)| w - a).collect()).collect();
    let mut median = Row::new("start-up overhead, median of the rounds' differences", overheads.iter().map(|o| (!o.is_empty()).then(|| percentile(&sorted(o.clone()), 0.5))).collect(), "µs");
    median.ratio_ci = cis_of_those_taking(&overheads, &peers, 0.5);
    rows.push(median);
    });

    let start_one = |init: &Init, cpu: Option<usize>| -> (Child, i32, ChildStdout) {
        let mut child = init.as_pid1(&fixture, &[], &["record"], false, cpu).stdin(Stdio::null()).stdout(Stdio::piped()).spawn().unwrap();
        let mut out = child.stdout.take().unwrap();
        let mut ready = [0u8; 1];
        out.read_exact(&mut ready).unwrap();
        let pid = init_pid(&child);
        (child, pid, out)
    };
    // Every init that takes part in `section`, by index.
    let start_all = |section: &str| -> Vec<(usize, Child, i32, ChildStdout)> {
        taking(section).into_iter().map(|i| {
            let (child, pid, out) = start_one(&inits[i], None);
            (i, child, pid, out)
        }).collect()
    };

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
        let latent = taking("latency");
        for session in 0..latent.len() {
            let order: Vec<usize> = (0..latent.len()).map(|k| latent[(k + session) % latent.len()]).collect();
            let mut pinned: Vec<Option<(Child, i32, ChildStdout)>> = (0..inits.len()).map(|_| None).collect();
            for &i in &order {
                pinned[i] = Some(start_one(&inits[i], Some(init_cpu)));
            }
            for round in 0..signals / latent.len() {
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
        let (ci50, ci99) = (cis_of_those_taking(&latency, &peers, 0.5), cis_of_those_taking(&latency, &peers, 0.99));
        let latency: Vec<Vec<f64>> = latency.into_iter().map(sorted).collect();
        let at = |p: f64| latency.iter().map(|l| (!l.is_empty()).then(|| percentile(l, p))).collect();
        let mut p50 = Row::new(format!("forwarding latency p50, {label} ({} signals)", latency[0].len()), at(0.5), "µs");
        p50.ratio_ci = ci50;
        let mut p99 = Row::new(format!("forwarding latency p99, {label}"), at(0.99), "µs");
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
    // One run first, not counted: a lastcall with NOTIFY_SOCKET sweeps the notify directories
    // that killed lastcalls of earlier sections left, once, and that one-off (5,300 instructions
    // in one full run, 5.3 per signal) would land in whichever counted run came first.
    for init in inits.iter().filter(|i| i.takes("signal")) {
        let _ = instructions_per_signal(init, &fixture, 1);
    }
    let counts = inits.iter().map(|init| init.takes("signal").then(|| instructions_per_signal(init, &fixture, signals)).flatten()).collect();
    rows.push(Row::new(format!("instructions per forwarded signal (callgrind, {signals} signals, each to a sleeping init)"), counts, ""));
    let orphans = n(300);
    let counts = inits.iter().map(|init| init.takes("orphan").then(|| instructions_per_orphan(init, &fixture, orphans)).flatten()).collect();
    rows.push(Row::new(format!("instructions per reaped orphan (callgrind, {orphans} orphans, each once the last is reaped)"), counts, ""));
    // The health endpoint's own cost, in the one set-up that has it.
    let requests = n(200);
    let counts = inits.iter().map(|init| health_port(init).and_then(|port| instructions_per_health_request(init, &fixture, port, requests))).collect();
    rows.push(Row::new(format!("instructions per health request (callgrind, {requests} GET /ready)"), counts, ""));
    });

    // Idle wake-ups and idle RSS, all idle at once.
    load_log.section("idle", || {
    let running = start_all("idle");
    let idle = Duration::from_secs_f64(5.0 * scale.min(1.0)).max(Duration::from_secs(2));
    let switches = |pid: i32| status_field(pid, "voluntary_ctxt_switches") + status_field(pid, "nonvoluntary_ctxt_switches");
    let before: Vec<u64> = running.iter().map(|(_, _, pid, _)| switches(*pid)).collect();
    std::thread::sleep(idle);
    let (mut wakeups, mut rss) = (vec![None; inits.len()], vec![None; inits.len()]);
    for ((i, _, pid, _), before) in running.iter().zip(&before) {
        wakeups[*i] = Some(switches(*pid).saturating_sub(*before) as f64);
        rss[*i] = Some(status_field(*pid, "VmRSS:") as f64);
    }
    rows.push(Row::new(format!("idle wake-ups in {:.0}s", idle.as_secs_f64()), wakeups, ""));
    rows.push(Row::new("idle RSS", rss, "KiB"));
    for (_, mut child, pid, _) in running {
        kill(pid, libc::SIGKILL);
        let _ = child.wait();
    }
    });

    // Signal storm: 10k signals in a burst, then TERM; the init must survive and pass TERM on.
    // Standard signals pending twice are merged, so how many reach the child depends on how
    // fast the init takes them: a quick init forwards more, and the child's handler then
    // writes more. The time is therefore shown, not compared.
    load_log.section("storm", || {
    let mut running = start_all("storm");
    let mut storm_text = vec!["n/a".to_string(); inits.len()];
    for (i, child, pid, out) in running.iter_mut() {
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
        storm_text[*i] = format!(
            "{}{}{}, {delivered} reached the child, {:.0}ms",
            if survived { "alive" } else { "DIED" },
            if got_term { ", TERM passed" } else { ", TERM LOST" },
            if clean { ", exit 0" } else { ", BAD EXIT" },
            t.elapsed().as_secs_f64() * 1000.0
        );
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
    let reaping = taking("reaping");
    for round in 0..rounds {
        for k in 0..reaping.len() {
            let i = reaping[(k + round) % reaping.len()];
            let out = inits[i].as_pid1(&fixture, &[], &["orphans", &orphans], true, None).stdin(Stdio::null()).stderr(Stdio::null()).output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let mut parts = text.split_whitespace();
            let ms: f64 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(f64::NAN);
            let at_once: u64 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
            reap_ms[i].push(ms);
            most[i].push(at_once as f64);
        }
    }
    let median = |v: &Vec<f64>| (!v.is_empty()).then(|| percentile(&sorted(v.clone()), 0.5));
    let mut row = Row::new(format!("reaping {orphans} orphans, median of {rounds}"), reap_ms.iter().map(median).collect(), "ms");
    row.ratio_ci = cis_of_those_taking(&reap_ms, &peers, 0.5);
    rows.push(row);
    // The criterion: against the init that does no reaping work, paired round by round.
    if let Some(base) = inits.iter().position(|i| i.name == NO_REAPING) {
        let text = (0..inits.len())
            .map(|i| match (i != base && !reap_ms[i].is_empty(), median(&reap_ms[i]), median(&reap_ms[base])) {
                (true, Some(ours), Some(theirs)) => match bootstrap_ratio_ci(&[reap_ms[i].clone(), reap_ms[base].clone()], &[false, true], 0.5, 0) {
                    Some((low, high)) => format!("{:.3} ({low:.3}–{high:.3})", ours / theirs),
                    None => format!("{:.3}", ours / theirs),
                },
                _ => "-".into(),
            })
            .collect();
        rows.push(Row::new(format!("reaping time / {NO_REAPING}, median (95% interval)"), vec![None; inits.len()], "").with_text(text));
    }
    rows.push(Row::new(format!("most zombies at once (sampled every 100 forks), median of {rounds}"), most.iter().map(median).collect(), ""));
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
        // Each sample with the steal during it: a late SIGKILL in a sample the hypervisor took
        // the machine from is the host's, not lastcall's.
        let samples: Vec<(f64, Steal)> = (0..n(40))
            .map(|_| {
                let ticks = cpu_ticks();
                let late = grace_lateness(&inits[i], &fixture, mode, flood);
                (late, Steal::since(ticks))
            })
            .collect();
        notes.push(format!(
            "grace samples, {}{label}, ms late (steal ticks): {}",
            inits[i].name,
            samples.iter().map(|(late, steal)| format!("{late:.2} ({})", steal.ticks)).collect::<Vec<_>>().join(", ")
        ));
        let overshoot = sorted(samples.iter().map(|s| s.0).collect());
        let mut p50 = vec![None; inits.len()];
        p50[i] = Some(percentile(&overshoot, 0.5));
        let mut p99 = vec![None; inits.len()];
        p99[i] = Some(percentile(&overshoot, 0.99));
        rows.push(Row::new(format!("SIGKILL after --grace 300ms{label}, p50 late by"), p50, "ms"));
        rows.push(Row::new(format!("SIGKILL after --grace 300ms{label}, p99 late by"), p99, "ms"));
    }
    });

    print_table(&inits, &rows, &header);
    print_load(&load_log);
    print_notes(&notes);
    drop(placement);
}

/// The ratio intervals of `bootstrap_ratio_cis` among the contenders with samples (a section
/// some contenders sit out would otherwise leave every interval empty).
fn cis_of_those_taking(samples: &[Vec<f64>], peers: &[bool], p: f64) -> Vec<Option<(f64, f64)>> {
    let taking: Vec<usize> = (0..samples.len()).filter(|&i| !samples[i].is_empty()).collect();
    let subset: Vec<Vec<f64>> = taking.iter().map(|&i| samples[i].clone()).collect();
    let subset_peers: Vec<bool> = taking.iter().map(|&i| peers[i]).collect();
    let cis = bootstrap_ratio_cis(&subset, &subset_peers, p);
    let mut all = vec![None; samples.len()];
    for (k, &i) in taking.iter().enumerate() {
        all[i] = cis[k];
    }
    all
}
