//! Throughput over time in 100 ms buckets, for the reports' time series: fine enough that
//! a run of under a second (most of `strom bench`'s) still draws a curve.

use std::time::Instant;

use serde::Serialize;

/// Width of one bucket.
const BUCKET_MS: u128 = 100;
const BUCKET_S: f64 = BUCKET_MS as f64 / 1000.0;

/// Records and bytes completed per bucket since `start`.
#[derive(Debug, Clone)]
pub struct ThroughputSeries {
    start: Instant,
    buckets: Vec<(u64, u64)>,
}

/// One bucket of a run.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct SeriesPoint {
    /// Seconds since the start of the run, at the end of the bucket.
    pub t_s: f64,
    pub records_per_sec: f64,
    pub mib_per_sec: f64,
}

impl ThroughputSeries {
    pub fn new(start: Instant) -> Self {
        Self {
            start,
            buckets: Vec::new(),
        }
    }

    pub fn record(&mut self, at: Instant, records: u64, bytes: u64) {
        let bucket = (at.saturating_duration_since(self.start).as_millis() / BUCKET_MS) as usize;
        if self.buckets.len() <= bucket {
            self.buckets.resize(bucket + 1, (0, 0));
        }
        self.buckets[bucket].0 += records;
        self.buckets[bucket].1 += bytes;
    }

    /// Merges another series that shares this one's start (per-thread consumers).
    pub fn merge(&mut self, other: &ThroughputSeries) {
        let offset = (other
            .start
            .saturating_duration_since(self.start)
            .as_millis()
            / BUCKET_MS) as usize;
        for (i, &(records, bytes)) in other.buckets.iter().enumerate() {
            let at = i + offset;
            if self.buckets.len() <= at {
                self.buckets.resize(at + 1, (0, 0));
            }
            self.buckets[at].0 += records;
            self.buckets[at].1 += bytes;
        }
    }

    /// Points, the last (partial) bucket scaled by its real length up to `end`.
    pub fn points(&self, end: Instant) -> Vec<SeriesPoint> {
        let total = end.saturating_duration_since(self.start).as_secs_f64();
        self.buckets
            .iter()
            .enumerate()
            .map(|(i, &(records, bytes))| {
                let bucket_start = i as f64 * BUCKET_S;
                let bucket_end = (bucket_start + BUCKET_S).min(total.max(bucket_start + 1e-3));
                let length = (bucket_end - bucket_start).max(1e-3);
                SeriesPoint {
                    t_s: bucket_end,
                    records_per_sec: records as f64 / length,
                    mib_per_sec: bytes as f64 / length / (1024.0 * 1024.0),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn buckets_by_100_ms_and_scales_the_last_one() {
        let start = Instant::now();
        let mut s = ThroughputSeries::new(start);
        s.record(start + Duration::from_millis(10), 10, 1000);
        s.record(start + Duration::from_millis(110), 5, 500);
        let points = s.points(start + Duration::from_millis(150));
        assert_eq!(points.len(), 2);
        assert!((points[0].records_per_sec - 100.0).abs() < 1e-9);
        assert!((points[1].records_per_sec - 100.0).abs() < 1e-9);
        assert!((points[1].t_s - 0.15).abs() < 1e-9);
    }
}
