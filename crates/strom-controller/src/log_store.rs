//! The metadata log on disk: openraft's `RaftLogStorage` over one append-only file of
//! CRC-framed entries in `<metadata.log.dir>/__cluster_metadata-0/`, and the vote in
//! `quorum-state` (Kafka's file names).
//!
//! Durability is what Raft's safety rests on: entries are fsynced before openraft is
//! told they are flushed (and so before this voter acknowledges them), and a vote is on
//! disk before it is granted. A torn tail (a crash in the middle of an append) is cut
//! off at start-up at the first frame whose length or CRC does not check out.
//!
//! The whole unpurged log is also kept in memory: the metadata log between two
//! snapshots is small (a snapshot is taken once it holds
//! `metadata.log.max.record.bytes.between.snapshots`, 20 MiB by default), and readers
//! (replication to other voters, the state machine) never wait for the disk.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{LogState, RaftLogReader, StorageIOError};
use parking_lot::Mutex;

use crate::types::{Entry, LogId, StorageError, TypeConfig, Vote};

const LOG_FILE: &str = "00000000000000000000.log";
const VOTE_FILE: &str = "quorum-state";
const PURGED_FILE: &str = "purged";
/// A frame: 4-byte length, 4-byte CRC32C of the payload, the payload (one JSON entry).
const FRAME_HEADER: usize = 8;

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    file: File,
    /// Entries by index, with the file position where each one's frame starts.
    entries: BTreeMap<u64, (Entry, u64)>,
    end: u64,
    vote: Option<Vote>,
    purged: Option<LogId>,
}

/// The log store; clones share the same log (openraft's reader is one of them).
#[derive(Debug, Clone)]
pub struct LogStore {
    inner: Arc<Mutex<Inner>>,
    /// The last entry's log id, kept apart from `inner`, whose lock an append holds
    /// through its fsync: a pre-vote's answer reads it, and must not wait for a disk
    /// busy with the brokers' writes.
    last: Arc<Mutex<Option<LogId>>>,
}

fn io_error(e: impl std::fmt::Display) -> StorageError {
    StorageIOError::write_logs(&std::io::Error::other(e.to_string())).into()
}

/// Writes `bytes` to `dir/name` atomically and durably (temp file, fsync, rename, fsync
/// of the directory).
pub(crate) fn write_durably(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    fs::rename(&tmp, dir.join(name))?;
    File::open(dir)?.sync_all()
}

fn frame(entry: &Entry) -> Vec<u8> {
    let payload = serde_json::to_vec(entry).expect("an entry always serializes");
    let mut out = Vec::with_capacity(FRAME_HEADER + payload.len());
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(&crc32c::crc32c(&payload).to_be_bytes());
    out.extend_from_slice(&payload);
    out
}

/// Runs blocking disk work without stalling the async workers of a multi-threaded
/// runtime.
pub(crate) fn blocking<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

/// The vote a voter starts with after a restart: the term and candidate it voted for,
/// never as a leadership granted by a quorum. openraft 0.9 resumes leading at once when
/// the stored vote is its own committed one, but a voter that was killed has usually
/// been replaced meanwhile: until a higher vote reached it, the restarted node called
/// itself the active controller, brokers that fetched metadata from it sent their
/// registrations and heartbeats there, and those waited on writes it could not commit
/// (a restarted broker was unfenced 5.7 s after its start instead of 0.5 s). As a KRaft
/// controller resigns its epoch on restart, it starts as a follower; the term and
/// candidate are kept, which is what Raft needs to never vote twice in one term.
fn restarted(vote: Vote) -> Vote {
    Vote {
        committed: false,
        ..vote
    }
}

impl LogStore {
    /// Opens (or creates) the log in `dir`, cutting off a torn tail.
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        fs::create_dir_all(dir)?;
        let vote = match fs::read(dir.join(VOTE_FILE)) {
            Ok(b) => Some(restarted(
                serde_json::from_slice(&b).map_err(std::io::Error::other)?,
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let purged: Option<LogId> = match fs::read(dir.join(PURGED_FILE)) {
            Ok(b) => Some(serde_json::from_slice(&b).map_err(std::io::Error::other)?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let path = dir.join(LOG_FILE);
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .append(true)
            .open(&path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let mut entries = BTreeMap::new();
        let mut pos = 0usize;
        while bytes.len() - pos >= FRAME_HEADER {
            let len = u32::from_be_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
            let crc = u32::from_be_bytes(bytes[pos + 4..pos + 8].try_into().unwrap());
            let Some(payload) = bytes.get(pos + FRAME_HEADER..pos + FRAME_HEADER + len) else {
                break;
            };
            if crc32c::crc32c(payload) != crc {
                break;
            }
            let Ok(entry) = serde_json::from_slice::<Entry>(payload) else {
                break;
            };
            let index = entry.log_id.index;
            if purged.is_none_or(|p: LogId| index > p.index) {
                entries.insert(index, (entry, pos as u64));
            }
            pos += FRAME_HEADER + len;
        }
        if pos < bytes.len() {
            tracing::warn!(
                file = %path.display(),
                valid_bytes = pos,
                torn_bytes = bytes.len() - pos,
                "metadata log has a torn tail; cutting it off"
            );
            file.set_len(pos as u64)?;
            file.sync_all()?;
        }
        let inner = Inner {
            dir: dir.to_path_buf(),
            file,
            entries,
            end: pos as u64,
            vote,
            purged,
        };
        Ok(Self {
            last: Arc::new(Mutex::new(inner.last_log_id())),
            inner: Arc::new(Mutex::new(inner)),
        })
    }

    /// Appends `entries` (which must follow the last entry) and fsyncs them.
    pub fn write_entries(&self, entries: impl IntoIterator<Item = Entry>) -> std::io::Result<()> {
        let mut inner = self.inner.lock();
        let mut bytes = Vec::new();
        let mut added: Vec<(Entry, u64)> = Vec::new();
        let mut last = inner
            .entries
            .values()
            .next_back()
            .map(|(e, _)| e.log_id.index)
            .or(inner.purged.map(|p| p.index));
        for entry in entries {
            let pos = inner.end + bytes.len() as u64;
            if let Some(last) = last {
                assert_eq!(
                    entry.log_id.index,
                    last + 1,
                    "the metadata log has no holes"
                );
            }
            last = Some(entry.log_id.index);
            bytes.extend_from_slice(&frame(&entry));
            added.push((entry, pos));
        }
        blocking(|| {
            inner.file.write_all(&bytes)?;
            inner.file.sync_data()
        })?;
        inner.end += bytes.len() as u64;
        for (entry, pos) in added {
            inner.entries.insert(entry.log_id.index, (entry, pos));
        }
        *self.last.lock() = inner.last_log_id();
        Ok(())
    }

    /// Bytes on disk of the entries after index `after` (all, when `None`) up to and
    /// including `upto`: what a snapshot at `upto` would cover that one at `after` does
    /// not.
    pub fn bytes_between(&self, after: Option<u64>, upto: u64) -> u64 {
        let inner = self.inner.lock();
        let start = after.map_or(0, |a| a + 1);
        if start > upto {
            return 0;
        }
        let Some((_, (_, first))) = inner.entries.range(start..=upto).next() else {
            return 0;
        };
        let end = inner
            .entries
            .range(upto + 1..)
            .next()
            .map_or(inner.end, |(_, (_, pos))| *pos);
        end - first
    }

    /// The log id of the last entry (or of the last purged one when the log is empty),
    /// as of the last append, truncation or purge that completed.
    pub fn last_log_id(&self) -> Option<LogId> {
        *self.last.lock()
    }
}

impl Inner {
    fn last_log_id(&self) -> Option<LogId> {
        self.entries
            .values()
            .next_back()
            .map(|(e, _)| e.log_id)
            .or(self.purged)
    }

    /// Rewrites the file with only the entries still held (after a purge).
    fn rewrite(&mut self) -> std::io::Result<()> {
        let mut bytes = Vec::new();
        for (entry, pos) in self.entries.values_mut() {
            *pos = bytes.len() as u64;
            bytes.extend_from_slice(&frame(entry));
        }
        write_durably(&self.dir, LOG_FILE, &bytes)?;
        self.file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(self.dir.join(LOG_FILE))?;
        self.end = bytes.len() as u64;
        Ok(())
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + std::fmt::Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let inner = self.inner.lock();
        Ok(inner
            .entries
            .range(range)
            .map(|(_, (e, _))| e.clone())
            .collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let inner = self.inner.lock();
        Ok(LogState {
            last_purged_log_id: inner.purged,
            last_log_id: inner.last_log_id(),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let mut inner = self.inner.lock();
        let bytes = serde_json::to_vec(vote).map_err(io_error)?;
        blocking(|| write_durably(&inner.dir, VOTE_FILE, &bytes))
            .map_err(|e| StorageError::from(StorageIOError::write_vote(&e)))?;
        inner.vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.inner.lock().vote)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        match self.write_entries(entries) {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(std::io::Error::other(e.to_string())));
                Err(StorageIOError::write_logs(&e).into())
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let mut inner = self.inner.lock();
        let Some(&(_, pos)) = inner.entries.get(&log_id.index) else {
            return Ok(());
        };
        inner.entries.split_off(&log_id.index);
        blocking(|| {
            inner.file.set_len(pos)?;
            inner.file.sync_all()
        })
        .map_err(|e| StorageError::from(StorageIOError::write_logs(&e)))?;
        inner.end = pos;
        *self.last.lock() = inner.last_log_id();
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let mut inner = self.inner.lock();
        assert!(
            inner.purged.is_none_or(|p| p.index <= log_id.index),
            "purges only move forward"
        );
        let bytes = serde_json::to_vec(&log_id).map_err(io_error)?;
        blocking(|| write_durably(&inner.dir, PURGED_FILE, &bytes))
            .map_err(|e| StorageError::from(StorageIOError::write_logs(&e)))?;
        inner.purged = Some(log_id);
        let kept = inner.entries.split_off(&(log_id.index + 1));
        inner.entries = kept;
        blocking(|| inner.rewrite())
            .map_err(|e| StorageError::from(StorageIOError::write_logs(&e)))?;
        *self.last.lock() = inner.last_log_id();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, EntryPayload};
    use strom_metadata::{BrokerId, MetadataRecord};

    use super::*;
    use crate::types::MetadataBatch;

    fn entry(index: u64) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 0), index),
            payload: EntryPayload::Normal(MetadataBatch(vec![MetadataRecord::ProducerIds {
                broker_id: BrokerId(1),
                broker_epoch: 0,
                next_producer_id: index as i64 + 1,
            }])),
        }
    }

    async fn indexes(store: &mut LogStore) -> Vec<u64> {
        store
            .try_get_log_entries(0..)
            .await
            .unwrap()
            .iter()
            .map(|e| e.log_id.index)
            .collect()
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn entries_survive_a_reopen_and_a_torn_tail_is_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        let store = LogStore::open(dir.path()).unwrap();
        store.write_entries([entry(0), entry(1), entry(2)]).unwrap();
        store.write_entries([entry(3)]).unwrap();
        drop(store);
        let mut file = OpenOptions::new()
            .append(true)
            .open(dir.path().join(LOG_FILE))
            .unwrap();
        file.write_all(&[0, 0, 0, 40, 1, 2, 3]).unwrap();
        drop(file);
        let mut store = LogStore::open(dir.path()).unwrap();
        assert_eq!(indexes(&mut store).await, vec![0, 1, 2, 3]);
        store.write_entries([entry(4)]).unwrap();
        let mut store = LogStore::open(dir.path()).unwrap();
        assert_eq!(
            indexes(&mut store).await,
            vec![0, 1, 2, 3, 4],
            "appends after the cut are readable"
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_restarted_leader_keeps_its_vote_but_not_its_leadership() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = LogStore::open(dir.path()).unwrap();
        store.save_vote(&Vote::new_committed(7, 1)).await.unwrap();
        assert_eq!(
            store.read_vote().await.unwrap(),
            Some(Vote::new_committed(7, 1))
        );
        drop(store);
        let mut store = LogStore::open(dir.path()).unwrap();
        assert_eq!(store.read_vote().await.unwrap(), Some(Vote::new(7, 1)));
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn truncate_and_purge_are_durable() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = LogStore::open(dir.path()).unwrap();
        let last = |store: &LogStore| store.last_log_id().map(|l| l.index);
        assert_eq!(last(&store), None);
        store.write_entries((0..6).map(entry)).unwrap();
        assert_eq!(last(&store), Some(5));
        store.truncate(entry(4).log_id).await.unwrap();
        assert_eq!(last(&store), Some(3));
        store.purge(entry(1).log_id).await.unwrap();
        assert_eq!(last(&store), Some(3));
        let vote = Vote::new_committed(3, 2);
        store.save_vote(&vote).await.unwrap();
        let mut store = LogStore::open(dir.path()).unwrap();
        assert_eq!(indexes(&mut store).await, vec![2, 3]);
        assert_eq!(
            store.read_vote().await.unwrap(),
            Some(Vote {
                committed: false,
                ..vote
            }),
            "the term and candidate survive; a leadership is not resumed"
        );
        let state = store.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id.map(|l| l.index), Some(1));
        assert_eq!(state.last_log_id.map(|l| l.index), Some(3));
        assert_eq!(last(&store), Some(3));
        store.write_entries([entry(4)]).unwrap();
        assert_eq!(last(&store), Some(4));
        store.purge(entry(4).log_id).await.unwrap();
        assert_eq!(
            last(&store),
            Some(4),
            "with every entry purged, the last purged one is the last log id"
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn bytes_between_two_indexes_are_the_frames_between_them() {
        let dir = tempfile::tempdir().unwrap();
        let store = LogStore::open(dir.path()).unwrap();
        store.write_entries((0..5).map(entry)).unwrap();
        let one = frame(&entry(0)).len() as u64;
        assert_eq!(store.bytes_between(None, 4), 5 * one);
        assert_eq!(store.bytes_between(Some(1), 3), 2 * one);
        assert_eq!(store.bytes_between(Some(3), 3), 0);
        assert_eq!(store.bytes_between(Some(4), 9), 0);
    }

    #[tokio::test(flavor = "multi_thread")]
    #[should_panic(expected = "no holes")]
    async fn a_hole_is_a_bug() {
        let dir = tempfile::tempdir().unwrap();
        let store = LogStore::open(dir.path()).unwrap();
        store.write_entries([entry(0), entry(2)]).unwrap();
    }
}
