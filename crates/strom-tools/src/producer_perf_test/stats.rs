//! Kafka's `ProducerPerformance.Stats`, figure for figure.
//!
//! Latencies are whole milliseconds of callback latency; at most ~500k of them are kept
//! (`sampling = n / min(n, 500000)`, a sample when the success counter is a multiple of
//! it), percentiles are floor nearest-rank on the sorted samples, and MB/sec is MiB of
//! value bytes. Windows close when a completion arrives at least `reporting_interval` ms
//! after the window opened, so they print from the completion path as in Kafka.

use super::output;

/// Kafka's cap on kept latency samples.
const MAX_SAMPLES: u64 = 500_000;

/// A closed reporting window, as `printWindow` computes it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub count: u64,
    pub elapsed_ms: u64,
    pub bytes: u64,
    pub total_latency_ms: u64,
    pub max_latency_ms: u64,
}

/// The final figures, as `printTotal` computes them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Totals {
    pub count: u64,
    pub elapsed_ms: u64,
    pub bytes: u64,
    pub total_latency_ms: u64,
    pub max_latency_ms: u64,
    /// 50th, 95th, 99th and 99.9th percentile in ms.
    pub percentiles: [u32; 4],
}

#[derive(Debug, Clone)]
pub struct Stats {
    start_ms: u64,
    window_start_ms: u64,
    iteration: u64,
    sampling: u64,
    latencies: Vec<u32>,
    count: u64,
    bytes: u64,
    total_latency_ms: u64,
    max_latency_ms: u64,
    window_count: u64,
    window_bytes: u64,
    window_total_latency_ms: u64,
    window_max_latency_ms: u64,
    reporting_interval_ms: u64,
}

impl Stats {
    /// `num_records > 0`; `now_ms` is the tool's millisecond clock at the start of the run.
    pub fn new(num_records: u64, reporting_interval_ms: u64, now_ms: u64) -> Self {
        let sampling = sampling(num_records);
        Self {
            start_ms: now_ms,
            window_start_ms: now_ms,
            iteration: 0,
            sampling,
            latencies: Vec::with_capacity((num_records / sampling + 1) as usize),
            count: 0,
            bytes: 0,
            total_latency_ms: 0,
            max_latency_ms: 0,
            window_count: 0,
            window_bytes: 0,
            window_total_latency_ms: 0,
            window_max_latency_ms: 0,
            reporting_interval_ms,
        }
    }

    /// Records one successful send; returns the window to print if this completion closed one.
    pub fn record(&mut self, latency_ms: u32, bytes: u64, now_ms: u64) -> Option<Window> {
        self.count += 1;
        self.bytes += bytes;
        self.total_latency_ms += u64::from(latency_ms);
        self.max_latency_ms = self.max_latency_ms.max(u64::from(latency_ms));
        self.window_count += 1;
        self.window_bytes += bytes;
        self.window_total_latency_ms += u64::from(latency_ms);
        self.window_max_latency_ms = self.window_max_latency_ms.max(u64::from(latency_ms));
        if self.iteration.is_multiple_of(self.sampling) {
            self.latencies.push(latency_ms);
        }
        self.iteration += 1;
        if now_ms.saturating_sub(self.window_start_ms) >= self.reporting_interval_ms {
            let window = self.window(now_ms);
            self.new_window(now_ms);
            return Some(window);
        }
        None
    }

    /// Records `n` successful sends that completed together with the same figures, as `n`
    /// calls of [`Stats::record`] would: only the first can close a window, since the
    /// rest complete at the instant the next one opened (the tool refuses a reporting
    /// interval of 0).
    pub fn record_n(&mut self, latency_ms: u32, bytes: u64, n: u64, now_ms: u64) -> Option<Window> {
        debug_assert!(self.reporting_interval_ms > 0);
        if n == 0 {
            return None;
        }
        let closed = self.record(latency_ms, bytes, now_ms);
        let rest = n - 1;
        if rest > 0 {
            let latency = u64::from(latency_ms);
            self.count += rest;
            self.bytes += bytes * rest;
            self.total_latency_ms += latency * rest;
            self.max_latency_ms = self.max_latency_ms.max(latency);
            self.window_count += rest;
            self.window_bytes += bytes * rest;
            self.window_total_latency_ms += latency * rest;
            self.window_max_latency_ms = self.window_max_latency_ms.max(latency);
            let end = self.iteration + rest;
            let mut sampled = self.iteration.next_multiple_of(self.sampling);
            while sampled < end {
                self.latencies.push(latency_ms);
                sampled += self.sampling;
            }
            self.iteration = end;
        }
        closed
    }

    fn window(&self, now_ms: u64) -> Window {
        Window {
            count: self.window_count,
            elapsed_ms: now_ms - self.window_start_ms,
            bytes: self.window_bytes,
            total_latency_ms: self.window_total_latency_ms,
            max_latency_ms: self.window_max_latency_ms,
        }
    }

    fn new_window(&mut self, now_ms: u64) {
        self.window_start_ms = now_ms;
        self.window_count = 0;
        self.window_max_latency_ms = 0;
        self.window_total_latency_ms = 0;
        self.window_bytes = 0;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn start_ms(&self) -> u64 {
        self.start_ms
    }

    /// The final figures at `now_ms` (after the producer was flushed or closed).
    pub fn totals(&mut self, now_ms: u64) -> Totals {
        Totals {
            count: self.count,
            elapsed_ms: now_ms.saturating_sub(self.start_ms),
            bytes: self.bytes,
            total_latency_ms: self.total_latency_ms,
            max_latency_ms: self.max_latency_ms,
            percentiles: percentiles(&mut self.latencies, [0.5, 0.95, 0.99, 0.999]),
        }
    }
}

/// Kafka's `numRecords / Math.min(numRecords, 500000)`.
pub fn sampling(num_records: u64) -> u64 {
    (num_records / num_records.clamp(1, MAX_SAMPLES)).max(1)
}

/// Kafka's floor nearest-rank: sort, then `latencies[(int)(p * size)]`; 0 when empty.
pub fn percentiles<const N: usize>(latencies: &mut [u32], ps: [f64; N]) -> [u32; N] {
    latencies.sort_unstable();
    ps.map(|p| {
        let index = (p * latencies.len() as f64) as usize;
        latencies.get(index).copied().unwrap_or(0)
    })
}

impl Window {
    pub fn line(&self) -> String {
        output::window_line(self)
    }
}

impl Totals {
    pub fn records_per_sec(&self) -> f64 {
        1000.0 * self.count as f64 / self.elapsed_ms as f64
    }

    pub fn mib_per_sec(&self) -> f64 {
        1000.0 * self.bytes as f64 / self.elapsed_ms as f64 / (1024.0 * 1024.0)
    }

    pub fn avg_latency_ms(&self) -> f64 {
        self.total_latency_ms as f64 / self.count as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_keeps_at_most_500k() {
        assert_eq!(sampling(1), 1);
        assert_eq!(sampling(500_000), 1);
        assert_eq!(sampling(999_999), 1);
        assert_eq!(sampling(1_000_000), 2);
        assert_eq!(sampling(50_000_000), 100);
        let mut stats = Stats::new(1_000_001, 5000, 0);
        (0..1_000_001).for_each(|i| {
            stats.record((i % 7) as u32, 10, 0);
        });
        assert_eq!(stats.latencies.len(), 500_001);
        assert!(stats.latencies.len() <= (1_000_001 / 2 + 1) as usize);
    }

    #[test]
    fn record_n_equals_n_records() {
        for interval in [1, 3000, 5000] {
            let mut one_by_one = Stats::new(1_700_000, interval, 0);
            let mut grouped = Stats::new(1_700_000, interval, 0);
            let mut windows = (Vec::new(), Vec::new());
            for (i, n) in [1u64, 7, 3, 250_000, 2, 1, 9, 1_000_000, 5]
                .into_iter()
                .enumerate()
            {
                let (latency, now) = ((i * 3 % 11) as u32, i as u64 * 2000);
                for _ in 0..n {
                    windows.0.extend(one_by_one.record(latency, 100, now));
                }
                windows.1.extend(grouped.record_n(latency, 100, n, now));
            }
            assert_eq!(windows.0, windows.1);
            assert_eq!(one_by_one.latencies, grouped.latencies);
            assert_eq!(one_by_one.totals(20_000), grouped.totals(20_000));
        }
    }

    #[test]
    fn floor_nearest_rank() {
        let mut l: Vec<u32> = (1..=100).rev().collect();
        assert_eq!(
            percentiles(&mut l, [0.5, 0.95, 0.99, 0.999]),
            [51, 96, 100, 100]
        );
        let mut one = vec![7];
        assert_eq!(percentiles(&mut one, [0.5, 0.999]), [7, 7]);
        let mut none: Vec<u32> = vec![];
        assert_eq!(percentiles(&mut none, [0.5]), [0]);
    }

    #[test]
    fn windows_close_on_the_completion_after_the_interval() {
        let mut s = Stats::new(10, 5000, 1000);
        assert_eq!(s.record(3, 100, 2000), None);
        assert_eq!(s.record(5, 100, 5999), None);
        let w = s.record(1, 100, 6000).expect("window closes at >= 5000 ms");
        assert_eq!(
            w,
            Window {
                count: 3,
                elapsed_ms: 5000,
                bytes: 300,
                total_latency_ms: 9,
                max_latency_ms: 5
            }
        );
        assert_eq!(s.record(2, 100, 6001), None);
        let t = s.totals(11_000);
        assert_eq!(t.count, 4);
        assert_eq!(t.elapsed_ms, 10_000);
        assert_eq!(t.max_latency_ms, 5);
        assert_eq!(t.percentiles, [3, 5, 5, 5]);
    }

    #[test]
    fn mib_of_value_bytes() {
        let t = Totals {
            count: 1_048_576,
            elapsed_ms: 1000,
            bytes: 100 * 1_048_576,
            total_latency_ms: 0,
            max_latency_ms: 0,
            percentiles: [0; 4],
        };
        assert_eq!(t.mib_per_sec(), 100.0);
        assert_eq!(t.records_per_sec(), 1_048_576.0);
    }
}
