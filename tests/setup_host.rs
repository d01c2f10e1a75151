//! scripts/setup-host is honest: when rustup cannot add the musl target it says so, shows
//! rustup's own error and fails, so that a Quick start stops there instead of building the glibc
//! binary that is not meant to ship. Run on a copy of the scripts, with a stand-in rustup first
//! in PATH, so that nothing touches the checkout or the real toolchain.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use common::scratch;

/// A copy of scripts/setup-host and scripts/host-target under `dir`, and a `rustup` in
/// `dir/bin` that lists `listed` and answers `target add` with `add_exit` and `add_says`.
fn setup(dir: &Path, listed: bool, add_exit: i32, add_says: &str) -> std::process::Output {
    let list = |target: &str| if listed { format!("printf '{target}\\nsome-other-target\\n'") } else { "printf 'some-other-target\\n'".into() };
    setup_with(dir, list, add_exit, add_says)
}

/// `setup`, with `target list` answered by the shell code `list` makes of the host's target.
fn setup_with(dir: &Path, list: impl Fn(&str) -> String, add_exit: i32, add_says: &str) -> std::process::Output {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    fs::create_dir_all(dir.join("scripts")).unwrap();
    fs::create_dir_all(dir.join(".cargo")).unwrap();
    fs::create_dir_all(dir.join("bin")).unwrap();
    for script in ["setup-host", "host-target"] {
        fs::copy(repo.join("scripts").join(script), dir.join("scripts").join(script)).unwrap();
    }
    let target = String::from_utf8(Command::new(repo.join("scripts/host-target")).output().unwrap().stdout).unwrap();
    let list = list(target.trim());
    let rustup = dir.join("bin/rustup");
    fs::write(
        &rustup,
        format!("#!/bin/sh\ncase \"$1 $2\" in\n  'target list') {list} ;;\n  'target add') echo '{add_says}' >&2; exit {add_exit} ;;\nesac\n"),
    )
    .unwrap();
    fs::set_permissions(&rustup, fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", dir.join("bin").display(), std::env::var("PATH").unwrap_or_default());
    Command::new(dir.join("scripts/setup-host")).env("PATH", path).output().unwrap()
}

#[test]
fn a_failed_download_is_said_shown_and_fails() {
    let dir = scratch("setup-host-fails");
    let says = "error: could not download file from https://static.rust-lang.org/x: could not resolve host";
    let out = setup(&dir, true, 1, says);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("rustup could not add") && stderr.contains(says), "{stderr}");
    assert!(!stderr.contains("has no") && !stderr.contains("ships no"), "not the untrue excuse: {stderr}");
    assert!(!dir.join(".cargo/host.toml").exists());
}

#[test]
fn a_target_rustup_does_not_ship_falls_back_and_says_so() {
    let dir = scratch("setup-host-none");
    let out = setup(&dir, false, 1, "never asked");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("ships no") && stderr.contains("scripts/dist host"), "{stderr}");
    assert!(!dir.join(".cargo/host.toml").exists());
}

#[test]
fn success_names_the_target_quietly() {
    let dir = scratch("setup-host-ok");
    let out = setup(&dir, true, 0, "");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty() && String::from_utf8_lossy(&out.stderr).trim().is_empty());
    let toml = fs::read_to_string(dir.join(".cargo/host.toml")).unwrap();
    assert!(toml.contains("target = \"") && toml.contains("-linux-musl"), "{toml}");
}

#[test]
fn a_rustup_that_cannot_list_its_targets_fails_with_its_own_words() {
    let dir = scratch("setup-host-no-list");
    let says = "error: toolchain 'stable-x86_64-unknown-linux-gnu' is not installed";
    let out = setup_with(&dir, |_| format!("echo \"{says}\" >&2; exit 1"), 0, "never asked");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("could not list") && stderr.contains(says), "{stderr}");
    assert!(!stderr.contains("ships no") && !stderr.contains("static glibc"), "not the untrue excuse: {stderr}");
    assert!(!dir.join(".cargo/host.toml").exists());
}
