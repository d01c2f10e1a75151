//! cli's unit tests, in a file of their own to keep the parser short.
//!
//! May import: cli (`super`), machine (`OnMainExit`), personality, user.

use super::*;
use std::collections::HashMap;
use std::path::PathBuf;
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
    let asked = |args: &[&str], var: Option<&str>| {
        let args = std::iter::once("lastcall").chain(args.iter().copied()).map(OsString::from);
        asked_log_format(args, |_| var.map(OsString::from))
    };
    assert_eq!(asked(&["--grace", "x", "--log-format", "json", "app"], None), Format::Json);
    assert_eq!(asked(&["--log-format=json", "--bad"], None), Format::Json);
    assert_eq!(asked(&["--bad"], Some("json")), Format::Json);
    assert_eq!(asked(&["--log-format=text", "--bad"], Some("json")), Format::Text);
    assert_eq!(asked(&["--", "app", "--log-format=json"], None), Format::Text);
    assert_eq!(asked(&["--bad"], Some("xml")), Format::Text);
    assert_eq!(config(&["app"], &[]).log_format, Format::Text);
    assert_eq!(config(&["--log-format", "json", "app"], &[]).log_format, Format::Json);
    assert_eq!(config(&["app"], &[("LASTCALL_LOG_FORMAT", "json")]).log_format, Format::Json);
    assert_eq!(config(&["--log-format=text", "app"], &[("LASTCALL_LOG_FORMAT", "json")]).log_format, Format::Text);
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
    // Not 0, yet below what a Duration holds: it must not read as 0, which means "never".
    for tiny in ["1e-10", "0.0000001ms", "0.0000000001s", "0.00000000001m", "1e-300", "0.0000000000000001h"] {
        match parse_duration(tiny) {
            Ok(d) => assert!(!d.is_zero(), "{tiny:?} read as 0"),
            Err(e) => assert!(e.contains("shorter than a nanosecond"), "{tiny:?}: {e}"),
        }
    }
    assert!(parse_duration("1e-10").is_err());
    // Far below what a float holds: the digits, not a float, decide.
    assert!(parse_duration("1e-400").is_err());
    assert_eq!(parse_duration("0e5"), Ok(Duration::ZERO));
    assert_eq!(parse_duration("0.000"), Ok(Duration::ZERO));
    assert_eq!(parse_duration("0.0ms"), Ok(Duration::ZERO));
    assert_eq!(parse_duration("0.5ms"), Ok(Duration::from_micros(500)));
    // Exact, digit by digit: no float rounding.
    assert_eq!(parse_duration("0.1s"), Ok(ms(100)));
    assert_eq!(parse_duration("1E-3"), Ok(ms(1)));
    assert_eq!(parse_duration("1e3"), Ok(ms(1_000_000)));
    assert_eq!(parse_duration("+5"), Ok(ms(5000)));
    assert_eq!(parse_duration("1.000000001"), Ok(Duration::new(1, 1)));
    assert_eq!(parse_duration("0.0000000019s"), Ok(Duration::from_nanos(1)));
    assert_eq!(parse_duration(&format!("{}e-38", "1".repeat(40))), Ok(Duration::from_nanos(11_111_111_111)));
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
    assert_eq!(c.name, "tini");
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
    assert_eq!(c.name, "dumb-init");
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
        assert_eq!(c.name, "lastcall");
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
    assert_eq!(probe(&["ready", "--ready-file", "/r"], &[]).unwrap().timeout, HEALTH_PROBE_TIMEOUT);
    // The app itself.
    let http = |host: &str, port, path: &str| ProbeTarget::Http { host: host.into(), port, path: path.into() };
    for (url, target) in [
        ("http://127.0.0.1:8080/healthz", http("127.0.0.1", 8080, "/healthz")),
        ("http://[::1]:8080/a?b=c#frag", http("::1", 8080, "/a?b=c")),
        ("http://app.local", http("app.local", 80, "/")),
        ("http://[::1]", http("::1", 80, "/")),
        ("tcp://db:5432", ProbeTarget::Tcp { host: "db".into(), port: 5432 }),
        ("tcp://[fe80::1]:1", ProbeTarget::Tcp { host: "fe80::1".into(), port: 1 }),
    ] {
        let p = probe(&[url], &[]).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!((p.target, p.timeout), (target, PROBE_TIMEOUT), "{url}");
    }
    assert_eq!(probe(&["--timeout", "250ms", "tcp://h:1"], &[]).unwrap().timeout, Duration::from_millis(250));
    for (args, needle) in [
        (&["https://h:1/"][..], "https is not supported"),
        (&["ftp://h:1/"][..], "unknown scheme 'ftp'"),
        (&["tcp://h"][..], "tcp:// needs a PORT"),
        (&["tcp://h:0"][..], "'0' is not a port"),
        (&["tcp://h:65536"][..], "'65536' is not a port"),
        (&["tcp://:80"][..], "no HOST"),
        (&["http://::1:80/"][..], "in brackets"),
        (&["http://[::1/"][..], "closing ']'"),
        (&["http://[nope]:1/"][..], "not an IPv6 address"),
        (&["http://[::1]x/"][..], "':PORT'"),
        (&["http://u@h:1/"][..], "user information"),
        (&["http://h:1/a b"][..], "blanks"),
        (&["http://h:1/\r\n"][..], "control characters"),
        (&["http://h:1/", "--timeout", "0"][..], "--timeout"),
        (&["http://h:1/", "--timeout", "soon"][..], "--timeout"),
        (&["http://h:1/", "--ready-file", "/r"][..], "take no --health-listen"),
        (&["http://h:1/", "tcp://h:2"][..], "unexpected argument"),
    ] {
        match probe(args, &[]) {
            Err(Error::Usage(msg)) => assert!(msg.contains(needle), "{args:?}: {msg}"),
            other => panic!("{args:?}: {other:?}"),
        }
    }
    // `lastcall -- probe` runs a program named probe.
    assert_eq!(config(&["--", "probe", "ready"], &[]).command, ["probe", "ready"].map(OsString::from));
}

fn run_named(args: &[&str], env: &[(&str, &str)]) -> Result<Parsed, Error> {
    let map: HashMap<String, OsString> = env.iter().map(|(k, v)| (k.to_string(), v.into())).collect();
    let args = std::iter::once("lastcall").chain(args.iter().copied()).map(OsString::from);
    parse_all(args, |k| map.get(k).cloned(), env.iter().map(|(k, _)| OsString::from(k)))
}

#[test]
fn misspelt_variables_are_never_silent() {
    let warnings = |env: &[(&str, &str)]| match run_named(&["app"], env) {
        Ok(Parsed::Run(c)) => c.warnings,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        warnings(&[("LASTCALL_PRESTOP", "2s"), ("PATH", "/bin")]),
        ["LASTCALL_PRESTOP: not a lastcall variable; did you mean LASTCALL_PRE_STOP?"]
    );
    assert_eq!(warnings(&[("LASTCALL_GRCE", "1s"), ("LASTCALL_GRCE", "1s")]).len(), 1, "once");
    assert_eq!(warnings(&[("LASTCALL_HEALTH_LISTENER", ":1")])[0], "LASTCALL_HEALTH_LISTENER: not a lastcall variable; did you mean LASTCALL_HEALTH_LISTEN?");
    assert!(warnings(&[("LASTCALL_SOMETHING_ELSE_ENTIRELY", "x")])[0].contains("lastcall --help lists them"));
    let known: Vec<(&str, &str)> = known_variables().map(|k| (k, "")).collect();
    assert_eq!(warnings(&known), Vec::<String>::new(), "every variable lastcall reads is known");
    assert!(warnings(&[("LASTCALL_\u{1b}[2J", "")])[0].starts_with("LASTCALL_\\u{1b}[2J"), "one line, no escapes");
    // Strict: the first one is a usage error; a strict run with no typo runs.
    let msg = match run_named(&["app"], &[("LASTCALL_PRESTOP", "2s"), ("LASTCALL_STRICT", "1")]) {
        Err(Error::Usage(m)) => m,
        other => panic!("{other:?}"),
    };
    assert!(msg.contains("did you mean LASTCALL_PRE_STOP?") && msg.contains("LASTCALL_STRICT"), "{msg}");
    assert!(matches!(run_named(&["app"], &[("LASTCALL_STRICT", "yes")]), Ok(Parsed::Run(_))));
    assert!(matches!(run_named(&["app"], &[("LASTCALL_STRICT", "maybe")]), Err(Error::Usage(m)) if m.contains("LASTCALL_STRICT")));
    assert!(matches!(run_named(&["app"], &[("LASTCALL_PRESTOP", "2s"), ("LASTCALL_STRICT", "0")]), Ok(Parsed::Run(_))));
}

#[test]
fn letter_case_never_matters_in_words() {
    let c = config(&["--stop-signal", "term", "--pre-stop", "1S", "--grace", "1M30s", "-r", "Term:Quit", "app"], &[
        ("LASTCALL_UNREADY_ON", "Stop"),
        ("LASTCALL_LOG", "DEBUG"),
        ("LASTCALL_WARN_REAPING", "TRUE"),
    ]);
    assert_eq!((c.stop_signal, c.pre_stop, c.grace), (Some(Sig::TERM), Duration::from_secs(1), Some(Duration::from_secs(90))));
    assert_eq!((c.unready_on, c.log_level, c.warn_reaping), (UnreadyOn::Stop, LevelFilter::Debug, true));
    assert_eq!(c.rewrite, vec![(Sig::TERM, Sig::QUIT)]);
    assert_eq!(parse_duration("500MS"), Ok(Duration::from_millis(500)));
}

#[test]
fn uncatchable_signals_are_refused_where_meaningless() {
    for bad in ["KILL:TERM", "9:15", "STOP:CONT", "sigstop:0"] {
        let msg = usage_error(&["-r", bad, "app"], &[]);
        assert!(msg.contains("cannot be caught"), "{msg}");
    }
    // As a target they mean something: dumb-init's TSTP:STOP, or an immediate KILL.
    assert_eq!(config(&["-r", "TSTP:STOP", "-r", "TERM:KILL", "app"], &[]).rewrite, vec![(Sig::TSTP, Sig::STOP), (Sig::TERM, Sig::KILL)]);
    for bad in ["KILL", "9", "SIGSTOP"] {
        let msg = usage_error(&["--stop-signal", bad, "app"], &[]);
        assert!(msg.contains("--stop-signal") && msg.contains(bad), "{msg}");
    }
    let msg = usage_error(&["app"], &[("LASTCALL_STOP_SIGNAL", "kill")]);
    assert!(msg.contains("LASTCALL_STOP_SIGNAL") && msg.contains("no chance to stop"), "{msg}");
    assert_eq!(config(&["-p", "KILL", "app"], &[]).parent_death_signal, Some(Sig::KILL), "a parent-death KILL is fine");
}

#[test]
fn address_errors_say_what_is_wrong() {
    for (bad, why) in [
        ("localhost:8081", "host names are not accepted"),
        ("db.internal:80", "host names are not accepted"),
        (":99999", "port 99999 is out of range (1-65535)"),
        ("127.0.0.1:70000", "out of range"),
        ("127.0.0.1", "no port"),
        ("[::1]", "no port"),
        ("127.0.0.1:", "no port"),
        (":http", "port 'http' is not a number"),
        ("::1:80", "IPv6 address goes in brackets"),
        ("[127.0.0.1]:80", "not an IPv6 address"),
        ("1.2.3.4.5:80", "'1.2.3.4.5' is not an IP address"),
        ("[::1:80", "no closing ']'"),
        (":0", "port 0"),
    ] {
        let msg = usage_error(&["--health-listen", bad, "app"], &[]);
        assert!(msg.contains(why) && msg.contains(&format!("'{bad}'")), "{bad}: {msg}");
    }
    assert_eq!(parse_listen_addr("[::]:81"), Ok("[::]:81".parse().unwrap()));
    assert_eq!(parse_listen_addr(" 10.0.0.1:65535 "), Ok("10.0.0.1:65535".parse().unwrap()));
}

#[test]
fn help_and_errors_under_a_peers_name_are_the_peers() {
    use crate::personality::{DUMB_INIT, TINI};
    let help = |name| match run_as(name, &["-h"], &[]) {
        Ok(Parsed::Print(t)) => t,
        other => panic!("{other:?}"),
    };
    let tini = help("tini");
    for line in ["Usage: tini [OPTIONS] PROGRAM -- [ARGS] | --version", "  -e EXIT_CODE: Remap EXIT_CODE (from 0 to 255) to 0.", "  TINI_KILL_PROCESS_GROUP:"] {
        assert!(tini.contains(line), "{line:?} not in\n{tini}");
    }
    let dumb = help("/usr/local/bin/dumb-init");
    assert!(dumb.contains("   -c, --single-child   Run in single-child mode."), "{dumb}");
    for text in [&tini, &dumb] {
        assert!(!text.contains("--pre-stop") && !text.contains("--setsid") && !text.contains("LASTCALL_"), "{text}");
        assert_eq!(text.lines().filter(|l| l.contains("lastcall")).count(), 1, "one line says it is lastcall:\n{text}");
    }
    assert!(!tini.contains("-c,") && !tini.contains("-r"), "tini has neither -c nor -r");
    let e = Error::Usage("unknown option '-c'".into());
    let text = usage_error_text(&TINI, &e);
    assert_eq!(text, "tini: unknown option '-c'\nUsage: tini [OPTIONS] PROGRAM -- [ARGS] | --version\nTry 'tini -h' for more information.\n");
    assert!(usage_error_text(&DUMB_INIT, &e).starts_with("dumb-init: unknown option"));
    assert!(!usage_error_text(&DUMB_INIT, &e).contains("lastcall --help"));
    assert_eq!(usage_error_text(&LASTCALL, &e), "lastcall: unknown option '-c'\n", "one line under lastcall's own name");
}

#[test]
fn typos_of_names_are_caught_with_a_suggestion() {
    let warnings = |env: &[(&str, &str)]| match run_named(&["app"], env) {
        Ok(Parsed::Run(c)) => c.warnings,
        other => panic!("{other:?}"),
    };
    for (name, meant) in [
        ("LASTCAL_PRE_STOP", "LASTCALL_PRE_STOP"),
        ("LAST_CALL_GRACE", "LASTCALL_GRACE"),
        ("LASTCALLGRACE", "LASTCALL_GRACE"),
        ("LATSCALL_GRACE", "LASTCALL_GRACE"),
        ("LASTCALL_GRACE_PERIOD", "LASTCALL_GRACE"),
        ("LASTCALL_HEALTH_LISTEN_ADDR", "LASTCALL_HEALTH_LISTEN"),
        ("lastcall_grace_period", "LASTCALL_GRACE"),
        ("LASTCALL_PERSTOP", "LASTCALL_PRE_STOP"),
    ] {
        assert_eq!(warnings(&[(name, "1")]), [format!("{name}: not a lastcall variable; did you mean {meant}?")], "{name}");
    }
    assert_eq!(
        warnings(&[("lastcall_pre_stop", "2s")]),
        ["lastcall_pre_stop: not a lastcall variable (names are upper case); did you mean LASTCALL_PRE_STOP?"]
    );
    // What lastcall writes for the app, set by hand: said so, with what to set instead.
    assert_eq!(
        warnings(&[("LASTCALL_PRE_STOP_MS", "2000")]),
        ["LASTCALL_PRE_STOP_MS: output only: lastcall sets it for the app and does not read it; set LASTCALL_PRE_STOP instead"]
    );
    assert_eq!(warnings(&[("LASTCALL_GRACE_MS", "1"), ("LASTCALL_CLOCK_ZERO_NS", "1")]).len(), 2);
    // All three: an outer lastcall wrote them for its app, which is this one.
    assert!(warnings(&[("LASTCALL_PRE_STOP_MS", "0"), ("LASTCALL_GRACE_MS", "8000"), ("LASTCALL_CLOCK_ZERO_NS", "1")]).is_empty());
    // The app's own variables, the peers' and the build's are nobody's typos.
    let theirs = [
        "PATH", "HOME", "LC_ALL", "LASTCALL", "LASTCAST_URL", "FASTCALL_MODE", "CALL_STATS_URL", "LAST_CALL_AT", "lastcall_db",
        "TINI_SUBREAPER", "TINI_KILL_PROCESS_GROUP", "TINI_VERBOSITY", "DUMB_INIT_SETSID", "DUMB_INIT_DEBUG", "LASTCALL_BUILD_TARGET",
    ];
    let env: Vec<(&str, &str)> = theirs.iter().map(|n| (*n, "1")).collect();
    assert_eq!(warnings(&env), Vec::<String>::new());
    for peer in ["tini", "dumb-init"] {
        match run_as(peer, &["app"], &[("TINI_SUBREAPER", ""), ("DUMB_INIT_SETSID", "0")]) {
            Ok(Parsed::Run(c)) => assert!(c.warnings.is_empty(), "{peer}: {:?}", c.warnings),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn thousands_of_unknown_names_give_a_few_lines() {
    let names: Vec<String> = (0..5000).map(|i| format!("LASTCALL_X{i}")).collect();
    let env: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "")).collect();
    let warnings = match run_named(&["app"], &env) {
        Ok(Parsed::Run(c)) => c.warnings,
        other => panic!("{other:?}"),
    };
    assert_eq!(warnings.len(), MAX_NAME_WARNINGS + 1, "{warnings:?}");
    assert_eq!(warnings.last().unwrap(), &format!("{} more variables named like lastcall's were not checked", 5000 - MAX_NAME_WARNINGS));
    // So do names that are only near lastcall's: at most a few are compared with every known one.
    let names: Vec<String> = (0..5000).map(|i| format!("LASTCAL_{i}")).collect();
    let env: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "")).collect();
    let warnings = match run_named(&["app"], &env) {
        Ok(Parsed::Run(c)) => c.warnings,
        other => panic!("{other:?}"),
    };
    assert_eq!(warnings, [format!("{} more variables named like lastcall's were not checked", 5000 - MAX_NAME_CHECKS)]);
}

#[test]
fn an_unknown_flag_gets_a_suggestion() {
    for (flag, meant) in [("--prestop", "--pre-stop"), ("--grace-period=1s", "--grace"), ("--helth-listen", "--health-listen"), ("--singel-child", "--single-child")] {
        let msg = usage_error(&[flag, "app"], &[]);
        let name = flag.split('=').next().unwrap();
        assert_eq!(msg, format!("unknown option '{name}'; did you mean {meant}?"));
    }
    for flag in ["--frobnicate", "--x", "--pr"] {
        assert_eq!(usage_error(&[flag, "app"], &[]), format!("unknown option '{flag}'"));
    }
    // Only the spellings the name has: tini has no --pre-stop to suggest.
    assert!(matches!(run_as("tini", &["--prestop", "app"], &[]), Err(Error::Usage(m)) if m == "unknown option '--prestop'"));
}

#[test]
fn distances_count_edits_swaps_and_leading_words() {
    assert_eq!(distances(b"LASTCALL_GRACE", b"LASTCALL_GRACE"), (0, 0, 0));
    assert_eq!(distances(b"LASTCALL_GRACE", b"lastcall_grace").0, 0, "letter case aside");
    assert_eq!(distances(b"LASTCALL_GRACE", b"LASTCALL_GRCAE").0, 1, "a swap is one edit");
    assert_eq!(distances(b"LASTCALL_GRACE", b"LASTCALL_GRACE_PERIOD"), (7, 0, 0));
    assert_eq!(distances(b"LASTCALL_GRACE", b"LASTCALL_GRACEFUL").2, 3, "a leading word ends at _ or -");
    assert_eq!(distances(b"LASTCALL_", b"LASTCAL_PRE").1, 1);
    let long = [b'A'; 200];
    assert_eq!(distances(b"LASTCALL_", &long).0, usize::MAX, "past 64 bytes, far from anything");
    assert!(named_like_lastcall(b"LASTCAL_X=1") && named_like_lastcall(b"lastcall_x") && named_like_lastcall(b"LAST_CALL_X"));
    assert!(!named_like_lastcall(b"PATH=/bin") && !named_like_lastcall(b"LC_ALL=C") && !named_like_lastcall(b"L=LASTCALL_"));
}

#[test]
fn license_is_both_texts() {
    let text = match run(&["--license"], &[]) {
        Ok(Parsed::Print(t)) => t,
        other => panic!("{other:?}"),
    };
    assert!(text.contains("MIT License") && text.contains("Apache License") && text.contains("Version 2.0, January 2004"));
    assert!(text.len() > 12_000, "{}", text.len());
    // What the binary keeps is packed: unpacked, it is the texts to the byte.
    assert!(text == options::LICENSE, "the packed license differs from the texts");
}

#[test]
fn stepping_aside_keeps_only_forwarding_and_reaping() {
    let c = config(&["--pre-stop", "2s", "--grace", "3s", "--stop-signal", "QUIT", "-r", "INT:TERM", "--health-listen", ":8081", "--ready-file", "/r", "-e", "143", "app"], &[]);
    let c = c.step_aside(false);
    assert!(c.nested);
    // The grace left is the backstop: pre-stop + grace + margin.
    assert_eq!((c.pre_stop, c.grace, c.stop_signal), (Duration::ZERO, Some(Duration::from_secs(7)), None));
    let handed: Vec<_> = c.flags.iter().map(|(n, v)| format!("{n}={v}")).collect();
    assert_eq!(handed, ["LASTCALL_PRE_STOP=2s", "LASTCALL_GRACE=3s", "LASTCALL_STOP_SIGNAL=QUIT", "LASTCALL_REWRITE=INT:TERM", "LASTCALL_HEALTH_LISTEN=:8081", "LASTCALL_READY_FILE=/r"]);
    assert!(c.rewrite.is_empty() && c.health_listen.is_none() && c.ready_file.is_none() && c.warnings.is_empty());
    assert_eq!((c.remap_exit, c.command), (vec![143], vec![OsString::from("app")]));
}

#[test]
fn user_options() {
    use crate::user::{Spec, Who};
    let c = config(&["--user", "app:web", "--no-new-privs", "app"], &[]);
    assert_eq!(c.user, Some(Spec { user: Who::Name("app".into()), group: Some(Who::Name("web".into())), from: "--user" }));
    assert!(c.no_new_privs);
    let c = config(&["app"], &[("LASTCALL_USER", "1000:1000"), ("LASTCALL_NO_NEW_PRIVS", "1")]);
    assert_eq!(c.user, Some(Spec { user: Who::Id(1000), group: Some(Who::Id(1000)), from: "LASTCALL_USER" }));
    assert!(c.no_new_privs);
    assert_eq!((config(&["app"], &[]).user, config(&["app"], &[]).no_new_privs), (None, false));
    for bad in ["", "app:", ":web", "a:b:c", "4294967295", "99999999999", "a b"] {
        let msg = usage_error(&["--user", bad, "app"], &[]);
        assert!(msg.contains("--user"), "{bad:?}: {msg}");
    }
    let msg = usage_error(&["app"], &[("LASTCALL_USER", "x:")]);
    assert!(msg.contains("LASTCALL_USER"), "{msg}");
    let msg = usage_error(&["app"], &[("LASTCALL_NO_NEW_PRIVS", "maybe")]);
    assert!(msg.contains("LASTCALL_NO_NEW_PRIVS"), "{msg}");
    // Under a peer's name: only the variable.
    for peer in ["tini", "dumb-init"] {
        let c = config_as(peer, &["app"], &[("LASTCALL_USER", "app"), ("LASTCALL_NO_NEW_PRIVS", "yes")]);
        assert_eq!(c.user.map(|s| s.user), Some(Who::Name("app".into())));
        assert!(c.no_new_privs);
        assert!(matches!(run_as(peer, &["--user", "app", "app"], &[]), Err(Error::Usage(_))), "{peer}");
    }
}

#[test]
fn pause_mode_runs_no_command() {
    assert!(config(&["-P"], &[]).pause);
    let msg = usage_error(&["-P", "app"], &[]);
    assert!(msg.contains("no command"), "{msg}");
}

#[test]
fn the_option_variables_first_letter_filter_lets_every_prefix_through() {
    for prefix in OPTION_PREFIXES {
        assert!(is_option_variable(prefix), "{}", String::from_utf8_lossy(prefix));
    }
    assert!(!is_option_variable(b"PATH"));
    assert!(!is_option_variable(b"lastcall_grace"));
}

/// Each name's choices are made here, into `Config`: the supervisor never asks for the name.
#[test]
fn each_name_resolves_into_behaviour() {
    use crate::machine::OnMainExit;
    use crate::personality::{ChildSignals, LASTCALL, TINI};
    let own = config(&["app"], &[]);
    assert_eq!((own.on_main_exit, own.suspend, own.deadlines_in_env, own.cont_after_stop), (OnMainExit::StopTheRest, None, true, true));
    assert_eq!((own.exits, own.child_signals, own.warn_without_subreaper), (LASTCALL.exits(), ChildSignals::Inherited, false));
    assert_eq!(config(&["--setsid", "app"], &[]).suspend, Some(Suspend::WithStop));
    let tini = config_as("tini", &["app"], &[]);
    assert_eq!((tini.on_main_exit, tini.suspend, tini.deadlines_in_env, tini.warn_without_subreaper), (OnMainExit::Exit, None, false, true));
    assert!(!tini.leaves_cwd && tini.scripts_through_sh && !tini.names_oom_kills && !tini.cont_after_stop);
    assert_eq!(tini.exits, TINI.exits());
    // A deadline set under a peer's name reaches the app's environment.
    assert!(config_as("tini", &["app"], &[("LASTCALL_PRE_STOP", "1s")]).deadlines_in_env);
    let dumb = config_as("dumb-init", &["app"], &[]);
    assert_eq!((dumb.on_main_exit, dumb.suspend, dumb.child_signals), (OnMainExit::ForwardTermAndExit, Some(Suspend::WithStop), ChildSignals::EmptyMaskStandardDefault));
    let single = config_as("dumb-init", &["-c", "app"], &[]);
    assert_eq!((single.suspend, single.own_group_for_single_child), (Some(Suspend::AsReceived), false));
}

#[test]
fn the_environment_the_set_up_acts_on_is_read_here() {
    let c = config(
        &["--", "app"],
        &[("NOTIFY_SOCKET", "@sd"), ("RUNTIME_DIRECTORY", "/run/a:/run/b"), ("PATH", "/x"), ("LISTEN_PID", "7"), ("LOGNAME", "me")],
    );
    assert_eq!(c.inherited.notify_socket.as_deref(), Some("@sd"));
    assert_eq!(c.inherited.runtime_directory, Some(PathBuf::from("/run/a")));
    assert_eq!(c.inherited.path, Some("/x".into()));
    assert_eq!(c.inherited.pid_variables, vec![("LISTEN_PID", "7".into())]);
    assert_eq!(c.inherited.user_names_set, vec!["LOGNAME"]);
    let c = config(&["--", "app"], &[("NOTIFY_SOCKET", ""), ("RUNTIME_DIRECTORY", ":/run/b")]);
    assert_eq!((c.inherited.notify_socket, c.inherited.runtime_directory), (None, None));
}
