//! Reopening a partition: after a clean close nothing changes; after an unclean one a torn
//! or corrupt tail is truncated and everything before it kept; bad indexes are rebuilt.

mod common;

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;

use common::{batch, config, files_with, open, partition_dir, read_all, BatchSpec, NOW};
use strom_log::{LogConfig, PartitionLog};

/// Observable state of a log, for before/after comparisons.
#[derive(Debug, PartialEq)]
struct State {
    log_start: i64,
    log_end: i64,
    size: u64,
    segments: usize,
    batches: Vec<(i64, Vec<u8>)>,
}

fn state(log: &PartitionLog) -> State {
    State {
        log_start: log.log_start_offset(),
        log_end: log.log_end_offset(),
        size: log.size_bytes(),
        segments: log.segment_count(),
        batches: read_all(log)
            .into_iter()
            .map(|(h, b)| (h.base_offset, b))
            .collect(),
    }
}

fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        ..config()
    }
}

/// A log of 30 batches (3 records each) over several segments.
fn fill(dir: &Path, cfg: LogConfig) -> PartitionLog {
    let mut log = open(dir, cfg, true);
    for i in 0..30u8 {
        log.append(
            &BatchSpec::new(3, 80)
                .with_fill(i)
                .with_timestamp(1000 + 10 * i as i64)
                .encode(),
            NOW,
        )
        .unwrap();
    }
    assert!(log.segment_count() >= 3);
    log
}

fn last_segment(dir: &Path) -> std::path::PathBuf {
    files_with(dir, "log").pop().unwrap()
}

#[test]
fn reopen_after_clean_close_restores_the_same_state() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let mut log = fill(&dir, small_segments());
    log.delete_records_before(4, NOW).unwrap();
    let before = state(&log);
    log.close(NOW).unwrap();
    drop(log);
    let sizes: Vec<u64> = files_with(&dir, "log")
        .iter()
        .map(|p| fs::metadata(p).unwrap().len())
        .collect();

    let mut log = open(&dir, small_segments(), true);
    assert_eq!(state(&log), before);
    let after_sizes: Vec<u64> = files_with(&dir, "log")
        .iter()
        .map(|p| fs::metadata(p).unwrap().len())
        .collect();
    assert_eq!(sizes, after_sizes, "a clean open changes no file");
    // And it goes on where it left off.
    let info = log.append(&batch(2, 5), NOW).unwrap();
    assert_eq!(info.base_offset, before.log_end);
}

#[test]
fn unclean_reopen_of_an_intact_log_keeps_everything() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let log = fill(&dir, small_segments());
    let before = state(&log);
    drop(log); // no close: as after kill -9 (the page cache still holds the writes)
    let log = open(&dir, small_segments(), false);
    assert_eq!(state(&log), before);
}

/// Drops the log without closing it, damages the last segment with `damage`, reopens it
/// uncleanly, and checks that exactly the batches before `keep_end` survive.
fn recover_after(damage: impl FnOnce(&Path, &State), keep_last_batch: bool) {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let mut log = fill(&dir, small_segments());
    let before = state(&log);
    drop(log);
    damage(&last_segment(&dir), &before);

    log = open(&dir, small_segments(), false);
    let mut expected = before.batches.clone();
    if !keep_last_batch {
        expected.pop();
    }
    let after = state(&log);
    assert_eq!(after.batches, expected);
    let expected_end = if keep_last_batch {
        before.log_end
    } else {
        before.log_end - 3
    };
    assert_eq!(after.log_end, expected_end);
    assert_eq!(after.segments, before.segments);

    // The log is usable: appends continue at the recovered end, and survive another
    // unclean reopen.
    let info = log.append(&batch(1, 10), NOW).unwrap();
    assert_eq!(info.base_offset, expected_end);
    let expected = state(&log);
    drop(log);
    assert_eq!(state(&open(&dir, small_segments(), false)), expected);
}

#[test]
fn unclean_reopen_truncates_garbage_after_the_last_batch() {
    // Random-looking bytes, and zeros: what a file system may show for a size update that
    // outlived its data.
    for garbage in [[0xAB; 100].as_slice(), [0; 4096].as_slice()] {
        recover_after(
            |path, _| {
                let mut f = OpenOptions::new().append(true).open(path).unwrap();
                f.write_all(garbage).unwrap();
            },
            true,
        );
    }
}

#[test]
fn unclean_reopen_truncates_a_torn_last_batch() {
    for cut in [1, 10, 60, 100] {
        recover_after(
            |path, _| {
                let len = fs::metadata(path).unwrap().len();
                let f = OpenOptions::new().write(true).open(path).unwrap();
                f.set_len(len - cut).unwrap();
            },
            false,
        );
    }
}

#[test]
fn unclean_reopen_truncates_a_last_batch_with_a_flipped_byte() {
    for from_end in [1, 50, 200] {
        recover_after(
            |path, before| {
                let last_len = before.batches.last().unwrap().1.len() as u64;
                assert!(from_end < last_len);
                let mut bytes = fs::read(path).unwrap();
                let at = bytes.len() - from_end as usize;
                bytes[at] ^= 0x40;
                fs::write(path, bytes).unwrap();
            },
            false,
        );
    }
}

#[test]
fn unclean_reopen_drops_segments_after_a_corrupt_one() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let log = fill(&dir, small_segments());
    let before = state(&log);
    drop(log);
    // Rolled segments are fsynced, so only a lost checkpoint (recovery point 0) makes
    // recovery read them.
    fs::remove_file(dir.join("partition.checkpoint")).unwrap();
    let logs = files_with(&dir, "log");
    // Flip the last byte of the first segment: its last batch and every later one go.
    let mut bytes = fs::read(&logs[0]).unwrap();
    let at = bytes.len() - 1;
    bytes[at] ^= 1;
    fs::write(&logs[0], bytes).unwrap();

    let log = open(&dir, small_segments(), false);
    assert_eq!(log.segment_count(), 1);
    let after = state(&log);
    let kept = after.batches.len();
    assert_eq!(after.batches[..], before.batches[..kept]);
    assert_eq!(after.log_end, 3 * kept as i64);
    assert_eq!(files_with(&dir, "log").len(), 1);
    assert_eq!(files_with(&dir, "index").len(), 1);
    assert_eq!(files_with(&dir, "timeindex").len(), 1);
}

#[test]
fn segments_below_the_recovery_point_are_trusted() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let mut log = fill(&dir, small_segments());
    log.flush(NOW).unwrap();
    let flushed = state(&log);
    drop(log);
    // Damage a flushed, non-last segment. A real crash cannot do this; the point is that
    // recovery does not read it, so it is not truncated.
    let first = files_with(&dir, "log").remove(0);
    let mut bytes = fs::read(&first).unwrap();
    let at = bytes.len() - 1;
    bytes[at] ^= 1;
    fs::write(&first, &bytes).unwrap();
    let log = open(&dir, small_segments(), false);
    assert_eq!(log.log_end_offset(), flushed.log_end);
    assert_eq!(log.segment_count(), flushed.segments);
    assert_eq!(fs::read(&first).unwrap(), bytes);
}

#[test]
fn missing_indexes_are_rebuilt() {
    for extension in ["index", "timeindex"] {
        let root = tempfile::tempdir().unwrap();
        let dir = partition_dir(root.path());
        let mut log = fill(&dir, small_segments());
        let before = state(&log);
        let by_time = log.batch_at_timestamp(1001).unwrap().unwrap().0;
        log.close(NOW).unwrap();
        drop(log);
        let files = files_with(&dir, extension);
        let lens: Vec<u64> = files
            .iter()
            .map(|p| fs::metadata(p).unwrap().len())
            .collect();
        assert!(lens.iter().all(|&l| l > 0));
        for f in &files {
            fs::remove_file(f).unwrap();
        }

        let log = open(&dir, small_segments(), true);
        assert_eq!(state(&log), before, "{extension}");
        assert_eq!(log.batch_at_timestamp(1001).unwrap().unwrap().0, by_time);
        let rebuilt: Vec<u64> = files
            .iter()
            .map(|p| fs::metadata(p).unwrap().len())
            .collect();
        assert_eq!(rebuilt, lens, "{extension} rebuilt with the same entries");
    }
}

#[test]
fn corrupt_indexes_are_rebuilt() {
    type Damage = fn(&mut Vec<u8>);
    let damages: [(&str, &str, Damage); 5] = [
        ("index", "torn entry", |b| b.truncate(b.len() - 3)),
        ("timeindex", "torn entry", |b| b.truncate(b.len() - 5)),
        ("index", "unsorted", |b| b.swap(3, 11)),
        ("index", "position past the end", |b| {
            let n = b.len();
            b[n - 4..].copy_from_slice(&u32::MAX.to_be_bytes());
        }),
        ("index", "position inside a batch", |b| {
            let n = b.len();
            let p = u32::from_be_bytes(b[n - 4..].try_into().unwrap());
            b[n - 4..].copy_from_slice(&(p + 7).to_be_bytes());
        }),
    ];
    for (extension, what, damage) in damages {
        let root = tempfile::tempdir().unwrap();
        let dir = partition_dir(root.path());
        let mut log = fill(&dir, small_segments());
        let before = state(&log);
        log.close(NOW).unwrap();
        drop(log);
        let path = files_with(&dir, extension).pop().unwrap();
        let good = fs::read(&path).unwrap();
        assert!(good.len() >= 24, "{extension} has a few entries");
        let mut bad = good.clone();
        damage(&mut bad);
        fs::write(&path, &bad).unwrap();

        let log = open(&dir, small_segments(), true);
        assert_eq!(state(&log), before, "{extension}: {what}");
        assert_eq!(fs::read(&path).unwrap(), good, "{extension}: {what}");
    }
}

#[test]
fn an_empty_partition_reopens_empty() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let mut log = open(&dir, config(), true);
    log.close(NOW).unwrap();
    drop(log);
    for clean in [true, false] {
        let log = open(&dir, config(), clean);
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
        assert_eq!(log.segment_count(), 1);
    }
}
