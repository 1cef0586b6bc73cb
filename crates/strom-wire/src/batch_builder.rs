//! Building record batches (magic v2) in place, for a producer.
//!
//! Records are written straight into the batch's buffer as they are appended — length,
//! attributes, timestamp and offset deltas as varints, key, value, headers — with no
//! per-record allocation and no intermediate record structs, so a producer's cost per
//! record is little more than copying its bytes. The 61-byte header is reserved up front
//! and filled in by [`BatchBuilder::finish`], which compresses the records section if
//! asked and computes the CRC32C.
//!
//! A reused buffer is zeroed once, to its whole capacity, the first time a batch grows
//! past what it holds; records then overwrite the bytes an earlier batch left there. A
//! buffer grown record by record instead cost a `memset` per record, about 3 % of a
//! producer's CPU.

use crate::batch::{BATCH_HEADER_LEN, LOG_OVERHEAD};
use crate::codec::{self, Codec};
use crate::BatchError;

/// The idempotence fields of a batch: who wrote it and its first record's sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerFields {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
}

impl ProducerFields {
    /// A batch of a producer without idempotence.
    pub const NONE: Self = Self {
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
    };
}

/// One open batch: the reserved header followed by the records appended so far.
#[derive(Debug)]
pub struct BatchBuilder {
    /// The batch's bytes up to `len`; beyond it, initialized bytes not yet written by
    /// this batch.
    buf: Vec<u8>,
    len: usize,
    count: i32,
    base_timestamp: i64,
    max_timestamp: i64,
}

impl BatchBuilder {
    /// Opens a batch in `buf` (its contents are overwritten and its capacity kept, so
    /// buffers can be reused) whose timestamps are deltas from `base_timestamp`.
    pub fn new(mut buf: Vec<u8>, base_timestamp: i64) -> Self {
        if buf.len() < BATCH_HEADER_LEN {
            buf.resize(BATCH_HEADER_LEN, 0);
        }
        Self {
            buf,
            len: BATCH_HEADER_LEN,
            count: 0,
            base_timestamp,
            max_timestamp: base_timestamp,
        }
    }

    /// Records appended so far.
    pub fn count(&self) -> i32 {
        self.count
    }

    /// Bytes of the batch so far, header included (before compression).
    pub fn size(&self) -> usize {
        self.len
    }

    /// Whether a record of these lengths (no headers) keeps the batch within `limit` bytes:
    /// a producer seals its batch instead when it does not. Decided without the varint
    /// arithmetic when the record fits even with the longest framing a record can have.
    #[inline]
    pub fn fits(&self, key_len: Option<usize>, value_len: Option<usize>, limit: usize) -> bool {
        self.fits_at(self.base_timestamp, key_len, value_len, limit)
    }

    /// [`BatchBuilder::fits`] for a record with `timestamp`, whose delta from the batch's
    /// first timestamp may take more than a byte: exact, for a producer that must not
    /// fill a batch before its time.
    #[inline]
    pub fn fits_at(
        &self,
        timestamp: i64,
        key_len: Option<usize>,
        value_len: Option<usize>,
        limit: usize,
    ) -> bool {
        let payload = key_len.unwrap_or(0) + value_len.unwrap_or(0);
        self.len + MAX_RECORD_FRAMING + payload <= limit
            || self.size_with(timestamp - self.base_timestamp, key_len, value_len) <= limit
    }

    /// Whether a batch holding only a record of these lengths (no headers) stays within
    /// `limit` bytes, counting the longest framing a record can have.
    pub fn fits_alone(key_len: Option<usize>, value_len: Option<usize>, limit: usize) -> bool {
        let payload = key_len.unwrap_or(0) + value_len.unwrap_or(0);
        BATCH_HEADER_LEN + MAX_RECORD_FRAMING + payload <= limit
    }

    /// The size the batch would have after appending a record of these lengths and this
    /// timestamp delta, without headers.
    fn size_with(
        &self,
        timestamp_delta: i64,
        key_len: Option<usize>,
        value_len: Option<usize>,
    ) -> usize {
        let body = self.body_len(timestamp_delta, key_len, value_len, 0);
        self.len + varint_len(body as i64) + body
    }

    /// Appends one record with `timestamp` (ms) and optional headers. Inlined, so that a
    /// caller's constant arguments (no key, no headers) fold away.
    #[inline(always)]
    pub fn append(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&[u8], Option<&[u8]>)],
    ) {
        let timestamp_delta = timestamp - self.base_timestamp;
        let headers_len: usize = headers
            .iter()
            .map(|(k, v)| field_len(Some(k.len())) + field_len(v.map(<[u8]>::len)))
            .sum();
        let body = self.body_len(
            timestamp_delta,
            key.map(<[u8]>::len),
            value.map(<[u8]>::len),
            headers.len(),
        ) + headers_len;
        let start = self.len;
        let end = start + varint_len(body as i64) + body;
        if end > self.buf.len() {
            self.buf.resize(end.max(self.buf.capacity()), 0);
        }
        // Written through a cursor over the record's bytes: no capacity check per byte.
        let mut out = Cursor {
            out: &mut self.buf[start..end],
            at: 0,
        };
        out.varint(body as i64);
        out.byte(0);
        out.varint(timestamp_delta);
        out.varint(i64::from(self.count));
        out.field(key);
        out.field(value);
        out.varint(headers.len() as i64);
        for (k, v) in headers {
            out.field(Some(k));
            out.field(*v);
        }
        assert_eq!(
            out.at,
            end - start,
            "the record's length was computed right"
        );
        self.len = end;
        self.count += 1;
        self.max_timestamp = self.max_timestamp.max(timestamp);
    }

    /// The length of a record's body (after its length prefix) without header bytes.
    #[inline]
    fn body_len(
        &self,
        timestamp_delta: i64,
        key_len: Option<usize>,
        value_len: Option<usize>,
        headers: usize,
    ) -> usize {
        1 + varint_len(timestamp_delta)
            + varint_len(i64::from(self.count))
            + field_len(key_len)
            + field_len(value_len)
            + varint_len(headers as i64)
    }

    /// Seals the batch: compresses its records with `codec` at `level` (Kafka's
    /// `compression.<codec>.level`; -1 for the codec's default), writes the header with
    /// `producer`'s idempotence fields and the CRC, and returns the batch's bytes. The base
    /// offset is 0 and the partition leader epoch -1: the leader assigns both.
    pub fn finish(
        mut self,
        codec: Codec,
        level: i32,
        producer: ProducerFields,
    ) -> Result<Vec<u8>, BatchError> {
        self.buf.truncate(self.len);
        if codec != Codec::None {
            let level = codec::level_or_default(codec, level);
            let packed = codec::compress(codec, level, &self.buf[BATCH_HEADER_LEN..])?;
            self.buf.truncate(BATCH_HEADER_LEN);
            self.buf.extend_from_slice(&packed);
        }
        let total = self.buf.len();
        let header = &mut self.buf[..BATCH_HEADER_LEN];
        header[0..8].copy_from_slice(&0i64.to_be_bytes());
        header[8..12].copy_from_slice(&((total - LOG_OVERHEAD) as i32).to_be_bytes());
        header[12..16].copy_from_slice(&(-1i32).to_be_bytes());
        header[16] = 2;
        header[21..23].copy_from_slice(&(codec as i16).to_be_bytes());
        header[23..27].copy_from_slice(&(self.count - 1).max(0).to_be_bytes());
        header[27..35].copy_from_slice(&self.base_timestamp.to_be_bytes());
        header[35..43].copy_from_slice(&self.max_timestamp.to_be_bytes());
        header[43..51].copy_from_slice(&producer.producer_id.to_be_bytes());
        header[51..53].copy_from_slice(&producer.producer_epoch.to_be_bytes());
        header[53..57].copy_from_slice(&producer.base_sequence.to_be_bytes());
        header[57..61].copy_from_slice(&self.count.to_be_bytes());
        let crc = crc32c::crc32c(&self.buf[21..]);
        self.buf[17..21].copy_from_slice(&crc.to_be_bytes());
        Ok(self.buf)
    }
}

/// The most bytes a record's framing can take besides its key, value and headers: the
/// length prefix (5), attributes (1), timestamp delta (10), offset delta (5), key and value
/// lengths (5 each) and the header count (1).
const MAX_RECORD_FRAMING: usize = 32;

/// Bytes of a length-prefixed field (a null is a length of -1 alone).
fn field_len(len: Option<usize>) -> usize {
    match len {
        Some(n) => varint_len(n as i64) + n,
        None => 1,
    }
}

/// Writes a record into the bytes reserved for it.
struct Cursor<'a> {
    out: &'a mut [u8],
    at: usize,
}

impl Cursor<'_> {
    #[inline]
    fn byte(&mut self, byte: u8) {
        self.out[self.at] = byte;
        self.at += 1;
    }

    #[inline]
    fn varint(&mut self, value: i64) {
        let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
        while zigzag >= 0x80 {
            self.byte((zigzag as u8) | 0x80);
            zigzag >>= 7;
        }
        self.byte(zigzag as u8);
    }

    /// A length-prefixed field (a null is a length of -1 alone).
    #[inline]
    fn field(&mut self, field: Option<&[u8]>) {
        match field {
            Some(bytes) => {
                self.varint(bytes.len() as i64);
                self.out[self.at..self.at + bytes.len()].copy_from_slice(bytes);
                self.at += bytes.len();
            }
            None => self.varint(-1),
        }
    }
}

/// Bytes of `value` as a zigzag varint.
#[inline]
fn varint_len(value: i64) -> usize {
    let zigzag = ((value << 1) ^ (value >> 63)) as u64;
    let bits = 64 - (zigzag | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{verify_crc, RecordBatchHeader};
    use bytes::Bytes;
    use kafka_protocol::records::RecordBatchDecoder;

    fn decode(batch: &[u8]) -> Vec<kafka_protocol::records::Record> {
        let mut bytes = Bytes::copy_from_slice(batch);
        RecordBatchDecoder::decode(&mut bytes).unwrap().records
    }

    #[test]
    fn varint_lengths_match_what_is_written() {
        for value in [
            0i64,
            1,
            -1,
            63,
            64,
            -64,
            -65,
            8191,
            8192,
            i32::MAX as i64,
            i64::MIN,
        ] {
            let mut buf = [0u8; 10];
            let mut out = Cursor {
                out: &mut buf,
                at: 0,
            };
            out.varint(value);
            assert_eq!(out.at, varint_len(value), "{value}");
        }
    }

    #[test]
    fn the_protocol_crate_reads_every_codec_back() {
        for codec in Codec::ALL {
            let mut builder = BatchBuilder::new(Vec::with_capacity(1024), 1_000);
            builder.append(1_000, Some(b"k0"), Some(b"value-0"), &[]);
            builder.append(1_007, None, Some(&[7u8; 300]), &[(b"h", Some(b"v"))]);
            builder.append(1_003, Some(b""), None, &[]);
            let fields = ProducerFields {
                producer_id: 42,
                producer_epoch: 3,
                base_sequence: 10,
            };
            let batch = builder.finish(codec, -1, fields).unwrap();
            verify_crc(&batch).unwrap();
            let header = RecordBatchHeader::parse(&batch).unwrap();
            assert_eq!(header.total_len(), batch.len());
            assert_eq!(header.record_count, 3);
            assert_eq!(header.last_offset_delta, 2);
            assert_eq!(header.max_timestamp, 1_007);
            assert_eq!(header.compression(), codec as i16);
            let records = decode(&batch);
            assert_eq!(records.len(), 3, "{codec:?}");
            assert_eq!(records[0].key.as_deref(), Some(&b"k0"[..]));
            assert_eq!(records[1].value.as_deref(), Some(&[7u8; 300][..]));
            assert_eq!(records[1].timestamp, 1_007);
            assert_eq!(records[1].headers.len(), 1);
            assert_eq!(records[2].value, None);
            assert_eq!(records[2].offset, 2);
            assert_eq!((records[0].producer_id, records[2].sequence), (42, 12));
        }
    }

    #[test]
    fn a_reused_buffer_holds_only_the_new_batch() {
        let mut builder = BatchBuilder::new(Vec::with_capacity(4096), 0);
        for i in 0..20u8 {
            builder.append(0, Some(b"old-key"), Some(&[i; 150]), &[]);
        }
        let old = builder
            .finish(Codec::None, -1, ProducerFields::NONE)
            .unwrap();
        let old_len = old.len();
        let mut builder = BatchBuilder::new(old, 5);
        builder.append(5, None, Some(b"new"), &[]);
        let batch = builder
            .finish(Codec::None, -1, ProducerFields::NONE)
            .unwrap();
        assert!(batch.len() < old_len);
        verify_crc(&batch).unwrap();
        let records = decode(&batch);
        assert_eq!(records.len(), 1);
        assert_eq!(
            (records[0].key.as_deref(), records[0].value.as_deref()),
            (None, Some(&b"new"[..]))
        );
    }

    #[test]
    fn fits_agrees_with_the_exact_size() {
        let mut builder = BatchBuilder::new(Vec::new(), 0);
        for i in 0..300usize {
            for limit in [i, i + 20, i + 61, i + 100, i * 2 + 70] {
                assert_eq!(
                    builder.fits(Some(3), Some(i), limit),
                    builder.size_with(0, Some(3), Some(i)) <= limit,
                    "record {i}, limit {limit}"
                );
            }
            builder.append(0, Some(b"key"), Some(&vec![1u8; i % 40]), &[]);
        }
    }

    #[test]
    fn size_with_predicts_the_size_after_an_append() {
        let mut builder = BatchBuilder::new(Vec::new(), 0);
        for i in 0..200usize {
            let value = vec![1u8; i];
            let predicted = builder.size_with(0, Some(3), Some(i));
            builder.append(0, Some(b"key"), Some(&value), &[]);
            assert_eq!(builder.size(), predicted);
        }
    }

    #[test]
    fn fits_at_counts_the_timestamp_delta() {
        let mut builder = BatchBuilder::new(Vec::new(), 1_000);
        // Deltas up to 19 s: one-, two- and three-byte varints.
        for i in 0..200usize {
            let timestamp = 1_000 + i as i64 * 97;
            let size = builder.size();
            let exact = builder.size_with(timestamp - 1_000, None, Some(10));
            assert!(builder.fits_at(timestamp, None, Some(10), exact));
            assert!(
                !builder.fits_at(timestamp, None, Some(10), exact - 1),
                "record {i}, delta {}",
                timestamp - 1_000
            );
            builder.append(timestamp, None, Some(&[0; 10]), &[]);
            assert_eq!(builder.size(), exact, "grew by {}", builder.size() - size);
        }
    }
}
