//! What running the command says and does: directories, scripts without #!, the working directory.

#[allow(unused_imports)]
use super::*;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{start, wait_line, wait_until};

/// Generous: each wait ends on a marker, long before this on any machine.
const LIMIT: Duration = Duration::from_secs(20);

/// A scratch directory, removed when the test ends, however it ends.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        Dir(scratch(name))
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// An app that says it is up, then waits to be signalled.
const WAITING_APP: [&str; 3] = ["sh", "-c", "echo up; exec sleep 60"];

/// lastcall with `opts` around `WAITING_APP`, signalled with SIGTERM `terms` times (each after
/// the line that the one before was acted on), to its end; its stderr.
fn stderr_of_a_stop(dir: &Path, opts: &[&str], terms: usize) -> String {
    let mut run = start(Mode::Plain, dir, opts, WAITING_APP);
    wait_line(&run.stdout_path, "up", LIMIT);
    for n in 1..=terms {
        run.signal(libc::SIGTERM);
        wait_until(LIMIT, "lastcall to act on SIGTERM", || (run.stderr().matches("received SIGTERM").count() >= n).then_some(()));
    }
    run.wait(LIMIT);
    run.stderr()
}

/// The line after the first `received SIGTERM`, and the time that one shows (`6.218`).
fn after_received(stderr: &str) -> (String, String) {
    let lines: Vec<&str> = stderr.lines().collect();
    let i = lines.iter().position(|l| l.ends_with(" received SIGTERM")).unwrap_or_else(|| panic!("no SIGTERM in:\n{stderr}"));
    let at = lines[i].strip_prefix("lastcall: +").and_then(|l| l.split_once("s ")).map(|(t, _)| t.to_string());
    (lines.get(i + 1).unwrap_or(&"").to_string(), at.unwrap_or_else(|| panic!("no time in:\n{stderr}")))
}

/// `6.218` plus whole seconds, as the timeline writes it.
fn plus_seconds(at: &str, secs: u64) -> String {
    let (s, ms) = at.split_once('.').unwrap();
    format!("{}.{ms}", s.parse::<u64>().unwrap() + secs)
}

#[test]
fn the_first_termination_signal_says_when_sigkill_comes() {
    let dir = Dir::new("deadline");
    // A second SIGTERM cuts the pre-stop short; the promise is made once.
    let stderr = stderr_of_a_stop(&dir.0, &["--pre-stop", "2s", "--grace", "8s"], 2);
    let (line, at) = after_received(&stderr);
    let kill_at = plus_seconds(&at, 10);
    assert_eq!(line, format!("lastcall: +{at}s SIGKILL at +{kill_at}s if the app is still running (pre-stop 2.000s + grace 8.000s)"), "{stderr}");
    assert_eq!(stderr.matches("SIGKILL at").count(), 1, "{stderr}");

    let stderr = stderr_of_a_stop(&dir.0, &[], 1);
    let (line, at) = after_received(&stderr);
    assert_eq!(line, format!("lastcall: +{at}s SIGKILL at +{}s if the app is still running (grace 8.000s)", plus_seconds(&at, 8)), "{stderr}");

    let stderr = stderr_of_a_stop(&dir.0, &["--grace", "0"], 1);
    let (line, at) = after_received(&stderr);
    assert_eq!(line, format!("lastcall: +{at}s no SIGKILL: the grace is unlimited"), "{stderr}");

    // json: a `deadline` event, with kill_at_ms on elapsed_ms's clock, and none when unlimited.
    let stderr = stderr_of_a_stop(&dir.0, &["--log-format", "json", "--pre-stop", "1s"], 2);
    let deadline = stderr.lines().find(|l| l.contains(r#""event":"deadline""#)).unwrap_or_else(|| panic!("{stderr}"));
    assert!(deadline.contains(r#""kill_at_ms":9000,"#) && deadline.contains("(pre-stop 1.000s + grace 8.000s)"), "{deadline}");
    let stderr = stderr_of_a_stop(&dir.0, &["--log-format", "json", "--grace", "0"], 1);
    let deadline = stderr.lines().find(|l| l.contains(r#""event":"deadline""#)).unwrap_or_else(|| panic!("{stderr}"));
    assert!(!deadline.contains("kill_at_ms") && deadline.contains("no SIGKILL: the grace is unlimited"), "{deadline}");

    // An outer lastcall that stepped aside promises nothing: the deadline is the inner one's.
    let inner: Vec<&str> = [LASTCALL, "--"].into_iter().chain(WAITING_APP).collect();
    let mut run = start(Mode::Plain, &dir.0, &[], inner);
    wait_line(&run.stdout_path, "up", LIMIT);
    run.signal(libc::SIGTERM);
    run.wait(LIMIT);
    let stderr = run.stderr();
    assert_eq!(stderr.matches("SIGKILL at").count(), 1, "{stderr}");
}

#[test]
fn a_directory_is_said_to_be_one() {
    let dir = Dir::new("directory");
    let path = dir.0.to_str().unwrap();
    let (code, _, stderr) = run_to_end(Mode::Plain, &["--", path], &[]);
    assert_eq!(code, 126, "{stderr}");
    assert_eq!(stderr, format!("lastcall: cannot run '{path}': is a directory\n"));
    // A file that may not be run is still refused as such.
    let file = dir.0.join("plain");
    fs::write(&file, "data").unwrap();
    let (code, _, stderr) = run_to_end(Mode::Plain, &["--", file.to_str().unwrap()], &[]);
    assert_eq!((code, stderr.trim_end()), (126, format!("lastcall: cannot run '{}': Permission denied", file.display()).as_str()));
}

#[test]
fn the_unready_event_says_only_what_happens() {
    let dir = Dir::new("unready");
    let unready = |stderr: &str| stderr.lines().find(|l| l.contains(r#""event":"unready""#)).unwrap_or_else(|| panic!("{stderr}")).to_string();
    let bare = unready(&stderr_of_a_stop(&dir.0, &["--log-format", "json"], 1));
    assert!(!bare.contains("the ready file goes") && !bare.contains("503"), "{bare}");
    let ready = dir.0.join("ready");
    let with_file = unready(&stderr_of_a_stop(&dir.0, &["--log-format", "json", "--ready-file", ready.to_str().unwrap()], 1));
    assert!(with_file.contains("the ready file goes") && !with_file.contains("503"), "{with_file}");
}

#[test]
fn a_script_without_a_shebang_runs_through_sh_under_a_peers_name() {
    let dir = Dir::new("no-shebang");
    let script = dir.0.join("script");
    fs::write(&script, "echo \"ran $0 $*\"\n").unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let script = script.to_str().unwrap();
    let path = format!("{}:{}", dir.0.display(), std::env::var("PATH").unwrap_or_default());
    for name in ["tini", "tini-static", "dumb-init"] {
        let link = dir.0.join(name);
        symlink(LASTCALL, &link).unwrap();
        // As glibc's execvp: /bin/sh runs the script by the path exec found, with the arguments.
        for (program, shown) in [(script, script.to_string()), ("script", format!("{}/script", dir.0.display()))] {
            let out = Command::new(&link).args(["--", program, "a", "b"]).env("PATH", &path).output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(0), "{name} {program}: {stderr}");
            assert_eq!(String::from_utf8_lossy(&out.stdout), format!("ran {shown} a b\n"), "{name} {program}: {stderr}");
        }
    }
    // Under lastcall's own name, runc's answer: no program, 126.
    let (code, stdout, stderr) = run_to_end(Mode::Plain, &["--", script, "a"], &[]);
    assert_eq!(code, 126, "{stderr}");
    assert!(stdout.is_empty() && stderr.contains("Exec format error"), "{stderr}");
}

#[test]
fn the_app_never_sees_lastcalls_directory_change() {
    let dir = Dir::new("cwd");
    let here = fs::canonicalize(&dir.0).unwrap();
    let link = dir.0.join("dumb-init");
    symlink(LASTCALL, &link).unwrap();
    // The app's first act: lastcall's directory; then its own, and its open fds.
    let app = r#"readlink /proc/$PPID/cwd; pwd -P; for f in /proc/$$/fd/*; do readlink "$f"; done; exit 0"#;
    for (init, runs) in [(Path::new(LASTCALL), 20), (link.as_path(), 5)] {
        for _ in 0..runs {
            let out = Command::new(init).args(["--", "sh", "-c", app]).current_dir(&dir.0).output().unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            let lines: Vec<&str> = stdout.lines().collect();
            assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
            assert_eq!(lines.first(), Some(&"/"), "{init:?}: lastcall had not left its directory when the app started: {stdout}");
            assert_eq!(lines.get(1).map(PathBuf::from), Some(here.clone()), "{init:?}: the app's own directory: {stdout}");
            assert!(!lines[2..].iter().any(|l| Path::new(l) == here), "{init:?}: the app inherited an fd on its directory: {stdout}");
        }
    }
}
