//! `strom bench quorum`: the metadata quorum of a local three-node cluster, timed as the
//! cluster issue asks —
//!
//! - metadata propagation: a CreateTopics sent to one broker → the topic, with a leader
//!   for every partition, in the Metadata of every broker;
//! - controller failover: kill -9 of the active controller → another voter reports itself
//!   active (DescribeQuorum), and → a CreateTopics through a surviving broker succeeds
//!   (the killed node is restarted and rejoins between rounds).
//!
//! Each is repeated (`--rounds`, default 10) and reported as median and max, with every
//! value, never as a best run. The client polls; its own cost is one Metadata or
//! DescribeQuorum round trip per millisecond at most.
//!
//! The reports (`--json`, `--html`) hold every value, and the page charts them per round.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::Parser;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{ApiKey, CreateTopicsRequest, CreateTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use serde::Serialize;

use crate::args::ReportFiles;
use crate::figure;
use strom_client::blocking;
use strom_testkit::local_cluster::{ClusterSpec, LocalCluster};
use strom_tools::report::{Chart, ChartSeries, ClusterShape, ComparisonRow, Report};

const TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Parser, Debug, Serialize)]
#[command(
    name = "strom bench quorum",
    about = "Metadata propagation and controller failover of a local cluster"
)]
struct Args {
    /// Repetitions of each measurement.
    #[arg(long, default_value_t = 10)]
    rounds: usize,
    /// Combined nodes in the cluster.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Partitions of each topic created.
    #[arg(long, default_value_t = 6)]
    partitions: i32,
    /// Extra settings for every node, `key=value` (repeatable).
    #[arg(long = "override")]
    overrides: Vec<String>,
    #[command(flatten)]
    #[serde(skip)]
    reports: ReportFiles,
}

impl Args {
    /// The value `--override KEY=VALUE` gives `key`, if any.
    fn overridden(&self, key: &str) -> Option<&str> {
        self.overrides
            .iter()
            .find_map(|o| o.strip_prefix(key)?.strip_prefix('='))
    }
}

/// What each round measures, as printed.
const MEASUREMENTS: [&str; 3] = [
    "CreateTopics -> Metadata of every broker",
    "kill -9 of the active controller -> elected",
    "kill -9 of the active controller -> write",
];

pub fn main(argv: &[String]) -> ExitCode {
    crate::clap_command::<Args>("strom bench quorum", argv, run)
}

/// Creates `topic` through the broker at `addr`; `Ok(false)` if the controller refused.
fn create_topic(addr: &str, topic: &str, partitions: i32) -> Result<bool> {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_num_partitions(partitions)
            .with_replication_factor(-1)]);
    let response: CreateTopicsResponse =
        blocking::call(addr, ApiKey::CreateTopics, 7, &request, TIMEOUT)?;
    Ok(response.topics.first().is_some_and(|t| t.error_code == 0))
}

/// Whether the broker at `addr` has `topic` with a leader for each of `partitions`.
fn visible(addr: &str, topic: &str, partitions: i32) -> bool {
    blocking::metadata(addr, Duration::from_secs(5)).is_ok_and(|m| {
        m.topics.iter().any(|t| {
            t.name.as_ref().is_some_and(|n| n.as_str() == topic)
                && t.partitions.len() == partitions as usize
                && t.partitions.iter().all(|p| p.leader_id.0 >= 0)
        })
    })
}

/// Prints a measurement's median, max and every value (sorted), in ms, and returns its
/// rows for the reports.
fn summary(name: &str, values: &[f64]) -> [ComparisonRow; 2] {
    let (median, max) = crate::median_max(values);
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let all: Vec<String> = sorted.iter().map(|v| format!("{v:.1}")).collect();
    println!(
        "{name:<40} median {median:>8.1} ms   max {max:>8.1} ms   ({})",
        all.join(", ")
    );
    let ms = |v: f64| format!("{v:.1} ms");
    [
        figure(name, "median", median, None, ms),
        figure(name, "max", max, None, ms),
    ]
}

fn run(args: &Args, argv: &[String]) -> Result<()> {
    let spec = ClusterSpec {
        brokers: args.nodes,
        controllers: 0,
        extra: args.overrides.clone(),
        isolated: false,
    };
    eprintln!(
        "strom bench quorum: starting {} combined nodes...",
        args.nodes
    );
    let mut cluster = LocalCluster::start(&spec, None)?;
    let brokers: Vec<(i32, String)> = cluster
        .nodes
        .iter()
        .map(|n| (n.id, format!("127.0.0.1:{}", n.port)))
        .collect();

    let mut propagation = Vec::new();
    for round in 0..args.rounds {
        let topic = format!("propagation-{round}");
        let started = Instant::now();
        if !create_topic(&brokers[round % brokers.len()].1, &topic, args.partitions)? {
            bail!("CreateTopics {topic} was refused");
        }
        for (_, addr) in &brokers {
            crate::poll(
                "topic visible on every broker",
                TIMEOUT,
                Duration::from_millis(1),
                || visible(addr, &topic, args.partitions),
            )?;
        }
        propagation.push(started.elapsed().as_secs_f64() * 1000.0);
    }

    let mut elected = Vec::new();
    let mut failover = Vec::new();
    for round in 0..args.rounds {
        let old = cluster.active_controller()?;
        let survivor = brokers
            .iter()
            .find(|(id, _)| *id != old)
            .expect("another node")
            .1
            .clone();
        let started = Instant::now();
        cluster.kill9(old)?;
        crate::poll(
            "a new active controller",
            TIMEOUT,
            Duration::from_millis(1),
            || {
                blocking::describe_quorum(&survivor, Duration::from_secs(5)).is_ok_and(|q| {
                    q.topics[0].partitions[0].leader_id.0 > 0
                        && q.topics[0].partitions[0].leader_id.0 != old
                })
            },
        )?;
        elected.push(started.elapsed().as_secs_f64() * 1000.0);
        let topic = format!("failover-{round}");
        while !create_topic(&survivor, &topic, 1)? {
            if started.elapsed() > TIMEOUT {
                bail!("no CreateTopics accepted after the controller's kill");
            }
        }
        failover.push(started.elapsed().as_secs_f64() * 1000.0);
        cluster.restart(old)?;
        cluster.wait_until_ready(TIMEOUT)?;
    }

    drop(cluster);

    println!(
        "strom bench quorum: {} combined nodes, {} rounds, controller.quorum.election.timeout.ms {}",
        args.nodes,
        args.rounds,
        args.overridden("controller.quorum.election.timeout.ms")
            .unwrap_or("1000 (default)")
    );
    let timings = [propagation, elected, failover];
    // The topics take the brokers' default.replication.factor, 1 unless overridden.
    let replication_factor = args
        .overridden("default.replication.factor")
        .and_then(|rf| rf.parse().ok())
        .unwrap_or(1);
    let cluster = ClusterShape::combined(
        args.nodes,
        replication_factor,
        format!("{} per topic created", args.partitions),
    );
    let mut report = Report::for_cluster("bench quorum", argv, args, cluster)?;
    report.figures = serde_json::json!({
        "ms_per_round": MEASUREMENTS
            .iter()
            .zip(&timings)
            .map(|(name, values)| serde_json::json!({ "measurement": name, "ms": values }))
            .collect::<Vec<_>>()
    });
    report.comparison = MEASUREMENTS
        .iter()
        .zip(&timings)
        .flat_map(|(name, values)| summary(name, values))
        .collect();
    report.charts.push(Chart {
        title: "Each round: propagation and failover".to_string(),
        x_label: "round".to_string(),
        y_label: "ms, log scale".to_string(),
        log_y: true,
        series: MEASUREMENTS
            .iter()
            .zip(&timings)
            .map(|(name, values)| ChartSeries {
                name: name.to_string(),
                reference: false,
                points: (1..).map(f64::from).zip(values.iter().copied()).collect(),
            })
            .collect(),
    });
    args.reports.write("quorum", &report)
}
