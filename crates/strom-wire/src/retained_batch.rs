//! A record batch rewritten with some of its records, as Kafka's log cleaner writes one
//! (`MemoryRecords.filterTo`): the base offset, last offset delta, producer fields,
//! leader epoch and codec of the original stay, so offsets never move and a producer's
//! last sequence survives; only the records, their count, the maximum timestamp (over
//! the records kept) and the CRC change. A batch that keeps no record can stay as an
//! empty header, for the producer state or the end offset it carries.
//!
//! The first time the cleaner keeps a tombstone it stamps the batch with a delete horizon
//! (KIP-534): the base timestamp becomes the horizon, [`DELETE_HORIZON_BIT`] is set, and
//! every record's timestamp delta is rebased so that its timestamp stays what it was.

use crate::batch::{RecordBatchHeader, DELETE_HORIZON_BIT};
use crate::codec::{self, Codec};
use crate::records::RecordView;
use crate::BatchError;

/// Attribute bits of the codec.
const CODEC_BITS: i16 = 0x07;

/// The records kept of one batch, and the batch they are rewritten into.
#[derive(Debug)]
pub struct RetainedBatch {
    original: RecordBatchHeader,
    /// The kept records' bodies, one after the other.
    bodies: Vec<u8>,
    records: Vec<KeptRecord>,
    max_timestamp: i64,
}

/// Where a kept record's body lies in [`RetainedBatch::bodies`], and its timestamp.
#[derive(Debug, Clone, Copy)]
struct KeptRecord {
    start: usize,
    len: usize,
    /// Where, within the body, the part after the timestamp delta starts.
    after_timestamp: usize,
    timestamp: i64,
}

impl RetainedBatch {
    /// Starts the rewrite of `original`.
    pub fn new(original: RecordBatchHeader) -> Self {
        Self {
            original,
            bodies: Vec::new(),
            records: Vec::new(),
            max_timestamp: -1,
        }
    }

    /// Keeps `record`, a record of the original batch, in order.
    pub fn push(&mut self, record: &RecordView<'_>) {
        let timestamp = self.original.base_timestamp + record.timestamp_delta;
        self.max_timestamp = self.max_timestamp.max(timestamp);
        self.records.push(KeptRecord {
            start: self.bodies.len(),
            len: record.body.len(),
            after_timestamp: record.body.len() - record.after_timestamp.len(),
            timestamp,
        });
        self.bodies.extend_from_slice(record.body);
    }

    /// Records kept so far.
    pub fn count(&self) -> usize {
        self.records.len()
    }

    /// The rewritten batch, stamped with `delete_horizon_ms` (the original's own horizon,
    /// a new one, or none): the kept records compressed with the original's codec at
    /// `level` (`compression.<codec>.level`, -1 for the codec's default), or with none
    /// kept an empty, uncompressed header.
    pub fn finish(self, level: i32, delete_horizon_ms: Option<i64>) -> Result<Vec<u8>, BatchError> {
        let mut header = self.original;
        let mut attributes = self.original.attributes & !DELETE_HORIZON_BIT;
        if delete_horizon_ms.is_some() {
            attributes |= DELETE_HORIZON_BIT;
        }
        header.record_count = self.records.len() as i32;
        if self.records.is_empty() {
            header.base_timestamp = delete_horizon_ms.unwrap_or(self.original.max_timestamp);
            return Ok(header.encode_rebuilt(
                attributes & !CODEC_BITS,
                self.original.max_timestamp,
                &[],
            ));
        }
        header.base_timestamp = delete_horizon_ms.unwrap_or(self.original.base_timestamp);
        let max_timestamp = if self.original.is_log_append_time() {
            self.original.max_timestamp
        } else {
            self.max_timestamp
        };
        let section = self.records_section(header.base_timestamp);
        let records = match Codec::from_attributes(self.original.attributes & CODEC_BITS) {
            Some(Codec::None) | None => section,
            Some(codec) => codec::compress(codec, codec::level_or_default(codec, level), &section)?,
        };
        Ok(header.encode_rebuilt(attributes, max_timestamp, &records))
    }

    /// The kept records, length-prefixed, with timestamp deltas from `base_timestamp`:
    /// as they were when the base timestamp is the original's, rebased otherwise.
    fn records_section(&self, base_timestamp: i64) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.bodies.len() + 8 * self.records.len());
        let rebase = base_timestamp != self.original.base_timestamp;
        for r in &self.records {
            let body = &self.bodies[r.start..r.start + r.len];
            if rebase {
                let mut head = vec![body[0]];
                write_varint(&mut head, r.timestamp - base_timestamp);
                let rest = &body[r.after_timestamp..];
                write_varint(&mut out, (head.len() + rest.len()) as i64);
                out.extend_from_slice(&head);
                out.extend_from_slice(rest);
            } else {
                write_varint(&mut out, body.len() as i64);
                out.extend_from_slice(body);
            }
        }
        out
    }
}

/// Appends `value` as a zigzag varint.
fn write_varint(out: &mut Vec<u8>, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    while zigzag >= 0x80 {
        out.push((zigzag as u8) | 0x80);
        zigzag >>= 7;
    }
    out.push(zigzag as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::verify_crc;
    use crate::records::{plain_record, walk_records_in};
    use bytes::Bytes;
    use kafka_protocol::records::{
        Compression, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
    };

    fn batch(compression: Compression) -> Vec<u8> {
        let records: Vec<_> = (0..4)
            .map(|i| {
                let mut r = plain_record(
                    i,
                    Some(Bytes::from(format!("k{i}"))),
                    (i != 2).then(|| Bytes::from(format!("v{i}"))),
                    1_000 + i as i64,
                );
                r.offset = 100 + i as i64;
                r.producer_id = 7;
                r.producer_epoch = 1;
                r.sequence = 10 + i as i32;
                r.headers.insert("h".into(), Some(Bytes::from_static(b"x")));
                r
            })
            .collect();
        let mut buf = bytes::BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression,
        };
        RecordBatchEncoder::encode(&mut buf, &records, &options).unwrap();
        buf.to_vec()
    }

    fn rewrite(original: &[u8], keep: &[i32], horizon: Option<i64>) -> Vec<u8> {
        let header = RecordBatchHeader::parse(original).unwrap();
        let mut retained = RetainedBatch::new(header);
        let codec = Codec::from_attributes(header.attributes).unwrap();
        walk_records_in(
            codec,
            &original[crate::BATCH_HEADER_LEN..],
            header.record_count,
            1 << 20,
            |r| {
                if keep.contains(&r.index) {
                    retained.push(&r);
                }
                Ok(())
            },
        )
        .unwrap();
        retained.finish(-1, horizon).unwrap()
    }

    fn decode(batch: &[u8]) -> Vec<kafka_protocol::records::Record> {
        RecordBatchDecoder::decode(&mut Bytes::copy_from_slice(batch))
            .unwrap()
            .records
    }

    #[test]
    fn a_rewritten_batch_keeps_offsets_timestamps_headers_codec_and_sequence() {
        for compression in [Compression::None, Compression::Lz4, Compression::Zstd] {
            let original = batch(compression);
            let rewritten = rewrite(&original, &[1, 3], None);
            verify_crc(&rewritten).unwrap();
            let (before, after) = (
                RecordBatchHeader::parse(&original).unwrap(),
                RecordBatchHeader::parse(&rewritten).unwrap(),
            );
            assert_eq!(after.base_offset, 100);
            assert_eq!(after.last_offset(), before.last_offset());
            assert_eq!(after.last_sequence(), before.last_sequence());
            assert_eq!(after.compression(), before.compression());
            assert_eq!(after.record_count, 2);
            assert_eq!(after.max_timestamp, 1_003);
            let records = decode(&rewritten);
            let kept: Vec<_> = records
                .iter()
                .map(|r| (r.offset, r.timestamp, r.key.clone().unwrap()))
                .collect();
            assert_eq!(
                kept,
                [
                    (101, 1_001, Bytes::from("k1")),
                    (103, 1_003, Bytes::from("k3"))
                ]
            );
            assert!(records.iter().all(|r| r.headers.len() == 1));
        }
    }

    #[test]
    fn a_delete_horizon_moves_the_base_timestamp_and_keeps_every_record_timestamp() {
        let original = batch(Compression::None);
        let rewritten = rewrite(&original, &[0, 2], Some(90_000));
        verify_crc(&rewritten).unwrap();
        let header = RecordBatchHeader::parse(&rewritten).unwrap();
        assert_eq!(header.delete_horizon_ms(), Some(90_000));
        let records = decode(&rewritten);
        let kept: Vec<_> = records.iter().map(|r| (r.offset, r.timestamp)).collect();
        assert_eq!(kept, [(100, 1_000), (102, 1_002)]);
        assert!(records[1].value.is_none());
    }

    #[test]
    fn a_batch_that_keeps_nothing_is_an_empty_uncompressed_header_with_the_same_offsets() {
        let original = batch(Compression::Lz4);
        let rewritten = rewrite(&original, &[], None);
        verify_crc(&rewritten).unwrap();
        let header = RecordBatchHeader::parse(&rewritten).unwrap();
        assert_eq!(rewritten.len(), crate::BATCH_HEADER_LEN);
        assert_eq!((header.base_offset, header.last_offset()), (100, 103));
        assert_eq!((header.record_count, header.compression()), (0, 0));
        assert_eq!((header.producer_id, header.last_sequence()), (7, 13));
    }
}
