//! The one error type of the log layer, and the Kafka error code of each case.

use kafka_protocol::ResponseError;
use strom_wire::{ApiError, BatchError};
use thiserror::Error;

use crate::validator::{RecordError, RecordErrorKind};
use crate::ProducerStateError;

#[derive(Debug, Error)]
pub enum LogError {
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A batch in a produce request is malformed or fails its CRC (CORRUPT_MESSAGE).
    #[error("invalid record batch: {0}")]
    InvalidBatch(#[from] BatchError),
    /// A follower was given batches that do not continue its log: the first must start at
    /// the log end offset and each next one where the previous ended.
    #[error(
        "unexpected append offset {found}: the batches must continue the log at offset {expected}"
    )]
    UnexpectedAppendOffset { expected: i64, found: i64 },
    /// A batch is larger than `max.message.bytes` (MESSAGE_TOO_LARGE).
    #[error("record batch of {size} bytes exceeds max.message.bytes {max}")]
    MessageTooLarge { size: usize, max: usize },
    /// The requested offset is outside `[log start, log end]` (OFFSET_OUT_OF_RANGE).
    #[error("offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        offset: i64,
        log_start_offset: i64,
        log_end_offset: i64,
    },
    /// Records of a batch break the topic's rules (compacted topic without key,
    /// timestamp out of range): the whole batch is refused, with one error per record
    /// (KIP-467).
    #[error("{message}")]
    RecordErrors {
        kind: RecordErrorKind,
        message: String,
        errors: Vec<RecordError>,
    },
    /// The idempotent-producer check refused the batch.
    #[error(transparent)]
    ProducerState(#[from] ProducerStateError),
    /// The partition's log could not be opened (KAFKA_STORAGE_ERROR until a restart).
    #[error("partition {dir} is offline: {reason}")]
    Offline { dir: String, reason: String },
    /// The log was sealed by a clean shutdown: the broker is stopping and the partition
    /// moves elsewhere, so a client retries against the new leader
    /// (NOT_LEADER_OR_FOLLOWER), and nothing is wrong with the disk.
    #[error("partition {dir} is closed: the broker is shutting down")]
    Closed { dir: String },
    /// A file on disk is not in the format strom writes.
    #[error("corrupt file {path}: {reason}")]
    CorruptFile { path: String, reason: String },
}

/// The Kafka error code of each log failure, as Kafka's `UnifiedLog` raises them.
impl From<LogError> for ApiError {
    fn from(e: LogError) -> Self {
        let code = match &e {
            LogError::InvalidBatch(b) if b.is_invalid_record() => ResponseError::InvalidRecord,
            LogError::InvalidBatch(_) => ResponseError::CorruptMessage,
            LogError::RecordErrors { kind, errors, .. } => {
                let code = match kind {
                    RecordErrorKind::InvalidRecord => ResponseError::InvalidRecord,
                    RecordErrorKind::InvalidTimestamp => ResponseError::InvalidTimestamp,
                };
                let mut error = ApiError::new(code, e.to_string());
                error.record_errors = errors
                    .iter()
                    .map(|r| (r.batch_index, r.message.clone()))
                    .collect();
                return error;
            }
            LogError::MessageTooLarge { .. } => ResponseError::MessageTooLarge,
            LogError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
            LogError::ProducerState(ProducerStateError::OutOfOrderSequence { .. }) => {
                ResponseError::OutOfOrderSequenceNumber
            }
            LogError::ProducerState(ProducerStateError::InvalidProducerEpoch { .. }) => {
                ResponseError::InvalidProducerEpoch
            }
            // Only a follower's append of what its leader sent can fail so; no client sees it.
            LogError::UnexpectedAppendOffset { .. } => ResponseError::UnknownServerError,
            LogError::Closed { .. } => ResponseError::NotLeaderOrFollower,
            LogError::Io(_) | LogError::CorruptFile { .. } | LogError::Offline { .. } => {
                ResponseError::KafkaStorageError
            }
        };
        if matches!(code, ResponseError::KafkaStorageError) {
            tracing::error!(error = %e, "storage error");
        }
        ApiError::new(code, e.to_string())
    }
}
