//! Logs go to stderr only, prefixed `lastcall:`, at the level from -v/-q or LASTCALL_LOG
//! (never RUST_LOG, which belongs to the child).

use std::io::Write;

use log::{Level, LevelFilter};

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
