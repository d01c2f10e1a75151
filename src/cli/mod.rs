//! Command line and environment → a validated `Config`.
//!
//! Every option has a `LASTCALL_<NAME>` variable because `dockerd --init-path` runs the init as
//! `INIT -- COMMAND...` and cannot pass flags. A flag wins over its variable, which wins over
//! the tini or dumb-init variable of the same meaning. Option parsing stops at the first
//! non-option, so `lastcall sh -c x` runs `sh -c x`. tini's, dumb-init's and catatonit's flags
//! are accepted with their meaning (they do not collide), so lastcall is a drop-in for each.
//! Getopt, precedence and the errors that name an option are here; the option table and the
//! help are `options`'s, the types built are `config`'s, the parsers of single values are
//! `values`'s, and the app's environment is `child_env`'s.
//!
//! May import: its `child_env`, `options` and `values`, config, error, logging, machine, personality, signals, sys,
//! user.

use std::borrow::Cow;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

use log::LevelFilter;

use crate::error::{Error, OneLine};
use crate::logging::{Format, Seconds};
use crate::machine::UnreadyOn;
use crate::personality::{Getopt, JobControl, PeerVar, Personality, Setting, LASTCALL};
use crate::signals::{Sig, Suspend};
use crate::sys;
// Re-exported: the fuzz targets and callers reach these as `lastcall::cli::...`.
pub use crate::config::{Config, ProbeConfig, ProbeTarget, Subreaper, HEALTH_PROBE_TIMEOUT, PROBE_TIMEOUT};
use crate::config::Inherited;
pub use values::{parse_duration, MAX_DURATION};
pub use child_env::{child_environment, Runtime};
use values::*;

mod child_env;
pub mod man;
mod options;
mod values;
use options::{help_text, license, opt, Id, Opt, OPTIONS};

/// What `parse` found: a configuration to run, a probe to make, or text to print (exit 0).
#[derive(Debug)]
pub enum Parsed {
    Run(Config),
    Probe(ProbeConfig),
    Print(String),
}

/// What a usage error prints on stderr. Under lastcall's own names, one line that names what was
/// wrong: in `docker logs` a usage footer is noise, and `--help` is one word away. Under a peer's
/// name, the peer's way: the error, its usage line and how to get help ("Try 'tini -h'").
pub fn usage_error_text(personality: &Personality, error: &Error) -> String {
    match personality.peer_help {
        None => format!("lastcall: {error}\n"),
        Some(help) => {
            let usage = help.lines().find(|l| l.starts_with("Usage:")).unwrap_or_default();
            format!("{}: {error}\n{usage}\nTry '{} -h' for more information.\n", personality.name, personality.name)
        }
    }
}

/// The shortest stop budget among the platforms lastcall runs under: `docker stop`, Podman and
/// Compose wait 10 s before their SIGKILL (Kubernetes 30 s, systemd 90 s). With no settings,
/// lastcall's own escalation and the last line of its timeline must land inside it.
const PLATFORM_STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// What lastcall keeps back from a stop budget for its SIGKILL, the reaping and the last log
/// line, so that the platform's SIGKILL never races its own; on a loaded 2-core machine these
/// took well under a second.
pub const STOP_MARGIN: Duration = Duration::from_secs(2);
/// 8 s: Docker's 10 s less the margin.
const DEFAULT_GRACE: Duration = PLATFORM_STOP_TIMEOUT.saturating_sub(STOP_MARGIN);
/// The log level under lastcall's own name (and `docker-init`'s): the shutdown timeline, which
/// is what `docker logs` and the journal should show after a bad deploy. A peer's personality
/// (tini, dumb-init) keeps that peer's quieter default instead.
pub const DEFAULT_LOG_LEVEL: LevelFilter = LevelFilter::Info;
const LOG_ENV: &str = "LASTCALL_LOG";


/// The options seen on the command line, in order, and the command after them.
struct CommandLine {
    given: Vec<(Id, Option<String>)>,
    command: Vec<OsString>,
}

impl CommandLine {
    fn last(&self, id: Id) -> Option<&str> {
        self.given.iter().rev().find(|(i, _)| *i == id).and_then(|(_, v)| v.as_deref())
    }

    fn all(&self, id: Id) -> impl Iterator<Item = &str> {
        self.given.iter().filter(move |(i, _)| *i == id).filter_map(|(_, v)| v.as_deref())
    }

    fn count(&self, id: Id) -> usize {
        self.given.iter().filter(|(i, _)| *i == id).count()
    }

    fn has(&self, id: Id) -> bool {
        self.count(id) > 0
    }

    /// Which of `ids` came last on the command line.
    fn last_of(&self, ids: &[Id]) -> Option<Id> {
        self.given.iter().rev().map(|(i, _)| *i).find(|i| ids.contains(i))
    }

    /// The options given with a value, as their variables: the last value, or a list option's
    /// values joined with commas as its variable takes them (`Config::flags`).
    fn as_variables(&self) -> Vec<(&'static str, String)> {
        let mut vars: Vec<(&'static str, String)> = Vec::new();
        for (id, value) in &self.given {
            let (Some(name), Some(value)) = (opt(*id).env, value) else { continue };
            match vars.iter_mut().find(|(n, _)| *n == name) {
                Some((_, v)) if matches!(id, Id::Rewrite | Id::RemapExit) => {
                    v.push(',');
                    v.push_str(value);
                }
                Some((_, v)) => v.clone_from(value),
                None => vars.push((name, value.clone())),
            }
        }
        vars
    }
}

/// getopt: options first, then the command; `--` ends the options early. With
/// `Getopt::Permute` (tini's glibc getopt), options after a non-option are options too, and the
/// non-options keep their order. Only the spellings `personality` has exist.
fn split_command_line(
    args: Vec<OsString>,
    options: &[&Opt],
    personality: &Personality,
    getopt: Getopt,
) -> Result<CommandLine, Error> {
    let mut given = Vec::new();
    let mut operands = Vec::new();
    let mut rest = args.into_iter();
    while let Some(arg) = rest.next() {
        if arg == "--" {
            break;
        }
        let text = match arg.to_str() {
            Some(t) if t.starts_with('-') && t.len() > 1 => t.to_string(),
            _ if getopt == Getopt::Permute => {
                operands.push(arg);
                continue;
            }
            _ => {
                let command = std::iter::once(arg).chain(rest).collect();
                return Ok(CommandLine { given, command });
            }
        };
        if let Some(long) = text.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            let spelled = |o: &&&Opt| personality.has_long(o.long);
            let exact = options.iter().filter(spelled).find(|o| o.long == name);
            // getopt_long takes an unambiguous prefix: `--single` for `--single-child`.
            let prefixed = || {
                let mut matches = options.iter().filter(spelled).filter(|o| !name.is_empty() && o.long.starts_with(name));
                match (matches.next(), matches.next()) {
                    (Some(o), None) if personality.long_prefixes => Some(o),
                    _ => None,
                }
            };
            let opt = exact.or_else(prefixed).ok_or_else(|| {
                let spellings = options.iter().filter(spelled).map(|o| o.long);
                Error::Usage(match closest(name, spellings) {
                    Some(meant) => format!("unknown option '--{name}'; did you mean --{meant}?"),
                    None => format!("unknown option '--{name}'"),
                })
            })?;
            let name = opt.long;
            let value = match (opt.value, inline) {
                (None, None) => None,
                (None, Some(_)) => return Err(Error::Usage(format!("option '--{name}' takes no value"))),
                (Some(_), Some(v)) => Some(v),
                (Some(_), None) => Some(next_value(&mut rest, &format!("--{name}"))?),
            };
            given.push((opt.id, value));
            continue;
        }
        // A cluster of short options: -vv, -sg, or one that takes the rest as its value (-e143).
        let cluster = &text[1..];
        for (i, c) in cluster.char_indices() {
            let opt = options
                .iter()
                .find(|o| o.shorts.contains(&c) && personality.has_short(c))
                .ok_or_else(|| Error::Usage(format!("unknown option '-{c}'")))?;
            if opt.value.is_none() {
                given.push((opt.id, None));
                continue;
            }
            let attached = &cluster[i + c.len_utf8()..];
            let value = if attached.is_empty() { next_value(&mut rest, &format!("-{c}"))? } else { attached.to_string() };
            given.push((opt.id, Some(value)));
            break;
        }
    }
    operands.extend(rest);
    Ok(CommandLine { given, command: operands })
}

fn next_value(rest: &mut impl Iterator<Item = OsString>, flag: &str) -> Result<String, Error> {
    let value = rest.next().ok_or_else(|| Error::Usage(format!("option '{flag}' needs a value")))?;
    value.into_string().map_err(|v| bad_value(flag, &v.to_string_lossy(), "not valid UTF-8"))
}

/// Reads the environment for one parse, naming the variable in every error.
struct Env<F> {
    lookup: F,
}

impl<F: Fn(&str) -> Option<OsString>> Env<F> {
    /// The variable's value, if set and not empty.
    fn get(&self, name: &str) -> Result<Option<String>, Error> {
        match (self.lookup)(name) {
            Some(v) if !v.is_empty() => {
                v.into_string().map(Some).map_err(|v| bad_value(name, &v.to_string_lossy(), "not valid UTF-8"))
            }
            _ => Ok(None),
        }
    }

    fn bool(&self, name: &str) -> Result<Option<bool>, Error> {
        self.get(name)?.map(|v| parse_bool(&v).map_err(|why| bad_value(name, &v, &why))).transpose()
    }

    /// The variable as set, even to nothing: tini's `getenv() != NULL`.
    fn raw(&self, name: &str) -> Option<OsString> {
        (self.lookup)(name)
    }

    /// What the personality's peer variables say about `setting`: the first one that says
    /// anything.
    fn peer_setting(&self, personality: &Personality, setting: Setting) -> Result<Option<bool>, Error> {
        for &(name, how) in personality.peer_vars {
            let said = match how {
                PeerVar::AnyValueTurnsOn(s) if s == setting => self.raw(name).map(|_| true),
                PeerVar::ValueTurnsOff(value, s) if s == setting => self.raw(name).filter(|v| v == value).map(|_| false),
                PeerVar::ValueTurnsOn(value, s) if s == setting => self.raw(name).filter(|v| v == value).map(|_| true),
                PeerVar::Bool(s) if s == setting => self.bool(name)?,
                _ => None,
            };
            if said.is_some() {
                return Ok(said);
            }
        }
        Ok(None)
    }
}

/// Parses `args` (with the program name first) and looks variables up with `env`.
pub fn parse<I, F>(args: I, env: F) -> Result<Parsed, Error>
where
    I: IntoIterator<Item = OsString>,
    F: Fn(&str) -> Option<OsString>,
{
    parse_all(args, env, std::iter::empty())
}

/// `parse`, also given the names of every variable in the environment, so that a misspelt
/// `LASTCALL_*` one (a wrong letter, a wrong prefix, lower case, one lastcall only writes) is
/// warned about (or, with LASTCALL_STRICT=1, refused) instead of silently turning a feature off.
pub fn parse_all<I, F, N>(args: I, env: F, names: N) -> Result<Parsed, Error>
where
    I: IntoIterator<Item = OsString>,
    F: Fn(&str) -> Option<OsString>,
    N: IntoIterator<Item = OsString>,
{
    let mut parsed = parse_args(args, &env)?;
    if let Parsed::Run(config) = &mut parsed {
        let env = Env { lookup: &env };
        config.warnings = unknown_variables(names);
        if let (Some(first), Some(true)) = (config.warnings.first(), env.bool(STRICT_ENV)?) {
            return Err(Error::Usage(format!("{first} ({STRICT_ENV} is on)")));
        }
    }
    Ok(parsed)
}

/// The prefixes of the variables that set options (lastcall's own, and the peers').
const OPTION_PREFIXES: [&[u8]; 4] = [b"LASTCALL_", b"TINI_", b"DUMB_INIT_", b"POSIXLY_CORRECT"];
/// How much of each entry the scan reads to tell: the longest prefix, and `named_like_lastcall`'s
/// window.
const HEAD_CHECKED: usize = 15;
const _: () = assert!(HEAD_CHECKED >= OWN_PREFIX.len() + PREFIX_EDITS && HEAD_CHECKED >= b"POSIXLY_CORRECT".len());

/// The variables of lastcall's environment that set options, and those named nearly like
/// lastcall's (for the check of misspelt ones), copied in one pass over it: the options are a few
/// dozen lookups, and each getenv() would scan the whole environment again.
pub struct OptionVariables(Vec<(OsString, OsString)>);

impl OptionVariables {
    pub fn of_this_process() -> OptionVariables {
        OptionVariables(
            sys::environment()
                // A prefix of the entry is one of its name: no prefix holds a '='.
                .filter(|entry| {
                    let head = entry.head(HEAD_CHECKED);
                    is_option_variable(head) || named_like_lastcall(head)
                })
                .filter_map(|entry| {
                    let entry = entry.whole().to_bytes();
                    let (name, value) = entry.split_at(entry.iter().position(|&b| b == b'=')?);
                    Some((OsStr::from_bytes(name).to_owned(), OsStr::from_bytes(&value[1..]).to_owned()))
                })
                .collect(),
        )
    }

    /// The variable `name`: from the copy if it is an option's, else looked up as usual.
    pub fn get(&self, name: &str) -> Option<OsString> {
        if !is_option_variable(name.as_bytes()) {
            return sys::env_value(name).map(OsStr::to_owned);
        }
        self.0.iter().find(|(key, _)| key == name).map(|(_, value)| value.clone())
    }

    /// The names, for the check of misspelt `LASTCALL_*` ones.
    pub fn names(&self) -> impl Iterator<Item = OsString> + '_ {
        self.0.iter().map(|(name, _)| name.clone())
    }
}

fn is_option_variable(name: &[u8]) -> bool {
    // The prefixes' first letters turn most names away before any comparison.
    matches!(name.first(), Some(b'L' | b'T' | b'D' | b'P')) && OPTION_PREFIXES.iter().any(|prefix| name.starts_with(prefix))
}

const STRICT_ENV: &str = "LASTCALL_STRICT";
const OWN_PREFIX: &[u8] = b"LASTCALL_";
/// How many edits away from `LASTCALL_` a name's start may be and still be taken for a typo of
/// it (`LASTCAL_`, `LAST_CALL_`, `lastcall_`, `LASTCALL` run into the next word).
const PREFIX_EDITS: usize = 2;

/// `LASTCALL_*` names that are no option's and that a user may set: the strict switch and the
/// log level.
const OTHER_SETTABLE: &[&str] = &[STRICT_ENV, LOG_ENV];

/// What lastcall writes into the app's environment and never reads, with the variable to set
/// instead. A nested lastcall finds all three in its own environment; one set by hand does
/// nothing.
const OUTPUT_ONLY: [(&str, Option<&str>); 3] = [
    ("LASTCALL_PRE_STOP_MS", Some("LASTCALL_PRE_STOP")),
    ("LASTCALL_GRACE_MS", Some("LASTCALL_GRACE")),
    ("LASTCALL_CLOCK_ZERO_NS", None),
];

/// `LASTCALL_*` names that lastcall's build and tests read: never suggested, never warned about.
const BUILD_VARIABLES: &[&str] = &[
    "LASTCALL_GIT_COMMIT",
    // cargo puts build.rs's rustc-env in the environment of `cargo run` and `cargo test` too.
    "LASTCALL_BUILD_TARGET",
    "LASTCALL_HOSTS_SKIP",
    "LASTCALL_ARCHES",
];

/// The names a user may set: what a misspelt one is compared with.
fn settable_variables() -> impl Iterator<Item = &'static str> {
    OPTIONS.iter().filter_map(|o| o.env).chain(OTHER_SETTABLE.iter().copied())
}

fn known_variables() -> impl Iterator<Item = &'static str> {
    settable_variables().chain(OUTPUT_ONLY.iter().map(|(name, _)| *name)).chain(BUILD_VARIABLES.iter().copied())
}

/// At most this many warnings about names, then one line that counts the rest: an environment
/// of thousands of them must not hold the app's start.
const MAX_NAME_WARNINGS: usize = 8;
/// At most this many names are compared with every known one (the costly part); a name whose
/// start is only near `LASTCALL_` may well be the app's and need not end in a warning.
const MAX_NAME_CHECKS: usize = 4 * MAX_NAME_WARNINGS;

/// Each byte's place in `named_like_lastcall`'s count, in either letter case: 1 for L, 2 for A,
/// 3 for S, 4 for T, 5 for C, 6 for _, and 0 (never counted) for the rest.
const PREFIX_LETTER: [u8; 256] = {
    let mut table = [0u8; 256];
    let letters = *b"LASTC_";
    let mut i = 0;
    while i < letters.len() {
        table[letters[i] as usize] = i as u8 + 1;
        table[letters[i].to_ascii_lowercase() as usize] = i as u8 + 1;
        i += 1;
    }
    table
};

/// Whether the start of `name` (or of a `NAME=value` entry) is `LASTCALL_` or a few edits from
/// it, in any letter case. Cheap: a fixed number of bytes, on the stack.
fn named_like_lastcall(name: &[u8]) -> bool {
    if name.starts_with(OWN_PREFIX) {
        return true;
    }
    let start = &name[..name.len().min(OWN_PREFIX.len() + PREFIX_EDITS)];
    let start = start.split(|&b| b == b'=').next().unwrap_or_default();
    // An edit takes at most one of the prefix's nine characters away, so a start that holds fewer
    // than seven of them is too far: most names are turned away here, without the table.
    let mut left = [0u8, 3, 2, 1, 1, 1, 1];
    let mut found = 0;
    for &c in start {
        let at = usize::from(PREFIX_LETTER[usize::from(c)]);
        if left[at] > 0 {
            left[at] -= 1;
            found += 1;
        }
    }
    found + PREFIX_EDITS >= OWN_PREFIX.len() && distances(OWN_PREFIX, start).1 <= PREFIX_EDITS
}

/// One warning per name that lastcall does not read but that is named like its own (a
/// misspelt prefix, the wrong letter case), with the closest one it does read, and one per
/// output-only variable set by hand. Sorted, without repeats; past `MAX_NAME_WARNINGS`, one line
/// counts the names not checked.
fn unknown_variables(names: impl IntoIterator<Item = OsString>) -> Vec<String> {
    let mut warnings = Vec::new();
    let (mut checked, mut skipped) = (0usize, 0usize);
    let mut output_only = [false; OUTPUT_ONLY.len()];
    // Kept sorted and without repeats as they come: a few lines, and no sort's code.
    fn add(warnings: &mut Vec<String>, text: String) {
        if let Err(at) = warnings.binary_search(&text) {
            warnings.insert(at, text);
        }
    }
    for name in names {
        let bytes = name.as_bytes();
        if !named_like_lastcall(bytes) {
            continue;
        }
        if let Some(at) = OUTPUT_ONLY.iter().position(|(known, _)| known.as_bytes() == bytes) {
            output_only[at] = true;
            continue;
        }
        if known_variables().any(|known| known.as_bytes() == bytes) {
            continue;
        }
        if warnings.len() >= MAX_NAME_WARNINGS || checked >= MAX_NAME_CHECKS {
            skipped = skipped.saturating_add(1);
            continue;
        }
        checked += 1;
        if let Some(text) = misspelt(&name.to_string_lossy()) {
            add(&mut warnings, text);
        }
    }
    // An outer lastcall writes all three for its app: fewer were set by hand.
    if output_only.contains(&false) {
        for ((name, instead), _) in OUTPUT_ONLY.iter().zip(output_only).filter(|(_, set)| *set) {
            let instead = match instead {
                Some(instead) => format!("; set {instead} instead"),
                None => String::new(),
            };
            add(&mut warnings, format!("{name}: output only: lastcall sets it for the app and does not read it{instead}"));
        }
    }
    if skipped > 0 {
        warnings.push(format!("{skipped} more variables named like lastcall's were not checked"));
    }
    warnings
}

/// The warning for `name`, not one lastcall reads, if it is one: with the settable name it is
/// closest to (a few edits away, or that name with something after it), else, when it starts
/// with `LASTCALL_` exactly, a pointer to the list. A name that is only nearly `LASTCALL_*` and
/// close to none is taken for the app's own.
fn misspelt(name: &str) -> Option<String> {
    let own = name.as_bytes().starts_with(OWN_PREFIX);
    let closest = settable_variables().map(|known| (score(known, name), known)).min();
    let limit = if own { 3 } else { 2 };
    match closest {
        Some((_, known)) if name.eq_ignore_ascii_case(known) => {
            Some(format!("{}: not a lastcall variable (names are upper case); did you mean {known}?", OneLine(name)))
        }
        Some(((score, _), known)) if score <= limit => Some(format!("{}: not a lastcall variable; did you mean {known}?", OneLine(name))),
        _ if own => Some(format!("{}: not a lastcall variable (lastcall --help lists them)", OneLine(name))),
        _ => None,
    }
}

/// The closest of `candidates` to `typed`, if it is close enough to be what was meant: a few
/// edits away, or it with something after it (`grace-period` for `grace`).
fn closest<'c>(typed: &str, candidates: impl Iterator<Item = &'c str>) -> Option<&'c str> {
    let ((score, _), best) = candidates.map(|c| (score(c, typed), c)).min()?;
    // Short words are a few edits from anything.
    (score <= 2 && score.saturating_mul(3) <= typed.len()).then_some(best)
}

/// How good a guess `known` is for `typed`, lower is better: the edits between the two, or
/// one more than those between `known` and `typed`'s first words, when those are at most one;
/// then the edits between the two as a tie-break.
fn score(known: &str, typed: &str) -> (usize, usize) {
    let (whole, _, prefix) = distances(known.as_bytes(), typed.as_bytes());
    let by_prefix = if prefix <= 1 { prefix + 1 } else { usize::MAX };
    (whole.min(by_prefix), whole)
}

/// How far `typed` is from `known`, ASCII letter case aside: the optimal string alignment
/// distance (Levenshtein's, with two neighbours swapped as one edit); the least distance from
/// `known` to a prefix of `typed`; and the same for prefixes that end a word (`LASTCALL_GRACE`
/// is 0 from `LASTCALL_GRACE_PERIOD`, `grace` from `grace-period`).
/// Rows on the stack, no allocation; past 64 bytes only the start is compared, and the whole
/// is taken as far from anything.
fn distances(known: &[u8], typed: &[u8]) -> (usize, usize, usize) {
    const MAX: usize = 64;
    let (a, b) = (&known[..known.len().min(MAX)], &typed[..typed.len().min(MAX)]);
    let cut = a.len() < known.len() || b.len() < typed.len();
    let same = |x: u8, y: u8| x.eq_ignore_ascii_case(&y);
    let at = |n: usize| u8::try_from(n).unwrap_or(u8::MAX);
    // Three rows of the table (the one before the last too, for a swap), each cell at most 128.
    let mut rows = [[0u8; MAX + 1]; 3];
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = at(j);
    }
    for i in 1..=a.len() {
        let (row, up, up2) = (i % 3, (i + 2) % 3, (i + 1) % 3);
        rows[row][0] = at(i);
        for j in 1..=b.len() {
            let mut d = (rows[up][j - 1] + u8::from(!same(a[i - 1], b[j - 1])))
                .min(rows[up][j] + 1)
                .min(rows[row][j - 1] + 1);
            if i > 1 && j > 1 && same(a[i - 1], b[j - 2]) && same(a[i - 2], b[j - 1]) {
                d = d.min(rows[up2][j - 2] + 1);
            }
            rows[row][j] = d;
        }
    }
    let last = &rows[a.len() % 3][..=b.len()];
    let whole = if cut { usize::MAX } else { usize::from(last[b.len()]) };
    let ends_word = |j: usize| b.get(j).is_none_or(|c| matches!(c, b'_' | b'-'));
    let least = |j: &mut dyn Iterator<Item = usize>| usize::from(j.map(|j| last[j]).min().unwrap_or(u8::MAX));
    (whole, least(&mut (0..=b.len())), least(&mut (0..=b.len()).filter(|&j| ends_word(j))))
}

fn parse_args<I, F>(args: I, env: F) -> Result<Parsed, Error>
where
    I: IntoIterator<Item = OsString>,
    F: Fn(&str) -> Option<OsString>,
{
    let mut args = args.into_iter();
    let personality = Personality::of(&args.next().unwrap_or_default());
    let args: Vec<OsString> = args.collect();
    let env = Env { lookup: env };
    if personality.subcommands && args.first().is_some_and(|a| a == "probe") {
        return parse_probe(args[1..].to_vec(), &env).map(Parsed::Probe);
    }
    if personality.version_only_alone && args.len() == 1 && args[0] == "--version" {
        return Ok(Parsed::Print(version_line()));
    }
    // glibc's getopt stops permuting when POSIXLY_CORRECT is set.
    let getopt = match personality.getopt {
        Getopt::Permute if env.raw("POSIXLY_CORRECT").is_some() => Getopt::StopAtCommand,
        getopt => getopt,
    };
    let line = split_command_line(args, &OPTIONS.iter().collect::<Vec<_>>(), personality, getopt)?;
    if line.has(Id::Help) {
        return Ok(Parsed::Print(help_text(personality)));
    }
    if line.has(Id::Version) {
        return Ok(Parsed::Print(version_line()));
    }
    if line.has(Id::License) {
        return Ok(Parsed::Print(license()));
    }
    let pause = line.has(Id::Pause);
    if pause && !line.command.is_empty() {
        return Err(Error::Usage("--pause (-P) runs no command".into()));
    }
    if !pause && line.command.is_empty() {
        return Err(Error::Usage("no command given".into()));
    }
    run_config(line, &env, personality).map(Parsed::Run)
}

/// The configuration of a run, each value from the most specific source down, and every choice
/// of the personality made here, once. Inlined, as `modes` and `check_flag_signals`: each is
/// called once, and apart they would cost binary size.
#[inline(always)]
fn run_config<F>(line: CommandLine, env: &Env<F>, p: &'static Personality) -> Result<Config, Error>
where
    F: Fn(&str) -> Option<OsString>,
{
    let pre_stop = value(&line, env, Id::PreStop, parse_duration)?.unwrap_or(Duration::ZERO);
    let grace = value(&line, env, Id::Grace, parse_duration)?;
    let stop_timeout = value(&line, env, Id::StopTimeout, parse_stop_timeout)?;
    let default_grace = p.escalates.then_some(DEFAULT_GRACE);
    let grace = fit_in_stop_timeout(pre_stop, grace, default_grace, stop_timeout, |id| source(&line, env, id))?;
    let unready_on = value(&line, env, Id::UnreadyOn, parse_unready_on)?.unwrap_or(UnreadyOn::Signal);
    let stop_signal = value(&line, env, Id::StopSignal, parse_stop_signal)?;
    let rewrite = list(&line, env, Id::Rewrite, parse_rewrite)?;
    let remap_exit = list(&line, env, Id::RemapExit, parse_exit_code)?;
    let parent_death_signal = value(&line, env, Id::ParentDeathSignal, |s| Sig::parse(s, false))?;
    check_flag_signals(&line, p)?;
    let ready_file = value(&line, env, Id::ReadyFile, parse_ready_file)?;
    let health_listen = value(&line, env, Id::HealthListen, parse_listen_addr)?;
    // Under a peer's name there is no such flag: only LASTCALL_USER.
    let user = value(&line, env, Id::User, crate::user::parse_spec)?
        .map(|s| s.given_by(if line.last(Id::User).is_some() { "--user" } else { "LASTCALL_USER" }));
    let no_new_privs = switch(&line, env, Id::NoNewPrivs, &[], |_| Ok(false))?;
    let (setsid, single_child, subreaper) = modes(&line, env, p)?;
    let warn_reaping = switch(&line, env, Id::WarnReaping, &[], |_| Ok(false))?;
    let log_level = log_level(&line, env, p)?;
    let log_format = value(&line, env, Id::LogFormat, parse_log_format)?.unwrap_or(Format::Text);
    let (flags, pause) = (line.as_variables(), line.has(Id::Pause));
    Ok(Config {
        command: line.command,
        pause,
        // Under a peer's name the app's environment stays the peer's, unless a deadline was set.
        deadlines_in_env: p.deadlines_in_env || !pre_stop.is_zero() || grace.is_some(),
        pre_stop,
        grace,
        unready_on,
        stop_signal,
        rewrite,
        ready_file,
        health_listen,
        single_child,
        setsid,
        remap_exit,
        parent_death_signal,
        warn_reaping,
        subreaper,
        user,
        no_new_privs,
        log_level,
        log_format,
        warnings: vec![],
        flags,
        nested: false,
        name: p.name,
        warn_without_subreaper: p.warn_without_subreaper,
        own_group_for_single_child: p.own_group_for_single_child,
        child_signals: p.child_signals,
        leaves_cwd: p.leaves_cwd,
        scripts_through_sh: p.scripts_through_sh,
        on_main_exit: p.on_main_exit,
        suspend: match (setsid, p.job_control) {
            (true, _) => Some(Suspend::WithStop),
            (false, JobControl::DumbInit) => Some(Suspend::AsReceived),
            (false, JobControl::Tini) => None,
        },
        cont_after_stop: p.cont_after_stop,
        names_oom_kills: p.names_oom_kills,
        exits: p.exits(),
        inherited: inherited(env),
    })
}

/// The variables the set-up acts on besides the options: all of lastcall's environment that is
/// read, is read here.
fn inherited<F>(env: &Env<F>) -> Inherited
where
    F: Fn(&str) -> Option<OsString>,
{
    let get = |name: &str| (env.lookup)(name);
    Inherited {
        notify_socket: get("NOTIFY_SOCKET").and_then(|s| s.into_string().ok()).filter(|s| !s.is_empty()),
        runtime_directory: get("RUNTIME_DIRECTORY").and_then(|dirs| {
            dirs.as_bytes().split(|&b| b == b':').next().filter(|d| !d.is_empty()).map(|d| PathBuf::from(OsStr::from_bytes(d)))
        }),
        path: get("PATH"),
        pid_variables: sys::PID_VARIABLES.into_iter().filter_map(|name| Some((name, get(name)?))).collect(),
        user_names_set: ["USER", "LOGNAME"].into_iter().filter(|name| get(name).is_some()).collect(),
    }
}

/// The peer's own flags spell signals the peer's way (its `-r`, its `-p`).
#[inline(always)]
fn check_flag_signals(line: &CommandLine, p: &Personality) -> Result<(), Error> {
    for (id, v) in line.all(Id::Rewrite).map(|v| (Id::Rewrite, v)).chain(line.all(Id::ParentDeathSignal).map(|v| (Id::ParentDeathSignal, v))) {
        if !p.flag_signals.accepts(v) {
            return Err(bad_value(&format!("--{}", opt(id).long), v, &format!("{} does not take this signal", p.name)));
        }
    }
    Ok(())
}

/// setsid, single-child and subreaper, each from the most specific source down: a flag,
/// lastcall's variable, the peer's variable, the personality's default.
#[inline(always)]
fn modes<F>(line: &CommandLine, env: &Env<F>, p: &Personality) -> Result<(bool, bool, Subreaper), Error>
where
    F: Fn(&str) -> Option<OsString>,
{
    let setsid = switch(line, env, Id::Setsid, &[Id::SingleChild], |env| {
        Ok(env.peer_setting(p, Setting::Setsid)?.unwrap_or(p.setsid))
    })?;
    let single_child = switch(line, env, Id::SingleChild, &[Id::Group, Id::Setsid], |env| {
        let group = env.peer_setting(p, Setting::Group)?.or(env.peer_setting(p, Setting::Setsid)?);
        Ok(!group.unwrap_or(p.group))
    })?;
    // The flag, then LASTCALL_SUBREAPER, then the peer's variable; none of them leaves the
    // personality's default.
    let subreaper_asked = match line.last_of(&[Id::Subreaper, Id::NoSubreaper]) {
        Some(id) => Some(id == Id::Subreaper),
        None => match env.bool("LASTCALL_SUBREAPER")? {
            Some(on) => Some(on),
            None => env.peer_setting(p, Setting::Subreaper)?,
        },
    };
    let subreaper = match subreaper_asked {
        Some(true) => Subreaper::Asked,
        Some(false) => Subreaper::Off,
        None if p.subreaper => Subreaper::Default,
        None => Subreaper::Off,
    };
    Ok((setsid, single_child, subreaper))
}

fn parse_probe<F: Fn(&str) -> Option<OsString>>(args: Vec<OsString>, env: &Env<F>) -> Result<ProbeConfig, Error> {
    let options: Vec<&Opt> = [Id::HealthListen, Id::ReadyFile, Id::Help, Id::ProbeTimeout].into_iter().map(opt).collect();
    // A probe has no command to protect, so its options may come before or after the target.
    let mut line = CommandLine { given: vec![], command: vec![] };
    let mut rest = args;
    loop {
        let part = split_command_line(rest, &options, &LASTCALL, Getopt::StopAtCommand)?;
        line.given.extend(part.given);
        let mut positional = part.command.into_iter();
        match positional.next() {
            Some(arg) => line.command.push(arg),
            None => break,
        }
        rest = positional.collect();
    }
    if line.has(Id::Help) {
        return Err(Error::Usage(
            "usage: lastcall probe ready|live [--health-listen ADDR:PORT | --ready-file PATH] | lastcall probe http://HOST:PORT/PATH|tcp://HOST:PORT [--timeout DURATION]".into(),
        ));
    }
    let target = match line.command.first().map(|t| t.to_string_lossy().into_owned()) {
        Some(t) if t == "ready" => ProbeTarget::Ready,
        Some(t) if t == "live" => ProbeTarget::Live,
        Some(t) if t.contains("://") => parse_probe_url(&t).map_err(|why| Error::Usage(format!("invalid probe target '{t}': {why}")))?,
        Some(t) => {
            return Err(Error::Usage(format!("unknown probe target '{t}': expected ready, live, http://HOST:PORT/PATH or tcp://HOST:PORT")))
        }
        None => return Err(Error::Usage("probe needs a target: ready, live, http://HOST:PORT/PATH or tcp://HOST:PORT".into())),
    };
    if line.command.len() > 1 {
        return Err(Error::Usage(format!("unexpected argument '{}' after the probe target", line.command[1].to_string_lossy())));
    }
    let timeout = value(&line, env, Id::ProbeTimeout, parse_stop_timeout)?;
    if matches!(target, ProbeTarget::Http { .. } | ProbeTarget::Tcp { .. }) {
        if line.has(Id::HealthListen) || line.has(Id::ReadyFile) {
            return Err(Error::Usage("probe http:// and tcp:// take no --health-listen or --ready-file".into()));
        }
        return Ok(ProbeConfig { target, health_listen: None, ready_file: None, timeout: timeout.unwrap_or(PROBE_TIMEOUT) });
    }
    let timeout = timeout.unwrap_or(HEALTH_PROBE_TIMEOUT);
    let health_listen = value(&line, env, Id::HealthListen, parse_listen_addr)?;
    let ready_file = value(&line, env, Id::ReadyFile, parse_ready_file)?;
    match (&target, &health_listen, &ready_file) {
        (_, None, None) => Err(Error::Usage("probe needs --health-listen or --ready-file (or their variables)".into())),
        (ProbeTarget::Live, None, Some(_)) => {
            Err(Error::Usage("probe live needs --health-listen: a ready file says nothing about liveness".into()))
        }
        _ => Ok(ProbeConfig { target, health_listen, ready_file, timeout }),
    }
}

/// `lastcall --version`: dockerd's `parseInitVersion` (what `docker info` shows as the init
/// version) takes the text after " - " as `git.COMMIT`; the first part names lastcall's version
/// and the target it was built for.
pub fn version_line() -> String {
    format!(
        "lastcall {} ({}) - git.{}\n",
        env!("CARGO_PKG_VERSION"),
        env!("LASTCALL_BUILD_TARGET"),
        env!("LASTCALL_GIT_COMMIT")
    )
}

/// The grace to use: the one given, else what `--stop-timeout` leaves after the pre-stop and
/// the margin, else the default. Refuses a pre-stop + grace that the stop timeout cannot hold.
fn fit_in_stop_timeout(
    pre_stop: Duration,
    grace: Option<Duration>,
    default_grace: Option<Duration>,
    stop_timeout: Option<Duration>,
    source: impl Fn(Id) -> Option<String>,
) -> Result<Option<Duration>, Error> {
    let grace = grace.map(|g| (!g.is_zero()).then_some(g));
    let Some(budget) = stop_timeout else {
        return Ok(grace.unwrap_or(default_grace));
    };
    let name = |id| source(id).unwrap_or_else(|| format!("--{}", opt(id).long));
    let seconds = |d: Duration| Seconds(d).to_string();
    let room = budget.checked_sub(STOP_MARGIN).and_then(|r| r.checked_sub(pre_stop));
    let refuse = |what: String| {
        Error::Usage(format!(
            "{what} does not fit in {} {} less {} for the SIGKILL and exit: shorten it or raise {}",
            name(Id::StopTimeout),
            seconds(budget),
            seconds(STOP_MARGIN),
            name(Id::StopTimeout)
        ))
    };
    match (grace, room) {
        (None, Some(room)) if !room.is_zero() => Ok(Some(room)),
        (None, _) => Err(refuse(format!("{} {}", name(Id::PreStop), seconds(pre_stop)))),
        (Some(None), _) => Err(refuse(format!("{} 0 (never escalate)", name(Id::Grace)))),
        (Some(Some(g)), Some(room)) if g <= room => Ok(Some(g)),
        (Some(Some(g)), _) if pre_stop.is_zero() => Err(refuse(format!("{} {}", name(Id::Grace), seconds(g)))),
        (Some(Some(g)), _) => {
            Err(refuse(format!("{} {} + {} {}", name(Id::PreStop), seconds(pre_stop), name(Id::Grace), seconds(g))))
        }
    }
}

/// Which spelling an option's value came from: its flag, its variable, or neither.
fn source<F: Fn(&str) -> Option<OsString>>(line: &CommandLine, env: &Env<F>, id: Id) -> Option<String> {
    let opt = opt(id);
    if line.has(id) {
        return Some(format!("--{}", opt.long));
    }
    opt.env.filter(|name| env.get(name).ok().flatten().is_some()).map(str::to_string)
}

/// The log format asked for, read without validating anything else: how a usage error is
/// written when parsing itself failed. `LASTCALL_LOG_FORMAT`, or `--log-format json` anywhere
/// before `--` (a wrong match could only change how the error line reads).
pub fn asked_log_format<I, F>(args: I, env: F) -> Format
where
    I: IntoIterator<Item = OsString>,
    F: Fn(&str) -> Option<OsString>,
{
    let args: Vec<OsString> = args.into_iter().skip(1).take_while(|a| a != "--").collect();
    let flag = args.iter().enumerate().rev().find_map(|(i, a)| {
        let a = a.to_str()?;
        match a.strip_prefix("--log-format") {
            Some("") => args.get(i + 1)?.to_str().and_then(|v| parse_log_format(v).ok()),
            Some(rest) => parse_log_format(rest.strip_prefix('=')?).ok(),
            None => None,
        }
    });
    let var = || env("LASTCALL_LOG_FORMAT").and_then(|v| parse_log_format(v.to_str()?).ok());
    flag.or_else(var).unwrap_or(Format::Text)
}

/// The option's value from its flag, else from its variable, validated by `check`; the error
/// names whichever of the two the bad value came from.
fn value<T, F>(line: &CommandLine, env: &Env<F>, id: Id, check: impl Fn(&str) -> Result<T, String>) -> Result<Option<T>, Error>
where
    F: Fn(&str) -> Option<OsString>,
{
    match given(line, env, id)? {
        Some((source, v)) => check(&v).map(Some).map_err(|why| source.bad_value(&v, &why)),
        None => Ok(None),
    }
}

/// `value`'s part that is the same for every type of value, so that it is not copied for each.
fn given<'l, F>(line: &'l CommandLine, env: &Env<F>, id: Id) -> Result<Option<(Source, Cow<'l, str>)>, Error>
where
    F: Fn(&str) -> Option<OsString>,
{
    let opt = opt(id);
    if let Some(v) = line.last(id) {
        return Ok(Some((Source::Flag(opt.long), Cow::Borrowed(v))));
    }
    let Some(name) = opt.env else { return Ok(None) };
    Ok(env.get(name)?.map(|v| (Source::Variable(name), Cow::Owned(v))))
}

/// Where a value came from, for the error that refuses it.
#[derive(Clone, Copy)]
enum Source {
    /// The option's long name.
    Flag(&'static str),
    Variable(&'static str),
}

impl Source {
    fn bad_value(self, value: &str, why: &str) -> Error {
        match self {
            Source::Flag(long) => bad_value(&format!("--{long}"), value, why),
            Source::Variable(name) => bad_value(name, value, why),
        }
    }
}

/// An on/off option: whichever of `on` and `off` came last on the command line, else `on`'s
/// variable, else `fallback` (a peer's variable, or the default).
fn switch<F>(
    line: &CommandLine,
    env: &Env<F>,
    on: Id,
    off: &[Id],
    fallback: impl FnOnce(&Env<F>) -> Result<bool, Error>,
) -> Result<bool, Error>
where
    F: Fn(&str) -> Option<OsString>,
{
    if let Some((id, _)) = line.given.iter().rev().find(|(id, _)| *id == on || off.contains(id)) {
        return Ok(*id == on);
    }
    if let Some(b) = opt(on).env.map(|name| env.bool(name)).transpose()?.flatten() {
        return Ok(b);
    }
    fallback(env)
}

/// A repeatable option: every flag's value, or else the variable's comma-separated list.
fn list<T, F>(line: &CommandLine, env: &Env<F>, id: Id, check: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, Error>
where
    F: Fn(&str) -> Option<OsString>,
{
    let (source, items) = given_all(line, env, id)?;
    items
        .iter()
        .map(|item| {
            let checked = if let Source::Variable(_) = source { item.trim() } else { item };
            check(checked).map_err(|why| source.bad_value(item, &why))
        })
        .collect()
}

/// `list`'s part that is the same for every type of value: the items and where they came from.
fn given_all<'l, F>(line: &'l CommandLine, env: &Env<F>, id: Id) -> Result<(Source, Vec<Cow<'l, str>>), Error>
where
    F: Fn(&str) -> Option<OsString>,
{
    let opt = opt(id);
    let flagged: Vec<Cow<'l, str>> = line.all(id).map(Cow::Borrowed).collect();
    match opt.env {
        Some(name) if flagged.is_empty() => {
            let items = env.get(name)?.map(|v| v.split(',').map(|item| Cow::Owned(item.to_string())).collect());
            Ok((Source::Variable(name), items.unwrap_or_default()))
        }
        _ => Ok((Source::Flag(opt.long), flagged)),
    }
}

fn bad_value(source: &str, value: &str, why: &str) -> Error {
    Error::Usage(format!("invalid value '{value}' for {source}: {why}"))
}

fn log_level<F>(line: &CommandLine, env: &Env<F>, personality: &Personality) -> Result<LevelFilter, Error>
where
    F: Fn(&str) -> Option<OsString>,
{
    let verbosity = |lenient: bool| personality.peer_vars.iter().find(|(_, how)| *how == PeerVar::Verbosity { lenient });
    // tini reads TINI_VERBOSITY after its flags, as atoi() does: it wins over -v.
    if let Some(&(name, _)) = verbosity(true) {
        if let (Some(text), None) = (env.raw(name), env.get(LOG_ENV)?) {
            return Ok(personality.log_level_at(atoi_verbosity(&text.to_string_lossy())));
        }
    }
    let verbose = line.count(Id::Verbose);
    let quiet = line.count(Id::Quiet);
    if verbose > 0 || quiet > 0 {
        // Each -v is one level up from the default, each -q one down.
        return Ok(personality.log_level(verbose, quiet));
    }
    if let Some(text) = env.get(LOG_ENV)? {
        return text
            .parse::<LevelFilter>()
            .map_err(|_| bad_value(LOG_ENV, &text, "expected off, error, warn, info, debug or trace"));
    }
    // tini's scale, read strictly under lastcall's own name: 0 fatal only, 1 warnings (its
    // default), 2 info, 3 debug.
    if let Some(&(name, _)) = verbosity(false) {
        if let Some(text) = env.get(name)? {
            return match text.trim() {
                "0" => Ok(LevelFilter::Error),
                "1" => Ok(LevelFilter::Warn),
                "2" => Ok(LevelFilter::Info),
                "3" => Ok(LevelFilter::Debug),
                _ => Err(bad_value(name, &text, "expected 0, 1, 2 or 3")),
            };
        }
    }
    if env.peer_setting(personality, Setting::Debug)? == Some(true) {
        return Ok(LevelFilter::Debug);
    }
    Ok(personality.log_level(0, 0))
}

#[cfg(test)]
mod tests;
