//! The Python wheels, installed as a user would. scripts/wheel builds one per architecture from
//! scripts/dist's build (which tests/arches.rs has done earlier in the same `cargo test`) and
//! must compile nothing of its own. Each wheel is installed from its file alone: the host's into
//! a fresh venv, each foreign one by pip for its platform into a directory. Every installed
//! `lastcall` then runs a shutdown (TERM, pre-stop, forward, exit status), the foreign ones under
//! qemu-user (i686 natively on x86_64), as tests/arches.rs runs them. Each wheel's name carries
//! the tags pip matches (musllinux and manylinux for its architecture); its binary is the release
//! binary, static; two builds give the same bytes (checked for the host's wheel and one
//! zig-linked one). `LASTCALL_ARCHES=aarch64-unknown-linux-musl,...` picks targets, as for
//! tests/arches.rs. Needs python3-venv, `file` and qemu-user-static (scripts/setup-test-machine
//! installs them); scripts/dist installs the toolchains.
mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use common::{descendants, exit_code, kill, timeline_seconds, wait_until};

/// The shutdown takes a second; emulated on a loaded 2-core machine, far more.
const LONG: Duration = Duration::from_secs(60);

/// scripts/dist's targets: the wheel's architecture tag, its lowest manylinux tag (the binary
/// needs no libc; manylinux has riscv64 from glibc 2.31 on), and the qemu-user that runs it.
const TARGETS: [(&str, &str, &str, &str); 7] = [
    ("x86_64-unknown-linux-musl", "x86_64", "manylinux_2_17", "qemu-x86_64-static"),
    ("aarch64-unknown-linux-musl", "aarch64", "manylinux_2_17", "qemu-aarch64-static"),
    ("armv7-unknown-linux-musleabihf", "armv7l", "manylinux_2_17", "qemu-arm-static"),
    ("i686-unknown-linux-musl", "i686", "manylinux_2_17", "qemu-i386-static"),
    ("riscv64gc-unknown-linux-musl", "riscv64", "manylinux_2_31", "qemu-riscv64-static"),
    ("powerpc64le-unknown-linux-musl", "ppc64le", "manylinux_2_17", "qemu-ppc64le-static"),
    ("s390x-unknown-linux-musl", "s390x", "manylinux_2_17", "qemu-s390x-static"),
];

/// Linked by rustc's lld in scripts/dist; the others by zig.
const LLD_TARGETS: [&str; 3] = ["x86_64-unknown-linux-musl", "aarch64-unknown-linux-musl", "i686-unknown-linux-musl"];

fn selected(target: &str) -> bool {
    match std::env::var("LASTCALL_ARCHES") {
        Ok(list) => list.split(',').any(|t| t.trim() == target),
        Err(_) => true,
    }
}

fn host_target() -> &'static str {
    let arch = match std::env::consts::ARCH {
        "x86" => "i686",
        "arm" => "armv7",
        "riscv64" => "riscv64gc",
        "powerpc64" => "powerpc64le",
        other => other,
    };
    TARGETS.iter().map(|t| t.0).find(|t| t.split('-').next() == Some(arch)).unwrap_or_else(|| panic!("no target for {arch}"))
}

/// The qemu-user that runs `target`, or none where this kernel runs it (its own, i686 on x86_64).
fn emulator(target: &str, qemu: &'static str) -> Option<&'static str> {
    let native = target == host_target() || (host_target().starts_with("x86_64-") && target.starts_with("i686-"));
    (!native).then_some(qemu)
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A scratch directory under target/ (the wheels, the venv, the installs), removed even on
/// failure.
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

/// Runs a program from the repository with a clean cargo environment; asserts success and
/// returns its stdout.
fn run(program: &Path, args: &[&str], env: &[(&str, &Path)]) -> String {
    let mut cmd = Command::new(program);
    common::outside_cargo(cmd.args(args).current_dir(repo()).stdin(Stdio::null()));
    cmd.envs(env.iter().copied());
    let started = Instant::now();
    let out = cmd.output().unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    eprintln!("{} {} took {:.0?}", program.display(), args.join(" "), started.elapsed());
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{} {args:?}: {}\n{stdout}{}", program.display(), out.status, String::from_utf8_lossy(&out.stderr));
    stdout
}

/// Every compiled file of a release build under target/ (the binaries and what cargo keeps in
/// deps/), with its modification time: a build that compiles anything changes this.
fn compiled() -> BTreeMap<PathBuf, SystemTime> {
    let mut found = BTreeMap::new();
    let dirs = fs::read_dir(repo().join("target")).into_iter().flatten().flatten();
    for target_dir in dirs.map(|e| e.path()).filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with("wheel-test-")) {
        for triple in fs::read_dir(&target_dir).into_iter().flatten().flatten() {
            let release = triple.path().join("release");
            let deps = fs::read_dir(release.join("deps")).into_iter().flatten().flatten().map(|e| e.path());
            for file in deps.chain([release.join("lastcall")]) {
                if let Ok(modified) = fs::metadata(&file).and_then(|m| m.modified()) {
                    found.insert(file, modified);
                }
            }
        }
    }
    found
}

/// The wheel files in `dir`.
fn wheels_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".whl"))
        .collect();
    names.sort();
    names
}

/// lastcall started from an install; killed with everything under it if the test fails.
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
fn every_wheel_installs_and_shuts_down() {
    let targets: Vec<_> = TARGETS.into_iter().filter(|t| selected(t.0)).collect();
    if targets.is_empty() {
        eprintln!("LASTCALL_ARCHES names none of scripts/dist's targets: nothing run");
        return;
    }
    let names: Vec<&str> = targets.iter().map(|t| t.0).collect();
    let scratch = Scratch::new("all");
    let dist = scratch.0.join("dist");
    fs::create_dir_all(&dist).unwrap();
    // Lines another script wrote stay; an older wheel's line goes.
    let other = "0000000000000000000000000000000000000000000000000000000000000000  lastcall-x86_64-unknown-linux-musl";
    let old_wheel = "1111111111111111111111111111111111111111111111111111111111111111  lastcall-0.0.0-py3-none-any.whl";
    fs::write(dist.join("SHA256SUMS"), format!("{other}\n{old_wheel}\n")).unwrap();

    // scripts/dist's build first (done already after tests/arches.rs), then the wheels from it:
    // maturin's cargo must find every target built, the zig-linked ones too, and compile nothing.
    run(&repo().join("scripts/dist"), &names, &[("DIST_DIR", &scratch.0.join("bins"))]);
    let before = compiled();
    let out = run(&repo().join("scripts/wheel"), &names, &[("DIST_DIR", &dist)]);
    assert_eq!(out, "", "scripts/wheel is quiet when nothing is wrong");
    let after = compiled();
    let rebuilt: Vec<_> = after.iter().filter(|(f, t)| before.get(*f) != Some(t)).map(|(f, _)| f).collect();
    assert!(rebuilt.is_empty(), "scripts/wheel compiled again what scripts/dist had built: {rebuilt:?}");

    // The names: one wheel per target, tagged for its architecture on musl and on glibc.
    let wheels = wheels_in(&dist);
    assert_eq!(wheels.len(), targets.len(), "{wheels:?}");
    let prefix = format!("lastcall-{}-py3-none-", env!("CARGO_PKG_VERSION"));
    let wheel_of = |arch: &str, manylinux: &str| -> String {
        let found: Vec<&String> = wheels
            .iter()
            .filter(|w| {
                let tags = w.strip_prefix(&prefix).and_then(|t| t.strip_suffix(".whl")).unwrap_or_else(|| panic!("{w}"));
                let tags: Vec<&str> = tags.split('.').collect();
                tags.contains(&format!("musllinux_1_2_{arch}").as_str()) && tags.contains(&format!("{manylinux}_{arch}").as_str())
            })
            .collect();
        assert_eq!(found.len(), 1, "no one wheel tagged musllinux_1_2_{arch} and {manylinux}_{arch} in {wheels:?}");
        found[0].clone()
    };

    // Reproducible: a second build gives the same bytes, for the host's wheel and for one whose
    // binary zig links.
    let again = scratch.0.join("again");
    let twice: Vec<&str> = names.iter().copied().filter(|t| *t == host_target()).chain(names.iter().copied().find(|t| !LLD_TARGETS.contains(t))).collect();
    if !twice.is_empty() {
        run(&repo().join("scripts/wheel"), &twice, &[("DIST_DIR", &again)]);
        let rebuilt = wheels_in(&again);
        assert_eq!(rebuilt.len(), twice.len(), "{rebuilt:?}");
        for wheel in rebuilt {
            assert!(fs::read(again.join(&wheel)).unwrap() == fs::read(dist.join(&wheel)).unwrap(), "two builds of {wheel} differ");
        }
    }

    // SHA256SUMS: the other line kept, the old wheel's replaced by this run's, which are right.
    let sums = fs::read_to_string(dist.join("SHA256SUMS")).unwrap();
    let sums: Vec<&str> = sums.lines().collect();
    assert!(sums.contains(&other), "{sums:?}");
    assert!(!sums.contains(&old_wheel), "{sums:?}");
    assert_eq!(sums.len(), 1 + wheels.len(), "{sums:?}");
    let check = run(Path::new("sh"), &["-c", "cd \"$DIST_DIR\" && grep '\\.whl$' SHA256SUMS | sha256sum --strict -c -"], &[("DIST_DIR", &dist)]);
    assert_eq!(check.matches(": OK").count(), wheels.len(), "{check}");

    // A fresh venv: the host's wheel goes into it; its pip puts each foreign wheel, for that
    // wheel's platform, into a directory of its own. Only the wheel's file, no index.
    let venv = scratch.0.join("venv");
    run(Path::new("python3"), &["-m", "venv", venv.to_str().unwrap()], &[]);
    let pip = venv.join("bin/pip");
    let mut installed = vec![];
    for &(target, arch, manylinux, qemu) in &targets {
        let whl = dist.join(wheel_of(arch, manylinux));
        let whl = whl.to_str().unwrap();
        let lastcall = if target == host_target() {
            run(&pip, &["install", "--quiet", "--no-index", whl], &[]);
            venv.join("bin/lastcall")
        } else {
            let dir = scratch.0.join(format!("install-{arch}"));
            let platform = format!("{manylinux}_{arch}");
            let args = ["install", "--quiet", "--no-index", "--no-deps", "--only-binary=:all:", "--platform", &platform, "--target", dir.to_str().unwrap(), whl];
            run(&pip, &args, &[]);
            dir.join("bin/lastcall")
        };
        // The installed binary is scripts/dist's, and static.
        let built = repo().join("target/dist").join(target).join("release/lastcall");
        assert!(fs::read(&lastcall).unwrap() == fs::read(&built).unwrap(), "{} is not {}", lastcall.display(), built.display());
        let kind = run(Path::new("file"), &["-b", lastcall.to_str().unwrap()], &[]);
        assert!(kind.contains("statically linked"), "{target}: {kind}");
        installed.push((target, lastcall, emulator(target, qemu)));
    }

    // The shutdowns side by side: each waits on deadlines fit for emulation.
    let failed: Vec<&str> = std::thread::scope(|scope| {
        let runs: Vec<_> = installed.iter().map(|(target, lastcall, qemu)| (*target, scope.spawn(|| shutdown(target, lastcall, *qemu, &scratch.0)))).collect();
        runs.into_iter().filter_map(|(t, h)| h.join().is_err().then_some(t)).collect()
    });
    assert!(failed.is_empty(), "the installed lastcall failed its shutdown for {failed:?}");
}

/// `lastcall --version` and a shutdown through an installed binary: TERM, the 1 s pre-stop, TERM
/// forwarded, and the app's exit status returned.
fn shutdown(target: &str, lastcall: &Path, qemu: Option<&str>, scratch: &Path) {
    let command = || {
        let mut cmd = match qemu {
            Some(q) => Command::new(q),
            None => Command::new(lastcall),
        };
        if qemu.is_some() {
            cmd.arg(lastcall);
        }
        cmd.stdin(Stdio::null());
        cmd
    };
    let out = command().arg("--version").output().unwrap();
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && version.starts_with(&format!("lastcall {} (", env!("CARGO_PKG_VERSION"))) && version.contains(target), "{target}: {version}");

    // lastcall's timeline and the app's lines go to one file, so their order there is the order
    // they happened in.
    let log = scratch.join(format!("log-{target}"));
    let file = fs::File::create(&log).unwrap();
    let app = "trap 'echo got TERM; exit 7' TERM; echo app ready; while :; do sleep 1 & wait; done";
    let child = command().args(["--pre-stop", "1s", "--", "sh", "-c", app]).stdout(file.try_clone().unwrap()).stderr(file).spawn().unwrap();
    let mut started = Started(child);
    let read = || fs::read_to_string(&log).unwrap_or_default();
    wait_until(LONG, "app ready", || read().contains("app ready").then_some(()));
    kill(started.0.id() as i32, libc::SIGTERM);
    let child = &mut started.0;
    let code = exit_code(wait_until(LONG, "lastcall to exit", || child.try_wait().unwrap()));
    let text = read();
    assert_eq!(code, 7, "{target}: the app's exit status:\n{text}");
    let at = |what: &str| text.find(what).unwrap_or_else(|| panic!("{target}: no '{what}' in:\n{text}"));
    // The app may print its line before lastcall prints that it forwarded: both follow the
    // pre-stop's end.
    let [received, ended, forwarded, got] = ["received SIGTERM", "pre-stop ended", "forwarded SIGTERM", "got TERM"].map(at);
    assert!(received < ended && ended < forwarded && ended < got, "{target}: out of order:\n{text}");
    let waited = timeline_seconds(&text, "forwarded SIGTERM") - timeline_seconds(&text, "received SIGTERM");
    assert!(waited >= 0.95, "{target}: the app got TERM {waited:.3}s after lastcall did, not after the 1s pre-stop:\n{text}");
}
