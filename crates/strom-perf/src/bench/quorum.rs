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

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::Parser;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{ApiKey, CreateTopicsRequest, CreateTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::kafka_rpc;
use crate::local_cluster::{ClusterSpec, LocalCluster};

const TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Parser, Debug)]
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
}

pub fn main(argv: &[String]) -> ExitCode {
    super::clap_command::<Args>("strom bench quorum", argv, run)
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
        kafka_rpc::call(addr, ApiKey::CreateTopics, 7, &request, TIMEOUT)?;
    Ok(response.topics.first().is_some_and(|t| t.error_code == 0))
}

/// Whether the broker at `addr` has `topic` with a leader for each of `partitions`.
fn visible(addr: &str, topic: &str, partitions: i32) -> bool {
    kafka_rpc::metadata(addr, Duration::from_secs(5)).is_ok_and(|m| {
        m.topics.iter().any(|t| {
            t.name.as_ref().is_some_and(|n| n.as_str() == topic)
                && t.partitions.len() == partitions as usize
                && t.partitions.iter().all(|p| p.leader_id.0 >= 0)
        })
    })
}

fn summary(name: &str, values: &mut [f64]) {
    values.sort_by(f64::total_cmp);
    let median = values[values.len() / 2];
    let max = values[values.len() - 1];
    let all: Vec<String> = values.iter().map(|v| format!("{v:.1}")).collect();
    println!(
        "{name:<40} median {median:>8.1} ms   max {max:>8.1} ms   ({})",
        all.join(", ")
    );
}

fn run(args: &Args) -> Result<()> {
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
            super::poll(
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
        super::poll(
            "a new active controller",
            TIMEOUT,
            Duration::from_millis(1),
            || {
                kafka_rpc::describe_quorum(&survivor, Duration::from_secs(5)).is_ok_and(|q| {
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

    println!(
        "strom bench quorum: {} combined nodes, {} rounds, controller.quorum.election.timeout.ms {}",
        args.nodes,
        args.rounds,
        args.overrides
            .iter()
            .find_map(|o| o.strip_prefix("controller.quorum.election.timeout.ms="))
            .unwrap_or("1000 (default)")
    );
    summary("CreateTopics -> Metadata of every broker", &mut propagation);
    summary("kill -9 of the active controller -> elected", &mut elected);
    summary("kill -9 of the active controller -> write", &mut failover);
    Ok(())
}
