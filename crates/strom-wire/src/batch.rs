//! Zero-copy views of Kafka record batches (magic v2).
//!
//! The broker never decodes records one by one: it reads the fixed 61-byte batch header,
//! checks the CRC32C over the batch and rewrites the base offset in place. Compressed
//! batches therefore travel from producer to disk to consumer byte for byte as sent.
//!
//! Layout (all big-endian):
//!
//! | offset | field                |
//! |--------|----------------------|
//! | 0      | baseOffset i64       |
//! | 8      | batchLength i32      |
//! | 12     | partitionLeaderEpoch i32 |
//! | 16     | magic i8             |
//! | 17     | crc u32 (CRC32C of bytes 21..end) |
//! | 21     | attributes i16       |
//! | 23     | lastOffsetDelta i32  |
//! | 27     | baseTimestamp i64    |
//! | 35     | maxTimestamp i64     |
//! | 43     | producerId i64       |
//! | 51     | producerEpoch i16    |
//! | 53     | baseSequence i32     |
//! | 57     | recordCount i32      |

use thiserror::Error;

/// Size of the record-batch header, up to and including the record count.
pub const BATCH_HEADER_LEN: usize = 61;
/// Bytes before `batchLength` counts: baseOffset and batchLength themselves.
pub const LOG_OVERHEAD: usize = 12;
const CRC_START: usize = 21;
const CRC_OFFSET: usize = 17;
const MAGIC_OFFSET: usize = 16;
const LEADER_EPOCH_OFFSET: usize = 12;

/// Why a sequence of bytes is not a valid record batch.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BatchError {
    /// Fewer bytes than the header or than `batchLength` announces: a torn write on disk,
    /// or a truncated produce request.
    #[error("record batch truncated: need {needed} bytes, have {available}")]
    Truncated { needed: usize, available: usize },
    /// Only magic v2 batches are accepted (Kafka 4 dropped v0/v1 on the produce path).
    #[error("unsupported record batch magic {0}")]
    UnsupportedMagic(i8),
    /// `batchLength` is smaller than a header.
    #[error("invalid record batch length {0}")]
    InvalidLength(i32),
    /// The stored CRC does not match the batch contents (Kafka's CORRUPT_MESSAGE).
    #[error("record batch CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    /// The header's counts are inconsistent with each other or with the records
    /// (Kafka's INVALID_RECORD, with its message).
    #[error("{0}")]
    InvalidHeader(String),
    /// A record inside the batch is malformed (Kafka's INVALID_RECORD).
    #[error("{0}")]
    InvalidRecord(String),
    /// A compressed records section does not decompress, or inflates past the limit.
    #[error("invalid compressed records: {0}")]
    Compression(String),
}

impl BatchError {
    /// Whether Kafka answers this with INVALID_RECORD (the batch is well-formed bytes
    /// whose contents break a rule) rather than CORRUPT_MESSAGE (damaged bytes).
    pub fn is_invalid_record(&self) -> bool {
        matches!(self, Self::InvalidHeader(_) | Self::InvalidRecord(_))
    }
}

/// The fixed header of one record batch, parsed without touching the records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordBatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl RecordBatchHeader {
    /// Parses the header at the start of `bytes`. Checks the magic and the length field,
    /// not the CRC (see [`verify_crc`]).
    pub fn parse(bytes: &[u8]) -> Result<Self, BatchError> {
        if bytes.len() < BATCH_HEADER_LEN {
            return Err(BatchError::Truncated {
                needed: BATCH_HEADER_LEN,
                available: bytes.len(),
            });
        }
        let magic = bytes[MAGIC_OFFSET] as i8;
        if magic != 2 {
            return Err(BatchError::UnsupportedMagic(magic));
        }
        let batch_length = be_i32(bytes, 8);
        if (batch_length as i64) < (BATCH_HEADER_LEN - LOG_OVERHEAD) as i64 {
            return Err(BatchError::InvalidLength(batch_length));
        }
        Ok(Self {
            base_offset: be_i64(bytes, 0),
            batch_length,
            partition_leader_epoch: be_i32(bytes, LEADER_EPOCH_OFFSET),
            magic,
            crc: u32::from_be_bytes(bytes[CRC_OFFSET..CRC_START].try_into().expect("4 bytes")),
            attributes: be_i16(bytes, 21),
            last_offset_delta: be_i32(bytes, 23),
            base_timestamp: be_i64(bytes, 27),
            max_timestamp: be_i64(bytes, 35),
            producer_id: be_i64(bytes, 43),
            producer_epoch: be_i16(bytes, 51),
            base_sequence: be_i32(bytes, 53),
            record_count: be_i32(bytes, 57),
        })
    }

    /// Bytes the whole batch occupies, header included.
    pub fn total_len(&self) -> usize {
        LOG_OVERHEAD + self.batch_length as usize
    }

    /// Offset of the batch's last record.
    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }

    /// Offset the next batch in the log will start at.
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }

    /// Compression codec id (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
    pub fn compression(&self) -> i16 {
        self.attributes & 0x07
    }

    /// Whether `max_timestamp` was set by the broker (LogAppendTime) rather than the producer.
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & 0x08 != 0
    }

    /// Whether the batch belongs to a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes & 0x10 != 0
    }

    /// Whether the batch holds control records (transaction markers).
    pub fn is_control(&self) -> bool {
        self.attributes & 0x20 != 0
    }

    /// When the log cleaner may remove the batch's tombstones (and, for a control batch,
    /// the marker): set by the cleaner the first time it keeps them (KIP-534), stored in
    /// the base timestamp with [`DELETE_HORIZON_BIT`] set.
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        (self.attributes & DELETE_HORIZON_BIT != 0).then_some(self.base_timestamp)
    }

    /// Whether the producer set a producer id, i.e. the batch is idempotent.
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }

    /// Sequence number of the batch's last record, wrapping as Kafka does at `i32::MAX`.
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence < 0 {
            return self.base_sequence;
        }
        let last = self.base_sequence as i64 + self.last_offset_delta as i64;
        if last > i32::MAX as i64 {
            (last - i32::MAX as i64 - 1) as i32
        } else {
            last as i32
        }
    }

    /// Checks the header's counts describe a batch a client may send, as Kafka's
    /// `LogValidator.validateBatch` does: a positive offset span equal to the record
    /// count (so `lastOffsetDelta` cannot move the log end past the records).
    pub fn validate_counts(&self) -> Result<(), BatchError> {
        let span = self.last_offset_delta as i64 + 1;
        if span <= 0 {
            return Err(BatchError::InvalidHeader(format!(
                "Batch has an invalid offset range: [{}, {}]",
                self.base_offset,
                self.last_offset()
            )));
        }
        if self.record_count <= 0 {
            return Err(BatchError::InvalidHeader(format!(
                "Invalid reported count for record batch: {}",
                self.record_count
            )));
        }
        if span != self.record_count as i64 {
            return Err(BatchError::InvalidHeader(format!(
                "Inconsistent batch offset range [{}, {}] and count of records {}",
                self.base_offset,
                self.last_offset(),
                self.record_count
            )));
        }
        Ok(())
    }

    /// The header of a batch holding the same records re-encoded: `attributes` (codec
    /// and timestamp type) and `max_timestamp` replaced, everything else kept.
    pub fn encode_rebuilt(&self, attributes: i16, max_timestamp: i64, records: &[u8]) -> Vec<u8> {
        let mut b = Vec::with_capacity(BATCH_HEADER_LEN + records.len());
        b.extend_from_slice(&self.base_offset.to_be_bytes());
        b.extend_from_slice(
            &((BATCH_HEADER_LEN - LOG_OVERHEAD + records.len()) as i32).to_be_bytes(),
        );
        b.extend_from_slice(&self.partition_leader_epoch.to_be_bytes());
        b.push(2);
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&attributes.to_be_bytes());
        b.extend_from_slice(&self.last_offset_delta.to_be_bytes());
        b.extend_from_slice(&self.base_timestamp.to_be_bytes());
        b.extend_from_slice(&max_timestamp.to_be_bytes());
        b.extend_from_slice(&self.producer_id.to_be_bytes());
        b.extend_from_slice(&self.producer_epoch.to_be_bytes());
        b.extend_from_slice(&self.base_sequence.to_be_bytes());
        b.extend_from_slice(&self.record_count.to_be_bytes());
        b.extend_from_slice(records);
        update_crc(&mut b);
        b
    }
}

/// Attribute bit saying the base timestamp holds the delete horizon (KIP-534).
pub const DELETE_HORIZON_BIT: i16 = 0x40;

/// Attribute bit of the timestamp type: set for LogAppendTime.
pub const TIMESTAMP_TYPE_BIT: i16 = 0x08;

/// Stamps a batch with the broker's append time, as Kafka does for a topic with
/// `message.timestamp.type=LogAppendTime`: the timestamp-type bit and the maximum
/// timestamp are set, and the CRC, which covers both, recomputed.
pub fn set_log_append_time(batch: &mut [u8], now_ms: i64) {
    let attributes = be_i16(batch, 21) | TIMESTAMP_TYPE_BIT;
    batch[21..23].copy_from_slice(&attributes.to_be_bytes());
    batch[35..43].copy_from_slice(&now_ms.to_be_bytes());
    update_crc(batch);
}

fn update_crc(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[CRC_START..]);
    batch[CRC_OFFSET..CRC_START].copy_from_slice(&crc.to_be_bytes());
}

/// Verifies the CRC32C of one whole batch (`bytes` must be exactly the batch).
pub fn verify_crc(batch: &[u8]) -> Result<(), BatchError> {
    let stored = u32::from_be_bytes(batch[CRC_OFFSET..CRC_START].try_into().expect("4 bytes"));
    let computed = crc32c::crc32c(&batch[CRC_START..]);
    if stored != computed {
        return Err(BatchError::CrcMismatch { stored, computed });
    }
    Ok(())
}

/// Rewrites the base offset of a batch in place. The base offset is outside the CRC, so
/// the batch stays valid.
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[0..8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Rewrites the partition leader epoch in place (also outside the CRC).
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[LEADER_EPOCH_OFFSET..LEADER_EPOCH_OFFSET + 4].copy_from_slice(&epoch.to_be_bytes());
}

/// Iterates over the batches of a record set, yielding each header with its bytes.
///
/// Stops with an error at the first batch that is truncated or malformed; the caller
/// decides whether that is a torn tail (recovery truncates there) or a bad request.
pub struct RecordBatches<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> RecordBatches<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, position: 0 }
    }

    /// Byte position of the next batch: after an error, the length of the valid prefix.
    pub fn position(&self) -> usize {
        self.position
    }
}

impl<'a> Iterator for RecordBatches<'a> {
    type Item = Result<(RecordBatchHeader, &'a [u8]), BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = &self.bytes[self.position..];
        if rest.is_empty() {
            return None;
        }
        let header = match RecordBatchHeader::parse(rest) {
            Ok(h) => h,
            Err(e) => return Some(Err(e)),
        };
        let len = header.total_len();
        if rest.len() < len {
            return Some(Err(BatchError::Truncated {
                needed: len,
                available: rest.len(),
            }));
        }
        self.position += len;
        Some(Ok((header, &rest[..len])))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds a valid uncompressed batch header with `count` empty-bodied records; the
    /// records themselves are opaque bytes to this module.
    pub fn sample_batch(count: i32, body: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&0i64.to_be_bytes());
        b.extend_from_slice(&((BATCH_HEADER_LEN - LOG_OVERHEAD + body.len()) as i32).to_be_bytes());
        b.extend_from_slice(&0i32.to_be_bytes());
        b.push(2);
        b.extend_from_slice(&0u32.to_be_bytes());
        b.extend_from_slice(&0i16.to_be_bytes());
        b.extend_from_slice(&(count - 1).to_be_bytes());
        b.extend_from_slice(&1000i64.to_be_bytes());
        b.extend_from_slice(&1005i64.to_be_bytes());
        b.extend_from_slice(&(-1i64).to_be_bytes());
        b.extend_from_slice(&(-1i16).to_be_bytes());
        b.extend_from_slice(&(-1i32).to_be_bytes());
        b.extend_from_slice(&count.to_be_bytes());
        b.extend_from_slice(body);
        let crc = crc32c::crc32c(&b[CRC_START..]);
        b[CRC_OFFSET..CRC_START].copy_from_slice(&crc.to_be_bytes());
        b
    }

    #[test]
    fn parses_header_and_verifies_crc() {
        let b = sample_batch(3, b"records");
        let h = RecordBatchHeader::parse(&b).unwrap();
        assert_eq!(h.record_count, 3);
        assert_eq!(h.total_len(), b.len());
        assert_eq!(h.last_offset(), 2);
        assert_eq!(h.max_timestamp, 1005);
        verify_crc(&b).unwrap();
    }

    #[test]
    fn offset_rewrite_keeps_crc_valid_and_corruption_is_detected() {
        let mut b = sample_batch(1, b"x");
        set_base_offset(&mut b, 42);
        verify_crc(&b).unwrap();
        assert_eq!(RecordBatchHeader::parse(&b).unwrap().base_offset, 42);
        let last = b.len() - 1;
        b[last] ^= 0xff;
        assert!(matches!(
            verify_crc(&b),
            Err(BatchError::CrcMismatch { .. })
        ));
    }

    #[test]
    fn iterator_reports_a_torn_tail_with_its_valid_prefix() {
        let mut set = sample_batch(1, b"a");
        let first = set.len();
        set.extend_from_slice(&sample_batch(2, b"bb"));
        set.truncate(set.len() - 1);
        let mut it = RecordBatches::new(&set);
        assert!(it.next().unwrap().is_ok());
        assert!(matches!(it.next(), Some(Err(BatchError::Truncated { .. }))));
        assert_eq!(it.position(), first);
    }

    #[test]
    fn rejects_old_magic() {
        let mut b = sample_batch(1, b"");
        b[MAGIC_OFFSET] = 1;
        assert_eq!(
            RecordBatchHeader::parse(&b),
            Err(BatchError::UnsupportedMagic(1))
        );
    }

    #[test]
    fn last_sequence_wraps_at_i32_max() {
        let mut h = RecordBatchHeader::parse(&sample_batch(3, b"")).unwrap();
        h.base_sequence = i32::MAX - 1;
        assert_eq!(h.last_sequence(), 0);
    }
}
