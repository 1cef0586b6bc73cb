//! One monotonic time base for the send loop and the delivery callbacks.
//!
//! Kafka measures with `System.currentTimeMillis()`; differences of truncated millisecond
//! readings are what its latencies are. Reading nanoseconds since a process-wide anchor and
//! truncating both ends to milliseconds reproduces that, while the same readings give the
//! microsecond HdrHistogram latencies.

use std::sync::OnceLock;
use std::time::Instant;

fn anchor() -> Instant {
    static ANCHOR: OnceLock<Instant> = OnceLock::new();
    *ANCHOR.get_or_init(Instant::now)
}

/// Nanoseconds since the anchor.
pub fn now_ns() -> u64 {
    anchor().elapsed().as_nanos() as u64
}

/// Nanoseconds of `at` since the anchor (0 for instants before it).
pub fn ns_of(at: Instant) -> u64 {
    at.saturating_duration_since(anchor()).as_nanos() as u64
}

/// The millisecond clock reading for a nanosecond reading, as `currentTimeMillis` would give.
pub fn ms(ns: u64) -> u64 {
    ns / 1_000_000
}

/// Kafka's `(int)(now - sendStartMs)`.
pub fn latency_ms(sent_ns: u64, now_ns: u64) -> u32 {
    (ms(now_ns).saturating_sub(ms(sent_ns))).min(u64::from(u32::MAX)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_is_a_difference_of_truncated_milliseconds() {
        assert_eq!(latency_ms(1_999_999, 2_000_000), 1);
        assert_eq!(latency_ms(1_000_000, 1_999_999), 0);
        assert_eq!(latency_ms(5, 3), 0);
        assert!(now_ns() <= now_ns());
    }
}
