//! The leader epoch cache of one partition: for each leader epoch, the offset of the first
//! record that leader appended (Kafka's `LeaderEpochFileCache`).
//!
//! A follower asks the leader where the epoch of its last record ended (OffsetForLeaderEpoch)
//! and truncates there, so it drops records that a deposed leader appended but never
//! replicated, rather than trusting the high watermark (KIP-101). The cache is persisted as
//! Kafka's `leader-epoch-checkpoint` text file in the partition directory: a version line
//! `0`, a line with the entry count, then one `<epoch> <start offset>` line per entry. It is
//! replaced atomically (write, fsync, rename), and only when it changes — except that the
//! epoch a new leader starts at its log end ([`LeaderEpochCache::assign_at_end`]) is
//! written with the first batch of that epoch, not before: a broker elected leader of
//! thousands of partitions at once (a single node's start) wrote and fsynced thousands of
//! files before serving. The entry is in memory (and in the clean-shutdown record) at once,
//! and on disk before any batch it describes.

use std::fs;
use std::path::{Path, PathBuf};

use crate::LogError;

/// Kafka's file name for the persisted cache.
pub const FILE_NAME: &str = "leader-epoch-checkpoint";
const VERSION: &str = "0";

/// Kafka's `UNDEFINED_EPOCH`: no epoch is known.
pub const UNDEFINED_EPOCH: i32 = -1;
/// Kafka's `UNDEFINED_EPOCH_OFFSET`: no end offset is known for the requested epoch.
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

/// The first offset a leader epoch wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

/// Leader epochs and their start offsets, oldest first. Epochs strictly grow and start
/// offsets never decrease along the entries.
#[derive(Debug)]
pub struct LeaderEpochCache {
    path: PathBuf,
    entries: Vec<EpochEntry>,
    /// The last entry is not written yet ([`Self::assign_at_end`]).
    pending: bool,
}

impl LeaderEpochCache {
    /// The cache of the partition in `dir` as the clean-shutdown record holds it: the
    /// file says the same (but for an epoch a leader started and wrote nothing in, which
    /// only the record holds) and is not read.
    pub fn recorded(dir: &Path, entries: Vec<EpochEntry>) -> Self {
        Self {
            path: dir.join(FILE_NAME),
            entries,
            pending: false,
        }
    }

    /// Reads the cache of the partition in `dir`; a missing file is an empty cache.
    pub fn load(dir: &Path) -> Result<Self, LogError> {
        let path = dir.join(FILE_NAME);
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Self {
                    path,
                    entries: Vec::new(),
                    pending: false,
                })
            }
            Err(e) => return Err(e.into()),
        };
        let entries = parse(&text).map_err(|reason| LogError::CorruptFile {
            path: path.display().to_string(),
            reason,
        })?;
        Ok(Self {
            path,
            entries,
            pending: false,
        })
    }

    /// Records that `epoch` starts at `start_offset`, as Kafka's `assign` does: nothing if
    /// the latest entry is already this epoch starting no later; otherwise the entries
    /// that conflict with the new one (an epoch at least as large, or a start offset at
    /// least as large) are removed before it is appended, so a new leader's history
    /// replaces whatever a deposed one left beyond it.
    ///
    /// Panics on a negative epoch or offset: a caller bug (Kafka throws for it too).
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> Result<(), LogError> {
        if self.assign_in_memory(epoch, start_offset) {
            self.persist()?;
        }
        Ok(())
    }

    /// [`Self::assign`] for an epoch a new leader starts at its log end: written with the
    /// first batch of the epoch ([`Self::write_pending`]). Entries it replaces that start
    /// at the same offset (epochs in which nothing was written, as a restarted broker's
    /// last one) go with it; removing one that starts beyond it is a truncation, written
    /// at once.
    pub fn assign_at_end(&mut self, epoch: i32, start_offset: i64) -> Result<(), LogError> {
        let truncates = self.entries.iter().any(|e| e.start_offset > start_offset);
        if !self.assign_in_memory(epoch, start_offset) {
            return Ok(());
        }
        if truncates {
            self.persist()
        } else {
            self.pending = true;
            Ok(())
        }
    }

    /// Writes an entry [`Self::assign_at_end`] left in memory: called before any batch
    /// is appended.
    pub fn write_pending(&mut self) -> Result<(), LogError> {
        if self.pending {
            self.persist()?;
        }
        Ok(())
    }

    /// Applies an assign to the entries; returns whether they changed.
    fn assign_in_memory(&mut self, epoch: i32, start_offset: i64) -> bool {
        assert!(
            epoch >= 0 && start_offset >= 0,
            "invalid leader epoch entry: epoch {epoch} at offset {start_offset}"
        );
        let update_needed = self
            .entries
            .last()
            .is_none_or(|l| l.epoch != epoch || start_offset < l.start_offset);
        if !update_needed {
            return false;
        }
        let keep = self
            .entries
            .iter()
            .rposition(|e| e.epoch < epoch && e.start_offset < start_offset)
            .map_or(0, |i| i + 1);
        let removed = self.entries.split_off(keep);
        if removed.len() > 1
            || removed
                .first()
                .is_some_and(|r| r.start_offset != start_offset)
        {
            tracing::warn!(path = %self.path.display(), epoch, start_offset, ?removed, "new leader epoch entry truncated conflicting entries");
        }
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        self.assert_monotonic();
        true
    }

    /// The newest epoch, if any.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// Kafka's `endOffsetFor` (the answer to OffsetForLeaderEpoch): the largest epoch at
    /// most `requested_epoch` and the offset where it ended, which is the start offset of
    /// the first later epoch, or `log_end_offset` for the latest epoch. An epoch older than
    /// every entry gets itself back with the first entry's start offset (its records were
    /// deleted, and the follower must not keep anything below where the leader's history
    /// begins); an undefined, unknown-newer epoch or an empty cache gets
    /// ([`UNDEFINED_EPOCH`], [`UNDEFINED_EPOCH_OFFSET`]).
    pub fn end_offset_for(&self, requested_epoch: i32, log_end_offset: i64) -> (i32, i64) {
        let undefined = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        if requested_epoch == UNDEFINED_EPOCH {
            return undefined;
        }
        if self.latest_epoch() == Some(requested_epoch) {
            return (requested_epoch, log_end_offset);
        }
        let higher = self.entries.partition_point(|e| e.epoch <= requested_epoch);
        let Some(next) = self.entries.get(higher) else {
            return undefined;
        };
        match higher.checked_sub(1).map(|i| self.entries[i]) {
            Some(floor) => (floor.epoch, next.start_offset),
            None => (requested_epoch, next.start_offset),
        }
    }

    /// Removes the entries starting at or after `end_offset`, after the log was truncated
    /// there: the cache must never name offsets the log does not hold.
    pub fn truncate_from_end(&mut self, end_offset: i64) -> Result<(), LogError> {
        let keep = self
            .entries
            .partition_point(|e| e.start_offset < end_offset);
        if keep == self.entries.len() {
            return Ok(());
        }
        self.entries.truncate(keep);
        self.persist()
    }

    /// Removes the entries wholly below `start_offset` (the new log start) and moves the
    /// entry covering it to start there, so the cache stays bounded as the log is deleted
    /// from the front.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> Result<(), LogError> {
        let covering = self
            .entries
            .partition_point(|e| e.start_offset <= start_offset);
        let Some(first) = covering.checked_sub(1) else {
            return Ok(());
        };
        if first == 0 && self.entries[0].start_offset == start_offset {
            return Ok(());
        }
        self.entries.drain(..first);
        self.entries[0].start_offset = start_offset;
        self.assert_monotonic();
        self.persist()
    }

    /// Forgets every entry (the log was emptied).
    pub fn clear(&mut self) -> Result<(), LogError> {
        if self.entries.is_empty() {
            return Ok(());
        }
        self.entries.clear();
        self.persist()
    }

    fn assert_monotonic(&self) {
        assert!(
            is_monotonic(&self.entries),
            "leader epochs must grow and start offsets never decrease: {:?}",
            self.entries
        );
    }

    fn persist(&mut self) -> Result<(), LogError> {
        let mut text = format!("{VERSION}\n{}\n", self.entries.len());
        for e in &self.entries {
            text.push_str(&format!("{} {}\n", e.epoch, e.start_offset));
        }
        crate::durable_file::replace_atomically(&self.path, text.as_bytes())?;
        self.pending = false;
        Ok(())
    }
}

fn is_monotonic(entries: &[EpochEntry]) -> bool {
    entries
        .windows(2)
        .all(|w| w[0].epoch < w[1].epoch && w[0].start_offset <= w[1].start_offset)
}

/// Parses the checkpoint text, or says what is wrong with it.
fn parse(text: &str) -> Result<Vec<EpochEntry>, String> {
    let mut lines = text.lines();
    if lines.next() != Some(VERSION) {
        return Err("unknown version".to_string());
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.parse().ok())
        .ok_or("missing entry count")?;
    let entries = lines
        .map(|line| {
            let (epoch, offset) = line.split_once(' ').ok_or(line)?;
            Ok(EpochEntry {
                epoch: epoch.parse().map_err(|_| line)?,
                start_offset: offset.parse().map_err(|_| line)?,
            })
        })
        .collect::<Result<Vec<_>, &str>>()
        .map_err(|line| format!("malformed entry {line:?}"))?;
    if entries.len() != count {
        return Err(format!("{} entries, header says {count}", entries.len()));
    }
    if entries.iter().any(|e| e.epoch < 0 || e.start_offset < 0) || !is_monotonic(&entries) {
        return Err("entries out of order".to_string());
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(dir: &Path, entries: &[(i32, i64)]) -> LeaderEpochCache {
        let mut cache = LeaderEpochCache::load(dir).unwrap();
        for &(epoch, offset) in entries {
            cache.assign(epoch, offset).unwrap();
        }
        cache
    }

    fn pairs(cache: &LeaderEpochCache) -> Vec<(i32, i64)> {
        cache
            .entries()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect()
    }

    #[test]
    fn assign_appends_newer_epochs_and_ignores_the_current_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = cache(dir.path(), &[(1, 0), (1, 5), (3, 10), (3, 12)]);
        assert_eq!(pairs(&c), [(1, 0), (3, 10)]);
        assert_eq!(c.latest_epoch(), Some(3));
        c.assign(3, 8).unwrap();
        assert_eq!(pairs(&c), [(1, 0), (3, 8)], "same epoch, earlier start");
    }

    #[test]
    fn assign_flushes_conflicting_entries() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = cache(dir.path(), &[(1, 0), (2, 10), (4, 20)]);
        c.assign(5, 15).unwrap();
        assert_eq!(
            pairs(&c),
            [(1, 0), (2, 10), (5, 15)],
            "start offset conflict"
        );
        c.assign(3, 30).unwrap();
        assert_eq!(pairs(&c), [(1, 0), (2, 10), (3, 30)], "epoch conflict");
        c.assign(0, 0).unwrap();
        assert_eq!(pairs(&c), [(0, 0)]);
    }

    #[test]
    fn end_offset_for_follows_kafka() {
        let dir = tempfile::tempdir().unwrap();
        let empty = cache(dir.path(), &[]);
        assert_eq!(empty.end_offset_for(0, 50), (-1, -1));
        let c = cache(dir.path(), &[(2, 10), (4, 20), (7, 30)]);
        assert_eq!(c.end_offset_for(7, 50), (7, 50), "latest: the log end");
        assert_eq!(c.end_offset_for(4, 50), (4, 30));
        assert_eq!(c.end_offset_for(5, 50), (4, 30), "unknown epoch: its floor");
        assert_eq!(c.end_offset_for(2, 50), (2, 20));
        assert_eq!(c.end_offset_for(1, 50), (1, 10), "older than all");
        assert_eq!(c.end_offset_for(8, 50), (-1, -1), "newer than all");
        assert_eq!(c.end_offset_for(UNDEFINED_EPOCH, 50), (-1, -1));
    }

    #[test]
    fn truncation_from_either_end() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = cache(dir.path(), &[(1, 0), (2, 10), (4, 20), (7, 30)]);
        c.truncate_from_end(30).unwrap();
        assert_eq!(pairs(&c), [(1, 0), (2, 10), (4, 20)]);
        c.truncate_from_end(25).unwrap();
        assert_eq!(pairs(&c), [(1, 0), (2, 10), (4, 20)], "4 starts below 25");
        c.truncate_from_start(15).unwrap();
        assert_eq!(pairs(&c), [(2, 15), (4, 20)]);
        c.truncate_from_start(20).unwrap();
        assert_eq!(pairs(&c), [(4, 20)]);
        c.truncate_from_start(5).unwrap();
        assert_eq!(pairs(&c), [(4, 20)], "nothing below");
        c.clear().unwrap();
        assert!(c.entries().is_empty());
        assert_eq!(pairs(&LeaderEpochCache::load(dir.path()).unwrap()), []);
    }

    #[test]
    fn persists_in_kafkas_format_and_survives_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        cache(dir.path(), &[(0, 0), (3, 42)]);
        let path = dir.path().join(FILE_NAME);
        assert_eq!(fs::read_to_string(&path).unwrap(), "0\n2\n0 0\n3 42\n");
        assert_eq!(
            pairs(&LeaderEpochCache::load(dir.path()).unwrap()),
            [(0, 0), (3, 42)]
        );
        assert!(!dir.path().join("leader-epoch-checkpoint.tmp").exists());
    }

    #[test]
    fn an_unchanged_cache_is_not_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = cache(dir.path(), &[(1, 0)]);
        let path = dir.path().join(FILE_NAME);
        fs::remove_file(&path).unwrap();
        c.assign(1, 7).unwrap();
        c.truncate_from_end(5).unwrap();
        c.truncate_from_start(0).unwrap();
        assert!(!path.exists());
    }

    #[test]
    fn a_corrupt_file_is_reported_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        for text in ["1\n0\n", "0\n2\n0 0\n", "0\n1\nx 0\n", "0\n2\n3 0\n1 5\n"] {
            fs::write(&path, text).unwrap();
            match LeaderEpochCache::load(dir.path()) {
                Err(LogError::CorruptFile { path: p, .. }) => {
                    assert_eq!(p, path.display().to_string())
                }
                other => panic!("{text:?}: expected CorruptFile, got {other:?}"),
            }
        }
    }

    #[test]
    fn a_new_leaders_epoch_is_written_with_its_first_batch() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = cache(dir.path(), &[(0, 0), (3, 10)]);
        c.assign_at_end(4, 20).unwrap();
        assert_eq!(pairs(&c), vec![(0, 0), (3, 10), (4, 20)]);
        assert_eq!(
            pairs(&LeaderEpochCache::load(dir.path()).unwrap()),
            vec![(0, 0), (3, 10)],
            "not on disk before a batch of it"
        );
        c.write_pending().unwrap();
        assert_eq!(
            pairs(&LeaderEpochCache::load(dir.path()).unwrap()),
            pairs(&c)
        );
        c.assign_at_end(6, 20).unwrap();
        assert_eq!(pairs(&c), vec![(0, 0), (3, 10), (6, 20)]);
        assert_eq!(
            pairs(&LeaderEpochCache::load(dir.path()).unwrap()),
            vec![(0, 0), (3, 10), (4, 20)],
            "an epoch in which nothing was written is replaced with the next batch"
        );
        c.assign_at_end(7, 15).unwrap();
        assert_eq!(
            pairs(&LeaderEpochCache::load(dir.path()).unwrap()),
            vec![(0, 0), (3, 10), (7, 15)],
            "an assign that removes an epoch starting beyond it is written at once"
        );
    }
}
