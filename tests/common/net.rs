//! The network side of the tests: a free port on 127.0.0.1 and plain HTTP requests.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A TCP port nothing listens on right now, on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `request`, as it is, to 127.0.0.1:port: the whole response, or None if nothing answered in
/// time (`limit` to connect, and again to read).
pub fn http(port: u16, request: &str, limit: Duration) -> Option<String> {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut s = TcpStream::connect_timeout(&addr, limit).ok()?;
    s.set_read_timeout(Some(limit)).ok()?;
    s.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    s.read_to_string(&mut response).ok()?;
    Some(response)
}

/// The status code of an HTTP response.
pub fn status_of(response: &str) -> Option<u16> {
    response.split_whitespace().nth(1)?.parse().ok()
}

/// `GET path` on 127.0.0.1:port: the status and body, or None when no HTTP answer came in time.
pub fn http_get(port: u16, path: &str, limit: Duration) -> Option<(u16, String)> {
    let response = http(port, &format!("GET {path} HTTP/1.0\r\nHost: test\r\n\r\n"), limit)?;
    let status = status_of(&response)?;
    Some((status, response.split_once("\r\n\r\n").map_or("", |(_, body)| body).to_string()))
}

/// `GET path` on 127.0.0.1:port: the status, or None when nothing answered within 2 s.
pub fn http_status(port: u16, path: &str) -> Option<u16> {
    http_get(port, path, Duration::from_secs(2)).map(|(status, _)| status)
}
