//! Whether lastcall's command is lastcall too (any name, any path): `docker run --init` or
//! Compose's `init: true` in front of an image whose ENTRYPOINT is lastcall. Both would read the
//! same `LASTCALL_*` variables, bind the same health port and run the pre-stop twice; so the
//! outer one steps aside and only forwards, reaps and exits with the inner one's status.
//!
//! The inner binary is recognised by the ELF note it carries (`sys::NOTE`), read from the
//! command's file before anything starts, never by its name: a lastcall installed as `tini` is
//! still lastcall, and a program merely named `lastcall` is not. The file is hostile input: only
//! a regular file is opened (a FIFO would block), without following it into a terminal, and at
//! most a few KiB of it are read, each offset and size checked. An executable that cannot be
//! read (mode 0711 and a non-root outer lastcall) cannot be told: the supervisor then steps aside
//! as for a lastcall, since a second lastcall doing the shutdown too would bind the health port
//! twice and fail.
//!
//! May import: sys.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::sys::NOTE;

const PT_NOTE: u32 = 4;
/// Program headers read at most; real binaries have about a dozen.
const MAX_PHDRS: usize = 64;
/// Bytes of one PT_NOTE read at most; lastcall's own notes take under 100.
const MAX_NOTE_BYTES: u64 = 4096;
/// PT_NOTE segments read at most.
const MAX_NOTE_SEGMENTS: usize = 8;

/// What the command's file says about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detected {
    NotLastcall,
    Lastcall,
    /// An executable regular file that lastcall may not read (execute-only): it may be either.
    CannotTell,
}

/// Whether `command` (lastcall's, with its arguments) runs a lastcall, and the file it runs.
pub fn command_is_lastcall(command: &[OsString], path_var: Option<&OsStr>) -> (Detected, Option<PathBuf>) {
    match command.first().and_then(|program| resolve(program, path_var)) {
        Some(file) => (detect(&file), Some(file)),
        None => (Detected::NotLastcall, None),
    }
}

/// `is_lastcall`, telling "cannot read it" apart from "no".
pub fn detect(path: &Path) -> Detected {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path);
    match file {
        Ok(file) if file.metadata().is_ok_and(|m| m.is_file()) => match carries_note(file) {
            Some(true) => Detected::Lastcall,
            _ => Detected::NotLastcall,
        },
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied && is_executable_file(path) => Detected::CannotTell,
        _ => Detected::NotLastcall,
    }
}

/// A regular file with an execute bit, read off its metadata (no open, so no block on a FIFO).
fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The file exec would run for `program`: a path with a slash as it is, else the first
/// executable regular file of that name on PATH (musl's default PATH when there is none).
pub fn resolve(program: &OsStr, path_var: Option<&OsStr>) -> Option<PathBuf> {
    if program.is_empty() {
        return None;
    }
    if program.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(program));
    }
    let path_var = path_var.unwrap_or(OsStr::new("/usr/local/bin:/bin:/usr/bin"));
    path_var
        .as_bytes()
        .split(|&b| b == b':')
        .map(|dir| if dir.is_empty() { Path::new(".") } else { Path::new(OsStr::from_bytes(dir)) })
        .map(|dir| dir.join(program))
        .find(|file| is_executable_file(file))
}

/// Whether the file at `path` is a lastcall: an ELF file with lastcall's note. Any failure to
/// read it (not there, not readable, not ELF, truncated, absurd sizes) is "no".
pub fn is_lastcall(path: &Path) -> bool {
    detect(path) == Detected::Lastcall
}

/// An ELF file's identity: how wide and in which byte order its fields are.
#[derive(Clone, Copy)]
struct Elf {
    wide: bool,
    big: bool,
}

impl Elf {
    fn u16(self, b: &[u8], at: usize) -> Option<u16> {
        let b: [u8; 2] = b.get(at..at + 2)?.try_into().ok()?;
        Some(if self.big { u16::from_be_bytes(b) } else { u16::from_le_bytes(b) })
    }
    fn u32(self, b: &[u8], at: usize) -> Option<u32> {
        let b: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
        Some(if self.big { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) })
    }
    fn u64(self, b: &[u8], at: usize) -> Option<u64> {
        let b: [u8; 8] = b.get(at..at + 8)?.try_into().ok()?;
        Some(if self.big { u64::from_be_bytes(b) } else { u64::from_le_bytes(b) })
    }
    /// A word: 8 bytes in a 64-bit file, 4 in a 32-bit one.
    fn word(self, b: &[u8], at: usize) -> Option<u64> {
        if self.wide {
            self.u64(b, at)
        } else {
            self.u32(b, at).map(u64::from)
        }
    }
}

fn carries_note<F: Read + Seek>(file: F) -> Option<bool> {
    // The first page at once: the header, the program headers and the notes of every binary
    // seen (lastcall's own, a C program's, a script's first line) lie in it; only a file laid
    // out otherwise costs more reads.
    let mut file = Head::read(file)?;
    let mut header = [0u8; 64];
    read_at(&mut file, 0, &mut header)?;
    if header[..4] != *b"\x7fELF" {
        return Some(false);
    }
    let elf = match (header[4], header[5]) {
        (1 | 2, 1 | 2) => Elf { wide: header[4] == 2, big: header[5] == 2 },
        _ => return Some(false),
    };
    // e_phoff, e_phentsize, e_phnum.
    let (phoff, phentsize, phnum) = if elf.wide {
        (elf.u64(&header, 32)?, elf.u16(&header, 54)?, elf.u16(&header, 56)?)
    } else {
        (u64::from(elf.u32(&header, 28)?), elf.u16(&header, 42)?, elf.u16(&header, 44)?)
    };
    let (phentsize, phnum) = (usize::from(phentsize), usize::from(phnum));
    let min_entry = if elf.wide { 56 } else { 32 };
    if phnum == 0 || phnum > MAX_PHDRS || phentsize < min_entry || phentsize > 128 {
        return Some(false);
    }
    let mut table = vec![0u8; phentsize * phnum];
    read_at(&mut file, phoff, &mut table)?;
    let notes = table.chunks_exact(phentsize).filter(|ph| elf.u32(ph, 0) == Some(PT_NOTE));
    for ph in notes.take(MAX_NOTE_SEGMENTS) {
        // p_offset and p_filesz.
        let (offset, size) = if elf.wide { (elf.u64(ph, 8)?, elf.u64(ph, 32)?) } else { (elf.word(ph, 4)?, elf.word(ph, 16)?) };
        let mut notes = vec![0u8; usize::try_from(size.min(MAX_NOTE_BYTES)).ok()?];
        read_at(&mut file, offset, &mut notes)?;
        if has_lastcall_note(elf, &notes) {
            return Some(true);
        }
    }
    Some(false)
}

/// Walks the notes of one PT_NOTE segment (4-byte aligned, as every ABI lays them out here).
fn has_lastcall_note(elf: Elf, mut notes: &[u8]) -> bool {
    let pad = |n: u32| usize::try_from(n).ok().and_then(|n| n.checked_add(3)).map(|n| n & !3);
    while notes.len() >= 12 {
        let (Some(namesz), Some(descsz), Some(kind)) = (elf.u32(notes, 0), elf.u32(notes, 4), elf.u32(notes, 8)) else {
            return false;
        };
        let (Some(name_len), Some(desc_len)) = (pad(namesz), pad(descsz)) else { return false };
        let Some(end) = name_len.checked_add(desc_len).and_then(|n| n.checked_add(12)) else { return false };
        let Some(note) = notes.get(..end) else { return false };
        let name = &note[12..12 + namesz as usize];
        let desc = &note[12 + name_len..12 + name_len + descsz as usize];
        if kind == NOTE.kind && name == &NOTE.name[..NOTE.namesz as usize] && desc == NOTE.desc {
            return true;
        }
        notes = &notes[end..];
    }
    false
}

/// A file with its first `HEAD_BYTES` read.
struct Head<F> {
    file: F,
    head: Vec<u8>,
}

const HEAD_BYTES: usize = 4096;

impl<F: Read + Seek> Head<F> {
    fn read(mut file: F) -> Option<Head<F>> {
        let mut head = Vec::with_capacity(HEAD_BYTES);
        (&mut file).take(HEAD_BYTES as u64).read_to_end(&mut head).ok()?;
        Some(Head { file, head })
    }
}

fn read_at<F: Read + Seek>(file: &mut Head<F>, offset: u64, buf: &mut [u8]) -> Option<()> {
    let start = usize::try_from(offset).ok();
    if let Some(bytes) = start.and_then(|start| file.head.get(start..start.checked_add(buf.len())?)) {
        buf.copy_from_slice(bytes);
        return Some(());
    }
    file.file.seek(SeekFrom::Start(offset)).ok()?;
    file.file.read_exact(buf).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn this_test_binary_carries_the_note() {
        // The test binary links the library, and with it sys::NOTE.
        let me = std::env::current_exe().unwrap();
        assert!(is_lastcall(&me), "{}", me.display());
    }

    #[test]
    fn other_files_are_not_lastcall() {
        for path in ["/bin/sh", "/usr/bin/env", "/etc/passwd", "/nonexistent", "/", "/proc/self/status"] {
            assert!(!is_lastcall(Path::new(path)), "{path}");
        }
    }

    #[test]
    fn hostile_headers_are_a_no() {
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let head = &me[..me.len().min(1 << 16)];
        // Every truncation of a real header, and every byte of it flipped, ends with an answer.
        for len in [0, 4, 16, 63, 64, 100, 1000] {
            let _ = carries_note(Cursor::new(&head[..len.min(head.len())]));
        }
        for i in 0..128.min(head.len()) {
            let mut bad = head.to_vec();
            bad[i] ^= 0xff;
            let _ = carries_note(Cursor::new(bad));
        }
        // A note whose sizes point past the end.
        let elf = Elf { wide: true, big: false };
        let mut note = vec![0u8; 12];
        note[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(!has_lastcall_note(elf, &note));
        let mut ok = Vec::new();
        for v in [9, 4, NOTE.kind] {
            ok.extend_from_slice(&v.to_le_bytes());
        }
        ok.extend_from_slice(b"lastcall\0\0\0\0v1\0\0");
        assert!(has_lastcall_note(elf, &ok));
        assert!(!has_lastcall_note(Elf { wide: true, big: true }, &ok), "the byte order matters");
        ok[12] = b'L';
        assert!(!has_lastcall_note(elf, &ok));
    }

    #[test]
    fn an_unreadable_executable_cannot_be_told() {
        // Root reads anything: the case needs another uid, which the integration tests have.
        if std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap()) == 0 {
            return;
        }
        let dir = std::env::temp_dir().join(format!("lastcall-nested-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("x");
        std::fs::write(&file, b"\x7fELF").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o111)).unwrap();
        assert_eq!(detect(&file), Detected::CannotTell);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o000)).unwrap();
        assert_eq!(detect(&file), Detected::NotLastcall, "not executable: exec would fail anyway");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn resolving_follows_path() {
        assert_eq!(resolve(OsStr::new("/x/y"), None), Some(PathBuf::from("/x/y")));
        assert_eq!(resolve(OsStr::new("sh"), Some(OsStr::new("/nonexistent:/bin"))), Some(PathBuf::from("/bin/sh")));
        assert_eq!(resolve(OsStr::new("no-such-program-here"), Some(OsStr::new("/bin"))), None);
        assert_eq!(resolve(OsStr::new(""), None), None);
    }
}
