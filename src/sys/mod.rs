//! The few calls that need `unsafe`: nix's safe wrappers take its `Signal` enum, which has no
//! real-time signals, and have no sigwaitinfo; musl's signal-set functions leave out 32-34;
//! the child runs in lastcall's memory until exec; and the sockets are set to raise a signal
//! (fcntl); and the ELF note that marks a binary as lastcall is placed in its own section. Calls
//! go through libc's wrappers, whose types follow each target's kernel ABI, except the four on
//! the hot paths (`direct`): no kernel struct is laid out here.
//!
//! Owns all of lastcall's `unsafe` code, by concern: `signal` (sets, the mask, dispositions,
//! waiting for and sending signals), `spawn` (the vfork-style child, up to its exec), `arena` (the
//! allocator), and here
//! the direct system call, the ELF note, fds, sockets, ids and processes.
//!
//! May import: signals.
#![allow(unsafe_code)]

mod arena;
mod signal_calls;
mod spawn;

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};

use nix::errno::Errno;
use nix::unistd::Pid;

use crate::signals::Sig;

pub use self::arena::Arena;
pub use self::signal_calls::{
    block_handled, default_standard_dispositions, die_by_signal, handled_set, inherited_mask, is_readiness, kill,
    pidfd_send_signal, set_signal_mask, signal_members, signal_set, socket_signal, take_dispositions, take_signal, SignalTarget, Taker,
    termination_pending, wait_for_signal, wait_for_signal_until,
};
pub use self::spawn::{spawn, ChildExitCodes, Detach, ExecPlan, Ids, StartFailure, PID_VARIABLES};

/// A system call made directly, for the hot paths: a signal's wait (rt_sigtimedwait) and
/// forward (kill, pidfd_send_signal), an orphan's reap (wait4). musl's wrappers for these are cancellation points
/// (sigtimedwait, waitpid) or go through errno (all three): most of a forwarded signal's
/// instructions, against a few here (docs/benchmark.md). `libc::syscall` is no way round: it is
/// variadic, with a cost of its own at every call. The `syscalls` crate holds the instruction
/// sequence of each architecture (upstream's, tested there); the numbers are libc's for the
/// target. Arguments are integers or pointers (as usize, sign-extended: a negative pid stays
/// negative in the kernel's int). Returns the kernel's result or its errno.
///
/// # Safety
/// The call must be one whose pointer arguments point to memory valid for what the kernel reads
/// and writes there.
#[inline(always)]
unsafe fn direct(number: libc::c_long, args: [usize; 4]) -> nix::Result<usize> {
    // SAFETY: the caller vouches for the memory behind the arguments; the number is libc's for
    // this target, so the kernel reads exactly the arguments given.
    let ret = unsafe { syscalls::raw::syscall4(number as usize, args[0], args[1], args[2], args[3]) };
    // The kernel returns -errno (-4095..-1) on failure.
    if ret > -4096isize as usize {
        Err(Errno::from_raw(-(ret as isize) as i32))
    } else {
        Ok(ret)
    }
}

/// A pid or signal number as a system-call argument: sign-extended, as the C ABI passes an int.
#[inline(always)]
fn arg(n: libc::c_int) -> usize {
    n as isize as usize
}

/// The ELF note by which an outer lastcall recognises its command as lastcall too (see
/// `inner_lastcall`): a PT_NOTE the kernel and the linker leave alone, found without running the binary.
#[repr(C, align(4))]
pub struct Note {
    pub namesz: u32,
    pub descsz: u32,
    pub kind: u32,
    pub name: [u8; 12],
    pub desc: [u8; 4],
}

// SAFETY: a plain read-only static in a section of its own; `.note.*` makes LLVM give it the
// SHT_NOTE type, which the linker keeps (notes are never garbage-collected) and maps in a PT_NOTE
// program header. Nothing reads it through the section name.
#[used]
#[link_section = ".note.lastcall"]
pub static NOTE: Note = Note {
    // "lastcall" and its NUL, as ELF spells a note's owner.
    namesz: 9,
    descsz: 4,
    // "LCNS": lastcall's note of nesting.
    kind: 0x4c43_4e53,
    name: *b"lastcall\0\0\0\0",
    // The marker's version.
    desc: *b"v1\0\0",
};

/// Whether `fd` is an open file descriptor.
pub fn fd_is_open(fd: RawFd) -> bool {
    // SAFETY: F_GETFD only reads the descriptor's flags; a closed one gives EBADF.
    unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
}

/// Whether `fd` is open without close-on-exec: one a child started now inherits.
pub fn fd_is_inherited(fd: RawFd) -> bool {
    // SAFETY: F_GETFD only reads the descriptor's flags; a closed one gives EBADF.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    flags >= 0 && flags & libc::FD_CLOEXEC == 0
}

extern "C" {
    /// The C library's environment: the `KEY=VALUE` strings lastcall was started with.
    static environ: *const *const libc::c_char;
}

/// lastcall's environment as the C library holds it, entry by entry, borrowed and not copied:
/// start-up reads a few names of it and hands the rest to the app as they are. An entry is
/// measured only when it is used whole: most are turned away by their first bytes.
pub fn environment() -> impl Iterator<Item = EnvEntry> {
    // SAFETY: `environ` is null or a null-terminated array of pointers to NUL-terminated strings
    // (the process's start-up block, or the C library's copy). lastcall never changes its own
    // environment (no setenv, putenv or std::env::set_var) and has one thread, so neither the
    // array nor the strings change or go away while it runs.
    let mut at = unsafe { environ };
    std::iter::from_fn(move || {
        if at.is_null() {
            return None;
        }
        // SAFETY: as above: `at` points into the array, whose end is a null entry.
        let entry = unsafe { *at };
        if entry.is_null() {
            return None;
        }
        // SAFETY: the next slot exists, since this one was not the terminating null.
        at = unsafe { at.add(1) };
        Some(EnvEntry(entry))
    })
}

/// The value of the variable `name` in lastcall's environment, borrowed: no lock, no copy, and
/// a scan that turns most entries away at their first byte (std's `var_os` does all three).
pub fn env_value(name: &str) -> Option<&'static std::ffi::OsStr> {
    use std::os::unix::ffi::OsStrExt;
    let entry = environment().find(|entry| entry.is_named(name.as_bytes()))?;
    entry.whole().to_bytes().get(name.len() + 1..).map(std::ffi::OsStr::from_bytes)
}

/// One `KEY=VALUE` entry of lastcall's environment, which lives as long as lastcall does
/// (`environment`).
#[derive(Clone, Copy)]
pub struct EnvEntry(*const libc::c_char);

impl EnvEntry {
    /// The entry's first bytes, at most `max`: as many as it has before its NUL.
    pub fn head(self, max: usize) -> &'static [u8] {
        let mut len = 0;
        // SAFETY: a NUL-terminated string (`environment`): reading stops at its NUL.
        while len < max && unsafe { *self.0.add(len) } != 0 {
            len += 1;
        }
        // SAFETY: the `len` bytes just read, which live as long as lastcall (`environment`).
        unsafe { std::slice::from_raw_parts(self.0.cast(), len) }
    }

    /// Whether the entry is `name=...`. Reads no further than the first byte that differs.
    pub fn is_named(self, name: &[u8]) -> bool {
        for (i, &expected) in name.iter().enumerate() {
            // SAFETY: every byte before `i` matched a byte of `name`, none of them a NUL, so `i`
            // is at most the entry's NUL (`environment`).
            if expected == 0 || unsafe { *self.0.add(i) } as u8 != expected {
                return false;
            }
        }
        // SAFETY: as above: all of `name` matched, so this is at most the entry's NUL.
        (unsafe { *self.0.add(name.len()) }) as u8 == b'='
    }

    /// The whole entry.
    pub fn whole(self) -> &'static std::ffi::CStr {
        // SAFETY: a NUL-terminated string that lives as long as lastcall (`environment`).
        unsafe { std::ffi::CStr::from_ptr(self.0) }
    }
}

/// The entries of directory `path` whose names are numbers (a /proc listing), the fd of the
/// listing itself left out; None if it cannot be read whole.
pub fn numbered_entries(path: &std::ffi::CStr) -> Option<Vec<RawFd>> {
    let mut fds = Vec::new();
    let mut listing = -1;
    let complete = each_entry(path, usize::MAX, |name, dir| {
        listing = dir;
        if let Some(fd) = std::str::from_utf8(name).ok().and_then(|d| d.parse::<RawFd>().ok()) {
            fds.push(fd);
        }
    });
    fds.retain(|&fd| fd != listing);
    complete.then_some(fds)
}

/// Calls `visit` with the name of each entry of directory `path` (and the fd of the listing),
/// at most `most` of them; whether the directory was read to its end. Read with getdents64 into
/// a buffer on the stack: std's `read_dir` goes through musl's opendir, whose malloc maps and
/// unmaps pages for it, on the start-up's path.
pub fn each_entry(path: &std::ffi::CStr, most: usize, mut visit: impl FnMut(&[u8], RawFd)) -> bool {
    // SAFETY: a NUL-terminated path and flags, by value; the fd returned is ours to close.
    let dir = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if dir < 0 {
        return false;
    }
    #[repr(C, align(8))]
    struct Buffer([u8; 2048]);
    let mut buffer = Buffer([0; 2048]);
    let mut left = most;
    let complete = 'listing: loop {
        // SAFETY: getdents64 writes at most the buffer's length into the buffer we own.
        let n = unsafe { libc::syscall(libc::SYS_getdents64, dir, buffer.0.as_mut_ptr(), buffer.0.len()) };
        let Ok(n) = usize::try_from(n) else { break false };
        if n == 0 {
            break true;
        }
        let records = &buffer.0[..n.min(buffer.0.len())];
        let mut at = 0;
        // Each record: d_ino (8 bytes), d_off (8), d_reclen (2), d_type (1), the name, NUL.
        while let Some(record) = records.get(at..) {
            let Some(&[low, high]) = record.get(16..18) else { break };
            let length = usize::from(u16::from_ne_bytes([low, high]));
            // A record shorter than its header ends the listing (19..length is then no range: None).
            let Some(name) = record.get(19..length) else { break };
            if left == 0 {
                break 'listing false;
            }
            left -= 1;
            visit(name.split(|&b| b == 0).next().unwrap_or_default(), dir);
            at += length;
        }
    };
    // SAFETY: the fd opened above, closed once.
    unsafe { libc::close(dir) };
    complete
}

/// `path` opened for reading, None if it does not exist. The open does not block (a FIFO with
/// no writer, a device), and anything but a regular file is refused before a byte is read.
pub fn open_regular(path: &std::path::Path) -> io::Result<Option<std::fs::File>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
    }
    Ok(Some(file))
}

/// Takes `file`'s exclusive flock without waiting; whether it was free. The lock lasts until
/// the file's last close.
pub fn lock_exclusive_now(file: &std::fs::File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on an fd the caller owns, with flags by value.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// The soft limit on open fds.
pub fn fd_limit() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        // rlim_t is 32 bits on some targets.
        #[allow(clippy::unnecessary_cast)]
        let soft = limit.rlim_cur as u64;
        soft
    } else {
        1024
    }
}

/// Closes `fd`, which lastcall no longer needs and nothing of lastcall's owns.
pub fn close_fd(fd: RawFd) -> nix::Result<()> {
    // SAFETY: the caller passes an fd that no Rust object owns (one lastcall inherited).
    Errno::result(unsafe { libc::close(fd) }).map(drop)
}

/// The foreground process group of the terminal on stdin, if stdin is lastcall's controlling
/// terminal (tcgetpgrp; one system call, and no std stdin, whose first use allocates a buffer).
pub fn stdin_foreground_group() -> Option<libc::pid_t> {
    // SAFETY: tcgetpgrp takes an fd by value; on anything but a controlling terminal it fails.
    let group = unsafe { libc::tcgetpgrp(libc::STDIN_FILENO) };
    (group > 0).then_some(group)
}

/// Gives up lastcall's controlling terminal (TIOCNOTTY on stdin), so that the child, in a new
/// session, can make it its own: a terminal belongs to one session at a time. As the session
/// leader lastcall makes the kernel send SIGHUP and SIGCONT to the terminal's foreground group,
/// which is lastcall's alone at this point.
pub fn release_terminal() -> io::Result<()> {
    // SAFETY: TIOCNOTTY takes no argument.
    if unsafe { libc::ioctl(libc::STDIN_FILENO, libc::TIOCNOTTY) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Asks the kernel to send lastcall `sig` when its parent dies (tini's -p). Real-time signals
/// are allowed, which nix's wrapper cannot express.
pub fn set_parent_death_signal(sig: Sig) -> io::Result<()> {
    // SAFETY: PR_SET_PDEATHSIG takes a signal number by value.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, sig.0 as libc::c_ulong, 0, 0, 0) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// waitpid(-1, WNOHANG): the pid and raw status of a child that has exited, or None if every
/// child is still running.
#[inline(always)]
pub fn wait_any_exited() -> nix::Result<Option<(Pid, libc::c_int)>> {
    let mut status: libc::c_int = 0;
    let status_ptr = &mut status as *mut libc::c_int as usize;
    // SAFETY: wait4 writes the status into the int we own; no rusage is asked for (null).
    let pid = unsafe { direct(libc::SYS_wait4, [arg(-1), status_ptr, arg(libc::WNOHANG), 0]) }? as libc::pid_t;
    Ok((pid != 0).then(|| (Pid::from_raw(pid), status)))
}

/// fcntl's F_SETSIG (linux/fcntl.h: 10 on x86, arm and their 64-bit kin), which the libc crate
/// leaves out for musl.
const F_SETSIG: libc::c_int = 10;

/// Which of `fds` are readable, hung up or in error right now (each entry's `revents`): poll
/// with a zero timeout, a look rather than a wait.
pub fn ready_now(fds: &mut [libc::pollfd]) -> io::Result<()> {
    // SAFETY: poll reads and writes exactly fds.len() entries of the slice we borrow mutably;
    // with a zero timeout it returns at once.
    if unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Asks the kernel to send lastcall (`owner`) the socket signal whenever `fd` becomes readable
/// (O_ASYNC, F_SETOWN, F_SETSIG), unless that is already set. True if it was new: what arrived
/// before then raised no signal and must be read now.
pub fn signal_when_readable(fd: BorrowedFd<'_>, owner: Pid) -> io::Result<bool> {
    let fd = fd.as_raw_fd();
    // SAFETY: fcntl with integer arguments on an fd the caller borrows; no memory is passed.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        if flags & libc::O_ASYNC != 0 {
            return Ok(false);
        }
        if libc::fcntl(fd, libc::F_SETOWN, owner.as_raw()) < 0
            || libc::fcntl(fd, F_SETSIG, socket_signal().0) < 0
            || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_ASYNC) < 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(true)
}

/// A pidfd for `pid` (pidfd_open, Linux 5.3): a handle that keeps naming that very process, so
/// a signal sent through it can never reach another process that got the pid after it.
/// ENOSYS on older kernels (and under some seccomp filters: EPERM).
pub fn pidfd_open(pid: libc::pid_t) -> nix::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags by value and returns a new fd or -1.
    let fd = Errno::result(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0 as libc::c_uint) })?;
    // SAFETY: the kernel just gave us this fd (close-on-exec, as every pidfd is); we own it.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as RawFd) })
}

/// CLOCK_MONOTONIC in nanoseconds: the clock `Instant` reads, as a number the app can read too
/// (Python's `time.monotonic_ns()`, Java's `System.nanoTime()`, Node's `process.hrtime`).
pub fn monotonic_ns() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).unwrap_or(nix::sys::time::TimeSpec::new(0, 0));
    let (secs, nanos) = (u64::try_from(t.tv_sec()).unwrap_or(0), u64::try_from(t.tv_nsec()).unwrap_or(0));
    secs.saturating_mul(1_000_000_000).saturating_add(nanos)
}

/// lastcall's effective uid and gid: whom the files it makes belong to.
pub fn effective_ids() -> (u32, u32) {
    // SAFETY: geteuid and getegid take nothing and cannot fail.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// Whether lastcall already runs as `uid` and `gid`, real and effective alike.
pub fn runs_as(uid: u32, gid: u32) -> bool {
    // SAFETY: these four calls take nothing and cannot fail.
    unsafe { libc::getuid() == uid && libc::geteuid() == uid && libc::getgid() == gid && libc::getegid() == gid }
}

/// lastcall's supplementary groups (at most 65536, the kernel's NGROUPS_MAX).
pub fn supplementary_groups() -> Vec<u32> {
    let mut groups = vec![0 as libc::gid_t; 65536];
    // SAFETY: getgroups writes at most `len` gids into the buffer we own.
    let n = unsafe { libc::getgroups(groups.len() as libc::c_int, groups.as_mut_ptr()) };
    groups.truncate(usize::try_from(n).unwrap_or(0));
    groups
}

/// Runs `work` in a forked child and hands back its pid and the read end of a pipe carrying
/// what `work` returned: for work that may block past a deadline of the caller's (a DNS query
/// to a silent server), which the caller can abandon and kill instead of waiting for it, with
/// no thread. Only for a process with one thread, as the probe is: fork copies just the caller.
pub fn fork_with_pipe(work: impl FnOnce() -> Vec<u8>) -> io::Result<(libc::pid_t, std::fs::File)> {
    let (read, write) = nix::unistd::pipe()?;
    // SAFETY: the calling process has one thread (the probe's), so the child may allocate and
    // run any code: no lock can be held by a thread that fork left behind.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            drop(read);
            let mut out = std::fs::File::from(write);
            let code = match std::io::Write::write_all(&mut out, &work()) {
                Ok(()) => 0,
                Err(_) => 1,
            };
            // SAFETY: _exit ends the child without running the parent's exit handlers twice.
            unsafe { libc::_exit(code) }
        }
        pid => Ok((pid, std::fs::File::from(read))),
    }
}

/// 64 bits from the kernel's CSPRNG, for names a local attacker must not predict.
pub fn random_u64() -> io::Result<u64> {
    let mut bytes = [0u8; 8];
    let mut filled = 0;
    while filled < bytes.len() {
        // SAFETY: getrandom writes at most the given length into the buffer we own.
        let n = unsafe { libc::getrandom(bytes[filled..].as_mut_ptr().cast(), bytes.len() - filled, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        } else {
            filled += n as usize;
        }
    }
    Ok(u64::from_ne_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_entries_are_read_only_as_far_as_needed() {
        let entry = EnvEntry(c"NOTIFY_SOCKET=/run/x".as_ptr());
        assert_eq!(entry.head(6), b"NOTIFY");
        assert_eq!(entry.head(100), b"NOTIFY_SOCKET=/run/x");
        assert!(entry.is_named(b"NOTIFY_SOCKET"));
        assert!(!entry.is_named(b"NOTIFY"));
        assert!(!entry.is_named(b"NOTIFY_SOCKET=/run/x/longer"));
        assert!(!entry.is_named(b"NOTIFY_SOCKET\0"));
        assert!(!EnvEntry(c"A".as_ptr()).is_named(b"A"));
        assert_eq!(entry.whole(), c"NOTIFY_SOCKET=/run/x");
    }

    #[test]
    fn a_pidfd_signals_its_process_and_no_other() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id() as libc::pid_t;
        let fd = match pidfd_open(pid) {
            Ok(fd) => fd,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                // A skip, said as one, only where the kernel predates pidfd_open (5.3): on a
                // newer kernel ENOSYS is a failure like any other.
                let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
                let mut numbers = release.trim().split(|c: char| !c.is_ascii_digit()).map(|n| n.parse::<u32>().unwrap_or(0));
                let version = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
                assert!(e == Errno::ENOSYS && version < (5, 3), "pidfd_open on kernel {}: {e}", release.trim());
                eprintln!("SKIPPED a_pidfd_signals_its_process_and_no_other: kernel {} has no pidfd_open", release.trim());
                return;
            }
        };
        assert_eq!(pidfd_send_signal(std::os::fd::AsFd::as_fd(&fd), Sig(0)), Ok(()));
        assert_eq!(pidfd_send_signal(std::os::fd::AsFd::as_fd(&fd), Sig::KILL), Ok(()));
        child.wait().unwrap();
        // Reaped: whatever has the pid now, the pidfd does not name it.
        assert_eq!(pidfd_send_signal(std::os::fd::AsFd::as_fd(&fd), Sig(0)), Err(Errno::ESRCH));
    }
}
