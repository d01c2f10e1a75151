//! Side by side with the peers: each scenario runs under the real tini or dumb-init from Debian's
//! packages (/usr/bin/tini, /usr/bin/dumb-init; scripts/setup-test-machine installs them) and
//! under lastcall invoked by that peer's name (a symlink `tini` or `dumb-init` to the built
//! binary), and the two must do the same observable things: which signals the child and its
//! descendants saw and in what order, the exit status, what was left running (and in what
//! state), job control at a terminal, stopped and running states. Each test also says what that
//! outcome is, so that a peer and lastcall cannot agree on something wrong.
//!
//! The processes are real: tests/fixtures/peer_proc.py records each signal it receives to a log,
//! and tests/fixtures/peer_harness.py runs the init as a child subreaper and collects what it
//! leaves behind. Waits are on conditions with deadlines. A negative ("the grandchild did not get
//! HUP") is read after a real-time mark sent to that process: the kernel delivers every standard
//! signal already pending before it.
//!
//! Compared raw: the init's wait status as its parent reads it ("exited 143" and "signaled 15"
//! differ, though a shell prints 143 for both), the order of the signals each process got, and
//! whether the init wrote anything to stderr at all (the wording is each one's own: tini's
//! `[WARN  tini (PID)]` lines, lastcall's `lastcall: warning:`).
//!
//! The harness is here; the scenarios are under tests/peers/: tini's, dumb-init's, at a terminal,
//! and what an image gains (lastcall's variables under a peer's name, PID 1 of a container).

mod common;

#[path = "peers/dumb_init.rs"]
mod dumb_init;
#[path = "peers/images.rs"]
mod images;
#[path = "peers/terminal.rs"]
mod terminal;
#[path = "peers/tini.rs"]
mod tini;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{alive, scratch, wait_until, LASTCALL};

const LIMIT: Duration = Duration::from_secs(30);
/// The fixtures' mark: SIGRTMIN+5 as glibc (and Python) count.
const MARK: i32 = 39;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Peer {
    Tini,
    DumbInit,
}

impl Peer {
    fn name(self) -> &'static str {
        match self {
            Peer::Tini => "tini",
            Peer::DumbInit => "dumb-init",
        }
    }

    fn real(self) -> PathBuf {
        let path = PathBuf::from(format!("/usr/bin/{}", self.name()));
        assert!(path.exists(), "{} is missing: run scripts/setup-test-machine", path.display());
        path
    }

    /// lastcall under the peer's name, in `dir`.
    fn ours(self, dir: &Path) -> PathBuf {
        let bin = dir.join("bin");
        fs::create_dir_all(&bin).unwrap();
        let path = bin.join(self.name());
        if !path.exists() {
            symlink(LASTCALL, &path).unwrap();
        }
        path
    }
}

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// One scenario: the init's own arguments (including `--` if wanted), its environment, and the
/// command: the fixture's `main` with these roles started under it, or any other command.
#[derive(Clone)]
struct Scenario {
    peer: Peer,
    args: Vec<String>,
    env: Vec<(String, String)>,
    command: Command_,
    pty_script: Option<String>,
    via_parent: bool,
    pid1: bool,
}

#[derive(Clone)]
enum Command_ {
    Fixture(Vec<String>),
    Other(Vec<String>),
}

fn scenario(peer: Peer, args: &[&str]) -> Scenario {
    Scenario {
        peer,
        args: args.iter().map(|s| s.to_string()).collect(),
        env: vec![],
        command: Command_::Fixture(vec![]),
        pty_script: None,
        via_parent: false,
        pid1: false,
    }
}

impl Scenario {
    fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// The roles `main` starts: grp, sess, mid.
    fn roles(mut self, roles: &[&str]) -> Self {
        self.command = Command_::Fixture(roles.iter().map(|s| s.to_string()).collect());
        self
    }

    fn command(mut self, argv: &[&str]) -> Self {
        self.command = Command_::Other(argv.iter().map(|s| s.to_string()).collect());
        self
    }

    fn pty(mut self, script: &str) -> Self {
        self.pty_script = Some(script.into());
        self
    }

    fn via_parent(mut self) -> Self {
        self.via_parent = true;
        self
    }

    /// The init runs as PID 1 of a new PID namespace, as in a container.
    fn pid1(mut self) -> Self {
        self.pid1 = true;
        self
    }

    /// Runs the scenario under the real peer and under lastcall by the peer's name, driving each
    /// run the same way; asserts that the two outcomes are equal and returns it.
    fn same(&self, drive: impl Fn(&mut Run) -> Vec<String>) -> Outcome {
        let dir = scratch(&format!("peers-{}", self.peer.name()));
        let theirs = self.run(&self.peer.real(), &dir.join("theirs"), &drive);
        let ours = self.run(&self.peer.ours(&dir), &dir.join("ours"), &drive);
        assert_eq!(
            ours,
            theirs,
            "lastcall as {} (left) differs from the real one (right); args {:?}, env {:?}",
            self.peer.name(),
            self.args,
            self.env
        );
        let _ = fs::remove_dir_all(&dir);
        ours
    }

    fn run(&self, init: &Path, dir: &Path, drive: &impl Fn(&mut Run) -> Vec<String>) -> Outcome {
        fs::create_dir_all(dir).unwrap();
        let log = dir.join("signals.log");
        fs::write(&log, "").unwrap();
        let proc_py = fixture("peer_proc.py");
        let mut cmd = Command::new("python3");
        cmd.arg(fixture("peer_harness.py")).arg(dir).arg(init).args(&self.args);
        match &self.command {
            Command_::Fixture(roles) => {
                cmd.arg("python3").arg(&proc_py).arg("main").arg(&log).args(roles);
            }
            Command_::Other(argv) => {
                cmd.args(argv);
            }
        }
        cmd.env("HARNESS_LOG", &log).env("HARNESS_FIXTURE", &proc_py);
        // Nothing of the test's environment decides the outcome.
        for var in ["TINI_SUBREAPER", "TINI_KILL_PROCESS_GROUP", "TINI_VERBOSITY", "DUMB_INIT_SETSID", "DUMB_INIT_DEBUG"] {
            cmd.env_remove(var);
        }
        for (key, _) in std::env::vars().filter(|(k, _)| k.starts_with("LASTCALL_")) {
            cmd.env_remove(key);
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(script) = &self.pty_script {
            // A stalled step ends the run (the init killed, the transcript kept) before the test's
            // own wait for the init gives up, so that a stall reads as one.
            cmd.env("HARNESS_PTY_SCRIPT", script).env("HARNESS_STEP_TIMEOUT", (LIMIT / 2).as_secs().to_string());
        }
        if self.via_parent {
            cmd.env("HARNESS_VIA_PARENT", "1");
        }
        if self.pid1 {
            cmd.env("HARNESS_PID1", "1");
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(fs::File::create(dir.join("harness.stderr")).unwrap());
        let harness = cmd.spawn().expect("start the harness");
        let init_pid = {
            let path = dir.join("init.pid");
            wait_until(LIMIT, "the harness to start the init", || fs::read_to_string(&path).ok()?.trim().parse().ok())
        };
        let mut run = Run { dir: dir.to_path_buf(), log, init_pid, pid1: self.pid1, harness: Some(harness) };
        let observed = drive(&mut run);
        run.finish(observed)
    }
}

/// What a scenario did, as the outside world sees it.
#[derive(Debug, PartialEq)]
struct Outcome {
    /// Per role, the signals it recorded in order, with `mark` where the test or the harness
    /// asked what it had got so far.
    signals: BTreeMap<String, Vec<String>>,
    /// The init's wait status, raw: "exited N" or "signaled N".
    status: String,
    /// As a shell reports it: the exit code, or 128+N for a death by signal N (read off `status`).
    code: i32,
    /// Whether the init wrote nothing to stderr (lastcall writes where the peer is silent, or
    /// says nothing where the peer warns: either differs).
    quiet: bool,
    /// "ROLE STATE" of each fixture process still running when the init had exited.
    left: Vec<String>,
    /// What the scenario itself looked at: states along the way, what the logs said.
    observed: Vec<String>,
}

impl Outcome {
    fn of(&self, role: &str) -> Vec<&str> {
        self.signals.get(role).map(|v| v.iter().map(String::as_str).collect()).unwrap_or_default()
    }
}

struct Run {
    dir: PathBuf,
    log: PathBuf,
    init_pid: i32,
    /// The fixture's pids are the namespace's, not this test's.
    pid1: bool,
    harness: Option<Child>,
}

impl Run {
    fn log_lines(&self) -> Vec<String> {
        fs::read_to_string(&self.log).unwrap_or_default().lines().map(str::to_string).collect()
    }

    fn count(&self, line: &str) -> usize {
        self.log_lines().iter().filter(|l| *l == line).count()
    }

    /// The pid of a fixture role, once it is ready, as this test sees it.
    fn pid(&self, role: &str) -> i32 {
        let prefix = format!("{role} ready ");
        let reported: i32 = wait_until(LIMIT, &format!("{role} to be ready"), || {
            self.log_lines().iter().find_map(|l| l.strip_prefix(&prefix)?.parse().ok())
        });
        if !self.pid1 {
            return reported;
        }
        // In a PID namespace the fixture reports its pid there: find which of the init's
        // descendants has it (NSpid: the pid out here, then in the namespace).
        wait_until(LIMIT, &format!("{role}'s pid out here"), || {
            common::descendants(self.init_pid).into_iter().find(|&pid| {
                let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
                status.lines().find_map(|l| l.strip_prefix("NSpid:")).and_then(|ids| ids.split_whitespace().last()?.parse().ok())
                    == Some(reported)
            })
        })
    }

    fn signal_init(&self, sig: i32) {
        common::kill(self.init_pid, sig);
    }

    /// Waits until `role` has recorded `sig` (e.g. "SIGHUP") `n` times in all.
    fn wait_for(&self, role: &str, sig: &str, n: usize) {
        let line = format!("{role} {sig}");
        wait_until(LIMIT, &format!("'{line}' x{n} in {}", self.log.display()), || (self.count(&line) >= n).then_some(()));
    }

    /// Marks `role`'s log: everything already sent to it is recorded before the mark.
    fn settle(&self, role: &str) {
        let line = format!("{role} mark");
        let before = self.count(&line);
        common::kill(self.pid(role), MARK);
        wait_until(LIMIT, &format!("{role}'s mark"), || (self.count(&line) > before).then_some(()));
    }

    /// T when stopped, S when alive otherwise (running or asleep: the same here), Z when dead.
    fn state(&self, pid: i32) -> char {
        let state = fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(')')?.1.trim_start().chars().next())
            .unwrap_or('Z');
        match state {
            'T' | 't' => 'T',
            'Z' | 'X' => 'Z',
            _ => 'S',
        }
    }

    /// Waits until `pid` is in `state` (S, T, ...) and says so.
    fn wait_state(&self, what: &str, pid: i32, state: char) -> String {
        wait_until(LIMIT, &format!("{what} ({pid}) in state {state}"), || (self.state(pid) == state).then_some(()));
        format!("{what} {state}")
    }

    fn parent_of(&self, pid: i32) -> i32 {
        let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status.lines().find_map(|l| l.strip_prefix("PPid:")?.trim().parse().ok()).unwrap_or(0)
    }

    /// A field of /proc/PID/stat after the command name: 2 is the process group, 3 the session.
    fn stat_field(&self, pid: i32, n: usize) -> i32 {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(n)?.parse().ok()).unwrap_or(0)
    }

    fn session_of(&self, pid: i32) -> i32 {
        self.stat_field(pid, 3)
    }

    fn group_of(&self, pid: i32) -> i32 {
        self.stat_field(pid, 2)
    }

    /// The init's stdout and stderr together: tini writes info to stdout, lastcall to stderr.
    fn output(&self) -> String {
        let read = |name: &str| fs::read_to_string(self.dir.join(name)).unwrap_or_default();
        read("stdout") + &read("stderr")
    }

    fn finish(mut self, observed: Vec<String>) -> Outcome {
        let mut harness = self.harness.take().unwrap();
        // The harness itself waits up to 30 s for the leftovers' marks.
        let deadline = Instant::now() + LIMIT * 2;
        let status = loop {
            if let Some(status) = harness.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = harness.kill();
                let _ = harness.wait();
                panic!("the init did not exit; output: {}", self.output());
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let read = |name: &str| fs::read_to_string(self.dir.join(name)).unwrap_or_default();
        assert!(status.success(), "the harness failed: {}", read("harness.stderr"));
        let status = read("status");
        let code = match status.split_whitespace().collect::<Vec<_>>()[..] {
            ["exited", n] => n.parse().unwrap(),
            ["signaled", n] => 128 + n.parse::<i32>().unwrap(),
            ref other => panic!("no status: {other:?}; {}", read("harness.stderr")),
        };
        let mut signals: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for line in self.log_lines() {
            let (role, what) = line.split_once(' ').unwrap();
            if !what.starts_with("ready") {
                signals.entry(role.to_string()).or_default().push(what.to_string());
            }
        }
        let left = read("left").lines().map(str::to_string).collect();
        // On a pty the init's stderr is the transcript, which the scenario compares itself.
        let quiet = read("stderr").is_empty();
        Outcome { signals, status, code, left, quiet, observed }
    }
}

impl Drop for Run {
    /// When a test fails half-way, nothing it started outlives it: the harness, the init and
    /// every fixture process (each found by its pid and checked by its command line).
    fn drop(&mut self) {
        let Some(mut harness) = self.harness.take() else { return };
        // The init, and every process whose command line names this run's directory (the
        // fixtures, which may not have said they were ready, and orphans that left the harness
        // when it died). As PID 1 of a namespace, the init takes the rest along.
        let mut pids = vec![self.init_pid];
        let dir = self.dir.to_string_lossy().into_owned();
        let all = fs::read_dir("/proc").map(|d| d.flatten().filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok()).collect::<Vec<_>>());
        for pid in all.unwrap_or_default() {
            let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(&dir) {
                pids.push(pid);
            }
        }
        for pid in pids {
            // SAFETY: kill takes plain integers.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let _ = harness.kill();
        let _ = harness.wait();
    }
}

const HUP: i32 = libc::SIGHUP;
const TERM: i32 = libc::SIGTERM;
const USR2: i32 = libc::SIGUSR2;

const WARNING: &str = "zombie reaping won't work";

/// Waits for the init to be gone, then returns its output.
fn run_output_after_exit(run: &Run) -> String {
    wait_until(LIMIT, "the init to exit", || (!alive(run.init_pid)).then_some(()));
    // The harness writes the status once it has reaped the init.
    let status = run.dir.join("status");
    wait_until(LIMIT, "the harness to reap the init", || status.exists().then_some(()));
    run.output()
}
