//! `strom bench controller`: seed 003 — five brokers, a quorum of three controllers, and
//! 100-partition topics of replication factor 3 added in the seed's steps (1, 2, 3, 4,
//! 6, 9, 12, 16, 31, 46, 61, 91, 121, 151, 181, 221 topics). At each step it times, as
//! the seed did:
//!
//! - controlled shutdown: SIGTERM to a broker → its process exited (leaderships moved);
//! - broker start-up: that broker started again → this incarnation registered and
//!   unfenced, having caught up with the metadata and opened every partition it hosts;
//! - controller failover: kill -9 of the active controller → a CreateTopics through a
//!   broker accepted by a new one;
//! - kill -9 handling: kill -9 of a broker → every partition it led has another leader in
//!   Metadata (bounded below by `broker.session.timeout.ms`, as the seed's by the
//!   ZooKeeper session).
//!
//! Between steps the killed nodes are back and an ElectLeaders PREFERRED restores the
//! leadership spread. The sweep runs once per `--session-timeout-ms` value (the seed's
//! 6000-ms ZooKeeper session and Kafka's 9000-ms default); `--max-topics` scales it down.

use std::collections::BTreeSet;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::Parser;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, ElectLeadersRequest, ElectLeadersResponse,
    MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::kafka_rpc;
use crate::local_cluster::{ClusterSpec, LocalCluster, NodeInfo, Role};

const TIMEOUT: Duration = Duration::from_secs(300);
const BROKERS: usize = 5;
const CONTROLLERS: usize = 3;
const PARTITIONS_PER_TOPIC: i32 = 100;
const REPLICATION: i16 = 3;

/// The seed's steps: topics, partitions per broker as it reported them, then Kafka 1.0's
/// and 1.1's start-up, shutdown, failover and kill -9 handling in seconds (`None`:
/// not reported).
type SeedRow = (u32, u32, [u32; 3], Option<u32>, [u32; 3], Option<u32>);
const SEED: [SeedRow; 16] = [
    (1, 40, [5, 4, 6], Some(9), [5, 2, 1], Some(5)),
    (2, 100, [6, 4, 5], Some(6), [4, 2, 1], Some(5)),
    (3, 160, [6, 4, 30], Some(7), [5, 4, 2], Some(6)),
    (4, 220, [5, 3, 30], Some(7), [4, 2, 2], Some(6)),
    (6, 400, [5, 4, 19], Some(7), [5, 2, 1], Some(6)),
    (9, 580, [7, 18, 30], Some(6), [5, 3, 2], Some(6)),
    (12, 760, [7, 20, 21], Some(9), [6, 4, 1], Some(6)),
    (16, 1000, [7, 22, 22], None, [7, 3, 2], None),
    (31, 1900, [8, 22, 32], None, [6, 5, 3], None),
    (46, 2800, [7, 25, 39], None, [7, 5, 3], None),
    (61, 3700, [8, 34, 33], None, [4, 7, 4], None),
    (91, 5500, [8, 113, 47], None, [7, 7, 6], None),
    (121, 7300, [9, 92, 97], None, [10, 8, 8], None),
    (151, 9100, [10, 86, 85], None, [9, 8, 10], None),
    (181, 10900, [12, 87, 87], None, [10, 10, 12], None),
    (221, 13300, [13, 108, 98], None, [12, 13, 16], None),
];

#[derive(Parser, Debug)]
#[command(
    name = "strom bench controller",
    about = "Seed 003: broker start-up, controlled shutdown, controller failover and kill -9 handling as partitions grow"
)]
struct Args {
    /// Stop after the last step with at most this many topics.
    #[arg(long, default_value_t = 221)]
    max_topics: u32,
    /// `broker.session.timeout.ms` values, one sweep each.
    #[arg(long, value_delimiter = ',', default_value = "6000,9000")]
    session_timeout_ms: Vec<u64>,
    /// Extra settings for every node, `key=value` (repeatable).
    #[arg(long = "override")]
    overrides: Vec<String>,
}

pub fn main(argv: &[String]) -> ExitCode {
    super::clap_command::<Args>("strom bench controller", argv, run)
}

/// One step's measurements, in seconds.
struct Step {
    topics: u32,
    replicas_per_broker: u32,
    startup: f64,
    shutdown: f64,
    failover: f64,
    kill9: f64,
}

fn create_topics(addr: &str, names: &[String], partitions: i32, rf: i16) -> Result<bool> {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(60_000)
        .with_topics(
            names
                .iter()
                .map(|n| {
                    CreatableTopic::default()
                        .with_name(TopicName(StrBytes::from_string(n.clone())))
                        .with_num_partitions(partitions)
                        .with_replication_factor(rf)
                })
                .collect(),
        );
    let response: CreateTopicsResponse =
        kafka_rpc::call(addr, ApiKey::CreateTopics, 7, &request, TIMEOUT)?;
    Ok(response.topics.iter().all(|t| t.error_code == 0))
}

fn metadata(addr: &str) -> Result<MetadataResponse> {
    kafka_rpc::metadata(addr, Duration::from_secs(30))
}

/// The (topic, partition) pairs `broker` leads, and whether every partition has a leader.
fn led_by(m: &MetadataResponse, broker: i32) -> (BTreeSet<(String, i32)>, bool) {
    let mut led = BTreeSet::new();
    let mut all_led = true;
    for t in &m.topics {
        let name = t.name.as_ref().map_or_else(String::new, |n| n.to_string());
        for p in &t.partitions {
            all_led &= p.leader_id.0 >= 0;
            if p.leader_id.0 == broker {
                led.insert((name.clone(), p.partition_index));
            }
        }
    }
    (led, all_led)
}

/// ElectLeaders PREFERRED of every partition through `witness`, until `broker` leads
/// again (its replicas first rejoin the ISRs).
fn restore_preferred_leaders(witness: &str, broker: i32) -> Result<()> {
    poll("the restarted broker leading again", || {
        let elect = ElectLeadersRequest::default()
            .with_election_type(0)
            .with_timeout_ms(60_000)
            .with_topic_partitions(None);
        let _: ElectLeadersResponse =
            kafka_rpc::call(witness, ApiKey::ElectLeaders, 2, &elect, TIMEOUT)?;
        Ok(!led_by(&metadata(witness)?, broker).0.is_empty())
    })
}

fn secs(started: Instant) -> f64 {
    started.elapsed().as_secs_f64()
}

/// [`super::poll`] every 5 ms for up to [`TIMEOUT`]; an error of `condition` counts as
/// not yet.
fn poll(what: &str, mut condition: impl FnMut() -> Result<bool>) -> Result<()> {
    super::poll(what, TIMEOUT, Duration::from_millis(5), || {
        condition().unwrap_or(false)
    })
}

fn sweep(args: &Args, session_ms: u64) -> Result<Vec<Step>> {
    let mut extra = vec![
        format!("broker.session.timeout.ms={session_ms}"),
        "auto.leader.rebalance.enable=false".to_string(),
    ];
    extra.extend(args.overrides.iter().cloned());
    let spec = ClusterSpec {
        brokers: BROKERS,
        controllers: CONTROLLERS,
        extra,
        isolated: false,
    };
    eprintln!(
        "strom bench controller: {CONTROLLERS} controllers + {BROKERS} brokers, broker.session.timeout.ms={session_ms}..."
    );
    let mut cluster = LocalCluster::start(&spec, None)?;
    let brokers: Vec<NodeInfo> = cluster
        .nodes
        .iter()
        .filter(|n| n.role == Role::Broker)
        .cloned()
        .collect();
    let victim = brokers.last().expect("brokers").id;
    let witness = brokers[0].address();
    let mut steps = Vec::new();
    let mut created = 0u32;
    for &(topics, ..) in SEED.iter().filter(|s| s.0 <= args.max_topics) {
        let names: Vec<String> = (created..topics).map(|i| format!("seed003-{i}")).collect();
        for chunk in names.chunks(10) {
            if !create_topics(&witness, chunk, PARTITIONS_PER_TOPIC, REPLICATION)? {
                bail!("CreateTopics of {chunk:?} was refused");
            }
        }
        created = topics;
        poll("every partition led", || {
            let m = metadata(&witness)?;
            let (_, all_led) = led_by(&m, -2);
            let count: usize = m.topics.iter().map(|t| t.partitions.len()).sum();
            Ok(all_led && count as u32 >= topics * PARTITIONS_PER_TOPIC as u32)
        })?;
        eprintln!("strom bench controller: {topics} topics...");

        let (shutdown, _) = cluster.terminate(victim)?;
        let startup = cluster.restart(victim)?;
        restore_preferred_leaders(&witness, victim)?;

        let old = cluster.active_controller()?;
        let started = Instant::now();
        cluster.kill9(old)?;
        let probe = format!("seed003-probe-{topics}-{session_ms}");
        poll("a new active controller accepting a write", || {
            create_topics(&witness, std::slice::from_ref(&probe), 1, 1)
        })?;
        let failover = secs(started);
        cluster.restart(old)?;

        let (led, _) = led_by(&metadata(&witness)?, victim);
        let started = Instant::now();
        cluster.kill9(victim)?;
        poll("new leaders for the killed broker's partitions", || {
            let m = metadata(&witness)?;
            Ok(m.topics.iter().all(|t| {
                let name = t.name.as_ref().map_or_else(String::new, |n| n.to_string());
                t.partitions.iter().all(|p| {
                    !led.contains(&(name.clone(), p.partition_index))
                        || (p.leader_id.0 >= 0 && p.leader_id.0 != victim)
                })
            }))
        })?;
        let kill9 = secs(started);
        if led.is_empty() {
            bail!("broker {victim} led no partition to take over");
        }
        cluster.restart(victim)?;
        restore_preferred_leaders(&witness, victim)?;

        steps.push(Step {
            topics,
            replicas_per_broker: topics * PARTITIONS_PER_TOPIC as u32 * REPLICATION as u32
                / BROKERS as u32,
            startup: startup.as_secs_f64(),
            shutdown: shutdown.as_secs_f64(),
            failover,
            kill9,
        });
    }
    Ok(steps)
}

fn print(session_ms: u64, steps: &[Step]) {
    println!(
        "\nstrom: {CONTROLLERS} controllers, {BROKERS} brokers, RF {REPLICATION}, {PARTITIONS_PER_TOPIC} partitions per topic, broker.session.timeout.ms={session_ms}; seed 003: Kafka 1.0 / 1.1 (ZooKeeper session 6 s), seconds"
    );
    println!(
        "{:>6} {:>10} {:>10} | {:>18} | {:>18} | {:>18} | {:>18}",
        "topics",
        "replicas/",
        "seed",
        "start-up",
        "controlled shutdown",
        "controller failover",
        "kill -9 handling"
    );
    println!(
        "{:>6} {:>10} {:>10} | {:>18} | {:>18} | {:>18} | {:>18}",
        "",
        "broker",
        "part./brk",
        "strom  1.0  1.1",
        "strom  1.0  1.1",
        "strom  1.0  1.1",
        "strom  1.0  1.1"
    );
    let opt = |v: Option<u32>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    for step in steps {
        let seed = SEED
            .iter()
            .find(|s| s.0 == step.topics)
            .expect("a seed step");
        let (_, per_broker, v10, k10, v11, k11) = *seed;
        println!(
            "{:>6} {:>10} {:>10} | {:>7.2} {:>4} {:>4} | {:>7.2} {:>4} {:>4} | {:>7.2} {:>4} {:>4} | {:>7.2} {:>4} {:>4}",
            step.topics,
            step.replicas_per_broker,
            per_broker,
            step.startup,
            v10[0],
            v11[0],
            step.shutdown,
            v10[1],
            v11[1],
            step.failover,
            v10[2],
            v11[2],
            step.kill9,
            opt(k10),
            opt(k11)
        );
    }
}

fn run(args: &Args) -> Result<()> {
    if !SEED.iter().any(|s| s.0 <= args.max_topics) {
        bail!("--max-topics must be at least 1");
    }
    for &session_ms in &args.session_timeout_ms {
        let steps = sweep(args, session_ms)?;
        print(session_ms, &steps);
    }
    Ok(())
}
