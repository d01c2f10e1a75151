//! Starting the main child: its own process group (or session), an empty signal mask, default
//! dispositions, the terminal's foreground if lastcall has it, and only the file descriptors
//! lastcall was given (everything lastcall opens itself is close-on-exec).

use std::ffi::{CString, OsString};
use std::io::IsTerminal;
use std::os::unix::ffi::OsStrExt;

use nix::spawn::{posix_spawnp, PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags};
use nix::sys::signal::SigSet;
use nix::unistd::{getpgrp, getpid, tcgetpgrp, Pid};

use crate::error::Error;
use crate::sys::{self, Detach, ExecPlan};

pub struct Launch<'a> {
    pub argv: &'a [OsString],
    pub detach: Detach,
    /// Variables set (or replaced) in the child's environment.
    pub env: Vec<(String, OsString)>,
}

/// Spawns the command and returns its pid, which is also its process group id.
pub fn spawn(launch: &Launch) -> Result<Pid, Error> {
    let program = launch.argv.first().ok_or_else(|| Error::Usage("no command given".into()))?;
    let exec_error = |source| Error::Exec { command: program.clone(), source };
    let argv: Vec<CString> = launch.argv.iter().map(|a| c_string(a.as_bytes())).collect();
    let env = child_env(&launch.env);
    let take_terminal = owns_terminal();
    // Socket activation: the fds are for the child, so LISTEN_PID must name it.
    let listen_pid_is_ours = std::env::var("LISTEN_PID").is_ok_and(|p| p == getpid().to_string());

    if launch.detach == Detach::Group && !take_terminal && !listen_pid_is_ours {
        return spawn_cheap(&argv, &env).map_err(|errno| exec_error(errno.into()));
    }
    let mut plan = ExecPlan::new(argv, env, launch.detach, take_terminal, listen_pid_is_ours);
    let pid = sys::fork_exec(&mut plan).map_err(exec_error)?;
    Ok(Pid::from_raw(pid))
}

/// posix_spawn (a vfork in musl): the cheapest start there is. The attributes give the child
/// its own group and an empty mask; dispositions are already default in lastcall itself.
/// musl reports exec failures back through the call's return value.
fn spawn_cheap(argv: &[CString], env: &[CString]) -> nix::Result<Pid> {
    let mut attr = PosixSpawnAttr::init()?;
    attr.set_pgroup(Pid::from_raw(0))?;
    attr.set_sigmask(&SigSet::empty())?;
    attr.set_flags(PosixSpawnFlags::POSIX_SPAWN_SETPGROUP | PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK)?;
    posix_spawnp(&argv[0], &PosixSpawnFileActions::init()?, &attr, argv, env)
}

/// lastcall's environment with `overrides` applied, as `KEY=VALUE` C strings.
fn child_env(overrides: &[(String, OsString)]) -> Vec<CString> {
    let inherited = std::env::vars_os().filter(|(k, _)| !overrides.iter().any(|(o, _)| k == o.as_str()));
    inherited
        .chain(overrides.iter().map(|(k, v)| (k.into(), v.clone())))
        .map(|(k, v)| c_string(&[k.as_bytes(), b"=", v.as_bytes()].concat()))
        .collect()
}

/// Arguments and the environment come from the kernel as C strings, so none holds a NUL.
fn c_string(bytes: &[u8]) -> CString {
    CString::new(bytes).unwrap_or_default()
}

/// A child may only take the terminal from lastcall's own group: stealing it from an
/// interactive shell that started lastcall in the background would break that shell.
fn owns_terminal() -> bool {
    let stdin = std::io::stdin();
    stdin.is_terminal() && tcgetpgrp(&stdin).is_ok_and(|fg| fg == getpgrp())
}
