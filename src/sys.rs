//! The few calls that need `unsafe`: nix's safe wrappers take its `Signal` enum, which has no
//! real-time signals, and have no sigwaitinfo; musl's signal-set functions leave out 32-34;
//! the child runs in lastcall's memory until exec; and the sockets are set to raise a signal
//! (fcntl); and the ELF note that marks a binary as lastcall is placed in its own section. Calls
//! go through libc's wrappers, whose types follow each target's kernel ABI, except the four on
//! the hot paths (`direct`): no kernel struct is laid out here.
//!
//! May import: signals.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use nix::errno::Errno;
use nix::sys::signal::SigSet;
use nix::unistd::Pid;

use crate::signals::Sig;

/// A system call made directly, for the hot paths: a signal's wait (rt_sigtimedwait) and
/// forward (kill, pidfd_send_signal), an orphan's reap (wait4). musl's wrappers for these are cancellation points
/// (sigtimedwait, waitpid) or go through errno (all three): 52 of the 109 instructions a
/// forwarded signal cost, against about 10 here (docs/benchmark.md). `libc::syscall` is no way
/// round: it is variadic, 30 instructions a call. The `syscalls` crate holds the instruction
/// sequence of each architecture (upstream's, tested there); the numbers are libc's for the
/// target. Arguments are integers or pointers (as usize, sign-extended: a negative pid stays
/// negative in the kernel's int). Returns the kernel's result or its errno.
///
/// # Safety
/// The call must be one whose pointer arguments point to memory valid for what the kernel reads
/// and writes there.
#[inline(always)]
unsafe fn direct(number: libc::c_long, args: [usize; 4]) -> nix::Result<usize> {
    // SAFETY: the caller vouches for the memory behind the arguments; the number is libc's for
    // this target, so the kernel reads exactly the arguments given.
    let ret = unsafe { syscalls::raw::syscall4(number as usize, args[0], args[1], args[2], args[3]) };
    // The kernel returns -errno (-4095..-1) on failure.
    if ret > -4096isize as usize {
        Err(Errno::from_raw(-(ret as isize) as i32))
    } else {
        Ok(ret)
    }
}

/// A pid or signal number as a system-call argument: sign-extended, as the C ABI passes an int.
#[inline(always)]
fn arg(n: libc::c_int) -> usize {
    n as isize as usize
}

/// The ELF note by which an outer lastcall recognises its command as lastcall too (see
/// `nested`): a PT_NOTE the kernel and the linker leave alone, found without running the binary.
#[repr(C, align(4))]
pub struct Note {
    pub namesz: u32,
    pub descsz: u32,
    pub kind: u32,
    pub name: [u8; 12],
    pub desc: [u8; 4],
}

// SAFETY: a plain read-only static in a section of its own; `.note.*` makes LLVM give it the
// SHT_NOTE type, which the linker keeps (notes are never garbage-collected) and maps in a PT_NOTE
// program header. Nothing reads it through the section name.
#[used]
#[link_section = ".note.lastcall"]
pub static NOTE: Note = Note {
    // "lastcall" and its NUL, as ELF spells a note's owner.
    namesz: 9,
    descsz: 4,
    // "LCNS": lastcall's note of nesting.
    kind: 0x4c43_4e53,
    name: *b"lastcall\0\0\0\0",
    // The marker's version.
    desc: *b"v1\0\0",
};

/// Sends `sig` to `pid` (a process), `-pgid` (a group) or -1 (everyone we may signal).
/// The error is a plain errno, not an `io::Error`, which would need dropping on the signal path.
#[inline(always)]
pub fn kill(pid: libc::pid_t, sig: Sig) -> nix::Result<()> {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    unsafe { direct(libc::SYS_kill, [arg(pid), arg(sig.0), 0, 0]) }.map(drop)
}

/// A signal set with exactly `members`, bit by bit as the kernel reads it: bit n-1 for signal n,
/// in words of a C `unsigned long` (libc's `sigset_t` is an array of them, the kernel's mask its
/// first 64 bits), so it holds on 32- and 64-bit targets and either byte order. musl's
/// `sigaddset` and `sigfillset` leave out 32-34, which it keeps for itself; the kernel must see
/// them too, or another process's `kill -33` would end lastcall.
pub fn signal_set(members: impl IntoIterator<Item = Sig>) -> SigSet {
    const BITS: usize = 8 * std::mem::size_of::<libc::c_ulong>();
    const WORDS: usize = std::mem::size_of::<libc::sigset_t>() / std::mem::size_of::<libc::c_ulong>();
    // SAFETY: sigset_t is plain integers; all zero is the empty set.
    let mut raw: libc::sigset_t = unsafe { std::mem::zeroed() };
    let words = (&mut raw as *mut libc::sigset_t).cast::<libc::c_ulong>();
    for sig in members {
        let Some(bit) = usize::try_from(sig.0).ok().and_then(|n| n.checked_sub(1)) else { continue };
        if bit / BITS < WORDS {
            // SAFETY: the word is inside `raw`, which is made of c_ulongs and aligned for them.
            unsafe { *words.add(bit / BITS) |= 1 << (bit % BITS) };
        }
    }
    // SAFETY: `raw` is a valid set: the kernel reads any bit pattern.
    unsafe { SigSet::from_sigset_t_unchecked(raw) }
}

/// The members of `set` from 1 to 64, read bit by bit as `signal_set` writes them.
pub fn signal_members(set: &SigSet) -> impl Iterator<Item = Sig> + '_ {
    const BITS: usize = 8 * std::mem::size_of::<libc::c_ulong>();
    let words = (set.as_ref() as *const libc::sigset_t).cast::<libc::c_ulong>();
    (1..=64).map(Sig).filter(move |sig| {
        let bit = (sig.0 - 1) as usize;
        // SAFETY: signal 64's word is inside every libc's sigset_t (at least 64 bits).
        unsafe { *words.add(bit / BITS) & (1 << (bit % BITS)) != 0 }
    })
}

/// Sets the signal mask (`how`: SIG_BLOCK, SIG_UNBLOCK, SIG_SETMASK) and returns the one it
/// replaced, whole. The system call is made through libc's `syscall()` because musl's
/// `sigprocmask` clears 32-34 from the old mask it reports, and the app must get back exactly
/// what lastcall was given. The kernel's set is SIGRTMAX+1 bits (8 bytes; 16 on MIPS).
/// Async-signal-safe, so the child uses it too before exec.
pub fn set_signal_mask(how: libc::c_int, set: &SigSet) -> nix::Result<SigSet> {
    // SAFETY: sigset_t is plain integers; all zero is the empty set.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    let kernel_bytes = (libc::SIGRTMAX() as usize + 1) / 8;
    // SAFETY: rt_sigprocmask reads `kernel_bytes` (within sigset_t) from `set` and writes as many
    // into `old`, which we own.
    let rc = unsafe { libc::syscall(libc::SYS_rt_sigprocmask, how, set.as_ref() as *const libc::sigset_t, &mut old as *mut libc::sigset_t, kernel_bytes) };
    // SAFETY: any bit pattern is a valid set.
    Errno::result(rc).map(|_| unsafe { SigSet::from_sigset_t_unchecked(old) })
}

/// The size of the kernel's signal set: _NSIG / 8, 64 signals on every target lastcall ships for
/// (MIPS, which has 128, is not one). libc's sigset_t is larger (128 bytes) and the kernel
/// rejects any other size. A constant, so that the signal path does not call out to musl's
/// SIGRTMAX() for it.
const KERNEL_SIGSET_BYTES: usize = 64 / 8;

/// What lastcall was started with, read before Rust's runtime changes it: std ignores SIGPIPE
/// before `main` (on every Unix). An `.init_array` function runs before the runtime, in a static
/// musl binary as in a glibc one.
static PIPE_WAS_IGNORED: AtomicBool = AtomicBool::new(false);
/// Whether the hook set SIGSEGV and SIGBUS to SIG_IGN (they were SIG_DFL), which
/// `take_dispositions` undoes. The runtime puts its stack-overflow handler only on a SIG_DFL
/// signal, and musl unblocks 33 and 34 when the first handler of a process is installed: with
/// no handler ever installed, they stay blocked from lastcall's first block on, and a `kill -33`
/// during start-up cannot end lastcall. A fault of lastcall's own still kills it: the kernel
/// puts back the default action of an ignored or blocked signal it raises for a fault. (Any
/// binary that links this library, the fuzz targets too, starts the same way.)
static FAULTS_IGNORED: AtomicBool = AtomicBool::new(false);
/// The inherited mask, bit n-1 for signal n, once recorded.
static INHERITED_MASK: AtomicU64 = AtomicU64::new(0);
static MASK_RECORDED: AtomicBool = AtomicBool::new(false);

#[used]
#[link_section = ".init_array"]
static RECORD_INHERITED: extern "C" fn() = record_inherited;

extern "C" fn record_inherited() {
    PIPE_WAS_IGNORED.store(disposition(libc::SIGPIPE) == Some(libc::SIG_IGN), Ordering::Relaxed);
    let faults = [libc::SIGSEGV, libc::SIGBUS];
    if faults.iter().all(|&sig| disposition(sig) == Some(libc::SIG_DFL)) {
        faults.iter().for_each(|&sig| set_disposition(sig, libc::SIG_IGN));
        FAULTS_IGNORED.store(true, Ordering::Relaxed);
    }
    // Blocking nothing more reads the mask.
    if let Ok(mask) = set_signal_mask(libc::SIG_BLOCK, &signal_set([])) {
        let bits = signal_members(&mask).fold(0u64, |bits, sig| bits | 1 << (sig.0 - 1));
        INHERITED_MASK.store(bits, Ordering::Relaxed);
        MASK_RECORDED.store(true, Ordering::Relaxed);
    }
}

/// The signal mask lastcall was started with, if it was recorded before `main`.
pub fn inherited_mask() -> Option<SigSet> {
    let bits = INHERITED_MASK.load(Ordering::Relaxed);
    MASK_RECORDED.load(Ordering::Relaxed).then(|| signal_set((1..=64).map(Sig).filter(|sig| bits & 1 << (sig.0 - 1) != 0)))
}

/// The handler of `sig` (SIG_DFL, SIG_IGN or a function), if libc will say (musl will not for
/// 32-34).
fn disposition(sig: libc::c_int) -> Option<libc::sighandler_t> {
    let mut old = MaybeUninit::<libc::sigaction>::uninit();
    // SAFETY: with a null new action, sigaction only writes the current one into `old`.
    let rc = unsafe { libc::sigaction(sig, std::ptr::null(), old.as_mut_ptr()) };
    // SAFETY: sigaction succeeded, so it wrote the whole struct.
    (rc == 0).then(|| unsafe { old.assume_init() }.sa_sigaction)
}

fn set_disposition(sig: libc::c_int, handler: libc::sighandler_t) {
    // SAFETY: SIG_DFL and SIG_IGN install no code of ours.
    unsafe { libc::signal(sig, handler) };
}

/// Puts lastcall's dispositions back to what it was started with, except where it must differ.
/// The child starts with lastcall's dispositions (exec resets only handlers), so this is also
/// what the app gets. Signals are all blocked, so none is delivered while this runs, and a
/// blocked signal is queued for the event loop even when ignored, so lastcall needs no
/// disposition of its own to receive one. The exceptions:
/// - SIGCHLD ignored (SIG_IGN) would make the kernel reap lastcall's children before it can read
///   their status: it becomes SIG_DFL, for the app too.
/// - SIGPIPE goes back to what it was before Rust's runtime ignored it, and SIGSEGV and SIGBUS
///   to SIG_DFL from the SIG_IGN the start-up hook gave them (`FAULTS_IGNORED`).
pub fn take_dispositions() {
    if FAULTS_IGNORED.load(Ordering::Relaxed) {
        set_disposition(libc::SIGSEGV, libc::SIG_DFL);
        set_disposition(libc::SIGBUS, libc::SIG_DFL);
    }
    if disposition(libc::SIGCHLD) == Some(libc::SIG_IGN) {
        set_disposition(libc::SIGCHLD, libc::SIG_DFL);
    }
    if !PIPE_WAS_IGNORED.load(Ordering::Relaxed) {
        set_disposition(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Signals 1-31 (but KILL and STOP) to SIG_DFL, ignored ones too: what dumb-init's child gets.
pub fn default_standard_dispositions() {
    for sig in (1..=31).filter(|&sig| sig != libc::SIGKILL && sig != libc::SIGSTOP) {
        set_disposition(sig, libc::SIG_DFL);
    }
}

/// Ends lastcall by `sig`'s default action, as the app ended, so that lastcall's parent reads
/// the same wait status. Returns only if that action does not end lastcall (the signal is
/// ignored, as an inherited SIG_IGN on 32-34 that musl will not change).
///
/// lastcall must not dump a core of its own: the crash was the app's, and a core of lastcall
/// would mislead whoever reads it (and fill a disk under a restart loop). RLIMIT_CORE 0 stops a
/// core file; PR_SET_DUMPABLE 0 also stops a core piped to a handler (systemd-coredump,
/// apport), for which the kernel does not apply RLIMIT_CORE. The wait status then lacks the
/// app's core-dump flag: its core, if any, was written when it died.
pub fn die_by_signal(sig: Sig) {
    let no_core = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: setrlimit reads the struct we own; the prctl takes plain integers; SIG_DFL
    // installs no handler; then the signal is sent to ourselves and unblocked.
    unsafe {
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    set_disposition(sig.0, libc::SIG_DFL);
    let _ = kill(std::process::id() as libc::pid_t, sig);
    // Pending now; delivered as the mask lets it through.
    let _ = set_signal_mask(libc::SIG_UNBLOCK, &signal_set([sig]));
}

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
    envp: Vec<Vec<u8>>,
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
}

/// The ids the child switches to, in setgroups, setgid, setuid order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ids {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

/// The steps of the child's start that can fail before exec, by the index the child reports.
const STEPS: [&str; 5] = [
    "",
    "setgroups failed before running",
    "setgid failed before running",
    "setuid failed before running",
    "PR_SET_NO_NEW_PRIVS failed before running",
];

// The 32-bit-id system calls: on i386 and arm the plain numbers are the old 16-bit ones.
#[cfg(any(target_arch = "x86", target_arch = "arm"))]
const SYS_IDS: [libc::c_long; 3] = [libc::SYS_setgroups32, libc::SYS_setgid32, libc::SYS_setuid32];
#[cfg(not(any(target_arch = "x86", target_arch = "arm")))]
const SYS_IDS: [libc::c_long; 3] = [libc::SYS_setgroups, libc::SYS_setgid, libc::SYS_setuid];

/// Every signal from 1 to 64 that can be blocked: all but KILL and STOP. Fault signals are
/// included: the kernel still kills a process whose own fault raises a blocked one (it unblocks
/// it and restores the default action first), so blocking them costs nothing and lets lastcall
/// forward what another process sends. 32-34 are included too, which musl's sigfillset leaves
/// out (`signal_set`).
pub fn handled_set() -> SigSet {
    signal_set((1..=crate::signals::MAX_SIGNAL).map(Sig).filter(|&sig| sig != Sig::KILL && sig != Sig::STOP))
}

/// Blocks the handled set, so that from here on no signal is lost or acted on by default:
/// each waits, pending, until the event loop reads it. Returns the mask lastcall was started
/// with, which the app gets back (recorded before `main`: see `inherited_mask`).
pub fn block_handled() -> nix::Result<SigSet> {
    let replaced = set_signal_mask(libc::SIG_SETMASK, &handled_set())?;
    Ok(inherited_mask().unwrap_or(replaced))
}

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
    pub fn new(argv: Vec<CString>, env: Vec<CString>, detach: Detach, take_terminal: bool, renamed: &[&str], mask: SigSet) -> ExecPlan {
        let mut envp: Vec<Vec<u8>> = env.into_iter().map(CString::into_bytes_with_nul).collect();
        let mut pid_slots = Vec::new();
        for name in renamed {
            let prefix = [name.as_bytes(), b"="].concat();
            if let Some(i) = envp.iter().position(|e| e.starts_with(&prefix)) {
                // Room for any pid and the NUL, written by the child.
                envp[i] = [&prefix[..], &[0u8; 12]].concat();
                pid_slots.push((i, prefix.len()));
            }
        }
        ExecPlan { argv, envp, pid_slots, detach, take_terminal, mask, ids: None, no_new_privs: false }
    }

    /// The child switches to `ids` (if any) and sets no_new_privs (if asked) before exec.
    pub fn run_as(mut self, ids: Option<Ids>, no_new_privs: bool) -> ExecPlan {
        self.ids = ids;
        self.no_new_privs = no_new_privs;
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
    exits: &'a ChildExitCodes,
    /// The errno exec (or the step) failed with; 0 if it did not return.
    exec_errno: libc::c_int,
    /// Which of `STEPS` failed; 0 for exec itself.
    failed_step: usize,
}

/// Room for the child's few calls and musl's execvpe, which builds each PATH candidate (up to
/// PATH_MAX) on the stack.
const CHILD_STACK: usize = 64 * 1024;

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
    let pid_slots: Vec<*mut u8> = plan.pid_slots.iter().map(|&(i, at)| plan.envp[i][at..].as_mut_ptr()).collect();
    let envp: Vec<*const libc::c_char> =
        plan.envp.iter().map(|e| e.as_ptr().cast()).chain(std::iter::once(std::ptr::null())).collect();
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
        // The mask lastcall was started with (dispositions are lastcall's own, which are the
        // inherited ones, and exec resets handlers).
        let _ = set_signal_mask(libc::SIG_SETMASK, setup.mask);
        libc::execvpe(*setup.argv, setup.argv, setup.envp);
        let errno = *libc::__errno_location();
        setup.exec_errno = errno;
        // qemu-user runs a CLONE_VM|CLONE_VFORK clone as a plain fork, so there lastcall never
        // sees the errno written above, only this exit status: the personality's code for it (a
        // lookup in a static table, safe here).
        libc::_exit(setup.exits.for_exec(errno))
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

/// Whether `fd` is an open file descriptor.
pub fn fd_is_open(fd: RawFd) -> bool {
    // SAFETY: F_GETFD only reads the descriptor's flags; a closed one gives EBADF.
    unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
}

/// The soft limit on open fds.
pub fn fd_limit() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        // rlim_t is 32 bits on some targets.
        #[allow(clippy::unnecessary_cast)]
        let soft = limit.rlim_cur as u64;
        soft
    } else {
        1024
    }
}

/// Closes `fd`, which lastcall no longer needs and nothing of lastcall's owns.
pub fn close_fd(fd: RawFd) -> nix::Result<()> {
    // SAFETY: the caller passes an fd that no Rust object owns (one lastcall inherited).
    Errno::result(unsafe { libc::close(fd) }).map(drop)
}

/// Gives up lastcall's controlling terminal (TIOCNOTTY on stdin), so that the child, in a new
/// session, can make it its own: a terminal belongs to one session at a time. As the session
/// leader lastcall makes the kernel send SIGHUP and SIGCONT to the terminal's foreground group,
/// which is lastcall's alone at this point.
pub fn release_terminal() -> io::Result<()> {
    // SAFETY: TIOCNOTTY takes no argument.
    if unsafe { libc::ioctl(libc::STDIN_FILENO, libc::TIOCNOTTY) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Asks the kernel to send lastcall `sig` when its parent dies (tini's -p). Real-time signals
/// are allowed, which nix's wrapper cannot express.
pub fn set_parent_death_signal(sig: Sig) -> io::Result<()> {
    // SAFETY: PR_SET_PDEATHSIG takes a signal number by value.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, sig.0 as libc::c_ulong, 0, 0, 0) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// waitpid(-1, WNOHANG): the pid and raw status of a child that has exited, or None if every
/// child is still running.
#[inline(always)]
pub fn wait_any_exited() -> nix::Result<Option<(Pid, libc::c_int)>> {
    let mut status: libc::c_int = 0;
    let status_ptr = &mut status as *mut libc::c_int as usize;
    // SAFETY: wait4 writes the status into the int we own; no rusage is asked for (null).
    let pid = unsafe { direct(libc::SYS_wait4, [arg(-1), status_ptr, arg(libc::WNOHANG), 0]) }? as libc::pid_t;
    Ok((pid != 0).then(|| (Pid::from_raw(pid), status)))
}

/// Sleeps until one of the signals in `set` (all blocked) is pending and takes it off the pending
/// set: its number and the pid that sent it. This is the idle wait. Waking from it on another
/// core measured 0.2-0.3 µs faster than waking from read() on the signalfd, whose wait queue is
/// more memory that the sender's core writes and the woken core must fetch.
#[inline(always)]
pub fn wait_for_signal(set: &SigSet) -> nix::Result<(Sig, libc::pid_t)> {
    loop {
        match sigtimedwait(set, None) {
            Err(Errno::EINTR) => continue,
            Ok(Some(taken)) => return Ok(taken),
            Ok(None) => return Err(Errno::EAGAIN),
            Err(e) => return Err(e),
        }
    }
}

/// sigtimedwait: a pending signal of `set`, waiting at most `timeout` (None: for ever). libc
/// passes the set to the kernel whole, 32-34 included.
#[inline(always)]
fn sigtimedwait(set: &SigSet, timeout: Option<&libc::timespec>) -> nix::Result<Option<(Sig, libc::pid_t)>> {
    sigtimedwait_info(set, timeout).map(|taken| taken.map(|(sig, sender, _, _)| (sig, sender)))
}

/// Sleeps until one of the signals in `set` (all blocked) is pending and takes it: its number,
/// its sender (0 for none) and its si_code. The idle wait, made directly (`direct`); EINTR is
/// the caller's to retry.
#[inline(always)]
pub fn next_signal(set: &SigSet) -> nix::Result<(Sig, libc::pid_t, libc::c_int)> {
    let mut info = MaybeUninit::<libc::siginfo_t>::uninit();
    let set_ptr = set.as_ref() as *const libc::sigset_t as usize;
    // SAFETY: rt_sigtimedwait reads KERNEL_SIGSET_BYTES (within sigset_t) of the set we borrow
    // and writes a whole siginfo_t into ours; no timeout (null).
    let n = unsafe { direct(libc::SYS_rt_sigtimedwait, [set_ptr, info.as_mut_ptr() as usize, 0, KERNEL_SIGSET_BYTES]) }?;
    // SAFETY: the kernel copied a complete siginfo_t.
    let info = unsafe { info.assume_init_ref() };
    // SAFETY: si_pid reads its sender field, which is 0 for signals no process sent.
    Ok((Sig(n as libc::c_int), unsafe { info.si_pid() }, info.si_code))
}

/// Whether a signal taken with si_code `code` is the kernel's word that a socket of lastcall's
/// is readable: the socket signal, or SIGIO when the kernel's queue of those overflowed, with
/// a positive si_code, which no process can forge with kill or sigqueue.
#[inline(always)]
pub fn is_readiness(sig: Sig, code: libc::c_int) -> bool {
    // The si_code first: a signal a process sent (SI_USER, SI_QUEUE...) has none above 0, so
    // a forwarded signal's path stops at one comparison.
    code > 0 && (sig == socket_signal() || sig.0 == libc::SIGIO)
}

/// sigtimedwait, with the signal's si_code too, and the fd a kernel-raised socket signal names.
/// Without a timeout, the system call is made directly (the idle wait, and so every signal's
/// path); with one, through libc's wrapper, whose timespec follows the target's time ABI (32-bit
/// targets have two system calls for it).
#[inline(always)]
fn sigtimedwait_info(set: &SigSet, timeout: Option<&libc::timespec>) -> nix::Result<Option<(Sig, libc::pid_t, libc::c_int, RawFd)>> {
    let mut info = MaybeUninit::<libc::siginfo_t>::uninit();
    let taken = match timeout {
        None => return next_signal(set).map(|(sig, sender, code)| Some((sig, sender, code, -1))),
        Some(t) => {
            // SAFETY: sigtimedwait reads the set we borrow and the timeout, and writes a whole
            // siginfo_t into ours.
            Errno::result(unsafe { libc::sigtimedwait(set.as_ref(), info.as_mut_ptr(), t) })
        }
    };
    match taken {
        Err(Errno::EAGAIN) => Ok(None),
        Err(e) => Err(e),
        Ok(n) => {
            // SAFETY: the kernel copied a complete siginfo_t.
            let info = unsafe { info.assume_init_ref() };
            // SAFETY: siginfo_t starts as PollInfo does and is larger (128 bytes); for a
            // SIGPOLL-type signal the kernel filled si_band and si_fd, and for any other the
            // bytes are still initialised (read only for the socket signal).
            let fd = unsafe { (*(info as *const libc::siginfo_t as *const PollInfo)).fd };
            // SAFETY: si_pid reads its sender field, which is 0 for signals no process sent.
            Ok(Some((Sig(n), unsafe { info.si_pid() }, info.si_code, fd)))
        }
    }
}

/// The start of siginfo_t for a signal raised by a readable fd (si_band, si_fd), which the libc
/// crate has no accessor for. The same on every target lastcall ships for: three ints, then the
/// union, aligned as a long (offset 16 on 64-bit targets, 12 on 32-bit ones).
#[repr(C)]
struct PollInfo {
    signo: libc::c_int,
    errno: libc::c_int,
    code: libc::c_int,
    band: libc::c_long,
    fd: libc::c_int,
}

/// Which of lastcall's sockets a readiness signal says is readable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readable {
    /// The socket signal names its fd.
    Fd(RawFd),
    /// SIGIO: the kernel's queue of socket signals overflowed, and which sockets is lost.
    Any,
}

/// Like `wait_for_signal`, for the loop that also has deadlines and sockets: waits at most
/// `timeout` (None: for as long as it takes) and returns None when it ran out. Also says
/// whether the signal is the kernel's word that a socket of lastcall's is readable
/// (`is_readiness`), and which, rather than one someone sent for the app.
#[inline(always)]
pub fn wait_for_signal_until(set: &SigSet, timeout: Option<std::time::Duration>) -> nix::Result<Option<(Sig, libc::pid_t, Option<Readable>)>> {
    let ts = timeout.map(|t| libc::timespec { tv_sec: t.as_secs().min(i32::MAX as u64) as _, tv_nsec: t.subsec_nanos() as _ });
    loop {
        match sigtimedwait_info(set, ts.as_ref()) {
            Err(Errno::EINTR) => continue,
            Ok(Some((sig, sender, code, fd))) => {
                let readable = is_readiness(sig, code).then(|| if sig == socket_signal() { Readable::Fd(fd) } else { Readable::Any });
                return Ok(Some((sig, sender, readable)));
            }
            Ok(None) => return Ok(None),
            Err(e) => return Err(e),
        }
    }
}

/// Takes one of the signals in `set` (all blocked) off the pending set if there is one, without
/// waiting: sigtimedwait with a zero timeout.
#[inline(always)]
pub fn take_signal(set: &SigSet) -> nix::Result<Option<(Sig, libc::pid_t)>> {
    let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    loop {
        match sigtimedwait(set, Some(&zero)) {
            Err(Errno::EINTR) => continue,
            taken => return taken,
        }
    }
}

/// fcntl's F_SETSIG (linux/fcntl.h: 10 on x86, arm and their 64-bit kin), which the libc crate
/// leaves out for musl.
const F_SETSIG: libc::c_int = 10;

/// The signal lastcall's sockets raise when readable: SIGRTMIN+15 (50 on every target). A
/// real-time signal, because those queue: a SIGIO the kernel left pending would swallow a SIGIO
/// someone sent for the app (a standard signal pending twice is delivered once). One the app is
/// sent still reaches it: it carries a si_code of its sender's. Not the top ones: qemu-user 7.2
/// keeps the host's last real-time signals for itself, and measured there, 63 and 64 sent by a
/// process never arrived while 40 and 50 did (`docker run --platform` runs lastcall so).
#[inline(always)]
pub fn socket_signal() -> Sig {
    // A constant rather than musl's SIGRTMAX() (64 on every target lastcall ships for: see
    // KERNEL_SIGSET_BYTES), which would be a call out on every SIGCHLD's path.
    Sig(64 - 14)
}

/// Asks the kernel to send lastcall (`owner`) the socket signal whenever `fd` becomes readable
/// (O_ASYNC, F_SETOWN, F_SETSIG), unless that is already set. True if it was new: what arrived
/// before then raised no signal and must be read now.
pub fn signal_when_readable(fd: BorrowedFd<'_>, owner: Pid) -> io::Result<bool> {
    let fd = fd.as_raw_fd();
    // SAFETY: fcntl with integer arguments on an fd the caller borrows; no memory is passed.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        if flags & libc::O_ASYNC != 0 {
            return Ok(false);
        }
        if libc::fcntl(fd, libc::F_SETOWN, owner.as_raw()) < 0
            || libc::fcntl(fd, F_SETSIG, socket_signal().0) < 0
            || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_ASYNC) < 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(true)
}


/// A pidfd for `pid` (pidfd_open, Linux 5.3): a handle that keeps naming that very process, so
/// a signal sent through it can never reach another process that got the pid after it.
/// ENOSYS on older kernels (and under some seccomp filters: EPERM).
pub fn pidfd_open(pid: libc::pid_t) -> nix::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags by value and returns a new fd or -1.
    let fd = Errno::result(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0 as libc::c_uint) })?;
    // SAFETY: the kernel just gave us this fd (close-on-exec, as every pidfd is); we own it.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Sends `sig` to the process `pidfd` names; ESRCH once it has been reaped.
#[inline(always)]
pub fn pidfd_send_signal(pidfd: BorrowedFd<'_>, sig: Sig) -> nix::Result<()> {
    // SAFETY: integers only, and a null siginfo (the kernel fills it in as kill() would).
    // Made directly (`direct`): -c forwards every signal through it.
    unsafe { direct(libc::SYS_pidfd_send_signal, [arg(pidfd.as_raw_fd()), arg(sig.0), 0, 0]) }.map(drop)
}

/// The process group of `pid` (getpgid), without /proc.
pub fn process_group(pid: libc::pid_t) -> nix::Result<libc::pid_t> {
    // SAFETY: getpgid takes a pid by value.
    Errno::result(unsafe { libc::getpgid(pid) })
}

/// Whether TERM, INT or QUIT is pending (blocked, not yet taken): a stop already asked for.
pub fn termination_pending() -> bool {
    // SAFETY: sigset_t is plain integers; all zero is the empty set.
    let mut pending: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: sigpending writes the set we own; sigismember reads it.
    unsafe {
        libc::sigpending(&mut pending) == 0
            && [libc::SIGTERM, libc::SIGINT, libc::SIGQUIT].iter().any(|&sig| libc::sigismember(&pending, sig) == 1)
    }
}

/// lastcall's effective uid and gid: whom the files it makes belong to.
pub fn effective_ids() -> (u32, u32) {
    // SAFETY: geteuid and getegid take nothing and cannot fail.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// Whether lastcall already runs as `uid` and `gid`, real and effective alike.
pub fn runs_as(uid: u32, gid: u32) -> bool {
    // SAFETY: these four calls take nothing and cannot fail.
    unsafe { libc::getuid() == uid && libc::geteuid() == uid && libc::getgid() == gid && libc::getegid() == gid }
}

/// lastcall's supplementary groups (at most 65536, the kernel's NGROUPS_MAX).
pub fn supplementary_groups() -> Vec<u32> {
    let mut groups = vec![0 as libc::gid_t; 65536];
    // SAFETY: getgroups writes at most `len` gids into the buffer we own.
    let n = unsafe { libc::getgroups(groups.len() as libc::c_int, groups.as_mut_ptr()) };
    groups.truncate(usize::try_from(n).unwrap_or(0));
    groups
}

/// Runs `work` in a forked child and hands back its pid and the read end of a pipe carrying
/// what `work` returned: for work that may block past a deadline of the caller's (a DNS query
/// to a silent server), which the caller can abandon and kill instead of waiting for it, with
/// no thread. Only for a process with one thread, as the probe is: fork copies just the caller.
pub fn fork_with_pipe(work: impl FnOnce() -> Vec<u8>) -> io::Result<(libc::pid_t, std::fs::File)> {
    let (read, write) = nix::unistd::pipe()?;
    // SAFETY: the calling process has one thread (the probe's), so the child may allocate and
    // run any code: no lock can be held by a thread that fork left behind.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            drop(read);
            let mut out = std::fs::File::from(write);
            let code = match std::io::Write::write_all(&mut out, &work()) {
                Ok(()) => 0,
                Err(_) => 1,
            };
            // SAFETY: _exit ends the child without running the parent's exit handlers twice.
            unsafe { libc::_exit(code) }
        }
        pid => Ok((pid, std::fs::File::from(read))),
    }
}

/// 64 bits from the kernel's CSPRNG, for names a local attacker must not predict.
pub fn random_u64() -> io::Result<u64> {
    let mut bytes = [0u8; 8];
    let mut filled = 0;
    while filled < bytes.len() {
        // SAFETY: getrandom writes at most the given length into the buffer we own.
        let n = unsafe { libc::getrandom(bytes[filled..].as_mut_ptr().cast(), bytes.len() - filled, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        } else {
            filled += n as usize;
        }
    }
    Ok(u64::from_ne_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_signal_but_kill_and_stop_is_handled() {
        let handled: Vec<i32> = signal_members(&handled_set()).map(|s| s.0).collect();
        let expected: Vec<i32> = (1..=64).filter(|&n| n != libc::SIGKILL && n != libc::SIGSTOP).collect();
        assert_eq!(handled, expected);
    }

    #[test]
    fn the_kernels_signal_set_size_and_socket_signal_are_libcs() {
        assert_eq!(KERNEL_SIGSET_BYTES, (libc::SIGRTMAX() as usize + 1) / 8);
        assert_eq!(socket_signal(), Sig(libc::SIGRTMAX() - 14));
    }

    #[test]
    fn a_pidfd_signals_its_process_and_no_other() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id() as libc::pid_t;
        let fd = match pidfd_open(pid) {
            Ok(fd) => fd,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                assert_eq!(e, Errno::ENOSYS, "pidfd_open");
                return;
            }
        };
        assert_eq!(pidfd_send_signal(std::os::fd::AsFd::as_fd(&fd), Sig(0)), Ok(()));
        assert_eq!(pidfd_send_signal(std::os::fd::AsFd::as_fd(&fd), Sig::KILL), Ok(()));
        child.wait().unwrap();
        // Reaped: whatever has the pid now, the pidfd does not name it.
        assert_eq!(pidfd_send_signal(std::os::fd::AsFd::as_fd(&fd), Sig(0)), Err(Errno::ESRCH));
    }

    #[test]
    fn kill_reports_the_kernels_answer() {
        let me = std::process::id() as libc::pid_t;
        assert!(kill(me, Sig(0)).is_ok());
        assert_eq!(kill(me, Sig(99)), Err(Errno::EINVAL));
        assert_eq!(kill(i32::MAX, Sig(0)), Err(Errno::ESRCH));
    }

    #[test]
    fn wait_for_signal_takes_a_pending_signal_and_its_sender() {
        use nix::sys::signal::{pthread_sigmask, raise, SigmaskHow, Signal};
        // Blocked in this test's thread only, so that raise() leaves it pending right here.
        let set = SigSet::from(Signal::SIGUSR2);
        pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), None).unwrap();
        raise(Signal::SIGUSR2).unwrap();
        let taken = wait_for_signal(&set);
        pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&set), None).unwrap();
        assert_eq!(taken.unwrap(), (Sig(libc::SIGUSR2), std::process::id() as libc::pid_t));
    }

    #[test]
    fn signal_sets_hold_every_number_musl_leaves_out() {
        let all: Vec<Sig> = (1..=64).map(Sig).collect();
        let set = signal_set(all.iter().copied());
        assert_eq!(signal_members(&set).collect::<Vec<_>>(), all);
        for sig in [Sig(32), Sig(33), Sig(34), Sig(64)] {
            assert_eq!(signal_members(&signal_set([sig])).collect::<Vec<_>>(), vec![sig]);
        }
        // What libc itself reads: the members it knows, at the bits it expects.
        for n in [1, 15, 31, 35, 63, 64] {
            // SAFETY: sigismember reads the set we borrow.
            assert_eq!(unsafe { libc::sigismember(signal_set([Sig(n)]).as_ref(), n) }, 1, "{n}");
            assert_eq!(unsafe { libc::sigismember(signal_set([Sig(n + 1)]).as_ref(), n) }, 0, "{n}");
        }
        assert_eq!(signal_members(&signal_set([Sig(0), Sig(-3), Sig(65_000)])).count(), 0);
    }

    #[test]
    fn the_mask_is_set_and_read_back_whole() {
        // This test's thread only; 33 is one that musl's own sigprocmask would hide.
        let extra = signal_set([Sig(33), Sig(libc::SIGUSR1)]);
        let before = set_signal_mask(libc::SIG_BLOCK, &extra).unwrap();
        let during = set_signal_mask(libc::SIG_SETMASK, &before).unwrap();
        let during: Vec<Sig> = signal_members(&during).collect();
        assert!(during.contains(&Sig(33)) && during.contains(&Sig(libc::SIGUSR1)), "{during:?}");
    }

    #[test]
    fn a_pending_signal_is_taken_without_waiting_and_a_sigio_sent_is_not_the_kernels() {
        let set = signal_set([Sig(libc::SIGWINCH), Sig(libc::SIGIO), socket_signal()]);
        let before = set_signal_mask(libc::SIG_BLOCK, &set).unwrap();
        let now = Some(std::time::Duration::ZERO);
        assert_eq!(wait_for_signal_until(&set, now), Ok(None));
        // To this very thread, where the signals are blocked.
        nix::sys::signal::raise(nix::sys::signal::Signal::SIGWINCH).unwrap();
        let winch = wait_for_signal_until(&set, now).unwrap();
        // A SIGIO a process sent (si_code SI_TKILL) is for the app, not a readable socket.
        nix::sys::signal::raise(nix::sys::signal::Signal::SIGIO).unwrap();
        let io = wait_for_signal_until(&set, now).unwrap();
        // As is the socket signal that a process sent (to this thread, where it is blocked).
        // SAFETY: gettid takes nothing.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::pid_t;
        // SAFETY: tgkill takes plain integers.
        unsafe { libc::syscall(libc::SYS_tgkill, std::process::id() as libc::pid_t, tid, socket_signal().0) };
        let rt = wait_for_signal_until(&set, now).unwrap();
        set_signal_mask(libc::SIG_SETMASK, &before).unwrap();
        let me = std::process::id() as libc::pid_t;
        assert_eq!(winch, Some((Sig(libc::SIGWINCH), me, None)));
        assert_eq!(io, Some((Sig(libc::SIGIO), me, None)));
        assert_eq!(rt, Some((socket_signal(), me, None)));
    }

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
        let env = || ["A=1", "LISTEN_PID=99", "WATCHDOG_PID=99"].map(|e| CString::new(e).unwrap()).to_vec();
        let plan = ExecPlan::new(vec![], env(), Detach::Group, false, &["WATCHDOG_PID"], signal_set([]));
        assert_eq!(plan.pid_slots, vec![(2, "WATCHDOG_PID=".len())]);
        assert_eq!(plan.envp[2].len(), "WATCHDOG_PID=".len() + 12);
        assert_eq!(plan.envp[1], b"LISTEN_PID=99\0");
        let plan = ExecPlan::new(vec![], env(), Detach::Group, false, &PID_VARIABLES, signal_set([]));
        assert_eq!(plan.pid_slots, vec![(1, "LISTEN_PID=".len()), (2, "WATCHDOG_PID=".len())]);
        let plan = ExecPlan::new(vec![], env(), Detach::Group, false, &[], signal_set([]));
        assert!(plan.pid_slots.is_empty());
        assert_eq!(plan.envp[2], b"WATCHDOG_PID=99\0");
    }
}
