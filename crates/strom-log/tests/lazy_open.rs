//! Opening logs for density: a clean reopen reads no index until it is used, segment files
//! are held open only through the bounded file cache, nothing is rewritten when nothing
//! changed, and segments that overlap are reported instead of served.

mod common;

use std::fs;
use std::path::Path;

use common::{files_with, partition_dir, read_all, BatchSpec, NOW};
use strom_log::{FileCache, LogConfig, LogError, PartitionLog};

fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        ..common::config()
    }
}

/// A closed log of 30 batches (3 records each) over several segments.
fn closed_log(dir: &Path, files: &std::sync::Arc<FileCache>) {
    let mut log = PartitionLog::open(dir, small_segments(), files, true, NOW).unwrap();
    for i in 0..30u8 {
        log.append(&BatchSpec::new(3, 80).with_fill(i).encode(), NOW)
            .unwrap();
    }
    assert!(log.segment_count() >= 3);
    log.close(NOW).unwrap();
}

#[test]
fn a_clean_reopen_reads_indexes_only_when_they_are_used() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let files = FileCache::new(16);
    closed_log(&dir, &files);
    let expected = {
        let log = PartitionLog::open(&dir, small_segments(), &files, true, NOW).unwrap();
        read_all(&log)
    };
    for index in files_with(&dir, "index") {
        fs::remove_file(index).unwrap();
    }
    let log = PartitionLog::open(&dir, small_segments(), &files, true, NOW).unwrap();
    assert!(
        files_with(&dir, "index").is_empty(),
        "opening read (and so rebuilt) no index"
    );
    assert_eq!(log.log_end_offset(), 90);
    assert_eq!(read_all(&log), expected);
    assert_eq!(
        files_with(&dir, "index").len(),
        log.segment_count(),
        "each index was rebuilt on first use"
    );
}

#[test]
fn segment_files_are_held_open_only_through_the_bounded_cache() {
    let root = tempfile::tempdir().unwrap();
    let files = FileCache::new(3);
    let dirs: Vec<_> = (0..4).map(|p| root.path().join(format!("t-{p}"))).collect();
    for dir in &dirs {
        closed_log(dir, &files);
    }
    let logs: Vec<_> = dirs
        .iter()
        .map(|d| PartitionLog::open(d, small_segments(), &files, true, NOW).unwrap())
        .collect();
    assert_eq!(files.open_count(), 0, "a clean open opens no segment file");
    for log in &logs {
        assert_eq!(read_all(log).len(), 30);
        assert!(files.open_count() <= 3);
    }
    drop(logs);
    assert_eq!(files.open_count(), 0, "a dropped log holds no descriptor");
}

#[test]
fn closing_an_unchanged_log_writes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let files = FileCache::new(16);
    closed_log(&dir, &files);
    let checkpoint = dir.join("partition.checkpoint");
    let before = fs::metadata(&checkpoint).unwrap().modified().unwrap();
    let snapshots = files_with(&dir, "snapshot");
    let mut log = PartitionLog::open(&dir, small_segments(), &files, true, NOW).unwrap();
    assert!(!log.needs_close());
    fs::remove_file(&snapshots[0]).unwrap();
    log.close(NOW).unwrap();
    assert!(
        files_with(&dir, "snapshot").is_empty(),
        "no snapshot rewritten"
    );
    assert_eq!(
        fs::metadata(&checkpoint).unwrap().modified().unwrap(),
        before
    );
    log.append(&BatchSpec::new(1, 10).encode(), NOW).unwrap();
    assert!(log.needs_close());
    log.close(NOW).unwrap();
    assert_eq!(files_with(&dir, "snapshot").len(), 1);
}

#[test]
fn segments_that_overlap_are_reported_not_served() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let files = FileCache::new(16);
    closed_log(&dir, &files);
    let logs = files_with(&dir, "log");
    let middle = logs[1].clone();
    let base: i64 = middle
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    for ext in ["log", "index", "timeindex"] {
        let lower = dir.join(strom_log::offset_file_name(base - 1, ext));
        fs::rename(middle.with_extension(ext), lower).unwrap();
    }
    let log = PartitionLog::open(&dir, small_segments(), &files, true, NOW).unwrap();
    let err = log.read(0, usize::MAX, true).unwrap_err();
    match err {
        LogError::CorruptFile { path, reason } => {
            assert!(path.ends_with(&*logs[0].file_name().unwrap().to_string_lossy()));
            assert!(reason.contains("overlap"), "{reason}");
        }
        other => panic!("expected a corrupt-file error, got {other}"),
    }
}

#[test]
fn recovery_reads_only_what_was_written_after_the_last_flush() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let files = FileCache::new(16);
    let mut log = PartitionLog::open(&dir, common::config(), &files, true, NOW).unwrap();
    for i in 0..20u8 {
        log.append(&BatchSpec::new(3, 80).with_fill(i).encode(), NOW)
            .unwrap();
    }
    log.flush(NOW).unwrap();
    let flushed_end = log.log_end_offset();
    for i in 20..25u8 {
        log.append(&BatchSpec::new(3, 80).with_fill(i).encode(), NOW)
            .unwrap();
    }
    let last_batch_start = log.log_end_offset() - 3;
    drop(log); // as after kill -9: the page cache holds the unflushed batches
    let segment = files_with(&dir, "log").pop().unwrap();
    let mut bytes = fs::read(&segment).unwrap();
    bytes[100] ^= 1; // inside the first batch, long flushed: not read again
    let at = bytes.len() - 10;
    bytes[at] ^= 1; // inside the last, unflushed batch: caught by its CRC
    fs::write(&segment, &bytes).unwrap();

    let log = PartitionLog::open(&dir, common::config(), &files, false, NOW).unwrap();
    assert!(flushed_end < last_batch_start);
    assert_eq!(
        log.log_end_offset(),
        last_batch_start,
        "cut at the corrupt unflushed batch"
    );
    assert_eq!(
        fs::read(&segment).unwrap()[100],
        bytes[100],
        "the flushed batch was not rewritten"
    );
}
