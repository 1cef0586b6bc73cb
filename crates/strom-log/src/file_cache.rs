//! The bounded cache of open segment files shared by every partition log of a broker.
//!
//! A broker may host tens of thousands of segments but the process may only hold
//! `RLIMIT_NOFILE` descriptors (20,000 on the development machine and in CI), so segments
//! do not keep their `.log` open: they ask this cache for it on each read or append, and
//! the cache keeps at most `capacity` files open, closing the least recently used one when
//! it must open another. Descriptors in use are then bounded by activity (the files touched
//! recently), not by the amount of data. Index files are not cached at all: they are read
//! once into memory and opened only for the moment of a flush (see `index_file.rs`).
//!
//! A caller holds the returned `Arc<File>` only for one operation (for a fetch sent from
//! the file, until its response is written); an evicted file whose `Arc` is still held
//! closes when that operation drops it, so the overshoot is bounded by the operations in
//! flight.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// Identifies one cached file (one segment); never reused within a process.
pub type FileId = u64;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Allocates the id a segment uses for its `.log` in the cache.
pub fn new_file_id() -> FileId {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

#[derive(Debug, Default)]
struct Entries {
    /// Open files by id, with the tick of their last use.
    open: HashMap<FileId, (Arc<File>, u64)>,
    /// Ids by last use, oldest first: the eviction order.
    by_use: BTreeMap<u64, FileId>,
    tick: u64,
    opened: u64,
}

/// A least-recently-used cache of open files, bounded by `capacity`.
#[derive(Debug)]
pub struct FileCache {
    capacity: usize,
    entries: Mutex<Entries>,
}

impl FileCache {
    /// A cache holding at most `capacity` (at least 1) files open.
    pub fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Self {
            capacity: capacity.max(1),
            entries: Mutex::new(Entries::default()),
        })
    }

    /// The file `id` at `path`, opened for reading and appending if it is not open.
    pub fn get(&self, id: FileId, path: &Path) -> std::io::Result<Arc<File>> {
        let mut e = self.entries.lock();
        e.tick += 1;
        let tick = e.tick;
        if let Some((file, used)) = e.open.get_mut(&id) {
            let (file, old) = (file.clone(), std::mem::replace(used, tick));
            e.by_use.remove(&old);
            e.by_use.insert(tick, id);
            return Ok(file);
        }
        while e.open.len() >= self.capacity {
            let Some((_, oldest)) = e.by_use.pop_first() else {
                break;
            };
            e.open.remove(&oldest);
        }
        let file = Arc::new(OpenOptions::new().read(true).append(true).open(path)?);
        e.open.insert(id, (file.clone(), tick));
        e.by_use.insert(tick, id);
        e.opened += 1;
        Ok(file)
    }

    /// Closes file `id` if it is open (the segment was deleted, truncated away or dropped),
    /// so a deleted file's descriptor and disk space are not kept until eviction.
    pub fn forget(&self, id: FileId) {
        let mut e = self.entries.lock();
        if let Some((_, used)) = e.open.remove(&id) {
            e.by_use.remove(&used);
        }
    }

    /// How many files are open now.
    pub fn open_count(&self) -> usize {
        self.entries.lock().open.len()
    }

    /// How many times a file had to be opened (misses), for metrics and tests.
    pub fn opened_total(&self) -> u64 {
        self.entries.lock().opened
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_at_most_capacity_open_and_evicts_the_least_recently_used() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(2);
        let paths: Vec<_> = (0..3).map(|i| dir.path().join(format!("{i}"))).collect();
        for p in &paths {
            File::create(p).unwrap();
        }
        let ids: Vec<_> = (0..3).map(|_| new_file_id()).collect();
        cache.get(ids[0], &paths[0]).unwrap();
        cache.get(ids[1], &paths[1]).unwrap();
        cache.get(ids[0], &paths[0]).unwrap();
        cache.get(ids[2], &paths[2]).unwrap();
        assert_eq!(cache.open_count(), 2);
        assert_eq!(cache.opened_total(), 3);
        cache.get(ids[0], &paths[0]).unwrap();
        assert_eq!(cache.opened_total(), 3, "0 was used more recently than 1");
        cache.get(ids[1], &paths[1]).unwrap();
        assert_eq!(cache.opened_total(), 4, "1 had been evicted");
        cache.forget(ids[1]);
        assert_eq!(cache.open_count(), 1);
    }
}
