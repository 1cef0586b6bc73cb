//! Segment rolling, offset lookups over many segments and the time index.

mod common;

use common::{batch, config, files_with, open, partition_dir, read_all, split, BatchSpec, NOW};
use strom_log::LogConfig;

#[test]
fn rolls_when_an_append_would_exceed_segment_bytes() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let one = batch(5, 100);
    let cfg = LogConfig {
        segment_bytes: 3 * one.len() as u64,
        ..config()
    };
    let mut log = open(&dir, cfg, true);
    for _ in 0..10 {
        log.append(&one, NOW).unwrap();
    }
    // Three batches fit exactly in a segment, so 10 batches need 4 segments.
    assert_eq!(log.segment_count(), 4);
    let logs = files_with(&dir, "log");
    let names: Vec<String> = logs
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "00000000000000000000.log",
            "00000000000000000015.log",
            "00000000000000000030.log",
            "00000000000000000045.log"
        ]
    );
    for path in &logs[..3] {
        assert_eq!(std::fs::metadata(path).unwrap().len(), 3 * one.len() as u64);
    }
    assert_eq!(files_with(&dir, "index").len(), 4);
    assert_eq!(files_with(&dir, "timeindex").len(), 4);
    assert_eq!(read_all(&log).len(), 10);

    // A batch larger than segment.bytes still goes somewhere: alone in a segment.
    let huge = batch(40, 100);
    log.append(&huge, NOW).unwrap();
    log.append(&one, NOW).unwrap();
    assert_eq!(log.segment_count(), 6);
    assert_eq!(read_all(&log).len(), 12);
}

#[test]
fn rolls_when_the_first_batch_is_older_than_segment_ms() {
    let root = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        segment_ms: 60_000,
        ..config()
    };
    let mut log = open(&partition_dir(root.path()), cfg, true);
    let t0 = 5_000_000;
    let at = |t: i64| BatchSpec::new(1, 10).with_timestamp(t).encode();
    log.append(&at(t0), t0).unwrap();
    log.append(&at(t0 + 30_000), t0 + 30_000).unwrap();
    log.append(&at(t0 + 60_000), t0 + 60_000).unwrap();
    assert_eq!(log.segment_count(), 1, "not older than segment.ms yet");
    log.append(&at(t0 + 60_001), t0 + 60_001).unwrap();
    assert_eq!(log.segment_count(), 2);
    assert_eq!(log.log_end_offset(), 4);
    // The new segment's age counts from its own first batch.
    log.append(&at(t0 + 100_000), t0 + 100_000).unwrap();
    assert_eq!(log.segment_count(), 2);
    log.append(&at(t0 + 120_002), t0 + 120_002).unwrap();
    assert_eq!(log.segment_count(), 3);
}

/// Many segments with many index entries each; every offset must be found, including
/// those in the middle of batches and on segment boundaries.
#[test]
fn finds_every_offset_across_many_segments() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let cfg = LogConfig {
        segment_bytes: 4 * 1024,
        index_interval_bytes: 300,
        ..config()
    };
    let mut log = open(&dir, cfg.clone(), true);
    let mut firsts = Vec::new();
    for i in 0..300usize {
        let spec = BatchSpec::new(1 + i % 4, 50 + i % 7).with_fill(i as u8);
        let info = log.append(&spec.encode(), NOW).unwrap();
        firsts.push((info.base_offset, info.last_offset, i as u8));
    }
    assert!(log.segment_count() > 10, "{} segments", log.segment_count());
    assert!(
        std::fs::metadata(&files_with(&dir, "index")[0])
            .unwrap()
            .len()
            > 8 * 4
    );

    let check = |log: &strom_log::PartitionLog| {
        for &(base, last, fill) in &firsts {
            for offset in base..=last {
                let data = log.read(offset, 1, true).unwrap();
                let batches = split(&data.records);
                assert_eq!(batches.len(), 1);
                let (h, bytes) = &batches[0];
                assert_eq!(
                    (h.base_offset, h.last_offset()),
                    (base, last),
                    "offset {offset}"
                );
                assert_eq!(*bytes.last().unwrap(), 0, "no record headers");
                assert_eq!(bytes[bytes.len() - 2], fill, "the right batch's bytes");
            }
        }
    };
    check(&log);
    let mut log = log;
    log.close(NOW).unwrap();
    drop(log);
    check(&open(&dir, cfg, true));
}

#[test]
fn finds_batches_by_timestamp_and_the_max_timestamp() {
    // A time-index entry per batch, and one per many batches (the scan does the rest).
    for (segment_bytes, index_interval_bytes) in [(1024, 256), (8192, 2048)] {
        let root = tempfile::tempdir().unwrap();
        let dir = partition_dir(root.path());
        let cfg = LogConfig {
            segment_bytes,
            index_interval_bytes,
            ..config()
        };
        let mut log = open(&dir, cfg.clone(), true);
        assert!(log.max_timestamp().unwrap().is_none());
        assert!(log.batch_at_timestamp(0).unwrap().is_none());
        // Batches of 3 records at t = 1000, 1010, ... (records at t, t+1, t+2), with one
        // batch out of order in the middle.
        let mut timestamps: Vec<i64> = (0..40).map(|i| 1000 + 10 * i).collect();
        timestamps[20] = 1500; // the maximum, well past its neighbours
        for &t in &timestamps {
            log.append(&BatchSpec::new(3, 100).with_timestamp(t).encode(), NOW)
                .unwrap();
        }
        assert!(log.segment_count() > 1);
        check_timestamps(&log);
        log.close(NOW).unwrap();
        drop(log);
        check_timestamps(&open(&dir, cfg, true));
    }
}

fn check_timestamps(log: &strom_log::PartitionLog) {
    let (h, bytes) = log.batch_at_timestamp(0).unwrap().unwrap();
    assert_eq!(h.base_offset, 0);
    assert_eq!(bytes.len(), h.total_len());
    let (h, _) = log.batch_at_timestamp(1102).unwrap().unwrap();
    assert_eq!(h.base_offset, 30, "batch at 1100 holds 1102");
    let (h, _) = log.batch_at_timestamp(1103).unwrap().unwrap();
    assert_eq!(h.base_offset, 33);
    // 1500 is first reached by the out-of-order batch 20 (offsets 60..=62).
    let (h, _) = log.batch_at_timestamp(1300).unwrap().unwrap();
    assert_eq!(h.base_offset, 60);
    assert!(log.batch_at_timestamp(1503).unwrap().is_none());

    let (h, bytes) = log.max_timestamp().unwrap().unwrap();
    assert_eq!((h.base_offset, h.max_timestamp), (60, 1502));
    assert_eq!(bytes.len(), h.total_len());
}
