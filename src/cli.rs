//! Command line and environment → a validated `Config`.
//!
//! Every option has a `LASTCALL_<NAME>` variable because `dockerd --init-path` runs the init as
//! `INIT -- COMMAND...` and cannot pass flags. A flag wins over its variable, which wins over
//! the tini or dumb-init variable of the same meaning. Option parsing stops at the first
//! non-option, so `lastcall sh -c x` runs `sh -c x`. tini's, dumb-init's and catatonit's flags
//! are accepted with their meaning (they do not collide), so lastcall is a drop-in for each.

use std::ffi::OsString;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use log::LevelFilter;

use crate::error::Error;
use crate::machine::UnreadyOn;
use crate::personality::{Getopt, PeerVar, Personality, Setting, LASTCALL};
use crate::signals::Sig;

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub command: Vec<OsString>,
    pub pre_stop: Duration,
    /// `None`: never escalate to SIGKILL (`--grace 0`).
    pub grace: Option<Duration>,
    /// When readiness goes: at the first termination signal, or when the stop signal is forwarded.
    pub unready_on: UnreadyOn,
    /// `None`: forward the signal that was received.
    pub stop_signal: Option<Sig>,
    /// Received → forwarded; `Sig(0)` drops the signal.
    pub rewrite: Vec<(Sig, Sig)>,
    pub ready_file: Option<PathBuf>,
    pub health_listen: Option<SocketAddr>,
    /// Signal the child only, not its process group (dumb-init's -c).
    pub single_child: bool,
    /// The child gets its own session, and lastcall does dumb-init's job control.
    pub setsid: bool,
    /// Child exit codes reported as 0 (tini's -e).
    pub remap_exit: Vec<i32>,
    pub parent_death_signal: Option<Sig>,
    pub warn_reaping: bool,
    pub subreaper: Subreaper,
    /// catatonit's -P: no command; wait for a termination signal.
    pub pause: bool,
    pub log_level: LevelFilter,
    /// Who lastcall is, by the name it was run under: its defaults are already in the fields
    /// above; the supervisor reads the rest (what happens when the main child exits, job
    /// control, exec failures).
    pub personality: &'static Personality,
}

/// Whether lastcall, when not PID 1, registers as a child subreaper, and who wanted it. Only what
/// was asked for may stop the start: qemu-user (`docker run --platform`) answers the prctl with
/// EINVAL, and a default must not make lastcall unusable there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subreaper {
    Off,
    /// On because nothing said otherwise: a failure is a warning.
    Default,
    /// On because `-s`, `LASTCALL_SUBREAPER` or `TINI_SUBREAPER` said so: a failure exits 125.
    Asked,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ProbeConfig {
    pub target: ProbeTarget,
    pub health_listen: Option<SocketAddr>,
    pub ready_file: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeTarget {
    Ready,
    Live,
}

/// What `parse` found: a configuration to run, a probe to make, or text to print (exit 0).
#[derive(Debug)]
pub enum Parsed {
    Run(Config),
    Probe(ProbeConfig),
    Print(String),
}

pub const USAGE_LINE: &str = "Usage: lastcall [OPTIONS] [--] COMMAND [ARGS]...  |  lastcall probe ready|live [OPTIONS]";
pub const HINT_LINE: &str = "Try 'lastcall --help' for more information.";

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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Id {
    PreStop,
    Grace,
    StopTimeout,
    UnreadyOn,
    StopSignal,
    Rewrite,
    ReadyFile,
    HealthListen,
    SingleChild,
    Setsid,
    Group,
    RemapExit,
    ParentDeathSignal,
    WarnReaping,
    Subreaper,
    NoSubreaper,
    Pause,
    Verbose,
    Quiet,
    Help,
    Version,
    License,
}

/// One option: its spellings, whether it takes a value, and the variable that can stand in for it.
struct Opt {
    id: Id,
    long: &'static str,
    shorts: &'static [char],
    value: Option<&'static str>,
    env: Option<&'static str>,
    help: &'static str,
}

const OPTIONS: &[Opt] = &[
    Opt {
        id: Id::PreStop,
        long: "pre-stop",
        shorts: &[],
        value: Some("DURATION"),
        env: Some("LASTCALL_PRE_STOP"),
        help: "after the first termination signal, wait this long with the app untouched [default: 0]",
    },
    Opt {
        id: Id::Grace,
        long: "grace",
        shorts: &[],
        value: Some("DURATION"),
        env: Some("LASTCALL_GRACE"),
        help: "after forwarding the stop signal, wait this long, then SIGKILL; 0 never escalates [default: 8s, or what --stop-timeout leaves]",
    },
    Opt {
        id: Id::StopTimeout,
        long: "stop-timeout",
        shorts: &[],
        value: Some("DURATION"),
        env: Some("LASTCALL_STOP_TIMEOUT"),
        help: "the platform's stop budget (docker stop -t, stop_grace_period, terminationGracePeriodSeconds, TimeoutStopSec): grace defaults to what the pre-stop leaves of it less 2s, and a pre-stop + grace that does not fit is refused",
    },
    Opt {
        id: Id::UnreadyOn,
        long: "unready-on",
        shorts: &[],
        value: Some("signal|stop"),
        env: Some("LASTCALL_UNREADY_ON"),
        help: "when /ready and the ready file go: at the first termination signal, or when the stop signal is forwarded after the pre-stop [default: signal]",
    },
    Opt {
        id: Id::StopSignal,
        long: "stop-signal",
        shorts: &[],
        value: Some("SIGNAL"),
        env: Some("LASTCALL_STOP_SIGNAL"),
        help: "forward this instead of the termination signal received [default: the one received]",
    },
    Opt {
        id: Id::Rewrite,
        long: "rewrite",
        shorts: &['r'],
        value: Some("FROM:TO"),
        env: Some("LASTCALL_REWRITE"),
        help: "forward FROM as TO (TO=0 drops it); repeatable; the variable takes a comma list",
    },
    Opt {
        id: Id::ReadyFile,
        long: "ready-file",
        shorts: &[],
        value: Some("PATH"),
        env: Some("LASTCALL_READY_FILE"),
        help: "create PATH once the app runs, remove it the moment shutdown starts",
    },
    Opt {
        id: Id::HealthListen,
        long: "health-listen",
        shorts: &[],
        value: Some("ADDR:PORT"),
        env: Some("LASTCALL_HEALTH_LISTEN"),
        help: "serve GET /ready (503 from the first termination signal) and GET /live over HTTP",
    },
    Opt {
        id: Id::SingleChild,
        long: "single-child",
        shorts: &['c'],
        value: None,
        env: Some("LASTCALL_SINGLE_CHILD"),
        help: "signal only the child, not its process group (also DUMB_INIT_SETSID=0, TINI_KILL_PROCESS_GROUP=0)",
    },
    Opt {
        id: Id::Setsid,
        long: "setsid",
        shorts: &[],
        value: None,
        env: Some("LASTCALL_SETSID"),
        help: "dumb-init's mode: the child gets its own session; TSTP/TTIN/TTOU stop it and lastcall (also DUMB_INIT_SETSID=1)",
    },
    Opt {
        id: Id::Group,
        long: "group",
        shorts: &['g'],
        value: None,
        env: None,
        help: "signal the child's process group (the default; tini's -g)",
    },
    Opt {
        id: Id::RemapExit,
        long: "remap-exit",
        shorts: &['e'],
        value: Some("CODE"),
        env: Some("LASTCALL_REMAP_EXIT"),
        help: "report this child exit code as 0, e.g. 143; repeatable; the variable takes a comma list",
    },
    Opt {
        id: Id::ParentDeathSignal,
        long: "parent-death-signal",
        shorts: &['p'],
        value: Some("SIGNAL"),
        env: Some("LASTCALL_PARENT_DEATH_SIGNAL"),
        help: "have the kernel send lastcall SIGNAL when its parent dies",
    },
    Opt {
        id: Id::WarnReaping,
        long: "warn-reaping",
        shorts: &['w'],
        value: None,
        env: Some("LASTCALL_WARN_REAPING"),
        help: "warn about each reaped process that was not the child",
    },
    Opt {
        id: Id::Subreaper,
        long: "subreaper",
        shorts: &['s'],
        value: None,
        env: Some("LASTCALL_SUBREAPER"),
        help: "when not PID 1, adopt orphaned descendants (the default; also TINI_SUBREAPER)",
    },
    Opt {
        id: Id::NoSubreaper,
        long: "no-subreaper",
        shorts: &[],
        value: None,
        env: None,
        help: "do not register as a child subreaper",
    },
    Opt {
        id: Id::Pause,
        long: "pause",
        shorts: &['P'],
        value: None,
        env: None,
        help: "run no command: wait for a termination signal, reaping orphans (catatonit's -P)",
    },
    Opt {
        id: Id::Verbose,
        long: "verbose",
        shorts: &['v'],
        value: None,
        env: None,
        help: "log more: -v every signal, -vv everything [env: LASTCALL_LOG=debug|trace]",
    },
    Opt {
        id: Id::Quiet,
        long: "quiet",
        shorts: &['q'],
        value: None,
        env: None,
        help: "log less: -q no shutdown timeline (warnings only), -qq errors only, -qqq nothing [env: LASTCALL_LOG=warn|error|off]",
    },
    Opt { id: Id::Help, long: "help", shorts: &['h'], value: None, env: None, help: "print this help" },
    Opt { id: Id::Version, long: "version", shorts: &['V'], value: None, env: None, help: "print the version" },
    Opt { id: Id::License, long: "license", shorts: &['l', 'L'], value: None, env: None, help: "print the license" },
];

const ABOUT: &str = "lastcall: a tiny init for containers. It runs COMMAND in its own process group,
forwards signals to that group, reaps zombies, and on TERM, INT or QUIT shuts down in
order: unready, pre-stop, stop signal, grace, SIGKILL. It exits with COMMAND's status.";

const AFTER_HELP: &str = "Probes, for images with no shell or curl:
  lastcall probe ready|live [--health-listen ADDR:PORT | --ready-file PATH]
  exits 0 if the app is ready (or live), 1 if not; the variables above work too.

DURATION: 500ms, 5s, 1m30s, 1h; a plain number means seconds.
SIGNAL: TERM, SIGTERM, 15, RTMIN+2.
Every option can also be set by the variable shown; a flag wins over its variable.
Booleans: 1/true/yes/on or 0/false/no/off. tini's TINI_SUBREAPER, TINI_KILL_PROCESS_GROUP and
TINI_VERBOSITY and dumb-init's DUMB_INIT_SETSID are read too, and 0 means off.
The child gets LASTCALL_PRE_STOP_MS and LASTCALL_GRACE_MS in its environment.

Exit status: COMMAND's; 128+N if it died from signal N (137 after the escalation);
126 if it cannot be executed; 127 if it is not found; 125 if lastcall itself fails;
2 for a usage error.";

const LICENSE: &str = "lastcall is licensed under the MIT license or the Apache License 2.0, at your option.\n";

fn help_text(personality: &Personality) -> String {
    let mut text = format!("{ABOUT}\n\nUsage: lastcall [OPTIONS] [--] COMMAND [ARGS]...\n\nOptions:\n");
    let spelled = |opt: &&Opt| personality.has_long(opt.long) || opt.shorts.iter().any(|&c| personality.has_short(c));
    for opt in OPTIONS.iter().filter(spelled) {
        let shorts: Vec<String> = opt.shorts.iter().map(|c| format!("-{c}, ")).collect();
        let mut spelling = format!("{:>8}--{}", shorts.concat(), opt.long);
        if let Some(value) = opt.value {
            spelling = format!("{spelling} {value}");
        }
        if spelling.len() < 34 {
            text.push_str(&format!(" {spelling:<34}{}\n", opt.help));
        } else {
            text.push_str(&format!(" {spelling}\n {:<34}{}\n", "", opt.help));
        }
        if let Some(env) = opt.env {
            text.push_str(&format!(" {:<34}[env: {env}]\n", ""));
        }
    }
    text.push('\n');
    text.push_str(AFTER_HELP);
    text.push('\n');
    text
}

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
            let opt = exact.or_else(prefixed).ok_or_else(|| Error::Usage(format!("unknown option '--{name}'")))?;
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

fn opt(id: Id) -> &'static Opt {
    OPTIONS.iter().find(|o| o.id == id).expect("every Id has an entry in OPTIONS")
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
        return Ok(Parsed::Print(LICENSE.into()));
    }
    let pause = line.has(Id::Pause);
    if pause && !line.command.is_empty() {
        return Err(Error::Usage("--pause (-P) runs no command".into()));
    }
    if !pause && line.command.is_empty() {
        return Err(Error::Usage("no command given".into()));
    }

    let pre_stop = value(&line, &env, Id::PreStop, parse_duration)?.unwrap_or(Duration::ZERO);
    let grace = value(&line, &env, Id::Grace, parse_duration)?;
    let stop_timeout = value(&line, &env, Id::StopTimeout, parse_stop_timeout)?;
    let default_grace = personality.escalates.then_some(DEFAULT_GRACE);
    let grace = fit_in_stop_timeout(pre_stop, grace, default_grace, stop_timeout, |id| source(&line, &env, id))?;
    let unready_on = value(&line, &env, Id::UnreadyOn, parse_unready_on)?.unwrap_or(UnreadyOn::Signal);
    let stop_signal = value(&line, &env, Id::StopSignal, |s| Sig::parse(s, false))?;
    let rewrite = list(&line, &env, Id::Rewrite, parse_rewrite)?;
    let remap_exit = list(&line, &env, Id::RemapExit, parse_exit_code)?;
    let parent_death_signal = value(&line, &env, Id::ParentDeathSignal, |s| Sig::parse(s, false))?;
    let ready_file = value(&line, &env, Id::ReadyFile, parse_ready_file)?;
    let health_listen = value(&line, &env, Id::HealthListen, parse_listen_addr)?;

    // Each mode from the most specific source down: a flag, lastcall's variable, the peer's
    // variable, the personality's default.
    let p = personality;
    let setsid = switch(&line, &env, Id::Setsid, &[Id::SingleChild], |env| {
        Ok(env.peer_setting(p, Setting::Setsid)?.unwrap_or(p.setsid))
    })?;
    let single_child = switch(&line, &env, Id::SingleChild, &[Id::Group, Id::Setsid], |env| {
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
    let warn_reaping = switch(&line, &env, Id::WarnReaping, &[], |_| Ok(false))?;
    let log_level = log_level(&line, &env, p)?;

    Ok(Parsed::Run(Config {
        command: line.command,
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
        pause,
        log_level,
        personality,
    }))
}

fn parse_probe<F: Fn(&str) -> Option<OsString>>(args: Vec<OsString>, env: &Env<F>) -> Result<ProbeConfig, Error> {
    let options: Vec<&Opt> = [Id::HealthListen, Id::ReadyFile, Id::Help].into_iter().map(opt).collect();
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
        return Err(Error::Usage("usage: lastcall probe ready|live [--health-listen ADDR:PORT | --ready-file PATH]".into()));
    }
    let target = match line.command.first().map(|t| t.to_string_lossy().into_owned()) {
        Some(t) if t == "ready" => ProbeTarget::Ready,
        Some(t) if t == "live" => ProbeTarget::Live,
        Some(t) => return Err(Error::Usage(format!("unknown probe target '{t}': expected ready or live"))),
        None => return Err(Error::Usage("probe needs a target: ready or live".into())),
    };
    if line.command.len() > 1 {
        return Err(Error::Usage(format!("unexpected argument '{}' after the probe target", line.command[1].to_string_lossy())));
    }
    let health_listen = value(&line, env, Id::HealthListen, parse_listen_addr)?;
    let ready_file = value(&line, env, Id::ReadyFile, parse_ready_file)?;
    match (target, &health_listen, &ready_file) {
        (_, None, None) => Err(Error::Usage("probe needs --health-listen or --ready-file (or their variables)".into())),
        (ProbeTarget::Live, None, Some(_)) => {
            Err(Error::Usage("probe live needs --health-listen: a ready file says nothing about liveness".into()))
        }
        _ => Ok(ProbeConfig { target, health_listen, ready_file }),
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
    let seconds = |d: Duration| format!("{}s", d.as_secs_f64());
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

fn parse_stop_timeout(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        d if d.is_zero() => Err("expected a duration above 0".into()),
        d => Ok(d),
    }
}

fn parse_unready_on(text: &str) -> Result<UnreadyOn, String> {
    match text.trim() {
        "signal" => Ok(UnreadyOn::Signal),
        "stop" => Ok(UnreadyOn::Stop),
        _ => Err("expected signal or stop".into()),
    }
}

/// The option's value from its flag, else from its variable, validated by `check`; the error
/// names whichever of the two the bad value came from.
fn value<T, F>(line: &CommandLine, env: &Env<F>, id: Id, check: impl Fn(&str) -> Result<T, String>) -> Result<Option<T>, Error>
where
    F: Fn(&str) -> Option<OsString>,
{
    let opt = opt(id);
    if let Some(v) = line.last(id) {
        return check(v).map(Some).map_err(|why| bad_value(&format!("--{}", opt.long), v, &why));
    }
    let Some(name) = opt.env else { return Ok(None) };
    match env.get(name)? {
        Some(v) => check(&v).map(Some).map_err(|why| bad_value(name, &v, &why)),
        None => Ok(None),
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
    let ids: Vec<Id> = std::iter::once(on).chain(off.iter().copied()).collect();
    if let Some(id) = line.last_of(&ids) {
        return Ok(id == on);
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
    let opt = opt(id);
    let flagged: Vec<&str> = line.all(id).collect();
    if !flagged.is_empty() {
        return flagged
            .into_iter()
            .map(|v| check(v).map_err(|why| bad_value(&format!("--{}", opt.long), v, &why)))
            .collect();
    }
    let Some(name) = opt.env else { return Ok(vec![]) };
    match env.get(name)? {
        Some(v) => v.split(',').map(|item| check(item.trim()).map_err(|why| bad_value(name, item, &why))).collect(),
        None => Ok(vec![]),
    }
}

fn bad_value(source: &str, value: &str, why: &str) -> Error {
    Error::Usage(format!("invalid value '{value}' for {source}: {why}"))
}

fn parse_bool(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err("expected 1/true/yes/on or 0/false/no/off".into()),
    }
}

/// `TERM:QUIT`, `15:3`, `SIGINT:0` (0 drops the signal).
fn parse_rewrite(text: &str) -> Result<(Sig, Sig), String> {
    let (from, to) = text.split_once(':').ok_or("expected FROM:TO, like TERM:QUIT or 15:0")?;
    let from = Sig::parse(from, false).map_err(|e| format!("FROM: {e}"))?;
    let to = Sig::parse(to, true).map_err(|e| format!("TO: {e}"))?;
    Ok((from, to))
}

fn parse_exit_code(text: &str) -> Result<i32, String> {
    text.parse::<u8>().map(i32::from).map_err(|_| "expected an exit code from 0 to 255".into())
}

fn parse_ready_file(text: &str) -> Result<PathBuf, String> {
    if text.is_empty() || text.ends_with('/') {
        return Err("expected the path of a file".into());
    }
    Ok(PathBuf::from(text))
}

/// `127.0.0.1:8081`, `[::1]:8081`, or `:8081` for every IPv4 address (what a pod's probe needs).
fn parse_listen_addr(text: &str) -> Result<SocketAddr, String> {
    const EXPECTED: &str = "expected ADDR:PORT, like 127.0.0.1:8081, [::1]:8081 or :8081";
    let addr = match text.strip_prefix(':') {
        Some(port) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, port.parse::<u16>().map_err(|_| EXPECTED)?)),
        None => text.parse::<SocketAddr>().map_err(|_| EXPECTED)?,
    };
    if addr.port() == 0 {
        return Err("port 0 is not a port a probe can find".into());
    }
    Ok(addr)
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

/// C's atoi() as tini applies it to its verbosity (an unsigned int): leading blanks, a sign,
/// digits; no digits is 0; a negative number wraps to the most verbose.
fn atoi_verbosity(text: &str) -> usize {
    let text = text.trim_start();
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let end = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
    let n = digits[..end].bytes().fold(0usize, |n, d| n.saturating_mul(10).saturating_add(usize::from(d - b'0')));
    if negative && n > 0 {
        usize::MAX
    } else {
        n
    }
}

/// `500ms`, `5s`, `1m30s`, `2h`, `1.5s`; a plain number is seconds.
/// The longest duration accepted: a year. No orchestrator waits anywhere near that long for a
/// stop, and it keeps every sum lastcall makes far from overflow: `now + deadline` on the
/// monotonic clock, and pre-stop + grace + kill wait in microseconds for systemd's
/// EXTEND_TIMEOUT_USEC (a u64). `--grace 0` is the way to say "never".
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let d = parse_duration_unbounded(text)?;
    if d > MAX_DURATION {
        return Err("more than the maximum of a year (8760h)".into());
    }
    Ok(d)
}

fn parse_duration_unbounded(text: &str) -> Result<Duration, String> {
    const EXPECTED: &str = "expected a duration like 500ms, 5s or 1m30s";
    let text = text.trim();
    if text.is_empty() {
        return Err(EXPECTED.into());
    }
    if let Ok(secs) = text.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).map_err(|_| EXPECTED.into());
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let unit_len = rest[number_len..].find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len() - number_len);
        let (number, unit) = (&rest[..number_len], &rest[number_len..number_len + unit_len]);
        let value: f64 = number.parse().map_err(|_| EXPECTED.to_string())?;
        let scale = match unit {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(EXPECTED.into()),
        };
        let part = Duration::try_from_secs_f64(value * scale).map_err(|_| EXPECTED.to_string())?;
        total = total.checked_add(part).ok_or_else(|| EXPECTED.to_string())?;
        rest = &rest[number_len + unit_len..];
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::os::unix::ffi::OsStringExt;

    fn run(args: &[&str], env: &[(&str, &str)]) -> Result<Parsed, Error> {
        let env: HashMap<String, OsString> = env.iter().map(|(k, v)| (k.to_string(), v.into())).collect();
        let args = std::iter::once("lastcall").chain(args.iter().copied()).map(OsString::from);
        parse(args, |k| env.get(k).cloned())
    }

    fn config(args: &[&str], env: &[(&str, &str)]) -> Config {
        match run(args, env) {
            Ok(Parsed::Run(c)) => c,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    fn usage_error(args: &[&str], env: &[(&str, &str)]) -> String {
        match run(args, env) {
            Err(Error::Usage(msg)) => msg,
            other => panic!("{args:?} {env:?}: expected a usage error, got {other:?}"),
        }
    }

    #[test]
    fn defaults() {
        let c = config(&["app"], &[]);
        assert_eq!(c.command, vec![OsString::from("app")]);
        assert_eq!(c.pre_stop, Duration::ZERO);
        // Inside Docker's 10 s with room for the SIGKILL and the timeline's last line.
        assert_eq!(c.grace, Some(Duration::from_secs(8)));
        assert_eq!(c.stop_signal, None);
        assert_eq!(c.unready_on, UnreadyOn::Signal);
        assert_eq!(c.log_level, LevelFilter::Info, "the shutdown timeline is shown by default");
    }

    #[test]
    fn stop_timeout_sets_the_grace_and_refuses_what_cannot_fit() {
        let s = Duration::from_secs;
        assert_eq!(config(&["--stop-timeout", "10s", "app"], &[]).grace, Some(s(8)));
        assert_eq!(config(&["--stop-timeout", "30", "--pre-stop", "5s", "app"], &[]).grace, Some(s(23)));
        let env = [("LASTCALL_STOP_TIMEOUT", "10s"), ("LASTCALL_PRE_STOP", "2s")];
        assert_eq!(config(&["app"], &env).grace, Some(s(6)));
        assert_eq!(config(&["--grace", "6s", "app"], &env).grace, Some(s(6)), "exactly fits");
        let msg = usage_error(&["--grace", "7s", "app"], &env);
        for needle in ["LASTCALL_PRE_STOP 2s", "--grace 7s", "LASTCALL_STOP_TIMEOUT 10s"] {
            assert!(msg.contains(needle), "{needle:?} not in {msg}");
        }
        let msg = usage_error(&["--stop-timeout", "10", "--pre-stop", "8s", "app"], &[]);
        assert!(msg.contains("--pre-stop 8s") && msg.contains("--stop-timeout 10s"), "{msg}");
        let msg = usage_error(&["--stop-timeout", "1s", "app"], &[]);
        assert!(msg.contains("--pre-stop 0s"), "{msg}");
        let msg = usage_error(&["--stop-timeout", "5", "--grace", "4s", "app"], &[]);
        assert!(msg.starts_with("--grace 4s does not fit in --stop-timeout 5s"), "{msg}");
        let msg = usage_error(&["--stop-timeout", "1m", "--grace", "0", "app"], &[]);
        assert!(msg.contains("--grace 0 (never escalate)"), "{msg}");
        let msg = usage_error(&["--stop-timeout", "0", "app"], &[]);
        assert!(msg.contains("--stop-timeout") && msg.contains("'0'"), "{msg}");
        assert!(!msg.contains('\n'));
        // Without a stop timeout nothing is checked.
        assert_eq!(config(&["--pre-stop", "1h", "app"], &[]).grace, Some(s(8)));
    }

    #[test]
    fn unready_on() {
        assert_eq!(config(&["--unready-on", "stop", "app"], &[]).unready_on, UnreadyOn::Stop);
        assert_eq!(config(&["app"], &[("LASTCALL_UNREADY_ON", "stop")]).unready_on, UnreadyOn::Stop);
        assert_eq!(config(&["--unready-on=signal", "app"], &[("LASTCALL_UNREADY_ON", "stop")]).unready_on, UnreadyOn::Signal);
        let msg = usage_error(&["app"], &[("LASTCALL_UNREADY_ON", "later")]);
        assert!(msg.contains("LASTCALL_UNREADY_ON") && msg.contains("'later'"), "{msg}");
    }

    #[test]
    fn version_is_what_dockerd_parses() {
        // moby's parseInitVersion: the part after " - ", trimmed, must be git.COMMIT with one dot.
        let line = version_line();
        let (name, git) = line.split_once(" - ").expect("a ' - ' separator");
        assert!(name.starts_with(&format!("lastcall {} (", env!("CARGO_PKG_VERSION"))), "{line}");
        assert!(name.contains(env!("LASTCALL_BUILD_TARGET")), "{line}");
        let parts: Vec<&str> = git.trim().split('.').collect();
        assert!(parts.len() == 2 && parts[0] == "git" && !parts[1].is_empty(), "{line}");
        assert!(line.ends_with('\n') && line.lines().count() == 1);
    }

    #[test]
    fn parsing_stops_at_the_first_non_option() {
        let c = config(&["sh", "-c", "echo --grace x", "-v"], &[]);
        assert_eq!(c.command, ["sh", "-c", "echo --grace x", "-v"].map(OsString::from));
        assert_eq!(c.log_level, DEFAULT_LOG_LEVEL);
        let c = config(&["--grace", "1s", "--", "-weird-name", "--pre-stop"], &[]);
        assert_eq!(c.command, ["-weird-name", "--pre-stop"].map(OsString::from));
    }

    #[test]
    fn non_utf8_arguments_reach_the_command_intact() {
        let raw = OsString::from_vec(vec![b'a', 0xff, b'b']);
        let args = vec!["lastcall".into(), "echo".into(), raw.clone()];
        match parse(args, |_| None) {
            Ok(Parsed::Run(c)) => assert_eq!(c.command[1], raw),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn flags_and_environment() {
        let c = config(&["--pre-stop", "2s", "--grace", "1m30s", "--stop-signal", "QUIT", "app"], &[]);
        assert_eq!(c.pre_stop, Duration::from_secs(2));
        assert_eq!(c.grace, Some(Duration::from_secs(90)));
        assert_eq!(c.stop_signal, Some(Sig::QUIT));

        let env = [("LASTCALL_PRE_STOP", "500ms"), ("LASTCALL_GRACE", "0"), ("LASTCALL_STOP_SIGNAL", "SIGINT")];
        let c = config(&["app"], &env);
        assert_eq!(c.pre_stop, Duration::from_millis(500));
        assert_eq!(c.grace, None);
        assert_eq!(c.stop_signal, Some(Sig::INT));

        // The flag wins, and a bad variable it overrides is never looked at.
        let c = config(&["--grace", "3", "app"], &[("LASTCALL_GRACE", "ten")]);
        assert_eq!(c.grace, Some(Duration::from_secs(3)));
    }

    #[test]
    fn log_levels() {
        assert_eq!(config(&["app"], &[]).log_level, LevelFilter::Info);
        assert_eq!(config(&["-v", "app"], &[]).log_level, LevelFilter::Debug);
        assert_eq!(config(&["-vv", "app"], &[]).log_level, LevelFilter::Trace);
        assert_eq!(config(&["-vvv", "app"], &[]).log_level, LevelFilter::Trace);
        assert_eq!(config(&["-q", "app"], &[]).log_level, LevelFilter::Warn, "-q silences the timeline");
        assert_eq!(config(&["-qq", "app"], &[]).log_level, LevelFilter::Error);
        assert_eq!(config(&["-qqq", "app"], &[]).log_level, LevelFilter::Off);
        assert_eq!(config(&["-vq", "app"], &[]).log_level, LevelFilter::Info);
        assert_eq!(config(&["app"], &[("LASTCALL_LOG", "debug")]).log_level, LevelFilter::Debug);
        assert_eq!(config(&["-q", "app"], &[("LASTCALL_LOG", "debug")]).log_level, LevelFilter::Warn);
        // RUST_LOG belongs to the child.
        assert_eq!(config(&["app"], &[("RUST_LOG", "trace")]).log_level, LevelFilter::Info);
    }

    #[test]
    fn bad_input_names_the_option_and_the_value() {
        let msg = usage_error(&["--grace", "abc", "app"], &[]);
        assert!(msg.contains("--grace") && msg.contains("'abc'"), "{msg}");
        let msg = usage_error(&["app"], &[("LASTCALL_GRACE", "ten")]);
        assert!(msg.contains("LASTCALL_GRACE") && msg.contains("'ten'"), "{msg}");
        let msg = usage_error(&["--pre-stop", "5x", "app"], &[]);
        assert!(msg.contains("--pre-stop") && msg.contains("'5x'"), "{msg}");
        let msg = usage_error(&["--stop-signal", "NOPE", "app"], &[]);
        assert!(msg.contains("--stop-signal") && msg.contains("'NOPE'"), "{msg}");
        let msg = usage_error(&["app"], &[("LASTCALL_STOP_SIGNAL", "99")]);
        assert!(msg.contains("LASTCALL_STOP_SIGNAL") && msg.contains("'99'"), "{msg}");
        let msg = usage_error(&["app"], &[("LASTCALL_LOG", "loud")]);
        assert!(msg.contains("LASTCALL_LOG") && msg.contains("'loud'"), "{msg}");
        let msg = usage_error(&["--frobnicate", "app"], &[]);
        assert!(msg.contains("--frobnicate"), "{msg}");
        let msg = usage_error(&[], &[]);
        assert!(msg.contains("no command"), "{msg}");
        let msg = usage_error(&["--grace"], &[]);
        assert!(msg.contains("--grace"), "{msg}");
        assert!(!msg.contains('\n'));
    }

    #[test]
    fn help_and_version_are_printed() {
        match run(&["--help"], &[]) {
            Ok(Parsed::Print(text)) => {
                for env in ["LASTCALL_PRE_STOP", "LASTCALL_GRACE", "LASTCALL_STOP_SIGNAL", "LASTCALL_LOG"] {
                    assert!(text.contains(env), "help lacks {env}:\n{text}");
                }
            }
            other => panic!("{other:?}"),
        }
        match run(&["--version"], &[]) {
            Ok(Parsed::Print(text)) => assert!(text.starts_with("lastcall ")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn durations() {
        let ms = Duration::from_millis;
        assert_eq!(parse_duration("500ms"), Ok(ms(500)));
        assert_eq!(parse_duration("5s"), Ok(ms(5000)));
        assert_eq!(parse_duration("1m30s"), Ok(ms(90_000)));
        assert_eq!(parse_duration("1h"), Ok(ms(3_600_000)));
        assert_eq!(parse_duration("2"), Ok(ms(2000)));
        assert_eq!(parse_duration("1.5s"), Ok(ms(1500)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("8760h"), Ok(MAX_DURATION));
        for bad in ["", "abc", "5x", "s", "-1", "1m-3s", "ten", "1..2s", "1e19", "8760h1ms", "31536001", "inf", "NaN"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} was accepted");
        }
    }

    fn probe(args: &[&str], env: &[(&str, &str)]) -> Result<ProbeConfig, Error> {
        let mut all = vec!["probe"];
        all.extend_from_slice(args);
        match run(&all, env) {
            Ok(Parsed::Probe(p)) => Ok(p),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e),
        }
    }

    #[test]
    fn rewrites_and_exit_remaps() {
        let c = config(&["-r", "TERM:QUIT", "--rewrite", "2:0", "--rewrite=SIGUSR1:RTMIN+1", "app"], &[]);
        assert_eq!(c.rewrite, vec![(Sig::TERM, Sig::QUIT), (Sig::INT, Sig(0)), (Sig(libc::SIGUSR1), Sig(35))]);
        let c = config(&["app"], &[("LASTCALL_REWRITE", "TERM:QUIT, INT:QUIT")]);
        assert_eq!(c.rewrite, vec![(Sig::TERM, Sig::QUIT), (Sig::INT, Sig::QUIT)]);
        let c = config(&["-e", "143", "-e130", "app"], &[]);
        assert_eq!(c.remap_exit, vec![143, 130]);
        let c = config(&["app"], &[("LASTCALL_REMAP_EXIT", "143,137")]);
        assert_eq!(c.remap_exit, vec![143, 137]);
        for bad in ["TERM", "TERM:", ":QUIT", "NOPE:QUIT", "TERM:99", "0:TERM"] {
            let msg = usage_error(&["-r", bad, "app"], &[]);
            assert!(msg.contains("--rewrite") && msg.contains(bad), "{msg}");
        }
        let msg = usage_error(&["app"], &[("LASTCALL_REWRITE", "TERM:QUIT,bogus")]);
        assert!(msg.contains("LASTCALL_REWRITE") && msg.contains("'bogus'"), "{msg}");
        for bad in ["256", "-1", "x"] {
            let msg = usage_error(&["-e", bad, "app"], &[]);
            assert!(msg.contains("--remap-exit") && msg.contains(bad), "{msg}");
        }
    }

    #[test]
    fn tini_and_dumb_init_flags_mean_what_they_meant() {
        let c = config(&["-s", "-g", "-w", "-vv", "-p", "SIGKILL", "--", "app"], &[]);
        assert!(c.subreaper == Subreaper::Asked && !c.single_child && c.warn_reaping);
        assert_eq!(c.parent_death_signal, Some(Sig::KILL));
        assert_eq!(c.log_level, LevelFilter::Trace);
        // Short flags cluster the way getopt clusters them.
        let c = config(&["-sgw", "app"], &[]);
        assert!(c.subreaper == Subreaper::Asked && c.warn_reaping);
        let c = config(&["-c", "app"], &[]);
        assert!(c.single_child && !c.setsid);
        let c = config(&["--single-child", "app"], &[]);
        assert!(c.single_child);
        let c = config(&["--setsid", "app"], &[]);
        assert!(c.setsid && !c.single_child);
        assert!(matches!(run(&["-V"], &[]), Ok(Parsed::Print(t)) if t.starts_with("lastcall ")));
        assert!(matches!(run(&["-l"], &[]), Ok(Parsed::Print(t)) if t.contains("license")));
        assert!(matches!(run(&["-L"], &[]), Ok(Parsed::Print(t)) if t.contains("license")));
        assert!(matches!(run(&["-h"], &[]), Ok(Parsed::Print(t)) if t.contains("Usage")));
    }

    #[test]
    fn peer_booleans_mean_what_they_say() {
        let subreaper = |args: &[&str], env: &[(&str, &str)]| config(args, env).subreaper;
        assert_eq!(subreaper(&["app"], &[("TINI_SUBREAPER", "0")]), Subreaper::Off);
        assert_eq!(subreaper(&["app"], &[("TINI_SUBREAPER", "1")]), Subreaper::Asked);
        assert_eq!(subreaper(&["app"], &[]), Subreaper::Default, "on by default, and not fatal");
        assert_eq!(subreaper(&["app"], &[("LASTCALL_SUBREAPER", "false")]), Subreaper::Off);
        assert_eq!(subreaper(&["app"], &[("LASTCALL_SUBREAPER", "1")]), Subreaper::Asked);
        assert_eq!(subreaper(&["app"], &[("LASTCALL_SUBREAPER", "0"), ("TINI_SUBREAPER", "1")]), Subreaper::Off);
        assert_eq!(subreaper(&["-s", "app"], &[("LASTCALL_SUBREAPER", "0")]), Subreaper::Asked, "the flag wins");
        assert_eq!(subreaper(&["--no-subreaper", "app"], &[("TINI_SUBREAPER", "1")]), Subreaper::Off);
        assert!(config(&["app"], &[("DUMB_INIT_SETSID", "0")]).single_child);
        let c = config(&["app"], &[("DUMB_INIT_SETSID", "1")]);
        assert!(c.setsid && !c.single_child);
        assert!(config(&["app"], &[("TINI_KILL_PROCESS_GROUP", "0")]).single_child);
        assert!(!config(&["app"], &[("TINI_KILL_PROCESS_GROUP", "1")]).single_child);
        assert!(!config(&["-g", "app"], &[("DUMB_INIT_SETSID", "0")]).single_child);
        assert_eq!(config(&["app"], &[("TINI_VERBOSITY", "3")]).log_level, LevelFilter::Debug);
        assert_eq!(config(&["app"], &[("TINI_VERBOSITY", "0")]).log_level, LevelFilter::Error);
        for (var, bad) in [("TINI_SUBREAPER", "maybe"), ("DUMB_INIT_SETSID", "2"), ("LASTCALL_WARN_REAPING", "y"), ("TINI_VERBOSITY", "9")] {
            let msg = usage_error(&["app"], &[(var, bad)]);
            assert!(msg.contains(var) && msg.contains(bad), "{msg}");
        }
    }

    fn run_as(name: &str, args: &[&str], env: &[(&str, &str)]) -> Result<Parsed, Error> {
        let env: HashMap<String, OsString> = env.iter().map(|(k, v)| (k.to_string(), v.into())).collect();
        let args = std::iter::once(name).chain(args.iter().copied()).map(OsString::from);
        parse(args, |k| env.get(k).cloned())
    }

    fn config_as(name: &str, args: &[&str], env: &[(&str, &str)]) -> Config {
        match run_as(name, args, env) {
            Ok(Parsed::Run(c)) => c,
            other => panic!("{name} {args:?} {env:?}: {other:?}"),
        }
    }

    /// (setsid, single_child, subreaper)
    fn modes(c: &Config) -> (bool, bool, bool) {
        (c.setsid, c.single_child, c.subreaper != Subreaper::Off)
    }

    #[test]
    fn tini_by_name() {
        let tini = |args: &[&str], env: &[(&str, &str)]| config_as("/usr/bin/tini", args, env);
        let c = tini(&["app"], &[]);
        assert_eq!(c.personality.name, "tini");
        assert_eq!(modes(&c), (false, true, false), "the child only, no subreaper");
        assert_eq!((c.grace, c.log_level), (None, LevelFilter::Warn), "never escalates; warnings shown");
        assert_eq!(modes(&tini(&["-g", "-s", "app"], &[])), (false, false, true));
        // Set to anything at all, even 0 or nothing, tini's variables turn the mode on.
        for value in ["1", "0", ""] {
            let env = [("TINI_KILL_PROCESS_GROUP", value), ("TINI_SUBREAPER", value)];
            assert_eq!(modes(&tini(&["app"], &env)), (false, false, true), "{value:?}");
        }
        // lastcall's own variables win.
        let env = [("TINI_SUBREAPER", "1"), ("LASTCALL_SUBREAPER", "0"), ("LASTCALL_GRACE", "3s")];
        let c = tini(&["app"], &env);
        assert_eq!(c.subreaper, Subreaper::Off);
        assert_eq!(c.grace, Some(Duration::from_secs(3)));
        assert_eq!(tini(&["app"], &[("LASTCALL_PRE_STOP", "5s")]).pre_stop, Duration::from_secs(5));
        // glibc's getopt permutes: options after the command are tini's.
        let c = tini(&["app", "-s", "arg", "-e", "143", "--", "-v"], &[]);
        assert_eq!(c.command, ["app", "arg", "-v"].map(OsString::from));
        assert_eq!(c.subreaper, Subreaper::Asked);
        assert_eq!(c.remap_exit, vec![143]);
        let c = tini(&["app", "-s"], &[("POSIXLY_CORRECT", "1")]);
        assert_eq!(c.command, ["app", "-s"].map(OsString::from));
        assert!(matches!(run_as("tini", &["sh", "-c", "x"], &[]), Err(Error::Usage(m)) if m.contains("'-c'")));
        // Verbosity: -v from warnings up; TINI_VERBOSITY is atoi()'d and wins over -v.
        assert_eq!(tini(&["-v", "app"], &[]).log_level, LevelFilter::Info);
        assert_eq!(tini(&["-vvv", "app"], &[]).log_level, LevelFilter::Trace);
        assert_eq!(tini(&["-vv", "app"], &[("TINI_VERBOSITY", "0")]).log_level, LevelFilter::Error);
        assert_eq!(tini(&["app"], &[("TINI_VERBOSITY", "loud")]).log_level, LevelFilter::Error);
        assert_eq!(tini(&["app"], &[("TINI_VERBOSITY", " 2x")]).log_level, LevelFilter::Info);
        assert_eq!(tini(&["app"], &[("TINI_VERBOSITY", "-1")]).log_level, LevelFilter::Trace);
        // Only tini's spellings exist; --version only alone.
        for bad in [&["--grace", "1s", "app"][..], &["-c", "app"], &["-V"], &["--version", "app"], &["probe", "ready"]] {
            match run_as("tini", bad, &[]) {
                Err(Error::Usage(_)) => {}
                Ok(Parsed::Run(c)) if bad[0] == "probe" => assert_eq!(c.command[0], "probe"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        assert!(matches!(run_as("tini", &["--version"], &[]), Ok(Parsed::Print(t)) if t.starts_with("lastcall ")));
        assert!(matches!(run_as("tini", &["-h"], &[]), Ok(Parsed::Print(t)) if !t.contains("--pre-stop")));
        assert!(matches!(run_as("tini", &["-l"], &[]), Ok(Parsed::Print(t)) if t.contains("license")));
    }

    #[test]
    fn dumb_init_by_name() {
        let dumb = |args: &[&str], env: &[(&str, &str)]| config_as("dumb-init", args, env);
        let c = dumb(&["app"], &[]);
        assert_eq!(c.personality.name, "dumb-init");
        assert_eq!(modes(&c), (true, false, false), "setsid mode, the group, no subreaper");
        assert_eq!((c.grace, c.log_level), (None, LevelFilter::Warn));
        assert_eq!(modes(&dumb(&["-c", "app"], &[])), (false, true, false));
        assert_eq!(modes(&dumb(&["--single-child", "app"], &[("DUMB_INIT_SETSID", "1")])), (false, true, false));
        assert_eq!(modes(&dumb(&["app"], &[("DUMB_INIT_SETSID", "0")])), (false, true, false));
        // Only "0" turns setsid off: dumb-init compares the string.
        for value in ["1", "false", "no", "", "00"] {
            assert_eq!(modes(&dumb(&["app"], &[("DUMB_INIT_SETSID", value)])), (true, false, false), "{value:?}");
        }
        assert_eq!(dumb(&["app"], &[("DUMB_INIT_DEBUG", "1")]).log_level, LevelFilter::Debug);
        assert_eq!(dumb(&["app"], &[("DUMB_INIT_DEBUG", "yes")]).log_level, LevelFilter::Warn);
        assert_eq!(dumb(&["-v", "app"], &[]).log_level, LevelFilter::Debug);
        assert_eq!(dumb(&["--verbose", "app"], &[]).log_level, LevelFilter::Debug);
        let c = dumb(&["-r", "15:3", "--rewrite", "2:0", "app", "-c"], &[]);
        assert_eq!(c.rewrite, vec![(Sig::TERM, Sig::QUIT), (Sig::INT, Sig(0))]);
        assert_eq!(c.command, ["app", "-c"].map(OsString::from), "options stop at the command");
        let c = dumb(&["app"], &[("LASTCALL_PRE_STOP", "5s"), ("LASTCALL_SUBREAPER", "1")]);
        assert_eq!((c.pre_stop, c.subreaper), (Duration::from_secs(5), Subreaper::Asked));
        for bad in [&["-s", "app"][..], &["-g", "app"], &["--grace", "1s", "app"], &[]] {
            assert!(matches!(run_as("dumb-init", bad, &[]), Err(Error::Usage(_))), "{bad:?}");
        }
        // getopt_long's unambiguous prefixes.
        let c = dumb(&["--single", "--rew=15:3", "--verb", "app"], &[]);
        assert_eq!((c.single_child, c.log_level), (true, LevelFilter::Debug));
        assert_eq!(c.rewrite, vec![(Sig::TERM, Sig::QUIT)]);
        assert!(matches!(run_as("dumb-init", &["--ver", "app"], &[]), Err(Error::Usage(_))), "ambiguous");
        assert!(matches!(run_as("lastcall", &["--single", "app"], &[]), Err(Error::Usage(_))), "exact names only");
        assert!(matches!(run_as("dumb-init", &["-V"], &[]), Ok(Parsed::Print(t)) if t.starts_with("lastcall ")));
        assert!(matches!(run_as("dumb-init", &["--version", "app"], &[]), Ok(Parsed::Print(_))));
    }

    #[test]
    fn any_other_name_is_lastcall() {
        for name in ["lastcall", "/sbin/docker-init", "/usr/local/bin/init"] {
            let c = config_as(name, &["app"], &[]);
            assert_eq!(c.personality.name, "lastcall");
            assert_eq!(modes(&c), (false, false, true));
            assert_eq!((c.grace, c.log_level), (Some(DEFAULT_GRACE), DEFAULT_LOG_LEVEL));
        }
        assert!(matches!(run_as("docker-init", &["--version"], &[]), Ok(Parsed::Print(t)) if t == version_line()));
    }

    #[test]
    fn readiness_options() {
        let c = config(&["--ready-file", "/tmp/ready", "--health-listen", "127.0.0.1:8081", "app"], &[]);
        assert_eq!(c.ready_file, Some(PathBuf::from("/tmp/ready")));
        assert_eq!(c.health_listen, Some("127.0.0.1:8081".parse().unwrap()));
        let c = config(&["app"], &[("LASTCALL_HEALTH_LISTEN", ":9000"), ("LASTCALL_READY_FILE", "r")]);
        assert_eq!(c.health_listen, Some("0.0.0.0:9000".parse().unwrap()));
        assert_eq!(c.ready_file, Some(PathBuf::from("r")));
        assert_eq!(config(&["--health-listen", "[::1]:1", "app"], &[]).health_listen, Some("[::1]:1".parse().unwrap()));
        for bad in ["localhost", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:99999", "1.2.3.4.5:80", ":x"] {
            let msg = usage_error(&["--health-listen", bad, "app"], &[]);
            assert!(msg.contains("--health-listen") && msg.contains(bad), "{msg}");
        }
        let msg = usage_error(&["--ready-file", "/tmp/dir/", "app"], &[]);
        assert!(msg.contains("--ready-file"), "{msg}");
    }

    #[test]
    fn probes() {
        let p = probe(&["ready", "--health-listen", "127.0.0.1:8081"], &[]).unwrap();
        assert_eq!((p.target, p.health_listen), (ProbeTarget::Ready, Some("127.0.0.1:8081".parse().unwrap())));
        let p = probe(&["--ready-file", "/r", "ready"], &[]).unwrap();
        assert_eq!(p.ready_file, Some(PathBuf::from("/r")));
        let p = probe(&["live"], &[("LASTCALL_HEALTH_LISTEN", ":8081")]).unwrap();
        assert_eq!(p.target, ProbeTarget::Live);
        for (args, needle) in [
            (&["sideways", "--ready-file", "/r"][..], "unknown probe target 'sideways'"),
            (&[][..], "needs a target"),
            (&["ready"][..], "needs --health-listen or --ready-file"),
            (&["live", "--ready-file", "/r"][..], "probe live needs --health-listen"),
            (&["ready", "--health-listen", "nope"][..], "'nope' for --health-listen"),
            (&["ready", "--grace", "1s"][..], "unknown option '--grace'"),
        ] {
            match probe(args, &[]) {
                Err(Error::Usage(msg)) => assert!(msg.contains(needle), "{args:?}: {msg}"),
                other => panic!("{args:?}: {other:?}"),
            }
        }
        // `lastcall -- probe` runs a program named probe.
        assert_eq!(config(&["--", "probe", "ready"], &[]).command, ["probe", "ready"].map(OsString::from));
    }

    #[test]
    fn pause_mode_runs_no_command() {
        assert!(config(&["-P"], &[]).pause);
        let msg = usage_error(&["-P", "app"], &[]);
        assert!(msg.contains("no command"), "{msg}");
    }
}

