//! The figures the seed reports published, which `strom bench` sets strom's beside.
//! Source: docs/seeds.md (reports 000, 002 and 004, and the LinkedIn benchmark 002 cites).

/// Seed 002, default producer settings: 759k rec/s, 72 MB/s, p50 3 ms, p99 71 ms.
pub const DEFAULT_PRODUCER: ProducerFigures = ProducerFigures {
    records_per_sec: Some(759_000.0),
    mb_per_sec: Some(72.0),
    avg_ms: None,
    p50_ms: Some(3),
    p95_ms: None,
    p99_ms: Some(71),
    p999_ms: None,
    max_ms: None,
};

/// Seed 002, tuned settings: 1.41M rec/s, 134 MB/s, p50 7 ms, p99 316 ms.
pub const TUNED_PRODUCER: ProducerFigures = ProducerFigures {
    records_per_sec: Some(1_410_000.0),
    mb_per_sec: Some(134.0),
    avg_ms: None,
    p50_ms: Some(7),
    p95_ms: None,
    p99_ms: Some(316),
    p999_ms: None,
    max_ms: None,
};

/// LinkedIn's 2014 benchmark that seed 002 cites: one producer, 100-byte records, 6
/// partitions of replication factor 3 on three machines, 3x synchronous replication
/// (acks=all): 421,823 records/s, 40.2 MB/s.
pub const LINKEDIN_SYNC_3X: ProducerFigures = ProducerFigures {
    records_per_sec: Some(421_823.0),
    mb_per_sec: Some(40.2),
    avg_ms: None,
    p50_ms: None,
    p95_ms: None,
    p99_ms: None,
    p999_ms: None,
    max_ms: None,
};

/// The same with 3x asynchronous replication (acks=1): 786,980 records/s, 75.1 MB/s.
pub const LINKEDIN_ASYNC_3X: ProducerFigures = ProducerFigures {
    records_per_sec: Some(786_980.0),
    mb_per_sec: Some(75.1),
    ..LINKEDIN_SYNC_3X
};

/// Seed 000, throttled at 100k rec/s with 10-byte records.
pub const THROTTLED_PRODUCER: ProducerFigures = ProducerFigures {
    records_per_sec: Some(99_938.0),
    mb_per_sec: None,
    avg_ms: Some(1.98),
    p50_ms: Some(1),
    p95_ms: Some(5),
    p99_ms: Some(13),
    p999_ms: Some(64),
    max_ms: Some(169),
};

/// Seed 000 consumer runs (5M 10-byte records): fetch size → msg/s (and MB/s where given).
pub const CONSUMER: [(u64, f64, Option<f64>); 3] = [
    (10_000, 798_000.0, None),
    (100_000, 1_670_000.0, None),
    (1_000_000, 3_240_000.0, Some(28.0)),
];

/// Seed 002's tuned producer properties.
pub const TUNED_PROPERTIES: [(&str, &str); 7] = [
    ("compression.type", "lz4"),
    ("linger.ms", "5"),
    ("batch.size", "100000"),
    ("acks", "all"),
    ("max.in.flight.requests.per.connection", "1"),
    ("retries", "5"),
    ("buffer.memory", "67108864"),
];

/// Published producer figures; `None` where the report gives none.
#[derive(Debug, Clone, Copy)]
pub struct ProducerFigures {
    pub records_per_sec: Option<f64>,
    pub mb_per_sec: Option<f64>,
    pub avg_ms: Option<f64>,
    pub p50_ms: Option<u32>,
    pub p95_ms: Option<u32>,
    pub p99_ms: Option<u32>,
    pub p999_ms: Option<u32>,
    pub max_ms: Option<u32>,
}

/// Consumers in the group in seed 004's runs: 6 is more than the 3 partitions on purpose.
pub const CONSUMER_COUNTS: [usize; 3] = [1, 3, 6];

/// Seed 004 (10M records per 3-partition topic, no-op handler): record size in bytes →
/// records/s with 1, 3 and 6 consumers.
pub const CONSUMER_SCALING: [(usize, [f64; 3]); 4] = [
    (10, [150_000.0, 200_000.0, 210_000.0]),
    (100, [115_000.0, 195_000.0, 195_000.0]),
    (1000, [110_000.0, 140_000.0, 140_000.0]),
    (5000, [60_000.0, 70_000.0, 70_000.0]),
];
