//! The fuzz targets of fuzz/ (a crate of its own) on every test run: built once with stable Rust
//! and libFuzzer's coverage flags (no nightly, no cargo-fuzz), then each target run a fixed
//! number of times from a fixed seed, starting from the minimised corpus kept in fuzz/corpus/.
//! The same inputs on every machine, so no verdict depends on its speed. A crash, a hang past
//! libFuzzer's timeout or a memory blow-up fails the target's test with the input libFuzzer
//! saved. `scripts/fuzz` makes the same build for longer runs by hand and re-minimises the corpus.
mod common;

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Instant;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The outer build's target directory: the fuzz build goes to its fuzz/. cargo's environment
/// reaches the compiler, so an outer CARGO_TARGET_DIR shows here.
fn target_dir() -> PathBuf {
    repo().join(option_env!("CARGO_TARGET_DIR").unwrap_or("target"))
}

/// The five targets, built by `scripts/fuzz --build` (the one recipe: the coverage flags, the
/// host's triple, fuzz/Cargo.lock as it is) the first time a test asks; the directory that holds
/// them, or the build's failure for every test to report.
fn built() -> &'static Result<PathBuf, String> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT.get_or_init(|| {
        let mut cmd = Command::new(repo().join("scripts/fuzz"));
        common::outside_cargo(&mut cmd)
            .arg("--build")
            // What lastcall's build script gives the outer build's test runs: the inner build
            // must see what a build from the shell sees, or each one rebuilds lastcall.
            .env_remove("LASTCALL_GIT_COMMIT")
            .env_remove("LASTCALL_BUILD_TARGET")
            .current_dir(repo())
            .env("CARGO_TARGET_DIR", target_dir())
            .stdin(Stdio::null());
        let start = Instant::now();
        let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
        if !out.status.success() {
            return Err(format!("the fuzz build failed ({}):\n{}", out.status, tail(&String::from_utf8_lossy(&out.stderr), 40)));
        }
        eprintln!("fuzz: the five targets built in {:.0?}", start.elapsed());
        let bins = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Ok(PathBuf::from(bins))
    })
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A directory removed when the test ends, failed or not.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The first bytes of an input in hex, enough to recognise it; the file holds all of it.
fn hex(bytes: &[u8]) -> String {
    let mut s = String::new();
    for b in bytes.iter().take(64) {
        let _ = write!(s, "{b:02x}");
    }
    if bytes.len() > 64 {
        let _ = write!(s, "... ({} bytes)", bytes.len());
    }
    s
}

/// Runs `target` `runs` times (the corpus's own inputs, then mutations of them) from seed 1.
fn fuzz(target: &str, runs: u32) {
    let bins = built().as_ref().unwrap_or_else(|e| panic!("{e}"));
    let committed = repo().join("fuzz/corpus").join(target);
    assert!(fs::read_dir(&committed).map(|d| d.count() > 0).unwrap_or(false), "{} is empty or missing", committed.display());
    // libFuzzer adds what it finds to its first corpus directory: a scratch one, so that the
    // committed corpus changes only by hand (scripts/fuzz --merge).
    let scratch = Scratch(common::scratch(&format!("fuzz-{target}")));
    let artifacts = target_dir().join("fuzz").join("artifacts").join(target);
    fs::create_dir_all(&artifacts).unwrap();
    let mut cmd = Command::new(bins.join(target));
    cmd.arg("-seed=1")
        .arg(format!("-runs={runs}"))
        .args(["-timeout=10", "-rss_limit_mb=1024"])
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .arg(&scratch.0)
        .arg(&committed)
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null());
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    // libFuzzer reports on stderr; the targets print nothing of their own.
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        let saved = log.lines().find_map(|l| l.split("Test unit written to ").nth(1)).map(|p| p.trim().to_string());
        let input = match &saved {
            Some(path) => fs::read(path).map(|b| hex(&b)).unwrap_or_else(|e| format!("unreadable: {e}")),
            None => "none saved".to_string(),
        };
        // From the target's own panic message, or libFuzzer's report if it has none (a hang, a
        // blow-up), to the end.
        let lines: Vec<&str> = log.lines().collect();
        let from = lines.iter().position(|l| l.contains("panicked at")).or_else(|| lines.iter().position(|l| l.contains("ERROR: libFuzzer"))).unwrap_or(0);
        let report = lines[from..].iter().take(60).copied().collect::<Vec<_>>().join("\n");
        panic!(
            "fuzz target {target} failed ({}): input saved at {}\ninput (hex): {input}\n\
             reproduce: {} {}\nlibFuzzer's output:\n{report}",
            out.status,
            saved.as_deref().unwrap_or("(nowhere)"),
            bins.join(target).display(),
            saved.as_deref().unwrap_or("INPUT"),
        );
    }
    let done = log.lines().rev().find(|l| l.starts_with("Done ")).unwrap_or_else(|| panic!("{target}: no Done line:\n{}", tail(&log, 20)));
    eprintln!("fuzz {target}: {done} (seed 1, from {} inputs)", fs::read_dir(&committed).unwrap().count());
}

// Runs per target: as many as fit, with the build, in the test's share of CI. userdb's inputs
// are whole files (long lines, many groups): each of its runs costs a hundred of the others.
#[test]
fn cli() {
    fuzz("cli", 100_000);
}

#[test]
fn http() {
    fuzz("http", 500_000);
}

#[test]
fn notify() {
    fuzz("notify", 500_000);
}

#[test]
fn durations() {
    fuzz("durations", 500_000);
}

#[test]
fn userdb() {
    fuzz("userdb", 10_000);
}
