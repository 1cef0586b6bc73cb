//! Produce-path validation as Kafka's `LogValidator`: batch headers that do not match
//! their records, compacted topics without keys, CreateTime bounds, LogAppendTime
//! stamps, recompression to the topic's codec, and the roll before relative offsets
//! would leave the index's 32-bit range.

mod common;

use common::{batch, open, partition_dir, read_all, BatchSpec, NOW};
use strom_log::validator::RecordErrorKind;
use strom_log::{LogConfig, LogError};
use strom_wire::batch::{verify_crc, TIMESTAMP_TYPE_BIT};
use strom_wire::codec::{compress, decompress};
use strom_wire::records::for_each_record;
use strom_wire::{BatchError, Codec, RecordBatchHeader, BATCH_HEADER_LEN};

/// Recomputes the CRC of a hand-edited batch.
fn fix_crc(b: &mut [u8]) {
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
}

fn set_i32(b: &mut [u8], at: usize, v: i32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

fn expect_invalid_record(result: Result<strom_log::AppendInfo, LogError>, needle: &str) {
    match result {
        Err(LogError::InvalidBatch(e)) => {
            assert!(e.is_invalid_record(), "{e:?} is not INVALID_RECORD");
            assert!(e.to_string().contains(needle), "{e}");
        }
        other => panic!("expected an invalid record, got {other:?}"),
    }
}

#[test]
fn a_last_offset_delta_beyond_the_records_is_refused_and_moves_nothing() {
    let root = tempfile::tempdir().unwrap();
    let mut log = open(&partition_dir(root.path()), LogConfig::default(), true);
    let mut b = batch(1, 10);
    set_i32(&mut b, 23, i32::MAX);
    fix_crc(&mut b);
    expect_invalid_record(log.append(&b, NOW), "Inconsistent batch offset range");
    assert_eq!(log.log_end_offset(), 0);
    assert_eq!(log.append(&batch(1, 10), NOW).unwrap().base_offset, 0);
}

#[test]
fn a_count_below_the_records_held_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let mut log = open(&partition_dir(root.path()), LogConfig::default(), true);
    let mut b = batch(3, 10);
    set_i32(&mut b, 23, 0);
    set_i32(&mut b, 57, 1);
    fix_crc(&mut b);
    expect_invalid_record(log.append(&b, NOW), "records still remaining");
    assert_eq!(log.log_end_offset(), 0);
}

#[test]
fn a_compacted_topic_refuses_records_without_keys_with_one_error_each() {
    let root = tempfile::tempdir().unwrap();
    let config = LogConfig {
        cleanup_policy: "compact".into(),
        ..LogConfig::default()
    };
    let mut log = open(&partition_dir(root.path()), config, true);
    match log.append(&batch(4, 10), NOW) {
        Err(LogError::RecordErrors {
            kind,
            message,
            errors,
        }) => {
            assert_eq!(kind, RecordErrorKind::InvalidRecord);
            assert_eq!(errors.len(), 4);
            assert_eq!(errors[3].batch_index, 3);
            assert!(errors[0].message.contains(
                "Compacted topic cannot accept message without key in topic partition events-0."
            ));
            assert!(
                message.starts_with("One or more records have been rejected due to 4 record errors in total, and only showing the first three errors at most: [RecordError(batchIndex=0,"),
                "{message}"
            );
        }
        other => panic!("expected record errors, got {other:?}"),
    }
    assert_eq!(log.log_end_offset(), 0);
    let keyed = BatchSpec::new(4, 10).with_keys().encode();
    assert_eq!(log.append(&keyed, NOW).unwrap().record_count, 4);
}

#[test]
fn create_time_outside_the_bounds_is_invalid_timestamp() {
    let root = tempfile::tempdir().unwrap();
    let config = LogConfig {
        timestamp_before_max_ms: 1_000,
        timestamp_after_max_ms: 1_000,
        ..LogConfig::default()
    };
    let mut log = open(&partition_dir(root.path()), config, true);
    let old = BatchSpec::new(2, 10).with_timestamp(NOW - 5_000).encode();
    match log.append(&old, NOW) {
        Err(LogError::RecordErrors {
            kind,
            errors,
            message,
        }) => {
            assert_eq!(kind, RecordErrorKind::InvalidTimestamp);
            assert_eq!(errors.len(), 2);
            assert!(
                errors[0].message.contains("is out of range"),
                "{}",
                errors[0].message
            );
            assert_eq!(
                message,
                "One or more records have been rejected due to invalid timestamp"
            );
        }
        other => panic!("expected an invalid timestamp, got {other:?}"),
    }
    let fresh = BatchSpec::new(2, 10).with_timestamp(NOW - 500).encode();
    assert!(log.append(&fresh, NOW).is_ok());
}

#[test]
fn log_append_time_stamps_the_batch_and_keeps_its_crc_valid() {
    let root = tempfile::tempdir().unwrap();
    let config = LogConfig {
        log_append_time: true,
        ..LogConfig::default()
    };
    let mut log = open(&partition_dir(root.path()), config, true);
    let now = NOW + 123;
    let info = log.append(&batch(3, 10), now).unwrap();
    assert_eq!(info.log_append_time_ms, now);
    let (header, bytes) = read_all(&log).remove(0);
    assert_ne!(header.attributes & TIMESTAMP_TYPE_BIT, 0);
    assert_eq!(header.max_timestamp, now);
    verify_crc(&bytes).unwrap();
}

fn records_of(header: &RecordBatchHeader, bytes: &[u8]) -> Vec<Vec<u8>> {
    let codec = Codec::from_attributes(header.attributes).unwrap();
    let section = decompress(codec, &bytes[BATCH_HEADER_LEN..], 1 << 24).unwrap();
    let mut values = Vec::new();
    for_each_record(&section, header.record_count, |r| {
        values.push(r.value.unwrap().to_vec());
        Ok(())
    })
    .unwrap();
    values
}

/// A batch of `spec` whose records section is compressed with `codec`.
fn compressed(spec: BatchSpec, codec: Codec) -> Vec<u8> {
    let plain = spec.encode();
    let header = RecordBatchHeader::parse(&plain).unwrap();
    let packed = compress(codec, 3, &plain[BATCH_HEADER_LEN..]).unwrap();
    header.encode_rebuilt(
        header.attributes | codec as i16,
        header.max_timestamp,
        &packed,
    )
}

#[test]
fn a_compressed_batch_is_read_to_its_last_record() {
    for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
        let root = tempfile::tempdir().unwrap();
        let mut log = open(&partition_dir(root.path()), LogConfig::default(), true);
        let mut fewer = compressed(BatchSpec::new(3, 10), codec);
        set_i32(&mut fewer, 23, 1);
        set_i32(&mut fewer, 57, 2);
        fix_crc(&mut fewer);
        expect_invalid_record(log.append(&fewer, NOW), "records still remaining");
        let mut garbage = compressed(BatchSpec::new(3, 10), codec);
        let len = garbage.len();
        garbage[BATCH_HEADER_LEN..len].fill(0x5a);
        fix_crc(&mut garbage);
        match log.append(&garbage, NOW) {
            Err(LogError::InvalidBatch(BatchError::Compression(_))) => {}
            other => panic!("{codec:?}: expected a corrupt batch, got {other:?}"),
        }
        assert_eq!(log.log_end_offset(), 0, "{codec:?}");
        let whole = compressed(BatchSpec::new(3, 10), codec);
        assert_eq!(log.append(&whole, NOW).unwrap().record_count, 3);
    }
}

#[test]
fn batches_are_recompressed_to_the_topics_codec() {
    for (source, target) in [
        (Codec::None, Codec::Zstd),
        (Codec::Gzip, Codec::Lz4),
        (Codec::Snappy, Codec::Gzip),
        (Codec::Lz4, Codec::None),
        (Codec::Zstd, Codec::Snappy),
    ] {
        let root = tempfile::tempdir().unwrap();
        let name = match target {
            Codec::None => "uncompressed",
            Codec::Gzip => "gzip",
            Codec::Snappy => "snappy",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        };
        let config = LogConfig {
            compression_type: name.into(),
            ..LogConfig::default()
        };
        let mut log = open(&partition_dir(root.path()), config, true);
        let spec = BatchSpec::new(50, 100).with_fill(b'q');
        let input = compressed(spec, source);
        let expected = records_of(&RecordBatchHeader::parse(&input).unwrap(), &input);
        assert_eq!(log.append(&input, NOW).unwrap().record_count, 50);
        let (header, bytes) = read_all(&log).remove(0);
        assert_eq!(
            Codec::from_attributes(header.attributes),
            Some(target),
            "{source:?} → {target:?}"
        );
        verify_crc(&bytes).unwrap();
        assert_eq!(
            records_of(&header, &bytes),
            expected,
            "{source:?} → {target:?}"
        );
    }
}

#[test]
fn a_compressed_batch_that_inflates_past_the_limit_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let config = LogConfig {
        compression_type: "lz4".into(),
        max_message_bytes: 10_000,
        ..LogConfig::default()
    };
    let mut log = open(&partition_dir(root.path()), config, true);
    // 1,000 records of 1 kB of one byte: a few kB gzipped, 1 MB inflated (> 32 × 10 kB).
    let bomb = compressed(BatchSpec::new(1_000, 1_000), Codec::Gzip);
    assert!(bomb.len() < 10_000, "{}", bomb.len());
    match log.append(&bomb, NOW) {
        Err(LogError::InvalidBatch(BatchError::Compression(m))) => {
            assert!(m.contains("more than"), "{m}")
        }
        other => panic!("expected a compression error, got {other:?}"),
    }
}

/// The heap this thread has allocated and not freed, and the most it had since
/// [`peak_reset`]: the validating thread's memory, whatever other tests do meanwhile.
mod heap {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    pub struct Counting;

    thread_local! {
        static LIVE: Cell<isize> = const { Cell::new(0) };
        static PEAK: Cell<isize> = const { Cell::new(0) };
    }

    fn add(bytes: isize) {
        let _ = LIVE.try_with(|live| {
            let now = live.get() + bytes;
            live.set(now);
            let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
        });
    }

    /// Starts a new peak at what is allocated now; returns that.
    pub fn peak_reset() -> isize {
        let now = LIVE.with(Cell::get);
        PEAK.with(|peak| peak.set(now));
        now
    }

    pub fn peak() -> isize {
        PEAK.with(Cell::get)
    }

    // SAFETY: every call is passed on to the system allocator unchanged.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            // SAFETY: the caller's layout, passed on unchanged.
            let p = unsafe { System.alloc(layout) };
            if !p.is_null() {
                add(layout.size() as isize);
            }
            p
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            // SAFETY: the caller's layout, passed on unchanged.
            let p = unsafe { System.alloc_zeroed(layout) };
            if !p.is_null() {
                add(layout.size() as isize);
            }
            p
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: `ptr` came from this allocator with `layout`, as the caller promises.
            unsafe { System.dealloc(ptr, layout) };
            add(-(layout.size() as isize));
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            // SAFETY: `ptr` came from this allocator with `layout`, as the caller promises.
            let p = unsafe { System.realloc(ptr, layout, new_size) };
            if !p.is_null() {
                add(new_size as isize - layout.size() as isize);
            }
            p
        }
    }
}

#[global_allocator]
static HEAP: heap::Counting = heap::Counting;

/// A batch that inflates far beyond what the broker would hold of it (64 MiB of records
/// from a few kB of zstd, twice the 32 × `max.message.bytes` a record may inflate to) is
/// accepted, as Kafka accepts it, and walked through a window: the validating thread's
/// heap never holds more than a few of its records.
#[test]
fn a_batch_inflating_far_beyond_the_record_limit_is_walked_in_bounded_memory() {
    let root = tempfile::tempdir().unwrap();
    let mut log = open(&partition_dir(root.path()), LogConfig::default(), true);
    let big = compressed(BatchSpec::new(64, 1 << 20), Codec::Zstd);
    assert!(big.len() < 100_000, "{}", big.len());
    let before = heap::peak_reset();
    let info = log.append(&big, NOW).unwrap();
    let held = heap::peak() - before;
    assert_eq!(info.last_offset, 63);
    assert!(
        held < 8 << 20,
        "validating 64 MiB of records held {held} bytes at once"
    );
}

/// A single record that would inflate beyond 32 × `max.message.bytes` is refused before
/// it is decompressed; any client may raise that to 2 GiB, so 256 MiB bounds it whatever
/// the topic says. (Snappy inflates at most about 21×, so a batch it fits in
/// `max.message.bytes` never holds such a record.)
#[test]
fn a_record_inflating_beyond_the_limit_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let config = LogConfig {
        max_message_bytes: 10_000,
        ..LogConfig::default()
    };
    let mut log = open(&partition_dir(root.path()), config, true);
    for codec in [Codec::Gzip, Codec::Lz4, Codec::Zstd] {
        let bomb = compressed(BatchSpec::new(2, 400_000), codec);
        assert!(bomb.len() < 10_000, "{codec:?}: {}", bomb.len());
        match log.append(&bomb, NOW) {
            Err(LogError::InvalidBatch(BatchError::Compression(m))) => {
                assert!(m.contains(&format!("more than {}", 320_000)), "{m}")
            }
            other => panic!("{codec:?}: expected a compression error, got {other:?}"),
        }
        let fine = compressed(BatchSpec::new(30, 50_000), codec);
        log.append(&fine, NOW)
            .unwrap_or_else(|e| panic!("{codec:?}: 1.5 MB of records refused: {e}"));
    }
    assert_eq!(
        strom_wire::codec::DECOMPRESSED_LIMIT_MAX,
        256 << 20,
        "the cap whatever max.message.bytes allows"
    );
}

/// A segment whose only batch claims offsets 0 ..= i32::MAX - 1, as a log written before
/// validation could hold.
fn write_wide_segment(dir: &std::path::Path) {
    std::fs::create_dir_all(dir).unwrap();
    let mut b = batch(1, 10);
    set_i32(&mut b, 23, i32::MAX - 1);
    fix_crc(&mut b);
    std::fs::write(dir.join(strom_log::offset_file_name(0, "log")), &b).unwrap();
}

#[test]
fn the_log_rolls_before_relative_offsets_would_leave_the_index_range() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    write_wide_segment(&dir);
    let mut log = open(&dir, LogConfig::default(), false);
    assert_eq!(log.log_end_offset(), i32::MAX as i64);
    let info = log.append(&batch(2, 10), NOW).unwrap();
    assert_eq!(info.base_offset, i32::MAX as i64);
    assert_eq!(log.segment_count(), 2, "the append needed a new segment");
    let batches = read_all(&log);
    assert_eq!(batches.last().unwrap().0.base_offset, i32::MAX as i64);
}

#[test]
fn recovery_stops_at_a_batch_outside_the_relative_range() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    std::fs::create_dir_all(&dir).unwrap();
    let first = batch(1, 10);
    let mut far = batch(1, 10);
    far[0..8].copy_from_slice(&(3_000_000_000i64).to_be_bytes());
    let mut file = first.clone();
    file.extend_from_slice(&far);
    std::fs::write(dir.join(strom_log::offset_file_name(0, "log")), &file).unwrap();
    let log = open(&dir, LogConfig::default(), false);
    assert_eq!(
        log.log_end_offset(),
        1,
        "the far batch is cut off, not indexed"
    );
}
