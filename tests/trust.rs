//! lastcall at its trust boundaries (issue 10), each with real processes: hostile values, a
//! hostile local user next to the notify relay and the ready file, a log pipe nobody reads, and
//! floods of health clients.

mod common;

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const SEC: Duration = Duration::from_secs(1);

fn start(mode: Mode, dir: &Path, opts: &[&str], cmd: &[&str]) -> Run {
    let mut spec = Spec::new(mode, dir, opts);
    spec.args.push("--".into());
    spec.args.extend(cmd.iter().map(|s| s.to_string()));
    spec.start()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The whole response to `request`, or None if nothing answered in time.
fn http(port: u16, request: &str, limit: Duration) -> Option<String> {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut s = TcpStream::connect_timeout(&addr, limit).ok()?;
    s.set_read_timeout(Some(limit)).ok()?;
    s.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    s.read_to_string(&mut response).ok()?;
    Some(response)
}

fn status_of(response: &str) -> Option<u16> {
    response.split_whitespace().nth(1)?.parse().ok()
}

/// Point 3: a duration whose deadline would not fit the clock is refused at parse, naming where
/// it came from, instead of aborting lastcall at the first TERM.
#[test]
fn huge_durations_are_refused_at_parse() {
    let cases: [(&[&str], &[(&str, &str)], &str); 5] = [
        (&["--grace", "1e19", "sleep", "5"], &[], "--grace"),
        (&["--pre-stop", "1e19", "sleep", "5"], &[], "--pre-stop"),
        (&["sleep", "5"], &[("LASTCALL_GRACE", "1e19")], "LASTCALL_GRACE"),
        (&["sleep", "5"], &[("LASTCALL_PRE_STOP", "9000000000000000000s")], "LASTCALL_PRE_STOP"),
        (&["--grace", "8761h", "sleep", "5"], &[], "--grace"),
    ];
    for (args, env, needle) in cases {
        let start = Instant::now();
        let mut cmd = Command::new(LASTCALL);
        cmd.args(args).envs(env.iter().copied()).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let pid = child.id() as i32;
        // On the old code lastcall starts the app; its first TERM then overflows the clock.
        std::thread::sleep(Duration::from_millis(300));
        if alive(pid) {
            kill(pid, libc::SIGTERM);
        }
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {stderr}");
        let first = stderr.lines().next().unwrap_or_default();
        assert!(first.contains(needle) && first.contains("a year"), "{args:?} {env:?}: {stderr}");
        assert!(start.elapsed() < 10 * SEC);
    }
    // The maximum itself is fine, and its deadline is far away: TERM, then the app exits.
    let (code, _, stderr) = run_to_end(Mode::Plain, &["--grace", "8760h", "--pre-stop", "8760h", "true"], &[]);
    assert_eq!(code, 0, "{stderr}");
}

/// Point 11: a bad value with a newline or an escape sequence in it gives one line, escaped.
#[test]
fn a_bad_value_with_control_characters_gives_one_line() {
    for (args, env) in [
        (vec!["--grace", "1\nlastcall: fake line", "true"], vec![]),
        (vec!["true"], vec![("LASTCALL_STOP_SIGNAL", "TERM\r\n\x1b[2Jx")]),
        (vec!["--bogus\nx", "true"], vec![]),
    ] {
        let (code, _, stderr) = run_to_end(Mode::Plain, &args, &env);
        assert_eq!(code, 2, "{stderr}");
        let first = stderr.lines().next().unwrap();
        assert!(first.starts_with("lastcall: ") && first.contains("\\n") | first.contains("\\r"), "{stderr:?}");
        assert!(!stderr.contains('\x1b') && !stderr.contains('\r'), "{stderr:?}");
        // The line, the usage line and the hint: nothing more.
        assert_eq!(stderr.lines().count(), 3, "{stderr:?}");
    }
}

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

/// Point 5: a user who can write the ready file's directory plants symlinks to a root-owned
/// file at every name lastcall could predict (the old temporary name came from the pid, which
/// is 1 in a container); lastcall must neither truncate nor write through them.
#[test]
fn planted_symlinks_do_not_redirect_the_ready_file() {
    use std::os::unix::fs::{lchown, symlink, MetadataExt, PermissionsExt};
    let dir = scratch("ready-symlinks");
    let victim = dir.join("victim");
    fs::write(&victim, "root's precious data\n").unwrap();
    let shared = dir.join("shared");
    fs::create_dir(&shared).unwrap();
    let nobody = 65534;
    std::os::unix::fs::chown(&shared, Some(nobody), Some(nobody)).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o755)).unwrap();
    let ready = shared.join("ready");
    let mut planted = vec![ready.clone()];
    for pid in 1..=64 {
        planted.push(shared.join(format!("ready.lastcall-{pid}.tmp")));
    }
    for link in &planted {
        symlink(&victim, link).unwrap();
        lchown(link, Some(nobody), Some(nobody)).unwrap();
    }
    let ready_arg = ready.display().to_string();
    let mut run = start(Mode::Pid1, &dir, &["--ready-file", &ready_arg], &["sleep", "30"]);
    wait_until(10 * SEC, "the ready file", || {
        fs::symlink_metadata(&ready).ok().filter(|m| m.file_type().is_file()).map(|_| ())
    });
    assert_eq!(fs::read_to_string(&victim).unwrap(), "root's precious data\n");
    assert_eq!(fs::read_to_string(&ready).unwrap(), "1\n");
    assert_eq!(fs::metadata(&ready).unwrap().uid(), 0);
    run.signal(libc::SIGTERM);
    assert_eq!(run.wait(10 * SEC), 143);
    assert!(fs::symlink_metadata(&ready).is_err(), "the ready file is gone");
    assert_eq!(fs::read_to_string(&victim).unwrap(), "root's precious data\n");
    // Only the planted links are left: no temporary file, and the victim is where it was.
    let left: Vec<_> = fs::read_dir(&shared).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), planted.len() - 1, "{left:?}");
}

/// A cgroup (v2) of its own, below the test's, removed with whatever is still in it.
struct Cgroup {
    path: std::path::PathBuf,
}

impl Cgroup {
    fn new(name: &str) -> Cgroup {
        let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap();
        let mount = mountinfo
            .lines()
            .find_map(|l| l.split_once(" - cgroup2 ").map(|(head, _)| head.split_whitespace().nth(4).unwrap().to_string()))
            .expect("a cgroup2 mount");
        let own = fs::read_to_string("/proc/self/cgroup").unwrap();
        let own = own.lines().find_map(|l| l.strip_prefix("0::")).expect("a cgroup v2 path").trim_start_matches('/');
        let path = Path::new(&mount).join(own).join(format!("lastcall-test-{}-{name}", std::process::id()));
        fs::create_dir(&path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
        Cgroup { path }
    }

    fn procs(&self) -> String {
        self.path.join("cgroup.procs").display().to_string()
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let procs = fs::read_to_string(self.path.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines().filter_map(|p| p.parse::<i32>().ok()).filter(|&p| p > 0) {
            // SAFETY: kill takes plain integers.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let deadline = Instant::now() + 10 * SEC;
        while fs::remove_dir(&self.path).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Point 1: the notify relay speaks only for the service's processes. An unrelated user
/// (nobody, via setpriv) and an unrelated root process send READY=1, WATCHDOG=trigger and
/// STATUS=; none of it reaches the service manager, while the app's own messages and those of
/// a process in lastcall's cgroup do.
#[test]
fn the_notify_relay_relays_only_the_services_processes() {
    use std::os::unix::net::UnixDatagram;
    let dir = scratch("notify-trust");
    let socket_path = dir.join("systemd.sock");
    let systemd = UnixDatagram::bind(&socket_path).unwrap();
    systemd.set_read_timeout(Some(10 * SEC)).unwrap();
    let fifo = dir.join("go");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let addr_file = dir.join("addr");
    let cgroup = Cgroup::new("notify");
    let app = format!(
        "echo \"$NOTIFY_SOCKET\" > {addr}; systemd-notify --ready; read x < {fifo}; systemd-notify STATUS=legit; exec sleep 30",
        addr = addr_file.display(),
        fifo = fifo.display()
    );
    let script = format!("echo $$ > {} && exec {LASTCALL} -- sh -c '{app}'", cgroup.procs());
    let mut lastcall = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .env("NOTIFY_SOCKET", &socket_path)
        .stdin(Stdio::null())
        .stderr(fs::File::create(dir.join("stderr")).unwrap())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 4096];
    let mut recv = || -> String {
        let n = systemd.recv(&mut buf).expect("a notification from the relay");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    assert!(recv().contains("READY=1"));
    let addr = fs::read_to_string(&addr_file).unwrap().trim().to_string();
    let notify = |prefix: &[&str], message: &str| {
        let status = Command::new(prefix[0])
            .args(&prefix[1..])
            .env("NOTIFY_SOCKET", &addr)
            .arg("sh")
            .arg("-c")
            .arg(format!("systemd-notify {message}; true"))
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
    };
    let nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"];
    notify(&nobody, "READY=1 STATUS=evil-nobody WATCHDOG=trigger EXTEND_TIMEOUT_USEC=999999999999");
    notify(&["env"], "READY=1 STATUS=evil-root WATCHDOG=trigger");
    // Not lastcall's descendant, but a member of its cgroup: systemd's NotifyAccess=all.
    notify(&["sh", "-c", &format!("echo $$ > {} && exec \"$@\"", cgroup.procs()), "-"], "STATUS=cgroup-member");
    fs::write(&fifo, "go\n").unwrap();
    let mut received = Vec::new();
    while !received.iter().any(|m: &String| m.contains("STATUS=legit")) {
        received.push(recv());
    }
    assert!(received.iter().all(|m| !m.contains("evil")), "{received:?}");
    assert!(received[0].contains("STATUS=cgroup-member"), "{received:?}");
    assert_eq!(received.len(), 2, "{received:?}");
    // The socket is a path in a directory only root may enter, and it goes when lastcall does.
    assert!(addr.starts_with('/'), "{addr}");
    let socket_dir = Path::new(&addr).parent().unwrap().to_path_buf();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(fs::metadata(&socket_dir).unwrap().permissions().mode() & 0o777, 0o700);
    kill(lastcall.id() as i32, libc::SIGTERM);
    let status = wait_until(10 * SEC, "lastcall to exit", || lastcall.try_wait().unwrap());
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)), 143);
    assert!(!socket_dir.exists(), "{} left behind", socket_dir.display());
    let stderr = fs::read_to_string(dir.join("stderr")).unwrap();
    assert!(stderr.contains("dropped a notify message from a process outside the service"), "{stderr}");
}

/// Point 8: an app sending 20,000 notify messages with no service manager listening gives a
/// handful of warnings, not 20,000 lines.
#[test]
fn undeliverable_notify_messages_give_a_handful_of_lines() {
    let dir = scratch("notify-flood");
    let nobody_listens = dir.join("nothing.sock");
    let app = "import os, socket\n\
               s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
               addr = os.environ['NOTIFY_SOCKET'].replace('@', '\\0', 1).encode()\n\
               for i in range(20000):\n    s.sendto(b'STATUS=%d' % i, addr)\n";
    let start = Instant::now();
    let (code, _, stderr) = run_to_end(
        Mode::Plain,
        &["python3", "-c", app],
        &[("NOTIFY_SOCKET", &nobody_listens.display().to_string())],
    );
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(!lines.is_empty() && lines.len() <= 5, "{} lines: {:?}", lines.len(), &lines[..lines.len().min(5)]);
    assert!(lines.iter().all(|l| l.contains("cannot notify the service manager")), "{lines:?}");
    assert!(stderr.contains("more like it not shown"), "{stderr}");
    assert!(start.elapsed() < 60 * SEC);
}
