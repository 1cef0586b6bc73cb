//! One monotonic time base for the send loop and the delivery callbacks.
//!
//! Kafka measures with `System.currentTimeMillis()`; differences of truncated millisecond
//! readings are what its latencies are. Reading nanoseconds since a process-wide anchor and
//! truncating both ends to milliseconds reproduces that, while the same readings give the
//! microsecond HdrHistogram latencies.

use std::sync::OnceLock;
use std::time::Instant;

/// The anchor as an `Instant` and as a raw CLOCK_MONOTONIC reading (the clock `Instant`
/// reads on Linux), taken together.
fn anchor() -> (Instant, u64) {
    static ANCHOR: OnceLock<(Instant, u64)> = OnceLock::new();
    *ANCHOR.get_or_init(|| (Instant::now(), monotonic_ns()))
}

/// CLOCK_MONOTONIC in nanoseconds. Read directly rather than through `Instant::elapsed`:
/// the send loops read the clock once per record, and `Instant`'s 128-bit duration
/// arithmetic cost as much as the clock read itself (a fifth of the native producer's
/// time per record, measured with perf).
#[inline]
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Nanoseconds since the anchor.
#[inline]
pub fn now_ns() -> u64 {
    monotonic_ns().saturating_sub(anchor().1)
}

/// Nanoseconds of `at` since the anchor (0 for instants before it).
pub fn ns_of(at: Instant) -> u64 {
    at.saturating_duration_since(anchor().0).as_nanos() as u64
}

/// The CLOCK_MONOTONIC time at which [`now_ns`] reads `ns`, for kernel timers.
pub fn monotonic_timespec(ns: u64) -> libc::timespec {
    let at = anchor().1 + ns;
    libc::timespec {
        tv_sec: (at / 1_000_000_000) as libc::time_t,
        tv_nsec: (at % 1_000_000_000) as libc::c_long,
    }
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
        let (before, at, after) = (now_ns(), ns_of(Instant::now()), now_ns());
        assert!(
            before <= at + 1_000 && at <= after + 1_000,
            "{before} {at} {after}"
        );
    }
}
