//! lastcall's errors: what went wrong, how it reads in one line, and how lastcall ends
//! (`exit_like`). Which code each error and each ending gets is the personality's
//! (`personality`, the one owner of exit codes).
//!
//! May import: personality, sys.

use std::ffi::OsString;
use std::fmt;
use std::io;

use nix::errno::Errno;

use crate::personality::{self, Ending, Personality};
use crate::sys;

#[derive(Debug)]
pub enum Error {
    /// A bad command line or environment variable; the text names it and the bad value.
    Usage(String),
    /// The command could not be started. `directory`: exec's EACCES came from a directory,
    /// which says so (the code stays EACCES's).
    Exec { command: OsString, source: io::Error, directory: bool },
    /// lastcall's own set-up failed.
    Setup { what: String, source: io::Error },
}

impl Error {
    pub fn setup(what: &str, errno: Errno) -> Error {
        Error::Setup { what: what.into(), source: io::Error::from(errno) }
    }

    /// lastcall's own exit code for this error.
    pub fn exit_code(&self) -> i32 {
        self.exit_code_as(&personality::LASTCALL)
    }

    /// The exit code under `personality`'s name: the peers exit 1 for their own usage and set-up
    /// failures, and each has its own codes for exec's.
    pub fn exit_code_as(&self, personality: &Personality) -> i32 {
        match self {
            Error::Usage(_) => personality.usage_exit,
            Error::Exec { source, .. } => personality.exec_failure_code(source.raw_os_error()),
            Error::Setup { .. } => personality.setup_exit,
        }
    }
}

/// Exits like this: with the code, or by the signal's default action so that lastcall's parent
/// reads the app's own wait status (a TERM death is clean to systemd; a shell sees the INT).
/// A signal whose default action does not end a process (stop, ignore), or one that lastcall
/// cannot take back from an inherited SIG_IGN, exits 128+N instead.
pub fn exit_like(ending: Ending) -> ! {
    match ending {
        Ending::Code(code) => std::process::exit(code),
        Ending::Signal(sig) => {
            if sig.default_terminates() {
                sys::die_by_signal(sig);
            }
            std::process::exit(ending.code())
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage(msg) => write!(f, "{}", OneLine(msg)),
            Error::Exec { command, source, directory } => {
                // What lastcall's own codes call "not found" (127).
                let reason = match source.raw_os_error() {
                    Some(libc::ENOENT | libc::ENOTDIR) => "command not found".to_string(),
                    Some(libc::EACCES) if *directory => "is a directory".to_string(),
                    _ => strip_os_error(source),
                };
                write!(f, "cannot run '{}': {reason}", OneLine(&command.to_string_lossy()))
            }
            Error::Setup { what, source } => write!(f, "{what}: {}", strip_os_error(source)),
        }
    }
}

/// Text with its control characters escaped (`\n`, `\u{1b}`), so that a hostile value cannot
/// split an error into several lines or drive the terminal it is printed on.
pub struct OneLine<'a>(pub &'a str);

impl fmt::Display for OneLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

/// "Permission denied (os error 13)" reads better without the parenthesis.
fn strip_os_error(err: &io::Error) -> String {
    let text = err.to_string();
    match text.find(" (os error") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_failures() {
        let exec = |errno| Error::Exec { command: "x".into(), source: io::Error::from_raw_os_error(errno), directory: false };
        assert_eq!(exec(libc::ENOENT).exit_code(), 127);
        assert_eq!(exec(libc::ENOTDIR).exit_code(), 127);
        assert_eq!(exec(libc::EACCES).exit_code(), 126);
        assert_eq!(exec(libc::ENOEXEC).exit_code(), 126);
        assert_eq!(exec(libc::ENOENT).to_string(), "cannot run 'x': command not found");
        assert_eq!(exec(libc::EACCES).to_string(), "cannot run 'x': Permission denied");
        assert_eq!(Error::Usage("bad".into()).exit_code(), 2);
        assert_eq!(Error::Usage("bad '1\nx\u{1b}[2J' é".into()).to_string(), "bad '1\\nx\\u{1b}[2J' é");
        assert_eq!(Error::Exec { command: "a\rb".into(), source: io::Error::from_raw_os_error(libc::ENOENT), directory: false }.to_string(), "cannot run 'a\\rb': command not found");
        let dir = Error::Exec { command: "/etc".into(), source: io::Error::from_raw_os_error(libc::EACCES), directory: true };
        assert_eq!((dir.to_string().as_str(), dir.exit_code()), ("cannot run '/etc': is a directory", 126));
        assert_eq!(Error::setup("signalfd", Errno::EMFILE).exit_code(), 125);
    }
}
