//! A local KRaft cluster of real `strom server` processes for the cluster tests: strom's
//! own launcher ([`LocalCluster`], the one `strom cluster start` and the cluster benches
//! use) — every node formatted with one cluster id, on its own ports of 127.0.0.1 —
//! with the checks the tests make over the Kafka protocol, and real signals.

use std::ops::{Deref, DerefMut};
use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::{
    ApiKey, DescribeQuorumRequest, DescribeQuorumResponse, MetadataRequest, MetadataResponse,
};
use strom_testkit::local_cluster::{ClusterSpec, LocalCluster, Role};

use super::raw::{topic_name, Conn};
use super::wait_until;

/// One cluster at a time: a two-core machine running several three-node clusters at
/// once would starve their election and session timers, which is not what the tests test.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A running local cluster; every process is killed when it is dropped, and when the
/// test failed each node's log ends are printed, which is where the reason is.
pub struct TestCluster {
    cluster: LocalCluster,
    _serial: MutexGuard<'static, ()>,
}

impl Deref for TestCluster {
    type Target = LocalCluster;
    fn deref(&self) -> &LocalCluster {
        &self.cluster
    }
}

impl DerefMut for TestCluster {
    fn deref_mut(&mut self) -> &mut LocalCluster {
        &mut self.cluster
    }
}

impl TestCluster {
    /// `n` combined (broker and controller) nodes, ids 1..=n, each with `extra` settings.
    pub fn combined(n: usize, extra: &[&str]) -> Self {
        Self::start(n, 0, extra)
    }

    /// `controllers` controller-only nodes (ids 1..) and `brokers` broker-only nodes.
    pub fn split(controllers: usize, brokers: usize, extra: &[&str]) -> Self {
        Self::start(brokers, controllers, extra)
    }

    /// As [`Self::split`], each node in its own network namespace so that links can be
    /// cut (root only); the calling thread moves into the client namespace, so a test
    /// starts it on a thread of its own.
    pub fn isolated_split(controllers: usize, brokers: usize, extra: &[&str]) -> Self {
        Self::start_spec(brokers, controllers, extra, true)
    }

    /// The one-cluster-at-a-time lock, for a test whose cluster some other code starts.
    pub fn serial() -> MutexGuard<'static, ()> {
        ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn start(brokers: usize, controllers: usize, extra: &[&str]) -> Self {
        Self::start_spec(brokers, controllers, extra, false)
    }

    fn start_spec(brokers: usize, controllers: usize, extra: &[&str], isolated: bool) -> Self {
        let serial = Self::serial();
        let spec = ClusterSpec {
            brokers,
            controllers,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            isolated,
        };
        let cluster = LocalCluster::start_with(Path::new(env!("CARGO_BIN_EXE_strom")), &spec, None)
            .unwrap_or_else(|e| panic!("the cluster did not start: {e:#}"));
        Self {
            cluster,
            _serial: serial,
        }
    }

    /// SIGTERM to node `id`; whether it exited 0.
    pub fn terminate(&mut self, id: i32) -> bool {
        self.cluster.terminate(id).expect("SIGTERM").1
    }

    /// A running broker's address other than `not`'s.
    pub fn broker_other_than(&self, not: i32) -> String {
        self.nodes
            .iter()
            .find(|n| n.role != Role::Controller && n.id != not && self.is_running(n.id))
            .map(|n| n.address())
            .expect("another running broker")
    }

    /// Metadata (all topics) from the broker at `addr`.
    pub fn metadata(addr: &str) -> MetadataResponse {
        Conn::connect(addr).call(
            ApiKey::Metadata,
            12,
            &MetadataRequest::default().with_topics(None),
        )
    }

    /// The ids of the brokers that `addr`'s Metadata lists.
    pub fn listed_brokers(addr: &str) -> Vec<i32> {
        let mut ids: Vec<i32> = Self::metadata(addr)
            .brokers
            .iter()
            .map(|b| b.node_id.0)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Waits until every running broker lists exactly the brokers `expected`.
    pub fn wait_for_brokers(&self, expected: &[i32]) {
        for node in self
            .nodes
            .iter()
            .filter(|n| n.role != Role::Controller && self.is_running(n.id))
        {
            let addr = node.address();
            assert!(
                wait_until(Duration::from_secs(30), || Self::listed_brokers(&addr)
                    == expected),
                "broker {} lists {:?}, not {expected:?}",
                node.id,
                Self::listed_brokers(&addr)
            );
        }
    }

    /// DescribeQuorum through the broker at `addr`.
    pub fn describe_quorum(addr: &str) -> DescribeQuorumResponse {
        let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
            .with_topic_name(topic_name("__cluster_metadata"))
            .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
        Conn::connect(addr).call(ApiKey::DescribeQuorum, 2, &request)
    }

    /// The active controller as the broker at `addr` reports it (-1: none).
    pub fn active_controller(addr: &str) -> i32 {
        let r = Self::describe_quorum(addr);
        if r.error_code != 0 {
            return -1;
        }
        r.topics[0].partitions[0].leader_id.0
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        for node in &self.cluster.nodes {
            let _ = Command::new("kill")
                .args(["-CONT", &node.pid.unwrap_or(0).to_string()])
                .status();
            let log = self.cluster.stderr(node.id);
            for panic in log.lines().filter(|l| l.contains("panicked")) {
                eprintln!("node {} panicked: {panic}", node.id);
            }
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!("--- node {} (last lines of its log) ---", node.id);
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

/// What a cluster bench (`strom bench controller`, `network`, `quorum`, `faults`)
/// printed, and the reports it wrote with `--json` and `--html` into a temporary
/// directory.
pub struct BenchRun {
    pub stdout: String,
    pub json: serde_json::Value,
    pub html: String,
}

/// Runs `strom ARGS --json … --html …`, checks that it succeeded and named both reports
/// last, and reads them. The caller holds [`TestCluster::serial`].
pub fn run_bench(args: &[&str]) -> BenchRun {
    let dir = tempfile::tempdir().unwrap();
    let (json, html) = (dir.path().join("r.json"), dir.path().join("r.html"));
    let out = Command::new(env!("CARGO_BIN_EXE_strom"))
        .args(args)
        .arg("--json")
        .arg(&json)
        .arg("--html")
        .arg(&html)
        .output()
        .expect("strom bench");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reports = format!("Reports: {} and {}", json.display(), html.display());
    assert_eq!(stdout.lines().last(), Some(reports.as_str()), "{stdout}");
    BenchRun {
        stdout,
        json: serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap(),
        html: std::fs::read_to_string(&html).unwrap(),
    }
}
