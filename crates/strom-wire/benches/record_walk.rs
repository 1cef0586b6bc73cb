//! A consumer's cost per record: walking an uncompressed 16 KiB batch of
//! 10-byte records (seed 000's consumer runs), each record's length, fields and varints
//! checked, as the native consumer counts them. Throughput is records per second.
//!
//! `cargo bench -p strom-wire --bench record_walk -- --warm-up-time 1 --measurement-time 3`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use strom_wire::records::walk_records;
use strom_wire::{BatchBuilder, Codec, ProducerFields, BATCH_HEADER_LEN};

const BATCH_SIZE: usize = 16_384;
const VALUE: [u8; 10] = [b'A'; 10];

/// One sealed batch of 10-byte records, as the native producer fills it.
fn batch() -> (Vec<u8>, i32) {
    let mut builder = BatchBuilder::new(Vec::with_capacity(BATCH_SIZE), 1_700_000_000_000);
    while builder.fits(None, Some(VALUE.len()), BATCH_SIZE) {
        builder.append(1_700_000_000_000, None, Some(&VALUE), &[]);
    }
    let count = builder.count();
    let bytes = builder
        .finish(Codec::None, -1, ProducerFields::NONE)
        .expect("no compression");
    (bytes, count)
}

fn walk(c: &mut Criterion) {
    let (bytes, count) = batch();
    let records = &bytes[BATCH_HEADER_LEN..];
    let mut group = c.benchmark_group("record_walk");
    group.throughput(Throughput::Elements(count as u64));
    group.bench_function("walk_10_byte_records", |b| {
        b.iter(|| {
            let mut value_bytes = 0;
            walk_records(std::hint::black_box(records), count, |record| {
                value_bytes += record.value.map_or(0, <[u8]>::len);
                Ok(())
            })
            .expect("a valid batch");
            value_bytes
        });
    });
    group.finish();
}

criterion_group!(benches, walk);
criterion_main!(benches);
