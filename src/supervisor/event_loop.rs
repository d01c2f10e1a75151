//! The loop: wait for signals in sigtimedwait (with a timeout that ends at the next deadline; the
//! health and notify sockets raise a signal when readable, so they need no poll), route each
//! (`route`: one lookup, whoever sent it), and carry out the actions `machine::step` returns. A
//! signal outside the shutdown (HUP, USR1, WINCH, ...) is forwarded straight from the routing
//! table instead: the machine would only echo it back.
//!
//! The path of a SIGTERM: the wait (`event_loop`, or `wait_idle` while nothing has a deadline)
//! → `route` → `handle`, which steps the machine and carries out its actions (`forward_stop`).
//!
//! May import: the supervisor's set-up (`super`) and sweep, health, logging, machine, metrics,
//! oom, reap, signals, sys.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use log::{debug, error, info, warn};
use nix::unistd::Pid;

use crate::health;
use crate::logging;
use crate::machine::{self, Action, Event, Note, Notice, Phase};
use crate::metrics::{self, Snapshot};
use crate::oom;
use crate::signals::{self, Route, Sig};
use crate::sys;
use crate::reap;
use crate::reap::Status;

use super::{earliest, Supervisor, Target, Woken, KILL_WAIT};
use super::sweep::with_cont;

impl Supervisor {
    pub(super) fn event_loop(&mut self) -> i32 {
        let sockets = self.notify.is_some() || self.health.is_some();
        // `more`: a pass over the sockets stopped at its batch, so the next wait does not sleep,
        // and what is left is served once signals and deadlines have been looked at.
        let (mut health_deadline, mut more) = if sockets {
            self.signal_when_readable();
            self.watch_sockets(Instant::now())
        } else {
            (None, false)
        };
        loop {
            let woken = match earliest(self.state.deadline(), health_deadline) {
                // Nothing due and no pass over the sockets left to finish, so no clock: the hot
                // path (`wait_idle`).
                None if !more => self.wait_idle(sockets),
                deadline => {
                    let timeout = match deadline {
                        None => None,
                        Some(deadline) => {
                            let now = Instant::now();
                            if self.state.deadline().is_some_and(|d| now >= d) {
                                if let Some(code) = self.handle(Event::Deadline, now) {
                                    return code;
                                }
                                continue;
                            }
                            if health_deadline.is_some_and(|d| now >= d) {
                                (health_deadline, more) = self.watch_sockets(now);
                                continue;
                            }
                            Some(deadline - now)
                        }
                    };
                    let timeout = if more { Some(Duration::ZERO) } else { timeout };
                    // The one wait, for signals and sockets alike: the sockets raise a signal.
                    match sys::wait_for_signal_until(&self.handled, timeout) {
                        Ok(None) if more => {
                            (health_deadline, more) = self.watch_sockets(Instant::now());
                            continue;
                        }
                        taken => Woken::from(taken, sockets),
                    }
                }
            };
            let woken = match woken {
                Woken::Signal(sig, sender) => self.route_out_of_line(sig, sender, sockets).unwrap_or(Woken::Again),
                woken => woken,
            };
            match woken {
                Woken::Sockets => {
                    if let Some(code) = self.drain_socket_signals() {
                        return code;
                    }
                    (health_deadline, more) = self.watch_sockets(Instant::now());
                }
                Woken::Exit(code) => return code,
                Woken::Again | Woken::Signal(..) => {}
                Woken::Failed(e) => warn!("cannot wait for signals: {e}"),
            }
        }
    }

    /// The wait while nothing has a deadline: what `route` does with a signal here changes no
    /// deadline unless it says so, so the wait goes on at once, without the clock.
    /// `sockets`: whether lastcall has sockets, whose readiness signals end the wait.
    #[inline(always)]
    fn wait_idle(&mut self, sockets: bool) -> Woken {
        let mut taker = sys::Taker::new();
        loop {
            let n = match taker.next(&self.handled) {
                Ok(n) => n,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Woken::Failed(e),
            };
            let origin = || (taker.sender(), sockets && sys::is_readiness(Sig(n as libc::c_int), taker.code()));
            if let Some(woken) = self.route(n, sockets, origin) {
                return woken;
            }
        }
    }

    /// The route: what signal number `n` does, whichever wait took it and whoever sent it, a
    /// socket's readiness included. First the short way's table (`Quick`), which holds what
    /// needs no decision (a forward, or orphans reaped while nothing hears of them), so the
    /// common case is a lookup and kill(), with no clock, no machine and no sender to read;
    /// then the signal's `Route`, with the shutdown's signals going to the machine (`handle`).
    /// None: done, wait again at once; otherwise what the loop must see to (`Again`: the
    /// machine ran, and its deadlines are the loop's).
    ///
    /// Inlined into the idle wait, and once out of line for the rest (`route_out_of_line`): on
    /// this path the cache lines and pages touched cost more than the instructions run
    /// (README, Performance). `count`: keep /metrics' counts of the long
    /// way, when lastcall has sockets. `origin`: the sender, and whether the signal is a
    /// socket's readiness; read only off the short way.
    #[inline(always)]
    fn route(&mut self, n: usize, count: bool, origin: impl FnOnce() -> (libc::pid_t, bool)) -> Option<Woken> {
        match self.quick.of(n) {
            to if to > 0 => {
                if self.quick_target.send(to) {
                    self.quick.count(n);
                } else {
                    self.quick_forward_failed(n);
                }
                return None;
            }
            signals::REAP_QUICKLY if !self.state.cares_about_orphans() => {
                self.quick.count(n);
                return self.reap_quietly();
            }
            _ => {}
        }
        let (sender, readiness) = origin();
        if readiness {
            return Some(Woken::Sockets);
        }
        let sig = Sig(n as libc::c_int);
        if count {
            metrics::count(&mut self.counters.received, sig);
        }
        match self.routes.of(sig) {
            Route::Forward(to) if self.is_for_the_child(sig, sender) => self.forward(count, sig, to, sender),
            Route::Forward(_) | Route::Drop => debug!("not forwarding {sig} from pid {sender}"),
            Route::Suspend(to) => self.suspend(sig, to),
            Route::Shutdown => {
                debug!(event = logging::Event::Signal.name(), signal = sig.to_string().as_str(), pid = sender; "received {sig} from pid {sender}");
                return Some(self.handle(Event::Termination(sig), Instant::now()).map_or(Woken::Again, Woken::Exit));
            }
            Route::Reap => return self.on_sigchld(None),
        }
        None
    }

    /// `route`, out of the idle loop (for size): the signals taken with a deadline pending, at
    /// start-up, and among socket signals. `count`: as `route`'s.
    #[cold]
    #[inline(never)]
    fn route_out_of_line(&mut self, sig: Sig, sender: libc::pid_t, count: bool) -> Option<Woken> {
        self.route(sig.0 as usize, count, || (sender, false))
    }

    /// `route`, counted, for the signals taken at start-up and among socket signals; `Some(code)`
    /// when it is time to exit.
    pub(super) fn on_signal_out_of_line(&mut self, sig: Sig, sender: libc::pid_t) -> Option<i32> {
        match self.route_out_of_line(sig, sender, true) {
            Some(Woken::Exit(code)) => Some(code),
            _ => None,
        }
    }

    /// A signal the short way could not forward (the app's group has just emptied): received,
    /// not forwarded, as the long way counts it.
    #[cold]
    #[inline(never)]
    fn quick_forward_failed(&mut self, n: usize) {
        metrics::count(&mut self.counters.received, Sig(n as libc::c_int));
    }

    /// Moves the short way's counts into /metrics' counters.
    #[cold]
    fn drain_quick_counts(&mut self) {
        let counters = &mut self.counters;
        self.quick.drain(|received, forwarded, n| {
            metrics::add(&mut counters.received, received, n);
            if let Some(to) = forwarded {
                metrics::add(&mut counters.forwarded, to, n);
            }
        });
    }

    /// SIGCHLD the short way: while the main child lives and nobody is to hear of orphans
    /// (`Quick::new`), a burst of them is reaped and counted, and costs neither the clock nor
    /// the machine. The reap stops at the main child, whose exit goes on to `on_sigchld`.
    #[inline(always)]
    fn reap_quietly(&mut self) -> Option<Woken> {
        let found = reap::reap(Quietly(self));
        match found {
            ControlFlow::Continue(_) => None,
            ControlFlow::Break(main) => self.on_sigchld(Some(Status::from_raw(main))),
        }
    }

    /// SIGCHLD the long way: each reap logged (--warn-reaping, or the debug log), or orphans
    /// the machine waits for. `main`: the main child's status, when `reap_quietly` reaped it.
    #[inline(never)]
    fn on_sigchld(&mut self, main: Option<Status>) -> Option<Woken> {
        let warn_reaping = self.warn_reaping;
        // The last process other than the app that died of SIGKILL: the OOM killer's mark.
        let mut killed = None;
        let mut reaped = reap::reap_all(self.child, |pid, status| {
            if died_of_sigkill(status) {
                killed = Some(pid);
            }
            log_reap(warn_reaping, pid, status);
        });
        if main.is_some() {
            reaped.main = main;
        }
        self.on_child_exit(reaped, killed)
    }

    /// Serves the sockets: relays what the notify socket holds, and answers, times out and
    /// accepts health connections (`Health::service`). Returns the health endpoint's next
    /// deadline. Each pass is bounded (`notify::BATCH` messages, `health::ACCEPT_BATCH`
    /// connections, one read of each connection that is readable); the second value
    /// says a batch ran out and there may be more.
    #[cold]
    fn watch_sockets(&mut self, now: Instant) -> (Option<Instant>, bool) {
        let mut more = false;
        if let Some(n) = &mut self.notify {
            more |= n.relay();
        }
        self.hear_the_app(now);
        if self.health.is_some() {
            self.drain_quick_counts();
        }
        let Some(h) = &mut self.health else {
            return (None, more);
        };
        let metrics = Snapshot {
            counters: &self.counters,
            version: env!("CARGO_PKG_VERSION"),
            personality: self.personality,
            phase: self.state.phase.name(),
            shutdown: self.shutdown_at.map(|t| now.saturating_duration_since(t)),
            exit_code: self.state.main.map(Status::code),
            exit_signal: self.state.main.and_then(Status::signal).map(|sig| sig.0),
            notify_relayed: self.notify.as_ref().map_or(0, |n| n.relayed_total),
            notify_refused: self.notify.as_ref().map_or(0, |n| n.refused_total),
            health_evicted: h.evicted,
            log_lines_dropped: logging::lines_dropped(),
        };
        more |= h.service(health::Status { ready: self.ready }, &metrics, now);
        (h.next_deadline(), more)
    }

    /// What the relay heard the app say that the shutdown hears of: its STOPPING=1 withdraws
    /// readiness, a row that never ends the loop.
    #[cold]
    fn hear_the_app(&mut self, now: Instant) {
        if self.notify.as_mut().is_some_and(|n| n.take_stopping()) {
            let _ = self.handle(Event::AppSays(Notice::Stopping), now);
        }
    }

    /// Takes the socket signals that queued up since the last pass, before the next one, which
    /// reads whatever they stood for: one per readable event otherwise, they would fill the
    /// real-time queue (RLIMIT_SIGPENDING, which every process of lastcall's user shares) as
    /// fast as clients send. What arrives during the pass raises a new one. A socket signal or
    /// SIGIO that a process sent is the app's, and forwarded as usual.
    #[cold]
    fn drain_socket_signals(&mut self) -> Option<i32> {
        // The queue holds at most RLIMIT_SIGPENDING; a bound all the same.
        for _ in 0..4096 {
            match sys::wait_for_signal_until(&self.socket_signals, Some(Duration::ZERO)) {
                Ok(Some((_, _, true))) => {}
                Ok(Some((sig, sender, false))) => {
                    if let Some(code) = self.on_signal_out_of_line(sig, sender) {
                        return Some(code);
                    }
                }
                _ => return None,
            }
        }
        None
    }

    /// Has the kernel signal lastcall when the notify socket or the health listener is
    /// readable, once, before the first pass reads what came before. (Each health connection
    /// asks for itself: `Health::service`.)
    #[cold]
    fn signal_when_readable(&self) {
        let notify = self.notify.as_ref().map(|n| n.fd());
        let listener = self.health.as_ref().map(|h| h.listener_fd());
        for fd in notify.into_iter().chain(listener) {
            if let Err(e) = sys::signal_when_readable(fd, self.me) {
                warn!("cannot have the kernel signal a readable socket: {e}");
            }
        }
    }

    /// A SIGPIPE lastcall caused itself, by writing a log line to a closed stderr, is not the
    /// child's business. (Other signals from our own pid are real: one raised before exec,
    /// while starting lastcall, carries the pid lastcall has.)
    #[inline(always)]
    fn is_for_the_child(&self, sig: Sig, sender: libc::pid_t) -> bool {
        sig != Sig::PIPE || sender != self.me.as_raw()
    }

    #[inline(always)]
    fn forward(&mut self, count: bool, sig: Sig, to: Sig, sender: libc::pid_t) {
        let result = self.send_to_child(to);
        if count && result.is_ok() {
            metrics::count(&mut self.counters.forwarded, to);
        }
        if log::log_enabled!(log::Level::Debug) {
            self.log_forward(sig, to, sender, result);
        }
    }

    /// What a reap means beyond an orphan counted (`on_sigchld`): the main child's exit, an OOM
    /// kill to look for (`other_killed`: the last process other than the app that died of
    /// SIGKILL), or orphans the machine waits for. None when the machine did not run.
    #[inline(never)]
    fn on_child_exit(&mut self, reaped: reap::Reaped, other_killed: Option<Pid>) -> Option<Woken> {
        if reaped.main.is_some() {
            // What the app sent just before it exited is still waiting (SIGCHLD is taken before
            // the socket's signal): read now, while its pid still vouches for it.
            if let Some(n) = &mut self.notify {
                n.relay_last_words(self.child.as_raw());
                self.hear_the_app(Instant::now());
            }
            // The short way sends to the app's group or pidfd without asking whether it is
            // still the app's: from now on every signal goes the long way (`app`).
            self.drain_quick_counts();
            self.quick.close();
            self.child_fd = None;
        }
        self.counters.orphans_reaped = self.counters.orphans_reaped.wrapping_add(reaped.others as u64);
        // A death by SIGKILL is when the OOM killer may have been at work: only then is its
        // counter read.
        let main_killed = matches!(reaped.main, Some(Status::Signaled(Sig::KILL, _)));
        if main_killed || other_killed.is_some() {
            self.check_oom(main_killed, other_killed);
        }
        let main = reaped.main;
        if main.is_none() && (reaped.others == 0 || !self.state.cares_about_orphans()) {
            return None;
        }
        let now = Instant::now();
        if let Some(status) = reaped.main {
            // A death by a signal says so: "status 160" would hide signal 32.
            let how = match status {
                Status::Exited(code) => format!("exited with status {code}"),
                killed => killed.to_string(),
            };
            // The timeline's last line; an app that simply ends is no news.
            if self.shutdown_at.is_some() {
                info!(event = logging::Event::ChildExit.name(), pid = self.child.as_raw(), code = status.code(), elapsed_ms = self.elapsed_ms(now);
                      "{}child {how}", self.elapsed(now));
            } else {
                debug!(event = logging::Event::ChildExit.name(), pid = self.child.as_raw(), code = status.code(); "child {how}");
            }
        }
        Some(self.handle(Event::Reaped { main, children_left: reaped.children_left }, now).map_or(Woken::Again, Woken::Exit))
    }

    /// Whether the kernel's OOM-kill counter rose since it was last read, and if so, says who it
    /// was: the app, when it is among the SIGKILLed, or else the other process that died of
    /// SIGKILL; after the grace, when lastcall's own SIGKILLs are about, only how many. The exit
    /// code stays the app's own (137).
    #[cold]
    fn check_oom(&mut self, main_killed: bool, other_killed: Option<Pid>) {
        let Some(oom) = &mut self.oom else { return };
        let new = oom.new_kills();
        if new == 0 {
            return;
        }
        self.counters.oom_kills = self.counters.oom_kills.wrapping_add(new);
        if !self.names_oom_kills {
            return;
        }
        let limit = oom.limit().map(|n| format!(" (limit {})", oom::format_bytes(n))).unwrap_or_default();
        if matches!(self.state.phase, Phase::Killing { .. }) {
            // lastcall's own SIGKILLs are out as well: which of the dead the kernel took cannot
            // be told, so nobody is blamed.
            warn!(event = logging::Event::OomKill.name(); "the OOM killer killed {new} process(es) in lastcall's cgroup{limit}");
            return;
        }
        if main_killed {
            error!(event = logging::Event::OomKill.name(), pid = self.child.as_raw(), signal = "SIGKILL", code = machine::KILLED_CODE; "app killed by the OOM killer{limit}");
        }
        if let Some(pid) = other_killed.filter(|_| !main_killed || new > 1) {
            warn!(event = logging::Event::OomKill.name(), pid = pid.as_raw(), signal = "SIGKILL";
                  "process {pid} killed by the OOM killer{limit}; the app runs on without it");
        }
    }

    #[cold]
    fn log_forward(&self, sig: Sig, to: Sig, sender: libc::pid_t, result: nix::Result<()>) {
        let (whom, child) = (self.whom(), self.child);
        let rewritten = if to == sig { String::new() } else { format!(" as {to}") };
        match result {
            Ok(()) => debug!(event = logging::Event::Forwarded.name(), signal = to.to_string().as_str(); "forwarded {sig} from pid {sender}{rewritten} to {whom} {child}"),
            Err(e) => debug!("cannot forward {sig}{rewritten} to {whom} {child}: {e}"),
        }
    }

    /// dumb-init's rule: stop the child (with SIGSTOP unless rewritten), then stop ourselves,
    /// so that Ctrl-Z in a shell suspends the whole job. SIGCONT is forwarded as usual.
    fn suspend(&mut self, sig: Sig, to: Option<Sig>) {
        if let Some(to) = to {
            if let Err(e) = self.send_to_child(to) {
                debug!("cannot send {to} to the child: {e}");
            }
            debug!("{sig}: stopped the child with {to}");
        }
        debug!("{sig}: stopping lastcall");
        let _ = sys::kill(self.me.as_raw(), Sig::STOP);
    }

    /// Steps the machine and carries out its actions; `Some(code)` when it is time to exit.
    #[inline(never)]
    fn handle(&mut self, event: Event, now: Instant) -> Option<i32> {
        let (state, actions) = machine::step(self.state, event, now, &self.policy);
        self.state = state;
        let mut exit = None;
        for &action in actions.iter() {
            match action {
                Action::Timeline(note) => self.note(note, now),
                Action::Unready => self.unready(),
                Action::Forward(sig) => self.forward_stop(sig, now),
                Action::SignalAll(sig) => self.signal_all(sig, now),
                Action::SignalOthers(sig) => self.signal_others(sig, now),
                Action::Exit(code) => exit = Some(code),
            }
        }
        if exit.is_some() {
            if let Some(file) = &mut self.ready_file {
                file.remove();
            }
        }
        exit
    }

    /// Shutdown has begun: the ready file goes, /ready answers 503 (the health status is read
    /// off the phase), and systemd hears that the service is stopping, with time to do it; each
    /// only where there is one.
    fn unready(&mut self) {
        self.ready = false;
        if logging::json() {
            let what = match (self.ready_file.is_some(), self.health.is_some()) {
                (true, true) => "the ready file goes, /ready answers 503",
                (true, false) => "the ready file goes",
                (false, true) => "/ready answers 503",
                (false, false) => "no ready file or health endpoint to withdraw",
            };
            let systemd = if self.notify.is_some() { "; systemd hears STOPPING=1" } else { "" };
            info!(event = logging::Event::Unready.name(); "unready: {what}{systemd}");
        }
        if let Some(file) = &mut self.ready_file {
            file.remove();
        }
        if let Some(notify) = &mut self.notify {
            let mut message = String::from("STOPPING=1\n");
            if let Some(grace) = self.policy.grace {
                // EXTEND_TIMEOUT_USEC only ever lengthens systemd's stop timeout, so asking for
                // the whole sequence plus a margin is harmless when that timeout is longer.
                let total = self.policy.pre_stop.saturating_add(grace).saturating_add(KILL_WAIT + Duration::from_secs(1));
                message.push_str(&format!("EXTEND_TIMEOUT_USEC={}\n", total.as_micros()));
            }
            notify.send(message.as_bytes());
        }
    }

    fn note(&mut self, note: Note, now: Instant) {
        let first = self.shutdown_at.is_none();
        self.shutdown_at.get_or_insert(now);
        let at = logging::Elapsed(now.saturating_duration_since(self.clock_zero));
        let ms = self.elapsed_ms(now);
        match note {
            Note::Received(sig) => {
                info!(event = logging::Event::Signal.name(), signal = sig.to_string().as_str(), elapsed_ms = ms; "{at} received {sig}");
                if first {
                    self.note_deadline(&at, now);
                }
            }
            Note::PreStopStarted => {
                info!(event = logging::Event::PreStop.name(), elapsed_ms = ms;
                      "{at} pre-stop: the app keeps running for {}", logging::Millis(self.policy.pre_stop))
            }
            Note::PreStopEnded => info!(event = logging::Event::PreStop.name(), elapsed_ms = ms; "{at} pre-stop ended"),
            Note::PreStopCut => info!(event = logging::Event::PreStop.name(), elapsed_ms = ms; "{at} pre-stop cut short"),
            Note::GraceExpired => info!(event = logging::Event::GraceExpired.name(), signal = "SIGKILL", elapsed_ms = ms;
                                        "{at} grace expired: sent SIGKILL to every remaining process"),
        }
    }

    /// When lastcall will escalate, said once at the first termination signal, from the deadline
    /// the machine has just set: the grace's end, or the pre-stop's end plus the grace. A second
    /// signal that cuts the pre-stop short brings it forward.
    fn note_deadline(&self, at: &logging::Elapsed, now: Instant) {
        let pre_stop = logging::Millis(self.policy.pre_stop);
        let (kill_at, budget) = match (self.state.phase, self.policy.grace) {
            (_, None) => {
                info!(event = logging::Event::Deadline.name(), elapsed_ms = 0u64; "{at} no SIGKILL: the grace is unlimited");
                return;
            }
            (Phase::PreStop { until, .. }, Some(grace)) => {
                (machine::later(until, grace), format!("pre-stop {pre_stop} + grace {}", logging::Millis(grace)))
            }
            (Phase::Draining { until: Some(until) }, Some(grace)) => (until, format!("grace {}", logging::Millis(grace))),
            // Already killing, or no deadline after all: nothing to promise.
            _ => return,
        };
        let kill_at_ms = u64::try_from(kill_at.saturating_duration_since(now).as_millis()).unwrap_or(u64::MAX);
        let when = logging::Elapsed(kill_at.saturating_duration_since(self.clock_zero));
        info!(event = logging::Event::Deadline.name(), kill_at_ms = kill_at_ms, elapsed_ms = 0u64;
              "{at} SIGKILL at {when} if the app is still running ({budget})");
    }

    /// Milliseconds since the first termination signal (0 before it), for json's elapsed_ms.
    pub(super) fn elapsed_ms(&self, now: Instant) -> u64 {
        self.shutdown_at.map_or(0, |t| u64::try_from(now.saturating_duration_since(t).as_millis()).unwrap_or(u64::MAX))
    }

    /// To the child's process group, or the child alone with --single-child: only while
    /// lastcall can show that it is still the app's (`app`).
    #[inline(always)]
    fn send_to_child(&mut self, sig: Sig) -> nix::Result<()> {
        match self.app() {
            Some(target) => self.send(target, sig),
            None => Err(nix::errno::Errno::ESRCH),
        }
    }

    /// What the app's signals go to, if lastcall can show it is still the app's. The main child
    /// is addressed through its pidfd (by pid where the kernel has none, which is as safe until
    /// it is reaped: only then may its pid be given to another process), and not at all once
    /// reaped. Its group, whose id is the main child's pid P, while the main child is unreaped
    /// (a zombie still holds P); after that, while no process has pid P. The kernel gives no
    /// process a pid that is still a group's id, so while the app's group has a member, P is
    /// nobody's; once the group is empty, P is free, and a process that gets it and leads a
    /// group of its own (the only way to make a group P) has pid P.
    #[inline(always)]
    pub(super) fn app(&mut self) -> Option<Target> {
        let reaped = self.state.main.is_some();
        if self.single_child {
            return (!reaped).then_some(Target::Main);
        }
        (!reaped || self.group_is_the_apps()).then_some(Target::Group)
    }

    /// After the main child is reaped: no process has its pid (see `app`).
    #[cold]
    pub(super) fn group_is_the_apps(&self) -> bool {
        sys::kill(self.child.as_raw(), Sig(0)) == Err(nix::errno::Errno::ESRCH)
    }

    #[inline(always)]
    fn send(&self, target: Target, sig: Sig) -> nix::Result<()> {
        match (target, &self.child_fd) {
            (Target::Main, Some(fd)) => sys::pidfd_send_signal(std::os::fd::AsFd::as_fd(fd), sig),
            (Target::Main, None) => sys::kill(self.child.as_raw(), sig),
            (Target::Group, _) => sys::kill(-self.child.as_raw(), sig),
        }
    }

    fn whom(&self) -> &'static str {
        if self.single_child {
            "child"
        } else {
            "process group"
        }
    }

    /// The shutdown's stop signal, which the timeline shows.
    fn forward_stop(&mut self, sig: Sig, now: Instant) {
        let whom = self.whom();
        if self.single_child && self.state.main.is_some() {
            // The child is reaped (dumb-init's TERM at its exit, with -c): its pid may be
            // another process's by now.
            return;
        }
        let Some(target) = self.app() else {
            debug!("not forwarding {sig}: the app's {whom} {} is gone", self.child);
            return;
        };
        let ms = self.elapsed_ms(now);
        let sent = with_cont(sig, self.cont_after_stop, |sig| self.send(target, sig));
        if sent.is_ok() {
            metrics::count(&mut self.counters.forwarded, sig);
        }
        match sent {
            Ok(()) if self.single_child => {
                info!(event = logging::Event::Forwarded.name(), signal = sig.to_string().as_str(), pid = self.child.as_raw(), elapsed_ms = ms;
                      "{}forwarded {sig} to {whom} {}", self.elapsed(now), self.child)
            }
            Ok(()) => info!(event = logging::Event::Forwarded.name(), signal = sig.to_string().as_str(), pgid = self.child.as_raw(), elapsed_ms = ms;
                            "{}forwarded {sig} to {whom} {}", self.elapsed(now), self.child),
            Err(e) => debug!("cannot forward {sig} to {whom} {}: {e}", self.child),
        }
        // json only: text has no line of its own for the grace (a peer's name prints none).
        if let (true, Phase::Draining { until: Some(_) }, Some(grace)) = (logging::json(), self.state.phase, self.policy.grace) {
            info!(event = logging::Event::Grace.name(), elapsed_ms = ms; "grace: {} until SIGKILL", logging::Millis(grace));
        }
    }

    /// The time on the timeline's clock, with the space that follows it.
    pub(super) fn elapsed(&self, now: Instant) -> String {
        format!("{} ", logging::Elapsed(now.saturating_duration_since(self.clock_zero)))
    }
}

/// A reaped process other than the app, as --warn-reaping or the debug log show it.
#[cold]
fn log_reap(warn_reaping: bool, pid: Pid, status: libc::c_int) {
    // Reached for the orphans the machine waits for too: nothing to decode when nothing is said.
    if !warn_reaping && !log::log_enabled!(log::Level::Debug) {
        return;
    }
    let status = Status::from_raw(status);
    if warn_reaping {
        warn!(event = logging::Event::Reaped.name(), pid = pid.as_raw(), status = status.to_string().as_str();
              "Reaped zombie process with pid={pid}: {status}");
    } else {
        debug!(event = logging::Event::Reaped.name(), pid = pid.as_raw(), status = status.to_string().as_str(); "reaped pid {pid}: {status}");
    }
}

/// A death by SIGKILL is when the OOM killer may have been at work.
#[inline(always)]
fn died_of_sigkill(status: libc::c_int) -> bool {
    libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL
}

/// `reap_quietly`'s work for each child reaped: an orphan is counted (and an OOM kill looked
/// for), and the main child ends the pass. A type rather than a closure, so that it is inlined
/// into the loop however many copies of the loop there are.
struct Quietly<'a>(&'a mut Supervisor);

impl reap::OnExit<libc::c_int> for Quietly<'_> {
    #[inline(always)]
    fn exited(&mut self, pid: Pid, status: libc::c_int) -> ControlFlow<libc::c_int> {
        if pid == self.0.child {
            return ControlFlow::Break(status);
        }
        self.0.counters.orphans_reaped = self.0.counters.orphans_reaped.wrapping_add(1);
        if died_of_sigkill(status) {
            self.0.check_oom(false, Some(pid));
        }
        ControlFlow::Continue(())
    }
}
