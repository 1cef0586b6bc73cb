//! Kafka's producer output lines, byte for byte (3.x formats, Java `%f` rounding).

use super::stats::{Totals, Window};
use crate::java_format::{f, fixed};

/// `"%d records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency.%n"`
pub fn window_line(w: &Window) -> String {
    let elapsed = w.elapsed_ms as f64;
    format!(
        "{} records sent, {} records/sec ({} MB/sec), {} ms avg latency, {} ms max latency.",
        w.count,
        fixed(1000.0 * w.count as f64 / elapsed, 1),
        fixed(1000.0 * w.bytes as f64 / elapsed / (1024.0 * 1024.0), 2),
        fixed(w.total_latency_ms as f64 / w.count as f64, 1),
        fixed(w.max_latency_ms as f64, 1),
    )
}

/// The 3.x final line; `steady_state` adds KIP-1052's `" steady state"` after the count.
pub fn total_line(t: &Totals, steady_state: bool) -> String {
    let [p50, p95, p99, p999] = t.percentiles;
    format!(
        "{}{} records sent, {} records/sec ({} MB/sec), {} ms avg latency, {} ms max latency, {p50} ms 50th, {p95} ms 95th, {p99} ms 99th, {p999} ms 99.9th.",
        t.count,
        if steady_state { " steady state" } else { "" },
        f(t.records_per_sec()),
        fixed(t.mib_per_sec(), 2),
        fixed(t.avg_latency_ms(), 2),
        fixed(t.max_latency_ms as f64, 2),
    )
}

/// KIP-1052's announcement at the start of a run with warmup.
pub fn warmup_line(warmup_records: u64) -> String {
    format!(
        "Warmup first {warmup_records} records. Steady state results will print after the complete test summary."
    )
}

/// Printed before the first steady-state window line.
pub const STEADY_STATE_LINE: &str = "In steady state.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_line_matches_kafka_example() {
        // PR #13215's example: 30000 records in 150020 ms, 0.19 MB/sec at 1000-byte values.
        let t = Totals {
            count: 30_000,
            elapsed_ms: 150_020,
            bytes: 30_000 * 1000,
            total_latency_ms: 37_800,
            max_latency_ms: 205,
            percentiles: [1, 2, 2, 14],
        };
        assert_eq!(
            total_line(&t, false),
            "30000 records sent, 199.973337 records/sec (0.19 MB/sec), 1.26 ms avg latency, 205.00 ms max latency, 1 ms 50th, 2 ms 95th, 2 ms 99th, 14 ms 99.9th."
        );
        assert!(total_line(&t, true).starts_with("30000 steady state records sent, "));
    }

    #[test]
    fn window_line_format() {
        let w = Window {
            count: 499_690,
            elapsed_ms: 5001,
            bytes: 4_996_900,
            total_latency_ms: 989_386,
            max_latency_ms: 169,
        };
        assert_eq!(
            window_line(&w),
            "499690 records sent, 99918.0 records/sec (0.95 MB/sec), 2.0 ms avg latency, 169.0 ms max latency."
        );
    }
}
