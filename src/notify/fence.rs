//! The notify socket's fence: a private directory (0700, a random name, locked for as long as
//! lastcall lives) in the best base there is, opened to the app's user when `--user` names one,
//! and the sweep of what a lastcall killed by SIGKILL left behind.
//!
//! May import: sys.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};

use log::{debug, warn};

use crate::sys;

/// Our socket, bound in a private directory (`bind_private`).
pub(super) struct Private {
    pub socket: UnixDatagram,
    pub dir: PathBuf,
    pub lock: Locked,
    /// Whether the base held a directory before ours, which may be a dead lastcall's: only then
    /// is it worth listing (`sweep_stale`). A directory's link count is 2 plus its
    /// subdirectories on the filesystems that count them (tmpfs, ext4, xfs) and 1 on those that
    /// do not (btrfs, a merged overlayfs directory), and what a dead lastcall leaves is a
    /// directory: a count of exactly 2 says there is nothing to sweep.
    pub neighbours: bool,
}

/// Binds our socket in a new directory only lastcall's user can enter, in the first base of
/// `bases` that takes it. mkdir never follows a symlink and fails on any name that exists, so a
/// name planted in advance cannot be taken over. The directory is locked (flock) before the
/// socket is bound in it, and stays locked until lastcall is gone, however it goes: that is how
/// `sweep_stale` tells a dead one's.
pub(super) fn bind_private(tag: &str, runtime_directory: Option<&Path>) -> Option<Private> {
    use std::os::unix::fs::MetadataExt;
    let mut tried: Vec<PathBuf> = Vec::new();
    for base in bases(runtime_directory) {
        if !base.is_absolute() || tried.contains(&base) {
            continue;
        }
        let links = fs::symlink_metadata(&base).map_or(0, |m| m.nlink());
        let dir = base.join(format!("{STALE_PREFIX}{tag}"));
        tried.push(base);
        if fs::DirBuilder::new().mode(0o700).create(&dir).is_err() {
            continue;
        }
        let Some(lock) = open_locked(&dir) else {
            let _ = fs::remove_dir(&dir);
            continue;
        };
        match UnixDatagram::bind(dir.join("notify")) {
            Ok(socket) => return Some(Private { socket, dir, lock, neighbours: links != 2 }),
            // A path too long for a socket address, say: try the next place.
            Err(_) => {
                let _ = fs::remove_dir(&dir);
            }
        }
    }
    None
}

/// Where the private directory may go, best first: systemd's $RUNTIME_DIRECTORY (the unit's
/// own), then /run or /dev/shm if it is a tmpfs, then /run and the temporary directory
/// whatever they are: on a disk (ext4, a container's overlayfs) making and removing the
/// directory and the socket journals inodes, slowing start-up and exit, and the last close may
/// wait for a busy journal. Evaluated lazily: the first base that takes the directory ends the
/// look-up.
fn bases(runtime_directory: Option<&Path>) -> impl Iterator<Item = PathBuf> {
    let runtime = runtime_directory.map(Path::to_path_buf);
    let in_memory = ["/run", "/dev/shm"].into_iter().filter(|base| fenced_tmpfs(Path::new(base))).map(PathBuf::from);
    runtime.into_iter().chain(in_memory).chain([PathBuf::from("/run"), std::env::temp_dir()])
}

/// Whether `base` is a tmpfs directory that others cannot write, or can only with the sticky
/// bit (as /dev/shm is: 1777), so that no one but its owner and root can rename or remove a
/// name lastcall makes there, as in /tmp.
fn fenced_tmpfs(base: &Path) -> bool {
    use nix::sys::statfs::{statfs, TMPFS_MAGIC};
    use std::os::unix::fs::MetadataExt;
    statfs(base).is_ok_and(|fs| fs.filesystem_type() == TMPFS_MAGIC)
        && fs::symlink_metadata(base).is_ok_and(|m| m.is_dir() && (m.mode() & 0o002 == 0 || m.mode() & 0o1000 != 0))
}

/// Lets the app, running as another user, reach the socket and no one else: the directory
/// stays lastcall's and unwritable to the app (which can neither replace the socket nor leave
/// anything behind in it), its group becomes the app's with search permission only (0710), and
/// the socket becomes the app's own (0600 leaves connecting to it and root). Every sender is still
/// checked as before. The names were made by lastcall a moment ago inside its own 0700
/// directory, so no one can have put anything there.
pub(super) fn open_to_the_app(dir: &Path, uid: u32, gid: u32) {
    use std::os::unix::fs::{lchown, MetadataExt, PermissionsExt};
    // The directory is lastcall's (its effective uid's): nothing to hand over to the same user.
    if fs::symlink_metadata(dir).is_ok_and(|m| m.uid() == uid) {
        return;
    }
    let socket = dir.join("notify");
    let owned = fs::set_permissions(&socket, fs::Permissions::from_mode(0o600))
        .and_then(|()| lchown(&socket, Some(uid), None))
        .and_then(|()| lchown(dir, None, Some(gid)))
        .and_then(|()| fs::set_permissions(dir, fs::Permissions::from_mode(0o710)));
    if let Err(e) = owned {
        warn!("cannot hand the notify socket to uid {uid}: {e}; the app will not reach it");
    }
}

const STALE_PREFIX: &str = "lastcall-notify-";

/// `random` as 16 hex digits, leading zeros included, by a loop whose length does not depend on
/// the value: the instruction-count guard (tests/instructions.rs) subtracts two runs' totals,
/// and `{:016x}` costs more or less with the number of leading zeros.
pub(super) fn hex_tag(random: u64) -> String {
    let mut digits = [0u8; 16];
    for (i, digit) in digits.iter_mut().enumerate() {
        *digit = b"0123456789abcdef"[(random >> (60 - 4 * i)) as usize & 0xf];
    }
    String::from_utf8_lossy(&digits).into_owned()
}

/// A directory held open and locked: the lock goes with the last close of the file, when it is
/// dropped or when lastcall is gone (no unlock of its own: one system call fewer at exit).
pub(super) type Locked = fs::File;

/// The directory, opened without following a symlink and locked (exclusive flock, without
/// waiting); None if it is not a directory of lastcall's user, mode 0700, or someone holds it.
fn open_locked(dir: &Path) -> Option<Locked> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir)
        .ok()?;
    let meta = file.metadata().ok()?;
    if meta.uid() != sys::effective_ids().0 || meta.mode() & 0o777 != 0o700 {
        return None;
    }
    sys::lock_exclusive_now(&file).then_some(file)
}

/// Removes what a lastcall killed by SIGKILL left in `base`: a directory named as ours, of our
/// user, mode 0700, holding our socket, that nobody holds locked. A live lastcall locks its
/// directory before binding the socket, so one that holds a socket and no lock belongs to
/// nobody. Only a socket named `notify` is removed, then the directory if that left it empty:
/// anything else in it stays. Once per lastcall, over the base it uses; `own`, its own
/// directory's name, is skipped (it is locked anyway).
pub(super) fn sweep_stale(base: &Path, own: Option<&std::ffi::OsStr>) {
    use std::os::unix::fs::FileTypeExt;
    let Ok(listed) = std::ffi::CString::new(base.as_os_str().as_bytes()) else { return };
    // Only a dead one's leftovers are kept (and allocated for): most sweeps find none.
    let mut stale: Vec<std::ffi::OsString> = Vec::new();
    sys::each_entry(&listed, 4096, |name, _| {
        // Our own is skipped: its random name would make the work below vary from run to run.
        if own.is_some_and(|own| own.as_bytes() == name) {
            return;
        }
        let Some(tag) = name.strip_prefix(STALE_PREFIX.as_bytes()) else { return };
        if tag.len() == 16 && tag.iter().all(u8::is_ascii_hexdigit) {
            stale.push(std::ffi::OsStr::from_bytes(name).to_owned());
        }
    });
    for name in stale {
        let dir = base.join(&name);
        let Some(_lock) = open_locked(&dir) else { continue };
        let socket = dir.join("notify");
        if fs::symlink_metadata(&socket).is_ok_and(|m| m.file_type().is_socket()) {
            debug!("removing {}, left by a lastcall that is gone", dir.display());
            let _ = fs::remove_file(&socket);
            let _ = fs::remove_dir(&dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The base is listed for a dead lastcall's directory only when it holds a directory
    /// besides ours: a file or a socket there is no reason to.
    #[test]
    fn a_base_is_swept_only_when_it_holds_another_directory() {
        let base = std::env::temp_dir().join(format!("lastcall-fence-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        fs::create_dir(&base).unwrap();
        use std::os::unix::fs::MetadataExt;
        if fs::symlink_metadata(&base).unwrap().nlink() != 2 {
            fs::remove_dir(&base).unwrap();
            eprintln!("skipped: the temporary directory's filesystem does not count subdirectories");
            return;
        }
        let bind = |tag: &str| {
            let private = bind_private(tag, Some(&base)).expect("a private directory in the test's base");
            assert!(private.dir.starts_with(&base));
            private
        };
        fs::write(base.join("a-file"), b"").unwrap();
        let first = bind("0000000000000001");
        assert!(!first.neighbours, "nothing but a file was there");
        let second = bind("0000000000000002");
        assert!(second.neighbours, "the first one's directory was there");
        for private in [first, second] {
            fs::remove_file(private.dir.join("notify")).unwrap();
            fs::remove_dir(&private.dir).unwrap();
        }
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn tags_are_16_hex_digits() {
        assert_eq!(hex_tag(0), "0000000000000000");
        assert_eq!(hex_tag(0x0123_4567_89ab_cdef), "0123456789abcdef");
        assert_eq!(hex_tag(u64::MAX), "ffffffffffffffff");
    }
}
