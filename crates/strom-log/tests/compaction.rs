//! The log cleaner on real segment files: what a compacted log keeps (the latest record
//! of each key at its own offset, tombstones until their delete horizon, each producer's
//! last batch), how segments are merged, and what it refuses (a damaged segment, a log
//! that changed under it).

mod common;

use std::collections::HashMap;
use std::path::Path;

use common::{
    clean_once, keyed_batch, open, partition_dir, records_of, roll, KeyedRecord, ReadRecord, NOW,
};
use kafka_protocol::records::Compression;
use strom_log::cleaner::{no_phase_hook, Cleaner, CleanerConfig, CleaningOutcome};
use strom_log::{LogConfig, LogError, PartitionLog};

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

fn compacted_config() -> LogConfig {
    LogConfig {
        cleanup_policy: "compact".to_string(),
        segment_bytes: 2048,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

fn record(key: &str, value: Option<String>) -> KeyedRecord {
    (Some(key.to_string()), value.map(String::into_bytes))
}

/// Writes `writes` records over `keys` keys, five per batch; the last write of each of
/// the first `tombstoned` keys is a tombstone.
fn write_updates(log: &mut PartitionLog, writes: usize, keys: usize, tombstoned: usize) {
    let mut last_write = HashMap::new();
    for i in 0..writes {
        last_write.insert(i % keys, i);
    }
    let all: Vec<KeyedRecord> = (0..writes)
        .map(|i| {
            let key = i % keys;
            let tombstone = key < tombstoned && last_write[&key] == i;
            record(
                &format!("key-{key}"),
                (!tombstone).then(|| format!("value-{i}")),
            )
        })
        .collect();
    for chunk in all.chunks(5) {
        log.append(&keyed_batch(chunk, Compression::None, None, NOW), NOW)
            .unwrap();
    }
    roll(log);
}

/// Runs one cleaning of `log` from `first_dirty` at `now`, swapping in every group, and
/// records it in the log as the broker's cleaner does.
fn clean_with(
    log: &mut PartitionLog,
    config: CleanerConfig,
    first_dirty: Option<i64>,
    now: i64,
) -> Result<CleaningOutcome, LogError> {
    let outcome = clean_once(log, config, first_dirty, now, &no_phase_hook)?;
    log.cleaned_up_to(outcome.end_offset, outcome.latest_delete_horizon);
    Ok(outcome)
}

fn clean(log: &mut PartitionLog, now: i64) -> CleaningOutcome {
    clean_with(log, CleanerConfig::default(), None, now).unwrap()
}

/// What a cleaning up to `end` keeps of `before`: below `end`, the last record of each
/// key below `end` (keyless records go); from `end` on, everything.
fn model(before: &[ReadRecord], end: i64) -> Vec<ReadRecord> {
    let mut latest = HashMap::new();
    for (offset, _, key, _) in before.iter().filter(|r| r.0 < end) {
        if let Some(key) = key {
            latest.insert(key.clone(), *offset);
        }
    }
    before
        .iter()
        .filter(|(offset, _, key, _)| {
            *offset >= end || key.as_ref().is_some_and(|k| latest[k] == *offset)
        })
        .cloned()
        .collect()
}

fn leftover_cleaner_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap"))
        .collect()
}

#[test]
fn the_latest_record_of_each_key_survives_at_its_own_offset() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let mut log = open(&dir, compacted_config(), true);
    write_updates(&mut log, 1_005, 20, 5);
    let before = records_of(&log);
    let (segments, bytes) = (log.segment_count(), log.size_bytes());
    let outcome = clean(&mut log, NOW);
    assert!(outcome.completed);
    let active_base = outcome.end_offset;
    let after = records_of(&log);
    assert_eq!(after, model(&before, active_base));
    let cleaned: Vec<_> = after.iter().filter(|r| r.0 < active_base).collect();
    assert_eq!(
        cleaned.len(),
        20,
        "one record per key below the active segment"
    );
    assert_eq!(cleaned.iter().filter(|r| r.3.is_none()).count(), 5);
    assert!(
        log.size_bytes() < bytes / 10,
        "{bytes} bytes became {}",
        log.size_bytes()
    );
    assert_eq!(outcome.stats.records_kept, 20);
    // Segments are grouped by the size they had, as Kafka groups them: the next
    // cleaning merges the small cleaned ones up to `segment.bytes`.
    let again = clean_with(&mut log, CleanerConfig::default(), Some(active_base), NOW).unwrap();
    assert_eq!(again.end_offset, active_base);
    assert!(
        log.segment_count() <= 3,
        "{segments} segments became {}",
        log.segment_count()
    );
    assert_eq!(records_of(&log), after);
    assert!(leftover_cleaner_files(&dir).is_empty());
    log.close(NOW).unwrap();
    drop(log);
    for clean_shutdown in [true, false] {
        let reopened = open(&dir, compacted_config(), clean_shutdown);
        assert_eq!(records_of(&reopened), after);
    }
}

#[test]
fn tombstones_stay_until_their_delete_horizon_then_go() {
    let root = tempfile::tempdir().unwrap();
    let mut log = open(&partition_dir(root.path()), compacted_config(), true);
    write_updates(&mut log, 200, 10, 3);
    let before = records_of(&log);
    let first = clean(&mut log, NOW);
    let horizon = first.latest_delete_horizon.expect("tombstones were kept");
    assert_eq!(horizon, NOW + DAY_MS);
    let kept = records_of(&log);
    assert_eq!(
        kept,
        model(&before, first.end_offset),
        "timestamps survive the horizon"
    );
    let tombstones = |records: &[ReadRecord]| {
        records
            .iter()
            .filter(|r| r.3.is_none() && r.0 < first.end_offset)
            .count()
    };
    assert_eq!(tombstones(&kept), 3);
    let before_horizon = log
        .to_clean(Some(first.end_offset), log.log_end_offset(), horizon - 1)
        .unwrap()
        .unwrap();
    assert!(!before_horizon.tombstones_expired);
    clean_with(
        &mut log,
        CleanerConfig::default(),
        Some(first.end_offset),
        horizon - 1,
    )
    .unwrap();
    assert_eq!(tombstones(&records_of(&log)), 3, "kept until the horizon");
    let after_horizon = log
        .to_clean(Some(first.end_offset), log.log_end_offset(), horizon)
        .unwrap()
        .unwrap();
    assert!(after_horizon.tombstones_expired);
    clean_with(
        &mut log,
        CleanerConfig::default(),
        Some(first.end_offset),
        horizon,
    )
    .unwrap();
    let last = records_of(&log);
    assert_eq!(tombstones(&last), 0);
    assert_eq!(last.iter().filter(|r| r.0 < first.end_offset).count(), 7);
}

#[test]
fn an_idempotent_producers_last_batch_stays_even_when_emptied() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let mut log = open(&dir, compacted_config(), true);
    let producer_batch = keyed_batch(
        &[record("shared", Some("from-producer".into()))],
        Compression::None,
        Some((7, 0, 0)),
        NOW,
    );
    log.append(&producer_batch, NOW).unwrap();
    for i in 0..40 {
        let batch = keyed_batch(
            &[record("shared", Some(format!("later-{i}")))],
            Compression::None,
            None,
            NOW,
        );
        log.append(&batch, NOW).unwrap();
    }
    clean(&mut log, NOW);
    let batches = common::read_all(&log);
    let (header, _) = batches.first().expect("the producer's batch");
    assert_eq!(
        (
            header.base_offset,
            header.producer_id,
            header.last_sequence(),
            header.record_count
        ),
        (0, 7, 0, 0),
        "kept as an empty batch with the producer's sequence"
    );
    log.close(NOW).unwrap();
    drop(log);
    let mut reopened = open(&dir, compacted_config(), false);
    let retry = reopened.append(&producer_batch, NOW).unwrap();
    assert!(
        retry.duplicate,
        "the sequence survived cleaning and a restart"
    );
}

#[test]
fn a_small_dedupe_buffer_cleans_in_prefixes_until_the_whole_dirty_section_is_clean() {
    let root = tempfile::tempdir().unwrap();
    let mut log = open(&partition_dir(root.path()), compacted_config(), true);
    write_updates(&mut log, 1_000, 100, 0);
    let before = records_of(&log);
    let config = CleanerConfig {
        dedupe_buffer_bytes: 24 * 31,
        ..CleanerConfig::default()
    };
    let mut first_dirty = None;
    let mut rounds = 0;
    loop {
        let outcome = clean_with(&mut log, config, first_dirty, NOW).unwrap();
        assert!(outcome.stats.map_keys <= 31);
        assert!(
            first_dirty.is_none_or(|f| outcome.end_offset > f),
            "every cleaning moves the first dirty offset"
        );
        first_dirty = Some(outcome.end_offset);
        rounds += 1;
        let to_clean = log
            .to_clean(first_dirty, log.log_end_offset(), NOW)
            .unwrap()
            .unwrap();
        if to_clean.cleanable_bytes == 0 {
            assert_eq!(
                records_of(&log),
                model(&before, to_clean.first_uncleanable_offset)
            );
            break;
        }
        assert!(rounds < 100);
    }
    assert!(rounds > 3, "the keys did not fit one map: {rounds} rounds");
}

#[test]
fn compressed_batches_keep_their_codec_and_keyless_records_go() {
    let root = tempfile::tempdir().unwrap();
    let mut log = open(&partition_dir(root.path()), LogConfig::default(), true);
    let tail_offset = 120;
    for (i, compression) in [Compression::Lz4, Compression::Zstd, Compression::Gzip]
        .into_iter()
        .cycle()
        .take(60)
        .enumerate()
    {
        let records = [
            record(&format!("k{}", i % 6), Some(format!("v{i}"))),
            (None, Some(format!("keyless-{i}").into_bytes())),
        ];
        log.append(&keyed_batch(&records, compression, None, NOW), NOW)
            .unwrap();
    }
    let before = records_of(&log);
    // The policy switched from delete to compact on a log holding keyless records.
    log.set_config(LogConfig {
        segment_bytes: 1024,
        ..compacted_config()
    });
    roll(&mut log);
    let before_tail = records_of(&log);
    let end = clean(&mut log, NOW).end_offset;
    assert!(end > before.last().unwrap().0);
    let after = records_of(&log);
    assert_eq!(after, model(&before_tail, end));
    let data_batches = common::read_all(&log);
    let cleaned = data_batches
        .iter()
        .filter(|(h, _)| h.record_count > 0 && h.base_offset < tail_offset);
    for (header, _) in cleaned {
        assert_ne!(
            header.compression(),
            0,
            "batch at {} lost its codec",
            header.base_offset
        );
    }
}

#[test]
fn a_damaged_segment_is_refused_and_served_as_it_is() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let mut log = open(&dir, compacted_config(), true);
    write_updates(&mut log, 300, 10, 0);
    log.flush(NOW).unwrap();
    let first_segment = common::files_with(&dir, "log")[0].clone();
    let mut bytes = std::fs::read(&first_segment).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&first_segment, &bytes).unwrap();
    let before = log.size_bytes();
    match clean_with(&mut log, CleanerConfig::default(), None, NOW) {
        Err(LogError::CorruptFile { path, reason }) => {
            assert!(path.ends_with("00000000000000000000.log"), "{path}");
            assert!(reason.contains("CRC") || reason.contains("crc"), "{reason}");
        }
        other => panic!("expected a corrupt segment, got {other:?}"),
    }
    assert!(leftover_cleaner_files(&dir).is_empty());
    assert_eq!(log.size_bytes(), before);
}

#[test]
fn a_log_truncated_while_it_is_cleaned_keeps_its_segments() {
    let root = tempfile::tempdir().unwrap();
    let dir = partition_dir(root.path());
    let mut log = open(&dir, compacted_config(), true);
    write_updates(&mut log, 500, 10, 0);
    let to_clean = log
        .to_clean(None, log.log_end_offset(), NOW)
        .unwrap()
        .unwrap();
    let plan = log.plan_cleaning(to_clean);
    log.truncate_to(400).unwrap();
    assert_ne!(log.layout_generation(), plan.generation);
    let before = records_of(&log);
    // The cleaner reads the truncated file without the lock: it either fails on it (and
    // its caller, seeing the generation moved, does not call the log uncleanable) or
    // gives up at the swap.
    let outcome = Cleaner::new(CleanerConfig::default()).clean(
        &plan,
        NOW,
        |group| log.replace_cleaned(group, &no_phase_hook),
        &no_phase_hook,
    );
    assert!(outcome.is_err() || outcome.is_ok_and(|o| !o.completed));
    assert_eq!(records_of(&log), before);
    assert!(leftover_cleaner_files(&dir).is_empty());
}
