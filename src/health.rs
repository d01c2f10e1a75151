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
//!
//! No wait of its own: each socket has the kernel raise lastcall's socket signal when it becomes
//! readable (`sys::signal_when_readable`), and the pass that signal starts looks at every
//! connection at once (poll with a zero timeout) and reads only those with something to read.
//! A new connection is read at once, since what reached it before then raised nothing; most (a
//! probe's request, a client that hung up) are done with there and never need the signal.
//!
//! May import: machine, metrics, sys.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::{Duration, Instant};

use log::debug;

use crate::machine::later;
use crate::metrics::Snapshot;
use crate::sys;
use nix::sys::socket::{accept4, listen, Backlog, SockFlag};
use nix::unistd::Pid;

pub const MAX_CONNECTIONS: usize = 64;
pub const MAX_REQUEST: usize = 4096;
pub const TIMEOUT: Duration = Duration::from_secs(2);

pub struct Health {
    listener: TcpListener,
    /// Who the kernel signals when a connection is readable: lastcall.
    owner: Pid,
    conns: Vec<Conn>,
    /// How many connections may be open at once: `MAX_CONNECTIONS`, or fewer when the fd limit
    /// leaves fewer (`fit_fd_limit`), so that room is made before accept() runs out of fds.
    budget: usize,
    /// After accept() fails (out of fds), the listener is left alone until then: it stays
    /// readable, and polling it would spin.
    accept_paused_until: Option<Instant>,
    /// Connections dropped to make room for new ones, for /metrics.
    pub evicted: u64,
}

/// How many connections one wake-up accepts; the listener stays readable for the rest.
const ACCEPT_BATCH: usize = 64;

/// How long accepting pauses after accept() fails.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

struct Conn {
    stream: TcpStream,
    request: Vec<u8>,
    deadline: Instant,
    /// Its request is read whole and waits for its answer (`read_and_answer`): nothing will
    /// signal it again.
    held: bool,
}

/// What the endpoint reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    pub ready: bool,
}

impl Health {
    /// Listens on `addr`; the kernel is to signal `owner` when a socket is readable.
    pub fn bind(addr: SocketAddr, owner: Pid) -> io::Result<Health> {
        // std's sockets are close-on-exec, so the child never inherits them.
        let listener = TcpListener::bind(addr)?;
        // The longest queue the kernel allows (-1: somaxconn) rather than std's 128: a connection
        // finding the queue full has its SYN dropped, and its client retries only a second later,
        // then three. A flood that keeps the queue full would keep a probe out.
        listen(&listener, Backlog::MAXALLOWABLE)?;
        listener.set_nonblocking(true)?;
        Ok(Health { listener, owner, conns: Vec::new(), budget: MAX_CONNECTIONS, accept_paused_until: None, evicted: 0 })
    }

    /// The listener, whose readiness the kernel is to signal.
    pub fn listener_fd(&self) -> BorrowedFd<'_> {
        self.listener.as_fd()
    }


    /// Fits the connection budget to the fds left under the limit (`free`, once lastcall holds
    /// every fd of its own), keeping `spare` for /proc reads and the like. Returns the budget:
    /// at 0 the endpoint cannot answer anyone, which lastcall says at start-up.
    pub fn fit_fd_limit(&mut self, free: usize, spare: usize) -> usize {
        self.budget = free.saturating_sub(spare).min(MAX_CONNECTIONS);
        self.budget
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.conns.iter().map(|c| c.deadline).chain(self.accept_paused_until).min()
    }

    /// Serves the connections that are readable, drops timed-out ones, and accepts new ones.
    /// True when there is more to do at once: the accept batch ran out, or a request is held.
    pub fn service(&mut self, status: Status, metrics: &Snapshot<'_>, now: Instant) -> bool {
        // One look at every connection rather than a read of each: the signal says only that
        // one of them is readable. (On the stack: the pass allocates nothing.)
        let mut looked = [libc::pollfd { fd: -1, events: libc::POLLIN, revents: 0 }; MAX_CONNECTIONS];
        let looked_at = self.conns.len().min(MAX_CONNECTIONS);
        for (slot, conn) in looked.iter_mut().zip(&self.conns) {
            slot.fd = conn.stream.as_raw_fd();
        }
        let read_all = sys::ready_now(&mut looked[..looked_at]).is_err();
        // Backwards, so that remove only moves connections already dealt with (which keeps
        // `looked` lined up with the rest); it keeps them in the order they came, oldest first.
        let mut held = false;
        for i in (0..self.conns.len()).rev() {
            let conn = &mut self.conns[i];
            let readable = read_all || conn.held || i >= looked_at || looked[i].revents != 0;
            let done = readable && {
                let mut this_held = false;
                let done = conn.read_and_answer(status, metrics, &mut this_held);
                conn.held = this_held;
                held |= this_held;
                done
            };
            if done || now >= self.conns[i].deadline {
                self.conns.remove(i);
            }
        }
        if held {
            // Back once the pending signal is handled; no new connection meanwhile.
            return true;
        }
        if self.accept_paused_until.is_some_and(|until| now >= until) {
            self.accept_paused_until = None;
        }
        // The listener is tried on every pass: one accept() that finds nothing is cheaper than
        // telling its signal from the connections'.
        self.accept_paused_until.is_none() && self.accept(status, metrics, now)
    }

    /// Accepts up to `ACCEPT_BATCH` connections and reads each at once; true when it took that
    /// many.
    fn accept(&mut self, status: Status, metrics: &Snapshot<'_>, now: Instant) -> bool {
        for _ in 0..ACCEPT_BATCH {
            match accept4(&self.listener, SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC).map_err(io::Error::from) {
                Ok(fd) => {
                    let mut conn = Conn { stream: TcpStream::from(fd), request: Vec::new(), deadline: later(now, TIMEOUT), held: false };
                    let mut held = false;
                    // Most connections are done with here: a probe's request is already in,
                    // or a churning client has hung up. Only one still to send needs the
                    // kernel's signal, and one more read after asking for it, for what came
                    // in between.
                    if conn.read_and_answer(status, metrics, &mut held) {
                        continue;
                    }
                    if !held {
                        if let Err(e) = sys::signal_when_readable(conn.stream.as_fd(), self.owner) {
                            debug!("health: cannot have the kernel signal a readable connection: {e}");
                            continue;
                        }
                        if conn.read_and_answer(status, metrics, &mut held) {
                            continue;
                        }
                    }
                    conn.held = held;
                    if self.conns.len() >= self.budget.max(1) {
                        self.make_room(status, metrics);
                    }
                    self.conns.push(conn);
                    if held {
                        // Back once the pending signal is handled.
                        return true;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                // Out of fds with connections open: one of them makes room, as when the budget
                // is reached (the fds may have gone elsewhere, to /proc reads say).
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) && !self.conns.is_empty() => {
                    self.make_room(status, metrics);
                }
                // EMFILE and the like: the connection stays queued, so back off for a moment.
                Err(e) => {
                    debug!("health: accept failed ({e}); pausing for {ACCEPT_BACKOFF:?}");
                    self.accept_paused_until = Some(later(now, ACCEPT_BACKOFF));
                    return false;
                }
            }
        }
        true
    }

    /// Frees one slot: the oldest connection that has sent nothing, unless one last read finds
    /// its request (then it is answered); failing that, the oldest.
    fn make_room(&mut self, status: Status, metrics: &Snapshot<'_>) {
        for i in 0..self.conns.len() {
            if !self.conns[i].request.is_empty() {
                continue;
            }
            let done = self.conns[i].read_and_answer(status, metrics, &mut false);
            if done || self.conns[i].request.is_empty() {
                if !done {
                    self.evicted += 1;
                    debug!("health: {} connections open, dropping the oldest idle one", self.conns.len());
                }
                self.conns.remove(i);
                return;
            }
            // Its request has started arriving just now: it stays.
        }
        debug!("health: {} requests under way, dropping the oldest", self.conns.len());
        if !self.conns.is_empty() {
            self.evicted += 1;
            self.conns.remove(0);
        }
    }
}

impl Conn {
    /// Reads what has arrived; answers once the request head is complete. True when done.
    /// A complete request is held (false) while a termination signal is pending and /ready
    /// would still say 200: the stop was asked for before the answer, so the event loop takes
    /// the signal first, and the next pass answers (`held`).
    fn read_and_answer(&mut self, status: Status, metrics: &Snapshot<'_>, held: &mut bool) -> bool {
        if head_complete(&self.request) {
            return self.answer(status, metrics, held);
        }
        let mut buf = [0u8; 1024];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return true,
                Ok(n) => {
                    self.request.extend_from_slice(&buf[..n]);
                    if head_complete(&self.request) {
                        return self.answer(status, metrics, held);
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

    fn answer(&mut self, status: Status, metrics: &Snapshot<'_>, held: &mut bool) -> bool {
        if status.ready && sys::termination_pending() {
            *held = true;
            return false;
        }
        let line = RequestLine::of(&self.request);
        // HEAD gets the headers GET would, Content-Length included, and no body.
        let head_only = line.method == b"HEAD";
        if line.wants_metrics() {
            let mut text = String::new();
            metrics.render(&mut text);
            self.respond_as(200, "OK", METRICS_TYPE, &text, head_only);
        } else {
            let (code, reason, body) = line.answer(status);
            self.respond(code, reason, body, head_only);
        }
        true
    }

    fn respond(&mut self, code: u16, reason: &str, body: &str, head_only: bool) {
        self.respond_as(code, reason, "text/plain", body, head_only);
    }

    fn respond_as(&mut self, code: u16, reason: &str, content_type: &str, body: &str, head_only: bool) {
        let response = format!(
            "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
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

/// Prometheus' text exposition format.
const METRICS_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The method and path of a request's first line: the one reading of it, for every path.
struct RequestLine<'a> {
    method: &'a [u8],
    /// The target without its query.
    path: &'a [u8],
}

impl<'a> RequestLine<'a> {
    fn of(request: &'a [u8]) -> RequestLine<'a> {
        let line = request.split(|&b| b == b'\n').next().unwrap_or_default();
        // The line ends in CRLF: without an HTTP version, the \r would end the path.
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let mut parts = line.split(|&b| b == b' ');
        let (method, target) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
        RequestLine { method, path: target.split(|&b| b == b'?').next().unwrap_or_default() }
    }

    fn is_get(&self) -> bool {
        self.method == b"GET" || self.method == b"HEAD"
    }

    fn wants_metrics(&self) -> bool {
        self.is_get() && self.path == b"/metrics"
    }

    fn answer(&self, status: Status) -> (u16, &'static str, &'static str) {
        if !self.is_get() {
            return (405, "Method Not Allowed", "only GET\n");
        }
        match self.path {
            b"/ready" if status.ready => (200, "OK", "ready\n"),
            b"/ready" => (503, "Service Unavailable", "shutting down\n"),
            b"/live" => (200, "OK", "live\n"),
            _ => (404, "Not Found", "try /ready or /live\n"),
        }
    }
}

/// Whether a complete request head asks for /metrics (GET or HEAD, any query).
pub fn wants_metrics(request: &[u8]) -> bool {
    RequestLine::of(request).wants_metrics()
}

/// The response for a complete request head that does not ask for /metrics (`wants_metrics`).
/// Public for the fuzz target.
pub fn answer(request: &[u8], status: Status) -> (u16, &'static str, &'static str) {
    RequestLine::of(request).answer(status)
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
        // HTTP/0.9-style, with no version: the CR is not part of the path.
        assert_eq!(answer(b"GET /ready\r\n\r\n", READY).0, 200);
        assert_eq!(answer(b"GET /live\n\n", READY).0, 200);
        assert_eq!(answer(b"GET /ready\r\n\r\n", DRAINING).0, 503);
    }

    /// A client that sends TERM and then asks /ready must get 503, even when lastcall is slow to
    /// run and its socket pass comes before the loop sees the TERM: a complete request waits
    /// while a termination signal is pending.
    #[test]
    fn a_request_that_comes_after_a_pending_term_is_not_told_ready() {
        use nix::sys::signal::{pthread_sigmask, raise, SigSet, SigmaskHow, Signal};
        use std::io::Read as _;
        // Owner 0: the kernel signals nobody, since this test's other threads would die of it.
        let mut health = Health::bind("127.0.0.1:0".parse().unwrap(), Pid::from_raw(0)).unwrap();
        let addr = health.listener.local_addr().unwrap();
        let term = SigSet::from(Signal::SIGTERM);
        // This test's thread only: TERM stays pending here, as in lastcall's loop.
        pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&term), None).unwrap();
        raise(Signal::SIGTERM).unwrap();
        let mut client = TcpStream::connect(addr).unwrap();
        client.write_all(b"GET /ready HTTP/1.1\r\n\r\n").unwrap();
        let counters = crate::metrics::Counters::default();
        let metrics = Snapshot {
            counters: &counters,
            version: "0",
            personality: "lastcall",
            phase: crate::machine::Phase::Running.name(),
            shutdown: None,
            exit_code: None,
            exit_signal: None,
            notify_relayed: 0,
            notify_refused: 0,
            health_evicted: 0,
            log_lines_dropped: 0,
        };
        let start = Instant::now();
        // Until the connection is accepted and its request read: held, not answered.
        while health.conns.is_empty() && start.elapsed() < TIMEOUT {
            health.service(READY, &metrics, Instant::now());
        }
        assert!(health.service(READY, &metrics, Instant::now()), "a held request asks for another pass");
        assert_eq!(health.conns.len(), 1, "answered while TERM was pending");
        // The loop takes the TERM and goes unready; the next pass answers.
        assert_eq!(term.wait().unwrap(), Signal::SIGTERM);
        pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&term), None).unwrap();
        health.service(DRAINING, &metrics, Instant::now());
        assert!(health.conns.is_empty());
        let mut response = String::new();
        client.read_to_string(&mut response).unwrap();
        assert!(response.starts_with("HTTP/1.1 503 "), "{response:?}");
    }

    #[test]
    fn request_heads() {
        assert!(head_complete(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
        assert!(head_complete(b"GET / HTTP/1.0\n\n"));
        assert!(!head_complete(b"GET / HTTP/1.1\r\nHost: x\r\n"));
    }

    #[test]
    fn metrics_requests() {
        assert!(wants_metrics(b"GET /metrics HTTP/1.1\r\n"));
        assert!(wants_metrics(b"HEAD /metrics?x=1 HTTP/1.1\r\n"));
        assert!(!wants_metrics(b"POST /metrics HTTP/1.1\r\n"));
        assert!(!wants_metrics(b"GET /metricsz HTTP/1.1\r\n"));
        // HTTP/0.9-style, with no version, as /ready: the CR is not part of the path.
        assert!(wants_metrics(b"GET /metrics\r\n\r\n"));
        assert!(wants_metrics(b"HEAD /metrics\n\n"));
    }
}
