//! A shutdown that keeps each log's end and producer state in the clean-shutdown record:
//! the next open reads neither the partition's checkpoint nor a snapshot, and catching
//! up afterwards leaves the partition's own files as a crash would need them.

mod common;

use std::fs;
use std::path::Path;

use common::{files_with, partition_dir, read_all, BatchSpec, NOW};
use strom_log::checkpoint::PartitionCheckpoint;
use strom_log::{ClosedLog, FileCache, PartitionLog};

fn idempotent(base_sequence: i32) -> Vec<u8> {
    BatchSpec::new(3, 40)
        .with_producer(7, 0, base_sequence)
        .encode()
}

/// A log of 4 idempotent batches closed the way a shutdown of many partitions closes it.
fn closed_by_shutdown(dir: &Path, files: &std::sync::Arc<FileCache>) -> ClosedLog {
    let mut log = PartitionLog::open(dir, common::config(), files, true, NOW).unwrap();
    for i in 0..4 {
        log.append(&idempotent(i * 3), NOW).unwrap();
    }
    log.close_before_sync().unwrap();
    log.seal()
}

#[test]
fn a_log_opened_from_the_record_needs_neither_its_checkpoint_nor_a_snapshot() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let files = FileCache::new(16);
    let closed = closed_by_shutdown(&dir, &files);
    assert_eq!(closed.log_end_offset, 12);
    assert_eq!(closed.producer_state.len(), 1);
    assert_eq!(
        PartitionCheckpoint::read(&dir)
            .unwrap()
            .unwrap_or_default()
            .recovery_point,
        0,
        "the close wrote no checkpoint"
    );
    fs::remove_file(dir.join("partition.checkpoint")).ok();
    for snapshot in files_with(&dir, "snapshot") {
        fs::remove_file(snapshot).unwrap();
    }

    let mut log = PartitionLog::open_closed(&dir, common::config(), &files, closed, NOW).unwrap();
    assert_eq!(files.open_count(), 0, "nothing of the log was read");
    assert_eq!(log.log_end_offset(), 12);
    assert_eq!(read_all(&log).len(), 4);
    let retry = log.append(&idempotent(9), NOW).unwrap();
    assert!(
        retry.duplicate,
        "the recorded producer state knows the last batch"
    );
    assert_eq!(retry.base_offset, 9);
    assert!(log.needs_close(), "its own files are behind the record");
}

#[test]
fn catching_up_writes_what_a_crash_after_the_start_recovers_from() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let files = FileCache::new(16);
    let closed = closed_by_shutdown(&dir, &files);
    let mut log = PartitionLog::open_closed(&dir, common::config(), &files, closed, NOW).unwrap();
    log.catch_up_checkpoint().unwrap();
    assert!(!log.needs_close());
    drop(log);
    assert_eq!(
        PartitionCheckpoint::read(&dir)
            .unwrap()
            .unwrap()
            .recovery_point,
        12
    );
    assert_eq!(
        files_with(&dir, "snapshot")
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect::<Vec<_>>(),
        ["00000000000000000012.snapshot"]
    );

    // A crash now: the unclean open trusts the caught-up checkpoint and snapshot.
    let mut log = PartitionLog::open(&dir, common::config(), &files, false, NOW).unwrap();
    assert_eq!(log.log_end_offset(), 12);
    assert!(log.append(&idempotent(9), NOW).unwrap().duplicate);
}
