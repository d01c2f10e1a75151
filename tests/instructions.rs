//! The regression guard for lastcall's hot paths: callgrind's instruction counts, which repeat
//! exactly whatever the machine's load, for lastcall in each of its set-ups and for every peer
//! installed (tini, tini-static, dumb-init, catatonit), all measured in this same run. The test
//! fails when lastcall, in any set-up, runs more instructions per forwarded signal or per reaped
//! orphan than the best peer, or more than a fixed ceiling (`SIGNAL_CEILING`, `ORPHAN_CEILING`):
//! the peers alone would let a rise go through as long as it stayed under them. The method is
//! the benchmark's (benches/compare/): a run with N signals (orphans) minus a run with none
//! (one), divided by N, each signal (orphan) sent only once the init is asleep again, so that
//! every one costs one whole wake-up. `--nocapture` prints the table. A second test holds the
//! release build to the size of the smallest static peer.
//!
//! Needs valgrind, the peers, gcc and a static libc (scripts/setup-test-machine installs them).
//! About 40 valgrind runs, 10-40 s on a loaded 2-core machine, plus one release build of
//! lastcall the first time (the counts of an unoptimised build say nothing).
mod common;

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};


/// Enough to make start-up noise (a few instructions that differ between two runs) vanish in
/// the division, few enough to keep the test to seconds.
const SIGNALS: usize = 200;
const ORPHANS: usize = 40;

/// The most instructions lastcall may run per forwarded signal, and per reaped orphan, in any
/// set-up, whatever the peers measure (docs/benchmark.md has the figures behind them).
const SIGNAL_CEILING: f64 = 52.0;
const ORPHAN_CEILING: f64 = 75.0;

struct Contender {
    name: String,
    path: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    peer: bool,
}

/// The user of the `--user` set-up: nobody, as the passwd file names it, else its usual ids.
fn app_user() -> String {
    let passwd = fs::read_to_string("/etc/passwd").unwrap_or_default();
    if passwd.lines().any(|l| l.starts_with("nobody:")) { "nobody".into() } else { "65534:65534".into() }
}

/// lastcall in every set-up whose signal path differs (sockets in the loop, a session, its own
/// group, another user for the app), and the peers.
fn contenders(scratch: &Path) -> Vec<Contender> {
    let owned = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let notify = scratch.join("notify.sock").display().to_string();
    // The notify set-up's private directory goes where nothing else runs: at its first pass,
    // lastcall sweeps what dead lastcalls left in that directory's base (/run, /dev/shm),
    // whose work would then depend on whatever else runs on the machine.
    let runtime = scratch.join("run");
    fs::create_dir_all(&runtime).unwrap();
    let binary = common::release_binary();
    let lastcall = |name: &str, args: &[&str], env: Vec<(String, String)>| Contender {
        name: name.into(),
        path: binary.clone(),
        args: owned(args),
        env,
        peer: false,
    };
    let mut all = vec![
        lastcall("lastcall", &["--"], vec![]),
        lastcall("lastcall --health-listen", &["--health-listen", &format!("127.0.0.1:{port}"), "--"], vec![]),
        lastcall(
            "lastcall, NOTIFY_SOCKET",
            &["--"],
            vec![("NOTIFY_SOCKET".into(), notify), ("RUNTIME_DIRECTORY".into(), runtime.display().to_string())],
        ),
        lastcall("lastcall --setsid", &["--setsid", "--"], vec![]),
        lastcall("lastcall -c", &["-c", "--"], vec![]),
        lastcall("lastcall --user", &["--user", &app_user(), "--"], vec![]),
    ];
    for (name, path, args) in [
        ("tini", "/usr/bin/tini", &["-s", "--"][..]),
        ("tini-static", "/usr/bin/tini-static", &["-s", "--"]),
        ("dumb-init", "/usr/bin/dumb-init", &["--"]),
        ("catatonit", "/usr/bin/catatonit", &["--"]),
    ] {
        assert!(Path::new(path).exists(), "{path} is missing: run scripts/setup-test-machine");
        all.push(Contender { name: name.into(), path: path.into(), args: owned(args), env: vec![], peer: true });
    }
    all
}

/// benches/fixture.c (the benchmark's child), built static once.
fn fixture() -> PathBuf {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("instructions-fixture-{:010}", std::process::id()));
    let src = format!("{}/benches/fixture.c", env!("CARGO_MANIFEST_DIR"));
    let status = Command::new("cc").args(["-static", "-O2", "-o"]).arg(&out).arg(&src).status().expect("cc");
    assert!(status.success(), "building {src} needs gcc and a static libc (libc6-dev)");
    out
}

/// Kills the process (valgrind, or unshare) if the test fails before it ends.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// callgrind's instruction total for `c` around `fixture mode`, as PID 1 of a new PID namespace
/// if `pid1`; `drive` runs it to the end.
fn callgrind_total(c: &Contender, fixture: &Path, scratch: &Path, mode: &[&str], pid1: bool, drive: impl FnOnce(&mut Child)) -> f64 {
    static N: AtomicUsize = AtomicUsize::new(0);
    let out = scratch.join(format!("callgrind.{}", N.fetch_add(1, Ordering::SeqCst)));
    let mut command = if pid1 {
        let mut command = Command::new("unshare");
        command.args(["--pid", "--fork", "--kill-child", "--mount-proc", "--", "valgrind"]);
        command
    } else {
        Command::new("valgrind")
    };
    command.arg("--tool=callgrind").arg(format!("--callgrind-out-file={}", out.display()));
    // The same environment wherever the test runs, and names of one length (the pids in them
    // padded): their sizes place the init's stack, and the count per orphan moved with them
    // (the same binary measured differently under cargo's environment and under a bare one).
    command.arg(&c.path).args(&c.args).arg(fixture).args(mode);
    command.env_clear().env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin").envs(c.env.iter().map(|(k, v)| (k, v)));
    let mut child = Reaped(command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("valgrind"));
    drive(&mut child.0);
    let status = child.0.wait().unwrap();
    assert!(status.success(), "{}: {status}", c.name);
    let text = fs::read_to_string(&out).unwrap_or_else(|e| panic!("{}: no callgrind output ({e})", c.name));
    text.lines().find_map(|l| l.strip_prefix("summary: ")).and_then(|s| s.trim().parse().ok()).expect("callgrind's summary")
}

/// Until `pid` sleeps (state S): an init sleeps only in its one wait, so it has finished with
/// the last signal (orphan). Without this, a signal sent while the init is still on its way
/// back to its wait is taken in the same pass, and a slow pass (valgrind on a busy machine)
/// makes the count per signal smaller, by how much depending on the machine.
fn await_asleep(pid: i32) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next());
        if state.is_none_or(|s| s == "S") {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{pid} never went back to sleep");
        std::thread::sleep(std::time::Duration::from_micros(20));
    }
}

fn per_signal(c: &Contender, fixture: &Path, scratch: &Path) -> f64 {
    let total = |count: usize| {
        callgrind_total(c, fixture, scratch, &["record"], false, |child| {
            let pid = child.id() as i32;
            let mut stdout = child.stdout.take().unwrap();
            let mut buf = [0u8; 8];
            stdout.read_exact(&mut buf[..1]).expect("the fixture's start");
            for _ in 0..count {
                await_asleep(pid);
                common::kill(pid, libc::SIGUSR1);
                // The child's handler wrote its time: the signal went through.
                stdout.read_exact(&mut buf).expect("a forwarded signal");
            }
            await_asleep(pid);
            common::kill(pid, libc::SIGTERM);
            // The child's last word (0, at TERM), read so that it does not die of SIGPIPE.
            stdout.read_exact(&mut buf).expect("the TERM marker");
        })
    };
    (total(SIGNALS) - total(0)) / SIGNALS as f64
}

/// Each orphan comes only once the init has reaped the one before and sleeps again (`fixture
/// orphans N sync`): one SIGCHLD, one wake-up and one reap per orphan. A fixed pause (2 ms) let
/// a slow pass under valgrind take two exits at once, and the figure moved by 40 instructions
/// from run to run. The count is written at one width in both runs, for the reason in
/// `callgrind_total`.
fn per_orphan(c: &Contender, fixture: &Path, scratch: &Path) -> f64 {
    let total = |count: usize| callgrind_total(c, fixture, scratch, &["orphans", &format!("{count:05}"), "sync"], true, |_| {});
    (total(ORPHANS + 1) - total(1)) / ORPHANS as f64
}

#[test]
fn lastcall_runs_fewer_instructions_per_signal_and_per_orphan_than_any_peer_and_its_ceilings() {
    // Not common::scratch: its name's length varies with the pid (see callgrind_total).
    let scratch = std::env::temp_dir().join(format!("lastcall-instructions-{:010}", std::process::id()));
    let _ = fs::remove_dir_all(&scratch);
    fs::create_dir_all(&scratch).unwrap();
    // The notify set-up's service manager: a socket nobody reads (lastcall writes to it only at
    // shutdown).
    let _manager = std::os::unix::net::UnixDatagram::bind(scratch.join("notify.sock")).unwrap();
    let fixture = fixture();
    let all = contenders(&scratch);
    // Two at a time (the machine's cores); the counts do not depend on how many run at once.
    let results: Vec<(f64, f64)> = std::thread::scope(|s| {
        let chunks: Vec<_> = all.chunks(all.len().div_ceil(2)).collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| s.spawn(|| chunk.iter().map(|c| (per_signal(c, &fixture, &scratch), per_orphan(c, &fixture, &scratch))).collect::<Vec<_>>()))
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let _ = fs::remove_file(&fixture);
    let best = |pick: fn(&(f64, f64)) -> f64| {
        all.iter().zip(&results).filter(|(c, _)| c.peer).map(|(c, r)| (pick(r), c.name.as_str())).min_by(|a, b| a.0.total_cmp(&b.0)).unwrap()
    };
    let (best_signal, best_orphan) = (best(|r| r.0), best(|r| r.1));
    eprintln!("| contender | instructions per forwarded signal | per reaped orphan |\n|---|---|---|");
    for (c, (signal, orphan)) in all.iter().zip(&results) {
        eprintln!("| {} | {signal:.1} | {orphan:.1} |", c.name);
    }
    // Compared in whole instructions: a forwarded signal (a reaped orphan) runs a whole number
    // of them, and a fraction is what start-up did differently in the two runs (a pid with one
    // digit more, a random name), divided by N: lastcall --health-listen measured 68.0 and 68.1
    // per signal in two runs of the same binary.
    let whole = |count: f64| count.round();
    let mut worse = Vec::new();
    for (c, &(signal, orphan)) in all.iter().zip(&results).filter(|(c, _)| !c.peer) {
        if whole(signal) > whole(best_signal.0) {
            worse.push(format!("{}: {signal:.1} instructions per signal, {} {:.1}", c.name, best_signal.1, best_signal.0));
        }
        if whole(orphan) > whole(best_orphan.0) {
            worse.push(format!("{}: {orphan:.1} instructions per orphan, {} {:.1}", c.name, best_orphan.1, best_orphan.0));
        }
        if whole(signal) > SIGNAL_CEILING {
            worse.push(format!("{}: {signal:.1} instructions per signal, above the ceiling of {SIGNAL_CEILING}", c.name));
        }
        if whole(orphan) > ORPHAN_CEILING {
            worse.push(format!("{}: {orphan:.1} instructions per orphan, above the ceiling of {ORPHAN_CEILING}", c.name));
        }
    }
    let _ = fs::remove_dir_all(&scratch);
    assert!(worse.is_empty(), "more work than the best peer or the ceiling:\n{}", worse.join("\n"));
}

/// The size a user sees after the Quick start's `cargo build --release`: no bigger than the
/// smallest static peer installed here (catatonit, tini-static), as a binary bind-mounted into
/// every container by `--init-path` costs its size in each one's page cache.
#[test]
fn the_release_build_is_no_bigger_than_the_smallest_static_peer() {
    let ours = fs::metadata(common::release_binary()).unwrap().len();
    let peers: Vec<(u64, &str)> = ["/usr/bin/catatonit", "/usr/bin/tini-static"]
        .into_iter()
        .map(|path| (fs::metadata(path).unwrap_or_else(|e| panic!("{path}: {e}: run scripts/setup-test-machine")).len(), path))
        .collect();
    let (smallest, which) = peers.iter().min().copied().unwrap();
    eprintln!("release build {ours} bytes; {}", peers.iter().map(|(size, path)| format!("{path} {size}")).collect::<Vec<_>>().join(", "));
    assert!(ours <= smallest, "the release build is {ours} bytes, more than {which}'s {smallest}");
}
