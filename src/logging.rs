//! Logs go to stderr only, prefixed `lastcall:`, at the level from -v/-q or LASTCALL_LOG
//! (never RUST_LOG, which belongs to the child).

use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use log::{warn, Level, LevelFilter};
use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{send, MsgFlags};
use nix::sys::stat::{fstat, SFlag};

pub fn init(level: LevelFilter) {
    env_logger::Builder::new()
        .filter_level(level)
        .target(env_logger::Target::Pipe(Box::new(Stderr::open())))
        .format(|out, record| {
            let tag = match record.level() {
                Level::Warn => "warning: ",
                _ => "",
            };
            writeln!(out, "lastcall: {tag}{}", record.args())
        })
        .init();
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
            let mut notice = [0u8; 64];
            let len = {
                let mut cursor = io::Cursor::new(&mut notice[..]);
                let _ = writeln!(cursor, "lastcall: {} log lines dropped", self.dropped);
                cursor.position() as usize
            };
            if !self.try_write(&notice[..len]) {
                self.dropped += 1;
                return Ok(line.len());
            }
            self.dropped = 0;
        }
        if !self.try_write(line) {
            self.dropped += 1;
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
