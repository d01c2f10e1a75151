//! Starting the main child: its own process group, an empty signal mask, default dispositions,
//! the terminal's foreground if lastcall has it, and only the file descriptors lastcall was given
//! (everything lastcall opens itself is close-on-exec).

use std::ffi::{CString, OsString};
use std::io::IsTerminal;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::process::Command;

use nix::spawn::{posix_spawnp, PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags};
use nix::sys::signal::SigSet;
use nix::unistd::{getpgrp, tcgetpgrp, Pid};

use crate::error::Error;
use crate::sys;

/// Spawns `argv` and returns its pid, which is also its process group id.
pub fn spawn(argv: &[OsString]) -> Result<Pid, Error> {
    let program = argv.first().ok_or_else(|| Error::Usage("no command given".into()))?;
    let exec_error = |source| Error::Exec { command: program.clone(), source };
    if owns_terminal() {
        spawn_with_terminal(argv).map_err(exec_error)
    } else {
        spawn_detached(argv).map_err(|errno| exec_error(errno.into()))
    }
}

/// posix_spawn (a vfork in musl): the cheapest start there is. The attributes give the child
/// its own group and an empty mask; dispositions are already default in lastcall itself.
/// musl reports exec failures back through the call's return value.
fn spawn_detached(argv: &[OsString]) -> nix::Result<Pid> {
    let mut attr = PosixSpawnAttr::init()?;
    attr.set_pgroup(Pid::from_raw(0))?;
    attr.set_sigmask(&SigSet::empty())?;
    attr.set_flags(PosixSpawnFlags::POSIX_SPAWN_SETPGROUP | PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK)?;
    let args: Vec<CString> = argv.iter().map(|a| c_string(a.as_bytes())).collect();
    let env: Vec<CString> = std::env::vars_os()
        .map(|(k, v)| c_string(&[k.as_bytes(), b"=", v.as_bytes()].concat()))
        .collect();
    posix_spawnp(&args[0], &PosixSpawnFileActions::init()?, &attr, &args, &env)
}

/// With a terminal to hand over, the child must call tcsetpgrp itself before exec, which only a
/// fork can do: std's fork path, with a hook that takes the terminal and empties the mask.
fn spawn_with_terminal(argv: &[OsString]) -> std::io::Result<Pid> {
    let mut command = Command::new(&argv[0]);
    command.args(&argv[1..]).process_group(0);
    sys::take_terminal_in_child(&mut command);
    let child = command.spawn()?;
    // Dropping `child` neither waits nor kills: the reaper collects it with everything else.
    Ok(Pid::from_raw(child.id() as i32))
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
