//! The shutdown state machine: a pure `step(state, event, now, policy) -> (state, actions)`.
//! It does no I/O; the supervisor feeds it events and carries out the actions.
//!
//! "term" is a termination signal (TERM, INT, QUIT); "rw(s)" is s after `--rewrite` (which may
//! drop it: then nothing is sent); "stop(t)" is `--stop-signal` if set, else rw(t); "pending" is the signal that started the pre-stop; "grace" is `now + --grace`, or no
//! deadline when `--grace 0`. "main exited" means the main child has been reaped; "others" means
//! lastcall still has children after that. Forward goes to the child's process group; SignalAll
//! goes to everything lastcall still has (as PID 1: the whole namespace); SignalOthers to all of
//! that outside the child's group, which already had its stop signal (a second TERM makes some
//! apps quit at once). Each of the three sends SIGCONT right after a stop signal (not after
//! SIGKILL), as systemd does, so that a stopped process runs its handler; not under a peer's
//! name (`Personality::cont_after_stop`).
//!
//! | phase      | event                           | next phase          | actions                      |
//! |------------|---------------------------------|---------------------|------------------------------|
//! | Running    | term t, pre-stop > 0            | PreStop(t)          | note, Unready¹               |
//! | Running    | term t, pre-stop = 0            | Draining(grace)     | note, Unready, Forward(stop(t)) |
//! | PreStop    | term t (a second one)           | Draining(grace)     | note, Unready², Forward(stop(pending)) |
//! | PreStop    | deadline                        | Draining(grace)     | note, Unready², Forward(stop(pending)) |
//! | Draining   | term t, main alive              | Draining (same)     | note, Forward(stop(t))       |
//! | Draining   | term t, main exited             | Draining (same)     | note, SignalAll(stop(t))     |
//! | Draining   | deadline                        | Killing(kill wait)  | note, SignalAll(KILL)        |
//! | Killing    | term t                          | Killing (same)      | -                            |
//! | Killing    | deadline                        | Exited              | SignalAll(KILL), Exit(main's code, else 137) |
//! | any live   | main exited, no others          | Exited              | Exit(main's code)            |
//! | Running    | main exited, others             | Draining(grace)     | Unready, SignalAll(stop(TERM)) |
//! | PreStop    | main exited, others             | Draining(grace)     | Unready², SignalAll(stop(pending)) |
//! | Draining   | main exited, others             | Draining (same)     | SignalOthers(stop(TERM))     |
//! | Draining   | main exited, others, `-c`       | Draining (same)     | SignalAll(stop(TERM))        |
//! | Killing    | a reap, others                  | Killing(kill wait⁴) | SignalAll(KILL) (re-parented)|
//! | any live   | a reap, none left, main exited  | Exited              | Exit(main's code)            |
//! | any live   | app says STOPPING=1             | (same)              | Unready³                     |
//! | any live   | app says READY=1                | (same)              | -                            |
//! | any live   | main exited, on exit: Exit      | Exited              | Unready³, Exit(main's code)  |
//! | any live   | main exited, on exit: ForwardTermAndExit | Exited     | Unready³, Forward(stop(TERM)), Exit(main's code) |
//! | Exited     | anything                        | Exited              | -                            |
//!
//! An orphan reaped while the main child lives changes nothing outside Killing. Unready (remove
//! the ready file, answer 503, tell systemd STOPPING=1) comes first, before any signal.
//! In Killing, every reap sends SIGKILL again: the dead leave their children to lastcall (the
//! subreaper), and a fork bomb's setsid'd children reach no group. ⁴ Each death restarts the
//! kill wait, which bounds how long lastcall waits for processes that do not die at all (stuck in
//! uninterruptible sleep), but never past `KILL_WAITS` kill waits from the first SIGKILL, however
//! many die one after another; the last SIGKILL goes out as the wait ends. Only the note is logged: the
//! repeated SIGKILLs are silent.
//! ¹ with `--unready-on signal` (the default) only; ² with `--unready-on stop` only: readiness
//! then holds through the pre-stop and goes with the stop signal (KEP-1669's terminating
//! endpoints stay usable as a fallback while they are still ready). ³ if Unready has not gone out yet
//! (`History::unready`): in Running, or in PreStop with `--unready-on stop`.
//!
//! The two "on exit" rows are the peers' (`Policy::on_main_exit`, from the personality): tini
//! exits as soon as the main child does; dumb-init first sends the rest of the group TERM (as
//! rewritten), the way it forwards signals, so with `-c` nobody gets it. They come before every
//! other row for that event. Under lastcall's own name (`StopTheRest`) they never apply.
//!
//! An outer lastcall that steps aside for an inner one (`Config::step_aside`) runs the same rows
//! with no pre-stop, no rewrites and its backstop as the grace: the inner one's stop signal and
//! death go through "term t, pre-stop = 0" and "main exited, others", and the backstop is the
//! Draining deadline, so a TERM-deaf app under a dead or unwilling inner one still gets SIGKILL.
//!
//! Every other signal is forwarded as rw(s) in every live phase and changes nothing here, so it
//! never reaches `step()`: `signals::Routes` sends it on with one table lookup, without reading
//! the clock.
//!
//! The state carries the history the rows and their promises need (`History`): whether Unready
//! went out, whether a stop signal did (a rewrite to 0 sends none), when the grace and the
//! killing began, and how the app ended, unmapped (exit 143 and death by TERM stay apart until
//! the personality's table maps them). `step` records it from the actions it returns, in one
//! place, so that no row keeps it by hand.
//!
//! May import: reap (`Status`), signals.

use std::time::{Duration, Instant};

use crate::reap::Status;
use crate::signals::{self, Sig};

/// What the machine needs from the configuration.
#[derive(Clone, Debug)]
pub struct Policy {
    pub pre_stop: Duration,
    /// `None`: never escalate to SIGKILL.
    pub grace: Option<Duration>,
    pub stop_signal: Option<Sig>,
    /// Received → forwarded; `Sig(0)` drops.
    pub rewrite: Vec<(Sig, Sig)>,
    /// How long to wait for SIGKILLed processes to be reaped before giving up on them.
    pub kill_wait: Duration,
    pub unready_on: UnreadyOn,
    pub on_main_exit: OnMainExit,
    /// `-c`: the stop signal went to the main child alone, so the rest of its group has not had
    /// it when the main child exits mid-shutdown.
    pub single_child: bool,
}

/// What happens when the main child exits while other processes remain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnMainExit {
    /// lastcall's own: stop the rest within the grace (tini#180, dumb-init#212), then exit.
    StopTheRest,
    /// tini's: exit at once with the main child's status.
    Exit,
    /// dumb-init's: forward TERM (rewritten, if asked) as any signal is forwarded, then exit at once.
    ForwardTermAndExit,
}

/// When the app stops announcing readiness (`--unready-on`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnreadyOn {
    /// At the first termination signal, before the pre-stop.
    Signal,
    /// When the stop signal is forwarded, after the pre-stop.
    Stop,
}

impl Policy {
    /// What the shutdown sends for the termination signal `received`, if anything.
    fn stop(&self, received: Sig) -> Option<Sig> {
        self.stop_signal.or_else(|| signals::rewritten_or(&self.rewrite, received, received))
    }

    fn grace_deadline(&self, now: Instant) -> Option<Instant> {
        self.grace.map(|grace| later(now, grace))
    }

    /// Unready at the start of the pre-stop, or at its end.
    fn unready_at(&self, when: UnreadyOn) -> Option<Action> {
        (self.unready_on == when).then_some(Action::Unready)
    }
}

/// `now + d`, never panicking: the parser caps durations at a year, but should a deadline still
/// not fit the clock, the furthest one that does is as good as never.
pub fn later(now: Instant, d: Duration) -> Instant {
    let mut d = d;
    loop {
        match now.checked_add(d) {
            Some(t) => return t,
            None => d /= 2,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    Running,
    PreStop { until: Instant, pending: Sig },
    Draining { until: Option<Instant> },
    /// `until`: the kill wait's end, which each death moves on; `end`: the furthest it may go.
    Killing { until: Instant, end: Instant },
    Exited,
}

impl Phase {
    /// Every phase's name, in the machine's order: /metrics has a series for each.
    pub const NAMES: [&'static str; 5] = ["running", "pre_stop", "draining", "killing", "exited"];

    /// The phase's name in /metrics, one of `NAMES`.
    pub fn name(&self) -> &'static str {
        // Destructured, so that a phase added here without its name (or the reverse) fails to build.
        let [running, pre_stop, draining, killing, exited] = Self::NAMES;
        match self {
            Phase::Running => running,
            Phase::PreStop { .. } => pre_stop,
            Phase::Draining { .. } => draining,
            Phase::Killing { .. } => killing,
            Phase::Exited => exited,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub phase: Phase,
    /// How the main child ended, once it is reaped: as the kernel said, not yet a code.
    pub main: Option<Status>,
    pub history: History,
}

/// What the shutdown has done so far, read off the actions `step` returned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct History {
    /// Unready was announced.
    pub unready: bool,
    /// A stop signal went out: forwarded, or sent to all or to the others (not SIGKILL).
    pub stop_sent: bool,
    /// When the grace began (the first entry into Draining), with or without a deadline.
    pub grace_from: Option<Instant>,
    /// When the first SIGKILL went out.
    pub killed_from: Option<Instant>,
}

impl State {
    pub const START: State = State {
        phase: Phase::Running,
        main: None,
        history: History { unready: false, stop_sent: false, grace_from: None, killed_from: None },
    };

    /// When the machine next wants a `Deadline` event, if ever. Inlined: the signal loop asks on
    /// every turn.
    #[inline(always)]
    pub fn deadline(&self) -> Option<Instant> {
        match self.phase {
            Phase::PreStop { until, .. } | Phase::Killing { until, .. } => Some(until),
            Phase::Draining { until } => until,
            Phase::Running | Phase::Exited => None,
        }
    }

    /// Whether a reap that is not the main child's can change anything: once the main child is
    /// gone (lastcall waits for the rest), or while killing. Until then the supervisor need not
    /// read the clock or step the machine for each orphan it reaps.
    #[inline(always)]
    pub fn cares_about_orphans(&self) -> bool {
        self.main.is_some() || matches!(self.phase, Phase::Killing { .. })
    }

    /// The code lastcall's own table gives the app's end: its exit code, 128+N for signal N,
    /// or 137 for an app it had to give up on unreaped. (The personality maps it further.)
    pub fn exit_code(&self) -> i32 {
        self.main.map_or(KILLED_CODE, Status::code)
    }

    /// What `actions`, returned at `now`, add to the history; the phase is already the new one.
    fn record(mut self, actions: &Actions, before: Phase, now: Instant) -> State {
        let h = &mut self.history;
        for action in actions.iter() {
            match *action {
                Action::Unready => h.unready = true,
                Action::SignalAll(Sig::KILL) => {
                    h.killed_from.get_or_insert(now);
                }
                Action::Forward(_) | Action::SignalAll(_) | Action::SignalOthers(_) => h.stop_sent = true,
                Action::Timeline(_) | Action::Exit(_) => {}
            }
        }
        if matches!(self.phase, Phase::Draining { .. }) && !matches!(before, Phase::Draining { .. }) {
            h.grace_from.get_or_insert(now);
        }
        self
    }

    fn with(self, phase: Phase) -> State {
        State { phase, ..self }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A termination signal: TERM, INT or QUIT.
    Termination(Sig),
    /// `now` has reached `State::deadline()`. Before that, or with no deadline, it changes
    /// nothing.
    Deadline,
    /// One or more children were reaped. `main` is how the main child ended if it was among
    /// them; `children_left` whether lastcall still has any child afterwards.
    Reaped { main: Option<Status>, children_left: bool },
    /// The app told the service manager something, through lastcall's notify relay.
    AppSays(Notice),
}

/// What the app says through the notify relay that the shutdown hears of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notice {
    /// READY=1. Readiness is lastcall's from the start; nothing changes.
    Ready,
    /// STOPPING=1: the app is stopping of its own accord, so it is ready no longer.
    Stopping,
}

/// Timeline entries the supervisor logs; the rest of the timeline is read off the actions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Note {
    Received(Sig),
    PreStopStarted,
    PreStopEnded,
    PreStopCut,
    /// The grace ran out; SIGKILL follows.
    GraceExpired,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Timeline(Note),
    /// Shutdown has begun: stop announcing readiness.
    Unready,
    Forward(Sig),
    SignalAll(Sig),
    SignalOthers(Sig),
    Exit(i32),
}

/// What one step asks for: at most four actions, kept inline so that the signal path never
/// allocates (an allocation would cost more than the forward itself; docs/benchmark.md).
#[derive(Clone, Copy)]
pub struct Actions {
    items: [Action; 4],
    len: usize,
}

impl Actions {
    fn of(actions: &[Option<Action>]) -> Actions {
        let mut out = Actions { items: [Action::Exit(0); 4], len: 0 };
        for &action in actions.iter().flatten() {
            out.items[out.len] = action;
            out.len += 1;
        }
        out
    }
}

impl Actions {
    /// These actions less every `action`.
    fn without(&self, action: Action) -> Actions {
        let mut out = Actions { items: [Action::Exit(0); 4], len: 0 };
        for &a in self.iter().filter(|&&a| a != action) {
            out.items[out.len] = a;
            out.len += 1;
        }
        out
    }
}

impl std::ops::Deref for Actions {
    type Target = [Action];
    fn deref(&self) -> &[Action] {
        &self.items[..self.len]
    }
}

impl std::fmt::Debug for Actions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for Actions {
    fn eq(&self, other: &Actions) -> bool {
        **self == **other
    }
}

impl PartialEq<Vec<Action>> for Actions {
    fn eq(&self, other: &Vec<Action>) -> bool {
        **self == other[..]
    }
}

/// How many kill waits lastcall gives the killed in all, however many of them die one after
/// another: the bound on a shutdown's last phase.
pub const KILL_WAITS: u32 = 10;

/// 128 + SIGKILL: the status of anything lastcall had to kill.
pub const KILLED_CODE: i32 = 128 + libc::SIGKILL;

pub fn step(mut state: State, event: Event, now: Instant, policy: &Policy) -> (State, Actions) {
    use Action::*;
    use Phase::*;

    if state.phase == Exited {
        return (state, Actions::of(&[]));
    }
    // The contract, checked here rather than trusted: a deadline fires only once it is due.
    if event == Event::Deadline && state.deadline().is_none_or(|due| now < due) {
        return (state, Actions::of(&[]));
    }
    let forward = |sig: Option<Sig>| sig.map(Forward);
    let signal_all = |sig: Option<Sig>| sig.map(SignalAll);
    let received = |sig| Timeline(Note::Received(sig));
    // In Killing, a death: SIGKILL again for what it left, and the kill wait moves on, within
    // its end.
    let kill_again = |end: Instant| {
        (Killing { until: later(now, policy.kill_wait).min(end).max(now), end }, Actions::of(&[Some(SignalAll(Sig::KILL))]))
    };
    let (phase, actions): (Phase, Actions) = match event {
        Event::Termination(sig) => match state.phase {
            Running if policy.pre_stop > Duration::ZERO => (
                PreStop { until: later(now, policy.pre_stop), pending: sig },
                Actions::of(&[Some(received(sig)), policy.unready_at(UnreadyOn::Signal), Some(Timeline(Note::PreStopStarted))]),
            ),
            Running => (
                Draining { until: policy.grace_deadline(now) },
                Actions::of(&[Some(received(sig)), Some(Unready), forward(policy.stop(sig))]),
            ),
            PreStop { pending, .. } => (
                Draining { until: policy.grace_deadline(now) },
                Actions::of(&[
                    Some(received(sig)),
                    Some(Timeline(Note::PreStopCut)),
                    policy.unready_at(UnreadyOn::Stop),
                    forward(policy.stop(pending)),
                ]),
            ),
            Draining { .. } if state.main.is_none() => {
                (state.phase, Actions::of(&[Some(received(sig)), forward(policy.stop(sig))]))
            }
            Draining { .. } => (state.phase, Actions::of(&[Some(received(sig)), signal_all(policy.stop(sig))])),
            Killing { .. } | Exited => (state.phase, Actions::of(&[Some(received(sig))])),
        },

        Event::Deadline => match state.phase {
            PreStop { pending, .. } => (
                Draining { until: policy.grace_deadline(now) },
                Actions::of(&[
                    Some(Timeline(Note::PreStopEnded)),
                    policy.unready_at(UnreadyOn::Stop),
                    forward(policy.stop(pending)),
                ]),
            ),
            Draining { .. } => (
                Killing { until: later(now, policy.kill_wait), end: later(now, policy.kill_wait.saturating_mul(KILL_WAITS)) },
                Actions::of(&[Some(Timeline(Note::GraceExpired)), Some(SignalAll(Sig::KILL))]),
            ),
            Killing { .. } => {
                (Exited, Actions::of(&[Some(SignalAll(Sig::KILL)), Some(Exit(state.exit_code()))]))
            }
            Running | Exited => (state.phase, Actions::of(&[])),
        },

        // The app's own word: it stops serving, so readiness goes, whatever the phase; only
        // the app's exit or a signal ends it.
        Event::AppSays(Notice::Stopping) => (state.phase, Actions::of(&[(!state.history.unready).then_some(Unready)])),
        Event::AppSays(Notice::Ready) => (state.phase, Actions::of(&[])),

        Event::Reaped { main, children_left } => {
            let main_just_exited = main.is_some() && state.main.is_none();
            state.main = state.main.or(main);
            match (state.main, children_left) {
                // The peers' rows come before every other for this event.
                _ if main_just_exited && policy.on_main_exit != OnMainExit::StopTheRest => {
                    let term = (policy.on_main_exit == OnMainExit::ForwardTermAndExit).then(|| policy.stop(Sig::TERM)).flatten();
                    (Exited, Actions::of(&[Some(Unready), forward(term), Some(Exit(state.exit_code()))]))
                }
                (Some(_), false) => (Exited, Actions::of(&[Some(Exit(state.exit_code()))])),
                (None, _) => match state.phase {
                    Killing { end, .. } => kill_again(end),
                    _ => (state.phase, Actions::of(&[])),
                },
                (Some(_), true) => match state.phase {
                    Running if main_just_exited => (
                        Draining { until: policy.grace_deadline(now) },
                        Actions::of(&[Some(Unready), signal_all(policy.stop(Sig::TERM))]),
                    ),
                    PreStop { pending, .. } if main_just_exited => (
                        Draining { until: policy.grace_deadline(now) },
                        Actions::of(&[
                            Some(Timeline(Note::PreStopCut)),
                            policy.unready_at(UnreadyOn::Stop),
                            signal_all(policy.stop(pending)),
                        ]),
                    ),
                    Draining { .. } if main_just_exited && policy.single_child => {
                        (state.phase, Actions::of(&[signal_all(policy.stop(Sig::TERM))]))
                    }
                    Draining { .. } if main_just_exited => {
                        (state.phase, Actions::of(&[policy.stop(Sig::TERM).map(SignalOthers)]))
                    }
                    Killing { end, .. } => kill_again(end),
                    _ => (state.phase, Actions::of(&[])),
                },
            }
        }
    };
    // Unready goes out once, whatever row asks for it again (the app may have said STOPPING=1).
    let actions = if state.history.unready { actions.without(Unready) } else { actions };
    (state.with(phase).record(&actions, state.phase, now), actions)
}

#[cfg(test)]
mod tests;
