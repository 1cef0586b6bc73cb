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
//! It also reports that broker's resident memory once it leads again, so the memory per
//! hosted replica can be read off the steps.
//!
//! Each measurement starts from a settled cluster, as the seed's did: the killed nodes
//! back, every ISR whole and every partition led by its preferred replica (ElectLeaders
//! PREFERRED). The sweep runs once per `--session-timeout-ms` value (the seed's
//! 6000-ms ZooKeeper session and Kafka's 9000-ms default); `--max-topics` scales it down,
//! and `--rounds N` repeats the measurements at each step so the figures carry a range
//! (the tables show each measure's median, the JSON every round).
//!
//! The reports (`--json`, `--html`) hold every step of every sweep; the HTML page opens
//! with a chart per measure against partitions per broker, a series per sweep beside the
//! seed's Kafka 1.0 and 1.1.

use std::collections::BTreeSet;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, ElectLeadersRequest, ElectLeadersResponse,
    MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use serde::Serialize;

use crate::args::ReportFiles;
use strom_client::blocking;
use strom_testkit::local_cluster::{ClusterSpec, LocalCluster, NodeInfo, Role};
use strom_tools::process_stats::resident_mb;
use strom_tools::report::{Chart, ChartSeries, ClusterShape, ComparisonRow, Report};

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

#[derive(Parser, Debug, Serialize)]
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
    /// Rounds of the four measurements at each step; the tables and charts show each
    /// measure's median, the JSON every round.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// Extra settings for every node, `key=value` (repeatable).
    #[arg(long = "override")]
    overrides: Vec<String>,
    #[command(flatten)]
    #[serde(skip)]
    reports: ReportFiles,
}

pub fn main(argv: &[String]) -> ExitCode {
    crate::clap_command::<Args>("strom bench controller", argv, run)
}

/// One round of a step's measurements, in seconds.
#[derive(Serialize, Clone, Copy)]
struct Round {
    startup_s: f64,
    shutdown_s: f64,
    failover_s: f64,
    kill9_s: f64,
}

/// One step: each measure's median over its rounds, in seconds, and every round.
#[derive(Serialize)]
struct Step {
    topics: u32,
    replicas_per_broker: u32,
    #[serde(flatten)]
    median: Round,
    /// The restarted broker's resident memory once it leads its partitions again (after
    /// the last round): what hosting `replicas_per_broker` replicas costs.
    broker_rss_mb: f64,
    rounds: Vec<Round>,
}

impl Step {
    fn new(topics: u32, rounds: Vec<Round>, broker_rss_mb: f64) -> Self {
        let median = |of: fn(&Round) -> f64| median(rounds.iter().map(of).collect());
        Self {
            topics,
            replicas_per_broker: topics * PARTITIONS_PER_TOPIC as u32 * REPLICATION as u32
                / BROKERS as u32,
            median: Round {
                startup_s: median(|r| r.startup_s),
                shutdown_s: median(|r| r.shutdown_s),
                failover_s: median(|r| r.failover_s),
                kill9_s: median(|r| r.kill9_s),
            },
            broker_rss_mb,
            rounds,
        }
    }
}

/// The median of `values` (the mean of the middle two for an even count).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// One sweep of the steps, at one `broker.session.timeout.ms`.
#[derive(Serialize)]
struct Sweep {
    session_timeout_ms: u64,
    steps: Vec<Step>,
}

/// What a step times, in the printed table's order.
#[derive(Debug, Clone, Copy)]
enum Measure {
    StartUp,
    Shutdown,
    Failover,
    Kill9,
}

const MEASURES: [Measure; 4] = [
    Measure::StartUp,
    Measure::Shutdown,
    Measure::Failover,
    Measure::Kill9,
];

impl Measure {
    fn name(self) -> &'static str {
        match self {
            Self::StartUp => "broker start-up",
            Self::Shutdown => "controlled shutdown",
            Self::Failover => "controller failover",
            Self::Kill9 => "kill -9 handling",
        }
    }

    /// strom's time at `step` (the median of its rounds), in seconds.
    fn of(self, step: &Step) -> f64 {
        self.in_round(&step.median)
    }

    /// strom's time in `round`, in seconds.
    fn in_round(self, round: &Round) -> f64 {
        match self {
            Self::StartUp => round.startup_s,
            Self::Shutdown => round.shutdown_s,
            Self::Failover => round.failover_s,
            Self::Kill9 => round.kill9_s,
        }
    }

    /// `1.17 s`, or with several rounds `1.17 s (1.02–1.30)`: the median and the range.
    fn shown(self, step: &Step) -> String {
        let values: Vec<f64> = step.rounds.iter().map(|r| self.in_round(r)).collect();
        let (low, high) = crate::min_max(values.iter().copied());
        if values.len() > 1 {
            format!("{:.2} s ({low:.2}–{high:.2})", self.of(step))
        } else {
            format!("{:.2} s", self.of(step))
        }
    }

    /// The seed's times at its step `row`, in seconds: Kafka 1.0's, then 1.1's.
    fn seed(self, row: &SeedRow) -> [Option<u32>; 2] {
        let (_, _, v10, k10, v11, k11) = *row;
        match self {
            Self::Kill9 => [k10, k11],
            // The seed's arrays hold start-up, shutdown and failover, in this order.
            other => [Some(v10[other as usize]), Some(v11[other as usize])],
        }
    }
}

/// The seed's step of `topics` topics (strom's steps are the seed's).
fn seed_row(topics: u32) -> &'static SeedRow {
    SEED.iter().find(|s| s.0 == topics).expect("a seed step")
}

/// A seed figure as printed: `-` where the seed reported none.
fn shown(value: Option<u32>) -> String {
    value.map_or_else(|| "-".to_string(), |v| v.to_string())
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
        blocking::call(addr, ApiKey::CreateTopics, 7, &request, TIMEOUT)?;
    Ok(response.topics.iter().all(|t| t.error_code == 0))
}

fn metadata(addr: &str) -> Result<MetadataResponse> {
    blocking::metadata(addr, Duration::from_secs(30))
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

/// Whether every partition in `m` has its whole replica set in the ISR, and whether
/// every one is led by its preferred (first) replica.
fn settled(m: &MetadataResponse) -> (bool, bool) {
    let partitions = || m.topics.iter().flat_map(|t| &t.partitions);
    let whole = partitions().all(|p| p.isr_nodes.len() == p.replica_nodes.len());
    let preferred = partitions().all(|p| p.replica_nodes.first() == Some(&p.leader_id));
    (whole, preferred)
}

/// Waits until the cluster is quiet again after a broker came back: every ISR whole,
/// then ElectLeaders PREFERRED of every partition through `witness` until each is led by
/// its preferred replica. Each measurement then starts, as the seed's did, from a
/// settled cluster, not from one still moving thousands of leaderships and ISRs (which
/// the next measurement's requests would queue behind).
fn settle(witness: &str) -> Result<()> {
    poll("every ISR whole again", || {
        Ok(settled(&metadata(witness)?).0)
    })?;
    poll("every partition led by its preferred replica", || {
        let elect = ElectLeadersRequest::default()
            .with_election_type(0)
            .with_timeout_ms(60_000)
            .with_topic_partitions(None);
        let _: ElectLeadersResponse =
            blocking::call(witness, ApiKey::ElectLeaders, 2, &elect, TIMEOUT)?;
        Ok(settled(&metadata(witness)?).1)
    })
}

fn secs(started: Instant) -> f64 {
    started.elapsed().as_secs_f64()
}

/// [`crate::poll`] every 5 ms for up to [`TIMEOUT`]; an error of `condition` counts as
/// not yet.
fn poll(what: &str, mut condition: impl FnMut() -> Result<bool>) -> Result<()> {
    crate::poll(what, TIMEOUT, Duration::from_millis(5), || {
        condition().unwrap_or(false)
    })
}

/// One round at a settled cluster: a controlled shutdown and start-up of `victim`, a kill
/// -9 of the active controller (timed until `probe` is created through `witness`), and a
/// kill -9 of `victim`; every node is back and the cluster settled again at the end.
fn measure_round(
    cluster: &mut LocalCluster,
    victim: i32,
    witness: &str,
    probe: &str,
) -> Result<Round> {
    let (shutdown, _) = cluster.terminate(victim)?;
    let startup = cluster.restart(victim)?;
    settle(witness)?;

    let old = cluster.active_controller()?;
    let started = Instant::now();
    cluster.kill9(old)?;
    poll("a new active controller accepting a write", || {
        create_topics(witness, &[probe.to_string()], 1, 1)
    })?;
    let failover = secs(started);
    cluster.restart(old)?;

    let (led, _) = led_by(&metadata(witness)?, victim);
    let started = Instant::now();
    cluster.kill9(victim)?;
    poll("new leaders for the killed broker's partitions", || {
        let m = metadata(witness)?;
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
    settle(witness)?;
    Ok(Round {
        startup_s: startup.as_secs_f64(),
        shutdown_s: shutdown.as_secs_f64(),
        failover_s: failover,
        kill9_s: kill9,
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
        settle(&witness)?;
        eprintln!("strom bench controller: {topics} topics...");

        let mut rounds = Vec::new();
        for round in 0..args.rounds {
            let probe = format!("seed003-probe-{topics}-{session_ms}-{round}");
            rounds.push(measure_round(&mut cluster, victim, &witness, &probe)?);
        }
        let broker_rss_mb = cluster
            .node(victim)
            .pid
            .context("the restarted broker has no pid")
            .and_then(resident_mb)?;
        steps.push(Step::new(topics, rounds, broker_rss_mb));
        // Each step's figures as it ends: a long sweep that fails later keeps them.
        let step = steps.last().expect("just pushed");
        let figures: Vec<String> = MEASURES
            .iter()
            .map(|m| format!("{} {}", m.name(), m.shown(step)))
            .collect();
        eprintln!(
            "strom bench controller: {topics} topics, {} replicas per broker: {}, broker RSS {:.1} MB",
            step.replicas_per_broker,
            figures.join(", "),
            step.broker_rss_mb
        );
    }
    Ok(steps)
}

fn print(sweep: &Sweep) {
    let rounds = sweep.steps.first().map_or(1, |s| s.rounds.len());
    let medians = if rounds > 1 {
        format!(", strom's the median of {rounds} rounds")
    } else {
        String::new()
    };
    println!(
        "\nstrom: {CONTROLLERS} controllers, {BROKERS} brokers, RF {REPLICATION}, {PARTITIONS_PER_TOPIC} partitions per topic, broker.session.timeout.ms={}; seed 003: Kafka 1.0 / 1.1 (ZooKeeper session 6 s); seconds{medians}",
        sweep.session_timeout_ms
    );
    let names: Vec<String> = MEASURES
        .iter()
        .map(|m| format!("{:>18}", m.name()))
        .collect();
    println!(
        "{:>6} {:>10} {:>10} | {} | {:>8}",
        "topics",
        "replicas/",
        "seed",
        names.join(" | "),
        "broker"
    );
    println!(
        "{:>6} {:>10} {:>10} | {} | {:>8}",
        "",
        "broker",
        "part./brk",
        vec![format!("{:>18}", "strom  1.0  1.1"); MEASURES.len()].join(" | "),
        "RSS MB"
    );
    for step in &sweep.steps {
        let seed = seed_row(step.topics);
        let cells: Vec<String> = MEASURES
            .iter()
            .map(|m| {
                let [v10, v11] = m.seed(seed).map(shown);
                format!("{:>7.2} {v10:>4} {v11:>4}", m.of(step))
            })
            .collect();
        println!(
            "{:>6} {:>10} {:>10} | {} | {:>8.1}",
            step.topics,
            step.replicas_per_broker,
            seed.1,
            cells.join(" | "),
            step.broker_rss_mb
        );
    }
}

fn run(args: &Args, argv: &[String]) -> Result<()> {
    if !SEED.iter().any(|s| s.0 <= args.max_topics) {
        bail!("--max-topics must be at least 1");
    }
    let mut sweeps = Vec::new();
    for &session_ms in &args.session_timeout_ms {
        let sweep = Sweep {
            session_timeout_ms: session_ms,
            steps: sweep(args, session_ms)?,
        };
        print(&sweep);
        sweeps.push(sweep);
    }
    let cluster = ClusterShape {
        brokers: BROKERS,
        controllers: CONTROLLERS,
        combined: false,
        replication_factor: REPLICATION,
        partitions: format!(
            "{PARTITIONS_PER_TOPIC} per topic, topics added in the seed's steps up to {}",
            args.max_topics
        ),
        links: None,
    };
    let mut report = Report::for_cluster("bench controller", argv, args, cluster)?;
    report.figures = serde_json::json!({ "sweeps": sweeps });
    report.charts = MEASURES.iter().map(|&m| chart(m, &sweeps)).collect();
    report.comparison = sweeps.iter().flat_map(rows).collect();
    args.reports.write("controller", &report)
}

/// `measure` against partitions per broker: strom's series per sweep, at its replicas per
/// broker, and the seed's Kafka 1.0 and 1.1 where the seed reported the measure, at the
/// steps the sweeps ran and at the per-broker count the seed gave, on a log axis (strom's
/// times and the seed's are orders of magnitude apart).
fn chart(measure: Measure, sweeps: &[Sweep]) -> Chart {
    let mut series: Vec<ChartSeries> = sweeps
        .iter()
        .map(|sweep| ChartSeries {
            name: format!(
                "strom, broker.session.timeout.ms={}",
                sweep.session_timeout_ms
            ),
            reference: false,
            points: sweep
                .steps
                .iter()
                .map(|step| (f64::from(step.replicas_per_broker), measure.of(step)))
                .collect(),
        })
        .collect();
    let ran: BTreeSet<u32> = sweeps
        .iter()
        .flat_map(|sweep| sweep.steps.iter().map(|step| step.topics))
        .collect();
    for (version, kafka) in ["Kafka 1.0", "Kafka 1.1"].into_iter().enumerate() {
        let points: Vec<(f64, f64)> = ran
            .iter()
            .map(|&topics| seed_row(topics))
            .filter_map(|row| measure.seed(row)[version].map(|v| (f64::from(row.1), f64::from(v))))
            .collect();
        if !points.is_empty() {
            series.push(ChartSeries {
                name: format!("{kafka} (seed 003, ZooKeeper session 6 s)"),
                reference: true,
                points,
            });
        }
    }
    Chart {
        title: format!("seed 003: {}", measure.name()),
        x_label: "partitions (replicas) per broker".to_string(),
        y_label: "seconds, log scale".to_string(),
        log_y: true,
        series,
    }
}

/// The printed table of one sweep as comparison rows: a row per step and measure, strom's
/// seconds beside the seed's Kafka 1.0 / 1.1.
fn rows(sweep: &Sweep) -> Vec<ComparisonRow> {
    sweep
        .steps
        .iter()
        .flat_map(|step| {
            let experiment = format!(
                "{} x {PARTITIONS_PER_TOPIC} partitions, {} replicas/broker, session {} ms",
                step.topics, step.replicas_per_broker, sweep.session_timeout_ms
            );
            MEASURES.map(|m| {
                let [v10, v11] = m.seed(seed_row(step.topics)).map(shown);
                crate::row(
                    &experiment,
                    &format!("{}, s (seed: Kafka 1.0 / 1.1)", m.name()),
                    format!("{:.2}", m.of(step)),
                    Some(format!("{v10} / {v11}")),
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(seconds: f64) -> Round {
        Round {
            startup_s: seconds,
            shutdown_s: seconds,
            failover_s: seconds,
            kill9_s: seconds,
        }
    }

    fn step(topics: u32, seconds: f64) -> Step {
        Step::new(topics, vec![round(seconds)], 50.0)
    }

    #[test]
    fn a_step_shows_the_median_of_its_rounds_and_their_range() {
        let three = Step::new(221, [1.3, 1.0, 1.2].map(round).into(), 124.0);
        assert_eq!(three.replicas_per_broker, 13_260);
        assert_eq!(three.median.failover_s, 1.2);
        assert_eq!(Measure::Failover.shown(&three), "1.20 s (1.00–1.30)");
        let even = Step::new(1, [1.0, 2.0].map(round).into(), 10.0);
        assert_eq!(even.median.kill9_s, 1.5);
        assert_eq!(Measure::Kill9.shown(&step(1, 6.2)), "6.20 s");
    }

    fn sweeps() -> Vec<Sweep> {
        [(6000, 0.5), (9000, 0.7)]
            .map(|(session_timeout_ms, s)| Sweep {
                session_timeout_ms,
                steps: vec![step(1, s), step(16, s)],
            })
            .into()
    }

    #[test]
    fn reads_the_seed_figures_of_each_measure() {
        let last = seed_row(221);
        assert_eq!(Measure::StartUp.seed(last), [Some(13), Some(12)]);
        assert_eq!(Measure::Shutdown.seed(last), [Some(108), Some(13)]);
        assert_eq!(Measure::Failover.seed(last), [Some(98), Some(16)]);
        assert_eq!(Measure::Kill9.seed(last), [None, None]);
        assert_eq!(Measure::Kill9.seed(seed_row(1)), [Some(9), Some(5)]);
    }

    #[test]
    fn charts_a_series_per_sweep_beside_the_seed_at_the_steps_run() {
        let sweeps = sweeps();
        let shutdown = chart(Measure::Shutdown, &sweeps);
        assert_eq!(shutdown.title, "seed 003: controlled shutdown");
        let names: Vec<&str> = shutdown.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "strom, broker.session.timeout.ms=6000",
                "strom, broker.session.timeout.ms=9000",
                "Kafka 1.0 (seed 003, ZooKeeper session 6 s)",
                "Kafka 1.1 (seed 003, ZooKeeper session 6 s)",
            ]
        );
        assert_eq!(shutdown.series[1].points, [(60.0, 0.7), (960.0, 0.7)]);
        assert!(!shutdown.series[1].reference && shutdown.series[2].reference);
        // The seed's own per-broker counts, at the two steps run only.
        assert_eq!(shutdown.series[2].points, [(40.0, 4.0), (1000.0, 22.0)]);
        // The seed timed kill -9 handling up to 12 topics.
        let kill9 = chart(Measure::Kill9, &sweeps);
        assert_eq!(kill9.series[3].points, [(40.0, 5.0)]);
    }

    #[test]
    fn a_row_per_step_and_measure_beside_the_seed() {
        let sweeps = sweeps();
        let rows = rows(&sweeps[0]);
        assert_eq!(rows.len(), 2 * MEASURES.len());
        let kill9 = &rows[7];
        assert_eq!(
            kill9.experiment,
            "16 x 100 partitions, 960 replicas/broker, session 6000 ms"
        );
        assert_eq!(kill9.metric, "kill -9 handling, s (seed: Kafka 1.0 / 1.1)");
        assert_eq!(
            (kill9.strom.as_str(), kill9.seed.as_str()),
            ("0.50", "- / -")
        );
        assert_eq!(rows[0].seed, "5 / 5");
    }
}
