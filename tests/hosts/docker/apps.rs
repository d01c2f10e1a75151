//! Whole apps in images: the 502 experiment (nginx in front of the slow app), Dockerfile.example,
//! a distroless app as a user probed by lastcall, and `--init` in front of a lastcall ENTRYPOINT.

use super::*;

pub(crate) const CASES: &[Case] = cases![
    docker_the_502_experiment,
    docker_dockerfile_example_builds_and_drains,
    docker_distroless_app_as_a_user_probed_by_lastcall,
    docker_init_in_front_of_a_lastcall_entrypoint_steps_aside,
];

#[derive(Debug, Clone)]
struct Outcome {
    req: String,
    status: Option<u16>,
    elapsed: Duration,
}

/// Six concurrent requests through `port`; the outcomes once all are done.
fn fire(port: u16, n: usize, prefix: &str) -> std::thread::JoinHandle<Vec<Outcome>> {
    let prefix = prefix.to_string();
    std::thread::spawn(move || {
        let handles: Vec<_> = (1..=n)
            .map(|i| {
                let req = format!("{prefix}{i}");
                std::thread::spawn(move || {
                    let t = Instant::now();
                    let status = http_get(port, &format!("/{req}"), 20 * SEC).map(|(s, _)| s);
                    Outcome { req, status, elapsed: t.elapsed() }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// The experiment under Docker: nginx in one container in front of the slow app under lastcall
/// in another, both on the host network; six requests in flight when `docker stop` comes, and
/// two more during the pre-stop if there is one. Each request takes the app `delay` seconds:
/// the window in which the stop must find the six still in flight.
fn experiment(docker: &Docker, dir: &Path, lastcall_env: &[&str], drain: bool, delay: u32) -> Vec<Outcome> {
    let (app_port, proxy_port) = (free_port(), free_port());
    let conf = crate::common::nginx::proxy_config(dir, "/tmp", false, proxy_port, app_port);
    let port_env = format!("PORT={app_port}");
    let delay_env = format!("DELAY={delay}");
    let drain_env = format!("DRAIN={}", if drain { 1 } else { 0 });
    let mut args = vec!["--network", "host", "-e", &port_env, "-e", &delay_env, "-e", &drain_env];
    for e in lastcall_env {
        args.extend(["-e", e]);
    }
    args.push("lc-app");
    let app = docker.run(&args);
    let volume = format!("{}:/conf:ro", dir.display());
    let _nginx = docker.run(&["--network", "host", "-v", &volume, "lc-debian", "nginx", "-c", &format!("/conf/{}", conf.file_name().unwrap().to_string_lossy())]);
    // Ready on markers, not on a warm-up request: each request takes the app `delay` seconds.
    // The app says it listens; nginx accepting is enough, the six requests below go through it.
    app.wait_log("listening on", 30 * SEC);
    wait_until(30 * SEC, "nginx to accept", || std::net::TcpStream::connect(("127.0.0.1", proxy_port)).ok().map(drop));
    let starts = || app.logs(false).matches("START").count();
    let requests = fire(proxy_port, 6, "inflight-");
    wait_until(30 * SEC, "six requests in flight", || (starts() >= 6).then_some(()));
    let stop = app.stop_in_background();
    // The two late requests on the marker that the pre-stop began (it lasts seconds, so they
    // land inside it); with no pre-stop, on the TERM itself.
    let pre_stop = lastcall_env.iter().any(|e| e.starts_with("LASTCALL_PRE_STOP="));
    app.wait_log(if pre_stop { "pre-stop: the app keeps running" } else { "received SIGTERM" }, 30 * SEC);
    let late = fire(proxy_port, 2, "during-pre-stop-");
    let mut outcomes = requests.join().unwrap();
    outcomes.extend(late.join().unwrap());
    stop.join().unwrap();
    let log = app.logs(false);
    println!("\n{}", outcomes.iter().map(|o| format!("  HTTP {:?} {:.3}s {}", o.status, o.elapsed.as_secs_f64(), o.req)).collect::<Vec<_>>().join("\n"));
    assert_eq!(app.exit_code(), if drain { 0 } else { 143 }, "{log}");
    outcomes
}

fn docker_the_502_experiment(hosts: &mut Hosts) {
    let docker = hosts.docker();
    docker.debian_images();
    let dir = Scratch::new("nginx");
    // With lastcall's pre-stop and a draining app: every request answered. A 5 s pre-stop, so
    // that the two late requests, made once `docker logs` shows it began, land inside it; 2 s
    // requests, so that the drain after it (at most 2 s) fits Docker's 10 s with the pre-stop.
    let outcomes = experiment(docker, dir.path(), &["LASTCALL_PRE_STOP=5s"], true, 2);
    let errors: Vec<_> = outcomes.iter().filter(|o| o.status != Some(200)).collect();
    assert!(errors.is_empty(), "errors with the pre-stop and the drain: {errors:?}");
    // Without them (no pre-stop, an app that dies of TERM): the in-flight requests become 502s.
    // 10 s requests: the stop, seen and sent through `docker logs` and `docker stop`, must come
    // while they are still in flight.
    let outcomes = experiment(docker, dir.path(), &[], false, 10);
    let in_flight: Vec<_> = outcomes.iter().filter(|o| o.req.starts_with("inflight-")).collect();
    assert!(in_flight.iter().all(|o| o.status == Some(502)), "502s without them: {in_flight:?}");
}

fn docker_dockerfile_example_builds_and_drains(hosts: &mut Hosts) {
    let docker = hosts.docker();
    docker.debian_images();
    // The repository's own context, as `docker build -f Dockerfile.example .` sees it after
    // `scripts/dist`: the example app, and the static binary with its SHA256SUMS line.
    let ctx = Scratch::new("example");
    let c = ctx.path();
    fs::create_dir_all(c.join("examples")).unwrap();
    fs::copy(repo().join("Dockerfile.example"), c.join("Dockerfile.example")).unwrap();
    fs::copy(repo().join(".dockerignore"), c.join(".dockerignore")).unwrap();
    fs::copy(repo().join("examples/slow_app.py"), c.join("examples/slow_app.py")).unwrap();
    fs::create_dir_all(c.join("dist")).unwrap();
    let name = "lastcall-x86_64-unknown-linux-musl";
    fs::copy(lastcall(), c.join("dist").join(name)).unwrap();
    let sum = Command::new("sha256sum").arg(name).current_dir(c.join("dist")).output().unwrap();
    assert!(sum.status.success());
    fs::write(c.join("dist/SHA256SUMS"), &sum.stdout).unwrap();
    // The distroless python image (Debian 12's python3 and nothing else) cannot be pulled here;
    // the debootstrapped Debian 12 with python3 stands in for it, and for the stage that picks
    // the binary. The classic builder sets no TARGETARCH: the Dockerfile's default is amd64.
    let images = ["--build-arg", "RUNTIME=lc-debian", "--build-arg", "PICKER=lc-debian"];
    docker.ok(&[&["build", "-q"], &images[..], &["-f", "Dockerfile.example", "-t", "lc-example", c.to_str().unwrap()]].concat());
    let (port, health) = (free_port(), free_port());
    let port_env = format!("PORT={port}");
    let health_env = format!("LASTCALL_HEALTH_LISTEN=127.0.0.1:{health}");
    // On the host network and its loopback only (the image listens on every address).
    let container = docker.run(&["--network", "host", "-e", "HOST=127.0.0.1", "-e", &port_env, "-e", &health_env, "lc-example"]);
    let status = || container.inspect("{{.State.Health.Status}}");
    wait_until(30 * SEC, "the example to be healthy", || (status() == "healthy").then_some(()));
    let request = Arc::new(Mutex::new(None));
    let slot = Arc::clone(&request);
    let in_flight = std::thread::spawn(move || *slot.lock().unwrap() = http_get(port, "/in-flight", 20 * SEC));
    container.wait_log("START", 10 * SEC);
    let took = container.stop(None);
    in_flight.join().unwrap();
    let log = container.logs(false);
    assert_eq!(container.exit_code(), 0, "{log}");
    assert_eq!(request.lock().unwrap().as_ref().map(|(s, _)| *s), Some(200), "{log}");
    // Its LASTCALL_PRE_STOP=2s held. Inside Docker's 10 s is the exit code's to say, not the
    // wall clock's: Docker's SIGKILL at its timeout would have made it 137.
    assert!(took >= Duration::from_millis(1900), "{took:?}\n{log}");
    assert_timeline_once(&log, &["received SIGTERM", "pre-stop ended", "forwarded SIGTERM", "child exited with status 0"]);
}

/// `docker top`'s uid for each process whose command line is exactly `args`.
fn uids_of(c: &Container<'_>, args: &str) -> Vec<String> {
    let top = c.docker.ok(&["top", &c.name, "-eo", "pid,uid,args"]);
    top.lines()
        .skip(1)
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_pid, uid) = (f.next()?, f.next()?);
            (f.collect::<Vec<_>>().join(" ") == args).then(|| uid.to_string())
        })
        .collect()
}

/// The whole entrypoint of a distroless image, with lastcall its only helper: a FROM scratch
/// image holding lastcall, a static app (tests/hosts/static_app.c), /etc/passwd and /etc/group
/// and nothing else (no shell, no gosu, no curl), run with a read-only root. lastcall as root
/// runs the app as `app` and its HEALTHCHECK probes the app itself: healthy, then unhealthy
/// while the app drains at `docker stop`, then a clean exit. Then lastcall itself as 1000:1000
/// (`docker run --user`), with no --user of its own.
fn docker_distroless_app_as_a_user_probed_by_lastcall(hosts: &mut Hosts) {
    let docker = hosts.docker();
    let dir = Scratch::new("distroless");
    let app = dir.path().join("app");
    ok(Command::new("gcc").args(["-static", "-Os", "-o"]).arg(&app).arg(repo().join("tests/hosts/static_app.c")), 120 * SEC);
    let (passwd, group) = (dir.path().join("passwd"), dir.path().join("group"));
    fs::write(&passwd, "root:x:0:0:root:/root:/nonexistent\napp:x:1000:1000:the app:/home/app:/nonexistent\n").unwrap();
    fs::write(&group, "root:x:0:\napp:x:1000:\nweb:x:2000:app\n").unwrap();
    docker.build(
        "lc-distroless",
        "FROM scratch\nCOPY lastcall /lastcall\nCOPY app /app\nCOPY passwd /etc/passwd\nCOPY group /etc/group\n\
         HEALTHCHECK --interval=1s --timeout=3s --retries=1 CMD [\"/lastcall\", \"probe\", \"http://127.0.0.1:8080/healthz\"]\n\
         ENTRYPOINT [\"/lastcall\", \"--user\", \"app\", \"--no-new-privs\", \"--\"]\nCMD [\"/app\"]\n",
        &[("app", &app), ("passwd", &passwd), ("group", &group)],
    );
    // A 15 s drain (lastcall's grace and Docker's timeout made longer to fit it): the window in
    // which Docker's 1 s probe must see the 503 and the test the unhealthy container still
    // running is seconds long, ten times what that takes.
    let c = docker.run(&["--network", "none", "--read-only", "-e", "DRAIN_MS=15000", "-e", "LASTCALL_GRACE=30s", "lc-distroless"]);
    c.wait_log("app ready", 20 * SEC);
    let log = c.logs(false);
    // The app's own view: app's uid, its groups as initgroups has them, HOME and USER from passwd.
    assert!(log.contains("app id uid=1000 gid=1000 groups=1000,2000 HOME=/home/app USER=app nnp=1"), "{log}");
    assert_eq!(uids_of(&c, "/lastcall --user app --no-new-privs -- /app"), ["0"], "lastcall stays root");
    assert_eq!(uids_of(&c, "/app"), ["1000"]);
    let health = || c.inspect("{{.State.Health.Status}}");
    wait_until(30 * SEC, "healthy", || (health() == "healthy").then_some(()));
    let stop = c.stop_in_background_with(Some(60));
    wait_until(60 * SEC, "unhealthy while the app drains", || (health() == "unhealthy").then_some(()));
    assert!(c.running() && !c.logs(false).contains("app drained"), "unhealthy before the app is gone");
    let took = stop.join().unwrap();
    let log = c.logs(false);
    assert_eq!(c.exit_code(), 0, "{log}");
    assert!(log.contains("app got TERM") && log.contains("app drained"), "{log}");
    // The drain held; exit 0, not Docker's 137, says it ended inside Docker's timeout.
    assert!(took >= Duration::from_millis(14900), "{took:?}\n{log}");
    assert_timeline_once(&log, &["received SIGTERM", "forwarded SIGTERM", "child exited with status 0"]);
    // Docker's health log keeps the probe's one line of why.
    let reasons = c.inspect("{{range .State.Health.Log}}{{.Output}}{{end}}");
    assert!(reasons.contains("lastcall: probe failed: http://127.0.0.1:8080/healthz: answered HTTP/1.1 503 Draining"), "{reasons}");
    drop(c);

    // lastcall itself not root, read-only root, no --user flag: as tini in front of a plain app.
    let c = docker.run(&["--network", "none", "--read-only", "--user", "1000:1000", "-e", "DRAIN_MS=1000", "--entrypoint", "/lastcall", "lc-distroless", "--", "/app"]);
    c.wait_log("app ready", 20 * SEC);
    let log = c.logs(false);
    assert!(log.contains("app id uid=1000 gid=1000") && log.contains("HOME=/home/app") && log.contains("nnp=0"), "{log}");
    assert_eq!(uids_of(&c, "/lastcall -- /app"), ["1000"]);
    wait_until(30 * SEC, "healthy", || (c.inspect("{{.State.Health.Status}}") == "healthy").then_some(()));
    c.stop(None);
    let log = c.logs(false);
    assert_eq!(c.exit_code(), 0, "{log}");
    assert!(log.contains("app drained"), "{log}");
    assert!(!log.contains("Read-only file system"), "nothing was written: {log}");
    // The image's own `--user app` when the platform already runs it as app: nothing to switch.
    let out = docker.output(&["run", "--rm", "--network", "none", "--read-only", "--user", "1000:1000", "-e", "DRAIN_MS=0", "--entrypoint", "/lastcall", "lc-distroless", "--user", "app", "--", "/app", "--exit"]);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("app id uid=1000 gid=1000"), "{text}");
    // As another unprivileged user it cannot switch: 125, naming the step.
    let out = docker.output(&["run", "--rm", "--network", "none", "--read-only", "--user", "1001:1001", "lc-distroless"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains("setgroups failed before running '/app': Operation not permitted"), "{err}");
}

/// `docker run --init` of an image whose ENTRYPOINT is lastcall: two lastcalls, one environment.
/// The init (outer) sees its command carries lastcall's note and steps aside; the ENTRYPOINT
/// (inner) binds the health port, runs the one pre-stop and answers the probe.
fn docker_init_in_front_of_a_lastcall_entrypoint_steps_aside(hosts: &mut Hosts) {
    let docker = hosts.docker();
    let env = ["-e", "LASTCALL_PRE_STOP=1s", "-e", "LASTCALL_HEALTH_LISTEN=127.0.0.1:8081", "-e", "LASTCALL_PRESTOP=typo"];
    let c = docker.run(&[&["--network", "none", "--init"][..], &env, &["lc-entry", "sh", "-c", &draining_app("1")]].concat());
    c.wait_log("app ready", 20 * SEC);
    assert_eq!(c.inspect("{{.HostConfig.Init}}"), "true");
    // The probe, as a HEALTHCHECK would run it, reaches the inner lastcall's /ready.
    wait_until(10 * SEC, "the inner lastcall's /ready", || {
        docker.output(&["exec", &c.name, "/lastcall", "probe", "ready"]).status.success().then_some(())
    });
    let took = c.stop(None);
    let log = c.logs(false);
    assert_eq!(c.exit_code(), 0, "{log}");
    assert_eq!(log.matches("the command is lastcall too").count(), 1, "{log}");
    assert_eq!(log.matches("did you mean LASTCALL_PRE_STOP?").count(), 1, "the typo, once\n{log}");
    assert!(!log.contains("cannot listen"), "{log}");
    // The pre-stop (1 s) and the drain (1 s) held; the timeline (the inner one's alone) says
    // there was one pre-stop, and exit 0 (not Docker's 137) that it ended inside Docker's 10 s.
    assert!(took >= Duration::from_millis(1900), "docker stop took {took:?}\n{log}");
    assert_timeline_once(&log, &["received SIGTERM", "pre-stop: the app keeps running for 1.000s", "pre-stop ended", "forwarded SIGTERM", "child exited with status 0"]);
}
