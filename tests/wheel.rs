//! The Python wheel, installed as a user would: scripts/wheel builds the host's wheel (the
//! release binary, built the way scripts/dist builds it), pip installs it into a fresh venv with
//! no index, and the installed `lastcall` runs a shutdown (TERM, pre-stop, forward, exit status).
//! The wheel's name carries the tags pip matches (musllinux and manylinux for the host's
//! architecture), the binary in it is static, and two builds give the same bytes. Only the
//! host's wheel is built here: the zig targets' wheels build in a target directory of their own,
//! std included, which would cost CI minutes per target. Needs python3-venv and `file`
//! (scripts/setup-test-machine installs them); scripts/dist installs the toolchains.
mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{descendants, exit_code, kill, timeline_seconds, wait_until};

/// A cold build compiles std for the target; the shutdown itself takes a second.
const LONG: Duration = Duration::from_secs(60);

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A scratch directory under target/ (the wheel build and the venv), removed even on failure.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = repo().join("target").join(format!("wheel-test-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Runs a program with a clean cargo environment (the outer `cargo test` sets variables and a
/// toolchain that an inner cargo must not inherit); asserts success and returns its stdout.
fn run(program: &Path, args: &[&str], env: &[(&str, &Path)]) -> String {
    let mut cmd = Command::new(program);
    cmd.args(args).current_dir(repo()).stdin(Stdio::null());
    for (key, _) in std::env::vars() {
        if (key.starts_with("CARGO") && key != "CARGO_HOME") || (key.starts_with("RUST") && key != "RUSTUP_HOME") {
            cmd.env_remove(key);
        }
    }
    cmd.envs(env.iter().copied());
    let started = Instant::now();
    let out = cmd.output().unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    eprintln!("{} {} took {:.0?}", program.display(), args.join(" "), started.elapsed());
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{} {args:?}: {}\n{stdout}{}", program.display(), out.status, String::from_utf8_lossy(&out.stderr));
    stdout
}

/// The host's architecture as wheel platform tags spell it, and its lowest manylinux tag.
fn platform() -> (&'static str, &'static str) {
    match std::env::consts::ARCH {
        "x86_64" => ("x86_64", "manylinux_2_17"),
        "aarch64" => ("aarch64", "manylinux_2_17"),
        "arm" => ("armv7l", "manylinux_2_17"),
        "x86" => ("i686", "manylinux_2_17"),
        "riscv64" => ("riscv64", "manylinux_2_31"),
        "powerpc64" => ("ppc64le", "manylinux_2_17"),
        "s390x" => ("s390x", "manylinux_2_17"),
        other => panic!("no wheel platform known for {other}"),
    }
}

/// lastcall started from the venv; killed with everything under it if the test fails.
struct Started(Child);

impl Drop for Started {
    fn drop(&mut self) {
        if self.0.try_wait().unwrap().is_none() {
            let pid = self.0.id() as i32;
            for p in descendants(pid).into_iter().chain([pid]) {
                // SAFETY: kill takes plain integers.
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
            let _ = self.0.wait();
        }
    }
}

#[test]
fn host_wheel_installs_and_shuts_down() {
    let scratch = Scratch::new("host");
    let dist = scratch.0.join("dist");
    fs::create_dir_all(&dist).unwrap();
    // Lines another script wrote stay; an older wheel's line goes.
    let other = "0000000000000000000000000000000000000000000000000000000000000000  lastcall-x86_64-unknown-linux-musl";
    let old_wheel = "1111111111111111111111111111111111111111111111111111111111111111  lastcall-0.0.0-py3-none-any.whl";
    fs::write(dist.join("SHA256SUMS"), format!("{other}\n{old_wheel}\n")).unwrap();

    let out = run(&repo().join("scripts/wheel"), &["host"], &[("DIST_DIR", &dist)]);
    assert_eq!(out, "", "scripts/wheel is quiet when nothing is wrong");

    // The name: one wheel, tagged for the host's architecture on musl and on glibc.
    let wheels: Vec<String> = fs::read_dir(&dist)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".whl"))
        .collect();
    assert_eq!(wheels.len(), 1, "{wheels:?}");
    let wheel = &wheels[0];
    let (arch, manylinux) = platform();
    let prefix = format!("lastcall-{}-py3-none-", env!("CARGO_PKG_VERSION"));
    let tags = wheel.strip_prefix(&prefix).and_then(|t| t.strip_suffix(".whl")).unwrap_or_else(|| panic!("{wheel}"));
    let tags: Vec<&str> = tags.split('.').collect();
    assert!(tags.contains(&format!("musllinux_1_2_{arch}").as_str()), "{wheel}");
    assert!(tags.contains(&format!("{manylinux}_{arch}").as_str()), "{wheel}");

    // Reproducible: a second build gives the same bytes.
    let again = scratch.0.join("again");
    run(&repo().join("scripts/wheel"), &["host"], &[("DIST_DIR", &again)]);
    assert!(fs::read(again.join(wheel)).unwrap() == fs::read(dist.join(wheel)).unwrap(), "two builds of {wheel} differ");

    // SHA256SUMS: the other line kept, the old wheel's replaced by this one's, which is right.
    let sums = fs::read_to_string(dist.join("SHA256SUMS")).unwrap();
    let sums: Vec<&str> = sums.lines().collect();
    assert!(sums.contains(&other), "{sums:?}");
    assert!(!sums.contains(&old_wheel), "{sums:?}");
    let line = sums.iter().find(|l| l.ends_with(&format!("  {wheel}"))).unwrap_or_else(|| panic!("{sums:?}"));
    let check = run(Path::new("sh"), &["-c", &format!("cd \"$DIST_DIR\" && echo '{line}' | sha256sum -c -")], &[("DIST_DIR", &dist)]);
    assert!(check.contains(": OK"), "{check}");

    // A fresh venv, the wheel installed from the file alone.
    let venv = scratch.0.join("venv");
    run(Path::new("python3"), &["-m", "venv", venv.to_str().unwrap()], &[]);
    let whl = dist.join(wheel);
    run(&venv.join("bin/pip"), &["install", "--quiet", "--no-index", whl.to_str().unwrap()], &[]);
    let lastcall = venv.join("bin/lastcall");
    let version = run(&lastcall, &["--version"], &[]);
    assert!(version.starts_with(&format!("lastcall {} (", env!("CARGO_PKG_VERSION"))), "{version}");
    let kind = run(Path::new("file"), &["-b", lastcall.to_str().unwrap()], &[]);
    assert!(kind.contains("statically linked"), "{kind}");

    // A shutdown through the installed binary. lastcall's timeline and the app's lines go to one
    // file, so their order there is the order they happened in.
    let log = scratch.0.join("log");
    let file = fs::File::create(&log).unwrap();
    let app = "trap 'echo got TERM; exit 0' TERM; echo app ready; while :; do sleep 1 & wait; done";
    let child = Command::new(&lastcall)
        .args(["--pre-stop", "1s", "--", "sh", "-c", app])
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap();
    let mut started = Started(child);
    let read = || fs::read_to_string(&log).unwrap_or_default();
    wait_until(LONG, "app ready", || read().contains("app ready").then_some(()));
    kill(started.0.id() as i32, libc::SIGTERM);
    let child = &mut started.0;
    let code = exit_code(wait_until(LONG, "lastcall to exit", || child.try_wait().unwrap()));
    let text = read();
    assert_eq!(code, 0, "{text}");
    let at = |what: &str| text.find(what).unwrap_or_else(|| panic!("no '{what}' in:\n{text}"));
    let order = ["received SIGTERM", "pre-stop ended", "forwarded SIGTERM", "got TERM"].map(at);
    assert!(order.windows(2).all(|w| w[0] < w[1]), "out of order:\n{text}");
    let waited = timeline_seconds(&text, "forwarded SIGTERM") - timeline_seconds(&text, "received SIGTERM");
    assert!(waited >= 0.95, "the app got TERM {waited:.3}s after lastcall did, not after the 1s pre-stop:\n{text}");
}
