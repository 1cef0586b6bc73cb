//! Test helpers: a hand-rolled encoder of valid magic-v2 record batches (varint records,
//! CRC32C), and small conveniences over [`PartitionLog`]. Shared by the integration tests
//! and the benchmarks (`#[path]`-included there), so not every item is used everywhere.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use strom_log::{FileCache, LogConfig, PartitionLog};
use strom_wire::{RecordBatchHeader, RecordBatches};

/// What one encoded batch looks like; build with [`BatchSpec::new`] and the `with_*` setters.
#[derive(Debug, Clone, Copy)]
pub struct BatchSpec {
    pub records: usize,
    pub value_size: usize,
    /// Timestamp of the first record; record `i` gets `timestamp + i`.
    pub timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    /// Byte every value is filled with, so batches can be told apart.
    pub fill: u8,
    /// Whether records carry a key (`k<index>`); null keys otherwise.
    pub keyed: bool,
}

impl BatchSpec {
    /// `records` records with values of `value_size` bytes, no producer id.
    pub fn new(records: usize, value_size: usize) -> Self {
        Self {
            records,
            value_size,
            timestamp: 1_000,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            fill: b'x',
            keyed: false,
        }
    }

    pub fn with_timestamp(mut self, timestamp: i64) -> Self {
        self.timestamp = timestamp;
        self
    }

    pub fn with_producer(mut self, producer_id: i64, epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = epoch;
        self.base_sequence = base_sequence;
        self
    }

    pub fn with_keys(mut self) -> Self {
        self.keyed = true;
        self
    }

    pub fn with_fill(mut self, fill: u8) -> Self {
        self.fill = fill;
        self
    }

    /// Encodes the batch as a producer sends it: base offset 0, leader epoch -1.
    pub fn encode(&self) -> Vec<u8> {
        let mut records = Vec::with_capacity(self.records * (self.value_size + 16));
        let mut body = Vec::with_capacity(self.value_size + 16);
        for i in 0..self.records {
            body.clear();
            body.push(0); // attributes
            put_varint(&mut body, i as i64); // timestamp delta
            put_varint(&mut body, i as i64); // offset delta
            if self.keyed {
                let key = format!("k{i}");
                put_varint(&mut body, key.len() as i64);
                body.extend_from_slice(key.as_bytes());
            } else {
                put_varint(&mut body, -1); // null key
            }
            put_varint(&mut body, self.value_size as i64);
            body.resize(body.len() + self.value_size, self.fill);
            put_varint(&mut body, 0); // no headers
            put_varint(&mut records, body.len() as i64);
            records.extend_from_slice(&body);
        }
        let n = self.records as i32;
        let mut b = Vec::with_capacity(61 + records.len());
        b.extend_from_slice(&0i64.to_be_bytes());
        b.extend_from_slice(&((49 + records.len()) as i32).to_be_bytes());
        b.extend_from_slice(&(-1i32).to_be_bytes());
        b.push(2);
        b.extend_from_slice(&[0; 4]); // crc, filled below
        b.extend_from_slice(&0i16.to_be_bytes());
        b.extend_from_slice(&(n - 1).to_be_bytes());
        b.extend_from_slice(&self.timestamp.to_be_bytes());
        b.extend_from_slice(&(self.timestamp + n as i64 - 1).to_be_bytes());
        b.extend_from_slice(&self.producer_id.to_be_bytes());
        b.extend_from_slice(&self.producer_epoch.to_be_bytes());
        b.extend_from_slice(&self.base_sequence.to_be_bytes());
        b.extend_from_slice(&n.to_be_bytes());
        b.extend_from_slice(&records);
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    }
}

/// A zig-zag varint, as record fields are encoded.
fn put_varint(out: &mut Vec<u8>, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A batch of `records` records with `value_size`-byte values.
pub fn batch(records: usize, value_size: usize) -> Vec<u8> {
    BatchSpec::new(records, value_size).encode()
}

/// A config for tests: small index interval so indexes have many entries.
pub fn config() -> LogConfig {
    LogConfig {
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

/// The partition directory `<topic>-<partition>` inside `root`.
pub fn partition_dir(root: &Path) -> PathBuf {
    root.join("events-0")
}

pub fn open(dir: &Path, config: LogConfig, clean: bool) -> PartitionLog {
    PartitionLog::open(dir, config, &FileCache::new(64), clean, NOW).expect("open log")
}

/// "Now" for tests whose batches carry the default timestamps.
pub const NOW: i64 = 1_000_000;

/// Splits a record set into its batches.
pub fn split(records: &[u8]) -> Vec<(RecordBatchHeader, Vec<u8>)> {
    let mut out = Vec::new();
    let mut it = RecordBatches::new(records);
    for item in &mut it {
        let (h, b) = item.expect("well-formed batch");
        out.push((h, b.to_vec()));
    }
    assert_eq!(it.position(), records.len(), "trailing partial batch");
    out
}

/// Every batch from the log start to the log end, read segment by segment.
pub fn read_all(log: &PartitionLog) -> Vec<(RecordBatchHeader, Vec<u8>)> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let data = log.read(offset, usize::MAX, true).expect("read");
        let batches = split(&data.records);
        assert!(!batches.is_empty(), "no progress at offset {offset}");
        offset = batches.last().unwrap().0.next_offset();
        out.extend(batches);
    }
    out
}

/// Names of the files in `dir` with the given extension, sorted.
pub fn files_with(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .collect();
    files.sort();
    files
}

/// One record of a compaction test: a key (or none) and a value (or a tombstone).
pub type KeyedRecord = (Option<String>, Option<Vec<u8>>);

/// A batch of `records` as a producer sends it, compressed with `compression`, with
/// `producer`'s id, epoch and base sequence if given; record `i` has timestamp
/// `timestamp + i`.
pub fn keyed_batch(
    records: &[KeyedRecord],
    compression: kafka_protocol::records::Compression,
    producer: Option<(i64, i16, i32)>,
    timestamp: i64,
) -> Vec<u8> {
    use kafka_protocol::records::{Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
    let (producer_id, producer_epoch, base_sequence) = producer.unwrap_or((-1, -1, -1));
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (key, value))| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: if base_sequence < 0 {
                -1
            } else {
                base_sequence + i as i32
            },
            timestamp: timestamp + i as i64,
            key: key.clone().map(bytes::Bytes::from),
            value: value.clone().map(bytes::Bytes::from),
            headers: Default::default(),
            delete_horizon: false,
        })
        .collect();
    let mut buf = bytes::BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options).expect("encode");
    buf.to_vec()
}

/// A record as read back: offset, timestamp, key, value.
pub type ReadRecord = (i64, i64, Option<Vec<u8>>, Option<Vec<u8>>);

/// Every record of the log, in order, decoded.
pub fn records_of(log: &PartitionLog) -> Vec<ReadRecord> {
    let mut out = Vec::new();
    for (_, batch) in read_all(log) {
        let mut bytes = bytes::Bytes::from(batch);
        let decoded = kafka_protocol::records::RecordBatchDecoder::decode(&mut bytes)
            .expect("a batch the log serves decodes");
        for r in decoded.records {
            out.push((
                r.offset,
                r.timestamp,
                r.key.map(|k| k.to_vec()),
                r.value.map(|v| v.to_vec()),
            ));
        }
    }
    out
}

/// Rolls the active segment with one record of its own, a `segment.ms` after [`NOW`], so
/// that every record before it is cleanable. Returns that later time.
pub fn roll(log: &mut PartitionLog) -> i64 {
    let later = NOW + log.config().segment_ms + 1;
    let filler = [(Some("filler".to_string()), Some(b"x".to_vec()))];
    let batch = keyed_batch(
        &filler,
        kafka_protocol::records::Compression::None,
        None,
        later,
    );
    log.append(&batch, later).expect("append the filler");
    later
}

/// One cleaning of `log` from `first_dirty` (the log start if `None`) at `now`, every
/// cleaned group swapped in, `phase` told of each step, as the broker's cleaner runs it.
pub fn clean_once(
    log: &mut PartitionLog,
    config: strom_log::cleaner::CleanerConfig,
    first_dirty: Option<i64>,
    now: i64,
    phase: strom_log::cleaner::PhaseHook<'_>,
) -> Result<strom_log::cleaner::CleaningOutcome, strom_log::LogError> {
    let to_clean = log
        .to_clean(first_dirty, log.log_end_offset(), now)?
        .expect("a compacted log");
    let plan = log.plan_cleaning(to_clean);
    strom_log::cleaner::Cleaner::new(config).clean(
        &plan,
        now,
        |group| log.replace_cleaned(group, phase),
        phase,
    )
}
