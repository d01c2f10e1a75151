//! What users install: the man page (made from the option table), the Debian packages and the
//! OCI archive that scripts/package makes from scripts/dist's binaries. The packages are checked
//! for lintian, for their contents, and for the same bytes from two runs; installing them into a
//! Debian root and `COPY --from=` the image are the real-host suite's (tests/hosts/packages.rs).
mod common;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{scratch, LASTCALL};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A command from the repository with a clean cargo environment: the outer `cargo test` sets
/// variables and a toolchain that an inner cargo must not inherit.
fn in_repo(program: &str) -> Command {
    let mut cmd = Command::new(repo().join(program));
    common::outside_cargo(cmd.current_dir(repo()));
    cmd
}

/// The long options `--help` lists, `--help` itself included.
fn long_options_in_help() -> BTreeSet<String> {
    let help = String::from_utf8(run(Command::new(LASTCALL).arg("--help")).stdout).unwrap();
    let options = help.split("\nOptions:\n").nth(1).expect("an Options section");
    let options = options.split("\n\n").next().unwrap();
    let names: BTreeSet<String> = options
        .split_whitespace()
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| w.trim_end_matches(',').to_string())
        .collect();
    assert!(names.len() >= 20 && names.contains("--pre-stop") && names.contains("--help"), "{names:?}");
    names
}

#[test]
fn every_option_is_in_the_help_the_man_page_and_the_readme() {
    let man = lastcall::cli::man::page("0.0.0", "2026-01-01");
    let readme = fs::read_to_string(repo().join("README.md")).unwrap();
    let table = readme.split("\n## Options\n").nth(1).expect("the README's Options section");
    let table = table.split("\n## ").next().unwrap();
    for option in long_options_in_help() {
        assert!(man.contains(&option.replace('-', "\\-")), "{option} is not in the man page");
        assert!(table.contains(&format!("`{option}")) || table.contains(&format!(", {option}")), "{option} is not in the README's Options");
    }
    for probe_option in ["--timeout"] {
        assert!(man.contains(&probe_option.replace('-', "\\-")) && table.contains(probe_option), "{probe_option}");
    }
}

#[test]
fn the_man_page_renders_without_a_warning() {
    let dir = scratch("man");
    let page = dir.join("lastcall.1");
    fs::write(&page, lastcall::cli::man::page("0.0.0", "2026-01-01")).unwrap();
    let out = run(Command::new("man").args(["--warnings", "-l"]).arg(&page).env("MANWIDTH", "80").env("MAN_KEEP_FORMATTING", "0").env("LC_ALL", "C.UTF-8"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.trim().is_empty(), "man warned:\n{stderr}");
    // Without a terminal, man shows bold and underline by overstriking: a character, a backspace.
    let mut text = String::new();
    for c in String::from_utf8_lossy(&out.stdout).chars() {
        if c == '\u{8}' {
            text.pop();
        } else {
            text.push(c);
        }
    }
    for section in ["NAME", "SYNOPSIS", "OPTIONS", "PROBES", "ENVIRONMENT", "TIMELINE", "EXIT STATUS"] {
        assert!(text.lines().any(|l| l == section), "no {section} in:\n{text}");
    }
    let _ = fs::remove_dir_all(&dir);
}

/// scripts/dist's seven binaries (cargo keeps its builds in target/dist, so after tests/arches.rs
/// this only copies them) and scripts/package's files from them, in `dir`.
fn package(dir: &Path) {
    run(in_repo("scripts/dist").env("DIST_DIR", dir));
    run(in_repo("scripts/package").env("DIST_DIR", dir));
}

const DEB_ARCHES: [&str; 7] = ["amd64", "arm64", "armhf", "i386", "ppc64el", "riscv64", "s390x"];

fn debs(dir: &Path) -> Vec<PathBuf> {
    let version = fs::read_to_string(repo().join("Cargo.toml"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("version = \"").map(|v| v.trim_end_matches('"').to_string()))
        .unwrap();
    DEB_ARCHES.iter().map(|arch| dir.join(format!("lastcall_{version}-1_{arch}.deb"))).collect()
}

#[test]
fn packages_are_lintian_clean_complete_and_reproducible() {
    let first = repo().join("target/packages/first");
    let second = repo().join("target/packages/second");
    for dir in [&first, &second] {
        let _ = fs::remove_dir_all(dir);
        fs::create_dir_all(dir).unwrap();
    }
    package(&first);
    // The second run packages the same binaries again, later: every byte must be the same.
    for entry in fs::read_dir(&first).unwrap() {
        let name = entry.unwrap().file_name();
        let name = name.to_string_lossy();
        if name.starts_with("lastcall-") && name.contains("-linux-musl") {
            fs::copy(first.join(&*name), second.join(&*name)).unwrap();
        }
    }
    run(in_repo("scripts/package").env("DIST_DIR", &second));
    let others = ["lastcall-oci.tar", "lastcall-oci.digest", "lastcall.1", "SHA256SUMS"].map(|f| first.join(f));
    for file in debs(&first).iter().chain(&others) {
        let name = file.file_name().unwrap();
        assert!(fs::read(file).unwrap() == fs::read(second.join(name)).unwrap(), "{} differs between two runs", name.to_string_lossy());
    }
    // Every file is in SHA256SUMS, and the sums are right.
    let listed = run(Command::new("sha256sum").args(["--strict", "-c", "SHA256SUMS"]).current_dir(&first));
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert_eq!(listed.lines().count(), 7 + 7 + 2, "{listed}");

    // Lintian, as Debian's archive runs it, errors and warnings failing.
    let debs = debs(&first);
    let out = Command::new("lintian").args(["--fail-on", "error,warning"]).args(&debs).output().unwrap();
    assert!(out.status.success(), "lintian:\n{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));

    for (deb, arch) in debs.iter().zip(DEB_ARCHES) {
        let fields = String::from_utf8(run(Command::new("dpkg-deb").arg("-f").arg(deb).args(["Package", "Architecture"])).stdout).unwrap();
        assert_eq!(fields, format!("Package: lastcall\nArchitecture: {arch}\n"));
        let contents = String::from_utf8(run(Command::new("dpkg-deb").arg("-c").arg(deb)).stdout).unwrap();
        let files: Vec<&str> = contents.lines().filter(|l| l.starts_with('-')).map(|l| l.rsplit(' ').next().unwrap()).collect();
        assert_eq!(
            files,
            [
                "./usr/bin/lastcall",
                "./usr/share/doc/lastcall/README",
                "./usr/share/doc/lastcall/changelog.Debian.gz",
                "./usr/share/doc/lastcall/copyright",
                "./usr/share/lintian/overrides/lastcall",
                "./usr/share/man/man1/lastcall.1.gz",
            ]
        );
        assert!(contents.lines().all(|l| l.contains(" root/root ")), "{contents}");
    }

    // The image: a list of the seven platforms, each one layer with /lastcall.
    let raw = run(Command::new("skopeo").args(["inspect", "--raw"]).arg(format!("oci-archive:{}", first.join("lastcall-oci.tar").display())));
    let index = String::from_utf8_lossy(&raw.stdout);
    for platform in [
        r#""architecture":"amd64""#,
        r#""architecture":"arm64","os":"linux","variant":"v8""#,
        r#""architecture":"arm","os":"linux","variant":"v7""#,
        r#""architecture":"386""#,
        r#""architecture":"riscv64""#,
        r#""architecture":"ppc64le""#,
        r#""architecture":"s390x""#,
    ] {
        assert!(index.contains(platform), "{platform} not in the image's list: {index}");
    }
    for dir in [&first, &second] {
        let _ = fs::remove_dir_all(dir);
    }
}
