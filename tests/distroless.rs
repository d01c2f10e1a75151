//! The whole entrypoint of a distroless image: `--user` (the app as another user, looked up in
//! the image's own /etc/passwd and /etc/group) with everything else still working around it,
//! and `probe http://` / `tcp://` against real servers on loopback, hostile ones included.
//!
//! The image's own files are stood in for by a mount namespace (`unshare --mount`) in which a
//! test's passwd and group are bind-mounted over /etc's: lastcall reads them exactly where it
//! reads them in an image, and the host's files are never touched.

mod common;

use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const SEC: Duration = Duration::from_secs(1);

const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\napp:x:1234:1234:the app:/home/app:/sbin/nologin\n\
                      broken:x:12x:1::/:\nother:x:1300:1300::/home/other:\n";
const GROUP: &str = "root:x:0:\napp:x:1234:\nweb:x:2000:other,app\naudio:x:2001:other\n";

/// A directory the app, as another user, may write its reports to.
fn open_dir(name: &str) -> PathBuf {
    let dir = scratch(name);
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

/// `lastcall ARGS` with `passwd` and `group` as /etc's, in a mount namespace of its own:
/// (exit code, stdout, stderr).
fn in_image(dir: &Path, passwd: &str, group: &str, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let (p, g) = (dir.join("passwd"), dir.join("group"));
    fs::write(&p, passwd).unwrap();
    fs::write(&g, group).unwrap();
    let out = Command::new("unshare")
        .args(["--mount", "--", "sh", "-c", "mount --bind \"$1\" /etc/passwd && mount --bind \"$2\" /etc/group && shift 2 && exec \"$@\"", "sh"])
        .arg(&p)
        .arg(&g)
        .arg(LASTCALL)
        .args(args)
        .env_remove("USER")
        .env_remove("LOGNAME")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let code = out.status.code().unwrap_or(-1);
    (code, String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

const WHO: &str = "echo $(id -u) $(id -g) $(id -G); echo HOME=$HOME USER=$USER LOGNAME=$LOGNAME";

#[test]
fn user_names_come_from_the_images_own_files() {
    let dir = scratch("user-names");
    let run = |args: &[&str], env: &[(&str, &str)]| in_image(&dir, PASSWD, GROUP, args, env);
    let (code, out, err) = run(&["--user", "app", "--", "sh", "-c", WHO], &[]);
    assert_eq!(code, 0, "{err}");
    // initgroups: the passwd group and every group listing app.
    assert_eq!(out, "1234 1234 1234 2000\nHOME=/home/app USER=app LOGNAME=app\n");
    // A group by name: it and app's member groups; USER set for the app stays.
    let (code, out, err) = run(&["--", "sh", "-c", WHO], &[("LASTCALL_USER", "app:audio"), ("USER", "svc")]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "1234 2001 2001 2000\nHOME=/home/app USER=svc LOGNAME=app\n");
    // Numbers need no entry, and get only the given group; HOME is / without one.
    let (code, out, err) = run(&["--user", "4242:4343", "--", "sh", "-c", WHO], &[("HOME", "/root")]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "4242 4343 4343\nHOME=/ USER= LOGNAME=\n");
    // A number with an entry: its HOME and name, only its own group.
    let (code, out, err) = run(&["--user", "1234", "--", "sh", "-c", WHO], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "1234 1234 1234\nHOME=/home/app USER=app LOGNAME=app\n");
    // Unknown names: lastcall's failure, naming the name and the file; the app never starts.
    for (spec, needle) in [("nosuch", "unknown user 'nosuch' for --user: no such entry in /etc/passwd"),
                           ("broken", "unknown user 'broken'"),
                           ("app:nosuch", "unknown group 'nosuch' for --user: no such entry in /etc/group")] {
        let (code, out, err) = run(&["--user", spec, "--", "echo", "started"], &[]);
        assert_eq!((code, out.as_str()), (125, ""), "{spec}: {err}");
        assert!(err.contains(needle) && err.lines().count() == 1, "{spec}: {err}");
    }
    // Under a peer's name, only the variable.
    let tini = dir.join("tini");
    std::os::unix::fs::symlink(LASTCALL, &tini).unwrap();
    let out = Command::new(&tini).args(["--", "id", "-u"]).env("LASTCALL_USER", "65534").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "65534\n");
    let out = Command::new(&tini).args(["--user", "65534", "--", "id", "-u"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "tini's own usage error");
}

#[test]
fn bad_user_values_exit_2_naming_the_option() {
    for bad in ["", "app:", ":web", "a:b:c", "4294967295", "4294967296", "a b", "x\ny"] {
        let (code, _, err) = run_to_end(Mode::Plain, &["--user", bad, "--", "true"], &[]);
        assert_eq!(code, 2, "{bad:?}: {err}");
        assert!(err.starts_with("lastcall: invalid value") && err.contains("--user"), "{bad:?}: {err}");
        if !bad.is_empty() {
            let (code, _, err) = run_to_end(Mode::Plain, &["true"], &[("LASTCALL_USER", bad)]);
            assert_eq!(code, 2, "{bad:?}: {err}");
            assert!(err.contains("LASTCALL_USER"), "{err}");
        }
    }
    let (code, _, err) = run_to_end(Mode::Plain, &["true"], &[("LASTCALL_NO_NEW_PRIVS", "maybe")]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn a_failed_switch_exits_125_naming_the_step() {
    // lastcall itself as nobody cannot set another user's groups.
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--", LASTCALL, "--user", "1234:1234", "--", "echo", "started"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains("setgroups failed before running 'echo': Operation not permitted"), "{err}");
    assert!(out.stdout.is_empty());
    // Already that user (the platform started it so): nothing to switch, the groups kept.
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--", LASTCALL, "--user", "65534:65534", "--", "id", "-u"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!((out.status.code(), String::from_utf8_lossy(&out.stdout).trim()), (Some(0), "65534"), "{err}");
    assert!(err.contains("already running as uid 65534 gid 65534: supplementary groups [] kept (--user wants [65534]"), "{err}");
}

#[test]
fn no_new_privs_is_the_apps_alone() {
    let nnp = "grep NoNewPrivs /proc/self/status";
    let (code, out, err) = run_to_end(Mode::Plain, &["--user", "65534:65534", "--no-new-privs", "sh", "-c", nnp], &[]);
    assert_eq!((code, String::from_utf8_lossy(&out).trim()), (0, "NoNewPrivs:\t1"), "{err}");
    let (_, out, _) = run_to_end(Mode::Plain, &["sh", "-c", nnp], &[("LASTCALL_NO_NEW_PRIVS", "1")]);
    assert_eq!(String::from_utf8_lossy(&out).trim(), "NoNewPrivs:\t1");
    let (_, out, _) = run_to_end(Mode::Plain, &["--user", "65534", "sh", "-c", nnp], &[]);
    assert_eq!(String::from_utf8_lossy(&out).trim(), "NoNewPrivs:\t0");
}

/// The fixture, where another user can read it.
fn fixture_in(dir: &Path) -> String {
    let app = dir.join("app.py");
    fs::copy(fixture(), &app).unwrap();
    fs::set_permissions(&app, fs::Permissions::from_mode(0o755)).unwrap();
    app.display().to_string()
}

/// Forwarding, the grace's SIGKILL, reaping, the ready file and the health endpoint, with the
/// app as nobody and lastcall as PID 1.
#[test]
fn supervision_works_with_the_app_as_another_user() {
    let dir = open_dir("user-supervision");
    let app = fixture_in(&dir);
    let report = dir.join("report");
    let ready = dir.join("ready");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let listen = format!("127.0.0.1:{port}");
    let (r, rf) = (report.display().to_string(), ready.display().to_string());
    let mut run = Spec::new(
        Mode::Pid1,
        &dir,
        &["--user", "65534:65534", "--ready-file", &rf, "--health-listen", &listen, "--grace", "500ms", "--", "python3", &app, "record", &r],
    )
    .start();
    let line = wait_line(&report, "child ready", 10 * SEC);
    let pid = line.split_whitespace().nth(2).unwrap();
    let uid = fs::read_to_string(format!("/proc/{}/status", run.pid)).ok().and_then(|_| {
        // The app's pid is in lastcall's PID namespace; find it as lastcall's child here.
        let kids = fs::read_to_string(format!("/proc/{0}/task/{0}/children", run.pid)).ok()?;
        let kid = kids.split_whitespace().next()?.to_string();
        let status = fs::read_to_string(format!("/proc/{kid}/status")).ok()?;
        status.lines().find(|l| l.starts_with("Uid:")).map(str::to_string)
    });
    assert_eq!(uid.as_deref().map(|l| l.split_whitespace().nth(1)), Some(Some("65534")), "app pid {pid}");
    wait_until(10 * SEC, "the ready file", || ready.exists().then_some(()));
    let probe = |target: &str| {
        Command::new(LASTCALL).args(["probe", target, "--health-listen", &listen]).status().unwrap().code()
    };
    wait_until(10 * SEC, "/ready", || (probe("ready") == Some(0)).then_some(()));
    // HUP forwarded to an app lastcall does not share a uid with.
    run.signal(libc::SIGHUP);
    wait_line(&report, &format!("child signal {}", libc::SIGHUP), 10 * SEC);
    run.signal(libc::SIGTERM);
    assert_eq!(run.wait(10 * SEC), 0, "{}", run.stderr());
    assert!(!ready.exists());
    // An app that ignores TERM, as nobody: SIGKILLed at the grace, and its orphans reaped.
    let mut run = Spec::new(
        Mode::Pid1,
        &dir,
        &["--user", "65534:65534", "--grace", "300ms", "--", "sh", "-c", "trap '' TERM; for i in 1 2 3; do sh -c 'sleep 0.1 &'; done; echo up > $0/up; while :; do sleep 1; done", dir.to_str().unwrap()],
    )
    .start();
    wait_until(10 * SEC, "the app", || dir.join("up").exists().then_some(()));
    let started = Instant::now();
    run.signal(libc::SIGTERM);
    assert_eq!(run.wait(10 * SEC), 137, "{}", run.stderr());
    // Killed at the 300 ms grace, not left running: 4.7 s of room over an excess of ms.
    assert!(started.elapsed() < 5 * SEC);
    assert!(run.stderr().contains("grace expired: sent SIGKILL"), "{}", run.stderr());
}

#[test]
fn listen_fds_reach_the_app_as_another_user() {
    let dir = scratch("user-listenfds");
    let script = format!(
        "LISTEN_PID=$$ LISTEN_FDS=1 exec {LASTCALL} --user 65534:65534 -- sh -c 'echo $LISTEN_PID $$ $LISTEN_FDS $(id -u); ls /proc/$$/fd' 3<{}",
        dir.display()
    );
    let out = Command::new("sh").arg("-c").arg(&script).stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let ids: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!((ids[0] == ids[1], ids[2], ids[3]), (true, "1", "65534"), "{text}");
    assert!(lines.any(|l| l == "3"), "fd 3 passed through: {text}");
}

/// The app as nobody reaches the private notify socket; a process outside the service, even
/// with the app's own uid, is still refused.
#[test]
fn the_notify_relay_serves_an_app_running_as_another_user() {
    let dir = open_dir("user-notify");
    let (systemd, upstream) = fake_systemd(&dir);
    let addr_file = dir.join("addr");
    let go = dir.join("go");
    let app = format!(
        "echo \"$NOTIFY_SOCKET\" > {addr}; systemd-notify --ready STATUS=as-$(id -u); \
         while [ ! -e {go} ]; do sleep 0.05; done; systemd-notify STATUS=last; exec sleep 30",
        addr = addr_file.display(),
        go = go.display()
    );
    // A Run: killed with its app even when the test fails.
    let mut run = Spec::new(Mode::Plain, &dir, &["--user", "65534:65534", "--", "sh", "-c", &app])
        .env("NOTIFY_SOCKET", upstream.to_str().unwrap())
        .start();
    let mut buf = [0u8; 4096];
    let mut recv = || -> String {
        let n = systemd.recv(&mut buf).expect("a notification from the relay");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    let first = recv();
    assert!(first.contains("READY=1") && first.contains("STATUS=as-65534"), "{first}");
    let addr = wait_until(5 * SEC, "the address", || fs::read_to_string(&addr_file).ok().filter(|a| a.ends_with('\n')));
    let addr = addr.trim().to_string();
    // Only lastcall's user and the app's group may enter; only the app's uid (and root) connect.
    use std::os::unix::fs::MetadataExt;
    let socket_dir = Path::new(&addr).parent().unwrap().to_path_buf();
    let meta = fs::metadata(&socket_dir).unwrap();
    assert_eq!((meta.mode() & 0o777, meta.uid(), meta.gid()), (0o710, 0, 65534));
    let meta = fs::symlink_metadata(&addr).unwrap();
    assert_eq!((meta.mode() & 0o777, meta.uid()), (0o600, 65534));
    // Same uid, not the service's: dropped.
    let status = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--", "systemd-notify", "STATUS=evil"])
        .env("NOTIFY_SOCKET", &addr)
        .status()
        .unwrap();
    assert!(status.success(), "the same uid reaches the socket");
    fs::write(&go, "").unwrap();
    let next = recv();
    assert!(next.contains("STATUS=last") && !next.contains("evil"), "{next}");
    run.signal(libc::SIGTERM);
    assert_eq!(run.wait(10 * SEC), 143);
    assert!(!socket_dir.exists(), "{} left behind", socket_dir.display());
    let stderr = run.stderr();
    assert!(stderr.contains("dropped a notify message from a process outside the service"), "{stderr}");
}

/// Under a terminal, the app as nobody owns the foreground.
#[test]
fn the_app_as_another_user_owns_the_terminals_foreground() {
    let dir = scratch("user-tty");
    let check = "import os; print('fg', os.tcgetpgrp(0) == os.getpgrp(), os.getuid())";
    let cmd = format!("{LASTCALL} --user 65534:65534 -- python3 -c \"{check}\"");
    let out = Command::new("script").arg("-qec").arg(&cmd).arg(dir.join("typescript")).stdin(Stdio::null()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("fg True 65534"), "{text}");
}

// ---- probe http:// and tcp:// ----

/// A server on `addr` that answers every connection with `handler`, on a thread, until the
/// test ends (the listener goes with the process).
fn serve(addr: &str, handler: fn(TcpStream)) -> u16 {
    let listener = TcpListener::bind(addr).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || handler(stream));
        }
    });
    port
}

fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// Answers with the status named by the path: GET /503 → 503.
fn status_server(mut stream: TcpStream) {
    let head = read_head(&mut stream);
    let code: u16 = head.split_whitespace().nth(1).and_then(|p| p.trim_start_matches('/').parse().ok()).unwrap_or(200);
    let _ = write!(stream, "HTTP/1.1 {code} Whatever\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
}

fn probe(args: &[&str]) -> (i32, String, Duration) {
    let started = Instant::now();
    let (code, _, err) = run_to_end(Mode::Plain, &[&["probe"], args].concat(), &[]);
    (code, err, started.elapsed())
}

#[test]
fn probe_http_judges_the_status_as_the_kubelet_does() {
    for host in ["127.0.0.1", "[::1]"] {
        let port = serve(&format!("{host}:0"), status_server);
        for (code, healthy) in [(200, true), (204, true), (302, true), (399, true), (404, false), (500, false), (503, false)] {
            let (exit, err, _) = probe(&[&format!("http://{host}:{port}/{code}")]);
            assert_eq!(exit, if healthy { 0 } else { 1 }, "{host} {code}: {err}");
            if healthy {
                assert_eq!(err, "", "{code}");
            } else {
                assert_eq!(err, format!("lastcall: probe failed: http://{host}:{port}/{code}: answered HTTP/1.1 {code} Whatever\n"));
            }
        }
        let (exit, err, _) = probe(&[&format!("tcp://{host}:{port}")]);
        assert_eq!((exit, err.as_str()), (0, ""));
    }
    // A name, as the image's resolver has it (/etc/hosts).
    let port = serve("127.0.0.1:0", status_server);
    let (exit, err, _) = probe(&[&format!("http://localhost:{port}/200")]);
    assert_eq!(exit, 0, "{err}");
    let (exit, err, _) = probe(&["http://no-such-host.invalid:80/", "--timeout", "3s"]);
    assert_eq!(exit, 1);
    assert!(err.contains("no-such-host.invalid") && err.lines().count() == 1, "{err}");
}

#[test]
fn probe_says_refused_when_nothing_listens() {
    let closed = free_port();
    for url in [format!("http://127.0.0.1:{closed}/healthz"), format!("tcp://127.0.0.1:{closed}")] {
        let (exit, err, _) = probe(&[&url]);
        assert_eq!((exit, err), (1, format!("lastcall: probe failed: {url}: connection refused\n")));
    }
}

#[test]
fn a_slow_or_silent_server_cannot_hold_the_probe_past_its_timeout() {
    // Accepts and never answers.
    let silent = serve("127.0.0.1:0", |mut s| {
        let _ = read_head(&mut s);
        std::thread::sleep(Duration::from_secs(60));
    });
    // Slow loris: a byte of the status line every 100 ms, never the end of it.
    let loris = serve("127.0.0.1:0", |mut s| {
        let _ = read_head(&mut s);
        for b in b"HTTP/1.1 200 OK but very very slowly".iter().cycle().take(600) {
            if s.write_all(&[*b]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    // Unbounded, either would hold the probe for a minute; the limit is over 10x the 1 s default
    // timeout and leaves room for a loaded 2-core machine (a load of 40 measured 3.5 s to start
    // and end a 1 s probe), while a minute still fails it.
    for port in [silent, loris] {
        for (timeout, limit) in [(None, 20 * SEC), (Some("300ms"), 20 * SEC)] {
            let url = format!("http://127.0.0.1:{port}/");
            let mut args = vec![url.as_str()];
            if let Some(t) = timeout {
                args.extend(["--timeout", t]);
            }
            let (exit, err, took) = probe(&args);
            assert_eq!(exit, 1, "{err}");
            assert!(err.contains("timed out after"), "{err}");
            assert!(took < limit, "{port}: {took:?}");
        }
    }
}

#[test]
fn an_endless_answer_is_read_no_further_than_its_status_line() {
    fn endless(mut s: TcpStream, head: &[u8]) {
        let _ = read_head(&mut s);
        let _ = s.write_all(head);
        let chunk = [b'x'; 65536];
        while s.write_all(&chunk).is_ok() {}
    }
    let body = serve("127.0.0.1:0", |s| endless(s, b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n"));
    let no_line = serve("[::1]:0", |s| endless(s, b"HTTP/1.1 200 OK"));
    let (exit, err, took) = probe(&[&format!("http://127.0.0.1:{body}/")]);
    assert_eq!(exit, 0, "{err}");
    // Generous: ms are expected for a status line.
    assert!(took < 8 * SEC, "{took:?}");
    // Refused at 1024 bytes, long before its timeout.
    let (exit, err, took) = probe(&[&format!("http://[::1]:{no_line}/"), "--timeout", "60s"]);
    assert_eq!(exit, 1);
    assert!(err.contains("no status line in the first 1024 bytes"), "{err}");
    assert!(took < 20 * SEC, "{took:?}"); // its 60 s timeout would fail this
}

/// A DNS server that never answers cannot hold the probe either (musl's resolver alone would
/// wait 5 s twice). In a network and mount namespace of its own: a silent UDP socket on
/// 127.0.0.1:53, named by a resolv.conf bind-mounted over /etc's.
#[test]
fn a_silent_dns_server_cannot_hold_the_probe() {
    let dir = scratch("silent-dns");
    let resolv = dir.join("resolv.conf");
    fs::write(&resolv, "nameserver 127.0.0.1\noptions timeout:5 attempts:2\n").unwrap();
    let ready = dir.join("dns-ready");
    let script = format!(
        "ip link set lo up && mount --bind {resolv} /etc/resolv.conf || exit 99
         python3 -c 'import socket, time; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((\"127.0.0.1\", 53)); open(\"{ready}\", \"w\").close(); time.sleep(60)' &
         dns=$!
         while [ ! -e {ready} ]; do sleep 0.05; done
         start=$(date +%s%N)
         {LASTCALL} probe http://app.silent.example:8080/healthz --timeout 1s
         rc=$?
         echo rc=$rc ms=$(( ($(date +%s%N) - start) / 1000000 ))
         kill $dns",
        resolv = resolv.display(),
        ready = ready.display()
    );
    let out = Command::new("unshare").args(["--net", "--mount", "--", "sh", "-c", &script]).stdin(Stdio::null()).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let line = stdout.lines().find(|l| l.starts_with("rc=")).unwrap_or_else(|| panic!("{stdout}{stderr}"));
    let ms: u64 = line.split("ms=").nth(1).unwrap().parse().unwrap();
    assert!(line.starts_with("rc=1 "), "{line}: {stderr}");
    assert!(stderr.contains("lastcall: probe failed: http://app.silent.example:8080/healthz: timed out after 1s resolving 'app.silent.example'"), "{stderr}");
    // The 1 s timeout, with room; the resolver alone would take its 10 s.
    assert!(ms < 9000, "{ms} ms");
}

#[test]
fn bad_probe_targets_exit_2() {
    for args in [&["https://127.0.0.1:1/"][..], &["tcp://127.0.0.1"], &["http://127.0.0.1:99999/"], &["http://[::1/"], &["tcp://h:1", "--timeout", "0"]] {
        let (exit, err, _) = probe(args);
        assert_eq!(exit, 2, "{args:?}: {err}");
        assert!(err.starts_with("lastcall: "), "{err}");
    }
}
