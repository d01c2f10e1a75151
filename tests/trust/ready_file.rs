//! The ready file next to a hostile local user: planted symlinks, things lastcall did not make,
//! unsafe parent directories, and a replacement made while lastcall runs.

use super::*;

/// Point 5: a user who can write the ready file's directory plants symlinks to a root-owned
/// file at every name lastcall could predict (the old temporary name came from the pid, which
/// is 1 in a container); lastcall must neither truncate nor write through them.
#[test]
fn planted_symlinks_do_not_redirect_the_ready_file() {
    use std::os::unix::fs::{lchown, symlink, MetadataExt, PermissionsExt};
    let dir = scratch("ready-symlinks");
    let victim = dir.join("victim");
    fs::write(&victim, "root's precious data\n").unwrap();
    let shared = dir.join("shared");
    fs::create_dir(&shared).unwrap();
    let nobody = 65534;
    std::os::unix::fs::chown(&shared, Some(nobody), Some(nobody)).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o755)).unwrap();
    let ready = shared.join("ready");
    let mut planted = vec![ready.clone()];
    for pid in 1..=64 {
        planted.push(shared.join(format!("ready.lastcall-{pid}.tmp")));
    }
    for link in &planted {
        symlink(&victim, link).unwrap();
        lchown(link, Some(nobody), Some(nobody)).unwrap();
    }
    let ready_arg = ready.display().to_string();
    // A symlink at the path itself is someone else's: refused, left as it is.
    let (code, _, stderr) = run_to_end(Mode::Plain, &["--ready-file", &ready_arg, "true"], &[]);
    assert_eq!(code, 125, "{stderr}");
    assert!(fs::symlink_metadata(&ready).unwrap().file_type().is_symlink());
    fs::remove_file(&ready).unwrap();
    planted.remove(0);
    let mut run = start(Mode::Pid1, &dir, &["--ready-file", &ready_arg], &["sleep", "30"]);
    wait_until(10 * SEC, "the ready file", || {
        fs::symlink_metadata(&ready).ok().filter(|m| m.file_type().is_file()).map(|_| ())
    });
    assert_eq!(fs::read_to_string(&victim).unwrap(), "root's precious data\n");
    assert_eq!(fs::read_to_string(&ready).unwrap(), "1\n");
    assert_eq!(fs::metadata(&ready).unwrap().uid(), 0);
    run.signal(libc::SIGTERM);
    assert_eq!(run.wait(10 * SEC), 143);
    assert!(fs::symlink_metadata(&ready).is_err(), "the ready file is gone");
    assert_eq!(fs::read_to_string(&victim).unwrap(), "root's precious data\n");
    // Only the planted links are left: no temporary file, and the victim is where it was.
    let left: Vec<_> = fs::read_dir(&shared).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), planted.len(), "{left:?}");
}

/// What a stat says of identity and content, to check that something was left alone.
fn fingerprint(path: &Path) -> (u64, u64, u32, Vec<u8>) {
    use std::os::unix::fs::MetadataExt;
    let m = fs::symlink_metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let content = if m.file_type().is_file() { fs::read(path).unwrap() } else { vec![] };
    (m.dev(), m.ino(), m.mode(), content)
}

fn mknod(path: &Path, mode: u32, dev: u64) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mknod reads the path we own.
    let rc = unsafe { libc::mknod(c.as_ptr(), mode, dev as libc::dev_t) };
    assert_eq!(rc, 0, "mknod {}: {}", path.display(), std::io::Error::last_os_error());
}

/// The ready file never replaces or deletes what lastcall did not make: a FIFO, a character
/// device (a stand-in for /dev/null, made in a temporary directory), someone's file, a directory
/// or a symlink at the path is refused at start with exit 125 and one line, and stays as it was
/// (before: renamed over, then deleted at exit). A file a killed lastcall left is taken over.
#[test]
fn the_ready_file_never_replaces_what_lastcall_did_not_make() {
    use std::os::unix::fs::symlink;
    let dir = scratch("ready-not-ours");
    let victim = dir.join("victim");
    fs::write(&victim, "precious\n").unwrap();
    type Make<'a> = Box<dyn Fn(&Path) + 'a>;
    let cases: Vec<(&str, Make)> = vec![
        ("fifo", Box::new(|p: &Path| mknod(p, libc::S_IFIFO | 0o666, 0))),
        ("device", Box::new(|p: &Path| mknod(p, libc::S_IFCHR | 0o666, libc::makedev(1, 3) as u64))),
        ("someones-file", Box::new(|p: &Path| fs::write(p, "12\n34\n").unwrap())),
        ("digits-of-another-user", Box::new(|p: &Path| {
            fs::write(p, "42\n").unwrap();
            std::os::unix::fs::chown(p, Some(65534), None).unwrap();
        })),
        ("hard-linked", Box::new(|p: &Path| {
            fs::write(p.with_extension("other"), "42\n").unwrap();
            fs::hard_link(p.with_extension("other"), p).unwrap();
        })),
        ("directory", Box::new(|p: &Path| fs::create_dir(p).unwrap())),
        ("symlink", Box::new(|p: &Path| symlink(&victim, p).unwrap())),
    ];
    for (name, make) in cases {
        let path = dir.join(name);
        make(&path);
        let before = fingerprint(&path);
        let arg = path.display().to_string();
        let (code, _, stderr) = run_to_end(Mode::Plain, &["--ready-file", &arg, "true"], &[]);
        assert_eq!(code, 125, "{name}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");
        assert!(stderr.contains(&arg), "{name}: {stderr}");
        assert_eq!(fingerprint(&path), before, "{name} was touched");
    }
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");
    // A ready file left by a lastcall that was SIGKILLed: replaced, then removed at exit.
    let stale = dir.join("stale");
    fs::write(&stale, "4242\n").unwrap();
    let arg = stale.display().to_string();
    let mut run = start(Mode::Plain, &dir, &["--ready-file", &arg], &["sleep", "30"]);
    let pid_line = format!("{}\n", run.pid);
    wait_until(10 * SEC, "the new ready file", || (fs::read_to_string(&stale).ok()? == pid_line).then_some(()));
    run.signal(libc::SIGTERM);
    assert_eq!(run.wait(10 * SEC), 143);
    assert!(fs::symlink_metadata(&stale).is_err());
}

/// A user who can write a shared, sticky directory plants `app -> victim` in it: lastcall must
/// not follow that symlink in a parent component (before: root's victim/ready, mode 600, was
/// replaced and then deleted), nor step into a directory that user owns there (an unsafe
/// transition: its owner decides what lies below).
#[test]
fn the_ready_file_follows_no_symlink_and_no_unsafe_transition_in_its_directories() {
    use std::os::unix::fs::{lchown, symlink, PermissionsExt};
    let dir = scratch("ready-parents");
    let shared = dir.join("shared");
    fs::create_dir(&shared).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o1777)).unwrap();
    let victim = dir.join("victim");
    fs::create_dir(&victim).unwrap();
    fs::set_permissions(&victim, fs::Permissions::from_mode(0o700)).unwrap();
    fs::write(victim.join("ready"), "root's\n").unwrap();
    fs::set_permissions(victim.join("ready"), fs::Permissions::from_mode(0o600)).unwrap();
    let link = shared.join("app");
    symlink(&victim, &link).unwrap();
    lchown(&link, Some(54321), Some(54321)).unwrap();
    let owned = shared.join("theirs");
    fs::create_dir(&owned).unwrap();
    std::os::unix::fs::chown(&owned, Some(54321), Some(54321)).unwrap();
    let before = fingerprint(&victim.join("ready"));
    for (path, why) in [(link.join("ready"), "not a directory"), (owned.join("ready"), "unsafe path")] {
        let arg = path.display().to_string();
        let (code, _, stderr) = run_to_end(Mode::Plain, &["--ready-file", &arg, "sleep", "0.2"], &[]);
        assert_eq!(code, 125, "{arg}: {stderr}");
        assert!(stderr.contains(why), "{arg}: {stderr}");
        assert_eq!(fingerprint(&victim.join("ready")), before);
        assert!(fs::read_dir(&owned).unwrap().next().is_none(), "something was made in {}", owned.display());
    }
    // lastcall's own directory inside the sticky one is fine.
    let mine = shared.join("mine");
    fs::create_dir(&mine).unwrap();
    let arg = mine.join("ready").display().to_string();
    let (code, _, stderr) = run_to_end(Mode::Plain, &["--ready-file", &arg, "true"], &[]);
    assert_eq!(code, 0, "{stderr}");
}

/// At exit lastcall removes the path only while it still holds the file lastcall made: what
/// someone put there in its place stays.
#[test]
fn the_ready_file_is_removed_only_while_it_is_the_one_lastcall_made() {
    let dir = scratch("ready-replaced");
    let ready = dir.join("ready");
    let arg = ready.display().to_string();
    let mut run = start(Mode::Plain, &dir, &["--ready-file", &arg], &["sleep", "30"]);
    wait_until(10 * SEC, "the ready file", || ready.exists().then_some(()));
    let replacement = dir.join("replacement");
    fs::write(&replacement, "someone else's\n").unwrap();
    fs::rename(&replacement, &ready).unwrap();
    run.signal(libc::SIGTERM);
    assert_eq!(run.wait(10 * SEC), 143);
    assert_eq!(fs::read_to_string(&ready).unwrap(), "someone else's\n");
    assert!(run.stderr().contains("replaced"), "{}", run.stderr());
}
