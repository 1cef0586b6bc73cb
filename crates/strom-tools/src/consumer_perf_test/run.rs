//! The consume loop, Kafka's `ConsumerPerformance.consume`, run by `--threads` consumers of
//! one group whose figures are summed.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use parking_lot::Mutex;

use super::args::ConsumerArgs;
use super::output::{self, Progress, Summary};
use super::poller::{self, Poller};
use crate::histogram::LatencyHistogram;
use crate::load_client::LoadClient;
use crate::progress;
use crate::property_map::{self, Mapped, Role};
use crate::series::{SeriesPoint, ThroughputSeries};
use strom_client::consumer::Record;

/// Kafka's `poll(Duration.ofMillis(100))`.
const POLL_TIMEOUT_MS: i32 = 100;
/// Kafka's default `max.poll.records`: the most records one poll returns.
const BATCH: usize = 500;

/// What a run measured, summed over the consumers.
pub struct ConsumerResult {
    pub summary: Summary,
    pub timed_out: bool,
    pub histogram: LatencyHistogram,
    pub series: Vec<SeriesPoint>,
    pub settings: Vec<(String, String)>,
    /// Records each consumer of the group received, in thread order: shows which members
    /// sat idle (more consumers than partitions) or took over after a rebalance.
    pub per_consumer: Vec<u64>,
    /// From the first record any consumer received to the last: the consuming time
    /// without the group join before it (`None` when no record arrived).
    pub first_to_last: Option<Duration>,
}

/// What each consumer does with every record before polling on: `strom bench
/// consumer-scaling` passes records to a no-op handler as seed 004's forwarding consumer
/// does; consumer-perf-test only counts them, as Kafka's tool does.
pub type Handler = dyn Fn(&Record<'_>) + Sync;

/// Wall-clock milliseconds, as `System.currentTimeMillis()`.
pub fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Counters shared by the consumers of one run.
struct Shared {
    messages: AtomicU64,
    bytes: AtomicU64,
    target: u64,
    stop: AtomicBool,
}

/// The librdkafka configuration: user properties, then Kafka's forced settings on top.
pub fn consumer_config(args: &ConsumerArgs, bootstrap: &str, group: &str) -> Result<Mapped> {
    let mut mapped = property_map::map(&args.properties, Role::Consumer)?;
    mapped.set("bootstrap.servers", bootstrap);
    mapped.set("group.id", group);
    mapped.set(
        "socket.receive.buffer.bytes",
        &args.socket_buffer_size.to_string(),
    );
    mapped.set("max.partition.fetch.bytes", &args.fetch_size.to_string());
    mapped.set(
        "auto.offset.reset",
        if args.from_latest {
            "latest"
        } else {
            "earliest"
        },
    );
    mapped.set("check.crcs", "false");
    mapped.set_default("client.id", "perf-consumer-client");
    // The Java consumer fetches again as soon as the application drained what it had.
    // librdkafka instead pauses fetching for `fetch.queue.backoff.ms` (1 s by default)
    // whenever its prefetch queue is full, which idles a fast consumer half of the time.
    // These defaults give it the Java client's behaviour; users can still override them.
    mapped.set_default("fetch.queue.backoff.ms", "1");
    mapped.set_default("queued.min.messages", "1000000");
    if args.print_metrics {
        mapped.set_default("statistics.interval.ms", "1000");
    }
    Ok(mapped)
}

pub fn run(
    args: &ConsumerArgs,
    bootstrap: &str,
    out: &mut (dyn Write + Send),
) -> Result<ConsumerResult> {
    run_with_handler(args, bootstrap, out, &|_| {})
}

/// [`run`], with `handler` called on every record.
pub fn run_with_handler(
    args: &ConsumerArgs,
    bootstrap: &str,
    out: &mut (dyn Write + Send),
    handler: &Handler,
) -> Result<ConsumerResult> {
    let group = args
        .group
        .clone()
        .unwrap_or_else(|| format!("perf-consumer-{}", std::process::id() % 100_000));
    let mapped = consumer_config(args, bootstrap, &group)?;
    mapped.print_warnings();
    if !args.hide_header {
        writeln!(out, "{}", output::header(args.show_detailed_stats))?;
    }
    let shared = Shared {
        messages: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
        target: args.num_messages,
        stop: AtomicBool::new(false),
    };
    let progress = progress::Progress::start("consuming", args.num_messages);
    let counter = progress.counter();
    let out = Mutex::new(out);
    let start = Instant::now();
    let start_ms = wall_ms();
    let outcomes: Vec<Result<ConsumerOutcome>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..args.threads)
            .map(|thread| {
                let (shared, mapped, out, counter) = (&shared, &mapped, &out, Arc::clone(&counter));
                let target = Target {
                    bootstrap,
                    group: &group,
                    mapped,
                };
                scope.spawn(move || {
                    consume(
                        thread, args, target, shared, start, start_ms, out, counter, handler,
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("consumer thread panicked"))
            .collect()
    });
    let end_ms = wall_ms();
    let end = Instant::now();
    progress.finish();
    let mut histogram = LatencyHistogram::new();
    let mut series = ThroughputSeries::new(start);
    let mut join_time_ms = 0;
    let mut metric_lines = Vec::new();
    let mut per_consumer = Vec::with_capacity(outcomes.len());
    let mut first_record: Option<Instant> = None;
    let mut last_record: Option<Instant> = None;
    for outcome in outcomes {
        let outcome = outcome?;
        per_consumer.push(outcome.records);
        if let Some((first, last)) = outcome.first_and_last {
            first_record = Some(first_record.map_or(first, |t| t.min(first)));
            last_record = Some(last_record.map_or(last, |t| t.max(last)));
        }
        histogram.add(&outcome.histogram);
        series.merge(&outcome.series);
        join_time_ms = join_time_ms.max(outcome.join_time_ms);
        if metric_lines.is_empty() {
            metric_lines = outcome.metric_lines;
        }
    }
    let out = out.into_inner();
    let timed_out = shared.messages.load(Ordering::Relaxed) < shared.target;
    if timed_out {
        writeln!(out, "{}", output::timeout_warning(args.timeout_ms))?;
    }
    let summary = Summary {
        start_ms,
        end_ms,
        bytes: shared.bytes.load(Ordering::Relaxed),
        messages: shared.messages.load(Ordering::Relaxed),
        join_time_ms,
    };
    if !args.show_detailed_stats {
        writeln!(
            out,
            "{}",
            output::summary_row(&summary, |ms| args.date_format.format_millis(ms))
        )?;
    }
    if args.print_metrics {
        for line in &metric_lines {
            writeln!(out, "{line}")?;
        }
    }
    Ok(ConsumerResult {
        summary,
        timed_out,
        histogram,
        series: series.points(end),
        settings: match args.client {
            LoadClient::Librdkafka => mapped.settings.clone(),
            LoadClient::Native => poller::native_settings(args, &group)?,
        },
        per_consumer,
        first_to_last: first_record.zip(last_record).map(|(f, l)| l - f),
    })
}

/// Where a consumer of the run connects, and as what.
#[derive(Clone, Copy)]
struct Target<'a> {
    bootstrap: &'a str,
    group: &'a str,
    /// librdkafka's settings (the native client reads the same properties itself).
    mapped: &'a Mapped,
}

struct ConsumerOutcome {
    histogram: LatencyHistogram,
    series: ThroughputSeries,
    join_time_ms: u64,
    /// `--print-metrics` lines (empty without the flag).
    metric_lines: Vec<String>,
    records: u64,
    /// When this consumer received its first and its last record.
    first_and_last: Option<(Instant, Instant)>,
}

/// One consumer's loop, until the group has read the target or this consumer saw no record
/// for `--timeout` ms. Thread 0 also prints `--show-detailed-stats` rows from the shared
/// totals, so rows describe the whole group as Kafka's (single consumer) rows do.
#[allow(clippy::too_many_arguments)]
fn consume(
    thread: usize,
    args: &ConsumerArgs,
    target: Target<'_>,
    shared: &Shared,
    start: Instant,
    start_ms: i64,
    out: &Mutex<&mut (dyn Write + Send)>,
    counter: Arc<AtomicU64>,
    handler: &Handler,
) -> Result<ConsumerOutcome> {
    let mut consumer =
        Poller::subscribe(args, target.mapped, target.bootstrap, target.group, BATCH)?;
    let mut histogram = LatencyHistogram::new();
    let mut series = ThroughputSeries::new(start);
    let mut now_ms = wall_ms();
    let mut last_consumed_ms = now_ms;
    let mut last_report_ms = start_ms;
    let (mut last_messages, mut last_bytes) = (0u64, 0u64);
    let mut first_row = true;
    let mut records = 0u64;
    let mut first_and_last: Option<(Instant, Instant)> = None;
    // librdkafka reports transient connection errors with the records; each is shown once.
    let mut reported_errors = std::collections::HashSet::new();
    while !shared.stop.load(Ordering::Relaxed)
        && (now_ms - last_consumed_ms) as u64 <= args.timeout_ms
    {
        // Kafka reads the clock once per poll, after it returns.
        let mut polled_ms = None;
        let mut batch_bytes = 0u64;
        let mut latencies = histogram.runs();
        let n = consumer.consume(
            POLL_TIMEOUT_MS,
            BATCH,
            |record| {
                let at = *polled_ms.get_or_insert_with(wall_ms);
                handler(record);
                batch_bytes += (record.key.len() + record.value.len()) as u64;
                if let Some(ts) = record.timestamp {
                    latencies.record((at - ts).max(0) as u64 * 1000);
                }
            },
            |error| {
                if reported_errors.insert(error.clone()) {
                    eprintln!("WARNING: consumer error: {error}");
                }
            },
        )? as u64;
        drop(latencies);
        now_ms = polled_ms.unwrap_or_else(wall_ms);
        if n == 0 {
            continue;
        }
        last_consumed_ms = now_ms;
        records += n;
        let messages = shared.messages.fetch_add(n, Ordering::Relaxed) + n;
        let bytes = shared.bytes.fetch_add(batch_bytes, Ordering::Relaxed) + batch_bytes;
        counter.fetch_add(n, Ordering::Relaxed);
        let arrived = Instant::now();
        series.record(arrived, n, batch_bytes);
        first_and_last = Some((first_and_last.map_or(arrived, |(f, _)| f), arrived));
        if messages >= shared.target {
            shared.stop.store(true, Ordering::Relaxed);
        }
        if thread == 0 && now_ms - last_report_ms >= args.reporting_interval_ms as i64 {
            if args.show_detailed_stats {
                // Kafka's quirk: only the first row carries the join time, later rows 0.
                let join = if first_row {
                    consumer.join_time_ms()
                } else {
                    0
                };
                let row = output::progress_row(
                    &Progress {
                        bytes,
                        last_bytes,
                        messages,
                        last_messages,
                        start_ms: last_report_ms,
                        end_ms: now_ms,
                        join_time_ms: join,
                    },
                    |ms| args.date_format.format_millis(ms),
                );
                let _ = writeln!(out.lock(), "{row}");
            }
            first_row = false;
            last_report_ms = now_ms;
            last_messages = messages;
            last_bytes = bytes;
        }
    }
    consumer.close()?;
    let join_time_ms = consumer.join_time_ms();
    let metric_lines = if args.print_metrics {
        consumer.metric_lines(
            target
                .mapped
                .get("client.id")
                .unwrap_or("perf-consumer-client"),
        )
    } else {
        Vec::new()
    };
    Ok(ConsumerOutcome {
        histogram,
        series,
        join_time_ms,
        metric_lines,
        records,
        first_and_last,
    })
}
