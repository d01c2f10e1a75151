//! Embeds what `lastcall --version` names: the target the binary was built for and the git
//! commit (dockerd's `docker info` shows the commit as the init version).

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=LASTCALL_GIT_COMMIT");
    println!("cargo:rustc-env=LASTCALL_BUILD_TARGET={}", std::env::var("TARGET").unwrap_or_default());
    // .cargo/config.toml: a glibc build is static but not what ships; say how to get that one.
    if std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu") {
        println!("cargo:warning=building the static glibc binary; scripts/setup-host makes cargo build the musl one lastcall ships");
    }
    // A build outside git (a source tarball, a Docker context without .git) can name the commit
    // itself; otherwise "unknown". Only letters, digits and '-' survive, because dockerd splits
    // the `git.COMMIT` part at its one dot.
    let commit = std::env::var("LASTCALL_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "--short=7", "HEAD"]))
        .map(|c| c.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').collect::<String>())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=LASTCALL_GIT_COMMIT={commit}");
    // Rebuild when HEAD moves: HEAD itself (a worktree has its own) and the branch it points at.
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={}", PathBuf::from(&dir).join("HEAD").display());
    }
    if let (Some(common), Some(branch)) = (git(&["rev-parse", "--git-common-dir"]), git(&["symbolic-ref", "-q", "HEAD"])) {
        println!("cargo:rerun-if-changed={}", PathBuf::from(&common).join(branch).display());
        let packed = PathBuf::from(&common).join("packed-refs");
        if packed.exists() {
            println!("cargo:rerun-if-changed={}", packed.display());
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
