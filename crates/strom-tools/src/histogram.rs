//! Latency beyond Kafka's figures: an HdrHistogram in microseconds.
//!
//! Kafka's tools keep whole milliseconds and at most 500k samples, which hides everything
//! below a millisecond and everything in the far tail. This histogram keeps every latency
//! at 3 significant digits from 1 µs to an hour, so p99.99 and the max are exact enough
//! to compare brokers.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Highest trackable latency: one hour in µs; anything above is clamped to it.
const MAX_TRACKABLE_US: u64 = 3_600_000_000;

/// A microsecond latency histogram.
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    inner: Histogram<u64>,
}

/// The figures strom prints after Kafka's lines and writes to reports, in µs.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct LatencySummary {
    pub count: u64,
    pub avg_us: f64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub p9999_us: u64,
    pub max_us: u64,
}

/// One point of the percentile curve: `percentile` in [0, 100], latency in µs.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct PercentilePoint {
    pub percentile: f64,
    pub latency_us: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    pub fn new() -> Self {
        let inner = Histogram::new_with_bounds(1, MAX_TRACKABLE_US, 3)
            .expect("static histogram bounds are valid");
        Self { inner }
    }

    /// Records one latency; values outside the trackable range are clamped, never dropped.
    pub fn record(&mut self, latency_us: u64) {
        self.inner
            .saturating_record(latency_us.clamp(1, MAX_TRACKABLE_US));
    }

    /// Records `n` equal latencies at once.
    pub fn record_n(&mut self, latency_us: u64, n: u64) {
        self.inner
            .saturating_record_n(latency_us.clamp(1, MAX_TRACKABLE_US), n);
    }

    /// A recorder of this histogram that records runs of equal latencies in one step.
    pub fn runs(&mut self) -> LatencyRuns<'_> {
        LatencyRuns {
            histogram: self,
            latency_us: 0,
            n: 0,
        }
    }

    /// Adds another histogram, so `--threads` consumers and windows can be merged.
    pub fn add(&mut self, other: &LatencyHistogram) {
        self.inner
            .add(&other.inner)
            .expect("histograms share the same bounds");
    }

    pub fn len(&self) -> u64 {
        self.inner.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    pub fn summary(&self) -> LatencySummary {
        if self.inner.is_empty() {
            return LatencySummary::default();
        }
        let q = |p: f64| self.inner.value_at_quantile(p);
        LatencySummary {
            count: self.inner.len(),
            avg_us: self.inner.mean(),
            p50_us: q(0.50),
            p90_us: q(0.90),
            p99_us: q(0.99),
            p999_us: q(0.999),
            p9999_us: q(0.9999),
            max_us: self.inner.max(),
        }
    }

    /// The percentile curve on HdrHistogram's customary log scale: 0, 50, 75, 87.5, … up to
    /// the max, so a plot shows the tail at the same resolution as the median.
    pub fn percentile_curve(&self) -> Vec<PercentilePoint> {
        if self.inner.is_empty() {
            return Vec::new();
        }
        let mut points: Vec<PercentilePoint> = (0..=20)
            .map(|k| 100.0 * (1.0 - 0.5f64.powi(k)))
            .map(|percentile| PercentilePoint {
                percentile,
                latency_us: self.inner.value_at_quantile(percentile / 100.0),
            })
            .collect();
        points.push(PercentilePoint {
            percentile: 100.0,
            latency_us: self.inner.max(),
        });
        points
    }
}

/// Records consecutive equal latencies with one `record_n`, the rest when dropped. A
/// consumer's records come in batches whose records mostly share one timestamp, so
/// their latencies come in runs; recording each one by one cost a fifth of the native
/// consumer's time with 10-byte records.
pub struct LatencyRuns<'a> {
    histogram: &'a mut LatencyHistogram,
    latency_us: u64,
    n: u64,
}

impl LatencyRuns<'_> {
    #[inline]
    pub fn record(&mut self, latency_us: u64) {
        if latency_us != self.latency_us {
            self.flush();
            self.latency_us = latency_us;
        }
        self.n += 1;
    }

    fn flush(&mut self) {
        if self.n > 0 {
            self.histogram.record_n(self.latency_us, self.n);
            self.n = 0;
        }
    }
}

impl Drop for LatencyRuns<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}

impl LatencySummary {
    /// The extra line strom prints after Kafka's output, in milliseconds with µs precision.
    pub fn line(&self, label: &str) -> String {
        let ms = |us: u64| us as f64 / 1000.0;
        format!(
            "{label} (HdrHistogram, {} samples): avg {:.3} ms, p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms, p99.9 {:.3} ms, p99.99 {:.3} ms, max {:.3} ms.",
            self.count,
            self.avg_us / 1000.0,
            ms(self.p50_us),
            ms(self.p90_us),
            ms(self.p99_us),
            ms(self.p999_us),
            ms(self.p9999_us),
            ms(self.max_us),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_record_what_one_by_one_would() {
        let latencies = [5, 5, 5, 7, 7, 5, 1_000, 1_000, 3];
        let mut one_by_one = LatencyHistogram::new();
        latencies.iter().for_each(|&l| one_by_one.record(l));
        let mut in_runs = LatencyHistogram::new();
        {
            let mut runs = in_runs.runs();
            latencies.iter().for_each(|&l| runs.record(l));
        }
        assert_eq!(in_runs.len(), latencies.len() as u64);
        assert_eq!(in_runs.summary(), one_by_one.summary());
        assert_eq!(in_runs.percentile_curve(), one_by_one.percentile_curve());
    }

    #[test]
    fn summary_of_a_uniform_ramp() {
        let mut h = LatencyHistogram::new();
        (1..=10_000).for_each(|us| h.record(us));
        let s = h.summary();
        assert_eq!(s.count, 10_000);
        assert!((s.avg_us - 5000.5).abs() < 5.0);
        assert!((4995..=5005).contains(&s.p50_us));
        assert!((9895..=9905).contains(&s.p99_us));
        assert!((9995..=10_015).contains(&s.max_us));
    }

    #[test]
    fn clamps_instead_of_dropping() {
        let mut h = LatencyHistogram::new();
        h.record(0);
        h.record(u64::MAX);
        assert_eq!(h.len(), 2);
    }

    #[test]
    fn curve_is_monotonic_and_ends_at_max() {
        let mut h = LatencyHistogram::new();
        (1..=1000).for_each(|us| h.record(us * 7));
        let curve = h.percentile_curve();
        assert!(curve.windows(2).all(|w| w[0].latency_us <= w[1].latency_us));
        assert_eq!(curve.last().unwrap().latency_us, h.summary().max_us);
    }

    #[test]
    fn empty_histogram_gives_zeros() {
        assert_eq!(LatencyHistogram::new().summary(), LatencySummary::default());
        assert!(LatencyHistogram::new().percentile_curve().is_empty());
    }
}
