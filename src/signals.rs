//! Signal numbers, names, the block set, and what each signal means to lastcall.
//!
//! Signals are plain numbers (`Sig`) rather than nix's `Signal` enum because real-time signals,
//! which lastcall forwards like any other, have no enum variant.
//!
//! May import: nothing from the crate (a leaf).

use std::fmt;


/// A signal number, valid or not; `name()` tells which.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sig(pub i32);

impl Sig {
    pub const INT: Sig = Sig(libc::SIGINT);
    pub const QUIT: Sig = Sig(libc::SIGQUIT);
    pub const KILL: Sig = Sig(libc::SIGKILL);
    pub const PIPE: Sig = Sig(libc::SIGPIPE);
    pub const TERM: Sig = Sig(libc::SIGTERM);
    pub const CHLD: Sig = Sig(libc::SIGCHLD);
    pub const TTIN: Sig = Sig(libc::SIGTTIN);
    pub const TTOU: Sig = Sig(libc::SIGTTOU);
    pub const TSTP: Sig = Sig(libc::SIGTSTP);
    pub const STOP: Sig = Sig(libc::SIGSTOP);
    pub const CONT: Sig = Sig(libc::SIGCONT);

    /// TERM, INT and QUIT start the shutdown (and end pause mode).
    pub fn is_termination(self) -> bool {
        matches!(self, Sig::TERM | Sig::INT | Sig::QUIT)
    }

    /// Whether the signal's default action ends the process (terminate or core), rather than
    /// ignoring it (CHLD, CONT, URG, WINCH) or stopping it (STOP, TSTP, TTIN, TTOU).
    pub fn default_terminates(self) -> bool {
        const IGNORE_OR_STOP: [i32; 8] = [
            libc::SIGCHLD,
            libc::SIGCONT,
            libc::SIGURG,
            libc::SIGWINCH,
            libc::SIGSTOP,
            libc::SIGTSTP,
            libc::SIGTTIN,
            libc::SIGTTOU,
        ];
        (1..=MAX_SIGNAL).contains(&self.0) && !IGNORE_OR_STOP.contains(&self.0)
    }

    /// The name without the `SIG` prefix, e.g. `TERM` or `RTMIN+3`.
    pub fn name(self) -> Option<String> {
        if let Some(&(name, _)) = NAMES.iter().find(|&&(_, n)| n == self.0) {
            return Some(name.to_string());
        }
        match self.0 {
            RTMIN => Some("RTMIN".into()),
            RTMAX => Some("RTMAX".into()),
            n if n > RTMIN && n < RTMAX => Some(format!("RTMIN+{}", n - RTMIN)),
            _ => None,
        }
    }

    /// Parses `TERM`, `SIGTERM`, `term`, `15`, `RTMIN+2`, `SIGRTMAX-1`.
    /// `allow_zero` admits `0`, which some options use to mean "none".
    pub fn parse(text: &str, allow_zero: bool) -> Result<Sig, String> {
        let text = text.trim();
        // Digits only: i32's parser would also take a sign ("+15"), which no signal spelling has.
        if let Some(n) = digits(text) {
            return if n == 0 && allow_zero || (1..=MAX_SIGNAL).contains(&n) {
                Ok(Sig(n))
            } else {
                Err(format!("no signal has number {n} (1-{MAX_SIGNAL})"))
            };
        }
        let upper = text.to_ascii_uppercase();
        let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
        if let Some(&(_, n)) = NAMES.iter().find(|&&(name, _)| name == bare) {
            return Ok(Sig(n));
        }
        if let Some(n) = parse_realtime(bare) {
            return Ok(Sig(n));
        }
        Err("expected a signal name or number, like TERM, SIGQUIT or 15".into())
    }
}

impl fmt::Display for Sig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "SIG{name}"),
            None => write!(f, "signal {}", self.0),
        }
    }
}

/// Real-time signals are named the way glibc's `kill -l` names them (SIGRTMIN = 34), so that a
/// number a user reads there means the same here. musl keeps 32-34 for itself.
const RTMIN: i32 = 34;
const RTMAX: i32 = 64;
pub const MAX_SIGNAL: i32 = 64;

fn parse_realtime(bare: &str) -> Option<i32> {
    let (base, rest) = if let Some(rest) = bare.strip_prefix("RTMIN") {
        (RTMIN, rest)
    } else if let Some(rest) = bare.strip_prefix("RTMAX") {
        (RTMAX, rest)
    } else {
        return None;
    };
    let n = if rest.is_empty() {
        base
    } else if let Some(off) = rest.strip_prefix('+') {
        base.checked_add(digits(off)?)?
    } else if let Some(off) = rest.strip_prefix('-') {
        base.checked_sub(digits(off)?)?
    } else {
        return None;
    };
    (RTMIN..=RTMAX).contains(&n).then_some(n)
}

/// A number written with ASCII digits and nothing else (no sign, no space), if it fits.
fn digits(text: &str) -> Option<i32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

const NAMES: &[(&str, i32)] = &[
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("ILL", libc::SIGILL),
    ("TRAP", libc::SIGTRAP),
    ("ABRT", libc::SIGABRT),
    ("IOT", libc::SIGIOT),
    ("BUS", libc::SIGBUS),
    ("FPE", libc::SIGFPE),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("SEGV", libc::SIGSEGV),
    ("USR2", libc::SIGUSR2),
    ("PIPE", libc::SIGPIPE),
    ("ALRM", libc::SIGALRM),
    ("TERM", libc::SIGTERM),
    ("STKFLT", libc::SIGSTKFLT),
    ("CHLD", libc::SIGCHLD),
    ("CONT", libc::SIGCONT),
    ("STOP", libc::SIGSTOP),
    ("TSTP", libc::SIGTSTP),
    ("TTIN", libc::SIGTTIN),
    ("TTOU", libc::SIGTTOU),
    ("URG", libc::SIGURG),
    ("XCPU", libc::SIGXCPU),
    ("XFSZ", libc::SIGXFSZ),
    ("VTALRM", libc::SIGVTALRM),
    ("PROF", libc::SIGPROF),
    ("WINCH", libc::SIGWINCH),
    ("IO", libc::SIGIO),
    ("POLL", libc::SIGPOLL),
    ("PWR", libc::SIGPWR),
    ("SYS", libc::SIGSYS),
];

/// What lastcall does with a signal it reads. It is the same in every phase of the shutdown,
/// which is why only `Shutdown` signals go through the state machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// CHLD: a child changed state; reap.
    Reap,
    /// TERM, INT, QUIT: the state machine decides (pre-stop, stop signal, grace).
    Shutdown,
    /// Forward as this signal: the one received, or what `--rewrite` makes of it.
    Forward(Sig),
    /// Not forwarded: rewritten to 0, or TTIN/TTOU, which are the kernel's complaint about
    /// lastcall's own terminal access and mean nothing to the child (tini's rule). TSTP, sent on
    /// purpose, is forwarded.
    Drop,
    /// dumb-init's setsid mode, TSTP/TTIN/TTOU: send the child this (SIGSTOP unless rewritten;
    /// nothing if rewritten to 0), then stop lastcall itself.
    Suspend(Option<Sig>),
}

/// What the child gets for TSTP/TTIN/TTOU before lastcall stops itself (dumb-init's rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Suspend {
    /// SIGSTOP: in setsid mode the group has no terminal to stop it.
    WithStop,
    /// The signal as received: with `-c`, the child shares the terminal and its job control.
    AsReceived,
}

/// The route of every signal number, worked out once from the configuration, so that the
/// signal path is one table lookup.
pub struct Routes([Route; MAX_SIGNAL as usize + 1]);

impl Routes {
    /// `job_control`: TSTP/TTIN/TTOU suspend the child with SIGSTOP (dumb-init's setsid mode)
    /// or with the signal as received (dumb-init's `-c`), each unless rewritten, and then
    /// lastcall itself; `None`: tini's rule.
    pub fn new(job_control: Option<Suspend>, rewrite: &[(Sig, Sig)]) -> Routes {
        let mut table = [Route::Drop; MAX_SIGNAL as usize + 1];
        for (n, route) in table.iter_mut().enumerate().skip(1) {
            let sig = Sig(n as i32);
            *route = match sig {
                Sig::CHLD => Route::Reap,
                sig if sig.is_termination() => Route::Shutdown,
                Sig::TTIN | Sig::TTOU | Sig::TSTP if job_control.is_some() => {
                    let with = if job_control == Some(Suspend::WithStop) { Sig::STOP } else { sig };
                    Route::Suspend(rewritten_or(rewrite, sig, with))
                }
                Sig::TTIN | Sig::TTOU => Route::Drop,
                sig => rewritten_or(rewrite, sig, sig).map_or(Route::Drop, Route::Forward),
            };
        }
        Routes(table)
    }

    #[inline(always)]
    pub fn of(&self, sig: Sig) -> Route {
        self.0.get(sig.0 as usize).copied().unwrap_or(Route::Drop)
    }
}

/// The idle wait's short way, worked out once from the routes and the set-up: for each signal
/// number, whether the wait forwards it (and as what) or reaps orphans on the spot, with no
/// `Route` to decode, no sender to check and no log to consult; anything else takes the long way
/// (`Route`). It counts what it did, for /metrics (`drain`). Indexed by the signal number masked
/// to the table's size, so a lookup needs no bounds check (the kernel's numbers are 1..=64).
pub struct Quick {
    to: [i32; QUICK_SLOTS],
    taken: [u64; QUICK_SLOTS],
}

const QUICK_SLOTS: usize = 128;

/// What the short way does with a signal (`Quick::of`).
pub const LONG_WAY: i32 = 0;
/// SIGCHLD: reap orphans, unless the main child is among them.
pub const REAP_QUICKLY: i32 = -1;

impl Quick {
    /// `long_way`: signals that must always take the long way (the sockets' readiness signals,
    /// whose si_code decides). `forward`: whether signals may be forwarded the short way (not
    /// when each forward is logged); `reap`: whether orphans may be reaped the short way (not
    /// when each reap is logged or warned about).
    pub fn new(routes: &Routes, long_way: &[Sig], forward: bool, reap: bool) -> Quick {
        let mut to = [LONG_WAY; QUICK_SLOTS];
        for (n, slot) in to.iter_mut().enumerate().take(MAX_SIGNAL as usize + 1) {
            let sig = Sig(n as i32);
            if long_way.contains(&sig) {
                continue;
            }
            *slot = match routes.of(sig) {
                Route::Reap if reap => REAP_QUICKLY,
                // SIGPIPE may be lastcall's own (a log line to a closed stderr): its sender decides.
                Route::Forward(as_) if forward && sig != Sig::PIPE => as_.0,
                _ => LONG_WAY,
            };
        }
        Quick { to, taken: [0; QUICK_SLOTS] }
    }

    /// What the short way does with signal number `n`: forward it as the signal returned (> 0),
    /// reap (`REAP_QUICKLY`), or nothing (`LONG_WAY`).
    #[inline(always)]
    pub fn of(&self, n: usize) -> i32 {
        self.to[n % QUICK_SLOTS]
    }

    /// Whether SIGCHLD's orphans are reaped without a word: nobody is to hear of each reap (and
    /// the table is not closed).
    pub fn reaps_quietly(&self) -> bool {
        self.of(Sig::CHLD.0 as usize) == REAP_QUICKLY
    }

    /// One more signal number `n` taken the short way.
    #[inline(always)]
    pub fn count(&mut self, n: usize) {
        let count = &mut self.taken[n % QUICK_SLOTS];
        *count = count.wrapping_add(1);
    }

    /// Hands what was counted since the last call to `add(received, forwarded as, how many)`
    /// (None: reaped, not forwarded), and starts again from zero.
    pub fn drain(&mut self, mut add: impl FnMut(Sig, Option<Sig>, u64)) {
        for (n, count) in self.taken.iter_mut().enumerate() {
            if *count > 0 {
                let to = self.to[n];
                add(Sig(n as i32), (to > 0).then_some(Sig(to)), *count);
                *count = 0;
            }
        }
    }

    /// From now on every signal takes the long way (the main child is reaped: whether its group
    /// is still the app's must be checked each time). Call `drain` first.
    pub fn close(&mut self) {
        self.to = [LONG_WAY; QUICK_SLOTS];
    }
}

/// What `--rewrite` makes of `received`, or `default` when no rule names it; `None` when a rule
/// drops it (TO = 0). Of two rules for one signal the later wins, as dumb-init's table keeps the
/// last `-r` (and as a later flag overrides an earlier one).
pub fn rewritten_or(rewrite: &[(Sig, Sig)], received: Sig, default: Sig) -> Option<Sig> {
    match rewrite.iter().rev().find(|(from, _)| *from == received) {
        Some(&(_, Sig(0))) => None,
        Some(&(_, to)) => Some(to),
        None => Some(default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_numbers_and_prefixes() {
        assert_eq!(Sig::parse("TERM", false), Ok(Sig::TERM));
        assert_eq!(Sig::parse("SIGTERM", false), Ok(Sig::TERM));
        assert_eq!(Sig::parse("sigquit", false), Ok(Sig::QUIT));
        assert_eq!(Sig::parse("15", false), Ok(Sig::TERM));
        assert_eq!(Sig::parse("RTMIN", false), Ok(Sig(34)));
        assert_eq!(Sig::parse("SIGRTMIN+3", false), Ok(Sig(37)));
        assert_eq!(Sig::parse("RTMAX-1", false), Ok(Sig(63)));
        assert_eq!(Sig::parse("0", true), Ok(Sig(0)));
    }

    #[test]
    fn rejects_unknown_signals() {
        for bad in ["", "TERMINATE", "SIG", "0", "65", "-1", "RTMIN+40", "RTMAX+1", "1.5", "RTMAX-+1", "RTMIN+-1", "RTMIN++3", "+15", "-15", "RTMIN+ 3", "RTMIN-0x1"] {
            assert!(Sig::parse(bad, false).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn names_round_trip() {
        for n in 1..=MAX_SIGNAL {
            if let Some(name) = Sig(n).name() {
                let parsed = Sig::parse(&name, false).unwrap();
                // IOT/ABRT and POLL/IO are aliases: the number is what must survive.
                assert_eq!(parsed, Sig(n), "{name}");
            }
        }
        assert_eq!(Sig::TERM.to_string(), "SIGTERM");
        assert_eq!(Sig(40).to_string(), "SIGRTMIN+6");
    }

    #[test]
    fn routes_without_options() {
        let routes = Routes::new(None, &[]);
        assert_eq!(routes.of(Sig::CHLD), Route::Reap);
        for sig in [Sig::TERM, Sig::INT, Sig::QUIT] {
            assert_eq!(routes.of(sig), Route::Shutdown, "{sig}");
        }
        assert_eq!(routes.of(Sig::TTIN), Route::Drop);
        assert_eq!(routes.of(Sig::TTOU), Route::Drop);
        for sig in [Sig(libc::SIGHUP), Sig::TSTP, Sig(libc::SIGWINCH), Sig::PIPE, Sig(40), Sig(64)] {
            assert_eq!(routes.of(sig), Route::Forward(sig), "{sig}");
        }
        for impossible in [Sig(0), Sig(65), Sig(-1)] {
            assert_eq!(routes.of(impossible), Route::Drop);
        }
    }

    #[test]
    fn routes_in_job_control_mode() {
        let routes = Routes::new(Some(Suspend::WithStop), &[(Sig::TTIN, Sig::TSTP), (Sig::TTOU, Sig(0))]);
        assert_eq!(routes.of(Sig::TSTP), Route::Suspend(Some(Sig::STOP)));
        assert_eq!(routes.of(Sig::TTIN), Route::Suspend(Some(Sig::TSTP)));
        assert_eq!(routes.of(Sig::TTOU), Route::Suspend(None));
        assert_eq!(routes.of(Sig::CHLD), Route::Reap);
        let routes = Routes::new(Some(Suspend::AsReceived), &[(Sig::TTIN, Sig::TSTP)]);
        assert_eq!(routes.of(Sig::TSTP), Route::Suspend(Some(Sig::TSTP)));
        assert_eq!(routes.of(Sig::TTOU), Route::Suspend(Some(Sig::TTOU)));
        assert_eq!(routes.of(Sig::TTIN), Route::Suspend(Some(Sig::TSTP)));
    }

    #[test]
    fn rewrites_change_what_is_forwarded_not_what_starts_the_shutdown() {
        let rewrite = [(Sig::TERM, Sig::QUIT), (Sig(libc::SIGHUP), Sig(0)), (Sig(libc::SIGUSR1), Sig(libc::SIGUSR2))];
        let routes = Routes::new(None, &rewrite);
        assert_eq!(routes.of(Sig::TERM), Route::Shutdown, "the machine rewrites the stop signal");
        assert_eq!(routes.of(Sig(libc::SIGHUP)), Route::Drop, "rewritten to 0");
        assert_eq!(routes.of(Sig(libc::SIGUSR1)), Route::Forward(Sig(libc::SIGUSR2)));
        assert_eq!(routes.of(Sig(libc::SIGUSR2)), Route::Forward(Sig(libc::SIGUSR2)));
        assert_eq!(rewritten_or(&rewrite, Sig::TERM, Sig::TERM), Some(Sig::QUIT));
        assert_eq!(rewritten_or(&rewrite, Sig::INT, Sig::STOP), Some(Sig::STOP));
    }

    #[test]
    fn of_two_rules_for_one_signal_the_later_wins() {
        let usr1 = Sig(libc::SIGUSR1);
        let rewrite = [(usr1, Sig(libc::SIGUSR2)), (usr1, usr1), (Sig::TERM, Sig::QUIT), (Sig::TERM, Sig(0))];
        assert_eq!(rewritten_or(&rewrite, usr1, usr1), Some(usr1));
        assert_eq!(Routes::new(None, &rewrite).of(usr1), Route::Forward(usr1));
        assert_eq!(rewritten_or(&rewrite, Sig::TERM, Sig::TERM), None, "dropped by the later rule");
    }

    #[test]
    fn the_short_way_forwards_and_reaps_only_what_needs_no_decision() {
        let rewrite = [(Sig(libc::SIGUSR1), Sig(libc::SIGUSR2)), (Sig(libc::SIGHUP), Sig(0))];
        let routes = Routes::new(None, &rewrite);
        let mut quick = Quick::new(&routes, &[Sig(libc::SIGIO)], true, true);
        assert_eq!(quick.of(libc::SIGUSR1 as usize), libc::SIGUSR2);
        assert_eq!(quick.of(libc::SIGWINCH as usize), libc::SIGWINCH);
        assert_eq!(quick.of(64), 64);
        assert_eq!(quick.of(libc::SIGCHLD as usize), REAP_QUICKLY);
        assert!(quick.reaps_quietly());
        for long in [Sig::TERM, Sig::INT, Sig::QUIT, Sig::PIPE, Sig(libc::SIGIO), Sig(libc::SIGHUP), Sig::TTIN, Sig(0)] {
            assert_eq!(quick.of(long.0 as usize), LONG_WAY, "{long}");
        }
        // Out of the kernel's range: masked into the table, never a panic.
        assert_eq!(quick.of(65), LONG_WAY);
        assert_eq!(quick.of(usize::MAX), LONG_WAY);
        quick.count(libc::SIGUSR1 as usize);
        quick.count(libc::SIGUSR1 as usize);
        quick.count(libc::SIGCHLD as usize);
        let mut seen = vec![];
        quick.drain(|received, to, n| seen.push((received, to, n)));
        assert_eq!(seen, [(Sig(libc::SIGUSR1), Some(Sig(libc::SIGUSR2)), 2), (Sig::CHLD, None, 1)]);
        quick.drain(|_, _, _| panic!("drained twice"));
        quick.close();
        assert!(!quick.reaps_quietly());
        assert_eq!(quick.of(libc::SIGUSR1 as usize), LONG_WAY);
        assert_eq!(quick.of(libc::SIGCHLD as usize), LONG_WAY);
    }

    #[test]
    fn a_logged_forward_or_reap_takes_the_long_way() {
        let routes = Routes::new(None, &[]);
        let quick = Quick::new(&routes, &[], false, false);
        assert!(!quick.reaps_quietly());
        for n in 0..128 {
            assert_eq!(quick.of(n), LONG_WAY, "{n}");
        }
    }

    #[test]
    fn only_signals_that_end_a_process_end_lastcall() {
        for sig in [Sig::TERM, Sig::KILL, Sig(libc::SIGSEGV), Sig(libc::SIGHUP), Sig(33), Sig(64)] {
            assert!(sig.default_terminates(), "{sig}");
        }
        for n in [libc::SIGCHLD, libc::SIGCONT, libc::SIGURG, libc::SIGWINCH, libc::SIGSTOP, libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU] {
            assert!(!Sig(n).default_terminates(), "{n}");
        }
    }
}
