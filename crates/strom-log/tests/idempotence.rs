//! The idempotent producer: duplicates, gaps, epochs, and state across restarts.

mod common;

use std::fs;

use common::{config, files_with, open, partition_dir, read_all, BatchSpec, NOW};
use strom_log::{AppendInfo, LogConfig, LogError, PartitionLog, ProducerStateError};

const PID: i64 = 4242;

/// A batch of `count` records from producer `PID` at epoch 0 with first sequence `seq`.
fn from_producer(seq: i32, count: usize) -> Vec<u8> {
    BatchSpec::new(count, 50)
        .with_producer(PID, 0, seq)
        .with_fill(seq as u8)
        .encode()
}

fn append(log: &mut PartitionLog, batch: &[u8]) -> AppendInfo {
    log.append(batch, NOW).unwrap()
}

fn assert_duplicate_of(log: &mut PartitionLog, batch: &[u8], original: AppendInfo) {
    let end = log.log_end_offset();
    let size = log.size_bytes();
    let info = append(log, batch);
    assert!(info.duplicate);
    assert_eq!(info.record_count, 0);
    assert_eq!(
        (info.base_offset, info.last_offset),
        (original.base_offset, original.last_offset)
    );
    assert_eq!(
        (log.log_end_offset(), log.size_bytes()),
        (end, size),
        "not appended"
    );
}

fn assert_out_of_order(log: &mut PartitionLog, batch: &[u8], expected: i32) {
    match log.append(batch, NOW) {
        Err(LogError::ProducerState(ProducerStateError::OutOfOrderSequence {
            producer_id: PID,
            expected: e,
            ..
        })) => assert_eq!(e, expected),
        other => panic!("expected OutOfOrderSequence, got {other:?}"),
    }
}

#[test]
fn a_retried_batch_gets_its_original_offsets_and_is_not_appended() {
    let root = tempfile::tempdir().unwrap();
    let mut log = open(&partition_dir(root.path()), config(), true);
    let plain = BatchSpec::new(2, 10).encode();
    append(&mut log, &plain);
    let first = append(&mut log, &from_producer(0, 3));
    assert_eq!((first.base_offset, first.last_offset), (2, 4));
    append(&mut log, &plain);
    let second = append(&mut log, &from_producer(3, 2));
    assert_duplicate_of(&mut log, &from_producer(0, 3), first);
    assert_duplicate_of(&mut log, &from_producer(3, 2), second);
    // Non-idempotent batches are never deduplicated.
    let again = append(&mut log, &plain);
    assert!(!again.duplicate);
    assert_eq!(read_all(&log).len(), 5);
}

#[test]
fn only_the_last_five_batches_are_remembered() {
    let root = tempfile::tempdir().unwrap();
    let mut log = open(&partition_dir(root.path()), config(), true);
    let infos: Vec<AppendInfo> = (0..7)
        .map(|i| append(&mut log, &from_producer(i, 1)))
        .collect();
    for i in 2..7 {
        assert_duplicate_of(&mut log, &from_producer(i, 1), infos[i as usize]);
    }
    // Older than the five retained batches: not known, and not the next sequence.
    assert_out_of_order(&mut log, &from_producer(0, 1), 7);
}

#[test]
fn a_sequence_gap_is_out_of_order_and_nothing_is_written() {
    let root = tempfile::tempdir().unwrap();
    let mut log = open(&partition_dir(root.path()), config(), true);
    append(&mut log, &from_producer(0, 3));
    assert_out_of_order(&mut log, &from_producer(4, 1), 3);
    assert_out_of_order(&mut log, &from_producer(2, 1), 3);
    assert_eq!(log.log_end_offset(), 3);
    append(&mut log, &from_producer(3, 1));
}

/// Kafka's rule since KIP-360: a producer with no state in this log (its batches were
/// never replicated here, or are gone) is taken at whatever sequence it is at.
#[test]
fn an_unknown_producer_is_taken_at_any_sequence_and_checked_from_there() {
    let root = tempfile::tempdir().unwrap();
    let mut log = open(&partition_dir(root.path()), config(), true);
    let first = append(&mut log, &from_producer(1000, 2));
    assert!(!first.duplicate);
    assert_duplicate_of(&mut log, &from_producer(1000, 2), first);
    assert_out_of_order(&mut log, &from_producer(1003, 1), 1002);
    append(&mut log, &from_producer(1002, 1));
}

#[test]
fn an_older_epoch_is_fenced_and_a_newer_one_starts_at_zero() {
    let root = tempfile::tempdir().unwrap();
    let mut log = open(&partition_dir(root.path()), config(), true);
    let at = |epoch: i16, seq: i32| {
        BatchSpec::new(1, 10)
            .with_producer(PID, epoch, seq)
            .encode()
    };
    append(&mut log, &at(3, 0));
    assert!(matches!(
        log.append(&at(2, 1), NOW),
        Err(LogError::ProducerState(
            ProducerStateError::InvalidProducerEpoch { .. }
        ))
    ));
    assert_out_of_order(&mut log, &at(4, 5), 0);
    append(&mut log, &at(4, 0));
    append(&mut log, &at(4, 1));
}

/// Producer state after a restart: with a roll (so a snapshot exists below the end) and
/// more batches after it that must be replayed.
fn restart_keeps_producer_state(clean: bool) {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let cfg = LogConfig {
        segment_bytes: 1024,
        ..config()
    };
    let mut log = open(&dir, cfg.clone(), true);
    let mut infos = Vec::new();
    for i in 0..12 {
        infos.push(append(&mut log, &from_producer(2 * i, 2)));
    }
    assert!(log.segment_count() > 2);
    assert!(!files_with(&dir, "snapshot").is_empty());
    if clean {
        log.close(NOW).unwrap();
        assert_eq!(files_with(&dir, "snapshot").len(), 1);
    }
    drop(log);

    let mut log = open(&dir, cfg, clean);
    for i in 7..12 {
        assert_duplicate_of(&mut log, &from_producer(2 * i, 2), infos[i as usize]);
    }
    assert_out_of_order(&mut log, &from_producer(26, 1), 24);
    let next = append(&mut log, &from_producer(24, 1));
    assert_eq!(next.base_offset, 24);
}

#[test]
fn producer_state_survives_a_clean_restart() {
    restart_keeps_producer_state(true);
}

#[test]
fn producer_state_survives_an_unclean_restart() {
    restart_keeps_producer_state(false);
}

#[test]
fn producer_state_survives_an_unclean_restart_without_any_snapshot() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let mut log = open(&dir, config(), true);
    let first = append(&mut log, &from_producer(0, 2));
    append(&mut log, &from_producer(2, 2));
    drop(log);
    // Only the empty snapshot a new log starts with; without it the whole log is replayed.
    let snapshots = files_with(&dir, "snapshot");
    assert_eq!(snapshots.len(), 1);
    std::fs::remove_file(&snapshots[0]).unwrap();
    let mut log = open(&dir, config(), false);
    assert_duplicate_of(&mut log, &from_producer(0, 2), first);
    append(&mut log, &from_producer(4, 1));
}

#[test]
fn a_batch_lost_in_a_torn_tail_is_appended_again_when_retried() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let mut log = open(&dir, config(), true);
    let first = append(&mut log, &from_producer(0, 2));
    append(&mut log, &from_producer(2, 2));
    drop(log);
    let path = files_with(&dir, "log").pop().unwrap();
    let len = fs::metadata(&path).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 5)
        .unwrap();

    let mut log = open(&dir, config(), false);
    assert_eq!(log.log_end_offset(), 2);
    assert_duplicate_of(&mut log, &from_producer(0, 2), first);
    let retried = append(&mut log, &from_producer(2, 2));
    assert!(!retried.duplicate);
    assert_eq!(retried.base_offset, 2);
}

/// A snapshot taken at an offset that a later recovery truncated away describes batches
/// that are gone; it must not be loaded once the log has grown past its offset again.
#[test]
fn a_snapshot_beyond_a_truncated_log_is_not_used_later() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let mut log = open(&dir, config(), true);
    for seq in (0..20).step_by(2) {
        append(&mut log, &from_producer(seq, 2));
    }
    let snapshot_at = log.log_end_offset();
    log.close(NOW).unwrap();
    drop(log);
    assert_eq!(files_with(&dir, "snapshot").len(), 1);
    // Lose the last two batches after the snapshot was taken (the last segment is always
    // recovered after an unclean shutdown).
    let path = files_with(&dir, "log").pop().unwrap();
    let batch_len = from_producer(0, 2).len() as u64;
    let len = fs::metadata(&path).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 2 * batch_len + 1)
        .unwrap();

    let big = LogConfig {
        segment_bytes: 1 << 20,
        ..config()
    };
    let mut log = open(&dir, big.clone(), false);
    let end = log.log_end_offset();
    assert_eq!(end, snapshot_at - 4);
    let lost_seq = end as i32;
    // Other data grows the log past the old snapshot's offset.
    while log.log_end_offset() <= snapshot_at + 4 {
        append(&mut log, &BatchSpec::new(1, 10).encode());
    }
    drop(log);

    let mut log = open(&dir, big, false);
    let retried = append(&mut log, &from_producer(lost_seq, 2));
    assert!(
        !retried.duplicate,
        "the lost batch is appended, not acked as a duplicate"
    );
}
