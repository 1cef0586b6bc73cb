//! `strom bench partitions-idle`: what idle partitions cost replication (issue 40). On a
//! local cluster of three combined nodes, a 6-partition topic of replication factor 3 is
//! written with acks=all beside 0, 240, 2,400 and 13,260 idle partition replicas per
//! broker (seed 003's largest cluster held 13,260). Each of `--runs` rounds runs every
//! step once, on a fresh cluster, so the steps interleave; it reports:
//!
//! - the written topic's records/s and p99 latency, the brokers' CPU seconds per GB
//!   written (all three nodes together), and the partitions the leaders read and the
//!   fetchers looked up per appended batch (the brokers' counters, `GET /metrics`);
//! - what the idle cluster costs: each broker's CPU over `--idle-secs` with nothing
//!   written, as a percentage of one core;
//! - each against the empty cluster: the throughput kept and the CPU per record added.
//!
//! Kafka keeps a follower's fetch cheap however many partitions it shares with its
//! leader by incremental fetch sessions (KIP-227); the figures show whether strom's
//! leaders and fetchers do the same. Runs are reported as ranges, never as a best run.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use serde::Serialize;

use crate::args::ReportFiles;
use crate::poll;
use strom_client::blocking;
use strom_testkit::local_cluster::{ClusterSpec, LocalCluster};
use strom_tools::cpu::{process_cpu_seconds, CpuMeter};
use strom_tools::load_client::LoadClient;
use strom_tools::producer_perf_test::{self, args::ProducerArgs};
use strom_tools::report::{Chart, ChartSeries, ClusterShape, Report};
use strom_tools::topics;

const BROKERS: usize = 3;
const REPLICATION: i32 = 3;
const WRITTEN_PARTITIONS: i32 = 6;
/// The idle topics' size: the last one of a step takes the remainder.
const IDLE_TOPIC_PARTITIONS: usize = 1000;
const TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Parser, Debug)]
#[command(
    name = "strom bench partitions-idle",
    about = "Replication's cost beside idle partitions: a topic written with acks=all beside 0 to 13,260 idle replicas per broker"
)]
struct Args {
    /// Idle partition replicas per broker at each step (each step adds to the last).
    #[arg(long, value_delimiter = ',', default_value = "0,240,2400,13260")]
    idle: Vec<usize>,
    /// Records written per run.
    #[arg(long, default_value_t = 2_000_000)]
    records: u64,
    /// Size of each record's value, bytes.
    #[arg(long, default_value_t = 100)]
    record_size: usize,
    /// Rounds; each runs every step once, on a fresh cluster, and figures are ranges over
    /// them.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Seconds the idle cluster's CPU is measured in each step of each round.
    #[arg(long, default_value_t = 10)]
    idle_secs: u64,
    /// The load generator: native or librdkafka.
    #[arg(long, default_value = "native", value_parser = LoadClient::parse)]
    client: LoadClient,
    /// Extra settings for every node, `key=value` (repeatable).
    #[arg(long = "override")]
    overrides: Vec<String>,
    #[command(flatten)]
    reports: ReportFiles,
}

pub fn main(argv: &[String]) -> ExitCode {
    crate::clap_command::<Args>("strom bench partitions-idle", argv, run)
}

/// One producer run's figures.
#[derive(Debug, Clone, Serialize)]
struct Written {
    records_per_s: f64,
    p99_ms: f64,
    /// The three nodes' CPU seconds per GB of record values written.
    cpu_s_per_gb: f64,
    /// Partitions the leaders read for their followers' fetches and the fetchers looked
    /// up, per batch appended (the brokers' `GET /metrics` counters).
    partitions_per_append: f64,
}

/// One step's figures.
#[derive(Debug, Clone, Serialize)]
struct Step {
    idle_replicas_per_broker: usize,
    runs: Vec<Written>,
    /// Each broker's CPU while idle, percent of one core.
    idle_cpu_percent: Vec<f64>,
}

fn run(args: &Args, argv: &[String]) -> Result<()> {
    let mut steps_wanted = args.idle.clone();
    steps_wanted.sort_unstable();
    steps_wanted.dedup();
    let mut steps: Vec<Step> = steps_wanted
        .iter()
        .map(|&idle| Step {
            idle_replicas_per_broker: idle,
            runs: Vec::new(),
            idle_cpu_percent: Vec::new(),
        })
        .collect();
    for round in 1..=args.runs {
        for step in &mut steps {
            let idle = step.idle_replicas_per_broker;
            eprintln!(
                "strom bench partitions-idle: round {round}, {idle} idle replicas per broker..."
            );
            let (written, idle_cpu) = measure_step(args, idle)
                .with_context(|| format!("{idle} idle replicas per broker, round {round}"))?;
            eprintln!(
                "  {:.0} records/s, p99 {:.0} ms, {:.2} CPU-s/GB, {:.1} partitions read per batch; idle {:.2} % of a core per broker",
                written.records_per_s,
                written.p99_ms,
                written.cpu_s_per_gb,
                written.partitions_per_append,
                median(idle_cpu.iter().copied())
            );
            step.runs.push(written);
            step.idle_cpu_percent.extend(idle_cpu);
        }
    }
    print_table(&steps);
    let mut report = Report::new("bench partitions-idle", argv);
    report.cluster = Some(ClusterShape::combined(
        BROKERS,
        REPLICATION as i16,
        format!("{WRITTEN_PARTITIONS} written beside {steps_wanted:?} idle per broker"),
    ));
    report.figures = serde_json::json!({ "steps": steps });
    report.charts = charts(&steps);
    args.reports.write("partitions-idle", &report)
}

/// One step of one round, on a cluster of its own (so that every step is measured at the
/// same age of cluster and page cache, and the rounds interleave the steps): `idle` idle
/// replicas per broker, the idle cluster's CPU per broker, then one written run.
fn measure_step(args: &Args, idle: usize) -> Result<(Written, Vec<f64>)> {
    let spec = ClusterSpec {
        brokers: BROKERS,
        extra: args.overrides.clone(),
        ..Default::default()
    };
    let cluster = LocalCluster::start(&spec, None)?;
    add_idle_partitions(&cluster.bootstrap(), idle)?;
    let idle_cpu = idle_cpu(&cluster, args.idle_secs);
    let written = write_once(args, &cluster, "written")?;
    Ok((written, idle_cpu))
}

/// Creates idle RF 3 topics until every broker hosts `target` idle replicas (with three
/// brokers and RF 3, one per idle partition), and waits for every ISR to be whole.
fn add_idle_partitions(bootstrap: &str, target: usize) -> Result<()> {
    let mut hosted = 0;
    for topic in 0.. {
        if hosted >= target {
            break;
        }
        let partitions = (target - hosted).min(IDLE_TOPIC_PARTITIONS);
        topics::create_topic(
            bootstrap,
            &format!("idle-{topic:04}"),
            partitions as i32,
            REPLICATION,
        )?;
        hosted += partitions;
    }
    poll(
        "every ISR whole",
        TIMEOUT,
        Duration::from_millis(200),
        || {
            blocking::metadata(bootstrap, Duration::from_secs(30)).is_ok_and(|m| {
                let partitions: Vec<_> = m.topics.iter().flat_map(|t| &t.partitions).collect();
                partitions.len() >= hosted
                    && partitions
                        .iter()
                        .all(|p| p.leader_id.0 >= 0 && p.isr_nodes.len() == p.replica_nodes.len())
            })
        },
    )
}

/// Each node's CPU over `secs` seconds with nothing written, in percent of one core.
fn idle_cpu(cluster: &LocalCluster, secs: u64) -> Vec<f64> {
    let pids = cluster.pids();
    let cpu = |p: u32| process_cpu_seconds(p).unwrap_or(f64::NAN);
    let before: Vec<f64> = pids.iter().map(|&p| cpu(p)).collect();
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(secs));
    let elapsed = started.elapsed().as_secs_f64();
    pids.iter()
        .zip(before)
        .map(|(&p, b)| (cpu(p) - b) / elapsed * 100.0)
        .collect()
}

/// Writes `--records` records to a new topic and measures the run.
fn write_once(args: &Args, cluster: &LocalCluster, topic: &str) -> Result<Written> {
    let bootstrap = cluster.bootstrap();
    topics::create_topic(&bootstrap, topic, WRITTEN_PARTITIONS, REPLICATION)?;
    topics::wait_until_led(&bootstrap, topic, WRITTEN_PARTITIONS as usize)?;
    let acks_all = vec![("acks".to_string(), "all".to_string())];
    let producer = ProducerArgs {
        client: args.client,
        ..crate::producer_args(topic, args.records, args.record_size, -1.0, acks_all)
    };
    // Each run starts from the same page-cache state: the previous run's dirty pages
    // written back (see docs/replication.md, "A measuring trap on this VM").
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    let counted = replication_counters(cluster)?;
    let meter = CpuMeter::start(Some(cluster.pids()));
    let result = producer_perf_test::run::run(&producer, &bootstrap, Box::new(std::io::sink()))?;
    let cpu = meter.finish();
    let (work, appends) = replication_counters(cluster)?;
    let partitions_per_append = (work - counted.0) as f64 / (appends - counted.1).max(1) as f64;
    let totals = &result.totals;
    let gigabytes = (totals.count as f64 * args.record_size as f64) / 1e9;
    Ok(Written {
        records_per_s: totals.count as f64 * 1000.0 / totals.elapsed_ms.max(1) as f64,
        p99_ms: result.histogram.summary().p99_us as f64 / 1000.0,
        cpu_s_per_gb: cpu.broker_s.unwrap_or(f64::NAN) / gigabytes,
        partitions_per_append,
    })
}

/// The partitions read and looked up for replication, and the batches appended, summed
/// over the brokers' counters.
fn replication_counters(cluster: &LocalCluster) -> Result<(u64, u64)> {
    let mut totals = (0, 0);
    for node in &cluster.nodes {
        let m = node.metrics()?;
        let counter = |name: &str| m.get(name).copied().unwrap_or(0);
        totals.0 += counter("strom_replica_fetch_partitions_read_total")
            + counter("strom_fetcher_partitions_planned_total");
        totals.1 += counter("strom_produce_appends_total");
    }
    Ok(totals)
}

/// `min–max` of `values` with `decimals` decimals.
fn range(values: impl Iterator<Item = f64>, decimals: usize) -> String {
    let (lo, hi) = crate::min_max(values);
    format!("{lo:.decimals$}–{hi:.decimals$}")
}

/// The median of `values` (not empty).
fn median(values: impl Iterator<Item = f64>) -> f64 {
    let values: Vec<f64> = values.collect();
    crate::median_max(&values).0
}

fn print_table(steps: &[Step]) {
    let Some(empty) = steps.first() else {
        return;
    };
    let base_rate = median(empty.runs.iter().map(|r| r.records_per_s));
    let base_cpu = median(empty.runs.iter().map(|r| r.cpu_s_per_gb));
    println!(
        "\n| idle replicas per broker | records/s | p99 ms | brokers' CPU-s per GB | partitions read per batch | vs {} idle: throughput / CPU per record (medians) | idle CPU per broker, % of a core |",
        empty.idle_replicas_per_broker
    );
    println!("|---|---|---|---|---|---|---|");
    for step in steps {
        let rate = median(step.runs.iter().map(|r| r.records_per_s));
        let cpu = median(step.runs.iter().map(|r| r.cpu_s_per_gb));
        println!(
            "| {} | {} | {} | {} | {} | {:.0} % / {:+.0} % | {} |",
            step.idle_replicas_per_broker,
            range(step.runs.iter().map(|r| r.records_per_s), 0),
            range(step.runs.iter().map(|r| r.p99_ms), 0),
            range(step.runs.iter().map(|r| r.cpu_s_per_gb), 2),
            range(step.runs.iter().map(|r| r.partitions_per_append), 1),
            rate / base_rate * 100.0,
            (cpu / base_cpu - 1.0) * 100.0,
            range(step.idle_cpu_percent.iter().copied(), 2),
        );
    }
}

/// A chart's title, its y axis and how a step gives its value.
type Measure = (&'static str, &'static str, fn(&Step) -> f64);

/// Records/s, CPU per GB and idle CPU against idle replicas per broker.
fn charts(steps: &[Step]) -> Vec<Chart> {
    let measures: [Measure; 3] = [
        ("written topic: records/s (median)", "records/s", |s| {
            median(s.runs.iter().map(|r| r.records_per_s))
        }),
        (
            "brokers' CPU-s per GB written (median)",
            "CPU-s per GB",
            |s| median(s.runs.iter().map(|r| r.cpu_s_per_gb)),
        ),
        (
            "idle cluster: CPU per broker (median)",
            "% of a core",
            |s| median(s.idle_cpu_percent.iter().copied()),
        ),
    ];
    measures
        .into_iter()
        .map(|(title, y_label, of)| Chart {
            title: title.to_string(),
            x_label: "idle partition replicas per broker".to_string(),
            y_label: y_label.to_string(),
            log_y: false,
            series: vec![ChartSeries {
                name: "strom".to_string(),
                reference: false,
                points: steps
                    .iter()
                    .map(|s| (s.idle_replicas_per_broker as f64, of(s)))
                    .collect(),
            }],
        })
        .collect()
}
