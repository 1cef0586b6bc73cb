//! One segment of a partition log: the `.log` file of record batches and its two indexes.
//!
//! A segment is append-only. Batches are written with one vectored write per append,
//! straight from the producer's request buffer: only the 16 bytes holding the base offset,
//! batch length and leader epoch come from a rewritten copy, the rest is written from the
//! request bytes without copying them.
//!
//! A segment holds no descriptor of its own: its `.log` is opened through the broker's
//! [`FileCache`] for each operation, and its indexes are in memory (opened only to write
//! or fsync them). A segment opened as trusted (below the recovery point, or after a clean
//! shutdown) reads nothing until first used: its indexes load on first lookup, so start-up
//! costs a `stat` per segment, not a read.

use std::cell::{Cell, OnceCell};
use std::fs::{self, File};
use std::io::{IoSlice, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use strom_wire::batch::verify_crc;
use strom_wire::{RecordBatchHeader, BATCH_HEADER_LEN};

use crate::file_cache::{new_file_id, FileCache, FileId};
use crate::offset_index::{OffsetIndex, OffsetPosition};
use crate::time_index::{TimeIndex, TimestampOffset};
use crate::{offset_file_name, LogConfig, LogError};

/// Bytes of a batch that are rewritten on append: base offset, batch length, leader epoch.
pub const REWRITTEN_PREFIX_LEN: usize = 16;

/// Suffix of the files of a segment the cleaner is writing: removed at the next open.
pub const CLEANED_SUFFIX: &str = ".cleaned";
/// Suffix of the files of a cleaned segment whose swap into the log has begun: the next
/// open completes the swap.
pub const SWAP_SUFFIX: &str = ".swap";

/// Extensions of a segment's three files.
pub const SEGMENT_EXTENSIONS: [&str; 3] = ["log", "index", "timeindex"];

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

/// How [`Segment::open`] treats an existing segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Fsynced data (below the recovery point or after a clean shutdown): nothing is read
    /// now. `next_offset` is where the segment is known to end (the next segment's base
    /// offset, or the recovery point for the last one); `None` reads the index tail now.
    Trusted { next_offset: Option<i64> },
    /// Possibly torn data above `recovery_point`: the index entries below it are kept (if
    /// they fit the file), every batch from the last of them on is read and CRC-checked and
    /// indexed, and the file is truncated at the first bad batch.
    Recover { recovery_point: i64 },
}

/// A segment's indexes and what is derived from them.
#[derive(Debug)]
struct Indexes {
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    bytes_since_last_index_entry: u64,
    max_timestamp: i64,
    /// Base offset of the first batch that carried `max_timestamp`.
    offset_of_max_timestamp: i64,
    first_batch_timestamp: Option<i64>,
}

/// One `.log` file with its `.index` and `.timeindex`.
#[derive(Debug)]
pub struct Segment {
    base_offset: i64,
    log_path: PathBuf,
    /// What follows the extension of the segment's three file names: nothing for a
    /// segment of the log, [`CLEANED_SUFFIX`] or [`SWAP_SUFFIX`] for one the cleaner is
    /// writing or swapping in.
    suffix: &'static str,
    files: Arc<FileCache>,
    file_id: FileId,
    size: u64,
    next_offset: i64,
    /// Loaded on first use for a trusted segment; at once for a new or recovered one.
    indexes: OnceCell<Indexes>,
    /// Whether the `.log` was written or truncated since its last fsync.
    unsynced: bool,
    /// Whether a failure to load the indexes was logged already (it is logged once, not
    /// on every fetch that hits the damaged segment).
    damage_reported: Cell<bool>,
    index_interval_bytes: u64,
    segment_index_bytes: u64,
}

impl Segment {
    fn new(dir: &Path, base_offset: i64, config: &LogConfig, files: &Arc<FileCache>) -> Self {
        Self::with_suffix(dir, base_offset, config, files, "")
    }

    fn with_suffix(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        files: &Arc<FileCache>,
        suffix: &'static str,
    ) -> Self {
        Self {
            base_offset,
            log_path: dir.join(offset_file_name(base_offset, "log") + suffix),
            suffix,
            files: files.clone(),
            file_id: new_file_id(),
            size: 0,
            next_offset: base_offset,
            indexes: OnceCell::new(),
            unsynced: false,
            damage_reported: Cell::new(false),
            index_interval_bytes: config.index_interval_bytes,
            segment_index_bytes: config.segment_index_bytes,
        }
    }

    fn index_path(&self, extension: &str) -> PathBuf {
        self.log_path
            .with_file_name(offset_file_name(self.base_offset, extension) + self.suffix)
    }

    fn empty_indexes(&self) -> Result<Indexes, LogError> {
        Ok(Indexes {
            offset_index: OffsetIndex::create(&self.index_path("index"), self.segment_index_bytes)?,
            time_index: TimeIndex::create(&self.index_path("timeindex"), self.segment_index_bytes)?,
            bytes_since_last_index_entry: 0,
            max_timestamp: -1,
            offset_of_max_timestamp: self.base_offset,
            first_batch_timestamp: None,
        })
    }

    /// Creates a new, empty segment starting at `base_offset`.
    pub fn create(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        files: &Arc<FileCache>,
    ) -> Result<Self, LogError> {
        Self::create_with_suffix(dir, base_offset, config, files, "")
    }

    /// Creates the empty segment the cleaner writes a cleaned group of segments into,
    /// beside them: its files carry [`CLEANED_SUFFIX`] until [`Self::rename_suffix`].
    pub fn create_cleaned(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        files: &Arc<FileCache>,
    ) -> Result<Self, LogError> {
        Self::create_with_suffix(dir, base_offset, config, files, CLEANED_SUFFIX)
    }

    fn create_with_suffix(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        files: &Arc<FileCache>,
        suffix: &'static str,
    ) -> Result<Self, LogError> {
        let mut segment = Self::with_suffix(dir, base_offset, config, files, suffix);
        File::create(&segment.log_path)?;
        let indexes = segment.empty_indexes()?;
        let _ = segment.indexes.set(indexes);
        segment.unsynced = true;
        Ok(segment)
    }

    /// Renames the segment's files to carry `suffix` instead of their current one: the
    /// indexes first, the `.log` last, so that the `.log`'s name says how far a swap got.
    pub fn rename_suffix(&mut self, suffix: &'static str) -> Result<(), LogError> {
        let indexes = self
            .indexes
            .get_mut()
            .expect("a cleaned segment has its indexes");
        let name = |extension: &str| offset_file_name(self.base_offset, extension) + suffix;
        let dir = self
            .log_path
            .parent()
            .expect("a segment lives in a directory");
        indexes.offset_index.rename(dir.join(name("index")))?;
        indexes.time_index.rename(dir.join(name("timeindex")))?;
        let log_path = dir.join(name("log"));
        fs::rename(&self.log_path, &log_path)?;
        self.log_path = log_path;
        self.suffix = suffix;
        Ok(())
    }

    /// Removes the files of a segment the cleaner wrote but did not swap in.
    pub fn discard(self) {
        for extension in SEGMENT_EXTENSIONS {
            let _ = fs::remove_file(self.index_path(extension));
        }
    }

    /// Opens an existing segment.
    ///
    /// Trusted, the segment is taken to be valid up to its file length; its indexes are
    /// loaded on first use (an index that is missing, torn, unsorted or pointing anywhere
    /// but at the batch it names is then rebuilt from the batch headers). Recovered, every
    /// batch is read and its CRC checked, the indexes are rebuilt, and the file is
    /// truncated at the first torn or corrupt batch.
    pub fn open(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        files: &Arc<FileCache>,
        mode: OpenMode,
    ) -> Result<Self, LogError> {
        let mut segment = Self::new(dir, base_offset, config, files);
        segment.size = fs::metadata(&segment.log_path)?.len();
        match mode {
            // An empty segment ends where it starts, whatever a checkpoint says (and a
            // partition never written to has none): nothing to read, its indexes open on
            // first use. Reading them here cost four file-system calls per partition, most
            // of a start-up of 13,000 empty partitions.
            OpenMode::Trusted { .. } if segment.size == 0 => {
                segment.next_offset = base_offset;
            }
            OpenMode::Trusted {
                next_offset: Some(next),
            } => segment.next_offset = next,
            OpenMode::Trusted { next_offset: None } => {
                let (indexes, next) = segment.load_trusted(None)?;
                segment.next_offset = next;
                let _ = segment.indexes.set(indexes);
            }
            OpenMode::Recover { recovery_point } => segment.recover(recovery_point)?,
        }
        Ok(segment)
    }

    /// Reads every batch above the trusted index prefix, checking CRCs, indexes them and
    /// cuts a torn tail.
    fn recover(&mut self, recovery_point: i64) -> Result<(), LogError> {
        let file = self.file()?;
        let (mut indexes, start) = match self.trusted_index_prefix(&file, recovery_point)? {
            Some(prefix) => prefix,
            None => (self.empty_indexes()?, 0),
        };
        let outcome = self.scan_from(&file, &mut indexes, start, true, true)?;
        let torn = outcome.valid_end < self.size;
        if torn {
            tracing::warn!(
                segment = %self.log_path.display(),
                valid = outcome.valid_end,
                size = self.size,
                "truncating torn or corrupt tail of segment"
            );
            file.set_len(outcome.valid_end)?;
            self.size = outcome.valid_end;
        }
        indexes.offset_index.write_pending()?;
        indexes.time_index.write_pending()?;
        indexes.first_batch_timestamp = read_header(&file, self.size, 0)?.map(|h| h.max_timestamp);
        self.next_offset = outcome.next_offset.unwrap_or(self.base_offset);
        self.unsynced = torn || self.next_offset > recovery_point;
        let _ = self.indexes.set(indexes);
        Ok(())
    }

    /// The part of the on-disk indexes that describes fsynced data: the entries for batches
    /// below `recovery_point`, if the last of them names the batch at its position. Returns
    /// them with that position, where recovery starts reading, so recovery reads what was
    /// written since the last flush, not the whole segment. `None` if nothing is trusted.
    fn trusted_index_prefix(
        &self,
        file: &File,
        recovery_point: i64,
    ) -> Result<Option<(Indexes, u64)>, LogError> {
        let relative_rp = recovery_point - self.base_offset;
        if relative_rp <= 0 {
            return Ok(None);
        }
        let index_bytes = self.segment_index_bytes;
        let (Some(mut offset_index), Some(mut time_index)) = (
            OffsetIndex::open(&self.index_path("index"), index_bytes)?,
            TimeIndex::open(&self.index_path("timeindex"), index_bytes)?,
        ) else {
            return Ok(None);
        };
        let Some(last) = offset_index.floor(relative_rp - 1).filter(|e| {
            read_header_is(
                file,
                self.size,
                e.position as u64,
                self.base_offset + e.relative_offset as i64,
            )
        }) else {
            return Ok(None);
        };
        offset_index.truncate_from(last.relative_offset as i64 + 1)?;
        time_index.truncate_to(|e| e.relative_offset <= last.relative_offset)?;
        let mut indexes = Indexes {
            offset_index,
            time_index,
            bytes_since_last_index_entry: 0,
            max_timestamp: -1,
            offset_of_max_timestamp: self.base_offset,
            first_batch_timestamp: None,
        };
        if let Some(entry) = indexes.time_index.last() {
            indexes.max_timestamp = entry.timestamp;
            indexes.offset_of_max_timestamp = self.base_offset + entry.relative_offset as i64;
        }
        Ok(Some((indexes, last.position as u64)))
    }

    /// Loads the indexes of a trusted segment, rebuilding them from the batch headers if
    /// they do not fit the file. Returns them with the offset the segment ends at, which
    /// must be `expected_next` when that is known: anything else is a gap (or an overlap)
    /// between this segment and the next, reported rather than served as a continuous log.
    fn load_trusted(&self, expected_next: Option<i64>) -> Result<(Indexes, i64), LogError> {
        let file = self.file()?;
        let index_bytes = self.segment_index_bytes;
        let loaded = match (
            OffsetIndex::open(&self.index_path("index"), index_bytes)?,
            TimeIndex::open(&self.index_path("timeindex"), index_bytes)?,
        ) {
            (Some(offset_index), Some(time_index)) => Some(Indexes {
                offset_index,
                time_index,
                bytes_since_last_index_entry: 0,
                max_timestamp: -1,
                offset_of_max_timestamp: self.base_offset,
                first_batch_timestamp: None,
            }),
            _ => None,
        };
        let (mut indexes, outcome) = self.fit_indexes(&file, loaded)?;
        if outcome.valid_end < self.size {
            return Err(self.corrupt(format!("torn batch at position {}", outcome.valid_end)));
        }
        let next = outcome.next_offset.unwrap_or(self.base_offset);
        // Ending below the next segment's base is a range the cleaner emptied; ending
        // above it, an overlap no log can have.
        if let Some(expected) = expected_next.filter(|&e| next > e) {
            return Err(self.corrupt(format!(
                "segment ends at offset {next} but the next segment starts at offset \
                 {expected}: the segments overlap"
            )));
        }
        indexes.first_batch_timestamp = read_header(&file, self.size, 0)?.map(|h| h.max_timestamp);
        Ok((indexes, next))
    }

    /// Completes indexes read from disk (or kept in memory) by scanning the batches after
    /// their last entry, or rebuilds them from every batch header if they do not fit the
    /// file. Returns them with where the scanned batches end.
    fn fit_indexes(
        &self,
        file: &File,
        indexes: Option<Indexes>,
    ) -> Result<(Indexes, ScanOutcome), LogError> {
        if let Some(mut indexes) = indexes {
            if let Some(outcome) = self.scan_tail_after_index(file, &mut indexes)? {
                return Ok((indexes, outcome));
            }
        }
        if self.size > 0 {
            tracing::warn!(segment = %self.log_path.display(), "rebuilding index");
        }
        let mut indexes = self.empty_indexes()?;
        let outcome = self.scan_from(file, &mut indexes, 0, false, true)?;
        indexes.offset_index.write_pending()?;
        indexes.time_index.write_pending()?;
        Ok((indexes, outcome))
    }

    fn corrupt(&self, reason: String) -> LogError {
        LogError::CorruptFile {
            path: self.log_path.display().to_string(),
            reason,
        }
    }

    /// The indexes, loading them on first use.
    fn indexes(&self) -> Result<&Indexes, LogError> {
        if self.indexes.get().is_none() {
            let (indexes, _) = self
                .load_trusted(Some(self.next_offset))
                .inspect_err(|e| {
                    if !self.damage_reported.replace(true) {
                        tracing::error!(segment = %self.log_path.display(), error = %e, "damaged segment: reads and appends that need it get KAFKA_STORAGE_ERROR");
                    }
                })?;
            let _ = self.indexes.set(indexes);
        }
        Ok(self.indexes.get().expect("just loaded"))
    }

    /// The `.log`, through the cache of open files.
    pub(crate) fn file(&self) -> Result<Arc<File>, LogError> {
        Ok(self.files.get(self.file_id, &self.log_path)?)
    }

    /// Trusting the loaded indexes, reads the batch headers after the last offset-index
    /// entry. `None` if the indexes do not fit the file: the offset index empty for a
    /// non-empty log, its last entry not naming the batch at its position, the batches
    /// after it not ending exactly at the end of the file, or the time index naming an
    /// offset past the end.
    fn scan_tail_after_index(
        &self,
        file: &File,
        indexes: &mut Indexes,
    ) -> Result<Option<ScanOutcome>, LogError> {
        let Some(last) = indexes.offset_index.last() else {
            return Ok((self.size == 0).then_some(ScanOutcome {
                valid_end: 0,
                next_offset: None,
            }));
        };
        let position = last.position as u64;
        let expected_base = self.base_offset + last.relative_offset as i64;
        let fits =
            read_header(file, self.size, position)?.is_some_and(|h| h.base_offset == expected_base);
        if !fits {
            return Ok(None);
        }
        let newest_time_entry = indexes.time_index.last();
        if let Some(entry) = newest_time_entry {
            indexes.max_timestamp = entry.timestamp;
            indexes.offset_of_max_timestamp = self.base_offset + entry.relative_offset as i64;
        }
        let outcome = self.scan_from(file, indexes, position, false, false)?;
        let next_relative = outcome.next_offset.map_or(0, |n| n - self.base_offset);
        if outcome.valid_end != self.size
            || newest_time_entry.is_some_and(|e| e.relative_offset as i64 >= next_relative)
        {
            return Ok(None);
        }
        indexes.bytes_since_last_index_entry = self.size - position;
        Ok(Some(outcome))
    }

    /// Reads batch headers from `start` to the end of the file, optionally verifying CRCs
    /// and re-adding index entries, and returns where the valid batches end.
    fn scan_from(
        &self,
        file: &File,
        indexes: &mut Indexes,
        start: u64,
        verify: bool,
        index: bool,
    ) -> Result<ScanOutcome, LogError> {
        let mut position = start;
        let mut next_offset = None;
        let mut batch = Vec::new();
        while position < self.size {
            let Some(header) = read_header(file, self.size, position)? else {
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
                file.read_exact_at(&mut batch, position)?;
                if verify_crc(&batch).is_err() {
                    break;
                }
            }
            if index {
                indexes.add_entries(
                    self.base_offset,
                    self.index_interval_bytes,
                    position,
                    header.base_offset,
                    header.max_timestamp,
                    len,
                );
            } else if header.max_timestamp > indexes.max_timestamp {
                indexes.max_timestamp = header.max_timestamp;
                indexes.offset_of_max_timestamp = header.base_offset;
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
        read_header(&*self.file()?, self.size, position)
    }

    /// Whether `offset` can be stored in this segment's 32-bit relative index offsets
    /// (0 ≤ offset − base ≤ i32::MAX, Kafka's `canConvertToRelativeOffset`).
    pub fn fits_relative_offsets(&self, offset: i64) -> bool {
        fits_relative_offsets(self.base_offset, offset)
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
        self.indexes()?;
        let file = self.file()?;
        let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(batches.len() * 2);
        for b in batches {
            slices.push(IoSlice::new(&b.prefix));
            slices.push(IoSlice::new(b.rest));
        }
        self.unsynced = true;
        if let Err(e) = write_all_vectored(&file, &mut slices) {
            // A failed write (ENOSPC, EIO) may have appended part of the batches. Cut the
            // file back to the last whole batch so the next append lands where the index
            // and `size` say it does.
            if let Err(truncate) = file.set_len(self.size) {
                tracing::error!(segment = %self.log_path.display(), error = %truncate, "cannot truncate after a failed append");
            }
            return Err(e.into());
        }
        let (base, interval) = (self.base_offset, self.index_interval_bytes);
        let mut size = self.size;
        let indexes = self.indexes.get_mut().expect("loaded above");
        for b in batches {
            let len = b.len() as u64;
            if indexes.first_batch_timestamp.is_none() {
                indexes.first_batch_timestamp = Some(b.max_timestamp);
            }
            indexes.add_entries(base, interval, size, b.base_offset, b.max_timestamp, len);
            size += len;
            self.next_offset = b.last_offset + 1;
        }
        self.size = size;
        Ok(())
    }

    /// Removes the batches from the one holding `offset` on (Kafka's
    /// `LogSegment.truncateTo`), cutting the `.log` and both indexes. If `offset` falls
    /// inside a batch, that whole batch goes: the segment then ends below `offset`.
    /// Returns the number of bytes removed.
    pub fn truncate_to(&mut self, offset: i64) -> Result<u64, LogError> {
        let Some(position) = self.position_of(offset)? else {
            return Ok(0);
        };
        let file = self.file()?;
        let new_next = read_header(&file, self.size, position)?
            .expect("position_of names a whole batch")
            .base_offset;
        let removed = self.size - position;
        file.set_len(position)?;
        self.size = position;
        self.next_offset = new_next;
        self.unsynced = true;
        // Should this fail from here on, the indexes stay unloaded and the next use reloads
        // them from disk against the truncated file (and reports what does not fit).
        let mut indexes = self.indexes.take().expect("position_of loaded the indexes");
        let first_batch_timestamp = indexes.first_batch_timestamp.filter(|_| position > 0);
        let relative = new_next - self.base_offset;
        indexes.offset_index.truncate_from(relative)?;
        indexes
            .time_index
            .truncate_to(|e| (e.relative_offset as i64) < relative)?;
        indexes.max_timestamp = -1;
        indexes.offset_of_max_timestamp = self.base_offset;
        let (mut indexes, outcome) = self.fit_indexes(&file, Some(indexes))?;
        if outcome.valid_end < self.size {
            return Err(self.corrupt(format!("torn batch at position {}", outcome.valid_end)));
        }
        let end = outcome.next_offset.unwrap_or(self.base_offset);
        if end != new_next {
            return Err(self.corrupt(format!(
                "truncated before the batch at offset {new_next}, the batches end at {end}"
            )));
        }
        indexes.first_batch_timestamp = first_batch_timestamp;
        let _ = self.indexes.set(indexes);
        Ok(removed)
    }

    /// Byte position of the batch holding `offset` (the first batch whose last offset is
    /// at or after it), found by an index lookup and a short header scan.
    pub fn position_of(&self, offset: i64) -> Result<Option<u64>, LogError> {
        let relative = (offset - self.base_offset).max(0);
        let mut position = self
            .indexes()?
            .offset_index
            .floor(relative)
            .map_or(0, |e| e.position as u64);
        let file = self.file()?;
        while let Some(header) = read_header(&file, self.size, position)? {
            if header.last_offset() >= offset {
                return Ok(Some(position));
            }
            position += header.total_len() as u64;
        }
        Ok(None)
    }

    /// The end of the last whole batch at or before `cut`, for batches starting at
    /// `start` (a batch boundary below `cut`); `start` if the first batch ends after `cut`.
    /// The offset index names a batch start at most `index.interval.bytes` (and a batch)
    /// before any position, so only the headers after it are read.
    pub fn whole_batches_end(&self, start: u64, cut: u64) -> Result<u64, LogError> {
        let mut end = self
            .indexes()?
            .offset_index
            .last_where(|e| e.position as u64 <= cut)
            .map_or(start, |e| (e.position as u64).max(start));
        let file = self.file()?;
        while let Some(header) = read_header(&file, self.size, end)? {
            let next = end + header.total_len() as u64;
            if next > cut {
                break;
            }
            end = next;
        }
        Ok(end)
    }

    /// Position of the first batch whose maximum timestamp is at least `timestamp`, among
    /// the batches holding offsets at or after `min_offset` (the log start offset).
    pub fn position_of_timestamp(
        &self,
        timestamp: i64,
        min_offset: i64,
    ) -> Result<Option<(u64, RecordBatchHeader)>, LogError> {
        let start_offset = self
            .indexes()?
            .time_index
            .floor(timestamp)
            .map_or(self.base_offset, |e| {
                self.base_offset + e.relative_offset as i64
            })
            .max(min_offset);
        let mut position = self.position_of(start_offset)?.unwrap_or(self.size);
        let file = self.file()?;
        while let Some(header) = read_header(&file, self.size, position)? {
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
        self.file()?.read_exact_at(&mut buf, position)?;
        Ok(buf)
    }

    /// fsyncs the log file if it changed and writes and fsyncs its indexes if they did.
    pub fn flush(&mut self) -> Result<(), LogError> {
        if self.unsynced {
            self.file()?.sync_data()?;
            self.unsynced = false;
        }
        if let Some(indexes) = self.indexes.get_mut() {
            indexes.offset_index.flush()?;
            indexes.time_index.flush()?;
        }
        Ok(())
    }

    /// Writes the pending index entries without any fsync, for a shutdown that then makes
    /// the whole file system durable at once (`syncfs`).
    pub fn write_pending(&mut self) -> Result<(), LogError> {
        if let Some(indexes) = self.indexes.get_mut() {
            indexes.offset_index.write_pending()?;
            indexes.time_index.write_pending()?;
        }
        Ok(())
    }

    /// Removes the segment's files.
    pub fn delete(self) -> Result<(), LogError> {
        self.files.forget(self.file_id);
        let dir = self
            .log_path
            .parent()
            .expect("a segment lives in a directory");
        Self::delete_files(dir, self.base_offset)
    }

    /// Removes the files of the segment at `base_offset` in `dir` without reading them
    /// (they may be unreadable: recovery drops the segments after a truncated one).
    pub fn delete_files(dir: &Path, base_offset: i64) -> Result<(), LogError> {
        for extension in SEGMENT_EXTENSIONS {
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
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }
    pub fn size(&self) -> u64 {
        self.size
    }
    pub fn max_timestamp(&self) -> Result<i64, LogError> {
        Ok(self.indexes()?.max_timestamp)
    }
    pub fn first_batch_timestamp(&self) -> Result<Option<i64>, LogError> {
        Ok(self.indexes()?.first_batch_timestamp)
    }
    pub fn is_index_full(&self) -> Result<bool, LogError> {
        let indexes = self.indexes()?;
        Ok(indexes.offset_index.is_full() || indexes.time_index.is_full())
    }
}

impl Drop for Segment {
    /// Closes the segment's `.log` in the cache, so a dropped segment (a deleted topic, a
    /// log that failed to open) holds no descriptor.
    fn drop(&mut self) {
        self.files.forget(self.file_id);
    }
}

impl Indexes {
    /// Adds index entries for a batch written at `position`, as Kafka does: every
    /// `index.interval.bytes`, an offset entry for the batch and, if the maximum
    /// timestamp grew since the last time entry, a time entry (maximum timestamp so far,
    /// offset of the batch that first carried it).
    fn add_entries(
        &mut self,
        segment_base: i64,
        index_interval_bytes: u64,
        position: u64,
        base_offset: i64,
        max_timestamp: i64,
        len: u64,
    ) {
        if max_timestamp > self.max_timestamp {
            self.max_timestamp = max_timestamp;
            self.offset_of_max_timestamp = base_offset;
        }
        let relative = relative_offset(segment_base, base_offset);
        let indexed_already = self
            .offset_index
            .last()
            .is_some_and(|e| e.relative_offset == relative);
        if !indexed_already
            && (self.offset_index.last().is_none()
                || self.bytes_since_last_index_entry >= index_interval_bytes)
        {
            self.offset_index.append(OffsetPosition {
                relative_offset: relative,
                position: position as u32,
            });
            if self
                .time_index
                .last()
                .is_none_or(|e| self.max_timestamp > e.timestamp)
            {
                self.time_index.append(TimestampOffset {
                    timestamp: self.max_timestamp,
                    relative_offset: relative_offset(segment_base, self.offset_of_max_timestamp),
                });
            }
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += len;
    }
}

fn fits_relative_offsets(segment_base: i64, offset: i64) -> bool {
    (0..=i32::MAX as i64).contains(&(offset - segment_base))
}

/// The index's relative offset of `offset`. The log rolls before an append that would not
/// fit, and recovery stops at a batch that does not, so a miss is a bug here.
fn relative_offset(segment_base: i64, offset: i64) -> u32 {
    assert!(
        fits_relative_offsets(segment_base, offset),
        "offset {offset} outside the relative range of segment {segment_base}"
    );
    (offset - segment_base) as u32
}

/// Whether the batch at `position` parses and has base offset `base_offset` (a trusted
/// index entry must name the batch it points at). A read error counts as no.
fn read_header_is(file: &File, size: u64, position: u64, base_offset: i64) -> bool {
    read_header(file, size, position)
        .ok()
        .flatten()
        .is_some_and(|h| h.base_offset == base_offset)
}

/// Reads the batch header at `position` of a file of `size` bytes, or `None` if it does
/// not parse.
fn read_header(
    file: &File,
    size: u64,
    position: u64,
) -> Result<Option<RecordBatchHeader>, LogError> {
    if position + BATCH_HEADER_LEN as u64 > size {
        return Ok(None);
    }
    let mut buf = [0u8; BATCH_HEADER_LEN];
    file.read_exact_at(&mut buf, position)?;
    Ok(RecordBatchHeader::parse(&buf).ok())
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
