//! A log pipe nobody reads: the loop goes on, and the dropped lines are counted once it drains.

use super::*;

/// The app for the log tests: ignores TERM, counts USR1 (the signals that fill lastcall's log
/// pipe) and HUP (the ones the test counts, each sent once), keeps leaving orphans for lastcall
/// to reap, and reports whether its own stderr is still blocking.
const LOG_FLOOD_APP: &str = r#"
import fcntl, os, signal, sys
out = sys.argv[1]
def report(line):
    fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, (line + "\n").encode())
    os.close(fd)
report("nonblock %d" % (fcntl.fcntl(2, fcntl.F_GETFL) & os.O_NONBLOCK))
signal.signal(signal.SIGTERM, signal.SIG_IGN)
got = [0]
def on_usr1(s, f):
    got[0] += 1
signal.signal(signal.SIGUSR1, on_usr1)
hups = [0]
def on_hup(s, f):
    hups[0] += 1
signal.signal(signal.SIGHUP, on_hup)
report("ready %d" % os.getpid())
seen = 0
seen_hup = 0
while True:
    for _ in range(20):
        pid = os.fork()
        if pid == 0:
            if os.fork() == 0:
                os._exit(0)
            os._exit(0)
        os.waitpid(pid, 0)
    if got[0] != seen:
        seen = got[0]
        report("usr1 %d" % seen)
    if hups[0] != seen_hup:
        seen_hup = hups[0]
        report("hup %d" % seen_hup)
    signal.sigtimedwait([signal.SIGUSR2], 0.005)
"#;

fn pipe_backlog(fd: i32) -> i32 {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int into `n`.
    unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) };
    n
}

fn last_hup(report: &Path) -> u64 {
    lines(report).iter().filter_map(|l| l.strip_prefix("hup ")?.parse().ok()).max().unwrap_or(0)
}

fn zombies_of(pid: i32) -> usize {
    descendants(pid).into_iter().filter(|&p| !alive(p) && Path::new(&format!("/proc/{p}")).exists()).count()
}

/// Starts `lastcall -vv --grace 1s` around the flood app with stderr on a pipe this test holds
/// and does not read, and floods it with USR1 until that pipe is full.
fn start_with_a_full_log_pipe(dir: &Path) -> (std::process::Child, std::process::ChildStderr, std::path::PathBuf) {
    use std::os::fd::AsRawFd;
    let report = dir.join("report");
    let mut lastcall = Command::new(LASTCALL)
        .args(["-vv", "--grace", "1s", "--", "python3", "-c", LOG_FLOOD_APP])
        .arg(&report)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = lastcall.stderr.take().unwrap();
    let pid = lastcall.id() as i32;
    wait_line(&report, "ready", 20 * SEC);
    assert_eq!(wait_line(&report, "nonblock", SEC), "nonblock 0", "the app's stderr must stay blocking");
    // Full: over 60 KiB in it, and another 200 signals' lines did not fit.
    let mut before = 0;
    wait_until(20 * SEC, "lastcall's log pipe to fill", || {
        for _ in 0..200 {
            kill(pid, libc::SIGUSR1);
        }
        std::thread::sleep(Duration::from_millis(20));
        let now = pipe_backlog(stderr.as_raw_fd());
        let full = now >= 60 * 1024 && now == before;
        before = now;
        full.then_some(())
    });
    (lastcall, stderr, report)
}

/// Point 4: with -vv and its stderr on a pipe nobody reads, lastcall still forwards signals,
/// reaps orphans, SIGKILLs at the deadline and exits on time; once the pipe is read again, it
/// says how many lines it dropped.
#[test]
fn a_log_pipe_nobody_reads_does_not_stop_the_loop() {
    use std::os::fd::AsRawFd;
    let _alone = common::contention::alone();
    let dir = scratch("log-pipe");
    let (mut lastcall, stderr, report) = start_with_a_full_log_pipe(&dir);
    let pid = lastcall.id() as i32;
    let guard = KillTree(pid);
    // Forwarding: HUP keeps reaching the app while the pipe stays full, round after round, each
    // sent once and counted (each round needs lastcall to have got past the log line of the one
    // before; a HUP lost on the way fails the round).
    for n in 1..=5 {
        kill(pid, libc::SIGHUP);
        wait_until(10 * SEC, &format!("HUP {n} forwarded with a full log pipe"), || (last_hup(&report) >= n).then_some(()));
    }
    assert_eq!(last_hup(&report), 5, "the app got HUPs that were not sent");
    assert!(pipe_backlog(stderr.as_raw_fd()) >= 60 * 1024);
    // Reaping: the app leaves orphans all the time; they do not pile up as zombies.
    let mut worst = 0;
    let until = Instant::now() + SEC;
    while Instant::now() < until {
        worst = worst.max(zombies_of(pid));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(worst < 100, "{worst} zombies at once");
    // The deadline: the app ignores TERM, so the SIGKILL after the 1 s grace ends it.
    let term = Instant::now();
    kill(pid, libc::SIGTERM);
    let status = wait_child(&mut lastcall, 10 * SEC);
    let took = term.elapsed();
    assert_eq!(exit_code(status), 137);
    assert!(took >= SEC && took < 3 * SEC, "exited {took:?} after TERM with a 1 s grace");
    drop(guard);
    drop(stderr);
}

/// Point 4, continued: once the pipe is read again, the next line is preceded by the count.
#[test]
fn dropped_log_lines_are_counted_once_the_pipe_drains() {
    let _alone = common::contention::alone();
    let dir = scratch("log-dropped");
    let (mut lastcall, mut stderr, _report) = start_with_a_full_log_pipe(&dir);
    let pid = lastcall.id() as i32;
    let _guard = KillTree(pid);
    let _ = &mut lastcall;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while let Ok(n) = stderr.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut text = Vec::new();
    let line = wait_until(20 * SEC, "the dropped-lines notice", || {
        kill(pid, libc::SIGUSR1);
        while let Ok(chunk) = rx.try_recv() {
            text.extend(chunk);
        }
        String::from_utf8_lossy(&text).lines().find(|l| l.ends_with(" log lines dropped")).map(str::to_string)
    });
    let n: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(n > 0, "{line}");
}
