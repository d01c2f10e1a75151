//! The independent harness (benches/independent.py) runs end to end on a few rounds: it exits 0,
//! its JSON has a start-up and a latency figure for every set-up of lastcall and every peer
//! installed, each positive and finite, and it leaves neither its cgroup nor its temporary
//! directory (the notify socket's) behind. No verdict on the figures: the machine is shared.
//!
//! Needs python3 and gcc with a static libc (scripts/setup-test-machine installs them); skips
//! with the reason when either is missing. Uses the release build of lastcall, as the
//! instructions test does, from the same target directory.
mod common;

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

fn runs(program: &str, arg: &str) -> bool {
    Command::new(program).arg(arg).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

fn is_root() -> bool {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|ids| ids.split_whitespace().nth(1)).is_some_and(|euid| euid == "0")
}

/// The JSON figures, flattened by python3's own parser into `path<TAB>value` lines (the test
/// suite has no JSON parser): one per number or string, the path's keys joined by `/`.
fn flatten(json: &Path) -> HashMap<String, String> {
    const FLATTEN: &str = r#"
import json, sys
def walk(path, v):
    if isinstance(v, dict):
        for k, x in v.items():
            walk(path + [k], x)
    elif isinstance(v, (int, float, str)) and not isinstance(v, bool):
        print("/".join(path) + "\t" + str(v))
walk([], json.load(open(sys.argv[1])))
"#;
    let out = Command::new("python3").args(["-c", FLATTEN]).arg(json).output().expect("python3");
    assert!(out.status.success(), "reading {}: {}", json.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn independent_harness_runs_and_cleans_up() {
    for (program, arg) in [("python3", "--version"), ("gcc", "--version")] {
        if !runs(program, arg) {
            println!("skipped: {program} is not installed (scripts/setup-test-machine installs it)");
            return;
        }
    }
    let binary = common::release_binary();
    let scratch = common::scratch("independent-bench");
    let json_path = scratch.join("figures.json");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/independent.py");
    let mut cmd = Command::new("python3");
    cmd.arg(&script)
        .args(["--lastcall", &binary, "--rounds", "5", "--signals", "20", "--json"])
        .arg(&json_path)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    common::outside_cargo(&mut cmd);
    let out = cmd.output().expect("python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "independent.py: {}\n{stdout}\n{stderr}", out.status);
    println!("{stdout}");

    let figures = flatten(&json_path);
    let number = |path: &str| -> f64 {
        let v = figures.get(path).unwrap_or_else(|| panic!("no {path} in the JSON"));
        v.parse().unwrap_or_else(|_| panic!("{path}: {v} is not a number"))
    };

    let mut expected: Vec<&str> =
        vec!["lastcall", "lastcall NOTIFY_SOCKET", "lastcall --setsid", "lastcall -c", "lastcall --health-listen"];
    if is_root() {
        expected.push("lastcall --user");
    }
    for (name, path) in [
        ("tini", "/usr/bin/tini"),
        ("tini-static", "/usr/bin/tini-static"),
        ("dumb-init", "/usr/bin/dumb-init"),
        ("catatonit", "/usr/bin/catatonit"),
    ] {
        if Path::new(path).exists() {
            expected.push(name);
        }
    }
    for name in &expected {
        for path in ["startup/figures/{}/median_us", "latency/figures/{}/p50_us", "latency/figures/{}/p99_us"] {
            let path = format!("sections/{}", path.replace("{}", name));
            let v = number(&path);
            assert!(v.is_finite() && v > 0.0, "{path}: {v}");
        }
        // A difference of two medians: finite, but on a busy machine it may fall below zero.
        let overhead = number(&format!("sections/startup/figures/{name}/overhead_us"));
        assert!(overhead.is_finite(), "{name}'s overhead: {overhead}");
    }
    let alone = number("sections/startup/figures/true/median_us");
    assert!(alone.is_finite() && alone > 0.0, "`fixture true` alone: {alone}");

    // Nothing left behind: the cgroup it made (when it could make one) and its own directory,
    // where the notify socket was.
    match figures.get("cgroup") {
        Some(dir) => assert!(!Path::new(dir).exists(), "the cgroup {dir} is still there"),
        None => println!("no cgroup was made: {:?}", figures.get("cgroup_note")),
    }
    let tempdir = figures.get("tempdir").expect("tempdir in the JSON");
    assert!(!Path::new(tempdir).exists(), "the harness's directory {tempdir} is still there");
    let _ = fs::remove_dir_all(&scratch);
}
