//! Every code block in README.md and docs/*.md works as written. The blocks are read out of the
//! Markdown, not copied into this file, so that a block edited in the docs is the block tested.
//!
//! What happens to a block is decided by its language and, where that is not enough, by a
//! marker: an HTML comment (invisible on GitHub) on the line right above the opening fence:
//!
//! | marker                                   | what the test does                                          |
//! |------------------------------------------|-------------------------------------------------------------|
//! | (none) on `sh`/`bash`/`shell`            | runs it with `bash -euo pipefail` in a scratch copy of the repository; it must exit 0 |
//! | `<!-- readme-test: serve PORT -->`       | starts it there, waits for 127.0.0.1:PORT to accept, sends SIGTERM to it, asks for `GET /b` during the pre-stop (it must be answered 200), and wants lastcall's timeline and a clean exit |
//! | `<!-- readme-test: output -->`           | on a block with no language right after a run or served one: what that block prints. Each line, its numbers masked, must be among the lines printed, each program's lines (what comes before the first `:`, e.g. `lastcall`, `app`) in the order shown |
//! | (none) on `dockerfile`                   | built by the real dockerd's classic builder (`DOCKER_BUILDKIT=0 docker build`), see below |
//! | `<!-- readme-test: fragment -->`         | only checks it parses (`bash -n`, the Dockerfile, YAML, unit syntax) |
//! | `<!-- readme-test: skip REASON -->`      | checks it parses and prints the reason (a daemon to configure, a system path to install into, minutes of builds, the network) |
//! | (none) on a Compose file (`services:`)   | validated by `docker-compose config`, then brought up against that dockerd (its init-path is lastcall) and stopped: each service's log must hold lastcall's timeline, each container exit 0 with the init |
//! | (none) on other `yaml`, `ini`/`systemd`  | parsed: YAML, unit file syntax (the hosts suite runs the README's units verbatim under systemd) |
//!
//! The Dockerfile blocks are built with the hosts suite's own dockerd (tests/hosts/: a private
//! data root under target/hosts-cache, no iptables, no bridge), under the machine-wide
//! /tmp/lastcall-hosts.lock, in a context holding what the blocks copy: `dist/` as `scripts/dist
//! host` leaves it (this run's lastcall and its SHA256SUMS), `examples/`, and for the distroless
//! recipe `lastcall`, an `app` (busybox-static) and its `passwd` and `group`. No registry is
//! reachable, so a FROM image that is not `scratch` gets a local stand-in tagged with its name
//! (the busybox-static image), removed afterwards: every instruction of the block runs for real,
//! on that stand-in. An `image:` of a Compose file that does not exist gets a stand-in app (a
//! shell that drains on TERM), and the machine's lack of a bridge network a second Compose file
//! with `network_mode: none`. LASTCALL_HOSTS_SKIP=1 (a machine without root or dockerd) only
//! parses them, loudly.
//!
//! A block with no language is output or a diagram and is left alone. A marker that names no
//! known kind, or one not followed by a fence, fails the test.

mod common;

// The hosts suite's dockerd, reused as it is: the same data root, lock, images and teardown.
#[macro_use]
#[path = "hosts/cases.rs"]
#[allow(dead_code)]
mod cases;
#[path = "hosts/docker.rs"]
#[allow(dead_code, unused_imports)]
mod docker;
#[path = "hosts/others.rs"]
#[allow(dead_code, unused_imports)]
mod others;
#[path = "hosts/support.rs"]
#[allow(dead_code, unused_imports)]
mod support;
#[path = "hosts/systemd.rs"]
#[allow(dead_code, unused_imports)]
mod systemd;

/// What the hosts suite's modules list their tests in; this file runs none of them.
pub use cases::Case;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{descendants, scratch, wait_until};

const MARKER: &str = "<!-- readme-test:";
/// A run or a served block: the first `cargo build --release` of a scratch copy takes a while on
/// a loaded machine.
const LIMIT: Duration = Duration::from_secs(900);

#[derive(Debug, Clone, PartialEq)]
enum Marker {
    None,
    Serve(u16),
    Output,
    Fragment,
    Skip(String),
}

#[derive(Debug)]
struct Block {
    file: String,
    line: usize,
    lang: String,
    marker: Marker,
    text: String,
}

impl Block {
    fn place(&self) -> String {
        format!("{}:{} ({})", self.file, self.line, self.lang)
    }
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn documents() -> Vec<PathBuf> {
    let mut docs = vec![repo().join("README.md")];
    if let Ok(dir) = fs::read_dir(repo().join("docs")) {
        let mut more: Vec<PathBuf> = dir.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "md")).collect();
        more.sort();
        docs.extend(more);
    }
    docs
}

fn parse_marker(text: &str) -> Result<Marker, String> {
    let inner = text.trim().strip_prefix(MARKER).and_then(|t| t.strip_suffix("-->")).ok_or("not a marker")?.trim();
    let (kind, arg) = inner.split_once(char::is_whitespace).map_or((inner, ""), |(k, a)| (k, a.trim()));
    match kind {
        "serve" => arg.parse().map(Marker::Serve).map_err(|_| format!("serve needs a port: {text}")),
        "output" if arg.is_empty() => Ok(Marker::Output),
        "fragment" => Ok(Marker::Fragment),
        "skip" if !arg.is_empty() => Ok(Marker::Skip(arg.to_string())),
        "skip" => Err(format!("skip needs a reason: {text}")),
        _ => Err(format!("unknown marker: {text}")),
    }
}

/// The fenced blocks of one Markdown file, each with the marker right above it.
fn blocks_of(path: &Path) -> Vec<Block> {
    let file = path.strip_prefix(repo()).unwrap_or(path).display().to_string();
    let text = fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.trim_start().starts_with(MARKER) {
            let next = lines.get(i + 1).map_or("", |l| l.trim_start());
            assert!(next.starts_with("```"), "{file}:{}: a marker must sit right above a fence", i + 1);
        }
        let ticks = line.trim_start().bytes().take_while(|&b| b == b'`').count();
        if ticks < 3 {
            i += 1;
            continue;
        }
        let info = &line.trim_start()[ticks..];
        let lang = info.split_whitespace().next().unwrap_or("").to_lowercase();
        let marker = match i.checked_sub(1).map(|p| lines[p]) {
            Some(above) if above.trim_start().starts_with(MARKER) => {
                parse_marker(above).unwrap_or_else(|e| panic!("{file}:{i}: {e}"))
            }
            _ => Marker::None,
        };
        let start = i + 1;
        // The closing fence: backticks only, at least as many as the opening one.
        let closes = |l: &str| l.trim().len() >= ticks && l.trim().bytes().all(|b| b == b'`');
        let end = (start..lines.len()).find(|&j| closes(lines[j])).unwrap_or_else(|| panic!("{file}:{start}: unclosed fence"));
        blocks.push(Block { file: file.clone(), line: start, lang, marker, text: lines[start..end].join("\n") + "\n" });
        i = end + 1;
    }
    blocks
}

fn all_blocks() -> Vec<Block> {
    documents().iter().flat_map(|d| blocks_of(d)).collect()
}

#[test]
fn markers_are_read() {
    assert_eq!(parse_marker("<!-- readme-test: serve 8080 -->"), Ok(Marker::Serve(8080)));
    assert_eq!(parse_marker("<!-- readme-test: fragment -->"), Ok(Marker::Fragment));
    assert_eq!(parse_marker("<!-- readme-test: output -->"), Ok(Marker::Output));
    assert_eq!(parse_marker("<!-- readme-test: skip needs dockerd -->"), Ok(Marker::Skip("needs dockerd".into())));
    for bad in ["<!-- readme-test: skip -->", "<!-- readme-test: serve x -->", "<!-- readme-test: runn -->", "<!-- readme-test: fragment", "<!-- readme-test: output x -->"] {
        assert!(parse_marker(bad).is_err(), "{bad}");
    }
    let dir = scratch("readme-markers");
    let md = dir.join("x.md");
    fs::write(&md, "text\n<!-- readme-test: fragment -->\n```Dockerfile\nFROM x\n```\n\n```sh\necho hi\n```\n````\n```\n````\n").unwrap();
    let blocks = blocks_of(&md);
    assert_eq!(blocks.len(), 3, "{blocks:?}");
    assert_eq!((blocks[0].lang.as_str(), &blocks[0].marker, blocks[0].text.as_str()), ("dockerfile", &Marker::Fragment, "FROM x\n"));
    assert_eq!((blocks[1].lang.as_str(), &blocks[1].marker), ("sh", &Marker::None));
    assert_eq!(blocks[2].text, "```\n", "a longer fence holds a shorter one");
}

const DOCKERFILE_INSTRUCTIONS: &[&str] = &[
    "FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME", "USER", "WORKDIR", "ARG",
    "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL", "MAINTAINER",
];

/// Each instruction (continuation lines joined) is one Docker knows, with arguments; JSON-form
/// arguments are JSON arrays of strings.
fn check_dockerfile(text: &str) -> Result<(), String> {
    let mut logical = String::new();
    let mut instructions = 0;
    for line in text.lines() {
        let trimmed = line.trim();
        if logical.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        if let Some(body) = trimmed.strip_suffix('\\') {
            logical.push_str(body);
            logical.push(' ');
            continue;
        }
        logical.push_str(trimmed);
        let (word, args) = logical.split_once(char::is_whitespace).unwrap_or((&logical, ""));
        if !DOCKERFILE_INSTRUCTIONS.contains(&word.to_uppercase().as_str()) {
            return Err(format!("unknown instruction '{word}'"));
        }
        if args.trim().is_empty() {
            return Err(format!("{word} without arguments"));
        }
        let args = args.trim();
        let json_form = ["CMD", "ENTRYPOINT", "RUN", "SHELL"].contains(&word.to_uppercase().as_str()) || word.eq_ignore_ascii_case("HEALTHCHECK");
        if json_form && args.contains('[') {
            let array = &args[args.find('[').unwrap()..];
            check_json_strings(array).map_err(|e| format!("{word}: {e}: {array}"))?;
        }
        instructions += 1;
        logical.clear();
    }
    if !logical.is_empty() {
        return Err("a continuation with nothing after it".into());
    }
    if instructions == 0 {
        return Err("no instruction".into());
    }
    Ok(())
}

/// `["a", "b"]`: a JSON array of plain strings (the exec form).
fn check_json_strings(text: &str) -> Result<(), String> {
    let out = Command::new("python3")
        .args(["-c", "import json,sys; v=json.loads(sys.argv[1]); assert isinstance(v, list) and all(isinstance(s, str) for s in v)", text])
        .output()
        .map_err(|e| e.to_string())?;
    out.status.success().then_some(()).ok_or_else(|| "not a JSON array of strings".into())
}

/// systemd's unit syntax: sections, `Key=Value`, comments, backslash continuations.
fn check_unit(text: &str) -> Result<(), String> {
    let mut section = None;
    let mut continued = false;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        let was_continued = std::mem::replace(&mut continued, trimmed.ends_with('\\'));
        if was_continued || trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        if let Some(name) = trimmed.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            section = Some(name.to_string());
            continue;
        }
        let (key, _) = trimmed.split_once('=').ok_or_else(|| format!("line {}: not Key=Value: {trimmed}", n + 1))?;
        if section.is_none() {
            return Err(format!("line {}: {key} before any [Section]", n + 1));
        }
        if key.is_empty() || !key.trim().chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(format!("line {}: bad key '{key}'", n + 1));
        }
    }
    if section.is_none() {
        return Err("no [Section]".into());
    }
    Ok(())
}

fn check_yaml(text: &str, dir: &Path, fragment: bool) -> Result<(), String> {
    let file = dir.join("block.yaml");
    fs::write(&file, text).unwrap();
    // Debian's python3, whose python3-yaml comes with docker-compose (scripts/setup-test-machine).
    let out = Command::new("/usr/bin/python3")
        .args(["-c", "import sys, yaml; list(yaml.safe_load_all(open(sys.argv[1])))"])
        .arg(&file)
        .output()
        .map_err(|e| format!("/usr/bin/python3: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    // A whole Compose file is validated against Compose's own schema.
    if !fragment && text.lines().any(|l| l.starts_with("services:")) {
        let out = Command::new("docker-compose").arg("-f").arg(&file).args(["config", "-q"]).output().map_err(|e| format!("docker-compose: {e}"))?;
        if !out.status.success() {
            return Err(format!("docker-compose config: {}", String::from_utf8_lossy(&out.stderr)));
        }
    }
    Ok(())
}

fn check_shell_syntax(text: &str) -> Result<(), String> {
    let out = Command::new("bash").args(["-n", "-c", text]).output().map_err(|e| e.to_string())?;
    out.status.success().then_some(()).ok_or_else(|| String::from_utf8_lossy(&out.stderr).into_owned())
}

fn is_shell(lang: &str) -> bool {
    matches!(lang, "sh" | "bash" | "shell" | "console")
}

/// A block that `every_shell_block_runs` runs or serves.
fn is_run(block: &Block) -> bool {
    is_shell(&block.lang) && matches!(block.marker, Marker::None | Marker::Serve(_))
}

/// Whether the block parses as its language says.
fn check_parses(block: &Block, dir: &Path) -> Result<(), String> {
    let fragment = block.marker != Marker::None;
    match block.lang.as_str() {
        l if is_shell(l) => check_shell_syntax(&block.text),
        "dockerfile" | "docker" => check_dockerfile(&block.text),
        "yaml" | "yml" => check_yaml(&block.text, dir, fragment),
        "ini" | "systemd" => check_unit(&block.text),
        _ => Ok(()),
    }
}

#[test]
fn every_block_parses() {
    let dir = scratch("readme-parse");
    let blocks = all_blocks();
    assert!(!blocks.is_empty());
    let failed: Vec<String> =
        blocks.iter().filter_map(|b| check_parses(b, &dir).err().map(|e| format!("{}: {e}\n{}", b.place(), b.text))).collect();
    assert!(failed.is_empty(), "blocks that do not parse:\n{}", failed.join("\n"));
    for (n, b) in blocks.iter().enumerate() {
        if b.marker == Marker::Output {
            let after_run = n.checked_sub(1).map(|p| &blocks[p]).is_some_and(|p| p.file == b.file && is_run(p));
            assert!(after_run && b.lang.is_empty(), "{}: an output block has no language and follows a run or served block", b.place());
        }
    }
    for b in &blocks {
        if let Marker::Skip(reason) = &b.marker {
            eprintln!("{}: not run: {reason}", b.place());
        }
    }
}

#[test]
fn unit_and_dockerfile_checks_can_fail() {
    assert!(check_unit("[Service]\nExecStart=/x \\\n  --y\n").is_ok());
    assert!(check_unit("ExecStart=/x\n").is_err());
    assert!(check_unit("[Service]\nnonsense\n").is_err());
    assert!(check_dockerfile("FROM x\nRUN a \\\n  b\nCMD [\"a\", \"b\"]\n").is_ok());
    assert!(check_dockerfile("FORM x\n").is_err());
    assert!(check_dockerfile("CMD [\"a\", b]\n").is_err());
    assert!(check_dockerfile("RUN a \\\n").is_err());
    let dir = scratch("readme-yaml");
    assert!(check_yaml("services:\n  app:\n    image: x\n    init: true\n", &dir, false).is_ok());
    assert!(check_yaml("services:\n  app:\n    image: x\n    init: maybe\n", &dir, false).is_err());
    assert!(check_yaml("a: [\n", &dir, true).is_err());
}

/// A copy of the repository's tracked files, with this checkout's .cargo/host.toml and a
/// `target` that lasts across runs (the blocks build in it).
fn repo_copy() -> PathBuf {
    let dir = scratch("readme-run");
    let files = Command::new("git").args(["ls-files", "-z"]).current_dir(repo()).output().unwrap();
    assert!(files.status.success(), "git ls-files");
    for name in files.stdout.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let name = String::from_utf8_lossy(name).into_owned();
        let from = repo().join(&name);
        if !from.is_file() {
            continue;
        }
        let to = dir.join(&name);
        fs::create_dir_all(to.parent().unwrap()).unwrap();
        fs::copy(&from, &to).unwrap();
    }
    let host = repo().join(".cargo/host.toml");
    if host.exists() {
        fs::copy(&host, dir.join(".cargo/host.toml")).unwrap();
    }
    let target = repo().join("target/readme-blocks");
    fs::create_dir_all(&target).unwrap();
    std::os::unix::fs::symlink(&target, dir.join("target")).unwrap();
    dir
}

/// A scratch directory removed when dropped (its `target` link goes, not what it points at).
struct Removed(PathBuf);

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A block started in its own process group, killed with everything it started when dropped.
struct Started(std::process::Child);

impl Drop for Started {
    fn drop(&mut self) {
        let pid = self.0.id() as i32;
        for p in descendants(pid) {
            // SAFETY: kill takes plain integers.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(block: &Block, dir: &Path, log: &Path) -> Started {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new("bash");
    cmd.args(["-euo", "pipefail", "-c", &block.text])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(fs::File::create(log).unwrap())
        .stderr(fs::File::create(log.with_extension("err")).unwrap())
        .process_group(0);
    Started(cmd.spawn().unwrap())
}

fn output_of(log: &Path) -> String {
    format!("{}{}", fs::read_to_string(log).unwrap_or_default(), fs::read_to_string(log.with_extension("err")).unwrap_or_default())
}

/// Runs every shell block that is not marked otherwise, and serves the served ones.
#[test]
fn every_shell_block_runs() {
    let all = all_blocks();
    let runs: Vec<(usize, &Block)> = all.iter().enumerate().filter(|(_, b)| is_run(b)).collect();
    if runs.is_empty() {
        return;
    }
    let dir = repo_copy();
    let _removed = Removed(dir.clone());
    let mut failed = Vec::new();
    for (n, block) in runs {
        let log = dir.join(format!("block-{n}.log"));
        let mut started = start(block, &dir, &log);
        let ran = match block.marker {
            Marker::Serve(port) => serve(&mut started, port, &log),
            _ => {
                let status = wait_until(LIMIT, &block.place(), || started.0.try_wait().unwrap());
                status.success().then_some(()).ok_or_else(|| format!("exited {status}"))
            }
        };
        let result = ran.and_then(|()| {
            let shown = all.get(n + 1).filter(|b| b.file == block.file && b.marker == Marker::Output);
            shown.map_or(Ok(()), |shown| check_shown(&shown.text, &output_of(&log)).map_err(|e| format!("{}: {e}", shown.place())))
        });
        if let Err(e) = result {
            failed.push(format!("{}: {e}\n--- block:\n{}--- output:\n{}", block.place(), block.text, output_of(&log)));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// The request a served block is asked during its pre-stop: it must be answered, since the app
/// keeps serving then, and the README's shown output names it.
const DURING_PRE_STOP: &str = "/b";

/// Waits for the port, then stops the block as a user would (SIGTERM to lastcall), asks for
/// DURING_PRE_STOP while the pre-stop runs, and checks that it was answered, that lastcall's
/// timeline ran and that everything ended.
fn serve(started: &mut Started, port: u16, log: &Path) -> Result<(), String> {
    let deadline = Instant::now() + LIMIT;
    loop {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        if let Some(status) = started.0.try_wait().unwrap() {
            return Err(format!("exited {status} before 127.0.0.1:{port} answered"));
        }
        if Instant::now() > deadline {
            return Err(format!("127.0.0.1:{port} never answered"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // The block's lastcall: the descendant whose program is lastcall.
    let pid = started.0.id() as i32;
    let lastcall = std::iter::once(pid)
        .chain(descendants(pid))
        .find(|p| fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "lastcall"))
        .ok_or("no lastcall process in the block")?;
    common::kill(lastcall, libc::SIGTERM);
    // The request is made on the marker that the pre-stop began, always: a block that never
    // shows it (the signal forwarded at once, or the block gone) fails, it is not let off.
    let sent = Instant::now();
    let in_pre_stop = wait_until(Duration::from_secs(60), "the pre-stop or the forwarded signal", || {
        let out = output_of(log);
        if out.contains("pre-stop: the app keeps running") {
            Some(true)
        } else {
            (out.contains("forwarded") || started.0.try_wait().unwrap().is_some()).then_some(false)
        }
    });
    let seen = sent.elapsed();
    let request = in_pre_stop.then(|| std::thread::spawn(move || support::http_get(port, DURING_PRE_STOP, Duration::from_secs(60))));
    let status = wait_until(Duration::from_secs(60), "the served block to end", || started.0.try_wait().unwrap());
    let out = output_of(log);
    let Some(request) = request else {
        return Err(format!("no pre-stop line after SIGTERM (exit {status}): GET {DURING_PRE_STOP} during the pre-stop was not made"));
    };
    if !out.contains("received SIGTERM") || !(out.contains("child exited with status") || out.contains("child killed by")) {
        return Err(format!("no shutdown timeline (exit {status})"));
    }
    match request.join().unwrap() {
        Some((200, _)) => {}
        other => return Err(format!("GET {DURING_PRE_STOP}, made {seen:?} after SIGTERM on the pre-stop line: {other:?}, not 200")),
    }
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(0), _) | (_, Some(libc::SIGTERM)) => Ok(()),
        _ => Err(format!("exited {status}")),
    }
}

/// Digits masked: times, pids and ports differ from run to run, the words do not.
fn masked(line: &str) -> String {
    let mut out = String::new();
    for c in line.trim_end().chars() {
        if !c.is_ascii_digit() {
            out.push(c);
        } else if !out.ends_with('N') {
            out.push('N');
        }
    }
    out
}

/// Each shown line is among the printed ones; the lines of one program (what comes before the
/// first `:`, `lastcall` or `app`) in the order shown. Programs interleave as the scheduler
/// lets them, so their relative order is not checked.
fn check_shown(shown: &str, printed: &str) -> Result<(), String> {
    let printed: Vec<String> = printed.lines().map(masked).collect();
    let mut after: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for line in shown.lines().filter(|l| !l.trim().is_empty()) {
        let program = line.split_once(':').map_or("", |(p, _)| p).to_string();
        let from = after.get(&program).copied().unwrap_or(0);
        let want = masked(line);
        let at = printed[from..].iter().position(|p| *p == want).ok_or_else(|| format!("shown but not printed (in this order): {line}"))?;
        after.insert(program, from + at + 1);
    }
    Ok(())
}

#[test]
fn shown_output_is_checked() {
    let printed = "Compiling x\nlastcall: +0.000s received SIGTERM\napp: +1.005s START req=/b\nlastcall: +2.000s pre-stop ended\n";
    assert!(check_shown("lastcall: +0.000s received SIGTERM\napp: +9.999s START req=/b\nlastcall: +2.001s pre-stop ended\n", printed).is_ok());
    assert!(check_shown("lastcall: +2.000s pre-stop ended\nlastcall: +0.000s received SIGTERM\n", printed).is_err(), "order");
    assert!(check_shown("app: +1.005s FINISH req=/b\n", printed).is_err(), "a line never printed");
}

/// The machine-wide lock that everything starting dockerd, podman or nspawn takes, held until
/// dropped. Run under `flock /tmp/lastcall-hosts.lock cargo test ...`, an ancestor already holds
/// it: waiting for it then would wait forever, so the lock is taken as held.
fn machine_hosts_lock() -> fs::File {
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::io::AsRawFd;
    let file = fs::OpenOptions::new().create(true).append(true).open("/tmp/lastcall-hosts.lock").unwrap();
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return file;
    }
    let inode = file.metadata().unwrap().ino();
    if let Some(holder) = flock_holders(inode).into_iter().find(|&pid| is_ancestor(pid)) {
        eprintln!("/tmp/lastcall-hosts.lock: held by {holder}, which runs this test");
        return file;
    }
    eprintln!("/tmp/lastcall-hosts.lock: waiting for another real-host run to end");
    // SAFETY: flock on a descriptor we own.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
    assert_eq!(rc, 0, "flock: {}", std::io::Error::last_os_error());
    file
}

/// The pids holding a flock(2) lock on the file with this inode, from /proc/locks
/// (`1: FLOCK  ADVISORY  WRITE PID MAJ:MIN:INODE 0 EOF`; waiters' lines carry `->`).
fn flock_holders(inode: u64) -> Vec<i32> {
    let locks = fs::read_to_string("/proc/locks").unwrap_or_default();
    locks
        .lines()
        .filter(|l| !l.contains("->"))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let ours = f.get(1) == Some(&"FLOCK") && f.get(5).and_then(|d| d.rsplit(':').next()) == Some(&inode.to_string()[..]);
            ours.then(|| f.get(4)?.parse().ok()).flatten()
        })
        .collect()
}

#[test]
fn a_lock_held_by_an_ancestor_is_recognised() {
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::io::AsRawFd;
    let file = fs::File::create(scratch("readme-lock").join("lock")).unwrap();
    // SAFETY: flock on a descriptor we own.
    assert_eq!(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) }, 0);
    assert_eq!(flock_holders(file.metadata().unwrap().ino()), vec![std::process::id() as i32]);
    // SAFETY: getppid has no preconditions.
    assert!(is_ancestor(unsafe { libc::getppid() }));
    assert!(!is_ancestor(std::process::id() as i32), "a process is not its own ancestor");
}

fn is_ancestor(pid: i32) -> bool {
    let parent_of = |p: i32| -> Option<i32> {
        let stat = fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
        stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
    };
    let mut p = std::process::id() as i32;
    while let Some(parent) = parent_of(p).filter(|&q| q > 0) {
        if parent == pid {
            return true;
        }
        p = parent;
    }
    false
}

/// The images a Dockerfile starts FROM, less `scratch` and its own stages.
fn base_images(dockerfile: &str) -> Vec<String> {
    let mut stages = vec!["scratch".to_string()];
    let mut images = Vec::new();
    for line in dockerfile.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if !words.first().is_some_and(|w| w.eq_ignore_ascii_case("FROM")) {
            continue;
        }
        let mut rest = words[1..].iter().filter(|w| !w.starts_with("--"));
        let Some(image) = rest.next() else { continue };
        if !stages.iter().any(|s| s == image) && !images.contains(&image.to_string()) {
            images.push(image.to_string());
        }
        if rest.next().is_some_and(|w| w.eq_ignore_ascii_case("AS")) {
            stages.extend(rest.next().map(|s| s.to_string()));
        }
    }
    images
}

#[test]
fn base_images_are_found() {
    assert_eq!(base_images("FROM scratch\nCOPY a /a\n"), Vec::<String>::new());
    assert_eq!(
        base_images("FROM --platform=linux/amd64 busybox:stable AS pick\nRUN x\nFROM gcr.io/distroless/static\nCOPY --from=pick /a /a\nFROM pick\n"),
        vec!["busybox:stable", "gcr.io/distroless/static"]
    );
}

/// What the Dockerfile blocks copy, as a user's checkout holds it after `scripts/dist host`.
fn docker_context(dir: &Path) {
    let target = Command::new(repo().join("scripts/host-target")).output().unwrap();
    let target = String::from_utf8(target.stdout).unwrap().trim().to_string();
    assert!(!target.is_empty(), "scripts/host-target");
    fs::create_dir_all(dir.join("dist")).unwrap();
    fs::create_dir_all(dir.join("examples")).unwrap();
    let binary = format!("lastcall-{target}");
    fs::copy(common::LASTCALL, dir.join("dist").join(&binary)).unwrap();
    let sums = Command::new("sha256sum").arg(&binary).current_dir(dir.join("dist")).output().unwrap();
    assert!(sums.status.success(), "sha256sum");
    fs::write(dir.join("dist/SHA256SUMS"), sums.stdout).unwrap();
    for example in fs::read_dir(repo().join("examples")).unwrap().flatten() {
        fs::copy(example.path(), dir.join("examples").join(example.file_name())).unwrap();
    }
    // docs/distroless.md's recipe: lastcall, a static app, and the user database it shows.
    fs::copy(common::LASTCALL, dir.join("lastcall")).unwrap();
    fs::copy("/bin/busybox", dir.join("app")).expect("busybox-static");
    fs::write(dir.join("passwd"), "root:x:0:0:root:/root:/nonexistent\napp:x:1000:1000:the app:/home/app:/nonexistent\n").unwrap();
    fs::write(dir.join("group"), "root:x:0:\napp:x:1000:\n").unwrap();
}

/// Images this test tagged, removed when it ends, passed or not.
struct Tagged<'a> {
    docker: &'a docker::Docker,
    names: Vec<String>,
}

impl Drop for Tagged<'_> {
    fn drop(&mut self) {
        if !self.names.is_empty() {
            let mut args = vec!["rmi", "-f"];
            args.extend(self.names.iter().map(String::as_str));
            let _ = self.docker.output(&args);
        }
    }
}

/// What a Compose block's `image:` gets when no such image exists: the busybox-static image
/// running a shell that says when it is ready and drains for a second on TERM.
const STAND_IN_APP: &str = "FROM lc-busybox\nCMD [\"sh\", \"-c\", \"trap 'echo stand-in got TERM; sleep 1; echo stand-in drained; exit 0' TERM; \
                            echo stand-in ready; while :; do sleep 1 & wait $!; done\"]\n";

/// Builds every Dockerfile block and brings up every Compose file that is not marked otherwise,
/// with the real dockerd (one daemon for both).
#[test]
fn every_docker_block_runs() {
    let all = all_blocks();
    let dockerfiles: Vec<&Block> = all.iter().filter(|b| matches!(b.lang.as_str(), "dockerfile" | "docker") && b.marker == Marker::None).collect();
    let composes: Vec<&Block> =
        all.iter().filter(|b| matches!(b.lang.as_str(), "yaml" | "yml") && b.marker == Marker::None && b.text.lines().any(|l| l.starts_with("services:"))).collect();
    if dockerfiles.is_empty() && composes.is_empty() {
        return;
    }
    if std::env::var_os("LASTCALL_HOSTS_SKIP").is_some_and(|v| v == "1") {
        eprintln!("LASTCALL_HOSTS_SKIP=1: {} Dockerfile and {} Compose blocks only parsed, not run", dockerfiles.len(), composes.len());
        return;
    }
    let _machine = machine_hosts_lock();
    let mut hosts = support::Hosts::new();
    let docker: &docker::Docker = hosts.docker();
    let context = support::Scratch::new("readme-ctx");
    docker_context(context.path());
    let mut tagged = Tagged { docker, names: Vec::new() };
    for image in dockerfiles.iter().flat_map(|b| base_images(&b.text)) {
        if !tagged.names.contains(&image) && !docker.output(&["image", "inspect", &image]).status.success() {
            docker.ok(&["tag", "lc-busybox", &image]);
            tagged.names.push(image);
        }
    }
    let mut failed = Vec::new();
    for (n, block) in dockerfiles.iter().enumerate() {
        let file = context.path().join(format!("Dockerfile.block-{n}"));
        fs::write(&file, &block.text).unwrap();
        let tag = format!("lc-readme-block-{n}");
        let out = docker.output(&["build", "-q", "-f", file.to_str().unwrap(), "-t", &tag, context.path().to_str().unwrap()]);
        if out.status.success() {
            tagged.names.push(tag);
            eprintln!("{}: built", block.place());
        } else {
            failed.push(format!("{}: docker build: {}\n{}{}", block.place(), out.status, block.text, String::from_utf8_lossy(&out.stderr)));
        }
    }
    for (n, block) in composes.iter().enumerate() {
        match compose_up_and_stop(docker, &mut tagged, block, n) {
            Ok(()) => eprintln!("{}: up, then stopped through lastcall", block.place()),
            Err(e) => failed.push(format!("{}: {e}\n{}", block.place(), block.text)),
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// `docker-compose up -d` of the block as written, `docker-compose stop`, and each service's
/// log must hold lastcall's timeline, each container exiting 0 with Docker's init. The one
/// change is this machine's: it has no bridge network, so a second file (Compose merges it in)
/// puts each service on `network_mode: none`.
fn compose_up_and_stop(docker: &docker::Docker, tagged: &mut Tagged<'_>, block: &Block, n: usize) -> Result<(), String> {
    let dir = support::Scratch::new(&format!("readme-compose-{n}"));
    fs::write(dir.path().join("docker-compose.yml"), &block.text).unwrap();
    let project = format!("lcreadme{}x{n}", std::process::id());
    let compose = |args: &[&str]| {
        support::output(
            Command::new("docker-compose")
                .current_dir(dir.path())
                .env("DOCKER_HOST", docker.host())
                .args(["--ansi", "never", "-p", &project, "-f", "docker-compose.yml", "-f", "no-network.yml"])
                .args(args),
            120 * support::SEC,
        )
    };
    let lines = |out: &std::process::Output| String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect::<Vec<_>>();
    // Compose merges only files of one version: the block's, or the one it assumes without one.
    let version = block.text.lines().find(|l| l.starts_with("version:")).unwrap_or("version: \"3.9\"");
    fs::write(dir.path().join("no-network.yml"), format!("{version}\nservices: {{}}\n")).unwrap();
    let services = lines(&compose(&["config", "--services"]));
    let overrides: String = services.iter().map(|s| format!("  {s}:\n    network_mode: none\n")).collect();
    fs::write(dir.path().join("no-network.yml"), format!("{version}\nservices:\n{overrides}")).unwrap();
    let config = String::from_utf8_lossy(&compose(&["config"]).stdout).into_owned();
    for image in config.lines().filter_map(|l| l.trim().strip_prefix("image: ")) {
        if !tagged.names.iter().any(|t| t == image) && !docker.output(&["image", "inspect", image]).status.success() {
            docker.build(image, STAND_IN_APP, &[]);
            tagged.names.push(image.to_string());
        }
    }
    struct Down<'a>(&'a dyn Fn(&[&str]) -> std::process::Output);
    impl Drop for Down<'_> {
        fn drop(&mut self) {
            (self.0)(&["down", "-t", "1"]);
        }
    }
    let _down = Down(&compose);
    let up = compose(&["up", "-d"]);
    if !up.status.success() {
        return Err(format!("docker-compose up: {}", String::from_utf8_lossy(&up.stderr)));
    }
    let logs = || String::from_utf8_lossy(&compose(&["logs", "--no-color"]).stdout).into_owned();
    wait_until(Duration::from_secs(30), "every service ready", || (logs().matches("stand-in ready").count() >= services.len()).then_some(()));
    let stop = compose(&["stop"]);
    if !stop.status.success() {
        return Err(format!("docker-compose stop: {}", String::from_utf8_lossy(&stop.stderr)));
    }
    let log = logs();
    // Compose prefixes each line with the container, `SERVICE_1  | `.
    for service in &services {
        let own: String = log.lines().filter(|l| l.starts_with(&format!("{service}_"))).map(|l| format!("{l}\n")).collect();
        if !["received SIGTERM", "pre-stop ended", "child exited with status 0"].iter().all(|entry| own.contains(entry)) {
            return Err(format!("{service}: no shutdown timeline in its log:\n{log}"));
        }
    }
    let exits: Vec<String> = lines(&compose(&["ps", "-q"])).iter().map(|id| docker.ok(&["inspect", "-f", "{{.State.ExitCode}} {{.HostConfig.Init}}", id])).collect();
    if exits.len() != services.len() || exits.iter().any(|e| e != "0 true") {
        return Err(format!("exit codes and init: {exits:?}\n{log}"));
    }
    Ok(())
}
