//! `strom bench faults`: the replication promise under real faults, checked from outside
//! as Jepsen checks it. A local cluster of combined nodes hosts a topic of replication
//! factor 3 with `min.insync.replicas=2`; a librdkafka producer (idempotent, acks=all by
//! default) writes numbered records while a nemesis, one fault at a time, kills -9,
//! SIGTERMs or SIGSTOPs a partition leader, kills a follower or the active controller,
//! and with `--network` cuts a leader off from everyone or only from the other nodes
//! (a partial partition: clients still reach it), and brings it back once the fault has
//! had its effect. Between faults every partition's ISR is whole again, so at most one
//! replica is ever missing. Afterwards every partition is read back to its high
//! watermark and checked: no acknowledged record lost or changed (each is at the offset
//! it was acknowledged at), none duplicated, each partition in the order it was
//! produced, and no two records at one offset. A duplicate whose second copy the
//! producer wrote under a bumped producer epoch is counted apart, from the batch headers:
//! librdkafka sends records again so after some sequence errors, and no broker can
//! recognise them (confluentinc/librdkafka#4953). A consumer reading all along is checked
//! too ([`fault_watch`]): it was served each partition's offsets in order, none
//! skipped, and only records the final log kept at the same offsets.
//!
//! The test suite runs a few faults; this command runs as many as asked, and writes what
//! it found to its reports (`--json`, `--html`; the page charts each fault's recovery),
//! whether the promise held or not.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use serde::Serialize;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};

use crate::args::ReportFiles;
use crate::fault_resends;
use crate::fault_watch::{self, WatchFindings};
use crate::{figure, median_max};
use strom_client::blocking;
use strom_testkit::local_cluster::{ClusterSpec, LocalCluster, NodeInfo};
use strom_tools::report::{Chart, ChartSeries, ClusterShape, ComparisonRow, Report};

const TIMEOUT: Duration = Duration::from_secs(60);
/// Combined nodes of the cluster, and the topic's replication factor: each partition on
/// every node.
const NODES: usize = 3;
const REPLICATION: i16 = 3;
/// How often the producer thread wakes to send the records that fell due.
const SEND_TICK: Duration = Duration::from_millis(1);

/// The faults the nemesis injects, in turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Fault {
    /// kill -9 of a partition's leader, restarted after the controller fenced it.
    KillLeader,
    /// SIGTERM (controlled shutdown) of a partition's leader, then restarted.
    TerminateLeader,
    /// SIGSTOP of a partition's leader until another replica leads, then SIGCONT.
    PauseLeader,
    /// kill -9 of a follower of a partition, restarted at once.
    KillFollower,
    /// kill -9 of the active controller, restarted at once.
    KillController,
    /// The network of a partition's leader cut off (its namespace's link down) until
    /// another replica leads, then restored: the old leader, alive all along, must
    /// step down and truncate what it took alone.
    PartitionLeader,
    /// The links between a partition's leader and the other nodes cut, while clients
    /// still reach it (a partial partition), until another replica leads, then mended:
    /// the old leader, still sent records, must acknowledge none of them alone.
    CutLeaderFromPeers,
}

/// The process faults, injected in turn.
pub const ALL_FAULTS: [Fault; 5] = [
    Fault::KillLeader,
    Fault::TerminateLeader,
    Fault::PauseLeader,
    Fault::KillFollower,
    Fault::KillController,
];

/// The process faults and the network partitions (with `--network`).
pub const WITH_NETWORK: [Fault; 7] = [
    Fault::KillLeader,
    Fault::TerminateLeader,
    Fault::PauseLeader,
    Fault::KillFollower,
    Fault::KillController,
    Fault::PartitionLeader,
    Fault::CutLeaderFromPeers,
];

/// What to run.
#[derive(Debug, Clone)]
pub struct FaultRun {
    pub faults: usize,
    /// `all` or `1`.
    pub acks: String,
    pub partitions: i32,
    /// Records per second the producer offers.
    pub rate: u64,
    /// Extra settings for every node.
    pub extra: Vec<String>,
    /// Each node in its own network namespace, and network partitions among the faults
    /// (root only).
    pub network: bool,
}

/// What the check found.
#[derive(Debug, Default)]
pub struct FaultReport {
    /// Each fault, the broker it hit, and how long until the ISR was whole again.
    pub faults: Vec<(Fault, i32, Duration)>,
    pub sent: usize,
    pub acknowledged: usize,
    /// Records read back.
    pub read: usize,
    /// Acknowledged records not at their offset (missing or another record there), or,
    /// acknowledged without an offset, not in their partition.
    pub lost: Vec<(usize, i32, i64)>,
    /// Records read more than once.
    pub duplicated: Vec<Duplicate>,
    /// The copies among `duplicated` (partition, offset) that the producer wrote again
    /// under a newer epoch of its producer id than the first copy's. librdkafka bumps its
    /// epoch when a request is refused with OUT_OF_ORDER_SEQUENCE_NUMBER while an earlier
    /// one is unanswered, and sends that earlier one's records again with new sequence
    /// numbers, though they may have been written (confluentinc/librdkafka#4953, seen
    /// against Kafka's brokers too): a new batch by the protocol, which no broker can
    /// recognise as a retry. Counted, but not held against the cluster.
    pub resent_by_client: BTreeSet<(i32, i64)>,
    /// Partitions whose records are not in the order they were produced.
    pub reordered: Vec<i32>,
    /// Failed deliveries, by error.
    pub failed: BTreeMap<String, usize>,
    /// What the consumer reading during the faults was served, checked.
    pub watch: WatchFindings,
    /// Where the node logs and the topic's partition directories were saved, when a
    /// promise did not hold.
    pub evidence: Option<String>,
}

impl FaultReport {
    /// Whether the run kept every promise of acks=all, to the producer and to the
    /// consumer that read during the faults.
    pub fn holds(&self) -> bool {
        self.lost.is_empty()
            && self.duplicated_by_cluster() == 0
            && self.reordered.is_empty()
            && self.watch.holds()
    }

    /// Duplicates that are not a client's re-send under a new producer epoch.
    pub fn duplicated_by_cluster(&self) -> usize {
        self.duplicated
            .iter()
            .filter(|(_, _, again)| !self.resent_by_client.contains(again))
            .count()
    }

    /// Each kind of fault injected, with the seconds from each injection until every ISR
    /// was whole again, in the order injected.
    fn recoveries(&self) -> Vec<(Fault, Vec<f64>)> {
        WITH_NETWORK
            .into_iter()
            .map(|kind| {
                let took: Vec<f64> = self
                    .faults
                    .iter()
                    .filter(|f| f.0 == kind)
                    .map(|f| f.2.as_secs_f64())
                    .collect();
                (kind, took)
            })
            .filter(|(_, took)| !took.is_empty())
            .collect()
    }

    pub fn print(&self) {
        for (kind, took) in self.recoveries() {
            let (median, max) = median_max(&took);
            println!(
                "{:<18} {:>4} times   fault → every ISR whole again: median {median:.1} s, max {max:.1} s",
                format!("{kind:?}"),
                took.len(),
            );
        }
        println!(
            "records: {} sent, {} acknowledged, {} failed {:?}, {} read back",
            self.sent,
            self.acknowledged,
            self.failed.values().sum::<usize>(),
            self.failed,
            self.read
        );
        println!(
            "acknowledged records lost or changed: {}   duplicated: {}   partitions out of order: {}",
            self.lost.len(),
            self.duplicated.len(),
            self.reordered.len()
        );
        for (i, p, o) in self.lost.iter().take(10) {
            println!("  lost: record {i} acknowledged at {p}/{o}");
        }
        if !self.resent_by_client.is_empty() {
            println!(
                "  of the duplicated, {} sent again by the producer under a bumped producer epoch (confluentinc/librdkafka#4953; no broker can recognise them)",
                self.resent_by_client.len()
            );
        }
        for (i, (first_partition, first), (p, again)) in self.duplicated.iter().take(10) {
            let why = if self.resent_by_client.contains(&(*p, *again)) {
                " (sent again under a new producer epoch)"
            } else {
                ""
            };
            println!("  duplicated: record {i} at {first_partition}/{first} and {p}/{again}{why}");
        }
        let w = &self.watch;
        println!(
            "read during the faults: {} served; offsets rewound: {}   skipped: {}   served but not kept: {}   consumer errors: {:?}",
            w.served,
            w.rewound.len(),
            w.skipped.len(),
            w.diverged.len(),
            w.errors
        );
        for (p, prev, o) in w.rewound.iter().chain(&w.skipped).take(10) {
            println!("  partition {p}: offset {o} served after {prev}");
        }
        for (p, o, served, kept) in w.diverged.iter().take(10) {
            println!("  partition {p}: record {served} served at offset {o}, where the log kept {kept:?}");
        }
        if let Some(evidence) = &self.evidence {
            println!("{evidence}");
        }
    }

    /// Every fault and every count, for the JSON report.
    fn figures(&self) -> serde_json::Value {
        let faults: Vec<_> = self
            .faults
            .iter()
            .map(|(fault, broker, took)| {
                serde_json::json!({
                    "fault": fault,
                    "broker": broker,
                    "isr_whole_again_s": took.as_secs_f64(),
                })
            })
            .collect();
        let lost: Vec<_> = self
            .lost
            .iter()
            .map(|(record, partition, offset)| {
                serde_json::json!({ "record": record, "partition": partition, "offset": offset })
            })
            .collect();
        serde_json::json!({
            "holds": self.holds(),
            "faults": faults,
            "sent": self.sent,
            "acknowledged": self.acknowledged,
            "failed": self.failed,
            "read": self.read,
            "lost": lost,
            "duplicated": self.duplicated,
            "duplicated_resent_by_client": self.resent_by_client.len(),
            "reordered_partitions": self.reordered,
            "read_during_faults": {
                "served": self.watch.served,
                "rewound": self.watch.rewound,
                "skipped": self.watch.skipped,
                "served_not_kept": self.watch.diverged,
                "consumer_errors": self.watch.errors,
            },
        })
    }

    /// What [`Self::print`] prints, as the reports' rows.
    fn rows(&self) -> Vec<ComparisonRow> {
        let seconds = |v: f64| format!("{v:.1} s");
        let count = |v: f64| format!("{v:.0}");
        let mut rows = Vec::new();
        for (kind, took) in self.recoveries() {
            let (median, max) = median_max(&took);
            let name = format!("{kind:?}");
            let metric = "fault → every ISR whole again";
            rows.extend([
                figure(&name, "times", took.len() as f64, None, count),
                figure(&name, &format!("{metric}, median"), median, None, seconds),
                figure(&name, &format!("{metric}, max"), max, None, seconds),
            ]);
        }
        for (metric, value) in [
            ("sent", self.sent),
            ("acknowledged", self.acknowledged),
            ("failed", self.failed.values().sum()),
            ("read back", self.read),
            ("acknowledged, lost or changed", self.lost.len()),
            ("duplicated", self.duplicated.len()),
            (
                "duplicated, sent again under a new producer epoch",
                self.resent_by_client.len(),
            ),
            ("partitions out of order", self.reordered.len()),
        ] {
            rows.push(figure("records", metric, value as f64, None, count));
        }
        for (metric, value) in [
            ("served", self.watch.served),
            ("offsets rewound", self.watch.rewound.len()),
            ("offsets skipped", self.watch.skipped.len()),
            ("served but not kept", self.watch.diverged.len()),
        ] {
            rows.push(figure(
                "read during the faults",
                metric,
                value as f64,
                None,
                count,
            ));
        }
        rows
    }

    /// Each fault's recovery, a series per kind of fault, in the order injected.
    fn chart(&self) -> Chart {
        let series = WITH_NETWORK
            .into_iter()
            .map(|kind| ChartSeries {
                name: format!("{kind:?}"),
                reference: false,
                points: (1..)
                    .map(f64::from)
                    .zip(&self.faults)
                    .filter(|(_, f)| f.0 == kind)
                    .map(|(n, f)| (n, f.2.as_secs_f64()))
                    .collect(),
            })
            .filter(|s| !s.points.is_empty())
            .collect();
        Chart {
            title: "Fault → every ISR whole again".to_string(),
            x_label: "fault".to_string(),
            y_label: "seconds".to_string(),
            log_y: false,
            series,
        }
    }
}

/// A librdkafka producer context that keeps every delivery report, by the record number
/// sent as its opaque: (partition, offset) or the error; and librdkafka's own log, which a
/// failed run saves beside the nodes' (with `debug=eos`, the client's side of a sequence
/// error: which request failed and why it bumped its epoch). The cluster tests use it too.
#[derive(Default)]
pub struct Deliveries {
    pub reports: Mutex<BTreeMap<usize, Delivery>>,
    client_log: Mutex<VecDeque<String>>,
}

/// Where a record landed (partition, offset), or why it did not.
pub type Delivery = Result<(i32, i64), String>;

/// A record read more than once: the record, where it was first read and where again,
/// each as (partition, offset).
pub type Duplicate = (usize, (i32, i64), (i32, i64));

/// The newest lines of librdkafka's log kept: bounded, whatever the client logs.
const CLIENT_LOG_LINES: usize = 100_000;

impl Deliveries {
    /// librdkafka's log so far, one time-stamped line each.
    pub fn client_log(&self) -> String {
        let lines = self.client_log.lock().expect("client log");
        lines.iter().map(|l| format!("{l}\n")).collect()
    }
}

impl ClientContext for Deliveries {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        let mut line = String::new();
        let _ = SystemTime.format_time(&mut Writer::new(&mut line));
        let _ = write!(line, " {level:?} {fac} {log_message}");
        let mut lines = self.client_log.lock().expect("client log");
        if lines.len() == CLIENT_LOG_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }
}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = Box<usize>;

    fn delivery(&self, result: &DeliveryResult<'_>, index: Self::DeliveryOpaque) {
        let outcome = match result {
            Ok(m) => Ok((m.partition(), m.offset())),
            Err((e, _)) => Err(e.to_string()),
        };
        self.reports
            .lock()
            .expect("deliveries")
            .insert(*index, outcome);
    }
}

/// A partition's leader, replicas and ISR.
type PartitionState = (i32, Vec<i32>, Vec<i32>);

/// Each partition's (leader, replicas, ISR) as broker `addr` reports it.
fn partitions(addr: &str, topic: &str) -> Result<Vec<PartitionState>> {
    let metadata = blocking::metadata(addr, Duration::from_secs(5))?;
    let t = metadata
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == topic))
        .context("topic not in metadata")?;
    let mut out: Vec<_> = t
        .partitions
        .iter()
        .map(|p| {
            (
                p.partition_index,
                (
                    p.leader_id.0,
                    p.replica_nodes.iter().map(|b| b.0).collect(),
                    p.isr_nodes.iter().map(|b| b.0).collect(),
                ),
            )
        })
        .collect();
    out.sort_by_key(|(i, _)| *i);
    Ok(out.into_iter().map(|(_, p)| p).collect())
}

/// Waits until every broker is listed and every partition has a leader and its whole
/// replica set in the ISR.
fn wait_whole(cluster: &LocalCluster, topic: &str) -> Result<()> {
    cluster.wait_until_ready(TIMEOUT)?;
    crate::poll(
        "every ISR whole",
        TIMEOUT,
        Duration::from_millis(10),
        || {
            partitions(&cluster.bootstrap(), topic).is_ok_and(|ps| {
                ps.iter()
                    .all(|(leader, replicas, isr)| *leader >= 0 && isr.len() == replicas.len())
            })
        },
    )
}

/// Injects `fault` on partition `p` and undoes it; returns the broker it hit.
fn inject(cluster: &mut LocalCluster, topic: &str, fault: Fault, p: usize) -> Result<i32> {
    let state = partitions(&cluster.bootstrap(), topic)?;
    let (leader, replicas, _) = state.get(p).context("partition")?.clone();
    match fault {
        Fault::KillLeader
        | Fault::TerminateLeader
        | Fault::PauseLeader
        | Fault::PartitionLeader
        | Fault::CutLeaderFromPeers => {
            let peers: Vec<i32> = cluster
                .nodes
                .iter()
                .map(|n| n.id)
                .filter(|id| *id != leader)
                .collect();
            match fault {
                Fault::KillLeader => cluster.kill9(leader)?,
                Fault::TerminateLeader => {
                    cluster.terminate(leader)?;
                }
                Fault::PauseLeader => cluster.pause(leader, true)?,
                Fault::PartitionLeader => {
                    cluster.network().context("no network")?.isolate(leader)?
                }
                _ => cluster
                    .network()
                    .context("no network")?
                    .cut(leader, &peers)?,
            }
            let survivor = cluster
                .nodes
                .iter()
                .find(|n| n.id != leader && cluster.is_running(n.id))
                .map(NodeInfo::address)
                .context("a surviving broker")?;
            crate::poll("a new leader", TIMEOUT, Duration::from_millis(10), || {
                partitions(&survivor, topic)
                    .is_ok_and(|ps| ps.get(p).is_some_and(|(l, _, _)| *l >= 0 && *l != leader))
            })?;
            match fault {
                Fault::PauseLeader => cluster.pause(leader, false)?,
                Fault::PartitionLeader => cluster.network().context("no network")?.heal(leader)?,
                Fault::CutLeaderFromPeers => cluster
                    .network()
                    .context("no network")?
                    .mend(leader, &peers)?,
                _ => {
                    cluster.restart(leader)?;
                }
            }
            Ok(leader)
        }
        Fault::KillFollower => {
            let follower = *replicas
                .iter()
                .find(|b| **b != leader)
                .context("a follower")?;
            cluster.kill9(follower)?;
            cluster.restart(follower)?;
            Ok(follower)
        }
        Fault::KillController => {
            let controller = cluster.active_controller()?;
            cluster.kill9(controller)?;
            cluster.restart(controller)?;
            Ok(controller)
        }
    }
}

/// Where a run's node logs and partition directories are saved when it fails.
fn evidence_dir() -> PathBuf {
    std::env::temp_dir().join(format!("strom-bench-faults-{}", std::process::id()))
}

/// Copies every node's log out of the cluster's directory (removed with the cluster), and
/// the producer's, so a failed run can be understood; says where they went, with the last
/// lines of each node's (a CI run shows only what is printed).
fn save_logs(cluster: &LocalCluster, client: &Deliveries) -> String {
    let dir = evidence_dir();
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return format!("the node logs could not be saved: {e}");
    }
    let _ = std::fs::write(dir.join("producer.log"), client.client_log());
    let mut tails = String::new();
    for node in &cluster.nodes {
        let _ = cluster.pause(node.id, false);
        let log = cluster.stderr(node.id);
        let _ = std::fs::write(dir.join(format!("node{}.log", node.id)), &log);
        let lines: Vec<&str> = log.lines().filter(|l| !l.contains("openraft")).collect();
        tails.push_str(&format!("\n--- node {} (last lines) ---\n", node.id));
        tails.push_str(&lines[lines.len().saturating_sub(25)..].join("\n"));
    }
    format!("node logs saved in {}{tails}", dir.display())
}

/// The node logs and every node's copy of `topic`'s partitions, saved for a run whose
/// promise did not hold; says where.
fn save_evidence(cluster: &LocalCluster, client: &Deliveries, topic: &str) -> String {
    let saved = save_logs(cluster, client);
    let dir = evidence_dir();
    for node in &cluster.nodes {
        let partitions = std::fs::read_dir(node.dir.join("data"))
            .into_iter()
            .flatten();
        for entry in partitions.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.rsplit_once('-').is_some_and(|(t, _)| t == topic) {
                copy_files(
                    &entry.path(),
                    &dir.join(format!("node{}", node.id)).join(&name),
                );
            }
        }
    }
    format!("{saved}; partition directories in {}", dir.display())
}

/// Copies the files of directory `from` into a new directory `to`, as far as it can.
fn copy_files(from: &Path, to: &Path) {
    if std::fs::create_dir_all(to).is_err() {
        return;
    }
    for file in std::fs::read_dir(from).into_iter().flatten().flatten() {
        let _ = std::fs::copy(file.path(), to.join(file.file_name()));
    }
}

/// Runs the faults against a cluster started from `binary` and checks the result.
pub fn run_faults(binary: &Path, run: &FaultRun) -> Result<FaultReport> {
    let mut extra = vec![
        "broker.session.timeout.ms=3000".to_string(),
        "broker.heartbeat.interval.ms=500".to_string(),
        "replica.lag.time.max.ms=3000".to_string(),
    ];
    extra.extend(run.extra.iter().cloned());
    let spec = ClusterSpec {
        brokers: NODES,
        controllers: 0,
        extra,
        isolated: run.network,
    };
    let mut cluster = LocalCluster::start_with(binary, &spec, None)?;
    let topic = "faults";
    let created = std::process::Command::new(binary)
        .args([
            "topics",
            "--bootstrap-server",
            &cluster.bootstrap(),
            "--create",
        ])
        .args([
            "--topic",
            topic,
            "--partitions",
            &run.partitions.to_string(),
        ])
        .args([
            "--replication-factor",
            &REPLICATION.to_string(),
            "--config",
            "min.insync.replicas=2",
        ])
        .output()?;
    if !created.status.success() {
        bail!(
            "creating the topic failed: {}",
            String::from_utf8_lossy(&created.stderr)
        );
    }
    wait_whole(&cluster, topic)?;

    let idempotent = run.acks == "all";
    let producer: BaseProducer<Deliveries> = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap())
        .set("acks", &run.acks)
        .set("enable.idempotence", idempotent.to_string())
        .set("linger.ms", "5")
        .set("message.timeout.ms", "120000")
        .set("request.timeout.ms", "10000")
        .set("topic.metadata.refresh.interval.ms", "1000")
        .set("debug", "eos")
        .create_with_context(Deliveries::default())?;
    let producer = Arc::new(producer);
    let stop = Arc::new(AtomicBool::new(false));
    let partition_count = run.partitions;
    let rate = run.rate.max(1) as f64;
    let sender = {
        let producer = producer.clone();
        let stop = stop.clone();
        // Paced by sleeping, with delivery reports served by non-blocking polls: rdkafka's
        // `poll` spins through a timeout's last millisecond (librdkafka takes whole
        // milliseconds), and waiting in it for each record's turn kept most of a core
        // busy beside the brokers under test.
        std::thread::spawn(move || {
            let mut sent = 0usize;
            let started = Instant::now();
            while !stop.load(Ordering::Acquire) {
                let due = (started.elapsed().as_secs_f64() * rate) as usize;
                while sent < due {
                    let value = sent.to_string();
                    let record = BaseRecord::with_opaque_to(topic, Box::new(sent))
                        .payload(&value)
                        .key(&value)
                        .partition(sent as i32 % partition_count);
                    if producer.send(record).is_err() {
                        // The queue is full; its records wait on a leader.
                        break;
                    }
                    sent += 1;
                }
                producer.poll(Duration::ZERO);
                std::thread::sleep(SEND_TICK);
            }
            sent
        })
    };

    let watcher = fault_watch::start(&cluster.bootstrap(), topic, run.partitions)?;

    let mut report = FaultReport::default();
    let kinds: &[Fault] = if run.network {
        &WITH_NETWORK
    } else {
        &ALL_FAULTS
    };
    for round in 0..run.faults {
        let fault = kinds[round % kinds.len()];
        let started = Instant::now();
        let injected = inject(&mut cluster, topic, fault, round % run.partitions as usize)
            .and_then(|broker| wait_whole(&cluster, topic).map(|()| broker));
        match injected {
            Ok(broker) => report.faults.push((fault, broker, started.elapsed())),
            Err(e) => {
                stop.store(true, Ordering::Release);
                let saved = save_logs(&cluster, producer.context());
                return Err(e.context(format!("fault {round} ({fault:?}); {saved}")));
            }
        }
    }
    stop.store(true, Ordering::Release);
    report.sent = sender.join().expect("producer thread");
    if let Err(e) = producer.flush(TIMEOUT) {
        let waiting = producer.in_flight_count();
        let saved = save_logs(&cluster, producer.context());
        return Err(anyhow::Error::new(e).context(format!(
            "{waiting} records still unacknowledged {TIMEOUT:?} after the last fault; {saved}"
        )));
    }
    let deliveries = std::mem::take(&mut *producer.context().reports.lock().expect("deliveries"));
    let mut acknowledged: BTreeMap<usize, (i32, i64)> = BTreeMap::new();
    for (i, outcome) in deliveries {
        match outcome {
            Ok(at) => {
                acknowledged.insert(i, at);
            }
            Err(e) => *report.failed.entry(e).or_default() += 1,
        }
    }
    report.acknowledged = acknowledged.len();

    let watched = watcher.finish();

    let read = read_back(&cluster.bootstrap(), topic, run.partitions)?;
    check(&mut report, &acknowledged, &read);
    if !report.duplicated.is_empty() {
        report.resent_by_client =
            fault_resends::resent_by_client(&cluster, topic, &report.duplicated);
    }
    if idempotent {
        report.reordered = reordered(&read, &report.resent_by_client);
    }
    report.watch = fault_watch::check(watched, &read);
    if !report.holds() {
        report.evidence = Some(save_evidence(&cluster, producer.context(), topic));
    }
    Ok(report)
}

/// Every record of every partition up to its high watermark: (partition, offset) → value.
fn read_back(bootstrap: &str, topic: &str, partitions: i32) -> Result<BTreeMap<(i32, i64), usize>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "faults-check")
        .set("enable.auto.commit", "false")
        .create()?;
    let mut assignment = TopicPartitionList::new();
    let mut ends = BTreeMap::new();
    for p in 0..partitions {
        let (_, high) = consumer.fetch_watermarks(topic, p, TIMEOUT)?;
        ends.insert(p, high);
        assignment.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    consumer.assign(&assignment)?;
    let mut read = BTreeMap::new();
    let mut positions: BTreeMap<i32, i64> = BTreeMap::new();
    let deadline = Instant::now() + TIMEOUT;
    while ends
        .iter()
        .any(|(p, end)| positions.get(p).map_or(*end > 0, |o| o + 1 < *end))
    {
        if Instant::now() > deadline {
            bail!("reading back did not reach the high watermarks {ends:?} (at {positions:?})");
        }
        let Some(message) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        let message = message?;
        let value: usize = std::str::from_utf8(message.payload().unwrap_or_default())?
            .parse()
            .context("record value")?;
        if read
            .insert((message.partition(), message.offset()), value)
            .is_some()
        {
            bail!(
                "two records at offset {} of partition {}",
                message.offset(),
                message.partition()
            );
        }
        positions.insert(message.partition(), message.offset());
    }
    Ok(read)
}

/// Jepsen's checks of what was read against what was acknowledged: lost and duplicated
/// records.
fn check(
    report: &mut FaultReport,
    acknowledged: &BTreeMap<usize, (i32, i64)>,
    read: &BTreeMap<(i32, i64), usize>,
) {
    report.read = read.len();
    let found: BTreeMap<usize, i32> = read.iter().map(|((p, _), v)| (*v, *p)).collect();
    for (i, (p, o)) in acknowledged {
        // librdkafka acknowledges records of a request whose answer it lost with an
        // unknown offset (-1001) once a later request of the same producer succeeds:
        // such a record must be in its partition, at whatever offset.
        let kept = if *o >= 0 {
            read.get(&(*p, *o)) == Some(i)
        } else {
            found.get(i) == Some(p)
        };
        if !kept {
            report.lost.push((*i, *p, *o));
        }
    }
    let mut seen: BTreeMap<usize, (i32, i64)> = BTreeMap::new();
    for ((p, offset), value) in read {
        let (first_partition, first) = *seen.entry(*value).or_insert((*p, *offset));
        if (first_partition, first) != (*p, *offset) {
            report
                .duplicated
                .push((*value, (first_partition, first), (*p, *offset)));
        }
    }
}

/// The partitions whose records are not in the order an idempotent producer sent them,
/// passing over the copies the producer sent again under a new epoch (`resent`).
fn reordered(read: &BTreeMap<(i32, i64), usize>, resent: &BTreeSet<(i32, i64)>) -> Vec<i32> {
    let mut last: BTreeMap<i32, usize> = BTreeMap::new();
    let mut reordered = BTreeSet::new();
    for ((p, offset), value) in read {
        if resent.contains(&(*p, *offset)) {
            continue;
        }
        if last.get(p).is_some_and(|prev| prev >= value) {
            reordered.insert(*p);
        }
        last.insert(*p, *value);
    }
    reordered.into_iter().collect()
}

#[derive(Parser, Debug, Serialize)]
#[command(
    name = "strom bench faults",
    about = "Acknowledged records under kill -9, SIGTERM and SIGSTOP of leaders, followers and the controller"
)]
struct Args {
    /// Faults to inject, one after another (kill -9, SIGTERM and SIGSTOP of a leader,
    /// kill -9 of a follower and of the active controller, and with --network a leader
    /// cut off from everyone and one cut off from the other nodes only, in turn).
    #[arg(long, default_value_t = 100)]
    faults: usize,
    /// The producer's acks: `all` (idempotent) or `1`.
    #[arg(long, default_value = "all")]
    acks: String,
    #[arg(long, default_value_t = 3)]
    partitions: i32,
    /// Records per second offered.
    #[arg(long, default_value_t = 2000)]
    rate: u64,
    /// Each node in its own network namespace, and network partitions of a leader (whole
    /// and partial) among the faults (needs root).
    #[arg(long)]
    network: bool,
    /// Extra settings for every node, `key=value` (repeatable).
    #[arg(long = "override")]
    overrides: Vec<String>,
    #[command(flatten)]
    #[serde(skip)]
    reports: ReportFiles,
}

pub fn main(argv: &[String]) -> ExitCode {
    crate::clap_command::<Args>("strom bench faults", argv, cli)
}

fn cli(args: &Args, argv: &[String]) -> Result<()> {
    if args.acks != "all" && args.acks != "1" {
        bail!("--acks must be all or 1");
    }
    let binary = std::env::current_exe()?;
    eprintln!(
        "strom bench faults: {NODES} combined nodes, RF {REPLICATION}, min.insync.replicas 2, acks={}, {} faults...",
        args.acks, args.faults
    );
    let started = Instant::now();
    let report = run_faults(
        &binary,
        &FaultRun {
            faults: args.faults,
            acks: args.acks.clone(),
            partitions: args.partitions,
            rate: args.rate,
            extra: args.overrides.clone(),
            network: args.network,
        },
    )?;
    report.print();
    println!("took {:.0} s", started.elapsed().as_secs_f64());
    let mut cluster = ClusterShape::combined(
        NODES,
        REPLICATION,
        format!("{} (min.insync.replicas 2)", args.partitions),
    );
    cluster.links = args.network.then(|| {
        "each node in its own network namespace, cut off as one of the faults".to_string()
    });
    let mut written = Report::for_cluster("bench faults", argv, args, cluster)?;
    written.figures = report.figures();
    written.comparison = report.rows();
    written.charts.push(report.chart());
    args.reports.write("faults", &written)?;
    if !report.holds() {
        bail!("the replication promise did not hold");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found() -> FaultReport {
        let took = |ms| Duration::from_millis(ms);
        FaultReport {
            faults: vec![
                (Fault::KillLeader, 1, took(4000)),
                (Fault::PauseLeader, 2, took(3000)),
                (Fault::KillLeader, 3, took(6000)),
                (Fault::KillLeader, 1, took(5000)),
            ],
            sent: 100,
            acknowledged: 98,
            read: 98,
            lost: vec![(7, 0, 3)],
            failed: BTreeMap::from([("timed out".to_string(), 2)]),
            ..FaultReport::default()
        }
    }

    #[test]
    fn rows_give_each_kinds_recovery_and_every_count() {
        let rows = found().rows();
        let figure = |experiment: &str, metric: &str| {
            rows.iter()
                .find(|r| r.experiment == experiment && r.metric == metric)
                .map(|r| r.strom.clone())
                .unwrap_or_else(|| panic!("no {experiment} / {metric} in {rows:?}"))
        };
        assert_eq!(figure("KillLeader", "times"), "3");
        assert_eq!(
            figure("KillLeader", "fault → every ISR whole again, median"),
            "5.0 s"
        );
        assert_eq!(
            figure("KillLeader", "fault → every ISR whole again, max"),
            "6.0 s"
        );
        assert_eq!(figure("PauseLeader", "times"), "1");
        assert!(!rows.iter().any(|r| r.experiment == "KillFollower"));
        assert_eq!(figure("records", "failed"), "2");
        assert_eq!(figure("records", "acknowledged, lost or changed"), "1");
    }

    #[test]
    fn order_is_checked_past_the_copies_a_client_sent_again() {
        // Partition 0 holds 0, 3, 6, then 3 and 6 again (sent under a new producer
        // epoch), then 9.
        let read: BTreeMap<(i32, i64), usize> = [0, 3, 6, 3, 6, 9]
            .into_iter()
            .enumerate()
            .map(|(o, v)| ((0, o as i64), v))
            .collect();
        assert_eq!(reordered(&read, &BTreeSet::new()), [0]);
        assert!(reordered(&read, &BTreeSet::from([(0, 3), (0, 4)])).is_empty());
        let mut report = FaultReport::default();
        check(&mut report, &BTreeMap::new(), &read);
        assert_eq!(
            report.duplicated,
            [(3, (0, 1), (0, 3)), (6, (0, 2), (0, 4))]
        );
        assert_eq!(report.duplicated_by_cluster(), 2);
        report.resent_by_client = BTreeSet::from([(0, 3), (0, 4)]);
        assert_eq!(report.duplicated_by_cluster(), 0);
        assert!(report.holds());
    }

    #[test]
    fn charts_each_recovery_at_its_place_in_the_run() {
        let chart = found().chart();
        let series: Vec<(&str, &[(f64, f64)])> = chart
            .series
            .iter()
            .map(|s| (s.name.as_str(), s.points.as_slice()))
            .collect();
        assert_eq!(
            series,
            [
                ("KillLeader", &[(1.0, 4.0), (3.0, 6.0), (4.0, 5.0)][..]),
                ("PauseLeader", &[(2.0, 3.0)][..]),
            ]
        );
        let figures = found().figures();
        assert_eq!(figures["holds"], false);
        assert_eq!(figures["faults"][1]["fault"], "PauseLeader");
        assert_eq!(figures["lost"][0]["offset"], 3);
    }
}
