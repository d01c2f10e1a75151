//! The ready file: present while the app runs and lastcall is not shutting down.
//!
//! lastcall runs as root, and the file's directory may be shared with users who must not be able
//! to turn that into a weapon, so the file only ever touches what lastcall made:
//! - The directory is reached component by component from `/` (or the working directory),
//!   following no symlink in any of them (`openat2` with RESOLVE_NO_SYMLINKS, or
//!   O_PATH|O_NOFOLLOW where the kernel has no openat2), and refusing an unsafe transition as
//!   systemd does: a directory owned by someone other than root or lastcall's user, inside a
//!   directory that others can write (its owner could swap what lies below). The directory is
//!   held open from then on, so every later step acts on the same directory.
//! - A path that exists is refused, unless it is a ready file a lastcall killed before it could
//!   clean up left there: a regular file with one link, owned by lastcall's user, holding a pid.
//! - The file is written under a random temporary name (O_CREAT|O_EXCL|O_NOFOLLOW), then linked
//!   to its name, which fails if anything appeared there in the meantime, instead of replacing it.
//! - It is removed only while the name still holds the inode lastcall made.
//!
//! May import: sys.

use std::ffi::{OsStr, OsString};
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{openat, openat2, AtFlags, OFlag, OpenHow, ResolveFlag, AT_FDCWD};
use nix::sys::stat::{fstat, fstatat, FileStat, Mode, SFlag};
use nix::unistd::{linkat, unlinkat, UnlinkatFlags};

use crate::sys;

pub struct ReadyFile {
    path: PathBuf,
    /// The directory, reached safely once and held: every step after acts on it.
    dir: OwnedFd,
    name: OsString,
    /// (device, inode) of the file lastcall made, while it is there.
    made: Option<(u64, u64)>,
}

impl ReadyFile {
    /// Reaches the directory, checks that the file can be created there and that nothing of
    /// anyone else's is at the path, before the app starts.
    pub fn prepare(path: &Path) -> io::Result<ReadyFile> {
        let (dir, name) = open_parent(path)?;
        match fstatat(dir.as_fd(), name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
            Err(Errno::ENOENT) => {}
            Err(e) => return Err(e.into()),
            Ok(st) if left_by_lastcall(&dir, &name, &st) => {
                unlinkat(dir.as_fd(), name.as_os_str(), UnlinkatFlags::NoRemoveDir)?;
            }
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "the path exists and is not a ready file lastcall made; lastcall will not replace it",
                ))
            }
        }
        let (temp, _) = create_temp(&dir, &name)?;
        unlinkat(dir.as_fd(), temp.as_os_str(), UnlinkatFlags::NoRemoveDir)?;
        Ok(ReadyFile { path: path.to_path_buf(), dir, name, made: None })
    }

    /// Creates the file atomically (written under a temporary name, then linked to its own),
    /// so a reader never sees half of it, and nothing that appeared at the path is replaced.
    pub fn create(&mut self) -> io::Result<()> {
        let (temp, mut file) = create_temp(&self.dir, &self.name)?;
        let placed = writeln!(file, "{}", std::process::id())
            .and_then(|()| Ok(fstat(file.as_fd())?))
            .and_then(|st| {
                linkat(self.dir.as_fd(), temp.as_os_str(), self.dir.as_fd(), self.name.as_os_str(), AtFlags::empty())
                    .map_err(|e| match e {
                        Errno::EEXIST => io::Error::new(io::ErrorKind::AlreadyExists, "something else appeared at the path; left alone"),
                        e => e.into(),
                    })?;
                Ok(st)
            });
        let _ = unlinkat(self.dir.as_fd(), temp.as_os_str(), UnlinkatFlags::NoRemoveDir);
        let st = placed?;
        self.made = Some(identity(&st));
        Ok(())
    }

    /// Removes the file, if the path still holds the one lastcall made.
    pub fn remove(&mut self) {
        let Some(made) = self.made.take() else { return };
        match fstatat(self.dir.as_fd(), self.name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) if identity(&st) == made => {
                if let Err(e) = unlinkat(self.dir.as_fd(), self.name.as_os_str(), UnlinkatFlags::NoRemoveDir) {
                    log::warn!("cannot remove the ready file {}: {e}", self.path.display());
                }
            }
            Ok(_) => log::warn!("the ready file {} was replaced by something else; leaving it", self.path.display()),
            Err(Errno::ENOENT) => {}
            Err(e) => log::warn!("cannot remove the ready file {}: {e}", self.path.display()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ReadyFile {
    fn drop(&mut self) {
        self.remove();
    }
}

/// (device, inode): what names one file. Their types differ between targets.
#[allow(clippy::unnecessary_cast)]
fn identity(st: &FileStat) -> (u64, u64) {
    (st.st_dev as u64, st.st_ino as u64)
}

fn refuse(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, why)
}

/// The path's directory, opened O_PATH without following a symlink in any component, and the
/// file's name in it.
fn open_parent(path: &Path) -> io::Result<(OwnedFd, OsString)> {
    let name = match path.components().next_back() {
        Some(Component::Normal(name)) if !path.as_os_str().as_bytes().ends_with(b"/") => name.to_os_string(),
        _ => return Err(refuse(format!("{} does not name a file", path.display()))),
    };
    let start: &OsStr = if path.is_absolute() { OsStr::new("/") } else { OsStr::new(".") };
    let mut dir = open_dir(None, start)?;
    let mut dir_stat = fstat(dir.as_fd())?;
    let components: Vec<Component> = path.components().collect();
    let (_, parents) = components.split_last().unwrap_or((&Component::CurDir, &[]));
    for component in parents {
        let part = match component {
            Component::RootDir | Component::CurDir => continue,
            Component::Normal(part) => *part,
            // Where `..` leads depends on what was walked; nothing needs it.
            _ => return Err(refuse(format!("{} has a .. in it", path.display()))),
        };
        let next = open_dir(Some(&dir), part).map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP | libc::ENOTDIR) => {
                refuse(format!("{} is not a directory (lastcall follows no symlink in the path)", Path::new(part).display()))
            }
            _ => e,
        })?;
        let next_stat = fstat(next.as_fd())?;
        if SFlag::from_bits_truncate(next_stat.st_mode) & SFlag::S_IFMT != SFlag::S_IFDIR {
            return Err(refuse(format!("{} is not a directory", Path::new(part).display())));
        }
        if unsafe_transition(owner(&dir_stat), owner(&next_stat), sys::effective_ids()) {
            return Err(refuse(format!(
                "unsafe path: {} is owned by uid {} inside a directory others can write",
                Path::new(part).display(),
                next_stat.st_uid
            )));
        }
        (dir, dir_stat) = (next, next_stat);
    }
    Ok((dir, name))
}

/// One directory, opened O_PATH in `at` (or the working directory) without following a symlink:
/// openat2 with RESOLVE_NO_SYMLINKS where the kernel has it, else O_NOFOLLOW, which on its own
/// guards the one component it opens (each is opened alone here).
fn open_dir(at: Option<&OwnedFd>, part: &OsStr) -> io::Result<OwnedFd> {
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let how = OpenHow::new().flags(flags).resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    let opened = match at {
        Some(dir) => openat2(dir.as_fd(), part, how),
        None => openat2(AT_FDCWD, part, how),
    };
    match opened {
        // No openat2 (before Linux 5.6), or a seccomp filter that refuses it.
        Err(Errno::ENOSYS | Errno::EPERM) => Ok(match at {
            Some(dir) => openat(dir.as_fd(), part, flags, Mode::empty())?,
            None => openat(AT_FDCWD, part, flags, Mode::empty())?,
        }),
        opened => Ok(opened?),
    }
}

/// A directory's mode and owners: what `unsafe_transition` looks at.
#[derive(Clone, Copy)]
struct Owner {
    st_mode: u32,
    st_uid: u32,
    st_gid: u32,
}

fn owner(st: &FileStat) -> Owner {
    Owner { st_mode: st.st_mode, st_uid: st.st_uid, st_gid: st.st_gid }
}

/// systemd's rule for a path it resolves as root: stepping into a directory that is neither
/// root's nor lastcall's user's, from a directory that others can write, is unsafe (whoever owns
/// it decides what is below it, and the others could swap it).
fn unsafe_transition(parent: Owner, child: Owner, (uid, gid): (u32, u32)) -> bool {
    let others_write = parent.st_mode & 0o002 != 0 || (parent.st_mode & 0o020 != 0 && parent.st_gid != 0 && parent.st_gid != gid);
    let trusted_owner = child.st_uid == 0 || child.st_uid == uid;
    // Also systemd's own: a directory owned by a user other than the parent's (unless the parent
    // is root's) was put there by someone the parent's owner let in.
    let foreign = parent.st_uid != 0 && parent.st_uid != child.st_uid && !trusted_owner;
    (others_write && !trusted_owner) || foreign
}

/// Whether what is at the path is a ready file that a lastcall killed before it could remove it
/// left behind: a regular file with one link, owned by lastcall's user, holding a pid and a
/// newline. Anything else is someone's, and stays.
fn left_by_lastcall(dir: &OwnedFd, name: &OsStr, st: &FileStat) -> bool {
    let regular = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG;
    if !regular || st.st_nlink != 1 || st.st_uid != sys::effective_ids().0 || st.st_size > 12 {
        return false;
    }
    let Ok(fd) = openat(dir.as_fd(), name, OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC, Mode::empty()) else {
        return false;
    };
    // Still the same file, and still a regular one (opening a FIFO non-blocking does not block).
    match fstat(fd.as_fd()) {
        Ok(now) if now.st_ino == st.st_ino && now.st_dev == st.st_dev => {}
        _ => return false,
    }
    let mut buf = [0u8; 16];
    let n = nix::unistd::read(fd.as_fd(), &mut buf).unwrap_or(0);
    is_pid_line(&buf[..n])
}

fn is_pid_line(text: &[u8]) -> bool {
    text.strip_suffix(b"\n").is_some_and(|digits| !digits.is_empty() && digits.len() <= 10 && digits.iter().all(u8::is_ascii_digit))
}

/// A new file in `dir`, under a name nobody could have planted: `.<name>.lastcall-<64 random
/// bits>`. Retried on the astronomically unlikely clash.
fn create_temp(dir: &OwnedFd, name: &OsStr) -> io::Result<(OsString, std::fs::File)> {
    let mut attempts = 0;
    loop {
        let mut temp = OsString::from(".");
        temp.push(name);
        temp.push(format!(".lastcall-{:016x}", sys::random_u64()?));
        let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        match openat(dir.as_fd(), temp.as_os_str(), flags, Mode::from_bits_truncate(0o666)) {
            Ok(fd) => return Ok((temp, std::fs::File::from(fd))),
            Err(Errno::EEXIST) if attempts < 3 => attempts += 1,
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(st_mode: u32, st_uid: u32, st_gid: u32) -> Owner {
        Owner { st_mode, st_uid, st_gid }
    }

    #[test]
    fn unsafe_transitions_as_systemd_sees_them() {
        let me = (0, 0);
        // /tmp (root, sticky, world-writable) into a root directory: fine; into a user's: not.
        assert!(!unsafe_transition(stat(0o41777, 0, 0), stat(0o40755, 0, 0), me));
        assert!(unsafe_transition(stat(0o41777, 0, 0), stat(0o40755, 54321, 54321), me));
        // A root directory nobody else can write may hold a user's directory.
        assert!(!unsafe_transition(stat(0o40755, 0, 0), stat(0o40755, 65534, 65534), me));
        // Inside a user's directory, a directory of another user's is not.
        assert!(unsafe_transition(stat(0o40755, 65534, 65534), stat(0o40755, 54321, 54321), me));
        assert!(!unsafe_transition(stat(0o40755, 65534, 65534), stat(0o40755, 65534, 65534), me));
        // Group-writable by a group that is not root's.
        assert!(unsafe_transition(stat(0o40775, 0, 100), stat(0o40755, 54321, 0), me));
        // lastcall's own user is trusted like root.
        assert!(!unsafe_transition(stat(0o41777, 0, 0), stat(0o40755, 1000, 1000), (1000, 1000)));
    }

    #[test]
    fn only_a_pid_line_is_a_ready_file() {
        assert!(is_pid_line(b"1\n"));
        assert!(is_pid_line(b"4194304\n"));
        for bad in [&b""[..], b"\n", b"1", b"12a\n", b"root:x:0:0\n", b"1\n2\n"] {
            assert!(!is_pid_line(bad), "{bad:?}");
        }
    }
}
