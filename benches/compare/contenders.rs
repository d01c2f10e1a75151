//! Who runs in the benchmark: lastcall, its set-ups, the installed peers, the C floor, and the
//! builds named in LASTCALL_BENCH_EXTRA, each with how to start it.
//!
//! May import: nothing of the benchmark's own.

use std::path::{Path, PathBuf};
use std::process::Command;

pub const LASTCALL: &str = env!("CARGO_BIN_EXE_lastcall");
/// The column of benches/floor.c.
pub const FLOOR: &str = "floor (C)";

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
}

impl Init {
    pub fn command(&self, fixture: &Path, mode: &[&str]) -> Command {
        let mut c = Command::new(&self.path);
        c.args(&self.args).arg(fixture).args(mode).envs(self.env.iter().map(|(k, v)| (k, v)));
        c
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
        c.envs(self.env.iter().map(|(k, v)| (k, v)));
        c
    }
}

/// lastcall; lastcall with a health endpoint and with a notify socket, the README's recommended
/// set-ups, whose sockets share the loop with the signals; with --setsid and -c (dumb-init's
/// modes: a session, lastcall's own group); the peers that are installed;
/// and the builds or options named in LASTCALL_BENCH_EXTRA (`NAME=PATH[,ARG...];...`, e.g.
/// `old=/tmp/lastcall-old,--`). Everything that is not a peer gets its own ratio to the best
/// peer. `notify_socket` is where the notify variant's NOTIFY_SOCKET points.
pub fn contenders(notify_socket: &Path) -> Vec<Init> {
    let owned = |args: &[&str]| args.iter().map(|a| a.to_string()).collect();
    // A port nobody uses now; only one health variant runs at a time.
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port");
    let health = format!("127.0.0.1:{port}");
    let mut inits = vec![
        Init { name: "lastcall".into(), path: LASTCALL.into(), args: owned(&["--"]), peer: false, env: vec![] },
        Init { name: "lastcall --health-listen".into(), path: LASTCALL.into(), args: owned(&["--health-listen", &health, "--"]), peer: false, env: vec![] },
        Init {
            name: "lastcall, NOTIFY_SOCKET".into(),
            path: LASTCALL.into(),
            args: owned(&["--"]),
            peer: false,
            env: vec![("NOTIFY_SOCKET".into(), notify_socket.display().to_string())],
        },
        Init { name: "lastcall --setsid".into(), path: LASTCALL.into(), args: owned(&["--setsid", "--"]), peer: false, env: vec![] },
        Init { name: "lastcall -c".into(), path: LASTCALL.into(), args: owned(&["-c", "--"]), peer: false, env: vec![] },
    ];
    for (name, path, args) in [
        ("tini", "/usr/bin/tini", &["-s", "--"][..]),
        ("tini-static", "/usr/bin/tini-static", &["-s", "--"]),
        ("dumb-init", "/usr/bin/dumb-init", &["--"]),
        ("catatonit", "/usr/bin/catatonit", &["--"]),
    ] {
        if Path::new(path).exists() {
            inits.push(Init { name: name.into(), path: path.into(), args: owned(args), peer: true, env: vec![] });
        } else {
            eprintln!("note: {path} is missing (apt-get install tini dumb-init catatonit); leaving {name} out");
        }
    }
    // The physical floor (benches/floor.c): a column of its own and a ratio of its own, not a peer.
    let floor = build_static("floor").display().to_string();
    inits.push(Init { name: FLOOR.into(), path: floor, args: owned(&["--"]), peer: false, env: vec![] });
    let extra = std::env::var("LASTCALL_BENCH_EXTRA").unwrap_or_default();
    for spec in extra.split(';').filter(|s| !s.is_empty()) {
        let (name, command) = spec.split_once('=').expect("LASTCALL_BENCH_EXTRA: NAME=PATH[,ARG...];...");
        let mut words = command.split(',').map(String::from);
        let path = words.next().unwrap_or_default();
        inits.push(Init { name: name.into(), path, args: words.collect(), peer: false, env: vec![] });
    }
    inits
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
