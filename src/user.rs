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
//! The files are read whole, at most `MAX_FILE` bytes; a line that is not a well-formed entry
//! (missing fields, an id that is not a decimal number below 2^32-1) is skipped, as glibc's files
//! backend skips it. The first matching entry wins.
//!
//! May import: error.

use std::ffi::OsString;
use std::fmt;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::error::{Error, OneLine};

/// Larger files are refused: no real passwd is anywhere near, and lastcall must not read
/// without bound before the app starts.
pub const MAX_FILE: u64 = 16 * 1024 * 1024;
/// The longest name accepted on the command line (Linux's own tools stop at 32; NSS at 256).
const MAX_NAME: usize = 256;

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
}

impl fmt::Display for Who {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Who::Name(n) => write!(f, "{}", OneLine(n)),
            Who::Id(id) => write!(f, "{id}"),
        }
    }
}

/// `USER[:GROUP]`: names or decimal ids. A bad value is a usage error (exit 2).
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
    Ok(Spec { user, group })
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
    /// would have them.
    pub fn env(&self, is_set: impl Fn(&str) -> bool) -> Vec<(String, OsString)> {
        let mut env = vec![("HOME".to_string(), OsString::from(self.home.as_os_str()))];
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

/// One passwd entry, as much as lastcall needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PasswdEntry {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupEntry {
    pub name: String,
    pub gid: u32,
    pub members: Vec<String>,
}

/// The well-formed entries of a passwd file: `name:password:uid:gid:gecos:home:shell`.
pub fn parse_passwd(text: &[u8]) -> impl Iterator<Item = PasswdEntry> + '_ {
    lines(text).filter_map(|line| {
        let f: Vec<&str> = line.split(':').collect();
        if f.len() != 7 || !valid_name(f[0]) {
            return None;
        }
        Some(PasswdEntry { name: f[0].into(), uid: parse_id(f[2])?, gid: parse_id(f[3])?, home: f[5].into() })
    })
}

/// The well-formed entries of a group file: `name:password:gid:member,member`.
pub fn parse_group(text: &[u8]) -> impl Iterator<Item = GroupEntry> + '_ {
    lines(text).filter_map(|line| {
        let f: Vec<&str> = line.split(':').collect();
        if f.len() != 4 || !valid_name(f[0]) {
            return None;
        }
        let members = f[3].split(',').filter(|m| !m.is_empty()).map(str::to_string).collect();
        Some(GroupEntry { name: f[0].into(), gid: parse_id(f[2])?, members })
    })
}

/// UTF-8 lines, without a trailing CR; NIS compat lines (`+`, `-`) and comments are not entries.
fn lines(text: &[u8]) -> impl Iterator<Item = &str> {
    text.split(|&b| b == b'\n')
        .filter_map(|l| std::str::from_utf8(l).ok())
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .filter(|l| !l.is_empty() && !l.starts_with(['#', '+', '-']))
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

/// Reads a file whole, refusing one above `MAX_FILE`. A missing file reads as empty: a scratch
/// image with numeric ids need not have one, and a name then is simply not found.
fn read_bounded(path: &Path) -> io::Result<Vec<u8>> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut text = Vec::new();
    file.take(MAX_FILE + 1).read_to_end(&mut text)?;
    if text.len() as u64 > MAX_FILE {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("larger than {MAX_FILE} bytes")));
    }
    Ok(text)
}

fn not_found(what: &str, who: &Who, file: &Path) -> Error {
    Error::Setup {
        what: format!("unknown {what} '{who}' for --user"),
        source: io::Error::new(io::ErrorKind::NotFound, format!("no such entry in {}", file.display())),
    }
}

fn unreadable(file: &Path, source: io::Error) -> Error {
    Error::Setup { what: format!("cannot read {} for --user", file.display()), source }
}

/// The credentials `spec` names, looked up in `files`. An unknown name, or a file that cannot be
/// read, is lastcall's failure (exit 125), named with the file.
pub fn resolve(spec: &Spec, files: &Files) -> Result<Credentials, Error> {
    let passwd = read_bounded(&files.passwd).map_err(|e| unreadable(&files.passwd, e))?;
    let entry = match &spec.user {
        Who::Name(name) => Some(
            parse_passwd(&passwd).find(|e| &e.name == name).ok_or_else(|| not_found("user", &spec.user, &files.passwd))?,
        ),
        Who::Id(uid) => parse_passwd(&passwd).find(|e| e.uid == *uid),
    };
    let uid = match &spec.user {
        Who::Id(uid) => *uid,
        Who::Name(_) => entry.as_ref().map_or(0, |e| e.uid),
    };
    // The group file is read only when something needs it.
    let by_name = matches!(spec.user, Who::Name(_));
    let needs_groups = by_name || matches!(spec.group, Some(Who::Name(_)));
    let group_text = if needs_groups { read_bounded(&files.group).map_err(|e| unreadable(&files.group, e))? } else { Vec::new() };
    let gid = match &spec.group {
        Some(Who::Id(gid)) => *gid,
        Some(who @ Who::Name(name)) => {
            parse_group(&group_text).find(|g| &g.name == name).ok_or_else(|| not_found("group", who, &files.group))?.gid
        }
        None => entry.as_ref().map_or(0, |e| e.gid),
    };
    let mut groups = vec![gid];
    if let (true, Some(e)) = (by_name, &entry) {
        // initgroups(name, gid): every group that lists the user as a member.
        for g in parse_group(&group_text).filter(|g| g.members.iter().any(|m| m == &e.name)) {
            if !groups.contains(&g.gid) {
                groups.push(g.gid);
            }
        }
    }
    let home = entry.as_ref().map(|e| e.home.as_str()).filter(|h| h.starts_with('/')).unwrap_or("/");
    Ok(Credentials { uid, gid, groups, home: PathBuf::from(home), name: entry.map(|e| e.name) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(n: &str) -> Who {
        Who::Name(n.into())
    }

    #[test]
    fn specs() {
        assert_eq!(parse_spec("app"), Ok(Spec { user: name("app"), group: None }));
        assert_eq!(parse_spec("app:web"), Ok(Spec { user: name("app"), group: Some(name("web")) }));
        assert_eq!(parse_spec("1000:1000"), Ok(Spec { user: Who::Id(1000), group: Some(Who::Id(1000)) }));
        assert_eq!(parse_spec("0"), Ok(Spec { user: Who::Id(0), group: None }));
        assert_eq!(parse_spec("4294967294"), Ok(Spec { user: Who::Id(4294967294), group: None }));
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
        let names: Vec<String> = parse_passwd(PASSWD.as_bytes()).map(|e| e.name).collect();
        assert_eq!(names, ["root", "app", "app", "nohome", "relhome"]);
        let long = format!("{}:x:1:1::/:\n{}\nok:x:5:5::/ok:\n", "n".repeat(10_000), "y".repeat(1_000_000));
        assert_eq!(parse_passwd(long.as_bytes()).map(|e| e.name).collect::<Vec<_>>(), ["ok"]);
        assert_eq!(parse_passwd(b"\xff\xfe:x:1:1::/:\nok:x:5:5::/ok:").count(), 1);
        assert_eq!(parse_passwd(b"").count(), 0);
        assert_eq!(parse_passwd(b"::::::\n:x:1:1::/:\n").count(), 0);
    }

    #[test]
    fn group_entries() {
        let groups: Vec<(String, u32, Vec<String>)> = parse_group(GROUP.as_bytes()).map(|g| (g.name, g.gid, g.members)).collect();
        assert_eq!(groups.len(), 6);
        assert_eq!(groups[2], ("web".into(), 2000, vec!["app".into(), "other".into()]));
        assert_eq!(groups[5].2, vec!["app".to_string()]);
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
    fn environment() {
        let c = Credentials { uid: 1, gid: 1, groups: vec![1], home: "/home/app".into(), name: Some("app".into()) };
        let env = c.env(|v| v == "USER");
        assert_eq!(env, vec![("HOME".into(), "/home/app".into()), ("LOGNAME".into(), "app".into())]);
        let anon = Credentials { name: None, home: "/".into(), ..c };
        assert_eq!(anon.env(|_| false), vec![("HOME".into(), "/".into())]);
    }
}
