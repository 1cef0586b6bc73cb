//! Replacing a small file so that a crash leaves either its old or its new contents:
//! the bytes go to a temporary file of a short name of its own in the same directory,
//! which is fsynced and then renamed over the file.

use std::io::Write as _;
use std::path::Path;

/// Replaces `dir/name` with `bytes` atomically (temporary file, fsync, rename). The
/// temporary file's short name keeps it within the 255-byte file name limit even when
/// `name` is the longest a topic may have (249 characters, plus `.json`).
pub fn replace(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(dir.join(name)).map_err(|e| e.error)?;
    Ok(())
}
