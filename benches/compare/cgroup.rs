//! The benchmark's own cgroup: the contenders run in one, as containers and services do.
//!
//! In the root cgroup, the kernel's autogroup gives every session a scheduling group of its own,
//! so which session an app lives in (`--setsid`, `-c`, the harness's) decides who preempts whom
//! on a shared core, and with it the latency figures. Inside any cgroup other than the root,
//! autogroup plays no part. What decides is the cgroup of the CPU controller: cgroup v2's where it
//! has the controller, else v1's `cpu` hierarchy (a hybrid host's, as Docker's cgroupfs driver
//! uses it).
//!
//! The harness moves *itself* in, once, at the start, and every contender it spawns inherits the
//! place. Moving each contender instead (its pid into cgroup.procs before exec) is a cgroup
//! migration per spawn, which took 0.4 ms at the median and up to 10 ms here: more than the
//! start-up figure it would land in. So the sender shares the contenders' group too, in which
//! every task is scheduled alike whatever its session. Memory and the other controllers are left
//! where they are.
//!
//! The cgroup is made under the harness's own (the root on a plain host), named after the
//! harness's pid, and removed at the end: on drop, on a panic (the bench profile aborts, so
//! through the panic hook), and at SIGINT, SIGTERM or SIGHUP (a handler).
//! Nothing it did not create is removed; the one setting of the system it may change, the cpu
//! controller in the v2 root's subtree_control, it changes back.
//!
//! May import: nothing of the benchmark's own.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Where the harness runs, as the report header says it.
pub enum Placement {
    Own(Guard),
    /// Why not: the contenders then run where the harness was started.
    None(String),
}

impl Placement {
    pub fn describe(&self) -> String {
        match self {
            Placement::Own(guard) => format!("contenders in a cgroup of their own, {} ({})", guard.dir.display(), guard.kind),
            Placement::None(why) => format!("**no cgroup of their own** ({why}): contenders ran where the harness was started"),
        }
    }
}

/// Removes the cgroup when dropped.
pub struct Guard {
    dir: PathBuf,
    kind: &'static str,
}

impl Drop for Guard {
    fn drop(&mut self) {
        leave();
    }
}

/// What `leave` undoes: the cgroup, the cgroup.procs file the harness came from, and a
/// subtree_control file to write "-cpu" to.
struct Made {
    dir: PathBuf,
    home: PathBuf,
    enabled: Option<PathBuf>,
}

static MADE: Mutex<Option<Made>> = Mutex::new(None);

/// Makes the cgroup and moves the harness into it; None with the reason when it cannot.
pub fn enter() -> Placement {
    match try_enter() {
        Ok(guard) => Placement::Own(guard),
        Err(why) => Placement::None(why),
    }
}

fn try_enter() -> Result<Guard, String> {
    let (mount, own, v2) = cpu_hierarchy().ok_or("no cgroup hierarchy with the cpu controller is mounted")?;
    let parent = mount.join(own.trim_start_matches('/'));
    let mut enabled = None;
    if v2 {
        let control = parent.join("cgroup.subtree_control");
        let on = fs::read_to_string(&control).map_err(|e| format!("{}: {e}", control.display()))?;
        if !on.split_whitespace().any(|c| c == "cpu") {
            fs::write(&control, "+cpu").map_err(|e| format!("cannot enable the cpu controller in {}: {e}", control.display()))?;
            enabled = Some(control);
        }
    }
    let dir = parent.join(format!("lastcall-bench-{}", std::process::id()));
    let undo_enable = |enabled: &Option<PathBuf>| {
        if let Some(control) = enabled {
            let _ = fs::write(control, "-cpu");
        }
    };
    if let Err(e) = fs::create_dir(&dir) {
        undo_enable(&enabled);
        return Err(format!("cannot create {}: {e}", dir.display()));
    }
    *MADE.lock().unwrap() = Some(Made { dir: dir.clone(), home: parent.join("cgroup.procs"), enabled });
    watch_for_the_end();
    if let Err(e) = fs::write(dir.join("cgroup.procs"), std::process::id().to_string()) {
        leave();
        return Err(format!("cannot move into {}: {e}", dir.display()));
    }
    Ok(Guard { dir, kind: if v2 { "cgroup v2" } else { "cgroup v1, cpu" } })
}

/// The mount point of the hierarchy that holds the cpu controller, the harness's path in it, and
/// whether it is cgroup v2.
fn cpu_hierarchy() -> Option<(PathBuf, String, bool)> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let own = fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut v1 = None;
    for line in mountinfo.lines() {
        let Some((head, tail)) = line.split_once(" - ") else { continue };
        let Some(point) = head.split_whitespace().nth(4) else { continue };
        let mut tail = tail.split_whitespace();
        let (kind, options) = (tail.next()?, tail.nth(1).unwrap_or(""));
        if kind == "cgroup2" && fs::read_to_string(Path::new(point).join("cgroup.controllers")).is_ok_and(|c| c.split_whitespace().any(|c| c == "cpu")) {
            let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
            return Some((PathBuf::from(point), path.to_string(), true));
        }
        if kind == "cgroup" && options.split(',').any(|o| o == "cpu") {
            let path = own.lines().find_map(|l| {
                let mut parts = l.splitn(3, ':');
                let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                controllers.split(',').any(|c| c == "cpu").then(|| path.to_string())
            })?;
            v1 = Some((PathBuf::from(point), path, false));
        }
    }
    v1
}

/// Moves the harness back, ends whatever of its own is still inside (contenders the run did not
/// get to end), removes the cgroup and undoes the controller's enabling. Once; safe from any
/// thread.
pub fn leave() {
    let Some(made) = MADE.lock().ok().and_then(|mut m| m.take()) else { return };
    let _ = fs::write(&made.home, std::process::id().to_string());
    for _ in 0..200 {
        let procs = fs::read_to_string(made.dir.join("cgroup.procs")).unwrap_or_default();
        let pids: Vec<i32> = procs.split_whitespace().filter_map(|p| p.parse().ok()).collect();
        if pids.is_empty() && fs::remove_dir(&made.dir).is_ok() {
            break;
        }
        for pid in pids {
            // SAFETY: kill takes plain integers; every process in this cgroup is the harness's.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    if made.dir.exists() {
        eprintln!("could not remove {}", made.dir.display());
    }
    if let Some(control) = made.enabled {
        let _ = fs::write(control, "-cpu");
    }
}

/// The cgroup goes at ctrl-C too, and at a panic. Not by blocking the signals for a thread to
/// wait for: a blocked mask is inherited, and one peer passed it on to the app, which then never
/// saw its SIGTERM. A handler instead, which does `leave`'s work with async-signal-safe calls
/// only, on paths made here; and a panic hook that runs `leave` before the default one.
fn watch_for_the_end() {
    let Some(made) = MADE.lock().ok().and_then(|m| m.as_ref().map(|m| (m.dir.clone(), m.home.clone(), m.enabled.clone()))) else { return };
    let c = |p: PathBuf| std::ffi::CString::new(p.into_os_string().into_encoded_bytes()).ok();
    let paths = (c(made.0.join("cgroup.procs")), c(made.1), c(made.0), made.2.and_then(c));
    if let (Some(procs), Some(home), Some(dir), enabled) = paths {
        let _ = RAW.set(Raw { procs, home, dir, enabled });
    }
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only makes async-signal-safe calls on data set before this.
        unsafe { libc::signal(sig, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t) };
    }
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        leave();
        default(info);
    }));
}

/// `leave`'s paths, ready for the signal handler.
struct Raw {
    procs: std::ffi::CString,
    home: std::ffi::CString,
    dir: std::ffi::CString,
    enabled: Option<std::ffi::CString>,
}

static RAW: std::sync::OnceLock<Raw> = std::sync::OnceLock::new();

extern "C" fn on_signal(sig: libc::c_int) {
    if let Some(raw) = RAW.get() {
        // SAFETY: open, read, write, close, kill, rmdir, nanosleep and _exit are async-signal-safe;
        // every buffer is on this stack or was set before the handler was installed.
        unsafe {
            let write_to = |path: &std::ffi::CStr, text: &[u8]| {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY);
                if fd >= 0 {
                    libc::write(fd, text.as_ptr().cast(), text.len());
                    libc::close(fd);
                }
            };
            write_to(&raw.home, b"0");
            for _ in 0..100 {
                if libc::rmdir(raw.dir.as_ptr()) == 0 {
                    break;
                }
                let mut buf = [0u8; 4096];
                let fd = libc::open(raw.procs.as_ptr(), libc::O_RDONLY);
                let n = if fd >= 0 { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) } else { -1 };
                if fd >= 0 {
                    libc::close(fd);
                }
                let mut pid: i32 = 0;
                for &b in buf.iter().take(n.max(0) as usize) {
                    if b.is_ascii_digit() {
                        pid = pid.saturating_mul(10).saturating_add(i32::from(b - b'0'));
                    } else {
                        if pid > 0 {
                            libc::kill(pid, libc::SIGKILL);
                        }
                        pid = 0;
                    }
                }
                let pause = libc::timespec { tv_sec: 0, tv_nsec: 10_000_000 };
                libc::nanosleep(&pause, std::ptr::null_mut());
            }
            if let Some(enabled) = &raw.enabled {
                write_to(enabled, b"-cpu");
            }
            libc::_exit(128 + sig);
        }
    }
    // SAFETY: _exit is async-signal-safe.
    unsafe { libc::_exit(128 + sig) };
}
