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

mod common;

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
            cmd.env("HARNESS_PTY_SCRIPT", script);
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

// ---------------------------------------------------------------------------------------------
// tini

/// tini signals the child alone, exits with it at once, and leaves the rest running untouched;
/// not PID 1 and not a subreaper, it warns. Options are permuted as glibc's getopt does, so
/// without `--` nothing changes here.
#[test]
fn tini_signals_the_child_only_and_exits_with_it() {
    for args in [&["--"][..], &[]] {
        let outcome = scenario(Peer::Tini, args).roles(&["grp"]).same(|run| {
            run.pid("grp");
            let main = run.pid("main");
            let own_group = run.group_of(main) == main && run.session_of(main) != main;
            run.signal_init(HUP);
            run.wait_for("main", "SIGHUP", 1);
            run.settle("grp");
            run.signal_init(TERM);
            vec![format!("main has a group of its own: {own_group}"), format!("warned: {}", run_output_after_exit(run).contains(WARNING))]
        });
        assert_eq!(outcome.of("main"), ["SIGHUP", "SIGTERM"]);
        assert_eq!(outcome.of("grp"), ["mark", "mark"], "nothing reached the grandchild");
        assert_eq!(outcome.code, 143);
        assert_eq!(outcome.left, ["grp S"]);
        assert_eq!(outcome.observed, ["main has a group of its own: true", "warned: true"]);
    }
}

/// Waits for the init to be gone, then returns its output.
fn run_output_after_exit(run: &Run) -> String {
    wait_until(LIMIT, "the init to exit", || (!alive(run.init_pid)).then_some(()));
    // The harness writes the status once it has reaped the init.
    let status = run.dir.join("status");
    wait_until(LIMIT, "the harness to reap the init", || status.exists().then_some(()));
    run.output()
}

/// The init's own working directory while the app runs: tini stays where it was started,
/// dumb-init moves to / (so that it keeps no mount busy); the app keeps the one it was given.
#[test]
fn the_inits_working_directory() {
    for (peer, expected) in [(Peer::Tini, false), (Peer::DumbInit, true)] {
        let outcome = scenario(peer, &["--"]).same(|run| {
            let main = run.pid("main");
            let cwd = |pid: i32| fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default();
            let observed = vec![format!("init at /: {}", cwd(run.init_pid) == Path::new("/")), format!("app at /: {}", cwd(main) == Path::new("/"))];
            run.signal_init(TERM);
            let _ = run_output_after_exit(run);
            observed
        });
        assert_eq!(outcome.observed, [format!("init at /: {expected}"), "app at /: false".to_string()], "{peer:?}");
    }
}

/// `-g` and TINI_KILL_PROCESS_GROUP (set to anything, even 0 or nothing) signal the group.
#[test]
fn tini_g_and_its_variable_signal_the_group() {
    let variants = [
        scenario(Peer::Tini, &["-g", "--"]),
        scenario(Peer::Tini, &["--"]).env("TINI_KILL_PROCESS_GROUP", "1"),
        scenario(Peer::Tini, &["--"]).env("TINI_KILL_PROCESS_GROUP", "0"),
        scenario(Peer::Tini, &[]).env("TINI_KILL_PROCESS_GROUP", ""),
    ];
    for variant in variants {
        // main outlives TERM, so that each process has recorded it before main's exit ends the
        // run: a signal still pending when the harness marks a leftover could otherwise be
        // counted on either side of the mark.
        let outcome = variant.roles(&["grp", "sess"]).env("MAIN_SURVIVES", "1").env("MAIN_EXIT", "3").same(|run| {
            run.pid("grp");
            run.pid("sess");
            run.signal_init(HUP);
            run.wait_for("main", "SIGHUP", 1);
            run.wait_for("grp", "SIGHUP", 1);
            run.signal_init(TERM);
            run.wait_for("main", "SIGTERM", 1);
            run.wait_for("grp", "SIGTERM", 1);
            common::kill(run.pid("main"), USR2);
            vec![]
        });
        assert_eq!(outcome.of("main"), ["SIGHUP", "SIGTERM", "SIGUSR2"]);
        assert_eq!(outcome.of("grp"), ["SIGHUP", "SIGTERM", "mark"], "nothing more at the exit");
        assert_eq!(outcome.of("sess"), ["mark"], "a session of its own is not in the group");
        assert_eq!(outcome.code, 3);
        assert_eq!(outcome.left, ["grp S", "sess S"]);
    }
}

/// `-s` and TINI_SUBREAPER (any value, even 0) make the init the subreaper: an orphan comes back
/// to it, and there is no warning. Without either, the orphan goes elsewhere (here, to the
/// harness) and tini warns. Either way what is left runs on after the main child's exit.
/// The last variant puts `-s` after the command: glibc's getopt still takes it as tini's.
#[test]
fn tini_s_and_its_variable_adopt_orphans() {
    let variants = [
        (scenario(Peer::Tini, &["--"]).roles(&["mid"]), false),
        (scenario(Peer::Tini, &["-s", "--"]).roles(&["mid"]), true),
        (scenario(Peer::Tini, &["--"]).roles(&["mid"]).env("TINI_SUBREAPER", "0"), true),
        (scenario(Peer::Tini, &["--"]).roles(&["mid"]).env("TINI_SUBREAPER", ""), true),
        (scenario(Peer::Tini, &[]).roles(&["mid", "-s"]), true),
    ];
    for (variant, adopts) in variants {
        let outcome = variant.same(|run| {
            let mid = run.pid("mid");
            let orph = run.pid("orph");
            run.pid("gone");
            wait_until(LIMIT, "mid to exit", || (!alive(mid)).then_some(()));
            let adopted = wait_until(LIMIT, "orph to be re-parented", || {
                let parent = run.parent_of(orph);
                (parent != mid && parent != 0).then_some(parent == run.init_pid)
            });
            common::kill(run.pid("main"), USR2);
            let warned = run_output_after_exit(run).contains(WARNING);
            vec![format!("adopted: {adopted}"), format!("warned: {warned}")]
        });
        assert_eq!(outcome.observed, [format!("adopted: {adopts}"), format!("warned: {}", !adopts)]);
        assert_eq!(outcome.of("main"), ["SIGUSR2"]);
        assert_eq!(outcome.of("orph"), ["mark"]);
        assert_eq!(outcome.code, 0);
        assert_eq!(outcome.left, ["orph S"]);
    }
}

/// `-w` warns of each orphan the init reaps; without it, nothing is said.
#[test]
fn tini_w_warns_of_reaped_zombies() {
    for (args, warns) in [(&["-s", "-w", "--"][..], true), (&["-s", "--"], false)] {
        let outcome = scenario(Peer::Tini, args).roles(&["mid"]).same(|run| {
            let gone = run.pid("gone");
            // Re-parented to the init, exited, and reaped by it: gone from /proc.
            wait_until(LIMIT, "gone to be reaped", || (!Path::new(&format!("/proc/{gone}")).exists()).then_some(()));
            common::kill(run.pid("main"), USR2);
            let output = run_output_after_exit(run).to_lowercase();
            vec![format!("warned of the zombie: {}", output.contains("reaped zombie process"))]
        });
        assert_eq!(outcome.observed, [format!("warned of the zombie: {warns}")]);
        assert_eq!(outcome.code, 0);
    }
}

/// Exit codes: the child's, 128+N, `-e` maps one to 0, and exec failures are 127 (not found),
/// 126 (EACCES) or 1 (anything else), which `-e` maps too: they are the forked child's status.
#[test]
fn tini_exit_codes() {
    for (args, main_exit, code) in [(&["--"][..], "3", 3), (&["-e", "143", "--"], "143", 0), (&["-e", "3", "--"], "143", 143)] {
        let outcome = scenario(Peer::Tini, args).env("MAIN_EXIT", main_exit).same(|run| {
            common::kill(run.pid("main"), USR2);
            vec![]
        });
        assert_eq!(outcome.code, code, "{args:?} MAIN_EXIT={main_exit}");
    }
    let missing = "/nonexistent/command";
    for (args, command, code) in [
        (&["--"][..], missing, 127),
        (&["--"], "/etc", 126),
        (&["--"], "/etc/passwd", 126),
        (&["--"], "/etc/passwd/x", 1),
        (&["-e", "127", "--"], missing, 0),
        (&["-e", "126", "--"], "/etc", 0),
    ] {
        let outcome = scenario(Peer::Tini, args).command(&[command]).same(|_| vec![]);
        assert_eq!(outcome.code, code, "{args:?} {command}");
    }
    // Usage errors exit 1: an unknown option (also one permuted from the command's arguments),
    // a bad -e, a -p signal not spelled as tini spells it, no command at all, --version with
    // company.
    let p_bad: [&[&str]; 3] = [&["-p", "USR1", "true"], &["-p", "10", "true"], &["-p", "SIGRTMIN", "true"]];
    for bad in [&["-c", "true"][..], &["sh", "-c", "true"], &["-e", "256", "true"], &[], &["--version", "true"]].into_iter().chain(p_bad) {
        let outcome = scenario(Peer::Tini, bad).command(&[]).same(|_| vec![]);
        assert_eq!(outcome.code, 1, "{bad:?}");
    }
    for fine in [&["--version"][..], &["-h"], &["-l"]] {
        let outcome = scenario(Peer::Tini, fine).command(&[]).same(|_| vec![]);
        assert_eq!(outcome.code, 0, "{fine:?}");
    }
}

/// `-p SIGNAL`: when the init's parent dies, the kernel sends the init SIGNAL, which it forwards.
#[test]
fn tini_p_forwards_the_parent_death_signal() {
    let outcome = scenario(Peer::Tini, &["-p", "SIGUSR1", "--"]).via_parent().same(|run| {
        run.pid("main");
        let parent = wait_until(LIMIT, "the init's parent", || fs::read_to_string(run.dir.join("parent.pid")).ok()?.parse().ok());
        common::kill(parent, libc::SIGKILL);
        run.wait_for("main", "SIGUSR1", 1);
        run.signal_init(TERM);
        vec![]
    });
    assert_eq!(outcome.of("main"), ["SIGUSR1", "SIGTERM"]);
    assert_eq!(outcome.code, 143);
}

/// TSTP is forwarded (the child stops, the init does not); TTIN and TTOU, which mean "you touched
/// the terminal" to the init itself, are not. CONT is forwarded like any other signal.
#[test]
fn tini_job_control_signals() {
    let outcome = scenario(Peer::Tini, &["--"]).roles(&["grp"]).same(|run| {
        let main = run.pid("main");
        run.pid("grp");
        run.signal_init(libc::SIGTTIN);
        run.signal_init(libc::SIGTTOU);
        // WINCH is numbered above both: it is forwarded after them, if they were.
        run.signal_init(libc::SIGWINCH);
        run.wait_for("main", "SIGWINCH", 1);
        let mut seen = vec![format!("main after TTIN, TTOU {}", run.state(main))];
        run.signal_init(libc::SIGTSTP);
        seen.push(run.wait_state("main after TSTP", main, 'T'));
        seen.push(format!("init {}", run.state(run.init_pid)));
        run.signal_init(libc::SIGCONT);
        seen.push(run.wait_state("main after CONT", main, 'S'));
        run.signal_init(TERM);
        seen
    });
    assert_eq!(outcome.observed, ["main after TTIN, TTOU S", "main after TSTP T", "init S", "main after CONT S"]);
    assert_eq!(outcome.of("main"), ["SIGWINCH", "SIGTERM"]);
    assert_eq!(outcome.code, 143);
}

/// tini's verbosity: warnings by default (the subreaper warning here), TINI_VERBOSITY=0 hides
/// them, -v says more. Where and in what words may differ; whether anything is said may not.
#[test]
fn tini_verbosity() {
    let said = |args: &[&str], env: Option<&str>| {
        let mut s = scenario(Peer::Tini, args).command(&["true"]);
        if let Some(v) = env {
            s = s.env("TINI_VERBOSITY", v);
        }
        s.same(|run| {
            let output = run_output_after_exit(run);
            // Anything but the subreaper warning (three lines from tini, one from lastcall).
            let warning = ["PID 1", WARNING, "To fix the problem"];
            let more = output.lines().any(|l| !warning.iter().any(|w| l.contains(w)));
            vec![format!("warned: {}", output.contains(WARNING)), format!("more: {more}")]
        })
        .observed
    };
    assert_eq!(said(&["--"], None), ["warned: true", "more: false"]);
    assert_eq!(said(&["--"], Some("0")), ["warned: false", "more: false"]);
    assert_eq!(said(&["-vv", "--"], Some("0")), ["warned: false", "more: false"], "the variable wins over -v");
    assert_eq!(said(&["-vv", "--"], None), ["warned: true", "more: true"]);
}

// ---------------------------------------------------------------------------------------------
// dumb-init

/// dumb-init's default, setsid mode: the child leads a session of its own, every signal goes to
/// its group (not to a daemon that left it), and when the child exits the group gets TERM and
/// dumb-init exits at once with the child's status. DUMB_INIT_SETSID turns this off only for
/// exactly "0".
#[test]
fn dumb_init_setsid_mode_signals_the_group_and_terms_it_at_the_end() {
    for variant in [
        scenario(Peer::DumbInit, &["--"]),
        scenario(Peer::DumbInit, &[]).env("DUMB_INIT_SETSID", "1"),
        scenario(Peer::DumbInit, &[]).env("DUMB_INIT_SETSID", "false"),
    ] {
        let outcome = variant.roles(&["grp", "sess"]).env("MAIN_SURVIVES", "1").env("MAIN_EXIT", "7").same(|run| {
            let main = run.pid("main");
            run.pid("grp");
            run.pid("sess");
            let leads = run.session_of(main) == main;
            run.signal_init(HUP);
            run.wait_for("main", "SIGHUP", 1);
            run.wait_for("grp", "SIGHUP", 1);
            run.settle("sess");
            run.signal_init(TERM);
            run.wait_for("main", "SIGTERM", 1);
            run.wait_for("grp", "SIGTERM", 1);
            common::kill(main, USR2);
            vec![format!("main leads a session: {leads}")]
        });
        assert_eq!(outcome.observed, ["main leads a session: true"]);
        assert_eq!(outcome.of("main"), ["SIGHUP", "SIGTERM", "SIGUSR2"]);
        assert_eq!(outcome.of("grp"), ["SIGHUP", "SIGTERM", "SIGTERM", "mark"], "TERM again at the child's exit");
        assert_eq!(outcome.of("sess"), ["mark", "mark"]);
        assert_eq!(outcome.code, 7);
        assert_eq!(outcome.left, ["grp S", "sess S"]);
    }
}

/// `-c`, `--single-child` and DUMB_INIT_SETSID=0: no session, the child alone gets signals, and
/// nobody gets TERM at its exit.
#[test]
fn dumb_init_single_child_mode() {
    for variant in [
        scenario(Peer::DumbInit, &["-c", "--"]),
        scenario(Peer::DumbInit, &["--single-child"]),
        scenario(Peer::DumbInit, &[]).env("DUMB_INIT_SETSID", "0"),
    ] {
        let outcome = variant.roles(&["grp"]).same(|run| {
            let main = run.pid("main");
            run.pid("grp");
            let leads = run.session_of(main) == main;
            let own_group = run.group_of(main) == main;
            run.signal_init(HUP);
            run.wait_for("main", "SIGHUP", 1);
            run.settle("grp");
            run.signal_init(TERM);
            vec![format!("main leads a session: {leads}"), format!("main has a group of its own: {own_group}")]
        });
        assert_eq!(outcome.observed, ["main leads a session: false", "main has a group of its own: false"]);
        assert_eq!(outcome.of("main"), ["SIGHUP", "SIGTERM"]);
        assert_eq!(outcome.of("grp"), ["mark", "mark"]);
        assert_eq!(outcome.code, 143);
        assert_eq!(outcome.left, ["grp S"]);
    }
}

/// `-r s:r` rewrites what is forwarded, the TERM sent at the child's exit too; `r` = 0 drops it.
#[test]
fn dumb_init_rewrites() {
    let outcome = scenario(Peer::DumbInit, &["-r", "15:3", "--rewrite", "1:0", "--"])
        .roles(&["grp"])
        .env("MAIN_SURVIVES", "1")
        .same(|run| {
            let main = run.pid("main");
            run.pid("grp");
            run.signal_init(HUP);
            run.settle("main");
            run.settle("grp");
            run.signal_init(TERM);
            run.wait_for("main", "SIGQUIT", 1);
            run.wait_for("grp", "SIGQUIT", 1);
            common::kill(main, USR2);
            vec![]
        });
    assert_eq!(outcome.of("main"), ["mark", "SIGQUIT", "SIGUSR2"]);
    assert_eq!(outcome.of("grp"), ["mark", "SIGQUIT", "SIGQUIT", "mark"]);
    assert_eq!(outcome.code, 0);
}

/// Job control in both modes: TSTP, TTIN and TTOU are forwarded (as SIGSTOP in setsid mode,
/// unless rewritten) and then dumb-init stops itself; CONT wakes it and is forwarded.
#[test]
fn dumb_init_job_control() {
    /// (args, signal, main's state, grp's state, what main records before TERM)
    type Case = (&'static [&'static str], i32, char, char, &'static [&'static str]);
    let cases: [Case; 4] = [
        (&["--"], libc::SIGTSTP, 'T', 'T', &[]),
        (&["--"], libc::SIGTTIN, 'T', 'T', &[]),
        (&["-c", "--"], libc::SIGTSTP, 'T', 'S', &[]),
        (&["-r", "20:10", "--"], libc::SIGTSTP, 'S', 'S', &["SIGUSR1"]),
    ];
    for (args, sig, main_state, grp_state, recorded) in cases {
        let outcome = scenario(Peer::DumbInit, args).roles(&["grp"]).env("MAIN_SURVIVES", "1").same(|run| {
            let (main, grp) = (run.pid("main"), run.pid("grp"));
            run.signal_init(sig);
            let mut seen = vec![run.wait_state("init", run.init_pid, 'T')];
            for role in recorded {
                run.wait_for("main", role, 1);
            }
            if grp_state == 'S' && recorded.is_empty() {
                run.settle("grp");
            }
            seen.push(run.wait_state("main", main, main_state));
            seen.push(run.wait_state("grp", grp, grp_state));
            run.signal_init(libc::SIGCONT);
            seen.push(run.wait_state("init after CONT", run.init_pid, 'S'));
            seen.push(run.wait_state("main after CONT", main, 'S'));
            seen.push(run.wait_state("grp after CONT", grp, 'S'));
            run.signal_init(TERM);
            run.wait_for("main", "SIGTERM", 1);
            if grp_state == 'T' || !recorded.is_empty() {
                // Signalled as a group: grp records this TERM before the one at main's exit.
                run.wait_for("grp", "SIGTERM", 1);
            }
            common::kill(main, USR2);
            seen
        });
        let expected = [
            "init T".to_string(),
            format!("main {main_state}"),
            format!("grp {grp_state}"),
            "init after CONT S".into(),
            "main after CONT S".into(),
            "grp after CONT S".into(),
        ];
        assert_eq!(outcome.observed, expected, "{args:?} {sig}");
        assert_eq!(outcome.code, 0);
        let mut main_saw: Vec<&str> = recorded.to_vec();
        main_saw.extend(["SIGTERM", "SIGUSR2"]);
        assert_eq!(outcome.of("main"), main_saw, "{args:?} {sig}");
    }
}

/// An exec failure is the forked child's exit code: 2, whatever the reason; usage errors exit 1.
#[test]
fn dumb_init_exit_codes() {
    for command in ["/nonexistent/command", "/etc", "/etc/passwd", "/etc/passwd/x"] {
        let outcome = scenario(Peer::DumbInit, &["--"]).command(&[command]).same(|_| vec![]);
        assert_eq!(outcome.code, 2, "{command}");
    }
    // -r takes numbers only, FROM 1-31, TO 0-31.
    for bad in [&["-s", "true"][..], &["-r", "TERM", "true"], &[], &["-r", "1:32", "true"], &["-r", "TERM:INT", "true"], &["-r", "15:RTMIN", "true"]] {
        let outcome = scenario(Peer::DumbInit, bad).command(&[]).same(|_| vec![]);
        assert_eq!(outcome.code, 1, "{bad:?}");
    }
    // getopt_long: an unambiguous prefix is the option; an ambiguous one is an error.
    for (args, code) in [(&["--ver", "true"][..], 1), (&["--single", "--rew=15:3", "--verb", "true"], 0), (&["--vers"], 0)] {
        let outcome = scenario(Peer::DumbInit, args).command(&[]).same(|_| vec![]);
        assert_eq!(outcome.code, code, "{args:?}");
    }
    for fine in [&["-V"][..], &["--version", "anything"], &["-h"]] {
        let outcome = scenario(Peer::DumbInit, fine).command(&[]).same(|_| vec![]);
        assert_eq!(outcome.code, 0, "{fine:?}");
    }
    let outcome = scenario(Peer::DumbInit, &[]).command(&["sh", "-c", "kill -KILL $$"]).same(|_| vec![]);
    assert_eq!(outcome.code, 137);
}

/// When the child exits while others run: TERM to its group (setsid mode) or to nobody (`-c`),
/// then an exit at once, leaving them running.
#[test]
fn dumb_init_child_exit_with_leftovers() {
    for (args, grp_saw) in [(&["--"][..], &["SIGTERM", "mark"][..]), (&["-c", "--"], &["mark"])] {
        let outcome = scenario(Peer::DumbInit, args).roles(&["grp", "sess"]).env("MAIN_EXIT", "4").same(|run| {
            run.pid("grp");
            run.pid("sess");
            common::kill(run.pid("main"), USR2);
            vec![]
        });
        assert_eq!(outcome.of("grp"), grp_saw, "{args:?}");
        assert_eq!(outcome.of("sess"), ["mark"]);
        assert_eq!(outcome.code, 4);
        assert_eq!(outcome.left, ["grp S", "sess S"]);
    }
}

/// Quiet by default; `-v` and DUMB_INIT_DEBUG=1 (exactly 1) say what happens.
#[test]
fn dumb_init_verbosity() {
    let said = |args: &[&str], debug: Option<&str>| {
        let mut s = scenario(Peer::DumbInit, args).command(&["true"]);
        if let Some(v) = debug {
            s = s.env("DUMB_INIT_DEBUG", v);
        }
        s.same(|run| vec![format!("said something: {}", !run_output_after_exit(run).is_empty())]).observed
    };
    assert_eq!(said(&[], None), ["said something: false"]);
    assert_eq!(said(&[], Some("yes")), ["said something: false"]);
    assert_eq!(said(&["-v"], None), ["said something: true"]);
    assert_eq!(said(&[], Some("1")), ["said something: true"]);
}

// ---------------------------------------------------------------------------------------------
// At a terminal: bash with job control on a pty whose session the init leads (docker run -it).

/// Start a foreground job, Ctrl-Z it, `fg` it, Ctrl-C it, exit 5: every step must be seen.
const JOB_CONTROL: &str = r#"[["bash-[0-9.]+[#$] ", "python3 JOB\n"], ["RUNNING", "\u001a"], ["Stopped", "fg\n"], ["CONTINUED", "\u0003"], ["bash-[0-9.]+[#$] ", "exit 5\n"]]"#;

fn job_control_at_a_terminal(peer: Peer, args: &[&str]) {
    let job = fixture("peer_job.py");
    let script = JOB_CONTROL.replace("JOB", &job);
    let mut full: Vec<&str> = args.to_vec();
    full.extend(["bash", "--norc", "--noprofile", "-i"]);
    let outcome = scenario(peer, &full).command(&[]).pty(&script).same(|run| {
        run_output_after_exit(run);
        let read = |name: &str| fs::read_to_string(run.dir.join(name)).unwrap_or_default();
        let transcript = read("transcript");
        vec![
            format!("steps: {}", read("steps")),
            format!("job control: {}", !transcript.contains("no job control")),
        ]
    });
    assert_eq!(outcome.observed, ["steps: 5", "job control: true"], "{peer:?} {args:?}");
    assert_eq!(outcome.code, 5);
}

#[test]
fn tini_at_a_terminal() {
    job_control_at_a_terminal(Peer::Tini, &["--"]);
}

#[test]
fn dumb_init_single_child_at_a_terminal() {
    job_control_at_a_terminal(Peer::DumbInit, &["-c"]);
}

/// dumb-init's default at a terminal: it gives the terminal up (TIOCNOTTY) so that the child's
/// new session can take it, and ignores the SIGHUP and SIGCONT that the hand-off raises.
#[test]
fn dumb_init_setsid_mode_at_a_terminal() {
    job_control_at_a_terminal(Peer::DumbInit, &[]);
}

/// dumb-init `-c` at a terminal, with no shell in between: its child stays in its process group,
/// so Ctrl-Z reaches both. The group is orphaned (its session leader's parent is elsewhere), so
/// the kernel discards the child's TSTP; dumb-init forwards it (discarded again) and stops
/// itself. Ctrl-C likewise reaches both, and the child dies of it.
#[test]
fn dumb_init_single_child_keeps_the_child_in_its_group_at_a_terminal() {
    let job = fixture("peer_job.py");
    let outcome = scenario(Peer::DumbInit, &["-c", "python3", &job]).command(&[]).pty(r#"[["RUNNING", "\u001a"]]"#).same(|run| {
        let main = wait_until(LIMIT, "the job", || {
            let kids = fs::read_to_string(format!("/proc/{0}/task/{0}/children", run.init_pid)).ok()?;
            kids.split_whitespace().next()?.parse::<i32>().ok()
        });
        let mut seen = vec![run.wait_state("init after Ctrl-Z", run.init_pid, 'T')];
        seen.push(format!("job {}", run.state(main)));
        seen.push(format!("job in the init's group: {}", run.group_of(main) == run.group_of(run.init_pid)));
        run.signal_init(libc::SIGCONT);
        seen.push(run.wait_state("init after CONT", run.init_pid, 'S'));
        run.signal_init(libc::SIGINT);
        run_output_after_exit(run);
        seen
    });
    assert_eq!(outcome.observed, ["init after Ctrl-Z T", "job S", "job in the init's group: true", "init after CONT S"]);
    assert_eq!(outcome.code, 130);
}

// ---------------------------------------------------------------------------------------------
// lastcall's own variables under a peer's name: what an image gains with one ENV line.

impl Scenario {
    /// Runs under lastcall by the peer's name only: for what the peer cannot do.
    fn ours_only(&self, drive: impl Fn(&mut Run) -> Vec<String>) -> Outcome {
        let dir = scratch(&format!("peers-ours-{}", self.peer.name()));
        let outcome = self.run(&self.peer.ours(&dir), &dir.join("ours"), &drive);
        let _ = fs::remove_dir_all(&dir);
        outcome
    }
}

/// A dumb-init image with `ENV LASTCALL_PRE_STOP=1s`: TERM reaches the group a second later,
/// everything else as dumb-init does it (the group, TERM again at the exit, the exit at once).
#[test]
fn lastcall_pre_stop_under_dumb_init_s_name() {
    let outcome = scenario(Peer::DumbInit, &[]).roles(&["grp"]).env("LASTCALL_PRE_STOP", "1s").env("MAIN_SURVIVES", "1").ours_only(|run| {
        let main = run.pid("main");
        run.pid("grp");
        let sent = Instant::now();
        run.signal_init(TERM);
        run.wait_for("main", "SIGTERM", 1);
        let waited = sent.elapsed();
        run.wait_for("grp", "SIGTERM", 1);
        common::kill(main, USR2);
        vec![format!("pre-stop kept: {}", waited >= Duration::from_millis(1000))]
    });
    assert_eq!(outcome.observed, ["pre-stop kept: true"]);
    assert_eq!(outcome.of("main"), ["SIGTERM", "SIGUSR2"]);
    assert_eq!(outcome.of("grp"), ["SIGTERM", "SIGTERM", "mark"]);
    assert_eq!(outcome.code, 0);
}

/// A tini image with `ENV LASTCALL_GRACE=1s`: an app that ignores TERM is SIGKILLed after a
/// second, where tini would wait for ever.
#[test]
fn lastcall_grace_under_tini_s_name() {
    let outcome = scenario(Peer::Tini, &["--"]).env("LASTCALL_GRACE", "1s").env("MAIN_SURVIVES", "1").ours_only(|run| {
        run.pid("main");
        run.signal_init(TERM);
        run.wait_for("main", "SIGTERM", 1);
        vec![]
    });
    assert_eq!(outcome.of("main"), ["SIGTERM"]);
    assert_eq!(outcome.code, 137);
}

/// The app's environment is what the init was given: nothing of lastcall's is added under a
/// peer's name (its deadlines appear only once LASTCALL_PRE_STOP or LASTCALL_GRACE is set).
#[test]
fn the_apps_environment_is_the_peers() {
    let check = r#"env | grep -v '^MAIN_' | sort > "$0"; test -z "$(grep ^LASTCALL_ "$0")""#;
    for peer in [Peer::Tini, Peer::DumbInit] {
        let dir = scratch("peers-env");
        let file = dir.join("env").to_string_lossy().into_owned();
        let outcome = scenario(peer, &["--"]).command(&["sh", "-c", check, &file]).same(|_| vec![]);
        assert_eq!(outcome.code, 0, "{peer:?}: {}", fs::read_to_string(&file).unwrap_or_default());
        let outcome = scenario(peer, &["--"]).env("LASTCALL_GRACE", "2s").command(&["sh", "-c", check, &file]).ours_only(|_| vec![]);
        assert_eq!(outcome.code, 1, "{peer:?}: the deadlines are announced once set");
        let _ = fs::remove_dir_all(&dir);
    }
}

// ---------------------------------------------------------------------------------------------
// As PID 1 of a PID namespace, as in a container.

/// As PID 1 neither peer warns about reaping, both forward to the child, and both exit with the
/// child: the kernel then kills whatever was left, so nothing survives the container. (dumb-init's
/// setsid mode is left out here: its TERM to the group at the exit races the kernel's SIGKILL.)
#[test]
fn as_pid1_of_a_container() {
    for variant in [scenario(Peer::Tini, &["--"]), scenario(Peer::DumbInit, &["-c", "--"])] {
        let peer = variant.peer;
        let outcome = variant.roles(&["grp", "sess"]).env("MAIN_SURVIVES", "1").env("MAIN_EXIT", "9").pid1().same(|run| {
            let main = run.pid("main");
            run.pid("grp");
            run.pid("sess");
            run.signal_init(HUP);
            run.wait_for("main", "SIGHUP", 1);
            run.settle("grp");
            run.settle("sess");
            common::kill(main, USR2);
            let output = run_output_after_exit(run);
            vec![format!("warned: {}", output.contains(WARNING))]
        });
        assert_eq!(outcome.observed, ["warned: false"], "{peer:?}");
        assert_eq!(outcome.of("main"), ["SIGHUP", "SIGUSR2"], "{peer:?}");
        assert_eq!(outcome.of("grp"), ["mark"], "{peer:?}");
        assert_eq!(outcome.of("sess"), ["mark"], "{peer:?}");
        assert_eq!(outcome.code, 9, "{peer:?}");
        assert!(outcome.left.is_empty(), "{peer:?}: {:?}", outcome.left);
    }
}
