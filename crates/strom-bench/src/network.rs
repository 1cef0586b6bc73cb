//! `strom bench network`: seed 001 — three brokers on links capped at 100 Mbit/s, a
//! 3-partition topic of replication factor 2, producer runs of 100-byte records
//! (unthrottled with the default `batch.size`, with `batch.size=500`, and a `linger.ms`
//! sweep; acks=1, the default of the Kafka 2.x producer the seed ran) and consumer runs with `--fetch-size 10000` and `100000`, `--threads 1`.
//!
//! Each broker runs in its own network namespace behind a veth link shaped with `tc tbf`
//! in both directions; the load generator runs in an unshaped client namespace, as the
//! seed's fourth machine did. The table sets strom's figures beside the seed's and beside
//! the link-bound limit N·B/RF (every record crosses one broker's inbound link as a
//! produce and, for each further replica, another broker's as a follower fetch), before
//! protocol overhead. Network namespaces need root: without it this says so and fails.
//!
//! The reports (`--json`, `--html`) hold each run, the comparison rows (the figures as
//! numbers, so the page charts strom's MiB/s beside the seed's) and the link-bound limit.

use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Parser;
use serde::Serialize;

use crate::args::ReportFiles;
use crate::table::{self, thousands};
use crate::{consumer_args, failed, figure, producer_args, row};
use strom_testkit::local_cluster::{ClusterSpec, LocalCluster};
use strom_tools::consumer_perf_test;
use strom_tools::producer_perf_test;
use strom_tools::report::{ClusterShape, Report};
use strom_tools::topics;

/// Brokers and replication factor of seed 001.
const BROKERS: usize = 3;
const REPLICATION: i32 = 2;
const PARTITIONS: i32 = 3;

/// Seed 001's producer figures (MB/s as kafka-producer-perf-test printed them).
const SEED_DEFAULT_MB: f64 = 15.76;
const SEED_BATCH_500_MB: f64 = 2.08;
/// Seed 001's consumer figures: fetch size → MB/s.
const SEED_CONSUMER: [(u64, f64); 2] = [(10_000, 8.8749), (100_000, 11.6276)];

/// One producer run: its name, its producer properties and the seed's MiB/s, if any.
struct ProducerRun {
    name: String,
    properties: Vec<(String, String)>,
    seed_mb: Option<f64>,
}

#[derive(Parser, Debug, Serialize)]
#[command(
    name = "strom bench network",
    about = "Seed 001: three brokers on 100 Mbit/s links, RF 2, producer and consumer runs"
)]
struct Args {
    /// Records of each producer run, and messages of each consumer run (the seed sent
    /// 10,000,000; at 100 Mbit/s that is about a minute per run).
    #[arg(long, default_value_t = 1_000_000)]
    records: u64,
    /// The cap of each broker's link, in Mbit/s.
    #[arg(long, default_value_t = 100)]
    link_mbit: u32,
    /// The `linger.ms` values of the sweep.
    #[arg(long, value_delimiter = ',', default_value = "0,5,20,100")]
    linger_ms: Vec<u32>,
    #[command(flatten)]
    #[serde(skip)]
    reports: ReportFiles,
}

pub fn main(argv: &[String]) -> ExitCode {
    crate::clap_command::<Args>("strom bench network", argv, run)
}

fn run(args: &Args, argv: &[String]) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!(
            "seed 001 caps each broker's link with tc in its own network namespace, which needs root (CAP_NET_ADMIN). \
             Run it as root, or run the same producer and consumer runs without the caps: \
             strom cluster start --brokers 3, then strom producer-perf-test / consumer-perf-test against it"
        );
    }
    eprintln!(
        "strom bench network: {BROKERS} brokers in network namespaces, links capped at {} Mbit/s...",
        args.link_mbit
    );
    let spec = ClusterSpec {
        brokers: BROKERS,
        controllers: 0,
        extra: Vec::new(),
        isolated: true,
    };
    // This thread moves into the unshaped client namespace; the perf tools' librdkafka
    // threads are born there.
    let cluster = LocalCluster::start(&spec, None)?;
    let network = cluster.network().expect("an isolated cluster");
    for node in &cluster.nodes {
        network.shape(node.id, args.link_mbit)?;
    }
    let bootstrap = cluster.bootstrap();
    let topic = "test";
    topics::create_topic(&bootstrap, topic, PARTITIONS, REPLICATION)?;
    let limit_mb = BROKERS as f64 * f64::from(args.link_mbit) / 8.0 * 1e6
        / (1024.0 * 1024.0)
        / f64::from(REPLICATION);
    let limit = format!(
        "{BROKERS} brokers x {} Mbit/s / RF {REPLICATION} = {limit_mb:.2} MiB/s",
        args.link_mbit
    );
    let mut cluster = ClusterShape::combined(BROKERS, REPLICATION as i16, PARTITIONS.to_string());
    cluster.links = Some(format!(
        "each node in its own network namespace, its link capped at {} Mbit/s each way (tc tbf); link-bound producer limit {limit}",
        args.link_mbit
    ));
    let mut report = Report::for_cluster("bench network", argv, args, cluster)?;
    report.figures = serde_json::json!({ "link_limit_mib_per_sec": limit_mb });
    let rows = &mut report.comparison;
    let mut producer_runs = vec![
        ProducerRun {
            name: "producer, default settings".into(),
            properties: Vec::new(),
            seed_mb: Some(SEED_DEFAULT_MB),
        },
        ProducerRun {
            name: "producer, batch.size=500".into(),
            properties: vec![("batch.size".into(), "500".into())],
            seed_mb: Some(SEED_BATCH_500_MB),
        },
    ];
    for linger in &args.linger_ms {
        producer_runs.push(ProducerRun {
            name: format!("producer, linger.ms={linger}"),
            properties: vec![("linger.ms".into(), linger.to_string())],
            seed_mb: None,
        });
    }
    for ProducerRun {
        name,
        mut properties,
        seed_mb,
    } in producer_runs
    {
        // The seed ran Kafka 2.x, whose producer defaulted to acks=1 (3.0 made it all).
        properties.insert(0, ("acks".into(), "1".into()));
        eprintln!("strom bench network: {name} ({} records)...", args.records);
        let producer = producer_args(topic, args.records, 100, -1.0, properties);
        match producer_perf_test::run::run(&producer, &bootstrap, Box::new(std::io::sink())) {
            Ok(result) => {
                let t = &result.totals;
                rows.push(figure(&name, "MB/s (MiB)", t.mib_per_sec(), seed_mb, |v| {
                    format!("{v:.2}")
                }));
                rows.push(figure(
                    &name,
                    "records/s",
                    t.records_per_sec(),
                    None,
                    thousands,
                ));
                rows.push(row(
                    &name,
                    "share of the link limit",
                    format!("{:.0} %", 100.0 * t.mib_per_sec() / limit_mb),
                    seed_mb.map(|v| format!("{:.0} %", 100.0 * v / limit_mb)),
                ));
                rows.push(row(
                    &name,
                    "avg latency",
                    format!("{:.1} ms", t.avg_latency_ms()),
                    None,
                ));
                report
                    .runs
                    .push(producer_perf_test::run_report(&name, &producer, &result));
            }
            Err(e) => rows.push(failed(&name, &e)),
        }
    }
    for (fetch_size, seed_mb) in SEED_CONSUMER {
        let name = format!("consumer, --fetch-size {fetch_size} --threads 1");
        eprintln!("strom bench network: {name}...");
        let consumer = consumer_args(
            topic,
            args.records,
            fetch_size,
            &format!("net-{fetch_size}"),
        )?;
        match consumer_perf_test::run::run(&consumer, &bootstrap, &mut std::io::sink()) {
            Ok(result) => {
                let s = &result.summary;
                rows.push(figure(
                    &name,
                    "MB/s (MiB)",
                    s.mib() / s.elapsed_sec(),
                    Some(seed_mb),
                    |v| format!("{v:.2}"),
                ));
                rows.push(figure(
                    &name,
                    "msg/s",
                    s.messages as f64 / s.elapsed_sec(),
                    None,
                    thousands,
                ));
                report
                    .runs
                    .push(consumer_perf_test::run_report(&name, &consumer, &result));
            }
            Err(e) => rows.push(failed(&name, &e)),
        }
    }
    println!("{}", table::render(&report.comparison));
    println!(
        "\nLink-bound limit for producers: {limit} before protocol overhead. Seed figures: docs/seeds.md (001)."
    );
    args.reports.write("network", &report)
}
