//! machine's unit tests, in a file of their own to keep the machine and its table short.
//!
//! May import: machine (`super`).

use super::*;
use Action::*;
use Phase::*;

#[test]
fn deadlines_never_overflow() {
    let now = Instant::now();
    assert_eq!(later(now, Duration::from_secs(5)), now + Duration::from_secs(5));
    assert!(later(now, Duration::MAX) > now + Duration::from_secs(1 << 40));
    let huge = Policy { pre_stop: Duration::MAX, grace: Some(Duration::MAX), kill_wait: Duration::MAX, ..policy(0, 0) };
    let (s, _) = step(State::START, Event::Termination(Sig::TERM), now, &huge);
    let (s, _) = step(s, Event::Deadline, s.deadline().unwrap(), &huge);
    let (s, _) = step(s, Event::Deadline, s.deadline().unwrap(), &huge);
    assert!(matches!(s.phase, Phase::Killing { .. }), "{s:?}");
}

#[test]
fn a_deadline_before_it_is_due_changes_nothing() {
    let t0 = Instant::now();
    let p = policy(5, 10);
    let (pre_stop, _) = step(State::START, Event::Termination(Sig::TERM), t0, &p);
    for early in [t0, t0 + S * 4] {
        assert_eq!(step(pre_stop, Event::Deadline, early, &p), (pre_stop, Actions::of(&[])));
    }
    let (draining, _) = step(pre_stop, Event::Deadline, t0 + S * 5, &p);
    assert!(matches!(draining.phase, Draining { .. }), "{draining:?}");
    let never = policy(0, 0);
    let (no_deadline, _) = step(State::START, Event::Termination(Sig::TERM), t0, &never);
    assert_eq!(no_deadline.deadline(), None);
    assert_eq!(step(no_deadline, Event::Deadline, t0 + S * 1000, &never), (no_deadline, Actions::of(&[])));
}

const S: Duration = Duration::from_secs(1);

fn policy(pre_stop: u64, grace: u64) -> Policy {
    Policy {
        pre_stop: S * pre_stop as u32,
        grace: (grace > 0).then(|| S * grace as u32),
        stop_signal: None,
        rewrite: vec![],
        kill_wait: S * 3,
        unready_on: UnreadyOn::Signal,
        on_main_exit: OnMainExit::StopTheRest,
        single_child: false,
    }
}

/// A state in `phase`, with readiness withdrawn once the shutdown has begun (as with
/// `--unready-on signal`) and no other history.
fn at(phase: Phase) -> State {
    State { phase, history: History { unready: phase != Running, ..History::default() }, ..State::START }
}

fn exited_main(phase: Phase, code: i32) -> State {
    State { main: Some(Status::Exited(code)), ..at(phase) }
}

/// The main child's exit with `code`.
fn exit(code: i32) -> Option<Status> {
    Some(Status::Exited(code))
}

/// The state without its history, to compare with one built by hand (the history has
/// promises of its own: `Taken::check_history`).
fn bare(state: State) -> State {
    State { history: History { unready: state.phase != Running, ..History::default() }, ..state }
}

/// `step`, its state without the history.
fn bare_step(state: State, event: Event, now: Instant, policy: &Policy) -> (State, Actions) {
    let (state, actions) = step(state, event, now, policy);
    (bare(state), actions)
}

#[test]
fn term_without_pre_stop_forwards_at_once_and_arms_grace() {
    let t0 = Instant::now();
    let (s, a) = step(State::START, Event::Termination(Sig::TERM), t0, &policy(0, 10));
    assert_eq!(bare(s), at(Draining { until: Some(t0 + S * 10) }));
    assert_eq!(a, vec![Timeline(Note::Received(Sig::TERM)), Unready, Forward(Sig::TERM)]);
    assert_eq!(s.deadline(), Some(t0 + S * 10));
}

#[test]
fn term_with_pre_stop_leaves_the_app_untouched() {
    let t0 = Instant::now();
    let (s, a) = step(State::START, Event::Termination(Sig::INT), t0, &policy(2, 10));
    assert_eq!(bare(s), at(PreStop { until: t0 + S * 2, pending: Sig::INT }));
    assert!(a.iter().all(|a| matches!(a, Timeline(_) | Unready)), "{a:?}");
    assert!(a.contains(&Unready), "readiness goes before the pre-stop starts");
    assert_eq!(s.deadline(), Some(t0 + S * 2));
}

#[test]
fn unready_on_stop_keeps_readiness_through_the_pre_stop() {
    let t0 = Instant::now();
    let p = Policy { unready_on: UnreadyOn::Stop, ..policy(2, 10) };
    let (s, a) = step(State::START, Event::Termination(Sig::TERM), t0, &p);
    assert!(!a.contains(&Unready), "{a:?}");
    let (_, a) = step(s, Event::Deadline, t0 + S * 2, &p);
    assert_eq!(a, vec![Timeline(Note::PreStopEnded), Unready, Forward(Sig::TERM)]);
    let (_, a) = step(s, Event::Termination(Sig::TERM), t0 + S, &p);
    assert_eq!(a, vec![Timeline(Note::Received(Sig::TERM)), Timeline(Note::PreStopCut), Unready, Forward(Sig::TERM)]);
    let (_, a) = step(s, Event::Reaped { main: exit(0), children_left: true }, t0 + S, &p);
    assert_eq!(a, vec![Timeline(Note::PreStopCut), Unready, SignalAll(Sig::TERM)]);
    // Without a pre-stop both modes are the same.
    let (_, a) = step(State::START, Event::Termination(Sig::TERM), t0, &Policy { unready_on: UnreadyOn::Stop, ..policy(0, 10) });
    assert_eq!(a, vec![Timeline(Note::Received(Sig::TERM)), Unready, Forward(Sig::TERM)]);
    // And with the default, readiness never goes twice.
    let (s, _) = step(State::START, Event::Termination(Sig::TERM), t0, &policy(2, 10));
    let (_, a) = step(s, Event::Deadline, t0 + S * 2, &policy(2, 10));
    assert!(!a.contains(&Unready), "{a:?}");
}

#[test]
fn pre_stop_deadline_forwards_the_pending_signal() {
    let t0 = Instant::now();
    let s = at(PreStop { until: t0, pending: Sig::QUIT });
    let (s, a) = step(s, Event::Deadline, t0, &policy(2, 10));
    assert_eq!(bare(s), at(Draining { until: Some(t0 + S * 10) }));
    assert_eq!(a, vec![Timeline(Note::PreStopEnded), Forward(Sig::QUIT)]);
}

#[test]
fn second_term_cuts_the_pre_stop_short() {
    let t0 = Instant::now();
    let s = at(PreStop { until: t0 + S * 2, pending: Sig::TERM });
    let (s, a) = step(s, Event::Termination(Sig::INT), t0 + S, &policy(2, 10));
    assert_eq!(bare(s), at(Draining { until: Some(t0 + S * 11) }));
    assert_eq!(a.last(), Some(&Forward(Sig::TERM)));
    assert!(a.contains(&Timeline(Note::PreStopCut)));
}

#[test]
fn stop_signal_rewrites_what_is_forwarded() {
    let t0 = Instant::now();
    let p = Policy { stop_signal: Some(Sig::QUIT), ..policy(0, 10) };
    let (_, a) = step(State::START, Event::Termination(Sig::TERM), t0, &p);
    assert_eq!(a.last(), Some(&Forward(Sig::QUIT)));
    let s = at(PreStop { until: t0, pending: Sig::INT });
    let (_, a) = step(s, Event::Deadline, t0, &p);
    assert_eq!(a.last(), Some(&Forward(Sig::QUIT)));
}

#[test]
fn term_during_grace_is_forwarded_again_without_moving_the_deadline() {
    let t0 = Instant::now();
    let s = at(Draining { until: Some(t0 + S * 10) });
    let (s2, a) = step(s, Event::Termination(Sig::TERM), t0 + S, &policy(0, 10));
    assert_eq!(bare(s2), s);
    assert_eq!(a.last(), Some(&Forward(Sig::TERM)));
}

#[test]
fn term_while_only_others_linger_goes_to_everyone() {
    let t0 = Instant::now();
    let s = exited_main(Draining { until: Some(t0 + S) }, 0);
    let (s2, a) = step(s, Event::Termination(Sig::TERM), t0, &policy(0, 10));
    assert_eq!(bare(s2), s);
    assert_eq!(a.last(), Some(&SignalAll(Sig::TERM)));
}

#[test]
fn grace_deadline_escalates_to_sigkill_for_everyone() {
    let t0 = Instant::now();
    let s = at(Draining { until: Some(t0) });
    let (s, a) = step(s, Event::Deadline, t0, &policy(0, 10));
    assert_eq!(bare(s), at(Killing { until: t0 + S * 3, end: t0 + S * 30 }));
    assert_eq!(a, vec![Timeline(Note::GraceExpired), SignalAll(Sig::KILL)]);
}

#[test]
fn zero_grace_never_escalates() {
    let t0 = Instant::now();
    let (s, _) = step(State::START, Event::Termination(Sig::TERM), t0, &policy(0, 0));
    assert_eq!(bare(s), at(Draining { until: None }));
    assert_eq!(s.deadline(), None);
}

#[test]
fn killing_ignores_termination_and_gives_up_after_kill_wait() {
    let t0 = Instant::now();
    let s = at(Killing { until: t0, end: t0 });
    let (s2, a) = step(s, Event::Termination(Sig::TERM), t0, &policy(0, 10));
    assert_eq!(s2, s);
    assert!(a.iter().all(|a| matches!(a, Timeline(_))));
    let (s3, a) = step(s, Event::Deadline, t0, &policy(0, 10));
    assert_eq!(s3.phase, Exited);
    assert_eq!(a, vec![SignalAll(Sig::KILL), Exit(KILLED_CODE)], "a last SIGKILL for what came back late");
    let (_, a) = step(exited_main(Killing { until: t0, end: t0 }, 3), Event::Deadline, t0, &policy(0, 10));
    assert_eq!(a, vec![SignalAll(Sig::KILL), Exit(3)]);
}

#[test]
fn main_exit_with_nothing_left_exits_with_its_code_from_any_live_phase() {
    let t0 = Instant::now();
    for phase in [
        Running,
        PreStop { until: t0, pending: Sig::TERM },
        Draining { until: None },
        Killing { until: t0, end: t0 },
    ] {
        let ev = Event::Reaped { main: exit(143), children_left: false };
        let (s, a) = step(at(phase), ev, t0, &policy(1, 1));
        assert_eq!(s.phase, Exited);
        assert_eq!(a, vec![Exit(143)]);
    }
}

#[test]
fn main_exit_while_running_with_others_left_stops_them_within_grace() {
    let t0 = Instant::now();
    let ev = Event::Reaped { main: exit(0), children_left: true };
    let (s, a) = step(State::START, ev, t0, &policy(0, 5));
    assert_eq!(bare(s), exited_main(Draining { until: Some(t0 + S * 5) }, 0));
    assert_eq!(a, vec![Unready, SignalAll(Sig::TERM)]);
    // Then the last of them goes: exit with the main child's code, not theirs.
    let (s, a) = step(s, Event::Reaped { main: None, children_left: false }, t0, &policy(0, 5));
    assert_eq!(s.phase, Exited);
    assert_eq!(a, vec![Exit(0)]);
}

#[test]
fn main_exit_during_pre_stop_with_others_left_signals_them_the_pending_stop() {
    let t0 = Instant::now();
    let p = Policy { stop_signal: Some(Sig::QUIT), ..policy(5, 5) };
    let s = at(PreStop { until: t0 + S * 5, pending: Sig::TERM });
    let (s, a) = step(s, Event::Reaped { main: exit(1), children_left: true }, t0, &p);
    assert_eq!(bare(s), exited_main(Draining { until: Some(t0 + S * 5) }, 1));
    assert_eq!(a.last(), Some(&SignalAll(Sig::QUIT)));
}

#[test]
fn main_exit_during_drain_keeps_the_deadline_and_signals_only_those_outside_the_group() {
    let t0 = Instant::now();
    let s = at(Draining { until: Some(t0 + S) });
    let (s, a) = step(s, Event::Reaped { main: exit(143), children_left: true }, t0, &policy(0, 5));
    assert_eq!(bare(s), exited_main(Draining { until: Some(t0 + S) }, 143));
    assert_eq!(a, vec![SignalOthers(Sig::TERM)]);
    // Only once: later reaps change nothing.
    let (s2, a) = step(s, Event::Reaped { main: None, children_left: true }, t0, &policy(0, 5));
    assert_eq!((s2, a), (s, Actions::of(&[])));
}

#[test]
fn with_single_child_the_group_gets_the_stop_signal_when_the_main_child_exits_mid_drain() {
    let t0 = Instant::now();
    let p = Policy { single_child: true, ..policy(0, 5) };
    let s = at(Draining { until: Some(t0 + S) });
    let (s, a) = step(s, Event::Reaped { main: exit(0), children_left: true }, t0, &p);
    assert_eq!(bare(s), exited_main(Draining { until: Some(t0 + S) }, 0));
    assert_eq!(a, vec![SignalAll(Sig::TERM)]);
}

#[test]
fn orphan_reaps_change_nothing_until_killing() {
    let t0 = Instant::now();
    let ev = Event::Reaped { main: None, children_left: true };
    for phase in [Running, PreStop { until: t0, pending: Sig::TERM }, Draining { until: None }] {
        assert_eq!(step(at(phase), ev, t0, &policy(1, 1)), (at(phase), Actions::of(&[])));
    }
    // Killing: SIGKILL again for the re-parented, and the kill wait starts over.
    let end = t0 + S * 30;
    let later = at(Killing { until: t0 + S * 4, end });
    let s = at(Killing { until: t0, end });
    assert_eq!(bare_step(s, ev, t0 + S, &policy(1, 1)), (later, Actions::of(&[Some(SignalAll(Sig::KILL))])));
    // ... but never past its end, however many die one after another.
    assert_eq!(bare_step(s, ev, t0 + S * 29, &policy(1, 1)).0, at(Killing { until: end, end }));
    let s = exited_main(Killing { until: t0, end }, 137);
    let later = exited_main(Killing { until: t0 + S * 4, end }, 137);
    assert_eq!(bare_step(s, ev, t0 + S, &policy(1, 1)), (later, Actions::of(&[Some(SignalAll(Sig::KILL))])));
}

#[test]
fn orphan_reaps_matter_exactly_where_step_acts_on_them() {
    let t0 = Instant::now();
    let phases = [Running, PreStop { until: t0, pending: Sig::TERM }, Draining { until: None }, Killing { until: t0, end: t0 }];
    for state in phases.iter().flat_map(|&phase| [at(phase), exited_main(phase, 0)]) {
        // While the main child lives, lastcall always has a child left.
        let possible: &[bool] = if state.main.is_some() { &[true, false] } else { &[true] };
        let acts = possible.iter().any(|&children_left| {
            let orphan = Event::Reaped { main: None, children_left };
            step(state, orphan, t0, &policy(1, 1)) != (state, Actions::of(&[]))
        });
        assert_eq!(state.cares_about_orphans(), acts, "{state:?}");
    }
}

#[test]
fn the_main_code_is_kept_once_known() {
    let t0 = Instant::now();
    let s = exited_main(Draining { until: None }, 7);
    let (s, a) = step(s, Event::Reaped { main: None, children_left: false }, t0, &policy(0, 0));
    assert_eq!(bare(s), exited_main(Exited, 7));
    assert_eq!(a, vec![Exit(7)]);
}

#[test]
fn exited_is_terminal() {
    let t0 = Instant::now();
    let s = exited_main(Exited, 0);
    for ev in [
        Event::Termination(Sig::TERM),
        Event::Deadline,
        Event::Reaped { main: None, children_left: false },
    ] {
        assert_eq!(step(s, ev, t0, &policy(1, 1)), (s, Actions::of(&[])));
    }
}

#[test]
fn rewrites_apply_to_what_is_forwarded_not_to_when_shutdown_starts() {
    let t0 = Instant::now();
    let p = Policy { rewrite: vec![(Sig::TERM, Sig::QUIT), (Sig(libc::SIGHUP), Sig(0))], ..policy(0, 10) };
    let (s, a) = step(State::START, Event::Termination(Sig::TERM), t0, &p);
    assert_eq!(bare(s), at(Draining { until: Some(t0 + S * 10) }), "TERM still starts the shutdown");
    assert_eq!(a.last(), Some(&Forward(Sig::QUIT)));
    let (_, a) = step(State::START, Event::Termination(Sig::INT), t0, &p);
    assert_eq!(a.last(), Some(&Forward(Sig::INT)), "no rule: forwarded as received");
    // --stop-signal wins over a rewrite of the termination signal.
    let p = Policy { stop_signal: Some(Sig::INT), ..p };
    let (_, a) = step(State::START, Event::Termination(Sig::TERM), t0, &p);
    assert_eq!(a.last(), Some(&Forward(Sig::INT)));
}

#[test]
fn a_dropped_termination_signal_still_arms_the_deadline() {
    let t0 = Instant::now();
    let p = Policy { rewrite: vec![(Sig::TERM, Sig(0))], ..policy(0, 10) };
    let (s, a) = step(State::START, Event::Termination(Sig::TERM), t0, &p);
    assert_eq!(s.deadline(), Some(t0 + S * 10));
    assert!(!a.iter().any(|a| matches!(a, Forward(_))));
}

#[test]
fn deadline_in_running_is_a_no_op() {
    let t0 = Instant::now();
    assert_eq!(step(State::START, Event::Deadline, t0, &policy(1, 1)), (State::START, Actions::of(&[])));
}

#[test]
fn a_peer_exits_with_the_main_child_whatever_is_left() {
    let t0 = Instant::now();
    let rewrite = vec![(Sig::TERM, Sig::QUIT)];
    let tini = Policy { on_main_exit: OnMainExit::Exit, ..policy(0, 0) };
    let dumb_init = Policy { on_main_exit: OnMainExit::ForwardTermAndExit, rewrite, ..policy(0, 0) };
    let draining = at(Draining { until: None });
    for state in [State::START, draining, at(PreStop { until: t0, pending: Sig::TERM }), at(Killing { until: t0, end: t0 })] {
        // Readiness still stands before the shutdown; the pre-stop withdrew it (`--unready-on signal`).
        let unready = (state == State::START).then_some(Unready);
        for children_left in [true, false] {
            let ev = Event::Reaped { main: exit(143), children_left };
            assert_eq!(bare_step(state, ev, t0, &tini), (exited_main(Exited, 143), Actions::of(&[unready, Some(Exit(143))])));
            let expected = Actions::of(&[unready, Some(Forward(Sig::QUIT)), Some(Exit(143))]);
            assert_eq!(bare_step(state, ev, t0, &dumb_init), (exited_main(Exited, 143), expected), "TERM as rewritten");
        }
    }
    // An orphan's exit is nothing to either.
    let orphan = Event::Reaped { main: None, children_left: true };
    assert_eq!(step(State::START, orphan, t0, &dumb_init), (State::START, Actions::of(&[])));
}

#[test]
fn a_peer_withdraws_readiness_before_the_term_it_sends_at_the_main_childs_exit() {
    let t0 = Instant::now();
    let dumb_init =
        Policy { on_main_exit: OnMainExit::ForwardTermAndExit, unready_on: UnreadyOn::Stop, ..policy(5, 10) };
    let (pre_stop, _) = step(State::START, Event::Termination(Sig::TERM), t0, &dumb_init);
    let (end, actions) = bare_step(pre_stop, Event::Reaped { main: exit(0), children_left: true }, t0, &dumb_init);
    assert_eq!((end, actions), (exited_main(Exited, 0), Actions::of(&[Some(Unready), Some(Forward(Sig::TERM)), Some(Exit(0))])));
}

/// xorshift64: a few lines of PRNG, seeded, so that a failure repeats exactly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

fn random_policy(rng: &mut Rng) -> Policy {
    let ms = |rng: &mut Rng, max: u64| Duration::from_millis(rng.below(max + 1));
    let sigs = [Sig::TERM, Sig::INT, Sig::QUIT, Sig(libc::SIGUSR1), Sig(0)];
    let mut rewrite = vec![];
    for _ in 0..rng.below(3) {
        let from = [Sig::TERM, Sig::INT, Sig::QUIT][rng.below(3) as usize];
        rewrite.push((from, sigs[rng.below(sigs.len() as u64) as usize]));
    }
    Policy {
        pre_stop: if rng.chance(50) { Duration::ZERO } else { ms(rng, 3000) },
        grace: if rng.chance(20) { None } else { Some(ms(rng, 5000)) },
        stop_signal: rng.chance(20).then(|| [Sig::QUIT, Sig(libc::SIGUSR2)][rng.below(2) as usize]),
        rewrite,
        kill_wait: ms(rng, 3000),
        unready_on: if rng.chance(50) { UnreadyOn::Signal } else { UnreadyOn::Stop },
        on_main_exit: OnMainExit::StopTheRest,
        single_child: false,
    }
}

/// Thousands of random event sequences, fed the way the supervisor feeds them (time only
/// moves forward, Deadline only once the deadline has passed, a reap reports children left
/// while the main child lives), checked against what must hold whatever the order:
/// - no Exit while the main child lives, unless the kill wait after SIGKILL has run out;
/// - no SIGKILL before the grace deadline, and none at all with `--grace 0`;
/// - every termination reaches the app once per its rule: one stop signal for a termination
///   in Running without pre-stop or in Draining, none for one that starts the pre-stop (its
///   signal goes when the pre-stop ends: once, by deadline, a second termination or the app's
///   exit), none in Killing; a stop signal rewritten to 0 is never sent;
/// - Unready at most once, before any stop signal; nothing after Exit; deadlines never in the
///   past when they are set.
#[test]
fn random_event_sequences_keep_the_promises() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let t0 = Instant::now();
    let mut steps = 0;
    for sequence in 0..5000 {
        let p = random_policy(&mut rng);
        let mut state = State::START;
        let mut now = t0;
        for _ in 0..rng.below(40) {
            // Time moves forward: a little, a lot, or right to the next deadline.
            now += match (rng.below(4), state.deadline()) {
                (0, Some(d)) => d.saturating_duration_since(now),
                (1, _) => Duration::from_millis(rng.below(4000)),
                _ => Duration::from_millis(rng.below(50)),
            };
            let event = random_event(&mut rng, state, now, state.main.is_none());
            let before = state;
            let (after, actions) = step(before, event, now, &p);
            steps += 1;
            let ctx = || format!("sequence {sequence}: {before:?} + {event:?} at +{:?} -> {after:?} {actions:?}, {p:?}", now - t0);
            Taken { before, event, now, after, actions: &actions }.check(&p, &ctx);
            state = after;
        }
    }
    assert!(steps > 50_000, "only {steps} steps");
}

fn random_event(rng: &mut Rng, state: State, now: Instant, main_alive: bool) -> Event {
    match rng.below(4) {
        3 => Event::AppSays([Notice::Ready, Notice::Stopping][rng.below(2) as usize]),
        0 => Event::Termination([Sig::TERM, Sig::INT, Sig::QUIT][rng.below(3) as usize]),
        1 if state.deadline().is_some_and(|d| now >= d) => Event::Deadline,
        _ => {
            let ends = [Status::Exited(0), Status::Exited(1), Status::Exited(143), Status::Signaled(Sig::TERM, false), Status::Signaled(Sig::KILL, false)];
            let main = (main_alive && rng.chance(30)).then(|| ends[rng.below(ends.len() as u64) as usize]);
            let children_left = (main_alive && main.is_none()) || rng.chance(60);
            Event::Reaped { main, children_left }
        }
    }
}

/// One step of a sequence: the state before, the event, and what `step` made of them.
struct Taken<'a> {
    before: State,
    event: Event,
    now: Instant,
    after: State,
    actions: &'a Actions,
}

impl Taken<'_> {
    /// The step's promises, read off the states' history alone: no bookkeeping of the test's.
    fn check(&self, p: &Policy, ctx: &dyn Fn() -> String) {
        let t = self;
        if t.before.phase == Exited {
            assert!(t.actions.is_empty() && t.after == t.before, "something after Exit: {}", ctx());
            return;
        }
        if let Some(d) = t.after.deadline() {
            assert!(d >= t.now || Some(d) == t.before.deadline(), "a deadline set in the past: {}", ctx());
        }
        assert_eq!(t.after.main, t.before.main.or(match t.event {
            Event::Reaped { main, .. } => main,
            _ => None,
        }), "the app's end is kept as first reaped: {}", ctx());
        t.check_exit(ctx);
        t.check_kill(p, ctx);
        t.check_unready(ctx);
        t.check_stop(p, ctx);
        t.check_history(ctx);
    }

    /// No Exit while the main child lives, unless the kill wait has run out; the code is the
    /// app's own (128+N for a signal), or 137 for an app given up on.
    fn check_exit(&self, ctx: &dyn Fn() -> String) {
        let t = self;
        let exit = t.actions.iter().find_map(|a| match *a {
            Exit(code) => Some(code),
            _ => None,
        });
        let Some(code) = exit else { return };
        let killing_done = matches!(t.before.phase, Killing { until, .. } if t.now >= until) && t.event == Event::Deadline;
        assert!(t.after.main.is_some() || killing_done, "exit while the main child lives: {}", ctx());
        assert_eq!(t.after.phase, Exited, "{}", ctx());
        assert_eq!(code, t.after.main.map_or(KILLED_CODE, Status::code), "{}", ctx());
    }

    /// SIGKILL never before the grace deadline, never without one.
    fn check_kill(&self, p: &Policy, ctx: &dyn Fn() -> String) {
        let t = self;
        let kills = t.actions.iter().filter(|a| **a == SignalAll(Sig::KILL)).count();
        if kills > 0 {
            assert!(kills == 1, "{}", ctx());
            match (t.before.history.grace_from, p.grace) {
                (Some(from), Some(grace)) => assert!(t.now >= from + grace, "SIGKILL before the grace ended: {}", ctx()),
                _ => panic!("SIGKILL without a grace deadline: {}", ctx()),
            }
        }
        if matches!(t.after.phase, Killing { .. }) {
            assert!(t.after.history.killed_from.is_some(), "Killing without a SIGKILL: {}", ctx());
        }
    }

    /// Unready once, before any stop signal.
    fn check_unready(&self, ctx: &dyn Fn() -> String) {
        let t = self;
        let unready_at = t.actions.iter().position(|a| *a == Unready);
        assert!(unready_at.is_none() || !t.before.history.unready, "Unready twice: {}", ctx());
        let first_signal = t.actions.iter().position(|a| matches!(a, Forward(_) | SignalAll(_) | SignalOthers(_)));
        if let Some(i) = first_signal {
            let announced = t.before.history.unready || unready_at.is_some_and(|u| u < i);
            assert!(announced, "a signal before Unready: {}", ctx());
        }
    }

    /// Every termination reaches the app once per its rule, and nothing goes to the app's group
    /// once it is reaped (the rest get theirs from SignalAll and SignalOthers); the grace
    /// starts when the stop signal would go out, and only once.
    fn check_stop(&self, p: &Policy, ctx: &dyn Fn() -> String) {
        let t = self;
        let stops: Vec<Sig> = t
            .actions
            .iter()
            .filter_map(|a| match *a {
                Forward(s) => Some(s),
                SignalAll(s) if s != Sig::KILL => Some(s),
                _ => None,
            })
            .collect();
        assert!(stops.len() <= 1, "{}", ctx());
        let stop = |received: Sig| p.stop(received).filter(|s| *s != Sig(0));
        let main_just_exited = t.before.main.is_none() && t.after.main.is_some();
        let expected: Option<Sig> = match (t.before.phase, t.event) {
            _ if main_just_exited && p.on_main_exit == OnMainExit::Exit => None,
            _ if main_just_exited && p.on_main_exit == OnMainExit::ForwardTermAndExit => stop(Sig::TERM),
            (Draining { .. }, Event::Reaped { main: Some(_), children_left: true }) if main_just_exited && p.single_child => {
                stop(Sig::TERM)
            }
            (Running, Event::Termination(s)) if p.pre_stop.is_zero() => stop(s),
            (Running, Event::Termination(_)) => None,
            (PreStop { pending, .. }, Event::Termination(_)) => stop(pending),
            (PreStop { pending, until }, Event::Deadline) if t.now >= until => stop(pending),
            (PreStop { pending, .. }, Event::Reaped { main: Some(_), children_left: true }) => stop(pending),
            (Running, Event::Reaped { main: Some(_), children_left: true }) => stop(Sig::TERM),
            (Draining { .. }, Event::Termination(s)) => stop(s),
            _ => None,
        };
        assert_eq!(stops.first().copied(), expected, "{}", ctx());
        assert!(stops.iter().all(|s| *s != Sig(0)), "a dropped signal was sent: {}", ctx());
        if t.before.main.is_some() {
            assert!(!t.actions.iter().any(|a| matches!(a, Forward(_))), "a forward to the reaped app's group: {}", ctx());
        }
        if matches!(t.after.phase, Draining { .. }) && !matches!(t.before.phase, Draining { .. }) {
            assert!(t.before.history.grace_from.is_none(), "the grace began twice: {}", ctx());
            assert_eq!(t.after.deadline(), p.grace.map(|g| t.now + g), "{}", ctx());
        }
    }

    /// The history says what the actions did, and only grows.
    fn check_history(&self, ctx: &dyn Fn() -> String) {
        let (before, after) = (self.before.history, self.after.history);
        let did = |f: fn(&Action) -> bool| self.actions.iter().any(f);
        assert_eq!(after.unready, before.unready || did(|a| *a == Unready), "{}", ctx());
        let stop = did(|a| matches!(a, Forward(_) | SignalOthers(_)) || matches!(a, SignalAll(s) if *s != Sig::KILL));
        assert_eq!(after.stop_sent, before.stop_sent || stop, "{}", ctx());
        let killed = did(|a| *a == SignalAll(Sig::KILL)).then_some(self.now);
        assert_eq!(after.killed_from, before.killed_from.or(killed), "{}", ctx());
        let grace_began = matches!(self.after.phase, Draining { .. }) && !matches!(self.before.phase, Draining { .. });
        assert_eq!(after.grace_from, before.grace_from.or(grace_began.then_some(self.now)), "{}", ctx());
    }
}

/// Every policy that changes a transition, with deadlines on time, late and early.
fn exploration_policies() -> Vec<Policy> {
    let mut all = vec![];
    for on_main_exit in [OnMainExit::StopTheRest, OnMainExit::Exit, OnMainExit::ForwardTermAndExit] {
        for (pre_stop, grace) in [(0, 0), (0, 3), (2, 0), (2, 3)] {
            for rewrite in [vec![], vec![(Sig::TERM, Sig::QUIT)], vec![(Sig::TERM, Sig(0))]] {
                for stop_signal in [None, Some(Sig(libc::SIGUSR2))] {
                    for unready_on in [UnreadyOn::Signal, UnreadyOn::Stop] {
                        for single_child in [false, true] {
                            let rewrite = rewrite.clone();
                            all.push(Policy { on_main_exit, rewrite, stop_signal, unready_on, single_child, ..policy(pre_stop, grace) });
                        }
                    }
                }
            }
        }
    }
    all
}

/// The events that may come in `state` at `now`, each with the time it comes at: the
/// termination signals, the app's READY=1 and STOPPING=1, the main child's exit (by code and by signal, with others left or
/// not), orphans' exits, and the deadline on time, late and early (which must change nothing).
fn possible_events(state: State, now: Instant, main_alive: bool) -> Vec<(Event, Instant)> {
    let mut events: Vec<(Event, Instant)> = [Sig::TERM, Sig::INT, Sig::QUIT].map(|s| (Event::Termination(s), now)).to_vec();
    events.extend([Notice::Ready, Notice::Stopping].map(|n| (Event::AppSays(n), now)));
    if let Some(due) = state.deadline() {
        let early = due.checked_sub(Duration::from_millis(1)).filter(|t| *t >= now).unwrap_or(now);
        events.extend([(Event::Deadline, due.max(now)), (Event::Deadline, due.max(now) + S), (Event::Deadline, early)]);
    }
    // A reap also comes later, so that deaths in Killing move the kill wait on.
    if state.deadline().is_some() {
        events.push((Event::Reaped { main: None, children_left: true }, now + S * 2));
    }
    for children_left in [true, false] {
        if main_alive {
            // By code, by the code a death by TERM maps to, and by TERM itself.
            let ends = [Status::Exited(0), Status::Exited(143), Status::Signaled(Sig::TERM, false)];
            events.extend(ends.map(|end| (Event::Reaped { main: Some(end), children_left }, now)));
        }
        // While the main child lives, lastcall has a child: an orphan's reap leaves it one.
        if children_left || !main_alive {
            events.push((Event::Reaped { main: None, children_left }, now));
        }
    }
    events
}

/// Exhaustive: for every policy of `exploration_policies`, breadth first over distinct states
/// (the machine's state, history included, and the time), every sequence of up to `DEPTH`
/// events. Each transition is held to `Taken::check`'s promises (the random test's), and each
/// reachable state to having a deadline unless it only waits on what must come.
#[test]
fn every_sequence_of_eight_events_keeps_the_promises() {
    use std::collections::HashSet;
    if std::env::var_os("LASTCALL_SKIP_EXPLORATION").is_some() {
        eprintln!("LASTCALL_SKIP_EXPLORATION: not run (scripts/dist's unit tests of other architectures)");
        return;
    }
    const DEPTH: usize = 8;
    let t0 = Instant::now();
    let (mut states, mut transitions) = (0usize, 0usize);
    for p in exploration_policies() {
        let mut visited: HashSet<(State, Instant)> = HashSet::new();
        let mut frontier = vec![(State::START, t0)];
        for depth in 0..DEPTH {
            let mut next = vec![];
            for (state, now) in frontier {
                if !visited.insert((state, now)) || state.phase == Exited {
                    continue;
                }
                for (event, at) in possible_events(state, now, state.main.is_none()) {
                    let (after, actions) = step(state, event, at, &p);
                    transitions += 1;
                    let ctx = || format!("depth {depth}: {state:?} + {event:?} at +{:?} -> {after:?} {actions:?}, {p:?}", at - t0);
                    Taken { before: state, event, now: at, after, actions: &actions }.check(&p, &ctx);
                    // The last phase is bounded, however many die one after another.
                    if let (Killing { until, .. }, Some(killed)) = (after.phase, after.history.killed_from) {
                        let bound = later(killed, p.kill_wait.saturating_mul(KILL_WAITS)).max(at);
                        assert!(until <= bound, "the kill wait outlasts its bound: {}", ctx());
                    }
                    // Waiting with no deadline is only for what must come: the app's end with
                    // `--grace 0`, or a signal before the shutdown.
                    if after.deadline().is_none() {
                        assert!(matches!(after.phase, Running | Exited | Draining { until: None }), "{}", ctx());
                        assert!(!matches!(after.phase, Draining { .. }) || p.grace.is_none(), "{}", ctx());
                    }
                    next.push((after, at));
                }
            }
            frontier = next;
        }
        states += visited.len();
    }
    eprintln!("explored {states} states and {transitions} transitions");
    assert!(states > 10_000, "only {states} states");
}

#[test]
fn the_apps_stopping_withdraws_readiness_once_and_changes_nothing_else() {
    let t0 = Instant::now();
    let stopping = Event::AppSays(Notice::Stopping);
    let (s, a) = step(State::START, stopping, t0, &policy(5, 10));
    assert_eq!((s.phase, a), (Running, Actions::of(&[Some(Unready)])));
    assert!(s.history.unready);
    assert_eq!(step(s, stopping, t0, &policy(5, 10)), (s, Actions::of(&[])), "once");
    // A TERM after it starts the shutdown as usual, without a second Unready.
    let (s, a) = step(s, Event::Termination(Sig::TERM), t0, &policy(5, 10));
    assert!(matches!(s.phase, PreStop { .. }) && !a.contains(&Unready), "{s:?} {a:?}");
    // With --unready-on stop, the app's word ends readiness within the pre-stop too.
    let hold = Policy { unready_on: UnreadyOn::Stop, ..policy(5, 10) };
    let (pre_stop, a) = step(State::START, Event::Termination(Sig::TERM), t0, &hold);
    assert!(!a.contains(&Unready));
    let (s, a) = step(pre_stop, stopping, t0 + S, &hold);
    assert_eq!((s.phase, a), (pre_stop.phase, Actions::of(&[Some(Unready)])));
    let (_, a) = step(s, Event::Deadline, t0 + S * 5, &hold);
    assert!(!a.contains(&Unready) && a.contains(&Forward(Sig::TERM)), "{a:?}");
    // READY=1 changes nothing anywhere.
    for state in [State::START, pre_stop, s] {
        assert_eq!(step(state, Event::AppSays(Notice::Ready), t0, &hold), (state, Actions::of(&[])));
    }
}
