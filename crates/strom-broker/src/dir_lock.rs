//! `.lock` in every storage directory, held with `flock` for the life of the node, as
//! Kafka's `LogManager` locks its log directories: a second node started on a directory
//! in use stops at once, naming it, instead of writing into another node's logs. The
//! kernel drops the lock when the process ends, however it ends.

use std::fs::{self, File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use crate::BrokerError;

/// The lock file's name, Kafka's.
pub const LOCK_FILE: &str = ".lock";

/// The locks of a node's directories; released when dropped.
#[derive(Debug)]
pub struct DirLocks {
    _files: Vec<File>,
}

/// Creates each of `dirs` if need be and locks it, or names the first one in use.
pub fn lock_all(dirs: &[PathBuf]) -> Result<DirLocks, BrokerError> {
    let mut files = Vec::with_capacity(dirs.len());
    for dir in dirs {
        fs::create_dir_all(dir)?;
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(LOCK_FILE))?;
        // SAFETY: flock on a descriptor this function owns; it touches no memory.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(BrokerError::Storage(format!(
                "Failed to acquire lock on file {LOCK_FILE} in {}. A strom node in another process is using this directory.",
                dir.display()
            )));
        }
        files.push(file);
    }
    Ok(DirLocks { _files: files })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_locked_once_until_its_lock_is_dropped() {
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("a"), root.path().join("b")];
        let held = lock_all(&dirs).unwrap();
        let err = lock_all(&dirs[1..]).unwrap_err().to_string();
        assert!(err.contains(&dirs[1].display().to_string()), "{err}");
        drop(held);
        lock_all(&dirs).unwrap();
    }
}
