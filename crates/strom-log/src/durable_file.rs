//! Replacing a small file so that a crash leaves either its old or its new contents,
//! never a mix and never nothing: the bytes go to a temporary file in the same directory,
//! which is fsynced and renamed over the file, and the directory is fsynced so that the
//! rename survives too ([`replace_durably`]; [`replace_atomically`] leaves that out).
//! Every file strom keeps whole — checkpoints, the leader epoch
//! cache, the clean-shutdown record, `meta.properties`, the dynamic configs — is written
//! this way (the controller's log store, which links no strom-log, does the same).

use std::fs::{self, File};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

/// The longest file name Linux file systems take.
const NAME_MAX: usize = 255;

/// Replaces `path` with `bytes` atomically and durably: once it returns, a crash leaves
/// the new contents (see the module doc). A temporary file a crash left is overwritten
/// by the next replacement of the same file.
pub fn replace_durably(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_atomically(path, bytes)?;
    File::open(directory(path))?.sync_all()
}

/// Replaces `path` with `bytes` atomically: a crash leaves the old or the new contents.
/// Without the directory's fsync the rename may not outlive a crash, for files written
/// often and one per partition (the leader epoch cache at each new leader epoch, the
/// high-watermark checkpoints), where an fsync of the directory would double the cost
/// and the old contents are a state the broker recovers from.
pub fn replace_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = directory(path);
    fs::create_dir_all(dir)?;
    let tmp = temporary(dir, path);
    let written = write_synced(&tmp, bytes).and_then(|()| fs::rename(&tmp, path));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}

fn directory(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// The temporary file of `path`: its name with `.tmp`, or — when that would pass
/// [`NAME_MAX`], as a topic's record named after a 249-character topic would — a short
/// name derived from it.
fn temporary(dir: &Path, path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let tmp = format!("{name}.tmp");
    if tmp.len() <= NAME_MAX {
        return dir.join(tmp);
    }
    dir.join(format!(".{:08x}.tmp", crc32c::crc32c(name.as_bytes())))
}

fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_contents_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested").join("checkpoint");
        replace_durably(&path, b"first").unwrap();
        replace_durably(&path, b"second").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"second");
        let names: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["checkpoint"]);
    }

    #[test]
    fn a_name_at_the_limit_gets_a_short_temporary_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("{}.json", "t".repeat(249)));
        replace_durably(&path, b"{}").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"{}");
        assert!(temporary(dir.path(), &path)
            .file_name()
            .is_some_and(|n| n.len() < 16));
    }

    #[test]
    fn a_temporary_file_left_by_a_crash_is_overwritten_and_the_file_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("meta.properties");
        replace_durably(&path, b"old").unwrap();
        fs::write(dir.path().join("meta.properties.tmp"), b"half wri").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"old", "the file as it was");
        replace_durably(&path, b"new").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        assert!(!dir.path().join("meta.properties.tmp").exists());
    }
}
