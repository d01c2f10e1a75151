//! A real Docker engine (Debian's dockerd 20.10) with lastcall as its `--init-path`, and images
//! with lastcall as ENTRYPOINT, made with no registry: a busybox-static rootfs imported, and the
//! debootstrapped Debian root (python3, nginx) for the 502 experiment and Dockerfile.example.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::*;
use crate::Case;

/// Debian's client: another one may be first in PATH, and the daemon speaks API 1.41.
const CLIENT: &str = "/usr/bin/docker";
/// Docker's own default stop timeout, which lastcall's defaults must fit in.
const DOCKER_STOP_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Docker {
    run: Scratch,
    sock: String,
    daemon: std::process::Child,
    /// The init-path binary: a copy of the lastcall under test.
    pub init: PathBuf,
    /// lc-debian and lc-app: built on first use (they need the debootstrapped root).
    debian_images: bool,
}

fn pidfile() -> PathBuf {
    cache().join("dockerd.pid")
}

fn data_root() -> PathBuf {
    cache().join("docker")
}

impl Docker {
    pub fn start() -> Docker {
        // A daemon left by a run that was killed outright holds the data root: end it first.
        if let Some(pid) = stale_pid(&pidfile(), "dockerd") {
            stop_process(pid, 20 * SEC);
        }
        for stale in fs::read_dir("/tmp").unwrap().flatten() {
            let name = stale.file_name().to_string_lossy().into_owned();
            let owner_gone = name
                .strip_prefix("lc-dockerd-")
                .and_then(|pid| pid.parse::<i32>().ok())
                .is_some_and(|pid| !alive(pid));
            if owner_gone {
                unmount_below(&stale.path());
                let _ = fs::remove_dir_all(stale.path());
            }
        }
        let run = Scratch::new("dockerd");
        let d = run.path();
        let init = d.join("lastcall");
        fs::copy(lastcall(), &init).unwrap();
        let config = format!(
            r#"{{"init-path": "{init}", "iptables": false, "ip6tables": false, "ip-masq": false, "ip-forward": false,
"bridge": "none", "storage-driver": "overlay2", "exec-opts": ["native.cgroupdriver=cgroupfs"],
"data-root": "{data}", "exec-root": "{d}/exec", "pidfile": "{d}/docker.pid", "hosts": ["unix://{d}/docker.sock"]}}"#,
            init = init.display(),
            data = data_root().display(),
            d = d.display(),
        );
        fs::write(d.join("daemon.json"), config).unwrap();
        let log = fs::File::create(d.join("dockerd.log")).unwrap();
        let mut cmd = Command::new("dockerd");
        cmd.arg("--config-file").arg(d.join("daemon.json")).stdout(log.try_clone().unwrap()).stderr(log);
        own_session(&mut cmd);
        let daemon = cmd.spawn().expect("start dockerd (apt-get install docker.io)");
        fs::write(pidfile(), daemon.id().to_string()).unwrap();
        let docker = Docker { sock: format!("unix://{}/docker.sock", d.display()), run, daemon, init, debian_images: false };
        wait_until(60 * SEC, "dockerd to answer", || {
            let out = output(docker.cmd().arg("version"), 10 * SEC);
            out.status.success().then_some(())
        });
        // Containers left by a killed run.
        let leftovers = docker.ok(&["ps", "-aq"]);
        if !leftovers.is_empty() {
            let mut cmd = docker.cmd();
            cmd.args(["rm", "-f"]).args(leftovers.split_whitespace());
            let _ = output(&mut cmd, 60 * SEC);
        }
        docker.build_busybox_images();
        docker
    }

    pub fn cmd(&self) -> Command {
        let mut cmd = Command::new(CLIENT);
        cmd.env("DOCKER_BUILDKIT", "0").arg("-H").arg(&self.sock);
        cmd
    }

    pub fn host(&self) -> &str {
        &self.sock
    }

    pub fn output(&self, args: &[&str]) -> Output {
        output(self.cmd().args(args), 120 * SEC)
    }

    pub fn ok(&self, args: &[&str]) -> String {
        ok(self.cmd().args(args), 120 * SEC)
    }

    fn has_image(&self, name: &str) -> bool {
        self.output(&["image", "inspect", name]).status.success()
    }

    /// lc-busybox (cached in the data root): busybox-static and its applets, nothing else.
    /// lc-test (this run's lastcall at /lastcall, for `--init`) and lc-entry (lastcall as
    /// ENTRYPOINT) are rebuilt each run.
    fn build_busybox_images(&self) {
        if !self.has_image("lc-busybox") {
            let rootfs = self.run.path().join("rootfs");
            for d in ["bin", "etc", "tmp", "root"] {
                fs::create_dir_all(rootfs.join(d)).unwrap();
            }
            fs::copy("/bin/busybox", rootfs.join("bin/busybox")).expect("busybox-static");
            let applets = ok(Command::new("/bin/busybox").arg("--list"), 10 * SEC);
            for applet in applets.lines().filter(|a| *a != "busybox") {
                let _ = std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(applet));
            }
            fs::write(rootfs.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
            fs::write(rootfs.join("etc/group"), "root:x:0:\n").unwrap();
            fs::set_permissions(rootfs.join("tmp"), fs::Permissions::from_mode(0o1777)).unwrap();
            self.import(&rootfs, "lc-busybox");
        }
        self.build("lc-test", "FROM lc-busybox\nCOPY lastcall /lastcall\n", &[]);
        self.build("lc-entry", "FROM lc-test\nENTRYPOINT [\"/lastcall\", \"--\"]\n", &[]);
    }

    /// `tar -C rootfs -c . | docker import - name`
    fn import(&self, rootfs: &Path, name: &str) {
        let script = format!("tar -C '{}' -c . | {CLIENT} -H '{}' import - {name}", rootfs.display(), self.sock);
        ok(Command::new("sh").args(["-c", &script]), 300 * SEC);
    }

    /// `docker build` (the classic builder) of `dockerfile` with lastcall and `files` in the
    /// context.
    pub fn build(&self, tag: &str, dockerfile: &str, files: &[(&str, &Path)]) {
        let ctx = self.run.path().join(format!("ctx-{tag}"));
        let _ = fs::remove_dir_all(&ctx);
        fs::create_dir_all(&ctx).unwrap();
        fs::copy(lastcall(), ctx.join("lastcall")).unwrap();
        for (name, from) in files {
            fs::copy(from, ctx.join(name)).unwrap();
        }
        fs::write(ctx.join("Dockerfile"), dockerfile).unwrap();
        self.ok(&["build", "-q", "-t", tag, ctx.to_str().unwrap()]);
    }

    /// lc-debian (the Debian root: python3, curl, nginx-light) and lc-app (the slow app under
    /// lastcall as ENTRYPOINT, in it).
    pub fn debian_images(&mut self) {
        if self.debian_images {
            return;
        }
        if !self.has_image("lc-debian") {
            self.import(&crate::systemd::debian_root(), "lc-debian");
        }
        let slow_app = repo().join("examples/slow_app.py");
        self.build(
            "lc-app",
            "FROM lc-debian\nCOPY lastcall /lastcall\nCOPY slow_app.py /app/slow_app.py\n\
             ENTRYPOINT [\"/lastcall\", \"--\"]\nCMD [\"python3\", \"/app/slow_app.py\"]\n",
            &[("slow_app.py", &slow_app)],
        );
        self.debian_images = true;
    }

    /// `docker run -d --name NAME ARGS...`, removed when the guard goes.
    pub fn run(&self, args: &[&str]) -> Container<'_> {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let name = format!("lc-{}-{}", std::process::id(), N.fetch_add(1, std::sync::atomic::Ordering::SeqCst));
        let mut all = vec!["run", "-d", "--name", &name];
        all.extend_from_slice(args);
        self.ok(&all);
        Container { docker: self, name }
    }
}

impl Drop for Docker {
    fn drop(&mut self) {
        let leftovers = output(self.cmd().args(["ps", "-aq"]), 30 * SEC);
        let ids = String::from_utf8_lossy(&leftovers.stdout).into_owned();
        if !ids.trim().is_empty() {
            let _ = output(self.cmd().args(["rm", "-f"]).args(ids.split_whitespace()), 60 * SEC);
        }
        // Each run rebuilds its images around a new lastcall: the old layers go, the cached
        // base images (lc-busybox, lc-debian) stay.
        let _ = output(self.cmd().args(["image", "prune", "-f"]), 60 * SEC);
        stop_process(self.daemon.id() as i32, 20 * SEC);
        let _ = self.daemon.wait();
        // dockerd leaves <exec-root>/netns/default mounted.
        unmount_below(self.run.path());
        let _ = fs::remove_file(pidfile());
    }
}

pub struct Container<'a> {
    docker: &'a Docker,
    pub name: String,
}

impl Container<'_> {
    pub fn inspect(&self, format: &str) -> String {
        self.docker.ok(&["inspect", "-f", format, &self.name])
    }

    pub fn running(&self) -> bool {
        self.inspect("{{.State.Running}}") == "true"
    }

    pub fn exit_code(&self) -> i32 {
        self.inspect("{{.State.ExitCode}}").parse().unwrap()
    }

    /// stdout and stderr together, with Docker's timestamps if asked.
    pub fn logs(&self, timestamps: bool) -> String {
        let mut args = vec!["logs"];
        if timestamps {
            args.push("-t");
        }
        args.push(&self.name);
        let out = self.docker.output(&args);
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    }

    pub fn wait_log(&self, needle: &str, limit: Duration) {
        wait_until(limit, &format!("'{needle}' in the logs of {}", self.name), || {
            self.logs(false).contains(needle).then_some(())
        });
    }

    pub fn wait_exited(&self, limit: Duration) -> i32 {
        wait_until(limit, &format!("{} to exit", self.name), || (!self.running()).then_some(()));
        self.exit_code()
    }

    /// `docker stop [-t N]`: how long it took.
    pub fn stop(&self, timeout: Option<u32>) -> Duration {
        let t = Instant::now();
        let timeout = timeout.map(|t| t.to_string());
        let mut args = vec!["stop"];
        if let Some(t) = &timeout {
            args.extend(["-t", t]);
        }
        args.push(&self.name);
        self.docker.ok(&args);
        t.elapsed()
    }

    /// `docker stop` in the background; join for how long it took.
    pub fn stop_in_background(&self) -> std::thread::JoinHandle<Duration> {
        let mut cmd = self.docker.cmd();
        cmd.args(["stop", &self.name]);
        std::thread::spawn(move || {
            let t = Instant::now();
            ok(&mut cmd, 60 * SEC);
            t.elapsed()
        })
    }
}

impl Drop for Container<'_> {
    fn drop(&mut self) {
        let _ = output(self.docker.cmd().args(["rm", "-f", &self.name]), 60 * SEC);
    }
}

/// How lastcall gets into the container.
#[derive(Clone, Copy, Debug)]
enum Mode {
    /// `docker run --init`: dockerd's init-path, run as /sbin/docker-init.
    Init,
    /// lastcall as the image's ENTRYPOINT.
    Entrypoint,
}

const MODES: [Mode; 2] = [Mode::Init, Mode::Entrypoint];

impl Mode {
    /// The `docker run` arguments that pick the image (and the init).
    fn image(self) -> &'static [&'static str] {
        match self {
            Mode::Init => &["--init", "lc-test"],
            Mode::Entrypoint => &["lc-entry"],
        }
    }
}

/// `docker run -d [extra] IMAGE sh -c SCRIPT`, the image chosen by `mode`.
fn run_sh<'a>(docker: &'a Docker, mode: Mode, extra: &[&str], script: &str) -> Container<'a> {
    let mut args = if extra.contains(&"--network") { vec![] } else { vec!["--network", "none"] };
    args.extend_from_slice(extra);
    args.extend_from_slice(mode.image());
    args.extend(["sh", "-c", script]);
    docker.run(&args)
}

/// An app that drains for `drain` seconds on TERM, then exits 0. The sleep runs in the
/// background so that the trap runs at once.
fn draining_app(drain: &str) -> String {
    format!(
        "trap 'echo app got TERM; sleep {drain}; echo app drained; exit 0' TERM; echo app ready; \
         while :; do sleep 1 & wait $!; done"
    )
}

/// Seconds between the first lines containing `a` and `b` in `docker logs -t` output.
fn seconds_between(log: &str, a: &str, b: &str) -> f64 {
    let at = |needle: &str| -> f64 {
        let line = log.lines().find(|l| l.contains(needle)).unwrap_or_else(|| panic!("no '{needle}' in:\n{log}"));
        // 2026-12-03T08:46:42.280528769Z
        let stamp = line.split_whitespace().next().unwrap();
        let time = stamp.split('T').nth(1).unwrap().trim_end_matches('Z');
        let mut parts = time.split(':');
        let h: f64 = parts.next().unwrap().parse().unwrap();
        let m: f64 = parts.next().unwrap().parse().unwrap();
        let s: f64 = parts.next().unwrap().parse().unwrap();
        h * 3600.0 + m * 60.0 + s
    };
    at(b) - at(a)
}

pub const CASES: &[Case] = &[
    Case { name: "docker_info_reads_lastcalls_version", run: docker_info_reads_lastcalls_version },
    Case { name: "docker_stop_waits_for_the_pre_stop_and_the_drain", run: docker_stop_waits_for_the_pre_stop_and_the_drain },
    Case { name: "docker_stop_of_a_term_ignoring_app_ends_at_lastcalls_grace", run: docker_stop_of_a_term_ignoring_app_ends_at_lastcalls_grace },
    Case { name: "docker_stop_timeout_sets_the_grace", run: docker_stop_timeout_sets_the_grace },
    Case { name: "docker_each_timeline_line_once_in_ten_stops", run: docker_each_timeline_line_once_in_ten_stops },
    Case { name: "docker_stopsignal_and_lastcall_stop_signal", run: docker_stopsignal_and_lastcall_stop_signal },
    Case { name: "docker_lastcall_rewrite", run: docker_lastcall_rewrite },
    Case { name: "docker_exit_codes", run: docker_exit_codes },
    Case { name: "docker_orphans_are_reaped", run: docker_orphans_are_reaped },
    Case { name: "docker_oom_kill_is_named_in_both_log_formats", run: docker_oom_kill_is_named_in_both_log_formats },
    Case { name: "docker_healthcheck_goes_unhealthy_at_the_first_signal", run: docker_healthcheck_goes_unhealthy_at_the_first_signal },
    Case { name: "docker_ready_is_503_during_the_pre_stop", run: docker_ready_is_503_during_the_pre_stop },
    Case { name: "docker_unready_on_stop_keeps_ready_through_the_pre_stop", run: docker_unready_on_stop_keeps_ready_through_the_pre_stop },
    Case { name: "docker_run_it_ctrl_c_reaches_the_app", run: docker_run_it_ctrl_c_reaches_the_app },
    Case { name: "docker_run_it_sh_gets_its_prompt_back", run: docker_run_it_sh_gets_its_prompt_back },
    Case { name: "docker_the_502_experiment", run: docker_the_502_experiment },
    Case { name: "docker_dockerfile_example_builds_and_drains", run: docker_dockerfile_example_builds_and_drains },
    Case { name: "docker_distroless_app_as_a_user_probed_by_lastcall", run: docker_distroless_app_as_a_user_probed_by_lastcall },
    Case { name: "docker_run_it_ctrl_c_reaches_an_app_as_another_user", run: docker_run_it_ctrl_c_reaches_an_app_as_another_user },
    Case { name: "docker_init_in_front_of_a_lastcall_entrypoint_steps_aside", run: docker_init_in_front_of_a_lastcall_entrypoint_steps_aside },
];

fn docker_info_reads_lastcalls_version(hosts: &mut Hosts) {
    let docker = hosts.docker();
    let commit = lastcall_commit();
    assert_eq!(docker.ok(&["info", "--format", "{{.InitCommit.ID}}"]), commit);
    assert_eq!(docker.ok(&["info", "--format", "{{.InitBinary}}"]), docker.init.display().to_string());
    let info = docker.ok(&["info"]);
    assert!(info.contains(&format!("init version: {commit}")), "{info}");
    let log = fs::read_to_string(docker.run.path().join("dockerd.log")).unwrap();
    assert!(!log.contains("failed to retrieve"), "dockerd could not read the init's version:\n{log}");
}

fn docker_stop_waits_for_the_pre_stop_and_the_drain(hosts: &mut Hosts) {
    let docker = hosts.docker();
    for mode in MODES {
        let c = run_sh(docker, mode, &["-e", "LASTCALL_PRE_STOP=1s"], &draining_app("2"));
        c.wait_log("app ready", 20 * SEC);
        let took = c.stop(None);
        let log = c.logs(true);
        assert_eq!(c.exit_code(), 0, "{mode:?}:\n{log}");
        // pre-stop 1 s + drain 2 s, and well inside Docker's 10 s.
        assert!(took >= Duration::from_millis(2900) && took < Duration::from_secs(6), "{mode:?}: docker stop took {took:?}\n{log}");
        let held = seconds_between(&log, "received SIGTERM", "app got TERM");
        assert!(held >= 0.95, "{mode:?}: the app got TERM {held}s after lastcall did:\n{log}");
        assert_timeline_once(&log, &["received SIGTERM", "pre-stop: the app keeps running for 1.000s", "pre-stop ended", "forwarded SIGTERM", "child exited with status 0"]);
        assert!(log.contains("app drained"), "{log}");
    }
}

fn docker_stop_of_a_term_ignoring_app_ends_at_lastcalls_grace(hosts: &mut Hosts) {
    let docker = hosts.docker();
    // No settings at all, Docker's default timeout: lastcall's own SIGKILL comes first.
    let c = run_sh(docker, Mode::Init, &[], "trap '' TERM; echo app ready; while :; do sleep 1; done");
    c.wait_log("app ready", 20 * SEC);
    let took = c.stop(None);
    let log = c.logs(false);
    assert_eq!(c.exit_code(), 137, "{log}");
    assert!(took >= Duration::from_millis(7800) && took < DOCKER_STOP_TIMEOUT, "docker stop took {took:?}:\n{log}");
    assert_timeline_once(&log, &["received SIGTERM", "forwarded SIGTERM", "grace expired: sent SIGKILL", "child killed by SIGKILL"]);
    let last = log.lines().filter(|l| l.starts_with("lastcall:")).last().unwrap_or_default();
    assert!(last.ends_with("child killed by SIGKILL"), "the timeline's last line is there: {last}\n{log}");
}

fn docker_stop_timeout_sets_the_grace(hosts: &mut Hosts) {
    let docker = hosts.docker();
    // docker stop -t 4 and the same budget told to lastcall: grace = 4 - 1 (pre-stop) - 2.
    let env = ["-e", "LASTCALL_STOP_TIMEOUT=4s", "-e", "LASTCALL_PRE_STOP=1s"];
    let c = run_sh(docker, Mode::Entrypoint, &env, "trap '' TERM; echo app ready; while :; do sleep 1; done");
    c.wait_log("app ready", 20 * SEC);
    let took = c.stop(Some(4));
    let log = c.logs(false);
    assert_eq!(c.exit_code(), 137, "{log}");
    assert!(took >= Duration::from_millis(1900) && took < Duration::from_secs(6), "docker stop -t 4 took {took:?}:\n{log}");
    // Only lastcall writes these: had Docker's SIGKILL come first, the last one would be missing.
    assert_timeline_once(&log, &["grace expired: sent SIGKILL", "child killed by SIGKILL"]);
    // One that cannot fit is refused before the app starts.
    let out = docker.output(&["run", "--rm", "--network", "none", "-e", "LASTCALL_STOP_TIMEOUT=5s", "-e", "LASTCALL_GRACE=6s", "lc-entry", "echo", "started"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("LASTCALL_GRACE 6s") && err.contains("LASTCALL_STOP_TIMEOUT 5s"), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("started"));
}

/// The escalation's line was once printed twice in 3 of 10 Docker stops.
fn docker_each_timeline_line_once_in_ten_stops(hosts: &mut Hosts) {
    let docker = hosts.docker();
    for round in 0..10 {
        let mode = MODES[round % 2];
        let c = run_sh(docker, mode, &["-e", "LASTCALL_GRACE=300ms"], "trap '' TERM; echo app ready; while :; do sleep 1; done");
        c.wait_log("app ready", 20 * SEC);
        c.stop(None);
        let log = c.logs(false);
        assert_eq!(c.exit_code(), 137, "{mode:?}: {log}");
        assert_timeline_once(&log, &["received SIGTERM", "forwarded SIGTERM", "grace expired: sent SIGKILL", "child killed by SIGKILL"]);
        assert_eq!(log.lines().filter(|l| l.starts_with("lastcall:")).count(), 4, "round {round}, {mode:?}: only the timeline:\n{log}");
    }
}

fn docker_stopsignal_and_lastcall_stop_signal(hosts: &mut Hosts) {
    let docker = hosts.docker();
    let app = "trap 'echo app got USR1; exit 0' USR1; trap 'echo app got QUIT' QUIT; trap 'echo app got TERM' TERM; \
               echo app ready; while :; do sleep 1 & wait $!; done";
    docker.build(
        "lc-stopsignal",
        &format!(
            "FROM lc-entry\nSTOPSIGNAL SIGQUIT\nENV LASTCALL_STOP_SIGNAL=USR1 LASTCALL_PRE_STOP=500ms\nCMD [\"sh\", \"-c\", \"{}\"]\n",
            app.replace('"', "\\\"")
        ),
        &[],
    );
    let c = docker.run(&["--network", "none", "lc-stopsignal"]);
    c.wait_log("app ready", 20 * SEC);
    c.stop(None);
    let log = c.logs(false);
    assert_eq!(c.exit_code(), 0, "{log}");
    assert_timeline_once(&log, &["received SIGQUIT", "forwarded SIGUSR1"]);
    assert!(log.contains("app got USR1") && !log.contains("app got QUIT") && !log.contains("app got TERM"), "{log}");
}

fn docker_lastcall_rewrite(hosts: &mut Hosts) {
    let docker = hosts.docker();
    let app = "trap 'echo app got QUIT; exit 0' QUIT; trap 'echo app got USR2' USR2; trap 'echo app got HUP' HUP; \
               trap 'echo app got TERM' TERM; echo app ready; while :; do sleep 1 & wait $!; done";
    for mode in MODES {
        let c = run_sh(docker, mode, &["-e", "LASTCALL_REWRITE=TERM:QUIT,HUP:USR2"], app);
        c.wait_log("app ready", 20 * SEC);
        docker.ok(&["kill", "-s", "HUP", &c.name]);
        c.wait_log("app got USR2", 10 * SEC);
        c.stop(None);
        let log = c.logs(false);
        assert_eq!(c.exit_code(), 0, "{mode:?}: {log}");
        assert!(log.contains("app got QUIT") && !log.contains("app got TERM") && !log.contains("app got HUP"), "{mode:?}: {log}");
        assert_timeline_once(&log, &["received SIGTERM", "forwarded SIGQUIT"]);
    }
}

fn docker_exit_codes(hosts: &mut Hosts) {
    let docker = hosts.docker();
    let cases: [(&[&str], i32); 5] = [
        (&["sh", "-c", "exit 3"], 3),
        (&["sh", "-c", "kill -SEGV $$"], 139),
        (&["sh", "-c", "kill -TERM $$"], 143),
        (&["/no/such/program"], 127),
        (&["/etc/passwd"], 126),
    ];
    for mode in MODES {
        for (command, expected) in cases {
            let mut args = vec!["--network", "none"];
            args.extend_from_slice(mode.image());
            args.extend_from_slice(command);
            let c = docker.run(&args);
            let code = c.wait_exited(30 * SEC);
            let log = c.logs(false);
            assert_eq!(code, expected, "{mode:?} {command:?}:\n{log}");
            if expected >= 126 && expected <= 127 {
                assert!(log.contains("lastcall:") && log.contains(command[0]), "{mode:?}: the error names the command:\n{log}");
            } else {
                assert_eq!(log, "", "{mode:?} {command:?}: an app that simply ends is no news");
            }
        }
    }
}

fn docker_orphans_are_reaped(hosts: &mut Hosts) {
    let docker = hosts.docker();
    // Five orphans re-parented to PID 1 (lastcall) exit; then the app lists every process.
    let script = "for i in 1 2 3 4 5; do sh -c 'sleep 0.2 &'; done; sleep 2; \
                  for f in /proc/[0-9]*/stat; do read l < $f && echo \"stat $l\"; done";
    for mode in MODES {
        let c = run_sh(docker, mode, &[], script);
        assert_eq!(c.wait_exited(30 * SEC), 0);
        let log = c.logs(false);
        let stats: Vec<&str> = log.lines().filter(|l| l.starts_with("stat ")).collect();
        assert!(stats.len() >= 2, "{mode:?}: {log}");
        let zombies: Vec<&&str> = stats.iter().filter(|l| l.rsplit_once(')').is_some_and(|(_, r)| r.trim_start().starts_with('Z'))).collect();
        assert!(zombies.is_empty(), "{mode:?}: zombies left: {zombies:?}");
        assert!(!stats.iter().any(|l| l.contains("(sleep)")), "{mode:?}: the orphans are gone: {stats:?}");
    }
}

/// `docker run --memory 64m`: the app (dd with a 256 MiB buffer) is OOM-killed, and lastcall says
/// so, in text and in json (every line of which python's json module parses), with the exit code
/// still 137.
fn docker_oom_kill_is_named_in_both_log_formats(hosts: &mut Hosts) {
    let docker = hosts.docker();
    for mode in MODES {
        for format in ["text", "json"] {
            let env = format!("LASTCALL_LOG_FORMAT={format}");
            let mut args = vec!["--network", "none", "--memory", "64m", "--memory-swap", "64m", "-e", &env];
            args.extend_from_slice(mode.image());
            args.extend(["dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1"]);
            let c = docker.run(&args);
            let code = c.wait_exited(60 * SEC);
            let log = c.logs(false);
            assert_eq!(code, 137, "{mode:?} {format}:\n{log}");
            if format == "text" {
                assert!(log.lines().any(|l| l == "lastcall: app killed by the OOM killer (limit 64 MiB)"), "{mode:?}:\n{log}");
                continue;
            }
            let mut check = Command::new("python3");
            check.args([
                "-c",
                "import json, sys\nfor line in sys.stdin: print(json.loads(line)['event'])",
            ]);
            let events = pipe_through(check, &log);
            assert!(events.lines().any(|e| e == "oom_kill"), "{mode:?} json:\n{log}");
            assert!(log.contains("\"message\":\"app killed by the OOM killer (limit 64 MiB)\""), "{mode:?} json:\n{log}");
        }
    }
    // An orphan OOM-killed (lastcall, PID 1, reaps it): a warning, and /metrics counts it.
    let port = free_port();
    let listen = format!("LASTCALL_HEALTH_LISTEN=127.0.0.1:{port}");
    let extra = ["--network", "host", "--memory", "64m", "--memory-swap", "64m", "-e", &listen];
    let c = run_sh(docker, Mode::Entrypoint, &extra, "(dd if=/dev/zero of=/dev/null bs=256M count=1 &); while :; do sleep 1; done");
    c.wait_log("killed by the OOM killer (limit 64 MiB); the app runs on without it", 60 * SEC);
    let (status, metrics) = http_get(port, "/metrics", 5 * SEC).expect("/metrics answers");
    assert_eq!(status, 200);
    assert!(metrics.lines().any(|l| l == "lastcall_oom_kills_total 1"), "{metrics}");
    assert!(c.running(), "the app lives on");
}

/// `input` through `cmd`'s stdin: its stdout, which must succeed.
fn pipe_through(mut cmd: Command, input: &str) -> String {
    use std::io::Write;
    let mut child = cmd.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}\n--- input:\n{input}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn docker_healthcheck_goes_unhealthy_at_the_first_signal(hosts: &mut Hosts) {
    let docker = hosts.docker();
    docker.build(
        "lc-health",
        &format!(
            "FROM lc-entry\nENV LASTCALL_HEALTH_LISTEN=127.0.0.1:8081 LASTCALL_PRE_STOP=5s\n\
             HEALTHCHECK --interval=1s --timeout=2s --retries=1 CMD [\"/lastcall\", \"probe\", \"ready\"]\n\
             CMD [\"sh\", \"-c\", \"{}\"]\n",
            draining_app("0")
        ),
        &[],
    );
    let c = docker.run(&["--network", "none", "lc-health"]);
    let health = || c.inspect("{{.State.Health.Status}}");
    wait_until(30 * SEC, "healthy", || (health() == "healthy").then_some(()));
    let stopped_at = Instant::now();
    let stop = c.stop_in_background();
    wait_until(15 * SEC, "unhealthy", || (health() == "unhealthy").then_some(()));
    let unhealthy_after = stopped_at.elapsed();
    let log = c.logs(false);
    assert!(c.running() && !log.contains("app got TERM"), "unhealthy while the app still serves: {log}");
    assert!(unhealthy_after < Duration::from_millis(4900), "unhealthy {unhealthy_after:?} after docker stop, inside the 5 s pre-stop");
    let took = stop.join().unwrap();
    assert_eq!(c.exit_code(), 0, "{}", c.logs(false));
    assert!(took >= Duration::from_millis(4900), "the pre-stop held: {took:?}");
}

/// /ready on the container's loopback (the host network): 200, then 503 from `docker stop`
/// (or, with --unready-on stop, from the end of the pre-stop), while the app keeps running.
fn ready_during_the_pre_stop(hosts: &mut Hosts, unready_on: &str) {
    let docker = hosts.docker();
    let port = free_port();
    let listen = format!("LASTCALL_HEALTH_LISTEN=127.0.0.1:{port}");
    let unready = format!("LASTCALL_UNREADY_ON={unready_on}");
    let env = ["--network", "host", "-e", &listen, "-e", "LASTCALL_PRE_STOP=3s", "-e", &unready];
    let c = run_sh(docker, Mode::Entrypoint, &env, &draining_app("0"));
    wait_until(20 * SEC, "/ready 200", || (http_status(port, "/ready") == Some(200)).then_some(()));
    let stopped_at = Instant::now();
    let stop = c.stop_in_background();
    c.wait_log("received SIGTERM", 10 * SEC);
    let mut seen = Vec::new();
    while !c.logs(false).contains("app got TERM") && stopped_at.elapsed() < 10 * SEC {
        seen.push((stopped_at.elapsed(), http_status(port, "/ready"), http_status(port, "/live")));
        std::thread::sleep(Duration::from_millis(100));
    }
    let took = stop.join().unwrap();
    assert_eq!(c.exit_code(), 0);
    assert!(took >= Duration::from_millis(2900), "{took:?}");
    let during: Vec<_> = seen.iter().filter(|(t, _, _)| *t > Duration::from_millis(300) && *t < Duration::from_millis(2700)).collect();
    assert!(during.len() >= 5, "{seen:?}");
    assert!(during.iter().all(|(_, _, live)| *live == Some(200)), "/live stays 200: {seen:?}");
    let expected = if unready_on == "stop" { 200 } else { 503 };
    assert!(during.iter().all(|(_, ready, _)| *ready == Some(expected)), "/ready during the pre-stop: {seen:?}");
}

fn docker_ready_is_503_during_the_pre_stop(hosts: &mut Hosts) {
    ready_during_the_pre_stop(hosts, "signal");
}

fn docker_unready_on_stop_keeps_ready_through_the_pre_stop(hosts: &mut Hosts) {
    ready_during_the_pre_stop(hosts, "stop");
}

/// Drives `docker run -it ...` through a pty (tests/hosts/pty-session) and returns its
/// transcript and exit code.
fn pty_session(docker: &Docker, run_args: &[&str], steps: &str) -> (String, i32) {
    let mut cmd = Command::new("python3");
    cmd.arg(repo().join("tests/hosts/pty-session")).arg(steps).arg("--").arg(CLIENT).arg("-H").arg(docker.host());
    cmd.args(["run", "-it", "--rm", "--network", "none"]).args(run_args);
    let out = output(&mut cmd, 60 * SEC);
    let transcript = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (transcript, out.status.code().unwrap_or(-1))
}

fn docker_run_it_ctrl_c_reaches_the_app(hosts: &mut Hosts) {
    let docker = hosts.docker();
    for mode in MODES {
        let mut args = mode.image().to_vec();
        args.extend(["sh", "-c", "trap 'echo app got INT; exit 7' INT; echo app ready; while :; do sleep 1; done"]);
        let (transcript, code) = pty_session(docker, &args, r#"[["expect", "app ready"], ["send", "\u0003"], ["expect", "app got INT"], ["eof"]]"#);
        assert_eq!(code, 7, "{mode:?}: the app's own exit, not a shutdown:\n{transcript}");
        assert!(!transcript.contains("received SIGINT"), "{mode:?}: Ctrl-C went to the app, not to lastcall:\n{transcript}");
    }
}

/// `docker run -it` with LASTCALL_USER: the app, no longer root, still owns the terminal's
/// foreground, so Ctrl-C reaches it and not lastcall.
fn docker_run_it_ctrl_c_reaches_an_app_as_another_user(hosts: &mut Hosts) {
    let docker = hosts.docker();
    let args = ["-e", "LASTCALL_USER=65534:65534", "lc-entry", "sh", "-c",
                "trap 'echo app got INT as $(id -u); exit 7' INT; echo app ready; while :; do sleep 1; done"];
    let (transcript, code) = pty_session(docker, &args, r#"[["expect", "app ready"], ["send", "\u0003"], ["expect", "app got INT as 65534"], ["eof"]]"#);
    assert_eq!(code, 7, "the app's own exit, not a shutdown:\n{transcript}");
    assert!(!transcript.contains("received SIGINT"), "Ctrl-C went to the app, not to lastcall:\n{transcript}");
}

fn docker_run_it_sh_gets_its_prompt_back(hosts: &mut Hosts) {
    let docker = hosts.docker();
    for mode in MODES {
        let mut args = mode.image().to_vec();
        args.extend(["sh"]);
        let steps = r##"[["expect", "# "], ["send", "sleep 30\r"], ["pause", 0.5], ["send", "\u0003"], ["expect", "# "],
                        ["send", "echo alive-$((20+22))\r"], ["expect", "alive-42"], ["send", "exit 5\r"], ["eof"]]"##;
        let (transcript, code) = pty_session(docker, &args, steps);
        assert_eq!(code, 5, "{mode:?}:\n{transcript}");
    }
}

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

fn nginx_conf(dir: &Path, port: u16, upstream: u16) -> PathBuf {
    let conf = dir.join("nginx.conf");
    fs::write(
        &conf,
        format!(
            "daemon off;
master_process on;
worker_processes 1;
pid /tmp/nginx.pid;
error_log /dev/stderr info;
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path /tmp/body;
  proxy_temp_path /tmp/proxy;
  fastcgi_temp_path /tmp/fastcgi;
  uwsgi_temp_path /tmp/uwsgi;
  scgi_temp_path /tmp/scgi;
  upstream app {{ server 127.0.0.1:{upstream} max_fails=0; }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://app;
      proxy_next_upstream off;
      proxy_connect_timeout 1s;
      proxy_read_timeout 30s;
    }}
  }}
}}
"
        ),
    )
    .unwrap();
    conf
}

/// The experiment under Docker: nginx in one container in front of the slow app under lastcall
/// in another, both on the host network; six requests in flight when `docker stop` comes, and
/// two more during the pre-stop.
fn experiment(docker: &Docker, dir: &Path, lastcall_env: &[&str], drain: bool) -> Vec<Outcome> {
    let (app_port, proxy_port) = (free_port(), free_port());
    let conf = nginx_conf(dir, proxy_port, app_port);
    let port_env = format!("PORT={app_port}");
    let drain_env = format!("DRAIN={}", if drain { 1 } else { 0 });
    let mut args = vec!["--network", "host", "-e", &port_env, "-e", "DELAY=1", "-e", &drain_env];
    for e in lastcall_env {
        args.extend(["-e", e]);
    }
    args.push("lc-app");
    let app = docker.run(&args);
    let volume = format!("{}:/conf:ro", dir.display());
    let _nginx = docker.run(&["--network", "host", "-v", &volume, "lc-debian", "nginx", "-c", &format!("/conf/{}", conf.file_name().unwrap().to_string_lossy())]);
    // Each request takes the app 1 s: wait for the answer rather than give up and leave one.
    let warm = |port| http_get(port, "/warmup", 10 * SEC).map(|(status, _)| status);
    wait_until(30 * SEC, "the app to answer", || warm(app_port).map(|_| ()));
    wait_until(30 * SEC, "nginx to answer", || (warm(proxy_port) == Some(200)).then_some(()));
    let starts = || app.logs(false).matches("START").count();
    let before = starts();
    let requests = fire(proxy_port, 6, "inflight-");
    wait_until(10 * SEC, "six requests in flight", || (starts() >= before + 6).then_some(()));
    let stop = app.stop_in_background();
    app.wait_log("received SIGTERM", 10 * SEC);
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
    // With lastcall's pre-stop and a draining app: every request answered.
    let outcomes = experiment(docker, dir.path(), &["LASTCALL_PRE_STOP=1s"], true);
    let errors: Vec<_> = outcomes.iter().filter(|o| o.status != Some(200)).collect();
    assert!(errors.is_empty(), "errors with the pre-stop and the drain: {errors:?}");
    // Without them (no pre-stop, an app that dies of TERM): the in-flight requests become 502s.
    let outcomes = experiment(docker, dir.path(), &[], false);
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
    // Its LASTCALL_PRE_STOP=2s held, inside Docker's 10 s.
    assert!(took >= Duration::from_millis(1900) && took < DOCKER_STOP_TIMEOUT, "{took:?}\n{log}");
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
    let c = docker.run(&["--network", "none", "--read-only", "-e", "DRAIN_MS=4000", "lc-distroless"]);
    c.wait_log("app ready", 20 * SEC);
    let log = c.logs(false);
    // The app's own view: app's uid, its groups as initgroups has them, HOME and USER from passwd.
    assert!(log.contains("app id uid=1000 gid=1000 groups=1000,2000 HOME=/home/app USER=app nnp=1"), "{log}");
    assert_eq!(uids_of(&c, "/lastcall --user app --no-new-privs -- /app"), ["0"], "lastcall stays root");
    assert_eq!(uids_of(&c, "/app"), ["1000"]);
    let health = || c.inspect("{{.State.Health.Status}}");
    wait_until(30 * SEC, "healthy", || (health() == "healthy").then_some(()));
    let stop = c.stop_in_background();
    wait_until(15 * SEC, "unhealthy while the app drains", || (health() == "unhealthy").then_some(()));
    assert!(c.running(), "unhealthy before the app is gone");
    let took = stop.join().unwrap();
    let log = c.logs(false);
    assert_eq!(c.exit_code(), 0, "{log}");
    assert!(log.contains("app got TERM") && log.contains("app drained"), "{log}");
    assert!(took >= Duration::from_millis(3900) && took < DOCKER_STOP_TIMEOUT, "{took:?}\n{log}");
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
    // One pre-stop (1 s) and the drain (1 s), inside Docker's 10 s; the timeline (the inner
    // one's alone) says there was one pre-stop.
    assert!(took >= Duration::from_millis(1900) && took < DOCKER_STOP_TIMEOUT, "docker stop took {took:?}\n{log}");
    assert_timeline_once(&log, &["received SIGTERM", "pre-stop: the app keeps running for 1.000s", "pre-stop ended", "forwarded SIGTERM", "child exited with status 0"]);
}

