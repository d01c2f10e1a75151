//! Starting the main child: its own process group (or session), the signal mask and
//! dispositions lastcall was started with (`sys::take_dispositions` says where they differ),
//! the terminal's foreground if lastcall has it, and only the file descriptors lastcall was
//! given (everything lastcall opens itself is close-on-exec), which lastcall then closes for
//! itself.
//!
//! May import: error, procfs, signals, sys.

use std::borrow::Cow;
use std::ffi::{CStr, CString, OsStr, OsString};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use log::{debug, warn};
use nix::fcntl::OFlag;
use nix::sys::signal::SigSet;
use nix::sys::stat::Mode;
use nix::unistd::{getpgrp, getpid, getsid, Pid};

use crate::error::{Error, OneLine};
use crate::procfs;
use crate::signals::Sig;
use crate::sys::{self, Detach, ExecPlan, StartFailure};

pub struct Launch<'a> {
    pub argv: &'a [OsString],
    pub detach: Detach,
    /// The child's environment, as `KEY=VALUE` (`cli::child_environment`).
    pub env: Vec<Cow<'static, CStr>>,
    /// The signal mask lastcall was started with.
    pub mask: &'a SigSet,
    /// Who the app runs as (`--user`), if not lastcall's own user.
    pub ids: Option<sys::Ids>,
    pub no_new_privs: bool,
    /// The child's own exit status if its start fails, from the personality.
    pub exits: sys::ChildExitCodes,
    /// The directory the app starts in, which lastcall has left (`leave_cwd`), if it has.
    pub cwd: Option<BorrowedFd<'a>>,
    /// A script without `#!` runs through /bin/sh, as under glibc's execvp (the personality's
    /// `scripts_through_sh`).
    pub scripts_through_sh: bool,
    /// The pid variables lastcall was given, with their values: those that name lastcall are
    /// meant for the app, and name it instead.
    pub pid_variables: &'a [(&'static str, OsString)],
}

pub struct Started {
    /// The child's pid, which is also its process group id (unless `Detach::Inherit`).
    pub pid: Pid,
    /// Signals that were pending for lastcall when it handed its terminal over and that
    /// another process sent: the event loop acts on them as if they had just arrived.
    pub early_signals: Vec<(Sig, libc::pid_t)>,
}

/// Spawns the command.
pub fn spawn(launch: Launch) -> Result<Started, Error> {
    let program = launch.argv.first().ok_or_else(|| Error::Usage("no command given".into()))?;
    let argv: Vec<CString> = launch.argv.iter().map(|a| c_string(a.as_bytes())).collect();
    let take_terminal = owns_terminal();
    // Socket activation's fds and the watchdog are for the child, so what names lastcall must
    // name it.
    let me = getpid().to_string();
    let renamed: Vec<&str> =
        launch.pid_variables.iter().filter(|(_, value)| value.as_os_str() == me.as_str()).map(|(name, _)| *name).collect();
    let mut early_signals = Vec::new();

    if launch.detach == Detach::Session && take_terminal {
        early_signals = hand_over_terminal();
    }
    let mut plan = ExecPlan::new(argv, launch.env, launch.detach, take_terminal, &renamed, *launch.mask)
        .run_as(switch_needed(launch.ids.as_ref()), launch.no_new_privs)
        .exec_in(launch.cwd.map(|fd| fd.as_raw_fd()), launch.scripts_through_sh);
    let pid = Pid::from_raw(sys::spawn(&mut plan, &launch.exits).map_err(|failure| start_error(program, failure))?);
    Ok(Started { pid, early_signals })
}

/// Leaves the working directory for `/` before the app starts, so that lastcall keeps no mount
/// busy and the app never sees lastcall's directory change under it (dumb-init's suite reads it
/// as soon as the app starts). Returns the directory, held close-on-exec, for the child to go
/// back to before exec (`Launch::cwd`), so that the app starts exactly where it would have, and
/// inherits no fd for it. None when it cannot be held (a directory lastcall may not search):
/// then lastcall has not moved, and leaves once the app has started (`leave_cwd_late`).
pub fn leave_cwd() -> Option<OwnedFd> {
    let here = match nix::fcntl::open(".", OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty()) {
        Ok(fd) => fd,
        Err(e) => {
            debug!("cannot hold the working directory ({e}): leaving it once the app has started");
            return None;
        }
    };
    if let Err(e) = nix::unistd::chdir("/") {
        warn!("cannot change directory to /: {e}");
    }
    Some(here)
}

/// `leave_cwd`'s fallback, once the app has its directory.
pub fn leave_cwd_late() {
    if let Err(e) = nix::unistd::chdir("/") {
        warn!("cannot change directory to /: {e}");
    }
}

/// The ids to switch to, unless lastcall, not root, already runs as that user and group (the
/// platform started the container as the user `--user` names: `docker run --user`, a pod's
/// runAsUser): then there is nothing to switch, and only root could change the groups.
fn switch_needed(ids: Option<&sys::Ids>) -> Option<sys::Ids> {
    let ids = ids?;
    if ids.uid == 0 || !sys::runs_as(ids.uid, ids.gid) {
        return Some(ids.clone());
    }
    let mut have = sys::supplementary_groups();
    let mut want = ids.groups.clone();
    have.sort_unstable();
    want.sort_unstable();
    want.dedup();
    have.dedup();
    if have != want {
        log::warn!("already running as uid {} gid {}: supplementary groups {have:?} kept (--user wants {want:?}, which only root can set)", ids.uid, ids.gid);
    }
    None
}

/// Only exec's own failure of the command is the command's (126/127). lastcall failing to start
/// a process at all, for lack of pids or memory, is lastcall's (125).
fn start_error(program: &OsString, failure: StartFailure) -> Error {
    match failure {
        StartFailure::Setup(what, source) => {
            Error::Setup { what: format!("{what} '{}'", OneLine(&program.to_string_lossy())), source }
        }
        StartFailure::Exec(source) => {
            let directory = source.raw_os_error() == Some(libc::EACCES) && names_a_directory(program);
            Error::Exec { command: program.clone(), source, directory }
        }
    }
}

/// Whether exec's EACCES for `program` is a directory's (`lastcall -- /etc`), which is said as
/// such. Only a path: a bare name's EACCES may have come from any of PATH's entries.
fn names_a_directory(program: &OsStr) -> bool {
    program.as_bytes().contains(&b'/') && std::fs::metadata(Path::new(program)).is_ok_and(|m| m.is_dir())
}

/// dumb-init's hand-over: a terminal belongs to one session, so when lastcall leads the session
/// that owns it, it lets go (TIOCNOTTY) and the child, in its new session, takes it. Letting go
/// makes the kernel send SIGHUP and SIGCONT to lastcall's group, with lastcall's own pid as the
/// sender; they are pending by the time the ioctl returns and are dropped here, not forwarded
/// (a SIGHUP would end the app). One that another process sent is kept for the event loop.
fn hand_over_terminal() -> Vec<(Sig, libc::pid_t)> {
    let me = getpid();
    let stdin = std::io::stdin();
    let leads_its_session = getsid(None).is_ok_and(|sid| sid == me);
    if !leads_its_session || !nix::sys::termios::tcgetsid(&stdin).is_ok_and(|sid| sid == me) {
        return Vec::new();
    }
    if let Err(e) = sys::release_terminal() {
        debug!("cannot release the terminal: {e}");
        return Vec::new();
    }
    let hangup = sys::signal_set([Sig(libc::SIGHUP), Sig(libc::SIGCONT)]);
    let mut kept = Vec::new();
    while let Ok(Some((sig, sender))) = sys::take_signal(&hangup) {
        if sender == me.as_raw() {
            debug!("dropped the {sig} of the terminal hand-over");
        } else {
            kept.push((sig, sender));
        }
    }
    kept
}

/// The fds from 3 up that lastcall was started with and the app inherited: the app's (socket
/// activation's listeners, a pipe, ...). Those are the open fds without close-on-exec: every fd
/// lastcall opens itself has the flag, and no fd lastcall was given can have it (exec would have
/// closed it). So the list can be made after the spawn, while the app execs, and still name just
/// what the app was given. With them, how many of the listed fds are lastcall's own (None
/// without /proc), which spares the health endpoint's budget a listing of its own.
pub fn inherited_fds() -> (Vec<RawFd>, Option<usize>) {
    let listed = procfs::open_fds();
    let listed_count = listed.as_ref().map(Vec::len);
    let candidates = listed.unwrap_or_else(|| {
        // No /proc: try every number up to the limit (bounded: it may be a million).
        (3..sys::fd_limit().min(65536) as RawFd).collect()
    });
    let inherited: Vec<RawFd> = candidates.into_iter().filter(|&fd| fd >= 3 && sys::fd_is_inherited(fd)).collect();
    let own = listed_count.map(|n| n.saturating_sub(inherited.len()));
    (inherited, own)
}

/// catatonit's rule: once the app has its copies, lastcall closes its own, so that when the app
/// closes a listener to drain, the socket really closes (a new client is refused instead of
/// waiting in a backlog nobody serves).
pub fn close_inherited(fds: &[RawFd]) {
    for &fd in fds {
        if let Err(e) = sys::close_fd(fd) {
            debug!("cannot close inherited fd {fd}: {e}");
        }
    }
}

/// Arguments and the environment come from the kernel as C strings, so none holds a NUL.
fn c_string(bytes: &[u8]) -> CString {
    CString::new(bytes).unwrap_or_default()
}

/// A child may only take the terminal from lastcall's own group: stealing it from an
/// interactive shell that started lastcall in the background would break that shell.
fn owns_terminal() -> bool {
    // Not through std's stdin, whose first use allocates its 8 KiB buffer for good.
    sys::stdin_foreground_group().is_some_and(|fg| fg == getpgrp().as_raw())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::errno::Errno;
    use std::io;

    #[test]
    fn lastcalls_own_failures_are_not_the_commands() {
        let program = OsString::from("app");
        let exec = |errno| start_error(&program, StartFailure::Exec(io::Error::from_raw_os_error(errno))).exit_code();
        assert_eq!(exec(libc::ENOENT), 127);
        assert_eq!(exec(libc::EACCES), 126);
        let dir = |program: &str| start_error(&program.into(), StartFailure::Exec(io::Error::from_raw_os_error(libc::EACCES)));
        assert_eq!(dir("/").to_string(), "cannot run '/': is a directory");
        assert_eq!(dir("/").exit_code(), 126);
        assert_eq!(dir("./Cargo.toml").to_string(), "cannot run './Cargo.toml': Permission denied");
        assert_eq!(dir("src").to_string(), "cannot run 'src': Permission denied", "a bare name: not said");
        let clone = start_error(&program, StartFailure::Setup("cannot start", io::Error::from(Errno::EAGAIN)));
        assert_eq!(clone.exit_code(), 125);
        assert_eq!(clone.to_string(), "cannot start 'app': Resource temporarily unavailable");
    }

    #[test]
    fn inherited_fds_are_found() {
        let (r, w) = nix::unistd::pipe().unwrap();
        use std::os::fd::AsRawFd;
        let (fds, own) = inherited_fds();
        assert!(fds.contains(&r.as_raw_fd()) && fds.contains(&w.as_raw_fd()), "{fds:?}");
        assert!(fds.iter().all(|&fd| fd >= 3));
        // 0, 1 and 2 at least.
        assert!(own.is_some_and(|own| own >= 3), "{own:?}");
        // lastcall's own, close-on-exec, are not inherited, and count among its own.
        let file = std::fs::File::open("Cargo.toml").unwrap();
        let (fds, own_now) = inherited_fds();
        assert!(!fds.contains(&file.as_raw_fd()));
        assert!(own_now > own, "{own_now:?} {own:?}");
    }
}
