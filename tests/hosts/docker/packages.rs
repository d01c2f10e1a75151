//! lastcall installed as users install it, under the real dockerd: the .deb into Debian (dpkg,
//! then a shutdown through /usr/bin/lastcall, then `apt-get remove`), and the OCI image through
//! `COPY --from=` in a user's Dockerfile. The packages are scripts/package's, made from this
//! machine's scripts/dist binary.

use super::*;

pub(crate) const CASES: &[Case] = cases![docker_the_deb_installs_runs_and_goes, docker_the_image_is_copied_from];

/// scripts/dist's binary for this machine and scripts/package's files from it, made once a run.
fn packaged() -> PathBuf {
    static MADE: Mutex<bool> = Mutex::new(false);
    let dir = cache().join("packages");
    let mut made = MADE.lock().unwrap_or_else(|p| p.into_inner());
    if !*made {
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        for script in ["scripts/dist", "scripts/package"] {
            let mut cmd = Command::new(repo().join(script));
            cmd.current_dir(repo()).env("DIST_DIR", &dir);
            if script == "scripts/dist" {
                cmd.arg("host");
            }
            ok(crate::common::outside_cargo(&mut cmd), 1800 * SEC);
        }
        *made = true;
    }
    dir
}

fn the_deb(dir: &Path) -> PathBuf {
    let arch = ok(Command::new("dpkg").arg("--print-architecture"), 10 * SEC);
    let deb = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(&format!("_{}.deb", arch.trim())))
        .unwrap_or_else(|| panic!("no {arch} package in {}", dir.display()));
    deb
}

/// Runs a draining app under `lastcall_args` in `image`, stops it with `docker stop` and checks
/// the shutdown the README describes: TERM held for the pre-stop, forwarded, drained, exit 0.
fn stops_as_documented(docker: &Docker, image: &str, lastcall: &str) {
    let c = docker.run(&["--network", "none", "--entrypoint", lastcall, image, "--pre-stop", "1s", "--", "sh", "-c", &draining_app("1")]);
    c.wait_log("app ready", 20 * SEC);
    c.stop(None);
    let log = c.logs(true);
    assert_eq!(c.exit_code(), 0, "{log}");
    assert!(seconds_between(&log, "received SIGTERM", "app got TERM") >= 0.95, "{log}");
    assert_timeline_once(&log, &["received SIGTERM", "pre-stop: the app keeps running for 1.000s", "pre-stop ended", "forwarded SIGTERM", "child exited with status 0"]);
    assert!(log.contains("app drained"), "{log}");
}

fn docker_the_deb_installs_runs_and_goes(hosts: &mut Hosts) {
    let dir = packaged();
    let deb = the_deb(&dir);
    let docker = hosts.docker();
    docker.debian_images();
    docker.build("lc-deb", "FROM lc-debian\nCOPY lastcall.deb /tmp/lastcall.deb\nRUN dpkg -i /tmp/lastcall.deb && rm /tmp/lastcall.deb\n", &[("lastcall.deb", &deb)]);
    let version = docker.ok(&["run", "--rm", "--network", "none", "lc-deb", "lastcall", "--version"]);
    let expected = fs::read_to_string(repo().join("Cargo.toml")).unwrap();
    let expected = expected.lines().find_map(|l| l.strip_prefix("version = \"")).unwrap().trim_end_matches('"');
    assert!(version.starts_with(&format!("lastcall {expected}")), "{version}");
    let man = docker.ok(&["run", "--rm", "--network", "none", "lc-deb", "sh", "-c", "zcat /usr/share/man/man1/lastcall.1.gz | head -1"]);
    assert!(man.starts_with(".TH LASTCALL 1"), "{man}");
    stops_as_documented(docker, "lc-deb", "/usr/bin/lastcall");
    // apt-get remove leaves nothing: no file of the package, no trace of it in dpkg's database.
    let left = docker.ok(&[
        "run", "--rm", "--network", "none", "lc-deb", "sh", "-c",
        "dpkg -L lastcall > /tmp/files && apt-get remove -y -qq lastcall > /dev/null 2>&1 && \
         while read -r f; do [ -d \"$f\" ] || [ ! -e \"$f\" ] || echo \"left: $f\"; done < /tmp/files; rm /tmp/files; \
         find / -xdev -name '*lastcall*' -print; dpkg-query -W -f='${db:Status-Status}\\n' lastcall 2>&1 || true",
    ]);
    let left: Vec<&str> = left.lines().filter(|l| !l.is_empty()).collect();
    assert!(
        left.is_empty() || left == ["not-installed"] || left.iter().all(|l| l.contains("no packages found")),
        "apt-get remove left: {left:?}"
    );
}

fn docker_the_image_is_copied_from(hosts: &mut Hosts) {
    let dir = packaged();
    let docker = hosts.docker();
    docker.debian_images();
    // Loaded as a user would after `skopeo copy oci-archive:... docker://REGISTRY/NAME`, without
    // a registry: skopeo picks this machine's platform from the list.
    let loaded = Scratch::new("image");
    let archive = loaded.path().join("image.tar");
    ok(
        Command::new("skopeo")
            .arg("copy")
            .arg(format!("oci-archive:{}", dir.join("lastcall-oci.tar").display()))
            .arg(format!("docker-archive:{}:lc-dist:test", archive.display())),
        120 * SEC,
    );
    docker.ok(&["load", "-i", archive.to_str().unwrap()]);
    // The image alone: `docker run IMAGE --version`.
    let version = docker.ok(&["run", "--rm", "--network", "none", "lc-dist:test", "--version"]);
    assert!(version.starts_with("lastcall "), "{version}");
    // A user's Dockerfile, as the README writes it.
    docker.build("lc-copied", "FROM lc-debian\nCOPY --from=lc-dist:test /lastcall /lastcall\n", &[]);
    stops_as_documented(docker, "lc-copied", "/lastcall");
    docker.build("lc-copied-usr", "FROM lc-debian\nCOPY --from=lc-dist:test /usr/bin/lastcall /usr/bin/lastcall\n", &[]);
    stops_as_documented(docker, "lc-copied-usr", "/usr/bin/lastcall");
}
