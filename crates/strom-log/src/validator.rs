//! Validation of a producer's batch before it is appended, as Kafka's `LogValidator`:
//! header invariants, the records themselves where they must be read, and the rewrite
//! the topic asks for (recompression to its `compression.type`, LogAppendTime stamps).
//!
//! Every record of every batch is parsed, as Kafka's validator parses them: its length
//! must cover exactly its fields (attributes, timestamp and offset deltas, key, value,
//! headers), offset deltas must count 0, 1, 2, … and the header's count must match the
//! records. A compressed batch is decompressed for that as it is walked, through a window
//! (`strom_wire::records::walk_records_in`), as Kafka's validator streams it: the batch
//! may inflate to any size, a record to at most [`DECOMPRESSED_LIMIT_FACTOR`] ×
//! `max.message.bytes` and never more than [`DECOMPRESSED_LIMIT_MAX`]. Only a
//! recompression to the topic's codec holds the records whole, within the same limit.
//! A batch whose records do not parse would otherwise be stored and break every consumer
//! that fetches it, and a record that claims two billion headers would be handed to every
//! reader that decodes records. Only varints are parsed and nothing is copied; the fields
//! themselves are looked at where the topic needs them — a compacted topic (keys), a
//! CreateTime range check, a recompression.

use std::borrow::Cow;
use std::cell::RefCell;

use strom_wire::batch::{set_log_append_time, TIMESTAMP_TYPE_BIT};
use strom_wire::codec::{compress, decompress_into, DECOMPRESSED_LIMIT_MAX};
use strom_wire::records::{for_each_record_in, RecordView};
use strom_wire::{BatchError, Codec, RecordBatchHeader, BATCH_HEADER_LEN};

use crate::{LogConfig, LogError};

/// A record of a compressed batch (all its records, where the broker recompresses) may
/// inflate to this many times `max.message.bytes` before the batch is refused: generous
/// for real data (text compresses about 10×), bounded for a bomb.
pub const DECOMPRESSED_LIMIT_FACTOR: usize = 32;

/// Kafka shows at most this many record errors in the partition's error message.
const ERRORS_IN_MESSAGE: usize = 3;

/// Which of Kafka's codes a rejected batch's record errors map to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordErrorKind {
    /// INVALID_RECORD (87)
    InvalidRecord,
    /// INVALID_TIMESTAMP (32)
    InvalidTimestamp,
}

/// One rejected record (KIP-467): its index in the batch and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    pub batch_index: i32,
    pub message: String,
}

/// A batch as it will be written: the producer's bytes, or a rewritten copy.
#[derive(Debug)]
pub struct ValidatedBatch<'a> {
    pub bytes: Cow<'a, [u8]>,
    pub header: RecordBatchHeader,
}

/// Validates one batch of a produce request for the partition `tp` (named in Kafka's
/// messages) and applies the topic's codec and timestamp type.
pub fn validate_batch<'a>(
    tp: &str,
    header: RecordBatchHeader,
    bytes: &'a [u8],
    config: &LogConfig,
    now_ms: i64,
) -> Result<ValidatedBatch<'a>, LogError> {
    header
        .validate_counts()
        .map_err(|e| with_partition(e, tp))?;
    if header.is_control() {
        return Err(invalid_header(format!(
            "Clients are not allowed to write control records in topic partition {tp}."
        )));
    }
    if header.producer_id >= 0 && header.base_sequence < 0 {
        return Err(invalid_header(format!(
            "Invalid sequence number {} in record batch with producerId {} in topic partition {tp}.",
            header.base_sequence, header.producer_id
        )));
    }
    let source = Codec::from_attributes(header.attributes).ok_or_else(|| {
        BatchError::Compression(format!("unknown codec id {}", header.attributes & 0x07))
    })?;
    let target = config.target_codec().unwrap_or(source);
    let check_timestamps = !config.log_append_time
        && (config.timestamp_before_max_ms != i64::MAX
            || config.timestamp_after_max_ms != i64::MAX);
    let producer_set_log_append_time =
        !config.log_append_time && header.attributes & TIMESTAMP_TYPE_BIT != 0;
    let read_records =
        target != source || config.compacts() || check_timestamps || producer_set_log_append_time;
    let section = &bytes[BATCH_HEADER_LEN..];
    let limit = config
        .max_message_bytes
        .saturating_mul(DECOMPRESSED_LIMIT_FACTOR)
        .min(DECOMPRESSED_LIMIT_MAX);
    // A recompression needs the records whole; every other check sees one at a time.
    let mut decompressed = None;
    let plain: Option<&[u8]> = match source {
        _ if target == source => None,
        Codec::None => Some(section),
        codec => {
            let mut buffer = Decompressed::take();
            decompress_into(codec, section, limit, &mut buffer.0)?;
            Some(&decompressed.insert(buffer).0)
        }
    };
    let (codec, records) = plain.map_or((source, section), |records| (Codec::None, records));
    let mut checks = RecordChecks::new(tp, &header, config, now_ms, check_timestamps);
    for_each_record_in(codec, records, header.record_count, limit, |r| {
        if read_records {
            checks.check(r)
        } else {
            Ok(())
        }
    })
    .map_err(|e| with_partition(e, tp))?;
    if let Some(kind) = checks.kind {
        return Err(LogError::RecordErrors {
            kind,
            message: errors_message(kind, &checks.errors),
            errors: checks.errors,
        });
    }
    let stamp = config.log_append_time.then_some(now_ms);
    let bytes = if let Some(records) = plain {
        let attributes = (header.attributes & !0x07 & !TIMESTAMP_TYPE_BIT)
            | target as i16
            | if stamp.is_some() {
                TIMESTAMP_TYPE_BIT
            } else {
                0
            };
        let compressed = compress(target, config.compression_level(target), records)?;
        Cow::Owned(header.encode_rebuilt(
            attributes,
            stamp.unwrap_or(header.max_timestamp),
            &compressed,
        ))
    } else if let Some(now) = stamp {
        let mut owned = bytes.to_vec();
        set_log_append_time(&mut owned, now);
        Cow::Owned(owned)
    } else {
        Cow::Borrowed(bytes)
    };
    if bytes.len() > config.max_message_bytes {
        return Err(LogError::MessageTooLarge {
            size: bytes.len(),
            max: config.max_message_bytes,
        });
    }
    let header = RecordBatchHeader::parse(&bytes)?;
    Ok(ValidatedBatch { bytes, header })
}

thread_local! {
    /// The buffer a log-dir worker decompresses batches into, kept from batch to batch:
    /// a fresh one per batch cost the kernel a page fault per 4 KiB, a tenth of a broker's
    /// CPU when producers compress.
    static DECOMPRESSED: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A thread's decompression buffer kept beyond a batch only up to this capacity, so one
/// batch that inflates to many megabytes does not hold them for good.
const DECOMPRESSED_KEPT_BYTES: usize = 4 << 20;

/// The thread's decompression buffer while a batch is validated; given back when dropped.
struct Decompressed(Vec<u8>);

impl Decompressed {
    fn take() -> Self {
        Self(DECOMPRESSED.take())
    }
}

impl Drop for Decompressed {
    fn drop(&mut self) {
        if self.0.capacity() <= DECOMPRESSED_KEPT_BYTES {
            DECOMPRESSED.set(std::mem::take(&mut self.0));
        }
    }
}

/// Kafka's per-record checks, collecting its per-record errors. A malformed record is an
/// error of the whole batch (Kafka throws rather than collects those).
struct RecordChecks<'t> {
    tp: &'t str,
    compacted: bool,
    base_timestamp: i64,
    set_log_append_time: bool,
    check_timestamps: bool,
    earliest: i64,
    latest: i64,
    kind: Option<RecordErrorKind>,
    errors: Vec<RecordError>,
}

impl<'t> RecordChecks<'t> {
    fn new(
        tp: &'t str,
        header: &RecordBatchHeader,
        config: &LogConfig,
        now_ms: i64,
        check_timestamps: bool,
    ) -> Self {
        Self {
            tp,
            compacted: config.compacts(),
            base_timestamp: header.base_timestamp,
            set_log_append_time: !config.log_append_time
                && header.attributes & TIMESTAMP_TYPE_BIT != 0,
            check_timestamps,
            earliest: now_ms.saturating_sub(config.timestamp_before_max_ms),
            latest: now_ms.saturating_add(config.timestamp_after_max_ms),
            kind: None,
            errors: Vec::new(),
        }
    }

    fn check(&mut self, record: RecordView<'_>) -> Result<(), BatchError> {
        let tp = self.tp;
        if self.compacted && record.key.is_none() {
            self.reject(
                &record,
                RecordErrorKind::InvalidRecord,
                format!(
                    "Compacted topic cannot accept message without key in topic partition {tp}."
                ),
            );
        }
        let timestamp = if self.base_timestamp < 0 {
            -1
        } else {
            self.base_timestamp.saturating_add(record.timestamp_delta)
        };
        let (earliest, latest) = (self.earliest, self.latest);
        if self.check_timestamps && timestamp != -1 && !(earliest..=latest).contains(&timestamp) {
            self.reject(
                &record,
                RecordErrorKind::InvalidTimestamp,
                format!(
                    "Timestamp {timestamp} of message with offset {} is out of range. The timestamp should be within [{earliest}, {latest}]",
                    record.offset_delta
                ),
            );
        } else if self.set_log_append_time {
            self.reject(
                &record,
                RecordErrorKind::InvalidTimestamp,
                format!(
                    "Invalid timestamp type in message with offset {}. Producer should not set timestamp type to LogAppendTime.",
                    record.offset_delta
                ),
            );
        }
        Ok(())
    }

    fn reject(&mut self, record: &RecordView<'_>, kind: RecordErrorKind, message: String) {
        if kind == RecordErrorKind::InvalidTimestamp || self.kind.is_none() {
            self.kind = Some(kind);
        }
        self.errors.push(RecordError {
            batch_index: record.index,
            message,
        });
    }
}

/// Kafka's partition-level message for a batch rejected by its record errors.
fn errors_message(kind: RecordErrorKind, errors: &[RecordError]) -> String {
    if kind == RecordErrorKind::InvalidTimestamp {
        return "One or more records have been rejected due to invalid timestamp".to_string();
    }
    let shown: Vec<String> = errors
        .iter()
        .take(ERRORS_IN_MESSAGE)
        .map(|e| {
            format!(
                "RecordError(batchIndex={}, message='{}')",
                e.batch_index, e.message
            )
        })
        .collect();
    format!(
        "One or more records have been rejected due to {} record errors in total, and only showing the first three errors at most: [{}]",
        errors.len(),
        shown.join(", ")
    )
}

fn invalid_header(message: String) -> LogError {
    LogError::InvalidBatch(BatchError::InvalidHeader(message))
}

/// Adds the partition to a validation message, as Kafka's messages name it.
fn with_partition(e: BatchError, tp: &str) -> LogError {
    LogError::InvalidBatch(match e {
        BatchError::InvalidHeader(m) => {
            BatchError::InvalidHeader(format!("{m} in topic partition {tp}."))
        }
        BatchError::InvalidRecord(m) => {
            BatchError::InvalidRecord(format!("{m} in topic partition {tp}."))
        }
        other => other,
    })
}
