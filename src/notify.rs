//! The systemd notify relay. With lastcall as a unit's main process, systemd (NotifyAccess=main)
//! only listens to lastcall, so the child's sd_notify messages go to a socket of lastcall's,
//! which passes them on, minus any MAINPID= that would make systemd bypass lastcall.
//! File descriptors sent along (FDSTORE=1) are not relayed.
//!
//! Whatever lastcall relays, systemd credits to lastcall, the main process, so the relay only
//! speaks for the service's own processes (systemd's NotifyAccess=all): the kernel stamps each
//! datagram with its sender's pid (SCM_CREDENTIALS, which an unprivileged sender cannot forge),
//! and a message is relayed only when that pid is a descendant of lastcall, or in lastcall's
//! cgroup when that cgroup is not the root one (which every process outside a unit shares).
//! The socket is also fenced: a pathname in a new 0700 directory with a random name, not an
//! abstract name that anyone in the network namespace can reach and find in /proc/net/unix.
//!
//! May import: logging, procfs, sys.

use std::fs;
use std::io::{self, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::{Path, PathBuf};

use log::{debug, warn};
use nix::sys::socket::{recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, UnixAddr};

use crate::logging::Repeated;
#[cfg(test)]
use crate::procfs::parent_of;
use crate::procfs::{parent_and_start, read_proc, unified_cgroup};
use crate::sys;

/// The largest datagram relayed; systemd's own limit is smaller.
const MAX_MESSAGE: usize = 64 * 1024;

/// How many datagrams one wake-up handles; the rest wait for the next, after lastcall has looked
/// at its signals and deadlines. A flood of messages cannot hold up the SIGKILL at the grace.
pub const BATCH: usize = 64;

/// How far up the parent chain the sender check looks. Deeper than any real service's tree; a
/// sender further down is not the service's, as far as the relay can tell, and its message goes.
const MAX_DEPTH: usize = 256;

/// Verdicts kept, by pid and start time (which together name one process, whatever reuses the
/// pid later): a sender, or one of its ancestors, seen before costs one /proc read, not a walk.
const VERDICTS: usize = 256;

#[derive(Clone, Copy, Default)]
struct Verdict {
    pid: libc::pid_t,
    start: u64,
    descends: bool,
}

pub struct NotifyRelay {
    socket: UnixDatagram,
    upstream: SocketAddr,
    /// Our socket's address, as the child's NOTIFY_SOCKET.
    name: String,
    /// The private directory holding our socket, removed on exit, and held open with an
    /// exclusive flock for as long as lastcall lives: see `sweep_stale`.
    dir: Option<(PathBuf, Locked)>,
    /// Whether the sweep of the directory's base is still to do. Only the socket must be there
    /// before the app runs: the sweep waits for the first pass (`settle`), the buffers below for
    /// the first message (`allocate`).
    first_pass: bool,
    /// Who descends from lastcall, with verdicts cached.
    lineage: Lineage,
    /// lastcall's cgroup (v2), unless it is the root cgroup: `own_cgroup`.
    cgroup: Option<Option<Vec<u8>>>,
    /// Buffers kept from one wake-up to the next: the loop allocates nothing per message. Empty
    /// until the first message.
    message: Vec<u8>,
    filtered: Vec<u8>,
    control: Vec<u8>,
    proc_buf: Vec<u8>,
    /// Whether lastcall has said that without /proc no sender can be checked (once is enough).
    warned_blind: bool,
    refused: Repeated,
    undeliverable: Repeated,
    /// Messages passed on, and dropped as not the service's, for /metrics.
    pub relayed_total: u64,
    pub refused_total: u64,
}

impl NotifyRelay {
    /// A relay for `notify_socket` (NOTIFY_SOCKET's value), or None for an address kind systemd
    /// may use but lastcall cannot relay (vsock): the child then gets the variable unchanged.
    /// `app`: the uid and gid the app runs as (`--user`), which must reach the socket too.
    pub fn new(notify_socket: &str, app: Option<(u32, u32)>) -> io::Result<Option<NotifyRelay>> {
        let upstream = match notify_socket.strip_prefix('@') {
            Some(abstract_name) => SocketAddr::from_abstract_name(abstract_name)?,
            None if notify_socket.starts_with('/') => SocketAddr::from_pathname(notify_socket)?,
            None => {
                warn!("cannot relay NOTIFY_SOCKET={notify_socket}; passing it to the child as it is");
                return Ok(None);
            }
        };
        let tag = hex_tag(sys::random_u64()?);
        let (socket, name, dir) = match bind_private(&tag) {
            Some((socket, dir, lock)) => {
                if let Some((uid, gid)) = app {
                    open_to_the_app(&dir, uid, gid);
                }
                let name = dir.join("notify").display().to_string();
                (socket, name, Some((dir, lock)))
            }
            // A read-only system with no writable /run, /dev/shm or /tmp: the credential check is still
            // there, the directory's fence is not.
            None => {
                let name = format!("lastcall/notify/{tag}");
                warn!("no private directory for the notify socket; using the abstract @{name}");
                (UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(&name)?)?, format!("@{name}"), None)
            }
        };
        socket.set_nonblocking(true)?;
        setsockopt(&socket, sockopt::PassCred, &true)?;
        Ok(Some(NotifyRelay {
            socket,
            upstream,
            name,
            dir,
            first_pass: true,
            lineage: Lineage::new(std::process::id() as libc::pid_t),
            cgroup: None,
            message: Vec::new(),
            filtered: Vec::new(),
            control: Vec::new(),
            proc_buf: Vec::new(),
            warned_blind: false,
            refused: Repeated::new("dropped a notify message from a process outside the service"),
            undeliverable: Repeated::new("cannot notify the service manager"),
            relayed_total: 0,
            refused_total: 0,
        }))
    }

    pub fn child_socket_name(&self) -> &str {
        &self.name
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }

    /// Passes on the messages waiting on our socket that come from the service's processes, at
    /// most `BATCH` of them. True when that many were read: there may be more.
    pub fn relay(&mut self) -> bool {
        if self.first_pass {
            self.first_pass = false;
            self.settle();
        }
        if self.message.is_empty() {
            // Nothing sent yet (a peek into no buffer): an app that never sends costs no buffers.
            let peek = nix::sys::socket::recv(self.socket.as_raw_fd(), &mut [], MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT);
            if peek == Err(nix::errno::Errno::EAGAIN) {
                return false;
            }
            self.allocate();
        }
        for _ in 0..BATCH {
            let (len, sender, truncated) = {
                let mut iov = [IoSliceMut::new(&mut self.message)];
                let received = recvmsg::<UnixAddr>(
                    self.socket.as_raw_fd(),
                    &mut iov,
                    Some(&mut self.control),
                    MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_CMSG_CLOEXEC,
                );
                let msg = match received {
                    Ok(msg) => msg,
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(_) => return false,
                };
                let mut sender = None;
                // The buffer has room for the most fds one message can carry (SCM_MAX_FD), so
                // it is never truncated; fds sent along (FDSTORE=1) are not relayed: closed.
                for cmsg in msg.cmsgs().into_iter().flatten() {
                    match cmsg {
                        ControlMessageOwned::ScmCredentials(cred) => sender = Some((cred.pid(), cred.uid())),
                        ControlMessageOwned::ScmRights(fds) => fds.into_iter().for_each(|fd| {
                            let _ = nix::unistd::close(fd);
                        }),
                        _ => {}
                    }
                }
                (msg.bytes, sender, msg.flags.contains(MsgFlags::MSG_TRUNC))
            };
            let Some((pid, uid)) = sender else { continue };
            if !self.speaks_for_the_service(pid) {
                self.refused_total += 1;
                // Without /proc every message is dropped, which was said once (`warned_blind`).
                if !self.warned_blind {
                    self.refused.warn(format_args!("pid {pid}, uid {uid}"));
                }
                continue;
            }
            if truncated {
                continue;
            }
            filter_into(&self.message[..len], &mut self.filtered);
            if !self.filtered.is_empty() {
                let message = std::mem::take(&mut self.filtered);
                self.relayed_total += 1;
                self.send(&message);
                self.filtered = message;
            }
        }
        true
    }

    /// Start-up's deferred half: the sweep. The event loop's first pass over the sockets comes
    /// after the app is spawned, so this runs while the app execs (on another core, if there is
    /// one), not before. What the app sent meanwhile waits on the socket.
    #[cold]
    fn settle(&mut self) {
        if let Some((dir, _)) = &self.dir {
            if let Some(base) = dir.parent() {
                sweep_stale(base, dir.file_name());
            }
        }
    }

    /// The buffers, at the first message (the verdict cache waits for the first sender, and
    /// lastcall's cgroup for the first that is not a descendant).
    #[cold]
    fn allocate(&mut self) {
        self.message = vec![0; MAX_MESSAGE];
        self.filtered = Vec::with_capacity(MAX_MESSAGE);
        self.control = nix::cmsg_space!(nix::sys::socket::UnixCredentials, [std::os::fd::RawFd; 253]);
        self.proc_buf = vec![0; 4096];
    }

    pub fn send(&mut self, message: &[u8]) {
        match self.socket.send_to_addr(message, &self.upstream) {
            Ok(_) => {
                if log::log_enabled!(log::Level::Debug) {
                    debug!(event = "notify"; "notify: {}", String::from_utf8_lossy(message).trim_end().replace('\n', " "));
                }
            }
            Err(e) => self.undeliverable.warn(format_args!("{e}")),
        }
    }

    /// Whether `pid` is one of the service's processes: lastcall's descendant, or in its cgroup.
    /// Pid 0 is a sender in a PID namespace we cannot see into.
    fn speaks_for_the_service(&mut self, pid: libc::pid_t) -> bool {
        if pid <= 0 {
            return false;
        }
        match self.lineage.descends(pid, &mut self.proc_buf) {
            Some(true) => return true,
            Some(false) => {}
            None if self.warned_blind => {}
            None => {
                if fs::metadata("/proc/self/stat").is_err() {
                    self.warned_blind = true;
                    warn!("/proc cannot be read: the notify relay cannot tell the service's processes from others, and drops every message");
                }
            }
        }
        let Some(ours) = own_cgroup(&mut self.cgroup) else { return false };
        read_proc(pid, "cgroup", &mut self.proc_buf).and_then(unified_cgroup).is_some_and(|theirs| within(theirs, ours))
    }
}

impl Drop for NotifyRelay {
    fn drop(&mut self) {
        self.refused.flush();
        self.undeliverable.flush();
        if let Some((dir, _lock)) = &self.dir {
            let _ = fs::remove_file(dir.join("notify"));
            let _ = fs::remove_dir(dir);
        }
    }
}

/// Binds our socket in a new directory only lastcall's user can enter, in the first base of
/// `bases` that takes it. mkdir never follows a symlink and fails on any name that exists, so a
/// name planted in advance cannot be taken over. The directory is locked (flock) before the
/// socket is bound in it, and stays locked until lastcall is gone, however it goes: that is how
/// `sweep_stale` tells a dead one's.
fn bind_private(tag: &str) -> Option<(UnixDatagram, PathBuf, Locked)> {
    let mut tried: Vec<PathBuf> = Vec::new();
    for base in bases() {
        if !base.is_absolute() || tried.contains(&base) {
            continue;
        }
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
            Ok(socket) => return Some((socket, dir, lock)),
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
/// whatever they are. On a disk (ext4, a container's overlayfs) making and removing the
/// directory and the socket journals inodes: on ext4, 150 µs over start-up and exit, and up to
/// 2 ms when the last close waits for a busy journal, against 30 µs on tmpfs. Evaluated lazily:
/// the first base that takes the directory ends the look-up.
fn bases() -> impl Iterator<Item = PathBuf> {
    let runtime = std::env::var_os("RUNTIME_DIRECTORY")
        .and_then(|dirs| dirs.as_bytes().split(|&b| b == b':').next().map(|d| PathBuf::from(std::ffi::OsStr::from_bytes(d))));
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
fn open_to_the_app(dir: &Path, uid: u32, gid: u32) {
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
fn hex_tag(random: u64) -> String {
    let mut digits = [0u8; 16];
    for (i, digit) in digits.iter_mut().enumerate() {
        *digit = b"0123456789abcdef"[(random >> (60 - 4 * i)) as usize & 0xf];
    }
    String::from_utf8_lossy(&digits).into_owned()
}

/// A directory held open and locked: the lock goes with the last close of the file, when it is
/// dropped or when lastcall is gone (no unlock of its own: one system call fewer at exit).
type Locked = fs::File;

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
fn sweep_stale(base: &Path, own: Option<&std::ffi::OsStr>) {
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

/// Which processes descend from lastcall (`me`), remembered by pid and start time.
struct Lineage {
    me: libc::pid_t,
    /// Direct-mapped by pid; allocated at the first sender.
    verdicts: Vec<Verdict>,
    /// The walk in progress, kept to reuse the allocation.
    chain: Vec<(libc::pid_t, u64)>,
}

impl Lineage {
    fn new(me: libc::pid_t) -> Lineage {
        Lineage { me, verdicts: Vec::new(), chain: Vec::new() }
    }

    /// Whether `pid` descends from lastcall, following the parent chain in /proc up to
    /// `MAX_DEPTH` steps, and stopping at the first process whose verdict is known. Every
    /// process walked gets the verdict (they share the chain above them). None when the sender
    /// cannot be read at all (gone, or no /proc).
    fn descends(&mut self, pid: libc::pid_t, buf: &mut [u8]) -> Option<bool> {
        if self.verdicts.is_empty() {
            self.verdicts = vec![Verdict::default(); VERDICTS];
            self.chain = Vec::with_capacity(MAX_DEPTH);
        }
        self.chain.clear();
        let mut pid = pid;
        let verdict = loop {
            if pid == self.me {
                break true;
            }
            // 0: the parent is outside our PID namespace; 1 (when we are not 1): the top.
            if pid <= 1 || self.chain.len() >= MAX_DEPTH {
                break false;
            }
            let Some((parent, start)) = read_proc(pid, "stat", buf).and_then(parent_and_start) else {
                if self.chain.is_empty() {
                    return None;
                }
                break false;
            };
            let known = self.verdicts[slot(pid)];
            if known.pid == pid && known.start == start {
                break known.descends;
            }
            self.chain.push((pid, start));
            pid = parent;
        };
        for &(pid, start) in &self.chain {
            self.verdicts[slot(pid)] = Verdict { pid, start, descends: verdict };
        }
        Some(verdict)
    }
}

fn slot(pid: libc::pid_t) -> usize {
    pid.unsigned_abs() as usize % VERDICTS
}

/// lastcall's cgroup (v2), None for the root cgroup, read the first time a sender is not
/// lastcall's descendant, which is rare: the app and its children are. Reading it then, not at
/// start-up, widens nothing beyond the service: moving lastcall takes write access to the
/// `cgroup.procs` of the cgroups above it, which a unit's app (even with `Delegate=`) has only
/// inside the unit's own cgroup, the one systemd itself trusts with NotifyAccess=all; a move to
/// the root cgroup turns the cgroup check off. A failed read (out of fds, say) is tried again
/// at the next such sender.
fn own_cgroup(cached: &mut Option<Option<Vec<u8>>>) -> Option<&[u8]> {
    if cached.is_none() {
        let text = fs::read("/proc/self/cgroup").ok()?;
        *cached = Some(unified_cgroup(&text).filter(|c| *c != b"/").map(<[u8]>::to_vec));
    }
    cached.as_ref().and_then(|c| c.as_deref())
}

/// Whether cgroup `theirs` is `ours` or below it.
fn within(theirs: &[u8], ours: &[u8]) -> bool {
    theirs.strip_prefix(ours).is_some_and(|rest| rest.is_empty() || rest.starts_with(b"/"))
}

/// The message without MAINPID= (the main process is lastcall, and must stay so) and without
/// BARRIER=1: the barrier's fd does not survive the relay, and the client's wait already ended
/// when lastcall received the message and the kernel closed that fd. Public for the fuzz target.
pub fn filter(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len());
    filter_into(message, &mut out);
    out
}

/// `filter` into a buffer the relay keeps, so that relaying allocates nothing.
fn filter_into(message: &[u8], out: &mut Vec<u8>) {
    out.clear();
    for line in message.split(|&b| b == b'\n') {
        if line.is_empty() || line.starts_with(b"MAINPID=") || line == b"BARRIER=1" {
            continue;
        }
        out.extend_from_slice(line);
        out.push(b'\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filtered(message: &[u8]) -> Vec<u8> {
        filter(message)
    }

    #[test]
    fn tags_are_16_hex_digits() {
        assert_eq!(hex_tag(0), "0000000000000000");
        assert_eq!(hex_tag(0x0123_4567_89ab_cdef), "0123456789abcdef");
        assert_eq!(hex_tag(u64::MAX), "ffffffffffffffff");
    }

    #[test]
    fn mainpid_is_filtered_out() {
        assert_eq!(filtered(b"READY=1\nMAINPID=42\nSTATUS=up"), b"READY=1\nSTATUS=up\n");
        assert_eq!(filtered(b"MAINPID=42\n"), b"");
        assert_eq!(filtered(b"WATCHDOG=1"), b"WATCHDOG=1\n");
        assert_eq!(filtered(b"BARRIER=1\n"), b"");
    }

    #[test]
    fn proc_parsing() {
        let tail = "42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 1000 100";
        assert_eq!(parent_and_start(format!("42 (a) b) c) S 7 {tail}").as_bytes()), Some((7, 987654)));
        assert_eq!(parent_of(format!("42 (sh) S 1 {tail}").as_bytes()), Some(1));
        assert_eq!(parent_of(b"42 (sh) S 1 42"), None, "no start time");
        assert_eq!(parent_of(b"garbage"), None);
        let cgroup = b"1:cpu:/x\n0::/system.slice/app.service\n";
        assert_eq!(unified_cgroup(cgroup), Some(&b"/system.slice/app.service"[..]));
        assert!(within(b"/system.slice/app.service", b"/system.slice/app.service"));
        assert!(within(b"/system.slice/app.service/sub", b"/system.slice/app.service"));
        assert!(!within(b"/system.slice/app.service2", b"/system.slice/app.service"));
        assert!(!within(b"/system.slice", b"/system.slice/app.service"));
    }

    #[test]
    fn our_own_process_tree() {
        let me = std::process::id() as libc::pid_t;
        let relay = Lineage::new;
        let buf = &mut vec![0; 4096];
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let kid = child.id() as libc::pid_t;
        let mut mine = relay(me);
        assert_eq!(mine.descends(kid, buf), Some(true));
        // Cached now: the same answer without a walk.
        assert!(mine.verdicts[slot(kid)].pid == kid && mine.verdicts[slot(kid)].descends);
        assert_eq!(mine.descends(kid, buf), Some(true));
        assert_eq!(relay(kid).descends(me, buf), Some(false));
        assert!(me == 1 || relay(me).descends(1, buf) == Some(false));
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(relay(me).descends(kid, buf), None, "gone");
    }
}
