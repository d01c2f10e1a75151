//! What the real-host tests share: the hosts, started lazily and torn down on drop; commands
//! run with deadlines; loopback HTTP; the cache under target/.

use std::fs;
use std::io::Read;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::docker::Docker;
use crate::others::Podman;
use crate::systemd::Nspawn;

pub const SEC: Duration = Duration::from_secs(1);

/// The hosts, each started by the first test that needs it. A host that failed to start is
/// not tried again: its tests fail with the reason.
pub struct Hosts {
    _lock: fs::File,
    docker: Option<Result<Docker, String>>,
    nspawn: Option<Result<Nspawn, String>>,
    podman: Option<Result<Podman, String>>,
}

fn started<T>(slot: &mut Option<Result<T, String>>, start: impl FnOnce() -> T) -> &mut T {
    if slot.is_none() {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(start));
        *slot = Some(result.map_err(|e| {
            e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
        }));
    }
    match slot.as_mut().unwrap() {
        Ok(host) => host,
        Err(why) => panic!("the host did not start: {why}"),
    }
}

impl Hosts {
    pub fn new() -> Hosts {
        fs::create_dir_all(cache()).unwrap();
        // One suite at a time per target directory: they share the daemon's data root.
        let lock = fs::File::create(cache().join("lock")).unwrap();
        // SAFETY: flock on a descriptor we own.
        let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(rc, 0, "flock: {}", std::io::Error::last_os_error());
        Hosts { _lock: lock, docker: None, nspawn: None, podman: None }
    }

    pub fn docker(&mut self) -> &mut Docker {
        started(&mut self.docker, Docker::start)
    }

    pub fn nspawn(&mut self) -> &mut Nspawn {
        started(&mut self.nspawn, Nspawn::boot)
    }

    pub fn podman(&mut self) -> &mut Podman {
        started(&mut self.podman, Podman::new)
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        // Teardown order: the booted container first (it is the heaviest), then the daemon.
        self.nspawn = None;
        self.podman = None;
        self.docker = None;
    }
}

/// target/hosts-cache: what is worth keeping between runs.
pub fn cache() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("hosts-cache")
}

pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The static lastcall this test run built.
pub fn lastcall() -> &'static Path {
    Path::new(crate::common::LASTCALL)
}

/// The commit `lastcall --version` names: what `docker info` must show.
pub fn lastcall_commit() -> String {
    let out = Command::new(lastcall()).arg("--version").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    text.trim().rsplit_once(" - git.").map(|(_, c)| c.to_string()).unwrap_or_else(|| panic!("{text}"))
}

/// A scratch directory for this run, removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        // Short, under /tmp: unix socket paths (dockerd's, containerd's) have a 108-byte limit.
        let dir = PathBuf::from(format!("/tmp/lc-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Runs `cmd` to the end, or kills it after `limit` and panics: a host that hangs must not
/// hang CI.
pub fn output(cmd: &mut Command, limit: Duration) -> Output {
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stdout.read_to_end(&mut v);
        v
    });
    let err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stderr.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} took more than {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output { status, stdout: out.join().unwrap(), stderr: err.join().unwrap() }
}

/// Runs `cmd`, asserts it succeeded, returns its stdout, trimmed.
pub fn ok(cmd: &mut Command, limit: Duration) -> String {
    let what = format!("{cmd:?}");
    let out = output(cmd, limit);
    assert!(
        out.status.success(),
        "{what}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

pub use crate::common::{alive, free_port, http_get, http_status, stop_process, wait_until};

/// The timeline lines of lastcall's log: each must appear exactly once.
pub fn assert_timeline_once(log: &str, entries: &[&str]) {
    for entry in entries {
        let n = log.lines().filter(|l| l.contains("lastcall: +") && l.contains(entry)).count();
        assert_eq!(n, 1, "timeline line '{entry}' {n} times in:\n{log}");
    }
}

/// A pid recorded in a file under the cache by an earlier run, if that process is still there
/// and is the program it should be: a run killed outright leaves its daemons behind.
pub fn stale_pid(file: &Path, comm: &str) -> Option<i32> {
    let pid: i32 = fs::read_to_string(file).ok()?.trim().parse().ok()?;
    let name = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    (name.trim() == comm && alive(pid)).then_some(pid)
}

/// The command starts in a session of its own: a Ctrl-C at the terminal running the tests must
/// not reach the daemons, which are torn down in order instead.
pub fn own_session(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        })
    };
}

/// Unmounts whatever is mounted at or below `dir` (deepest first).
pub fn unmount_below(dir: &Path) {
    let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut points: Vec<String> = mounts
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(str::to_string))
        .filter(|p| Path::new(p).starts_with(dir))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in points {
        let _ = Command::new("umount").arg("-l").arg(&p).status();
    }
}
