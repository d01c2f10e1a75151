//! /metrics, the probe, the text log and the misspelt-variable check against hostile input.

#[allow(unused_imports)]
use super::*;

use std::net::TcpListener;
use std::os::unix::process::ExitStatusExt;

/// `GET /metrics` with no HTTP version is /metrics, as `GET /ready` is /ready: the request line's
/// `\r` is not part of the path, whichever the path.
#[test]
fn metrics_without_an_http_version_is_metrics() {
    let dir = scratch("metrics-09");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut run = start(Mode::Plain, &dir, &["--health-listen", &listen], ["sleep", "30"]);
    let _guard = KillTree(run.pid);
    wait_until(10 * SEC, "the health endpoint", || http_status(port, "/live"));
    for request in ["GET /metrics\r\n\r\n", "GET /metrics\n\n"] {
        let response = http(port, request, 5 * SEC).expect("an answer");
        assert_eq!(status_of(&response), Some(200), "{request:?}: {response}");
        assert!(response.contains("lastcall_info{"), "{request:?}: {response}");
    }
    let response = http(port, "HEAD /metrics\r\n\r\n", 5 * SEC).expect("an answer");
    assert_eq!(status_of(&response), Some(200), "{response}");
    assert!(!response.contains("lastcall_info{"), "HEAD has no body: {response}");
    run.signal(libc::SIGTERM);
    assert_eq!(run.wait(10 * SEC), 143);
}

/// A server on a port of its own that answers each connection's request with `answer`, written
/// over and over with `endless`, until the client goes.
fn answering_server(answer: &'static [u8], endless: bool) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            while conn.write_all(answer).is_ok() && endless {}
        }
    });
    port
}

/// Interim answers (103 Early Hints, 100 Continue) come before the real one, which is what
/// the probe judges, as the kubelet's httpGet and curl do; a server that sends nothing but
/// interim answers fails the probe at once, not at the deadline.
#[test]
fn the_probe_skips_interim_answers() {
    let probe = |port: u16| {
        let url = format!("http://127.0.0.1:{port}/healthz");
        let started = Instant::now();
        let (code, _, stderr) = run_to_end(Mode::Plain, &["probe", &url, "--timeout", "30s"], &[]);
        (code, stderr, started.elapsed())
    };
    let hints = answering_server(
        b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        false,
    );
    let (code, stderr, _) = probe(hints);
    assert_eq!(code, 0, "{stderr}");
    let unhealthy = answering_server(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Service Unavailable\r\n\r\n", false);
    let (code, stderr, _) = probe(unhealthy);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("answered HTTP/1.1 503 Service Unavailable"), "{stderr}");
    let endless = answering_server(b"HTTP/1.1 103 Early Hints\r\n\r\n", true);
    let (code, stderr, took) = probe(endless);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("interim answers"), "{stderr}");
    assert!(took < 10 * SEC, "endless interim answers held the probe for {took:?}");
}

/// A probe is a client like curl: SIGTERM and SIGINT end it at once, however long its
/// `--timeout`, here while it waits for a server that accepted and never answers.
#[test]
fn a_probe_dies_of_term_and_int() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://127.0.0.1:{}/", listener.local_addr().unwrap().port());
    let mut held = Vec::new();
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let child = Command::new(LASTCALL)
            .args(["probe", &url, "--timeout", "30s"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut probe = ChildGuard(child);
        // Connected: the probe is past its start-up, waiting for the answer.
        held.push(wait_until(10 * SEC, "the probe to connect", || listener.accept().ok()));
        kill(probe.0.id() as i32, sig);
        let started = Instant::now();
        let status = wait_until(5 * SEC, "the probe to die of the signal", || probe.0.try_wait().unwrap());
        assert_eq!(status.signal(), Some(sig), "{status:?} after {:?}", started.elapsed());
    }
}

/// The text log is one line per entry whatever a value carries: a NOTIFY_SOCKET with a newline
/// cannot write a fake timeline line, and at -vv an app's notify message cannot put a raw CR,
/// ESC or VT on the terminal. The json log of the same message stays valid JSON.
#[test]
fn every_log_line_escapes_what_it_prints() {
    let fake = "relative\nlastcall: +0.000s child exited with status 0";
    let (code, _, stderr) = run_to_end(Mode::Plain, &["--", "true"], &[("NOTIFY_SOCKET", fake)]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("NOTIFY_SOCKET=relative\\nlastcall: +0.000s"), "{stderr}");
    assert!(!stderr.lines().any(|l| l.starts_with("lastcall: +0.000s child exited")), "a fake line:\n{stderr}");

    let dir = scratch("notify-escapes");
    let (systemd, socket_path) = fake_systemd(&dir);
    let send = "import os, socket\n\
                s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
                s.sendto(b'STATUS=a\\x1b[2Jb\\rc\\x0bd\\x7fe\\xc2\\x85f', os.environ['NOTIFY_SOCKET'])\n";
    for json in [false, true] {
        let mut args = vec!["-vv"];
        if json {
            args.extend(["--log-format", "json"]);
        }
        args.extend(["--", "python3", "-c", send]);
        let socket = socket_path.display().to_string();
        let (code, _, stderr) = run_to_end(Mode::Plain, &args, &[("NOTIFY_SOCKET", &socket)]);
        assert_eq!(code, 0, "{stderr}");
        let mut buf = [0u8; 256];
        let n = systemd.recv(&mut buf).expect("the message, relayed");
        assert!(buf[..n].starts_with(b"STATUS=a\x1b[2J"), "relayed as it is: {:?}", &buf[..n]);
        let notify = stderr.lines().find(|l| l.contains("notify: STATUS=a")).unwrap_or_else(|| panic!("no notify line:\n{stderr}"));
        for raw in ['\r', '\u{1b}', '\u{b}', '\u{7f}', '\u{85}'] {
            assert!(!stderr.contains(raw), "a raw {raw:?} in:\n{stderr}");
        }
        if json {
            let check = "import json, sys\nfor l in sys.stdin.buffer.read().splitlines(): json.loads(l)\n";
            let mut python = Command::new("python3").args(["-c", check]).stdin(Stdio::piped()).spawn().unwrap();
            python.stdin.take().unwrap().write_all(stderr.as_bytes()).unwrap();
            assert!(python.wait().unwrap().success(), "a json line does not parse:\n{stderr}");
            assert!(notify.contains("STATUS=a\\u001b[2Jb\\rc\\u000bd"), "{notify}");
        } else {
            assert!(notify.contains("STATUS=a\\u{1b}[2Jb\\rc\\u{b}d\\u{7f}e\\u{85}f"), "{notify}");
        }
    }
    let _ = fs::remove_dir_all(&dir);
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
    assert!(flood < baseline * 10 + Duration::from_secs(1), "{flood:?} against {baseline:?} without them");
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(lines.len() <= 10, "{} lines", lines.len());
    assert!(lines.last().unwrap().ends_with("more variables named like lastcall's were not checked"), "{stderr}");
}
