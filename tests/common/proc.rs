//! Processes: signals, liveness, waiting with a deadline, lastcall runs that clean up after
//! themselves, /proc descendants, killing a tree (and guards that do it on drop), and cgroups of
//! the test's own (pids, memory, or a plain one).
#![allow(dead_code)]


use std::ffi::OsStr;
use std::fs;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::{monotonic_ns, LASTCALL};

pub fn kill(pid: i32, sig: i32) {
    // SAFETY: kill takes plain integers.
    let rc = unsafe { libc::kill(pid, sig) };
    assert_eq!(rc, 0, "kill({pid}, {sig}): {}", std::io::Error::last_os_error());
}

pub fn alive(pid: i32) -> bool {
    // A zombie still answers kill(pid, 0); its state in /proc says it is gone.
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Polls `check` until it gives a value or `limit` passes.
pub fn wait_until<T>(limit: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out after {limit:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits for a child of the test to exit, for at most `limit`.
pub fn wait_child(child: &mut Child, limit: Duration) -> ExitStatus {
    wait_until(limit, "lastcall to exit", || child.try_wait().unwrap())
}

/// An exit status as a shell gives it: the code, or 128+N after a death by signal N.
pub fn exit_code(status: ExitStatus) -> i32 {
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// The lines of a fixture's report file.
pub fn lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).collect()
}

/// Where the first timeline line containing `entry` sits on lastcall's clock, in seconds
/// (`lastcall: +1.234s entry`).
pub fn timeline_seconds(log: &str, entry: &str) -> f64 {
    let line = log.lines().find(|l| l.starts_with("lastcall: +") && l.contains(entry)).unwrap_or_else(|| panic!("no '{entry}' in:\n{log}"));
    line.strip_prefix("lastcall: +").and_then(|l| l.split_once("s ")).and_then(|(t, _)| t.parse().ok()).unwrap_or_else(|| panic!("no time in: {line}"))
}

/// Waits for a report line starting with `prefix` and returns it.
pub fn wait_line(path: &Path, prefix: &str, limit: Duration) -> String {
    wait_until(limit, &format!("'{prefix}' in {}", path.display()), || {
        lines(path).into_iter().find(|l| l.starts_with(prefix))
    })
}

pub fn count_lines(path: &Path, prefix: &str) -> usize {
    lines(path).iter().filter(|l| l.starts_with(prefix)).count()
}

pub struct Run {
    child: Child,
    /// lastcall's pid as this test sees it.
    pub pid: i32,
    pub stderr_path: PathBuf,
    pub stdout_path: PathBuf,
    status: Option<ExitStatus>,
}

pub enum Mode {
    /// PID 1 of a new PID namespace with its own /proc, as in a container.
    Pid1,
    /// A plain child of the test: lastcall is a subreaper, as in a systemd unit.
    Plain,
}

impl Mode {
    /// The command that starts lastcall this way; its arguments follow.
    pub fn command(&self) -> Command {
        match self {
            Mode::Pid1 => {
                let mut c = Command::new("unshare");
                c.args(["--pid", "--fork", "--mount-proc", "--kill-child", "--"]).arg(LASTCALL);
                c
            }
            Mode::Plain => Command::new(LASTCALL),
        }
    }
}

pub struct Spec<'a> {
    pub mode: Mode,
    pub args: Vec<String>,
    pub env: Vec<(&'a str, String)>,
    pub dir: &'a Path,
    /// Run in the child between fork and exec of lastcall (or of unshare).
    pub pre_exec: Option<fn() -> std::io::Result<()>>,
}

impl<'a> Spec<'a> {
    pub fn new(mode: Mode, dir: &'a Path, args: &[&str]) -> Spec<'a> {
        Spec { mode, args: args.iter().map(|s| s.to_string()).collect(), env: vec![], dir, pre_exec: None }
    }

    pub fn env(mut self, key: &'a str, value: &str) -> Self {
        self.env.push((key, value.to_string()));
        self
    }

    pub fn start(self) -> Run {
        let stderr_path = self.dir.join("lastcall.stderr");
        let stdout_path = self.dir.join("lastcall.stdout");
        let mut cmd = self.mode.command();
        cmd.args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(self.dir)
            .stdin(Stdio::null())
            .stdout(fs::File::create(&stdout_path).unwrap())
            .stderr(fs::File::create(&stderr_path).unwrap());
        if let Some(hook) = self.pre_exec {
            // SAFETY: the hooks the tests pass make only async-signal-safe calls.
            unsafe { cmd.pre_exec(hook) };
        }
        let child = cmd.spawn().expect("start lastcall");
        let outer = child.id() as i32;
        let pid = match self.mode {
            Mode::Plain => outer,
            // 0 when lastcall came and went before it could be seen: only its status is left.
            Mode::Pid1 => wait_until(Duration::from_secs(10), "unshare to start lastcall", || {
                if !alive(outer) {
                    return Some(0);
                }
                let kids = fs::read_to_string(format!("/proc/{outer}/task/{outer}/children")).ok()?;
                let pid: i32 = kids.split_whitespace().next()?.parse().ok()?;
                let comm = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
                (comm.trim() == "lastcall").then_some(pid)
            }),
        };
        Run { child, pid, stderr_path, stdout_path, status: None }
    }
}

/// lastcall with `opts`, then `--` and `cmd`, started in `dir`.
pub fn start(mode: Mode, dir: &Path, opts: &[&str], cmd: impl IntoIterator<Item = impl ToString>) -> Run {
    let mut spec = Spec::new(mode, dir, opts);
    spec.args.push("--".into());
    spec.args.extend(cmd.into_iter().map(|s| s.to_string()));
    spec.start()
}

impl Run {
    pub fn signal(&self, sig: i32) {
        assert!(self.pid > 0, "lastcall already exited");
        kill(self.pid, sig);
    }

    /// Waits for lastcall to exit and returns its exit code (128+N if it was killed by N).
    pub fn wait(&mut self, limit: Duration) -> i32 {
        let status = match self.status {
            Some(s) => s,
            None => {
                let s = wait_child(&mut self.child, limit);
                self.status = Some(s);
                s
            }
        };
        exit_code(status)
    }

    pub fn try_exited(&mut self) -> bool {
        self.status.is_some() || self.child.try_wait().unwrap().is_some()
    }

    pub fn stderr(&self) -> String {
        fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    pub fn stdout(&self) -> String {
        fs::read_to_string(&self.stdout_path).unwrap_or_default()
    }

    /// lastcall's context switches so far: voluntary + involuntary.
    pub fn context_switches(&self) -> u64 {
        let status = fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap();
        status
            .lines()
            .filter(|l| l.contains("ctxt_switches"))
            .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
            .sum()
    }
}

impl Drop for Run {
    /// Even when a test fails, nothing it started outlives it.
    fn drop(&mut self) {
        if !self.try_exited() {
            if self.pid > 0 {
                // A plain lastcall's descendants would outlive a SIGKILL to lastcall alone.
                kill_tree(self.pid);
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Every descendant of `pid`, from /proc's children lists.
pub fn descendants(pid: i32) -> Vec<i32> {
    let mut found = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let tasks = fs::read_dir(format!("/proc/{p}/task")).map(|d| d.flatten().collect::<Vec<_>>()).unwrap_or_default();
        for task in tasks {
            let kids = fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for kid in kids.split_whitespace().filter_map(|k| k.parse::<i32>().ok()) {
                found.push(kid);
                todo.push(kid);
            }
        }
    }
    found
}

/// SIGKILLs `pid` and every descendant of it.
pub fn kill_tree(pid: i32) {
    for pid in descendants(pid).into_iter().chain([pid]) {
        // SAFETY: kill takes plain integers.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// SIGTERM, then SIGKILL after `limit`, and wait for it to go (up to 5 s more). A process that is
/// already gone is no error.
pub fn stop_process(pid: i32, limit: Duration) {
    // SAFETY: kill takes plain integers.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let deadline = Instant::now() + limit;
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if alive(pid) {
        // SAFETY: kill takes plain integers.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// SIGKILLs a process and everything under it at the end of a test, even a failed one, if it is
/// still there.
pub struct KillTree(pub i32);

impl Drop for KillTree {
    fn drop(&mut self) {
        if alive(self.0) {
            kill_tree(self.0);
        }
    }
}

/// A child of the test, killed with everything it started when the test ends, however it ends.
pub struct ChildGuard(pub Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            kill_tree(self.0.id() as i32);
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Runs lastcall to completion with no input and returns (exit code, stdout, stderr).
pub fn run_to_end<S: AsRef<OsStr>>(mode: Mode, args: &[S], env: &[(&str, &str)]) -> (i32, Vec<u8>, String) {
    let out = mode
        .command()
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run lastcall");
    (exit_code(out.status), out.stdout, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A cgroup of the test's own, removed on drop with everything in it, even when the test fails.
pub struct Cgroup {
    pub dir: PathBuf,
}

impl Cgroup {
    /// A pids cgroup (cgroup v2 where it has the pids controller, else v1's), with `max` in
    /// pids.max.
    pub fn pids(max: u32) -> Cgroup {
        let name = format!("lastcall-test-{}-{}", std::process::id(), monotonic_ns());
        // A cgroup2 root lists pids in cgroup.controllers (a hybrid host's /sys/fs/cgroup is a
        // tmpfs, where a "pids.max" would be a plain file); v1 has its own hierarchy.
        let has_pids = |root: &Path| {
            fs::read_to_string(root.join("cgroup.controllers")).is_ok_and(|c| c.split_whitespace().any(|c| c == "pids"))
        };
        let v2 = [Path::new("/sys/fs/cgroup/unified"), Path::new("/sys/fs/cgroup")].into_iter().filter(|r| has_pids(r));
        let v1 = Path::new("/sys/fs/cgroup/pids");
        for root in v2.chain([v1].into_iter().filter(|r| r.join("pids.max").exists() || r.join("tasks").exists())) {
            let dir = root.join(&name);
            if fs::create_dir(&dir).is_err() {
                continue;
            }
            // Fails where the parent does not hand the pids controller down (subtree_control).
            if fs::write(dir.join("pids.max"), max.to_string()).is_ok() {
                return Cgroup { dir };
            }
            let _ = fs::remove_dir(&dir);
        }
        panic!("no pids cgroup controller to test with (tried cgroup v2 and /sys/fs/cgroup/pids)");
    }

    /// A memory cgroup with `limit` bytes and no swap (cgroup v1's memory hierarchy, else v2).
    pub fn memory(limit: u64) -> Cgroup {
        let name = format!("lastcall-test-oom-{}-{}", std::process::id(), monotonic_ns());
        let v1 = Path::new("/sys/fs/cgroup/memory");
        let v2 = Path::new("/sys/fs/cgroup");
        let v2_has_memory = fs::read_to_string(v2.join("cgroup.subtree_control")).is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"));
        let (dir, settings): (PathBuf, Vec<(&str, String)>) = if v1.join("memory.limit_in_bytes").exists() {
            (
                v1.join(&name),
                vec![
                    ("memory.limit_in_bytes", limit.to_string()),
                    ("memory.memsw.limit_in_bytes", limit.to_string()),
                    ("memory.swappiness", "0".into()),
                ],
            )
        } else if v2_has_memory {
            (v2.join(&name), vec![("memory.max", limit.to_string()), ("memory.swap.max", "0".into())])
        } else {
            panic!("no memory cgroup controller to test with (tried {} and {})", v1.display(), v2.display());
        };
        fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        let cgroup = Cgroup { dir };
        for (file, value) in settings {
            // memsw and swap.max exist only with swap accounting; without it there is no swap to use.
            if let Err(e) = fs::write(cgroup.dir.join(file), &value) {
                assert!(file.contains("sw"), "{file}: {e}");
            }
        }
        cgroup
    }

    /// A cgroup (v2) below the test's own, with no controller set up.
    pub fn below_own(name: &str) -> Cgroup {
        let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap();
        let mount = mountinfo
            .lines()
            .find_map(|l| l.split_once(" - cgroup2 ").map(|(head, _)| head.split_whitespace().nth(4).unwrap().to_string()))
            .expect("a cgroup2 mount");
        let own = fs::read_to_string("/proc/self/cgroup").unwrap();
        let own = own.lines().find_map(|l| l.strip_prefix("0::")).expect("a cgroup v2 path").trim_start_matches('/');
        let dir = Path::new(&mount).join(own).join(format!("lastcall-test-{}-{name}", std::process::id()));
        fs::create_dir(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        Cgroup { dir }
    }

    pub fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// A command for `program` that runs inside the cgroup: a shell moves itself in and execs it.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", r#"echo $$ > "$0" && exec "$@""#]).arg(self.procs_file()).arg(program);
        cmd
    }

    /// The processes in the cgroup that are not zombies.
    pub fn living(&self) -> Vec<i32> {
        let text = fs::read_to_string(self.procs_file()).unwrap_or_default();
        text.split_whitespace().filter_map(|p| p.parse().ok()).filter(|&p| alive(p)).collect()
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        empty_and_remove_cgroup(&self.dir, || self.living());
    }
}

/// SIGKILLs what `living` lists in the cgroup `dir` until it is empty, then removes `dir`. A fork
/// bomb refills what is killed, so this goes on until nothing is left (bounded).
pub fn empty_and_remove_cgroup(dir: &Path, living: impl Fn() -> Vec<i32>) {
    for _ in 0..2000 {
        let pids = living();
        if pids.is_empty() && fs::remove_dir(dir).is_ok() {
            return;
        }
        for pid in pids {
            // SAFETY: kill takes plain integers.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    eprintln!("could not remove {}", dir.display());
}
