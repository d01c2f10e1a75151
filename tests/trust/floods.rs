//! Floods of health clients and notify senders: probes get through, the real-time signal queue
//! stays near empty, the SIGKILL at the grace is on time, and the endpoint fits the fd limit.

use super::*;

/// Point 11: HEAD gets GET's headers and no body.
#[test]
fn head_gets_headers_without_a_body() {
    let dir = scratch("head");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let _run = start(Mode::Plain, &dir, &["--health-listen", &listen], &["sleep", "30"]);
    let get = wait_until(10 * SEC, "the health endpoint", || http(port, "GET /ready HTTP/1.1\r\n\r\n", SEC));
    assert!(get.ends_with("\r\n\r\nready\n"), "{get:?}");
    let head = http(port, "HEAD /ready HTTP/1.1\r\n\r\n", 5 * SEC).expect("an answer to HEAD");
    assert_eq!(status_of(&head), Some(200), "{head:?}");
    assert!(head.contains("Content-Length: 6\r\n"), "{head:?}");
    assert!(head.ends_with("\r\n\r\n"), "HEAD got a body: {head:?}");
}

/// A flood client for the health endpoint, loopback only, bounded in time and connections:
/// "idle" keeps up to 150 silent connections open, replacing the oldest with a new one as fast
/// as it can, and writes "full" to the file it is given once it holds more than the endpoint's
/// 64; "churn" connects without blocking and hangs up at once.
const HEALTH_FLOOD: &str = r#"
import socket, sys, time
mode, port, seconds, report = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
end = time.monotonic() + seconds
held = []
reported = False
while time.monotonic() < end:
    if not reported and len(held) > 64:
        with open(report, "a") as f:
            f.write("full\n")
        reported = True
    s = socket.socket()
    if mode == "idle":
        s.settimeout(1)
        try:
            s.connect(("127.0.0.1", port))
        except OSError:
            s.close()
            continue
        held.append(s)
        if len(held) > 150:
            held.pop(0).close()
    else:
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except OSError:
            pass
        s.close()
"#;

/// Point 9: /ready probes keep succeeding while idle-connection floods and connect-churn floods
/// run against the endpoint (two of each, for as long as the probing takes).
#[test]
fn probes_get_through_idle_and_churn_floods() {
    let _alone = common::contention::alone();
    let dir = scratch("health-flood");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let _run = start(Mode::Plain, &dir, &["--health-listen", &listen], &["sleep", "300"]);
    wait_until(10 * SEC, "the health endpoint", || http(port, "GET /ready HTTP/1.1\r\n\r\n", SEC));
    let report = dir.join("floods");
    // The floods end when dropped, after the last probe; 240 s only bounds a test that hangs.
    let floods: Vec<ChildGuard> = ["idle", "idle", "churn", "churn"]
        .iter()
        .map(|mode| {
            ChildGuard(
                Command::new("python3")
                    .args(["-c", HEALTH_FLOOD, mode, &port.to_string(), "240"])
                    .arg(&report)
                    .stdin(Stdio::null())
                    .spawn()
                    .unwrap(),
            )
        })
        .collect();
    // Once both idle floods hold more than the endpoint's 64 slots, probe as a kubelet would,
    // but often: 40 probes, 50 ms apart.
    wait_until(30 * SEC, "the idle floods to fill the endpoint", || (lines(&report).len() >= 2).then_some(()));
    let mut failed = Vec::new();
    let mut slowest = Duration::ZERO;
    for _ in 0..40 {
        let probe_start = Instant::now();
        // The claim is that every probe is answered, not how soon: behind a backlog of flood
        // connections on a loaded machine, a probe's SYN can wait for the kernel's
        // retransmission (1 s, then 3 s), so each probe gets 10 s.
        match http(port, "GET /ready HTTP/1.1\r\n\r\n", 10 * SEC).as_deref().and_then(status_of) {
            Some(200) => slowest = slowest.max(probe_start.elapsed()),
            other => failed.push((other, probe_start.elapsed())),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let floods_alive = floods.iter().all(|f| alive(f.0.id() as i32));
    drop(floods);
    eprintln!("40 probes during the floods: {} failed, the slowest answered took {slowest:?}", failed.len());
    assert!(floods_alive, "a flood ended before the probing did");
    assert!(failed.is_empty(), "{} of 40 probes failed: {failed:?}", failed.len());
}

/// 32 clients that send a request one byte per segment (TCP_NODELAY), as fast as they can,
/// until `stop`: each segment is a readable event for lastcall.
fn health_flood(port: u16, stop: &std::sync::Arc<std::sync::atomic::AtomicBool>) -> Vec<std::thread::JoinHandle<()>> {
    use std::sync::atomic::Ordering;
    (0..32)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let addr: SocketAddr = ([127, 0, 0, 1], port).into();
                while !stop.load(Ordering::Relaxed) {
                    let Ok(mut s) = TcpStream::connect_timeout(&addr, SEC) else { continue };
                    let _ = s.set_nodelay(true);
                    for b in b"GET /ready HTTP/1.1\r\nHost: flood\r\n\r\n" {
                        if s.write_all(&[*b]).is_err() || stop.load(Ordering::Relaxed) {
                            break;
                        }
                    }
                    let _ = s.set_read_timeout(Some(SEC));
                    let _ = s.read(&mut [0u8; 256]);
                }
            })
        })
        .collect()
}

/// The real-time signals queued for lastcall's user, and the limit: /proc's SigQ.
fn signal_queue(pid: i32) -> Option<(u64, u64)> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let (queued, limit) = status.lines().find_map(|l| l.strip_prefix("SigQ:"))?.trim().split_once('/')?;
    Some((queued.parse().ok()?, limit.parse().ok()?))
}

/// A signal queue limit the old code's flood reached in well under two seconds (RLIMIT_SIGPENDING
/// is checked against lastcall's own limit, and counted per user).
fn sigpending_4096() -> std::io::Result<()> {
    let limit = libc::rlimit { rlim_cur: 4096, rlim_max: 4096 };
    // SAFETY: setrlimit reads the struct we own.
    if unsafe { libc::setrlimit(libc::RLIMIT_SIGPENDING, &limit) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The real-time signal queue stays near empty whatever health clients do: each segment on a
/// connection used to queue one socket signal, and 32 clients sending a byte per segment filled
/// RLIMIT_SIGPENDING (per user: for root, host-wide), so that nobody of that user could queue a
/// real-time signal. Under that flood, real-time signals sent to lastcall (40, and 50, which is
/// lastcall's own socket signal) are all queued and all forwarded to the app.
#[test]
fn health_clients_cannot_fill_the_real_time_signal_queue() {
    let _alone = common::contention::alone();
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let dir = scratch("rt-queue");
    let out = dir.join("report");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    // The app takes the signals with sigwaitinfo, which counts every queued one (a Python
    // handler would merge those that arrive before it runs).
    let app = "import signal, sys\n\
               sigs = {40, 50}\n\
               signal.pthread_sigmask(signal.SIG_BLOCK, sigs)\n\
               out = open(sys.argv[1], 'a', buffering=1)\n\
               out.write('child ready\\n')\n\
               while True:\n    \
                   out.write('child signal %d \\n' % signal.sigwaitinfo(sigs).si_signo)\n";
    let mut spec = Spec::new(Mode::Plain, &dir, &["--health-listen", &listen, "--", "python3", "-c", app]);
    spec.args.push(out.display().to_string());
    spec.pre_exec = Some(sigpending_4096);
    let run = spec.start();
    wait_line(&out, "child ready", 10 * SEC);
    wait_until(10 * SEC, "the health endpoint", || http(port, "GET /live HTTP/1.1\r\n\r\n", SEC));
    let stop = Arc::new(AtomicBool::new(false));
    let clients = health_flood(port, &stop);
    // The old code filled the queue within about a second; watch it for two.
    let mut worst = (0, 0);
    let until = Instant::now() + 2 * SEC;
    while Instant::now() < until {
        if let Some(q) = signal_queue(run.pid) {
            worst = worst.max(q);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let socket_signal = lastcall::sys::socket_signal().0;
    let mut queued = 0;
    for _ in 0..10 {
        for sig in [40, socket_signal] {
            // SAFETY: kill takes plain integers.
            queued += usize::from(unsafe { libc::kill(run.pid, sig) } == 0);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let got = |sig: i32| count_lines(&out, &format!("child signal {sig} "));
    let arrived = || (got(40) == 10 && got(socket_signal) == 10).then_some(());
    let deadline = Instant::now() + 10 * SEC;
    while arrived().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::Relaxed);
    clients.into_iter().for_each(|c| c.join().unwrap());
    eprintln!("SigQ at worst {}/{} during the flood; {queued} of 20 real-time signals queued; the app got {} of signal 40 and {} of {socket_signal}", worst.0, worst.1, got(40), got(socket_signal));
    assert_eq!(queued, 20, "real-time signals could not be queued during the flood (SigQ {worst:?})");
    // Near empty: the queue is per user (for root, host-wide, other tests' lastcalls included),
    // so a few entries are anyone's; the old code filled all 4096 within a second.
    assert!(worst.0 <= worst.1 / 16, "SigQ reached {}/{} during the flood", worst.0, worst.1);
    assert_eq!((got(40), got(socket_signal)), (10, 10), "{}", run.stderr());
}

/// A leaf `depth` processes below the shell that starts it, sending `STATUS=` to NOTIFY_SOCKET
/// as fast as it can (the sender check walks its whole parent chain on the old code).
const NOTIFY_FLOOD: &str = r#"
n=$1
if [ "$n" -gt 0 ]; then sh "$0" $((n - 1)); exit; fi
exec python3 -c '
import os, socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.setblocking(False)
addr = os.environ["NOTIFY_SOCKET"]
n = 0
while True:
    try:
        s.sendto(b"STATUS=flood %d" % n, addr)
        n += 1
    except OSError:
        pass
'
"#;

/// One lastcall under a notify flood (two senders 100 processes deep) and a health flood (32
/// clients sending one byte per segment, as fast as they can), TERM, and a 1 s grace the app
/// ignores TERM through. Returns how late the SIGKILL was by lastcall's own timeline, and how
/// long after TERM + grace lastcall exited, in ms, how many messages reached upstream, and what
/// the host took from lastcall between TERM and its exit.
fn sigkill_lateness_under_floods(dir: &Path) -> (f64, f64, usize, common::contention::Contention) {
    use std::os::unix::net::UnixDatagram;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    let upstream_path = dir.join("upstream");
    let upstream = UnixDatagram::bind(&upstream_path).unwrap();
    upstream.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let relayed = Arc::new(AtomicUsize::new(0));
    let reader = {
        let (stop, relayed) = (stop.clone(), relayed.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while !stop.load(Ordering::Relaxed) {
                if upstream.recv(&mut buf).is_ok() {
                    relayed.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    let chain = dir.join("chain.sh");
    fs::write(&chain, NOTIFY_FLOOD).unwrap();
    let marker = dir.join("app-ready");
    let app = format!(
        "trap '' TERM; sh {c} 100 & sh {c} 100 & touch {m}; wait",
        c = chain.display(),
        m = marker.display()
    );
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut run = Spec::new(Mode::Plain, dir, &["--grace", "1s", "--health-listen", &listen, "--", "sh", "-c", &app])
        .env("NOTIFY_SOCKET", &upstream_path.display().to_string())
        .start();
    wait_until(20 * SEC, "the app", || marker.exists().then_some(()));
    wait_until(20 * SEC, "the notify flood", || (relayed.load(Ordering::Relaxed) > 200).then_some(()));
    let clients = health_flood(port, &stop);
    std::thread::sleep(Duration::from_millis(500));
    let before = relayed.load(Ordering::Relaxed);
    let mut window = common::contention::Window::open(&[run.pid]);
    let t0 = Instant::now();
    run.signal(libc::SIGTERM);
    // lastcall's run-queue delay goes with it when it is reaped: read it until then.
    wait_until(30 * SEC, "lastcall to exit", || {
        window.sample();
        run.try_exited().then_some(())
    });
    let code = run.wait(SEC);
    let after_grace = t0.elapsed().as_secs_f64() * 1000.0 - 1000.0;
    let contention = window.close();
    stop.store(true, Ordering::Relaxed);
    clients.into_iter().for_each(|c| c.join().unwrap());
    reader.join().unwrap();
    let log = run.stderr();
    assert_eq!(code, 137, "{log}");
    // The timeline counts from lastcall's start: the grace runs from its TERM line.
    let at = |entry: &str| timeline_seconds(&log, entry);
    ((at("grace expired") - at("received SIGTERM")) * 1000.0 - 1000.0, after_grace, before, contention)
}

/// Every wake-up does bounded work: under a flood of the notify socket and of the health
/// endpoint at once, the SIGKILL at the end of a 1 s grace comes on time (before: a notify flood
/// alone kept lastcall running 12 s after TERM, with no "grace expired" at all). Each of three
/// runs must have the SIGKILL at most 100 ms late on lastcall's own timeline, and the exit, which
/// also waits for 200 killed processes to be reaped, at most 1 s after TERM + grace. On a shared
/// machine the 34 flooding threads and processes compete with lastcall for the CPU, so a run over
/// either bound is played again only when the host's steal plus lastcall's run-queue delay
/// covers the excess. The 20 ms target at the p99 is the benchmark's, measured on a quiet machine.
#[test]
fn timing_the_sigkill_at_the_grace_is_on_time_under_notify_and_health_floods() {
    let _alone = common::contention::alone();
    for i in 0..3 {
        let mut attempt = 0;
        common::contention::unless_stalled(&format!("run {i}"), 3, || {
            attempt += 1;
            let dir = scratch(&format!("floods-{i}-{attempt}"));
            let (timeline, exit, relayed, contention) = sigkill_lateness_under_floods(&dir);
            eprintln!("run {i}: SIGKILL {timeline:.0} ms late by the timeline, exit {exit:.0} ms after TERM + grace, {relayed} messages relayed before TERM; {contention}");
            let excess_ms = (timeline - 100.0).max(exit - 1000.0);
            if excess_ms <= 0.0 {
                return Ok(());
            }
            Err(common::contention::Late {
                excess: Duration::from_secs_f64(excess_ms / 1000.0),
                contention,
                detail: format!("SIGKILL {timeline:.0} ms late (bound 100), exit {exit:.0} ms after TERM + grace (bound 1000)"),
            })
        });
    }
}

fn nofile(n: u64) -> std::io::Result<()> {
    let limit = libc::rlimit { rlim_cur: n as libc::rlim_t, rlim_max: n as libc::rlim_t };
    // SAFETY: setrlimit reads the struct we own.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The health endpoint keeps a probe's place whatever the fd limit: its connection budget
/// follows RLIMIT_NOFILE, so idle clients are made room for before accept() runs out of fds
/// (before, at a limit of 16, 200 idle clients left 0 of 3 probes answered), and a limit that
/// leaves no room at all is said at start-up (before: silence, and no answer ever).
#[test]
fn the_health_endpoint_fits_the_fd_limit() {
    let _alone = common::contention::alone();
    let dir = scratch("nofile-16");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut spec = Spec::new(Mode::Plain, &dir, &["--health-listen", &listen, "--", "sleep", "30"]);
    spec.pre_exec = Some(|| nofile(16));
    let mut run = spec.start();
    wait_until(10 * SEC, "the health endpoint", || http(port, "GET /live HTTP/1.1\r\n\r\n", SEC));
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let idle: Vec<TcpStream> = (0..200).filter_map(|_| TcpStream::connect_timeout(&addr, SEC).ok()).collect();
    // Whether each probe is answered, not how soon: 10 s each.
    let answered = (0..3).filter(|_| http(port, "GET /ready HTTP/1.1\r\n\r\n", 10 * SEC).and_then(|r| status_of(&r)) == Some(200)).count();
    drop(idle);
    eprintln!("at RLIMIT_NOFILE 16 with 200 idle clients: {answered} of 3 probes answered");
    assert_eq!(answered, 3, "{}", run.stderr());
    assert!(!run.stderr().contains("cannot answer"), "{}", run.stderr());
    run.signal(libc::SIGTERM);
    assert_eq!(run.wait(10 * SEC), 143);

    for limit in [5, 6] {
        let dir = scratch(&format!("nofile-{limit}"));
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let mut spec = Spec::new(Mode::Plain, &dir, &["--health-listen", &listen, "--", "sleep", "30"]);
        spec.pre_exec = Some(if limit == 5 { || nofile(5) } else { || nofile(6) });
        let mut run = spec.start();
        wait_until(10 * SEC, "the warning", || run.stderr().contains("cannot answer").then_some(()));
        run.signal(libc::SIGTERM);
        assert_eq!(run.wait(10 * SEC), 143, "{}", run.stderr());
    }
}
