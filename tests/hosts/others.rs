//! Docker Compose 1.29 (`init: true`) against the suite's dockerd, and Podman 4.3 (`--init`).

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::support::*;
use crate::Case;

pub const CASES: &[Case] = cases![
    compose_init_stops_three_services_together,
    compose_init_true_with_a_lastcall_entrypoint,
    podman_init_drains_and_reports_exit_codes,
];

/// A service of `image`, init: true, with lastcall's 3 s pre-stop and `environment` lines: an
/// app that drains 1 s on TERM.
fn service(name: &str, image: &str, environment: &str) -> String {
    format!(
        "  {name}:
    image: {image}
    init: true
    network_mode: none
    stop_grace_period: 10s
    environment:
      LASTCALL_PRE_STOP: 3s
{environment}    command: [\"sh\", \"-c\", \"trap 'echo {name} got TERM; sleep 1; echo {name} drained; exit 0' TERM; echo {name} ready; while :; do sleep 1 & wait $$!; done\"]
"
    )
}

fn compose_init_stops_three_services_together(hosts: &mut Hosts) {
    let services: String = ["web", "worker", "cache"].map(|name| service(name, "lc-busybox", "")).concat();
    let (took, log, exits, stamped) = compose_up_and_stop(hosts, "compose", &services, &["web", "worker", "cache"]);
    assert!(took >= Duration::from_millis(3900), "one pre-stop (3 s) and one drain (1 s) held: {took:?}\n{log}");
    // Stopped together, on dockerd's own times of the lines rather than on how long the stop
    // took: every service had its TERM before any one's pre-stop ended. One after another, the
    // next would get it only once the one before had exited.
    let last_term = stamped.iter().map(|l| crate::docker::stamped_at(l, "received SIGTERM")).fold(f64::MIN, f64::max);
    let first_end = stamped.iter().map(|l| crate::docker::stamped_at(l, "pre-stop ended")).fold(f64::MAX, f64::min);
    assert!(stamped.len() == 3 && last_term < first_end, "not stopped together:\n{}", stamped.join("\n"));
    for name in ["web", "worker", "cache"] {
        assert!(log.contains(&format!("{name} drained")), "{log}");
        let own: Vec<&str> = log
            .lines()
            .filter(|l| l.starts_with(&format!("{name}_")))
            .map(|l| l.split_once("| ").map_or(l, |(_, r)| r))
            .collect();
        assert_timeline_once(&own.join("\n"), &["received SIGTERM", "pre-stop ended", "child exited with status 0"]);
    }
    assert!(exits.iter().all(|e| e == "0 true"), "{exits:?}");
}

/// `init: true` in front of an image whose ENTRYPOINT is lastcall: the init steps aside, the
/// ENTRYPOINT does the shutdown once.
fn compose_init_true_with_a_lastcall_entrypoint(hosts: &mut Hosts) {
    let services = service("api", "lc-entry", "      LASTCALL_HEALTH_LISTEN: 127.0.0.1:8081\n");
    let (took, log, exits, _) = compose_up_and_stop(hosts, "compose-entry", &services, &["api"]);
    // Once, not twice (the init's and the ENTRYPOINT's), is for the timeline below to say.
    assert!(took >= Duration::from_millis(3900), "the pre-stop and the drain held: {took:?}\n{log}");
    assert_eq!(log.matches("the command is lastcall too").count(), 1, "{log}");
    assert!(!log.contains("cannot listen"), "{log}");
    assert_timeline_once(&log, &["received SIGTERM", "pre-stop: the app keeps running for 3.000s", "pre-stop ended", "child exited with status 0"]);
    assert!(log.contains("api drained"), "{log}");
    assert_eq!(exits, ["0 true"]);
}

/// `docker-compose up -d` of `services`, wait for each "NAME ready", `docker-compose stop`:
/// how long the stop took, the logs, each container's "EXITCODE INIT", and each container's
/// `docker logs -t`.
fn compose_up_and_stop(hosts: &mut Hosts, scratch: &str, services: &str, names: &[&str]) -> (Duration, String, Vec<String>, Vec<String>) {
    let docker = hosts.docker();
    let dir = Scratch::new(scratch);
    fs::write(dir.path().join("docker-compose.yml"), format!("version: \"2.4\"\nservices:\n{services}")).unwrap();
    let project = format!("lc{}{}", std::process::id(), scratch.replace('-', ""));
    let compose = |args: &[&str]| -> Output {
        output(
            Command::new("docker-compose")
                .current_dir(dir.path())
                .env("DOCKER_HOST", docker.host())
                .args(["--no-ansi", "-p", &project])
                .args(args),
            120 * SEC,
        )
    };
    struct Down<'a>(&'a dyn Fn(&[&str]) -> Output);
    impl Drop for Down<'_> {
        fn drop(&mut self) {
            (self.0)(&["down", "-t", "1"]);
        }
    }
    let _down = Down(&compose);
    let up = compose(&["up", "-d"]);
    assert!(up.status.success(), "{}", String::from_utf8_lossy(&up.stderr));
    let logs = || String::from_utf8_lossy(&compose(&["logs", "--no-color"]).stdout).into_owned();
    wait_until(30 * SEC, "every service ready", || {
        let l = logs();
        names.iter().all(|name| l.contains(&format!("{name} ready"))).then_some(())
    });
    let t = Instant::now();
    let stop = compose(&["stop"]);
    let took = t.elapsed();
    assert!(stop.status.success(), "{}", String::from_utf8_lossy(&stop.stderr));
    let ps = compose(&["ps", "-q"]);
    let ids: Vec<String> = String::from_utf8_lossy(&ps.stdout).split_whitespace().map(str::to_string).collect();
    let exits = ids.iter().map(|id| docker.ok(&["inspect", "-f", "{{.State.ExitCode}} {{.HostConfig.Init}}", id])).collect();
    let stamped = ids
        .iter()
        .map(|id| {
            let out = docker.output(&["logs", "-t", id]);
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
        })
        .collect();
    (took, logs(), exits, stamped)
}

pub struct Podman {
    run: Scratch,
    init: PathBuf,
}

impl Podman {
    pub fn new() -> Podman {
        let run = Scratch::new("podman");
        let init = run.path().join("lastcall");
        fs::copy(lastcall(), &init).unwrap();
        let podman = Podman { run, init };
        // The busybox rootfs, imported into this run's own store.
        let rootfs = podman.run.path().join("rootfs");
        fs::create_dir_all(rootfs.join("bin")).unwrap();
        fs::create_dir_all(rootfs.join("etc")).unwrap();
        fs::copy("/bin/busybox", rootfs.join("bin/busybox")).unwrap();
        for applet in ok(Command::new("/bin/busybox").arg("--list"), 10 * SEC).lines().filter(|a| *a != "busybox") {
            let _ = std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(applet));
        }
        fs::write(rootfs.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
        fs::write(rootfs.join("etc/group"), "root:x:0:\n").unwrap();
        let script = format!("tar -C '{}' -c . | {} import - lc-busybox", rootfs.display(), podman.base().join(" "));
        ok(Command::new("sh").args(["-c", &script]), 120 * SEC);
        podman
    }

    /// podman with its store in the scratch directory and the flags this machine needs.
    fn base(&self) -> Vec<String> {
        let d = self.run.path().display();
        format!("podman --root {d}/root --runroot {d}/runroot --cgroup-manager cgroupfs --events-backend file --runtime /usr/sbin/runc")
            .split(' ')
            .map(str::to_string)
            .collect()
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let base = self.base();
        let mut cmd = Command::new(&base[0]);
        cmd.args(&base[1..]).args(args);
        cmd
    }

    fn ok(&self, args: &[&str]) -> String {
        ok(&mut self.cmd(args), 120 * SEC)
    }

    /// `podman run -d --init --init-path lastcall ...` with the flags runc needs here.
    fn run_init(&self, name: &str, env: &[&str], command: &[&str]) {
        let init = self.init.display().to_string();
        let mut args = vec![
            "run", "-d", "--name", name, "--network", "none", "--log-driver", "k8s-file", "--ulimit", "nofile=20000:20000",
            "--ulimit", "nproc=32768:32768", "--init", "--init-path", &init,
        ];
        for e in env {
            args.extend(["-e", e]);
        }
        args.push("lc-busybox");
        args.extend_from_slice(command);
        self.ok(&args);
    }

    fn logs(&self, name: &str) -> String {
        let out = output(&mut self.cmd(&["logs", name]), 60 * SEC);
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    }

    fn exit_code(&self, name: &str) -> i32 {
        self.ok(&["inspect", "-f", "{{.State.ExitCode}}", name]).parse().unwrap()
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        let _ = output(&mut self.cmd(&["rm", "-a", "-f", "-t", "0"]), 60 * SEC);
        unmount_below(self.run.path());
    }
}

fn podman_init_drains_and_reports_exit_codes(hosts: &mut Hosts) {
    let podman = hosts.podman();
    let app = "trap 'echo app got TERM; sleep 1; echo app drained; exit 0' TERM; echo app ready; while :; do sleep 1 & wait $!; done";
    podman.run_init("lc-drain", &["LASTCALL_PRE_STOP=1s"], &["sh", "-c", app]);
    wait_until(20 * SEC, "app ready", || podman.logs("lc-drain").contains("app ready").then_some(()));
    assert!(podman.ok(&["top", "lc-drain", "pid", "args"]).contains("/run/podman-init -- sh -c"), "lastcall runs as podman's init");
    let t = Instant::now();
    podman.ok(&["stop", "-t", "10", "lc-drain"]);
    let took = t.elapsed();
    let log = podman.logs("lc-drain");
    assert_eq!(podman.exit_code("lc-drain"), 0, "{log}");
    // The pre-stop and the drain held; inside podman's 10 s is for the exit code to say (its
    // SIGKILL would have made it 137), not a wall clock that a busy host stretches.
    assert!(took >= Duration::from_millis(1900), "podman stop took {took:?}\n{log}");
    assert!(log.contains("app drained"), "{log}");
    assert_timeline_once(&log, &["received SIGTERM", "pre-stop ended", "forwarded SIGTERM", "child exited with status 0"]);

    for (command, expected) in [(&["sh", "-c", "exit 3"][..], 3), (&["sh", "-c", "kill -TERM $$"][..], 143), (&["/no/such/program"][..], 127)] {
        let name = format!("lc-exit-{expected}");
        podman.run_init(&name, &[], command);
        let code = wait_until(30 * SEC, "the container to exit", || {
            (podman.ok(&["inspect", "-f", "{{.State.Running}}", &name]) == "false").then(|| podman.exit_code(&name))
        });
        assert_eq!(code, expected, "{command:?}: {}", podman.logs(&name));
    }
}
