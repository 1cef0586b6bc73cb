//! `log.cleaner.io.max.bytes.per.second`: the cleaner's reads and writes together stay
//! under a rate, so a cleaning cannot starve producers and consumers of the disk. The
//! throttle sleeps the cleaner thread whenever the bytes done since the last check run
//! ahead of the rate (as Kafka's `Throttler`), checking every 100 ms of work or every
//! 100 ms worth of bytes, whichever comes first.

use std::time::{Duration, Instant};

/// How often the rate is checked: short enough to hold the rate within a fraction of a
/// second, long enough that a check costs nothing beside the I/O.
const CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// A byte-rate limit for one cleaner thread.
#[derive(Debug)]
pub struct Throttler {
    bytes_per_second: f64,
    period_start: Instant,
    bytes_in_period: f64,
    /// Time spent asleep, for the cleaning summary.
    slept: Duration,
}

impl Throttler {
    /// A throttle at `bytes_per_second` (infinite or non-positive: none).
    pub fn new(bytes_per_second: f64) -> Self {
        Self {
            bytes_per_second,
            period_start: Instant::now(),
            bytes_in_period: 0.0,
            slept: Duration::ZERO,
        }
    }

    /// Counts `bytes` of I/O and sleeps if the rate is exceeded.
    pub fn maybe_throttle(&mut self, bytes: u64) {
        if !(self.bytes_per_second.is_finite() && self.bytes_per_second > 0.0) {
            return;
        }
        self.bytes_in_period += bytes as f64;
        let elapsed = self.period_start.elapsed().as_secs_f64();
        let period = CHECK_INTERVAL.as_secs_f64();
        if elapsed < period && self.bytes_in_period < period * self.bytes_per_second {
            return;
        }
        let due = self.bytes_in_period / self.bytes_per_second;
        if due > elapsed {
            let sleep = Duration::from_secs_f64(due - elapsed);
            std::thread::sleep(sleep);
            self.slept += sleep;
        }
        self.period_start = Instant::now();
        self.bytes_in_period = 0.0;
    }

    /// Time spent asleep since the throttle was made.
    pub fn slept(&self) -> Duration {
        self.slept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_holds_over_many_small_chunks() {
        let mut throttler = Throttler::new(10.0 * 1024.0 * 1024.0);
        let started = Instant::now();
        for _ in 0..40 {
            throttler.maybe_throttle(128 * 1024);
        }
        // 5 MiB at 10 MiB/s take half a second however fast the work itself is.
        assert!(
            started.elapsed() >= Duration::from_millis(450),
            "{:?}",
            started.elapsed()
        );
        assert!(throttler.slept() >= Duration::from_millis(400));
    }

    #[test]
    fn no_rate_never_sleeps() {
        let mut throttler = Throttler::new(f64::INFINITY);
        throttler.maybe_throttle(u64::MAX / 2);
        assert_eq!(throttler.slept(), Duration::ZERO);
    }
}
