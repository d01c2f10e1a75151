//! Who runs in the benchmark: lastcall, its set-ups, the installed peers, the C floor, the
//! binary that ships, the init that does no reaping, and the builds named in
//! LASTCALL_BENCH_EXTRA, each with how to start it.
//!
//! May import: nothing of the benchmark's own.

use std::path::{Path, PathBuf};
use std::process::Command;

pub const LASTCALL: &str = env!("CARGO_BIN_EXE_lastcall");
/// The column of benches/floor.c.
pub const FLOOR: &str = "floor (C)";
/// The column of benches/no_reaping.c.
pub const NO_REAPING: &str = "no_reaping (C)";
/// The column of the binary `scripts/dist` builds for this machine.
pub const DIST: &str = "lastcall, dist build";

pub struct Init {
    pub name: String,
    pub path: String,
    /// What comes between the init and the command.
    pub args: Vec<String>,
    /// A peer, as opposed to lastcall or a build of it being compared: ratios are to the best
    /// peer.
    pub peer: bool,
    /// Set in the init's environment.
    pub env: Vec<(String, String)>,
    /// The figures it takes part in, when not all: the section names of `ONLY`, with the
    /// instruction rows as "signal" and "orphan".
    pub only: Option<&'static [&'static str]>,
}

impl Init {
    /// Whether it takes part in `figure` (a section, or "signal" or "orphan").
    pub fn takes(&self, figure: &str) -> bool {
        self.only.is_none_or(|only| only.contains(&figure))
    }

    pub fn command(&self, fixture: &Path, mode: &[&str]) -> Command {
        let mut c = Command::new(&self.path);
        c.args(&self.args).arg(fixture).args(mode);
        self.set_env(&mut c);
        c
    }

    /// The contender's own variables on top of `with_full_env`.
    fn set_env(&self, c: &mut Command) {
        with_full_env(c).envs(self.env.iter().map(|(k, v)| (k, v)));
    }

    /// As PID 1 of a new PID namespace, the way a container runs it; on `cpu` if given.
    pub fn as_pid1(&self, fixture: &Path, extra: &[&str], mode: &[&str], mount_proc: bool, cpu: Option<usize>) -> Command {
        let mut c = match cpu {
            Some(cpu) => {
                let mut c = Command::new("taskset");
                c.args(["-c", &cpu.to_string(), "unshare"]);
                c
            }
            None => Command::new("unshare"),
        };
        c.args(["--pid", "--fork", "--kill-child"]);
        if mount_proc {
            c.arg("--mount-proc");
        }
        c.arg("--").arg(&self.path).args(extra).args(&self.args).arg(fixture).args(mode);
        self.set_env(&mut c);
        c
    }
}

/// `c` with the benchmark's environment given in full, as every process the benchmark times is
/// spawned (`fixture true` alone too): std's Command spends about 60 µs more on a spawn whose
/// environment was changed at all (it builds a new one), which would otherwise land on the one
/// set-up with a variable of its own (`NOTIFY_SOCKET`) and on none of the peers. Less the
/// benchmark's own `LASTCALL_BENCH_*`: lastcall warns of a `LASTCALL_` variable it does not know,
/// and that warning cost every lastcall contender about 100 µs of start-up whenever one was set.
pub fn with_full_env(c: &mut Command) -> &mut Command {
    use std::os::unix::ffi::OsStrExt;
    c.env_clear().envs(std::env::vars_os().filter(|(name, _)| !name.as_bytes().starts_with(b"LASTCALL_BENCH_")))
}

/// lastcall; lastcall with a health endpoint and with a notify socket, the README's recommended
/// set-ups, whose sockets share the loop with the signals; with --setsid and -c (dumb-init's
/// modes: a session, lastcall's own group); with --user (the app as another user); the peers
/// that are installed; the floor; the dist binary (`dist`, if found) for the figures of the
/// binary alone (size, start-up, idle, instructions); no_reaping for the reaping figures; and
/// the builds or options named in LASTCALL_BENCH_EXTRA (`NAME=PATH[,ARG...];...`, e.g.
/// `old=/tmp/lastcall-old,--`). Everything that is not a peer gets its own ratio to the best
/// peer. `notify_socket` is where the notify variant's NOTIFY_SOCKET points.
pub fn contenders(notify_socket: &Path, dist: Option<&Path>) -> Vec<Init> {
    let owned = |args: &[&str]| args.iter().map(|a| a.to_string()).collect();
    // A port nobody uses now; only one health variant runs at a time.
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port");
    let health = format!("127.0.0.1:{port}");
    let mut inits = vec![
        Init { name: "lastcall".into(), path: LASTCALL.into(), args: owned(&["--"]), peer: false, env: vec![], only: None },
        Init { name: "lastcall --health-listen".into(), path: LASTCALL.into(), args: owned(&["--health-listen", &health, "--"]), peer: false, env: vec![], only: None },
        Init {
            name: "lastcall, NOTIFY_SOCKET".into(),
            path: LASTCALL.into(),
            args: owned(&["--"]),
            peer: false,
            env: vec![("NOTIFY_SOCKET".into(), notify_socket.display().to_string())],
            only: None,
        },
        Init { name: "lastcall --setsid".into(), path: LASTCALL.into(), args: owned(&["--setsid", "--"]), peer: false, env: vec![], only: None },
        Init { name: "lastcall -c".into(), path: LASTCALL.into(), args: owned(&["-c", "--"]), peer: false, env: vec![], only: None },
        Init { name: "lastcall --user".into(), path: LASTCALL.into(), args: owned(&["--user", &app_user(), "--"]), peer: false, env: vec![], only: None },
    ];
    for (name, path, args) in [
        ("tini", "/usr/bin/tini", &["-s", "--"][..]),
        ("tini-static", "/usr/bin/tini-static", &["-s", "--"]),
        ("dumb-init", "/usr/bin/dumb-init", &["--"]),
        ("catatonit", "/usr/bin/catatonit", &["--"]),
    ] {
        if Path::new(path).exists() {
            inits.push(Init { name: name.into(), path: path.into(), args: owned(args), peer: true, env: vec![], only: None });
        } else {
            eprintln!("note: {path} is missing (apt-get install tini dumb-init catatonit); leaving {name} out");
        }
    }
    // The physical floor (benches/floor.c): a column of its own and a ratio of its own, not a peer.
    let floor = build_static("floor").display().to_string();
    inits.push(Init { name: FLOOR.into(), path: floor, args: owned(&["--"]), peer: false, env: vec![], only: None });
    if let Some(dist) = dist {
        let only: &[&str] = &["size", "startup", "idle", "signal", "orphan"];
        inits.push(Init { name: DIST.into(), path: dist.display().to_string(), args: owned(&["--"]), peer: false, env: vec![], only: Some(only) });
    }
    // The reaping baseline (benches/no_reaping.c): what reaping costs with no init work at all.
    let no_reaping = build_static("no_reaping").display().to_string();
    let only: &[&str] = &["reaping", "orphan"];
    inits.push(Init { name: NO_REAPING.into(), path: no_reaping, args: owned(&["--"]), peer: false, env: vec![], only: Some(only) });
    let extra = std::env::var("LASTCALL_BENCH_EXTRA").unwrap_or_default();
    for spec in extra.split(';').filter(|s| !s.is_empty()) {
        let (name, command) = spec.split_once('=').expect("LASTCALL_BENCH_EXTRA: NAME=PATH[,ARG...];...");
        let mut words = command.split(',').map(String::from);
        let path = words.next().unwrap_or_default();
        inits.push(Init { name: name.into(), path, args: words.collect(), peer: false, env: vec![], only: None });
    }
    inits
}

/// The user of the `--user` set-up: nobody, as the passwd file names it (the name is looked up
/// at start-up, as most set-ups name theirs), else its usual ids. The fixture writes only to
/// its inherited stdout and reads /proc, both open to any user.
pub fn app_user() -> String {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    if passwd.lines().any(|l| l.starts_with("nobody:")) { "nobody".into() } else { "65534:65534".into() }
}

/// The binary `scripts/dist` built for this machine: LASTCALL_BENCH_DIST if set, else the newest
/// of dist/lastcall-TARGET and target/dist/TARGET/release/lastcall. Err says what was looked for.
pub fn dist_binary() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("LASTCALL_BENCH_DIST") {
        let path = PathBuf::from(path);
        return if path.is_file() { Ok(path) } else { Err(format!("LASTCALL_BENCH_DIST={} is no file", path.display())) };
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = Command::new(root.join("scripts/host-target"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| format!("{}-unknown-linux-musl", std::env::consts::ARCH));
    let candidates = [root.join(format!("dist/lastcall-{target}")), root.join(format!("target/dist/{target}/release/lastcall"))];
    candidates
        .iter()
        .filter(|p| p.is_file())
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .cloned()
        .ok_or_else(|| format!("none of {} (run scripts/dist {target}, or set LASTCALL_BENCH_DIST=PATH)", candidates.map(|p| p.display().to_string()).join(", ")))
}

/// benches/NAME.c, built static.
pub fn build_static(name: &str) -> PathBuf {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("bench-{name}"));
    let src = format!("{}/benches/{name}.c", env!("CARGO_MANIFEST_DIR"));
    let status = Command::new("cc").args(["-static", "-O2", "-o"]).arg(&out).arg(&src).status().expect("cc");
    assert!(status.success(), "building {src} needs gcc and a static libc (libc6-dev)");
    out
}

/// The port of an init's --health-listen, if it has one.
pub fn health_port(init: &Init) -> Option<u16> {
    let at = init.args.iter().position(|a| a == "--health-listen")?;
    init.args.get(at + 1)?.rsplit_once(':')?.1.parse().ok()
}
