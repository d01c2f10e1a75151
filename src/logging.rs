//! Logs go to stderr only, prefixed `lastcall:`, at the level from -v/-q or LASTCALL_LOG
//! (never RUST_LOG, which belongs to the child).

use std::fmt;
use std::io::Write;
use std::time::{Duration, Instant};

use log::{warn, Level, LevelFilter};

pub fn init(level: LevelFilter) {
    env_logger::Builder::new()
        .filter_level(level)
        .target(env_logger::Target::Stderr)
        .format(|out, record| {
            let tag = match record.level() {
                Level::Warn => "warning: ",
                _ => "",
            };
            writeln!(out, "lastcall: {tag}{}", record.args())
        })
        .init();
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
