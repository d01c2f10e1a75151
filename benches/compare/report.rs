//! Which sections run (ONLY), the load average around each, and the table printed at the end.
//!
//! May import: contenders.

use std::fs;
use std::io::Write;
use std::process::Command;

use crate::contenders::{Init, FLOOR};

/// Whether `ONLY` (comma-separated) names `section`; without ONLY, every section runs.
pub fn wanted(section: &str) -> bool {
    std::env::var("ONLY").map_or(true, |only| only.split(',').any(|s| s.trim() == section))
}

/// The sections whose figures are times, which a loaded machine makes noise of.
pub const TIMED: [&str; 6] = ["startup", "latency", "idle", "storm", "reaping", "grace"];

/// The 1-minute load average.
pub fn loadavg() -> f64 {
    fs::read_to_string("/proc/loadavg").ok().and_then(|l| l.split_whitespace().next()?.parse().ok()).unwrap_or(f64::NAN)
}

/// Above this load average a timed section is no measurement.
pub const QUIET: f64 = 1.0;

/// Above this many cores' worth of CPU used by processes outside the benchmark during a timed
/// section, the section is no measurement either.
pub const OTHERS_QUIET: f64 = 0.25;

/// One section's conditions: the load average before and after it, the CPU that processes
/// outside the benchmark used while it ran (in cores), and the host's steal.
pub struct Conditions {
    pub name: &'static str,
    pub before: f64,
    pub after: f64,
    pub others: f64,
    pub steal: Steal,
}

/// Time the hypervisor gave the machine's vCPUs to someone else, over an interval: /proc/stat's
/// steal field, in ticks (USER_HZ, summed over the cores) and as a share of all the ticks.
#[derive(Clone, Copy, Default)]
pub struct Steal {
    pub ticks: u64,
    pub share: f64,
}

impl Steal {
    /// Since `from` (a `cpu_ticks()` reading).
    pub fn since(from: (u64, u64)) -> Steal {
        let (steal, total) = cpu_ticks();
        let (ticks, all) = (steal.saturating_sub(from.0), total.saturating_sub(from.1));
        Steal { ticks, share: if all > 0 { ticks as f64 / all as f64 } else { 0.0 } }
    }
}

impl std::fmt::Display for Steal {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{} ticks, {:.1} %", self.ticks, self.share * 100.0)
    }
}

/// The cpu line of /proc/stat: its steal ticks (the 8th field) and the sum of all its fields.
pub fn cpu_ticks() -> (u64, u64) {
    let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<u64> = stat.lines().next().unwrap_or("").split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect();
    // guest and guest_nice (fields 9 and 10) are already counted in user and nice.
    (ticks.get(7).copied().unwrap_or(0), ticks.iter().take(8).sum())
}

/// The kernel's sched_autogroup_enabled, as read (absent on a kernel built without autogroup).
pub fn autogroup() -> String {
    fs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled").map_or_else(|_| "absent".into(), |v| v.trim().to_string())
}

pub struct LoadLog(pub Vec<Conditions>);

impl LoadLog {
    /// Runs `section` if ONLY asks for it, recording the load around it.
    pub fn section(&mut self, name: &'static str, run: impl FnOnce()) {
        if !wanted(name) {
            return;
        }
        let before = loadavg();
        let (busy, ours, ticks, t) = (busy_seconds(), own_cpu_seconds(), cpu_ticks(), std::time::Instant::now());
        run();
        // The load average counts the section's own work too (reaping keeps both cores busy with
        // its forks), so it alone cannot tell a loaded machine from a busy section: the CPU that
        // was not the benchmark's (its own and every process it waited for) can.
        let others = ((busy_seconds() - busy) - (own_cpu_seconds() - ours)) / t.elapsed().as_secs_f64();
        self.0.push(Conditions { name, before, after: loadavg(), others: others.max(0.0), steal: Steal::since(ticks) });
    }
}

/// CPU time the whole machine spent outside its idle task, from /proc/stat (user, nice, system,
/// irq, softirq, steal).
fn busy_seconds() -> f64 {
    let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<f64> = stat.lines().next().unwrap_or("").split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect();
    let busy: f64 = [0, 1, 2, 5, 6, 7].iter().filter_map(|&i| ticks.get(i)).sum();
    // SAFETY: sysconf takes a constant and returns a number.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    busy / hz
}

/// CPU time of the benchmark and of every process it has waited for (each init waits for its
/// children, so the contenders' apps and orphans are in it).
fn own_cpu_seconds() -> f64 {
    let seconds = |who| {
        // SAFETY: rusage is plain integers, for which all zeroes is a value; getrusage fills it.
        let u = unsafe {
            let mut u: libc::rusage = std::mem::zeroed();
            libc::getrusage(who, &mut u);
            u
        };
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        tv(u.ru_utime) + tv(u.ru_stime)
    };
    seconds(libc::RUSAGE_SELF) + seconds(libc::RUSAGE_CHILDREN)
}

/// Whether a timed section's figures are noise: others' CPU, not the load average, which after
/// reaping still carries reaping's own forks (the run as a whole refuses to start above QUIET).
pub fn loaded(name: &str, others: f64) -> bool {
    TIMED.contains(&name) && others > OTHERS_QUIET
}

/// One figure: a value per contender (lower is better), and optionally a text per contender
/// or a 95% confidence interval for lastcall's ratio to the best peer.
pub struct Row {
    pub figure: String,
    pub values: Vec<Option<f64>>,
    pub unit: &'static str,
    pub text: Option<Vec<String>>,
    /// By contender; empty when there are none.
    pub ratio_ci: Vec<Option<(f64, f64)>>,
}

impl Row {
    pub fn new(figure: impl Into<String>, values: Vec<Option<f64>>, unit: &'static str) -> Row {
        Row { figure: figure.into(), values, unit, text: None, ratio_ci: vec![] }
    }

    pub fn with_text(mut self, text: Vec<String>) -> Row {
        self.text = Some(text);
        self
    }
}

/// The load average and the steal around each section, and whether a timed one ran on a loaded
/// machine.
pub fn print_load(log: &LoadLog) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "\n| section | load average before | after | other processes' CPU, cores | host steal | |\n|---|---|---|---|---|---|");
    for c in &log.0 {
        let mark = if loaded(c.name, c.others) { "**loaded: not a measurement**" } else { "" };
        let _ = writeln!(out, "| {} | {:.2} | {:.2} | {:.2} | {} | {mark} |", c.name, c.before, c.after, c.others, c.steal);
    }
}

/// Lines printed under the table, as they are.
pub fn print_notes(notes: &[String]) {
    let mut out = std::io::stdout().lock();
    for note in notes {
        let _ = writeln!(out, "\n{note}");
    }
}

/// The table, with `header` (the run's conditions: cgroup, autogroup, the dist binary) under
/// the title line.
pub fn print_table(inits: &[Init], rows: &[Row], header: &[String]) {
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
    for line in header {
        let _ = writeln!(out, "- {line}");
    }
    let _ = writeln!(out);
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

pub fn fmt(v: f64) -> String {
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
