//! /proc, read in one place: the supervisor's walk of its descendants and process groups (with a
//! spare fd for when lastcall is out of them), and the notify relay's reads of a sender's stat
//! (parent pid, start time) and cgroup, into a caller's buffer without allocating.
//!
//! May import: sys (its listing of a directory of numbers).

use std::fs;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::unistd::Pid;

use crate::sys;

/// Whether /proc belongs to our PID namespace: a pid read from another namespace's /proc would
/// name some other process here.
pub fn proc_is_ours(me: Pid) -> bool {
    std::fs::read_link("/proc/self").is_ok_and(|p| p.as_os_str() == me.to_string().as_str())
}

/// How many fds lastcall has open, from one listing of /proc/self/fd; None without a /proc
/// that shows lastcall (the caller then asks fd by fd).
pub fn open_fd_count() -> Option<usize> {
    open_fds().map(|fds| fds.len())
}

/// lastcall's open fds, from one listing of /proc/self/fd; None without a /proc that shows
/// lastcall.
pub fn open_fds() -> Option<Vec<std::os::fd::RawFd>> {
    sys::numbered_entries(c"/proc/self/fd")
}

/// Whether a /proc read failed because the process is gone (and so has nothing to find).
pub fn is_gone(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ESRCH))
}

/// /proc reads that work when lastcall is out of file descriptors: a spare one, held from the
/// start, is given up for the read and taken again after. Without it a fork bomb or a flood of
/// connections that used up the fds would hide exactly the processes that must be killed.
pub struct ProcReader {
    spare: Option<std::fs::File>,
    /// The pids the last `children` or `list` found, kept to reuse the allocation.
    pub found: Vec<libc::pid_t>,
}

impl ProcReader {
    pub fn new() -> ProcReader {
        // "/" exists in every image, even one with no /dev; std opens it close-on-exec.
        ProcReader { spare: std::fs::File::open("/").ok(), found: Vec::new() }
    }

    fn with_fd<T>(&mut self, mut read: impl FnMut() -> std::io::Result<T>) -> std::io::Result<T> {
        match read() {
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) && self.spare.is_some() => {
                self.spare = None;
                let result = read();
                self.spare = std::fs::File::open("/").ok();
                result
            }
            result => result,
        }
    }

    /// The children of every thread of `pid`, into `found`.
    pub fn children(&mut self, pid: libc::pid_t) -> std::io::Result<()> {
        let task_dir = format!("/proc/{pid}/task");
        self.list(&task_dir)?;
        let tids = std::mem::take(&mut self.found);
        let mut kids = Vec::new();
        let mut result = Ok(());
        for tid in &tids {
            match self.with_fd(|| std::fs::read_to_string(format!("{task_dir}/{tid}/children"))) {
                Ok(text) => kids.extend(text.split_whitespace().filter_map(|p| p.parse::<libc::pid_t>().ok())),
                Err(e) if is_gone(&e) => {}
                Err(e) => result = Err(e),
            }
        }
        self.found = kids;
        result
    }

    /// The numeric entries of a /proc directory, into `found`.
    pub fn list(&mut self, dir: &str) -> std::io::Result<()> {
        let mut found = std::mem::take(&mut self.found);
        found.clear();
        let result = self.with_fd(|| {
            found.clear();
            for entry in std::fs::read_dir(dir)? {
                if let Some(pid) = entry?.file_name().to_str().and_then(|n| n.parse().ok()) {
                    found.push(pid);
                }
            }
            Ok(())
        });
        self.found = found;
        result
    }

    /// The process group in /proc/PID/stat (the third field after the command name).
    pub fn process_group(&mut self, pid: libc::pid_t) -> Option<libc::pid_t> {
        let stat = self.with_fd(|| std::fs::read_to_string(format!("/proc/{pid}/stat"))).ok()?;
        stat.rsplit_once(')')?.1.split_whitespace().nth(2)?.parse().ok()
    }
}

/// The parent pid and the start time in a /proc/PID/stat: the second and the twentieth field
/// after the command name, which may itself contain spaces and parentheses.
pub fn parent_and_start(stat: &[u8]) -> Option<(libc::pid_t, u64)> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let mut fields = stat[close + 1..].split(|&b| b == b' ').filter(|f| !f.is_empty());
    let parent = std::str::from_utf8(fields.nth(1)?).ok()?.parse().ok()?;
    let start = std::str::from_utf8(fields.nth(17)?).ok()?.parse().ok()?;
    Some((parent, start))
}

#[cfg(test)]
pub fn parent_of(stat: &[u8]) -> Option<libc::pid_t> {
    parent_and_start(stat).map(|(parent, _)| parent)
}

/// The cgroup v2 path from a /proc/PID/cgroup: the "0::" line.
pub fn unified_cgroup(text: &[u8]) -> Option<&[u8]> {
    text.split(|&b| b == b'\n').find_map(|line| line.strip_prefix(b"0::"))
}

/// /proc/PID/LEAF read into `buf`, without allocating: the path is built on the stack.
pub fn read_proc<'b>(pid: libc::pid_t, leaf: &str, buf: &'b mut [u8]) -> Option<&'b [u8]> {
    use std::io::Write;
    let mut path = [0u8; 64];
    let len = {
        let mut cursor = io::Cursor::new(&mut path[..]);
        write!(cursor, "/proc/{pid}/{leaf}").ok()?;
        cursor.position() as usize
    };
    let mut file = fs::File::open(Path::new(std::ffi::OsStr::from_bytes(&path[..len]))).ok()?;
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(&buf[..filled])
}
