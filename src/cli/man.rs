//! lastcall(1), the man page, made from the option table that `--help` is made from, so that the
//! two cannot drift apart. Not in the binary: `examples/man.rs` prints it for the packages.
//!
//! May import: its parent's `options`, personality.

use super::options::{Opt, ABOUT, OPTIONS, PROBE_OPTIONS};
use crate::personality::{PeerVar, LASTCALL, NOT_EXECUTABLE, NOT_FOUND, SETUP, USAGE};

/// Variables that are not an option's.
const OTHER_VARIABLES: &[(&str, &str)] = &[
    ("LASTCALL_LOG", "the log level: off, error, warn, info (the default), debug or trace; -v and -q win over it"),
    ("LASTCALL_STRICT", "1: a LASTCALL_* variable lastcall does not know is an error (exit 2) rather than a warning"),
    ("NOTIFY_SOCKET", "set by systemd for Type=notify: lastcall relays the app's READY=1 and STOPPING=1, and sends STOPPING=1 itself at the first termination signal"),
];

/// Variables lastcall sets for the app; setting them for lastcall does nothing.
const OUTPUT_VARIABLES: &[(&str, &str)] = &[
    ("LASTCALL_PRE_STOP_MS", "the pre-stop, in milliseconds"),
    ("LASTCALL_GRACE_MS", "the grace, in milliseconds (absent when it is unlimited)"),
    ("LASTCALL_CLOCK_ZERO_NS", "the timeline's zero, CLOCK_MONOTONIC in nanoseconds"),
];

/// The shutdown timeline at the default level, in the order the lines come.
const TIMELINE: &[(&str, &str)] = &[
    ("received SIGTERM", "the first termination signal (TERM, INT or QUIT); the shutdown starts"),
    ("SIGKILL at +16.218s if the app is still running (pre-stop 2.000s + grace 8.000s)", "when lastcall will escalate; keep the platform's stop timeout above it"),
    ("unready: the ready file goes, /ready answers 503", "readiness withdrawn, at the signal or (--unready-on stop) after the pre-stop"),
    ("pre-stop: the app keeps running for 2.000s", "the app is left alone while proxies stop routing to it"),
    ("pre-stop ended", "or \"pre-stop cut short\" when the app exited during it"),
    ("forwarded SIGTERM to process group 23945", "the stop signal, rewritten if asked, sent to the app"),
    ("grace expired: sent SIGKILL to every remaining process", "the escalation, when the app outlived its grace"),
    ("child exited with status 0", "or \"child was killed by SIGKILL\"; with OOM naming, \"(the kernel's OOM killer)\""),
];

/// The man page, in roff. `date` is the release's, as the footer shows it (YYYY-MM-DD).
pub fn page(version: &str, date: &str) -> String {
    let mut man = String::new();
    let mut line = |s: &str| {
        man.push_str(s);
        man.push('\n');
    };
    name_and_synopsis(&mut line, version, date);
    line(".SH OPTIONS");
    for opt in OPTIONS {
        option(&mut line, opt);
    }
    probes(&mut line);
    values(&mut line);
    environment(&mut line);
    timeline_and_exit_status(&mut line);
    man
}

/// The header, NAME, SYNOPSIS and DESCRIPTION.
fn name_and_synopsis(line: &mut impl FnMut(&str), version: &str, date: &str) {
    line(&format!(".TH LASTCALL 1 {date} \"lastcall {}\" \"User Commands\"", text(version)));
    // No hyphenation, left-aligned: option and variable names must not break.
    line(".nh");
    line(".ad l");
    line(".SH NAME");
    line("lastcall \\- a tiny init for containers that shuts down in order");
    line(".SH SYNOPSIS");
    line(".B lastcall");
    line("[\\fIOPTIONS\\fR] [\\fB\\-\\-\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR...]");
    line(".br");
    line(".B lastcall probe");
    line("\\fBready\\fR|\\fBlive\\fR|\\fBhttp://\\fIHOST\\fB:\\fIPORT\\fB/\\fIPATH\\fR|\\fBtcp://\\fIHOST\\fB:\\fIPORT\\fR [\\fIOPTIONS\\fR]");
    line(".SH DESCRIPTION");
    line(&text(&ABOUT.replace('\n', " ").replacen("lastcall: a tiny init for containers. It", "lastcall", 1)));
    line(".PP");
    line("Every option can also be set by the variable shown; a flag wins over its variable. Options end at the first word that is not one, so \\fBlastcall sh \\-c x\\fR runs \\fBsh \\-c x\\fR. Installed under the name \\fBtini\\fR, \\fBtini-static\\fR or \\fBdumb-init\\fR, lastcall reads that program's flags and behaves as it does.");
}

fn probes(line: &mut impl FnMut(&str)) {
    line(".SH PROBES");
    line("For images with no shell or curl, as a HEALTHCHECK or a Kubernetes exec probe:");
    line(".TP");
    line("\\fBlastcall probe ready\\fR|\\fBlive\\fR [\\fB\\-\\-health\\-listen\\fR \\fIADDR:PORT\\fR | \\fB\\-\\-ready\\-file\\fR \\fIPATH\\fR]");
    line("exits 0 if the app is ready (or live), 1 if not, saying why on stderr; the variables work too.");
    line(".TP");
    line("\\fBlastcall probe http://\\fIHOST\\fB:\\fIPORT\\fB/\\fIPATH\\fR | \\fBtcp://\\fIHOST\\fB:\\fIPORT\\fR");
    line("exits 0 on a 2xx or 3xx answer (http; interim 1xx answers are skipped) or a connection (tcp), 1 if not, saying why on stderr.");
    line(".PP");
    line("Options of the probe:");
    for opt in PROBE_OPTIONS {
        option(line, opt);
    }
}

fn values(line: &mut impl FnMut(&str)) {
    line(".SH VALUES");
    line(".TP");
    line(".I DURATION");
    line("500ms, 5s, 1m30s, 1h; a plain number means seconds.");
    line(".TP");
    line(".I SIGNAL");
    line("TERM, SIGTERM, 15, RTMIN+2, in any letter case.");
    line(".TP");
    line("booleans");
    line("1, true, yes, on or 0, false, no, off.");
}

fn environment(line: &mut impl FnMut(&str)) {
    line(".SH ENVIRONMENT");
    for opt in OPTIONS {
        if let Some(env) = opt.env {
            line(".TP");
            line(&format!(".B {env}"));
            line(&format!("as \\fB\\-\\-{}\\fR", escape(opt.long)));
        }
    }
    for (name, what) in OTHER_VARIABLES {
        line(".TP");
        line(&format!(".B {name}"));
        line(&text(what));
    }
    for (name, var) in LASTCALL.peer_vars {
        line(".TP");
        line(&format!(".B {name}"));
        line(match var {
            PeerVar::Verbosity { .. } => "tini's verbosity, read as lastcall's log level.",
            _ => "read as tini and dumb-init read it; 0 means off.",
        });
    }
    line(".PP");
    line("A LASTCALL_* variable that lastcall does not know is warned about, with the nearest known name. The app is given, in its environment:");
    for (name, what) in OUTPUT_VARIABLES {
        line(".TP");
        line(&format!(".B {name}"));
        line(&text(what));
    }
}

/// TIMELINE, EXIT STATUS and SEE ALSO.
fn timeline_and_exit_status(line: &mut impl FnMut(&str)) {
    line(".SH TIMELINE");
    line("At the default level lastcall writes one line to stderr for each step of the shutdown, each prefixed \\fBlastcall:\\fR and the time since lastcall started (\\fB\\-\\-log\\-format json\\fR writes one JSON object a line instead):");
    for (example, what) in TIMELINE {
        line(".TP");
        line(&format!("\\fBlastcall: +6.218s {}\\fR", text(example)));
        line(&text(what));
    }
    line(".SH EXIT STATUS");
    line("The command's. If it died from signal N, lastcall dies from N too; as PID 1, which cannot, it exits 128+N (137 after the escalation).");
    let codes = [
        (NOT_EXECUTABLE, "the command cannot be executed"),
        (NOT_FOUND, "the command is not found"),
        (SETUP, "lastcall itself failed"),
        (USAGE, "a bad option or variable, named in one line"),
    ];
    for (code, what) in codes {
        line(".TP");
        line(&format!(".B {code}"));
        line(what);
    }
    line(".SH SEE ALSO");
    line(".BR tini (1),");
    line(".BR dumb-init (1),");
    line(".BR docker-run (1),");
    line(".BR systemd.kill (5)");
}

fn option(line: &mut impl FnMut(&str), opt: &Opt) {
    let mut spellings: Vec<String> = opt.shorts.iter().map(|c| format!("\\fB\\-{c}\\fR")).collect();
    spellings.push(format!("\\fB\\-\\-{}\\fR", escape(opt.long)));
    let mut head = spellings.join(", ");
    if let Some(value) = opt.value {
        head.push_str(&format!(" \\fI{}\\fR", escape(value)));
    }
    line(".TP");
    line(&head);
    let mut help = text(opt.help);
    if let Some(env) = opt.env {
        help.push_str(&format!(" (variable: \\fB{env}\\fR)"));
    }
    line(&help);
}

/// Roff's special characters in a word: backslash, and hyphens as minus signs so that they can
/// be searched for and copied.
fn escape(s: &str) -> String {
    s.replace('\\', "\\e").replace('-', "\\-")
}

/// Running text: a backslash escaped, and a line that would start with a control character
/// (`.` or `'`) guarded.
fn text(s: &str) -> String {
    let s = s.replace('\\', "\\e");
    if s.starts_with('.') || s.starts_with('\'') {
        format!("\\&{s}")
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_option_and_variable_is_in_the_page() {
        let man = page("1.2.3", "2026-01-01");
        for opt in OPTIONS.iter().chain(PROBE_OPTIONS) {
            assert!(man.contains(&format!("\\fB\\-\\-{}\\fR", escape(opt.long))), "--{} missing", opt.long);
            if let Some(env) = opt.env {
                assert!(man.contains(&format!(".B {env}\n")), "{env} missing");
            }
        }
        assert!(man.starts_with(".TH LASTCALL 1 2026-01-01 \"lastcall 1.2.3\""));
        assert!(man.lines().all(|l| !l.starts_with('\'')), "a line starts with a control character");
    }
}
