//! The few calls that need `unsafe`: nix's safe wrappers take its `Signal` enum, which has no
//! real-time signals, and have no sigwaitinfo; fork-to-exec must run on memory prepared before
//! the fork; and the signalfd is read in batches into an uninitialised buffer.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd};

use nix::errno::Errno;
use nix::sys::signal::SigSet;
use nix::unistd::Pid;

use crate::signals::Sig;

/// Sends `sig` to `pid` (a process), `-pgid` (a group) or -1 (everyone we may signal).
/// The error is a plain errno, not an `io::Error`, which would need dropping on the signal path.
#[inline(always)]
pub fn kill(pid: libc::pid_t, sig: Sig) -> nix::Result<()> {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    unsafe { raw_syscall(libc::SYS_kill, pid as usize, sig.0 as usize, 0, 0) }.map(drop)
}

/// A system call made directly, for the ones on the signal and reaping paths (rt_sigtimedwait,
/// kill, wait4). musl's wrappers, with errno and the cancellation-point machinery lastcall never
/// uses, live elsewhere in the binary, and calling out to them cost more time than the rest of
/// the path (README, Performance). Unused arguments are 0.
///
/// # Safety
/// As for the system call itself: any pointer passed must be valid for what it does with it.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn raw_syscall(number: libc::c_long, a: usize, b: usize, c: usize, d: usize) -> nix::Result<usize> {
    let ret: isize;
    // SAFETY: the x86_64 Linux system call convention: number and result in rax, arguments in
    // rdi, rsi, rdx, r10; the kernel clobbers rcx and r11 and leaves the stack alone.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") number as isize => ret,
            in("rdi") a, in("rsi") b, in("rdx") c, in("r10") d,
            lateout("rcx") _, lateout("r11") _,
            options(nostack, preserves_flags),
        );
    }
    if (-4095..0).contains(&ret) {
        Err(Errno::from_raw(-ret as i32))
    } else {
        Ok(ret as usize)
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn raw_syscall(number: libc::c_long, a: usize, b: usize, c: usize, d: usize) -> nix::Result<usize> {
    // SAFETY: as the caller vouches.
    let ret = unsafe { libc::syscall(number, a, b, c, d) };
    if ret < 0 {
        Err(Errno::last())
    } else {
        Ok(ret as usize)
    }
}

/// Puts every signal back to its default action. A parent may have left some ignored (nohup,
/// a shell's background job), and children inherit ignored signals across exec; an ignored
/// SIGCHLD would even make the kernel reap our children before we can read their status.
/// Signals are all blocked by now, so nothing is delivered while this runs.
pub fn reset_dispositions() {
    for sig in 1..=64 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        if (32..=34).contains(&sig) {
            // musl's sigaction refuses the signals it reserves for itself, but a glibc child
            // uses 32 and 33 for its own threads, so an inherited SIG_IGN there must go too.
            // lastcall has no threads or timers, so musl has no handler on them to lose.
            let default = KernelSigaction { handler: libc::SIG_DFL, flags: 0, restorer: 0, mask: 0 };
            // SAFETY: rt_sigaction reads a sigaction laid out as the kernel expects (x86_64,
            // 8-byte mask) from our stack; SIG_DFL installs no handler.
            unsafe {
                libc::syscall(libc::SYS_rt_sigaction, sig, &default, std::ptr::null_mut::<KernelSigaction>(), 8usize)
            };
            continue;
        }
        // SAFETY: SIG_DFL installs no handler, so no code of ours can run on a signal.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
}

/// The kernel's struct sigaction, which differs from libc's.
#[repr(C)]
struct KernelSigaction {
    handler: libc::sighandler_t,
    flags: libc::c_ulong,
    restorer: usize,
    mask: u64,
}

/// How the child is detached from lastcall.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detach {
    /// Its own process group (setpgid), in lastcall's session.
    Group,
    /// Its own session (setsid), dumb-init's default, taking the terminal as its controlling one.
    Session,
}

/// Everything the child needs, prepared before the fork so that the child allocates nothing.
pub struct ExecPlan {
    argv: Vec<CString>,
    envp: Vec<Vec<u8>>,
    /// Index into `envp` of a `LISTEN_PID=` entry whose digits the child fills in with its pid.
    listen_pid_slot: Option<usize>,
    detach: Detach,
    take_terminal: bool,
}

const LISTEN_PID_PREFIX: &[u8] = b"LISTEN_PID=";

impl ExecPlan {
    /// With `name_listen_pid`, the child's `LISTEN_PID=` entry is rewritten to its own pid.
    pub fn new(argv: Vec<CString>, env: Vec<CString>, detach: Detach, take_terminal: bool, name_listen_pid: bool) -> ExecPlan {
        let mut envp: Vec<Vec<u8>> = env.into_iter().map(CString::into_bytes_with_nul).collect();
        let listen_pid_slot =
            if name_listen_pid { envp.iter().position(|e| e.starts_with(LISTEN_PID_PREFIX)) } else { None };
        if let Some(i) = listen_pid_slot {
            // Room for any pid and the NUL, written by the child.
            envp[i] = [LISTEN_PID_PREFIX, &[0u8; 12]].concat();
        }
        ExecPlan { argv, envp, listen_pid_slot, detach, take_terminal }
    }
}

/// fork, set the child up, exec; exec failures come back over a close-on-exec pipe, as the
/// errno the child could not get past. Between fork and exec the child makes only
/// async-signal-safe calls on memory prepared here (musl's execvpe searches PATH on the stack).
pub fn fork_exec(plan: &mut ExecPlan) -> io::Result<libc::pid_t> {
    let argv: Vec<*const libc::c_char> =
        plan.argv.iter().map(|a| a.as_ptr()).chain(std::iter::once(std::ptr::null())).collect();
    let mut pipe = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two fds into the array we own.
    if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let slot_ptr: Option<*mut u8> = plan.listen_pid_slot.map(|i| plan.envp[i].as_mut_ptr());
    let envp: Vec<*const libc::c_char> =
        plan.envp.iter().map(|e| e.as_ptr().cast()).chain(std::iter::once(std::ptr::null())).collect();
    let (detach, take_terminal) = (plan.detach, plan.take_terminal);

    // SAFETY: lastcall is single-threaded, so the child is a full copy with no lock held by
    // another thread; it runs only the async-signal-safe code below and then execs or exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        let err = io::Error::last_os_error();
        // SAFETY: closing the fds we just created.
        unsafe {
            libc::close(pipe[0]);
            libc::close(pipe[1]);
        }
        return Err(err);
    }
    if pid == 0 {
        // SAFETY: in the child: plain syscalls on our own stack and on buffers prepared before
        // the fork (this process has its own copy of them).
        unsafe {
            let me = libc::getpid();
            match detach {
                Detach::Group => {
                    libc::setpgid(0, 0);
                }
                Detach::Session => {
                    libc::setsid();
                }
            }
            if take_terminal {
                let mut ttou: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut ttou);
                libc::sigaddset(&mut ttou, libc::SIGTTOU);
                libc::sigprocmask(libc::SIG_BLOCK, &ttou, std::ptr::null_mut());
                match detach {
                    // A background group taking the foreground gets SIGTTOU, blocked here.
                    Detach::Group => libc::tcsetpgrp(libc::STDIN_FILENO, me),
                    // A new session has no terminal: make stdin's its controlling one.
                    Detach::Session => libc::ioctl(libc::STDIN_FILENO, libc::TIOCSCTTY, 0),
                };
            }
            if let Some(slot) = slot_ptr {
                write_decimal(slot.add(LISTEN_PID_PREFIX.len()), me as u32);
            }
            // The child starts with nothing blocked, whatever lastcall had blocked.
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            libc::execvpe(argv[0], argv.as_ptr(), envp.as_ptr());
            let errno = *libc::__errno_location();
            libc::write(pipe[1], (&errno as *const libc::c_int).cast(), 4);
            libc::_exit(127);
        }
    }
    // SAFETY: the parent closes its copy of the write end, then reads at most 4 bytes into
    // an int it owns; EOF means the exec succeeded (the write end closed on exec).
    unsafe {
        libc::close(pipe[1]);
        let mut errno: libc::c_int = 0;
        let n = loop {
            let n = libc::read(pipe[0], (&mut errno as *mut libc::c_int).cast(), 4);
            if n >= 0 || *libc::__errno_location() != libc::EINTR {
                break n;
            }
        };
        libc::close(pipe[0]);
        if n == 4 {
            // The child exited 127 right after telling us why; collect it now.
            libc::waitpid(pid, std::ptr::null_mut(), 0);
            return Err(io::Error::from_raw_os_error(errno));
        }
    }
    Ok(pid)
}

/// Writes `n` in decimal at `dst`, NUL-terminated; the buffer holds 12 bytes.
///
/// # Safety
/// `dst` must point to at least 12 writable bytes.
unsafe fn write_decimal(dst: *mut u8, mut n: u32) {
    let mut digits = [0u8; 10];
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..len {
        // SAFETY: at most 10 digits and a NUL fit the 12 bytes the caller vouches for.
        unsafe { *dst.add(i) = digits[len - 1 - i] };
    }
    // SAFETY: as above.
    unsafe { *dst.add(len) = 0 };
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

/// waitpid(-1, WNOHANG), made directly (see `raw_syscall`): reaping runs it at least twice per
/// SIGCHLD, and a burst of orphans is thousands of SIGCHLDs. The pid and raw status of a child
/// that has exited, or None if every child is still running.
#[inline(always)]
pub fn wait_any_exited() -> nix::Result<Option<(Pid, libc::c_int)>> {
    let mut status: libc::c_int = 0;
    let any = -1isize as usize;
    // SAFETY: wait4 writes the status into the int we own; no rusage (NULL).
    let pid = unsafe { raw_syscall(libc::SYS_wait4, any, &mut status as *mut libc::c_int as usize, libc::WNOHANG as usize, 0) }?;
    Ok((pid != 0).then(|| (Pid::from_raw(pid as libc::pid_t), status)))
}

/// Sleeps until one of the signals in `set` (all blocked) is pending and takes it off the pending
/// set: its number and the pid that sent it. This is the idle wait. Waking from it on another
/// core measured 0.2-0.3 µs faster than waking from read() on the signalfd, whose wait queue is
/// more memory that the sender's core writes and the woken core must fetch.
#[inline(always)]
pub fn wait_for_signal(set: &SigSet) -> nix::Result<(Sig, libc::pid_t)> {
    let mut info = MaybeUninit::<libc::siginfo_t>::uninit();
    let set: *const libc::sigset_t = set.as_ref();
    loop {
        // SAFETY: rt_sigtimedwait reads the kernel's 8-byte signal mask from the start of the
        // set we borrow, writes a whole siginfo_t into ours, and has no timeout (NULL).
        match unsafe { raw_syscall(libc::SYS_rt_sigtimedwait, set as usize, info.as_mut_ptr() as usize, 0, 8) } {
            // SAFETY: the kernel copied a complete siginfo_t; si_pid reads its sender field,
            // which is 0 for signals no process sent, as in a signalfd record.
            Ok(n) => return Ok((Sig(n as i32), unsafe { info.assume_init_ref().si_pid() })),
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Pending signals read in one syscall: nix reads one at a time, and on the signal path each
/// syscall counts (as does clearing a buffer that the kernel is about to fill).
pub struct SignalBatch {
    buf: [MaybeUninit<libc::signalfd_siginfo>; 8],
}

impl SignalBatch {
    pub fn new() -> SignalBatch {
        SignalBatch { buf: [MaybeUninit::uninit(); 8] }
    }

    /// Reads what is pending, blocking until there is something if the fd blocks.
    pub fn read(&mut self, fd: BorrowedFd<'_>) -> io::Result<&[libc::signalfd_siginfo]> {
        loop {
            // SAFETY: the kernel writes whole signalfd_siginfo records into the buffer, up to
            // its size, and says how many bytes it wrote.
            let n = unsafe { libc::read(fd.as_raw_fd(), self.buf.as_mut_ptr().cast(), std::mem::size_of_val(&self.buf)) };
            if n >= 0 {
                let records = n as usize / std::mem::size_of::<libc::signalfd_siginfo>();
                // SAFETY: the first `records` entries were just written by the kernel.
                return Ok(unsafe { std::slice::from_raw_parts(self.buf.as_ptr().cast(), records) });
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }
}

/// poll(2) on a set the caller keeps from one wake-up to the next (nix's `PollFd` borrows each
/// fd, so a set of them cannot live beside the sockets in one struct), made directly as ppoll
/// (see `raw_syscall`; aarch64 has no poll syscall). The kernel reads `fd` and `events` and
/// writes `revents`, within the slice; an fd closed meanwhile only comes back as POLLNVAL.
#[inline(always)]
pub fn poll(fds: &mut [libc::pollfd], timeout: nix::poll::PollTimeout) -> nix::Result<usize> {
    // -1 (no timeout) to i32::MAX milliseconds, by construction.
    let millis = i64::from(timeout);
    let mut ts = libc::timespec { tv_sec: (millis / 1000) as _, tv_nsec: ((millis % 1000) * 1_000_000) as _ };
    let ts = if millis < 0 { 0 } else { &mut ts as *mut libc::timespec as usize };
    // SAFETY: the pointer and length describe the caller's slice, and the timespec (which the
    // kernel may update) is ours or NULL; no signal mask (NULL), so its size is not read.
    unsafe { raw_syscall(libc::SYS_ppoll, fds.as_mut_ptr() as usize, fds.len(), ts, 0) }
}

/// Takes one of the signals in `set` (all blocked) off the pending set if there is one, without
/// waiting: rt_sigtimedwait with a zero timeout, made directly like `wait_for_signal`, for the
/// loop that learnt from poll() that the signalfd is readable. One syscall for the usual single
/// signal, where a read() of the signalfd went through musl.
#[inline(always)]
pub fn take_signal(set: &SigSet) -> nix::Result<Option<(Sig, libc::pid_t)>> {
    let mut info = MaybeUninit::<libc::siginfo_t>::uninit();
    let set: *const libc::sigset_t = set.as_ref();
    let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    loop {
        // SAFETY: as in wait_for_signal, with a timeout the kernel only reads.
        match unsafe { raw_syscall(libc::SYS_rt_sigtimedwait, set as usize, info.as_mut_ptr() as usize, &zero as *const libc::timespec as usize, 8) } {
            // SAFETY: as in wait_for_signal.
            Ok(n) => return Ok(Some((Sig(n as i32), unsafe { info.assume_init_ref().si_pid() }))),
            Err(Errno::EAGAIN) => return Ok(None),
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e),
        }
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
    fn kill_reports_the_kernels_answer() {
        let me = std::process::id() as libc::pid_t;
        assert!(kill(me, Sig(0)).is_ok());
        assert_eq!(kill(me, Sig(99)), Err(Errno::EINVAL));
        assert_eq!(kill(i32::MAX, Sig(0)), Err(Errno::ESRCH));
    }

    #[test]
    fn wait_for_signal_takes_a_pending_signal_and_its_sender() {
        use nix::sys::signal::{pthread_sigmask, raise, SigmaskHow, Signal};
        // Blocked in this test's thread only, so that raise() leaves it pending right here.
        let set = SigSet::from(Signal::SIGUSR2);
        pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), None).unwrap();
        raise(Signal::SIGUSR2).unwrap();
        let taken = wait_for_signal(&set);
        pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&set), None).unwrap();
        assert_eq!(taken.unwrap(), (Sig(libc::SIGUSR2), std::process::id() as libc::pid_t));
    }

    #[test]
    fn pids_are_written_in_decimal_with_a_nul() {
        for (pid, text) in [(1u32, "1"), (4194304, "4194304"), (u32::MAX, "4294967295")] {
            let mut buf = [0xffu8; 12];
            // SAFETY: the buffer holds the 12 bytes write_decimal may write.
            unsafe { write_decimal(buf.as_mut_ptr(), pid) };
            let end = buf.iter().position(|&b| b == 0).unwrap();
            assert_eq!(&buf[..end], text.as_bytes());
        }
    }

    #[test]
    fn the_listen_pid_slot_is_only_made_when_asked_for() {
        let env = || vec![CString::new("A=1").unwrap(), CString::new("LISTEN_PID=99").unwrap()];
        let plan = ExecPlan::new(vec![], env(), Detach::Group, false, true);
        assert_eq!(plan.listen_pid_slot, Some(1));
        assert_eq!(plan.envp[1].len(), LISTEN_PID_PREFIX.len() + 12);
        let plan = ExecPlan::new(vec![], env(), Detach::Group, false, false);
        assert_eq!(plan.listen_pid_slot, None);
        assert_eq!(plan.envp[1], b"LISTEN_PID=99\0");
    }
}
