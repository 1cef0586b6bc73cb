//! Record-level access for the paths that need it: ListOffsets by timestamp and produce
//! validation walk a records section with [`walk_records`], parsing only varints, never
//! decoding records into owned values.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use crate::codec::{self, Codec};
use crate::{BatchError, RecordBatchHeader, BATCH_HEADER_LEN};

/// The offset and timestamp of the first record in `batch` whose timestamp is at least
/// `timestamp`, or `None` if there is none or the batch cannot be read. The records are
/// walked where they lie (after decompression), so nothing a stored record claims, such
/// as a header count of two billion, makes the broker allocate by it.
pub fn first_record_at_or_after(batch: &[u8], timestamp: i64) -> Option<(i64, i64)> {
    let header = RecordBatchHeader::parse(batch).ok()?;
    let section = batch.get(BATCH_HEADER_LEN..header.total_len())?;
    let decompressed;
    let records = match Codec::from_attributes(header.attributes)? {
        Codec::None => section,
        codec => {
            decompressed = codec::decompress(codec, section, codec::DECOMPRESSED_LIMIT_MAX).ok()?;
            &decompressed
        }
    };
    let mut found = None;
    let walked = walk_records(records, header.record_count, |record| {
        let record_timestamp = if header.is_log_append_time() {
            header.max_timestamp
        } else {
            header.base_timestamp + record.timestamp_delta
        };
        if found.is_none() && record_timestamp >= timestamp {
            found = Some((
                header.base_offset + i64::from(record.offset_delta),
                record_timestamp,
            ));
        }
        Ok(())
    });
    found.filter(|_| walked.is_ok())
}

/// One uncompressed batch (magic 2, no producer id, no headers) of `records` as (key,
/// value), the first stamped `first_timestamp` and each next one `timestamp_step` later:
/// the records strom writes itself (committed offsets) and tests send.
pub fn plain_batch(
    records: impl IntoIterator<Item = (Option<Bytes>, Option<Bytes>)>,
    first_timestamp: i64,
    timestamp_step: i64,
) -> Bytes {
    let records: Vec<Record> = records
        .into_iter()
        .enumerate()
        .map(|(i, (key, value))| {
            plain_record(i, key, value, first_timestamp + i as i64 * timestamp_step)
        })
        .collect();
    encode_plain(&records)
}

/// Record `i` of a batch [`encode_plain`] encodes.
pub fn plain_record(i: usize, key: Option<Bytes>, value: Option<Bytes>, timestamp: i64) -> Record {
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: i as i64,
        // The encoder starts a new batch where offset - sequence changes.
        sequence: i as i32 - 1,
        timestamp,
        key,
        value,
        headers: Default::default(),
    }
}

/// `records` as one uncompressed batch of magic 2.
pub fn encode_plain(records: &[Record]) -> Bytes {
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, records, &options).expect("an uncompressed batch encodes");
    buf.freeze()
}

/// One record of a batch, as [`for_each_record`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// Position of the record in its batch (Kafka's `batch_index` in record errors).
    pub index: i32,
    pub offset_delta: i32,
    pub timestamp_delta: i64,
    /// `None` for a null key.
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
}

/// Calls `f` for each of the `count` records in an uncompressed records section (the
/// batch bytes after its 61-byte header), checking what Kafka's record iterator checks:
/// every record's length covers exactly its fields, there are exactly `count` records
/// and no bytes after them; and what strom guarantees its readers: offset deltas are
/// 0, 1, 2, … so the batch's offsets are contiguous. Only varints are parsed; nothing is
/// copied.
pub fn for_each_record<'a>(
    records: &'a [u8],
    count: i32,
    mut f: impl FnMut(RecordView<'a>) -> Result<(), BatchError>,
) -> Result<(), BatchError> {
    walk_records(records, count, |record| {
        if record.offset_delta != record.index {
            return Err(invalid(format!(
                "Record {} of the batch has offset delta {}: offsets must be contiguous",
                record.index, record.offset_delta
            )));
        }
        f(record)
    })
}

/// [`for_each_record`] as a consumer needs it: the same checks of lengths and fields, but
/// offset deltas may skip (a compacted topic's batches keep the offsets of the records
/// that survived), so the caller places each record by its `offset_delta`.
pub fn walk_records<'a>(
    records: &'a [u8],
    count: i32,
    mut f: impl FnMut(RecordView<'a>) -> Result<(), BatchError>,
) -> Result<(), BatchError> {
    walk_lengths(records, count, |index, body| {
        let mut record = Cursor { bytes: body, at: 0 };
        record.take(1)?;
        let timestamp_delta = record.varlong()?;
        let offset_delta = record.varint()?;
        let key = record.bytes_field()?;
        let value = record.bytes_field()?;
        let headers = record.varint()?;
        if headers < 0 {
            return Err(invalid(format!(
                "Found invalid number of record headers {headers}"
            )));
        }
        for _ in 0..headers {
            if record.bytes_field()?.is_none() {
                return Err(invalid("Invalid negative header key size".to_string()));
            }
            record.bytes_field()?;
        }
        if record.at != body.len() {
            return Err(invalid(format!(
                "Invalid record size: expected to read {} bytes in record payload, but instead read {}",
                body.len(),
                record.at
            )));
        }
        f(RecordView {
            index,
            offset_delta,
            timestamp_delta,
            key,
            value,
        })
    })
}

/// Splits a records section into its `count` records by their length prefixes, handing
/// each record's body (after its length) to `f`, and checks that they fill the section
/// exactly.
#[inline]
fn walk_lengths<'a>(
    records: &'a [u8],
    count: i32,
    mut f: impl FnMut(i32, &'a [u8]) -> Result<(), BatchError>,
) -> Result<(), BatchError> {
    let mut cursor = Cursor {
        bytes: records,
        at: 0,
    };
    for index in 0..count {
        if cursor.at == records.len() {
            return Err(invalid(format!(
                "Incorrect declared batch size, premature EOF reached: {count} records declared, {index} found"
            )));
        }
        let length = cursor.varint()?;
        let length = usize::try_from(length)
            .map_err(|_| invalid(format!("Invalid record size: expected {length} bytes")))?;
        f(index, cursor.take(length)?)?;
    }
    if cursor.at != records.len() {
        return Err(invalid(
            "Incorrect declared batch size, records still remaining in file".to_string(),
        ));
    }
    Ok(())
}

fn invalid(message: String) -> BatchError {
    BatchError::InvalidRecord(message)
}

/// Reads Kafka's zigzag varints from a byte slice, never past its end. Inlined: the
/// walk runs once per produced record, and calls across the crate boundary cost more than
/// the parsing itself (60 ns a record before, measured with the `append_cpu` bench).
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], BatchError> {
        match self.bytes.get(self.at..).and_then(|rest| rest.get(..n)) {
            Some(out) => {
                self.at += n;
                Ok(out)
            }
            None => Err(invalid(
                "Invalid record size: record ends early".to_string(),
            )),
        }
    }

    #[inline]
    fn unsigned(&mut self, max_bytes: usize) -> Result<u64, BatchError> {
        // Most varints of a record (deltas, small lengths, the header count) are one byte.
        if let Some(&byte) = self.bytes.get(self.at) {
            if byte & 0x80 == 0 {
                self.at += 1;
                return Ok(u64::from(byte));
            }
        }
        let rest = self.bytes.get(self.at..).unwrap_or_default();
        let mut value = 0u64;
        for (i, &byte) in rest.iter().take(max_bytes).enumerate() {
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                self.at += i + 1;
                return Ok(value);
            }
        }
        Err(invalid(if rest.len() < max_bytes {
            "Invalid record size: record ends early".to_string()
        } else {
            "Invalid varint: too many bytes".to_string()
        }))
    }

    #[inline]
    fn varint(&mut self) -> Result<i32, BatchError> {
        let raw = self.unsigned(5)? as u32;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    #[inline]
    fn varlong(&mut self) -> Result<i64, BatchError> {
        let raw = self.unsigned(10)?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    /// A varint length followed by that many bytes; a negative length is null.
    #[inline]
    fn bytes_field(&mut self) -> Result<Option<&'a [u8]>, BatchError> {
        let len = self.varint()?;
        if len < 0 {
            return Ok(None);
        }
        self.take(len as usize).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch of `keys`, each record with one header, so walks must skip headers.
    fn encoded(keys: &[Option<&str>]) -> Vec<u8> {
        let records: Vec<_> = keys
            .iter()
            .enumerate()
            .map(|(i, key)| {
                let key = key.map(|k| Bytes::from(k.to_string()));
                let value = Some(Bytes::from_static(b"value"));
                let mut record = plain_record(i, key, value, 1_000 + i as i64);
                record.headers = [(
                    kafka_protocol::protocol::StrBytes::from_static_str("h"),
                    Some(Bytes::from_static(b"v")),
                )]
                .into_iter()
                .collect();
                record
            })
            .collect();
        encode_plain(&records).to_vec()
    }

    /// A records section of one record (null key and value) whose header count says
    /// 2^31 - 1, its length covering only the bytes present.
    fn two_billion_headers() -> Vec<u8> {
        let record = [0u8, 0, 0, 1, 1, 0xfe, 0xff, 0xff, 0xff, 0x0f];
        [&[(record.len() as u8) << 1][..], &record].concat()
    }

    #[test]
    fn the_first_record_at_a_timestamp_is_found_in_plain_and_compressed_batches() {
        let batch = encoded(&[Some("a"), Some("b"), Some("c")]);
        assert_eq!(first_record_at_or_after(&batch, 0), Some((0, 1_000)));
        assert_eq!(first_record_at_or_after(&batch, 1_001), Some((1, 1_001)));
        assert_eq!(first_record_at_or_after(&batch, 1_003), None);
        let header = RecordBatchHeader::parse(&batch).unwrap();
        let packed = codec::compress(Codec::Lz4, 0, &batch[BATCH_HEADER_LEN..]).unwrap();
        let compressed = header.encode_rebuilt(
            header.attributes | Codec::Lz4 as i16,
            header.max_timestamp,
            &packed,
        );
        assert_eq!(
            first_record_at_or_after(&compressed, 1_002),
            Some((2, 1_002))
        );
    }

    /// A stored record whose header count says two billion (its length prefix covering
    /// only the bytes present, as produce validation once let through) is not found. The
    /// walk reads varints only; the protocol crate's decoder, used here before, reserved
    /// a map for 2^31 headers, 4 GiB touched on every ListOffsets by timestamp.
    #[test]
    fn a_record_claiming_two_billion_headers_is_skipped() {
        let batch = crate::batch::tests::sample_batch(1, &two_billion_headers());
        assert_eq!(first_record_at_or_after(&batch, 0), None);
    }

    #[test]
    fn walks_every_record_with_its_key_and_timestamp() {
        let batch = encoded(&[Some("a"), None, Some("ccc")]);
        let mut seen = Vec::new();
        for_each_record(&batch[crate::BATCH_HEADER_LEN..], 3, |r| {
            seen.push((r.index, r.timestamp_delta, r.key.map(<[u8]>::to_vec)));
            Ok(())
        })
        .unwrap();
        assert_eq!(
            seen,
            vec![
                (0, 0, Some(b"a".to_vec())),
                (1, 1, None),
                (2, 2, Some(b"ccc".to_vec()))
            ]
        );
    }

    #[test]
    fn a_count_that_does_not_match_the_records_is_refused() {
        let batch = encoded(&[Some("a"), Some("b"), Some("c")]);
        let body = &batch[crate::BATCH_HEADER_LEN..];
        let fewer = for_each_record(body, 1, |_| Ok(())).unwrap_err();
        assert!(fewer.to_string().contains("still remaining"), "{fewer}");
        let more = for_each_record(body, 4, |_| Ok(())).unwrap_err();
        assert!(more.to_string().contains("premature EOF"), "{more}");
    }

    /// What a check of the length prefixes alone let through: records too short to hold
    /// their fields, and one claiming two billion headers.
    #[test]
    fn records_that_do_not_parse_are_refused_whatever_their_lengths_say() {
        let err = for_each_record(&[0, 0, 0], 3, |_| Ok(())).unwrap_err();
        assert!(err.is_invalid_record(), "{err}");
        let err = for_each_record(&two_billion_headers(), 1, |_| Ok(())).unwrap_err();
        assert!(err.is_invalid_record(), "{err}");
    }

    #[test]
    fn truncated_records_are_refused_without_panicking() {
        let batch = encoded(&[Some("a"), Some("b")]);
        let body = &batch[crate::BATCH_HEADER_LEN..];
        for cut in 0..body.len() {
            assert!(
                for_each_record(&body[..cut], 2, |_| Ok(())).is_err(),
                "cut at {cut}"
            );
        }
    }
}
