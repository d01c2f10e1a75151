//! Sender trust: whether the pid the kernel stamped on a datagram is one of the service's
//! processes, that is lastcall's descendant (a walk up the parent chain, with verdicts cached by
//! pid and start time) or in lastcall's cgroup when that is not the root one.
//!
//! May import: procfs.

use log::warn;

use crate::procfs;

/// Who may speak for the service, with what the checks keep from one message to the next.
pub(super) struct Trust {
    /// Who descends from lastcall, with verdicts cached.
    lineage: Lineage,
    /// lastcall's cgroup (v2), unless it is the root cgroup: `own_cgroup`.
    cgroup: Option<Option<Vec<u8>>>,
    /// The /proc reads' buffer; empty until the first message.
    buf: Vec<u8>,
    /// Whether lastcall has said that without /proc no sender can be checked (once is enough).
    pub(super) blind: bool,
    /// The main child's pid during the pass that follows its reap (`relay_last_words`).
    pub(super) just_reaped: Option<libc::pid_t>,
}

impl Trust {
    pub(super) fn new() -> Trust {
        let me = std::process::id() as libc::pid_t;
        Trust { lineage: Lineage::new(me), cgroup: None, buf: Vec::new(), blind: false, just_reaped: None }
    }

    /// The buffer, at the first message.
    #[cold]
    pub(super) fn allocate(&mut self) {
        self.buf = vec![0; 4096];
    }

    /// Whether `pid` is one of the service's processes: lastcall's descendant, or in its cgroup.
    /// Pid 0 is a sender in a PID namespace we cannot see into.
    pub(super) fn speaks_for_the_service(&mut self, pid: libc::pid_t) -> bool {
        if pid <= 0 {
            return false;
        }
        if self.just_reaped == Some(pid) {
            return true;
        }
        match self.lineage.descends(pid, &mut self.buf) {
            Some(true) => return true,
            Some(false) => {}
            None if self.blind => {}
            None => {
                if !procfs::shows_self() {
                    self.blind = true;
                    warn!("/proc cannot be read: the notify relay cannot tell the service's processes from others, and drops every message");
                }
            }
        }
        let Some(ours) = own_cgroup(&mut self.cgroup) else { return false };
        procfs::unified_cgroup(pid, &mut self.buf).is_some_and(|theirs| within(theirs, ours))
    }
}

/// How far up the parent chain the sender check looks. Deeper than any real service's tree; a
/// sender further down is not the service's, as far as the relay can tell, and its message goes.
const MAX_DEPTH: usize = 256;

/// Verdicts kept, by pid and start time (which together name one process, whatever reuses the
/// pid later): a sender, or one of its ancestors, seen before costs one /proc read, not a walk.
const VERDICTS: usize = 256;

#[derive(Clone, Copy, Default)]
struct Verdict {
    pid: libc::pid_t,
    start: u64,
    descends: bool,
}

/// Which processes descend from lastcall (`me`), remembered by pid and start time.
struct Lineage {
    me: libc::pid_t,
    /// Direct-mapped by pid; allocated at the first sender.
    verdicts: Vec<Verdict>,
    /// The walk in progress, kept to reuse the allocation.
    chain: Vec<(libc::pid_t, u64)>,
}

impl Lineage {
    fn new(me: libc::pid_t) -> Lineage {
        Lineage { me, verdicts: Vec::new(), chain: Vec::new() }
    }

    /// Whether `pid` descends from lastcall, following the parent chain in /proc up to
    /// `MAX_DEPTH` steps, and stopping at the first process whose verdict is known. Every
    /// process walked gets the verdict (they share the chain above them). None when the sender
    /// cannot be read at all (gone, or no /proc).
    fn descends(&mut self, pid: libc::pid_t, buf: &mut [u8]) -> Option<bool> {
        if self.verdicts.is_empty() {
            self.verdicts = vec![Verdict::default(); VERDICTS];
            self.chain = Vec::with_capacity(MAX_DEPTH);
        }
        self.chain.clear();
        let mut pid = pid;
        let verdict = loop {
            if pid == self.me {
                break true;
            }
            // 0: the parent is outside our PID namespace; 1 (when we are not 1): the top.
            if pid <= 1 || self.chain.len() >= MAX_DEPTH {
                break false;
            }
            let Some((parent, start)) = procfs::parent_and_start(pid, buf) else {
                if self.chain.is_empty() {
                    return None;
                }
                break false;
            };
            let known = self.verdicts[slot(pid)];
            if known.pid == pid && known.start == start {
                break known.descends;
            }
            self.chain.push((pid, start));
            pid = parent;
        };
        for &(pid, start) in &self.chain {
            self.verdicts[slot(pid)] = Verdict { pid, start, descends: verdict };
        }
        Some(verdict)
    }
}

fn slot(pid: libc::pid_t) -> usize {
    pid.unsigned_abs() as usize % VERDICTS
}

/// lastcall's cgroup (v2), None for the root cgroup, read the first time a sender is not
/// lastcall's descendant, which is rare: the app and its children are. Reading it then, not at
/// start-up, widens nothing beyond the service: moving lastcall takes write access to the
/// `cgroup.procs` of the cgroups above it, which a unit's app (even with `Delegate=`) has only
/// inside the unit's own cgroup, the one systemd itself trusts with NotifyAccess=all; a move to
/// the root cgroup turns the cgroup check off. A failed read (out of fds, say) is tried again
/// at the next such sender.
fn own_cgroup(cached: &mut Option<Option<Vec<u8>>>) -> Option<&[u8]> {
    if cached.is_none() {
        let found = procfs::own_cgroups(|text| Some(procfs::unified_path(text).filter(|c| *c != b"/").map(<[u8]>::to_vec)))?;
        *cached = Some(found);
    }
    cached.as_ref().and_then(|c| c.as_deref())
}

/// Whether cgroup `theirs` is `ours` or below it.
fn within(theirs: &[u8], ours: &[u8]) -> bool {
    theirs.strip_prefix(ours).is_some_and(|rest| rest.is_empty() || rest.starts_with(b"/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroups_within() {
        assert!(within(b"/system.slice/app.service", b"/system.slice/app.service"));
        assert!(within(b"/system.slice/app.service/sub", b"/system.slice/app.service"));
        assert!(!within(b"/system.slice/app.service2", b"/system.slice/app.service"));
        assert!(!within(b"/system.slice", b"/system.slice/app.service"));
    }

    #[test]
    fn our_own_process_tree() {
        let me = std::process::id() as libc::pid_t;
        let relay = Lineage::new;
        let buf = &mut vec![0; 4096];
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let kid = child.id() as libc::pid_t;
        let mut mine = relay(me);
        assert_eq!(mine.descends(kid, buf), Some(true));
        // Cached now: the same answer without a walk.
        assert!(mine.verdicts[slot(kid)].pid == kid && mine.verdicts[slot(kid)].descends);
        assert_eq!(mine.descends(kid, buf), Some(true));
        assert_eq!(relay(kid).descends(me, buf), Some(false));
        assert!(me == 1 || relay(me).descends(1, buf) == Some(false));
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(relay(me).descends(kid, buf), None, "gone");
    }
}
