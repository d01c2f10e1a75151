//! The ready file: present while the app runs and lastcall is not shutting down.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub struct ReadyFile {
    path: PathBuf,
    present: bool,
}

impl ReadyFile {
    /// Checks, before the app starts, that the file can be created where it was asked for.
    pub fn prepare(path: &Path) -> io::Result<ReadyFile> {
        let probe = temp_path(path);
        fs::File::create(&probe)?;
        fs::remove_file(&probe)?;
        Ok(ReadyFile { path: path.to_path_buf(), present: false })
    }

    /// Creates the file atomically (write, then rename), so a reader never sees half of it.
    pub fn create(&mut self) -> io::Result<()> {
        let temp = temp_path(&self.path);
        let mut file = fs::File::create(&temp)?;
        writeln!(file, "{}", std::process::id())?;
        fs::rename(&temp, &self.path)?;
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

fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".lastcall-{}.tmp", std::process::id()));
    path.with_file_name(name)
}
