//! Typos and bad values: caught, with a suggestion, in one line.

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
