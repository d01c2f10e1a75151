//! The event loop: wait on the signalfd with a timeout that ends at the state machine's next
//! deadline, turn what happened into events, and carry out the actions `machine::step` returns.
//! No threads and no periodic timer: with no deadline pending, poll sleeps until a signal.

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signalfd::SignalFd;
use nix::unistd::{getpid, Pid};

use crate::cli::Config;
use crate::error::{self, Error};
use crate::machine::{self, Action, Event, Note, Phase, Policy, State};
use crate::signals::{self, Class, Sig};
use crate::{child, reap, sys};

/// How long SIGKILLed processes get to be reaped before lastcall stops waiting for them
/// (a process stuck in uninterruptible sleep never dies).
const KILL_WAIT: Duration = Duration::from_secs(3);

/// Sets up everything the loop needs, starts the command and supervises it to the end.
/// Returns lastcall's exit code. Signals must already be blocked.
pub fn run(config: Config) -> Result<i32, Error> {
    sys::reset_dispositions();
    let signalfd = signals::open_signalfd().map_err(|e| Error::setup("cannot create a signalfd", e))?;
    let me = getpid();
    let pid1 = me.as_raw() == 1;
    if !pid1 {
        // Orphaned grandchildren (a service's double-forked daemon) come back to us to be reaped.
        nix::sys::prctl::set_child_subreaper(true)
            .map_err(|e| Error::setup("cannot become a child subreaper", e))?;
    }
    let child = child::spawn(&config.command)?;
    debug!("started {:?} as pid {child}", config.command);
    // Never keep a mount busy; the child has its own working directory.
    if let Err(e) = nix::unistd::chdir("/") {
        warn!("cannot change directory to /: {e}");
    }

    let policy = Policy {
        pre_stop: config.pre_stop,
        grace: config.grace,
        stop_signal: config.stop_signal,
        termination: vec![Sig::TERM, Sig::INT, Sig::QUIT],
        kill_wait: KILL_WAIT,
    };
    let mut supervisor =
        Supervisor { policy, signalfd, me, pid1, child, state: State::START, shutdown_at: None };
    Ok(supervisor.event_loop())
}

struct Supervisor {
    policy: Policy,
    signalfd: SignalFd,
    me: Pid,
    pid1: bool,
    /// The main child's pid, which is also its process group id.
    child: Pid,
    state: State,
    /// When the first termination signal arrived: the timeline's zero.
    shutdown_at: Option<Instant>,
}

impl Supervisor {
    fn event_loop(&mut self) -> i32 {
        loop {
            let now = Instant::now();
            if self.state.deadline().is_some_and(|d| now >= d) {
                if let Some(code) = self.handle(Event::Deadline, now) {
                    return code;
                }
                continue;
            }
            let timeout = match self.state.deadline() {
                Some(deadline) => timeout_until(deadline, now),
                None => PollTimeout::NONE,
            };
            let mut fds = [PollFd::new(self.signalfd.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, timeout) {
                Ok(_) | Err(Errno::EINTR) => {}
                Err(e) => warn!("poll failed: {e}"),
            }
            if let Some(code) = self.drain_signals() {
                return code;
            }
        }
    }

    /// Reads every pending signal and acts on each in the order received.
    fn drain_signals(&mut self) -> Option<i32> {
        loop {
            let info = match self.signalfd.read_signal() {
                Ok(Some(info)) => info,
                Ok(None) => return None,
                Err(Errno::EINTR) => continue,
                Err(e) => {
                    warn!("cannot read the signalfd: {e}");
                    return None;
                }
            };
            let sig = Sig(info.ssi_signo as i32);
            // A SIGPIPE lastcall caused itself, by writing a log line to a closed stderr, is not
            // the child's business. (Other signals from our own pid are real: one raised before
            // exec, while starting lastcall, carries the pid lastcall now has.)
            if sig == Sig::PIPE && info.ssi_pid as i32 == self.me.as_raw() {
                debug!("ignoring {sig} raised by lastcall itself");
                continue;
            }
            let now = Instant::now();
            let event = match signals::classify(sig) {
                Class::Child => match self.reap(now) {
                    Some(event) => event,
                    None => continue,
                },
                Class::Dropped => {
                    debug!("not forwarding {sig}");
                    continue;
                }
                Class::Forward => {
                    debug!("received {sig} from pid {}", info.ssi_pid);
                    Event::Signal(sig)
                }
            };
            if let Some(code) = self.handle(event, now) {
                return Some(code);
            }
        }
    }

    fn reap(&mut self, now: Instant) -> Option<Event> {
        let reaped = reap::reap_all(self.child);
        for (pid, status) in &reaped.others {
            debug!("reaped pid {pid}: {status:?}");
        }
        let main = reaped.main.and_then(error::status_code);
        if let Some(code) = main {
            info!("{}child exited with status {code}", self.elapsed(now));
        }
        if main.is_none() && reaped.others.is_empty() {
            return None;
        }
        Some(Event::Reaped { main, children_left: reaped.children_left })
    }

    /// Steps the machine and carries out its actions; `Some(code)` when it is time to exit.
    fn handle(&mut self, event: Event, now: Instant) -> Option<i32> {
        let (state, actions) = machine::step(self.state, event, now, &self.policy);
        self.state = state;
        let mut exit = None;
        for action in actions {
            match action {
                Action::Timeline(note) => self.note(note, now),
                Action::Forward(sig) => self.forward(sig, now),
                Action::SignalAll(sig) => self.signal_all(sig, now),
                Action::Exit(code) => exit = Some(code),
            }
        }
        exit
    }

    fn note(&mut self, note: Note, now: Instant) {
        let t = self.shutdown_at.get_or_insert(now);
        let at = format_elapsed(now.duration_since(*t));
        match note {
            Note::Received(sig) => info!("{at} received {sig}"),
            Note::PreStopStarted(d) => info!("{at} pre-stop: the app keeps running for {}", format_elapsed_bare(d)),
            Note::PreStopEnded => info!("{at} pre-stop ended"),
            Note::PreStopCut => info!("{at} pre-stop cut short"),
        }
    }

    fn forward(&self, sig: Sig, now: Instant) {
        let group = -self.child.as_raw();
        match sys::kill(group, sig) {
            Ok(()) if self.shutdown_at.is_some() && self.is_stop(sig) => {
                info!("{}forwarded {sig} to process group {}", self.elapsed(now), self.child)
            }
            Ok(()) => debug!("forwarded {sig} to process group {}", self.child),
            Err(e) => debug!("cannot forward {sig} to process group {}: {e}", self.child),
        }
    }

    fn is_stop(&self, sig: Sig) -> bool {
        !matches!(self.state.phase, Phase::Running | Phase::PreStop { .. })
            && (self.policy.stop_signal == Some(sig) || self.policy.termination.contains(&sig))
    }

    /// Everything lastcall still has: as PID 1 the whole namespace; otherwise the child's group
    /// and every direct child (adopted orphans included, which may have left the group).
    fn signal_all(&self, sig: Sig, now: Instant) {
        let what = if sig == Sig::KILL { "grace expired: sent" } else { "sent" };
        info!("{}{what} {sig} to every remaining process", self.elapsed(now));
        if self.pid1 {
            if let Err(e) = sys::kill(-1, sig) {
                debug!("kill(-1, {sig}): {e}");
            }
            return;
        }
        let _ = sys::kill(-self.child.as_raw(), sig);
        for pid in direct_children(self.me) {
            let _ = sys::kill(pid, sig);
        }
    }

    fn elapsed(&self, now: Instant) -> String {
        match self.shutdown_at {
            Some(t) => format!("{} ", format_elapsed(now.duration_since(t))),
            None => String::new(),
        }
    }
}

/// Our children's pids from /proc, if /proc is our PID namespace's (a pid from another
/// namespace's /proc would name some other process here).
fn direct_children(me: Pid) -> Vec<libc::pid_t> {
    let ours = std::fs::read_link("/proc/self").is_ok_and(|p| p.as_os_str() == me.to_string().as_str());
    if !ours {
        return vec![];
    }
    std::fs::read_to_string(format!("/proc/self/task/{me}/children"))
        .map(|text| text.split_whitespace().filter_map(|p| p.parse().ok()).collect())
        .unwrap_or_default()
}

/// The poll timeout that ends at or just after `deadline`: rounded up, so that lastcall never
/// wakes early and spins through a zero timeout.
fn timeout_until(deadline: Instant, now: Instant) -> PollTimeout {
    let nanos = deadline.saturating_duration_since(now).as_nanos();
    let millis = nanos.div_ceil(1_000_000).min(i32::MAX as u128) as i32;
    PollTimeout::try_from(millis).unwrap_or(PollTimeout::MAX)
}

fn format_elapsed(d: Duration) -> String {
    format!("+{}", format_elapsed_bare(d))
}

fn format_elapsed_bare(d: Duration) -> String {
    format!("{}.{:03}s", d.as_secs(), d.subsec_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_round_up() {
        let now = Instant::now();
        let ms = |n: i32| PollTimeout::try_from(n).unwrap();
        assert_eq!(timeout_until(now, now), ms(0));
        assert_eq!(timeout_until(now + Duration::from_nanos(1), now), ms(1));
        assert_eq!(timeout_until(now + Duration::from_micros(1500), now), ms(2));
        assert_eq!(timeout_until(now + Duration::from_secs(2), now), ms(2000));
        assert_eq!(timeout_until(now, now + Duration::from_secs(1)), ms(0));
        assert_eq!(timeout_until(now + Duration::from_secs(100 * 86400), now), PollTimeout::MAX);
    }

    #[test]
    fn elapsed_format() {
        assert_eq!(format_elapsed(Duration::from_millis(2001)), "+2.001s");
        assert_eq!(format_elapsed(Duration::ZERO), "+0.000s");
    }
}
