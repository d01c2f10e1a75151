//! Reaping: one SIGCHLD may stand for many exits, so wait until nothing is left to collect.

use nix::errno::Errno;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

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

/// Reaps every child that has exited; `on_other` hears of each that was not `main`. Nothing
/// is collected on the way, so a burst of thousands of orphans costs no allocation.
pub fn reap_all(main: Pid, mut on_other: impl FnMut(Pid, WaitStatus)) -> Reaped {
    let mut reaped = Reaped::default();
    loop {
        match waitpid(None::<Pid>, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => {
                reaped.children_left = true;
                return reaped;
            }
            Ok(status) => match status.pid() {
                Some(pid) if pid == main => reaped.main = Some(status),
                Some(pid) => {
                    reaped.others += 1;
                    on_other(pid, status);
                }
                None => {}
            },
            Err(Errno::EINTR) => {}
            // ECHILD: nobody left. Anything else cannot be retried usefully either.
            Err(_) => {
                reaped.children_left = false;
                return reaped;
            }
        }
    }
}
