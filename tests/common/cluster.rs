//! A local KRaft cluster of real `strom server` processes for the cluster tests: every
//! node formatted with one cluster id by `strom storage format`, on its own ports of
//! 127.0.0.1, and controlled with real signals (kill -9, SIGTERM, SIGSTOP/SIGCONT).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::{
    ApiKey, DescribeQuorumRequest, DescribeQuorumResponse, MetadataRequest, MetadataResponse,
};

use super::raw::{topic_name, Conn};
use super::{spawn_until_ready, wait_until};

/// What a node runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Combined,
    Controller,
    Broker,
}

/// One node of the cluster.
pub struct Node {
    pub id: i32,
    pub role: Role,
    /// The client listener's port (brokers).
    pub port: u16,
    /// The controller listener's port (controllers).
    pub controller_port: u16,
    config: PathBuf,
    child: Option<Child>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

/// One cluster at a time: a two-core machine running several three-node clusters at
/// once would starve their election and session timers, which is not what the tests test.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A running local cluster; every process is killed when it is dropped.
pub struct TestCluster {
    _serial: MutexGuard<'static, ()>,
    pub root: tempfile::TempDir,
    pub cluster_id: String,
    pub nodes: Vec<Node>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn strom() -> Command {
    Command::new(env!("CARGO_BIN_EXE_strom"))
}

impl TestCluster {
    /// `n` combined (broker and controller) nodes, ids 1..=n, each with `extra` settings.
    pub fn combined(n: usize, extra: &[&str]) -> Self {
        Self::start(&vec![Role::Combined; n], extra)
    }

    /// `controllers` controller-only nodes (ids 1..) and `brokers` broker-only nodes.
    pub fn split(controllers: usize, brokers: usize, extra: &[&str]) -> Self {
        let mut roles = vec![Role::Controller; controllers];
        roles.extend(vec![Role::Broker; brokers]);
        Self::start(&roles, extra)
    }

    fn start(roles: &[Role], extra: &[&str]) -> Self {
        let serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let root = tempfile::tempdir().expect("temp dir");
        let out = strom()
            .args(["storage", "random-uuid"])
            .output()
            .expect("random-uuid");
        let cluster_id = String::from_utf8(out.stdout).unwrap().trim().to_string();
        let mut nodes: Vec<Node> = roles
            .iter()
            .enumerate()
            .map(|(i, role)| Node {
                id: i as i32 + 1,
                role: *role,
                port: if *role == Role::Controller {
                    0
                } else {
                    free_port()
                },
                controller_port: if *role == Role::Broker {
                    0
                } else {
                    free_port()
                },
                config: root.path().join(format!("node{}.properties", i + 1)),
                child: None,
                stderr: None,
            })
            .collect();
        let voters = nodes
            .iter()
            .filter(|n| n.role != Role::Broker)
            .map(|n| format!("{}@127.0.0.1:{}", n.id, n.controller_port))
            .collect::<Vec<_>>()
            .join(",");
        for node in &nodes {
            let (roles, listeners) = match node.role {
                Role::Combined => (
                    "broker,controller",
                    format!(
                        "PLAINTEXT://127.0.0.1:{},CONTROLLER://127.0.0.1:{}",
                        node.port, node.controller_port
                    ),
                ),
                Role::Controller => (
                    "controller",
                    format!("CONTROLLER://127.0.0.1:{}", node.controller_port),
                ),
                Role::Broker => ("broker", format!("PLAINTEXT://127.0.0.1:{}", node.port)),
            };
            let mut lines = vec![
                format!("process.roles={roles}"),
                format!("node.id={}", node.id),
                format!("controller.quorum.voters={voters}"),
                format!("listeners={listeners}"),
                "controller.listener.names=CONTROLLER".to_string(),
                "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
                    .to_string(),
                format!(
                    "log.dirs={}",
                    root.path().join(format!("data{}", node.id)).display()
                ),
                "group.initial.rebalance.delay.ms=0".to_string(),
            ];
            lines.extend(extra.iter().map(|s| s.to_string()));
            std::fs::write(&node.config, lines.join("\n")).unwrap();
            let status = strom()
                .args(["storage", "format", "--cluster-id", &cluster_id, "--config"])
                .arg(&node.config)
                .stdout(Stdio::null())
                .status()
                .expect("storage format");
            assert!(status.success(), "strom storage format failed");
        }
        for node in &mut nodes {
            node.spawn();
        }
        Self {
            _serial: serial,
            root,
            cluster_id,
            nodes,
        }
    }

    pub fn node(&mut self, id: i32) -> &mut Node {
        self.nodes.iter_mut().find(|n| n.id == id).expect("node id")
    }

    /// The client addresses of the running brokers.
    pub fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .filter(|n| n.role != Role::Controller && n.child.is_some())
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A running broker's address other than `not`'s.
    pub fn broker_other_than(&self, not: i32) -> String {
        self.nodes
            .iter()
            .find(|n| n.role != Role::Controller && n.child.is_some() && n.id != not)
            .map(|n| format!("127.0.0.1:{}", n.port))
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
            .filter(|n| n.role != Role::Controller && n.child.is_some())
        {
            let addr = format!("127.0.0.1:{}", node.port);
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

impl Node {
    fn spawn(&mut self) {
        let mut cmd = strom();
        cmd.arg("server")
            .arg(&self.config)
            .env("RUST_LOG", "info,openraft=warn");
        let ready = if self.role == Role::Controller {
            "strom controller"
        } else {
            "strom broker"
        };
        let (child, stderr, _) = spawn_until_ready(cmd, ready);
        self.stderr = Some(stderr);
        self.child = Some(child);
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("node running").id()
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.pid().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// `kill -9`.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("kill -9");
            child.wait().expect("wait");
        }
    }

    /// SIGTERM and wait for the exit.
    pub fn terminate(&mut self) -> ExitStatus {
        self.signal("-TERM");
        self.child
            .take()
            .expect("node running")
            .wait()
            .expect("wait")
    }

    /// SIGSTOP / SIGCONT.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    pub fn resume(&self) {
        self.signal("-CONT");
    }

    /// Starts the node again on its directories and ports.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop the node before restarting it");
        self.spawn();
    }

    /// What the node wrote to stderr, once it has stopped.
    pub fn stderr(&mut self) -> String {
        self.stderr
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default()
    }

    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for TestCluster {
    /// Kills every node; when the test failed, prints the end of each node's log, which
    /// is where the reason is.
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let _ = Command::new("kill")
                    .args(["-CONT", &child.id().to_string()])
                    .status();
                let _ = child.kill();
                let _ = child.wait();
            }
            if std::thread::panicking() {
                let log = node.stderr();
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
}
