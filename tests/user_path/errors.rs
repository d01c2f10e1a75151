//! Typos and bad values: caught, with a suggestion, in one line.

use std::time::Instant;

use super::*;

#[test]
fn each_typo_of_a_name_is_one_warning_with_what_was_meant() {
    for (name, line) in [
        ("LASTCAL_PRE_STOP", "LASTCAL_PRE_STOP: not a lastcall variable; did you mean LASTCALL_PRE_STOP?"),
        ("lastcall_pre_stop", "lastcall_pre_stop: not a lastcall variable (names are upper case); did you mean LASTCALL_PRE_STOP?"),
        (
            "LASTCALL_PRE_STOP_MS",
            "LASTCALL_PRE_STOP_MS: output only: lastcall sets it for the app and does not read it; set LASTCALL_PRE_STOP instead",
        ),
        ("LASTCALL_GRACE_PERIOD", "LASTCALL_GRACE_PERIOD: not a lastcall variable; did you mean LASTCALL_GRACE?"),
    ] {
        let (code, _, stderr) = run_to_end(Mode::Plain, &["true"], &[(name, "2s")]);
        assert_eq!(code, 0, "{name}: {stderr}");
        assert_eq!(stderr, format!("lastcall: warning: {line}\n"), "{name}");
    }
    // The app's own variables are not lastcall's typos.
    let (code, _, stderr) = run_to_end(Mode::Plain, &["true"], &[("LASTCAST_URL", "x"), ("LAST_CALL_AT", "1"), ("lastcall_db", "x")]);
    assert_eq!((code, stderr.as_str()), (0, ""));
}

#[test]
fn an_unknown_flag_is_one_line_with_what_was_meant() {
    let (code, stdout, stderr) = run_to_end(Mode::Plain, &["--prestop", "2s", "true"], &[]);
    assert_eq!(code, 2);
    assert!(stdout.is_empty());
    assert_eq!(stderr, "lastcall: unknown option '--prestop'; did you mean --pre-stop?\n");
}

#[test]
fn a_bad_value_or_an_unknown_flag_is_exactly_one_line() {
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 6] = [
        (&["--grace", "abc", "true"], &[], "'abc' for --grace"),
        (&["true"], &[("LASTCALL_GRACE", "ten")], "'ten' for LASTCALL_GRACE"),
        (&["--frobnicate", "true"], &[], "'--frobnicate'"),
        (&["-Z", "true"], &[], "'-Z'"),
        (&["--health-listen", "localhost:80", "true"], &[], "--health-listen"),
        (&[], &[], "no command"),
    ];
    for (args, env, needle) in cases {
        let (code, stdout, stderr) = run_to_end(Mode::Plain, args, env);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stdout.is_empty());
        assert_eq!(stderr.lines().count(), 1, "{args:?} {env:?}: {stderr}");
        assert!(stderr.starts_with("lastcall: ") && stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// Tens of thousands of unknown `LASTCALL_*` names (what a hostile or broken environment can
/// hold) delay the app by no more than the environment's own size does, and give a few lines.
#[test]
fn thousands_of_unknown_names_neither_delay_the_app_nor_flood_the_log() {
    const N: usize = 50_000;
    let timed = |prefix: &str| {
        let names: Vec<String> = (0..N).map(|i| format!("{prefix}{i:x}")).collect();
        let env: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "")).collect();
        let start = Instant::now();
        let (code, _, stderr) = run_to_end(Mode::Plain, &["true"], &env);
        (start.elapsed(), code, stderr)
    };
    // The same number of names of the same length that are nobody's: what the environment costs.
    let (baseline, code, stderr) = timed("APP_VAR__");
    assert_eq!((code, stderr.as_str()), (0, ""));
    let (flood, code, stderr) = timed("LASTCALL_");
    assert_eq!(code, 0, "{stderr}");
    assert!(flood < baseline * 10 + std::time::Duration::from_secs(1), "{flood:?} against {baseline:?} without them");
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(lines.len() <= 10, "{} lines", lines.len());
    assert!(lines.last().unwrap().ends_with("more variables named like lastcall's were not checked"), "{stderr}");
}
