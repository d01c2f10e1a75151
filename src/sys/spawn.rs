//! The spawn: the command started as posix_spawn would (a vfork-style clone), with the set-up
//! done in the child, in lastcall's memory, until exec.
//!
//! May import: signals (through `super`'s signal calls).

use std::borrow::Cow;
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::RawFd;

use nix::sys::signal::SigSet;

use super::set_signal_mask;

/// How the child is detached from lastcall.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detach {
    /// Its own process group (setpgid), in lastcall's session.
    Group,
    /// Its own session (setsid), dumb-init's default, taking the terminal as its controlling one.
    Session,
    /// lastcall's own group: dumb-init's `-c`, where a terminal's Ctrl-C and Ctrl-Z reach both.
    Inherit,
}

/// Everything the child needs, prepared before the clone so that the child allocates nothing.
pub struct ExecPlan {
    argv: Vec<CString>,
    /// Each entry with its NUL: inherited ones borrowed, the rest owned.
    envp: Vec<Cow<'static, [u8]>>,
    /// Indexes into `envp` of the `PID_VARIABLES` entries whose digits the child fills in with its
    /// own pid.
    pid_slots: Vec<(usize, usize)>,
    detach: Detach,
    take_terminal: bool,
    /// The signal mask the child starts with: the one lastcall was started with.
    mask: SigSet,
    /// Who the child becomes before exec (`--user`), if anyone.
    ids: Option<Ids>,
    no_new_privs: bool,
    /// The directory the child goes to before exec (`fchdir`), when lastcall has left it.
    cwd: Option<RawFd>,
    /// glibc's execvp rather than musl's: a file exec refuses as no program (ENOEXEC, a script
    /// without `#!`) runs through /bin/sh.
    scripts_through_sh: bool,
}

/// The ids the child switches to, in setgroups, setgid, setuid order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ids {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

/// The steps of the child's start that can fail before exec, by the index the child reports.
const STEPS: [&str; 6] = [
    "",
    "setgroups failed before running",
    "setgid failed before running",
    "setuid failed before running",
    "PR_SET_NO_NEW_PRIVS failed before running",
    "returning to the working directory failed before running",
];

/// glibc's shell for a script without `#!` (`_PATH_BSHELL`), and its PATH when there is none
/// (`CS_PATH`).
const SH: &CStr = c"/bin/sh";
const GLIBC_DEFAULT_PATH: &[u8] = b"/bin:/usr/bin";
/// The longest directory of PATH and file name that glibc's execvp tries.
const PATH_MAX: usize = libc::PATH_MAX as usize;
const NAME_MAX: usize = 255;

// The 32-bit-id system calls: on i386 and arm the plain numbers are the old 16-bit ones.
#[cfg(any(target_arch = "x86", target_arch = "arm"))]
const SYS_IDS: [libc::c_long; 3] = [libc::SYS_setgroups32, libc::SYS_setgid32, libc::SYS_setuid32];
#[cfg(not(any(target_arch = "x86", target_arch = "arm")))]
const SYS_IDS: [libc::c_long; 3] = [libc::SYS_setgroups, libc::SYS_setgid, libc::SYS_setuid];

/// The child's own exit status when its start fails, from the personality's table (see
/// `personality`): what the parent sees where the errno written into shared memory never
/// arrives (qemu-user runs the vfork-style clone as a plain fork). A static table, so the
/// child can look a code up without allocating.
#[derive(Clone, Copy, Debug)]
pub struct ChildExitCodes {
    /// errno of a failed exec, and the exit code it gives.
    pub exec: &'static [(i32, i32)],
    /// The exit code for any other errno of exec.
    pub exec_other: i32,
    /// The exit code when a step before exec fails (setgroups, setgid, setuid, no_new_privs).
    pub setup: i32,
}

impl ChildExitCodes {
    fn for_exec(&self, errno: i32) -> i32 {
        self.exec.iter().find(|&&(e, _)| e == errno).map_or(self.exec_other, |&(_, code)| code)
    }
}

/// Why `spawn` did not start the command.
#[derive(Debug)]
pub enum StartFailure {
    /// lastcall's own part: the clone (EAGAIN, ENOMEM...).
    Setup(&'static str, io::Error),
    /// exec's own failure of the command, reported by the child.
    Exec(io::Error),
}

/// Variables in which systemd names the process a thing is meant for: socket activation's
/// (sd_listen_fds) and the watchdog's (sd_watchdog_enabled). When they name lastcall, they are
/// meant for the app, which checks them against its own pid.
pub const PID_VARIABLES: [&str; 2] = ["LISTEN_PID", "WATCHDOG_PID"];

impl ExecPlan {
    /// The child's entries of the `PID_VARIABLES` named in `renamed` are rewritten to its own pid.
    pub fn new(argv: Vec<CString>, env: Vec<Cow<'static, CStr>>, detach: Detach, take_terminal: bool, renamed: &[&str], mask: SigSet) -> ExecPlan {
        let mut envp: Vec<Cow<'static, [u8]>> = env
            .into_iter()
            .map(|entry| match entry {
                Cow::Borrowed(entry) => Cow::Borrowed(entry.to_bytes_with_nul()),
                Cow::Owned(entry) => Cow::Owned(entry.into_bytes_with_nul()),
            })
            .collect();
        let mut pid_slots = Vec::new();
        for name in renamed {
            let prefix = [name.as_bytes(), b"="].concat();
            if let Some(i) = envp.iter().position(|e| e.starts_with(&prefix)) {
                // Room for any pid and the NUL, written by the child.
                envp[i] = Cow::Owned([&prefix[..], &[0u8; 12]].concat());
                pid_slots.push((i, prefix.len()));
            }
        }
        ExecPlan {
            argv,
            envp,
            pid_slots,
            detach,
            take_terminal,
            mask,
            ids: None,
            no_new_privs: false,
            cwd: None,
            scripts_through_sh: false,
        }
    }

    /// The child switches to `ids` (if any) and sets no_new_privs (if asked) before exec.
    pub fn run_as(mut self, ids: Option<Ids>, no_new_privs: bool) -> ExecPlan {
        self.ids = ids;
        self.no_new_privs = no_new_privs;
        self
    }

    /// The child goes to the directory `cwd` (an fd, close-on-exec) before exec, if any; with
    /// `scripts_through_sh`, it execs as glibc's execvp does (`exec_like_glibc`).
    pub fn exec_in(mut self, cwd: Option<RawFd>, scripts_through_sh: bool) -> ExecPlan {
        self.cwd = cwd;
        self.scripts_through_sh = scripts_through_sh;
        self
    }
}

/// What the child reads, and writes back, while it runs in lastcall's memory.
struct ChildSetup<'a> {
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    /// Where the child writes its pid (see `PID_VARIABLES`).
    pid_slots: &'a [*mut u8],
    detach: Detach,
    take_terminal: bool,
    mask: &'a SigSet,
    /// `Ids`, spelled for the child: (uid, gid), and setgroups' list.
    ids: Option<(libc::uid_t, libc::gid_t)>,
    groups: &'a [libc::gid_t],
    no_new_privs: bool,
    /// `ExecPlan::cwd`, or -1.
    cwd: libc::c_int,
    /// With `scripts_through_sh`: /bin/sh's argv, `[/bin/sh, (the script), argv[1..], NULL]`,
    /// whose second entry the child fills in; else null.
    sh_argv: *mut *const libc::c_char,
    /// With `scripts_through_sh`: lastcall's PATH, as getenv gives it (null: none).
    path: *const libc::c_char,
    exits: &'a ChildExitCodes,
    /// The errno exec (or the step) failed with; 0 if it did not return.
    exec_errno: libc::c_int,
    /// Which of `STEPS` failed; 0 for exec itself.
    failed_step: usize,
}

/// Room for the child's few calls and musl's execvpe, which builds each PATH candidate (up to
/// PATH_MAX) on the stack, with room to spare; small enough to come from lastcall's arena, so
/// that no mapping is made for it, and none unmapped after (which, the child having run on
/// another core in lastcall's memory, would interrupt that core to flush its TLB).
const CHILD_STACK: usize = 16 * 1024;

/// Starts the command the way posix_spawn does (a vfork: clone with CLONE_VM | CLONE_VFORK,
/// lastcall waiting until the child has exec'd or failed), with the set-up no posix_spawn
/// attribute covers (the terminal, a session, LISTEN_PID). musl's posix_spawn itself is not used:
/// it puts lastcall's mask back as musl's sigprocmask reports it, without 32-34, so one of those
/// arriving during the spawn would end lastcall. The child shares lastcall's memory and makes
/// only system calls on memory prepared here; exec's failure comes back in that memory, as the
/// errno the child could not get past (no pipe, so no fd is needed to start the command).
pub fn spawn(plan: &mut ExecPlan, exits: &ChildExitCodes) -> Result<libc::pid_t, StartFailure> {
    let argv: Vec<*const libc::c_char> =
        plan.argv.iter().map(|a| a.as_ptr()).chain(std::iter::once(std::ptr::null())).collect();
    let pid_slots: Vec<*mut u8> = plan.pid_slots.iter().map(|&(i, at)| plan.envp[i].to_mut()[at..].as_mut_ptr()).collect();
    let envp: Vec<*const libc::c_char> =
        plan.envp.iter().map(|e| e.as_ptr().cast()).chain(std::iter::once(std::ptr::null())).collect();
    // Made before the clone, so that the child allocates nothing; nothing at all under lastcall's
    // own name.
    let mut sh_argv: Vec<*const libc::c_char> = Vec::new();
    let mut path = std::ptr::null();
    if plan.scripts_through_sh {
        sh_argv.extend([SH.as_ptr(), std::ptr::null()]);
        sh_argv.extend(argv.iter().skip(1));
        // SAFETY: getenv reads the environment, which nothing changes while lastcall runs (it
        // has no other thread); the pointer stays valid until clone returns.
        path = unsafe { libc::getenv(c"PATH".as_ptr()) };
    }
    let mut setup = ChildSetup {
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        pid_slots: &pid_slots,
        detach: plan.detach,
        take_terminal: plan.take_terminal,
        mask: &plan.mask,
        ids: plan.ids.as_ref().map(|ids| (ids.uid, ids.gid)),
        groups: plan.ids.as_ref().map_or(&[][..], |ids| &ids.groups[..]),
        no_new_privs: plan.no_new_privs,
        cwd: plan.cwd.unwrap_or(-1),
        sh_argv: if sh_argv.is_empty() { std::ptr::null_mut() } else { sh_argv.as_mut_ptr() },
        path,
        exits,
        exec_errno: 0,
        failed_step: 0,
    };
    // Left uninitialised: the child touches only the top page or two, and writing all of it (or
    // faulting in every page) would cost more than the rest of the start.
    let mut stack: Vec<u8> = Vec::with_capacity(CHILD_STACK);
    // The stack grows down from its 16-byte aligned top, on every architecture musl supports.
    let top = stack.as_mut_ptr().wrapping_add(CHILD_STACK);
    let top = top.wrapping_sub(top as usize % 16);
    let setup_ptr: *mut ChildSetup = &mut setup;
    // SAFETY: the child runs `start_child` on `stack` with `setup`, both alive until clone
    // returns, which CLONE_VFORK makes wait for the child's exec or exit. lastcall has no signal
    // handler (see FAULTS_IGNORED), so none can run in the child in lastcall's memory.
    let pid = unsafe { libc::clone(start_child, top.cast(), libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD, setup_ptr.cast()) };
    if pid < 0 {
        return Err(StartFailure::Setup("cannot start the command", io::Error::last_os_error()));
    }
    // SAFETY: the child wrote it, if at all, before clone returned; volatile because the write
    // came from outside this function's view.
    let errno = unsafe { std::ptr::read_volatile(&(*setup_ptr).exec_errno) };
    // SAFETY: as above.
    let step = unsafe { std::ptr::read_volatile(&(*setup_ptr).failed_step) };
    if errno != 0 {
        // The child exited right after; collect it now.
        // SAFETY: waitpid on our own child, no status wanted.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
        let error = io::Error::from_raw_os_error(errno);
        return Err(match STEPS.get(step) {
            Some(what) if step != 0 => StartFailure::Setup(what, error),
            _ => StartFailure::Exec(error),
        });
    }
    drop(stack);
    Ok(pid)
}

/// The child's side of `spawn`, in lastcall's memory until exec.
extern "C" fn start_child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the ChildSetup that `spawn` keeps alive until this child execs or exits.
    // Only system calls from here on, on our own stack and the memory prepared before the clone.
    unsafe {
        let setup = &mut *arg.cast::<ChildSetup>();
        // First, while still allowed to (`--user` may take away the right to enter it): the
        // directory the app would have started in, which lastcall has left.
        if setup.cwd >= 0 && libc::fchdir(setup.cwd) != 0 {
            return child_failed(setup, 5);
        }
        let me = libc::getpid();
        match setup.detach {
            Detach::Group => {
                libc::setpgid(0, 0);
            }
            Detach::Session => {
                libc::setsid();
            }
            Detach::Inherit => {}
        }
        if setup.take_terminal {
            match setup.detach {
                // A background group taking the foreground gets SIGTTOU, blocked here as every
                // signal is until the mask is set.
                Detach::Group => libc::tcsetpgrp(libc::STDIN_FILENO, me),
                // A new session has no terminal: make stdin's its controlling one.
                Detach::Session => libc::ioctl(libc::STDIN_FILENO, libc::TIOCSCTTY, 0),
                // Already in the foreground group, lastcall's.
                Detach::Inherit => 0,
            };
        }
        for &slot in setup.pid_slots {
            write_decimal(slot, me as u32);
        }
        // `--user`: the groups first, while still allowed to set them, the uid last. Raw system
        // calls: musl's set*id wrappers signal every thread of the process to change them all,
        // and this child shares lastcall's memory, not its threads. Each one is checked, and a
        // failure ends the start before exec as lastcall's own (125).
        if let Some((uid, gid)) = setup.ids {
            let calls: [(libc::c_long, libc::c_long, libc::c_long); 3] = [
                (SYS_IDS[0], setup.groups.len() as libc::c_long, setup.groups.as_ptr() as libc::c_long),
                (SYS_IDS[1], gid as libc::c_long, 0),
                (SYS_IDS[2], uid as libc::c_long, 0),
            ];
            for (i, &(nr, a, b)) in calls.iter().enumerate() {
                if libc::syscall(nr, a, b) != 0 {
                    return child_failed(setup, i + 1);
                }
            }
        }
        if setup.no_new_privs && libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return child_failed(setup, 4);
        }
        // One pass through the scheduler before exec, as setsid's move to a new autogroup makes
        // anyway. Without it the scheduler tends to move the child to the other core, and the
        // vfork's end then wakes lastcall on the child's core, behind it: lastcall's work after
        // the spawn waited for the app to exec, run and exit, with a core idle
        // (docs/benchmark.md, "One pass through the scheduler"). Under load it changes nothing
        // measurable.
        libc::sched_yield();
        // The mask lastcall was started with (dispositions are lastcall's own, which are the
        // inherited ones, and exec resets handlers).
        let _ = set_signal_mask(libc::SIG_SETMASK, setup.mask);
        let errno = if setup.sh_argv.is_null() {
            libc::execvpe(*setup.argv, setup.argv, setup.envp);
            *libc::__errno_location()
        } else {
            exec_like_glibc(setup)
        };
        setup.exec_errno = errno;
        // qemu-user runs a CLONE_VM|CLONE_VFORK clone as a plain fork, so there lastcall never
        // sees the errno written above, only this exit status: the personality's code for it (a
        // lookup in a static table, safe here).
        libc::_exit(setup.exits.for_exec(errno))
    }
}

/// glibc's execvp, which the peers are built with, where musl's differs: a file exec refuses as no
/// program (ENOEXEC: a script without `#!`) runs as `/bin/sh FILE ARGS...`; PATH is walked the
/// same way, past the errors glibc skips, with glibc's default PATH when there is none. Returns
/// the errno glibc's would leave, when nothing could be run.
///
/// # Safety
/// Only in the child of `spawn`, with `sh_argv` and `path` as `spawn` made them.
unsafe fn exec_like_glibc(setup: &mut ChildSetup) -> libc::c_int {
    // SAFETY: argv[0] is a NUL-terminated string of the plan's.
    let file = unsafe { CStr::from_ptr(*setup.argv) }.to_bytes();
    if file.is_empty() {
        return libc::ENOENT;
    }
    if file.contains(&b'/') {
        // SAFETY: as above, and `sh_argv` as `spawn` made it.
        return unsafe { exec_or_sh(setup, *setup.argv) };
    }
    if file.len() > NAME_MAX {
        return libc::ENAMETOOLONG;
    }
    let path = if setup.path.is_null() {
        GLIBC_DEFAULT_PATH
    } else {
        // SAFETY: getenv's NUL-terminated value, alive while lastcall waits for this child.
        unsafe { CStr::from_ptr(setup.path) }.to_bytes()
    };
    // On this child's own stack, as glibc's and musl's are: a directory, '/', the file, a NUL.
    let mut candidate = [0u8; PATH_MAX + 1 + NAME_MAX + 1];
    let (mut errno, mut denied) = (libc::ENOENT, false);
    for dir in path.split(|&b| b == b':') {
        if dir.len() >= PATH_MAX {
            continue;
        }
        // An empty entry is the working directory: the bare file name.
        let slash = usize::from(!dir.is_empty());
        let end = dir.len() + slash + file.len();
        candidate[..dir.len()].copy_from_slice(dir);
        if slash == 1 {
            candidate[dir.len()] = b'/';
        }
        candidate[dir.len() + slash..end].copy_from_slice(file);
        candidate[end] = 0;
        // SAFETY: `candidate` is NUL-terminated, and outlives the exec.
        errno = unsafe { exec_or_sh(setup, candidate.as_ptr().cast()) };
        match errno {
            libc::EACCES => denied = true,
            libc::ENOENT | libc::ESTALE | libc::ENOTDIR | libc::ENODEV | libc::ETIMEDOUT => {}
            _ => return errno,
        }
    }
    if denied {
        libc::EACCES
    } else {
        errno
    }
}

/// execve of `file`; if the kernel finds no program in it (ENOEXEC), /bin/sh with `file` as its
/// script. The errno of the last exec tried.
///
/// # Safety
/// Only in the child of `spawn`; `file` NUL-terminated and alive until this returns.
unsafe fn exec_or_sh(setup: &mut ChildSetup, file: *const libc::c_char) -> libc::c_int {
    // SAFETY: argv and envp are the plan's NULL-terminated arrays; `sh_argv` has room for the
    // script at index 1 and ends with NULL. The child's own memory until exec.
    unsafe {
        libc::execve(file, setup.argv, setup.envp);
        let errno = *libc::__errno_location();
        if errno != libc::ENOEXEC {
            return errno;
        }
        *setup.sh_argv.add(1) = file;
        libc::execve(SH.as_ptr(), setup.sh_argv, setup.envp);
        *libc::__errno_location()
    }
}

/// Reports that step `step` of the child's start failed with errno, and ends the child with
/// the personality's code for a failure of its own.
///
/// # Safety
/// Only in the child of `spawn`, with the errno of the failed call still current.
unsafe fn child_failed(setup: &mut ChildSetup, step: usize) -> libc::c_int {
    // SAFETY: the errno location is the calling thread's, readable in the child.
    setup.exec_errno = unsafe { *libc::__errno_location() };
    setup.failed_step = step;
    // SAFETY: _exit ends only this child. Under qemu-user (a plain fork) this code is all the
    // parent sees.
    unsafe { libc::_exit(setup.exits.setup) }
}

/// Writes `n` in decimal at `dst`, NUL-terminated; the buffer holds 12 bytes.
///
/// # Safety
/// `dst` must point to at least 12 writable bytes.
unsafe fn write_decimal(dst: *mut u8, mut n: u32) {
    let mut digits = [0u8; 10];
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..len {
        // SAFETY: at most 10 digits and a NUL fit the 12 bytes the caller vouches for.
        unsafe { *dst.add(i) = digits[len - 1 - i] };
    }
    // SAFETY: as above.
    unsafe { *dst.add(len) = 0 };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::signal_set;

    #[test]
    fn pids_are_written_in_decimal_with_a_nul() {
        for (pid, text) in [(1u32, "1"), (4194304, "4194304"), (u32::MAX, "4294967295")] {
            let mut buf = [0xffu8; 12];
            // SAFETY: the buffer holds the 12 bytes write_decimal may write.
            unsafe { write_decimal(buf.as_mut_ptr(), pid) };
            let end = buf.iter().position(|&b| b == 0).unwrap();
            assert_eq!(&buf[..end], text.as_bytes());
        }
    }

    #[test]
    fn pid_slots_are_only_made_when_asked_for() {
        // Inherited entries are borrowed, others owned: both kinds here.
        let env = || vec![Cow::Borrowed(c"A=1"), Cow::Owned(CString::new("LISTEN_PID=99").unwrap()), Cow::Borrowed(c"WATCHDOG_PID=99")];
        let plan = ExecPlan::new(vec![], env(), Detach::Group, false, &["WATCHDOG_PID"], signal_set([]));
        assert_eq!(plan.pid_slots, vec![(2, "WATCHDOG_PID=".len())]);
        assert_eq!(plan.envp[2].len(), "WATCHDOG_PID=".len() + 12);
        assert_eq!(&plan.envp[1][..], b"LISTEN_PID=99\0");
        let plan = ExecPlan::new(vec![], env(), Detach::Group, false, &PID_VARIABLES, signal_set([]));
        assert_eq!(plan.pid_slots, vec![(1, "LISTEN_PID=".len()), (2, "WATCHDOG_PID=".len())]);
        let plan = ExecPlan::new(vec![], env(), Detach::Group, false, &[], signal_set([]));
        assert!(plan.pid_slots.is_empty());
        assert_eq!(&plan.envp[2][..], b"WATCHDOG_PID=99\0");
    }
}