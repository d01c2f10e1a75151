//! Running the built lastcall around fixture programs, as PID 1 of a new PID namespace or as a
//! plain child, and waiting on what they report, with deadlines rather than sleeps. `proc`:
//! processes (spawn, kill a tree, wait with a deadline, cgroups); `net`: a free port and HTTP;
//! `nginx`: the one nginx configuration; `contention`: timing verdicts that a busy host cannot
//! flip, and the lock the flood and timing tests run alone under.
#![allow(dead_code)]

pub mod contention;
pub mod net;
pub mod nginx;
pub mod proc;
// Not every suite uses both: the suites reach them as `common::NAME`.
#[allow(unused_imports)]
pub use net::*;
#[allow(unused_imports)]
pub use proc::*;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

pub const LASTCALL: &str = env!("CARGO_BIN_EXE_lastcall");

pub fn fixture() -> String {
    format!("{}/tests/fixtures/app.py", env!("CARGO_MANIFEST_DIR"))
}

/// The fixture in `mode`, reporting to `out`, with `extra` arguments: a command for lastcall.
pub fn fixture_cmd(mode: &str, out: &Path, extra: &[&str]) -> Vec<String> {
    let mut v = vec!["python3".to_string(), fixture(), mode.to_string(), out.display().to_string()];
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

/// A fresh directory for one test's files.
pub fn scratch(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir()
        .join(format!("lastcall-test-{}-{}-{name}", std::process::id(), N.fetch_add(1, Ordering::SeqCst)));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// Every signal back to its default action, 32-34 included, which neither glibc's nor musl's
/// sigaction will touch. cargo (glibc) starts the tests with 32 and 33 ignored, which a child
/// would inherit. An all-zero kernel sigaction is SIG_DFL with no flags and an empty mask on every
/// architecture, whatever the order of its fields.
pub fn default_dispositions() -> std::io::Result<()> {
    let zero = [0u64; 8];
    for sig in (1..=64).filter(|&s| s != libc::SIGKILL && s != libc::SIGSTOP) {
        // SAFETY: rt_sigaction reads the all-zero struct we own; SIG_DFL installs no handler.
        unsafe { libc::syscall(libc::SYS_rt_sigaction, sig, zero.as_ptr(), std::ptr::null_mut::<u64>(), 8usize) };
    }
    Ok(())
}

pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `cmd` without the variables the outer `cargo test` sets (and its toolchain's), which an inner
/// cargo or a script that runs one must not inherit; CARGO_HOME and RUSTUP_HOME stay.
pub fn outside_cargo(cmd: &mut std::process::Command) -> &mut std::process::Command {
    for (key, _) in std::env::vars() {
        if (key.starts_with("CARGO") && key != "CARGO_HOME") || (key.starts_with("RUST") && key != "RUSTUP_HOME") {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// The binary as it ships, for the tests that measure it: `cargo test` builds lastcall without
/// optimisation, whose figures say nothing of the release's, so unless the test is itself built
/// optimised (`cargo test --release`), the release profile is built here, into a target
/// directory of its own (the outer cargo holds the lock on its own).
pub fn release_binary() -> String {
    if !cfg!(debug_assertions) {
        return env!("CARGO_BIN_EXE_lastcall").into();
    }
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("instructions-release");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = std::process::Command::new(cargo)
        .args(["build", "--release", "--bin", "lastcall", "--message-format=short", "--target-dir"])
        .arg(&dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(std::process::Stdio::null())
        .status()
        .expect("cargo");
    assert!(status.success(), "cargo build --release: {status}");
    // The host's target, as .cargo/host.toml names it, or none.
    let found = fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path().join("release/lastcall"))
        .chain([dir.join("release/lastcall")])
        .filter(|p| p.exists())
        .max_by_key(|p| fs::metadata(p).and_then(|m| m.modified()).ok());
    found.expect("the release binary").display().to_string()
}

/// A datagram socket standing in for systemd's notify socket, at `dir`/systemd.sock, and its
/// path: its reads give up after 10 s, so a message that never comes fails the test instead of
/// hanging it.
pub fn fake_systemd(dir: &Path) -> (std::os::unix::net::UnixDatagram, PathBuf) {
    let path = dir.join("systemd.sock");
    let socket = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    socket.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    (socket, path)
}
