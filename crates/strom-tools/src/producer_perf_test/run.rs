//! The send loop: one producer, one thread, Kafka's statistics and strom's histogram.

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, Producer};

use super::args::{PayloadSource, ProducerArgs};
use super::context::{PerfContext, Schedule};
use super::delivery_queue::DeliveryQueue;
use super::output;
use super::payload::{Keys, Payloads};
use super::recorder::Recorder;
use super::stats::{Stats, Totals};
use super::topic_handle::{SendError, TopicHandle};
use crate::histogram::LatencyHistogram;
use crate::load_client::LoadClient;
use crate::metrics;
use crate::progress::Progress;
use crate::property_map::{self, Mapped, Role};
use crate::series::SeriesPoint;
use strom_client::clock;

/// librdkafka's default `queue.buffering.max.messages`.
const DEFAULT_QUEUE_MESSAGES: usize = 100_000;
/// Largest queue strom will size its send-time ring for.
const MAX_QUEUE_MESSAGES: usize = 10_000_000;
/// Serve delivery reports after this many sends, to keep callbacks flowing without a
/// `poll` call per record.
const POLL_EVERY: u64 = 64;
/// How long to wait at most for a delivery report (queue space) before retrying a send;
/// the wait ends as soon as one arrives.
const QUEUE_FULL_WAIT: Duration = Duration::from_millis(1);
/// Schedule slack below which the throttled loop sends rather than waits.
const MIN_WAIT: Duration = Duration::from_millis(1);

/// Everything a run measured.
pub struct ProducerResult {
    pub totals: Totals,
    pub steady: Option<Totals>,
    pub histogram: LatencyHistogram,
    pub series: Vec<SeriesPoint>,
    pub failures: u64,
    pub settings: Vec<(String, String)>,
    pub throttled: bool,
}

/// The librdkafka configuration for `args`, with Kafka's forced and default settings.
pub fn producer_config(args: &ProducerArgs, bootstrap: &str) -> Result<Mapped> {
    let mut mapped = property_map::map(&args.properties, Role::Producer)?;
    mapped.set("bootstrap.servers", bootstrap);
    mapped.set_default("client.id", "perf-producer-client");
    if args.transactions_enabled() {
        let id = args
            .transactional_id
            .clone()
            .or_else(|| mapped.get("transactional.id").map(String::from))
            .unwrap_or_else(|| format!("performance-producer-{}", random_suffix()));
        mapped.set("transactional.id", &id);
    }
    if args.print_metrics {
        mapped.set_default("statistics.interval.ms", "1000");
    }
    Ok(mapped)
}

/// librdkafka's default `batch.size`, the most bytes of one of its batches.
const LIBRDKAFKA_BATCH_SIZE: usize = 1_000_000;

/// Runs the test against `bootstrap`, printing Kafka's lines to `out`.
pub fn run(
    args: &ProducerArgs,
    bootstrap: &str,
    mut out: Box<dyn Write + Send>,
) -> Result<ProducerResult> {
    if args.client == LoadClient::Native {
        return super::native_run::run(args, bootstrap, out);
    }
    if args.throughput == 0.0 {
        // Kafka's throttler blocks forever at a target of 0 records/sec.
        bail!("--throughput 0 would never send a record");
    }
    let mapped = producer_config(args, bootstrap)?;
    mapped.print_warnings();
    let queue_messages = match mapped.get("queue.buffering.max.messages") {
        Some(v) => v.parse::<usize>().context("queue.buffering.max.messages")?,
        None => DEFAULT_QUEUE_MESSAGES,
    };
    if queue_messages > MAX_QUEUE_MESSAGES {
        bail!("queue.buffering.max.messages above {MAX_QUEUE_MESSAGES} is not supported by strom");
    }
    let batch_size = match mapped.get("batch.size") {
        Some(v) => v.parse::<usize>().context("batch.size")?,
        None => LIBRDKAFKA_BATCH_SIZE,
    };
    let mut payloads = Payloads::new(&args.payload, args.num_records, batch_size, &mut out)?;
    let mut keys = args.key_range.map(|(range, dist)| Keys::new(range, dist));
    let fixed_len = match args.payload {
        PayloadSource::RecordSize(size) => Some(size as u64),
        _ => None,
    };
    if args.warmup_records > 0 {
        writeln!(out, "{}", output::warmup_line(args.warmup_records))?;
    }

    let throttled = args.throughput > 0.0;
    let progress = Progress::start("producing", args.num_records);
    let schedule = if throttled {
        Schedule::Intended {
            interval_ns: 1e9 / args.throughput,
        }
    } else {
        Schedule::AsSent
    };
    let placeholder = Stats::new(args.num_records, args.reporting_interval_ms, 0);
    let recorder = Recorder::new(
        placeholder,
        args.warmup_records,
        Instant::now(),
        progress.counter(),
        out,
    );
    let context = PerfContext::new(recorder, queue_messages, schedule, fixed_len);

    let mut config = ClientConfig::new();
    mapped.settings.iter().for_each(|(k, v)| {
        config.set(k, v);
    });
    let producer: BaseProducer<PerfContext> = config
        .create_with_context(context)
        .context("cannot create the producer")?;
    let transactions = args.transactions_enabled();
    if transactions {
        producer
            .init_transactions(Duration::from_secs(60))
            .context("initTransactions failed")?;
    }
    let transaction_ns = args.transaction_duration_ms.unwrap_or(3000) * 1_000_000;
    let topic = TopicHandle::new(&producer, &args.topic)?;
    let mut deliveries = DeliveryQueue::new(&producer);
    let start = Instant::now();
    let stats = Stats::new(
        args.num_records,
        args.reporting_interval_ms,
        clock::ms(clock::ns_of(start)),
    );
    producer.context().start(stats, start);

    let mut transaction_start_ns = 0;
    let mut transaction_size = 0u64;
    for i in 0..args.num_records {
        if let Some(intended) = producer.context().intended_ns(i) {
            wait_until(&mut deliveries, intended);
        }
        if i == args.warmup_records && i > 0 {
            let now_ms = clock::ms(clock::now_ns());
            producer.context().recorder.lock().begin_steady_state(
                args.num_records - args.warmup_records,
                args.reporting_interval_ms,
                now_ms,
            );
        }
        let value = payloads.next(i);
        let key = keys.as_mut().map(|k| k.next(i));
        let send_ns = clock::now_ns();
        if transactions && transaction_size == 0 {
            producer
                .begin_transaction()
                .context("beginTransaction failed")?;
            transaction_start_ns = send_ns;
        }
        producer.context().mark_sent(i as usize, send_ns);
        loop {
            match topic.produce(value, key, i as usize) {
                Ok(()) => break,
                Err(SendError::QueueFull) => deliveries.serve(QUEUE_FULL_WAIT),
                Err(SendError::Other(code)) => bail!("send failed: {code}"),
            }
        }
        if transactions {
            transaction_size += 1;
            if transaction_ns <= send_ns.saturating_sub(transaction_start_ns) {
                producer
                    .commit_transaction(Duration::from_secs(60))
                    .context("commitTransaction failed")?;
                transaction_size = 0;
            }
        }
        if i % POLL_EVERY == 0 {
            deliveries.serve(Duration::ZERO);
        }
    }
    if transactions && transaction_size > 0 {
        producer
            .commit_transaction(Duration::from_secs(60))
            .context("commitTransaction failed")?;
    }
    // Kafka's close(): wait for every delivery report. rdkafka's `flush` would do it, but
    // it waits in 100 ms `poll`s that each last their whole timeout, which added up to
    // 100 ms to every run; serving the queue directly ends at the last report.
    while producer.in_flight_count() > 0 {
        deliveries.serve(QUEUE_FULL_WAIT);
    }
    let end = Instant::now();
    drop(deliveries);
    drop(topic);
    progress.finish();

    let metric_lines = if args.print_metrics {
        let stats = producer.context().last_stats.lock().clone();
        let client_id = mapped.get("client.id").unwrap_or("perf-producer-client");
        metrics::lines(stats.as_deref(), "producer-metrics", client_id)
    } else {
        Vec::new()
    };
    let mut recorder = producer.context().recorder.lock();
    Ok(finish(
        &mut recorder,
        end,
        &metric_lines,
        mapped.settings.clone(),
        throttled,
    ))
}

/// Kafka's final lines (the whole run, then steady state after a warmup, then any
/// `trailing` lines such as metrics) and the run's figures, once every record has its
/// outcome at `end`; both clients' send loops end here.
pub(super) fn finish(
    recorder: &mut Recorder,
    end: Instant,
    trailing: &[String],
    settings: Vec<(String, String)>,
    throttled: bool,
) -> ProducerResult {
    let end_ms = clock::ms(clock::ns_of(end));
    let totals = recorder.stats.totals(end_ms);
    recorder.print(&output::total_line(&totals, false));
    let steady = recorder.steady.as_mut().map(|s| s.totals(end_ms));
    if let Some(steady) = &steady {
        recorder.print(&output::total_line(steady, true));
    }
    for line in trailing {
        recorder.print(line);
    }
    ProducerResult {
        totals,
        steady,
        histogram: recorder.histogram.clone(),
        series: recorder.series.points(end),
        failures: recorder.failures,
        settings,
        throttled,
    }
}

/// Waits for the intended send time while serving delivery reports; sends up to
/// `MIN_WAIT` early rather than spin, which the callback accounts for.
fn wait_until(deliveries: &mut DeliveryQueue<'_>, intended_ns: u64) {
    loop {
        let now = clock::now_ns();
        let ahead = Duration::from_nanos(intended_ns.saturating_sub(now));
        if ahead < MIN_WAIT {
            return;
        }
        deliveries.serve(ahead);
    }
}

/// A random-enough suffix for the default transactional id (Kafka uses a UUID).
fn random_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{:032x}", nanos ^ (u128::from(std::process::id()) << 64))
}
