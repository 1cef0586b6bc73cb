//! The memory one cleaner thread takes: writes a log of 100-byte records over a number
//! of distinct keys, then cleans it with the default settings (a 128 MiB key map, 512 KiB
//! I/O buffers) and prints the process's peak RSS during the cleaning beside the budget.
//!
//! `cargo run --release -p strom-log --example cleaner_memory -- [GiB] [keys] [dir]`
//! (default 2 GiB over 5,000,000 keys, in a temporary directory).

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::time::Instant;

use common::{clean_once, keyed_batch, roll, KeyedRecord, NOW};
use kafka_protocol::records::Compression;
use strom_log::cleaner::{no_phase_hook, CleanerConfig};
use strom_log::{FileCache, LogConfig, PartitionLog};

const PER_BATCH: usize = 200;

fn config() -> LogConfig {
    LogConfig {
        cleanup_policy: "compact".to_string(),
        ..LogConfig::default()
    }
}

/// A batch of `PER_BATCH` 100-byte records (10-byte keys, 88-byte values) from record
/// `first`, over `keys` keys.
fn batch(first: usize, keys: usize) -> Vec<u8> {
    let records: Vec<KeyedRecord> = (first..first + PER_BATCH)
        .map(|i| {
            (
                Some(format!("k{:09}", i % keys)),
                Some(format!("{i:0>88}").into_bytes()),
            )
        })
        .collect();
    keyed_batch(&records, Compression::None, None, NOW)
}

/// `VmHWM` and `VmRSS` of this process, in MiB.
fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map_or(0, |kb| kb / 1024)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let gib: f64 = args.first().map_or(2.0, |a| a.parse().expect("GiB"));
    let keys: usize = args.get(1).map_or(5_000_000, |a| a.parse().expect("keys"));
    let temp = tempfile::tempdir_in(args.get(2).map_or(std::env::temp_dir(), Into::into))
        .expect("a temporary directory");
    let dir = temp.path().join("memory-0");
    let files = FileCache::new(64);
    let mut log = PartitionLog::open(&dir, config(), &files, true, NOW).unwrap();
    let target = (gib * (1u64 << 30) as f64) as u64;
    let started = Instant::now();
    let mut first = 0;
    while log.size_bytes() < target {
        log.append(&batch(first, keys), NOW).unwrap();
        first += PER_BATCH;
    }
    let later = roll(&mut log);
    println!(
        "wrote {:.2} GiB, {first} records over {keys} keys in {:.1} s",
        log.size_bytes() as f64 / (1u64 << 30) as f64,
        started.elapsed().as_secs_f64()
    );
    reset_peak(&dir);
    let (_, before) = memory();
    let cleaner_config = CleanerConfig::default();
    let started = Instant::now();
    let outcome = clean_once(&mut log, cleaner_config, None, later, &no_phase_hook).unwrap();
    let (peak, _) = memory();
    let stats = outcome.stats;
    println!(
        "cleaned in {:.1} s: {} keys mapped ({} MiB map), {} of {} records kept, end offset {} of {first}",
        started.elapsed().as_secs_f64(),
        stats.map_keys,
        stats.map_size_bytes >> 20,
        stats.records_kept,
        stats.records_read,
        outcome.end_offset,
    );
    println!(
        "RSS before cleaning {before} MiB, peak while cleaning {peak} MiB: {} MiB over it; budget {} MiB key map + {} KiB I/O buffers",
        peak.saturating_sub(before),
        cleaner_config.dedupe_buffer_bytes >> 20,
        cleaner_config.io_buffer_bytes >> 10
    );
}

/// Resets the peak RSS (`VmHWM`) so that it measures the cleaning alone.
fn reset_peak(dir: &Path) {
    if std::fs::write("/proc/self/clear_refs", "5").is_err() {
        eprintln!(
            "cannot reset VmHWM ({}): the peak includes the writing",
            dir.display()
        );
    }
}
