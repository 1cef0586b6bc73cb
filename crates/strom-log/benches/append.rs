//! The append path: batch validation (header, counts, CRC32C), producer-state check,
//! offset assignment and the write into the active segment, with batches of 100-byte
//! records as a producer sends them.
//!
//! `cargo bench -p strom-log --bench append -- --warm-up-time 1 --measurement-time 3`
//!
//! Groups:
//! * `append` — wall-clock time per append; throughput is bytes per second.
//! * `append_cpu` — the same appends timed by the appending thread's CPU clock
//!   (`CLOCK_THREAD_CPUTIME_ID`, user + system), so its throughput is bytes per CPU-second
//!   of one core and does not depend on what else the machine runs. The page-cache
//!   writeback that the kernel does later in its own threads is not included.
//! * `append_flush` — `flush.messages=1` (fsync after every append) against never.
//! * `append_recompress` — uncompressed 16 KiB batches appended to topics whose
//!   `compression.type` is `producer` (kept as sent) or a codec (recompressed on
//!   append, as Kafka's LogValidator does), by the thread's CPU clock.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::BatchSpec;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use strom_log::{FileCache, LogConfig, PartitionLog};

const RECORD_VALUE: usize = 100;
const NOW: i64 = 1_000_000;

/// A producer's next batch: the same records, stamped with a newer timestamp each time
/// (as a real producer's are, so the time index grows as it does in production).
struct Producer {
    batch: Vec<u8>,
    timestamp: i64,
}

impl Producer {
    /// Batches of 100-byte records of about `bytes` bytes.
    fn new(bytes: usize) -> Self {
        let per_record = BatchSpec::new(2, RECORD_VALUE).encode().len()
            - BatchSpec::new(1, RECORD_VALUE).encode().len();
        let batch = BatchSpec::new(bytes / per_record, RECORD_VALUE).encode();
        Self {
            batch,
            timestamp: NOW,
        }
    }

    fn len(&self) -> u64 {
        self.batch.len() as u64
    }

    /// Restamps the batch (base and max timestamp) and recomputes its CRC.
    fn next(&mut self) -> &[u8] {
        self.timestamp += 1;
        let delta = i64::from_be_bytes(self.batch[35..43].try_into().unwrap())
            - i64::from_be_bytes(self.batch[27..35].try_into().unwrap());
        self.batch[27..35].copy_from_slice(&self.timestamp.to_be_bytes());
        self.batch[35..43].copy_from_slice(&(self.timestamp + delta).to_be_bytes());
        let crc = crc32c::crc32c(&self.batch[21..]);
        self.batch[17..21].copy_from_slice(&crc.to_be_bytes());
        &self.batch
    }
}

/// A log whose disk use stays bounded however long criterion runs: segments roll at
/// 256 MiB and retention keeps about 1 GiB.
fn bench_log(dir: &std::path::Path, flush_messages: i64) -> PartitionLog {
    bench_log_with(
        dir,
        LogConfig {
            flush_messages,
            ..LogConfig::default()
        },
    )
}

/// [`bench_log`] with other topic settings.
fn bench_log_with(dir: &std::path::Path, config: LogConfig) -> PartitionLog {
    let config = LogConfig {
        segment_bytes: 256 << 20,
        retention_bytes: 1 << 30,
        max_message_bytes: 2 << 20,
        ..config
    };
    PartitionLog::open(dir, config, &FileCache::new(64), true, NOW).expect("open")
}

/// CPU time of the calling thread (user + system).
fn thread_cpu_time() -> Duration {
    #[repr(C)]
    struct Timespec {
        tv_sec: i64,
        tv_nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut ts = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec (two 64-bit fields on Linux x86_64 and
    // aarch64) into the valid, exclusively borrowed `ts`.
    let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Which clock an append is timed by.
#[derive(Clone, Copy)]
enum Clock {
    Wall,
    ThreadCpu,
}

/// Appends `iters` batches and returns the time spent in `append` only: restamping the
/// batch (the producer's work) and retention (the broker's background work) are left out.
fn timed_appends(
    log: &mut PartitionLog,
    producer: &mut Producer,
    iters: u64,
    clock: Clock,
) -> Duration {
    let mut spent = Duration::ZERO;
    for _ in 0..iters {
        let batch = producer.next();
        let info = match clock {
            Clock::Wall => {
                let start = Instant::now();
                let info = log.append(batch, NOW).expect("append");
                spent += start.elapsed();
                info
            }
            Clock::ThreadCpu => {
                let start = thread_cpu_time();
                let info = log.append(batch, NOW).expect("append");
                spent += thread_cpu_time() - start;
                info
            }
        };
        std::hint::black_box(info);
        if log.segment_count() > 5 {
            log.apply_retention(NOW).expect("retention");
        }
    }
    spent
}

fn append_by(c: &mut Criterion, group_name: &str, clock: Clock) {
    let mut group = c.benchmark_group(group_name);
    for (name, size) in [("16KiB", 16 << 10), ("1MiB", 1 << 20)] {
        let mut producer = Producer::new(size);
        let root = tempfile::tempdir().unwrap();
        let mut log = bench_log(&root.path().join("bench-0"), i64::MAX);
        group.throughput(Throughput::Bytes(producer.len()));
        group.bench_function(BenchmarkId::new("batch", name), |b| {
            b.iter_custom(|iters| timed_appends(&mut log, &mut producer, iters, clock))
        });
    }
    group.finish();
}

fn append(c: &mut Criterion) {
    append_by(c, "append", Clock::Wall);
}

fn append_cpu(c: &mut Criterion) {
    append_by(c, "append_cpu", Clock::ThreadCpu);
}

/// The cost of `flush.messages=1` (fsync after every append) against never fsyncing
/// (Kafka's default: leave it to the page cache and replication).
fn append_flush(c: &mut Criterion) {
    let mut group = c.benchmark_group("append_flush");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let mut producer = Producer::new(16 << 10);
    group.throughput(Throughput::Bytes(producer.len()));
    for (name, flush_messages) in [("never", i64::MAX), ("every_append", 1)] {
        let root = tempfile::tempdir().unwrap();
        let mut log = bench_log(&root.path().join("bench-0"), flush_messages);
        group.bench_function(BenchmarkId::new("16KiB", name), |b| {
            b.iter_custom(|iters| timed_appends(&mut log, &mut producer, iters, Clock::Wall))
        });
    }
    group.finish();
}

/// What recompression to the topic's codec costs per byte appended.
fn append_recompress(c: &mut Criterion) {
    let mut group = c.benchmark_group("append_recompress");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let mut producer = Producer::new(16 << 10);
    group.throughput(Throughput::Bytes(producer.len()));
    for codec in ["producer", "lz4", "snappy", "zstd", "gzip"] {
        let root = tempfile::tempdir().unwrap();
        let config = LogConfig {
            compression_type: codec.to_string(),
            ..LogConfig::default()
        };
        let mut log = bench_log_with(&root.path().join("bench-0"), config);
        group.bench_function(BenchmarkId::new("16KiB", codec), |b| {
            b.iter_custom(|iters| timed_appends(&mut log, &mut producer, iters, Clock::ThreadCpu))
        });
    }
    group.finish();
}

criterion_group!(benches, append, append_cpu, append_flush, append_recompress);
criterion_main!(benches);
