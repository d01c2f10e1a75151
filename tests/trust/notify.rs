//! The notify relay: only the service's processes are relayed, undeliverable messages give a
//! handful of lines, a killed lastcall's directory is removed by the next, and no /proc is said.

use super::*;

/// Point 1: the notify relay speaks only for the service's processes. An unrelated user
/// (nobody, via setpriv) and an unrelated root process send READY=1, WATCHDOG=trigger and
/// STATUS=; none of it reaches the service manager, while the app's own messages and those of
/// a process in lastcall's cgroup do.
#[test]
fn the_notify_relay_relays_only_the_services_processes() {
    let dir = scratch("notify-trust");
    let (systemd, socket_path) = fake_systemd(&dir);
    let fifo = dir.join("go");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let addr_file = dir.join("addr");
    let cgroup = Cgroup::below_own("notify");
    let app = format!(
        "echo \"$NOTIFY_SOCKET\" > {addr}; systemd-notify --ready; read x < {fifo}; systemd-notify STATUS=legit; exec sleep 30",
        addr = addr_file.display(),
        fifo = fifo.display()
    );
    let script = format!("echo $$ > {} && exec {LASTCALL} -- sh -c '{app}'", cgroup.procs_file().display());
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
    notify(&["sh", "-c", &format!("echo $$ > {} && exec \"$@\"", cgroup.procs_file().display()), "-"], "STATUS=cgroup-member");
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
    let status = wait_child(&mut lastcall, 10 * SEC);
    assert_eq!(exit_code(status), 143);
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

fn notify_dirs(base: &Path) -> Vec<std::path::PathBuf> {
    let mut dirs: Vec<_> = fs::read_dir(base)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("lastcall-notify-"))
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs
}

/// A lastcall killed by SIGKILL leaves its notify directory behind; the next lastcall to use the
/// same place removes it, because nobody holds its lock any more, while a live lastcall's
/// directory and one of another user's stay (before: every SIGKILL left one for good). The sweep
/// runs once the app has started, a moment after the directory appears, so each step waits for
/// a stale directory to go: that says the sweep it is waiting for has run.
#[test]
fn a_killed_lastcalls_notify_directory_is_removed_by_the_next() {
    use std::os::unix::net::UnixDatagram;
    let dir = scratch("stale-notify");
    let base = dir.join("runtime");
    fs::create_dir(&base).unwrap();
    let upstream_path = dir.join("upstream");
    let _upstream = UnixDatagram::bind(&upstream_path).unwrap();
    let upstream = upstream_path.display().to_string();
    let runtime = base.display().to_string();
    let start_one = |name: &str| {
        let d = dir.join(name);
        fs::create_dir(&d).unwrap();
        Spec::new(Mode::Plain, &d, &["sleep", "30"]).env("NOTIFY_SOCKET", &upstream).env("RUNTIME_DIRECTORY", &runtime).start()
    };
    // Starts one, SIGKILLs it once its socket is there, and returns its directory.
    let killed_one = |name: &str| {
        let before = notify_dirs(&base);
        let mut killed = start_one(name);
        let made = wait_until(10 * SEC, "the notify socket", || {
            notify_dirs(&base).into_iter().find(|d| !before.contains(d) && d.join("notify").exists())
        });
        // lastcall first: killed after its app, it could see the app's death and clean up
        // before its own SIGKILL came.
        let app = wait_until(10 * SEC, "the app to start", || Some(descendants(killed.pid)).filter(|d| !d.is_empty()));
        for pid in [killed.pid].into_iter().chain(app) {
            kill(pid, libc::SIGKILL);
        }
        assert_eq!(killed.wait(10 * SEC), 137);
        assert!(made.join("notify").exists(), "left behind");
        made
    };
    // One of another user's, named as lastcall names its own, with a socket in it.
    let foreign = base.join("lastcall-notify-00000000deadbeef");
    fs::create_dir(&foreign).unwrap();
    drop(UnixDatagram::bind(foreign.join("notify")).unwrap());
    std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
    fs::set_permissions(&foreign, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let stale = killed_one("killed");
    let mut live = start_one("live");
    // The next one removed the stale one, and made its own.
    wait_until(10 * SEC, "the stale directory to go, and the live one's", || {
        (!stale.exists() && notify_dirs(&base).len() == 2).then_some(())
    });
    let live_dir = notify_dirs(&base).into_iter().find(|d| *d != foreign).unwrap();
    let stale = killed_one("killed-too");
    let mut next = start_one("next");
    wait_until(10 * SEC, "the second stale directory to go, and the next one's", || {
        (!stale.exists() && notify_dirs(&base).len() == 3).then_some(())
    });
    // That sweep left the live one's and the other user's.
    let left = notify_dirs(&base);
    assert!(left.contains(&foreign) && foreign.join("notify").exists());
    assert!(left.contains(&live_dir) && live_dir.join("notify").exists(), "a live one's directory stays");
    for run in [&mut live, &mut next] {
        run.signal(libc::SIGTERM);
        assert_eq!(run.wait(10 * SEC), 143, "{}", run.stderr());
    }
    assert_eq!(notify_dirs(&base), vec![foreign], "each live one removed its own at exit");
}

/// Without /proc the relay cannot tell the service's processes from others, so it drops every
/// message, and says so once (before: nothing said why).
#[test]
fn without_proc_dropped_notify_messages_are_said_once() {
    use std::os::unix::net::UnixDatagram;
    let dir = scratch("notify-no-proc");
    let upstream_path = dir.join("upstream");
    let upstream = UnixDatagram::bind(&upstream_path).unwrap();
    upstream.set_nonblocking(true).unwrap();
    let sender = "import os, socket, time\n\
                  s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
                  for i in range(20):\n    \
                      s.sendto(b'STATUS=%d' % i, os.environ['NOTIFY_SOCKET'])\n    \
                      time.sleep(0.01)\n";
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", r#"umount -l /proc && exec "$@""#, "sh", LASTCALL, "--", "python3", "-c", sender])
        .env("NOTIFY_SOCKET", &upstream_path)
        .env("RUNTIME_DIRECTORY", &dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stderr.matches("/proc cannot be read").count(), 1, "{stderr}");
    assert!(!stderr.contains("outside the service"), "a misleading reason: {stderr}");
    assert!(upstream.recv(&mut [0u8; 64]).is_err(), "a message was relayed without a check");
}

/// A process's state letter in /proc (R, S, T, Z...), if it is there.
fn proc_state(pid: i32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// The app's last words: a notify message sent just before it exits is relayed, even when
/// lastcall hears of the exit first. The test holds lastcall stopped while the app sends and
/// dies, so that SIGCHLD (17) and the socket's real-time signal are both pending when it goes
/// on, and SIGCHLD is taken first; the sender is then reaped before its message is read (before:
/// lastcall exited with the message unread, or refused it as from a stranger).
#[test]
fn the_apps_last_message_before_it_exits_is_relayed() {
    for others_left in [false, true] {
        let dir = scratch(if others_left { "notify-last-words-others" } else { "notify-last-words" });
        let (upstream, upstream_path) = fake_systemd(&dir);
        let go = dir.join("go");
        assert!(Command::new("mkfifo").arg(&go).status().unwrap().success());
        // With others left, a grandchild outlives the app until the app's end closes the pipe (or
        // lastcall's TERM to the rest comes first), so lastcall goes on after the app's exit.
        let linger = if others_left { "os.fork() or (os.close(w), os.read(r, 1), os._exit(0))\n" } else { "" };
        let app = format!(
            "import os, socket\n\
             r, w = os.pipe()\n\
             {linger}\
             print('ready', flush=True)\n\
             open({go:?}).read(1)\n\
             s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
             s.sendto(b'STATUS=last words', os.environ['NOTIFY_SOCKET'])\n\
             os._exit(3)\n"
        );
        let mut run = Spec::new(Mode::Plain, &dir, &["--", "python3", "-c", &app]).env("NOTIFY_SOCKET", &upstream_path.display().to_string()).start();
        let _tree = KillTree(run.pid);
        wait_until(10 * SEC, "the app's ready", || run.stdout().contains("ready").then_some(()));
        let app_pid = wait_until(10 * SEC, "the app's pid", || {
            descendants(run.pid).into_iter().find(|&p| fs::read_to_string(format!("/proc/{p}/cmdline")).is_ok_and(|c| c.contains("last words")) && proc_state(p).is_some_and(|s| s != 'Z'))
        });
        run.signal(libc::SIGSTOP);
        wait_until(10 * SEC, "lastcall to stop", || (proc_state(run.pid) == Some('T')).then_some(()));
        fs::write(&go, "g").unwrap();
        wait_until(10 * SEC, "the app to exit", || (proc_state(app_pid) == Some('Z')).then_some(()));
        run.signal(libc::SIGCONT);
        let mut buf = [0u8; 256];
        let n = upstream.recv(&mut buf).unwrap_or_else(|e| panic!("the app's last message was not relayed ({e}); lastcall's log:\n{}", run.stderr()));
        assert_eq!(&buf[..n], b"STATUS=last words\n", "{}", run.stderr());
        assert_eq!(run.wait(10 * SEC), 3, "{}", run.stderr());
        assert!(!run.stderr().contains("outside the service"), "{}", run.stderr());
    }
}
