//! systemd 252 booted as PID 1 of a systemd-nspawn container (a debootstrapped Debian 12 root,
//! cached), running the README's units verbatim with lastcall in them, driven with systemctl
//! through nsenter.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;
use crate::Case;

/// The Debian root, made by tests/hosts/debian-root the first time (about a minute, from the
/// Debian mirror the host's apt uses) and kept under target/hosts-cache.
pub fn debian_root() -> PathBuf {
    let root = cache().join("bookworm");
    if !root.join(".complete").exists() {
        ok(Command::new(repo().join("tests/hosts/debian-root")).arg(&root), 900 * SEC);
    }
    root
}

fn pidfile() -> PathBuf {
    cache().join("nspawn.pid")
}

/// The container's cgroups are named after the suite's pid, so that suites running at once (from
/// other worktrees) never share one; those of a suite that is gone are removed at boot.
const CGROUP_PREFIX: &str = "lastcall-hosts-";

fn own_cgroup() -> String {
    format!("{CGROUP_PREFIX}{}", std::process::id())
}

pub struct Nspawn {
    nspawn: Child,
    /// The container's PID 1 (systemd), as the host sees it.
    init: i32,
    started: Instant,
    /// When the current test began (seconds since the epoch): its journal starts there.
    since: std::cell::Cell<u64>,
}

/// The cgroup directories of this machine's hierarchies (every v1 controller and the unified
/// one) under which the container is placed: the launching shell's own cgroup in each, plus
/// `name`.
fn cgroup_dirs(name: &str) -> Vec<PathBuf> {
    let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut dirs = Vec::new();
    for hierarchy in fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
        let controller = hierarchy.file_name().to_string_lossy().into_owned();
        let relative = if controller == "unified" {
            own.lines().find(|l| l.starts_with("0::")).map(|l| l[3..].to_string())
        } else {
            own.lines()
                .filter_map(|l| l.splitn(3, ':').nth(1).map(|c| (c, l.splitn(3, ':').nth(2).unwrap_or("/"))))
                .find(|(c, _)| c.split(',').any(|c| c == controller || *c == format!("name={controller}")))
                .map(|(_, p)| p.to_string())
        };
        if let Some(rel) = relative {
            dirs.push(hierarchy.path().join(rel.trim_start_matches('/')).join(name));
        }
    }
    dirs
}

/// Removes a cgroup tree, deepest first (the container's systemd leaves its own inside).
fn remove_cgroup(dir: &Path) {
    let mut all = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        if let Ok(entries) = fs::read_dir(&d) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    todo.push(e.path());
                }
            }
            all.push(d);
        }
    }
    all.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for d in all {
        let _ = fs::remove_dir(&d);
    }
}

/// The units the tests use: the README's, verbatim, and variations named after what they vary.
fn install_units(root: &Path) {
    let units = root.join("etc/systemd/system");
    for old in fs::read_dir(&units).unwrap().flatten() {
        if old.file_name().to_string_lossy().starts_with("lc-") {
            let _ = fs::remove_file(old.path());
        }
    }
    let readme = fs::read_to_string(repo().join("README.md")).unwrap();
    let blocks: Vec<&str> = readme.split("```ini\n").skip(1).map(|b| b.split("```").next().unwrap()).collect();
    let nginx = blocks.iter().find(|b| b.contains("/usr/sbin/nginx")).expect("the README's nginx unit");
    let notify = blocks.iter().find(|b| b.contains("Type=notify")).expect("the README's Type=notify unit");
    assert!(nginx.contains("KillMode=mixed"));
    let write = |name: &str, text: &str| fs::write(units.join(name), text).unwrap();
    write("lc-nginx.service", nginx);
    write("lc-nginx-control-group.service", &nginx.replace("KillMode=mixed", "KillMode=control-group"));
    write("lc-notify.service", notify);
    write("lc-notify-short-timeout.service", &format!("{notify}TimeoutStopSec=2s\n"));
    write("lc-notify-watchdog.service", &format!("{notify}WatchdogSec=2s\n"));
    write("lc-sock.socket", "[Socket]\nListenStream=127.0.0.1:9000\n");
    write(
        "lc-sock.service",
        "[Service]\nExecStart=/usr/local/bin/lastcall -- python3 /opt/lc/unit_app.py socket\nKillMode=mixed\n",
    );
    write(
        "lc-daemon.service",
        "[Service]\nExecStart=/usr/local/bin/lastcall -- python3 /opt/lc/unit_app.py daemon\nKillMode=mixed\nTimeoutStopSec=20\n",
    );
    // An app with no TERM handler: it dies of the forwarded TERM.
    write("lc-term.service", "[Service]\nExecStart=/usr/local/bin/lastcall -- sleep infinity\nKillMode=mixed\n");
}

impl Nspawn {
    pub fn boot() -> Nspawn {
        if let Some(pid) = stale_pid(&pidfile(), "systemd-nspawn") {
            stop_process(pid, 20 * SEC);
        }
        // Left by suites that are gone (killed outright).
        for dir in cgroup_dirs(&own_cgroup()) {
            for stale in fs::read_dir(dir.parent().unwrap()).into_iter().flatten().flatten() {
                let name = stale.file_name().to_string_lossy().into_owned();
                let gone = name.strip_prefix(CGROUP_PREFIX).and_then(|p| p.parse::<i32>().ok()).is_some_and(|p| !alive(p));
                if gone {
                    remove_cgroup(&stale.path());
                }
            }
        }
        let root = debian_root();
        fs::create_dir_all(root.join("usr/local/bin")).unwrap();
        fs::copy(lastcall(), root.join("usr/local/bin/lastcall")).unwrap();
        fs::create_dir_all(root.join("opt/lc")).unwrap();
        fs::copy(repo().join("tests/hosts/unit_app.py"), root.join("opt/lc/unit_app.py")).unwrap();
        fs::write(root.join("usr/local/bin/myapp"), "#!/bin/sh\nexec python3 /opt/lc/unit_app.py notify\n").unwrap();
        ok(Command::new("chmod").arg("755").arg(root.join("usr/local/bin/myapp")), 10 * SEC);
        // A download big enough to be in flight for seconds at a limited rate.
        let big = fs::File::create(root.join("var/www/html/big.bin")).unwrap();
        big.set_len(32 << 20).unwrap();
        install_units(&root);

        // A shell moves itself into a cgroup of its own in every hierarchy, then becomes nspawn,
        // so that the container's systemd manages only that subtree.
        let mut script = String::from("set -e\n");
        for dir in cgroup_dirs(&own_cgroup()) {
            let d = dir.display();
            script.push_str(&format!("mkdir -p '{d}'\n"));
            if dir.parent().unwrap().join("cpuset.cpus").exists() {
                script.push_str(&format!("cat '{d}/../cpuset.cpus' > '{d}/cpuset.cpus'\ncat '{d}/../cpuset.mems' > '{d}/cpuset.mems'\n"));
            }
            script.push_str(&format!("echo $$ > '{d}/cgroup.procs'\n"));
        }
        script.push_str(&format!(
            "exec systemd-nspawn -D '{}' -b --register=no --keep-unit --private-network --console=pipe\n",
            root.display()
        ));
        let log = fs::File::create(cache().join("nspawn.log")).unwrap();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &script]).stdin(Stdio::null()).stdout(log.try_clone().unwrap()).stderr(log);
        own_session(&mut cmd);
        let started = Instant::now();
        let nspawn = cmd.spawn().expect("systemd-nspawn (apt-get install systemd-container)");
        let outer = nspawn.id() as i32;
        fs::write(pidfile(), outer.to_string()).unwrap();
        let init = wait_until(60 * SEC, "nspawn's container to start", || {
            let kids = fs::read_to_string(format!("/proc/{outer}/task/{outer}/children")).ok()?;
            let pid: i32 = kids.split_whitespace().next()?.parse().ok()?;
            (fs::read_to_string(format!("/proc/{pid}/comm")).ok()?.trim() == "systemd").then_some(pid)
        });
        let machine = Nspawn { nspawn, init, started, since: std::cell::Cell::new(0) };
        wait_until(120 * SEC, "systemd to finish booting", || {
            let state = machine.output("systemctl is-system-running");
            matches!(state.trim(), "running" | "degraded").then_some(())
        });
        print!("(booted in {:.1}s) ", machine.started.elapsed().as_secs_f64());
        machine
    }

    /// A shell command inside the container: its stdout and stderr, whatever its status.
    pub fn output(&self, script: &str) -> String {
        let out = output(Command::new("nsenter").args(["-a", "-t", &self.init.to_string(), "sh", "-c", script]), 120 * SEC);
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    }

    /// A shell command inside the container that must succeed: its stdout, trimmed.
    pub fn ok(&self, script: &str) -> String {
        ok(Command::new("nsenter").args(["-a", "-t", &self.init.to_string(), "sh", "-c", script]), 120 * SEC)
    }

    /// A command inside the container, started in the background.
    pub fn spawn(&self, script: &str) -> Child {
        Command::new("nsenter")
            .args(["-a", "-t", &self.init.to_string(), "sh", "-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    pub fn show(&self, unit: &str, property: &str) -> String {
        self.ok(&format!("systemctl show -p {property} --value {unit}"))
    }

    /// `systemctl stop UNIT`: how long it took.
    pub fn stop(&self, unit: &str) -> Duration {
        let t = Instant::now();
        self.ok(&format!("systemctl stop {unit}"));
        t.elapsed()
    }

    pub fn app_log(&self, mode: &str) -> String {
        self.output(&format!("cat /run/lc/{mode}.log 2>/dev/null"))
    }

    pub fn wait_app_log(&self, mode: &str, needle: &str, limit: Duration) {
        wait_until(limit, &format!("'{needle}' in /run/lc/{mode}.log"), || self.app_log(mode).contains(needle).then_some(()));
    }

    /// lastcall's lines in the unit's journal.
    pub fn journal(&self, unit: &str) -> String {
        self.output(&format!("journalctl -q -o cat --no-pager --since @{} -u {unit}", self.since.get()))
    }

    /// Starts from a clean slate: the unit stopped and its failure forgotten, the logs gone.
    fn reset(&self, units: &[&str]) {
        let list = units.join(" ");
        self.output(&format!("systemctl stop {list}; systemctl reset-failed {list}; rm -rf /run/lc"));
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
        self.since.set(now.as_secs());
    }

    /// The unit ended the way a clean stop ends: inactive, not failed.
    fn assert_stopped_cleanly(&self, unit: &str) {
        let (state, result) = (self.show(unit, "ActiveState"), self.show(unit, "Result"));
        assert_eq!((state.as_str(), result.as_str()), ("inactive", "success"), "{unit}:\n{}", self.journal(unit));
    }
}

impl Drop for Nspawn {
    fn drop(&mut self) {
        let _ = output(Command::new("nsenter").args(["-a", "-t", &self.init.to_string(), "systemctl", "poweroff"]), 30 * SEC);
        let deadline = Instant::now() + 30 * SEC;
        while self.nspawn.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if self.nspawn.try_wait().ok().flatten().is_none() {
            let _ = self.nspawn.kill();
            let _ = self.nspawn.wait();
        }
        for dir in cgroup_dirs(&own_cgroup()) {
            remove_cgroup(&dir);
        }
        let _ = fs::remove_file(pidfile());
    }
}

pub const CASES: &[Case] = cases![
    systemd_nginx_unit_holds_the_pre_stop_drains_a_download_and_reloads,
    systemd_kill_mode_control_group_does_not_hold_the_pre_stop,
    systemd_notify_ready_status_reloading_and_stopping_are_relayed,
    systemd_notify_watchdog_is_relayed,
    systemd_stopping_and_extend_timeout_rescue_a_short_timeout_stop_sec,
    systemd_socket_activation,
    systemd_double_forked_daemon_is_adopted_and_stopped,
    systemd_stop_of_an_app_that_dies_of_term_leaves_the_unit_inactive,
];

fn nginx_workers(m: &Nspawn) -> Vec<String> {
    let mut pids: Vec<String> = m.output("pgrep -f 'nginx: worker'").split_whitespace().map(str::to_string).collect();
    pids.sort();
    pids
}

fn systemd_nginx_unit_holds_the_pre_stop_drains_a_download_and_reloads(hosts: &mut Hosts) {
    let m = hosts.nspawn();
    m.reset(&["lc-nginx"]);
    m.ok("systemctl start lc-nginx");
    wait_until(20 * SEC, "nginx to answer", || (m.output("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1/") == "200").then_some(()));
    assert_eq!(m.output("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8081/ready"), "200");

    // systemctl reload: HUP through lastcall to nginx's master, which starts new workers.
    let master = m.show("lc-nginx", "MainPID");
    let before = nginx_workers(m);
    m.ok("systemctl reload lc-nginx");
    wait_until(20 * SEC, "new nginx workers", || {
        let now = nginx_workers(m);
        (!now.is_empty() && now.iter().all(|p| !before.contains(p))).then_some(())
    });
    assert_eq!(m.show("lc-nginx", "MainPID"), master, "lastcall is still the main process");

    // A download in flight (32 MiB at 3 MiB/s: 11 s) when the stop comes, and still in flight
    // (more than the socket buffers hold) when the pre-stop ends 6 s later.
    let download = m.spawn("curl -s -o /dev/null -w '%{http_code} %{size_download}' --limit-rate 3M http://127.0.0.1/big.bin");
    // In flight: a connection to nginx's port 80 (0050) established (01), as the container's
    // kernel sees it, not a sleep.
    wait_until(20 * SEC, "the download to be in flight", || {
        let tcp = m.output("cat /proc/net/tcp /proc/net/tcp6");
        tcp.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[1].ends_with(":0050") && f[3] == "01"
        })
        .then_some(())
    });
    let stop_started = Instant::now();
    let stop = m.spawn("systemctl stop lc-nginx");
    // During the pre-stop (5 s): unready, but nginx still serves new requests. Inside it on
    // events, not by the clock: /ready 503 says lastcall has the TERM, and an answer from nginx
    // after that says QUIT has not been forwarded (after QUIT nginx accepts nothing new).
    wait_until(30 * SEC, "/ready 503", || (m.output("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8081/ready") == "503").then_some(()));
    let unready_after = stop_started.elapsed();
    let served = m.output("curl -s -m 10 -o /dev/null -w '%{http_code}' http://127.0.0.1/");
    assert_eq!(served, "200", "nginx serves during the pre-stop (/ready 503 seen {unready_after:?} after the stop began; the pre-stop is 5 s)");
    let stop = stop.wait_with_output().unwrap();
    let took = stop_started.elapsed();
    assert!(stop.status.success(), "{}", String::from_utf8_lossy(&stop.stderr));
    let download = download.wait_with_output().unwrap();
    let journal = m.journal("lc-nginx");
    assert_eq!(String::from_utf8_lossy(&download.stdout), "200 33554432", "the download completed:\n{journal}");
    assert!(took >= Duration::from_secs(5), "the pre-stop held: {took:?}");
    // nginx drained: an idle nginx leaves within milliseconds of QUIT; this one stayed until it
    // had handed the rest of the download to the kernel (whose socket buffers hold the last
    // several MiB, so curl finishes seconds later still).
    let timed = m.output(&format!("journalctl -q -o short-monotonic --no-pager --since @{} -u lc-nginx", m.since.get()));
    let at = |needle: &str| -> f64 {
        let line = timed.lines().filter(|l| l.contains(needle)).last().unwrap_or_else(|| panic!("no '{needle}':\n{timed}"));
        line.trim_start_matches('[').split(']').next().unwrap().trim().parse().unwrap()
    };
    let drained = at("child exited with status") - at("forwarded SIGQUIT");
    assert!(drained > 0.3, "nginx exited {drained}s after QUIT: the download was not in flight\n{timed}");
    m.assert_stopped_cleanly("lc-nginx");
    assert_timeline_once(&journal, &["received SIGTERM", "pre-stop ended", "forwarded SIGQUIT", "child exited with status 0"]);
}

fn systemd_kill_mode_control_group_does_not_hold_the_pre_stop(hosts: &mut Hosts) {
    let m = hosts.nspawn();
    let unit = "lc-nginx-control-group";
    m.reset(&[unit]);
    m.ok(&format!("systemctl start {unit}"));
    wait_until(20 * SEC, "nginx to answer", || (m.output("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1/") == "200").then_some(()));
    // systemd sends TERM to nginx directly, alongside lastcall: nginx is gone at once. On
    // lastcall's timeline rather than the stop's wall time: the pre-stop began, the child
    // exited, and the pre-stop never ended (it would have, had it held).
    let took = m.stop(unit);
    let journal = m.journal(unit);
    assert!(journal.contains("pre-stop: the app keeps running for 5.000s"), "{journal}");
    assert!(journal.contains("child exited") || journal.contains("child killed by"), "{journal}");
    assert!(!journal.contains("pre-stop ended"), "as documented, the pre-stop does not hold: {took:?}\n{journal}");
}

fn systemd_notify_ready_status_reloading_and_stopping_are_relayed(hosts: &mut Hosts) {
    let m = hosts.nspawn();
    let unit = "lc-notify";
    m.reset(&[unit]);
    let t = Instant::now();
    m.ok(&format!("systemctl start {unit}"));
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(1400), "systemctl start returned before READY=1: {took:?}");
    assert!(m.app_log("notify").contains("app ready"), "{}", m.app_log("notify"));
    assert_eq!(m.show(unit, "StatusText"), "serving");
    // RELOADING=1 from the app (on HUP, which lastcall forwards): systemd shows it reloading.
    m.ok(&format!("systemctl kill -s HUP --kill-who=main {unit}"));
    wait_until(10 * SEC, "reloading", || (m.show(unit, "ActiveState") == "reloading").then_some(()));
    assert_eq!(m.show(unit, "StatusText"), "reloading");
    wait_until(10 * SEC, "active again", || (m.show(unit, "ActiveState") == "active").then_some(()));
    assert_eq!(m.show(unit, "StatusText"), "serving again");
    // STOPPING=1: a TERM that systemd did not send itself (kill --kill-who=main) still shows the
    // unit deactivating at once, because lastcall says so; the app is untouched for the
    // pre-stop (5 s), then drains and exits 0.
    let t = Instant::now();
    m.ok(&format!("systemctl kill -s TERM --kill-who=main {unit}"));
    wait_until(30 * SEC, "deactivating", || (m.show(unit, "ActiveState") == "deactivating").then_some(()));
    // On events: deactivating was shown while the app had not had its TERM yet (the 5 s pre-stop).
    let seen = t.elapsed();
    let log = m.app_log("notify");
    assert!(!log.contains("app term"), "deactivating seen {seen:?} after the TERM, but not during the pre-stop:\n{log}");
    wait_until(20 * SEC, "inactive", || (m.show(unit, "ActiveState") == "inactive").then_some(()));
    let log = m.app_log("notify");
    assert!(log.contains("app term") && log.contains("app drained"), "{log}");
    m.assert_stopped_cleanly(unit);
}

fn systemd_notify_watchdog_is_relayed(hosts: &mut Hosts) {
    let m = hosts.nspawn();
    let unit = "lc-notify-watchdog";
    m.reset(&[unit]);
    m.ok(&format!("systemctl start {unit}"));
    let first = wait_until(10 * SEC, "a first watchdog timestamp", || {
        m.show(unit, "WatchdogTimestampMonotonic").parse::<u64>().ok().filter(|&t| t > 0)
    });
    // WatchdogSec=2s: without the relayed pings systemd would kill the unit within 2 s. On
    // systemd's own clock rather than a sleep: a relayed WATCHDOG=1 stamped 5 s after the first,
    // the unit still active.
    wait_until(60 * SEC, "a relayed ping 5 s after the first", || {
        let last: u64 = m.show(unit, "WatchdogTimestampMonotonic").parse().ok()?;
        (last >= first + 5_000_000 || m.show(unit, "ActiveState") != "active").then_some(())
    });
    assert_eq!(m.show(unit, "ActiveState"), "active", "{}", m.journal(unit));
    m.stop(unit);
    m.assert_stopped_cleanly(unit);
}

fn systemd_stopping_and_extend_timeout_rescue_a_short_timeout_stop_sec(hosts: &mut Hosts) {
    let m = hosts.nspawn();
    let unit = "lc-notify-short-timeout";
    m.reset(&[unit]);
    m.ok(&format!("systemctl start {unit}"));
    // TimeoutStopSec=2s, but pre-stop 5 s + a 1 s drain: EXTEND_TIMEOUT_USEC covers it.
    let took = m.stop(unit);
    let log = m.app_log("notify");
    assert!(took >= Duration::from_secs(5), "{took:?}");
    assert!(log.contains("app drained"), "the drain finished:\n{log}\n{}", m.journal(unit));
    m.assert_stopped_cleanly(unit);
}

fn systemd_socket_activation(hosts: &mut Hosts) {
    let m = hosts.nspawn();
    m.reset(&["lc-sock.socket", "lc-sock.service"]);
    m.ok("systemctl start lc-sock.socket");
    // The first connection starts the service, which answers on the inherited fd 3.
    let answer = m.ok("python3 -c \"import socket; s=socket.create_connection(('127.0.0.1', 9000), timeout=10); print(s.makefile().readline().strip())\"");
    let (pid, listen_pid) = answer.split_once(' ').unwrap();
    assert_eq!(pid.trim_start_matches("pid="), listen_pid.trim_start_matches("listen_pid="), "LISTEN_PID is the app's pid: {answer}");
    assert_ne!(m.show("lc-sock.service", "MainPID"), pid.trim_start_matches("pid="), "lastcall is the main process");
    // systemd closes its own copy of the listener; the app still serves through its own.
    m.output("systemctl stop lc-sock.socket");
    let stop = m.spawn("systemctl stop lc-sock.service");
    m.wait_app_log("socket", "app closed its listener", 10 * SEC);
    // Nobody holds the listening socket any more: a new client is refused, not left hanging.
    let attempt = m.output(
        "python3 -c \"
import socket
try:
    socket.create_connection(('127.0.0.1', 9000), timeout=2)
    print('connected')
except ConnectionRefusedError:
    print('refused')
except OSError as e:
    print('error', e)
\"",
    );
    let out = stop.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(attempt.trim(), "refused", "a connect after the app closed its listener");
    assert!(m.app_log("socket").contains("app drained"));
    m.assert_stopped_cleanly("lc-sock.service");
}

fn systemd_double_forked_daemon_is_adopted_and_stopped(hosts: &mut Hosts) {
    let m = hosts.nspawn();
    let unit = "lc-daemon";
    m.reset(&[unit]);
    m.ok(&format!("systemctl start {unit}"));
    m.wait_app_log("daemon", "daemon started", 10 * SEC);
    m.wait_app_log("daemon", "app started", 10 * SEC);
    let log = m.app_log("daemon");
    let daemon: String = log.lines().find(|l| l.starts_with("daemon started")).unwrap().split_whitespace().nth(2).unwrap().to_string();
    let main = m.show(unit, "MainPID");
    wait_until(10 * SEC, "the daemon to be adopted by lastcall", || {
        let status = m.output(&format!("cat /proc/{daemon}/status"));
        status.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["PPid:", &main]).then_some(())
    });
    let cgroup = m.show(unit, "ControlGroup");
    m.stop(unit);
    let log = m.app_log("daemon");
    assert!(log.contains("daemon term") && log.contains("daemon drained"), "lastcall stopped the daemon:\n{log}");
    assert!(log.contains("app drained"), "{log}");
    let journal = m.journal(unit);
    // lastcall's own lines name its SIGKILL deadline; systemd's would say it sent one.
    assert!(!journal.lines().any(|l| l.contains("SIGKILL") && !l.contains("lastcall:")), "systemd killed nothing:\n{journal}");
    assert!(!journal.contains("left-over process"), "{journal}");
    let procs = m.output(&format!("cat /sys/fs/cgroup/unified{cgroup}/cgroup.procs /sys/fs/cgroup/systemd{cgroup}/cgroup.procs 2>/dev/null"));
    assert_eq!(procs.trim(), "", "the unit's cgroup is empty");
    m.assert_stopped_cleanly(unit);
}

fn systemd_stop_of_an_app_that_dies_of_term_leaves_the_unit_inactive(hosts: &mut Hosts) {
    let m = hosts.nspawn();
    let unit = "lc-term";
    m.reset(&[unit]);
    m.ok(&format!("systemctl start {unit}"));
    wait_until(10 * SEC, "the app to run", || m.output("pgrep -x sleep").trim().parse::<i32>().ok());
    m.stop(unit);
    m.assert_stopped_cleanly(unit);
}
