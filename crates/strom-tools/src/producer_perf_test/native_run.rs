//! The send loop on strom's native client (`--client native`): the same records, the same
//! statistics and output lines as the librdkafka loop, with the native producer's
//! acknowledgements in place of librdkafka's delivery reports.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::args::ProducerArgs;
use super::output;
use super::payload::{Keys, Payloads};
use super::recorder::Recorder;
use super::run::ProducerResult;
use super::stats::Stats;
use crate::progress::Progress;
use strom_client::client::NativeClient;
use strom_client::clock;
use strom_client::config::ProducerConfig;
use strom_client::producer::{
    record_count, DeliveryHandler, NativeProducer, RecordRun, RecordTag, RecordValues, Schedule,
};

/// One clock reading is the send time of up to this many records appended in a row, each
/// within a microsecond or two of the reading (appending is a copy into the open batch,
/// 20–40 ns a record); the clock is read again after any record that sealed a batch or
/// waited, since sealing can write to the network or wait. Throttled, the reading also
/// tells which records are due. The reading cost a tenth of the
/// tool's CPU when taken for every record, and sharing it lets records sent together be
/// appended and recorded together.
const RECORDS_PER_CLOCK_READING: u64 = 32;

/// Turns acknowledgements into Kafka's statistics, as the librdkafka loop's delivery
/// callback does: latency per record from its send time (or, throttled, from its intended
/// send time for the HdrHistogram).
struct Deliveries {
    recorder: Recorder,
    /// When each record is due, when throttled.
    schedule: Option<Schedule>,
}

/// Consecutive records whose figures are equal, recorded in one step.
#[derive(Clone, Copy)]
struct Span<F> {
    first_index: u64,
    n: u64,
    figures: F,
}

/// Gathers consecutive records with equal figures into spans.
struct Spans<F> {
    current: Option<Span<F>>,
}

impl<F: PartialEq> Spans<F> {
    fn new() -> Self {
        Self { current: None }
    }

    /// Adds `n` records from `first_index`; returns the span this ended, if any.
    fn add(&mut self, first_index: u64, n: u64, figures: F) -> Option<Span<F>> {
        match &mut self.current {
            Some(span) if span.first_index + span.n == first_index && span.figures == figures => {
                span.n += n;
                None
            }
            _ => self.current.replace(Span {
                first_index,
                n,
                figures,
            }),
        }
    }

    fn finish(self) -> Option<Span<F>> {
        self.current
    }
}

impl Deliveries {
    /// Kafka's figures (latency in ms, value bytes) of a span.
    fn count(&mut self, span: Span<(u32, u64)>, ack_ns: u64) {
        let (latency_ms, bytes) = span.figures;
        self.recorder
            .count_success(span.first_index, span.n, latency_ms, bytes, ack_ns);
    }

    /// The HdrHistogram latency (µs) of a span.
    fn time(&mut self, span: Span<u64>) {
        self.recorder
            .record_latency(span.first_index, span.n, span.figures);
    }
}

impl DeliveryHandler for Deliveries {
    fn delivered(&mut self, runs: &[RecordRun], ack_ns: u64, outcome: Result<(), &str>) {
        let records = record_count(runs) as u64;
        match outcome {
            Ok(()) => {
                let mut counted = Spans::new();
                let mut timed = Spans::new();
                let mut bytes = 0;
                for run in runs {
                    let n = u64::from(run.count);
                    let value_len = u64::from(run.value_len);
                    bytes += n * value_len;
                    let figures = (clock::latency_ms(run.sent_ns, ack_ns), value_len);
                    if let Some(span) = counted.add(run.first_index, n, figures) {
                        self.count(span, ack_ns);
                    }
                    match self.schedule {
                        // Records sent together share their latency.
                        None => {
                            let us = ack_ns.saturating_sub(run.sent_ns) / 1000;
                            if let Some(span) = timed.add(run.first_index, n, us) {
                                self.time(span);
                            }
                        }
                        // Each record's from its own intended send time: no record's
                        // batch leaves before it.
                        Some(schedule) => {
                            for index in run.first_index..run.first_index + n {
                                let us = ack_ns.saturating_sub(schedule.due_ns(index)) / 1000;
                                if let Some(span) = timed.add(index, 1, us) {
                                    self.time(span);
                                }
                            }
                        }
                    }
                }
                if let Some(span) = counted.finish() {
                    self.count(span, ack_ns);
                }
                if let Some(span) = timed.finish() {
                    self.time(span);
                }
                self.recorder.completed(Instant::now(), records, bytes);
            }
            Err(reason) => {
                for _ in 0..records {
                    self.recorder.on_failure(&reason);
                }
            }
        }
        self.recorder.add_progress(records);
    }
}

/// Runs the test with the native producer against `bootstrap`.
pub fn run(
    args: &ProducerArgs,
    bootstrap: &str,
    mut out: Box<dyn Write + Send>,
) -> Result<ProducerResult> {
    if args.throughput == 0.0 {
        bail!("--throughput 0 would never send a record");
    }
    if args.transactions_enabled() {
        bail!("the native client does not run transactions; use --client librdkafka");
    }
    let config = ProducerConfig::from_properties(&args.properties, "perf-producer-client")?;
    config
        .warnings
        .iter()
        .for_each(|w| eprintln!("WARNING: {w}"));
    let settings = effective_settings(&config);
    let mut payloads = Payloads::new(&args.payload, args.num_records, config.batch_size, &mut out)?;
    let mut keys = args.key_range.map(|(range, dist)| Keys::new(range, dist));
    if args.warmup_records > 0 {
        writeln!(out, "{}", output::warmup_line(args.warmup_records))?;
    }
    let throttled = args.throughput > 0.0;
    let progress = Progress::start("producing", args.num_records);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the native producer's runtime")?;
    let recorder = Recorder::new(
        Stats::new(args.num_records, args.reporting_interval_ms, 0),
        args.warmup_records,
        Instant::now(),
        progress.counter(),
        out,
    );
    let handler = Deliveries {
        recorder,
        schedule: None,
    };
    let (end, mut handler, metric_lines) = runtime.block_on(async {
        let client = NativeClient::new(bootstrap, &config.client_id)?;
        let client_id = config.client_id.clone();
        let mut producer =
            NativeProducer::connect(Arc::clone(&client), config, &args.topic, handler).await?;
        let start = Instant::now();
        let start_ns = clock::ns_of(start);
        producer.handler.recorder.start(
            Stats::new(
                args.num_records,
                args.reporting_interval_ms,
                clock::ms(start_ns),
            ),
            start,
        );
        let schedule = Schedule {
            start_ns,
            interval_ns: 1e9 / args.throughput,
        };
        if throttled {
            producer.handler.schedule = Some(schedule);
        }
        let mut now_ns = 0;
        let mut reads_left = 0;
        let mut warming_up = args.warmup_records > 0;
        let mut i = 0;
        while i < args.num_records {
            if warming_up && i == args.warmup_records {
                warming_up = false;
                // Throttled, the first steady record may go in before it is due; the
                // steady state starts when it is.
                let now_ns = clock::now_ns();
                let start_ns = if throttled {
                    now_ns.max(schedule.due_ns(i))
                } else {
                    now_ns
                };
                producer.handler.recorder.begin_steady_state(
                    args.num_records - args.warmup_records,
                    args.reporting_interval_ms,
                    clock::ms(start_ns),
                );
            }
            if !throttled && keys.is_none() {
                // Runs of records without keys go in a batch at a time, up to the end
                // of the warm-up.
                let end = if warming_up {
                    args.warmup_records
                } else {
                    args.num_records
                };
                let count = (end - i).min(RECORDS_PER_CLOCK_READING);
                let (appended, sealed) =
                    producer.append_unkeyed(&mut payloads, i, count, clock::now_ns())?;
                i += appended;
                if sealed {
                    producer.send_sealed().await?;
                }
                continue;
            }
            let value = payloads.next(i);
            let key = keys.as_mut().map(|k| k.next(i));
            if reads_left == 0 {
                now_ns = clock::now_ns();
                reads_left = RECORDS_PER_CLOCK_READING;
            }
            reads_left -= 1;
            let sealed = if throttled {
                // A record waits for its due time unless its partition's batch would
                // hold it anyway.
                let due_ns = schedule.due_ns(i);
                loop {
                    let tag = RecordTag {
                        index: i,
                        sent_ns: Schedule::sent_ns(due_ns, now_ns),
                        value_len: value.len() as u32,
                    };
                    if let Some(sealed) = producer.append_due(key, value, tag, due_ns, now_ns)? {
                        break sealed;
                    }
                    producer.idle(due_ns).await?;
                    now_ns = clock::now_ns();
                }
            } else {
                let tag = RecordTag {
                    index: i,
                    sent_ns: now_ns,
                    value_len: value.len() as u32,
                };
                producer.append(key, value, &[], tag)?
            };
            if sealed {
                producer.send_sealed().await?;
                reads_left = 0;
            }
            i += 1;
        }
        if let Some(last) = args.num_records.checked_sub(1).filter(|_| throttled) {
            // Records appended before they were due leave no earlier than that.
            producer.idle_until(schedule.due_ns(last)).await?;
        }
        producer.flush().await?;
        let end = Instant::now();
        let metric_lines = if args.print_metrics {
            crate::metrics::format_block(&client.metrics.by_name(
                "producer-metrics",
                "producer-metrics",
                "producer-node-metrics",
                &client_id,
            ))
        } else {
            Vec::new()
        };
        anyhow::Ok((end, producer.handler, metric_lines))
    })?;
    progress.finish();
    Ok(super::run::finish(
        &mut handler.recorder,
        end,
        &metric_lines,
        settings,
        throttled,
    ))
}

/// The settings the native producer ran with, under Kafka's names, for the reports.
fn effective_settings(config: &ProducerConfig) -> Vec<(String, String)> {
    let acks = match config.acks {
        -1 => "all".to_string(),
        n => n.to_string(),
    };
    [
        ("client", "native".to_string()),
        ("acks", acks),
        ("batch.size", config.batch_size.to_string()),
        ("linger.ms", config.linger.as_millis().to_string()),
        (
            "compression.type",
            format!("{:?}", config.codec).to_lowercase(),
        ),
        (
            "max.in.flight.requests.per.connection",
            config.max_in_flight.to_string(),
        ),
        ("enable.idempotence", config.idempotence.to_string()),
        ("buffer.memory", config.buffer_memory.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

impl RecordValues for Payloads {
    #[inline]
    fn value(&mut self, index: u64) -> &[u8] {
        self.next(index)
    }
}
