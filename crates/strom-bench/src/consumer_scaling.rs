//! `strom bench consumer-scaling`: seed 004 reproduced. For each record size, a
//! 3-partition topic is loaded with N records, then read by groups of 1, 3 and 6 consumers
//! that pass every record to a no-op handler and commit, and strom's records/s are printed
//! beside the seed's.
//!
//! The consumers are consumer-perf-test's (`--threads` consumers of one group), so the
//! consumer configuration and the consume loop are the ones `strom consumer-perf-test`
//! measures; only the handler is added. Commits are librdkafka's auto-commit, as the seed's
//! forwarding consumer relies on: offsets of the records handed to the handler are stored
//! and committed every `auto.commit.interval.ms` (5 s, Java's default too) and on close.
//! Each topic is deleted once its runs are done, as 10M records of 5000 bytes are 50 GB.

use std::time::Instant;

use anyhow::{Context, Result};

use crate::args::{BenchArgs, Defaults};
use crate::seeds;
use crate::table::thousands;
use strom_tools::cluster::Cluster;
use strom_tools::consumer_groups::client::GroupClient;
use strom_tools::consumer_perf_test::{self, run::ConsumerResult};
use strom_tools::producer_perf_test;
use strom_tools::report::{ComparisonRow, Report};
use strom_tools::topics;

/// Seed 004's topics have 3 partitions, fewer than its largest group.
const PARTITIONS: i32 = 3;

/// Kafka's default `max.partition.fetch.bytes`, which the seed's consumer kept.
const FETCH_SIZE: u64 = 1024 * 1024;

/// A consumer without partitions (6 consumers, 3 partitions) receives nothing and would
/// leave the group after consumer-perf-test's 10 s without records, forcing a rebalance
/// on the busy ones; it waits this long instead.
const IDLE_TIMEOUT_MS: u64 = 60_000;

/// strom's coordinator has no `group.initial.rebalance.delay.ms`, so the first consumer to
/// join is assigned every partition and consumes alone until its next heartbeat tells it
/// the others joined. librdkafka's default 3 s interval would let it read most of a small
/// topic alone; 100 ms keeps that phase short.
const HEARTBEAT_INTERVAL_MS: &str = "100";

pub const DEFAULTS: Defaults = Defaults {
    records: 10_000_000,
    json: "strom-bench-consumer-scaling.json",
    html: "strom-bench-consumer-scaling.html",
};

pub const HELP: &str = "usage: strom bench consumer-scaling [--bootstrap-server HOST:PORT] [--records N] [--json FILE] [--html FILE]

Reproduces seed 004: topics of 3 partitions holding N records of 10, 100, 1000 and 5000
bytes, each read by 1, 3 and 6 consumers of one group (6 > 3 partitions on purpose). Every
record goes to a no-op handler; offsets are auto-committed (every 5 s and on close).
Prints records/s, from the first record received to the last, beside the seed's figures.

  --bootstrap-server  run against this cluster (default: an embedded strom broker)
  --records N         records per topic (default: 10000000, as in the seed; that is about
                      61 GB of records and takes long on 2 cores: try --records 1000000)
  --json FILE         JSON report (default: strom-bench-consumer-scaling.json)
  --html FILE         HTML report (default: strom-bench-consumer-scaling.html)
";

/// Runs every size and group size, prints the table and writes both reports.
pub fn run(args: &BenchArgs, argv: &[String]) -> Result<()> {
    if args.clients.len() > 1 {
        anyhow::bail!(
            "consumer-scaling runs one load generator at a time: --client librdkafka or --client native"
        );
    }
    let started = Instant::now();
    let cluster = Cluster::connect(args.bootstrap_server.as_deref())?;
    let bootstrap = cluster.bootstrap().to_string();
    let prefix = format!("strom-consumer-scaling-{}", std::process::id());
    let mut report = Report::new("bench consumer-scaling", argv);
    let n = args.records;
    for (size, seed_rates) in seeds::CONSUMER_SCALING {
        let topic = format!("{prefix}-{size}b");
        topics::create_topic(&bootstrap, &topic, PARTITIONS, 1)?;
        eprintln!("strom bench consumer-scaling: loading {n} records of {size} bytes...");
        let load = crate::producer_args(&topic, n, size, -1.0, Vec::new());
        let loaded = producer_perf_test::run::run(&load, &bootstrap, Box::new(std::io::sink()))
            .with_context(|| format!("loading {size}-byte records"))?;
        report.runs.push(producer_perf_test::run_report(
            &format!("producer, load {size}-byte records"),
            &load,
            &loaded,
        ));
        let experiment = format!("004 {size}-byte records");
        for (consumers, seed_rate) in seeds::CONSUMER_COUNTS.into_iter().zip(seed_rates) {
            eprintln!(
                "strom bench consumer-scaling: {size}-byte records, {consumers} consumer(s)..."
            );
            let group = format!("{prefix}-{size}b-{consumers}c");
            let mut consumer = crate::consumer_args(&topic, n, FETCH_SIZE, &group)?;
            consumer.threads = consumers;
            consumer.client = args.clients[0];
            consumer.timeout_ms = IDLE_TIMEOUT_MS;
            consumer.properties = vec![(
                "heartbeat.interval.ms".to_string(),
                HEARTBEAT_INTERVAL_MS.to_string(),
            )];
            let measured = consumer_perf_test::run::run_with_handler(
                &consumer,
                &bootstrap,
                &mut std::io::sink(),
                &|record| {
                    std::hint::black_box(record);
                },
            )
            .and_then(|result| {
                let committed = committed(&bootstrap, &group, &topic)?;
                Ok((result, committed))
            });
            match measured {
                Ok((result, committed)) => {
                    report.comparison.extend(rows(
                        &experiment,
                        consumers,
                        &result,
                        committed,
                        seed_rate,
                    ));
                    report.runs.push(consumer_perf_test::run_report(
                        &format!("consumer, {size}-byte records, {consumers} consumer(s)"),
                        &consumer,
                        &result,
                    ));
                }
                Err(e) => report.comparison.push(crate::failed(&experiment, &e)),
            }
        }
        topics::delete_topic(&bootstrap, &topic)?;
    }
    drop(cluster);

    crate::finish(&report, args, "topic", started)
}

/// The offsets `group` committed on `topic`, summed over its partitions: N once every
/// record was handled and committed.
fn committed(bootstrap: &str, group: &str, topic: &str) -> Result<i64> {
    let partitions: Vec<_> = (0..PARTITIONS).map(|p| (topic.to_string(), p)).collect();
    let offsets = GroupClient::connect(bootstrap)?.committed(group, &partitions)?;
    Ok(offsets.values().sum())
}

/// The table rows of one group: records/s beside the seed's, then how the records were
/// spread over the consumers and what the group committed.
fn rows(
    experiment: &str,
    consumers: usize,
    result: &ConsumerResult,
    committed: i64,
    seed_rate: f64,
) -> Vec<ComparisonRow> {
    let plural = if consumers == 1 { "" } else { "s" };
    let label = format!("{consumers} consumer{plural}");
    let timed_out = if result.timed_out { " (timed out)" } else { "" };
    let rate = result
        .first_to_last
        .map(|d| result.summary.messages as f64 / d.as_secs_f64().max(1e-9))
        .unwrap_or(0.0);
    let per_consumer: Vec<String> = result
        .per_consumer
        .iter()
        .map(|&r| thousands(r as f64))
        .collect();
    vec![
        crate::row(
            experiment,
            &format!("records/s, {label}{timed_out}"),
            thousands(rate),
            Some(thousands(seed_rate)),
        ),
        crate::row(
            experiment,
            &format!("records per consumer, {label}"),
            per_consumer.join(" / "),
            None,
        ),
        crate::row(
            experiment,
            &format!("committed offsets, {label}"),
            thousands(committed as f64),
            None,
        ),
    ]
}
