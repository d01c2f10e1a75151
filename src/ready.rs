//! The ready file: present while the app runs and lastcall is not shutting down.
//!
//! Its directory may be shared with users who must not be able to turn lastcall's root into a
//! weapon, so nothing here follows a symlink or uses a name they can guess: the file is written
//! under a random temporary name, created with O_CREAT|O_EXCL|O_NOFOLLOW (a name planted in
//! advance, symlink or not, makes the create fail instead of being opened), then renamed over
//! the path, which replaces a symlink there rather than following it; unlink never follows.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::sys;

pub struct ReadyFile {
    path: PathBuf,
    present: bool,
}

impl ReadyFile {
    /// Checks, before the app starts, that the file can be created where it was asked for.
    pub fn prepare(path: &Path) -> io::Result<ReadyFile> {
        let (probe, _) = create_temp(path)?;
        fs::remove_file(&probe)?;
        Ok(ReadyFile { path: path.to_path_buf(), present: false })
    }

    /// Creates the file atomically (write, then rename), so a reader never sees half of it.
    pub fn create(&mut self) -> io::Result<()> {
        let (temp, mut file) = create_temp(&self.path)?;
        let written = writeln!(file, "{}", std::process::id()).and_then(|()| fs::rename(&temp, &self.path));
        if written.is_err() {
            let _ = fs::remove_file(&temp);
        }
        written?;
        self.present = true;
        Ok(())
    }

    pub fn remove(&mut self) {
        if self.present {
            self.present = false;
            if let Err(e) = fs::remove_file(&self.path) {
                log::warn!("cannot remove the ready file {}: {e}", self.path.display());
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ReadyFile {
    fn drop(&mut self) {
        self.remove();
    }
}

/// A new file next to `path`, under a name nobody could have planted: `.<name>.lastcall-<64
/// random bits>`. Retried on the astronomically unlikely clash.
fn create_temp(path: &Path) -> io::Result<(PathBuf, fs::File)> {
    let mut attempts = 0;
    loop {
        let mut name = std::ffi::OsString::from(".");
        name.push(path.file_name().unwrap_or_default());
        name.push(format!(".lastcall-{:016x}", sys::random_u64()?));
        let temp = path.with_file_name(name);
        let opened = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .mode(0o666)
            .open(&temp);
        match opened {
            Ok(file) => return Ok((temp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempts < 3 => attempts += 1,
            Err(e) => return Err(e),
        }
    }
}
