//! The flush policy and the partition checkpoint it advances.

mod common;

use common::{batch, config, open, partition_dir, NOW};
use strom_log::checkpoint::PartitionCheckpoint;
use strom_log::LogConfig;

/// The recovery point on disk (0 before the first checkpoint is written).
fn recovery_point(dir: &std::path::Path) -> i64 {
    PartitionCheckpoint::read(dir)
        .unwrap()
        .unwrap_or_default()
        .recovery_point
}

#[test]
fn flush_messages_fsyncs_after_that_many_records() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let cfg = LogConfig {
        flush_messages: 5,
        ..config()
    };
    let mut log = open(&dir, cfg, true);
    log.append(&batch(3, 10), NOW).unwrap();
    assert_eq!(recovery_point(&dir), 0, "3 records: not yet");
    log.append(&batch(1, 10), NOW).unwrap();
    assert_eq!(recovery_point(&dir), 0, "4 records: not yet");
    log.append(&batch(1, 10), NOW).unwrap();
    assert_eq!(recovery_point(&dir), 5, "5 records: flushed");
    log.append(&batch(4, 10), NOW).unwrap();
    assert_eq!(recovery_point(&dir), 5);
}

#[test]
fn flush_ms_flushes_when_due_and_only_with_unflushed_records() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let cfg = LogConfig {
        flush_ms: 1000,
        ..config()
    };
    let mut log = open(&dir, cfg, true);
    log.append(&batch(2, 10), NOW).unwrap();
    log.flush_if_due(NOW + 999).unwrap();
    assert_eq!(recovery_point(&dir), 0);
    log.flush_if_due(NOW + 1000).unwrap();
    assert_eq!(recovery_point(&dir), 2);
    // Nothing new: no flush (every checkpoint write bumps the sequence in one of the
    // file's two slots, so an unchanged file means no write).
    let bytes = || std::fs::read(dir.join("partition.checkpoint")).unwrap();
    let before = bytes();
    log.flush_if_due(NOW + 5000).unwrap();
    let after = bytes();
    assert_eq!(before, after);
}

#[test]
fn close_and_roll_flush() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let one = batch(2, 100);
    let cfg = LogConfig {
        segment_bytes: 2 * one.len() as u64,
        ..config()
    };
    let mut log = open(&dir, cfg, true);
    for _ in 0..3 {
        log.append(&one, NOW).unwrap();
    }
    assert_eq!(
        recovery_point(&dir),
        4,
        "the roll before the third batch flushed"
    );
    log.close(NOW).unwrap();
    assert_eq!(recovery_point(&dir), 6);
}
