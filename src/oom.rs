//! The kernel's OOM-kill counter for lastcall's memory cgroup: whether a process that died of
//! SIGKILL was killed by the OOM killer, and the limit it ran into.
//!
//! A SIGKILL death looks the same whoever sent it (the OOM killer, `docker kill`, lastcall's own
//! grace), so the kernel's count is the only witness: `oom_kill` in `memory.events` (cgroup v2)
//! or in `memory.oom_control` (cgroup v1). The files are opened once, at start-up, and read
//! with pread only after a reap found a SIGKILL death: no polling, no path walk at that moment.
//!
//! Limit: with `memory.oom.group=1` (Kubernetes 1.28+ on cgroup v2) the kernel kills the whole
//! cgroup at once, lastcall included, and nobody is left to report. The counter is lastcall's
//! own cgroup's; an OOM kill in an ancestor's limit is counted there (on v2 `memory.events`
//! counts the kills of descendants too, so one in a child cgroup is seen).
//!
//! May import: procfs (lastcall's own cgroups).

use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::procfs;

/// Where the memory controller is mounted: v1's hierarchy, then the v2 tree (a hybrid host's
/// v2 tree at /sys/fs/cgroup/unified has no memory controller while v1 has it).
const V1_ROOT: &str = "/sys/fs/cgroup/memory";
const V2_ROOT: &str = "/sys/fs/cgroup";

pub struct OomCounter {
    counter: File,
    /// The limit's file, opened only when an OOM kill is named: one open less at start-up.
    limit: PathBuf,
    /// The count last read.
    seen: u64,
}

impl OomCounter {
    /// Opens lastcall's own cgroup's counter, if there is one to read.
    pub fn open() -> Option<OomCounter> {
        procfs::own_cgroups(|cgroups| {
            let (v1, v2) = own_paths(cgroups);
            let tries = [
                v1.map(|p| (V1_ROOT, p, "memory.oom_control", "memory.limit_in_bytes")),
                v2.map(|p| (V2_ROOT, p, "memory.events", "memory.max")),
            ];
            for (root, path, events, limit) in tries.into_iter().flatten() {
                // The path /proc shows is the host's when lastcall is in a container whose cgroup
                // is mounted as the root of its view (Docker on v1, a private cgroup namespace
                // shows "/" anyway): the mount's root is then lastcall's own cgroup.
                for dir in [Path::new(root).join(path.trim_start_matches('/')), PathBuf::from(root)] {
                    if let Some(counter) = open_nofollow(&dir.join(events)) {
                        let mut oom = OomCounter { counter, limit: dir.join(limit), seen: 0 };
                        oom.seen = oom.read_count()?;
                        return Some(oom);
                    }
                }
            }
            None
        })
    }

    /// How many OOM kills since the last call (one pread).
    pub fn new_kills(&mut self) -> u64 {
        let Some(now) = self.read_count() else { return 0 };
        let new = now.saturating_sub(self.seen);
        self.seen = now;
        new
    }

    fn read_count(&self) -> Option<u64> {
        let mut buf = [0u8; 512];
        let n = self.counter.read_at(&mut buf, 0).ok()?;
        oom_kill_count(&buf[..n])
    }

    /// The memory limit in bytes, if one is set (one pread).
    pub fn limit(&self) -> Option<u64> {
        let mut buf = [0u8; 32];
        let n = open_nofollow(&self.limit)?.read_at(&mut buf, 0).ok()?;
        parse_limit(&buf[..n])
    }
}

fn open_nofollow(path: &Path) -> Option<File> {
    std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path).ok()
}

/// lastcall's cgroup path in the v1 memory hierarchy and in the v2 tree, from /proc/self/cgroup.
fn own_paths(text: &[u8]) -> (Option<&str>, Option<&str>) {
    let (mut v1, mut v2) = (None, None);
    for line in procfs::cgroup_lines(text) {
        let Ok(path) = std::str::from_utf8(line.path) else { continue };
        if path.split('/').any(|c| c == "..") {
            continue;
        }
        if line.unified {
            v2 = Some(path);
        } else if line.controllers.split(|&b| b == b',').any(|c| c == b"memory") {
            v1 = Some(path);
        }
    }
    (v1, v2)
}

/// `oom_kill N` from memory.events or memory.oom_control.
fn oom_kill_count(text: &[u8]) -> Option<u64> {
    text.split(|&b| b == b'\n').find_map(|line| {
        let rest = line.strip_prefix(b"oom_kill ")?;
        std::str::from_utf8(rest).ok()?.trim().parse().ok()
    })
}

/// A limit file's bytes: v2's "max" and v1's near-2^63 page-rounded "unlimited" are no limit.
fn parse_limit(text: &[u8]) -> Option<u64> {
    let n: u64 = std::str::from_utf8(text).ok()?.trim().parse().ok()?;
    (n < 1 << 62).then_some(n)
}

/// A limit as people write it: `64 MiB`, `2 GiB`, or bytes when it is not a round number.
pub fn format_bytes(n: u64) -> String {
    const KIB: u64 = 1024;
    match n {
        n if n >= KIB * KIB * KIB && n % (KIB * KIB * KIB) == 0 => format!("{} GiB", n / (KIB * KIB * KIB)),
        n if n >= KIB * KIB && n % (KIB * KIB) == 0 => format!("{} MiB", n / (KIB * KIB)),
        // Tenths, rounded to nearest, in integers: no float formatting in the binary.
        n if n >= KIB * KIB => {
            let tenths = (u128::from(n) * 10 + u128::from(KIB * KIB / 2)) / u128::from(KIB * KIB);
            format!("{}.{} MiB", tenths / 10, tenths % 10)
        }
        n => format!("{n} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_in_both_versions() {
        assert_eq!(oom_kill_count(b"oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"), Some(3));
        assert_eq!(oom_kill_count(b"low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n"), Some(1));
        assert_eq!(oom_kill_count(b"oom_kill_disable 0\nunder_oom 0\n"), None);
    }

    #[test]
    fn own_cgroup_paths() {
        let v1 = b"9:name=systemd:/\n4:memory:/process_api/1d25\n3:cpuset:/\n0::/\n";
        assert_eq!(own_paths(v1), (Some("/process_api/1d25"), Some("/")));
        assert_eq!(own_paths(b"0::/kubepods/pod1/c1\n"), (None, Some("/kubepods/pod1/c1")));
        assert_eq!(own_paths(b"5:cpu,memory:/docker/abc\n"), (Some("/docker/abc"), None));
        assert_eq!(own_paths(b"0::/../escape\n"), (None, None));
    }

    #[test]
    fn limits() {
        assert_eq!(parse_limit(b"67108864\n"), Some(64 << 20));
        assert_eq!(parse_limit(b"max\n"), None);
        assert_eq!(parse_limit(b"9223372036854771712\n"), None);
        assert_eq!(format_bytes(64 << 20), "64 MiB");
        assert_eq!(format_bytes(2 << 30), "2 GiB");
        assert_eq!(format_bytes(1536 << 10), "1.5 MiB");
        assert_eq!(format_bytes(4096), "4096 bytes");
    }
}
