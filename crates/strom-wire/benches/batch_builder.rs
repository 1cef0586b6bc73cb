//! A producer's cost per record: appending 100-byte records (no key, no headers, as the
//! perf tools send them) to a batch of `batch.size` 16384 and sealing it (header and
//! CRC32C, no compression). Throughput is records per second.
//!
//! `cargo bench -p strom-wire --bench batch_builder -- --warm-up-time 1 --measurement-time 3`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use strom_wire::{BatchBuilder, Codec, ProducerFields};

const BATCH_SIZE: usize = 16_384;
const VALUE: [u8; 100] = [b'A'; 100];

/// Fills one batch as the native producer does: append while the next record fits.
fn fill_batch(buffer: Vec<u8>, timestamp: i64) -> (Vec<u8>, i32) {
    let mut builder = BatchBuilder::new(buffer, timestamp);
    while builder.fits(None, Some(VALUE.len()), BATCH_SIZE) {
        builder.append(timestamp, None, Some(&VALUE), &[]);
    }
    let count = builder.count();
    let bytes = builder
        .finish(Codec::None, -1, ProducerFields::NONE)
        .expect("no compression");
    (bytes, count)
}

fn append(c: &mut Criterion) {
    let (_, per_batch) = fill_batch(Vec::with_capacity(BATCH_SIZE), 0);
    let mut group = c.benchmark_group("batch_builder");
    group.throughput(Throughput::Elements(per_batch as u64));
    group.bench_function("append_100_byte_records_and_seal", |b| {
        let mut buffer = Vec::with_capacity(BATCH_SIZE);
        b.iter(|| {
            let (bytes, _) = fill_batch(std::mem::take(&mut buffer), 1_700_000_000_000);
            buffer = bytes;
        });
    });
    group.finish();
}

criterion_group!(benches, append);
criterion_main!(benches);
