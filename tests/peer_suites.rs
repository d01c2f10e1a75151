//! The peers' own test suites, run unmodified against the real peer and then against lastcall
//! installed under the peer's name (a copy named `dumb-init` or `tini`): every behavioural
//! test the real peer passes, lastcall must pass too, and a failure names each one it does not.
//!
//! Nothing of the suites is committed. At test time, and cached under target/:
//! - dumb-init 1.2.5's and tini 0.19.0's upstream tarballs, from Debian's source packages through
//!   apt (with its own lists and cache under target/, so the machine's apt state is untouched),
//!   checked against the sha256 below;
//! - a virtualenv with pytest, pytest-timeout < 2 (what dumb-init's suite is written for) and
//!   what tini's run_inner_tests.py imports (psutil, bitmap, python-prctl), from PyPI;
//! - tini's sigconf-test.c, compiled with gcc, as tini's own CI does.
//!
//! How each suite is run, as its project runs it:
//! - dumb-init: `pytest tests/` from the source tree, finding `dumb-init` on PATH. The suite counts
//!   a zombie as alive, so it runs under a PID 1 that reaps (`unshare --pid --fork --mount-proc`
//!   with the real dumb-init as that PID 1, for both runs). It never runs dumb-init as PID 1.
//! - tini: run_inner_tests.py, which runs $BUILD_DIR/tini as a child, a subreaper (`-s`,
//!   TINI_SUBREAPER, subreaper-proxy.py) and under sigconf-test, with FORCE_SUBREAPER=1 as tini's CI
//!   sets it; also under a reaping PID 1 (the real tini). The script stops at its first failed
//!   assert, so tests/peer_suites/tini_checks.py runs it with each check recorded instead (its
//!   header says how); the script's file is not changed. Its outer tests (run_outer_tests.py)
//!   need Docker images built from tini's tree and are not run here.
//!
//! Every first failure is printed. A failure runs once more only when the suite's own text says
//! it was a timeout (the suites' timings are tight on a loaded 2-core machine: pytest-timeout of
//! 5 s, dumb-init's 1.5 s `sleep_until`, tini's `busy_wait`); any other failure of lastcall's
//! fails the run at once, with its output. The real peer is the reference, not what is under
//! test: each test it fails runs again, up to `REAL_PEER_RUNS` runs, and every test it fails in
//! all of them is named as dropped from the baseline; more than `MAX_DROPPED` fail the run, so
//! that the baseline cannot shrink unseen. (Its own races show on a busy host: dumb-init moves
//! to / only after the fork, so cwd_test can read its old directory.)
//!
//! Each dumb-init test starts among no other test's processes (tests/peer_suites/
//! lastcall_isolation.py): else one test that fails on a slow moment leaves its `yes | tail`
//! pipelines burning both cores, and a dozen tests after it fail for the real peer and lastcall
//! alike.
//!
//! pytest-timeout can also fire inside pytest's own fixture machinery, which ends the whole
//! session with an INTERNALERROR and leaves the rest of the suite not run (seen for the real
//! dumb-init and for lastcall alike on a loaded host). That stall, and only that, runs the whole
//! suite once more, after printing the end of the stalled run.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

const LASTCALL: &str = env!("CARGO_BIN_EXE_lastcall");

const DUMB_INIT_TARBALL: (&str, &str) =
    ("dumb-init_1.2.5.orig.tar.gz", "3eda470d8a4a89123f4516d26877a727c0945006c8830b7e3bad717a5f6efc4e");
const TINI_TARBALL: (&str, &str) =
    ("tini_0.19.0.orig.tar.gz", "0fd35a7030052acd9f58948d1d900fe1e432ee37103c5561554408bdac6bbf0d");

/// Pinned, so that a run today and one next year test the same thing.
const PYPI: &[&str] = &[
    "pytest==7.4.4",
    "pytest-timeout==1.4.2",
    "py==1.11.0", // dumb-init's testing/ imports py._path
    "psutil==7.2.2",
    "bitmap==0.0.7",
    "python-prctl==1.8.1", // builds against libcap-dev
];

/// dumb-init tests whose wording assert may fail, by name prefix: they compare lastcall's texts
/// with dumb-init's byte for byte. Every assert before that one (exit codes, stdout) must still
/// pass: a failure of lastcall's in these tests counts unless pytest shows it failing on an
/// assert about `stderr`. (Exit codes are also compared side by side in tests/peers.rs.)
const DUMB_INIT_WORDING: &[(&str, &str, &str)] = &[
    // (test, what it compares byte for byte, a text of its wording assert)
    ("tests/cli_test.py::test_no_arguments_prints_usage", "the usage text", "stderr"),
    ("tests/cli_test.py::test_exits_invalid_with_invalid_args", "getopt's error message", "stderr"),
    ("tests/cli_test.py::test_help_message", "the help text", "stderr"),
    ("tests/cli_test.py::test_version_message", "the version string", "stderr"),
    ("tests/cli_test.py::test_rewrite_errors", "the -r error text", "stderr"),
    ("tests/cli_test.py::test_verbose", "every debug line", "stderr"),
    ("tests/cli_test.py::test_verbose_and_single_child", "every debug line", "stderr"),
    ("tests/child_processes_test.py::test_fails_nonzero_with_bad_exec", "the exec error", "stderr"),
    // Its docstring: "we're stuck just asserting debug messages"; tests/peers.rs's terminal
    // scenarios check the hand-off itself.
    (
        "tests/tty_test.py::test_sighup_sigcont_ignored_if_was_session_leader",
        "debug lines on the terminal",
        "'Ignoring tty hand-off signal {}.'.format(signal.SIGHUP) in output",
    ),
];

/// How many of its own tests the real peer may fail in every run (each one named) before the
/// run fails.
const MAX_DROPPED: usize = 3;

/// How often the real peer runs a test it failed before that test leaves the baseline.
const REAL_PEER_RUNS: usize = 3;

struct Setup {
    dumb_init_src: PathBuf,
    tini_src: PathBuf,
    python: PathBuf,
    venv_bin: PathBuf,
    sigconf_test: PathBuf,
    /// Per run: directories holding the binary under test under the peer's name.
    root: PathBuf,
}

fn run_checked(cmd: &mut Command, what: &str) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn sha256(path: &Path) -> String {
    let out = run_checked(Command::new("sha256sum").arg(path), "sha256sum");
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap_or_default().to_string()
}

/// The mirror this machine's apt uses, so the download goes where apt already goes.
fn debian_mirror() -> String {
    let sources = fs::read_to_string("/etc/apt/sources.list.d/debian.sources").unwrap_or_default();
    if let Some(uri) = sources.lines().find_map(|l| l.strip_prefix("URIs:")) {
        return uri.split_whitespace().next().unwrap_or_default().to_string();
    }
    let list = fs::read_to_string("/etc/apt/sources.list").unwrap_or_default();
    list.lines()
        .find_map(|l| l.strip_prefix("deb ").and_then(|rest| rest.split_whitespace().find(|w| w.contains("://"))))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no Debian mirror in /etc/apt: cannot fetch the peers' source packages"))
}

/// The orig tarballs, fetched once into `dir` with apt's own client and state kept there.
fn fetch_tarballs(dir: &Path) {
    let have = |t: &(&str, &str)| dir.join(t.0).exists() && sha256(&dir.join(t.0)) == t.1;
    if have(&DUMB_INIT_TARBALL) && have(&TINI_TARBALL) {
        return;
    }
    for sub in ["lists/partial", "cache/archives/partial", "parts"] {
        fs::create_dir_all(dir.join(sub)).unwrap();
    }
    fs::write(
        dir.join("parts/src.sources"),
        format!(
            "Types: deb-src\nURIs: {}\nSuites: bookworm\nComponents: main\n\
             Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n",
            debian_mirror()
        ),
    )
    .unwrap();
    let opts = [
        "-o".to_string(),
        "Dir::Etc::SourceList=/dev/null".into(),
        "-o".into(),
        format!("Dir::Etc::SourceParts={}", dir.join("parts").display()),
        "-o".into(),
        format!("Dir::State::Lists={}", dir.join("lists").display()),
        "-o".into(),
        format!("Dir::Cache={}", dir.join("cache").display()),
    ];
    run_checked(Command::new("apt-get").args(&opts).args(["update", "-qq"]), "apt-get update (deb-src lists under target/)");
    // It may fail on a debian.tar.xz it cannot find: the orig tarballs are what count.
    let _ = Command::new("apt-get")
        .args(&opts)
        .args(["source", "--download-only", "-qq", "dumb-init", "tini"])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    for t in [DUMB_INIT_TARBALL, TINI_TARBALL] {
        let path = dir.join(t.0);
        assert!(path.exists(), "apt-get source did not fetch {}", t.0);
        assert_eq!(sha256(&path), t.1, "{} is not the tarball this test was written for", t.0);
    }
}

fn extract(tarball: &Path, into: &Path, top: &str) -> PathBuf {
    let tree = into.join(top);
    let _ = fs::remove_dir_all(&tree);
    run_checked(Command::new("tar").arg("-xzf").arg(tarball).arg("-C").arg(into), "tar");
    assert!(tree.is_dir(), "{} has no {top}/", tarball.display());
    tree
}

/// One suite at a time: both are timing-sensitive, and the machine has two cores.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("peer-suites");
        let downloads = root.join("apt");
        fs::create_dir_all(&downloads).unwrap();
        fetch_tarballs(&downloads);
        // Fresh trees every run: pytest writes its caches into them.
        let dumb_init_src = extract(&downloads.join(DUMB_INIT_TARBALL.0), &root, "dumb-init-1.2.5");
        let tini_src = extract(&downloads.join(TINI_TARBALL.0), &root, "tini-0.19.0");

        let venv = root.join("venv");
        let marker = venv.join("lastcall-installed");
        if fs::read_to_string(&marker).ok().as_deref() != Some(&PYPI.join("\n")) {
            let _ = fs::remove_dir_all(&venv);
            run_checked(Command::new("/usr/bin/python3").arg("-m").arg("venv").arg(&venv), "python3 -m venv (python3-venv)");
            run_checked(
                Command::new(venv.join("bin/pip")).args(["install", "-q", "--disable-pip-version-check"]).args(PYPI),
                "pip install (PyPI)",
            );
            fs::write(&marker, PYPI.join("\n")).unwrap();
        }
        let sigconf_test = root.join("sigconf-test");
        run_checked(
            Command::new("gcc").arg("-o").arg(&sigconf_test).arg(tini_src.join("test/sigconf/sigconf-test.c")),
            "gcc sigconf-test.c",
        );
        Setup { dumb_init_src, tini_src, python: venv.join("bin/python"), venv_bin: venv.join("bin"), sigconf_test, root }
    })
}

/// A directory holding `binary` as `name` (and, for tini's suite, sigconf-test beside it): a
/// copy, as a Dockerfile's COPY installs it. (A symlink is the same to every test but dumb-init's
/// cwd_test, which resolves it with realpath and so would run lastcall under its own name.)
fn install_as(s: &Setup, label: &str, name: &str, binary: &str) -> PathBuf {
    let dir = s.root.join(format!("as-{label}"));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    fs::copy(binary, dir.join(name)).unwrap();
    std::os::unix::fs::symlink(&s.sigconf_test, dir.join("sigconf-test")).unwrap();
    dir
}

/// A command run as PID 1 of a new PID namespace, under `reaper` (the real peer, for every
/// run), killed with everything in it if it outlives `limit_s`.
fn under_reaping_pid1(reaper: &[&str], limit_s: u32, path_first: &Path, s: &Setup) -> Command {
    let mut cmd = Command::new("timeout");
    cmd.args(["--kill-after=10", &limit_s.to_string(), "unshare", "--pid", "--fork", "--kill-child", "--mount-proc"]);
    cmd.args(reaper);
    let path = format!("{}:{}:{}", path_first.display(), s.venv_bin.display(), std::env::var("PATH").unwrap_or_default());
    cmd.env("PATH", path);
    for (key, _) in std::env::vars_os() {
        let k = key.to_string_lossy();
        if ["TINI_", "DUMB_INIT_", "LASTCALL_", "PYTHON"].iter().any(|p| k.starts_with(p)) || k == "POSIXLY_CORRECT" {
            cmd.env_remove(&key);
        }
    }
    cmd.stdin(Stdio::null());
    // The suites start interactive shells (dumb-init's tty tests run `bash -m`): they must read
    // no rc file of this machine's user, whose ~/.bashrc may run slow hooks (pyenv's) or wait on
    // their locks, which would time out the real peer and lastcall alike.
    let home = s.root.join("home");
    fs::create_dir_all(&home).unwrap();
    cmd.env("HOME", &home);
    // As from a login shell: cargo is started by a glibc program whose posix_spawn leaves its
    // two internal signals (32, 33) ignored, and tini's sigconf check has no name for them.
    // SAFETY: between fork and exec only async-signal-safe system calls, on a zeroed buffer.
    unsafe { cmd.pre_exec(default_signals) };
    cmd
}

/// Every catchable signal at SIG_DFL. The raw system call, because libc refuses 32-34; a
/// kernel sigaction of all zeros is SIG_DFL with no flags and an empty mask on every layout.
fn default_signals() -> std::io::Result<()> {
    let zeroed = [0u64; 4];
    for sig in (1..=64).filter(|&s| s != libc::SIGKILL && s != libc::SIGSTOP) {
        // SAFETY: rt_sigaction reads the zeroed struct we own; the old action is not asked for.
        unsafe { libc::syscall(libc::SYS_rt_sigaction, sig, zeroed.as_ptr(), std::ptr::null_mut::<u64>(), 8usize) };
    }
    Ok(())
}

#[derive(Default, Debug)]
struct Results {
    passed: BTreeSet<String>,
    failed: BTreeSet<String>,
    /// Why, for each failure (the suite's own message).
    why: Vec<(String, String)>,
    /// dumb-init: for each failed test (by its name in pytest's report, `test_x[params]`), the
    /// line of the assert that failed (pytest's `>` line).
    failed_at: Vec<(String, String)>,
    /// dumb-init: pytest's whole report of each failed test, by the same name.
    report: Vec<(String, String)>,
    log: String,
}

impl Results {
    fn all(&self) -> BTreeSet<String> {
        self.passed.union(&self.failed).cloned().collect()
    }

    fn why(&self, id: &str) -> &str {
        self.why.iter().find(|(t, _)| t == id).map_or("not run", |(_, w)| w.as_str())
    }

    /// The verdicts of `ids` taken from `again`, a second run; the rest stay this run's.
    fn rerun(&mut self, ids: &[String], again: Results) {
        let name = |id: &str| id.rsplit("::").next().unwrap_or(id).to_string();
        let names: BTreeSet<String> = ids.iter().map(|t| name(t)).collect();
        let ids: BTreeSet<&String> = ids.iter().collect();
        self.passed.retain(|t| !ids.contains(t));
        self.failed.retain(|t| !ids.contains(t));
        self.why.retain(|(t, _)| !ids.contains(t));
        self.failed_at.retain(|(n, _)| !names.contains(n));
        self.report.retain(|(n, _)| !names.contains(n));
        self.passed.extend(again.passed.into_iter().filter(|t| ids.contains(t)));
        self.failed.extend(again.failed.into_iter().filter(|t| ids.contains(t)));
        self.why.extend(again.why.into_iter().filter(|(t, _)| ids.contains(t)));
        self.failed_at.extend(again.failed_at.into_iter().filter(|(n, _)| names.contains(n)));
        self.report.extend(again.report.into_iter().filter(|(n, _)| names.contains(n)));
        self.log = format!("{}\n--- the rerun of the timed-out tests ---\n{}", self.log, again.log);
    }
}

/// Whether a failure of dumb-init's suite was a timeout, by the suite's own text: pytest-timeout's
/// "Timeout >5.0s", a "timed out" or pexpect's TIMEOUT, or an assert that `sleep_until` (the
/// suite's 1.5 s wait) gave up on, which pytest's traceback shows as "in sleep_until".
fn dumb_init_timed_out(r: &Results, id: &str) -> bool {
    let name = id.rsplit("::").next().unwrap_or(id);
    let report = r.report.iter().find(|(n, _)| n == name).map_or("", |(_, text)| text.as_str());
    timed_out(r.why(id)) || report.lines().any(|l| l.ends_with(": in sleep_until") || l.starts_with("E ") && timed_out(l))
}

/// Whether a check of tini's failed on a timeout: `busy_wait`'s own "Condition was never met".
fn tini_timed_out(why: &str) -> bool {
    why.contains("Condition was never met") || timed_out(why)
}

fn timed_out(text: &str) -> bool {
    text.contains("Failed: Timeout >") || text.contains("pexpect.exceptions.TIMEOUT") || text.to_lowercase().contains("timed out")
}

/// dumb-init's pytest suite with `dumb-init` on PATH from `bin`; `only` limits it to those node ids.
/// dumb-init's whole suite under `bin`; once more if pytest itself stalled on a timeout.
fn run_dumb_init_whole(s: &Setup, bin: &Path, who: &str) -> Results {
    let first = run_dumb_init(s, bin, &[]);
    if !stalled(&first.log) {
        return first;
    }
    println!("dumb-init suite: {who}'s run stopped on a timeout inside pytest (INTERNALERROR); its end:\n{}\nrunning the whole suite once more", tail(&first.log, 3000));
    run_dumb_init(s, bin, &[])
}

/// A pytest session that pytest-timeout ended from inside pytest's own machinery.
fn stalled(log: &str) -> bool {
    log.lines().any(|l| l.starts_with("INTERNALERROR>") && timed_out(l))
}

fn run_dumb_init(s: &Setup, bin: &Path, only: &[String]) -> Results {
    let mut cmd = under_reaping_pid1(&["/usr/bin/dumb-init", "--"], 600, bin, s);
    cmd.arg(&s.python).args(["-m", "pytest", "-p", "no:cacheprovider", "-p", "lastcall_isolation", "-rA", "-q"]);
    cmd.env("PYTHONPATH", concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peer_suites")).env("ISOLATE_PEER_SUITE", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1");
    if only.is_empty() {
        cmd.arg("tests");
    } else {
        cmd.args(only);
    }
    let out = cmd.current_dir(&s.dumb_init_src).output().expect("pytest");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut r = Results { log: format!("{text}\n{}", String::from_utf8_lossy(&out.stderr)), ..Results::default() };
    for line in text.lines() {
        let Some((verdict, rest)) = line.split_once(' ') else { continue };
        let (id, why) = rest.split_once(" - ").unwrap_or((rest, ""));
        match verdict {
            "PASSED" => {
                r.passed.insert(id.to_string());
            }
            "FAILED" | "ERROR" => {
                r.failed.insert(id.to_string());
                r.why.push((id.to_string(), why.to_string()));
            }
            _ => {}
        }
    }
    r.passed.retain(|id| !r.failed.contains(id));
    // pytest's report of each failure: a "____ test_x[params] ____" header, then the code with
    // the failing line marked ">".
    // An assert may span lines: the statement runs from ">" to pytest's first "E" line.
    let (mut current, mut statement): (Option<String>, Option<String>) = (None, None);
    for line in text.lines() {
        if line.starts_with("____") && line.ends_with("____") {
            current = Some(line.trim_matches(|c| c == '_' || c == ' ').to_string());
            statement = None;
        } else if let Some(code) = line.strip_prefix('>').filter(|_| current.is_some()) {
            statement = Some(code.trim().to_string());
        } else if let Some(so_far) = &mut statement {
            if line.starts_with('E') {
                r.failed_at.push((current.take().unwrap_or_default(), statement.take().unwrap_or_default()));
            } else {
                so_far.push(' ');
                so_far.push_str(line.trim());
            }
        }
    }
    // Each failure's whole report, from its header to the next header or "====" line.
    let mut in_report = false;
    for line in text.lines() {
        if line.starts_with("____") && line.ends_with("____") {
            r.report.push((line.trim_matches(|c| c == '_' || c == ' ').to_string(), String::new()));
            in_report = true;
        } else if line.starts_with("====") {
            in_report = false;
        } else if let (true, Some((_, report))) = (in_report, r.report.last_mut()) {
            report.push_str(line);
            report.push('\n');
        }
    }
    r
}

/// tini's run_inner_tests.py, each check recorded, with $BUILD_DIR/tini the binary under test.
fn run_tini(s: &Setup, build_dir: &Path) -> Results {
    let mut cmd = under_reaping_pid1(&["/usr/bin/tini", "-s", "--"], 600, build_dir, s);
    cmd.arg(&s.python)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peer_suites/tini_checks.py"))
        .arg(s.tini_src.join("test/run_inner_tests.py"))
        .env("SOURCE_DIR", &s.tini_src)
        .env("BUILD_DIR", build_dir)
        .env("FORCE_SUBREAPER", "1");
    let out = cmd.current_dir(&s.tini_src).output().expect("run_inner_tests.py");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut r = Results { log: format!("{text}\n{}", String::from_utf8_lossy(&out.stderr)), ..Results::default() };
    for line in text.lines() {
        if let Some(id) = line.strip_prefix("PASS ") {
            r.passed.insert(id.to_string());
        } else if let Some(rest) = line.strip_prefix("FAIL ") {
            let (id, why) = rest.rsplit_once("]: ").map(|(id, why)| (format!("{id}]"), why)).unwrap_or((rest.into(), ""));
            r.failed.insert(id.clone());
            r.why.push((id, why.to_string()));
        }
    }
    assert!(out.status.success() || !r.all().is_empty(), "tini_checks.py: {}\n{}", out.status, r.log);
    r
}

fn tail(text: &str, chars: usize) -> &str {
    let start = text.char_indices().rev().nth(chars).map_or(0, |(i, _)| i);
    &text[start..]
}

/// Fails naming every test in `baseline` that lastcall did not pass, each with its own output
/// where the suite gives one.
fn compare(suite: &str, peer: &str, baseline: &BTreeSet<String>, total: usize, lastcall: &Results) {
    let missing: Vec<&String> = baseline.iter().filter(|t| !lastcall.passed.contains(*t)).collect();
    println!(
        "{suite}: real {peer} passed {}/{total}; lastcall as {peer} passed {}/{} of those",
        baseline.len(),
        baseline.len() - missing.len(),
        baseline.len()
    );
    if !missing.is_empty() {
        let mut report = String::new();
        for t in &missing {
            report.push_str(&format!("  {t}\n      {}\n", lastcall.why(t)));
            let name = t.rsplit("::").next().unwrap_or(t);
            if let Some((_, text)) = lastcall.report.iter().find(|(n, _)| n == name) {
                report.push_str(tail(text, 3000));
            }
        }
        panic!(
            "lastcall as {peer} fails {} of {suite}'s tests that the real {peer} passes:\n{report}\n--- the end of lastcall's run ---\n{}",
            missing.len(),
            tail(&lastcall.log, 6000)
        );
    }
}

/// Names every test the real peer failed (dropped from the baseline, not compared) and fails
/// past `MAX_DROPPED`: a broken setup or a slow host must not shrink the comparison unseen.
fn dropped(suite: &str, peer: &str, failed: &[(String, String)], log: &str) {
    for (t, why) in failed {
        println!("{suite}: dropped from the baseline: the real {peer} fails {t}: {why}");
    }
    assert!(
        failed.len() <= MAX_DROPPED,
        "the real {peer} fails {} of {suite}'s tests (at most {MAX_DROPPED} may be dropped):\n{}",
        failed.len(),
        tail(log, 6000)
    );
}

#[test]
fn dumb_init_suite_passes_as_the_real_dumb_init_does() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = setup();
    let wording = |id: &str| DUMB_INIT_WORDING.iter().find(|(prefix, _, _)| id.starts_with(&format!("{prefix}[")) || id == *prefix);
    let excluded = |id: &String| wording(id).is_some();
    let real_bin = install_as(s, "dumb-init-real", "dumb-init", "/usr/bin/dumb-init");
    let mut real = run_dumb_init_whole(s, &real_bin, "the real dumb-init");
    for t in &real.failed {
        println!("dumb-init suite: the real dumb-init failed {t}: {}", real.why(t));
    }
    // The real peer is the reference, not what is under test: each of its failures runs again,
    // and only a test it fails in every run is dropped from the baseline.
    for run in 2..=REAL_PEER_RUNS {
        let again: Vec<String> = real.failed.iter().cloned().collect();
        if again.is_empty() {
            break;
        }
        println!("dumb-init suite: running the real dumb-init's {} failed tests again (run {run} of {REAL_PEER_RUNS})", again.len());
        let retry = run_dumb_init(s, &real_bin, &again);
        real.rerun(&again, retry);
    }
    let behavioural: BTreeSet<String> = real.all().into_iter().filter(|t| !excluded(t)).collect();
    let baseline: BTreeSet<String> = real.passed.iter().filter(|t| !excluded(t)).cloned().collect();
    // The suite must really have run: else there is nothing to compare with (a broken venv would
    // make every comparison pass).
    assert!(behavioural.len() >= 90, "dumb-init's suite ran only {} behavioural tests:\n{}", behavioural.len(), real.log);
    let real_failed: Vec<(String, String)> = real.failed.iter().map(|t| (t.clone(), real.why(t).to_string())).collect();
    dropped("dumb-init suite", "dumb-init", &real_failed, &real.log);

    let bin = install_as(s, "dumb-init-lastcall", "dumb-init", LASTCALL);
    let mut ours = run_dumb_init_whole(s, &bin, "lastcall as dumb-init");
    let first: Vec<String> = real.passed.iter().filter(|t| !ours.passed.contains(*t)).cloned().collect();
    for t in first.iter().filter(|t| !excluded(t)) {
        println!("dumb-init suite: lastcall as dumb-init failed {t}: {}", ours.why(t));
    }
    // The wording tests: the real dumb-init passes them, lastcall may fail only on the wording.
    let mut wording_failures = 0;
    let mut wording_check = |t: &String, ours: &Results| {
        let name = t.rsplit("::").next().unwrap_or(t);
        let marker = wording(t).map_or("", |w| w.2);
        match ours.failed_at.iter().find(|(n, _)| n == name) {
            Some((_, line)) if line.contains(marker) => wording_failures += 1,
            other => panic!("lastcall as dumb-init fails {t} before its wording assert: {other:?}\n{}", tail(&ours.log, 6000)),
        }
    };
    // Only a timeout runs again; any other failure counts now.
    let (timed_out, failed): (Vec<String>, Vec<String>) = first.into_iter().partition(|t| dumb_init_timed_out(&ours, t));
    for t in failed.iter().filter(|t| excluded(t)) {
        wording_check(t, &ours);
    }
    if failed.iter().any(|t| !excluded(t)) {
        compare("dumb-init 1.2.5's suite", "dumb-init", &baseline, behavioural.len(), &ours);
    }
    if !timed_out.is_empty() {
        for t in &timed_out {
            println!("dumb-init suite: lastcall as dumb-init timed out in {t}: {}", ours.why(t));
        }
        println!("dumb-init suite: running lastcall's {} timed-out tests once more", timed_out.len());
        let retry = run_dumb_init(s, &bin, &timed_out);
        ours.rerun(&timed_out, retry);
        for t in timed_out.iter().filter(|t| excluded(t) && !ours.passed.contains(*t)) {
            wording_check(t, &ours);
        }
    }
    println!(
        "dumb-init suite: {} tests of wording; lastcall fails {wording_failures} of them, each on the wording assert only",
        real.all().iter().filter(|t| excluded(t)).count()
    );
    compare("dumb-init 1.2.5's suite", "dumb-init", &baseline, behavioural.len(), &ours);
}

/// tini's suite against a real tini, every failed check printed; while some failed, their
/// verdicts come from another run (the script cannot run one check alone), up to
/// `REAL_PEER_RUNS` runs in all.
fn run_real_tini(s: &Setup, build_dir: &Path, who: &str) -> Results {
    let mut r = run_tini(s, build_dir);
    for (t, why) in &r.why {
        println!("tini suite: {who} failed {t}: {why}");
    }
    for run in 2..=REAL_PEER_RUNS {
        let again: Vec<String> = r.failed.iter().cloned().collect();
        if again.is_empty() {
            break;
        }
        println!("tini suite: {who} failed {again:?}; running the suite again for them (run {run} of {REAL_PEER_RUNS})");
        let retry = run_tini(s, build_dir);
        r.rerun(&again, retry);
    }
    r
}

#[test]
fn tini_suite_passes_as_the_real_tini_does() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = setup();
    let mut baseline = BTreeSet::new();
    let mut total = BTreeSet::new();
    let mut real_failed = Vec::new();
    let mut logs = String::new();
    for (label, real) in [("tini-real", "/usr/bin/tini"), ("tini-static-real", "/usr/bin/tini-static")] {
        let r = run_real_tini(s, &install_as(s, label, "tini", real), real);
        assert!(r.all().len() >= 40, "tini's suite ran only {} checks against {real}:\n{}", r.all().len(), r.log);
        println!("tini suite: {real} passed {}/{}", r.passed.len(), r.all().len());
        real_failed.extend(r.why.iter().map(|(t, why)| (t.clone(), format!("{real}: {why}"))));
        baseline.extend(r.passed);
        total.extend(r.failed);
        logs.push_str(&r.log);
    }
    total.extend(baseline.iter().cloned());
    // A check either real binary passes is compared; each failure of each is named.
    dropped("tini suite", "tini", &real_failed, &logs);

    let build = install_as(s, "tini-lastcall", "tini", LASTCALL);
    let mut ours = run_tini(s, &build);
    let failed: Vec<String> = baseline.iter().filter(|t| !ours.passed.contains(*t)).cloned().collect();
    for t in &failed {
        println!("tini suite: lastcall as tini failed {t}: {}", ours.why(t));
    }
    // Only a timeout runs again; any other failure (one not run included) counts now.
    if failed.iter().any(|t| !tini_timed_out(ours.why(t))) {
        compare("tini 0.19.0's run_inner_tests.py", "tini", &baseline, total.len(), &ours);
    }
    let again = failed;
    if !again.is_empty() {
        println!("tini suite: lastcall as tini timed out in {again:?}; running the suite once more for them");
        let retry = run_tini(s, &build);
        ours.rerun(&again, retry);
    }
    compare("tini 0.19.0's run_inner_tests.py", "tini", &baseline, total.len(), &ours);
}

#[test]
fn only_a_timeout_inside_pytest_counts_as_a_stall() {
    assert!(stalled("....\nINTERNALERROR>     raise exc\nINTERNALERROR> Failed: Timeout >5.0s\n"));
    assert!(!stalled("INTERNALERROR> KeyError: 'x'\nFAILED tests/a.py::t - Failed: Timeout >5.0s\n"));
    assert!(!stalled("1 failed, 94 passed in 90.00s\n"));
}
