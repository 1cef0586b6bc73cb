//! One cleaning of one log (Kafka's `Cleaner`): the offset map of the dirty section, then
//! the recopy of each group of segments below its end, each group handed to the caller to
//! swap in under the log's lock.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use strom_wire::batch::verify_crc;
use strom_wire::codec::DECOMPRESSED_LIMIT_MAX;
use strom_wire::records::{walk_records_in, RecordView};
use strom_wire::{Codec, RecordBatchHeader, RetainedBatch, BATCH_HEADER_LEN};

use super::{CleanerPhase, CleaningPlan, OffsetMap, PhaseHook, SegmentFile, Throttler};
use crate::index_file::IndexEntry;
use crate::segment::{PreparedBatch, Segment, REWRITTEN_PREFIX_LEN};
use crate::time_index::TimestampOffset;
use crate::LogError;

/// The cleaner's settings of one thread (Kafka's `CleanerConfig`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CleanerConfig {
    /// This thread's share of `log.cleaner.dedupe.buffer.size`.
    pub dedupe_buffer_bytes: usize,
    /// `log.cleaner.io.buffer.load.factor`.
    pub load_factor: f64,
    /// `log.cleaner.io.buffer.size`: bytes read (and written) per I/O.
    pub io_buffer_bytes: usize,
    /// `log.cleaner.io.max.bytes.per.second`.
    pub max_io_bytes_per_second: f64,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        Self {
            dedupe_buffer_bytes: 128 << 20,
            load_factor: 0.9,
            io_buffer_bytes: 512 << 10,
            max_io_bytes_per_second: f64::INFINITY,
        }
    }
}

/// What a cleaning read, kept and took, for its summary line.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CleanerStats {
    pub map_bytes_read: u64,
    pub map_records_read: u64,
    pub map_keys: usize,
    pub map_size_bytes: usize,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub records_read: u64,
    pub records_kept: u64,
    /// Records dropped for having no key (Kafka's "invalid messages").
    pub records_without_key: u64,
    pub segments_before: usize,
    pub segments_after: usize,
    pub map_time: Duration,
    pub copy_time: Duration,
    pub throttled: Duration,
}

/// The end of a cleaning.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CleaningOutcome {
    /// The first dirty offset from now on: everything below it was cleaned.
    pub end_offset: i64,
    /// Whether every group was swapped in (else the log changed meanwhile and the
    /// cleaning gave up; the checkpoint stays).
    pub completed: bool,
    /// The latest delete horizon stamped on a kept tombstone.
    pub latest_delete_horizon: Option<i64>,
    pub stats: CleanerStats,
}

/// A cleaned group of segments, written and fsynced with [`super::segment`] suffix
/// `.cleaned`, to be swapped in for the segments at `replaced`.
#[derive(Debug)]
pub struct CleanedGroup {
    /// The generation the plan (or the previous swap) left the log at.
    pub generation: u64,
    pub segment: Segment,
    pub replaced: Vec<i64>,
}

/// A cleaner thread's settings and throttle.
#[derive(Debug)]
pub struct Cleaner {
    config: CleanerConfig,
    throttler: Throttler,
    /// Set to stop a cleaning in progress (a shutdown): it ends with [`LogError::Closed`].
    abort: Option<Arc<AtomicBool>>,
}

impl Cleaner {
    pub fn new(config: CleanerConfig) -> Self {
        Self {
            throttler: Throttler::new(config.max_io_bytes_per_second),
            config,
            abort: None,
        }
    }

    /// A cleaner whose cleanings stop, at the next I/O, once `abort` is set.
    pub fn with_abort(mut self, abort: Arc<AtomicBool>) -> Self {
        self.abort = Some(abort);
        self
    }

    fn check_abort(&self, plan: &CleaningPlan) -> Result<(), LogError> {
        if self
            .abort
            .as_ref()
            .is_some_and(|a| a.load(Ordering::Acquire))
        {
            return Err(LogError::Closed {
                dir: plan.dir.display().to_string(),
            });
        }
        Ok(())
    }

    /// Cleans the log `plan` describes at time `now_ms`, handing each cleaned group to
    /// `install`, which swaps it in under the log's lock and returns the log's new layout
    /// generation, or `None` if the log changed since (the group is then discarded and
    /// the cleaning ends incomplete).
    pub fn clean(
        &mut self,
        plan: &CleaningPlan,
        now_ms: i64,
        mut install: impl FnMut(CleanedGroup) -> Result<Option<u64>, LogError>,
        phase: PhaseHook<'_>,
    ) -> Result<CleaningOutcome, LogError> {
        let mut stats = CleanerStats {
            segments_before: plan.segments.len(),
            ..CleanerStats::default()
        };
        let started = Instant::now();
        let map = self.build_offset_map(plan, &mut stats)?;
        let end = (map.latest_offset() + 1).max(plan.to_clean.first_dirty_offset);
        stats.map_time = started.elapsed();
        let copy_started = Instant::now();
        let mut filter = RecordFilter {
            map: &map,
            end,
            now_ms,
            delete_retention_ms: plan.config.delete_retention_ms,
            producer_last_offsets: &plan.producer_last_offsets,
            latest_delete_horizon: None,
        };
        let mut generation = plan.generation;
        let mut completed = true;
        let groups = group_segments(&plan.segments, end, &plan.config);
        stats.segments_after = plan.segments.len();
        for group in groups {
            let segment = self.clean_group(plan, &group, &mut filter, &mut stats, phase)?;
            let replaced: Vec<i64> = group.iter().map(|s| s.base_offset).collect();
            stats.segments_after -= replaced.len() - 1;
            match install(CleanedGroup {
                generation,
                segment,
                replaced,
            })? {
                Some(next) => generation = next,
                None => {
                    completed = false;
                    break;
                }
            }
        }
        stats.copy_time = copy_started.elapsed();
        stats.throttled = self.throttler.slept();
        Ok(CleaningOutcome {
            end_offset: end,
            completed,
            latest_delete_horizon: filter.latest_delete_horizon,
            stats,
        })
    }

    /// Maps each key of the dirty section to its latest offset, stopping where the map
    /// fills (the cleaning then ends there).
    fn build_offset_map(
        &mut self,
        plan: &CleaningPlan,
        stats: &mut CleanerStats,
    ) -> Result<OffsetMap, LogError> {
        let to_clean = plan.to_clean;
        let (start, upper) = (
            to_clean.first_dirty_offset,
            to_clean.first_uncleanable_offset,
        );
        let dirty_offsets = usize::try_from(upper - start).unwrap_or(0);
        let mut map = OffsetMap::new(
            self.config.dedupe_buffer_bytes,
            self.config.load_factor,
            dirty_offsets,
        );
        let dirty = plan
            .segments
            .iter()
            .filter(|s| s.next_offset > start && s.base_offset < upper);
        'segments: for segment in dirty {
            let mut reader = BatchReader::open(segment, self.config.io_buffer_bytes)?;
            self.check_abort(plan)?;
            while let Some((header, batch)) = reader.next_batch(&mut self.throttler)? {
                if header.base_offset >= upper {
                    break 'segments;
                }
                if header.last_offset() < start {
                    continue;
                }
                stats.map_bytes_read += batch.len() as u64;
                if !header.is_control() && !map_batch(&mut map, &header, batch, start, stats)? {
                    break 'segments;
                }
                map.note_offset(header.last_offset());
            }
        }
        stats.map_keys = map.len();
        stats.map_size_bytes = map.size_bytes();
        Ok(map)
    }

    /// Recopies one group of segments into a new `.cleaned` segment at the group's base
    /// offset, fsynced.
    fn clean_group(
        &mut self,
        plan: &CleaningPlan,
        group: &[SegmentFile],
        filter: &mut RecordFilter<'_>,
        stats: &mut CleanerStats,
        phase: PhaseHook<'_>,
    ) -> Result<Segment, LogError> {
        let base = group[0].base_offset;
        let mut dest = Segment::create_cleaned(&plan.dir, base, &plan.config, &plan.files)?;
        let written = self.copy_group(plan, group, filter, stats, &mut dest, phase);
        match written.and_then(|()| dest.flush()) {
            Ok(()) => Ok(dest),
            Err(e) => {
                dest.discard();
                Err(e)
            }
        }
    }

    fn copy_group(
        &mut self,
        plan: &CleaningPlan,
        group: &[SegmentFile],
        filter: &mut RecordFilter<'_>,
        stats: &mut CleanerStats,
        dest: &mut Segment,
        phase: PhaseHook<'_>,
    ) -> Result<(), LogError> {
        let mut out = OutputBuffer::default();
        let level_of = |header: &RecordBatchHeader| {
            Codec::from_attributes(header.attributes)
                .map_or(-1, |codec| plan.config.compression_level(codec))
        };
        for segment in group {
            let mut reader = BatchReader::open(segment, self.config.io_buffer_bytes)?;
            while let Some((header, batch)) = reader.next_batch(&mut self.throttler)? {
                stats.bytes_read += batch.len() as u64;
                if let Some(kept) = filter.filter(&header, batch, level_of(&header), stats)? {
                    out.push(&header, kept);
                }
                if out.bytes.len() >= self.config.io_buffer_bytes {
                    self.check_abort(plan)?;
                    self.write_out(&mut out, dest, stats)?;
                    phase(CleanerPhase::Copying);
                }
            }
        }
        self.write_out(&mut out, dest, stats)
    }

    fn write_out(
        &mut self,
        out: &mut OutputBuffer,
        dest: &mut Segment,
        stats: &mut CleanerStats,
    ) -> Result<(), LogError> {
        if out.batches.is_empty() {
            return Ok(());
        }
        let prepared: Vec<PreparedBatch<'_>> = out
            .batches
            .iter()
            .map(|b| {
                let bytes = &out.bytes[b.start..b.start + b.len];
                PreparedBatch {
                    prefix: bytes[..REWRITTEN_PREFIX_LEN]
                        .try_into()
                        .expect("a batch is longer than its prefix"),
                    rest: &bytes[REWRITTEN_PREFIX_LEN..],
                    base_offset: b.base_offset,
                    last_offset: b.last_offset,
                    max_timestamp: b.max_timestamp,
                }
            })
            .collect();
        dest.append(&prepared)?;
        stats.bytes_written += out.bytes.len() as u64;
        self.throttler.maybe_throttle(out.bytes.len() as u64);
        out.batches.clear();
        out.bytes.clear();
        Ok(())
    }
}

/// Puts the keyed records of a data batch at or above `start` into the map. Returns
/// `false` if the map filled before the batch's end.
fn map_batch(
    map: &mut OffsetMap,
    header: &RecordBatchHeader,
    batch: &[u8],
    start: i64,
    stats: &mut CleanerStats,
) -> Result<bool, LogError> {
    let mut full = false;
    for_each_record(header, batch, |offset, record| {
        stats.map_records_read += 1;
        if let (false, Some(key), true) = (full, record.key, offset >= start) {
            full = !map.put(key, offset);
        }
    })?;
    Ok(!full)
}

/// Calls `f` with each record of a data batch and its offset (decompressing as it goes).
fn for_each_record(
    header: &RecordBatchHeader,
    batch: &[u8],
    mut f: impl FnMut(i64, RecordView<'_>),
) -> Result<(), LogError> {
    let codec = Codec::from_attributes(header.attributes).ok_or_else(|| {
        LogError::InvalidBatch(strom_wire::BatchError::Compression(format!(
            "unknown compression codec {}",
            header.compression()
        )))
    })?;
    walk_records_in(
        codec,
        &batch[BATCH_HEADER_LEN..],
        header.record_count,
        DECOMPRESSED_LIMIT_MAX,
        |record| {
            f(header.base_offset + record.offset_delta as i64, record);
            Ok(())
        },
    )?;
    Ok(())
}

/// Kafka's cleaner's record filter: which records and batches a cleaning keeps.
struct RecordFilter<'a> {
    map: &'a OffsetMap,
    /// The cleaning's end (exclusive): the batch ending there is kept even if empty, so
    /// the log keeps its end offset.
    end: i64,
    now_ms: i64,
    delete_retention_ms: i64,
    producer_last_offsets: &'a HashMap<i64, i64>,
    latest_delete_horizon: Option<i64>,
}

/// What a filtered batch becomes.
enum Kept<'b> {
    /// The batch as it was.
    Whole(&'b [u8]),
    /// A rewrite of it.
    Rewritten(Vec<u8>),
}

impl RecordFilter<'_> {
    /// The batch to write in place of `batch`, or `None` to drop it.
    fn filter<'b>(
        &mut self,
        header: &RecordBatchHeader,
        batch: &'b [u8],
        level: i32,
        stats: &mut CleanerStats,
    ) -> Result<Option<Kept<'b>>, LogError> {
        // Transaction markers stay until transactions are cleaned (no transactional
        // batch is written yet; the aborted-transaction rules land with them).
        if header.is_control() {
            return Ok(Some(Kept::Whole(batch)));
        }
        let horizon = header.delete_horizon_ms();
        let mut retained = RetainedBatch::new(*header);
        let mut all_kept = true;
        let mut tombstones = false;
        for_each_record(header, batch, |offset, record| {
            stats.records_read += 1;
            let keep = offset >= self.end
                || match record.key {
                    None => {
                        stats.records_without_key += 1;
                        false
                    }
                    Some(key) => {
                        offset >= self.map.get(key).unwrap_or(-1)
                            && (record.value.is_some() || horizon.is_none_or(|h| self.now_ms < h))
                    }
                };
            if keep {
                retained.push(&record);
                tombstones |= record.value.is_none();
            } else {
                all_kept = false;
            }
        })?;
        stats.records_kept += retained.count() as u64;
        let new_horizon = (tombstones && horizon.is_none())
            .then(|| self.now_ms.saturating_add(self.delete_retention_ms));
        if tombstones {
            let stamped = new_horizon.or(horizon);
            self.latest_delete_horizon = self.latest_delete_horizon.max(stamped);
        }
        if all_kept && new_horizon.is_none() {
            return Ok(Some(Kept::Whole(batch)));
        }
        let keep_empty = header.next_offset() == self.end
            || (header.has_producer_id()
                && self.producer_last_offsets.get(&header.producer_id)
                    == Some(&header.last_offset()));
        if retained.count() == 0 && !keep_empty {
            return Ok(None);
        }
        Ok(Some(Kept::Rewritten(
            retained.finish(level, new_horizon.or(horizon))?,
        )))
    }
}

/// Batches waiting to be appended to the cleaned segment.
#[derive(Debug, Default)]
struct OutputBuffer {
    bytes: Vec<u8>,
    batches: Vec<OutputBatch>,
}

#[derive(Debug)]
struct OutputBatch {
    start: usize,
    len: usize,
    base_offset: i64,
    last_offset: i64,
    max_timestamp: i64,
}

impl OutputBuffer {
    fn push(&mut self, original: &RecordBatchHeader, kept: Kept<'_>) {
        let bytes: &[u8] = match &kept {
            Kept::Whole(b) => b,
            Kept::Rewritten(b) => b,
        };
        let max_timestamp = match &kept {
            Kept::Whole(_) => original.max_timestamp,
            Kept::Rewritten(b) => {
                RecordBatchHeader::parse(b)
                    .expect("a rewritten batch parses")
                    .max_timestamp
            }
        };
        self.batches.push(OutputBatch {
            start: self.bytes.len(),
            len: bytes.len(),
            base_offset: original.base_offset,
            last_offset: original.last_offset(),
            max_timestamp,
        });
        self.bytes.extend_from_slice(bytes);
    }
}

/// Groups consecutive segments below `end` so that each group's log stays within
/// `segment.bytes`, its indexes within `segment.index.bytes`, and its offsets within one
/// segment's 32-bit relative range (Kafka's `groupSegmentsBySize`). A segment's index is
/// bounded by its log: at most one entry per `index.interval.bytes` and one more, the
/// time index's 12 bytes each being the larger.
fn group_segments(
    segments: &[SegmentFile],
    end: i64,
    config: &crate::LogConfig,
) -> Vec<Vec<SegmentFile>> {
    let index_bytes = |s: &SegmentFile| {
        (s.size / config.index_interval_bytes.max(1) + 1) * TimestampOffset::SIZE as u64
    };
    let mut groups: Vec<Vec<SegmentFile>> = Vec::new();
    for segment in segments.iter().filter(|s| s.base_offset < end) {
        let joins = groups.last().is_some_and(|group| {
            let size: u64 = group.iter().map(|s| s.size).sum();
            let indexes: u64 = group.iter().map(index_bytes).sum();
            size + segment.size <= config.segment_bytes
                && indexes + index_bytes(segment) <= config.segment_index_bytes
                && segment.next_offset - 1 - group[0].base_offset <= i32::MAX as i64
        });
        if joins {
            groups.last_mut().expect("checked").push(segment.clone());
        } else {
            groups.push(vec![segment.clone()]);
        }
    }
    groups
}

/// Reads the batches of one segment file in order through a buffer of
/// `log.cleaner.io.buffer.size` (grown for a batch larger than that), checking each
/// batch's CRC: a damaged segment makes the log uncleanable rather than cleaned wrong.
struct BatchReader<'s> {
    segment: &'s SegmentFile,
    file: File,
    buf: Vec<u8>,
    /// Valid bytes of `buf` are `start..end`; `buf[..end]` came from file position
    /// `file_position - end`.
    start: usize,
    end: usize,
    file_position: u64,
}

impl<'s> BatchReader<'s> {
    fn open(segment: &'s SegmentFile, io_buffer_bytes: usize) -> Result<Self, LogError> {
        Ok(Self {
            segment,
            file: File::open(&segment.path)?,
            buf: vec![0; io_buffer_bytes.max(BATCH_HEADER_LEN)],
            start: 0,
            end: 0,
            file_position: 0,
        })
    }

    fn next_batch(
        &mut self,
        throttler: &mut Throttler,
    ) -> Result<Option<(RecordBatchHeader, &[u8])>, LogError> {
        if !self.fill(BATCH_HEADER_LEN, throttler)? {
            return Ok(None);
        }
        let header = RecordBatchHeader::parse(&self.buf[self.start..self.end])
            .map_err(|e| self.corrupt(format!("unreadable batch header: {e}")))?;
        let len = header.total_len();
        if !self.fill(len, throttler)? {
            return Err(self.corrupt(format!(
                "torn batch of {len} bytes at offset {}",
                header.base_offset
            )));
        }
        let batch = &self.buf[self.start..self.start + len];
        verify_crc(batch).map_err(|e| LogError::CorruptFile {
            path: self.segment.path.display().to_string(),
            reason: format!("batch at offset {}: {e}", header.base_offset),
        })?;
        self.start += len;
        Ok(Some((header, batch)))
    }

    /// Makes `need` bytes available from `start`, reading (and growing the buffer) as
    /// needed. `false` at the end of the segment: none left, or fewer than `need`.
    fn fill(&mut self, need: usize, throttler: &mut Throttler) -> Result<bool, LogError> {
        while self.end - self.start < need {
            let remaining = self.segment.size.saturating_sub(self.file_position);
            if remaining == 0 {
                if self.start != self.end && need == BATCH_HEADER_LEN {
                    return Err(self.corrupt("a partial batch header ends the segment".to_string()));
                }
                return Ok(false);
            }
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.buf.len() < need {
                self.buf.resize(need, 0);
            }
            let want = ((self.buf.len() - self.end) as u64).min(remaining) as usize;
            let read = self
                .file
                .read_at(&mut self.buf[self.end..self.end + want], self.file_position)?;
            if read == 0 {
                return Err(self.corrupt(format!(
                    "the file ends at {} bytes, before its size {}",
                    self.file_position, self.segment.size
                )));
            }
            throttler.maybe_throttle(read as u64);
            self.end += read;
            self.file_position += read as u64;
        }
        Ok(true)
    }

    fn corrupt(&self, reason: String) -> LogError {
        LogError::CorruptFile {
            path: self.segment.path.display().to_string(),
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segments(sizes: &[(i64, u64)]) -> Vec<SegmentFile> {
        let mut out: Vec<SegmentFile> = sizes
            .iter()
            .map(|&(base, size)| SegmentFile {
                base_offset: base,
                next_offset: base,
                size,
                path: format!("{base}.log").into(),
            })
            .collect();
        for i in 0..out.len() {
            out[i].next_offset = out
                .get(i + 1)
                .map_or(out[i].base_offset + 10, |n| n.base_offset);
        }
        out
    }

    fn bases(groups: &[Vec<SegmentFile>]) -> Vec<Vec<i64>> {
        groups
            .iter()
            .map(|g| g.iter().map(|s| s.base_offset).collect())
            .collect()
    }

    #[test]
    fn groups_stay_within_the_segment_and_index_sizes_and_below_the_end() {
        let config = crate::LogConfig {
            segment_bytes: 1000,
            segment_index_bytes: 1 << 20,
            index_interval_bytes: 100,
            ..crate::LogConfig::default()
        };
        let all = segments(&[(0, 400), (10, 400), (20, 400), (30, 100), (40, 50)]);
        assert_eq!(
            bases(&group_segments(&all, 40, &config)),
            [vec![0, 10], vec![20, 30]]
        );
        // Five index entries of 12 bytes per 400-byte segment: 60 bytes; two need 120.
        let small_index = crate::LogConfig {
            segment_index_bytes: 100,
            ..config
        };
        assert_eq!(
            bases(&group_segments(&all, 50, &small_index)),
            [vec![0], vec![10], vec![20, 30, 40]]
        );
    }
}
