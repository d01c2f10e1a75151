//! The few calls that need `unsafe`: nix's safe wrappers take its `Signal` enum, which has no
//! real-time signals, and a pre-exec hook is unsafe by nature.
#![allow(unsafe_code)]

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

use crate::signals::Sig;

/// Sends `sig` to `pid` (a process), `-pgid` (a group) or -1 (everyone we may signal).
pub fn kill(pid: libc::pid_t, sig: Sig) -> io::Result<()> {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    if unsafe { libc::kill(pid, sig.0) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
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

/// Makes the child's new process group the terminal's foreground group, in the child, between
/// fork and exec, so that it owns the terminal before its first read. A background group that
/// calls tcsetpgrp gets SIGTTOU, so it is blocked around the call; then the mask is emptied. Only async-signal-safe calls
/// (sigprocmask, tcsetpgrp, getpid) run here.
pub fn take_terminal_in_child(command: &mut Command) {
    let hook = || {
        // SAFETY: sigset_t is plain data; sigemptyset/sigaddset initialise it before use.
        let mut ttou: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: sigprocmask, tcsetpgrp and getpid are async-signal-safe and given valid
        // pointers to our own stack. Failures are ignored on purpose: without a terminal, or
        // with one that is not ours, the child simply runs in the background.
        unsafe {
            libc::sigemptyset(&mut ttou);
            libc::sigaddset(&mut ttou, libc::SIGTTOU);
            libc::sigprocmask(libc::SIG_BLOCK, &ttou, std::ptr::null_mut());
            libc::tcsetpgrp(libc::STDIN_FILENO, libc::getpid());
            // The child starts with nothing blocked, whatever lastcall had blocked.
            libc::sigemptyset(&mut ttou);
            libc::sigprocmask(libc::SIG_SETMASK, &ttou, std::ptr::null_mut());
        }
        Ok(())
    };
    // SAFETY: the hook allocates nothing, takes no lock and calls only async-signal-safe
    // functions, which is all the forked child of a process may do before exec.
    unsafe { command.pre_exec(hook) };
}
