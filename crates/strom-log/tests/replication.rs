//! Replication primitives: follower appends of the leader's batches, the leader epoch
//! cache, truncation of a diverged log and reads bounded by the high watermark.

mod common;

use std::fs;
use std::path::Path;

use common::{batch, config, files_with, open, read_all, split, BatchSpec, NOW};
use strom_log::{AppendInfo, EpochEntry, LogConfig, LogError, PartitionLog};

fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        ..config()
    }
}

/// A log of 30 batches of 3 records (offsets 0..90) over several segments, led at epoch 1.
fn filled(dir: &Path) -> PartitionLog {
    let mut log = open(dir, small_segments(), true);
    log.become_leader(1).unwrap();
    for i in 0..30u8 {
        log.append(&BatchSpec::new(3, 80).with_fill(i).encode(), NOW)
            .unwrap();
    }
    assert!(log.segment_count() >= 4);
    log
}

/// Fetches from `leader` into `follower`, `max_bytes` at a time, until they end alike.
fn replicate(leader: &PartitionLog, follower: &mut PartitionLog, max_bytes: usize) {
    while follower.log_end_offset() < leader.log_end_offset() {
        let data = leader
            .read(follower.log_end_offset(), max_bytes, true)
            .unwrap();
        let info = follower.append_as_follower(&data.records, NOW).unwrap();
        assert!(info.record_count > 0);
    }
}

/// Every `.log` file of the partition concatenated: the log's bytes, however segmented.
fn log_bytes(dir: &Path) -> Vec<u8> {
    files_with(dir, "log")
        .iter()
        .flat_map(|p| fs::read(p).unwrap())
        .collect()
}

/// Base offsets of the segments, from their file names.
fn segment_bases(dir: &Path) -> Vec<i64> {
    files_with(dir, "log")
        .iter()
        .map(|p| p.file_stem().unwrap().to_str().unwrap().parse().unwrap())
        .collect()
}

fn epochs(log: &PartitionLog) -> Vec<(i32, i64)> {
    log.leader_epoch_entries()
        .iter()
        .map(
            |&EpochEntry {
                 epoch,
                 start_offset,
             }| (epoch, start_offset),
        )
        .collect()
}

/// Checks every offset in the log is found in the batch that holds it.
fn assert_every_offset_readable(log: &PartitionLog) {
    for offset in log.log_start_offset()..log.log_end_offset() {
        let data = log.read(offset, 1, true).unwrap();
        let batches = split(&data.records);
        assert_eq!(batches.len(), 1, "offset {offset}");
        let header = batches[0].0;
        assert!(header.base_offset <= offset && offset <= header.last_offset());
    }
}

/// Checks the log reopens, after a clean close and after a crash, with the same batches,
/// and then takes appends.
fn assert_reopens_alike(dir: &Path, mut log: PartitionLog) {
    let expected = read_all(&log);
    let end = log.log_end_offset();
    let start = log.log_start_offset();
    drop(log);
    let unclean = open(dir, small_segments(), false);
    assert_eq!(
        (unclean.log_start_offset(), unclean.log_end_offset()),
        (start, end)
    );
    assert_eq!(read_all(&unclean), expected);
    drop(unclean);
    log = open(dir, small_segments(), false);
    log.close(NOW).unwrap();
    drop(log);
    let mut clean = open(dir, small_segments(), true);
    assert_eq!(
        (clean.log_start_offset(), clean.log_end_offset()),
        (start, end)
    );
    assert_eq!(read_all(&clean), expected);
    assert_every_offset_readable(&clean);
    let info = clean.append(&batch(2, 10), NOW).unwrap();
    assert_eq!(info.base_offset, end);
    assert_eq!(clean.log_end_offset(), end + 2);
    assert_eq!(read_all(&clean).len(), expected.len() + 1);
}

#[test]
fn a_follower_copy_is_byte_identical_to_the_leader() {
    let root = tempfile::tempdir().unwrap();
    let (leader_dir, follower_dir) = (root.path().join("leader"), root.path().join("follower"));
    let mut leader = filled(&leader_dir);
    for seq in [0, 2] {
        leader
            .append(
                &BatchSpec::new(2, 30).with_producer(7, 0, seq).encode(),
                NOW,
            )
            .unwrap();
    }
    let mut follower = open(&follower_dir, small_segments(), true);
    replicate(&leader, &mut follower, 1000);
    assert_eq!(read_all(&follower), read_all(&leader));
    assert_eq!(log_bytes(&follower_dir), log_bytes(&leader_dir));
    assert!(follower.segment_count() > 1, "the follower rolls too");
    assert_every_offset_readable(&follower);
    assert_eq!(epochs(&follower), [(1, 0)]);
    assert_eq!(follower.leader_epoch(), 0, "a follower stamps nothing");
    let reopened = open(&follower_dir, small_segments(), false);
    assert_eq!(read_all(&reopened), read_all(&leader));
}

#[test]
fn follower_appends_report_offsets_and_take_batches_a_leader_would_refuse() {
    let root = tempfile::tempdir().unwrap();
    let mut leader = open(&root.path().join("leader"), config(), true);
    leader.append(&batch(4, 3000), NOW).unwrap();
    let data = leader.read(0, usize::MAX, true).unwrap();
    let tiny = LogConfig {
        max_message_bytes: 1000,
        ..config()
    };
    let mut follower = open(&root.path().join("follower"), tiny, true);
    let info = follower.append_as_follower(&data.records, NOW).unwrap();
    assert_eq!(
        info,
        AppendInfo {
            base_offset: 0,
            last_offset: 3,
            log_start_offset: 0,
            record_count: 4,
            duplicate: false,
            log_append_time_ms: -1,
        }
    );
    let empty = follower.append_as_follower(&[], NOW).unwrap();
    assert_eq!(
        (empty.base_offset, empty.last_offset, empty.record_count),
        (4, 3, 0)
    );
    assert_eq!(follower.log_end_offset(), 4);
}

#[test]
fn a_follower_refuses_batches_below_its_log_end_and_accepts_a_cleaned_gap() {
    let root = tempfile::tempdir().unwrap();
    let mut leader = open(&root.path().join("leader"), config(), true);
    for _ in 0..3 {
        leader.append(&batch(2, 10), NOW).unwrap();
    }
    let all = leader.read(0, usize::MAX, true).unwrap().records;
    let batches = split(&all);
    let mut follower = open(&root.path().join("follower"), config(), true);
    let assert_refused =
        |follower: &mut PartitionLog, records: &[u8], expected, found| match follower
            .append_as_follower(records, NOW)
        {
            Err(LogError::UnexpectedAppendOffset {
                expected: e,
                found: f,
            }) => assert_eq!((e, f), (expected, found)),
            other => panic!("expected UnexpectedAppendOffset, got {other:?}"),
        };
    let backwards = [batches[1].1.clone(), batches[0].1.clone()].concat();
    assert_refused(&mut follower, &backwards, 4, 0);
    assert_eq!(
        (follower.log_end_offset(), follower.size_bytes()),
        (0, 0),
        "nothing of a refused append is written"
    );
    follower.append_as_follower(&batches[0].1, NOW).unwrap();
    assert_refused(&mut follower, &batches[0].1, 2, 0);
    let mut corrupt = batches[1].1.clone();
    *corrupt.last_mut().unwrap() ^= 1;
    assert!(matches!(
        follower.append_as_follower(&corrupt, NOW),
        Err(LogError::InvalidBatch(_))
    ));
    let torn = &batches[1].1[..batches[1].1.len() - 1];
    assert!(matches!(
        follower.append_as_follower(torn, NOW),
        Err(LogError::InvalidBatch(_))
    ));
    assert_eq!(follower.log_end_offset(), 2);
    // A range the leader's cleaner emptied leaves a gap a follower takes as it is.
    follower.append_as_follower(&batches[2].1, NOW).unwrap();
    assert_eq!(follower.log_end_offset(), 6);
    let copied = follower.read(0, usize::MAX, true).unwrap().records;
    assert_eq!(
        copied,
        [batches[0].1.clone(), batches[2].1.clone()].concat()
    );
}

#[test]
fn truncating_inside_the_active_segment() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("p-0");
    let mut log = filled(&dir);
    let segments = log.segment_count();
    let active_base = *segment_bases(&dir).last().unwrap();
    let cut = active_base + 3;
    log.truncate_to(cut).unwrap();
    assert_eq!(log.log_end_offset(), cut);
    assert_eq!(log.segment_count(), segments);
    let active = dir.join(format!("{active_base:020}.log"));
    let kept: usize = read_all(&log)
        .iter()
        .filter(|(h, _)| h.base_offset >= active_base)
        .map(|(_, b)| b.len())
        .sum();
    assert_eq!(
        fs::metadata(&active).unwrap().len(),
        kept as u64,
        "the .log file shrank"
    );
    log.truncate_to(cut + 10).unwrap();
    assert_eq!(
        log.log_end_offset(),
        cut,
        "truncating past the end does nothing"
    );
    assert_every_offset_readable(&log);
    assert_reopens_alike(&dir, log);
}

#[test]
fn truncating_inside_a_batch_cuts_before_it() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("p-0");
    let mut log = filled(&dir);
    log.truncate_to(40).unwrap();
    assert_eq!(log.log_end_offset(), 39, "the batch 39..41 goes whole");
    assert_eq!(read_all(&log).last().unwrap().0.last_offset(), 38);
    assert_reopens_alike(&dir, log);
}

#[test]
fn truncating_at_a_segment_boundary_and_across_segments() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("p-0");
    let mut log = filled(&dir);
    let bases = segment_bases(&dir);
    let boundary = bases[bases.len() - 2];
    log.truncate_to(boundary).unwrap();
    assert_eq!(log.log_end_offset(), boundary);
    assert_eq!(
        segment_bases(&dir),
        bases[..bases.len() - 1],
        "the segment at the cut is empty, those above it gone"
    );
    assert_eq!(
        fs::metadata(dir.join(format!("{boundary:020}.log")))
            .unwrap()
            .len(),
        0
    );
    let cut = bases[1] + 6;
    log.truncate_to(cut).unwrap();
    assert_eq!(log.log_end_offset(), cut);
    assert_eq!(segment_bases(&dir), bases[..2]);
    assert_eq!(files_with(&dir, "index").len(), 2);
    assert_eq!(files_with(&dir, "timeindex").len(), 2);
    assert_eq!(log.size_bytes(), log_bytes(&dir).len() as u64);
    assert_every_offset_readable(&log);
    assert_reopens_alike(&dir, log);
}

#[test]
fn truncating_a_log_reopened_clean_before_its_indexes_are_loaded() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("p-0");
    let mut log = filled(&dir);
    let expected = read_all(&log);
    log.close(NOW).unwrap();
    drop(log);
    let bases = segment_bases(&dir);
    let mut log = open(&dir, small_segments(), true);
    let cut = bases[2] + 9;
    log.truncate_to(cut).unwrap();
    assert_eq!(log.log_end_offset(), cut);
    let kept: Vec<_> = expected
        .into_iter()
        .filter(|(h, _)| h.base_offset < cut)
        .collect();
    assert_eq!(read_all(&log), kept);
    assert_every_offset_readable(&log);
    assert_reopens_alike(&dir, log);
}

#[test]
fn truncating_below_the_log_start() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("p-0");
    let mut log = filled(&dir);
    log.delete_records_before(9, NOW).unwrap();
    log.truncate_to(6).unwrap();
    assert_eq!(
        (log.log_start_offset(), log.log_end_offset()),
        (6, 6),
        "the log start comes down to the new end"
    );
    assert_reopens_alike(&dir, log);

    let dir = root.path().join("p-1");
    let mut log = filled(&dir);
    let bases = segment_bases(&dir);
    log.delete_records_before(bases[2], NOW).unwrap();
    assert_eq!(
        segment_bases(&dir)[0],
        bases[2],
        "retention deleted segments"
    );
    log.truncate_to(bases[1]).unwrap();
    assert_eq!(
        (log.log_start_offset(), log.log_end_offset()),
        (bases[1], bases[1]),
        "below the first segment the log restarts at the offset"
    );
    assert_eq!(segment_bases(&dir), [bases[1]]);
    assert!(log.leader_epoch_entries().is_empty());
    assert_reopens_alike(&dir, log);
}

#[test]
fn the_epoch_cache_tracks_leader_and_follower_appends_and_survives_a_reopen() {
    let root = tempfile::tempdir().unwrap();
    let (leader_dir, follower_dir) = (root.path().join("leader"), root.path().join("follower"));
    let mut leader = open(&leader_dir, small_segments(), true);
    leader.become_leader(1).unwrap();
    assert_eq!(leader.leader_epoch(), 1);
    leader.append(&batch(3, 10), NOW).unwrap();
    leader.append(&batch(3, 10), NOW).unwrap();
    leader.become_leader(3).unwrap();
    leader.append(&batch(4, 10), NOW).unwrap();
    assert_eq!(epochs(&leader), [(1, 0), (3, 6)]);
    assert_eq!(leader.latest_epoch(), Some(3));
    assert_eq!(leader.end_offset_for_epoch(1), (1, 6));
    assert_eq!(leader.end_offset_for_epoch(2), (1, 6));
    assert_eq!(leader.end_offset_for_epoch(3), (3, 10));
    assert_eq!(leader.end_offset_for_epoch(4), (-1, -1));
    let stamped: Vec<i32> = read_all(&leader)
        .iter()
        .map(|(h, _)| h.partition_leader_epoch)
        .collect();
    assert_eq!(stamped, [1, 1, 3]);

    let mut follower = open(&follower_dir, small_segments(), true);
    assert_eq!(follower.latest_epoch(), None);
    assert_eq!(follower.end_offset_for_epoch(1), (-1, -1));
    replicate(&leader, &mut follower, usize::MAX);
    assert_eq!(epochs(&follower), epochs(&leader));
    assert_eq!(follower.end_offset_for_epoch(1), (1, 6));
    assert_eq!(
        fs::read_to_string(follower_dir.join("leader-epoch-checkpoint")).unwrap(),
        "0\n2\n1 0\n3 6\n"
    );

    drop(leader);
    let reopened = open(&leader_dir, small_segments(), false);
    assert_eq!(epochs(&reopened), [(1, 0), (3, 6)]);
    assert_eq!(reopened.leader_epoch(), 3, "stamps the newest cached epoch");

    follower.truncate_to(6).unwrap();
    assert_eq!(epochs(&follower), [(1, 0)], "epoch 3 started at the cut");
    follower.close(NOW).unwrap();
    drop(follower);
    let follower = open(&follower_dir, small_segments(), true);
    assert_eq!(epochs(&follower), [(1, 0)]);
    assert_eq!(follower.end_offset_for_epoch(1), (1, 6));
}

#[test]
fn an_epoch_assigned_without_records_goes_with_a_truncation_at_the_log_end() {
    let root = tempfile::tempdir().unwrap();
    let mut log = open(&root.path().join("p-0"), config(), true);
    log.become_leader(1).unwrap();
    log.append(&batch(2, 10), NOW).unwrap();
    log.become_leader(2).unwrap();
    assert_eq!(epochs(&log), [(1, 0), (2, 2)]);
    log.truncate_to(2).unwrap();
    assert_eq!(epochs(&log), [(1, 0)]);
    assert_eq!(log.log_end_offset(), 2);
}

#[test]
fn a_crash_between_the_epoch_cache_and_the_batches_leaves_no_entry_beyond_the_log() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("p-0");
    let mut log = open(&dir, config(), true);
    log.become_leader(1).unwrap();
    log.append(&batch(2, 10), NOW).unwrap();
    drop(log);
    // An epoch said to start beyond the log end (its records were lost) is dropped.
    fs::write(dir.join("leader-epoch-checkpoint"), "0\n2\n1 0\n4 3\n").unwrap();
    let log = open(&dir, config(), false);
    assert_eq!(epochs(&log), [(1, 0)], "no record of epoch 4 made it");
    assert_eq!(log.leader_epoch(), 1);
    assert_eq!(
        fs::read_to_string(dir.join("leader-epoch-checkpoint")).unwrap(),
        "0\n1\n1 0\n"
    );
    drop(log);
    // One that starts at the log end (a leader that appended nothing yet) is still true:
    // it stays, and reopening writes nothing.
    fs::write(dir.join("leader-epoch-checkpoint"), "0\n2\n1 0\n4 2\n").unwrap();
    let before = fs::metadata(dir.join("leader-epoch-checkpoint"))
        .unwrap()
        .modified()
        .unwrap();
    let log = open(&dir, config(), true);
    assert_eq!(epochs(&log), [(1, 0), (4, 2)]);
    assert_eq!(
        fs::metadata(dir.join("leader-epoch-checkpoint"))
            .unwrap()
            .modified()
            .unwrap(),
        before
    );
}

#[test]
fn truncation_rewinds_producer_state() {
    const PID: i64 = 99;
    let from_producer = |seq: i32| {
        BatchSpec::new(3, 60)
            .with_producer(PID, 0, seq)
            .with_fill(seq as u8)
            .encode()
    };
    let root = tempfile::tempdir().unwrap();
    let (leader_dir, follower_dir) = (root.path().join("leader"), root.path().join("follower"));
    let mut leader = open(&leader_dir, small_segments(), true);
    leader.become_leader(1).unwrap();
    let infos: Vec<AppendInfo> = (0..12)
        .map(|i| leader.append(&from_producer(3 * i), NOW).unwrap())
        .collect();
    let mut follower = open(&follower_dir, small_segments(), true);
    replicate(&leader, &mut follower, 700);
    assert!(!files_with(&follower_dir, "snapshot").is_empty());

    let cut = infos[4].base_offset;
    follower.truncate_to(cut).unwrap();
    for snapshot in files_with(&follower_dir, "snapshot") {
        let offset: i64 = snapshot
            .file_stem()
            .unwrap()
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            offset <= cut,
            "snapshot at {offset} above the new end {cut}"
        );
    }
    follower.become_leader(2).unwrap();
    let again = follower.append(&from_producer(12), NOW).unwrap();
    assert!(!again.duplicate, "its first append was truncated away");
    assert_eq!((again.base_offset, again.record_count), (cut, 3));
    let retry = follower.append(&from_producer(9), NOW).unwrap();
    assert!(retry.duplicate, "below the cut: still in the log");
    assert_eq!(retry.base_offset, infos[3].base_offset);
    drop(follower);
    let mut reopened = open(&follower_dir, small_segments(), false);
    reopened.become_leader(2).unwrap();
    let retry = reopened.append(&from_producer(12), NOW).unwrap();
    assert!(retry.duplicate);
    assert_eq!(retry.base_offset, cut);
}

#[test]
fn a_follower_behind_the_leaders_log_start_starts_over_there() {
    let root = tempfile::tempdir().unwrap();
    let (leader_dir, follower_dir) = (root.path().join("leader"), root.path().join("follower"));
    let mut leader = open(&leader_dir, small_segments(), true);
    leader.become_leader(1).unwrap();
    for i in 0..12u8 {
        leader
            .append(
                &BatchSpec::new(10, 20)
                    .with_fill(i)
                    .with_producer(5, 0, 10 * i as i32)
                    .encode(),
                NOW,
            )
            .unwrap();
    }
    leader.delete_records_before(100, NOW).unwrap();

    let mut follower = filled(&follower_dir);
    follower.become_leader(2).unwrap();
    follower.truncate_fully_and_start_at(100).unwrap();
    assert_eq!(
        (follower.log_start_offset(), follower.log_end_offset()),
        (100, 100)
    );
    assert_eq!(segment_bases(&follower_dir), [100]);
    assert!(files_with(&follower_dir, "snapshot").is_empty());
    assert!(follower.leader_epoch_entries().is_empty());
    assert_eq!(follower.size_bytes(), 0);
    replicate(&leader, &mut follower, usize::MAX);
    assert_eq!(read_all(&follower), read_all(&leader));
    assert_eq!(epochs(&follower), [(1, 100)]);
    assert_reopens_alike(&follower_dir, follower);
}

#[test]
fn reads_stop_below_the_upper_bound() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("p-0");
    let log = filled(&dir);
    let bases = segment_bases(&dir);
    let base_offsets = |data: &strom_log::FetchData| -> Vec<i64> {
        split(&data.records)
            .iter()
            .map(|(h, _)| h.base_offset)
            .collect()
    };
    let all = log.read_up_to(0, usize::MAX, false, 9).unwrap();
    assert_eq!(base_offsets(&all), [0, 3, 6]);
    assert_eq!(
        base_offsets(&log.read_up_to(4, usize::MAX, false, 9).unwrap()),
        [3, 6]
    );
    assert!(log
        .read_up_to(9, usize::MAX, true, 9)
        .unwrap()
        .records
        .is_empty());
    assert!(log
        .read_up_to(12, usize::MAX, true, 9)
        .unwrap()
        .records
        .is_empty());
    assert_eq!(
        base_offsets(&log.read_up_to(0, usize::MAX, false, 4).unwrap()),
        [0],
        "a bound inside a batch leaves that batch out"
    );
    assert_eq!(base_offsets(&log.read_up_to(3, 1, true, 6).unwrap()), [3]);
    assert!(
        log.read_up_to(3, 1, true, 3).unwrap().records.is_empty(),
        "min_one_batch does not cross the bound"
    );
    assert_eq!(
        base_offsets(
            &log.read_up_to(bases[1], usize::MAX, false, bases[1] + 3)
                .unwrap()
        ),
        [bases[1]]
    );
    for upper in (0..=90).step_by(3) {
        for offset in 0..upper {
            for (max_bytes, min_one) in [(1, true), (700, false), (usize::MAX, false)] {
                let data = log.read_up_to(offset, max_bytes, min_one, upper).unwrap();
                let found = base_offsets(&data);
                assert!(
                    found.iter().all(|&b| b < upper),
                    "{offset} {upper}: {found:?}"
                );
                if min_one {
                    assert_eq!(found.len(), 1, "{offset} {upper}");
                }
            }
        }
    }
    assert_eq!(
        log.read(0, usize::MAX, true).unwrap().records,
        log.read_up_to(0, usize::MAX, true, 90).unwrap().records
    );
    assert!(matches!(
        log.read_up_to(91, usize::MAX, true, 9),
        Err(LogError::OffsetOutOfRange { .. })
    ));
}
