//! The `--user` database parser, bounded in time and memory whatever the files hold.
//!
//! The image's files are stood in for as in tests/distroless.rs: a mount namespace in which the
//! test's files (or a FIFO, or an empty /etc) are bind-mounted where lastcall reads them.

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Child;

use super::*;

/// A run of lastcall in a mount namespace of its own, killed if the test ends before it does.
struct Image {
    child: Child,
    dir: PathBuf,
}

impl Drop for Image {
    fn drop(&mut self) {
        // Still running only when the test failed: lastcall blocks TERM, so KILL.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Image {
    /// `lastcall ARGS` with each (source, target) bind-mounted first.
    fn start(dir: &Path, mounts: &[(&Path, &str)], args: &[&str], env: &[(&str, &str)]) -> Image {
        let script: String = (0..mounts.len()).map(|i| format!("mount --bind \"${}\" \"${}\" && ", 2 * i + 1, 2 * i + 2)).collect();
        let script = format!("{script}shift {} && exec \"$@\"", 2 * mounts.len());
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "--", "sh", "-c", &script, "sh"]);
        for (source, target) in mounts {
            cmd.arg(source).arg(target);
        }
        let child = cmd
            .arg(LASTCALL)
            .args(args)
            .env_remove("USER")
            .env_remove("LOGNAME")
            .env_remove("LASTCALL_USER")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(fs::File::create(dir.join("stdout")).unwrap())
            .stderr(fs::File::create(dir.join("stderr")).unwrap())
            .spawn()
            .unwrap();
        Image { child, dir: dir.to_path_buf() }
    }

    /// (exit code, stdout, stderr), failing the test if lastcall is not done within `limit`.
    fn end(mut self, limit: Duration) -> (i32, String, String) {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            let err = fs::read_to_string(self.dir.join("stderr")).unwrap_or_default();
            assert!(Instant::now() < deadline, "lastcall still running after {limit:?}: {err}");
            std::thread::sleep(Duration::from_millis(10));
        };
        let code = status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
        let read = |name: &str| fs::read_to_string(self.dir.join(name)).unwrap_or_default();
        (code, read("stdout"), read("stderr"))
    }
}

/// `lastcall ARGS` with `passwd` and `group` as /etc's, to its end.
fn with_files(dir: &Path, passwd: &[u8], group: &[u8], args: &[&str], limit: Duration) -> (i32, String, String) {
    let (p, g) = (dir.join("passwd"), dir.join("group"));
    fs::write(&p, passwd).unwrap();
    fs::write(&g, group).unwrap();
    Image::start(dir, &[(&p, "/etc/passwd"), (&g, "/etc/group")], args, &[]).end(limit)
}

const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\napp:x:1234:1234:the app:/home/app:/sbin/nologin\n";

#[test]
fn a_user_in_many_groups_costs_linear_time_and_is_capped_with_one_warning() {
    let dir = scratch("userdb-groups");
    // More distinct groups than the kernel takes, each listing app: quadratic, this took
    // half a minute, and the list was more than setgroups accepts.
    let group: String = (0..200_000u32).map(|i| format!("g{i}:x:{}:other,app\n", 10_000 + i)).collect();
    let started = Instant::now();
    let (code, out, err) = with_files(&dir, PASSWD.as_bytes(), group.as_bytes(), &["--user", "app", "--", "sh", "-c", "id -G | wc -w"], 60 * SEC);
    let took = started.elapsed();
    assert_eq!(code, 0, "{err}");
    let max: usize = fs::read_to_string("/proc/sys/kernel/ngroups_max").map_or(65536, |s| s.trim().parse().unwrap());
    assert_eq!(out.trim().parse::<usize>().ok(), Some(max), "{err}");
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("NGROUPS_MAX")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(warnings[0].contains("user 'app'") && warnings[0].contains(&format!("only the first {max}")), "{err}");
    // Linear, this is a few tens of milliseconds.
    assert!(took < 5 * SEC, "{took:?}");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_fifo_at_etc_passwd_or_group_is_refused_at_once() {
    let dir = scratch("userdb-fifo");
    let fifo = dir.join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let file = dir.join("file");
    fs::write(&file, PASSWD).unwrap();
    // Even a number reads passwd, for HOME and the name.
    for (mounts, spec, named) in [
        ([(fifo.as_path(), "/etc/passwd"), (file.as_path(), "/etc/group")], "1000", "/etc/passwd"),
        ([(file.as_path(), "/etc/passwd"), (fifo.as_path(), "/etc/group")], "1000:web", "/etc/group"),
    ] {
        let (code, out, err) = Image::start(&dir, &mounts, &["--user", spec, "--", "echo", "started"], &[]).end(10 * SEC);
        assert_eq!((code, out.as_str()), (125, ""), "{spec}: {err}");
        assert_eq!(err.trim(), format!("lastcall: cannot read {named} for --user: not a regular file"), "{spec}");
    }
    let _ = fs::remove_dir_all(&dir);
}

/// lastcall's peak resident memory, as its app reads it after the files were parsed.
const PEAK: &str = "grep VmHWM /proc/$PPID/status";

fn peak_kib(out: &str) -> u64 {
    out.split_whitespace().nth(1).and_then(|kib| kib.parse().ok()).unwrap_or_else(|| panic!("no VmHWM in {out:?}"))
}

#[test]
fn hostile_file_shapes_cost_a_small_multiple_of_the_files_size() {
    let dir = scratch("userdb-memory");
    // One passwd line of millions of colons, and one group of millions of members: the
    // per-line vectors of every field took 279 and 365 MB.
    let mut passwd = PASSWD.as_bytes().to_vec();
    passwd.extend_from_slice(b"x");
    passwd.resize(passwd.len() + 8_000_000, b':');
    passwd.push(b'\n');
    let mut group = b"app:x:1234:\n".to_vec();
    group.extend_from_slice(b"big:x:5:");
    group.extend_from_slice(&b"m,".repeat(4_000_000));
    group.extend_from_slice(b"app\n");
    let (code, out, err) = with_files(&dir, &passwd, &group, &["--user", "app", "--", "sh", "-c", &format!("id -G; {PEAK}")], 60 * SEC);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("1234 5\n"), "{out}");
    let files_kib = (passwd.len() + group.len()) as u64 / 1024;
    let peak = peak_kib(out.lines().nth(1).unwrap_or_default());
    assert!(peak < 3 * files_kib + 16 * 1024, "peak {peak} KiB for {files_kib} KiB of files");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_home_no_exec_can_carry_is_lastcalls_error_naming_passwd() {
    let dir = scratch("userdb-home");
    let long = format!("/{}", "h".repeat(200 * 1024));
    let passwd = format!("{PASSWD}long:x:1300:1300::{long}:\nnul:x:1301:1301::/home/a\0b:\n");
    // Before, the long one was blamed on the command (126, "Argument list too long"), and the
    // NUL put an empty string into the app's environment.
    for spec in ["long", "1300", "nul", "1301:1301"] {
        let (code, out, err) = with_files(&dir, passwd.as_bytes(), b"", &["--user", spec, "--", "echo", "started"], 10 * SEC);
        assert_eq!((code, out.as_str()), (125, ""), "{spec}: {err}");
        assert!(err.lines().count() == 1 && err.contains("HOME") && err.contains("/etc/passwd") && err.contains("for --user"), "{spec}: {err}");
        assert!(!err.contains("cannot run"), "{spec}: {err}");
    }
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn errors_name_the_variable_and_a_missing_passwd_reads_differently() {
    let dir = scratch("userdb-origin");
    let run = |mounts: &[(&Path, &str)], env: &[(&str, &str)]| Image::start(&dir, mounts, &["--", "echo", "started"], env).end(10 * SEC);
    let file = dir.join("passwd");
    fs::write(&file, PASSWD).unwrap();
    let (code, _, err) = run(&[(&file, "/etc/passwd")], &[("LASTCALL_USER", "nosuch")]);
    assert_eq!(code, 125, "{err}");
    assert_eq!(err.trim(), "lastcall: unknown user 'nosuch' for LASTCALL_USER: no such entry in /etc/passwd");
    // An image with no /etc/passwd at all.
    let empty = dir.join("etc");
    fs::create_dir(&empty).unwrap();
    let (code, _, err) = run(&[(&empty, "/etc")], &[("LASTCALL_USER", "app")]);
    assert_eq!(code, 125, "{err}");
    assert_eq!(err.trim(), "lastcall: unknown user 'app' for LASTCALL_USER: there is no /etc/passwd to look the name up in (a numeric id needs none)");
    let (code, out, err) = run(&[(&empty, "/etc")], &[("LASTCALL_USER", "65534:65534")]);
    assert_eq!((code, out.as_str()), (0, "started\n"), "{err}");
    let _ = fs::remove_dir_all(&dir);
}
