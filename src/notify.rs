//! The systemd notify relay. With lastcall as a unit's main process, systemd (NotifyAccess=main)
//! only listens to lastcall, so the child's sd_notify messages go to a socket of lastcall's,
//! which passes them on, minus any MAINPID= that would make systemd bypass lastcall.
//! File descriptors sent along (FDSTORE=1) are not relayed.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

use log::{debug, warn};

pub struct NotifyRelay {
    socket: UnixDatagram,
    upstream: SocketAddr,
    /// Our socket's name, as the child's NOTIFY_SOCKET.
    name: String,
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
        // Abstract names need no file to clean up; pid and time keep two lastcalls apart.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let name = format!("lastcall/notify/{}/{nanos}", std::process::id());
        let socket = UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(&name)?)?;
        socket.set_nonblocking(true)?;
        Ok(Some(NotifyRelay { socket, upstream, name: format!("@{name}") }))
    }

    pub fn child_socket_name(&self) -> &str {
        &self.name
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }

    /// Passes on every message waiting on our socket.
    pub fn relay(&self) {
        let mut buf = vec![0u8; 65536];
        loop {
            let n = match self.socket.recv(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            let message = filter(&buf[..n]);
            if !message.is_empty() {
                self.send(&message);
            }
        }
    }

    pub fn send(&self, message: &[u8]) {
        match self.socket.send_to_addr(message, &self.upstream) {
            Ok(_) => debug!("notify: {}", String::from_utf8_lossy(message).replace('\n', " ")),
            Err(e) => warn!("cannot notify the service manager: {e}"),
        }
    }
}

/// The message without MAINPID= (the main process is lastcall, and must stay so) and without
/// BARRIER=1: the barrier's fd does not survive the relay, and the client's wait already ended
/// when lastcall received the message and the kernel closed that fd. Public for the fuzz target.
pub fn filter(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len());
    for line in message.split(|&b| b == b'\n') {
        if line.is_empty() || line.starts_with(b"MAINPID=") || line == b"BARRIER=1" {
            continue;
        }
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out
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
