//! Watching a shutdown from outside: the json log (every line through a real JSON parser),
//! /metrics (through Prometheus' own promtool), and OOM kills named, in a real memory cgroup
//! this test makes and removes.

mod common;

use std::ffi::OsString;
use std::fs;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use lastcall::logging::Event;
use lastcall::machine::Phase;
use lastcall::signals::Sig;

const SEC: Duration = Duration::from_secs(1);

/// Every line of `log` through python3's json module: one object each, with ts (RFC 3339 UTC,
/// milliseconds), level, an event from the crate's `Event`, a message, and the fields typed.
/// Returns the events in order. Panics with the checker's words if a line fails.
fn parse_json_log(log: &[u8]) -> Vec<Event> {
    const CHECK: &str = r#"
import json, re, sys
EVENTS = set(sys.argv[1:])
TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
raw = sys.stdin.buffer.read()
assert raw.endswith(b"\n"), "the log ends mid-line"
for n, line in enumerate(raw.split(b"\n")[:-1], 1):
    obj = json.loads(line.decode("utf-8"))
    assert isinstance(obj, dict), (n, line)
    assert TS.match(obj["ts"]), (n, obj)
    assert obj["level"] in ("error", "warn", "info", "debug", "trace"), (n, obj)
    assert obj["event"] in EVENTS, (n, obj)
    assert isinstance(obj["message"], str), (n, obj)
    for key in ("pid", "pgid", "code", "elapsed_ms", "kill_at_ms"):
        assert key not in obj or isinstance(obj[key], int), (n, key, obj)
    for key in ("signal", "status"):
        assert key not in obj or isinstance(obj[key], str), (n, key, obj)
    print(obj["event"])
"#;
    let mut child = Command::new("python3")
        .args(["-c", CHECK])
        .args(Event::ALL.map(Event::name))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    use std::io::Write;
    child.stdin.take().unwrap().write_all(log).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "a json line does not parse: {}\n--- log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(log)
    );
    let named = |line: &str| Event::ALL.into_iter().find(|e| e.name() == line).expect("the checker printed an event");
    String::from_utf8(out.stdout).unwrap().lines().map(named).collect()
}

/// A shutdown at -vv with hostile argv (quotes, backslashes, a newline, a control character,
/// bytes that are not UTF-8), a forwarded signal, a reaped orphan: every line is one JSON object.
#[test]
fn json_log_every_line_parses() {
    let dir = scratch("json-log");
    let weird = OsString::from_vec(b"we\"ird\\ \n\x01 \xff\xfe end".to_vec());
    let script = "exec 2>app.stderr; trap 'exit 7' TERM; trap '' HUP; (sleep 0.1 &); echo ready > ready; while :; do sleep 0.05; done";
    let mut cmd = Command::new(LASTCALL);
    cmd.args(["-vv", "--log-format", "json", "--warn-reaping", "--grace", "5s", "--", "sh", "-c", script])
        .arg(&weird)
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(dir.join("stderr")).unwrap());
    let mut run = ChildGuard(cmd.spawn().unwrap());
    let pid = run.0.id() as i32;
    wait_until(10 * SEC, "the app to start", || dir.join("ready").exists().then_some(()));
    kill(pid, libc::SIGHUP);
    wait_until(10 * SEC, "the orphan to be reaped", || {
        fs::read_to_string(dir.join("stderr")).unwrap_or_default().contains(&format!("\"event\":\"{}\"", Event::Reaped.name())).then_some(())
    });
    kill(pid, libc::SIGTERM);
    let status = wait_until(10 * SEC, "lastcall to exit", || run.0.try_wait().unwrap());
    assert_eq!(status.code(), Some(7));
    let log = fs::read(dir.join("stderr")).unwrap();
    let events = parse_json_log(&log);
    let wanted = [Event::Started, Event::Forwarded, Event::Reaped, Event::Signal, Event::Unready, Event::Grace, Event::ChildExit, Event::Exit];
    for wanted in wanted {
        assert!(events.contains(&wanted), "no {wanted:?} event in {events:?}");
    }
    assert_eq!(events.last(), Some(&Event::Exit), "{events:?}");
    let text = String::from_utf8(log).unwrap();
    assert!(text.contains(r#"\"ird\\\\ \\n\\u{1} \\xFF\\xFE end"#), "argv escaped twice over (Debug, then JSON):\n{text}");
}

/// An exec failure with a name that is not UTF-8: the error line parses too.
#[test]
fn json_error_line_parses() {
    let path = OsString::from_vec(b"/no/such/\xff\"dir\"/prog".to_vec());
    let out = Command::new(LASTCALL).args(["--log-format", "json", "--"]).arg(&path).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(127));
    assert_eq!(parse_json_log(&out.stderr), vec![Event::Error], "{}", String::from_utf8_lossy(&out.stderr));
    // The variable does it too, and text stays the default.
    let out = Command::new(LASTCALL).env("LASTCALL_LOG_FORMAT", "json").arg("/no/such/prog").output().unwrap();
    assert_eq!(parse_json_log(&out.stderr), vec![Event::Error]);
    let out = Command::new(LASTCALL).arg("/no/such/prog").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("lastcall: "), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A usage error when json was asked for: one JSON line too.
#[test]
fn json_usage_error_parses() {
    let out = Command::new(LASTCALL).args(["--log-format", "json", "--grace", "ten", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(parse_json_log(&out.stderr), vec![Event::Error], "{}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new(LASTCALL).env("LASTCALL_LOG_FORMAT", "json").args(["--no-such-flag", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(parse_json_log(&out.stderr), vec![Event::Error], "{}", String::from_utf8_lossy(&out.stderr));
}

/// A bad format is a usage error naming the variable.
#[test]
fn bad_log_format_exits_2() {
    let out = Command::new(LASTCALL).env("LASTCALL_LOG_FORMAT", "xml").arg("true").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("LASTCALL_LOG_FORMAT"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// promtool, from Debian's prometheus package, unpacked under target/ by
/// scripts/setup-test-machine (installing the package would start a Prometheus server).
fn promtool() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/promtool/usr/bin/promtool");
    assert!(path.exists(), "{} is missing: run scripts/setup-test-machine", path.display());
    path
}

/// `promtool check metrics` on `text`: its verdict, lint warnings included, must be clean.
fn promtool_check(text: &str) {
    let mut child = Command::new(promtool())
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool: {}\n{}{}\n--- metrics:\n{text}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn metrics(port: u16) -> String {
    let (status, body) = http_get(port, "/metrics", 5 * SEC).expect("an answer from /metrics");
    assert_eq!(status, 200, "{body}");
    body
}

fn value(metrics: &str, series: &str) -> Option<String> {
    metrics.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ').map(str::to_string))
}

/// `lastcall_phase`'s series for `p`.
fn phase(p: Phase) -> String {
    format!("lastcall_phase{{phase=\"{}\"}}", p.name())
}

/// /metrics before and during a shutdown: Prometheus' validator accepts it each time, and the
/// counts are the ones that happened.
#[test]
fn metrics_pass_promtool_and_count() {
    let dir = scratch("metrics");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut run = Spec::new(Mode::Plain, &dir, &["--health-listen", &listen, "--pre-stop", "30s", "--", "sh", "-c"])
        .start_with(&["trap '' HUP; (sleep 0.05 &); echo > ready; while :; do sleep 0.05; done"]);
    wait_until(10 * SEC, "the app's trap", || dir.join("ready").exists().then_some(()));
    let before = wait_until(10 * SEC, "/metrics", || http_get(port, "/metrics", SEC).filter(|(s, _)| *s == 200).map(|(_, b)| b));
    promtool_check(&before);
    assert_eq!(value(&before, &phase(Phase::Running)).as_deref(), Some("1"), "{before}");
    assert!(value(&before, "lastcall_shutdown_seconds").is_none(), "absent before the first termination signal:\n{before}");
    assert!(before.contains("lastcall_info{version=\"") && before.contains("personality=\"lastcall\"} 1"), "{before}");
    // One at a time: a second HUP sent while the first is pending would merge with it.
    for n in ["1", "2"] {
        run.signal(libc::SIGHUP);
        wait_until(10 * SEC, &format!("HUP number {n} forwarded"), || {
            let m = metrics(port);
            (value(&m, "lastcall_signals_forwarded_total{signal=\"SIGHUP\"}").as_deref() == Some(n)).then_some(())
        });
    }
    wait_until(10 * SEC, "the orphan reaped", || {
        (value(&metrics(port), "lastcall_orphans_reaped_total").is_some_and(|v| v != "0")).then_some(())
    });
    run.signal(libc::SIGTERM);
    let during = wait_until(10 * SEC, "the pre-stop phase", || {
        let m = metrics(port);
        (value(&m, &phase(Phase::PreStop { until: Instant::now(), pending: Sig::TERM })).as_deref() == Some("1")).then_some(m)
    });
    promtool_check(&during);
    assert_eq!(value(&during, "lastcall_signals_received_total{signal=\"SIGHUP\"}").as_deref(), Some("2"), "{during}");
    assert_eq!(value(&during, "lastcall_signals_received_total{signal=\"SIGTERM\"}").as_deref(), Some("1"), "{during}");
    assert_eq!(value(&during, &phase(Phase::Running)).as_deref(), Some("0"), "{during}");
    let age: f64 = value(&during, "lastcall_shutdown_seconds").expect("shutdown_seconds after TERM").parse().unwrap();
    assert!((0.0..30.0).contains(&age), "{during}");
    assert!(value(&during, "lastcall_app_exit_code").is_none(), "{during}");
    for series in ["lastcall_oom_kills_total", "lastcall_health_connections_evicted_total", "lastcall_log_lines_dropped_total"] {
        assert_eq!(value(&during, series).as_deref(), Some("0"), "{series}:\n{during}");
    }
    assert_eq!(value(&during, "lastcall_notify_messages_total{result=\"relayed\"}").as_deref(), Some("0"), "{during}");
    // A second TERM cuts the pre-stop short; the app's shell dies of TERM.
    run.signal(libc::SIGTERM);
    assert_eq!(run.wait(10 * SEC), 128 + libc::SIGTERM);
}

/// Once the app has exited (here while an orphan that ignores TERM holds the shutdown open),
/// /metrics shows how: the code, and the signal when one killed it.
#[test]
fn metrics_show_the_apps_exit() {
    for (end, code, signal) in [("exit 3", "3", None), ("kill -USR2 $$", "140", Some("12"))] {
        let dir = scratch("metrics-exit");
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        // The app ends only once the orphan-to-be ignores TERM (lastcall sends it the moment the
        // app is gone).
        let script = format!("(trap '' TERM; echo > ready; exec sleep 30) & while [ ! -e ready ]; do sleep 0.01; done; {end}");
        let _run = Spec::new(Mode::Plain, &dir, &["--health-listen", &listen, "--grace", "20s", "--", "sh", "-c"]).start_with(&[&script]);
        let m = wait_until(10 * SEC, "the app's exit in /metrics", || {
            let m = http_get(port, "/metrics", SEC)?.1;
            value(&m, "lastcall_app_exit_code").is_some().then_some(m)
        });
        promtool_check(&m);
        assert_eq!(value(&m, "lastcall_app_exit_code").as_deref(), Some(code), "{m}");
        assert_eq!(value(&m, "lastcall_app_exit_signal").as_deref(), signal, "{m}");
        assert_eq!(value(&m, &phase(Phase::Draining { until: None })).as_deref(), Some("1"), "the orphan holds the shutdown open:\n{m}");
    }
}

trait StartWith {
    fn start_with(self, rest: &[&str]) -> Run;
}

impl StartWith for Spec<'_> {
    fn start_with(mut self, rest: &[&str]) -> Run {
        self.args.extend(rest.iter().map(|s| s.to_string()));
        self.start()
    }
}

/// lastcall with `args`, started inside `cgroup` (a shell moves itself in and execs it), its
/// stderr in `stderr`.
fn start_in(cgroup: &Cgroup, stderr: &Path, args: &[&str]) -> ChildGuard {
    let child = cgroup
        .command(LASTCALL)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(stderr).unwrap())
        .spawn()
        .unwrap();
    ChildGuard(child)
}

/// Allocates and touches far more than 64 MiB.
const HOG: &str = "x = b'a' * (512 << 20)";

fn exit_code_of(guard: &mut ChildGuard) -> i32 {
    exit_code(wait_child(&mut guard.0, 60 * SEC))
}

/// The app OOM-killed in a 64 MiB memory cgroup: named in text, named in json (the line parses),
/// and the exit code stays the app's own 137.
#[test]
fn oom_killed_app_is_named_in_both_formats() {
    let dir = scratch("oom-app");
    let cgroup = Cgroup::memory(64 << 20);
    let text = dir.join("text.stderr");
    let mut run = start_in(&cgroup, &text, &["--", "python3", "-c", HOG]);
    assert_eq!(exit_code_of(&mut run), 128 + libc::SIGKILL);
    let log = fs::read_to_string(&text).unwrap();
    assert!(log.lines().any(|l| l == "lastcall: app killed by the OOM killer (limit 64 MiB)"), "{log}");

    let json = dir.join("json.stderr");
    let mut run = start_in(&cgroup, &json, &["--log-format", "json", "--", "python3", "-c", HOG]);
    assert_eq!(exit_code_of(&mut run), 128 + libc::SIGKILL);
    let log = fs::read(&json).unwrap();
    assert!(parse_json_log(&log).contains(&Event::OomKill), "{}", String::from_utf8_lossy(&log));
    let log = String::from_utf8(log).unwrap();
    let line = log.lines().find(|l| l.contains(&format!("\"{}\"", Event::OomKill.name()))).unwrap();
    assert!(line.contains("\"level\":\"error\"") && line.contains("\"message\":\"app killed by the OOM killer (limit 64 MiB)\""), "{line}");
    assert!(line.contains("\"code\":137") && line.contains("\"signal\":\"SIGKILL\""), "{line}");
}

/// Another process (an orphan lastcall reaps) OOM-killed: a warning, the app lives on and its
/// exit code is what it is; /metrics counts the kill and promtool still accepts it.
#[test]
fn oom_killed_orphan_is_a_warning_and_counted() {
    let dir = scratch("oom-other");
    let cgroup = Cgroup::memory(64 << 20);
    let stderr = dir.join("stderr");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let script = format!("(python3 -c \"{HOG}\" &); while [ ! -e {0}/done ]; do sleep 0.05; done; exit 5", dir.display());
    let mut run = start_in(&cgroup, &stderr, &["--health-listen", &listen, "--", "sh", "-c", &script]);
    wait_until(60 * SEC, "the warning", || {
        fs::read_to_string(&stderr).unwrap_or_default().contains("killed by the OOM killer").then_some(())
    });
    let m = metrics(port);
    promtool_check(&m);
    assert_eq!(value(&m, "lastcall_oom_kills_total").as_deref(), Some("1"), "{m}");
    fs::write(dir.join("done"), "").unwrap();
    assert_eq!(exit_code_of(&mut run), 5, "the app's own exit code");
    let log = fs::read_to_string(&stderr).unwrap();
    let line = log.lines().find(|l| l.contains("OOM")).unwrap();
    assert!(
        line.starts_with("lastcall: warning: process ") && line.ends_with("killed by the OOM killer (limit 64 MiB); the app runs on without it"),
        "{log}"
    );
    assert!(!log.contains("app killed"), "{log}");
}

/// Under a peer's name the text log stays the peer's: nothing about the OOM kill, same exit.
#[test]
fn oom_kill_under_a_peer_name_prints_nothing_extra() {
    let dir = scratch("oom-tini");
    let cgroup = Cgroup::memory(64 << 20);
    let tini = dir.join("tini");
    std::os::unix::fs::symlink(LASTCALL, &tini).unwrap();
    let stderr = dir.join("stderr");
    let child = cgroup
        .command(&tini)
        .args(["--", "python3", "-c", HOG])
        .stdin(Stdio::null())
        .stderr(fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let mut run = ChildGuard(child);
    assert_eq!(exit_code_of(&mut run), 128 + libc::SIGKILL);
    let log = fs::read_to_string(&stderr).unwrap();
    assert!(!log.contains("OOM"), "{log}");
}
