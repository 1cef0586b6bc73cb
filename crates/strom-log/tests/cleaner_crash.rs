//! A process killed with SIGKILL at each step of a cleaning — while the cleaned segment
//! is copied, once its swap is committed, once the old segments are deleted, once it is
//! in place — restarts into a log that has, for every key, its latest value at its own
//! offset, byte for byte, and only records the log held before; no cleaner file is left.
//! A kill after a swap's commit restarts into the cleaned segment, not the old ones.
//!
//! The test runs itself as the cleaner (a child process of this test binary), which
//! stops at the step it is told and waits there to be killed.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{clean_once, keyed_batch, open, records_of, roll, KeyedRecord, ReadRecord, NOW};
use kafka_protocol::records::Compression;
use strom_log::cleaner::{CleanerConfig, CleanerPhase};
use strom_log::{FileCache, LogConfig, PartitionLog};

const TEST: &str = "a_kill_9_at_any_step_of_a_cleaning_loses_no_latest_value";
/// Set in the child: the partition directory it cleans.
const DIR: &str = "STROM_CLEANER_CRASH_DIR";
/// Set in the child: the step it stops at.
const PHASE: &str = "STROM_CLEANER_CRASH_PHASE";
/// Written by the child when it reached its step.
const REACHED: &str = "reached";

const PHASES: [CleanerPhase; 4] = [
    CleanerPhase::Copying,
    CleanerPhase::SwapBegun,
    CleanerPhase::OldSegmentsDeleted,
    CleanerPhase::Swapped,
];

fn config() -> LogConfig {
    LogConfig {
        cleanup_policy: "compact".to_string(),
        segment_bytes: 16 << 10,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

/// 300 keys written three times each, then a roll, so all of it is cleanable.
fn write_log(dir: &Path) {
    let mut log = open(dir, config(), true);
    for round in 0..3 {
        let records: Vec<KeyedRecord> = (0..300)
            .map(|k| {
                let value = format!("key-{k}-round-{round}-{}", "v".repeat(k % 40));
                (Some(format!("key-{k}")), Some(value.into_bytes()))
            })
            .collect();
        for chunk in records.chunks(4) {
            log.append(&keyed_batch(chunk, Compression::None, None, NOW), NOW)
                .unwrap();
        }
    }
    let later = roll(&mut log);
    log.close(later).unwrap();
}

/// The child: cleans the log in `dir`, stopping for good at `phase`.
fn clean_until(dir: &Path, phase: &str) -> ! {
    let mut log = PartitionLog::open(dir, config(), &FileCache::new(64), true, NOW).expect("open");
    let stop = |reached: CleanerPhase| {
        if format!("{reached:?}") == phase {
            std::fs::write(dir.parent().unwrap().join(REACHED), phase).unwrap();
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    };
    let config = CleanerConfig {
        io_buffer_bytes: 512,
        ..CleanerConfig::default()
    };
    clean_once(&mut log, config, None, NOW, &stop).unwrap();
    panic!("the cleaning ended without reaching {phase}");
}

fn latest_by_key(records: &[ReadRecord]) -> HashMap<Vec<u8>, ReadRecord> {
    records
        .iter()
        .map(|r| (r.2.clone().unwrap(), r.clone()))
        .collect()
}

#[test]
fn a_kill_9_at_any_step_of_a_cleaning_loses_no_latest_value() {
    if let (Some(dir), Ok(phase)) = (std::env::var_os(DIR), std::env::var(PHASE)) {
        clean_until(Path::new(&dir), &phase);
    }
    for phase in PHASES {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("events-0");
        write_log(&dir);
        let before = records_of(&open(&dir, config(), true));
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", TEST, "--test-threads=1"])
            .env(DIR, &dir)
            .env(PHASE, format!("{phase:?}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the cleaner process");
        let deadline = Instant::now() + Duration::from_secs(60);
        while !root.path().join(REACHED).exists() {
            assert!(
                Instant::now() < deadline,
                "the cleaner never reached {phase:?}"
            );
            if let Some(status) = child.try_wait().unwrap() {
                panic!("the cleaner exited ({status}) before {phase:?}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().expect("SIGKILL");
        child.wait().unwrap();

        let log = open(&dir, config(), false);
        let after = records_of(&log);
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".cleaned") || n.contains(".swap"))
            .collect();
        assert!(leftovers.is_empty(), "{phase:?}: left {leftovers:?}");
        assert!(
            latest_by_key(&after) == latest_by_key(&before),
            "{phase:?}: a key lost its latest value"
        );
        let held: HashMap<i64, &ReadRecord> = before.iter().map(|r| (r.0, r)).collect();
        let foreign = after.iter().find(|r| held.get(&r.0) != Some(r));
        assert!(
            foreign.is_none(),
            "{phase:?}: offset {:?} holds a record that was not there",
            foreign.map(|r| r.0)
        );
        assert!(after.windows(2).all(|w| w[0].0 < w[1].0));
        if phase != CleanerPhase::Copying {
            assert!(
                after.len() < before.len(),
                "{phase:?}: the committed swap was undone"
            );
        }
    }
}
