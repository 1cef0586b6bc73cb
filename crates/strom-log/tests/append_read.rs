//! Append and read: offsets, bytes on the way through, fetch sizing, bad batches.

mod common;

use common::{batch, config, open, partition_dir, read_all, split, BatchSpec, NOW};
use strom_log::{LogConfig, LogError};
use strom_wire::BatchError;

#[test]
fn round_trip_keeps_bytes_except_base_offset_and_leader_epoch() {
    let root = tempfile::tempdir().unwrap();
    let mut log = open(&partition_dir(root.path()), config(), true);
    let sent = BatchSpec::new(5, 40).with_fill(b'a').encode();
    let info = log.append(&sent, NOW).unwrap();
    assert_eq!(
        (info.base_offset, info.last_offset, info.record_count),
        (0, 4, 5)
    );
    assert!(!info.duplicate);

    let data = log.read(0, 1 << 20, false).unwrap();
    let stored = &data.records[..];
    assert_eq!(stored.len(), sent.len());
    assert_eq!(&stored[0..8], &0i64.to_be_bytes(), "assigned base offset");
    assert_eq!(&stored[8..12], &sent[8..12], "batch length");
    assert_eq!(&stored[12..16], &0i32.to_be_bytes(), "leader epoch");
    assert_eq!(&stored[16..], &sent[16..], "everything covered by the CRC");
    strom_wire::batch::verify_crc(stored).unwrap();
}

#[test]
fn offsets_are_contiguous_across_batches_and_appends() {
    let root = tempfile::tempdir().unwrap();
    let mut log = open(&partition_dir(root.path()), config(), true);
    let mut expected_base = 0;
    for (i, count) in [1usize, 3, 7, 2, 10].into_iter().enumerate() {
        // Two batches in one record set, as a produce request may carry.
        let mut set = BatchSpec::new(count, 10).with_fill(i as u8).encode();
        set.extend(batch(1, 10));
        let info = log.append(&set, NOW).unwrap();
        assert_eq!(info.base_offset, expected_base);
        assert_eq!(info.last_offset, expected_base + count as i64);
        assert_eq!(info.record_count, count as i64 + 1);
        expected_base += count as i64 + 1;
        assert_eq!(log.log_end_offset(), expected_base);
    }
    let batches = read_all(&log);
    assert_eq!(batches.len(), 10);
    let mut next = 0;
    for (h, _) in &batches {
        assert_eq!(h.base_offset, next);
        next = h.next_offset();
    }
    assert_eq!(next, log.log_end_offset());
}

#[test]
fn read_returns_whole_batches_within_max_bytes() {
    let root = tempfile::tempdir().unwrap();
    let mut log = open(&partition_dir(root.path()), config(), true);
    let one = batch(4, 100);
    for _ in 0..10 {
        log.append(&one, NOW).unwrap();
    }
    let len = one.len();
    for max in [len, len + 1, 3 * len - 1, 3 * len, 3 * len + 60] {
        let data = log.read(0, max, false).unwrap();
        assert_eq!(data.records.len(), max / len * len, "max_bytes {max}");
        let batches = split(&data.records);
        assert_eq!(batches.len(), max / len);
        assert_eq!(batches[0].0.base_offset, 0);
    }
    let all = log.read(0, usize::MAX, false).unwrap();
    assert_eq!(all.records.len(), 10 * len);
}

/// Where `max_bytes` cuts, a read ends at the last whole batch that fits, found from the
/// offset index and the batch headers after its entry, however sparse the index is.
#[test]
fn a_cut_read_ends_at_the_last_whole_batch_however_sparse_the_index() {
    for interval in [1, 256, 4096, 1 << 30] {
        let root = tempfile::tempdir().unwrap();
        let config = LogConfig {
            index_interval_bytes: interval,
            ..config()
        };
        let mut log = open(&partition_dir(root.path()), config, true);
        for i in 0..60 {
            log.append(&batch(1 + i % 4, 10 + (i * 37) % 300), NOW)
                .unwrap();
        }
        let all = log.read(0, usize::MAX, false).unwrap().records;
        let mut ends = vec![(0i64, 0usize)];
        for (header, bytes) in split(&all) {
            ends.push((
                header.last_offset() + 1,
                ends.last().unwrap().1 + bytes.len(),
            ));
        }
        for window in ends.windows(2).step_by(7) {
            let (offset, start) = window[0];
            for max in [1, 100, 333, 1000, 4097, 20_000] {
                let expected = ends
                    .iter()
                    .map(|&(_, end)| end)
                    .filter(|&end| end > start && end <= start + max)
                    .max()
                    .map_or(0, |end| end - start);
                let read = log.read(offset, max, false).unwrap().records;
                assert_eq!(
                    read,
                    all.slice(start..start + expected),
                    "interval {interval}, offset {offset}, max_bytes {max}"
                );
            }
        }
    }
}

#[test]
fn min_one_batch_returns_a_batch_larger_than_max_bytes() {
    let root = tempfile::tempdir().unwrap();
    let mut log = open(&partition_dir(root.path()), config(), true);
    let big = batch(20, 500);
    log.append(&big, NOW).unwrap();
    log.append(&batch(1, 1), NOW).unwrap();

    for max in [0, 10, 61, big.len() - 1] {
        let strict = log.read(0, max, false).unwrap();
        assert!(
            strict.records.is_empty(),
            "max_bytes {max} without min_one_batch"
        );
        let kip74 = log.read(0, max, true).unwrap();
        let batches = split(&kip74.records);
        assert_eq!(batches.len(), 1, "exactly the first batch, max_bytes {max}");
        assert_eq!(kip74.records.len(), big.len());
    }
}

#[test]
fn reading_inside_a_batch_returns_the_whole_batch() {
    let root = tempfile::tempdir().unwrap();
    let mut log = open(&partition_dir(root.path()), config(), true);
    log.append(&batch(10, 50), NOW).unwrap(); // 0..=9
    log.append(&batch(10, 50), NOW).unwrap(); // 10..=19
    for offset in [0, 5, 9] {
        let batches = split(&log.read(offset, usize::MAX, false).unwrap().records);
        assert_eq!(batches[0].0.base_offset, 0, "offset {offset}");
        assert_eq!(batches.len(), 2);
    }
    for offset in [10, 13, 19] {
        let batches = split(&log.read(offset, usize::MAX, false).unwrap().records);
        assert_eq!(batches.len(), 1);
        assert_eq!(batches[0].0.base_offset, 10, "offset {offset}");
    }
}

#[test]
fn reads_at_log_end_are_empty_and_beyond_it_out_of_range() {
    let root = tempfile::tempdir().unwrap();
    let mut log = open(&partition_dir(root.path()), config(), true);
    assert!(log.read(0, 100, true).unwrap().records.is_empty());
    log.append(&batch(3, 10), NOW).unwrap();
    assert!(log.read(3, 100, true).unwrap().records.is_empty());
    assert!(matches!(
        log.read(4, 100, true),
        Err(LogError::OffsetOutOfRange {
            offset: 4,
            log_start_offset: 0,
            log_end_offset: 3
        })
    ));
    assert!(matches!(
        log.read(-1, 100, true),
        Err(LogError::OffsetOutOfRange { .. })
    ));
}

#[test]
fn a_batch_above_max_message_bytes_is_refused_and_nothing_is_written() {
    let root = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        max_message_bytes: 1000,
        ..config()
    };
    let mut log = open(&partition_dir(root.path()), cfg, true);
    let small = batch(1, 10);
    let big = batch(10, 100);
    assert!(big.len() > 1000);
    let mut set = small.clone();
    set.extend_from_slice(&big);
    match log.append(&set, NOW) {
        Err(LogError::MessageTooLarge { size, max }) => {
            assert_eq!((size, max), (big.len(), 1000));
        }
        other => panic!("expected MessageTooLarge, got {other:?}"),
    }
    assert_eq!(
        log.log_end_offset(),
        0,
        "a request is appended whole or not at all"
    );
    assert_eq!(log.size_bytes(), 0);
    log.append(&small, NOW).unwrap();
    assert_eq!(log.log_end_offset(), 1);
}

#[test]
fn a_crc_mismatch_is_an_invalid_batch() {
    let root = tempfile::tempdir().unwrap();
    let mut log = open(&partition_dir(root.path()), config(), true);
    let mut bad = batch(3, 30);
    let last = bad.len() - 1;
    bad[last] ^= 0x01;
    let mut set = batch(1, 10);
    set.extend_from_slice(&bad);
    assert!(matches!(
        log.append(&set, NOW),
        Err(LogError::InvalidBatch(BatchError::CrcMismatch { .. }))
    ));
    assert_eq!(log.log_end_offset(), 0);
    assert_eq!(log.size_bytes(), 0);
}

#[test]
fn malformed_record_sets_are_invalid_batches() {
    let root = tempfile::tempdir().unwrap();
    let mut log = open(&partition_dir(root.path()), config(), true);
    let good = batch(2, 10);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("truncated", good[..good.len() - 1].to_vec()),
        ("header only part", good[..30].to_vec()),
        ("old magic", {
            let mut b = good.clone();
            b[16] = 1;
            b
        }),
        ("zero records", {
            let mut b = good.clone();
            b[57..61].copy_from_slice(&0i32.to_be_bytes());
            let crc = crc32c::crc32c(&b[21..]);
            b[17..21].copy_from_slice(&crc.to_be_bytes());
            b
        }),
    ];
    for (name, set) in cases {
        assert!(
            matches!(log.append(&set, NOW), Err(LogError::InvalidBatch(_))),
            "{name}"
        );
    }
    assert_eq!(log.log_end_offset(), 0);
}
