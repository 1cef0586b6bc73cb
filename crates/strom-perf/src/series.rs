//! Throughput over time in one-second buckets, for the reports' time series.

use std::time::Instant;

use serde::Serialize;

/// Records and bytes completed per second since `start`.
#[derive(Debug, Clone)]
pub struct ThroughputSeries {
    start: Instant,
    buckets: Vec<(u64, u64)>,
}

/// One second of a run.
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
        let second = at.saturating_duration_since(self.start).as_secs() as usize;
        if self.buckets.len() <= second {
            self.buckets.resize(second + 1, (0, 0));
        }
        self.buckets[second].0 += records;
        self.buckets[second].1 += bytes;
    }

    /// Merges another series that shares this one's start (per-thread consumers).
    pub fn merge(&mut self, other: &ThroughputSeries) {
        let offset = other.start.saturating_duration_since(self.start).as_secs() as usize;
        for (i, &(records, bytes)) in other.buckets.iter().enumerate() {
            let at = i + offset;
            if self.buckets.len() <= at {
                self.buckets.resize(at + 1, (0, 0));
            }
            self.buckets[at].0 += records;
            self.buckets[at].1 += bytes;
        }
    }

    /// Points, the last (partial) second scaled by its real length `end`.
    pub fn points(&self, end: Instant) -> Vec<SeriesPoint> {
        let total = end.saturating_duration_since(self.start).as_secs_f64();
        self.buckets
            .iter()
            .enumerate()
            .map(|(i, &(records, bytes))| {
                let bucket_end = ((i + 1) as f64).min(total.max(i as f64 + 1e-3));
                let length = (bucket_end - i as f64).max(1e-3);
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
    fn buckets_by_second_and_scales_the_last_one() {
        let start = Instant::now();
        let mut s = ThroughputSeries::new(start);
        s.record(start + Duration::from_millis(100), 10, 1000);
        s.record(start + Duration::from_millis(1100), 5, 500);
        let points = s.points(start + Duration::from_millis(1500));
        assert_eq!(points.len(), 2);
        assert_eq!(points[0].records_per_sec, 10.0);
        assert!((points[1].records_per_sec - 10.0).abs() < 1e-9);
        assert!((points[1].t_s - 1.5).abs() < 1e-9);
    }
}
