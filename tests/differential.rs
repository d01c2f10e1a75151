//! A differential test against the real peers: seeded random scenarios, each run twice under the
//! real tini, tini-static or dumb-init (Debian's packages; scripts/setup-test-machine installs
//! them) and once under lastcall installed by that name (a copy named like the peer). What the
//! two real runs disagree on is the peer's own non-determinism and is dropped; everything else
//! lastcall must reproduce exactly, except the accepted deviations below, which
//! docs/drop-in.md lists with the same reasons.
//!
//! A scenario draws the peer, its flags and variables, PID 1 of a namespace or not, a session of
//! its own or not, an extra inherited fd, the mask and ignored signals the init inherits, what
//! the app does (catches, exits on or ignores TERM; ends by a code or a signal; forks a grandchild
//! or a daemon, or leaves an orphan; is a script without `#!`; is missing; is not executable) and
//! the signals sent to the init.
//! tests/differential/driver.py runs one scenario under one init, as PID 1 of a namespace of its
//! own under `timeout`, so that nothing outlives it; tests/differential/app.py is the app, which
//! records each observable itself. The driver waits on the app's lines (each signal is followed
//! by a forwarded fence before the next is sent), never on time.
//!
//! Compared: the wait status the init's parent sees; per process of the app's tree, the signals
//! it took in order (as PID 1, the init's end takes its namespace with it, so for the rest of the
//! tree only what it took while the main child lived), its mask, ignored signals, parent,
//! process group, session, open fds, environment and cwd; whether the init wrote to stderr and
//! to stdout; what is left running afterwards.
//!
//! `DIFFERENTIAL_SEED=S DIFFERENTIAL_COUNT=N cargo test --test differential -- --nocapture` runs
//! N scenarios from seed S (scenario i has seed S+i, so a failing scenario's seed with COUNT=1
//! runs it alone); `DIFFERENTIAL_JOBS` sets how many run at a time; `DIFFERENTIAL_KEEP=1` keeps
//! every run's directory (printed), not only those of a difference.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use common::{default_dispositions, scratch, LASTCALL};

const SEED: u64 = 0x1a57_ca11;
const COUNT: u64 = 165;
const JOBS: usize = 3;

/// splitmix64: small, seedable, and no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with `percent` % chance.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len())]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Peer {
    Tini,
    TiniStatic,
    DumbInit,
}

impl Peer {
    fn name(self) -> &'static str {
        match self {
            Peer::Tini => "tini",
            Peer::TiniStatic => "tini-static",
            Peer::DumbInit => "dumb-init",
        }
    }

    fn is_tini(self) -> bool {
        self != Peer::DumbInit
    }
}

const SIGCHLD: i32 = 17;
const SIGSEGV: i32 = 11;
/// What the test sends to the init (SEGV rarely: see the deviations).
const SENT: &[i32] = &[1, 2, 3, 10, 12, 14, 15, 18, 28];
/// TSTP, TTIN, TTOU: tini forwards TSTP only; dumb-init forwards them and then stops itself, and
/// the driver wakes it with CONT. Not drawn for dumb-init in setsid mode, where they reach the
/// app as SIGSTOP: when the stop takes the app relative to the fence is a race of the kernel's,
/// and the next signal could find the app stopped (tests/peers.rs's terminal scenarios cover
/// that mode).
const SUSPENDING: &[i32] = &[20, 21, 22];
/// What the init may inherit blocked or ignored. PIPE and XFSZ are left out: Python ignores them
/// at start-up, so the app cannot tell what it inherited for them.
const BLOCKABLE: &[i32] = &[1, 2, 10, 12, 14, 15, 28];
const IGNORABLE: &[i32] = &[1, 2, 3, 10, 12, 14, 15, 20, 21, 22, 28];
const CODES: &[i32] = &[0, 1, 3, 42, 143];
const DEATHS: &[i32] = &[1, 2, 9, 10, 15];

#[derive(Clone, Debug)]
struct Scenario {
    seed: u64,
    peer: Peer,
    flags: Vec<String>,
    env: Vec<(String, String)>,
    pid1: bool,
    session: bool,
    extra_fd: bool,
    command: &'static str,
    tree: &'static str,
    on_term: &'static str,
    ending: (&'static str, i32),
    signals: Vec<i32>,
    block: Vec<i32>,
    ignore: Vec<i32>,
}

fn draw(seed: u64) -> Scenario {
    let mut r = Rng(seed);
    let peer = r.pick(&[Peer::Tini, Peer::TiniStatic, Peer::DumbInit]);
    let mut flags: Vec<String> = vec![];
    let mut env: Vec<(String, String)> = vec![];
    let mut flag = |f: &str| flags.push(f.to_string());
    if peer.is_tini() {
        if r.chance(25) {
            flag("-s");
        }
        if r.chance(30) {
            flag("-g");
        }
        if r.chance(20) {
            flag("-w");
        }
        if r.chance(15) {
            flag("-p");
            flag(r.pick(&["SIGTERM", "SIGKILL", "SIGUSR1", "SIGHUP"]));
        }
        if r.chance(20) {
            flag("-e");
            flag(&r.pick(&[0, 1, 2, 3, 42, 126, 127, 143]).to_string());
        }
        for _ in 0..r.pick(&[0, 0, 0, 0, 0, 0, 0, 1, 2, 3]) {
            flag("-v");
        }
        for var in ["TINI_SUBREAPER", "TINI_KILL_PROCESS_GROUP"] {
            if r.chance(20) {
                env.push((var.into(), r.pick(&["", "0", "1"]).into()));
            }
        }
        if r.chance(15) {
            env.push(("TINI_VERBOSITY".into(), r.pick(&["0", "1", "2", "3"]).into()));
        }
    } else {
        if r.chance(30) {
            flag(r.pick(&["-c", "--single-child"]));
        }
        // Two `-r` for one signal are drawn too: the later wins.
        for _ in 0..r.pick(&[0, 0, 1, 2]) {
            let from = r.pick(&[1, 2, 3, 10, 12, 14, 15, 28]);
            let to = r.pick(&[0, 1, 2, 9, 10, 12, 15, 28]);
            flag("-r");
            flag(&format!("{from}:{to}"));
        }
        if r.chance(15) {
            flag(r.pick(&["-v", "--verbose"]));
        }
        if r.chance(25) {
            env.push(("DUMB_INIT_SETSID".into(), r.pick(&["0", "1", ""]).into()));
        }
        if r.chance(15) {
            env.push(("DUMB_INIT_DEBUG".into(), r.pick(&["1", "0"]).into()));
        }
    }
    let stops_the_app = peer == Peer::DumbInit
        && !flags.iter().any(|f| f == "-c" || f == "--single-child")
        && !env.iter().any(|(k, v)| k == "DUMB_INIT_SETSID" && v == "0");
    flags.push("--".into());
    let pid1 = r.chance(40);
    let session = r.chance(50);
    let extra_fd = r.chance(30);
    let command = r.pick(&["app", "app", "app", "app", "app", "app", "app", "app", "script", "missing", "noexec"]);
    let tree = r.pick(&["alone", "alone", "alone", "alone", "grandchild", "grandchild", "grandchild", "daemon", "daemon", "orphan"]);
    let on_term = r.pick(&["exit", "exit", "catch", "catch", "ignore"]);
    let ending = if r.chance(65) { ("code", r.pick(CODES)) } else { ("signal", r.pick(DEATHS)) };
    let signals = (0..r.below(4))
        .map(|_| match r.below(100) {
            0..=2 => SIGSEGV,
            3..=12 if !stops_the_app => r.pick(SUSPENDING),
            _ => r.pick(SENT),
        })
        .collect();
    let block = BLOCKABLE.iter().copied().filter(|_| r.chance(12)).collect();
    let mut ignore: Vec<i32> = IGNORABLE.iter().copied().filter(|_| r.chance(10)).collect();
    if r.chance(4) {
        ignore.push(SIGCHLD);
    }
    Scenario { seed, peer, flags, env, pid1, session, extra_fd, command, tree, on_term, ending, signals, block, ignore }
}

impl Scenario {
    /// tini's verbosity: `TINI_VERBOSITY` (atoi'd) wins over the `-v`s, which count from 1.
    fn tini_verbosity(&self) -> i64 {
        match self.env.iter().find(|(k, _)| k == "TINI_VERBOSITY") {
            Some((_, v)) => v.parse().unwrap_or(0),
            None => 1 + self.flags.iter().filter(|f| *f == "-v").count() as i64,
        }
    }

    fn json(&self, init: &Path) -> String {
        let strings = |v: &[String]| v.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", ");
        let ints = |v: &[i32]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ");
        let mut argv = vec![init.display().to_string()];
        argv.extend(self.flags.iter().cloned());
        let env = self.env.iter().map(|(k, v)| format!("{k:?}: {v:?}")).collect::<Vec<_>>().join(", ");
        format!(
            r#"{{"init": [{}], "env": {{{env}}}, "pid1": {}, "session": {}, "extra_fd": {}, "command": "{}", "tree": "{}", "on_term": "{}", "ending": ["{}", {}], "signals": [{}], "block": [{}], "ignore": [{}]}}"#,
            strings(&argv),
            self.pid1,
            self.session,
            self.extra_fd,
            self.command,
            self.tree,
            self.on_term,
            self.ending.0,
            self.ending.1,
            ints(&self.signals),
            ints(&self.block),
            ints(&self.ignore),
        )
    }
}

/// What differs for a reason that is the peer's, not lastcall's: docs/drop-in.md lists each
/// one, under "Remaining differences", with the same reason.
struct Deviation {
    name: &'static str,
    reason: &'static str,
    applies: fn(&Scenario) -> bool,
    /// The observables not compared; empty: the scenario is not run at all.
    skip: &'static [&'static str],
}

const ACCEPTED: &[Deviation] = &[
    Deviation {
        name: "tini started with SIGCHLD ignored",
        reason: "the kernel then reaps tini's children itself, so tini never sees its child end and hangs (not as PID 1 of a namespace: unshare sets CHLD back to SIG_DFL)",
        applies: |s| s.peer.is_tini() && !s.pid1 && s.ignore.contains(&SIGCHLD),
        skip: &[],
    },
    Deviation {
        name: "fault signals sent by another process",
        reason: "tini leaves SEGV unblocked: it kills tini when not PID 1 and is dropped as PID 1; lastcall forwards it, as dumb-init does",
        applies: |s| s.peer.is_tini() && s.signals.contains(&SIGSEGV),
        skip: &[],
    },
    Deviation {
        name: "tini's -v lines go to stdout",
        reason: "lastcall logs on stderr only, under every name: an app's stdout is its own data",
        applies: |s| s.peer.is_tini() && s.tini_verbosity() >= 2,
        skip: &["stdout written", "stderr written"],
    },
];

type Outcome = BTreeMap<String, String>;

fn driver() -> String {
    format!("{}/tests/differential/driver.py", env!("CARGO_MANIFEST_DIR"))
}

/// One run of the scenario written to `dir`/scenario.json; None when the driver gave no
/// outcome (its stderr then says why).
fn run(dir: &Path) -> Option<Outcome> {
    let mut cmd = command(dir);
    let stderr = fs::File::create(dir.join("driver.stderr")).unwrap();
    // The harness's ignored signals must not reach the init unless the scenario says so.
    // SAFETY: between fork and exec, default_dispositions only calls rt_sigaction.
    unsafe {
        cmd.pre_exec(default_dispositions);
    }
    let status = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(stderr).status().expect("timeout(1) runs");
    match fs::read_to_string(dir.join("outcome")) {
        Ok(text) => Some(text.lines().filter_map(|l| l.split_once('\t')).map(|(k, v)| (k.to_string(), v.to_string())).collect()),
        Err(_) => {
            let _ = fs::write(dir.join("driver.status"), status.to_string());
            None
        }
    }
}

/// The driver for the scenario in `dir`, as PID 1 of a PID namespace of its own, so that every
/// process of the run ends with it, and under `timeout` (generous: the driver's own waits are
/// 20 s each), so that even a driver stuck for good ends.
fn command(dir: &Path) -> Command {
    let mut cmd = Command::new("timeout");
    cmd.args(["-s", "KILL", "300", "unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "--", "python3", "-S"])
        .arg(driver())
        .arg(dir.join("scenario.json"))
        .arg(dir);
    cmd
}

/// The one-line reproduction and the driver's own command for a scenario.
fn repro(s: &Scenario, dir: &Path) -> String {
    format!(
        "DIFFERENTIAL_SEED={} DIFFERENTIAL_COUNT=1 cargo test --test differential -- --nocapture\n  \
         by hand: {:?}\n  scenario: {s:?}",
        s.seed,
        command(&dir.join("ours")),
    )
}

struct Tally {
    compared: usize,
    /// How many scenarios each accepted deviation applied to, and how many were not run.
    applied: BTreeMap<&'static str, usize>,
    not_run: usize,
    observables: usize,
    /// Each observable the real peer's two runs disagreed on, with the seeds.
    dropped: BTreeMap<String, Vec<u64>>,
    differences: Vec<String>,
}

fn compare(s: &Scenario, ours_bin: &Path, root: &Path, tally: &Mutex<Tally>) {
    let deviations: Vec<&Deviation> = ACCEPTED.iter().filter(|d| (d.applies)(s)).collect();
    {
        let mut t = tally.lock().unwrap();
        for d in &deviations {
            *t.applied.entry(d.name).or_default() += 1;
        }
        if deviations.iter().any(|d| d.skip.is_empty()) {
            t.not_run += 1;
            return;
        }
    }
    let dir = root.join(format!("scenario-{}", s.seed));
    let mut outcomes = vec![];
    for (name, init) in [("theirs-1", PathBuf::from(format!("/usr/bin/{}", s.peer.name()))), ("theirs-2", PathBuf::from(format!("/usr/bin/{}", s.peer.name()))), ("ours", ours_bin.to_path_buf())] {
        let run_dir = dir.join(name);
        fs::create_dir_all(&run_dir).unwrap();
        fs::write(run_dir.join("scenario.json"), s.json(&init)).unwrap();
        match run(&run_dir) {
            Some(outcome) => outcomes.push(outcome),
            None => {
                // The harness failed, not an init: that is never a difference to drop.
                let why = fs::read_to_string(run_dir.join("driver.stderr")).unwrap_or_default();
                tally.lock().unwrap().differences.push(format!("seed {}: the driver gave no outcome for {name}:\n{why}\n  reproduce: {}", s.seed, repro(s, &dir)));
                return;
            }
        }
    }
    let (a, b, ours) = (&outcomes[0], &outcomes[1], &outcomes[2]);
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).chain(ours.keys()).collect();
    let mut t = tally.lock().unwrap();
    t.compared += 1;
    let mut differs = vec![];
    for key in keys {
        if deviations.iter().any(|d| d.skip.contains(&key.as_str())) {
            continue;
        }
        if a.get(key) != b.get(key) {
            // Named by what it is, not by which process of which tree.
            t.dropped.entry(key.clone()).or_default().push(s.seed);
            continue;
        }
        t.observables += 1;
        if ours.get(key) != a.get(key) {
            differs.push(format!("    {key}: lastcall {} / {} {}", show(ours.get(key)), s.peer.name(), show(a.get(key))));
        }
    }
    if differs.is_empty() {
        if std::env::var_os("DIFFERENTIAL_KEEP").is_none() {
            let _ = fs::remove_dir_all(&dir);
        }
    } else {
        t.differences.push(format!(
            "seed {} ({} as {}):\n{}\n  reproduce: {}\n  runs kept in {}",
            s.seed,
            LASTCALL,
            s.peer.name(),
            differs.join("\n"),
            repro(s, &dir),
            dir.display()
        ));
    }
}

fn show(v: Option<&String>) -> &str {
    v.map_or("(none)", String::as_str)
}

fn env_u64(key: &str) -> Option<u64> {
    let v = std::env::var(key).ok()?;
    let v = v.trim();
    Some(match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).unwrap_or_else(|_| panic!("{key}: not a number: {v}")),
        None => v.parse().unwrap_or_else(|_| panic!("{key}: not a number: {v}")),
    })
}

#[test]
fn lastcall_does_what_the_real_peers_do() {
    for peer in ["tini", "tini-static", "dumb-init"] {
        assert!(Path::new("/usr/bin").join(peer).exists(), "/usr/bin/{peer} is missing: run scripts/setup-test-machine");
    }
    let seed = env_u64("DIFFERENTIAL_SEED").unwrap_or(SEED);
    let count = env_u64("DIFFERENTIAL_COUNT").unwrap_or(COUNT);
    let jobs = env_u64("DIFFERENTIAL_JOBS").map_or(JOBS, |j| j.max(1) as usize);
    let root = scratch("differential");
    // lastcall installed by each peer's name, as a copy.
    let bin = root.join("bin");
    fs::create_dir_all(&bin).unwrap();
    for peer in [Peer::Tini, Peer::TiniStatic, Peer::DumbInit] {
        fs::copy(LASTCALL, bin.join(peer.name())).unwrap();
    }
    let scenarios: Vec<Scenario> = (0..count).map(|i| draw(seed.wrapping_add(i))).collect();
    let tally = Mutex::new(Tally { compared: 0, applied: BTreeMap::new(), not_run: 0, observables: 0, dropped: BTreeMap::new(), differences: vec![] });
    let next = AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(s) = scenarios.get(i) else { break };
                compare(s, &bin.join(s.peer.name()), &root, &tally);
            });
        }
    });
    let t = tally.into_inner().unwrap();
    if std::env::var_os("DIFFERENTIAL_KEEP").is_some() {
        println!("differential: runs kept in {}", root.display());
    }
    println!(
        "differential: {} scenarios compared from seed {seed} ({} not run, as accepted deviations); \
         {} observables compared, {} dropped (the real peer's two runs differed: {:?}); {:.1} s",
        t.compared,
        t.not_run,
        t.observables,
        t.dropped.values().map(Vec::len).sum::<usize>(),
        t.dropped,
        started.elapsed().as_secs_f64()
    );
    for d in ACCEPTED {
        let what = if d.skip.is_empty() { "not run".to_string() } else { format!("not compared: {}", d.skip.join(", ")) };
        println!("  accepted deviation, {}: {} (in {} scenarios, {what})", d.name, d.reason, t.applied.get(d.name).unwrap_or(&0));
    }
    if t.differences.is_empty() && std::env::var_os("DIFFERENTIAL_KEEP").is_none() {
        let _ = fs::remove_dir_all(&root);
    }
    assert!(t.differences.is_empty(), "lastcall differs from the real peer in {} scenarios:\n{}", t.differences.len(), t.differences.join("\n"));
}
