//! The log of one partition: an ordered set of segments, the offsets that bound it, the
//! idempotent-producer state and the leader epoch cache. Single writer: the broker
//! serializes calls with a lock.
//!
//! A leader appends producers' batches ([`PartitionLog::append`]), assigning offsets and
//! stamping its leader epoch; a follower appends the leader's batches as they are
//! ([`PartitionLog::append_as_follower`]) and truncates what diverges from the leader
//! ([`PartitionLog::truncate_to`], [`PartitionLog::truncate_fully_and_start_at`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use strom_wire::batch::verify_crc;
use strom_wire::{RecordBatchHeader, RecordBatches};

use crate::log_slice::LogSlice;

use crate::checkpoint::{CheckpointFile, PartitionCheckpoint};
use crate::clean_shutdown::ClosedLog;
use crate::cleaner::{self, CleanerPhase, CleaningPlan, LogToClean, PhaseHook, SegmentFile};
use crate::file_cache::FileCache;
use crate::leader_epoch_cache::{EpochEntry, LeaderEpochCache};
use crate::producer_state::SequenceCheck;
use crate::segment::{
    OpenMode, PreparedBatch, Segment, CLEANED_SUFFIX, REWRITTEN_PREFIX_LEN, SWAP_SUFFIX,
};
use crate::validator::validate_batch;
use crate::{LogConfig, LogError, ProducerStateManager};

/// The result of an append, as the produce response reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset assigned to the first record (the original one for a duplicate).
    pub base_offset: i64,
    pub last_offset: i64,
    pub log_start_offset: i64,
    /// Records appended (0 for a duplicate).
    pub record_count: i64,
    /// Whether the batch was a retry of one already in the log.
    pub duplicate: bool,
    /// The append time stamped on the batches (LogAppendTime topics), else -1.
    pub log_append_time_ms: i64,
}

/// Whole batches read for a fetch.
#[derive(Debug, Clone)]
pub struct FetchData {
    pub records: Bytes,
}

/// The log of one partition on disk.
#[derive(Debug)]
pub struct PartitionLog {
    dir: PathBuf,
    config: LogConfig,
    files: Arc<FileCache>,
    segments: BTreeMap<i64, Segment>,
    log_start_offset: i64,
    recovery_point: i64,
    /// The recovery point the checkpoint file holds, so an unchanged one is not rewritten;
    /// `None` if it may be behind (a log opened from the clean-shutdown record).
    checkpointed_recovery_point: Option<i64>,
    /// Where the next checkpoint write goes (its slot and sequence); `None` until the file
    /// is first needed by a log opened from the record, which did not read it.
    checkpoint_file: Option<CheckpointFile>,
    producer_state: ProducerStateManager,
    /// The offset of the producer snapshot on disk that reflects `producer_state`, so a
    /// close with nothing appended since writes no snapshot; `None` if none does.
    snapshot_offset: Option<i64>,
    /// Offsets of the `.snapshot` files in the directory, kept so that pruning them needs
    /// no directory listing.
    snapshots: BTreeSet<i64>,
    /// Where each leader epoch starts, for OffsetForLeaderEpoch and follower truncation.
    leader_epoch_cache: LeaderEpochCache,
    /// The epoch stamped on leader appends.
    leader_epoch: i32,
    unflushed_records: i64,
    last_flush_ms: i64,
    /// Set by the shutdown's close: the log then refuses every change, so what the
    /// clean-shutdown record says of it stays true.
    closed: bool,
    /// Counts the changes that remove or replace segments (retention, truncation, a
    /// cleaning's swap), so a cleaning planned before one gives up instead of swapping
    /// in segments cut from a log that is no longer there.
    layout_generation: u64,
    /// The latest delete horizon the cleaner stamped on a kept tombstone: once it has
    /// passed, a cleaning removes tombstones even if nothing is dirty.
    latest_delete_horizon: Option<i64>,
    /// The lowest offset the log was truncated to since the cleaner last recorded how
    /// far it cleaned: records above it may be new, so the cleaner's checkpoint must not
    /// claim them (Kafka's `maybeTruncateCheckpoint`).
    truncated_to: Option<i64>,
}

/// What opening a log may trust.
enum Start {
    /// The last shutdown was clean and closed the log itself: its checkpoint's recovery
    /// point is the log end and a snapshot there holds the producer state.
    Clean,
    /// The log may have been written after its last flush: recover above the recovery
    /// point.
    Unclean,
    /// The last shutdown named the log in its clean-shutdown record.
    Recorded(ClosedLog),
}

impl PartitionLog {
    /// Opens the partition in `dir`, creating it if it does not exist. Segment files are
    /// opened through `files`, the broker's bounded cache of open files.
    ///
    /// After a clean shutdown nothing is read but the checkpoint, the leader epochs and
    /// the producer snapshot: segments are trusted and their indexes load on first use.
    /// After an unclean one, the segments at or above the recovery point are read, their
    /// batches CRC-checked and a torn or corrupt tail truncated; segments below it are
    /// trusted (and read lazily). The recovery point is not advanced by recovery (that
    /// would cost an fsync per partition at start-up): the recovered tail is checked again
    /// after another crash.
    pub fn open(
        dir: &Path,
        config: LogConfig,
        files: &Arc<FileCache>,
        clean_shutdown: bool,
        now_ms: i64,
    ) -> Result<Self, LogError> {
        let start = if clean_shutdown {
            Start::Clean
        } else {
            Start::Unclean
        };
        Self::open_with(dir, config, files, start, now_ms)
    }

    /// Opens a log the last shutdown closed and named in its clean-shutdown record: the
    /// log's offsets, leader epochs and producer state come from `closed`, so none of the
    /// partition's own small files is read. If the active segment is not what the record
    /// says (it changed after the close), the log is recovered as after a crash.
    pub fn open_closed(
        dir: &Path,
        config: LogConfig,
        files: &Arc<FileCache>,
        closed: ClosedLog,
        now_ms: i64,
    ) -> Result<Self, LogError> {
        Self::open_with(dir, config, files, Start::Recorded(closed), now_ms)
    }

    fn open_with(
        dir: &Path,
        config: LogConfig,
        files: &Arc<FileCache>,
        start: Start,
        now_ms: i64,
    ) -> Result<Self, LogError> {
        let listing = match fs::read_dir(dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                fs::create_dir_all(dir)?;
                fs::read_dir(dir)?
            }
            listing => listing?,
        };
        let mut bases = Vec::new();
        let mut snapshots = BTreeSet::new();
        for entry in listing {
            let name = entry?.file_name();
            let name = name.to_string_lossy();
            if name.ends_with(CLEANED_SUFFIX) || name.ends_with(SWAP_SUFFIX) {
                cleaner::swap::complete_interrupted(dir)?;
                return Self::open_with(dir, config, files, start, now_ms);
            }
            let (stem, found) = match name.split_once('.') {
                Some((stem, "log")) => (stem, &mut bases),
                Some((stem, "snapshot")) => {
                    if let Ok(offset) = stem.parse::<i64>() {
                        snapshots.insert(offset);
                    }
                    continue;
                }
                _ => continue,
            };
            if let Ok(base) = stem.parse::<i64>() {
                found.push(base);
            }
        }
        bases.sort_unstable();
        let recorded = match &start {
            Start::Recorded(c) => Some(c),
            _ => None,
        };
        let (stored_checkpoint, checkpoint_file) = match recorded {
            Some(c) => {
                let checkpoint = PartitionCheckpoint {
                    recovery_point: c.log_end_offset,
                    log_start_offset: c.log_start_offset,
                };
                (Some(checkpoint), None)
            }
            None if bases.is_empty() => (None, Some(CheckpointFile::default())),
            None => match PartitionCheckpoint::read_with_file(dir)? {
                Some((checkpoint, file)) => (Some(checkpoint), Some(file)),
                None => (None, Some(CheckpointFile::default())),
            },
        };
        let checkpoint = stored_checkpoint.unwrap_or_default();
        let mut segments = BTreeMap::new();
        let mut truncated = false;
        for (i, &base) in bases.iter().enumerate() {
            if truncated {
                tracing::warn!(base, dir = %dir.display(), "deleting segment after a truncated one");
                Segment::delete_files(dir, base)?;
                continue;
            }
            let next_base = bases.get(i + 1).copied();
            let recover = matches!(start, Start::Unclean)
                && next_base.is_none_or(|n| n > checkpoint.recovery_point);
            let mode = if recover {
                OpenMode::Recover {
                    recovery_point: checkpoint.recovery_point,
                }
            } else {
                // A clean close leaves the log end offset in the record, or as the
                // checkpoint's recovery point.
                let known_end = next_base.or(stored_checkpoint
                    .map(|c| c.recovery_point)
                    .filter(|&rp| rp >= base));
                OpenMode::Trusted {
                    next_offset: known_end,
                }
            };
            let segment = Segment::open(dir, base, &config, files, mode)?;
            // Segments the cleaner rewrote may end below the next one's base, but they lie
            // below the recovery point (a roll flushes what precedes the active segment),
            // so a recovered segment that ends early lost its tail.
            if let Some(n) = next_base {
                truncated = segment.next_offset() < n && recover;
            }
            segments.insert(base, segment);
        }
        if let Some(c) = recorded {
            let active = segments.last_key_value().map(|(&b, s)| (b, s.size()));
            if active != Some((c.active_base_offset, c.active_size)) {
                tracing::warn!(dir = %dir.display(), recorded_base = c.active_base_offset, recorded_size = c.active_size, found = ?active, "the active segment changed after the clean shutdown recorded it: recovering the partition");
                drop(segments);
                return Self::open_with(dir, config, files, Start::Unclean, now_ms);
            }
        }
        if segments.is_empty() {
            let base = checkpoint.log_start_offset;
            segments.insert(base, Segment::create(dir, base, &config, files)?);
            // An empty producer state from the start: every later snapshot (at a roll or
            // a close) then reuses a file instead of allocating one, so a shutdown of
            // thousands of new partitions creates no files.
            if snapshots.insert(base) {
                ProducerStateManager::default().write_snapshot(dir, base, false, None)?;
            }
        }
        let first_base = *segments.keys().next().expect("at least one segment");
        let leader_epoch_cache = match recorded {
            Some(c) => LeaderEpochCache::recorded(dir, c.leader_epochs.clone()),
            None => LeaderEpochCache::load(dir)?,
        };
        let mut log = Self {
            dir: dir.to_path_buf(),
            config,
            files: files.clone(),
            segments,
            log_start_offset: checkpoint.log_start_offset.max(first_base),
            recovery_point: 0,
            checkpointed_recovery_point: None,
            checkpoint_file,
            producer_state: ProducerStateManager::default(),
            snapshot_offset: None,
            snapshots,
            leader_epoch_cache,
            leader_epoch: 0,
            unflushed_records: 0,
            last_flush_ms: now_ms,
            closed: false,
            layout_generation: 0,
            latest_delete_horizon: None,
            truncated_to: None,
        };
        let clean_shutdown = !matches!(start, Start::Unclean);
        match start {
            Start::Recorded(c) => {
                log.delete_snapshots(|offset| offset > c.log_end_offset)?;
                log.producer_state = c.producer_state;
                if c.own_files_current {
                    log.checkpointed_recovery_point = Some(c.log_end_offset);
                    log.snapshot_offset = Some(c.log_end_offset);
                }
            }
            Start::Clean | Start::Unclean => {
                log.checkpointed_recovery_point = Some(checkpoint.recovery_point);
                log.load_producer_state()?;
            }
        }
        log.recovery_point = if clean_shutdown {
            log.log_end_offset()
        } else {
            checkpoint.recovery_point.min(log.log_end_offset())
        };
        // Recovery may have cut the tail, and the cache is written before the batches of a
        // new epoch: it must not name offsets beyond the log end. An epoch that starts at
        // the log end (a leader that had appended nothing yet) is still true and stays, so
        // reopening an empty partition writes nothing.
        log.leader_epoch_cache
            .truncate_from_end(log.log_end_offset() + 1)?;
        log.leader_epoch_cache
            .truncate_from_start(log.log_start_offset)?;
        log.leader_epoch = log.leader_epoch_cache.latest_epoch().unwrap_or(0);
        Ok(log)
    }

    /// Rebuilds producer state from the newest snapshot plus the batch headers after it.
    fn load_producer_state(&mut self) -> Result<(), LogError> {
        let end = self.log_end_offset();
        self.delete_snapshots(|offset| offset > end)?;
        let snapshots: Vec<i64> = self.snapshots.iter().copied().collect();
        let (mut state, from) =
            ProducerStateManager::load_latest_snapshot(&self.dir, &snapshots, end)?;
        for segment in self.segments.values() {
            if segment.next_offset() <= from {
                continue;
            }
            let mut position = segment.position_of(from)?.unwrap_or(segment.size());
            while let Some(header) = segment.read_header_at(position)? {
                if header.base_offset >= from {
                    state.update(&header);
                }
                position += header.total_len() as u64;
            }
        }
        self.producer_state = state;
        self.snapshot_offset = Some(from);
        Ok(())
    }

    /// Validates and appends a producer's record set, assigning offsets.
    ///
    /// Every batch is checked (length, CRC, counts and records as Kafka's
    /// `LogValidator` does, producer sequence) and rewritten where the topic asks for it
    /// before anything is written, so a request is appended whole or not at all. A
    /// retried idempotent batch that is already in the log is acknowledged with its
    /// original offsets.
    pub fn append(&mut self, records: &[u8], now_ms: i64) -> Result<AppendInfo, LogError> {
        self.ensure_open()?;
        let tp = self.topic_partition();
        let mut validated = Vec::new();
        for batch in RecordBatches::new(records) {
            let (header, bytes) = batch?;
            if bytes.len() > self.config.max_message_bytes {
                return Err(LogError::MessageTooLarge {
                    size: bytes.len(),
                    max: self.config.max_message_bytes,
                });
            }
            verify_crc(bytes)?;
            let batch = validate_batch(&tp, header, bytes, &self.config, now_ms)?;
            if let SequenceCheck::Duplicate(meta) = self.producer_state.check(&batch.header)? {
                return Ok(AppendInfo {
                    base_offset: meta.first_offset,
                    last_offset: meta.last_offset,
                    log_start_offset: self.log_start_offset,
                    record_count: 0,
                    duplicate: true,
                    log_append_time_ms: self.log_append_time(now_ms),
                });
            }
            validated.push(batch);
        }
        let mut next_offset = self.log_end_offset();
        for batch in &mut validated {
            batch.header.base_offset = next_offset;
            batch.header.partition_leader_epoch = self.leader_epoch;
            next_offset = batch.header.next_offset();
        }
        let mut record_count = 0i64;
        let prepared: Vec<PreparedBatch<'_>> = validated
            .iter()
            .map(|batch| {
                let (header, bytes) = (&batch.header, &batch.bytes);
                record_count += header.record_count as i64;
                let mut prefix = [0u8; REWRITTEN_PREFIX_LEN];
                prefix[0..8].copy_from_slice(&header.base_offset.to_be_bytes());
                prefix[8..12].copy_from_slice(&bytes[8..12]);
                prefix[12..16].copy_from_slice(&header.partition_leader_epoch.to_be_bytes());
                PreparedBatch {
                    prefix,
                    rest: &bytes[REWRITTEN_PREFIX_LEN..],
                    base_offset: header.base_offset,
                    last_offset: header.last_offset(),
                    max_timestamp: header.max_timestamp,
                }
            })
            .collect();
        let (Some(first), Some(last)) = (prepared.first(), prepared.last()) else {
            return Err(strom_wire::BatchError::Truncated {
                needed: strom_wire::BATCH_HEADER_LEN,
                available: records.len(),
            }
            .into());
        };
        let (base_offset, last_offset) = (first.base_offset, last.last_offset);
        assert_eq!(
            last_offset - base_offset + 1,
            record_count,
            "validated batches have contiguous offsets"
        );
        let cached_epoch = self.leader_epoch_cache.latest_epoch();
        assert!(
            cached_epoch.is_none_or(|e| e <= self.leader_epoch),
            "a leader append at epoch {} below the cached epoch {cached_epoch:?}: \
             become_leader must come first",
            self.leader_epoch
        );
        if cached_epoch != Some(self.leader_epoch) {
            self.leader_epoch_cache
                .assign(self.leader_epoch, base_offset)?;
        }
        self.write_at_end(
            &prepared,
            validated.iter().map(|b| &b.header),
            record_count,
            now_ms,
        )?;
        Ok(AppendInfo {
            base_offset,
            last_offset,
            log_start_offset: self.log_start_offset,
            record_count,
            duplicate: false,
            log_append_time_ms: self.log_append_time(now_ms),
        })
    }

    /// Appends a leader's batches to this follower's log, as the leader stored them
    /// (Kafka's `appendAsFollower`): offsets, leader epochs and bytes unchanged.
    ///
    /// Every batch must parse and pass its CRC, the first must start at or after the log
    /// end offset and each next one at or after where the previous ended
    /// ([`LogError::UnexpectedAppendOffset`] otherwise; a gap is a range the leader's
    /// cleaner emptied); nothing is written unless all of them do. `max.message.bytes` and the
    /// producers' sequences are not checked again: the leader accepted the batches, and a
    /// follower that refused them could never catch up. Each batch of a newer leader epoch
    /// than the cache knows starts that epoch in the cache, and producer state learns
    /// every batch, so a retry of a batch copied here is recognised once this replica
    /// leads. An empty `records` writes nothing and reports no records, with `last_offset`
    /// one below `base_offset` (the log end).
    pub fn append_as_follower(
        &mut self,
        records: &[u8],
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        self.ensure_open()?;
        let log_end_offset = self.log_end_offset();
        let mut batches = Vec::new();
        let mut next_offset = log_end_offset;
        let mut record_count = 0i64;
        for batch in RecordBatches::new(records) {
            let (header, bytes) = batch?;
            verify_crc(bytes)?;
            if header.base_offset < next_offset {
                return Err(LogError::UnexpectedAppendOffset {
                    expected: next_offset,
                    found: header.base_offset,
                });
            }
            if header.last_offset_delta < 0 {
                return Err(strom_wire::BatchError::InvalidHeader(format!(
                    "Batch has an invalid offset range: [{}, {}]",
                    header.base_offset,
                    header.last_offset()
                ))
                .into());
            }
            record_count += header.record_count as i64;
            next_offset = header.next_offset();
            batches.push((header, bytes));
        }
        let info = AppendInfo {
            base_offset: log_end_offset,
            last_offset: next_offset - 1,
            log_start_offset: self.log_start_offset,
            record_count,
            duplicate: false,
            log_append_time_ms: -1,
        };
        if batches.is_empty() {
            return Ok(info);
        }
        if next_offset - 1 - log_end_offset > i32::MAX as i64 {
            return Err(strom_wire::BatchError::InvalidHeader(format!(
                "Batches span offsets [{log_end_offset}, {}], more than one segment can index",
                next_offset - 1
            ))
            .into());
        }
        // The cache is written before the batches, as Kafka does: after a crash in between,
        // opening the log drops entries beyond its end.
        for (header, _) in &batches {
            let epoch = header.partition_leader_epoch;
            if epoch >= 0
                && self
                    .leader_epoch_cache
                    .latest_epoch()
                    .is_none_or(|l| epoch > l)
            {
                self.leader_epoch_cache.assign(epoch, header.base_offset)?;
            }
        }
        let prepared: Vec<PreparedBatch<'_>> = batches
            .iter()
            .map(|(header, bytes)| PreparedBatch {
                prefix: bytes[..REWRITTEN_PREFIX_LEN]
                    .try_into()
                    .expect("a parsed batch is longer than its prefix"),
                rest: &bytes[REWRITTEN_PREFIX_LEN..],
                base_offset: header.base_offset,
                last_offset: header.last_offset(),
                max_timestamp: header.max_timestamp,
            })
            .collect();
        self.write_at_end(
            &prepared,
            batches.iter().map(|(h, _)| h),
            record_count,
            now_ms,
        )?;
        Ok(info)
    }

    /// Writes batches whose offsets are assigned at the log end, rolling first if the
    /// active segment is full, records them in producer state and applies the flush
    /// policy: the part of an append a leader and a follower share.
    fn write_at_end<'h>(
        &mut self,
        prepared: &[PreparedBatch<'_>],
        headers: impl Iterator<Item = &'h RecordBatchHeader>,
        record_count: i64,
        now_ms: i64,
    ) -> Result<(), LogError> {
        let (Some(first), Some(last)) = (prepared.first(), prepared.last()) else {
            return Ok(());
        };
        // The epochs of the batches are on disk before the batches.
        self.leader_epoch_cache.write_pending()?;
        assert!(
            first.base_offset >= self.log_end_offset(),
            "appends start at the log end (or past a gap a leader's cleaner left)"
        );
        assert!(
            prepared
                .windows(2)
                .all(|w| w[1].base_offset > w[0].last_offset),
            "appended batches have increasing offsets"
        );
        let total: usize = prepared.iter().map(PreparedBatch::len).sum();
        self.maybe_roll(total as u64, last.last_offset, now_ms)?;
        self.active_mut().append(prepared)?;
        for header in headers {
            self.producer_state.update(header);
        }
        self.unflushed_records += record_count;
        if self.unflushed_records >= self.config.flush_messages {
            self.flush(now_ms)?;
        }
        Ok(())
    }

    /// Makes this replica the leader of `epoch` (Kafka's `maybeAssignEpochStartOffset` on
    /// becoming leader): the epoch starts at the log end offset in the cache, and leader
    /// appends from now on are stamped with it.
    pub fn become_leader(&mut self, epoch: i32) -> Result<(), LogError> {
        self.ensure_open()?;
        self.leader_epoch_cache
            .assign_at_end(epoch, self.log_end_offset())?;
        self.leader_epoch = epoch;
        Ok(())
    }

    /// Removes every record at or above `offset` (Kafka's `truncateTo`), for a follower
    /// whose log diverged from the leader's. Nothing happens if `offset` is at or past the
    /// log end, except that epochs cached at the log end are dropped (a leader that
    /// assigned its epoch but appended nothing before it was deposed).
    ///
    /// The log is cut at a batch boundary: if `offset` falls inside a batch, that whole
    /// batch goes, and the log then ends below `offset`. Below the first segment, the log
    /// is emptied and restarts at `offset`. The cache, producer state (replayed from the
    /// newest snapshot at or below the new end), recovery point and log start offset are
    /// brought down to the new end, and the truncation is fsynced before the checkpoint
    /// says so.
    pub fn truncate_to(&mut self, offset: i64) -> Result<(), LogError> {
        self.ensure_open()?;
        let end = self.log_end_offset();
        if offset < 0 {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: end,
            });
        }
        if offset >= end {
            return self.leader_epoch_cache.truncate_from_end(end);
        }
        let first_base = *self.segments.keys().next().expect("non-empty");
        if offset < first_base {
            return self.truncate_fully_and_start_at(offset);
        }
        // Highest first, so a crash midway leaves a log without holes.
        let doomed: Vec<i64> = self
            .segments
            .range(offset + 1..)
            .map(|(&b, _)| b)
            .rev()
            .collect();
        self.layout_generation += 1;
        for base in &doomed {
            self.segments.remove(base).expect("present").delete()?;
        }
        let segment = self.active_mut();
        let removed = segment.truncate_to(offset)?;
        segment.flush()?;
        let new_end = self.log_end_offset();
        assert!(
            new_end <= offset && new_end < end,
            "truncation to {offset} left the log end at {new_end}"
        );
        self.truncated_to = Some(self.truncated_to.map_or(new_end, |t| t.min(new_end)));
        self.leader_epoch_cache.truncate_from_end(new_end)?;
        self.load_producer_state()?;
        self.log_start_offset = self.log_start_offset.min(new_end);
        self.recovery_point = self.recovery_point.min(new_end);
        self.write_checkpoint()?;
        tracing::info!(dir = %self.dir.display(), offset, log_end_offset = new_end, segments_deleted = doomed.len(), bytes_removed = removed, "truncated log");
        Ok(())
    }

    /// Deletes every record and restarts the log, empty, at `offset` (Kafka's
    /// `truncateFullyAndStartAt`): for a follower whose fetch offset is below the leader's
    /// log start, which cannot continue its log and starts over from the leader's.
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), LogError> {
        self.ensure_open()?;
        if offset < 0 {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.log_end_offset(),
            });
        }
        // The order keeps a crash at any step harmless: what describes the records goes
        // before them (an empty cache or no snapshot is merely slower or less precise),
        // segment files go lowest first (no hole in what remains), and the checkpoint
        // names the new start before its segment exists (a log start above the log end
        // would be worse than an empty log that the follower fetches again).
        self.layout_generation += 1;
        self.truncated_to = Some(self.truncated_to.map_or(offset, |t| t.min(offset)));
        self.leader_epoch_cache.clear()?;
        self.producer_state = ProducerStateManager::default();
        self.delete_snapshots(|_| true)?;
        self.snapshot_offset = None;
        for &base in self.segments.keys() {
            Segment::delete_files(&self.dir, base)?;
        }
        self.log_start_offset = offset;
        self.recovery_point = offset;
        self.write_checkpoint()?;
        // Replaced only once the new segment exists: the log always has an active one.
        let fresh = Segment::create(&self.dir, offset, &self.config, &self.files)?;
        self.segments = BTreeMap::from([(offset, fresh)]);
        self.unflushed_records = 0;
        tracing::info!(dir = %self.dir.display(), offset, "truncated log fully");
        Ok(())
    }

    /// The append time a produce response reports: `now` for a LogAppendTime topic,
    /// -1 otherwise.
    fn log_append_time(&self, now_ms: i64) -> i64 {
        if self.config.log_append_time {
            now_ms
        } else {
            -1
        }
    }

    /// `topic-partition`, as Kafka names a partition in its messages (the directory name).
    fn topic_partition(&self) -> String {
        self.dir
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
    }

    fn active(&self) -> &Segment {
        self.segments
            .values()
            .next_back()
            .expect("a log always has an active segment")
    }

    fn active_mut(&mut self) -> &mut Segment {
        self.segments
            .values_mut()
            .next_back()
            .expect("a log always has an active segment")
    }

    /// Starts a new segment when the active one is full by size, age or index space, or
    /// when the append's last offset would not fit the index's 32-bit relative offsets
    /// (Kafka's `canConvertToRelativeOffset`).
    fn maybe_roll(&mut self, incoming: u64, last_offset: i64, now_ms: i64) -> Result<(), LogError> {
        let active = self.active();
        if active.size() == 0 {
            return Ok(());
        }
        let too_big = active.size() + incoming > self.config.segment_bytes;
        let too_old = active
            .first_batch_timestamp()?
            .is_some_and(|t| now_ms - t > self.config.segment_ms);
        let offsets_overflow = !active.fits_relative_offsets(last_offset);
        if !(too_big || too_old || offsets_overflow || active.is_index_full()?) {
            return Ok(());
        }
        let base = self.log_end_offset();
        // Everything before the new segment is fsynced now, so after a crash only the new
        // active segment needs recovery (Kafka flushes on roll for the same reason).
        self.flush(now_ms)?;
        self.take_snapshot(base, true)?;
        self.delete_snapshots(|offset| offset < base)?;
        self.segments.insert(
            base,
            Segment::create(&self.dir, base, &self.config, &self.files)?,
        );
        tracing::debug!(dir = %self.dir.display(), base, "rolled segment");
        Ok(())
    }

    /// Reads whole batches starting with the one that holds `offset`, at most `max_bytes`
    /// of them unless the first batch alone is larger and `min_one_batch` is set (KIP-74:
    /// a consumer must always be able to make progress).
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<FetchData, LogError> {
        self.read_up_to(offset, max_bytes, min_one_batch, self.log_end_offset())
    }

    /// [`Self::read`], returning no batch that ends at or above `upper` (the high
    /// watermark: a consumer must not see records not yet replicated), even for
    /// `min_one_batch`. `upper` is a batch boundary; were it inside a batch, that batch
    /// would not be returned either (as Kafka's read up to a maximum offset does).
    /// `offset` outside `[log start, log end]` is out of range even if it is above `upper`.
    pub fn read_up_to(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
        upper: i64,
    ) -> Result<FetchData, LogError> {
        Ok(FetchData {
            records: self
                .slice_up_to(offset, max_bytes, min_one_batch, upper)?
                .read()?,
        })
    }

    /// The batches [`Self::read_up_to`] returns, as a range of their segment file, not
    /// read: a fetch sends it to the socket as it lies. Only whole batches, as Kafka's
    /// clients expect and strom's follower appends: where `max_bytes` cuts, the range ends
    /// at the last batch that fits, found from the offset index and the batch headers.
    pub fn slice_up_to(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
        upper: i64,
    ) -> Result<LogSlice, LogError> {
        let end = self.log_end_offset();
        if offset < self.log_start_offset || offset > end {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: end,
            });
        }
        if offset >= upper {
            return Ok(LogSlice::default());
        }
        let found = self
            .segments
            .range(..=offset)
            .rev()
            .take(1)
            .chain(self.segments.range(offset + 1..))
            .find_map(|(_, s)| s.position_of(offset).transpose().map(|p| (s, p)));
        let Some((segment, position)) = found else {
            return Ok(LogSlice::default());
        };
        let position = position?;
        let limit = if upper < segment.next_offset() {
            segment.position_of(upper)?.unwrap_or(segment.size())
        } else {
            segment.size()
        };
        if position >= limit {
            return Ok(LogSlice::default());
        }
        let cut = limit.min(position.saturating_add(max_bytes as u64));
        let mut len = if cut == limit {
            limit - position
        } else {
            segment.whole_batches_end(position, cut)? - position
        };
        if len == 0 {
            if !min_one_batch {
                return Ok(LogSlice::default());
            }
            let Some(header) = segment.read_header_at(position)? else {
                return Ok(LogSlice::default());
            };
            if position + header.total_len() as u64 > limit {
                return Ok(LogSlice::default());
            }
            len = header.total_len() as u64;
        }
        Ok(LogSlice::new(segment.file()?, position, len as usize))
    }

    /// The first batch whose maximum timestamp is at least `timestamp`, with its bytes, so
    /// the caller can find the exact record (ListOffsets by timestamp).
    pub fn batch_at_timestamp(
        &self,
        timestamp: i64,
    ) -> Result<Option<(RecordBatchHeader, Vec<u8>)>, LogError> {
        for segment in self.segments.values() {
            if segment.max_timestamp()? < timestamp {
                continue;
            }
            if let Some((position, header)) =
                segment.position_of_timestamp(timestamp, self.log_start_offset)?
            {
                let bytes = segment.read_at(position, header.total_len())?;
                return Ok(Some((header, bytes)));
            }
        }
        Ok(None)
    }

    /// The largest timestamp in the log and the base offset of a batch holding it
    /// (ListOffsets' MAX_TIMESTAMP spec). `None` for an empty log.
    pub fn max_timestamp(&self) -> Result<Option<(RecordBatchHeader, Vec<u8>)>, LogError> {
        let mut newest: Option<(&Segment, i64)> = None;
        for segment in self.segments.values().filter(|s| s.size() > 0) {
            let max = segment.max_timestamp()?;
            if newest.is_none_or(|(_, m)| max >= m) {
                newest = Some((segment, max));
            }
        }
        let Some((segment, max)) = newest else {
            return Ok(None);
        };
        match segment.position_of_timestamp(max, self.log_start_offset)? {
            Some((position, header)) => {
                let bytes = segment.read_at(position, header.total_len())?;
                Ok(Some((header, bytes)))
            }
            None => Ok(None),
        }
    }

    /// Raises the log start offset (DeleteRecords). Returns the new log start offset.
    pub fn delete_records_before(&mut self, offset: i64, now_ms: i64) -> Result<i64, LogError> {
        self.ensure_open()?;
        let end = self.log_end_offset();
        if offset < 0 || offset > end {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: end,
            });
        }
        if offset > self.log_start_offset {
            self.log_start_offset = offset;
            self.write_checkpoint()?;
            self.leader_epoch_cache.truncate_from_start(offset)?;
            self.apply_retention(now_ms)?;
        }
        Ok(self.log_start_offset)
    }

    /// Deletes old segments by `retention.ms`, `retention.bytes` and the log start offset.
    /// The active segment is never deleted. Returns the number of segments deleted.
    pub fn apply_retention(&mut self, now_ms: i64) -> Result<usize, LogError> {
        // A pass that overlaps a shutdown leaves sealed logs to the next start's passes.
        if self.closed {
            return Ok(0);
        }
        let mut deleted = 0;
        let mut total: u64 = self.segments.values().map(Segment::size).sum();
        while self.segments.len() > 1 {
            let (&base, oldest) = self.segments.iter().next().expect("non-empty");
            let below_start = oldest.next_offset() <= self.log_start_offset;
            let deletes = self.config.deletes();
            let expired = deletes
                && self.config.retention_ms >= 0
                && oldest.max_timestamp()? < now_ms - self.config.retention_ms;
            let oversized = deletes
                && self.config.retention_bytes >= 0
                && total - oldest.size() >= self.config.retention_bytes as u64;
            if !(below_start || expired || oversized) {
                break;
            }
            let segment = self.segments.remove(&base).expect("present");
            self.layout_generation += 1;
            total -= segment.size();
            segment.delete()?;
            deleted += 1;
        }
        if deleted > 0 {
            let first = *self.segments.keys().next().expect("non-empty");
            self.log_start_offset = self.log_start_offset.max(first);
            self.write_checkpoint()?;
            self.leader_epoch_cache
                .truncate_from_start(self.log_start_offset)?;
            self.delete_snapshots(|offset| offset < first)?;
            tracing::info!(dir = %self.dir.display(), deleted, log_start_offset = self.log_start_offset, "retention deleted segments");
        }
        Ok(deleted)
    }

    /// The cleanable section of a compacted log, `None` for a log that does not compact
    /// or a closed one. `checkpointed` is the first dirty offset the log dir's cleaner
    /// checkpoint holds (out of range, or missing: the log start). Nothing at or above
    /// `high_watermark`, the active segment or the first segment with a record younger
    /// than `min.compaction.lag.ms` is cleanable (Kafka's `cleanableOffsets`).
    pub fn to_clean(
        &self,
        checkpointed: Option<i64>,
        high_watermark: i64,
        now_ms: i64,
    ) -> Result<Option<LogToClean>, LogError> {
        if !self.config.compacts() || self.closed {
            return Ok(None);
        }
        let end = self.log_end_offset();
        let first_dirty = checkpointed
            .map(|c| c.min(self.truncated_to.unwrap_or(i64::MAX)))
            .filter(|&c| c >= self.log_start_offset && c <= end)
            .unwrap_or(self.log_start_offset);
        let mut first_uncleanable = self.active().base_offset().min(high_watermark);
        let lag = self.config.min_compaction_lag_ms;
        if lag > 0 {
            for segment in self.dirty_segments(first_dirty, first_uncleanable) {
                if segment.max_timestamp()? > now_ms.saturating_sub(lag) {
                    first_uncleanable = first_uncleanable.min(segment.base_offset());
                    break;
                }
            }
        }
        let first_uncleanable = first_uncleanable.max(first_dirty);
        let clean_bytes = self
            .segments
            .values()
            .filter(|s| s.next_offset() <= first_dirty)
            .map(Segment::size)
            .sum();
        let mut cleanable_bytes = 0;
        let mut compaction_overdue_ms = i64::MIN;
        for segment in self.dirty_segments(first_dirty, first_uncleanable) {
            cleanable_bytes += segment.size();
            if compaction_overdue_ms == i64::MIN {
                if let Some(first) = segment.first_batch_timestamp()? {
                    let due = first.saturating_add(self.config.max_compaction_lag_ms);
                    compaction_overdue_ms = now_ms.saturating_sub(due);
                }
            }
        }
        Ok(Some(LogToClean {
            first_dirty_offset: first_dirty,
            first_uncleanable_offset: first_uncleanable,
            clean_bytes,
            cleanable_bytes,
            compaction_overdue_ms,
            tombstones_expired: self.latest_delete_horizon.is_some_and(|h| h <= now_ms),
        }))
    }

    /// The segments holding offsets in `[from, to)`.
    fn dirty_segments(&self, from: i64, to: i64) -> impl Iterator<Item = &Segment> {
        self.segments
            .values()
            .filter(move |s| s.next_offset() > from && s.base_offset() < to)
    }

    /// What a cleaning of `to_clean` reads, taken under the log's lock (see
    /// [`CleaningPlan`]): every segment below the first uncleanable offset, the producers'
    /// last batches, the settings.
    pub fn plan_cleaning(&self, to_clean: LogToClean) -> CleaningPlan {
        let segments = self
            .segments
            .values()
            .take_while(|s| s.base_offset() < to_clean.first_uncleanable_offset)
            .filter(|s| !std::ptr::eq(*s, self.active()))
            .map(|s| SegmentFile {
                base_offset: s.base_offset(),
                next_offset: s.next_offset(),
                size: s.size(),
                path: s.log_path().to_path_buf(),
            })
            .collect();
        CleaningPlan {
            name: self.topic_partition(),
            dir: self.dir.clone(),
            generation: self.layout_generation,
            to_clean,
            segments,
            producer_last_offsets: self.producer_state.last_batch_offsets(),
            config: self.config.clone(),
            files: self.files.clone(),
        }
    }

    /// Swaps a cleaned group of segments in for the segments based at `replaced`, as
    /// [`cleaner::swap`] describes, and returns the log's new layout generation. If the
    /// log changed since the cleaning was planned (`generation` is not the log's), or it
    /// is closed, the cleaned files are deleted instead and `None` returned.
    pub fn replace_cleaned(
        &mut self,
        group: cleaner::cleaning::CleanedGroup,
        phase: PhaseHook<'_>,
    ) -> Result<Option<u64>, LogError> {
        let cleaner::cleaning::CleanedGroup {
            generation,
            mut segment,
            replaced,
        } = group;
        if self.closed || generation != self.layout_generation {
            segment.discard();
            return Ok(None);
        }
        assert!(
            replaced.iter().all(|b| self.segments.contains_key(b))
                && replaced.first() == Some(&segment.base_offset())
                && replaced.last() < Some(&self.active().base_offset()),
            "a cleaned group replaces sealed segments of this log, from its own base"
        );
        segment.rename_suffix(SWAP_SUFFIX)?;
        fs::File::open(&self.dir)?.sync_all()?;
        phase(CleanerPhase::SwapBegun);
        self.layout_generation += 1;
        for base in replaced.iter().rev() {
            self.segments
                .remove(base)
                .expect("checked above")
                .delete()?;
        }
        phase(CleanerPhase::OldSegmentsDeleted);
        segment.rename_suffix("")?;
        fs::File::open(&self.dir)?.sync_all()?;
        self.segments.insert(segment.base_offset(), segment);
        phase(CleanerPhase::Swapped);
        Ok(Some(self.layout_generation))
    }

    /// The count of changes that removed or replaced segments (see
    /// [`CleaningPlan::generation`]).
    pub fn layout_generation(&self) -> u64 {
        self.layout_generation
    }

    /// Records a completed cleaning up to `end` whose kept tombstones carry delete
    /// horizons up to `horizon` (so the cleaner comes back when it has passed), and
    /// returns the first dirty offset the cleaner's checkpoint may keep: `end`, or lower
    /// if the log was truncated below it meanwhile.
    pub fn cleaned_up_to(&mut self, end: i64, horizon: Option<i64>) -> i64 {
        self.latest_delete_horizon = horizon;
        end.min(self.truncated_to.take().unwrap_or(i64::MAX))
    }

    /// fsyncs every segment that may hold unflushed data and advances the recovery point.
    /// Segments and indexes with nothing new cost no system call, and the checkpoint is
    /// rewritten only if the recovery point moved.
    pub fn flush(&mut self, now_ms: i64) -> Result<(), LogError> {
        let from = self.recovery_point;
        for segment in self
            .segments
            .values_mut()
            .filter(|s| s.next_offset() > from || s.size() == 0)
        {
            segment.flush()?;
        }
        self.recovery_point = self.log_end_offset();
        self.unflushed_records = 0;
        self.last_flush_ms = now_ms;
        if Some(self.recovery_point) != self.checkpointed_recovery_point {
            self.write_checkpoint()?;
        }
        // A roll recycles only the newest older snapshot; any older ones (left by a
        // crash, or by an earlier version's shutdown) go here.
        if let Some(current) = self.snapshot_offset {
            self.delete_snapshots(|offset| offset < current)?;
        }
        Ok(())
    }

    /// Forgets producers idle for longer than `producer.id.expiration.ms` (called
    /// periodically), so clients that come and go cannot grow the state without bound.
    /// Returns how many producers are still tracked.
    pub fn expire_producers(&mut self, now_ms: i64) -> usize {
        self.producer_state
            .expire(now_ms.saturating_sub(self.config.producer_id_expiration_ms));
        self.producer_state.len()
    }

    /// Flushes if `flush.ms` has passed since the last flush (called periodically).
    pub fn flush_if_due(&mut self, now_ms: i64) -> Result<(), LogError> {
        if self.unflushed_records > 0 && now_ms - self.last_flush_ms >= self.config.flush_ms {
            self.flush(now_ms)?;
        }
        Ok(())
    }

    /// Flushes and snapshots producer state, so the next open needs no recovery. A log
    /// with nothing appended since it was opened or last closed costs no system call.
    pub fn close(&mut self, now_ms: i64) -> Result<(), LogError> {
        self.flush(now_ms)?;
        self.write_close_snapshot()
    }

    /// Whether [`Self::close`] has anything to write.
    pub fn needs_close(&self) -> bool {
        let end = self.log_end_offset();
        self.recovery_point != end
            || self.checkpointed_recovery_point != Some(end)
            || self.snapshot_offset != Some(end)
    }

    /// The first part of a shutdown's close whose durability the caller provides with one
    /// `syncfs` per log dir instead of an fsync per file: writes the pending index
    /// entries, without fsync. The caller then seals the log ([`Self::seal`]), syncs the
    /// file system and only then writes the clean-shutdown record.
    pub fn close_before_sync(&mut self) -> Result<(), LogError> {
        let from = self.recovery_point;
        for segment in self
            .segments
            .values_mut()
            .filter(|s| s.next_offset() > from || s.size() == 0)
        {
            segment.write_pending()?;
        }
        Ok(())
    }

    /// Ends the log's life in this process at a shutdown: from here on it refuses every
    /// change, and what is returned — what the clean-shutdown record keeps of it — stays
    /// true. The caller writes the record only once everything below the returned end is
    /// durable ([`Self::close`]'s fsyncs, or a `syncfs` after [`Self::close_before_sync`]).
    pub fn seal(&mut self) -> ClosedLog {
        self.closed = true;
        let end = self.log_end_offset();
        let active = self.active();
        ClosedLog {
            log_end_offset: end,
            log_start_offset: self.log_start_offset,
            active_base_offset: active.base_offset(),
            active_size: active.size(),
            own_files_current: !self.needs_close(),
            leader_epochs: self.leader_epoch_cache.entries().to_vec(),
            producer_state: self.producer_state.clone(),
        }
    }

    /// Refuses a change to a sealed log (see [`Self::seal`]).
    fn ensure_open(&self) -> Result<(), LogError> {
        if self.closed {
            return Err(LogError::Closed {
                dir: self.dir.display().to_string(),
            });
        }
        Ok(())
    }

    /// Brings this log's own checkpoint and producer snapshot up to its recovery point,
    /// without fsync, for a log opened from the clean-shutdown record (which did not need
    /// them): a crash after that start recovers from them. The checkpoint claims only the
    /// recovery point, whose data is durable; a snapshot that a power loss left torn, or
    /// holding the recycled file's older bytes, fails its CRC or its offset check and is
    /// replayed around. So neither needs an fsync, and a start from the record can
    /// do this in the background. The next clean start reads the record, not these.
    pub fn catch_up_checkpoint(&mut self) -> Result<(), LogError> {
        if self.checkpointed_recovery_point != Some(self.recovery_point) {
            self.write_checkpoint_with(false)?;
        }
        let end = self.log_end_offset();
        if end == self.recovery_point && self.snapshot_offset != Some(end) {
            self.take_snapshot(end, false)?;
        }
        Ok(())
    }

    fn write_close_snapshot(&mut self) -> Result<(), LogError> {
        let end = self.log_end_offset();
        if self.snapshot_offset == Some(end) {
            return Ok(());
        }
        self.take_snapshot(end, true)?;
        self.delete_snapshots(|offset| offset != end)
    }

    /// Writes the producer state at `offset`, into the file of the newest older snapshot
    /// if there is one (every caller deletes the older ones anyway, now or at the next
    /// flush), so a snapshot costs no new inode.
    fn take_snapshot(&mut self, offset: i64, sync: bool) -> Result<(), LogError> {
        let recycle = self.snapshots.range(..offset).next_back().copied();
        self.producer_state
            .write_snapshot(&self.dir, offset, sync, recycle)?;
        if let Some(old) = recycle {
            self.snapshots.remove(&old);
        }
        self.snapshot_offset = Some(offset);
        self.snapshots.insert(offset);
        Ok(())
    }

    /// Deletes the snapshot files whose offset matches `doomed`.
    fn delete_snapshots(&mut self, doomed: impl Fn(i64) -> bool) -> Result<(), LogError> {
        let offsets: Vec<i64> = self
            .snapshots
            .iter()
            .copied()
            .filter(|&o| doomed(o))
            .collect();
        for offset in offsets {
            ProducerStateManager::delete_snapshot(&self.dir, offset)?;
            self.snapshots.remove(&offset);
        }
        Ok(())
    }

    /// Removes the partition's directory and everything in it.
    pub fn delete(self) -> Result<(), LogError> {
        fs::remove_dir_all(&self.dir)?;
        Ok(())
    }

    fn write_checkpoint(&mut self) -> Result<(), LogError> {
        self.write_checkpoint_with(true)
    }

    fn write_checkpoint_with(&mut self, sync: bool) -> Result<(), LogError> {
        let mut file = match self.checkpoint_file {
            Some(file) => file,
            // Opened from the clean-shutdown record: learn which slot is next.
            None => match PartitionCheckpoint::read_with_file(&self.dir) {
                Ok(found) => found.map(|(_, file)| file).unwrap_or_default(),
                Err(LogError::CorruptFile { .. }) => CheckpointFile::default(),
                Err(e) => return Err(e),
            },
        };
        PartitionCheckpoint {
            recovery_point: self.recovery_point,
            log_start_offset: self.log_start_offset,
        }
        .write(&self.dir, &mut file, sync)?;
        self.checkpoint_file = Some(file);
        self.checkpointed_recovery_point = Some(self.recovery_point);
        Ok(())
    }

    /// Replaces the log's settings (AlterConfigs); they apply from the next append.
    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config;
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Offset the next appended record will get.
    pub fn log_end_offset(&self) -> i64 {
        self.active().next_offset()
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    /// Bytes on disk over all segments.
    pub fn size_bytes(&self) -> u64 {
        self.segments.values().map(Segment::size).sum()
    }

    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// The epoch stamped on leader appends: the last one [`Self::become_leader`] was given,
    /// or after opening the newest cached epoch (0 for a log without one).
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }

    /// The newest leader epoch with records in this log (or assigned by the leader).
    pub fn latest_epoch(&self) -> Option<i32> {
        self.leader_epoch_cache.latest_epoch()
    }

    /// The answer to OffsetForLeaderEpoch: the largest epoch at most `epoch` and the
    /// offset where it ended in this log (see [`LeaderEpochCache::end_offset_for`]).
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        self.leader_epoch_cache
            .end_offset_for(epoch, self.log_end_offset())
    }

    /// The cached leader epochs and where each starts, oldest first.
    pub fn leader_epoch_entries(&self) -> &[EpochEntry] {
        self.leader_epoch_cache.entries()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}
