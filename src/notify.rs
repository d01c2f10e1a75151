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

use std::fs;
use std::io::{self, IoSliceMut, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::{Path, PathBuf};

use log::{debug, warn};
use nix::sys::socket::{recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, UnixAddr};

use crate::logging::Repeated;
use crate::sys;

/// The largest datagram relayed; systemd's own limit is smaller.
const MAX_MESSAGE: usize = 64 * 1024;

pub struct NotifyRelay {
    socket: UnixDatagram,
    upstream: SocketAddr,
    /// Our socket's address, as the child's NOTIFY_SOCKET.
    name: String,
    /// The private directory holding our socket, removed on exit.
    dir: Option<PathBuf>,
    me: libc::pid_t,
    /// lastcall's cgroup (v2), unless it is the root cgroup.
    cgroup: Option<Vec<u8>>,
    /// Buffers kept from one wake-up to the next: the loop allocates nothing per message.
    message: Vec<u8>,
    filtered: Vec<u8>,
    control: Vec<u8>,
    proc_buf: Vec<u8>,
    refused: Repeated,
    undeliverable: Repeated,
}

impl NotifyRelay {
    /// A relay for `notify_socket` (NOTIFY_SOCKET's value), or None for an address kind systemd
    /// may use but lastcall cannot relay (vsock): the child then gets the variable unchanged.
    pub fn new(notify_socket: &str) -> io::Result<Option<NotifyRelay>> {
        let upstream = match notify_socket.strip_prefix('@') {
            Some(abstract_name) => SocketAddr::from_abstract_name(abstract_name)?,
            None if notify_socket.starts_with('/') => SocketAddr::from_pathname(notify_socket)?,
            None => {
                warn!("cannot relay NOTIFY_SOCKET={notify_socket}; passing it to the child as it is");
                return Ok(None);
            }
        };
        let tag = sys::random_u64()?;
        let (socket, name, dir) = match bind_private(tag) {
            Some((socket, dir)) => {
                let name = dir.join("notify").display().to_string();
                (socket, name, Some(dir))
            }
            // A read-only system with no writable /run or /tmp: the credential check is still
            // there, the directory's fence is not.
            None => {
                let name = format!("lastcall/notify/{tag:016x}");
                warn!("no private directory for the notify socket; using the abstract @{name}");
                (UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(&name)?)?, format!("@{name}"), None)
            }
        };
        socket.set_nonblocking(true)?;
        setsockopt(&socket, sockopt::PassCred, &true)?;
        let cgroup = fs::read("/proc/self/cgroup").ok().and_then(|text| unified_cgroup(&text).map(<[u8]>::to_vec));
        let cgroup = cgroup.filter(|c| c.as_slice() != b"/");
        Ok(Some(NotifyRelay {
            socket,
            upstream,
            name,
            dir,
            me: std::process::id() as libc::pid_t,
            cgroup,
            message: vec![0; MAX_MESSAGE],
            filtered: Vec::with_capacity(MAX_MESSAGE),
            control: nix::cmsg_space!(nix::sys::socket::UnixCredentials, [std::os::fd::RawFd; 253]),
            proc_buf: vec![0; 4096],
            refused: Repeated::new("dropped a notify message from a process outside the service"),
            undeliverable: Repeated::new("cannot notify the service manager"),
        }))
    }

    pub fn child_socket_name(&self) -> &str {
        &self.name
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }

    /// Passes on every message waiting on our socket that comes from the service's processes.
    pub fn relay(&mut self) {
        loop {
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
                    Err(_) => return,
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
                self.refused.warn(format_args!("pid {pid}, uid {uid}"));
                continue;
            }
            if truncated {
                continue;
            }
            filter_into(&self.message[..len], &mut self.filtered);
            if !self.filtered.is_empty() {
                let message = std::mem::take(&mut self.filtered);
                self.send(&message);
                self.filtered = message;
            }
        }
    }

    pub fn send(&mut self, message: &[u8]) {
        match self.socket.send_to_addr(message, &self.upstream) {
            Ok(_) => {
                if log::log_enabled!(log::Level::Debug) {
                    debug!("notify: {}", String::from_utf8_lossy(message).trim_end().replace('\n', " "));
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
        if is_descendant(pid, self.me, &mut self.proc_buf) {
            return true;
        }
        match &self.cgroup {
            Some(ours) => read_proc(pid, "cgroup", &mut self.proc_buf)
                .and_then(unified_cgroup)
                .is_some_and(|theirs| within(theirs, ours)),
            None => false,
        }
    }
}

impl Drop for NotifyRelay {
    fn drop(&mut self) {
        self.refused.flush();
        self.undeliverable.flush();
        if let Some(dir) = &self.dir {
            let _ = fs::remove_file(dir.join("notify"));
            let _ = fs::remove_dir(dir);
        }
    }
}

/// Binds our socket in a new directory only lastcall's user can enter: under systemd's
/// $RUNTIME_DIRECTORY, else /run, else the temporary directory. mkdir never follows a symlink
/// and fails on any name that exists, so a name planted in advance cannot be taken over.
fn bind_private(tag: u64) -> Option<(UnixDatagram, PathBuf)> {
    let runtime = std::env::var_os("RUNTIME_DIRECTORY")
        .and_then(|dirs| dirs.as_bytes().split(|&b| b == b':').next().map(|d| PathBuf::from(std::ffi::OsStr::from_bytes(d))));
    let bases = runtime.into_iter().chain([PathBuf::from("/run"), std::env::temp_dir()]);
    for base in bases.filter(|b| b.is_absolute()) {
        let dir = base.join(format!("lastcall-notify-{tag:016x}"));
        if fs::DirBuilder::new().mode(0o700).create(&dir).is_err() {
            continue;
        }
        match UnixDatagram::bind(dir.join("notify")) {
            Ok(socket) => return Some((socket, dir)),
            // A path too long for a socket address, say: try the next place.
            Err(_) => {
                let _ = fs::remove_dir(&dir);
            }
        }
    }
    None
}

/// Follows the parent chain in /proc from `pid` up: does it reach `ancestor`?
fn is_descendant(pid: libc::pid_t, ancestor: libc::pid_t, buf: &mut [u8]) -> bool {
    let mut pid = pid;
    // A chain longer than any pid space is a loop of reused pids.
    for _ in 0..4_194_304 {
        if pid == ancestor {
            return true;
        }
        // 0: the parent is outside our PID namespace; 1 (when we are not 1): the top.
        if pid <= 1 {
            return false;
        }
        match read_proc(pid, "stat", buf).and_then(parent_of) {
            Some(parent) => pid = parent,
            None => return false,
        }
    }
    false
}

/// The parent pid in a /proc/PID/stat: the second field after the command name, which may
/// itself contain spaces and parentheses.
fn parent_of(stat: &[u8]) -> Option<libc::pid_t> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let mut fields = stat[close + 1..].split(|&b| b == b' ').filter(|f| !f.is_empty());
    std::str::from_utf8(fields.nth(1)?).ok()?.parse().ok()
}

/// The cgroup v2 path from a /proc/PID/cgroup: the "0::" line.
fn unified_cgroup(text: &[u8]) -> Option<&[u8]> {
    text.split(|&b| b == b'\n').find_map(|line| line.strip_prefix(b"0::"))
}

/// Whether cgroup `theirs` is `ours` or below it.
fn within(theirs: &[u8], ours: &[u8]) -> bool {
    theirs.strip_prefix(ours).is_some_and(|rest| rest.is_empty() || rest.starts_with(b"/"))
}

/// /proc/PID/LEAF read into `buf`, without allocating: the path is built on the stack.
fn read_proc<'b>(pid: libc::pid_t, leaf: &str, buf: &'b mut [u8]) -> Option<&'b [u8]> {
    use std::io::Write;
    let mut path = [0u8; 64];
    let len = {
        let mut cursor = io::Cursor::new(&mut path[..]);
        write!(cursor, "/proc/{pid}/{leaf}").ok()?;
        cursor.position() as usize
    };
    let mut file = fs::File::open(Path::new(std::ffi::OsStr::from_bytes(&path[..len]))).ok()?;
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(&buf[..filled])
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
    fn mainpid_is_filtered_out() {
        assert_eq!(filtered(b"READY=1\nMAINPID=42\nSTATUS=up"), b"READY=1\nSTATUS=up\n");
        assert_eq!(filtered(b"MAINPID=42\n"), b"");
        assert_eq!(filtered(b"WATCHDOG=1"), b"WATCHDOG=1\n");
        assert_eq!(filtered(b"BARRIER=1\n"), b"");
    }

    #[test]
    fn proc_parsing() {
        assert_eq!(parent_of(b"42 (a) b) c) S 7 42 42 0"), Some(7));
        assert_eq!(parent_of(b"42 (sh) S 1 42"), Some(1));
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
        let mut buf = vec![0; 4096];
        let me = std::process::id() as libc::pid_t;
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        assert!(is_descendant(child.id() as libc::pid_t, me, &mut buf));
        assert!(!is_descendant(me, child.id() as libc::pid_t, &mut buf));
        assert!(!is_descendant(1, me, &mut buf) || me == 1);
        let _ = child.kill();
        let _ = child.wait();
    }
}
