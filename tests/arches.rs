//! lastcall on every architecture it ships for. One scripts/dist run builds the release binaries
//! (the same toolchains and linkers as the artifacts) and runs each foreign target's unit tests
//! under qemu-user (`cargo test --lib --target T` with a qemu runner). Then:
//!
//! - each foreign target's binary runs the smoke suite below under qemu-user, the way `docker
//!   run --platform` runs a foreign image, in lastcall's default mode;
//! - i686 runs natively on this x86_64 kernel: its unit tests and the integration suites run
//!   against it (all but `HOST_ONLY`);
//! - the host's own target runs the smoke suite on the shipped binary (the rest of `cargo test`
//!   covers its code).
//!
//! Both tests run in CI (`cargo test`).
//! `LASTCALL_ARCHES=aarch64-unknown-linux-musl,...` picks targets (default: all of them). Needs
//! qemu-user-static (scripts/setup-test-machine installs it). The smoke suite's children are
//! the host's own programs (python3, sh): qemu-user hands execve to the kernel, so they run
//! natively under the emulated lastcall.
mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{fixture, free_port, http_get, kill, lines, monotonic_ns, scratch, wait_line, wait_until};

const SEC: Duration = Duration::from_secs(1);
/// Deadlines for a binary under emulation on a loaded 2-core machine.
const LONG: Duration = Duration::from_secs(60);

/// scripts/dist's targets.
const TARGETS: [&str; 7] = [
    "x86_64-unknown-linux-musl",
    "aarch64-unknown-linux-musl",
    "armv7-unknown-linux-musleabihf",
    "i686-unknown-linux-musl",
    "riscv64gc-unknown-linux-musl",
    "powerpc64le-unknown-linux-musl",
    "s390x-unknown-linux-musl",
];

#[derive(Clone, Copy, PartialEq)]
enum Runs {
    /// The test binary's own target: smoke suite only.
    Host,
    /// The host kernel runs it directly (i686 on x86_64).
    Natively,
    /// Under this qemu-user binary.
    Under(&'static str),
}

fn how_it_runs(target: &str) -> Runs {
    let arch = target.split('-').next().unwrap();
    let host = std::env::consts::ARCH;
    let qemu = match arch {
        "x86_64" => "qemu-x86_64-static",
        "aarch64" => "qemu-aarch64-static",
        "armv7" => "qemu-arm-static",
        "i686" => "qemu-i386-static",
        "riscv64gc" => "qemu-riscv64-static",
        "powerpc64le" => "qemu-ppc64le-static",
        "s390x" => "qemu-s390x-static",
        other => panic!("no qemu known for {other}"),
    };
    match (host, arch) {
        (h, a) if h == a => Runs::Host,
        ("x86_64", "i686") => Runs::Natively,
        _ => Runs::Under(qemu),
    }
}

fn selected(target: &str) -> bool {
    match std::env::var("LASTCALL_ARCHES") {
        Ok(list) => list.split(',').any(|t| t.trim() == target),
        Err(_) => true,
    }
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs a command from the repository with a clean cargo environment (the outer `cargo test`
/// sets variables and a toolchain that the inner cargo must not inherit) and asserts success.
fn run_in_repo(program: &str, args: &[&str], env: &[(String, String)]) {
    let path = repo().join(program);
    let mut cmd = Command::new(if program.contains('/') { path.as_os_str() } else { program.as_ref() });
    common::outside_cargo(cmd.args(args).current_dir(repo()).stdin(Stdio::null()));
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    let started = Instant::now();
    let status = cmd.status().unwrap_or_else(|e| panic!("{program}: {e}"));
    eprintln!("{program} {} took {:.0?}", args.join(" "), started.elapsed());
    assert!(status.success(), "{program} {args:?}: {status}");
}

/// The targets this kernel runs without an emulator (here x86_64 and i686): in CI.
#[test]
fn native_targets() {
    check(|t| !matches!(how_it_runs(t), Runs::Under(_)));
}

/// The foreign targets, under qemu-user. Every target builds std from source (-Zbuild-std),
/// which is most of these tests' time on a fresh machine.
#[test]
fn emulated_targets() {
    check(|t| matches!(how_it_runs(t), Runs::Under(_)));
}

fn check(which: impl Fn(&str) -> bool) {
    // One scripts/dist run at a time: they share target/arches and dist/SHA256SUMS.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let targets: Vec<&str> = TARGETS.into_iter().filter(|t| which(t) && selected(t)).collect();
    if targets.is_empty() {
        eprintln!("LASTCALL_ARCHES names none of {TARGETS:?}: nothing run");
        return;
    }
    // One scripts/dist run: cargo builds each kind of target in parallel, then runs the foreign
    // ones' unit tests under qemu-user.
    let dist = repo().join("target/arches/dist");
    let mut env = vec![("DIST_DIR".to_string(), dist.display().to_string())];
    for target in &targets {
        if let Runs::Under(qemu) = how_it_runs(target) {
            env.push((format!("CARGO_TARGET_{}_RUNNER", target.to_uppercase().replace('-', "_")), qemu.to_string()));
        }
    }
    // The native targets' unit tests run elsewhere: the host's in `cargo test` itself, i686's
    // with its integration suites (one build of the library for both).
    let lib_tests = targets.iter().any(|t| matches!(how_it_runs(t), Runs::Under(_)));
    let args: Vec<&str> = lib_tests.then_some("--lib-tests").into_iter().chain(targets.iter().copied()).collect();
    run_in_repo("scripts/dist", &args, &env);

    // The smoke suites side by side (each waits on deadlines fit for emulation), then the
    // native whole-suite runs on their own, since those measure timing.
    let failed: Vec<String> = std::thread::scope(|scope| {
        let smokes: Vec<_> = targets
            .iter()
            .filter(|t| how_it_runs(t) != Runs::Natively)
            .map(|&t| {
                let lc = Lastcall { bin: dist.join(format!("lastcall-{t}")), qemu: if let Runs::Under(q) = how_it_runs(t) { Some(q) } else { None } };
                (t, scope.spawn(move || smoke(&lc)))
            })
            .collect();
        smokes.into_iter().filter_map(|(t, h)| h.join().is_err().then(|| format!("{t}: smoke suite"))).collect()
    });
    let mut failed = failed;
    for target in targets.iter().filter(|t| how_it_runs(t) == Runs::Natively) {
        if std::panic::catch_unwind(|| whole_suite(target)).is_err() {
            failed.push(format!("{target}: integration suite"));
        }
    }
    assert!(failed.is_empty(), "failed: {failed:?}");
}

/// Suites that test something other than the architecture, which the host target's run covers:
/// this file; the real hosts (dockerd, Podman, systemd: three minutes of CI); the peers' own
/// suites and the side-by-side scenarios with the peers (the personalities are data, the same on
/// every target: half a minute to eight minutes); the real-world suite, whose nginx, HAProxy and
/// runc exercise no system call that supervision, handshake and trust do not (half a minute);
/// the README's blocks and the set-up scripts (shell and cargo); the instruction counts,
/// which are measured against the peers Debian ships for the host; the packages and the
/// wheel, which hold the release binaries themselves; the differential test against the real
/// peers (as the side-by-side scenarios); the fuzz targets, built for the host's triple
/// from the library's source, which has no per-architecture parser; and the independent
/// benchmark harness, which measures the host's release build.
const HOST_ONLY: [&str; 13] = [
    "arches", "hosts", "peer_suites", "peers", "differential", "real_world", "readme_blocks", "setup_host", "instructions", "packages",
    "wheel", "fuzz", "independent_bench",
];

/// The unit tests and the integration suites (all of tests/ but `HOST_ONLY`) against `target`'s
/// binary, less the timing-only tests (named `timing_*`): they measure the host's scheduler, not
/// the architecture.
fn whole_suite(target: &str) {
    let mut args = vec!["+1.95.0", "test", "--locked", "--target", target, "--lib"];
    let suites: Vec<String> = fs::read_dir(repo().join("tests"))
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".rs").map(str::to_string))
        .filter(|name| !HOST_ONLY.contains(&name.as_str()))
        .collect();
    for suite in &suites {
        args.extend(["--test", suite]);
    }
    args.extend(["--", "--skip", "timing_"]);
    run_in_repo("cargo", &args, &[("CARGO_TARGET_DIR".into(), "target/arches".into())]);
}

/// One target's binary, and the qemu-user that runs it if it is foreign.
struct Lastcall {
    bin: PathBuf,
    qemu: Option<&'static str>,
}

/// lastcall started by a test; killed with everything under it if the test fails.
struct Started {
    child: Child,
    dir: PathBuf,
}

impl Lastcall {
    fn command(&self, pid1: bool) -> Command {
        let mut words: Vec<&std::ffi::OsStr> = vec![];
        if pid1 {
            words.extend(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "--"].map(std::ffi::OsStr::new));
        }
        if let Some(q) = self.qemu {
            words.push(q.as_ref());
        }
        words.push(self.bin.as_os_str());
        let mut cmd = Command::new(words[0]);
        cmd.args(&words[1..]).stdin(Stdio::null());
        cmd
    }

    /// Runs lastcall to its end: (exit code, stderr).
    fn run(&self, pid1: bool, args: &[&str]) -> (i32, String) {
        let out = self.command(pid1).args(args).output().unwrap();
        (exit_code(out.status), String::from_utf8_lossy(&out.stderr).into_owned())
    }

    /// Starts lastcall (not as PID 1: the pid is lastcall's own, so signals go straight to it).
    fn start(&self, name: &str, args: &[&str]) -> Started {
        let dir = scratch(&format!("arch-{name}"));
        let child = self
            .command(false)
            .args(args)
            .current_dir(&dir)
            .stdout(fs::File::create(dir.join("stdout")).unwrap())
            .stderr(fs::File::create(dir.join("stderr")).unwrap())
            .spawn()
            .unwrap();
        Started { child, dir }
    }
}

impl Started {
    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn report(&self) -> PathBuf {
        self.dir.join("report")
    }

    fn stderr(&self) -> String {
        fs::read_to_string(self.dir.join("stderr")).unwrap_or_default()
    }

    fn wait(&mut self, limit: Duration) -> i32 {
        let child = &mut self.child;
        exit_code(wait_until(limit, "lastcall to exit", || child.try_wait().unwrap()))
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if self.child.try_wait().unwrap().is_none() {
            for pid in common::descendants(self.pid()).into_iter().chain([self.pid()]) {
                // SAFETY: kill takes plain integers.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            let _ = self.child.wait();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// The real-process checks, each in lastcall's default mode (no --no-subreaper).
fn smoke(lc: &Lastcall) {
    let name = lc.bin.file_name().unwrap().to_string_lossy().into_owned();
    let target = name.trim_start_matches("lastcall-");

    // --version names the target it was built for.
    let out = lc.command(false).arg("--version").output().unwrap();
    let version = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success() && version.starts_with("lastcall ") && version.contains(target), "{version}");

    // The subreaper: qemu-user refuses it. As the default that is one warning and lastcall goes
    // on; asked for with -s, it is lastcall's own failure, 125.
    let (code, stderr) = lc.run(false, &["--", "sh", "-c", "exit 3"]);
    assert_eq!(code, 3, "{stderr}");
    let refused = stderr.contains("cannot become a child subreaper");
    assert_eq!(refused, lc.qemu.is_some(), "the subreaper warning only under emulation: {stderr}");
    assert_eq!(stderr.lines().filter(|l| l.contains("subreaper")).count(), usize::from(refused), "once: {stderr}");
    let (code, stderr) = lc.run(false, &["-s", "--", "true"]);
    assert_eq!(code, if refused { 125 } else { 0 }, "{stderr}");

    // Exit codes: the app's own, 128+N for a signal, 127 and 126 for exec failures.
    assert_eq!(lc.run(false, &["--", "sh", "-c", "kill -USR1 $$"]).0, 128 + libc::SIGUSR1);
    assert_eq!(lc.run(false, &["--", "/nonexistent/app"]).0, 127);
    assert_eq!(lc.run(false, &["--", "/"]).0, 126);

    // Forwarding: USR1 and HUP reach the app; TERM ends it, and lastcall exits with its code.
    let mut run = lc.start("forward", &["--", "python3", &fixture(), "record", "report"]);
    let report = run.report();
    wait_line(&report, "child ready", LONG);
    for sig in [libc::SIGUSR1, libc::SIGHUP] {
        kill(run.pid(), sig);
        wait_line(&report, &format!("child signal {sig} "), LONG);
    }
    kill(run.pid(), libc::SIGTERM);
    assert_eq!(run.wait(LONG), 0, "{}", run.stderr());
    wait_line(&report, &format!("child signal {} ", libc::SIGTERM), SEC);

    // Pre-stop and the health endpoint: /ready turns 503 at TERM, the app keeps running through
    // the pre-stop and gets TERM after it; `lastcall probe` reads the same endpoint.
    let port = free_port();
    // Up to 10 s for an answer: the emulated lastcall is slow.
    let http_status = |path: &str| http_get(port, path, 10 * SEC).map(|(status, _)| status);
    let listen = format!("127.0.0.1:{port}");
    let mut run = lc.start("pre-stop", &["--pre-stop", "1500ms", "--health-listen", &listen, "--", "python3", &fixture(), "record", "report"]);
    let report = run.report();
    wait_line(&report, "child ready", LONG);
    wait_until(LONG, "/ready to answer 200", || (http_status("/ready") == Some(200)).then_some(()));
    assert_eq!(http_status("/live"), Some(200));
    assert_eq!(lc.run(false, &["probe", "ready", "--health-listen", &listen]).0, 0);
    let term_sent = monotonic_ns();
    kill(run.pid(), libc::SIGTERM);
    wait_until(LONG, "/ready to answer 503", || (http_status("/ready") == Some(503)).then_some(()));
    assert_eq!(lc.run(false, &["probe", "ready", "--health-listen", &listen]).0, 1);
    let line = wait_line(&report, &format!("child signal {} ", libc::SIGTERM), LONG);
    let got: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(got - term_sent >= 1_400_000_000, "TERM reached the app {} ms after it came", (got - term_sent) / 1_000_000);
    assert_eq!(run.wait(LONG), 0, "{}", run.stderr());

    // The grace: an app that ignores TERM is SIGKILLed when it ends, and lastcall exits 137.
    let mut run = lc.start("grace", &["--grace", "500ms", "--", "python3", &fixture(), "ignore-term", "report"]);
    wait_line(&run.report(), "child ready", LONG);
    kill(run.pid(), libc::SIGTERM);
    assert_eq!(run.wait(LONG), 137, "{}", run.stderr());

    // Pause mode: nothing to run, exit 0 on TERM.
    let mut run = lc.start("pause", &["-P"]);
    wait_until(LONG, "lastcall -P to wait for signals", || waits_for_signals(run.pid()).then_some(()));
    kill(run.pid(), libc::SIGTERM);
    assert_eq!(run.wait(LONG), 0, "{}", run.stderr());

    // Reaping orphans, as PID 1 of a PID namespace (the container case): the app leaves 20
    // orphans and exits 0 only once /proc shows no zombie.
    let dir = scratch("arch-orphans");
    let report = dir.join("report");
    let (code, stderr) = lc.run(true, &["--", "python3", &fixture(), "orphans", report.to_str().unwrap(), "20"]);
    assert_eq!(code, 0, "{stderr}\n{:?}", lines(&report));
    let _ = fs::remove_dir_all(&dir);
}

/// Whether `pid` sleeps in sigwaitinfo: it has blocked the signals it waits for, so a TERM now
/// is one it handles. (Under qemu the host mask is qemu's, but the wait is the guest's.)
fn waits_for_signals(pid: i32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/wchan")).is_ok_and(|w| w.contains("sigtimedwait"))
}
