//! `lastcall probe ready|live`: a health check for images with no shell, curl or test binary.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::time::Duration;

use crate::cli::{ProbeConfig, ProbeTarget};

const TIMEOUT: Duration = Duration::from_secs(2);

/// 0 when the target holds, 1 when it does not (or nothing answers).
pub fn probe(config: &ProbeConfig) -> i32 {
    let ok = match (config.health_listen, &config.ready_file) {
        (Some(addr), _) => http_ok(addr, config.target).unwrap_or(false),
        (None, Some(path)) => config.target == ProbeTarget::Ready && path.exists(),
        (None, None) => false,
    };
    if ok {
        0
    } else {
        1
    }
}

fn http_ok(mut addr: SocketAddr, target: ProbeTarget) -> std::io::Result<bool> {
    // A listener on every address is reached through loopback.
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr.ip() {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
        });
    }
    let path = match target {
        ProbeTarget::Ready => "/ready",
        ProbeTarget::Live => "/live",
    };
    let mut stream = TcpStream::connect_timeout(&addr, TIMEOUT)?;
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: lastcall\r\nConnection: close\r\n\r\n")?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head)?;
    Ok(head.starts_with(b"HTTP/1.1 200") || head.starts_with(b"HTTP/1.0 200"))
}
