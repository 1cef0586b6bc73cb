//! Idempotent-producer state of one partition: for each producer id, its epoch and the
//! sequence numbers and offsets of its last five batches (Kafka's
//! `max.in.flight.requests.per.connection` ceiling for idempotence).
//!
//! This is what lets a retried batch be acknowledged with its original offset instead of
//! being appended twice, and a gap be refused with OUT_OF_ORDER_SEQUENCE_NUMBER. The state
//! survives restarts through `<offset>.snapshot` files: the log writes one on clean
//! shutdown and on segment roll, and on start-up replays only the batch headers after the
//! newest snapshot.

use std::collections::{HashMap, VecDeque};
use std::fs;
use std::os::unix::fs::FileExt;
use std::path::Path;

use strom_wire::RecordBatchHeader;
use thiserror::Error;

use crate::{offset_file_name, LogError};

/// Batches remembered per producer for duplicate detection.
pub const BATCHES_RETAINED: usize = 5;
/// Version 2 carries the offset the snapshot was taken at inside its checksummed bytes:
/// a recycled snapshot file overwritten without fsync can, after a power loss, hold the
/// older snapshot's bytes under the new name, whole and with a valid CRC, and only the
/// offset tells them apart. Version 1 files (no offset) are still read.
const SNAPSHOT_VERSION: u16 = 2;
const SNAPSHOT_VERSION_WITHOUT_OFFSET: u16 = 1;
/// The fewest bytes one producer takes in a snapshot: id, epoch and batch count.
const MIN_PRODUCER_BYTES: usize = 8 + 2 + 1;

/// Why a producer's batch is refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProducerStateError {
    /// A sequence number that does not follow the last one (OUT_OF_ORDER_SEQUENCE_NUMBER).
    #[error("out of order sequence number for producer {producer_id} epoch {producer_epoch}: expected {expected}, found {found}")]
    OutOfOrderSequence {
        producer_id: i64,
        producer_epoch: i16,
        expected: i32,
        found: i32,
    },
    /// An epoch older than the producer's current one (INVALID_PRODUCER_EPOCH).
    #[error("producer {producer_id} epoch {found} is older than current epoch {current}")]
    InvalidProducerEpoch {
        producer_id: i64,
        current: i16,
        found: i16,
    },
}

/// What the log remembers of one appended batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_sequence: i32,
    pub last_sequence: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<BatchMetadata>,
}

/// The verdict on an incoming idempotent batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Append it.
    Append,
    /// Already appended: acknowledge with the original metadata, do not append again.
    Duplicate(BatchMetadata),
}

/// Producer state of one partition.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ProducerStateManager {
    producers: HashMap<i64, ProducerEntry>,
}

fn next_sequence(sequence: i32) -> i32 {
    if sequence == i32::MAX {
        0
    } else {
        sequence + 1
    }
}

impl ProducerStateManager {
    /// Checks a batch against its producer's state without changing it.
    pub fn check(&self, header: &RecordBatchHeader) -> Result<SequenceCheck, ProducerStateError> {
        if !header.has_producer_id() {
            return Ok(SequenceCheck::Append);
        }
        let producer_id = header.producer_id;
        let found = header.base_sequence;
        // A producer this log does not know may start at any sequence, as in Kafka since
        // KIP-360: its earlier batches may be gone with retention or DeleteRecords, or
        // never have reached this replica before it became leader. Refusing would make
        // the client bump its epoch and send again what may already be written elsewhere.
        let Some(entry) = self.producers.get(&producer_id) else {
            return Ok(SequenceCheck::Append);
        };
        if header.producer_epoch < entry.epoch {
            return Err(ProducerStateError::InvalidProducerEpoch {
                producer_id,
                current: entry.epoch,
                found: header.producer_epoch,
            });
        }
        if header.producer_epoch > entry.epoch {
            return if found == 0 {
                Ok(SequenceCheck::Append)
            } else {
                Err(ProducerStateError::OutOfOrderSequence {
                    producer_id,
                    producer_epoch: header.producer_epoch,
                    expected: 0,
                    found,
                })
            };
        }
        if let Some(dup) = entry
            .batches
            .iter()
            .find(|b| b.first_sequence == found && b.last_sequence == header.last_sequence())
        {
            return Ok(SequenceCheck::Duplicate(*dup));
        }
        let expected = entry
            .batches
            .back()
            .map_or(0, |b| next_sequence(b.last_sequence));
        if found != expected {
            return Err(ProducerStateError::OutOfOrderSequence {
                producer_id,
                producer_epoch: header.producer_epoch,
                expected,
                found,
            });
        }
        Ok(SequenceCheck::Append)
    }

    /// Records an appended batch (its header carries the assigned base offset).
    pub fn update(&mut self, header: &RecordBatchHeader) {
        if !header.has_producer_id() {
            return;
        }
        let entry = self
            .producers
            .entry(header.producer_id)
            .or_insert_with(|| ProducerEntry {
                epoch: header.producer_epoch,
                batches: VecDeque::with_capacity(BATCHES_RETAINED),
            });
        if header.producer_epoch != entry.epoch {
            entry.epoch = header.producer_epoch;
            entry.batches.clear();
        }
        if entry.batches.len() == BATCHES_RETAINED {
            entry.batches.pop_front();
        }
        entry.batches.push_back(BatchMetadata {
            first_sequence: header.base_sequence,
            last_sequence: header.last_sequence(),
            first_offset: header.base_offset,
            last_offset: header.last_offset(),
            max_timestamp: header.max_timestamp,
        });
    }

    /// Forgets producers whose newest batch is older than `min_timestamp`
    /// (`producer.id.expiration.ms`), so the state stays bounded.
    pub fn expire(&mut self, min_timestamp: i64) {
        self.producers.retain(|_, e| {
            e.batches
                .back()
                .is_some_and(|b| b.max_timestamp >= min_timestamp)
        });
    }

    pub fn len(&self) -> usize {
        self.producers.len()
    }

    /// Each producer's id, epoch and newest batch, by id (what `kafka-dump-log` prints
    /// of a snapshot).
    pub fn newest_batches(&self) -> Vec<(i64, i16, Option<BatchMetadata>)> {
        let mut out: Vec<_> = self
            .producers
            .iter()
            .map(|(&id, e)| (id, e.epoch, e.batches.back().copied()))
            .collect();
        out.sort_unstable_by_key(|(id, _, _)| *id);
        out
    }

    /// The last offset of each producer's newest batch (Kafka's
    /// `lastRecordsOfActiveProducers`): the batch the log cleaner keeps, emptied if need
    /// be, so that the producer's sequence and epoch survive cleaning.
    pub fn last_batch_offsets(&self) -> HashMap<i64, i64> {
        self.producers
            .iter()
            .filter_map(|(&id, e)| Some((id, e.batches.back()?.last_offset)))
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// The state at `offset` (the log end offset it reflects) as a snapshot's bytes
    /// (version, offset, producers, CRC32C), as [`Self::decode`] reads them: the
    /// `.snapshot` files and the entries of a clean shutdown's record hold the same bytes.
    pub fn encode(&self, offset: i64) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        out.extend_from_slice(&offset.to_be_bytes());
        out.extend_from_slice(&(self.producers.len() as u32).to_be_bytes());
        for (pid, entry) in &self.producers {
            out.extend_from_slice(&pid.to_be_bytes());
            out.extend_from_slice(&entry.epoch.to_be_bytes());
            out.push(entry.batches.len() as u8);
            for b in &entry.batches {
                out.extend_from_slice(&b.first_sequence.to_be_bytes());
                out.extend_from_slice(&b.last_sequence.to_be_bytes());
                out.extend_from_slice(&b.first_offset.to_be_bytes());
                out.extend_from_slice(&b.last_offset.to_be_bytes());
                out.extend_from_slice(&b.max_timestamp.to_be_bytes());
            }
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    /// Writes a snapshot taken at `offset` (the log end offset it reflects) into `dir`;
    /// with `sync` false the caller makes it durable (`syncfs` at shutdown).
    ///
    /// With `recycle`, the snapshot file taken at that older offset (one the caller is
    /// about to delete) is renamed to the temporary name and overwritten, instead of a
    /// new file being created: at 13,300 partitions a shutdown otherwise allocates an
    /// inode per partition, and on ext4 without a journal each allocation scans for
    /// recently deleted inodes. The older snapshot is gone from the moment of the rename,
    /// which after a crash costs only a longer replay; the new one is named only once it
    /// is whole, as before.
    pub fn write_snapshot(
        &self,
        dir: &Path,
        offset: i64,
        sync: bool,
        recycle: Option<i64>,
    ) -> Result<(), LogError> {
        let out = self.encode(offset);
        let path = dir.join(offset_file_name(offset, "snapshot"));
        let tmp = path.with_extension("snapshot.tmp");
        let recycled = match recycle {
            Some(old) => match fs::rename(dir.join(offset_file_name(old, "snapshot")), &tmp) {
                Ok(()) => true,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
                Err(e) => return Err(e.into()),
            },
            None => false,
        };
        let file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(!recycled)
            .open(&tmp)?;
        file.write_all_at(&out, 0)?;
        if recycled {
            file.set_len(out.len() as u64)?;
        }
        if sync {
            file.sync_all()?;
        }
        fs::rename(&tmp, &path)?;
        Ok(())
    }

    /// Loads the newest valid snapshot at or below `max_offset` among the snapshots at
    /// `offsets` in `dir` (the caller lists the directory once for segments and snapshots),
    /// returning the state and the offset it was taken at. Snapshots above `max_offset`
    /// (from a log that was since truncated) and unreadable ones are ignored.
    pub fn load_latest_snapshot(
        dir: &Path,
        offsets: &[i64],
        max_offset: i64,
    ) -> Result<(Self, i64), LogError> {
        let mut offsets = offsets.to_vec();
        offsets.sort_unstable_by(|a, b| b.cmp(a));
        for offset in offsets.into_iter().filter(|o| *o <= max_offset) {
            let bytes = fs::read(dir.join(offset_file_name(offset, "snapshot")))?;
            if let Some(state) = Self::decode(&bytes, offset) {
                return Ok((state, offset));
            }
            tracing::warn!(offset, dir = %dir.display(), "ignoring corrupt producer snapshot");
        }
        Ok((Self::default(), 0))
    }

    /// Deletes the snapshot taken at `offset` in `dir`; a missing one is no error.
    pub fn delete_snapshot(dir: &Path, offset: i64) -> Result<(), LogError> {
        match fs::remove_file(dir.join(offset_file_name(offset, "snapshot"))) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }

    /// Reads [`Self::encode`]'s bytes of the state at `offset`; `None` if they are torn,
    /// corrupt, of another version, or of another offset.
    pub fn decode(bytes: &[u8], offset: i64) -> Option<Self> {
        let (body, crc) = bytes.split_at(bytes.len().checked_sub(4)?);
        if crc32c::crc32c(body).to_be_bytes() != crc {
            return None;
        }
        let mut r = Reader(body);
        let taken_at = match r.u16()? {
            SNAPSHOT_VERSION => r.i64()?,
            SNAPSHOT_VERSION_WITHOUT_OFFSET => offset,
            _ => return None,
        };
        if taken_at != offset {
            return None;
        }
        let count = r.u32()?;
        let mut producers =
            HashMap::with_capacity((count as usize).min(r.0.len() / MIN_PRODUCER_BYTES));
        for _ in 0..count {
            let pid = r.i64()?;
            let epoch = r.u16()? as i16;
            let n = r.u8()?;
            let mut batches = VecDeque::with_capacity(BATCHES_RETAINED);
            for _ in 0..n {
                batches.push_back(BatchMetadata {
                    first_sequence: r.u32()? as i32,
                    last_sequence: r.u32()? as i32,
                    first_offset: r.i64()?,
                    last_offset: r.i64()?,
                    max_timestamp: r.i64()?,
                });
            }
            producers.insert(pid, ProducerEntry { epoch, batches });
        }
        Some(Self { producers })
    }
}

/// A cursor over snapshot bytes that returns `None` when they run out.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take().map(u16::from_be_bytes)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_be_bytes)
    }
    fn i64(&mut self) -> Option<i64> {
        self.take().map(i64::from_be_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(pid: i64, epoch: i16, seq: i32, count: i32, base_offset: i64) -> RecordBatchHeader {
        RecordBatchHeader {
            base_offset,
            batch_length: 49,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: count - 1,
            base_timestamp: 0,
            max_timestamp: 100,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            record_count: count,
        }
    }

    #[test]
    fn an_unknown_producer_starts_at_any_sequence() {
        let mut state = ProducerStateManager::default();
        let first = header(7, 0, 40, 2, 10);
        assert_eq!(state.check(&first), Ok(SequenceCheck::Append));
        state.update(&first);
        assert_eq!(
            state.check(&header(7, 0, 44, 1, -1)),
            Err(ProducerStateError::OutOfOrderSequence {
                producer_id: 7,
                producer_epoch: 0,
                expected: 42,
                found: 44
            })
        );
    }

    #[test]
    fn accepts_in_order_detects_duplicates_and_refuses_gaps() {
        let mut state = ProducerStateManager::default();
        let first = header(7, 0, 0, 3, 10);
        assert_eq!(state.check(&first), Ok(SequenceCheck::Append));
        state.update(&first);
        let dup = header(7, 0, 0, 3, -1);
        match state.check(&dup).unwrap() {
            SequenceCheck::Duplicate(meta) => assert_eq!(meta.first_offset, 10),
            other => panic!("expected duplicate, got {other:?}"),
        }
        assert_eq!(
            state.check(&header(7, 0, 5, 1, -1)),
            Err(ProducerStateError::OutOfOrderSequence {
                producer_id: 7,
                producer_epoch: 0,
                expected: 3,
                found: 5
            })
        );
        assert_eq!(
            state.check(&header(7, 0, 3, 1, -1)),
            Ok(SequenceCheck::Append)
        );
    }

    #[test]
    fn fences_older_epochs_and_resets_on_newer() {
        let mut state = ProducerStateManager::default();
        state.update(&header(7, 2, 0, 1, 0));
        assert!(matches!(
            state.check(&header(7, 1, 1, 1, -1)),
            Err(ProducerStateError::InvalidProducerEpoch { .. })
        ));
        assert_eq!(
            state.check(&header(7, 3, 0, 1, -1)),
            Ok(SequenceCheck::Append)
        );
        assert!(state.check(&header(7, 3, 4, 1, -1)).is_err());
    }

    #[test]
    fn expiry_forgets_only_producers_idle_since_before_the_cutoff() {
        let mut state = ProducerStateManager::default();
        let mut old = header(1, 0, 0, 1, 0);
        old.max_timestamp = 1_000;
        let mut recent = header(2, 0, 0, 1, 1);
        recent.max_timestamp = 5_000;
        state.update(&old);
        state.update(&recent);
        state.expire(2_000);
        assert_eq!(state.len(), 1);
        assert_eq!(
            state.check(&header(2, 0, 1, 1, -1)),
            Ok(SequenceCheck::Append)
        );
        assert!(
            matches!(
                state.check(&header(2, 0, 0, 1, -1)),
                Ok(SequenceCheck::Duplicate(_))
            ),
            "producer 2 is remembered"
        );
        assert_eq!(
            state.check(&header(1, 0, 0, 1, -1)),
            Ok(SequenceCheck::Append),
            "producer 1 was forgotten: its batch is no longer known"
        );
    }

    #[test]
    fn a_recycled_snapshot_file_keeps_its_inode_and_holds_only_the_new_state() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let mut state = ProducerStateManager::default();
        for pid in 0..20 {
            state.update(&header(pid, 0, 0, 1, pid));
        }
        state.write_snapshot(dir.path(), 20, true, None).unwrap();
        let old = dir.path().join(offset_file_name(20, "snapshot"));
        let inode = fs::metadata(&old).unwrap().ino();
        let smaller = ProducerStateManager::default();
        smaller
            .write_snapshot(dir.path(), 30, true, Some(20))
            .unwrap();
        assert!(!old.exists());
        let new = dir.path().join(offset_file_name(30, "snapshot"));
        assert_eq!(fs::metadata(&new).unwrap().ino(), inode);
        let (loaded, at) =
            ProducerStateManager::load_latest_snapshot(dir.path(), &[30], 100).unwrap();
        assert_eq!((loaded, at), (smaller, 30));
        // Nothing to recycle: a new file, as without.
        state
            .write_snapshot(dir.path(), 40, false, Some(35))
            .unwrap();
        let (loaded, at) =
            ProducerStateManager::load_latest_snapshot(dir.path(), &[30, 40], 100).unwrap();
        assert_eq!((loaded, at), (state, 40));
    }

    #[test]
    fn snapshot_round_trips_and_ignores_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = ProducerStateManager::default();
        for i in 0..7 {
            state.update(&header(1, 0, i, 1, i as i64));
        }
        state.update(&header(2, 4, 0, 2, 7));
        state.write_snapshot(dir.path(), 9, true, None).unwrap();
        let (loaded, at) =
            ProducerStateManager::load_latest_snapshot(dir.path(), &[9], 100).unwrap();
        assert_eq!(at, 9);
        assert_eq!(loaded, state);
        let path = dir.path().join(offset_file_name(9, "snapshot"));
        let mut bytes = fs::read(&path).unwrap();
        bytes[3] ^= 1;
        fs::write(&path, bytes).unwrap();
        let (loaded, at) =
            ProducerStateManager::load_latest_snapshot(dir.path(), &[9], 100).unwrap();
        assert_eq!((loaded.len(), at), (0, 0));
    }

    /// What a power loss can leave of a recycled file overwritten without fsync: the
    /// older snapshot's bytes, whole, under the newer name.
    #[test]
    fn a_snapshot_holding_another_offsets_state_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let mut older = ProducerStateManager::default();
        older.update(&header(1, 0, 0, 1, 0));
        older.write_snapshot(dir.path(), 1, true, None).unwrap();
        let stale = fs::read(dir.path().join(offset_file_name(1, "snapshot"))).unwrap();
        fs::write(dir.path().join(offset_file_name(5, "snapshot")), stale).unwrap();
        let (loaded, at) =
            ProducerStateManager::load_latest_snapshot(dir.path(), &[1, 5], 100).unwrap();
        assert_eq!((loaded, at), (older, 1));
    }

    #[test]
    fn a_version_1_snapshot_without_its_offset_is_still_read() {
        let mut state = ProducerStateManager::default();
        state.update(&header(3, 1, 0, 2, 0));
        let current = state.encode(2);
        let mut legacy = SNAPSHOT_VERSION_WITHOUT_OFFSET.to_be_bytes().to_vec();
        legacy.extend_from_slice(&current[10..current.len() - 4]);
        let crc = crc32c::crc32c(&legacy);
        legacy.extend_from_slice(&crc.to_be_bytes());
        assert_eq!(ProducerStateManager::decode(&legacy, 2), Some(state));
    }
}
