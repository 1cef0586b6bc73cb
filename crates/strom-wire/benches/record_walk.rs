//! Walking a batch's records, each record's length, fields and varints checked:
//!
//! * `walk_10_byte_records` — a consumer's cost per record: an uncompressed 16 KiB batch
//!   of 10-byte records (seed 000's consumer runs), as the native consumer counts them;
//! * `lz4_100_byte_records` — a leader's validation of seed 002's tuned batches (lz4,
//!   `batch.size=100000`, 100-byte values of random letters), walked through a window as
//!   it decompresses (`walk_records_in`) and, for comparison, decompressed whole first.
//!
//! Throughput is records per second.
//!
//! `cargo bench -p strom-wire --bench record_walk -- --warm-up-time 1 --measurement-time 3`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use strom_wire::codec::{decompress_into, DECOMPRESSED_LIMIT_MAX};
use strom_wire::records::{walk_records, walk_records_in};
use strom_wire::{BatchBuilder, Codec, ProducerFields, BATCH_HEADER_LEN};

const VALUE: [u8; 10] = [b'A'; 10];

/// One sealed batch of `batch_size` bytes or less, its values the successive `size`-byte
/// slices of `values`, as the native producer fills it.
fn batch(batch_size: usize, values: &[u8], size: usize, codec: Codec) -> (Vec<u8>, i32) {
    let mut builder = BatchBuilder::new(Vec::with_capacity(batch_size), 1_700_000_000_000);
    let mut values = values.chunks_exact(size).cycle();
    while builder.fits(None, Some(size), batch_size) {
        let value = values.next().expect("cycled");
        builder.append(1_700_000_000_000, None, Some(value), &[]);
    }
    let count = builder.count();
    let bytes = builder
        .finish(codec, -1, ProducerFields::NONE)
        .expect("compressed");
    (bytes, count)
}

fn walk(c: &mut Criterion) {
    let (bytes, count) = batch(16_384, &VALUE, VALUE.len(), Codec::None);
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

fn walk_lz4(c: &mut Criterion) {
    // Random capital letters, as Kafka's tool fills values: lz4 finds almost nothing.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let letters: Vec<u8> = (0..200_000)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            b'A' + (seed % 26) as u8
        })
        .collect();
    let (bytes, count) = batch(100_000, &letters, 100, Codec::Lz4);
    let section = &bytes[BATCH_HEADER_LEN..];
    let mut group = c.benchmark_group("record_walk");
    group.throughput(Throughput::Elements(count as u64));
    group.bench_function("lz4_100_byte_records_streamed", |b| {
        b.iter(|| {
            walk_records_in(Codec::Lz4, section, count, DECOMPRESSED_LIMIT_MAX, |_| {
                Ok(())
            })
            .expect("a valid batch")
        });
    });
    let mut whole = Vec::new();
    group.bench_function("lz4_100_byte_records_whole", |b| {
        b.iter(|| {
            decompress_into(Codec::Lz4, section, DECOMPRESSED_LIMIT_MAX, &mut whole)
                .expect("decompresses");
            walk_records(&whole, count, |_| Ok(())).expect("a valid batch")
        });
    });
    group.finish();
}

criterion_group!(benches, walk, walk_lz4);
criterion_main!(benches);
