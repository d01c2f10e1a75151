//! `--user USER[:GROUP]`: who the app runs as. Owns the value's syntax, lastcall's own reader of
//! the image's `/etc/passwd` and `/etc/group` (no NSS, no libc `getpwnam`: a static binary in a
//! scratch image has neither, and the image's files are the only truth there), and the
//! resolution to the ids and environment the child switches to. The switch itself (setgroups,
//! setgid, setuid, in that order, in the child before exec) is `sys::spawn`'s.
//!
//! | given            | uid            | gid                          | supplementary groups          | HOME, USER, LOGNAME    |
//! |------------------|----------------|------------------------------|-------------------------------|------------------------|
//! | `name`           | passwd         | passwd                       | initgroups: gid + /etc/group member lists | passwd; name  |
//! | `name:group`     | passwd         | group (name or number)       | initgroups with that group    | passwd; name           |
//! | `1000`           | 1000           | passwd's by uid, else 0 (as `docker run --user`) | only the gid | passwd by uid or `/`; its name if any |
//! | `1000:group`     | 1000           | group                        | only the gid                  | as above               |
//!
//! The files are read whole, at most `MAX_FILE` bytes, from a non-blocking open that refuses
//! anything but a regular file (a FIFO there would otherwise hang start-up with signals
//! blocked). A line that is not a well-formed entry (missing fields, an id that is not a decimal
//! number below 2^32-1) is skipped, as glibc's files backend skips it. The first matching entry
//! wins. Lines are scanned field by field, without a copy: whatever the file's shape (one line
//! of colons, one group of millions of members), the memory is the file's size and a little.
//!
//! May import: error, procfs (`ngroups_max`), sys (`open_regular`).

use std::ffi::OsString;
use std::fmt;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::procfs;
use crate::sys;
use crate::error::{Error, OneLine};

/// Larger files are refused: no real passwd is anywhere near, and lastcall must not read
/// without bound before the app starts.
pub const MAX_FILE: u64 = 16 * 1024 * 1024;
/// The longest name accepted on the command line (Linux's own tools stop at 32; NSS at 256).
const MAX_NAME: usize = 256;
/// The kernel's limit on one argument or variable, its NUL included (MAX_ARG_STRLEN): a longer
/// HOME would make exec fail with E2BIG, which reads as the command's fault.
pub const MAX_VARIABLE: usize = 32 * 4096;
/// The kernel's NGROUPS_MAX, when /proc does not say.
const NGROUPS_MAX: usize = 65536;

/// A user or a group as given: a name to look up, or a number that needs no file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Who {
    Name(String),
    Id(u32),
}

/// `--user`'s value, checked for syntax only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    pub user: Who,
    pub group: Option<Who>,
    /// Where the value came from (`--user` or `LASTCALL_USER`), for the errors that refuse it.
    pub from: &'static str,
}

impl Spec {
    /// The same value, as given by `from`.
    pub fn given_by(self, from: &'static str) -> Spec {
        Spec { from, ..self }
    }
}

impl fmt::Display for Who {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Who::Name(n) => write!(f, "{}", OneLine(n)),
            Who::Id(id) => write!(f, "{id}"),
        }
    }
}

/// `USER[:GROUP]`: names or decimal ids, as given by `--user` until `Spec::given_by` says
/// otherwise. A bad value is a usage error (exit 2).
pub fn parse_spec(text: &str) -> Result<Spec, String> {
    if text.matches(':').count() > 1 {
        return Err("expected USER[:GROUP], with one ':' at most".into());
    }
    let (user, group) = match text.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (text, None),
    };
    let user = parse_who(user, "USER")?;
    let group = group.map(|g| parse_who(g, "GROUP")).transpose()?;
    Ok(Spec { user, group, from: "--user" })
}

fn parse_who(text: &str, what: &str) -> Result<Who, String> {
    if text.is_empty() {
        return Err(format!("expected USER[:GROUP], with a non-empty {what}"));
    }
    if text.len() > MAX_NAME {
        return Err(format!("{what} is longer than {MAX_NAME} bytes"));
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        // (uid_t)-1 means "leave unchanged" to the kernel: never an id to switch to.
        return match text.parse::<u32>() {
            Ok(id) if id != u32::MAX => Ok(Who::Id(id)),
            _ => Err(format!("{what} id {text} is out of range (0 to 4294967294)")),
        };
    }
    if text.chars().any(|c| c.is_control() || c.is_whitespace() || c == ':' || c == ',' || c == '/') {
        return Err(format!("{what} holds a character no user or group name has"));
    }
    Ok(Who::Name(text.to_string()))
}

/// What the app runs as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    pub uid: u32,
    pub gid: u32,
    /// setgroups' list, deduplicated, the gid first.
    pub groups: Vec<u32>,
    pub home: PathBuf,
    /// The passwd name, when the uid has an entry: the app's USER and LOGNAME.
    pub name: Option<String>,
}

impl Credentials {
    /// The variables the app gets: HOME always (the inherited one is lastcall's user's), USER
    /// and LOGNAME unless already set for the app (`is_set`), as setpriv --reset-env and gosu
    /// would have them. An empty HOME is never given: `/` stands in.
    pub fn env(&self, is_set: impl Fn(&str) -> bool) -> Vec<(String, OsString)> {
        let home = if self.home.as_os_str().is_empty() { Path::new("/") } else { self.home.as_path() };
        let mut env = vec![("HOME".to_string(), OsString::from(home.as_os_str()))];
        if let Some(name) = &self.name {
            for var in ["USER", "LOGNAME"] {
                if !is_set(var) {
                    env.push((var.to_string(), name.into()));
                }
            }
        }
        env
    }
}

/// One passwd entry, as much as lastcall needs, borrowed from the file's text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PasswdEntry<'a> {
    pub name: &'a str,
    pub uid: u32,
    pub gid: u32,
    pub home: &'a str,
}

/// One group entry, borrowed from the file's text; its members are read only as asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupEntry<'a> {
    pub name: &'a str,
    pub gid: u32,
    members: &'a str,
}

impl<'a> GroupEntry<'a> {
    /// The member list's names, the empty ones (`,,`) skipped.
    pub fn members(&self) -> impl Iterator<Item = &'a str> {
        self.members.split(',').filter(|m| !m.is_empty())
    }

    pub fn has_member(&self, name: &str) -> bool {
        self.members().any(|m| m == name)
    }
}

/// The well-formed entries of a passwd file: `name:password:uid:gid:gecos:home:shell`.
pub fn parse_passwd(text: &[u8]) -> impl Iterator<Item = PasswdEntry<'_>> + '_ {
    lines(text).filter_map(decoded).filter_map(passwd_entry)
}

/// The first passwd entry named `name`: `parse_passwd(text).find(..)`, with only the lines
/// that begin `name:` decoded and parsed.
fn passwd_named<'a>(text: &'a [u8], name: &str) -> Option<PasswdEntry<'a>> {
    lines(text).filter(|line| begins_with_field(line, name)).filter_map(decoded).filter_map(passwd_entry).find(|e| e.name == name)
}

fn passwd_entry(line: &str) -> Option<PasswdEntry<'_>> {
    // Seven fields exactly: the scan stops at the eighth, however many colons follow.
    let mut f = line.split(':');
    let [name, _, uid, gid, _, home, _] = [f.next()?, f.next()?, f.next()?, f.next()?, f.next()?, f.next()?, f.next()?];
    if f.next().is_some() || !valid_name(name) {
        return None;
    }
    Some(PasswdEntry { name, uid: parse_id(uid)?, gid: parse_id(gid)?, home })
}

/// The well-formed entries of a group file: `name:password:gid:member,member`.
pub fn parse_group(text: &[u8]) -> impl Iterator<Item = GroupEntry<'_>> + '_ {
    lines(text).filter_map(decoded).filter_map(group_entry)
}

/// The first group entry named `name`, as `passwd_named` finds a user's.
fn group_named<'a>(text: &'a [u8], name: &str) -> Option<GroupEntry<'a>> {
    lines(text).filter(|line| begins_with_field(line, name)).filter_map(decoded).filter_map(group_entry).find(|g| g.name == name)
}

fn group_entry(line: &str) -> Option<GroupEntry<'_>> {
    let mut f = line.split(':');
    let [name, _, gid, members] = [f.next()?, f.next()?, f.next()?, f.next()?];
    if f.next().is_some() || !valid_name(name) {
        return None;
    }
    Some(GroupEntry { name, gid: parse_id(gid)?, members })
}

/// The lines that may be entries: not empty, and not NIS compat lines (`+`, `-`) or comments.
/// Looked at as bytes, so that a look-up decodes and parses only the lines it may want.
fn lines(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    text.split(|&b| b == b'\n').filter(|l| !l.is_empty() && !matches!(l[0], b'#' | b'+' | b'-'))
}

/// A line as UTF-8, without a trailing CR; None if it is not UTF-8 or nothing is left.
fn decoded(line: &[u8]) -> Option<&str> {
    let line = std::str::from_utf8(line).ok()?;
    Some(line.strip_suffix('\r').unwrap_or(line)).filter(|l| !l.is_empty())
}

/// Whether `line`'s first field is `name`.
fn begins_with_field(line: &[u8], name: &str) -> bool {
    line.strip_prefix(name.as_bytes()).is_some_and(|rest| rest.first() == Some(&b':'))
}

/// Whether `needle` occurs in `line`: a line that lists a member holds its name.
fn holds(line: &[u8], needle: &str) -> bool {
    let Some((&first, rest)) = needle.as_bytes().split_first() else { return true };
    line.iter().enumerate().any(|(i, &b)| b == first && line[i + 1..].starts_with(rest))
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME && !name.chars().any(|c| c.is_control() || c.is_whitespace())
}

/// A decimal id, below (uid_t)-1; no sign, no blanks, no overflow.
fn parse_id(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<u32>().ok().filter(|&id| id != u32::MAX)
}

/// initgroups(name, gid)'s list: `gid`, then every group of `group_text` that lists `name` as a
/// member, in the file's order, each once, at most `limit` in all. The second value says that
/// more were left out. Linear in the file, and never more than a few times `limit` gids held.
pub fn member_groups(group_text: &[u8], name: &str, gid: u32, limit: impl FnOnce() -> usize) -> (Vec<u32>, bool) {
    // A usual user's list is short: the limit (never below this on Linux) is looked up only for
    // a long one.
    const SHORT: usize = 64;
    let mut limit = Some(limit);
    let mut cap = 0;
    let mut groups = vec![gid];
    let listing = lines(group_text).filter(|line| holds(line, name)).filter_map(decoded).filter_map(group_entry);
    for g in listing.filter(|g| g.has_member(name)) {
        groups.push(g.gid);
        if groups.len() > SHORT {
            if let Some(limit) = limit.take() {
                cap = limit().max(SHORT);
            }
            // Duplicates are dropped in batches, so that the list held stays within twice the cap.
            if groups.len() > cap.saturating_mul(2) {
                dedup_in_order(&mut groups);
                if groups.len() > cap {
                    break;
                }
            }
        }
    }
    dedup_in_order(&mut groups);
    // With no cap looked up, the list never grew past SHORT.
    let over = cap > 0 && groups.len() > cap;
    groups.truncate(if over { cap } else { groups.len() });
    (groups, over)
}

/// Drops every gid seen before, keeping the first of each, in O(n log n).
fn dedup_in_order(groups: &mut Vec<u32>) {
    // One sort of plain gids (the same code as the groups' comparison in `launch`), then each gid
    // kept at its first sight, found by binary search.
    let mut distinct = groups.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let mut seen = vec![false; distinct.len()];
    groups.retain(|g| distinct.binary_search(g).is_ok_and(|at| !std::mem::replace(&mut seen[at], true)));
}

/// The kernel's NGROUPS_MAX, as /proc/sys/kernel/ngroups_max says (musl's sysconf answers a
/// constant of its own).
fn ngroups_max() -> usize {
    procfs::ngroups_max().unwrap_or(NGROUPS_MAX)
}

/// Where the image's files are: `/etc`, or a test's directory.
pub struct Files {
    pub passwd: PathBuf,
    pub group: PathBuf,
}

impl Files {
    pub fn system() -> Files {
        Files { passwd: PathBuf::from("/etc/passwd"), group: PathBuf::from("/etc/group") }
    }
}

/// Reads a file whole, refusing one above `MAX_FILE`; None if there is none: a scratch image
/// with numeric ids need not have one.
fn read_bounded(path: &Path) -> io::Result<Option<Vec<u8>>> {
    let Some(file) = sys::open_regular(path)? else { return Ok(None) };
    let too_large = || io::Error::new(io::ErrorKind::InvalidData, format!("larger than {MAX_FILE} bytes"));
    let size = file.metadata()?.len();
    if size > MAX_FILE {
        return Err(too_large());
    }
    // The size known, the buffer is allocated once instead of doubled as it fills.
    let mut text = Vec::with_capacity(usize::try_from(size).unwrap_or(0).saturating_add(1));
    file.take(MAX_FILE + 1).read_to_end(&mut text)?;
    if text.len() as u64 > MAX_FILE {
        return Err(too_large());
    }
    Ok(Some(text))
}

/// An entry that is not there: in a file that is (`exists`), or because there is no file.
fn not_found(spec: &Spec, what: &str, who: &Who, file: &Path, exists: bool) -> Error {
    let why = if exists {
        format!("no such entry in {}", file.display())
    } else {
        format!("there is no {} to look the name up in (a numeric id needs none)", file.display())
    };
    Error::Setup { what: format!("unknown {what} '{who}' for {}", spec.from), source: io::Error::new(io::ErrorKind::NotFound, why) }
}

fn unreadable(spec: &Spec, file: &Path, source: io::Error) -> Error {
    Error::Setup { what: format!("cannot read {} for {}", file.display(), spec.from), source }
}

/// The entry's home as the app's HOME: `/` when it is not an absolute path, an error when no
/// exec could carry it (a NUL, or longer than the kernel takes in one variable).
fn home_of<'a>(spec: &Spec, entry: &PasswdEntry<'a>, file: &Path) -> Result<&'a str, Error> {
    let why = if entry.home.contains('\0') {
        "it holds a NUL byte".to_string()
    } else if "HOME=".len() + entry.home.len() + 1 > MAX_VARIABLE {
        format!("it is {} bytes, over the kernel's limit of {MAX_VARIABLE} for one variable", entry.home.len())
    } else {
        return Ok(Some(entry.home).filter(|h| h.starts_with('/')).unwrap_or("/"));
    };
    Err(Error::Setup {
        what: format!("cannot give the app HOME from the home of '{}' in {} for {}", OneLine(entry.name), file.display(), spec.from),
        source: io::Error::new(io::ErrorKind::InvalidData, why),
    })
}

/// The credentials `spec` names, looked up in `files`. An unknown name, or a file that cannot be
/// read, is lastcall's failure (exit 125), named with the file and where the value came from.
pub fn resolve(spec: &Spec, files: &Files) -> Result<Credentials, Error> {
    let passwd = read_bounded(&files.passwd).map_err(|e| unreadable(spec, &files.passwd, e))?;
    let passwd_text = passwd.as_deref().unwrap_or_default();
    let entry = match &spec.user {
        Who::Name(name) => Some(
            passwd_named(passwd_text, name)
                .ok_or_else(|| not_found(spec, "user", &spec.user, &files.passwd, passwd.is_some()))?,
        ),
        Who::Id(uid) => parse_passwd(passwd_text).find(|e| e.uid == *uid),
    };
    let home = match &entry {
        Some(e) => home_of(spec, e, &files.passwd)?,
        None => "/",
    };
    let uid = match &spec.user {
        Who::Id(uid) => *uid,
        Who::Name(_) => entry.as_ref().map_or(0, |e| e.uid),
    };
    // The group file is read only when something needs it.
    let by_name = matches!(spec.user, Who::Name(_));
    let needs_groups = by_name || matches!(spec.group, Some(Who::Name(_)));
    let group = if needs_groups { read_bounded(&files.group).map_err(|e| unreadable(spec, &files.group, e))? } else { None };
    let group_text = group.as_deref().unwrap_or_default();
    let gid = match &spec.group {
        Some(Who::Id(gid)) => *gid,
        Some(who @ Who::Name(name)) => {
            group_named(group_text, name)
                .ok_or_else(|| not_found(spec, "group", who, &files.group, group.is_some()))?
                .gid
        }
        None => entry.as_ref().map_or(0, |e| e.gid),
    };
    let groups = match (by_name, &entry) {
        (true, Some(e)) => {
            let (groups, over) = member_groups(group_text, e.name, gid, ngroups_max);
            if over {
                log::warn!(
                    "user '{}' is a member of more than {} groups in {}: only the first {} are kept for {} (the kernel's NGROUPS_MAX)",
                    OneLine(e.name),
                    groups.len(),
                    files.group.display(),
                    groups.len(),
                    spec.from
                );
            }
            groups
        }
        _ => vec![gid],
    };
    Ok(Credentials { uid, gid, groups, home: PathBuf::from(home), name: entry.map(|e| e.name.to_string()) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(n: &str) -> Who {
        Who::Name(n.into())
    }

    #[test]
    fn specs() {
        let spec = |user, group| Ok(Spec { user, group, from: "--user" });
        assert_eq!(parse_spec("app"), spec(name("app"), None));
        assert_eq!(parse_spec("app:web"), spec(name("app"), Some(name("web"))));
        assert_eq!(parse_spec("1000:1000"), spec(Who::Id(1000), Some(Who::Id(1000))));
        assert_eq!(parse_spec("0"), spec(Who::Id(0), None));
        assert_eq!(parse_spec("4294967294"), spec(Who::Id(4294967294), None));
        assert_eq!(parse_spec("app").unwrap().given_by("LASTCALL_USER").from, "LASTCALL_USER");
        assert_eq!(parse_spec("1abc").unwrap().user, name("1abc"));
        for bad in ["", ":", "app:", ":web", "a:b:c", "4294967295", "4294967296", "99999999999999999999", "a b", "a\nb", "a,b", "../x", &"x".repeat(300)] {
            assert!(parse_spec(bad).is_err(), "{bad:?}");
        }
    }

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\n\
        # a comment\n\
        +nisuser::::::\n\
        app:x:1000:1000:The App:/home/app:/sbin/nologin\n\
        app:x:2000:2000:second entry, not used:/nope:/bin/sh\n\
        short:x:1001:1001\n\
        neg:x:-1:1:x:/h:/s\n\
        big:x:4294967296:1:x:/h:/s\n\
        max:x:4294967295:1:x:/h:/s\n\
        plus:x:+5:1:x:/h:/s\n\
        nohome:x:1002:1002:::\r\n\
        relhome:x:1003:1003::home:\n";
    const GROUP: &str = "root:x:0:\n\
        app:x:1000:\n\
        web:x:2000:app,other\n\
        audio:x:2001:other\n\
        dup:x:1000:app\n\
        bad:x:abc:app\n\
        short:x:2002\n\
        trailing:x:2003:,app,\n";

    fn files(dir: &Path) -> Files {
        std::fs::write(dir.join("passwd"), PASSWD).unwrap();
        std::fs::write(dir.join("group"), GROUP).unwrap();
        Files { passwd: dir.join("passwd"), group: dir.join("group") }
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("lastcall-user-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn passwd_entries_hostile_lines_are_skipped() {
        let names: Vec<&str> = parse_passwd(PASSWD.as_bytes()).map(|e| e.name).collect();
        assert_eq!(names, ["root", "app", "app", "nohome", "relhome"]);
        let long = format!("{}:x:1:1::/:\n{}\nok:x:5:5::/ok:\n", "n".repeat(10_000), "y".repeat(1_000_000));
        assert_eq!(parse_passwd(long.as_bytes()).map(|e| e.name).collect::<Vec<_>>(), ["ok"]);
        assert_eq!(parse_passwd(b"\xff\xfe:x:1:1::/:\nok:x:5:5::/ok:").count(), 1);
        assert_eq!(parse_passwd(b"").count(), 0);
        assert_eq!(parse_passwd(b"::::::\n:x:1:1::/:\n").count(), 0);
    }

    #[test]
    fn group_entries() {
        let groups: Vec<(&str, u32, Vec<&str>)> = parse_group(GROUP.as_bytes()).map(|g| (g.name, g.gid, g.members().collect())).collect();
        assert_eq!(groups.len(), 6);
        assert_eq!(groups[2], ("web", 2000, vec!["app", "other"]));
        assert_eq!(groups[5].2, vec!["app"]);
        assert!(!groups.iter().any(|g| g.0 == "bad" || g.0 == "short"));
    }

    #[test]
    fn resolution() {
        let dir = scratch("resolve");
        let f = files(&dir);
        let resolve = |s: &str| resolve(&parse_spec(s).unwrap(), &f);
        let app = resolve("app").unwrap();
        assert_eq!((app.uid, app.gid, app.groups.clone()), (1000, 1000, vec![1000, 2000, 2003]));
        assert_eq!((app.home.to_str(), app.name.as_deref()), (Some("/home/app"), Some("app")));
        let c = resolve("app:audio").unwrap();
        assert_eq!((c.uid, c.gid, c.groups), (1000, 2001, vec![2001, 2000, 1000, 2003]));
        let c = resolve("app:7").unwrap();
        assert_eq!((c.gid, c.groups[0]), (7, 7));
        // Numbers: only the given group; HOME and the name from an entry by uid, if any.
        let c = resolve("1000").unwrap();
        assert_eq!((c.uid, c.gid, c.groups, c.name.as_deref()), (1000, 1000, vec![1000], Some("app")));
        let c = resolve("4242:4343").unwrap();
        assert_eq!((c.uid, c.gid, c.groups, c.home.to_str(), c.name), (4242, 4343, vec![4343], Some("/"), None));
        assert_eq!(resolve("4242").unwrap().gid, 0);
        assert_eq!(resolve("4242:web").unwrap().gid, 2000);
        assert_eq!(resolve("nohome").unwrap().home.to_str(), Some("/"));
        assert_eq!(resolve("relhome").unwrap().home.to_str(), Some("/"));
        for (spec, needle) in [("nosuch", "unknown user 'nosuch'"), ("app:nosuch", "unknown group 'nosuch'"), ("1:nosuch", "unknown group")] {
            let e = resolve(spec).unwrap_err();
            let text = e.to_string();
            assert!(text.contains(needle) && text.contains(&dir.display().to_string()), "{text}");
            assert_eq!(e.exit_code(), 125);
        }
        // No files at all: numbers still work, names are unknown.
        let none = Files { passwd: dir.join("none"), group: dir.join("none2") };
        assert_eq!(super::resolve(&parse_spec("5:6").unwrap(), &none).unwrap().groups, vec![6]);
        assert!(super::resolve(&parse_spec("app").unwrap(), &none).unwrap_err().to_string().contains("none"));
        // A file too large is refused, not read to the end.
        let huge = dir.join("huge");
        std::fs::File::create(&huge).unwrap().set_len(MAX_FILE + 10).unwrap();
        let big = Files { passwd: huge, group: dir.join("group") };
        let e = super::resolve(&parse_spec("app").unwrap(), &big).unwrap_err().to_string();
        assert!(e.contains("larger than"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn member_groups_are_linear_deduplicated_and_capped() {
        let text = "a:x:5:u\nb:x:6:x,u\nc:x:5:u\nd:x:7:v\ne:x:1:u\n";
        assert_eq!(member_groups(text.as_bytes(), "u", 1, || unreachable!("a short list needs no limit")), (vec![1, 5, 6], false));
        // Many groups, each listed twice: each kept once, in the file's order, up to the limit.
        let many: String = (0..3000u32).chain(0..3000).map(|g| format!("g{g}:x:{}:u\n", g + 10)).collect();
        let (groups, over) = member_groups(many.as_bytes(), "u", 10, || 10_000);
        assert_eq!((groups.len(), over, groups[..3].to_vec(), groups[2999]), (3000, false, vec![10, 11, 12], 3009));
        let (groups, over) = member_groups(many.as_bytes(), "u", 7, || 100);
        assert_eq!((groups.len(), over, groups[0], groups[99]), (100, true, 7, 108));
        // Exactly at the limit is not over it.
        let (groups, over) = member_groups(many.as_bytes(), "u", 10, || 3000);
        assert_eq!((groups.len(), over), (3000, false));
    }

    /// The look-ups that parse only the lines they may want find what a parse of every line
    /// finds, on hostile files too: a malformed line before a good one of the same name, a
    /// member's name inside another's, a name that looks like a comment, CRs, bytes that are not
    /// UTF-8.
    #[test]
    fn look_ups_find_what_a_full_parse_finds() {
        let mut passwd = format!("{PASSWD}bad:x:1:1\nbad:x:7:7::/b:\n-nis:x:3:3::/:\n\u{ff}:x:4:4::/:\napp2:x:9:9::/:\n").into_bytes();
        passwd.extend_from_slice(b"x\xff:x:5:5::/:\r\nnohome:x:8:8::/:\n");
        let group = format!("{GROUP}g1:x:50:apple,xapp\ng2:x:51:app2\n#c:x:52:app\ng3:x:53:\rapp\ng4:x:54:app\r\nbad:x:55:app\n");
        let names = ["root", "app", "app2", "bad", "nohome", "-nis", "\u{ff}", "short", "web", "audio", "dup", "g1", "g3", "g4", "#c", "nosuch", "ap"];
        for name in names {
            assert_eq!(passwd_named(&passwd, name), parse_passwd(&passwd).find(|e| e.name == name), "user {name}");
            assert_eq!(group_named(group.as_bytes(), name), parse_group(group.as_bytes()).find(|g| g.name == name), "group {name}");
            let every: Vec<u32> = parse_group(group.as_bytes()).filter(|g| g.has_member(name)).map(|g| g.gid).collect();
            let (found, _) = member_groups(group.as_bytes(), name, 1, || 100);
            let mut expected = vec![1];
            expected.extend(every);
            dedup_in_order(&mut expected);
            assert_eq!(found, expected, "member {name}");
        }
    }

    #[test]
    fn fields_are_scanned_not_collected() {
        // A line of colons is not an entry, and neither is a line with one field too many.
        let colons = format!("app:x:1:1::/h:{}\nok:x:2:2::/ok:\n", ":".repeat(100_000));
        assert_eq!(parse_passwd(colons.as_bytes()).map(|e| e.name).collect::<Vec<_>>(), ["ok"]);
        assert_eq!(parse_passwd(b"a:x:1:1::/:sh:extra\n").count(), 0);
        assert_eq!(parse_group(b"g:x:1:a:b\ng:x:2:a\n").map(|g| g.gid).collect::<Vec<_>>(), [2]);
        let members = format!("big:x:9:{}u\n", "m,".repeat(100_000));
        let g = parse_group(members.as_bytes()).next().unwrap();
        assert!(g.has_member("u") && g.has_member("m") && !g.has_member("") && !g.has_member("x"));
    }

    #[test]
    fn a_home_no_exec_can_carry_is_an_error_naming_it() {
        let dir = scratch("home");
        let long = format!("/{}", "h".repeat(MAX_VARIABLE));
        let fits = format!("/{}", "h".repeat(MAX_VARIABLE - "HOME=/".len() - 1));
        let passwd = format!("nul:x:1:1::/a\0b:\nlong:x:2:2::{long}:\nfits:x:3:3::{fits}:\n");
        std::fs::write(dir.join("passwd"), passwd).unwrap();
        let f = Files { passwd: dir.join("passwd"), group: dir.join("none") };
        for (spec, needle) in [("nul", "NUL byte"), ("1", "NUL byte"), ("long", "over the kernel's limit"), ("2:5", "over the kernel's limit")] {
            let e = resolve(&parse_spec(spec).unwrap(), &f).unwrap_err();
            let text = e.to_string();
            assert!(text.contains("HOME") && text.contains("passwd") && text.contains(needle) && text.contains("--user"), "{text}");
            assert_eq!(e.exit_code(), 125);
        }
        assert_eq!(resolve(&parse_spec("fits").unwrap(), &f).unwrap().home.as_os_str().len(), fits.len());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn errors_name_where_the_value_came_from_and_a_missing_file() {
        let dir = scratch("origin");
        let f = files(&dir);
        let var = |s: &str| parse_spec(s).unwrap().given_by("LASTCALL_USER");
        let text = resolve(&var("nosuch"), &f).unwrap_err().to_string();
        assert!(text.starts_with("unknown user 'nosuch' for LASTCALL_USER: no such entry in "), "{text}");
        let text = resolve(&parse_spec("app:nosuch").unwrap(), &f).unwrap_err().to_string();
        assert!(text.starts_with("unknown group 'nosuch' for --user: no such entry in "), "{text}");
        let none = Files { passwd: dir.join("none"), group: dir.join("none2") };
        let text = resolve(&var("app"), &none).unwrap_err().to_string();
        assert!(text.contains("for LASTCALL_USER: there is no ") && !text.contains("no such entry"), "{text}");
        let text = resolve(&parse_spec("1:web").unwrap(), &none).unwrap_err().to_string();
        assert!(text.contains("unknown group 'web' for --user: there is no ") && text.contains("none2"), "{text}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn only_regular_files_are_read_and_a_fifo_does_not_block() {
        let dir = scratch("fifo");
        let fifo = dir.join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        for f in [Files { passwd: fifo.clone(), group: dir.join("none") }, Files { passwd: dir.join("none"), group: fifo.clone() }] {
            let e = resolve(&parse_spec("1000:web").unwrap().given_by("LASTCALL_USER"), &f).unwrap_err();
            let text = e.to_string();
            assert!(text.contains("cannot read") && text.contains("fifo for LASTCALL_USER: not a regular file"), "{text}");
            assert_eq!(e.exit_code(), 125);
        }
        let e = resolve(&parse_spec("1000").unwrap(), &Files { passwd: dir.clone(), group: dir.clone() }).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn environment() {
        let c = Credentials { uid: 1, gid: 1, groups: vec![1], home: "/home/app".into(), name: Some("app".into()) };
        let env = c.env(|v| v == "USER");
        assert_eq!(env, vec![("HOME".into(), "/home/app".into()), ("LOGNAME".into(), "app".into())]);
        let anon = Credentials { name: None, home: "/".into(), ..c };
        assert_eq!(anon.env(|_| false), vec![("HOME".into(), "/".into())]);
        let empty = Credentials { home: PathBuf::new(), ..anon };
        assert_eq!(empty.env(|_| false), vec![("HOME".into(), "/".into())]);
    }
}
