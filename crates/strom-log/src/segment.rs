//! One segment of a partition log: the `.log` file of record batches and its two indexes.
//!
//! A segment is append-only. Batches are written with one vectored write per append,
//! straight from the producer's request buffer: only the 16 bytes holding the base offset,
//! batch length and leader epoch come from a rewritten copy, the rest is written from the
//! request bytes without copying them.

use std::fs::{self, File, OpenOptions};
use std::io::{IoSlice, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use strom_wire::batch::verify_crc;
use strom_wire::{RecordBatchHeader, BATCH_HEADER_LEN};

use crate::offset_index::{OffsetIndex, OffsetPosition};
use crate::time_index::{TimeIndex, TimestampOffset};
use crate::{offset_file_name, LogConfig, LogError};

/// Bytes of a batch that are rewritten on append: base offset, batch length, leader epoch.
pub const REWRITTEN_PREFIX_LEN: usize = 16;

/// A batch ready to be written: its rewritten prefix and the untouched rest.
#[derive(Debug)]
pub struct PreparedBatch<'a> {
    pub prefix: [u8; REWRITTEN_PREFIX_LEN],
    pub rest: &'a [u8],
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
}

impl PreparedBatch<'_> {
    pub fn len(&self) -> usize {
        REWRITTEN_PREFIX_LEN + self.rest.len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }
}

/// Summary of the batches found by scanning part of a segment file.
#[derive(Debug, Clone, Copy)]
struct ScanOutcome {
    /// Byte position just past the last valid batch.
    valid_end: u64,
    next_offset: Option<i64>,
}

/// One `.log` file with its `.index` and `.timeindex`.
#[derive(Debug)]
pub struct Segment {
    base_offset: i64,
    log_path: PathBuf,
    file: Arc<File>,
    size: u64,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    bytes_since_last_index_entry: u64,
    next_offset: i64,
    max_timestamp: i64,
    /// Base offset of the first batch that carried `max_timestamp`.
    offset_of_max_timestamp: i64,
    first_batch_timestamp: Option<i64>,
    index_interval_bytes: u64,
}

impl Segment {
    /// Creates a new, empty segment starting at `base_offset`.
    pub fn create(dir: &Path, base_offset: i64, config: &LogConfig) -> Result<Self, LogError> {
        let log_path = dir.join(offset_file_name(base_offset, "log"));
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .truncate(false)
            .open(&log_path)?;
        file.set_len(0)?;
        Ok(Self {
            base_offset,
            file: Arc::new(file),
            size: 0,
            offset_index: OffsetIndex::create(
                &dir.join(offset_file_name(base_offset, "index")),
                config.segment_index_bytes,
            )?,
            time_index: TimeIndex::create(
                &dir.join(offset_file_name(base_offset, "timeindex")),
                config.segment_index_bytes,
            )?,
            log_path,
            bytes_since_last_index_entry: 0,
            next_offset: base_offset,
            max_timestamp: -1,
            offset_of_max_timestamp: base_offset,
            first_batch_timestamp: None,
            index_interval_bytes: config.index_interval_bytes,
        })
    }

    /// Opens an existing segment.
    ///
    /// With `recover` false the segment is trusted up to its file length: its indexes are
    /// loaded and just the bytes after the last offset-index entry are read to find its
    /// end. An index that is missing, torn, unsorted or pointing anywhere but at the batch
    /// it names is rebuilt from the batch headers. With `recover` true every batch is read
    /// and its CRC checked, the indexes are rebuilt, and the file is truncated at the first
    /// torn or corrupt batch.
    pub fn open(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        recover: bool,
    ) -> Result<Self, LogError> {
        let log_path = dir.join(offset_file_name(base_offset, "log"));
        let file = OpenOptions::new().read(true).append(true).open(&log_path)?;
        let size = file.metadata()?.len();
        let index_path = dir.join(offset_file_name(base_offset, "index"));
        let time_path = dir.join(offset_file_name(base_offset, "timeindex"));
        let loaded = if recover || !index_path.exists() || !time_path.exists() {
            None
        } else {
            match (
                OffsetIndex::open(&index_path, config.segment_index_bytes)?,
                TimeIndex::open(&time_path, config.segment_index_bytes)?,
            ) {
                (Some(o), Some(t)) => Some((o, t)),
                _ => None,
            }
        };
        let (offset_index, time_index) = match loaded {
            Some(indexes) => indexes,
            None => (
                OffsetIndex::create(&index_path, config.segment_index_bytes)?,
                TimeIndex::create(&time_path, config.segment_index_bytes)?,
            ),
        };
        let mut segment = Self {
            base_offset,
            log_path,
            file: Arc::new(file),
            size,
            offset_index,
            time_index,
            bytes_since_last_index_entry: 0,
            next_offset: base_offset,
            max_timestamp: -1,
            offset_of_max_timestamp: base_offset,
            first_batch_timestamp: None,
            index_interval_bytes: config.index_interval_bytes,
        };
        let mut outcome = None;
        if !recover {
            outcome = segment.scan_tail_after_index()?;
            if outcome.is_none() && size > 0 {
                tracing::warn!(segment = %segment.log_path.display(), "rebuilding index");
            }
        }
        let outcome = match outcome {
            Some(outcome) => outcome,
            None => {
                segment.offset_index.truncate_from(0)?;
                segment.time_index.truncate_from(i64::MIN)?;
                segment.max_timestamp = -1;
                segment.scan_from(0, recover, true)?
            }
        };
        segment.offset_index.write_pending()?;
        segment.time_index.write_pending()?;
        if outcome.valid_end < size {
            if !recover {
                return Err(LogError::CorruptFile {
                    path: segment.log_path.display().to_string(),
                    reason: format!("torn batch at position {}", outcome.valid_end),
                });
            }
            tracing::warn!(
                segment = %segment.log_path.display(),
                valid = outcome.valid_end,
                size,
                "truncating torn or corrupt tail of segment"
            );
            segment.file.set_len(outcome.valid_end)?;
            segment.size = outcome.valid_end;
        }
        if let Some(next) = outcome.next_offset {
            segment.next_offset = next;
        }
        segment.first_batch_timestamp = segment.read_header_at(0)?.map(|h| h.max_timestamp);
        Ok(segment)
    }

    /// Trusting the loaded indexes, reads the batch headers after the last offset-index
    /// entry. `None` if the indexes do not fit the file: the offset index empty for a
    /// non-empty log, its last entry not naming the batch at its position, the batches
    /// after it not ending exactly at the end of the file, or the time index naming an
    /// offset past the end.
    fn scan_tail_after_index(&mut self) -> Result<Option<ScanOutcome>, LogError> {
        let Some(last) = self.offset_index.last() else {
            return Ok((self.size == 0).then_some(ScanOutcome {
                valid_end: 0,
                next_offset: None,
            }));
        };
        let position = last.position as u64;
        let expected_base = self.base_offset + last.relative_offset as i64;
        let fits = self
            .read_header_at(position)?
            .is_some_and(|h| h.base_offset == expected_base);
        if !fits {
            return Ok(None);
        }
        let newest_time_entry = self.time_index.last();
        if let Some(entry) = newest_time_entry {
            self.max_timestamp = entry.timestamp;
            self.offset_of_max_timestamp = self.base_offset + entry.relative_offset as i64;
        }
        let outcome = self.scan_from(position, false, false)?;
        let next_relative = outcome.next_offset.map_or(0, |n| n - self.base_offset);
        if outcome.valid_end != self.size
            || newest_time_entry.is_some_and(|e| e.relative_offset as i64 >= next_relative)
        {
            return Ok(None);
        }
        self.bytes_since_last_index_entry = self.size - position;
        Ok(Some(outcome))
    }

    /// Reads batch headers from `start` to the end of the file, optionally verifying CRCs
    /// and re-adding index entries, and returns where the valid batches end.
    fn scan_from(
        &mut self,
        start: u64,
        verify: bool,
        index: bool,
    ) -> Result<ScanOutcome, LogError> {
        let mut position = start;
        let mut next_offset = None;
        let mut batch = Vec::new();
        while position < self.size {
            let Some(header) = self.read_header_at(position)? else {
                break;
            };
            let len = header.total_len() as u64;
            if position + len > self.size
                || header.base_offset < self.base_offset
                || !self.fits_relative_offsets(header.last_offset())
            {
                break;
            }
            if verify {
                batch.resize(len as usize, 0);
                self.file.read_exact_at(&mut batch, position)?;
                if verify_crc(&batch).is_err() {
                    break;
                }
            }
            if index {
                self.index_batch(position, header.base_offset, header.max_timestamp, len);
            } else if header.max_timestamp > self.max_timestamp {
                self.max_timestamp = header.max_timestamp;
                self.offset_of_max_timestamp = header.base_offset;
            }
            next_offset = Some(header.next_offset());
            position += len;
        }
        Ok(ScanOutcome {
            valid_end: position,
            next_offset,
        })
    }

    /// Reads the batch header at `position`, or `None` if it does not parse.
    pub fn read_header_at(&self, position: u64) -> Result<Option<RecordBatchHeader>, LogError> {
        if position + BATCH_HEADER_LEN as u64 > self.size {
            return Ok(None);
        }
        let mut buf = [0u8; BATCH_HEADER_LEN];
        self.file.read_exact_at(&mut buf, position)?;
        Ok(RecordBatchHeader::parse(&buf).ok())
    }

    /// Adds index entries for a batch written at `position`, as Kafka does: every
    /// `index.interval.bytes`, an offset entry for the batch and, if the maximum
    /// timestamp grew since the last time entry, a time entry (maximum timestamp so far,
    /// offset of the batch that first carried it).
    fn index_batch(&mut self, position: u64, base_offset: i64, max_timestamp: i64, len: u64) {
        if max_timestamp > self.max_timestamp {
            self.max_timestamp = max_timestamp;
            self.offset_of_max_timestamp = base_offset;
        }
        if self.offset_index.last().is_none()
            || self.bytes_since_last_index_entry >= self.index_interval_bytes
        {
            self.offset_index.append(OffsetPosition {
                relative_offset: self.relative_offset(base_offset),
                position: position as u32,
            });
            if self
                .time_index
                .last()
                .is_none_or(|e| self.max_timestamp > e.timestamp)
            {
                self.time_index.append(TimestampOffset {
                    timestamp: self.max_timestamp,
                    relative_offset: self.relative_offset(self.offset_of_max_timestamp),
                });
            }
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += len;
    }

    /// Whether `offset` can be stored in this segment's 32-bit relative index offsets
    /// (0 ≤ offset − base ≤ i32::MAX, Kafka's `canConvertToRelativeOffset`).
    pub fn fits_relative_offsets(&self, offset: i64) -> bool {
        (0..=i32::MAX as i64).contains(&(offset - self.base_offset))
    }

    /// The index's relative offset of `offset`. The log rolls before an append that would
    /// not fit, and recovery stops at a batch that does not, so a miss is a bug here.
    fn relative_offset(&self, offset: i64) -> u32 {
        assert!(
            self.fits_relative_offsets(offset),
            "offset {offset} outside the relative range of segment {}",
            self.base_offset
        );
        (offset - self.base_offset) as u32
    }

    /// Appends prepared batches with one vectored write and indexes them.
    pub fn append(&mut self, batches: &[PreparedBatch<'_>]) -> Result<(), LogError> {
        if let Some(last) = batches.last() {
            assert!(
                self.fits_relative_offsets(last.last_offset),
                "append of offset {} to segment {} needed a roll",
                last.last_offset,
                self.base_offset
            );
        }
        let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(batches.len() * 2);
        for b in batches {
            slices.push(IoSlice::new(&b.prefix));
            slices.push(IoSlice::new(b.rest));
        }
        if let Err(e) = write_all_vectored(&self.file, &mut slices) {
            // A failed write (ENOSPC, EIO) may have appended part of the batches. Cut the
            // file back to the last whole batch so the next append lands where the index
            // and `size` say it does.
            if let Err(truncate) = self.file.set_len(self.size) {
                tracing::error!(segment = %self.log_path.display(), error = %truncate, "cannot truncate after a failed append");
            }
            return Err(e.into());
        }
        for b in batches {
            let len = b.len() as u64;
            if self.first_batch_timestamp.is_none() {
                self.first_batch_timestamp = Some(b.max_timestamp);
            }
            self.index_batch(self.size, b.base_offset, b.max_timestamp, len);
            self.size += len;
            self.next_offset = b.last_offset + 1;
        }
        Ok(())
    }

    /// Byte position of the batch holding `offset` (the first batch whose last offset is
    /// at or after it), found by an index lookup and a short header scan.
    pub fn position_of(&self, offset: i64) -> Result<Option<u64>, LogError> {
        let relative = (offset - self.base_offset).max(0);
        let mut position = self
            .offset_index
            .floor(relative)
            .map_or(0, |e| e.position as u64);
        while let Some(header) = self.read_header_at(position)? {
            if header.last_offset() >= offset {
                return Ok(Some(position));
            }
            position += header.total_len() as u64;
        }
        Ok(None)
    }

    /// Position of the first batch whose maximum timestamp is at least `timestamp`, among
    /// the batches holding offsets at or after `min_offset` (the log start offset).
    pub fn position_of_timestamp(
        &self,
        timestamp: i64,
        min_offset: i64,
    ) -> Result<Option<(u64, RecordBatchHeader)>, LogError> {
        let start_offset = self
            .time_index
            .floor(timestamp)
            .map_or(self.base_offset, |e| {
                self.base_offset + e.relative_offset as i64
            })
            .max(min_offset);
        let mut position = self.position_of(start_offset)?.unwrap_or(self.size);
        while let Some(header) = self.read_header_at(position)? {
            if header.max_timestamp >= timestamp {
                return Ok(Some((position, header)));
            }
            position += header.total_len() as u64;
        }
        Ok(None)
    }

    /// Reads `len` bytes at `position`.
    pub fn read_at(&self, position: u64, len: usize) -> Result<Vec<u8>, LogError> {
        let mut buf = vec![0u8; len];
        self.file.read_exact_at(&mut buf, position)?;
        Ok(buf)
    }

    /// fsyncs the log file and writes and fsyncs its indexes.
    pub fn flush(&mut self) -> Result<(), LogError> {
        self.file.sync_data()?;
        self.offset_index.flush()?;
        self.time_index.flush()?;
        Ok(())
    }

    /// Removes the segment's files.
    pub fn delete(self) -> Result<(), LogError> {
        let dir = self
            .log_path
            .parent()
            .expect("a segment lives in a directory");
        Self::delete_files(dir, self.base_offset)
    }

    /// Removes the files of the segment at `base_offset` in `dir` without reading them
    /// (they may be unreadable: recovery drops the segments after a truncated one).
    pub fn delete_files(dir: &Path, base_offset: i64) -> Result<(), LogError> {
        for extension in ["log", "index", "timeindex"] {
            match fs::remove_file(dir.join(offset_file_name(base_offset, extension))) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
        }
        Ok(())
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }
    pub fn size(&self) -> u64 {
        self.size
    }
    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }
    pub fn first_batch_timestamp(&self) -> Option<i64> {
        self.first_batch_timestamp
    }
    pub fn is_index_full(&self) -> bool {
        self.offset_index.is_full() || self.time_index.is_full()
    }
}

/// Writes every slice, retrying short writes (`write_all` for vectored I/O).
fn write_all_vectored(file: &File, slices: &mut [IoSlice<'_>]) -> std::io::Result<()> {
    let mut remaining = slices;
    let mut file = file;
    while !remaining.is_empty() {
        let written = file.write_vectored(remaining)?;
        if written == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::WriteZero));
        }
        IoSlice::advance_slices(&mut remaining, written);
    }
    Ok(())
}
