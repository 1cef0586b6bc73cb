//! Everything a delivery report updates: Kafka's statistics (whole run and steady state),
//! the HdrHistogram, the time series and the failure count.
//!
//! Delivery reports run on the send loop's thread (inside `poll`), so the mutex around the
//! recorder is never contended; it exists because librdkafka contexts must be `Sync`.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::output;
use super::stats::Stats;
use crate::histogram::LatencyHistogram;
use crate::series::ThroughputSeries;
use strom_client::clock;

/// How many failed deliveries are printed before they are only counted.
const PRINTED_FAILURES: u64 = 20;

pub struct Recorder {
    pub stats: Stats,
    pub steady: Option<Stats>,
    steady_announced: bool,
    /// The first record index counted in steady state (0 without warmup).
    pub warmup: u64,
    pub histogram: LatencyHistogram,
    pub series: ThroughputSeries,
    pub failures: u64,
    progress: Arc<AtomicU64>,
    out: Box<dyn Write + Send>,
}

impl Recorder {
    pub fn new(
        stats: Stats,
        warmup: u64,
        start: Instant,
        progress: Arc<AtomicU64>,
        out: Box<dyn Write + Send>,
    ) -> Self {
        Self {
            stats,
            steady: None,
            steady_announced: false,
            warmup,
            histogram: LatencyHistogram::new(),
            series: ThroughputSeries::new(start),
            failures: 0,
            progress,
            out,
        }
    }

    /// Restarts the figures at the start of the measured run.
    pub fn start(&mut self, stats: Stats, start: Instant) {
        self.stats = stats;
        self.series = ThroughputSeries::new(start);
    }

    /// Successful deliveries of `n` consecutive records from `first_index` that share their
    /// figures (records sent together and acknowledged together), each of `bytes` bytes.
    pub fn on_success(
        &mut self,
        first_index: u64,
        n: u64,
        latency_ms: u32,
        hdr_latency_us: u64,
        bytes: u64,
        now_ns: u64,
    ) {
        self.count_success(first_index, n, latency_ms, bytes, now_ns);
        self.record_latency(first_index, n, hdr_latency_us);
    }

    /// Kafka's statistics of [`Recorder::on_success`], for records whose HdrHistogram
    /// latencies differ (throttled, each from its own intended send time) and go to
    /// [`Recorder::record_latency`].
    pub fn count_success(
        &mut self,
        first_index: u64,
        n: u64,
        latency_ms: u32,
        bytes: u64,
        now_ns: u64,
    ) {
        let now_ms = clock::ms(now_ns);
        let muted = self.steady.is_some();
        if let Some(window) = self.stats.record_n(latency_ms, bytes, n, now_ms) {
            if !muted {
                self.print(&window.line());
            }
        }
        let steady_n = self.steady_count(first_index, n);
        if steady_n > 0 {
            if let Some(steady) = self.steady.as_mut() {
                if let Some(window) = steady.record_n(latency_ms, bytes, steady_n, now_ms) {
                    let line = window.line();
                    if !self.steady_announced {
                        self.steady_announced = true;
                        self.print(output::STEADY_STATE_LINE);
                    }
                    self.print(&line);
                }
            }
        }
    }

    /// The HdrHistogram latency of `n` consecutive records from `first_index`; records of
    /// the warm-up are not counted.
    pub fn record_latency(&mut self, first_index: u64, n: u64, hdr_latency_us: u64) {
        let steady_n = self.steady_count(first_index, n);
        if steady_n > 0 {
            self.histogram.record_n(hdr_latency_us, steady_n);
        }
    }

    /// How many of the `n` records from `first_index` come after the warm-up.
    fn steady_count(&self, first_index: u64, n: u64) -> u64 {
        (first_index + n).saturating_sub(first_index.max(self.warmup))
    }

    /// Counts completed records and their bytes in the time series.
    pub fn completed(&mut self, at: Instant, records: u64, bytes: u64) {
        self.series.record(at, records, bytes);
    }

    /// Advances the progress bar by `records` reported deliveries.
    pub fn add_progress(&self, records: u64) {
        self.progress.fetch_add(records, Ordering::Relaxed);
    }

    /// One failed delivery: counted, not in the statistics, printed as Kafka prints the
    /// exception (up to a limit, so a dead cluster does not flood the terminal).
    pub fn on_failure(&mut self, error: &dyn std::fmt::Display) {
        self.failures += 1;
        if self.failures <= PRINTED_FAILURES {
            eprintln!("org.apache.kafka.common.KafkaException: delivery failed: {error}");
        } else if self.failures == PRINTED_FAILURES + 1 {
            eprintln!("(further delivery failures are counted, not printed)");
        }
    }

    /// Starts steady-state statistics at the first record after warmup.
    pub fn begin_steady_state(&mut self, records: u64, reporting_interval_ms: u64, now_ms: u64) {
        self.steady = Some(Stats::new(records, reporting_interval_ms, now_ms));
    }

    pub fn print(&mut self, line: &str) {
        let _ = writeln!(self.out, "{line}");
        let _ = self.out.flush();
    }
}
