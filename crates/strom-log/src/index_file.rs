//! A sparse, append-only index file of fixed-size entries sorted by key, shared by the
//! offset index and the time index.
//!
//! Entries are kept in memory for lookups (a binary search, never a scan). New entries are
//! written to the file in one write when the segment is flushed (fsync, roll, close), not
//! one syscall per append: like Kafka's memory-mapped indexes, the file is only trusted
//! for data below the recovery point, and recovery rebuilds the index of anything above
//! it. The file is plain concatenated entries, so a crash can only leave a torn last
//! entry, which [`IndexFile::open`] detects by length.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::LogError;

/// One fixed-size index entry.
pub trait IndexEntry: Copy {
    /// Encoded size in bytes.
    const SIZE: usize;
    /// The key entries are sorted and searched by.
    fn key(&self) -> i64;
    fn encode(&self, out: &mut Vec<u8>);
    fn decode(bytes: &[u8]) -> Self;
}

/// An index file's entries. The file is not kept open: it is opened for the moment of a
/// write, truncation or fsync, so indexes cost no descriptor at rest (a broker hosts far
/// more segments than it may hold descriptors).
#[derive(Debug)]
pub struct IndexFile<E> {
    path: PathBuf,
    entries: Vec<E>,
    /// How many of `entries` are in the file; the rest are written by [`Self::flush`].
    written: usize,
    /// Whether the file was written or truncated since its last fsync.
    unsynced: bool,
    max_entries: usize,
}

impl<E: IndexEntry> IndexFile<E> {
    /// Reads the index at `path`. Returns `Ok(None)` when the file is missing or cannot be
    /// trusted (torn length or unsorted keys): the caller rebuilds it.
    pub fn open(path: &Path, max_bytes: u64) -> Result<Option<Self>, LogError> {
        let raw = match fs::read(path) {
            Ok(raw) => raw,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let max_entries = (max_bytes as usize / E::SIZE).max(1);
        if raw.len() % E::SIZE != 0 {
            return Ok(None);
        }
        let entries: Vec<E> = raw.chunks_exact(E::SIZE).map(E::decode).collect();
        if entries.windows(2).any(|w| w[0].key() > w[1].key()) {
            return Ok(None);
        }
        Ok(Some(Self {
            path: path.to_path_buf(),
            written: entries.len(),
            entries,
            unsynced: false,
            max_entries,
        }))
    }

    /// Creates an empty index at `path`, replacing any existing file.
    pub fn create(path: &Path, max_bytes: u64) -> Result<Self, LogError> {
        File::create(path)?;
        Ok(Self {
            path: path.to_path_buf(),
            entries: Vec::new(),
            written: 0,
            unsynced: true,
            max_entries: (max_bytes as usize / E::SIZE).max(1),
        })
    }

    /// Adds an entry (in memory until the next [`Self::write_pending`] or
    /// [`Self::flush`]). Entries must arrive in key order.
    pub fn append(&mut self, entry: E) {
        debug_assert!(self.entries.last().is_none_or(|l| l.key() <= entry.key()));
        self.entries.push(entry);
    }

    /// Writes the entries not yet in the file, in one write, without fsync.
    pub fn write_pending(&mut self) -> Result<(), LogError> {
        if self.written == self.entries.len() {
            return Ok(());
        }
        let mut buf = Vec::with_capacity((self.entries.len() - self.written) * E::SIZE);
        for entry in &self.entries[self.written..] {
            entry.encode(&mut buf);
        }
        OpenOptions::new()
            .append(true)
            .create(true)
            .open(&self.path)?
            .write_all(&buf)?;
        self.written = self.entries.len();
        self.unsynced = true;
        Ok(())
    }

    /// The last entry whose key is at most `key`.
    pub fn floor(&self, key: i64) -> Option<E> {
        let idx = self.entries.partition_point(|e| e.key() <= key);
        idx.checked_sub(1).map(|i| self.entries[i])
    }

    /// The last entry of the prefix for which `in_prefix` holds (for a predicate on a
    /// field that grows with the key, such as an offset entry's position).
    pub fn last_where(&self, in_prefix: impl Fn(&E) -> bool) -> Option<E> {
        let idx = self.entries.partition_point(in_prefix);
        idx.checked_sub(1).map(|i| self.entries[i])
    }

    pub fn last(&self) -> Option<E> {
        self.entries.last().copied()
    }

    pub fn is_full(&self) -> bool {
        self.entries.len() >= self.max_entries
    }

    /// Drops entries whose key is at least `key` (after truncating the log).
    pub fn truncate_from(&mut self, key: i64) -> Result<(), LogError> {
        self.truncate_to(|e| e.key() < key)
    }

    /// Keeps the entries up to the first that fails `keep` (the entries' offsets grow
    /// with their keys, so this can cut by offset an index sorted by timestamp).
    pub fn truncate_to(&mut self, keep: impl Fn(&E) -> bool) -> Result<(), LogError> {
        let keep = self.entries.partition_point(keep);
        self.entries.truncate(keep);
        if keep < self.written {
            self.written = keep;
            OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(&self.path)?
                .set_len((keep * E::SIZE) as u64)?;
            self.unsynced = true;
        }
        Ok(())
    }

    /// Writes the pending entries and fsyncs the file, if anything changed since the last
    /// fsync (an unchanged index costs no system call).
    pub fn flush(&mut self) -> Result<(), LogError> {
        self.write_pending()?;
        if self.unsynced {
            File::open(&self.path)?.sync_data()?;
            self.unsynced = false;
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the pending entries and renames the file to `path` (a cleaned segment's
    /// index taking its place in the log).
    pub fn rename(&mut self, path: PathBuf) -> Result<(), LogError> {
        self.write_pending()?;
        fs::rename(&self.path, &path)?;
        self.path = path;
        Ok(())
    }
}
