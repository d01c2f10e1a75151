//! /proc, read in one place, with its one stat parser and its one cgroup-line parser: the
//! supervisor's walk of its descendants and process groups (with a spare fd for when lastcall is
//! out of them), lastcall's own fds and cgroups, and the notify relay's reads of a sender's
//! stat (parent pid, start time) and cgroup, into a caller's buffer without allocating.
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

    /// The process group in /proc/PID/stat.
    pub fn process_group(&mut self, pid: libc::pid_t) -> Option<libc::pid_t> {
        let stat = self.with_fd(|| std::fs::read_to_string(format!("/proc/{pid}/stat"))).ok()?;
        process_group_in(stat.as_bytes())
    }
}

/// Whether lastcall can read /proc about itself at all (when a read about another process
/// failed, this tells "gone" from "no /proc").
pub fn shows_self() -> bool {
    fs::metadata("/proc/self/stat").is_ok()
}

/// `pid`'s parent and start time, from its /proc/PID/stat read into `buf`.
pub fn parent_and_start(pid: libc::pid_t, buf: &mut [u8]) -> Option<(libc::pid_t, u64)> {
    read_proc(pid, "stat", buf).and_then(parent_and_start_in)
}

/// `pid`'s cgroup v2 path, from its /proc/PID/cgroup read into `buf`.
pub fn unified_cgroup(pid: libc::pid_t, buf: &mut [u8]) -> Option<&[u8]> {
    read_proc(pid, "cgroup", buf).and_then(unified_path)
}

/// lastcall's own /proc/self/cgroup, handed to `read`. Into a buffer on the stack:
/// read_to_string asks for the file's size and position first (two more system calls, on the
/// start-up's path), and /proc says 0. A longer file (deep paths in many hierarchies) is read on
/// as a whole.
pub fn own_cgroups<T>(read: impl FnOnce(&[u8]) -> Option<T>) -> Option<T> {
    let mut buffer = [0u8; 4096];
    let mut file = fs::File::open("/proc/self/cgroup").ok()?;
    let filled = fill(&mut file, &mut buffer)?;
    if filled < buffer.len() {
        return read(&buffer[..filled]);
    }
    let mut all = buffer.to_vec();
    file.read_to_end(&mut all).ok()?;
    read(&all)
}

/// The fields of a /proc/PID/stat after the command name, which may itself contain spaces and
/// parentheses: the state first.
fn stat_fields(stat: &[u8]) -> Option<impl Iterator<Item = &[u8]>> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    Some(stat[close + 1..].split(|b| b.is_ascii_whitespace()).filter(|f| !f.is_empty()))
}

fn number<T: std::str::FromStr>(field: &[u8]) -> Option<T> {
    std::str::from_utf8(field).ok()?.parse().ok()
}

/// The parent pid and the start time in a /proc/PID/stat: the second and the twentieth field
/// after the command name.
fn parent_and_start_in(stat: &[u8]) -> Option<(libc::pid_t, u64)> {
    let mut fields = stat_fields(stat)?;
    let parent = number(fields.nth(1)?)?;
    let start = number(fields.nth(17)?)?;
    Some((parent, start))
}

/// The process group in a /proc/PID/stat: the third field after the command name.
fn process_group_in(stat: &[u8]) -> Option<libc::pid_t> {
    number(stat_fields(stat)?.nth(2)?)
}

/// One line of a /proc/PID/cgroup: `hierarchy:controllers:path`.
pub struct CgroupLine<'t> {
    pub controllers: &'t [u8],
    pub path: &'t [u8],
    /// Whether it is the cgroup v2 tree's line (`0::`).
    pub unified: bool,
}

/// The lines of a /proc/PID/cgroup; a line without its two colons is left out.
pub fn cgroup_lines(text: &[u8]) -> impl Iterator<Item = CgroupLine<'_>> {
    text.split(|&b| b == b'\n').filter_map(|line| {
        let mut parts = line.splitn(3, |&b| b == b':');
        let (hierarchy, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        Some(CgroupLine { controllers, path, unified: hierarchy == b"0" && controllers.is_empty() })
    })
}

/// The cgroup v2 path in a /proc/PID/cgroup's text.
pub fn unified_path(text: &[u8]) -> Option<&[u8]> {
    cgroup_lines(text).find_map(|line| line.unified.then_some(line.path))
}

/// /proc/PID/LEAF read into `buf`, without allocating: the path is built on the stack.
fn read_proc<'b>(pid: libc::pid_t, leaf: &str, buf: &'b mut [u8]) -> Option<&'b [u8]> {
    use std::io::Write;
    let mut path = [0u8; 64];
    let len = {
        let mut cursor = io::Cursor::new(&mut path[..]);
        write!(cursor, "/proc/{pid}/{leaf}").ok()?;
        cursor.position() as usize
    };
    let mut file = fs::File::open(Path::new(std::ffi::OsStr::from_bytes(&path[..len]))).ok()?;
    let filled = fill(&mut file, buf)?;
    Some(&buf[..filled])
}

/// The kernel's limit on a process's supplementary groups, if /proc says it. Opened without
/// waiting and read only if it is a regular file, as every file `--user` reads.
pub fn ngroups_max() -> Option<usize> {
    let mut file = sys::open_regular(Path::new("/proc/sys/kernel/ngroups_max")).ok()??;
    let mut buf = [0u8; 32];
    let filled = fill(&mut file, &mut buf)?;
    std::str::from_utf8(&buf[..filled]).ok()?.trim().parse().ok()
}

/// Reads `file` into `buf` until its end or the buffer's; how much it read.
fn fill(file: &mut fs::File, buf: &mut [u8]) -> Option<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_parsing() {
        let tail = "42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 1000 100";
        assert_eq!(parent_and_start_in(format!("42 (a) b) c) S 7 {tail}").as_bytes()), Some((7, 987654)));
        assert_eq!(parent_and_start_in(format!("42 (sh) S 1 {tail}\n").as_bytes()).map(|(p, _)| p), Some(1));
        assert_eq!(parent_and_start_in(b"42 (sh) S 1 42"), None, "no start time");
        assert_eq!(parent_and_start_in(b"garbage"), None);
        assert_eq!(process_group_in(format!("42 (a) b) S 7 40 {tail}\n").as_bytes()), Some(40));
        assert_eq!(process_group_in(b"42 (sh) S 1"), None);
    }

    #[test]
    fn cgroup_parsing() {
        let cgroup = b"1:cpu:/x\n0::/system.slice/app.service\n";
        assert_eq!(unified_path(cgroup), Some(&b"/system.slice/app.service"[..]));
        assert_eq!(unified_path(b"4:memory:/docker/abc\n"), None);
        let lines: Vec<_> = cgroup_lines(b"9:name=systemd:/a:b\n\ngarbage\n0::/\n").collect();
        assert_eq!(lines.len(), 2);
        assert_eq!((lines[0].controllers, lines[0].path, lines[0].unified), (&b"name=systemd"[..], &b"/a:b"[..], false));
        assert_eq!((lines[1].controllers, lines[1].path, lines[1].unified), (&b""[..], &b"/"[..], true));
    }

    #[test]
    fn the_groups_limit_is_read() {
        assert!(ngroups_max().is_some_and(|n| n > 0));
    }

    #[test]
    fn our_own_entries() {
        // Our parent's process group, not our own: qemu-user (the foreign architectures' unit
        // tests) makes up its process's /proc/self/stat, with a group of 0. No child is spawned:
        // a fork from a threaded guest can hang under qemu-user.
        let me = std::process::id() as libc::pid_t;
        let parent = nix::unistd::getppid();
        let buf = &mut [0u8; 4096];
        assert_eq!(parent_and_start(me, buf).map(|(parent, _)| parent), Some(parent.as_raw()));
        assert_eq!(ProcReader::new().process_group(parent.as_raw()), nix::unistd::getpgid(Some(parent)).ok().map(|g| g.as_raw()));
        assert!(shows_self());
        assert!(own_cgroups(|text| Some(text.len())).is_some());
    }
}
