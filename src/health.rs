//! The health endpoint, served inside lastcall's one event loop: non-blocking sockets, no
//! threads. `GET /ready` is 200 until shutdown starts, then 503; `GET /live` is 200 for as long
//! as lastcall runs; anything else is 404.
//!
//! A client can never hold up signal handling: every socket is non-blocking, a request is at
//! most `MAX_REQUEST` bytes and `TIMEOUT` long, and at most `MAX_CONNECTIONS` are open. When a
//! new connection finds them all taken, the oldest one that has sent nothing makes room (after
//! one last read, in case its request has just arrived), and one with a request under way only
//! if none is idle: a flood of idle or churning clients cannot lock a probe out. At most
//! `ACCEPT_BATCH` connections are accepted per wake-up, so that the requests of those already
//! accepted are read before a flood behind them could push them out.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use log::debug;

use crate::machine::later;
use nix::poll::PollFlags;

pub const MAX_CONNECTIONS: usize = 64;
pub const MAX_REQUEST: usize = 4096;
pub const TIMEOUT: Duration = Duration::from_secs(2);

pub struct Health {
    listener: TcpListener,
    conns: Vec<Conn>,
    /// After accept() fails (out of fds), the listener is left alone until then: it stays
    /// readable, and polling it would spin.
    accept_paused_until: Option<Instant>,
}

/// How many connections one wake-up accepts; the listener stays readable for the rest.
const ACCEPT_BATCH: usize = 16;

/// How long accepting pauses after accept() fails.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

struct Conn {
    stream: TcpStream,
    request: Vec<u8>,
    deadline: Instant,
}

/// What the endpoint reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    pub ready: bool,
}

impl Health {
    pub fn bind(addr: SocketAddr) -> io::Result<Health> {
        // std's sockets are close-on-exec, so the child never inherits them.
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(Health { listener, conns: Vec::new(), accept_paused_until: None })
    }

    /// The sockets to poll, and for what: the listener first (for nothing while accepting is
    /// paused), then each connection.
    pub fn fds(&self) -> impl Iterator<Item = (BorrowedFd<'_>, PollFlags)> {
        let listen = if self.accept_paused_until.is_some() { PollFlags::empty() } else { PollFlags::POLLIN };
        std::iter::once((self.listener.as_fd(), listen))
            .chain(self.conns.iter().map(|c| (c.stream.as_fd(), PollFlags::POLLIN)))
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.conns.iter().map(|c| c.deadline).chain(self.accept_paused_until).min()
    }

    /// Serves what is readable (`readable[i]` for the i-th fd of `fds()`), drops timed-out
    /// connections, and accepts new ones.
    pub fn service(&mut self, readable: &[bool], status: Status, now: Instant) {
        let listener_ready = readable.first().copied().unwrap_or(false);
        // Backwards, so that remove only moves connections already dealt with; it keeps the
        // rest in the order they came, oldest first.
        for i in (0..self.conns.len()).rev() {
            let was_readable = readable.get(i + 1).copied().unwrap_or(false);
            if (was_readable && self.conns[i].read_and_answer(status)) || now >= self.conns[i].deadline {
                self.conns.remove(i);
            }
        }
        if self.accept_paused_until.is_some_and(|until| now >= until) {
            self.accept_paused_until = None;
        }
        if listener_ready && self.accept_paused_until.is_none() {
            self.accept(status, now);
        }
    }

    fn accept(&mut self, status: Status, now: Instant) {
        for _ in 0..ACCEPT_BATCH {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    if self.conns.len() >= MAX_CONNECTIONS {
                        self.make_room(status);
                    }
                    self.conns.push(Conn { stream, request: Vec::new(), deadline: later(now, TIMEOUT) });
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                // EMFILE and the like: the connection stays queued, so back off for a moment.
                Err(e) => {
                    debug!("health: accept failed ({e}); pausing for {ACCEPT_BACKOFF:?}");
                    self.accept_paused_until = Some(later(now, ACCEPT_BACKOFF));
                    return;
                }
            }
        }
    }

    /// Frees one slot: the oldest connection that has sent nothing, unless one last read finds
    /// its request (then it is answered); failing that, the oldest.
    fn make_room(&mut self, status: Status) {
        for i in 0..self.conns.len() {
            if !self.conns[i].request.is_empty() {
                continue;
            }
            let done = self.conns[i].read_and_answer(status);
            if done || self.conns[i].request.is_empty() {
                if !done {
                    debug!("health: {MAX_CONNECTIONS} connections open, dropping the oldest idle one");
                }
                self.conns.remove(i);
                return;
            }
            // Its request has started arriving just now: it stays.
        }
        debug!("health: {MAX_CONNECTIONS} requests under way, dropping the oldest");
        self.conns.remove(0);
    }
}

impl Conn {
    /// Reads what has arrived; answers once the request head is complete. True when done.
    fn read_and_answer(&mut self, status: Status) -> bool {
        let mut buf = [0u8; 1024];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return true,
                Ok(n) => {
                    self.request.extend_from_slice(&buf[..n]);
                    if head_complete(&self.request) {
                        let (code, reason, body) = answer(&self.request, status);
                        // HEAD gets the headers GET would, Content-Length included, and no body.
                        let head_only = self.request.starts_with(b"HEAD ");
                        self.respond(code, reason, body, head_only);
                        return true;
                    }
                    if self.request.len() >= MAX_REQUEST {
                        self.respond(431, "Request Header Fields Too Large", "request too large\n", false);
                        return true;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(_) => return true,
            }
        }
    }

    fn respond(&mut self, code: u16, reason: &str, body: &str, head_only: bool) {
        let response = format!(
            "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
            body.len(),
            if head_only { "" } else { body }
        );
        // A fresh socket's send buffer takes a response this small whole; a client that will not
        // read is not waited for.
        let _ = self.stream.write(response.as_bytes());
        let _ = self.stream.shutdown(Shutdown::Write);
    }
}

/// Whether the bytes read so far hold a whole request head. Public for the fuzz target.
pub fn head_complete(request: &[u8]) -> bool {
    request.windows(4).any(|w| w == b"\r\n\r\n") || request.windows(2).any(|w| w == b"\n\n")
}

/// The response for a complete request head. Public for the fuzz target.
pub fn answer(request: &[u8], status: Status) -> (u16, &'static str, &'static str) {
    let line = request.split(|&b| b == b'\n').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, target) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    let path = target.split(|&b| b == b'?').next().unwrap_or_default();
    if method != b"GET" && method != b"HEAD" {
        return (405, "Method Not Allowed", "only GET\n");
    }
    match path {
        b"/ready" if status.ready => (200, "OK", "ready\n"),
        b"/ready" => (503, "Service Unavailable", "shutting down\n"),
        b"/live" => (200, "OK", "live\n"),
        _ => (404, "Not Found", "try /ready or /live\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const READY: Status = Status { ready: true };
    const DRAINING: Status = Status { ready: false };

    #[test]
    fn answers() {
        assert_eq!(answer(b"GET /ready HTTP/1.1\r\n", READY).0, 200);
        assert_eq!(answer(b"GET /ready HTTP/1.1\r\n", DRAINING).0, 503);
        assert_eq!(answer(b"GET /live HTTP/1.1\r\n", DRAINING).0, 200);
        assert_eq!(answer(b"HEAD /live HTTP/1.0\r\n", READY).0, 200);
        assert_eq!(answer(b"GET /ready?verbose=1 HTTP/1.1\r\n", READY).0, 200);
        assert_eq!(answer(b"GET / HTTP/1.1\r\n", READY).0, 404);
        assert_eq!(answer(b"GET /readyz HTTP/1.1\r\n", READY).0, 404);
        assert_eq!(answer(b"POST /ready HTTP/1.1\r\n", READY).0, 405);
        assert_eq!(answer(b"\xff\xfe garbage", READY).0, 405);
    }

    #[test]
    fn request_heads() {
        assert!(head_complete(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
        assert!(head_complete(b"GET / HTTP/1.0\n\n"));
        assert!(!head_complete(b"GET / HTTP/1.1\r\nHost: x\r\n"));
    }
}
