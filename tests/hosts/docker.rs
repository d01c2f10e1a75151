//! A real Docker engine (Debian's dockerd 20.10) with lastcall as its `--init-path`, and images
//! with lastcall as ENTRYPOINT, made with no registry: a busybox-static rootfs imported, and the
//! debootstrapped Debian root (python3, nginx) for the 502 experiment and Dockerfile.example.

#[path = "docker/apps.rs"]
pub(crate) mod apps;
#[path = "docker/lifecycle.rs"]
pub(crate) mod lifecycle;
#[path = "docker/packages.rs"]
pub(crate) mod packages;
#[path = "docker/probes.rs"]
pub(crate) mod probes;
#[path = "docker/terminal.rs"]
pub(crate) mod terminal;

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
        self.stop_in_background_with(None)
    }

    /// `docker stop [-t N]` in the background: a pre-stop longer than Docker's default 10 s
    /// needs a longer timeout.
    pub fn stop_in_background_with(&self, timeout: Option<u32>) -> std::thread::JoinHandle<Duration> {
        let mut cmd = self.docker.cmd();
        cmd.arg("stop");
        if let Some(t) = timeout {
            cmd.args(["-t", &t.to_string()]);
        }
        cmd.arg(&self.name);
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
    stamped_at(log, b) - stamped_at(log, a)
}

/// When dockerd logged the first line containing `needle` in `docker logs -t` output: seconds
/// since the epoch (UTC), comparable across the containers of one daemon.
pub(crate) fn stamped_at(log: &str, needle: &str) -> f64 {
    let line = log.lines().find(|l| l.contains(needle)).unwrap_or_else(|| panic!("no '{needle}' in:\n{log}"));
    // 2026-12-03T08:46:42.280528769Z (Compose puts `NAME  | ` before it).
    let stamp = line.split_whitespace().find(|w| w.ends_with('Z') && w.contains('T')).unwrap_or_else(|| panic!("no time in {line}"));
    let (date, time) = stamp.trim_end_matches('Z').split_once('T').unwrap();
    let mut d = date.split('-').map(|n| n.parse::<i64>().unwrap());
    let (y, mo, day) = (d.next().unwrap(), d.next().unwrap(), d.next().unwrap());
    // Days from the civil date (Howard Hinnant's algorithm): a stop may cross midnight.
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (mo + if mo > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let days = era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;
    let mut t = time.split(':').map(|n| n.parse::<f64>().unwrap());
    let (h, m, s) = (t.next().unwrap(), t.next().unwrap(), t.next().unwrap());
    days as f64 * 86400.0 + h * 3600.0 + m * 60.0 + s
}
