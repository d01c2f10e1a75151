//! Command line and environment → a validated `Config`.
//!
//! Every option has a `LASTCALL_<NAME>` variable because `dockerd --init-path` runs the init as
//! `INIT -- COMMAND...` and cannot pass flags. A flag wins over its variable. Option parsing stops
//! at the first non-option, so `lastcall sh -c x` runs `sh -c x`.

use std::ffi::OsString;
use std::time::Duration;

use log::LevelFilter;

use crate::error::Error;
use crate::signals::Sig;

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub command: Vec<OsString>,
    pub pre_stop: Duration,
    /// `None`: never escalate to SIGKILL (`--grace 0`).
    pub grace: Option<Duration>,
    /// `None`: forward the signal that was received.
    pub stop_signal: Option<Sig>,
    pub log_level: LevelFilter,
}

/// What `parse` found: a configuration to run, or text to print before exiting 0.
#[derive(Debug)]
pub enum Parsed {
    Run(Config),
    Print(String),
}

pub const USAGE_LINE: &str = "Usage: lastcall [OPTIONS] [--] COMMAND [ARGS]...";
pub const HINT_LINE: &str = "Try 'lastcall --help' for more information.";

const DEFAULT_GRACE: Duration = Duration::from_secs(10);
const LOG_ENV: &str = "LASTCALL_LOG";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Id {
    PreStop,
    Grace,
    StopSignal,
    Verbose,
    Quiet,
    Help,
    Version,
}

/// One option: its spellings, whether it takes a value, and the variable that can stand in for it.
struct Opt {
    id: Id,
    long: &'static str,
    short: Option<char>,
    value: Option<&'static str>,
    env: Option<&'static str>,
    help: &'static str,
}

const OPTIONS: &[Opt] = &[
    Opt {
        id: Id::PreStop,
        long: "pre-stop",
        short: None,
        value: Some("DURATION"),
        env: Some("LASTCALL_PRE_STOP"),
        help: "after the first termination signal, wait this long with the app untouched [default: 0]",
    },
    Opt {
        id: Id::Grace,
        long: "grace",
        short: None,
        value: Some("DURATION"),
        env: Some("LASTCALL_GRACE"),
        help: "after forwarding the stop signal, wait this long, then SIGKILL; 0 never escalates [default: 10s]",
    },
    Opt {
        id: Id::StopSignal,
        long: "stop-signal",
        short: None,
        value: Some("SIGNAL"),
        env: Some("LASTCALL_STOP_SIGNAL"),
        help: "forward this instead of the termination signal received [default: the one received]",
    },
    Opt {
        id: Id::Verbose,
        long: "verbose",
        short: Some('v'),
        value: None,
        env: None,
        help: "log more: -v the shutdown timeline, -vv every signal [env: LASTCALL_LOG=info|debug|trace]",
    },
    Opt {
        id: Id::Quiet,
        long: "quiet",
        short: Some('q'),
        value: None,
        env: None,
        help: "log less: -q errors only, -qq nothing [env: LASTCALL_LOG=error|off]",
    },
    Opt { id: Id::Help, long: "help", short: Some('h'), value: None, env: None, help: "print this help" },
    Opt { id: Id::Version, long: "version", short: None, value: None, env: None, help: "print the version" },
];

const ABOUT: &str = "lastcall: a tiny init for containers. It runs COMMAND in its own process group,
forwards signals to that group, reaps zombies, and on TERM, INT or QUIT shuts down in
order: pre-stop, stop signal, grace, SIGKILL. It exits with COMMAND's status.";

const AFTER_HELP: &str = "DURATION: 500ms, 5s, 1m30s, 1h; a plain number means seconds.
SIGNAL: TERM, SIGTERM or 15.
Every option can also be set by the variable shown; a flag wins over its variable.

Exit status: COMMAND's; 128+N if it died from signal N (137 after the escalation);
126 if it cannot be executed; 127 if it is not found; 125 if lastcall itself fails;
2 for a usage error.";

fn help_text() -> String {
    let mut text = format!("{ABOUT}\n\n{USAGE_LINE}\n\nOptions:\n");
    for opt in OPTIONS {
        let mut spelling = match opt.short {
            Some(c) => format!("-{c}, --{}", opt.long),
            None => format!("    --{}", opt.long),
        };
        if let Some(value) = opt.value {
            spelling = format!("{spelling} {value}");
        }
        text.push_str(&format!("  {spelling:<26}{}\n", opt.help));
        if let Some(env) = opt.env {
            text.push_str(&format!("  {:<26}[env: {env}]\n", ""));
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

    fn count(&self, id: Id) -> usize {
        self.given.iter().filter(|(i, _)| *i == id).count()
    }
}

/// getopt without permutation: options first, then the command; `--` ends the options early.
fn split_command_line(args: Vec<OsString>) -> Result<CommandLine, Error> {
    let mut given = Vec::new();
    let mut rest = args.into_iter();
    while let Some(arg) = rest.next() {
        if arg == "--" {
            break;
        }
        let text = match arg.to_str() {
            Some(t) if t.starts_with('-') && t.len() > 1 => t.to_string(),
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
            let opt = OPTIONS
                .iter()
                .find(|o| o.long == name)
                .ok_or_else(|| Error::Usage(format!("unknown option '--{name}'")))?;
            let value = match (opt.value, inline) {
                (None, None) => None,
                (None, Some(_)) => return Err(Error::Usage(format!("option '--{name}' takes no value"))),
                (Some(_), Some(v)) => Some(v),
                (Some(_), None) => Some(next_value(&mut rest, &format!("--{name}"))?),
            };
            given.push((opt.id, value));
            continue;
        }
        // A cluster of short options: -vv, -qv, or one that takes the rest as its value.
        let cluster = &text[1..];
        for (i, c) in cluster.char_indices() {
            let opt = OPTIONS
                .iter()
                .find(|o| o.short == Some(c))
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
    Ok(CommandLine { given, command: rest.collect() })
}

fn next_value(rest: &mut impl Iterator<Item = OsString>, flag: &str) -> Result<String, Error> {
    let value = rest.next().ok_or_else(|| Error::Usage(format!("option '{flag}' needs a value")))?;
    value.into_string().map_err(|v| bad_value(flag, &v.to_string_lossy(), "not valid UTF-8"))
}

/// Parses `args` (with the program name first) and looks variables up with `env`.
pub fn parse<I, F>(args: I, env: F) -> Result<Parsed, Error>
where
    I: IntoIterator<Item = OsString>,
    F: Fn(&str) -> Option<OsString>,
{
    let line = split_command_line(args.into_iter().skip(1).collect())?;
    if line.count(Id::Help) > 0 {
        return Ok(Parsed::Print(help_text()));
    }
    if line.count(Id::Version) > 0 {
        return Ok(Parsed::Print(format!("lastcall {}\n", env!("CARGO_PKG_VERSION"))));
    }
    if line.command.is_empty() {
        return Err(Error::Usage("no command given".into()));
    }

    let pre_stop = value(&line, &env, Id::PreStop, parse_duration)?.unwrap_or(Duration::ZERO);
    let grace = match value(&line, &env, Id::Grace, parse_duration)? {
        Some(d) if d.is_zero() => None,
        Some(d) => Some(d),
        None => Some(DEFAULT_GRACE),
    };
    let stop_signal = value(&line, &env, Id::StopSignal, |s| Sig::parse(s, false))?;
    let log_level = log_level(&line, &env)?;

    Ok(Parsed::Run(Config { command: line.command, pre_stop, grace, stop_signal, log_level }))
}

/// The option's value from its flag, else from its variable, validated by `check`; the error
/// names whichever of the two the bad value came from.
fn value<T, F>(
    line: &CommandLine,
    env: &F,
    id: Id,
    check: impl Fn(&str) -> Result<T, String>,
) -> Result<Option<T>, Error>
where
    F: Fn(&str) -> Option<OsString>,
{
    let opt = OPTIONS.iter().find(|o| o.id == id).expect("every Id has an entry in OPTIONS");
    let flag = format!("--{}", opt.long);
    let (raw, source): (OsString, &str) = match line.last(id) {
        Some(v) => (v.into(), &flag),
        None => match opt.env.and_then(|name| env(name).map(|v| (v, name))) {
            Some((v, name)) if !v.is_empty() => (v, name),
            _ => return Ok(None),
        },
    };
    let text = raw.to_str().ok_or_else(|| bad_value(source, &raw.to_string_lossy(), "not valid UTF-8"))?;
    check(text).map(Some).map_err(|why| bad_value(source, text, &why))
}

fn bad_value(source: &str, value: &str, why: &str) -> Error {
    Error::Usage(format!("invalid value '{value}' for {source}: {why}"))
}

fn log_level<F>(line: &CommandLine, env: &F) -> Result<LevelFilter, Error>
where
    F: Fn(&str) -> Option<OsString>,
{
    let verbose = line.count(Id::Verbose) as i32;
    let quiet = line.count(Id::Quiet) as i32;
    if verbose > 0 || quiet > 0 {
        // Each -v is one level up from the default (warn), each -q one down.
        return Ok(match verbose - quiet {
            i32::MIN..=-2 => LevelFilter::Off,
            -1 => LevelFilter::Error,
            0 => LevelFilter::Warn,
            1 => LevelFilter::Info,
            2 => LevelFilter::Debug,
            _ => LevelFilter::Trace,
        });
    }
    match env(LOG_ENV) {
        Some(v) if !v.is_empty() => {
            let text = v.to_string_lossy();
            text.parse::<LevelFilter>()
                .map_err(|_| bad_value(LOG_ENV, &text, "expected off, error, warn, info, debug or trace"))
        }
        _ => Ok(LevelFilter::Warn),
    }
}

/// `500ms`, `5s`, `1m30s`, `2h`, `1.5s`; a plain number is seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
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
        assert_eq!(c.grace, Some(Duration::from_secs(10)));
        assert_eq!(c.stop_signal, None);
        assert_eq!(c.log_level, LevelFilter::Warn);
    }

    #[test]
    fn parsing_stops_at_the_first_non_option() {
        let c = config(&["sh", "-c", "echo --grace x", "-v"], &[]);
        assert_eq!(c.command, ["sh", "-c", "echo --grace x", "-v"].map(OsString::from));
        assert_eq!(c.log_level, LevelFilter::Warn);
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
        assert_eq!(config(&["-v", "app"], &[]).log_level, LevelFilter::Info);
        assert_eq!(config(&["-vv", "app"], &[]).log_level, LevelFilter::Debug);
        assert_eq!(config(&["-vvv", "app"], &[]).log_level, LevelFilter::Trace);
        assert_eq!(config(&["-q", "app"], &[]).log_level, LevelFilter::Error);
        assert_eq!(config(&["-qq", "app"], &[]).log_level, LevelFilter::Off);
        assert_eq!(config(&["app"], &[("LASTCALL_LOG", "debug")]).log_level, LevelFilter::Debug);
        assert_eq!(config(&["-q", "app"], &[("LASTCALL_LOG", "debug")]).log_level, LevelFilter::Error);
        // RUST_LOG belongs to the child.
        assert_eq!(config(&["app"], &[("RUST_LOG", "trace")]).log_level, LevelFilter::Warn);
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
        for bad in ["", "abc", "5x", "s", "-1", "1m-3s", "ten", "1..2s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
