//! Logs go to stderr only, prefixed `lastcall:`, at the level from -v/-q or LASTCALL_LOG
//! (never RUST_LOG, which belongs to the child). This module owns the log's two formats: text,
//! the default, and json (`--log-format json`), one JSON object a line, built from the same log
//! calls: a call site tags its line with an `event` and fields as the `log` crate's key-values,
//! which text ignores and json writes out. Both
//! formats escape what a line carries, whatever its source: a line is always one line.
//!
//! May import: nothing from the crate (a leaf).

use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use log::kv::{Key, Value, VisitSource};
use log::{warn, Level, LevelFilter, Metadata, Record};
use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{send, MsgFlags};
use nix::sys::stat::{fstat, SFlag};

/// `--log-format`: what each line lastcall writes looks like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `lastcall: ...`, as the peers write theirs.
    Text,
    /// One JSON object a line: ts, level, event, the event's fields, message.
    Json,
}

/// Whether lines are JSON; set once by `init`, before the loop starts.
static JSON: AtomicBool = AtomicBool::new(false);

/// Whether the log is JSON: a few events (unready, grace, exit) have no text line, since under
/// a peer's name the text must stay the peer's, and are written only in json.
pub fn json() -> bool {
    JSON.load(Ordering::Relaxed)
}

/// Every `event` a json line can carry, shared by the call sites, the tests and the docs.
/// Untagged lines get `Error`, `Warning`, or, below warning level, `Debug` (the -v diagnostics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    Started,
    Signal,
    Deadline,
    Unready,
    PreStop,
    Forwarded,
    Grace,
    GraceExpired,
    Killed,
    Reaped,
    ChildExit,
    OomKill,
    Notify,
    Exit,
    Error,
    Warning,
    Debug,
}

impl Event {
    pub const ALL: [Event; 17] = [
        Event::Started,
        Event::Signal,
        Event::Deadline,
        Event::Unready,
        Event::PreStop,
        Event::Forwarded,
        Event::Grace,
        Event::GraceExpired,
        Event::Killed,
        Event::Reaped,
        Event::ChildExit,
        Event::OomKill,
        Event::Notify,
        Event::Exit,
        Event::Error,
        Event::Warning,
        Event::Debug,
    ];

    /// The `event` field's value: `'static`, as the logger reads it back with `to_borrowed_str`.
    #[inline(always)]
    pub const fn name(self) -> &'static str {
        match self {
            Event::Started => "started",
            Event::Signal => "signal",
            Event::Deadline => "deadline",
            Event::Unready => "unready",
            Event::PreStop => "pre_stop",
            Event::Forwarded => "forwarded",
            Event::Grace => "grace",
            Event::GraceExpired => "grace_expired",
            Event::Killed => "killed",
            Event::Reaped => "reaped",
            Event::ChildExit => "child_exit",
            Event::OomKill => "oom_kill",
            Event::Notify => "notify",
            Event::Exit => "exit",
            Event::Error => "error",
            Event::Warning => "warning",
            Event::Debug => "debug",
        }
    }
}

pub fn init(level: LevelFilter, format: Format) {
    JSON.store(format == Format::Json, Ordering::Relaxed);
    let logger = Logger { level, format, line: Mutex::new(Vec::new()), out: Mutex::new(Stderr::open()) };
    log::set_logger(Box::leak(Box::new(logger))).expect("the logger is set once");
    log::set_max_level(level);
}

/// Every line is formatted whole into `line` (kept, so that a line allocates nothing once the
/// longest has been seen) and written with one write, so that a line is never split.
struct Logger {
    level: LevelFilter,
    format: Format,
    line: Mutex<Vec<u8>>,
    out: Mutex<Stderr>,
}

impl log::Log for Logger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= self.level
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        // A value whose formatting logs finds the buffer taken, and gets a fresh one.
        let (mut held, mut fresh) = (self.line.try_lock(), Vec::new());
        let line = match &mut held {
            Ok(line) => &mut **line,
            Err(_) => &mut fresh,
        };
        line.clear();
        let formatted = match self.format {
            Format::Json => write_json(line, record),
            Format::Text => {
                let tag = match record.level() {
                    Level::Warn => "warning: ",
                    _ => "",
                };
                write_text(line, tag, record)
            }
        };
        if formatted.is_ok() {
            if let Ok(mut out) = self.out.lock() {
                let _ = out.write_all(line);
            }
        }
        line.clear();
    }

    fn flush(&self) {}
}

/// One record as one text line, its control characters escaped as `OneLine` does (`\n`,
/// `\u{1b}`): whatever a message carries (a variable's value, a client's bytes), it cannot add a
/// line to the timeline or drive the terminal the log is read on.
fn write_text(out: &mut Vec<u8>, tag: &str, record: &Record<'_>) -> io::Result<()> {
    write!(out, "lastcall: {tag}")?;
    fmt::write(&mut TextEscaper { out }, *record.args()).map_err(|_| io::Error::other("format"))?;
    out.push(b'\n');
    Ok(())
}

/// Writes text with its control characters escaped (`char::escape_default`); text with none,
/// the usual case, is copied as it is.
struct TextEscaper<'a> {
    out: &'a mut Vec<u8>,
}

impl fmt::Write for TextEscaper<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // C0 and DEL are single bytes; C1 (U+0080-U+009F) starts with 0xC2.
        if !s.bytes().any(|b| b < 0x20 || b == 0x7f || b == 0xc2) {
            self.out.extend_from_slice(s.as_bytes());
            return Ok(());
        }
        for c in s.chars() {
            if c.is_control() {
                write!(self.out, "{}", c.escape_default()).map_err(|_| fmt::Error)?;
            } else {
                let mut utf8 = [0u8; 4];
                self.out.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
            }
        }
        Ok(())
    }
}

/// One record as one JSON line.
fn write_json(out: &mut impl Write, record: &Record<'_>) -> io::Result<()> {
    let kvs = record.key_values();
    let tagged = kvs.get(Key::from_str("event"));
    let event = tagged.as_ref().and_then(Value::to_borrowed_str).unwrap_or(match record.level() {
        Level::Error => Event::Error.name(),
        Level::Warn => Event::Warning.name(),
        _ => Event::Debug.name(),
    });
    let level = match record.level() {
        Level::Error => "error",
        Level::Warn => "warn",
        Level::Info => "info",
        Level::Debug => "debug",
        Level::Trace => "trace",
    };
    write!(out, "{{\"ts\":\"{}\",\"level\":\"{level}\",\"event\":", Timestamp(SystemTime::now()))?;
    json_string(out, event)?;
    let mut fields = Fields { out, result: Ok(()) };
    let _ = kvs.visit(&mut fields);
    fields.result?;
    out.write_all(b",\"message\":\"")?;
    fmt::write(&mut Escaper { out, result: Ok(()) }, *record.args()).map_err(|_| io::Error::other("format"))?;
    out.write_all(b"\"}\n")
}

/// The fields after `event`: integers as numbers, text as an escaped string.
struct Fields<'a, W: Write> {
    out: &'a mut W,
    result: io::Result<()>,
}

impl<'kvs, W: Write> VisitSource<'kvs> for Fields<'_, W> {
    fn visit_pair(&mut self, key: Key<'kvs>, value: Value<'kvs>) -> Result<(), log::kv::Error> {
        if key.as_str() == "event" || self.result.is_err() {
            return Ok(());
        }
        self.result = (|| {
            self.out.write_all(b",")?;
            json_string(self.out, key.as_str())?;
            self.out.write_all(b":")?;
            if let Some(n) = value.to_i64() {
                write!(self.out, "{n}")
            } else if let Some(n) = value.to_u64() {
                write!(self.out, "{n}")
            } else if let Some(text) = value.to_borrowed_str() {
                json_string(self.out, text)
            } else {
                // The crate logs fields as text or integers only: formatting any other `Value`
                // goes through a match that links in all of float formatting.
                self.out.write_all(b"null")
            }
        })();
        Ok(())
    }
}

fn json_string(out: &mut impl Write, s: &str) -> io::Result<()> {
    out.write_all(b"\"")?;
    let mut e = Escaper { out, result: Ok(()) };
    let _ = fmt::Write::write_str(&mut e, s);
    e.result?;
    out.write_all(b"\"")
}

/// Writes text as the inside of a JSON string. Rust's formatting only ever produces UTF-8 (argv
/// and other outside bytes reach the log through `{:?}` or a lossy conversion, which escape or
/// replace what is not UTF-8), so escaping `"`, `\\` and the control characters makes every
/// line parse.
struct Escaper<'a, W: Write> {
    out: &'a mut W,
    result: io::Result<()>,
}

impl<W: Write> fmt::Write for Escaper<'_, W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let bytes = s.as_bytes();
        let mut start = 0;
        for (i, c) in s.char_indices() {
            // C1 controls too, which JSON allows raw but a terminal may act on.
            let escaped: &[u8] = match c {
                '"' => b"\\\"",
                '\\' => b"\\\\",
                '\n' => b"\\n",
                '\r' => b"\\r",
                '\t' => b"\\t",
                c if c.is_control() => b"",
                _ => continue,
            };
            let r = self.out.write_all(&bytes[start..i]).and_then(|()| match escaped {
                b"" => write!(self.out, "\\u{:04x}", u32::from(c)),
                e => self.out.write_all(e),
            });
            if r.is_err() {
                self.result = r;
                return Err(fmt::Error);
            }
            start = i + c.len_utf8();
        }
        self.out.write_all(&bytes[start..]).map_err(|e| {
            self.result = Err(e);
            fmt::Error
        })
    }
}

/// A duration to the millisecond, as the timeline writes it: `2.001s`.
pub struct Millis(pub Duration);

/// A point of the timeline, from lastcall's start: `+2.001s`.
pub struct Elapsed(pub Duration);

/// Seconds to the millisecond as a bare number, for /metrics: `2.001`.
pub struct SecondsValue(pub Duration);

fn write_millis(f: &mut fmt::Formatter<'_>, d: Duration) -> fmt::Result {
    write!(f, "{}.{:03}", d.as_secs(), d.subsec_millis())
}

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_millis(f, self.0)?;
        f.write_str("s")
    }
}

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("+")?;
        write_millis(f, self.0)?;
        f.write_str("s")
    }
}

impl fmt::Display for SecondsValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_millis(f, self.0)
    }
}

/// A duration as the options take it, exact and without trailing zeros: `30s`, `1.5s`,
/// `0.000001s`. Integer arithmetic only, so that no float formatting is linked in.
pub struct Seconds(pub Duration);

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.as_secs())?;
        let mut nanos = self.0.subsec_nanos();
        if nanos != 0 {
            let mut width = 9;
            while nanos % 10 == 0 {
                nanos /= 10;
                width -= 1;
            }
            write!(f, ".{nanos:0width$}")?;
        }
        f.write_str("s")
    }
}

/// RFC 3339 in UTC with milliseconds, `2026-12-03T15:42:19.123Z`, from the clock alone (no date
/// crate: the civil-from-days algorithm of Howard Hinnant's date library).
pub struct Timestamp(pub SystemTime);

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let since = self.0.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
        let secs = since.as_secs();
        let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
            rem / 3600,
            rem / 60 % 60,
            rem % 60,
            since.subsec_millis()
        )
    }
}

/// How many log lines were dropped because stderr was full, since the start (/metrics).
static DROPPED_TOTAL: AtomicU64 = AtomicU64::new(0);

pub fn lines_dropped() -> u64 {
    DROPPED_TOTAL.load(Ordering::Relaxed)
}

/// lastcall's stderr, written without ever blocking the event loop: a log line that does not
/// fit right now is dropped and counted, and "N log lines dropped" is written before the next
/// line that fits. (A pipe nobody reads once froze the loop: no forwarding, no reaping, no
/// SIGKILL at the deadline.)
///
/// O_NONBLOCK cannot simply be set on fd 2: its open file description is shared with the app,
/// whose writes would start failing with EAGAIN. So, by what fd 2 is:
/// - a pipe, FIFO or terminal: opened again through /proc/self/fd/2, which gives lastcall an open
///   file description of its own on the same pipe or tty, made non-blocking (O_NOCTTY: PID 1
///   must not acquire a controlling terminal by it);
/// - a socket (journald's stream, say): send() with MSG_DONTWAIT, which is per call;
/// - a regular file: written as it is, sharing its offset and O_APPEND with the app; a file
///   write does not wait for a reader;
/// - a pipe or tty that cannot be opened again (no /proc, or a pipe of another user's when
///   lastcall is not root): poll() with a zero timeout first. That is racy (the app may fill the
///   pipe between the poll and the write), the one case that can still block.
///
/// Measured by tests/trust.rs: with -vv and a pipe nobody reads, lastcall keeps forwarding and
/// reaping and SIGKILLs on time, and the app's stderr stays blocking.
pub struct Stderr {
    how: How,
    dropped: u64,
}

/// The fd of the logger's own open of stderr, if it has one.
static OWN_FD: AtomicI32 = AtomicI32::new(-1);

/// The fd the logger opened for itself, which must stay open: not one the app passed on.
pub fn own_fd() -> Option<std::os::fd::RawFd> {
    Some(OWN_FD.load(Ordering::Relaxed)).filter(|&fd| fd >= 0)
}

enum How {
    Own(File),
    Socket,
    Direct,
    PollFirst,
}

impl Stderr {
    pub fn open() -> Stderr {
        let stderr = io::stderr();
        let how = match fstat(stderr.as_fd()) {
            Ok(st) => match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
                SFlag::S_IFSOCK => How::Socket,
                SFlag::S_IFIFO | SFlag::S_IFCHR => std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
                    .open("/proc/self/fd/2")
                    .ok()
                    .filter(|own| fstat(own.as_fd()).is_ok_and(|o| o.st_dev == st.st_dev && o.st_ino == st.st_ino))
                    .map_or(How::PollFirst, How::Own),
                _ => How::Direct,
            },
            Err(_) => How::Direct,
        };
        if let How::Own(file) = &how {
            OWN_FD.store(file.as_raw_fd(), Ordering::Relaxed);
        }
        Stderr { how, dropped: 0 }
    }

    /// Writes all of `line` or none of it (pipes take up to PIPE_BUF bytes whole); false if it
    /// would have had to wait. Other failures (a closed stderr) count as written: there is
    /// nobody to tell.
    fn try_write(&mut self, line: &[u8]) -> bool {
        let fd = io::stderr();
        let result = match &mut self.how {
            How::Own(file) => file.write(line).map_err(Errno::from_io),
            How::Socket => send(fd.as_raw_fd(), line, MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL),
            How::Direct => fd.lock().write(line).map_err(Errno::from_io),
            How::PollFirst => {
                let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLOUT)];
                match poll(&mut fds, PollTimeout::ZERO) {
                    Ok(1) => fd.lock().write(line).map_err(Errno::from_io),
                    _ => Err(Errno::EAGAIN),
                }
            }
        };
        !matches!(result, Err(Errno::EAGAIN))
    }
}

trait FromIo {
    fn from_io(e: io::Error) -> Errno;
}

impl FromIo for Errno {
    fn from_io(e: io::Error) -> Errno {
        Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
    }
}

impl Write for Stderr {
    fn write(&mut self, line: &[u8]) -> io::Result<usize> {
        if self.dropped > 0 {
            let mut notice = [0u8; 160];
            let len = {
                let mut cursor = io::Cursor::new(&mut notice[..]);
                let _ = if json() {
                    writeln!(
                        cursor,
                        "{{\"ts\":\"{}\",\"level\":\"warn\",\"event\":\"{}\",\"message\":\"{} log lines dropped\"}}",
                        Timestamp(SystemTime::now()),
                        Event::Warning.name(),
                        self.dropped
                    )
                } else {
                    writeln!(cursor, "lastcall: {} log lines dropped", self.dropped)
                };
                cursor.position() as usize
            };
            if !self.try_write(&notice[..len]) {
                self.dropped += 1;
                DROPPED_TOTAL.fetch_add(1, Ordering::Relaxed);
                return Ok(line.len());
            }
            self.dropped = 0;
        }
        if !self.try_write(line) {
            self.dropped += 1;
            DROPPED_TOTAL.fetch_add(1, Ordering::Relaxed);
        }
        Ok(line.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A warning that outside input can repeat at will (a client sending thousands of messages),
/// so that it cannot flood the log: the first occurrence is logged, the next ones within
/// `REPEAT_INTERVAL` are only counted, and the count comes with the next line logged, or at
/// exit. No timer: the clock is read only when the warning recurs.
pub struct Repeated {
    what: &'static str,
    last: Option<Instant>,
    suppressed: u64,
}

pub const REPEAT_INTERVAL: Duration = Duration::from_secs(10);

impl Repeated {
    pub const fn new(what: &'static str) -> Repeated {
        Repeated { what, last: None, suppressed: 0 }
    }

    pub fn warn(&mut self, detail: fmt::Arguments<'_>) {
        if !log::log_enabled!(Level::Warn) {
            return;
        }
        let now = Instant::now();
        if self.last.is_some_and(|last| now.saturating_duration_since(last) < REPEAT_INTERVAL) {
            self.suppressed += 1;
            return;
        }
        match self.suppressed {
            0 => warn!("{}: {detail}", self.what),
            n => warn!("{}: {detail} ({n} more like it not shown)", self.what),
        }
        self.last = Some(now);
        self.suppressed = 0;
    }

    /// Logs the count of what was not shown, if anything.
    pub fn flush(&mut self) {
        if self.suppressed > 0 {
            warn!("{}: {} more like it not shown", self.what, self.suppressed);
            self.suppressed = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn event_names_are_unique_and_all_listed() {
        for (i, event) in Event::ALL.into_iter().enumerate() {
            assert_eq!(event as usize, i, "ALL holds every event, in order");
            let clash = Event::ALL.iter().filter(|e| e.name() == event.name()).count();
            assert_eq!(clash, 1, "{event:?}'s name {:?} is used twice", event.name());
        }
        assert_eq!(Event::ALL.len(), Event::Debug as usize + 1);
    }

    /// docs/observability.md's table of events is the vocabulary, no more and no less.
    #[test]
    fn the_docs_list_every_event() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/observability.md")).unwrap();
        let table = doc.split("| event | when |").nth(1).expect("the table of events").split("\n\n").next().unwrap();
        let mut listed: Vec<&str> = table.lines().filter_map(|row| row.strip_prefix("| `")?.split('`').next()).collect();
        let mut names: Vec<&str> = Event::ALL.iter().map(|e| e.name()).collect();
        listed.sort_unstable();
        names.sort_unstable();
        assert_eq!(listed, names, "the events docs/observability.md lists");
    }

    #[test]
    fn timeline_durations_are_to_the_millisecond() {
        assert_eq!(Elapsed(Duration::from_millis(2001)).to_string(), "+2.001s");
        assert_eq!(Elapsed(Duration::ZERO).to_string(), "+0.000s");
        assert_eq!(Millis(Duration::from_micros(1_500_999)).to_string(), "1.500s");
        assert_eq!(SecondsValue(Duration::from_millis(30_250)).to_string(), "30.250");
    }

    #[test]
    fn seconds_are_exact_without_trailing_zeros() {
        let s = |d: Duration| Seconds(d).to_string();
        assert_eq!(s(Duration::ZERO), "0s");
        assert_eq!(s(Duration::from_secs(30)), "30s");
        assert_eq!(s(Duration::from_millis(1500)), "1.5s");
        assert_eq!(s(Duration::from_millis(250)), "0.25s");
        assert_eq!(s(Duration::from_nanos(1_000_000_001)), "1.000000001s");
        assert_eq!(s(Duration::from_micros(1)), "0.000001s");
        assert_eq!(s(Duration::MAX), "18446744073709551615.999999999s");
    }

    #[test]
    fn timestamps_are_rfc3339_utc_millis() {
        let at = |ms: u64| Timestamp(SystemTime::UNIX_EPOCH + Duration::from_millis(ms)).to_string();
        assert_eq!(at(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(at(1_796_312_539_999), "2026-12-03T15:42:19.999Z");
        assert_eq!(at(4_107_542_399_000), "2100-02-28T23:59:59.000Z");
    }

    #[test]
    fn a_text_line_is_one_line_whatever_its_values() {
        let line = |args: fmt::Arguments<'_>| {
            let mut out = Vec::new();
            write_text(&mut out, "warning: ", &Record::builder().args(args).level(Level::Warn).build()).unwrap();
            String::from_utf8(out).unwrap()
        };
        let hostile = "/run/x\nlastcall: child exited with status 0\r\u{1b}[2J\u{b}\u{85}é\t";
        assert_eq!(
            line(format_args!("cannot relay NOTIFY_SOCKET={hostile}; passing it on")),
            "lastcall: warning: cannot relay NOTIFY_SOCKET=/run/x\\nlastcall: child exited with status 0\\r\\u{1b}[2J\\u{b}\\u{85}é\\t; passing it on\n"
        );
        assert_eq!(line(format_args!("plain {} text", "é")), "lastcall: warning: plain é text\n");
    }

    #[test]
    fn escaping_covers_quotes_backslashes_and_controls() {
        let mut out = Vec::new();
        json_string(&mut out, "a\"b\\c\nd\u{1}\u{7f}é\u{fffd}\u{9b}").unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "\"a\\\"b\\\\c\\nd\\u0001\\u007fé\u{fffd}\\u009b\"");
    }
}
