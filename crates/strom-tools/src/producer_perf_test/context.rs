//! The librdkafka producer context: turns delivery reports into statistics.
//!
//! The delivery opaque is the record index (no allocation per record). The send time of
//! each in-flight record sits in a ring indexed by `index & mask`, sized above
//! librdkafka's `queue.buffering.max.messages`, so a slot is never reused before its
//! record's report has been handled.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::Mutex;
use rdkafka::client::ClientContext;
use rdkafka::producer::{DeliveryResult, ProducerContext};

use super::recorder::Recorder;
use super::stats::Stats;
use strom_client::clock;

/// When latency is measured from for the HdrHistogram.
#[derive(Debug, Clone, Copy)]
pub enum Schedule {
    /// Unthrottled: from the actual send time.
    AsSent,
    /// Throttled: from the intended send time `start + index * interval`, so a stalled
    /// send loop shows up as latency (coordinated omission corrected).
    Intended { interval_ns: f64 },
}

pub struct PerfContext {
    pub recorder: Mutex<Recorder>,
    send_times: Box<[AtomicU64]>,
    mask: usize,
    schedule: Schedule,
    /// When the measured run began (ns since the clock anchor), set by [`Self::start`].
    start_ns: AtomicU64,
    /// The value bytes of fixed-size records; `None` reads the length from each report.
    fixed_value_len: Option<u64>,
    /// The last librdkafka statistics JSON, for `--print-metrics`.
    pub last_stats: Mutex<Option<Vec<u8>>>,
}

impl PerfContext {
    pub fn new(
        recorder: Recorder,
        max_in_flight: usize,
        schedule: Schedule,
        fixed_value_len: Option<u64>,
    ) -> Self {
        let capacity = (max_in_flight + 1).next_power_of_two();
        Self {
            recorder: Mutex::new(recorder),
            send_times: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
            mask: capacity - 1,
            schedule,
            start_ns: AtomicU64::new(0),
            fixed_value_len,
            last_stats: Mutex::new(None),
        }
    }

    /// Notes the send time of record `index`, just before it is handed to librdkafka.
    #[inline]
    pub fn mark_sent(&self, index: usize, now_ns: u64) {
        self.send_times[index & self.mask].store(now_ns, Ordering::Relaxed);
    }

    /// The intended send time of record `index` in ns since the clock anchor.
    #[inline]
    pub fn intended_ns(&self, index: u64) -> Option<u64> {
        match self.schedule {
            Schedule::AsSent => None,
            Schedule::Intended { interval_ns } => {
                Some(self.start_ns.load(Ordering::Relaxed) + (index as f64 * interval_ns) as u64)
            }
        }
    }

    /// Starts the measured run now, after the producer exists, as Kafka starts its `Stats`
    /// after constructing its producer (client start-up is not part of the figures).
    pub fn start(&self, stats: Stats, start: Instant) {
        self.start_ns.store(clock::ns_of(start), Ordering::Relaxed);
        self.recorder.lock().start(stats, start);
    }
}

impl ClientContext for PerfContext {
    fn stats_raw(&self, statistics: &[u8]) {
        *self.last_stats.lock() = Some(statistics.to_vec());
    }
}

impl PerfContext {
    /// Accounts one delivery report of record `index` received at `now` into `recorder`
    /// (locked once per batch of reports by the caller): Kafka's statistics on success, a
    /// failure count otherwise.
    #[inline]
    pub fn on_delivery(
        &self,
        recorder: &mut Recorder,
        index: usize,
        result: Result<usize, &dyn std::fmt::Display>,
        now: Instant,
    ) {
        let now_ns = clock::ns_of(now);
        let sent_ns = self.send_times[index & self.mask].load(Ordering::Relaxed);
        match result {
            Ok(value_len) => {
                let from_ns = self
                    .intended_ns(index as u64)
                    .map_or(sent_ns, |i| i.min(sent_ns));
                let hdr_us = now_ns.saturating_sub(from_ns) / 1000;
                let bytes = self.fixed_value_len.unwrap_or(value_len as u64);
                recorder.on_success(
                    index as u64,
                    1,
                    clock::latency_ms(sent_ns, now_ns),
                    hdr_us,
                    bytes,
                    now_ns,
                );
                recorder.completed(now, 1, bytes);
            }
            Err(error) => recorder.on_failure(error),
        }
    }
}

/// Delivery reports served through rdkafka's `poll` (only during the final flush; the
/// send loop serves them through [`super::delivery_queue::DeliveryQueue`]).
impl ProducerContext for PerfContext {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, index: usize) {
        let now = Instant::now();
        let mut recorder = self.recorder.lock();
        match result {
            Ok(message) => self.on_delivery(&mut recorder, index, Ok(message.payload_len()), now),
            Err((error, _)) => self.on_delivery(&mut recorder, index, Err(error), now),
        }
        recorder.add_progress(1);
    }
}
