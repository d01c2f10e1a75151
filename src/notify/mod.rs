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
//! This file is the relay (receive, filter, forward); the fence is `fence`, the sender check
//! `trust`.
//!
//! May import: its `fence` and `trust`, logging, sys.

mod fence;
mod trust;

use std::fs;
use std::io::{self, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::{Path, PathBuf};

use log::{debug, warn};
use nix::sys::socket::{recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, UnixAddr};

use crate::logging::{Event, Repeated};
use crate::sys;
use fence::{bind_private, hex_tag, open_to_the_app, sweep_stale, Locked, Private};
use trust::Trust;

/// The largest datagram relayed; systemd's own limit is smaller.
const MAX_MESSAGE: usize = 64 * 1024;

/// How many datagrams one wake-up handles; the rest wait for the next, after lastcall has looked
/// at its signals and deadlines. A flood of messages cannot hold up the SIGKILL at the grace.
pub const BATCH: usize = 64;

pub struct NotifyRelay {
    socket: UnixDatagram,
    upstream: SocketAddr,
    /// Our socket's address, as the child's NOTIFY_SOCKET.
    name: String,
    /// The private directory holding our socket, removed on exit, and held open with an
    /// exclusive flock for as long as lastcall lives: see `sweep_stale`.
    dir: Option<(PathBuf, Locked)>,
    /// Whether the sweep of the directory's base is still to do: only if the base held another
    /// directory (`Private::neighbours`). Only the socket must be there before the app runs:
    /// the sweep waits for the first pass (`settle`), the buffers below for the first message
    /// (`allocate`).
    sweep: bool,
    /// Who may speak for the service.
    trust: Trust,
    /// A relayed message said STOPPING=1 (`take_stopping`).
    stopping: bool,
    /// Buffers kept from one wake-up to the next: the loop allocates nothing per message. Empty
    /// until the first message.
    message: Vec<u8>,
    filtered: Vec<u8>,
    control: Vec<u8>,
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
    pub fn new(notify_socket: &str, app: Option<(u32, u32)>, runtime_directory: Option<&Path>) -> io::Result<Option<NotifyRelay>> {
        let upstream = match notify_socket.strip_prefix('@') {
            Some(abstract_name) => SocketAddr::from_abstract_name(abstract_name)?,
            None if notify_socket.starts_with('/') => SocketAddr::from_pathname(notify_socket)?,
            None => {
                warn!("cannot relay NOTIFY_SOCKET={notify_socket}; passing it to the child as it is");
                return Ok(None);
            }
        };
        let tag = hex_tag(sys::random_u64()?);
        let (socket, name, dir, sweep) = match bind_private(&tag, runtime_directory) {
            Some(Private { socket, dir, lock, neighbours }) => {
                if let Some((uid, gid)) = app {
                    open_to_the_app(&dir, uid, gid);
                }
                let name = dir.join("notify").display().to_string();
                (socket, name, Some((dir, lock)), neighbours)
            }
            // A read-only system with no writable /run, /dev/shm or /tmp: the credential check is still
            // there, the directory's fence is not.
            None => {
                let name = format!("lastcall/notify/{tag}");
                warn!("no private directory for the notify socket; using the abstract @{name}");
                (UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(&name)?)?, format!("@{name}"), None, false)
            }
        };
        socket.set_nonblocking(true)?;
        setsockopt(&socket, sockopt::PassCred, &true)?;
        Ok(Some(NotifyRelay {
            socket,
            upstream,
            name,
            dir,
            sweep,
            trust: Trust::new(),
            stopping: false,
            message: Vec::new(),
            filtered: Vec::new(),
            control: Vec::new(),
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
        if self.sweep {
            self.sweep = false;
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
            if !self.trust.speaks_for_the_service(pid) {
                self.refused_total += 1;
                // Without /proc every message is dropped, which was said once (`blind`).
                if !self.trust.blind {
                    self.refused.warn(format_args!("pid {pid}, uid {uid}"));
                }
                continue;
            }
            if truncated {
                continue;
            }
            filter_into(&self.message[..len], &mut self.filtered);
            self.stopping |= self.filtered.split(|&b| b == b'\n').any(|line| line == b"STOPPING=1");
            if !self.filtered.is_empty() {
                let message = std::mem::take(&mut self.filtered);
                self.relayed_total += 1;
                self.send(&message);
                self.filtered = message;
            }
        }
        true
    }

    /// Whether a message relayed since the last call said STOPPING=1: the app stops serving.
    pub fn take_stopping(&mut self) -> bool {
        std::mem::take(&mut self.stopping)
    }

    /// Passes on what the main child, just reaped as `main`, sent before it exited, with what
    /// else is waiting (one batch): its messages can no longer be checked against /proc, and
    /// once lastcall has exited they could not be read at all. Its pid still names it: the
    /// kernel hands a freed pid out again only after going round the whole pid space, and this
    /// pass comes straight after the reap.
    #[cold]
    pub fn relay_last_words(&mut self, main: libc::pid_t) {
        self.trust.just_reaped = Some(main);
        self.relay();
        self.trust.just_reaped = None;
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
        self.trust.allocate();
    }

    pub fn send(&mut self, message: &[u8]) {
        match self.socket.send_to_addr(message, &self.upstream) {
            Ok(_) => {
                if log::log_enabled!(log::Level::Debug) {
                    debug!(event = Event::Notify.name(); "notify: {}", String::from_utf8_lossy(message).trim_end().replace('\n', " "));
                }
            }
            Err(e) => self.undeliverable.warn(format_args!("{e}")),
        }
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

    #[test]
    fn mainpid_is_filtered_out() {
        assert_eq!(filter(b"READY=1\nMAINPID=42\nSTATUS=up"), b"READY=1\nSTATUS=up\n");
        assert_eq!(filter(b"MAINPID=42\n"), b"");
        assert_eq!(filter(b"WATCHDOG=1"), b"WATCHDOG=1\n");
        assert_eq!(filter(b"BARRIER=1\n"), b"");
    }
}
