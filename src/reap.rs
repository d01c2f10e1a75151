//! Reaping: one SIGCHLD may stand for many exits, so wait until nothing is left to collect.

use nix::errno::Errno;
use nix::sys::wait::WaitStatus;
use nix::unistd::Pid;

use crate::sys;

#[derive(Debug, Default)]
pub struct Reaped {
    /// The main child's status, if it was among those reaped.
    pub main: Option<WaitStatus>,
    /// How many other processes were reaped: orphans adopted by lastcall, or the app's own
    /// exited children.
    pub others: usize,
    /// Whether lastcall still has a child after this round.
    pub children_left: bool,
}

/// Reaps every child that has exited; `on_other` hears of each that was not `main`, with its
/// raw status (decoded by `describe` only if it is logged). Nothing is collected on the way, so
/// a burst of thousands of orphans costs no allocation.
pub fn reap_all(main: Pid, mut on_other: impl FnMut(Pid, libc::c_int)) -> Reaped {
    let mut reaped = Reaped::default();
    loop {
        match sys::wait_any_exited() {
            Ok(None) => {
                reaped.children_left = true;
                return reaped;
            }
            Ok(Some((pid, status))) if pid == main => reaped.main = WaitStatus::from_raw(pid, status).ok(),
            Ok(Some((pid, status))) => {
                reaped.others += 1;
                on_other(pid, status);
            }
            Err(Errno::EINTR) => {}
            // ECHILD: nobody left. Anything else cannot be retried usefully either.
            Err(_) => {
                reaped.children_left = false;
                return reaped;
            }
        }
    }
}

/// A raw wait status as the log shows it: `exited with 0`, `killed by SIGKILL`.
pub fn describe(pid: Pid, status: libc::c_int) -> String {
    match WaitStatus::from_raw(pid, status) {
        Ok(WaitStatus::Exited(_, code)) => format!("exited with {code}"),
        Ok(WaitStatus::Signaled(_, sig, _)) => format!("killed by {sig}"),
        _ => format!("wait status {status:#x}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_read_as_the_log_shows_them() {
        let pid = Pid::from_raw(7);
        assert_eq!(describe(pid, 3 << 8), "exited with 3");
        assert_eq!(describe(pid, libc::SIGKILL), "killed by SIGKILL");
        assert_eq!(describe(pid, 0x137f), "wait status 0x137f");
    }
}
