//! The log cleaner's throughput: one cleaning of a 64 MiB log of 100-byte records of
//! which 10 % are the latest of their key (640,000 records over 64,000 keys, in batches
//! of 100, uncompressed and lz4), in the page cache, by one cleaner thread with the
//! default 128 MiB key map. Throughput counts the dirty bytes cleaned.
//!
//! `cargo bench -p strom-log --bench clean -- --warm-up-time 1 --measurement-time 10`

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::Path;

use common::{clean_once, keyed_batch, roll, KeyedRecord};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use kafka_protocol::records::Compression;
use strom_log::cleaner::{no_phase_hook, CleanerConfig};
use strom_log::{FileCache, LogConfig, PartitionLog};

const NOW: i64 = 1_000_000;
const RECORDS: usize = 640_000;
const KEYS: usize = RECORDS / 10;
const PER_BATCH: usize = 100;

fn config() -> LogConfig {
    LogConfig {
        cleanup_policy: "compact".to_string(),
        segment_bytes: 16 << 20,
        ..LogConfig::default()
    }
}

/// Writes the log into `dir` and returns its bytes below the active segment.
fn write_log(dir: &Path, compression: Compression) -> u64 {
    let files = FileCache::new(64);
    let mut log = PartitionLog::open(dir, config(), &files, true, NOW).unwrap();
    for first in (0..RECORDS).step_by(PER_BATCH) {
        let records: Vec<KeyedRecord> = (first..first + PER_BATCH)
            .map(|i| {
                let key = format!("key-{:07}", i % KEYS);
                let value = format!("{i:0>88}").into_bytes();
                (Some(key), Some(value))
            })
            .collect();
        log.append(&keyed_batch(&records, compression, None, NOW), NOW)
            .unwrap();
    }
    let later = roll(&mut log);
    let dirty = log.size_bytes() - 1024;
    log.close(later).unwrap();
    dirty
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

fn clean(c: &mut Criterion) {
    let mut group = c.benchmark_group("clean");
    group.sample_size(10);
    for (name, compression) in [("none", Compression::None), ("lz4", Compression::Lz4)] {
        let pristine = tempfile::tempdir().unwrap();
        let source = pristine.path().join("bench-0");
        let dirty = write_log(&source, compression);
        group.throughput(Throughput::Bytes(dirty));
        group.bench_function(format!("10pct_live_keys_100B_{name}"), |b| {
            b.iter_batched(
                || {
                    let copy = tempfile::tempdir().unwrap();
                    let dir = copy.path().join("bench-0");
                    copy_dir(&source, &dir);
                    let files = FileCache::new(64);
                    let log = PartitionLog::open(&dir, config(), &files, true, NOW).unwrap();
                    (copy, log)
                },
                |(copy, mut log)| {
                    let outcome = clean_once(
                        &mut log,
                        CleanerConfig::default(),
                        None,
                        NOW,
                        &no_phase_hook,
                    )
                    .unwrap();
                    assert!(outcome.completed && outcome.stats.records_kept as usize == KEYS);
                    (copy, log)
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, clean);
criterion_main!(benches);
