//! The event loop: wait for signals in sigtimedwait (with a timeout that ends at the next
//! deadline; the health and notify sockets raise a signal when readable, so they need no poll), turn
//! what happened into events, and carry out the actions `machine::step` returns. A signal outside the shutdown (HUP, USR1, WINCH, ...) is forwarded
//! straight from the routing table instead: the machine would only echo it back. No threads and
//! no periodic timer: with no deadline pending, lastcall sleeps until something arrives.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use log::{debug, error, info, warn};
use nix::sys::signal::SigSet;
use nix::unistd::{getpid, Pid};

use crate::cli::{Config, Subreaper};
use crate::error::{Ending, Error};
use crate::health::{self, Health};
use crate::machine::{self, Action, Event, Note, Policy, State};
use crate::notify::NotifyRelay;
use crate::ready::ReadyFile;
use crate::personality::JobControl;
use crate::signals::{self, Route, Routes, Sig, Suspend};
use crate::sys::{self, Detach};
use crate::reap::Status;
use crate::{child, reap};

/// How long SIGKILLed processes get to be reaped before lastcall stops waiting for them
/// (a process stuck in uninterruptible sleep never dies).
const KILL_WAIT: Duration = Duration::from_secs(3);

/// Sets up everything the loop needs, starts the command and supervises it to the end.
/// Returns how lastcall ends. Signals must already be blocked; `mask` is the signal mask
/// lastcall was started with, which the app gets.
pub fn run(config: Config, mask: SigSet) -> Result<Ending, Error> {
    // Before lastcall opens any fd of its own.
    let mut inherited_fds = child::inherited_fds();
    // The log's own non-blocking stderr, opened before this list was made, is lastcall's.
    inherited_fds.retain(|&fd| Some(fd) != crate::logging::own_fd());
    sys::take_dispositions();
    let handled = signals::handled_set();
    let me = getpid();
    let pid1 = me.as_raw() == 1;
    if let Some(sig) = config.parent_death_signal {
        sys::set_parent_death_signal(sig).map_err(|source| Error::Setup { what: "cannot set the parent-death signal".into(), source })?;
    }
    if !pid1 && config.subreaper != Subreaper::Off {
        // Orphaned grandchildren (a service's double-forked daemon) come back to us to be reaped.
        // qemu-user refuses this prctl (EINVAL): fatal only when it was asked for.
        match nix::sys::prctl::set_child_subreaper(true) {
            Ok(()) => {}
            Err(e) if config.subreaper == Subreaper::Asked => return Err(Error::setup("cannot become a child subreaper", e)),
            Err(e) => warn!("cannot become a child subreaper ({e}); going on without: orphans go to the real init (--no-subreaper says so quietly)"),
        }
    }
    if !pid1 && config.subreaper == Subreaper::Off && config.personality.warn_without_subreaper {
        warn!(
            "not running as PID 1 and not registered as a child subreaper: orphans will not be re-parented to {0}, \
             so zombie reaping won't work. Use -s or set TINI_SUBREAPER to register {0} as a child subreaper, or run it as PID 1.",
            config.personality.name
        );
    }
    if config.pause {
        return Ok(Ending::Code(pause(&handled)));
    }

    // Everything that can fail on bad input fails now, before the app starts.
    let mut ready_file = match &config.ready_file {
        Some(path) => Some(ReadyFile::prepare(path).map_err(|source| Error::Setup {
            what: format!("cannot create the ready file {}", path.display()),
            source,
        })?),
        None => None,
    };
    let health = match config.health_listen {
        Some(addr) => Some(Health::bind(addr).map_err(|source| Error::Setup {
            what: format!("cannot listen on {addr} for health checks"),
            source,
        })?),
        None => None,
    };
    let notify = match std::env::var("NOTIFY_SOCKET") {
        Ok(socket) if !socket.is_empty() => NotifyRelay::new(&socket)
            .map_err(|source| Error::Setup { what: "cannot relay NOTIFY_SOCKET".into(), source })?,
        _ => None,
    };

    let millis = |d: Duration| OsString::from(d.as_millis().to_string());
    let mut env = vec![];
    // Under a peer's name the app's environment stays the peer's, unless a deadline was set.
    if config.personality.deadlines_in_env || !config.pre_stop.is_zero() || config.grace.is_some() {
        env.push(("LASTCALL_PRE_STOP_MS".to_string(), millis(config.pre_stop)));
        env.push(("LASTCALL_GRACE_MS".to_string(), millis(config.grace.unwrap_or_default())));
    }
    if let Some(relay) = &notify {
        env.push(("NOTIFY_SOCKET".into(), relay.child_socket_name().into()));
    }
    let detach = match (config.setsid, config.single_child && !config.personality.own_group_for_single_child) {
        (true, _) => Detach::Session,
        (false, true) => Detach::Inherit,
        (false, false) => Detach::Group,
    };
    let launch = child::Launch { argv: &config.command, detach, env, mask: &mask };
    let started = match child::spawn(&launch) {
        Ok(started) => started,
        Err(e @ Error::Exec { .. }) => return Ok(Ending::Code(exec_failed(&config, e))),
        Err(e) => return Err(e),
    };
    let child = started.pid;
    debug!("started {:?} as pid {child}", config.command);
    child::close_inherited(&inherited_fds);
    // Never keep a mount busy; the child has its own working directory.
    if let Err(e) = nix::unistd::chdir("/") {
        warn!("cannot change directory to /: {e}");
    }
    if let Some(file) = &mut ready_file {
        if let Err(e) = file.create() {
            warn!("cannot create the ready file {}: {e}", file.path().display());
        }
    }

    let policy = Policy {
        pre_stop: config.pre_stop,
        grace: config.grace,
        stop_signal: config.stop_signal,
        rewrite: config.rewrite.clone(),
        kill_wait: KILL_WAIT,
        unready_on: config.unready_on,
        on_main_exit: config.personality.on_main_exit,
        single_child: config.single_child,
    };
    let job_control = match (config.setsid, config.personality.job_control) {
        (true, _) => Some(Suspend::WithStop),
        (false, JobControl::DumbInit) => Some(Suspend::AsReceived),
        (false, JobControl::Tini) => None,
    };
    let mut supervisor = Supervisor {
        routes: Routes::new(job_control, &config.rewrite),
        policy,
        handled,
        me,
        pid1,
        child,
        single_child: config.single_child,
        warn_reaping: config.warn_reaping,
        state: State::START,
        ready: true,
        shutdown_at: None,
        ready_file,
        health,
        notify,
        proc: ProcReader::new(),
        warned_blind: false,
        main_status: None,
    };
    let code = started.early_signals.iter().find_map(|&(sig, sender)| supervisor.on_signal(sig, sender));
    let code = code.unwrap_or_else(|| supervisor.event_loop());
    Ok(if config.remap_exit.contains(&code) {
        Ending::Code(0)
    } else {
        match supervisor.main_status {
            // Transparent: the parent reads the app's own death (not as PID 1, which cannot).
            Some(Status::Signaled(sig, _)) if !pid1 && code == 128 + sig.0 => Ending::Signal(sig),
            _ => Ending::Code(code),
        }
    })
}

/// The command could not be started: the exit code the personality gives that (tini's is its
/// child's exit code, so `-e` maps it too).
fn exec_failed(config: &Config, e: Error) -> i32 {
    error!("{e}");
    let p = config.personality;
    let code = e.exit_code_as(p);
    let remapped = matches!(e, Error::Exec { .. }) && p.remap_exec_failure && config.remap_exit.contains(&code);
    if remapped {
        0
    } else {
        code
    }
}

/// catatonit's pause mode: no command; reap whatever arrives, exit on a termination signal.
fn pause(handled: &SigSet) -> i32 {
    loop {
        match sys::wait_for_signal(handled) {
            Ok((Sig::CHLD, _)) => {
                reap::reap_all(Pid::from_raw(0), |_, _| {});
            }
            Ok((sig, _)) if sig.is_termination() => return 0,
            Ok(_) => {}
            Err(e) => warn!("cannot wait for signals: {e}"),
        }
    }
}

struct Supervisor {
    routes: Routes,
    policy: Policy,
    /// The blocked signals, waited for with sigtimedwait: the loop's one wait.
    handled: SigSet,
    me: Pid,
    pid1: bool,
    /// The main child's pid, which is also its process group id (unless `Detach::Inherit`,
    /// where only the child itself is ever signalled).
    child: Pid,
    single_child: bool,
    warn_reaping: bool,
    state: State,
    /// Whether /ready answers 200: until the machine says Unready.
    ready: bool,
    /// When the first termination signal arrived: the timeline's zero.
    shutdown_at: Option<Instant>,
    ready_file: Option<ReadyFile>,
    health: Option<Health>,
    notify: Option<NotifyRelay>,
    /// How the main child ended, once it is reaped: lastcall ends the same way.
    main_status: Option<Status>,
    proc: ProcReader,
    /// Whether lastcall has said that /proc does not show it everything (once is enough).
    warned_blind: bool,
}

impl Supervisor {
    fn event_loop(&mut self) -> i32 {
        let sockets = self.notify.is_some() || self.health.is_some();
        let mut health_deadline = if sockets { self.watch_sockets(Instant::now()) } else { None };
        loop {
            // Nothing but signals to wait for: sleep in sigwaitinfo, one syscall a wake-up.
            if !sockets && self.state.deadline().is_none() {
                match sys::wait_for_signal(&self.handled) {
                    Ok((sig, sender)) => {
                        if let Some(code) = self.on_signal(sig, sender) {
                            return code;
                        }
                    }
                    Err(e) => warn!("cannot wait for signals: {e}"),
                }
                continue;
            }
            // The clock is read only when something has a deadline.
            let timeout = match earliest(self.state.deadline(), health_deadline) {
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
                        health_deadline = self.watch_sockets(now);
                        continue;
                    }
                    Some(deadline - now)
                }
            };
            // The one wait, for signals and sockets alike: the sockets raise a signal.
            match sys::wait_for_signal_until(&self.handled, timeout) {
                Ok(Some((_, _, true))) => health_deadline = self.watch_sockets(Instant::now()),
                Ok(Some((sig, sender, false))) => {
                    if let Some(code) = self.on_signal(sig, sender) {
                        return code;
                    }
                }
                Ok(None) => {}
                Err(e) => warn!("cannot wait for signals: {e}"),
            }
        }
    }

    /// Serves the sockets: relays what the notify socket holds, answers and times out health
    /// connections, accepts new ones, and has the kernel signal lastcall for each new socket. What
    /// reached a new socket before that raised nothing, so the sockets are served again then
    /// (a few rounds at most: a connection flood must not keep signals waiting; anything left
    /// is read at the connection's deadline). Returns the health endpoint's next deadline.
    #[cold]
    fn watch_sockets(&mut self, now: Instant) -> Option<Instant> {
        // Every socket is tried (which one raised the signal does not matter), and each read
        // stops at EAGAIN.
        const EVERY: [bool; 1 + health::MAX_CONNECTIONS] = [true; 1 + health::MAX_CONNECTIONS];
        for _round in 0..3 {
            let mut new = false;
            if let Some(n) = &mut self.notify {
                n.relay();
            }
            if let Some(n) = &self.notify {
                new |= self.signal_when_readable(n.fd());
            }
            let Some(h) = &mut self.health else {
                if !new {
                    return None;
                }
                continue;
            };
            h.service(&EVERY, health::Status { ready: self.ready }, now);
            for (fd, _) in h.fds() {
                match sys::signal_when_readable(fd, self.me) {
                    Ok(added) => new |= added,
                    Err(e) => debug!("health: cannot have the kernel signal a readable socket: {e}"),
                }
            }
            if !new {
                break;
            }
        }
        self.health.as_ref().and_then(Health::next_deadline)
    }

    fn signal_when_readable(&self, fd: std::os::fd::BorrowedFd<'_>) -> bool {
        sys::signal_when_readable(fd, self.me).unwrap_or_else(|e| {
            warn!("cannot have the kernel signal a readable socket: {e}");
            false
        })
    }

    /// Acts on one signal; `Some(code)` when it is time to exit.
    ///
    /// The common case, a signal to forward, is a table lookup and kill(): no clock, no state
    /// machine, and inlined into the loop. On this path the cache lines and pages touched cost
    /// more than the instructions run: calls out to musl's syscall wrappers and to this path's
    /// own helpers, elsewhere in the binary, measured 0.15-0.2 µs per signal (README,
    /// Performance). Everything else is out of line.
    #[inline(always)]
    fn on_signal(&mut self, sig: Sig, sender: libc::pid_t) -> Option<i32> {
        match self.routes.of(sig) {
            // A SIGPIPE lastcall caused itself, by writing a log line to a closed stderr, is not
            // the child's business. (Other signals from our own pid are real: one raised before
            // exec, while starting lastcall, carries the pid lastcall has.)
            Route::Forward(to) if sig != Sig::PIPE || sender != self.me.as_raw() => {
                let result = self.send_to_child(to);
                if log::log_enabled!(log::Level::Debug) {
                    self.log_forward(sig, to, sender, result);
                }
                None
            }
            Route::Reap => self.on_child_exit(),
            route => self.on_other_signal(route, sig, sender),
        }
    }

    /// SIGCHLD: reap. An orphan while the main child lives changes nothing, so a burst of them
    /// costs neither the clock nor the machine.
    #[inline(never)]
    fn on_child_exit(&mut self) -> Option<i32> {
        let reaped = self.reap();
        if reaped.main.is_some() {
            self.main_status = reaped.main;
        }
        let main = reaped.main.map(Status::code);
        if main.is_none() && (reaped.others == 0 || !self.state.cares_about_orphans()) {
            return None;
        }
        let now = Instant::now();
        if let Some(code) = main {
            // The timeline's last line; an app that simply ends is no news.
            if self.shutdown_at.is_some() {
                info!("{}child exited with status {code}", self.elapsed(now));
            } else {
                debug!("child exited with status {code}");
            }
        }
        self.handle(Event::Reaped { main, children_left: reaped.children_left }, now)
    }

    #[inline(never)]
    fn on_other_signal(&mut self, route: Route, sig: Sig, sender: libc::pid_t) -> Option<i32> {
        match route {
            Route::Forward(_) | Route::Drop => {
                debug!("not forwarding {sig} from pid {sender}");
                None
            }
            Route::Suspend(to) => {
                self.suspend(sig, to);
                None
            }
            Route::Shutdown => {
                debug!("received {sig} from pid {sender}");
                self.handle(Event::Termination(sig), Instant::now())
            }
            Route::Reap => self.on_child_exit(),
        }
    }

    #[cold]
    fn log_forward(&self, sig: Sig, to: Sig, sender: libc::pid_t, result: nix::Result<()>) {
        let (whom, child) = (self.whom(), self.child);
        let rewritten = if to == sig { String::new() } else { format!(" as {to}") };
        match result {
            Ok(()) => debug!("forwarded {sig} from pid {sender}{rewritten} to {whom} {child}"),
            Err(e) => debug!("cannot forward {sig}{rewritten} to {whom} {child}: {e}"),
        }
    }

    /// dumb-init's rule: stop the child (with SIGSTOP unless rewritten), then stop ourselves,
    /// so that Ctrl-Z in a shell suspends the whole job. SIGCONT is forwarded as usual.
    fn suspend(&self, sig: Sig, to: Option<Sig>) {
        if let Some(to) = to {
            if let Err(e) = self.send_to_child(to) {
                debug!("cannot send {to} to the child: {e}");
            }
            debug!("{sig}: stopped the child with {to}");
        }
        debug!("{sig}: stopping lastcall");
        let _ = sys::kill(self.me.as_raw(), Sig::STOP);
    }

    fn reap(&self) -> reap::Reaped {
        let warn_reaping = self.warn_reaping;
        reap::reap_all(self.child, |pid, status| {
            if warn_reaping {
                warn!("reaped zombie process {pid}: {}", Status::from_raw(status));
            } else {
                debug!("reaped pid {pid}: {}", Status::from_raw(status));
            }
        })
    }

    /// Steps the machine and carries out its actions; `Some(code)` when it is time to exit.
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
    /// off the phase), and systemd hears that the service is stopping, with time to do it.
    fn unready(&mut self) {
        self.ready = false;
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
        let t = self.shutdown_at.get_or_insert(now);
        let at = format_elapsed(now.duration_since(*t));
        match note {
            Note::Received(sig) => info!("{at} received {sig}"),
            Note::PreStopStarted => {
                info!("{at} pre-stop: the app keeps running for {}", format_elapsed_bare(self.policy.pre_stop))
            }
            Note::PreStopEnded => info!("{at} pre-stop ended"),
            Note::PreStopCut => info!("{at} pre-stop cut short"),
            Note::GraceExpired => info!("{at} grace expired: sent SIGKILL to every remaining process"),
        }
    }

    /// To the child's process group, or the child alone with --single-child.
    #[inline(always)]
    fn send_to_child(&self, sig: Sig) -> nix::Result<()> {
        let target = if self.single_child { self.child.as_raw() } else { -self.child.as_raw() };
        sys::kill(target, sig)
    }

    fn whom(&self) -> &'static str {
        if self.single_child {
            "child"
        } else {
            "process group"
        }
    }

    /// The shutdown's stop signal, which the timeline shows.
    fn forward_stop(&self, sig: Sig, now: Instant) {
        let whom = self.whom();
        if self.single_child && self.state.main_code.is_some() {
            // The child is reaped (dumb-init's TERM at its exit, with -c): its pid may be
            // another process's by now.
            return;
        }
        let target = if self.single_child { self.child.as_raw() } else { -self.child.as_raw() };
        match send_stop_signal(target, sig) {
            Ok(()) => info!("{}forwarded {sig} to {whom} {}", self.elapsed(now), self.child),
            Err(e) => debug!("cannot forward {sig} to {whom} {}: {e}", self.child),
        }
    }

    /// Everything lastcall still has: as PID 1 the whole namespace; otherwise the child's group
    /// and every direct child (adopted orphans included, which may have left the group). SIGKILL
    /// goes further: see `kill_all`.
    fn signal_all(&mut self, sig: Sig, now: Instant) {
        if sig == Sig::KILL {
            return self.kill_all();
        }
        info!("{}sent {sig} to every remaining process", self.elapsed(now));
        if self.pid1 {
            if let Err(e) = send_stop_signal(-1, sig) {
                debug!("kill(-1, {sig}): {e}");
            }
            return;
        }
        let _ = send_stop_signal(-self.child.as_raw(), sig);
        for (pid, _) in self.descendants_in_view().unwrap_or_default() {
            let _ = send_stop_signal(pid, sig);
        }
    }

    /// SIGKILL to everything lastcall has. As PID 1, kill(-1). Otherwise the child's group and
    /// every descendant, found through /proc: each is killed before its children are read, so
    /// none can fork behind the sweep (the kernel fails a fork once SIGKILL is pending). What
    /// still escapes (children left to lastcall by a parent that died during the sweep) comes
    /// back to the subreaper, and the reap that follows sends the next sweep (machine.rs). The
    /// timeline line is the machine's GraceExpired note, so the sweeps themselves are quiet.
    fn kill_all(&mut self) {
        if self.pid1 {
            if let Err(e) = sys::kill(-1, Sig::KILL) {
                debug!("kill(-1, SIGKILL): {e}");
            }
            return;
        }
        let _ = sys::kill(-self.child.as_raw(), Sig::KILL);
        let (killed, complete) = if proc_is_ours(self.me) { self.kill_descendants() } else { (0, false) };
        debug!("SIGKILL to {killed} descendants");
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
    fn signal_others(&mut self, sig: Sig, now: Instant) {
        info!("{}sent {sig} to the processes outside the app's group", self.elapsed(now));
        match self.descendants_in_view() {
            Some(processes) => {
                for (pid, pgrp) in processes {
                    if pgrp != self.child.as_raw() {
                        let _ = send_stop_signal(pid, sig);
                    }
                }
            }
            // As PID 1 without our own /proc nobody can be told apart: better twice than never.
            None if self.pid1 => {
                let _ = send_stop_signal(-1, sig);
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

    fn elapsed(&self, now: Instant) -> String {
        match self.shutdown_at {
            Some(t) => format!("{} ", format_elapsed(now.duration_since(t))),
            None => String::new(),
        }
    }
}

/// A stop signal of the shutdown, followed by SIGCONT as systemd does: a stopped process (SIGSTOP,
/// Ctrl-Z elsewhere, a debugger) cannot run its handler until it is continued, and would only
/// meet the SIGKILL at the deadline. SIGCONT is harmless to one that runs. Not after SIGKILL,
/// SIGCONT itself, or a signal that stops.
fn send_stop_signal(target: libc::pid_t, sig: Sig) -> nix::Result<()> {
    let sent = sys::kill(target, sig);
    if !matches!(sig, Sig::KILL | Sig::CONT | Sig::STOP | Sig::TSTP | Sig::TTIN | Sig::TTOU) {
        let _ = sys::kill(target, Sig::CONT);
    }
    sent
}

/// Whether /proc belongs to our PID namespace: a pid read from another namespace's /proc would
/// name some other process here.
fn proc_is_ours(me: Pid) -> bool {
    std::fs::read_link("/proc/self").is_ok_and(|p| p.as_os_str() == me.to_string().as_str())
}

/// Whether a /proc read failed because the process is gone (and so has nothing to find).
fn is_gone(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ESRCH))
}

/// /proc reads that work when lastcall is out of file descriptors: a spare one, held from the
/// start, is given up for the read and taken again after. Without it a fork bomb or a flood of
/// connections that used up the fds would hide exactly the processes that must be killed.
struct ProcReader {
    spare: Option<std::fs::File>,
    /// The pids the last `children` or `list` found, kept to reuse the allocation.
    found: Vec<libc::pid_t>,
}

impl ProcReader {
    fn new() -> ProcReader {
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
    fn children(&mut self, pid: libc::pid_t) -> std::io::Result<()> {
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
    fn list(&mut self, dir: &str) -> std::io::Result<()> {
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

    /// The process group in /proc/PID/stat (the third field after the command name).
    fn process_group(&mut self, pid: libc::pid_t) -> Option<libc::pid_t> {
        let stat = self.with_fd(|| std::fs::read_to_string(format!("/proc/{pid}/stat"))).ok()?;
        stat.rsplit_once(')')?.1.split_whitespace().nth(2)?.parse().ok()
    }
}

/// The earlier of two deadlines, if any.
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
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
    fn elapsed_format() {
        assert_eq!(format_elapsed(Duration::from_millis(2001)), "+2.001s");
        assert_eq!(format_elapsed(Duration::ZERO), "+0.000s");
    }
}
