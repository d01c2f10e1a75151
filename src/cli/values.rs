//! The value parsers of the options and variables: durations, signals, addresses, booleans, exit
//! codes, paths, the log format, probe URLs. Each takes text and answers a value or the reason
//! it is refused; which option it came from is the caller's (`cli`) to say.
//!
//! May import: config, logging (`Format`), machine (`UnreadyOn`), signals.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use crate::config::ProbeTarget;
use crate::logging::Format;
use crate::machine::UnreadyOn;
use crate::signals::Sig;

/// `http://HOST[:PORT][/PATH]` (port 80 by default) or `tcp://HOST:PORT`. HOST is a name, an
/// IPv4 address or a bracketed IPv6 one.
pub fn parse_probe_url(text: &str) -> Result<ProbeTarget, String> {
    let (scheme, rest) = text.split_once("://").ok_or("expected SCHEME://HOST:PORT")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if text.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err("blanks and control characters have no place in a URL".into());
    }
    if authority.contains('@') {
        return Err("user information is not supported".into());
    }
    let path = path.split('#').next().unwrap_or("/");
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (addr, after) = v6.split_once(']').ok_or("an IPv6 address needs its closing ']'")?;
            addr.parse::<std::net::Ipv6Addr>().map_err(|_| format!("'{addr}' is not an IPv6 address"))?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or("expected ':PORT' after the ']'")?),
            };
            (addr, port)
        }
        None => match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        },
    };
    if host.is_empty() {
        return Err("no HOST".into());
    }
    if host.contains(':') && !authority.starts_with('[') {
        return Err("an IPv6 address goes in brackets: [::1]:8080".into());
    }
    let port = match port {
        Some(p) => match p.parse::<u16>() {
            Ok(0) | Err(_) => return Err(format!("'{p}' is not a port from 1 to 65535")),
            Ok(p) => Some(p),
        },
        None => None,
    };
    match scheme {
        "http" => Ok(ProbeTarget::Http { host: host.into(), port: port.unwrap_or(80), path: path.into() }),
        "tcp" => Ok(ProbeTarget::Tcp { host: host.into(), port: port.ok_or("tcp:// needs a PORT")? }),
        "https" => Err("https is not supported: probe the plain port, or tcp://".into()),
        _ => Err(format!("unknown scheme '{scheme}': expected http or tcp")),
    }
}

pub fn parse_stop_timeout(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        d if d.is_zero() => Err("expected a duration above 0".into()),
        d => Ok(d),
    }
}

pub fn parse_log_format(text: &str) -> Result<Format, String> {
    match text.trim() {
        "text" => Ok(Format::Text),
        "json" => Ok(Format::Json),
        _ => Err("expected text or json".into()),
    }
}

pub fn parse_unready_on(text: &str) -> Result<UnreadyOn, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "signal" => Ok(UnreadyOn::Signal),
        "stop" => Ok(UnreadyOn::Stop),
        _ => Err("expected signal or stop".into()),
    }
}

pub fn parse_bool(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err("expected 1/true/yes/on or 0/false/no/off".into()),
    }
}

/// KILL and STOP cannot be caught, so lastcall never receives them to forward or rewrite.
pub fn catchable(sig: Sig) -> Result<Sig, String> {
    match sig {
        Sig::KILL | Sig::STOP => Err(format!("{sig} cannot be caught, so lastcall never receives it to forward")),
        sig => Ok(sig),
    }
}

/// A stop signal must end the app: STOP would freeze it and KILL would leave it no grace (the
/// escalation sends KILL when the grace runs out).
pub fn parse_stop_signal(text: &str) -> Result<Sig, String> {
    match Sig::parse(text, false)? {
        Sig::KILL => Err("SIGKILL gives the app no chance to stop; lastcall sends it itself when the grace runs out (a short --grace)".into()),
        Sig::STOP => Err("SIGSTOP freezes the app instead of stopping it".into()),
        sig => Ok(sig),
    }
}

/// `TERM:QUIT`, `15:3`, `SIGINT:0` (0 drops the signal).
pub fn parse_rewrite(text: &str) -> Result<(Sig, Sig), String> {
    let (from, to) = text.split_once(':').ok_or("expected FROM:TO, like TERM:QUIT or 15:0")?;
    let from = Sig::parse(from, false).and_then(catchable).map_err(|e| format!("FROM: {e}"))?;
    let to = Sig::parse(to, true).map_err(|e| format!("TO: {e}"))?;
    Ok((from, to))
}

pub fn parse_exit_code(text: &str) -> Result<i32, String> {
    text.parse::<u8>().map(i32::from).map_err(|_| "expected an exit code from 0 to 255".into())
}

pub fn parse_ready_file(text: &str) -> Result<PathBuf, String> {
    if text.is_empty() || text.ends_with('/') {
        return Err("expected the path of a file".into());
    }
    Ok(PathBuf::from(text))
}

/// `127.0.0.1:8081`, `[::1]:8081`, or `:8081` for every IPv4 address (what a pod's probe needs).
/// Host names are not resolved: PID 1 does no DNS, which would block and may be down at start.
pub fn parse_listen_addr(text: &str) -> Result<SocketAddr, String> {
    const FORM: &str = "expected ADDR:PORT, like 127.0.0.1:8081, [::1]:8081 or :8081";
    let text = text.trim();
    let (host, port) = match text.strip_prefix('[') {
        Some(rest) => {
            let (host, after) = rest.split_once(']').ok_or_else(|| format!("no closing ']': {FORM}"))?;
            let port = after.strip_prefix(':').ok_or_else(|| format!("no port: {FORM}"))?;
            (host, port)
        }
        None => text.rsplit_once(':').ok_or_else(|| format!("no port: {FORM}"))?,
    };
    let port = match port.parse::<u64>() {
        Ok(0) => return Err("port 0 is not a port a probe can find".into()),
        Ok(p) => u16::try_from(p).map_err(|_| format!("port {p} is out of range (1-65535)"))?,
        Err(_) if port.is_empty() => return Err(format!("no port: {FORM}")),
        Err(_) => return Err(format!("port '{port}' is not a number (1-65535)")),
    };
    let ip: IpAddr = match (host, text.starts_with('[')) {
        ("", false) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        (host, true) => host.parse::<Ipv6Addr>().map(IpAddr::V6).map_err(|_| format!("'{host}' in brackets is not an IPv6 address"))?,
        (host, false) if host.contains(':') => return Err(format!("an IPv6 address goes in brackets, like [::1]:{port}")),
        (host, false) => host.parse::<Ipv4Addr>().map(IpAddr::V4).map_err(|_| {
            if host.bytes().any(|b| b.is_ascii_alphabetic()) {
                format!("host names are not accepted ('{host}' is not resolved): give an IP address, like 127.0.0.1:{port}")
            } else {
                format!("'{host}' is not an IP address")
            }
        })?,
    };
    Ok(SocketAddr::new(ip, port))
}

/// C's atoi() as tini applies it to its verbosity (an unsigned int): leading blanks, a sign,
/// digits; no digits is 0; a negative number wraps to the most verbose.
pub fn atoi_verbosity(text: &str) -> usize {
    let text = text.trim_start();
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let end = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
    let n = digits[..end].bytes().fold(0usize, |n, d| n.saturating_mul(10).saturating_add(usize::from(d - b'0')));
    if negative && n > 0 {
        usize::MAX
    } else {
        n
    }
}

/// `500ms`, `5s`, `1m30s`, `2h`, `1.5s`; a plain number is seconds.
/// The longest duration accepted: a year. No orchestrator waits anywhere near that long for a
/// stop, and it keeps every sum lastcall makes far from overflow: `now + deadline` on the
/// monotonic clock, and pre-stop + grace + kill wait in microseconds for systemd's
/// EXTEND_TIMEOUT_USEC (a u64). `--grace 0` is the way to say "never".
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let nanos = parse_duration_nanos(text)?;
    if nanos > MAX_DURATION.as_nanos() {
        return Err("more than the maximum of a year (8760h)".into());
    }
    // At most a year in nanoseconds: well inside a u64.
    Ok(Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX)))
}

/// A duration in whole nanoseconds (rounded down, saturating far above a year). Read with
/// integer arithmetic, digit by digit: exact where a float is not, and no float parser in
/// the binary.
fn parse_duration_nanos(text: &str) -> Result<u128, String> {
    const EXPECTED: &str = "expected a duration like 500ms, 5s or 1m30s";
    // A value that is not 0 but rounds to 0 would read as "none" (for the grace: never SIGKILL).
    const TOO_SMALL: &str = "not 0 but shorter than a nanosecond; write 0 if you mean 0";
    const SECOND: u128 = 1_000_000_000;
    let text = text.trim();
    if text.is_empty() {
        return Err(EXPECTED.into());
    }
    // A plain number of seconds, which may have an exponent (`1e-3`) or a `+`.
    if let Some((nanos, nonzero)) = decimal_nanos(text.strip_prefix('+').unwrap_or(text), SECOND, true) {
        return if nanos == 0 && nonzero { Err(TOO_SMALL.into()) } else { Ok(nanos) };
    }
    let mut total: u128 = 0;
    let mut said_more_than_zero = false;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let unit_len = rest[number_len..].find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len() - number_len);
        let (number, unit) = (&rest[..number_len], &rest[number_len..number_len + unit_len]);
        let unit_nanos = match unit.to_ascii_lowercase().as_str() {
            "ms" => SECOND / 1000,
            "s" => SECOND,
            "m" => 60 * SECOND,
            "h" => 3600 * SECOND,
            _ => return Err(EXPECTED.into()),
        };
        let (nanos, nonzero) = decimal_nanos(number, unit_nanos, false).ok_or_else(|| EXPECTED.to_string())?;
        said_more_than_zero |= nonzero;
        total = total.saturating_add(nanos);
        rest = &rest[number_len + unit_len..];
    }
    if total == 0 && said_more_than_zero {
        return Err(TOO_SMALL.into());
    }
    Ok(total)
}

/// `number` (digits with at most one `.`, and with `exponent_allowed` an `e` and a signed power
/// of ten) times `unit_nanos`, in whole nanoseconds rounded down and saturating at u128::MAX;
/// and whether any of its digits is not 0. None if it is not such a number.
fn decimal_nanos(number: &str, unit_nanos: u128, exponent_allowed: bool) -> Option<(u128, bool)> {
    let (mantissa, exponent) = match number.find(['e', 'E']) {
        Some(at) if exponent_allowed => (&number[..at], parse_exponent(&number[at + 1..])?),
        Some(_) => return None,
        None => (number, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if (whole.is_empty() && fraction.is_empty()) || !whole.bytes().chain(fraction.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    // The digits as an integer and the power of ten that scales it. Past 24 digits the rest
    // cannot matter at nanosecond precision: they only move the power.
    let mut digits: u128 = 0;
    let mut power = exponent.saturating_sub(i64::try_from(fraction.len()).unwrap_or(i64::MAX));
    let mut significant = 0;
    for b in whole.bytes().chain(fraction.bytes()).skip_while(|&b| b == b'0') {
        if significant < 24 {
            digits = digits * 10 + u128::from(b - b'0');
            significant += 1;
        } else {
            power = power.saturating_add(1);
        }
    }
    // An all-zero fraction's digits were skipped above; they moved nothing.
    if digits == 0 {
        return Some((0, false));
    }
    // 10^24 times an hour in nanoseconds still fits a u128.
    let mut nanos = digits * unit_nanos;
    if power > 0 {
        for _ in 0..power.min(40) {
            nanos = nanos.saturating_mul(10);
        }
    } else {
        for _ in 0..power.unsigned_abs().min(64) {
            nanos /= 10;
        }
    }
    Some((nanos, true))
}

/// An exponent's signed digits, clamped far beyond where it could still matter.
fn parse_exponent(text: &str) -> Option<i64> {
    let (negative, digits) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value = digits.bytes().fold(0i64, |n, b| (n * 10 + i64::from(b - b'0')).min(100_000));
    Some(if negative { -value } else { value })
}
