//! Reaping: one SIGCHLD may stand for many exits, so wait until nothing is left to collect. The
//! one loop that does (`reap`).
//!
//! May import: signals, sys.

use std::convert::Infallible;
use std::fmt;
use std::ops::ControlFlow;

use nix::errno::Errno;
use nix::unistd::Pid;

use crate::signals::Sig;
use crate::sys;

/// How a child ended, decoded from the raw wait status for any signal number. nix's
/// `WaitStatus` knows only the signals of its enum and fails on a real-time one: an app killed
/// by signal 35 would read as still running, and lastcall would wait for ever.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    Exited(i32),
    /// Killed by the signal; whether it dumped core.
    Signaled(Sig, bool),
}

impl Status {
    /// waitpid without WUNTRACED or WCONTINUED reports only exits and deaths, so every status
    /// it gives is one of the two.
    pub fn from_raw(raw: libc::c_int) -> Status {
        if libc::WIFSIGNALED(raw) {
            Status::Signaled(Sig(libc::WTERMSIG(raw)), libc::WCOREDUMP(raw))
        } else {
            Status::Exited(libc::WEXITSTATUS(raw))
        }
    }

    /// The shell's convention, which Docker and Kubernetes report: a code, or 128 + the signal.
    pub fn code(self) -> i32 {
        match self {
            Status::Exited(code) => code,
            Status::Signaled(sig, _) => 128 + sig.0,
        }
    }

    /// The signal that killed it, if one did.
    pub fn signal(self) -> Option<Sig> {
        match self {
            Status::Exited(_) => None,
            Status::Signaled(sig, _) => Some(sig),
        }
    }
}

/// As the log shows it: `exited with 0`, `killed by SIGKILL`.
impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::Exited(code) => write!(f, "exited with {code}"),
            Status::Signaled(sig, false) => write!(f, "killed by {sig}"),
            Status::Signaled(sig, true) => write!(f, "killed by {sig} (core dumped)"),
        }
    }
}

#[derive(Debug, Default)]
pub struct Reaped {
    /// The main child's status, if it was among those reaped.
    pub main: Option<Status>,
    /// How many other processes were reaped: orphans adopted by lastcall, or the app's own
    /// exited children.
    pub others: usize,
    /// Whether lastcall still has a child after this round.
    pub children_left: bool,
}

/// The one reaping loop: reaps children that have exited, one waitpid each, and hands each to
/// `on_exit` with its raw status (decoded only where it is needed), until none is left to
/// collect or `on_exit` breaks. Returns what `on_exit` broke with, or whether lastcall still
/// has a child. Nothing is collected on the way, so a burst of thousands of orphans costs no
/// allocation.
#[inline(always)]
pub fn reap<B>(mut on_exit: impl OnExit<B>) -> ControlFlow<B, bool> {
    loop {
        match sys::wait_any_exited() {
            Ok(Some((pid, status))) => {
                if let ControlFlow::Break(b) = on_exit.exited(pid, status) {
                    return ControlFlow::Break(b);
                }
            }
            Ok(None) => return ControlFlow::Continue(true),
            Err(Errno::EINTR) => {}
            // ECHILD: nobody left. Anything else cannot be retried usefully either.
            Err(_) => return ControlFlow::Continue(false),
        }
    }
}

/// What `reap` does with each child it reaps, given its raw status: a closure, or a type of the
/// caller's whose method can be inlined into the loop wherever the loop is.
pub trait OnExit<B> {
    fn exited(&mut self, pid: Pid, status: libc::c_int) -> ControlFlow<B>;
}

impl<B, F: FnMut(Pid, libc::c_int) -> ControlFlow<B>> OnExit<B> for F {
    #[inline(always)]
    fn exited(&mut self, pid: Pid, status: libc::c_int) -> ControlFlow<B> {
        self(pid, status)
    }
}

/// Reaps every child that has exited (`reap`); `on_other` hears of each that was not `main`.
pub fn reap_all(main: Pid, mut on_other: impl FnMut(Pid, libc::c_int)) -> Reaped {
    let mut reaped = Reaped::default();
    let left = reap(|pid, status| {
        if pid == main {
            reaped.main = Some(Status::from_raw(status));
        } else {
            reaped.others += 1;
            on_other(pid, status);
        }
        ControlFlow::<Infallible>::Continue(())
    });
    reaped.children_left = match left {
        ControlFlow::Continue(left) => left,
        ControlFlow::Break(never) => match never {},
    };
    reaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_read_as_the_log_shows_them() {
        assert_eq!(Status::from_raw(3 << 8).to_string(), "exited with 3");
        assert_eq!(Status::from_raw(libc::SIGKILL).to_string(), "killed by SIGKILL");
        assert_eq!(Status::from_raw(libc::SIGSEGV | 0x80).to_string(), "killed by SIGSEGV (core dumped)");
        assert_eq!(Status::from_raw(35).to_string(), "killed by SIGRTMIN+1");
    }

    /// Every signal number, as the kernel encodes a death (tests/transparency.rs has real
    /// processes die of each).
    #[test]
    fn every_signal_from_1_to_64_is_decoded() {
        for n in 1..=64 {
            assert_eq!(Status::from_raw(n), Status::Signaled(Sig(n), false), "signal {n}");
            assert_eq!(Status::from_raw(n | 0x80), Status::Signaled(Sig(n), true), "signal {n}");
            assert_eq!(Status::from_raw(n).code(), 128 + n);
        }
        assert_eq!(Status::from_raw(0), Status::Exited(0));
        assert_eq!(Status::from_raw(255 << 8), Status::Exited(255));
    }
}
