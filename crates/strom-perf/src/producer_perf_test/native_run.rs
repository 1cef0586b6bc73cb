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
use crate::clock;
use crate::native::client::NativeClient;
use crate::native::config::ProducerConfig;
use crate::native::producer::{
    record_count, DeliveryHandler, NativeProducer, RecordRun, RecordTag, RecordValues,
};
use crate::progress::Progress;

/// Unthrottled, one clock reading is the send time of up to this many records appended in
/// a row, each within a microsecond or two of the reading (appending is a copy into the
/// open batch, 20–40 ns a record); the clock is read again after any record that sealed a
/// batch, since sealing can write to the network or wait. The reading cost a tenth of the
/// tool's CPU when taken for every record, and sharing it lets records sent together be
/// appended and recorded together.
const RECORDS_PER_CLOCK_READING: u64 = 32;

/// Turns acknowledgements into Kafka's statistics, as the librdkafka loop's delivery
/// callback does: latency per record from its send time (or, throttled, from its intended
/// send time for the HdrHistogram).
struct Deliveries {
    recorder: Recorder,
    /// `Some((start_ns, interval_ns))` when throttled.
    schedule: Option<(u64, f64)>,
}

/// Consecutive records of one batch whose figures are equal, recorded in one step.
struct Run {
    first_index: u64,
    n: u64,
    latency_ms: u32,
    hdr_us: u64,
    bytes: u64,
}

impl Run {
    fn continues_with(&self, next: &Run) -> bool {
        self.first_index + self.n == next.first_index
            && (self.latency_ms, self.hdr_us, self.bytes)
                == (next.latency_ms, next.hdr_us, next.bytes)
    }
}

impl Deliveries {
    /// Hands `emit` the figures of the acknowledged records of `run`: all of them at once
    /// unthrottled, where they share a send time; one by one throttled, where each has
    /// its own intended send time for the HdrHistogram.
    fn figures(
        schedule: Option<(u64, f64)>,
        run: &RecordRun,
        ack_ns: u64,
        mut emit: impl FnMut(Run),
    ) {
        let latency_ms = clock::latency_ms(run.sent_ns, ack_ns);
        let bytes = u64::from(run.value_len);
        match schedule {
            None => emit(Run {
                first_index: run.first_index,
                n: u64::from(run.count),
                latency_ms,
                hdr_us: ack_ns.saturating_sub(run.sent_ns) / 1000,
                bytes,
            }),
            Some((start, interval)) => {
                for index in run.first_index..run.first_index + u64::from(run.count) {
                    let intended = (start + (index as f64 * interval) as u64).min(run.sent_ns);
                    emit(Run {
                        first_index: index,
                        n: 1,
                        latency_ms,
                        hdr_us: ack_ns.saturating_sub(intended) / 1000,
                        bytes,
                    });
                }
            }
        }
    }

    fn record(&mut self, run: &Run, ack_ns: u64) {
        self.recorder.on_success(
            run.first_index,
            run.n,
            run.latency_ms,
            run.hdr_us,
            run.bytes,
            ack_ns,
        );
    }
}

impl DeliveryHandler for Deliveries {
    fn delivered(&mut self, runs: &[RecordRun], ack_ns: u64, outcome: Result<(), &str>) {
        let records = record_count(runs) as u64;
        match outcome {
            Ok(()) => {
                let mut current: Option<Run> = None;
                let mut bytes = 0;
                for run in runs {
                    bytes += u64::from(run.count) * u64::from(run.value_len);
                    Self::figures(self.schedule, run, ack_ns, |next| match current.as_mut() {
                        Some(c) if c.continues_with(&next) => c.n += next.n,
                        _ => {
                            if let Some(done) = current.replace(next) {
                                self.record(&done, ack_ns);
                            }
                        }
                    });
                }
                if let Some(done) = current {
                    self.record(&done, ack_ns);
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
    let interval_ns = 1e9 / args.throughput;
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
        if throttled {
            producer.handler.schedule = Some((start_ns, interval_ns));
        }
        let mut sent_ns = 0;
        let mut reads_left = 0;
        let mut warming_up = args.warmup_records > 0;
        let mut i = 0;
        while i < args.num_records {
            if warming_up && i == args.warmup_records {
                warming_up = false;
                producer.handler.recorder.begin_steady_state(
                    args.num_records - args.warmup_records,
                    args.reporting_interval_ms,
                    clock::ms(clock::now_ns()),
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
            if throttled {
                // Throttled, each record's own send time, read once: it also tells
                // whether the record is due.
                let intended = start_ns + (i as f64 * interval_ns) as u64;
                sent_ns = clock::now_ns();
                if intended > sent_ns + 1_000_000 {
                    producer.idle_until(intended).await?;
                    sent_ns = clock::now_ns();
                }
            }
            let value = payloads.next(i);
            let key = keys.as_mut().map(|k| k.next(i));
            if !throttled {
                if reads_left == 0 {
                    sent_ns = clock::now_ns();
                    reads_left = RECORDS_PER_CLOCK_READING;
                }
                reads_left -= 1;
            }
            let tag = RecordTag {
                index: i,
                sent_ns,
                value_len: value.len() as u32,
            };
            if producer.append(key, value, &[], tag)? {
                producer.send_sealed().await?;
                reads_left = 0;
            }
            i += 1;
        }
        producer.flush().await?;
        let end = Instant::now();
        let metric_lines = if args.print_metrics {
            client.metrics.lines(
                "producer-metrics",
                "producer-metrics",
                "producer-node-metrics",
                &client_id,
            )
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
