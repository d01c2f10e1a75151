//! The signal calls: sets as the kernel reads them, the mask, the dispositions lastcall starts
//! and leaves with, and the waits and sends on the hot paths (made directly: `super::direct`).
//!
//! May import: signals.

use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use nix::errno::Errno;
use nix::sys::signal::SigSet;

use crate::signals::Sig;

use super::{arg, direct};

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

/// Sleeps until one of the signals in `set` (all blocked) is pending and takes it off the pending
/// set: its number and the pid that sent it. This is the idle wait. It wakes sooner on another
/// core than read() on a signalfd, whose wait queue is more memory that the sender's core writes
/// and the woken core must fetch (docs/benchmark.md).
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
    sigtimedwait_info(set, timeout).map(|taken| taken.map(|(sig, sender, _)| (sig, sender)))
}

/// The idle wait's taker: sleeps until one of the signals in `set` (all blocked) is pending and
/// takes it (`next`, made directly: `direct`), keeping its siginfo for the few paths that ask
/// who sent it and why (`sender`, `code`). One per wait loop, so a signal's path writes no more
/// than the kernel does.
pub struct Taker {
    info: libc::siginfo_t,
}

impl Taker {
    #[inline(always)]
    pub fn new() -> Taker {
        // SAFETY: siginfo_t is plain integers; all zero is a valid value of it.
        Taker { info: unsafe { std::mem::zeroed() } }
    }

    /// The next signal's number; EINTR is the caller's to retry.
    #[inline(always)]
    pub fn next(&mut self, set: &SigSet) -> nix::Result<usize> {
        let set_ptr = set.as_ref() as *const libc::sigset_t as usize;
        let info_ptr = &mut self.info as *mut libc::siginfo_t as usize;
        // SAFETY: rt_sigtimedwait reads KERNEL_SIGSET_BYTES (within sigset_t) of the set we
        // borrow and writes a whole siginfo_t into ours; no timeout (null).
        unsafe { direct(libc::SYS_rt_sigtimedwait, [set_ptr, info_ptr, 0, KERNEL_SIGSET_BYTES]) }
    }

    /// The last signal's sender: 0 for signals no process sent.
    #[inline(always)]
    pub fn sender(&self) -> libc::pid_t {
        // SAFETY: si_pid reads its sender field, which the kernel zeroes where it has none.
        unsafe { self.info.si_pid() }
    }

    /// The last signal's si_code.
    #[inline(always)]
    pub fn code(&self) -> libc::c_int {
        self.info.si_code
    }
}

impl Default for Taker {
    fn default() -> Taker {
        Taker::new()
    }
}

/// Where the app's signals go on the hot path, as the system call that sends them: kill() to a
/// process or a process group, or pidfd_send_signal() to a pidfd. Both take (target, signal)
/// and then arguments that kill() ignores and pidfd_send_signal() needs to be 0, so one call
/// sequence serves every set-up, with no branch on which it is.
#[derive(Clone, Copy, Debug)]
pub struct SignalTarget {
    number: libc::c_long,
    target: usize,
}

impl SignalTarget {
    pub fn process(pid: libc::pid_t) -> SignalTarget {
        SignalTarget { number: libc::SYS_kill, target: arg(pid) }
    }

    pub fn group(pgid: libc::pid_t) -> SignalTarget {
        SignalTarget { number: libc::SYS_kill, target: arg(pgid.wrapping_neg()) }
    }

    /// The fd is only a number here: whoever closes it stops using this target first.
    pub fn pidfd(fd: BorrowedFd<'_>) -> SignalTarget {
        SignalTarget { number: libc::SYS_pidfd_send_signal, target: arg(fd.as_raw_fd()) }
    }

    /// Sends signal number `sig`; whether the kernel took it.
    #[inline(always)]
    pub fn send(&self, sig: libc::c_int) -> bool {
        // SAFETY: integers only (for pidfd_send_signal, a null siginfo and no flags).
        unsafe { direct(self.number, [self.target, arg(sig), 0, 0]) }.is_ok()
    }
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

/// sigtimedwait, with the signal's si_code too. Without a timeout, the system call is made
/// directly (the idle wait, and so every signal's path); with one, through libc's wrapper, whose
/// timespec follows the target's time ABI (32-bit targets have two system calls for it).
#[inline(always)]
fn sigtimedwait_info(set: &SigSet, timeout: Option<&libc::timespec>) -> nix::Result<Option<(Sig, libc::pid_t, libc::c_int)>> {
    let mut info = MaybeUninit::<libc::siginfo_t>::uninit();
    let taken = match timeout {
        None => {
            let mut taker = Taker::new();
            let n = taker.next(set)?;
            return Ok(Some((Sig(n as libc::c_int), taker.sender(), taker.code())));
        }
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
            // SAFETY: si_pid reads its sender field, which is 0 for signals no process sent.
            Ok(Some((Sig(n), unsafe { info.si_pid() }, info.si_code)))
        }
    }
}

/// Like `wait_for_signal`, for the loop that also has deadlines and sockets: waits at most
/// `timeout` (None: for as long as it takes) and returns None when it ran out. Also says
/// whether the signal is the kernel's word that a socket of lastcall's is readable
/// (`is_readiness`) rather than one someone sent for the app. Which socket is not asked of the
/// signal (si_fd): qemu-user, which runs lastcall under `docker run --platform`, passes a
/// real-time signal's fields on as sigqueue's, and si_fd arrived as 0 on armv7 and s390x.
#[inline(always)]
pub fn wait_for_signal_until(set: &SigSet, timeout: Option<std::time::Duration>) -> nix::Result<Option<(Sig, libc::pid_t, bool)>> {
    let ts = timeout.map(|t| libc::timespec { tv_sec: t.as_secs().min(i32::MAX as u64) as _, tv_nsec: t.subsec_nanos() as _ });
    loop {
        match sigtimedwait_info(set, ts.as_ref()) {
            Err(Errno::EINTR) => continue,
            Ok(Some((sig, sender, code))) => return Ok(Some((sig, sender, is_readiness(sig, code)))),
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

/// Sends `sig` to the process `pidfd` names; ESRCH once it has been reaped.
#[inline(always)]
pub fn pidfd_send_signal(pidfd: BorrowedFd<'_>, sig: Sig) -> nix::Result<()> {
    // SAFETY: integers only, and a null siginfo (the kernel fills it in as kill() would).
    // Made directly (`direct`): -c forwards every signal through it.
    unsafe { direct(libc::SYS_pidfd_send_signal, [arg(pidfd.as_raw_fd()), arg(sig.0), 0, 0]) }.map(drop)
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
        assert_eq!(winch, Some((Sig(libc::SIGWINCH), me, false)));
        assert_eq!(io, Some((Sig(libc::SIGIO), me, false)));
        assert_eq!(rt, Some((socket_signal(), me, false)));
    }
}
