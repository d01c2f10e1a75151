//! Who lastcall is, by the name it runs under: installed as `tini` or `dumb-init` (a symlink
//! named like the peer), it behaves as that peer does, so swapping the binary changes nothing.
//! Any other name (`lastcall`, `docker-init`) gets lastcall's own defaults.
//!
//! The one owner of exit codes: lastcall's own below, and each peer's in its row.
//!
//! | exit code | meaning                                                          |
//! |-----------|------------------------------------------------------------------|
//! | N         | the main child exited with N                                     |
//! | 128+N     | the main child died from signal N (137 after the SIGKILL escalation), as PID 1 |
//! | signal N  | not PID 1: lastcall ends by the signal that ended the app (`reraise_signal_death`); 128+N under a peer's name |
//! | 126       | the command was found but could not be executed (permissions, not a program) |
//! | 127       | the command was not found                                        |
//! | 125       | lastcall itself failed (set-up, starting a process: no pids or memory) |
//! | 2         | usage error: bad option, bad value, no command                   |
//!
//! May import: machine (`OnMainExit`), reap (`Status`), signals (`Sig`).
//!
//! A personality is data: which spellings exist, how the peer's variables read, and the defaults
//! that differ. `cli` reads these fields once, into `Config`, and nothing compares names.
//! lastcall's own `LASTCALL_*` variables work under every name and win over the peer's
//! variables, so a dumb-init image gains a pre-stop with `ENV LASTCALL_PRE_STOP=5s` and nothing
//! else.
//!
//! | field                | lastcall              | tini 0.19                   | dumb-init 1.2.5                |
//! |----------------------|-----------------------|-----------------------------|--------------------------------|
//! | spellings            | all of lastcall's     | -h -s -p -v -w -g -e -l, `--version` alone | -h -c -r -v -V and their long names |
//! | getopt               | stop at a non-option  | GNU permutation             | stop at a non-option (`+`)     |
//! | usage error exit     | 2                     | 1                           | 1                              |
//! | own failure exit     | 125                   | 1                           | 1                              |
//! | child's session      | own group             | own group                   | own session (setsid); `-c`: dumb-init's group |
//! | signals go to        | the group             | the child (`-g`: group)     | the group (`-c`: the child)    |
//! | subreaper            | on                    | off (`-s`), warns if not PID 1 | off                         |
//! | escalation to KILL   | after the grace       | never                       | never                          |
//! | main child exits     | stop the rest, exit   | exit at once                | send rw(TERM) as forwarded, exit at once |
//! | TSTP/TTIN/TTOU       | tini's rule¹          | tini's rule                 | forward, then stop itself²     |
//! | exec failure         | 127 not found, else 126 | 127 ENOENT, 126 EACCES, else 1; `-e` maps it | 2  |
//! | a script without `#!` | 126, as runc (ENOEXEC) | run by /bin/sh (glibc's execvp) | run by /bin/sh (glibc's execvp) |
//! | log level, -v        | info, debug, trace    | warn, info, debug, trace    | warn, debug                    |
//! | OOM kills in text log | named                | silent (json still names them) | silent (json still names them) |
//! | the app died of N, not PID 1 | lastcall dies of N (same wait status) | exit 128+N  | exit 128+N                 |
//! | SIGCONT after a stop signal | yes (as systemd)  | no                          | no                             |
//! | help and version go to | stdout              | stdout                      | stderr                         |
//! | its own cwd while the app runs | / (left before the spawn) | where it was started | /             |
//! | a signal in its flags | name, number, RT      | `-p`: `SIGTERM`-style names of 1-31 | `-r`: numbers, FROM 1-31, TO 0-31 |
//! | the app's signals    | lastcall's inherited mask and dispositions | the same  | empty mask, 1-31 at SIG_DFL (ignored ones too) |
//!
//! ¹ TSTP forwarded, TTIN/TTOU dropped; dumb-init's rule with `--setsid`.
//! ² as SIGSTOP in setsid mode unless rewritten, as received (or rewritten) otherwise.

use log::LevelFilter;

use crate::machine::OnMainExit;
use crate::reap::Status;
use crate::signals::Sig;

/// lastcall's own exit codes (the table above); the peers' are in their rows.
pub const USAGE: i32 = 2;
pub const SETUP: i32 = 125;
pub const NOT_EXECUTABLE: i32 = 126;
pub const NOT_FOUND: i32 = 127;

/// How lastcall ends: with an exit code, or by the signal that killed the app.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    Code(i32),
    /// Only when lastcall is not PID 1 (the kernel does not let PID 1 kill itself) and `-e` did
    /// not map the app's code.
    Signal(Sig),
}

impl Ending {
    /// The exit code this ending gives: its own, or 128+N for signal N (what lastcall exits
    /// with when the signal cannot end it, and what the json log names).
    pub fn code(self) -> i32 {
        match self {
            Ending::Code(code) => code,
            Ending::Signal(sig) => 128 + sig.0,
        }
    }
}

/// How lastcall ends and what its child exits with when its start fails, taken from a
/// personality's row once (`Personality::exits`) so that the supervisor needs no name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exits {
    /// Exit codes for an errno that stopped exec, and for any other.
    pub exec_codes: &'static [(i32, i32)],
    pub exec_other: i32,
    /// The child's exit code when a step of its own before exec fails.
    pub setup: i32,
    /// An exec failure is the child's exit code, so `-e` maps it (tini's).
    pub remap_exec_failure: bool,
    /// Not PID 1, die of the signal the app died of rather than exit 128+N.
    pub reraise_signal_death: bool,
}

impl Exits {
    /// The exit code when exec fails with `errno`.
    pub fn exec_failure_code(&self, errno: Option<i32>) -> i32 {
        errno
            .and_then(|e| self.exec_codes.iter().find(|(n, _)| *n == e))
            .map_or(self.exec_other, |&(_, code)| code)
    }

    /// The exit code when the command could not be started: `code`, this personality's for the
    /// failure, or 0 where `-e` (`remap_exit`) maps it. Only tini's exec failure (`exec`) is
    /// mapped: it is its child's exit code.
    pub fn start_failure_exit(&self, code: i32, exec: bool, remap_exit: &[i32]) -> i32 {
        if exec && self.remap_exec_failure && remap_exit.contains(&code) {
            0
        } else {
            code
        }
    }

    /// How lastcall ends once the event loop returned `code`, the main child having ended as
    /// `main`: 0 where `-e` (`remap_exit`) maps the code; by the app's own signal when it died
    /// of one, lastcall is not PID 1 (which cannot kill itself) and this personality re-raises
    /// (`reraise_signal_death`); else with the code.
    pub fn ending(&self, code: i32, main: Option<Status>, pid1: bool, remap_exit: &[i32]) -> Ending {
        // `-e` maps the app's code: not the 137 of an app lastcall killed and never reaped.
        if main.is_some() && remap_exit.contains(&code) {
            Ending::Code(0)
        } else {
            match main {
                // Transparent: the parent reads the app's own death (not as PID 1, which cannot).
                Some(status @ Status::Signaled(sig, _)) if !pid1 && code == status.code() && self.reraise_signal_death => {
                    Ending::Signal(sig)
                }
                _ => Ending::Code(code),
            }
        }
    }
}

/// How the command line is split into options and the command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Getopt {
    /// Options end at the first non-option (getopt's `+`): `lastcall sh -c x` runs `sh -c x`.
    StopAtCommand,
    /// GNU getopt's default: options are taken from anywhere before `--`, so `tini app -s` runs
    /// `app` with tini's `-s`, and `tini sh -c x` is an unknown option `-c`. Unless the variable
    /// POSIXLY_CORRECT is set, as glibc does.
    Permute,
}

/// What TSTP, TTIN and TTOU do (not in setsid mode; there dumb-init's rule always applies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobControl {
    /// tini's: TSTP is forwarded like any other signal; TTIN/TTOU, the kernel's complaints about
    /// the init's own terminal access, are not.
    Tini,
    /// dumb-init's: forward the signal (or its rewrite), then stop itself, in both modes.
    DumbInit,
}

/// A setting a peer's variable can change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    Subreaper,
    /// Signal the child's process group rather than the child.
    Group,
    /// dumb-init's `use_setsid`: on, the child gets a session and signals go to its group; off,
    /// neither.
    Setsid,
    /// Log at debug level.
    Debug,
}

/// How a peer's variable is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerVar {
    /// Set at all, to any value (even empty or `0`): on. tini tests `getenv() != NULL`.
    AnyValueTurnsOn(Setting),
    /// Exactly this value turns the setting off; any other leaves it as it was (dumb-init's
    /// `strcmp(..., "0")`).
    ValueTurnsOff(&'static str, Setting),
    /// Exactly this value turns the setting on (dumb-init's `strcmp(..., "1")`).
    ValueTurnsOn(&'static str, Setting),
    /// A boolean: 1/true/yes/on or 0/false/no/off; anything else is a usage error. How lastcall
    /// reads the peers' variables under its own name.
    Bool(Setting),
    /// tini's verbosity: `atoi()` of the value (anything not a number is 0), an index into the
    /// personality's log levels. With `lenient`, a bad value is 0, as tini reads it, and the
    /// variable wins over `-v` (tini reads it after the flags); otherwise 0-3 only.
    Verbosity { lenient: bool },
}

/// The spellings a personality accepts on its command line; `None` in `Personality::spellings`
/// means all of lastcall's own.
#[derive(Debug, PartialEq, Eq)]
pub struct Spellings {
    pub shorts: &'static str,
    pub longs: &'static [&'static str],
}

#[derive(Debug, PartialEq, Eq)]
pub struct Personality {
    /// How the name reads in messages.
    pub name: &'static str,
    /// argv[0] basenames that select this personality.
    pub names: &'static [&'static str],
    pub spellings: Option<Spellings>,
    pub getopt: Getopt,
    /// getopt_long's unambiguous prefixes of long options (`--single` for `--single-child`).
    pub long_prefixes: bool,
    /// tini's `--version` counts only as the one and only argument.
    pub version_only_alone: bool,
    /// `lastcall probe ...` and `--pause` (`-P`) exist.
    pub subcommands: bool,
    pub usage_exit: i32,
    /// The exit code when lastcall's own set-up fails (a subreaper that was asked for, fork):
    /// the peers return 1 for their own failures.
    pub setup_exit: i32,
    pub setsid: bool,
    pub group: bool,
    /// Without setsid, signalling the child alone, the child still gets a process group of its
    /// own; dumb-init leaves it in its own group, where a terminal's Ctrl-C and Ctrl-Z reach both.
    pub own_group_for_single_child: bool,
    pub subreaper: bool,
    /// tini's warning when it is neither PID 1 nor a subreaper: orphans will not come back to it.
    pub warn_without_subreaper: bool,
    /// SIGKILL after the grace (lastcall's 8 s) by default; a peer waits for as long as it takes.
    pub escalates: bool,
    /// The app always finds LASTCALL_PRE_STOP_MS, LASTCALL_GRACE_MS and LASTCALL_CLOCK_ZERO_NS in
    /// its environment; a peer's app only when one of the two deadlines was set.
    pub deadlines_in_env: bool,
    pub on_main_exit: OnMainExit,
    pub job_control: JobControl,
    /// Exit codes for an errno that stopped exec, and for any other.
    pub exec_codes: &'static [(i32, i32)],
    pub exec_other: i32,
    /// tini's exec failure is its child's exit code, so `-e` maps it like any other.
    pub remap_exec_failure: bool,
    /// The default level, then the level after one, two, ... `-v` (the last one repeats).
    pub log_levels: &'static [LevelFilter],
    /// Index of the default in `log_levels`; lower entries are reached with `-q` or a verbosity.
    pub log_default: usize,
    /// The peer's variables, read after `LASTCALL_*` (which win) and before the default.
    pub peer_vars: &'static [(&'static str, PeerVar)],
    /// `-h` under the peer's name: what the peer's own `-h` lists (its "Usage:" line is also the
    /// one usage errors show). `None`: lastcall's own help, made from its option table.
    pub peer_help: Option<&'static str>,
    /// Whether the text log names a process the OOM killer killed; the peers say nothing.
    pub names_oom_kills: bool,
    /// When the app dies of signal N and lastcall is not PID 1: die of N too, so that the parent
    /// reads the app's own wait status (lastcall's), or exit 128+N as the peers do (a supervisor
    /// reading the status sees 143, not "killed by SIGTERM").
    pub reraise_signal_death: bool,
    /// SIGCONT right after each stop signal of the shutdown, as systemd sends it, so that a
    /// stopped process runs its handler. The peers send none: an app that handles both would
    /// see the SIGCONT first (the kernel runs the later handler first).
    pub cont_after_stop: bool,
    pub child_signals: ChildSignals,
    /// dumb-init prints its help and version on stderr; a script that reads them reads there.
    pub texts_to_stderr: bool,
    /// chdir("/"), so that the init keeps no mount busy (dumb-init does; tini stays where it was
    /// started). Before the spawn, the child going back to the directory before exec, so that
    /// the app never sees the init's directory change (`launch::leave_cwd`).
    pub leaves_cwd: bool,
    /// A file exec refuses as no program (ENOEXEC: a script without `#!`) runs as
    /// `/bin/sh FILE ARGS...`, as glibc's execvp does it for the peers; lastcall's own name keeps
    /// runc's answer, 126, since a script that needs a shell should name it.
    pub scripts_through_sh: bool,
    /// How the peer's own flags spell a signal; lastcall's variables keep lastcall's spelling.
    pub flag_signals: FlagSignals,
}

/// How a signal is spelled in the peer's own flags (`-r` for dumb-init, `-p` for tini).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlagSignals {
    /// lastcall's: `TERM`, `sigterm`, `15`, `RTMIN+2`.
    Any,
    /// dumb-init's `-r`: `sscanf("%d:%d")`, FROM 1-31, TO 0-31 (0 drops the signal).
    Numbers31,
    /// tini's `-p`: exactly one of its names, `SIGTERM` style (no numbers, no real-time).
    TiniNames,
}

/// The names tini's `-p` knows (tini.c's `signal_names`).
const TINI_SIGNAL_NAMES: [&str; 28] = [
    "SIGHUP", "SIGINT", "SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT", "SIGBUS", "SIGFPE", "SIGKILL", "SIGUSR1",
    "SIGSEGV", "SIGUSR2", "SIGPIPE", "SIGALRM", "SIGTERM", "SIGCHLD", "SIGCONT", "SIGSTOP", "SIGTSTP", "SIGTTIN",
    "SIGTTOU", "SIGURG", "SIGXCPU", "SIGXFSZ", "SIGVTALRM", "SIGPROF", "SIGWINCH", "SIGSYS",
];

/// C's `%d` at the start of `text`: blanks, a sign, digits; the number and what follows.
fn scan_int(text: &str) -> Option<(i64, &str)> {
    let t = text.trim_start();
    let digits_at = usize::from(t.starts_with(['+', '-']));
    let end = t[digits_at..].find(|c: char| !c.is_ascii_digit()).map_or(t.len(), |i| i + digits_at);
    let n = t[..end].parse::<i64>().ok()?;
    Some((n, &t[end..]))
}

impl FlagSignals {
    /// Whether the peer would take `text` as the value of its flag: a whole `FROM:TO` for
    /// `Numbers31`, one signal for `TiniNames`.
    pub fn accepts(self, text: &str) -> bool {
        match self {
            FlagSignals::Any => true,
            FlagSignals::Numbers31 => {
                let Some((from, rest)) = scan_int(text) else { return false };
                let Some((to, _)) = rest.strip_prefix(':').and_then(scan_int) else { return false };
                (1..=31).contains(&from) && (0..=31).contains(&to)
            }
            FlagSignals::TiniNames => TINI_SIGNAL_NAMES.contains(&text),
        }
    }
}

/// The signal mask and dispositions the app starts with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildSignals {
    /// What lastcall was started with (tini does the same).
    Inherited,
    /// dumb-init's: it unblocks everything in its child and has installed a handler on 1-31,
    /// which exec turns into SIG_DFL, so an inherited SIG_IGN on those is gone (32-64 keep theirs).
    EmptyMaskStandardDefault,
}

use LevelFilter::{Debug, Error, Info, Off, Trace, Warn};

pub const LASTCALL: Personality = Personality {
    name: "lastcall",
    names: &[],
    spellings: None,
    getopt: Getopt::StopAtCommand,
    long_prefixes: false,
    version_only_alone: false,
    subcommands: true,
    usage_exit: USAGE,
    setup_exit: SETUP,
    setsid: false,
    group: true,
    own_group_for_single_child: true,
    subreaper: true,
    warn_without_subreaper: false,
    escalates: true,
    deadlines_in_env: true,
    on_main_exit: OnMainExit::StopTheRest,
    job_control: JobControl::Tini,
    exec_codes: &[(libc::ENOENT, NOT_FOUND), (libc::ENOTDIR, NOT_FOUND)],
    exec_other: NOT_EXECUTABLE,
    remap_exec_failure: false,
    log_levels: &[Off, Error, Warn, Info, Debug, Trace],
    log_default: 3,
    peer_vars: &[
        ("TINI_SUBREAPER", PeerVar::Bool(Setting::Subreaper)),
        ("TINI_KILL_PROCESS_GROUP", PeerVar::Bool(Setting::Group)),
        ("DUMB_INIT_SETSID", PeerVar::Bool(Setting::Setsid)),
        ("TINI_VERBOSITY", PeerVar::Verbosity { lenient: false }),
    ],
    peer_help: None,
    names_oom_kills: true,
    reraise_signal_death: true,
    cont_after_stop: true,
    child_signals: ChildSignals::Inherited,
    texts_to_stderr: false,
    leaves_cwd: true,
    scripts_through_sh: false,
    flag_signals: FlagSignals::Any,
};

pub const TINI: Personality = Personality {
    name: "tini",
    names: &["tini", "tini-static"],
    spellings: Some(Spellings { shorts: "hspvwgel", longs: &[] }),
    getopt: Getopt::Permute,
    long_prefixes: false,
    version_only_alone: true,
    subcommands: false,
    usage_exit: 1,
    setup_exit: 1,
    setsid: false,
    group: false,
    own_group_for_single_child: true,
    subreaper: false,
    warn_without_subreaper: true,
    escalates: false,
    deadlines_in_env: false,
    on_main_exit: OnMainExit::Exit,
    job_control: JobControl::Tini,
    exec_codes: &[(libc::ENOENT, 127), (libc::EACCES, 126)],
    exec_other: 1,
    remap_exec_failure: true,
    // tini's verbosity 0 (fatal only) to 4 (trace); 1 is its default.
    log_levels: &[Error, Warn, Info, Debug, Trace],
    log_default: 1,
    peer_vars: &[
        ("TINI_SUBREAPER", PeerVar::AnyValueTurnsOn(Setting::Subreaper)),
        ("TINI_KILL_PROCESS_GROUP", PeerVar::AnyValueTurnsOn(Setting::Group)),
        ("TINI_VERBOSITY", PeerVar::Verbosity { lenient: true }),
    ],
    peer_help: Some(TINI_HELP),
    names_oom_kills: false,
    reraise_signal_death: false,
    cont_after_stop: false,
    child_signals: ChildSignals::Inherited,
    texts_to_stderr: false,
    leaves_cwd: false,
    scripts_through_sh: true,
    flag_signals: FlagSignals::TiniNames,
};

pub const DUMB_INIT: Personality = Personality {
    name: "dumb-init",
    names: &["dumb-init"],
    spellings: Some(Spellings { shorts: "hcrvV", longs: &["help", "single-child", "rewrite", "verbose", "version"] }),
    getopt: Getopt::StopAtCommand,
    long_prefixes: true,
    version_only_alone: false,
    subcommands: false,
    usage_exit: 1,
    setup_exit: 1,
    setsid: true,
    group: true,
    own_group_for_single_child: false,
    subreaper: false,
    warn_without_subreaper: false,
    escalates: false,
    deadlines_in_env: false,
    on_main_exit: OnMainExit::ForwardTermAndExit,
    job_control: JobControl::DumbInit,
    exec_codes: &[],
    exec_other: 2,
    remap_exec_failure: false,
    log_levels: &[Warn, Debug],
    log_default: 0,
    peer_vars: &[
        ("DUMB_INIT_SETSID", PeerVar::ValueTurnsOff("0", Setting::Setsid)),
        ("DUMB_INIT_DEBUG", PeerVar::ValueTurnsOn("1", Setting::Debug)),
    ],
    peer_help: Some(DUMB_INIT_HELP),
    names_oom_kills: false,
    reraise_signal_death: false,
    cont_after_stop: false,
    child_signals: ChildSignals::EmptyMaskStandardDefault,
    texts_to_stderr: true,
    leaves_cwd: true,
    scripts_through_sh: true,
    flag_signals: FlagSignals::Numbers31,
};

/// tini 0.19's `-h`, but for its version line.
const TINI_HELP: &str = r#"Usage: tini [OPTIONS] PROGRAM -- [ARGS] | --version

Execute a program under the supervision of a valid init process (tini)

Command line options:

  --version: Show version and exit.
  -h: Show this help message and exit.
  -s: Register as a process subreaper (requires Linux >= 3.4).
  -p SIGNAL: Trigger SIGNAL when parent dies, e.g. "-p SIGKILL".
  -v: Generate more verbose output. Repeat up to 3 times.
  -w: Print a warning when processes are getting reaped.
  -g: Send signals to the child's process group.
  -e EXIT_CODE: Remap EXIT_CODE (from 0 to 255) to 0.
  -l: Show license and exit.

Environment variables:

  TINI_SUBREAPER: Register as a process subreaper (requires Linux >= 3.4).
  TINI_VERBOSITY: Set the verbosity level (default: 1).
  TINI_KILL_PROCESS_GROUP: Send signals to the child's process group.
"#;

/// dumb-init 1.2.5's `-h`, but for its version line and its link.
const DUMB_INIT_HELP: &str = "Usage: dumb-init [option] command [[arg] ...]

dumb-init is a simple process supervisor that forwards signals to children.
It is designed to run as PID1 in minimal container environments.

Optional arguments:
   -c, --single-child   Run in single-child mode.
                        In this mode, signals are only proxied to the
                        direct child and not any of its descendants.
   -r, --rewrite s:r    Rewrite received signal s to new signal r before proxying.
                        To ignore (not proxy) a signal, rewrite it to 0.
                        This option can be specified multiple times.
   -v, --verbose        Print debugging information to stderr.
   -h, --help           Print this help message and exit.
   -V, --version        Print the current version and exit.
";

const PEERS: [&Personality; 2] = [&TINI, &DUMB_INIT];

impl Personality {
    /// The personality for a program run as `argv0`: by its basename, lastcall's own for any
    /// name that is not a peer's.
    pub fn of(argv0: &std::ffi::OsStr) -> &'static Personality {
        use std::os::unix::ffi::OsStrExt;
        let bytes = argv0.as_bytes();
        let base = bytes.rsplit(|&b| b == b'/').next().unwrap_or(bytes);
        PEERS.into_iter().find(|p| p.names.iter().any(|n| n.as_bytes() == base)).unwrap_or(&LASTCALL)
    }

    /// Whether an option spelled `--long` or `-c` exists under this name.
    pub fn has_long(&self, long: &str) -> bool {
        self.spellings.as_ref().is_none_or(|s| s.longs.contains(&long))
    }

    pub fn has_short(&self, c: char) -> bool {
        self.spellings.as_ref().is_none_or(|s| s.shorts.contains(c))
    }

    /// The exit code when exec fails with `errno`.
    pub fn exec_failure_code(&self, errno: Option<i32>) -> i32 {
        self.exits().exec_failure_code(errno)
    }

    /// This name's exit codes and how it ends, as `Config` carries them to the supervisor.
    pub fn exits(&self) -> Exits {
        Exits {
            exec_codes: self.exec_codes,
            exec_other: self.exec_other,
            setup: self.setup_exit,
            remap_exec_failure: self.remap_exec_failure,
            reraise_signal_death: self.reraise_signal_death,
        }
    }

    /// The log level after `verbose` `-v` and `quiet` `-q` flags.
    pub fn log_level(&self, verbose: usize, quiet: usize) -> LevelFilter {
        let at = (self.log_default + verbose).saturating_sub(quiet);
        self.log_levels[at.min(self.log_levels.len() - 1)]
    }

    /// The log level for a verbosity number (tini's 0-4), clamped to the scale.
    pub fn log_level_at(&self, verbosity: usize) -> LevelFilter {
        self.log_levels[verbosity.min(self.log_levels.len() - 1)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn the_name_is_argv0s_basename() {
        assert_eq!(Personality::of(OsStr::new("/usr/bin/dumb-init")).name, "dumb-init");
        assert_eq!(Personality::of(OsStr::new("tini")).name, "tini");
        assert_eq!(Personality::of(OsStr::new("./tini-static")).name, "tini");
        for own in ["lastcall", "/sbin/docker-init", "/usr/bin/tini.bak", "dumb-init2", "", "/"] {
            assert_eq!(Personality::of(OsStr::new(own)).name, "lastcall", "{own:?}");
        }
    }

    #[test]
    fn exec_failure_codes_follow_each_peer() {
        let (enoent, eacces, enoexec) = (Some(libc::ENOENT), Some(libc::EACCES), Some(libc::ENOEXEC));
        assert_eq!([enoent, eacces, enoexec].map(|e| LASTCALL.exec_failure_code(e)), [127, 126, 126]);
        assert_eq!([enoent, eacces, enoexec].map(|e| TINI.exec_failure_code(e)), [127, 126, 1]);
        assert_eq!([enoent, eacces, enoexec].map(|e| DUMB_INIT.exec_failure_code(e)), [2, 2, 2]);
    }

    #[test]
    fn endings_follow_each_peer() {
        let term = Some(Status::Signaled(Sig::TERM, false));
        // Not PID 1: lastcall dies of the app's signal; the peers exit 128+N.
        assert_eq!(LASTCALL.exits().ending(143, term, false, &[]), Ending::Signal(Sig::TERM));
        assert_eq!(TINI.exits().ending(143, term, false, &[]), Ending::Code(143));
        assert_eq!(DUMB_INIT.exits().ending(143, term, false, &[]), Ending::Code(143));
        // PID 1 cannot kill itself; a code other than the app's (the escalation's 137) is kept.
        assert_eq!(LASTCALL.exits().ending(143, term, true, &[]), Ending::Code(143));
        assert_eq!(LASTCALL.exits().ending(137, term, false, &[]), Ending::Code(137));
        assert_eq!(LASTCALL.exits().ending(3, Some(Status::Exited(3)), false, &[]), Ending::Code(3));
        assert_eq!(LASTCALL.exits().ending(125, None, false, &[]), Ending::Code(125));
        // `-e` maps a code to 0 before anything else.
        assert_eq!(LASTCALL.exits().ending(143, term, false, &[143]), Ending::Code(0));
        assert_eq!(TINI.exits().ending(3, Some(Status::Exited(3)), true, &[3]), Ending::Code(0));
        // `-e 137` maps an app that died of SIGKILL, not lastcall's own escalation whose app was
        // never reaped: that stays 137.
        let killed = Some(Status::Signaled(Sig::KILL, false));
        assert_eq!(LASTCALL.exits().ending(137, killed, true, &[137]), Ending::Code(0));
        for exits in [LASTCALL.exits(), TINI.exits(), DUMB_INIT.exits()] {
            assert_eq!(exits.ending(137, None, true, &[137]), Ending::Code(137));
        }
        assert_eq!([Ending::Code(3), Ending::Signal(Sig::TERM)].map(Ending::code), [3, 143]);
        // Only tini's exec failure is its child's code, which `-e` maps.
        assert_eq!(TINI.exits().start_failure_exit(127, true, &[127]), 0);
        assert_eq!(TINI.exits().start_failure_exit(1, false, &[1]), 1);
        assert_eq!(LASTCALL.exits().start_failure_exit(127, true, &[127]), 127);
        assert_eq!(DUMB_INIT.exits().start_failure_exit(2, true, &[2]), 2);
    }

    /// Every way the app can end (or not be reaped), PID 1 or not, with `-e` naming its code or
    /// not, under every name: the machine's code (the app's, 128+N, or 137) becomes the table's
    /// ending.
    #[test]
    fn every_end_pid1_or_not_ends_as_the_table_says() {
        let ends = (0..=255).map(Status::Exited).chain((1..=64).map(|n| Status::Signaled(Sig(n), false))).map(Some).chain([None]);
        for end in ends {
            let code = end.map_or(crate::machine::KILLED_CODE, Status::code);
            for (p, reraises) in [(&LASTCALL, true), (&TINI, false), (&DUMB_INIT, false)] {
                for pid1 in [false, true] {
                    for remap in [vec![], vec![code], vec![code.wrapping_add(1)]] {
                        let expected = match end {
                            Some(_) if remap.contains(&code) => Ending::Code(0),
                            Some(Status::Signaled(sig, _)) if !pid1 && reraises => Ending::Signal(sig),
                            _ => Ending::Code(code),
                        };
                        assert_eq!(p.exits().ending(code, end, pid1, &remap), expected, "{} {end:?} pid1 {pid1} -e {remap:?}", p.names[0]);
                    }
                }
            }
        }
    }

    #[test]
    fn signals_in_flags_as_each_peer_reads_them() {
        assert!(LASTCALL.flag_signals.accepts("RTMIN+1:0"));
        for ok in ["15:3", "1:31", "31:0", " 15:+2", "15:12junk"] {
            assert!(DUMB_INIT.flag_signals.accepts(ok), "{ok}");
        }
        for bad in ["", "15", "15:", "15::12", "15:derp", "herp:derp", "1:32", "0:1", "TERM:INT", "15:RTMIN"] {
            assert!(!DUMB_INIT.flag_signals.accepts(bad), "{bad}");
        }
        assert!(TINI.flag_signals.accepts("SIGUSR1") && TINI.flag_signals.accepts("SIGSYS"));
        for bad in ["USR1", "sigusr1", "10", "SIGIO", "SIGRTMIN", "SIGIOT"] {
            assert!(!TINI.flag_signals.accepts(bad), "{bad}");
        }
    }

    #[test]
    fn log_levels_per_name() {
        assert_eq!(LASTCALL.log_level(0, 0), Info);
        assert_eq!(LASTCALL.log_level(1, 0), Debug);
        assert_eq!(LASTCALL.log_level(0, 3), Off);
        assert_eq!(LASTCALL.log_level(0, 9), Off);
        assert_eq!(TINI.log_level(0, 0), Warn);
        assert_eq!(TINI.log_level(3, 0), Trace);
        assert_eq!(TINI.log_level(9, 0), Trace);
        assert_eq!(TINI.log_level_at(0), Error);
        assert_eq!(DUMB_INIT.log_level(0, 0), Warn);
        assert_eq!(DUMB_INIT.log_level(1, 0), Debug);
        assert_eq!(DUMB_INIT.log_level(2, 0), Debug);
    }
}
