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
/// walked where they lie (decompressed as the walk goes), so nothing a stored record
/// claims, such as a header count of two billion, makes the broker allocate by it.
pub fn first_record_at_or_after(batch: &[u8], timestamp: i64) -> Option<(i64, i64)> {
    let header = RecordBatchHeader::parse(batch).ok()?;
    let section = batch.get(BATCH_HEADER_LEN..header.total_len())?;
    let codec = Codec::from_attributes(header.attributes)?;
    let mut found = None;
    let walked = walk_records_in(
        codec,
        section,
        header.record_count,
        codec::DECOMPRESSED_LIMIT_MAX,
        |record| {
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
        },
    );
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
    /// The record as it lies after its length prefix, for a writer that keeps it whole.
    pub body: &'a [u8],
    /// The part of `body` after the timestamp delta (offset delta, key, value, headers),
    /// for a writer that gives the record a new timestamp delta and keeps the rest.
    pub after_timestamp: &'a [u8],
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
        check_contiguous(&record)?;
        f(record)
    })
}

/// [`for_each_record`] over a batch's records section as it lies, compressed with
/// `codec`: a compressed section is decompressed as it is walked (see
/// [`walk_records_in`]), so no record may inflate beyond `record_limit` bytes but the
/// section as a whole may, as in Kafka.
pub fn for_each_record_in(
    codec: Codec,
    section: &[u8],
    count: i32,
    record_limit: usize,
    mut f: impl FnMut(RecordView<'_>) -> Result<(), BatchError>,
) -> Result<(), BatchError> {
    walk_records_in(codec, section, count, record_limit, |record| {
        check_contiguous(&record)?;
        f(record)
    })
}

/// Offset deltas must count 0, 1, 2, …
#[inline]
fn check_contiguous(record: &RecordView<'_>) -> Result<(), BatchError> {
    if record.offset_delta != record.index {
        return Err(invalid(format!(
            "Record {} of the batch has offset delta {}: offsets must be contiguous",
            record.index, record.offset_delta
        )));
    }
    Ok(())
}

/// [`for_each_record`] as a consumer needs it: the same checks of lengths and fields, but
/// offset deltas may skip (a compacted topic's batches keep the offsets of the records
/// that survived), so the caller places each record by its `offset_delta`.
pub fn walk_records<'a>(
    records: &'a [u8],
    count: i32,
    mut f: impl FnMut(RecordView<'a>) -> Result<(), BatchError>,
) -> Result<(), BatchError> {
    walk_lengths(records, count, |index, body| f(parse_record(index, body)?))
}

/// One record's body (after its length), checked as Kafka's record iterator checks it:
/// every field present and the length covering exactly them.
#[inline(always)]
fn parse_record(index: i32, body: &[u8]) -> Result<RecordView<'_>, BatchError> {
    let mut record = Cursor { bytes: body, at: 0 };
    record.take(1)?;
    let timestamp_delta = record.varlong()?;
    let after_timestamp = &body[record.at..];
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
    Ok(RecordView {
        index,
        offset_delta,
        timestamp_delta,
        key,
        value,
        body,
        after_timestamp,
    })
}

/// [`walk_records`] over a records section compressed with `codec`. An uncompressed one
/// is walked where it lies; a compressed one is decompressed into a window of this
/// thread's (see [`WINDOW_BYTES`]) as the walk goes, each record whole in it — so memory
/// is the window or the largest record, never what the section inflates to. A section
/// that fits the window is decompressed at once and walked as a plain one. Kafka's
/// validator streams records the same way and bounds neither; here a record that would
/// inflate beyond `record_limit` bytes is refused, as a corrupt batch.
pub fn walk_records_in(
    codec: Codec,
    section: &[u8],
    count: i32,
    record_limit: usize,
    mut f: impl FnMut(RecordView<'_>) -> Result<(), BatchError>,
) -> Result<(), BatchError> {
    if codec == Codec::None {
        return walk_records(section, count, f);
    }
    let too_large = |index: i32, length: usize| {
        BatchError::Compression(format!(
            "{codec:?}: record {index} of the batch decompresses to {length} bytes, more than {record_limit}"
        ))
    };
    let mut decoder = codec::decoder(codec, section, record_limit)?;
    let mut window = Window::take();
    let mut index = 0;
    loop {
        window.fill(&mut decoder)?;
        let more = !window.eof;
        let (walked, used) =
            walk_lengths_from(window.available(), index, count, more, |i, body| {
                if body.len() > record_limit {
                    return Err(too_large(i, body.len()));
                }
                f(parse_record(i, body)?)
            })?;
        window.consume(used);
        index = walked;
        if !more {
            return Ok(());
        }
        if index == count {
            window.make_room(1);
            window.fill(&mut decoder)?;
            return walk_lengths_from(window.available(), index, count, false, |_, _| Ok(()))
                .map(drop);
        }
        // The window ends inside record `index`: room for all of it.
        let need = match record_length(window.available()) {
            Some((_, length)) if length > record_limit => return Err(too_large(index, length)),
            Some((prefix, length)) => prefix + length,
            None => MAX_VARINT,
        };
        window.make_room(need);
    }
}

/// The length prefix's size and the length of the record `bytes` start with, if they
/// hold the whole prefix and it is not negative.
fn record_length(bytes: &[u8]) -> Option<(usize, usize)> {
    let mut cursor = Cursor { bytes, at: 0 };
    let length = usize::try_from(cursor.varint().ok()?).ok()?;
    Some((cursor.at, length))
}

/// The most bytes a varint takes.
const MAX_VARINT: usize = 5;

/// The window a compressed section is walked through: large enough that a typical batch
/// (up to Kafka's default 1 MiB `message.max.bytes`) decompresses into it in one go.
pub const WINDOW_BYTES: usize = 1 << 20;

thread_local! {
    /// Each thread's window, kept from batch to batch: its pages are touched once, not
    /// once per batch.
    static WINDOW: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Decompressed bytes `start..end` of a window, refilled from a decoder as they are
/// consumed; given back to its thread when dropped, unless a large record grew it.
struct Window {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
}

impl Window {
    fn take() -> Self {
        let mut buf = WINDOW.take();
        if buf.len() < WINDOW_BYTES {
            buf.resize(WINDOW_BYTES, 0);
        }
        Self {
            buf,
            start: 0,
            end: 0,
            eof: false,
        }
    }

    fn available(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
    }

    /// Reads until the window is full or the decoder done.
    fn fill(&mut self, decoder: &mut codec::Decoder<'_>) -> Result<(), BatchError> {
        while !self.eof && self.end < self.buf.len() {
            match decoder.read_some(&mut self.buf[self.end..])? {
                0 => self.eof = true,
                read => self.end += read,
            }
        }
        Ok(())
    }

    /// Moves what is left to the front, and grows the window to hold `need` bytes.
    fn make_room(&mut self, need: usize) {
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        if need > self.buf.len() {
            self.buf.resize(need, 0);
        }
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        if self.buf.len() == WINDOW_BYTES {
            WINDOW.set(std::mem::take(&mut self.buf));
        }
    }
}

/// Splits a records section into its `count` records by their length prefixes, handing
/// each record's body (after its length) to `f`, and checks that they fill the section
/// exactly.
#[inline]
fn walk_lengths<'a>(
    records: &'a [u8],
    count: i32,
    f: impl FnMut(i32, &'a [u8]) -> Result<(), BatchError>,
) -> Result<(), BatchError> {
    walk_lengths_from(records, 0, count, false, f).map(drop)
}

/// [`walk_lengths`] from record `index` on, where `bytes` is what a stream has given so
/// far: with `more` to come, the walk stops before the first record `bytes` does not hold
/// whole. Returns the index of the next record and the bytes walked.
#[inline(always)]
fn walk_lengths_from<'a>(
    bytes: &'a [u8],
    mut index: i32,
    count: i32,
    more: bool,
    mut f: impl FnMut(i32, &'a [u8]) -> Result<(), BatchError>,
) -> Result<(i32, usize), BatchError> {
    let mut cursor = Cursor { bytes, at: 0 };
    while index < count {
        let start = cursor.at;
        if more && bytes.len() - start < MAX_VARINT && record_length(&bytes[start..]).is_none() {
            break;
        }
        if start == bytes.len() {
            return Err(invalid(format!(
                "Incorrect declared batch size, premature EOF reached: {count} records declared, {index} found"
            )));
        }
        let length = cursor.varint()?;
        let length = usize::try_from(length)
            .map_err(|_| invalid(format!("Invalid record size: expected {length} bytes")))?;
        if more && bytes.len() - cursor.at < length {
            cursor.at = start;
            break;
        }
        f(index, cursor.take(length)?)?;
        index += 1;
    }
    if !more && cursor.at != bytes.len() {
        return Err(invalid(
            "Incorrect declared batch size, records still remaining in file".to_string(),
        ));
    }
    Ok((index, cursor.at))
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

    /// A record as a walk saw it: index, offset delta, timestamp delta, key, value.
    type Seen = (i32, i32, i64, Option<Vec<u8>>, Option<Vec<u8>>);

    /// What each record of `section` looks like to a walk, or how the walk ended.
    fn walked(
        walk: impl FnOnce(
            &mut dyn FnMut(RecordView<'_>) -> Result<(), BatchError>,
        ) -> Result<(), BatchError>,
    ) -> (Vec<Seen>, Result<(), String>) {
        let mut seen = Vec::new();
        let outcome = walk(&mut |r| {
            seen.push((
                r.index,
                r.offset_delta,
                r.timestamp_delta,
                r.key.map(<[u8]>::to_vec),
                r.value.map(<[u8]>::to_vec),
            ));
            Ok(())
        });
        (seen, outcome.map_err(|e| e.to_string()))
    }

    /// Records of assorted sizes, some crossing the window's edges and one larger than
    /// the window, walked from every codec's stream exactly as from the plain section;
    /// a count that does not match and a truncated stream end the walk with the same
    /// errors.
    #[test]
    fn a_compressed_section_walks_as_its_plain_records_do() {
        let records: Vec<Record> = (0..40usize)
            .map(|i| {
                let size = match i {
                    17 => WINDOW_BYTES + 1_000,
                    _ => (i * 37_123) % 150_000,
                };
                let value = Bytes::from((0..size).map(|b| (b * i) as u8).collect::<Vec<u8>>());
                plain_record(
                    i,
                    Some(Bytes::from(format!("k{i}"))),
                    Some(value),
                    5_000 + i as i64,
                )
            })
            .collect();
        let batch = encode_plain(&records);
        let plain = &batch[BATCH_HEADER_LEN..];
        let count = records.len() as i32;
        // Above the whole section: raw snappy is one block, decoded at once.
        let limit = 8 * WINDOW_BYTES;
        assert!(plain.len() < limit);
        let mut streams: Vec<(Codec, Vec<u8>)> =
            [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd]
                .into_iter()
                .map(|codec| (codec, codec::compress(codec, 1, plain).unwrap()))
                .collect();
        // librdkafka's snappy: one raw block, no xerial framing.
        streams.push((
            Codec::Snappy,
            snap::raw::Encoder::new().compress_vec(plain).unwrap(),
        ));
        for (codec, packed) in streams {
            // 17 records end inside the one larger than the window.
            for n in [count, count - 1, count + 1, 17] {
                let expected = walked(|f| walk_records(plain, n, f));
                let actual = walked(|f| walk_records_in(codec, &packed, n, limit, f));
                assert_eq!(actual.1, expected.1, "{codec:?}, {n} records");
                assert!(
                    actual.0 == expected.0,
                    "{codec:?}, {n} records: records differ"
                );
            }
            // Snappy is decoded a block at a time, and its first 32 KiB block is already
            // beyond the limit.
            let (seen, outcome) = walked(|f| walk_records_in(codec, &packed, count, 1_000, f));
            let within = if codec == Codec::Snappy { 0 } else { 1 };
            assert_eq!(
                seen.len(),
                within,
                "{codec:?}: records before the large one"
            );
            assert!(outcome.unwrap_err().contains("more than 1000"), "{codec:?}");
            let cut = &packed[..packed.len() - 7];
            let (_, outcome) = walked(|f| walk_records_in(codec, cut, count, limit, f));
            assert!(
                outcome.is_err(),
                "{codec:?}: a truncated stream was walked to its end"
            );
        }
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
