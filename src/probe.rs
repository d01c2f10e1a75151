//! `lastcall probe ...`: a health check for images with no shell, curl or test binary. It asks
//! lastcall's own endpoint (`ready`, `live`) or ready file, or the app itself (`http://`,
//! `tcp://`), for `HEALTHCHECK` and Kubernetes exec probes.
//!
//! A probe is a short process of its own, not PID 1's loop, so it may block, and it resolves a
//! name in a child process of its own; but one deadline bounds all of it: the name's resolution (musl's
//! resolver, reading the image's /etc/hosts and resolv.conf, waits for a silent DNS server far
//! longer), each connect, the request, and the status line. Only the status line is read, at
//! most `MAX_STATUS_LINE` bytes, after the interim (1xx) answers before it, at most
//! `MAX_INTERIM` of them: a server that trickles its answer cannot hold the probe past the
//! deadline, and one with an endless body is never read past its first line. A failure is
//! one line on stderr (refused, timed out, HTTP 503), which Docker keeps in its health log.
//!
//! May import: config, error, signals, sys.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::config::{ProbeConfig, ProbeTarget};
use crate::error::OneLine;
use crate::sys;

/// The most read of an answer: its status line must fit.
pub const MAX_STATUS_LINE: usize = 1024;

/// 0 when the target holds, 1 when it does not (or nothing answers), saying why on stderr.
pub fn probe(config: &ProbeConfig) -> i32 {
    let deadline = Deadline { at: Instant::now() + config.timeout, timeout: config.timeout };
    match check(config, &deadline) {
        Ok(()) => 0,
        Err(why) => {
            eprintln!("lastcall: probe failed: {}: {}", OneLine(&describe(config)), OneLine(&why));
            1
        }
    }
}

fn check(config: &ProbeConfig, deadline: &Deadline) -> Result<(), String> {
    match &config.target {
        ProbeTarget::Http { host, port, path } => match http_status(host, *port, path, deadline)? {
            (200..=399, _) => Ok(()),
            (_, line) => Err(format!("answered {line}")),
        },
        ProbeTarget::Tcp { host, port } => connect(host, *port, deadline).map(drop),
        target @ (ProbeTarget::Ready | ProbeTarget::Live) => match (config.health_listen, &config.ready_file) {
            (Some(addr), _) => {
                let path = if *target == ProbeTarget::Ready { "/ready" } else { "/live" };
                let addr = reachable(addr);
                match http_status(&addr.ip().to_string(), addr.port(), path, deadline)? {
                    (200, _) => Ok(()),
                    (_, line) => Err(format!("answered {line}")),
                }
            }
            (None, Some(path)) if path.exists() => Ok(()),
            (None, Some(_)) => Err("does not exist".into()),
            (None, None) => Err("nothing to ask".into()),
        },
    }
}

fn describe(config: &ProbeConfig) -> String {
    match &config.target {
        ProbeTarget::Http { host, port, path } => format!("http://{}:{port}{path}", bracketed(host)),
        ProbeTarget::Tcp { host, port } => format!("tcp://{}:{port}", bracketed(host)),
        ProbeTarget::Ready | ProbeTarget::Live => match (config.health_listen, &config.ready_file) {
            (Some(addr), _) => {
                let path = if config.target == ProbeTarget::Ready { "/ready" } else { "/live" };
                format!("http://{}{path}", reachable(addr))
            }
            (None, Some(file)) => file.display().to_string(),
            (None, None) => "nothing to probe".into(),
        },
    }
}

fn bracketed(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

/// A listener on every address is reached through loopback.
fn reachable(mut addr: SocketAddr) -> SocketAddr {
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr.ip() {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
        });
    }
    addr
}

struct Deadline {
    at: Instant,
    timeout: Duration,
}

impl Deadline {
    /// What is left, or the probe's failure once nothing is.
    fn left(&self) -> Result<Duration, String> {
        match self.at.checked_duration_since(Instant::now()) {
            Some(left) if !left.is_zero() => Ok(left),
            _ => Err(self.expired()),
        }
    }

    fn expired(&self) -> String {
        format!("timed out after {:?}", self.timeout)
    }
}

/// The addresses of `host`: a literal as it is; a name as the image's resolver (getaddrinfo:
/// /etc/hosts, then resolv.conf's servers) has it, in a child process that is killed if the
/// resolver is still waiting at the deadline (a thread would do, at 37 KB more of binary).
fn resolve(host: &str, port: u16, deadline: &Deadline) -> Result<Vec<SocketAddr>, String> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let cannot = |why: &dyn std::fmt::Display| format!("cannot resolve '{}': {why}", OneLine(host));
    let (pid, mut answer) = sys::fork_with_pipe(|| match (host, port).to_socket_addrs() {
        Ok(addrs) => addrs.map(|a| format!("{a}\n")).collect::<String>().into_bytes(),
        Err(e) => format!("!{e}").into_bytes(),
    })
    .map_err(|e| cannot(&e))?;
    let text = read_until(&mut answer, deadline);
    let _ = sys::kill(pid, crate::signals::Sig(libc::SIGKILL));
    let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
    let text = text.map_err(|e| match e.kind() {
        io::ErrorKind::TimedOut => format!("{} resolving '{}'", deadline.expired(), OneLine(host)),
        _ => cannot(&e),
    })?;
    if let Some(error) = text.strip_prefix('!') {
        return Err(cannot(&error));
    }
    let addrs: Vec<SocketAddr> = text.lines().filter_map(|l| l.parse().ok()).collect();
    if addrs.is_empty() {
        return Err(format!("'{}' has no address", OneLine(host)));
    }
    Ok(addrs)
}

/// What the resolver's child wrote, up to its end, 64 KiB at most, by the deadline.
fn read_until(pipe: &mut std::fs::File, deadline: &Deadline) -> io::Result<String> {
    use nix::poll::{poll, PollFd, PollFlags};
    use std::os::fd::AsFd;
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.left().map_err(|_| io::Error::from(io::ErrorKind::TimedOut))?;
        let millis = u16::try_from(left.as_millis().max(1)).unwrap_or(u16::MAX);
        let mut fds = [PollFd::new(pipe.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, millis) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
        match pipe.read(&mut buf) {
            Ok(0) => return Ok(String::from_utf8_lossy(&text).into_owned()),
            Ok(n) if text.len() + n <= 65536 => text.extend_from_slice(&buf[..n]),
            Ok(_) => return Err(io::Error::new(io::ErrorKind::InvalidData, "too many addresses")),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// A connection to the first of `host`'s addresses that takes one.
fn connect(host: &str, port: u16, deadline: &Deadline) -> Result<TcpStream, String> {
    let mut last = String::new();
    for addr in resolve(host, port, deadline)? {
        match TcpStream::connect_timeout(&addr, deadline.left()?) {
            Ok(stream) => return Ok(stream),
            Err(e) => last = io_reason(&e, deadline),
        }
    }
    Err(last)
}

fn io_reason(e: &io::Error, deadline: &Deadline) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => "connection refused".into(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => deadline.expired(),
        _ => {
            let text = e.to_string();
            text.split(" (os error").next().unwrap_or(&text).to_string()
        }
    }
}

/// `GET path` on `host:port`: the status code and the status line of the answer.
fn http_status(host: &str, port: u16, path: &str, deadline: &Deadline) -> Result<(u16, String), String> {
    let mut stream = connect(host, port, deadline)?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {}:{port}\r\nUser-Agent: lastcall-probe\r\nAccept: */*\r\nConnection: close\r\n\r\n",
        bracketed(host)
    );
    stream.set_write_timeout(Some(deadline.left()?)).map_err(|e| io_reason(&e, deadline))?;
    stream.write_all(request.as_bytes()).map_err(|e| io_reason(&e, deadline))?;
    final_status(&mut stream, deadline)
}

/// The most interim (1xx) answers skipped before the final one, and the most bytes they may
/// take in all: a server that sends them without end fails the probe at once, not at the
/// deadline.
pub const MAX_INTERIM: usize = 8;
pub const MAX_INTERIM_BYTES: usize = 64 * 1024;

/// The status of the final answer read from `stream`: interim answers (100 Continue, 103 Early
/// Hints), head and all, are skipped as Go's net/http and curl skip them, all but 101, which
/// ends an HTTP/1.1 exchange.
fn final_status(stream: &mut (impl Read + SetTimeout), deadline: &Deadline) -> Result<(u16, String), String> {
    let mut answer = Answer { buf: [0u8; MAX_STATUS_LINE], start: 0, end: 0 };
    let mut interim_bytes = 0;
    for skipped in 0..=MAX_INTERIM {
        let Some((code, line, consumed)) = answer.status_line(stream, deadline)? else {
            return Err(if skipped == 0 { "connection closed with no answer" } else { "connection closed after an interim answer" }.into());
        };
        if !(100..=199).contains(&code) || code == 101 {
            return Ok((code, line));
        }
        interim_bytes += consumed + answer.skip_head(stream, deadline, MAX_INTERIM_BYTES.saturating_sub(interim_bytes + consumed))?;
    }
    Err(format!("more than {MAX_INTERIM} interim answers"))
}

/// What a probe reads from: a socket, whose reads wait at most what is left of the deadline.
trait SetTimeout {
    fn set_timeout(&mut self, left: Duration) -> io::Result<()>;
}

impl SetTimeout for TcpStream {
    fn set_timeout(&mut self, left: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(left))
    }
}

/// An answer read in pieces of at most `MAX_STATUS_LINE` bytes: `buf[start..end]` is read and not
/// yet looked at.
struct Answer {
    buf: [u8; MAX_STATUS_LINE],
    start: usize,
    end: usize,
}

impl Answer {
    /// More bytes after what is held; 0 at the end of the answer. Each read waits only for what
    /// is left of the deadline: a byte at a time cannot extend it.
    fn fill(&mut self, stream: &mut (impl Read + SetTimeout), deadline: &Deadline) -> Result<usize, String> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        loop {
            stream.set_timeout(deadline.left()?).map_err(|e| io_reason(&e, deadline))?;
            match stream.read(&mut self.buf[self.end..]) {
                Ok(n) => {
                    self.end += n;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_reason(&e, deadline)),
            }
        }
    }

    /// The next status line: its code, its text (`parse_status_line`), and the bytes it took;
    /// None if the answer ends first.
    fn status_line(&mut self, stream: &mut (impl Read + SetTimeout), deadline: &Deadline) -> Result<Option<(u16, String, usize)>, String> {
        let mut ended = false;
        while !ended && !self.buf[self.start..self.end].contains(&b'\n') {
            if self.end - self.start == self.buf.len() {
                return Err(format!("no status line in the first {MAX_STATUS_LINE} bytes"));
            }
            ended = self.fill(stream, deadline)? == 0;
            if ended && self.start == self.end {
                return Ok(None);
            }
        }
        let held = &self.buf[self.start..self.end];
        let taken = held.iter().position(|&b| b == b'\n').map_or(held.len(), |i| i + 1);
        let (code, line) = parse_status_line(&held[..taken]).ok_or("not an HTTP answer")?;
        self.start += taken;
        Ok(Some((code, line, taken)))
    }

    /// Reads past the rest of a head (its header lines and the empty line that ends it), at most
    /// `limit` bytes: the bytes it took.
    fn skip_head(&mut self, stream: &mut (impl Read + SetTimeout), deadline: &Deadline, limit: usize) -> Result<usize, String> {
        let mut taken = 0;
        // Bytes of the current line but its CR: none at its end means the head's end.
        let mut line_len = 0usize;
        loop {
            while self.start < self.end {
                let b = self.buf[self.start];
                self.start += 1;
                taken += 1;
                if taken > limit {
                    return Err(format!("interim answers longer than {MAX_INTERIM_BYTES} bytes"));
                }
                match b {
                    b'\n' if line_len == 0 => return Ok(taken),
                    b'\n' => line_len = 0,
                    b'\r' => {}
                    _ => line_len += 1,
                }
            }
            if self.fill(stream, deadline)? == 0 {
                return Err("connection closed after an interim answer".into());
            }
        }
    }
}

/// `HTTP/1.1 503 Service Unavailable` → (503, the line, at most 80 characters).
pub fn parse_status_line(bytes: &[u8]) -> Option<(u16, String)> {
    let line = bytes.split(|&b| b == b'\n').next()?;
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let rest = line.strip_prefix(b"HTTP/")?;
    let mut parts = rest.splitn(3, |&b| b == b' ');
    let _version = parts.next()?;
    let code = parts.next()?;
    if code.len() != 3 || !code.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let code: u16 = std::str::from_utf8(code).ok()?.parse().ok()?;
    Some((code, String::from_utf8_lossy(line).chars().take(80).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines() {
        assert_eq!(parse_status_line(b"HTTP/1.1 200 OK\r\n"), Some((200, "HTTP/1.1 200 OK".into())));
        assert_eq!(parse_status_line(b"HTTP/1.0 503 Service Unavailable\r\nX: y"), Some((503, "HTTP/1.0 503 Service Unavailable".into())));
        assert_eq!(parse_status_line(b"HTTP/1.1 302\r\n"), Some((302, "HTTP/1.1 302".into())));
        assert_eq!(parse_status_line(b"HTTP/2 204 No Content\n"), Some((204, "HTTP/2 204 No Content".into())));
        for bad in [&b"SSH-2.0-OpenSSH\r\n"[..], b"HTTP/1.1 20 OK\r\n", b"HTTP/1.1 2000 OK\r\n", b"HTTP/1.1 +20 OK\r\n", b"", b"\xff\xfe"] {
            assert_eq!(parse_status_line(bad), None, "{bad:?}");
        }
        let long = [&b"HTTP/1.1 500 "[..], &[b'x'; 2000]].concat();
        assert_eq!(parse_status_line(&long).unwrap().1.len(), 80);
    }

    /// An answer as a server sends it: in pieces, then its end.
    struct Pieces(Vec<Vec<u8>>);

    impl Read for Pieces {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Ok(0);
            }
            let piece = &mut self.0[0];
            let n = piece.len().min(buf.len());
            buf[..n].copy_from_slice(&piece[..n]);
            piece.drain(..n);
            if piece.is_empty() {
                self.0.remove(0);
            }
            Ok(n)
        }
    }

    impl SetTimeout for Pieces {
        fn set_timeout(&mut self, _: Duration) -> io::Result<()> {
            Ok(())
        }
    }

    fn status_of(pieces: &[&[u8]]) -> Result<(u16, String), String> {
        let deadline = Deadline { at: Instant::now() + Duration::from_secs(60), timeout: Duration::from_secs(60) };
        final_status(&mut Pieces(pieces.iter().map(|p| p.to_vec()).collect()), &deadline)
    }

    #[test]
    fn interim_answers_are_skipped() {
        let hints = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n";
        assert_eq!(status_of(&[hints, b"HTTP/1.1 200 OK\r\n\r\n"]).unwrap().0, 200);
        assert_eq!(status_of(&[b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 503 No\r\n"]).unwrap().0, 503);
        // A byte at a time, bare LFs, and a header longer than the buffer.
        let long = [&b"HTTP/1.1 103 Early Hints\nLink: "[..], &[b'x'; 5000], b"\n\nHTTP/1.1 204 No Content\n"].concat();
        let bytes: Vec<&[u8]> = long.chunks(1).collect();
        assert_eq!(status_of(&bytes).unwrap().0, 204);
        // 101 is no interim answer: it is the last one HTTP/1.1 has.
        assert_eq!(status_of(&[b"HTTP/1.1 101 Switching Protocols\r\n\r\nHTTP/1.1 200 OK\r\n"]).unwrap().0, 101);
        assert_eq!(status_of(&[hints]), Err("connection closed after an interim answer".into()));
        assert_eq!(status_of(&[b"HTTP/1.1 103 Early Hints\r\nLink: x"]), Err("connection closed after an interim answer".into()));
        assert_eq!(status_of(&[b""]), Err("connection closed with no answer".into()));
    }

    #[test]
    fn interim_answers_are_bounded() {
        let endless = b"HTTP/1.1 103 Early Hints\r\n\r\n".repeat(MAX_INTERIM + 1);
        assert_eq!(status_of(&[&endless, b"HTTP/1.1 200 OK\r\n"]), Err(format!("more than {MAX_INTERIM} interim answers")));
        let just = b"HTTP/1.1 103 Early Hints\r\n\r\n".repeat(MAX_INTERIM);
        assert_eq!(status_of(&[&just, b"HTTP/1.1 200 OK\r\n"]).unwrap().0, 200);
        let huge = [&b"HTTP/1.1 103 Early Hints\r\nLink: "[..], &vec![b'x'; MAX_INTERIM_BYTES], b"\r\n\r\nHTTP/1.1 200 OK\r\n"].concat();
        assert_eq!(status_of(&[&huge]), Err(format!("interim answers longer than {MAX_INTERIM_BYTES} bytes")));
    }
}
