//! `lastcall probe ...`: a health check for images with no shell, curl or test binary. It asks
//! lastcall's own endpoint (`ready`, `live`) or ready file, or the app itself (`http://`,
//! `tcp://`), for `HEALTHCHECK` and Kubernetes exec probes.
//!
//! A probe is a short process of its own, not PID 1's loop, so it may block, and it resolves a
//! name in a child process of its own; but one deadline bounds all of it: the name's resolution (musl's
//! resolver, reading the image's /etc/hosts and resolv.conf, waits for a silent DNS server far
//! longer), each connect, the request, and the status line. Only the status line is read, at
//! most `MAX_STATUS_LINE` bytes: a server that trickles its answer cannot hold the probe past
//! the deadline, and one with an endless body is never read past its first line. A failure is
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
    let mut buf = [0u8; MAX_STATUS_LINE];
    let mut filled = 0;
    // Each read waits only for what is left of the deadline: a byte at a time cannot extend it.
    while !buf[..filled].contains(&b'\n') {
        if filled == buf.len() {
            return Err(format!("no status line in the first {MAX_STATUS_LINE} bytes"));
        }
        stream.set_read_timeout(Some(deadline.left()?)).map_err(|e| io_reason(&e, deadline))?;
        match stream.read(&mut buf[filled..]) {
            Ok(0) if filled == 0 => return Err("connection closed with no answer".into()),
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_reason(&e, deadline)),
        }
    }
    parse_status_line(&buf[..filled]).ok_or_else(|| "not an HTTP answer".into())
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
}
