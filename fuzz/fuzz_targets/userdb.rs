//! The image's /etc/passwd and /etc/group as `--user` reads them, `--user`'s value itself, and
//! the status line `probe http://` reads from a server: the input is split at the first 0xFF
//! byte into a file (read as both passwd and group) and a line.
//!
//! Checked: no panic; every entry found is one the kernel can take (no id of -1) and whose name
//! cannot split a line; the groups of `--user`'s name are the gid first, each once, within the
//! cap, and the same as a plain reading of the file gives; a status line gives a 3-digit code.
//! The corpus's named inputs hold the hostile shapes: many groups, very long lines, many colons,
//! NULs in fields.
#![no_main]

use lastcall::probe::parse_status_line;
use lastcall::user::{member_groups, parse_group, parse_passwd, parse_spec, Who};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (file, line) = match data.iter().position(|&b| b == 0xff) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    for e in parse_passwd(file) {
        assert!(e.uid != u32::MAX && e.gid != u32::MAX, "{e:?}");
        assert!(!e.name.is_empty() && !e.name.contains([':', '\n']), "{e:?}");
    }
    for g in parse_group(file) {
        assert!(g.gid != u32::MAX, "{g:?}");
        assert!(g.members().all(|m| !m.is_empty() && !m.contains([',', ':', '\n'])), "{g:?}");
    }
    let gid = 7;
    let limit = 100;
    if let Ok(text) = std::str::from_utf8(line) {
        if let Ok(spec) = parse_spec(text) {
            if let Who::Name(name) = &spec.user {
                let (groups, over) = member_groups(file, name, gid, || limit);
                assert_eq!(groups.first(), Some(&gid));
                assert!(groups.len() <= limit && (!over || groups.len() == limit), "{} {over}", groups.len());
                // The plain, quadratic reading, on what is small enough for it.
                if file.len() < 64 * 1024 {
                    let mut plain = vec![gid];
                    for g in parse_group(file).filter(|g| g.members().any(|m| m == name)) {
                        if !plain.contains(&g.gid) {
                            plain.push(g.gid);
                        }
                    }
                    assert_eq!(over, plain.len() > limit);
                    plain.truncate(limit);
                    assert_eq!(groups, plain);
                }
            }
            for who in std::iter::once(&spec.user).chain(spec.group.as_ref()) {
                match who {
                    Who::Id(id) => assert_ne!(*id, u32::MAX),
                    Who::Name(n) => assert!(!n.is_empty() && !n.contains([':', '\n'])),
                }
            }
        }
    }
    if let Some((code, reason)) = parse_status_line(line) {
        assert!(code <= 999, "{code}");
        assert!(reason.chars().count() <= 80 && reason.starts_with("HTTP/"));
    }
});
