//! lastcall in the real world, on loopback only: the nginx 502 experiment reproduced, a rolling
//! restart behind HAProxy with zero failures, nginx itself under lastcall, a real OCI container
//! run by runc, and the systemd service shape.
//!
//! Needs nginx-light, haproxy, runc and busybox-static (scripts/setup-test-machine installs them).

mod common;

use std::fmt::Write as _;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;

const SEC: Duration = Duration::from_secs(1);

fn accepting(port: u16) -> bool {
    TcpStream::connect_timeout(&SocketAddr::from(([127, 0, 0, 1], port)), SEC / 4).is_ok()
}

fn wait_accepting(port: u16, what: &str) {
    wait_until(15 * SEC, what, || accepting(port).then_some(()));
}

fn slow_app() -> String {
    format!("{}/examples/slow_app.py", env!("CARGO_MANIFEST_DIR"))
}

/// A child process killed (with its namespace, for unshare) when the test is done with it.
struct Proc {
    child: Child,
    name: &'static str,
}

impl Proc {
    fn spawn(name: &'static str, cmd: &mut Command) -> Proc {
        let child = cmd.stdin(Stdio::null()).spawn().unwrap_or_else(|e| panic!("start {name}: {e}"));
        Proc { child, name }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The pid of the process unshare started: PID 1 of the new namespace.
    fn namespace_init(&self) -> i32 {
        let outer = self.pid();
        wait_until(10 * SEC, "unshare's child", || {
            let kids = fs::read_to_string(format!("/proc/{outer}/task/{outer}/children")).ok()?;
            kids.split_whitespace().next()?.parse().ok()
        })
    }

    fn wait(&mut self, limit: Duration) -> i32 {
        let child = &mut self.child;
        let name = self.name;
        let status = wait_until(limit, &format!("{name} to exit"), || child.try_wait().unwrap());
        status.code().unwrap_or(-1)
    }

    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Proc {
    /// TERM first, so that nginx and haproxy take their workers with them; KILL if that fails.
    fn drop(&mut self) {
        if self.running() {
            stop_process(self.pid(), 3 * SEC);
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The slow app on `port`, as PID 1 of a new namespace: under lastcall with `lastcall_args`, or
/// alone when that is None. Its log goes to `log`.
fn start_app(port: u16, drain: bool, delay: &str, lastcall_args: Option<&[&str]>, log: &Path) -> Proc {
    let mut cmd = Command::new("unshare");
    cmd.args(["--pid", "--fork", "--mount-proc", "--kill-child", "--"]);
    if let Some(args) = lastcall_args {
        cmd.arg(LASTCALL).args(args).arg("--");
    }
    cmd.args(["python3", &slow_app()])
        .env("PORT", port.to_string())
        .env("DELAY", delay)
        .env("DRAIN", if drain { "1" } else { "0" })
        .stdout(Stdio::null())
        .stderr(fs::File::create(log).unwrap());
    let p = Proc::spawn("app", &mut cmd);
    wait_accepting(port, "the app to listen");
    p
}

fn start_nginx(dir: &Path, port: u16, upstream: u16) -> Proc {
    let conf = nginx::proxy_config(dir, &dir.display().to_string(), true, port, upstream);
    let mut cmd = Command::new("nginx");
    cmd.arg("-c").arg(&conf).arg("-p").arg(dir).stdout(Stdio::null()).stderr(Stdio::null());
    let p = Proc::spawn("nginx", &mut cmd);
    wait_accepting(port, "nginx to listen");
    p
}

#[derive(Clone, Debug)]
struct Outcome {
    req: String,
    /// None: the connection died with no HTTP response (curl's 000).
    status: Option<u16>,
    elapsed: Duration,
    body: String,
}

fn request(port: u16, req: &str) -> Outcome {
    let started = Instant::now();
    let result = (|| -> std::io::Result<(u16, String)> {
        let mut s = TcpStream::connect_timeout(&SocketAddr::from(([127, 0, 0, 1], port)), 2 * SEC)?;
        s.set_read_timeout(Some(15 * SEC))?;
        write!(s, "GET /{req} HTTP/1.0\r\nHost: test\r\nX-Req: {req}\r\n\r\n")?;
        let mut response = String::new();
        s.read_to_string(&mut response)?;
        let status = response.split_whitespace().nth(1).and_then(|c| c.parse().ok());
        let body = response.split("\r\n\r\n").nth(1).unwrap_or_default().to_string();
        status.map(|c| (c, body)).ok_or_else(|| std::io::Error::other("no status line"))
    })();
    let (status, body) = match result {
        Ok((c, b)) => (Some(c), b),
        Err(_) => (None, String::new()),
    };
    Outcome { req: req.to_string(), status, elapsed: started.elapsed(), body }
}

/// Fires `n` concurrent requests and returns their outcomes once all are done.
fn fire(port: u16, n: usize, prefix: &str) -> std::thread::JoinHandle<Vec<Outcome>> {
    let prefix = prefix.to_string();
    std::thread::spawn(move || {
        let handles: Vec<_> = (1..=n)
            .map(|i| {
                let req = format!("{prefix}{i}");
                std::thread::spawn(move || request(port, &req))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// The table the way a person reads it: status, time, request.
fn table(title: &str, outcomes: &[Outcome]) -> String {
    let mut sorted = outcomes.to_vec();
    sorted.sort_by_key(|o| o.elapsed);
    let mut text = format!("--- {title}\n");
    for o in &sorted {
        let status = o.status.map_or("000".to_string(), |c| c.to_string());
        let _ = writeln!(text, "HTTP {status}  {:.3}s  req={}", o.elapsed.as_secs_f64(), o.req);
    }
    text
}

/// Waits until the app's log holds `n` START lines: that many requests have reached it.
fn wait_started(log: &Path, n: usize, what: &str) {
    wait_until(10 * SEC, what, || (fs::read_to_string(log).unwrap_or_default().matches("START").count() >= n).then_some(()));
}

#[test]
fn the_pid_1_trap_an_app_with_no_handler_ignores_sigterm() {
    let dir = scratch("pid1-trap");
    let port = free_port();
    let mut app = start_app(port, false, "0.1", None, &dir.join("app.log"));
    let pid1 = app.namespace_init();
    kill(pid1, libc::SIGTERM);
    let after = request(port, "after-term");
    println!("{}", table("app as PID 1, no init, no handler: SIGTERM sent", std::slice::from_ref(&after)));
    assert_eq!(after.status, Some(200), "the app kept serving");
    assert!(app.running(), "SIGTERM was ignored by PID 1");
}

/// The experiment's run: the app (`delay` seconds a request) under lastcall behind nginx, six
/// concurrent requests, SIGTERM to lastcall once the app has started all six, so that they are
/// in flight for seconds whatever the host's speed. Returns the outcomes and the app, which is on
/// its way out.
fn six_requests_and_a_term(dir: &Path, drain: bool, delay: &str, name: &str) -> (Vec<Outcome>, Proc) {
    let (app_port, proxy_port) = (free_port(), free_port());
    let log = dir.join(format!("{name}.log"));
    let app = start_app(app_port, drain, delay, Some(&[]), &log);
    let _nginx = start_nginx(dir, proxy_port, app_port);
    let requests = fire(proxy_port, 6, "");
    wait_started(&log, 6, "six requests in flight");
    kill(app.namespace_init(), libc::SIGTERM);
    (requests.join().unwrap(), app)
}

#[test]
fn the_502_experiment() {
    let _alone = common::contention::alone();
    let dir = scratch("experiment");

    // No drain, under lastcall: the signal reaches the app, which dies mid-request. Ten seconds
    // of work a request, so that "early" has room: they end at the TERM, well before 5 s.
    let (outcomes, mut app) = six_requests_and_a_term(&dir, false, "10", "nodrain");
    println!("{}", table("no-drain app under lastcall, SIGTERM once all six started", &outcomes));
    assert!(outcomes.iter().all(|o| o.status == Some(502)), "all 502");
    assert!(outcomes.iter().all(|o| o.elapsed < 5 * SEC), "and early, long before the 10s of work");
    let log = fs::read_to_string(dir.join("nodrain.log")).unwrap();
    assert_eq!(log.matches("FINISH").count(), 0, "no FINISH line ever prints:\n{log}");
    let errors = fs::read_to_string(dir.join("nginx-error.log")).unwrap();
    assert!(errors.contains("upstream prematurely closed connection"), "{errors}");
    assert_eq!(app.wait(10 * SEC), 143);

    // Drain, under lastcall: the same six requests all finish.
    let (outcomes, mut app) = six_requests_and_a_term(&dir, true, "3", "drain");
    println!("{}", table("drain app under lastcall, SIGTERM once all six started", &outcomes));
    assert!(outcomes.iter().all(|o| o.status == Some(200)), "all 200");
    assert!(outcomes.iter().all(|o| o.elapsed >= 3 * SEC), "each after its full 3s of work");
    let log = fs::read_to_string(dir.join("drain.log")).unwrap();
    assert_eq!(log.matches("FINISH").count(), 6, "each finished in the app:\n{log}");
    assert_eq!(app.wait(10 * SEC), 0);

    // Drain, but a new request arrives during the drain: the listener is closed, so it fails.
    {
        let (app_port, proxy_port) = (free_port(), free_port());
        let mut app = start_app(app_port, true, "2", Some(&[]), &dir.join("new.log"));
        let _nginx = start_nginx(&dir, proxy_port, app_port);
        let in_flight = fire(proxy_port, 2, "in-flight-");
        wait_started(&dir.join("new.log"), 2, "two requests in flight");
        kill(app.namespace_init(), libc::SIGTERM);
        wait_until(5 * SEC, "the accept loop to stop", || {
            fs::read_to_string(dir.join("new.log")).unwrap_or_default().contains("accept loop stopped").then_some(())
        });
        let new = request(proxy_port, "new");
        let mut outcomes = in_flight.join().unwrap();
        outcomes.push(new.clone());
        println!("{}", table("drain app, a new request during the drain", &outcomes));
        assert_eq!(new.status, Some(502), "draining alone is not enough");
        assert!(outcomes.iter().filter(|o| o.req.starts_with("in-flight")).all(|o| o.status == Some(200)));
        assert_eq!(app.wait(10 * SEC), 0);
    }
}

/// HAProxy in front of two instances, checking lastcall's /ready on each.
fn haproxy_config(dir: &Path, port: u16, servers: &[(&str, u16, u16, bool)]) -> PathBuf {
    let d = dir.display();
    let mut backends = String::new();
    for (name, app, health, enabled) in servers {
        let disabled = if *enabled { "" } else { " disabled" };
        let _ = writeln!(backends, "  server {name} 127.0.0.1:{app} check port {health}{disabled}");
    }
    let conf = dir.join("haproxy.cfg");
    fs::write(
        &conf,
        format!(
            "global
  maxconn 512
  stats socket {d}/haproxy.sock level admin
defaults
  mode http
  timeout connect 5s
  timeout check 5s
  timeout client 10s
  timeout server 10s
  retries 0
frontend web
  bind 127.0.0.1:{port}
  default_backend app
backend app
  balance roundrobin
  option httpchk GET /ready
  http-check expect status 200
  default-server inter 100ms fall 1 rise 1
{backends}"
        ),
    )
    .unwrap();
    conf
}

/// A command on HAProxy's admin socket; None until the socket is there.
fn haproxy_command(dir: &Path, command: &str) -> Option<String> {
    let mut s = UnixStream::connect(dir.join("haproxy.sock")).ok()?;
    writeln!(s, "{command}").ok()?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).ok()?;
    Some(answer)
}

#[test]
fn a_rolling_restart_behind_haproxy_sees_zero_failures() {
    let _alone = common::contention::alone();
    let dir = scratch("rolling");
    let (proxy_port, a_port, a_health, b_port, b_health, c_port, c_health) =
        (free_port(), free_port(), free_port(), free_port(), free_port(), free_port(), free_port());
    let with_health = |health: u16| -> Vec<String> {
        vec!["--pre-stop".into(), "2s".into(), "--grace".into(), "10s".into(), "--health-listen".into(), format!("127.0.0.1:{health}")]
    };
    let (a_args, b_args, c_args) = (with_health(a_health), with_health(b_health), with_health(c_health));
    fn refs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }
    let mut a = start_app(a_port, true, "0.2", Some(&refs(&a_args)), &dir.join("a.log"));
    let _b = start_app(b_port, true, "0.2", Some(&refs(&b_args)), &dir.join("b.log"));
    let conf = haproxy_config(&dir, proxy_port, &[("a", a_port, a_health, true), ("b", b_port, b_health, true), ("c", c_port, c_health, false)]);
    let mut haproxy_cmd = Command::new("haproxy");
    haproxy_cmd.arg("-f").arg(&conf).arg("-db").stdout(Stdio::null()).stderr(fs::File::create(dir.join("haproxy.log")).unwrap());
    let _haproxy = Proc::spawn("haproxy", &mut haproxy_cmd);
    wait_accepting(proxy_port, "haproxy to listen");
    wait_until(10 * SEC, "haproxy to see both servers up", || {
        let answer = haproxy_command(&dir, "show servers state app")?;
        let up = answer.lines().filter(|l| l.split_whitespace().nth(5) == Some("2")).count();
        (up == 2).then_some(())
    });

    // A steady stream from four clients, all through the restart.
    let stop = Arc::new(AtomicBool::new(false));
    let outcomes = Arc::new(Mutex::new(Vec::<Outcome>::new()));
    let clients: Vec<_> = (0..4)
        .map(|c| {
            let (stop, outcomes) = (stop.clone(), outcomes.clone());
            std::thread::spawn(move || {
                let mut i = 0;
                let deadline = Instant::now() + 60 * SEC;
                while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
                    i += 1;
                    let o = request(proxy_port, &format!("c{c}-{i}"));
                    outcomes.lock().unwrap().push(o);
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        })
        .collect();
    // Some traffic before the deploy, counted rather than waited for by the clock.
    let answered = |n: usize| wait_until(30 * SEC, &format!("{n} answers"), || (outcomes.lock().unwrap().len() >= n).then_some(()));
    answered(20);

    // The deploy: a new instance c comes up and is put in rotation once it listens; then the
    // old instance a is stopped through lastcall's handshake alone.
    let c = start_app(c_port, true, "0.2", Some(&refs(&c_args)), &dir.join("c.log"));
    wait_until(5 * SEC, "HAProxy to take c into rotation", || haproxy_command(&dir, "enable server app/c"));
    let stop_sent = Instant::now();
    kill(a.namespace_init(), libc::SIGTERM);
    assert_eq!(a.wait(20 * SEC), 0, "a drained and exited cleanly");
    let a_gone = stop_sent.elapsed();
    // And some after it, which only b and c can answer.
    let before = outcomes.lock().unwrap().len();
    answered(before + 20);
    stop.store(true, Ordering::SeqCst);
    for client in clients {
        client.join().unwrap();
    }
    let outcomes = outcomes.lock().unwrap().clone();
    let failures: Vec<&Outcome> = outcomes.iter().filter(|o| o.status != Some(200)).collect();
    let served = |name: &str| outcomes.iter().filter(|o| fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default().contains(&format!("req={} ", o.req))).count();
    println!(
        "--- rolling restart: {} requests, {} failures; a served {}, b {}, c {}; a left after {:.3}s",
        outcomes.len(),
        failures.len(),
        served("a"),
        served("b"),
        served("c"),
        a_gone.as_secs_f64()
    );
    println!("{}", table("failures", &failures.into_iter().cloned().collect::<Vec<_>>()));
    assert!(outcomes.iter().all(|o| o.status == Some(200)), "zero failures across the restart");
    assert!(outcomes.iter().all(|o| o.body.starts_with("ok req=")), "every answer came from the app");
    assert!(outcomes.len() >= 40, "a steady stream: {}", outcomes.len());
    assert!(served("a") > 0 && served("b") > 0 && served("c") > 0, "every instance took part");
    assert!(a_gone >= 2 * SEC, "the pre-stop held the app for its 2s");
    drop(c);
}

#[test]
fn nginx_under_lastcall_finishes_in_flight_requests_on_stop_with_term_rewritten_to_quit() {
    let _alone = common::contention::alone();
    let dir = scratch("nginx-child");
    let app_port = free_port();
    // Three seconds a request: in flight at the TERM, which follows the app's START lines.
    let app_log = dir.join("app.log");
    let _app = start_app(app_port, true, "3", None, &app_log);
    let mut results = Vec::new();
    for (title, rewrite) in [("nginx under lastcall --rewrite TERM:QUIT", true), ("nginx under lastcall, plain TERM", false)] {
        let proxy_port = free_port();
        let conf = nginx::proxy_config(&dir, &dir.display().to_string(), true, proxy_port, app_port);
        let mut cmd = Command::new("unshare");
        cmd.args(["--pid", "--fork", "--mount-proc", "--kill-child", "--", LASTCALL]);
        if rewrite {
            cmd.args(["--rewrite", "TERM:QUIT"]);
        }
        cmd.args(["--", "nginx", "-c"]).arg(&conf).arg("-p").arg(&dir).stdout(Stdio::null()).stderr(Stdio::null());
        let mut nginx = Proc::spawn("lastcall+nginx", &mut cmd);
        wait_accepting(proxy_port, "nginx to listen");
        let started = fs::read_to_string(&app_log).unwrap_or_default().matches("START").count();
        let requests = fire(proxy_port, 4, if rewrite { "quit-" } else { "term-" });
        wait_started(&app_log, started + 4, "four requests in flight");
        kill(nginx.namespace_init(), libc::SIGTERM);
        let outcomes = requests.join().unwrap();
        println!("{}", table(title, &outcomes));
        assert_eq!(nginx.wait(10 * SEC), 0, "nginx exits 0 either way");
        results.push(outcomes);
    }
    assert!(results[0].iter().all(|o| o.status == Some(200)), "QUIT: graceful, in-flight requests finish");
    assert!(results[1].iter().all(|o| o.status.is_none()), "TERM: nginx's fast shutdown cuts them");
}

/// A bundle whose rootfs holds lastcall and busybox, nothing else.
struct Container {
    id: String,
    bundle: PathBuf,
}

impl Container {
    fn new(name: &str, rootfs: &Path, args: &[&str]) -> Container {
        let bundle = scratch(&format!("oci-{name}"));
        let status = Command::new("runc").arg("spec").current_dir(&bundle).status().unwrap();
        assert!(status.success());
        let spec = bundle.join("config.json");
        let args_json = format!("[{}]", args.iter().map(|a| format!("{a:?}")).collect::<Vec<_>>().join(","));
        // This machine's runc: no cgroup resources, an empty cgroupsPath (see DEVELOPERS.md).
        let edit = format!(
            "import json,sys; p=sys.argv[1]; c=json.load(open(p)); c['process']['terminal']=False; \
             c['process']['args']={args_json}; c['linux'].pop('resources',None); c['linux']['cgroupsPath']=''; \
             c['root']={{'path':{rootfs:?},'readonly':True}}; json.dump(c,open(p,'w'))",
            rootfs = rootfs.display().to_string()
        );
        let status = Command::new("python3").arg("-c").arg(&edit).arg(&spec).status().unwrap();
        assert!(status.success());
        let id = format!("lastcall-{}-{name}", std::process::id());
        Container { id, bundle }
    }

    fn run(&self) -> (Child, BufReader<std::process::ChildStdout>) {
        let mut child = Command::new("runc")
            .args(["run", "--bundle"])
            .arg(&self.bundle)
            .arg(&self.id)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        (child, out)
    }

    fn kill(&self, sig: &str) {
        let status = Command::new("runc").args(["kill", &self.id, sig]).status().unwrap();
        assert!(status.success(), "runc kill {sig}");
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = Command::new("runc").args(["delete", "--force", &self.id]).stderr(Stdio::null()).status();
    }
}

fn rootfs() -> PathBuf {
    let root = scratch("rootfs");
    fs::create_dir_all(root.join("bin")).unwrap();
    for dir in ["proc", "dev", "sys", "tmp"] {
        fs::create_dir_all(root.join(dir)).unwrap();
    }
    fs::copy(LASTCALL, root.join("lastcall")).unwrap();
    fs::copy("/bin/busybox", root.join("bin/busybox")).unwrap();
    for applet in ["sh", "sleep", "cat"] {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(applet)).unwrap();
    }
    let file = Command::new("file").arg(root.join("lastcall")).output().unwrap();
    let kind = String::from_utf8_lossy(&file.stdout);
    assert!(kind.contains("statically linked") || kind.contains("static-pie"), "{kind}");
    root
}

fn wait_for_line(out: &mut BufReader<std::process::ChildStdout>, needle: &str) {
    let mut line = String::new();
    loop {
        line.clear();
        let n = out.read_line(&mut line).unwrap();
        assert!(n > 0, "the container ended before printing {needle}");
        if line.contains(needle) {
            return;
        }
    }
}

#[test]
fn in_a_real_oci_container_run_by_runc() {
    let _alone = common::contention::alone(); // a grace timing, and 200 zombies
    let root = rootfs();

    // docker stop, step one: TERM to PID 1 from outside. The app drains and the container exits 0.
    let c = Container::new("drain", &root, &["/lastcall", "--", "/bin/sh", "-c", "trap 'echo draining; sleep 0.3; exit 0' TERM; echo ready; while :; do sleep 1 & wait $!; done"]);
    let (mut run, mut out) = c.run();
    wait_for_line(&mut out, "ready");
    c.kill("TERM");
    wait_for_line(&mut out, "draining");
    let status = wait_until(10 * SEC, "the container to exit", || run.try_wait().unwrap());
    assert_eq!(status.code(), Some(0));

    // A TERM-ignoring app: killed at lastcall's 1s grace, long before docker's 10s would be up.
    let c = Container::new("ignore", &root, &["/lastcall", "--grace", "1s", "--", "/bin/sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"]);
    let (mut run, mut out) = c.run();
    wait_for_line(&mut out, "ready");
    let sent = Instant::now();
    c.kill("TERM");
    let status = wait_until(20 * SEC, "the container to exit", || run.try_wait().unwrap());
    let took = sent.elapsed();
    assert_eq!(status.code(), Some(137));
    // At the grace, not before; generous above (a fraction of a second is expected past it).
    assert!(took >= SEC && took < SEC + 5 * SEC, "killed after {took:?}");

    // Zombies made inside are reaped: the app counts them in its own /proc and exits with the count.
    let count = "i=0; while [ $i -lt 200 ]; do (sleep 0 &); i=$((i+1)); done; \
                 n=0; while :; do z=0; for f in /proc/[0-9]*/stat; do read -r l 2>/dev/null < $f; case \"$l\" in *') Z '*) z=$((z+1));; esac; done; \
                 [ $z -eq 0 ] && break; n=$((n+1)); [ $n -gt 600 ] && break; sleep 0.05; done; echo zombies=$z; exit $z";
    let c = Container::new("zombies", &root, &["/lastcall", "--", "/bin/sh", "-c", count]);
    let (mut run, mut out) = c.run();
    wait_for_line(&mut out, "zombies=");
    let status = wait_until(60 * SEC, "the container to exit", || run.try_wait().unwrap());
    assert_eq!(status.code(), Some(0), "zombies were left");

    // The app's exit code is the container's.
    let c = Container::new("code", &root, &["/lastcall", "--", "/bin/sh", "-c", "exit 42"]);
    let (mut run, _out) = c.run();
    let status = wait_until(10 * SEC, "the container to exit", || run.try_wait().unwrap());
    assert_eq!(status.code(), Some(42));
}

#[test]
fn the_systemd_shape_a_double_forked_daemon_is_adopted_stopped_and_reaped() {
    let dir = scratch("systemd-shape");
    let report = dir.join("report");
    let pidfile = dir.join("daemon.pid");
    // A classic service script: the daemon double-forks away (setsid) and the script stays.
    let service = format!(
        "(setsid sh -c 'trap \"echo daemon got TERM >> {r}; exit 0\" TERM; echo $$ > {p}; while :; do sleep 0.1; done' &); \
         while [ ! -s {p} ]; do sleep 0.01; done; exec sleep 1000",
        r = report.display(),
        p = pidfile.display()
    );
    // A grace far beyond the bound below, so that a daemon left to it cannot pass.
    let mut run = Spec::new(Mode::Plain, &dir, &["--grace", "30s", "--", "sh", "-c", &service]).start();
    let daemon: i32 = wait_until(10 * SEC, "the daemon's pid", || fs::read_to_string(&pidfile).ok()?.trim().parse().ok());
    wait_until(5 * SEC, "the daemon to be adopted by lastcall", || {
        let stat = fs::read_to_string(format!("/proc/{daemon}/stat")).ok()?;
        let ppid: i32 = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?;
        (ppid == run.pid).then_some(())
    });
    let sent = Instant::now();
    run.signal(libc::SIGTERM);
    assert_eq!(run.wait(20 * SEC), 143, "the service's main process died of TERM: {}", run.stderr());
    assert!(sent.elapsed() < 10 * SEC, "the daemon was stopped, not left to the grace deadline");
    assert!(fs::read_to_string(&report).unwrap_or_default().contains("daemon got TERM"));
    assert!(!alive(daemon), "nothing survives lastcall");
}
