//! Retention by time and size, and DeleteRecords.

mod common;

use common::{config, files_with, open, partition_dir, read_all, BatchSpec, NOW};
use strom_log::{LogConfig, LogError, PartitionLog};

const DAY: i64 = 24 * 60 * 60 * 1000;

/// Ten segments of 4 batches (2 records each); segment `s` holds records stamped `t0 + s`
/// seconds. Returns the log and each segment's size.
fn ten_segments(dir: &std::path::Path, cfg: LogConfig, t0: i64) -> (PartitionLog, u64) {
    let one = BatchSpec::new(2, 100).encode();
    let cfg = LogConfig {
        segment_bytes: 4 * one.len() as u64,
        ..cfg
    };
    let mut log = open(dir, cfg, true);
    for s in 0..10 {
        for _ in 0..4 {
            let batch = BatchSpec::new(2, 100)
                .with_timestamp(t0 + s * 1000)
                .encode();
            log.append(&batch, t0 + s * 1000).unwrap();
        }
    }
    assert_eq!(log.segment_count(), 10);
    (log, 4 * one.len() as u64)
}

#[test]
fn retention_ms_deletes_expired_segments_and_raises_log_start() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let t0 = 10 * DAY;
    let cfg = LogConfig {
        retention_ms: 5_000,
        ..config()
    };
    let (mut log, _) = ten_segments(&dir, cfg, t0);
    // Segment s's newest record is t0 + s*1000 + 1; at now it is expired when that is
    // older than now - 5000: at t0 + 7002, segments 0, 1 and 2.
    assert_eq!(log.apply_retention(t0 + 5_000).unwrap(), 0);
    assert_eq!(log.apply_retention(t0 + 7_002).unwrap(), 3);
    assert_eq!(log.log_start_offset(), 24);
    assert_eq!(log.segment_count(), 7);
    assert_eq!(files_with(&dir, "log").len(), 7);
    let snapshots = files_with(&dir, "snapshot");
    assert!(!snapshots.is_empty());
    for snapshot in snapshots {
        let offset: i64 = snapshot
            .file_stem()
            .unwrap()
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            offset >= 24,
            "no snapshot below the oldest segment: {offset}"
        );
    }
    assert!(matches!(
        log.read(23, 1000, true),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    assert_eq!(read_all(&log)[0].0.base_offset, 24);
    // Far in the future: everything but the active segment goes.
    assert_eq!(log.apply_retention(t0 + DAY).unwrap(), 6);
    assert_eq!(log.segment_count(), 1);
    assert_eq!(log.log_start_offset(), 72);
    assert_eq!(log.log_end_offset(), 80);

    // The raised log start offset survives a restart.
    log.close(t0 + DAY).unwrap();
    drop(log);
    let log = open(&dir, config(), true);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (72, 80));
}

#[test]
fn retention_bytes_deletes_the_oldest_segments_while_the_log_is_too_big() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let (mut log, segment) = ten_segments(&dir, config(), NOW);
    log.set_config(LogConfig {
        retention_bytes: (3 * segment + segment / 2) as i64,
        ..log.config().clone()
    });
    assert_eq!(log.apply_retention(NOW).unwrap(), 6);
    assert_eq!(log.segment_count(), 4);
    assert_eq!(log.size_bytes(), 4 * segment);
    assert_eq!(log.log_start_offset(), 48);
    assert_eq!(read_all(&log).len(), 16);
    // Exactly at the limit: nothing more to delete.
    log.set_config(LogConfig {
        retention_bytes: (3 * segment) as i64,
        ..log.config().clone()
    });
    assert_eq!(log.apply_retention(NOW).unwrap(), 1);
    assert_eq!(log.apply_retention(NOW).unwrap(), 0);
    assert_eq!(log.size_bytes(), 3 * segment);
}

#[test]
fn the_active_segment_is_never_deleted_and_compact_only_keeps_everything() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let (mut log, _) = ten_segments(&dir, config(), NOW);
    log.set_config(LogConfig {
        cleanup_policy: "compact".into(),
        retention_ms: 0,
        retention_bytes: 0,
        ..log.config().clone()
    });
    assert_eq!(log.apply_retention(NOW + DAY).unwrap(), 0);
    log.set_config(LogConfig {
        cleanup_policy: "compact,delete".into(),
        ..log.config().clone()
    });
    assert_eq!(log.apply_retention(NOW + DAY).unwrap(), 9);
    assert_eq!(log.segment_count(), 1);
    assert_eq!(read_all(&log).len(), 4);
}

#[test]
fn delete_records_before_raises_log_start_and_deletes_whole_segments_below_it() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let (mut log, _) = ten_segments(&dir, config(), NOW);
    // Segment 0 holds offsets 0..8, segment 1 8..16.
    assert_eq!(log.delete_records_before(11, NOW).unwrap(), 11);
    assert_eq!(log.log_start_offset(), 11);
    assert_eq!(log.segment_count(), 9, "segment 0 is wholly below 11");
    for offset in [0, 7, 8, 10] {
        assert!(
            matches!(
                log.read(offset, 1000, true),
                Err(LogError::OffsetOutOfRange {
                    log_start_offset: 11,
                    ..
                })
            ),
            "offset {offset}"
        );
    }
    // Offset 11 is inside the batch 10..=11, which is returned whole.
    let first = &read_all(&log)[0].0;
    assert_eq!(first.base_offset, 10);
    // Lowering is a no-op; beyond the end is out of range.
    assert_eq!(log.delete_records_before(5, NOW).unwrap(), 11);
    assert!(matches!(
        log.delete_records_before(81, NOW),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    // Up to the end: everything is gone for readers, the log goes on.
    assert_eq!(log.delete_records_before(80, NOW).unwrap(), 80);
    assert_eq!(log.segment_count(), 1);
    assert!(log.read(80, 1000, true).unwrap().records.is_empty());
    let info = log.append(&BatchSpec::new(1, 10).encode(), NOW).unwrap();
    assert_eq!((info.base_offset, info.log_start_offset), (80, 80));

    // Survives an unclean restart too (the checkpoint is written at once).
    drop(log);
    let log = open(&dir, config(), false);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (80, 81));
}

#[test]
fn timestamps_below_the_log_start_are_not_returned() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let (mut log, _) = ten_segments(&dir, config(), NOW);
    log.delete_records_before(4, NOW).unwrap();
    // Segment 0 (offsets 0..8) is still there, all its batches stamped NOW..NOW+1.
    assert_eq!(log.segment_count(), 10);
    let (h, _) = log.batch_at_timestamp(0).unwrap().unwrap();
    assert_eq!(
        h.base_offset, 4,
        "the first batch at or after the log start"
    );
}
