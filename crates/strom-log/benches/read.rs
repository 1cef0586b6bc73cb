//! The read path: fetching 1 MiB of whole batches from random offsets of a 256 MiB log
//! (in the page cache, as for consumers that keep up).
//!
//! `cargo bench -p strom-log --bench read -- --warm-up-time 1 --measurement-time 3`

#[path = "../tests/common/mod.rs"]
mod common;

use common::BatchSpec;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use strom_log::{FileCache, LogConfig, PartitionLog};

const NOW: i64 = 1_000_000;
const FETCH_BYTES: usize = 1 << 20;

fn read(c: &mut Criterion) {
    let root = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 64 << 20,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(
        &root.path().join("bench-0"),
        config,
        &FileCache::new(64),
        true,
        NOW,
    )
    .unwrap();
    let batch = BatchSpec::new(150, 100).encode(); // ~16 KiB of 100-byte records
    while log.size_bytes() < 256 << 20 {
        log.append(&batch, NOW).unwrap();
    }
    let end = log.log_end_offset();

    let mut group = c.benchmark_group("read");
    group.throughput(Throughput::Bytes(FETCH_BYTES as u64));
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    group.bench_function("1MiB_random_offset", |b| {
        b.iter(|| {
            // xorshift: a random offset with no dependency on a random-number crate.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let offset = (state % end as u64) as i64;
            let data = log.read(offset, FETCH_BYTES, true).unwrap();
            std::hint::black_box(data.records.len())
        })
    });
    group.finish();
}

criterion_group!(benches, read);
criterion_main!(benches);
