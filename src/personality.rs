//! Who lastcall is, by the name it runs under: installed as `tini` or `dumb-init` (a symlink
//! named like the peer), it behaves as that peer does, so swapping the binary changes nothing.
//! Any other name (`lastcall`, `docker-init`) gets lastcall's own defaults.
//!
//! A personality is data: which spellings exist, how the peer's variables read, and the defaults
//! that differ. The rest of lastcall reads these fields and never compares names. lastcall's own
//! `LASTCALL_*` variables work under every name and win over the peer's variables, so a
//! dumb-init image gains a pre-stop with `ENV LASTCALL_PRE_STOP=5s` and nothing else.
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
//! | log level, -v        | info, debug, trace    | warn, info, debug, trace    | warn, debug                    |
//!
//! ¹ TSTP forwarded, TTIN/TTOU dropped; dumb-init's rule with `--setsid`.
//! ² as SIGSTOP in setsid mode unless rewritten, as received (or rewritten) otherwise.

use log::LevelFilter;

use crate::machine::OnMainExit;

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
    /// The app always finds LASTCALL_PRE_STOP_MS and LASTCALL_GRACE_MS in its environment; a
    /// peer's app only when one of the two was set.
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
    usage_exit: 2,
    setup_exit: crate::error::SETUP,
    setsid: false,
    group: true,
    own_group_for_single_child: true,
    subreaper: true,
    warn_without_subreaper: false,
    escalates: true,
    deadlines_in_env: true,
    on_main_exit: OnMainExit::StopTheRest,
    job_control: JobControl::Tini,
    exec_codes: &[(libc::ENOENT, 127), (libc::ENOTDIR, 127)],
    exec_other: 126,
    remap_exec_failure: false,
    log_levels: &[Off, Error, Warn, Info, Debug, Trace],
    log_default: 3,
    peer_vars: &[
        ("TINI_SUBREAPER", PeerVar::Bool(Setting::Subreaper)),
        ("TINI_KILL_PROCESS_GROUP", PeerVar::Bool(Setting::Group)),
        ("DUMB_INIT_SETSID", PeerVar::Bool(Setting::Setsid)),
        ("TINI_VERBOSITY", PeerVar::Verbosity { lenient: false }),
    ],
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
};

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
        errno
            .and_then(|e| self.exec_codes.iter().find(|(n, _)| *n == e))
            .map_or(self.exec_other, |&(_, code)| code)
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
