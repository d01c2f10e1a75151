//! The sweep: a signal to everything lastcall still has (signal-all), SIGKILL to every
//! descendant (kill-all), and the walk of /proc that finds them.
//!
//! May import: the supervisor's set-up (`super`), logging (`Event`), metrics, procfs, signals, sys.

use std::time::Instant;

use log::{debug, info, warn};

use crate::logging::Event;
use crate::metrics;
use crate::signals::Sig;
use crate::sys;

use crate::procfs::{is_gone, proc_is_ours};
use super::Supervisor;

impl Supervisor {
    /// Everything lastcall still has: as PID 1 the whole namespace; otherwise the child's group
    /// and every direct child (adopted orphans included, which may have left the group). SIGKILL
    /// goes further: see `kill_all`.
    pub(super) fn signal_all(&mut self, sig: Sig, now: Instant) {
        if sig == Sig::KILL {
            return self.kill_all();
        }
        metrics::count(&mut self.counters.forwarded, sig);
        info!(event = Event::Forwarded.name(), signal = sig.to_string().as_str(), elapsed_ms = self.elapsed_ms(now); "{}sent {sig} to every remaining process", self.elapsed(now));
        if self.pid1 {
            if let Err(e) = send_stop_signal(-1, sig, self.cont_after_stop) {
                debug!("kill(-1, {sig}): {e}");
            }
            return;
        }
        if self.app().is_some() {
            let _ = send_stop_signal(-self.child.as_raw(), sig, self.cont_after_stop);
        }
        for (pid, _) in self.descendants_in_view().unwrap_or_default() {
            let _ = send_stop_signal(pid, sig, self.cont_after_stop);
        }
    }

    /// SIGKILL to everything lastcall has. As PID 1, kill(-1). Otherwise the child's group and
    /// every descendant, found through /proc: each is killed before its children are read, so
    /// none can fork behind the sweep (the kernel fails a fork once SIGKILL is pending). What
    /// still escapes (children left to lastcall by a parent that died during the sweep) comes
    /// back to the subreaper, and the reap that follows sends the next sweep (machine.rs). The
    /// timeline line is the machine's GraceExpired note, so the sweeps themselves are quiet.
    fn kill_all(&mut self) {
        metrics::count(&mut self.counters.forwarded, Sig::KILL);
        if self.pid1 {
            if let Err(e) = sys::kill(-1, Sig::KILL) {
                debug!("kill(-1, SIGKILL): {e}");
            }
            return;
        }
        if self.state.main.is_none() || self.group_is_the_apps() {
            let _ = sys::kill(-self.child.as_raw(), Sig::KILL);
        }
        let (killed, complete) = if proc_is_ours(self.me) { self.kill_descendants() } else { (0, false) };
        debug!(event = Event::Killed.name(), signal = "SIGKILL"; "SIGKILL to {killed} descendants");
        if !complete && !self.warned_blind {
            self.warned_blind = true;
            warn!("cannot see every process left behind in /proc; those that come back to lastcall are killed as they do");
        }
    }

    /// kill_all's walk: every descendant, parents first. Returns how many were signalled, and
    /// whether every /proc read worked (a process that is gone has no children to read; any
    /// other failure means some may have been missed).
    fn kill_descendants(&mut self) -> (usize, bool) {
        let (mut killed, mut complete) = (0, true);
        let mut todo = vec![self.me.as_raw()];
        while let Some(pid) = todo.pop() {
            if pid != self.me.as_raw() {
                let _ = sys::kill(pid, Sig::KILL);
                killed += 1;
            }
            match self.proc.children(pid) {
                Ok(()) => todo.extend_from_slice(&self.proc.found),
                Err(e) if is_gone(&e) => {}
                Err(e) => {
                    debug!("cannot read the children of {pid}: {e}");
                    complete = false;
                }
            }
        }
        (killed, complete)
    }

    /// Everything lastcall still has outside the child's process group (daemons that setsid'd
    /// away), which has had its stop signal already.
    pub(super) fn signal_others(&mut self, sig: Sig, now: Instant) {
        metrics::count(&mut self.counters.forwarded, sig);
        info!(event = Event::Forwarded.name(), signal = sig.to_string().as_str(), elapsed_ms = self.elapsed_ms(now); "{}sent {sig} to the processes outside the app's group", self.elapsed(now));
        match self.descendants_in_view() {
            Some(processes) => {
                for (pid, pgrp) in processes {
                    if pgrp != self.child.as_raw() {
                        let _ = send_stop_signal(pid, sig, self.cont_after_stop);
                    }
                }
            }
            // As PID 1 without our own /proc nobody can be told apart: better twice than never.
            None if self.pid1 => {
                let _ = send_stop_signal(-1, sig, self.cont_after_stop);
            }
            None => {}
        }
    }

    /// (pid, process group) of what lastcall can see of its own: as PID 1 every process of the
    /// namespace, otherwise its direct children. None if /proc is another namespace's or cannot
    /// be read.
    fn descendants_in_view(&mut self) -> Option<Vec<(libc::pid_t, libc::pid_t)>> {
        if !proc_is_ours(self.me) {
            return None;
        }
        let listed = if self.pid1 { self.proc.list("/proc") } else { self.proc.children(self.me.as_raw()) };
        if let Err(e) = listed {
            debug!("cannot list processes in /proc: {e}");
            return None;
        }
        let pids = std::mem::take(&mut self.proc.found);
        let me = self.me.as_raw();
        let found = pids.iter().filter(|&&pid| pid != me).filter_map(|&pid| Some((pid, self.proc.process_group(pid)?))).collect();
        self.proc.found = pids;
        Some(found)
    }
}

/// A stop signal of the shutdown, followed by SIGCONT as systemd does (with `cont`: not under a
/// peer's name): a stopped process (SIGSTOP, Ctrl-Z elsewhere, a debugger) cannot run its handler
/// until it is continued, and would only meet the SIGKILL at the deadline. SIGCONT is harmless to
/// one that runs. Not after SIGKILL, SIGCONT itself, or a signal that stops. `send` sends one
/// signal wherever this one goes; what it returns for the stop signal is returned.
pub(super) fn with_cont(sig: Sig, cont: bool, mut send: impl FnMut(Sig) -> nix::Result<()>) -> nix::Result<()> {
    let sent = send(sig);
    if cont && !matches!(sig, Sig::KILL | Sig::CONT | Sig::STOP | Sig::TSTP | Sig::TTIN | Sig::TTOU) {
        let _ = send(Sig::CONT);
    }
    sent
}

/// `with_cont` by kill(): to a process, a group (negative) or everything (-1).
fn send_stop_signal(target: libc::pid_t, sig: Sig, cont: bool) -> nix::Result<()> {
    with_cont(sig, cont, |sig| sys::kill(target, sig))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_signal_is_followed_by_sigcont_unless_it_kills_stops_or_continues() {
        let cases = [
            (Sig::TERM, true, &[Sig::TERM, Sig::CONT][..]),
            (Sig(libc::SIGUSR1), true, &[Sig(libc::SIGUSR1), Sig::CONT]),
            (Sig::TERM, false, &[Sig::TERM]),
            (Sig::KILL, true, &[Sig::KILL]),
            (Sig::CONT, true, &[Sig::CONT]),
            (Sig::STOP, true, &[Sig::STOP]),
            (Sig::TSTP, true, &[Sig::TSTP]),
            (Sig::TTIN, true, &[Sig::TTIN]),
            (Sig::TTOU, true, &[Sig::TTOU]),
        ];
        for (sig, cont, expected) in cases {
            let mut sent = vec![];
            let result = with_cont(sig, cont, |s| {
                sent.push(s);
                if s == Sig::CONT && sig != Sig::CONT { Err(nix::errno::Errno::ESRCH) } else { Ok(()) }
            });
            assert_eq!(sent, expected, "{sig}, cont {cont}");
            // What the stop signal's send returned, whatever SIGCONT's did.
            assert_eq!(result, Ok(()), "{sig}");
        }
    }
}
