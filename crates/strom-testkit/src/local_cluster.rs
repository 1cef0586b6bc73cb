//! A local KRaft cluster of `strom server` processes on loopback: formatted with one
//! cluster id (`strom storage format`), started, and waited for until every broker is
//! unfenced. `strom cluster start` leaves it running; the cluster benches own theirs and
//! drive it with real signals (kill -9, SIGTERM) to time failovers.
//!
//! Each node's stdout (its ready lines) and stderr go to files in its directory, so the
//! processes can outlive the command that started them; stderr keeps every incarnation's.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::netns::TestNetwork;
use strom_client::blocking;

/// How long a node may take to print its ready line, and a cluster to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// What a node runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    Combined,
    Controller,
    Broker,
}

/// One node of a local cluster, as `cluster.json` records it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeInfo {
    pub id: i32,
    pub role: Role,
    /// Client listener port (0 for a controller-only node).
    pub port: u16,
    /// Controller listener port (0 for a broker-only node).
    pub controller_port: u16,
    /// Where a broker serves `GET /metrics` (`strom.metrics.listener`; 0: not served).
    #[serde(default)]
    pub metrics_port: u16,
    pub dir: PathBuf,
    pub pid: Option<u32>,
    /// The address its listeners bind: loopback, or its own network namespace's.
    #[serde(default = "loopback")]
    pub host: String,
}

fn loopback() -> String {
    "127.0.0.1".to_string()
}

/// What a cluster is made of.
#[derive(Debug, Clone, Default)]
pub struct ClusterSpec {
    pub brokers: usize,
    /// 0: every broker is also a controller (combined nodes).
    pub controllers: usize,
    /// Extra `server.properties` lines for every node.
    pub extra: Vec<String>,
    /// Each node in its own network namespace ([`TestNetwork`], root only), so the
    /// network between them can be cut; the thread that starts the cluster moves into
    /// the client namespace.
    pub isolated: bool,
}

/// A running local cluster; its processes are killed when it is dropped, unless detached.
pub struct LocalCluster {
    /// The `strom` binary the nodes run.
    binary: PathBuf,
    pub dir: PathBuf,
    pub cluster_id: String,
    pub nodes: Vec<NodeInfo>,
    children: Vec<Option<Child>>,
    _temp: Option<tempfile::TempDir>,
    /// Dropped after the processes are killed (fields drop after `Drop::drop`).
    network: Option<TestNetwork>,
}

/// Listener ports are chosen below Linux's ephemeral range (32768–60999 by default): a
/// port the kernel picked for us would be free now, but could be taken as the source port
/// of some outgoing connection (a node dialling a peer that is not up yet) before the
/// node that is to listen on it binds it.
const PORTS: std::ops::Range<u16> = 20_000..32_000;

/// A port of [`PORTS`] nothing listens on now and this process has not handed out before.
///
/// A probe bind only says the port is free this instant: the node that will listen on it
/// binds it later, so two nodes of one cluster must never be handed the same free port.
/// Every call therefore moves one process-wide cursor on (a random start, then a stride
/// coprime to the span), which visits each port once before it comes round again.
pub fn free_port() -> Result<u16> {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::OnceLock;
    static CURSOR: OnceLock<AtomicU32> = OnceLock::new();
    let span = u32::from(PORTS.end - PORTS.start);
    let cursor = CURSOR.get_or_init(|| {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
            ^ std::process::id().rotate_left(16);
        AtomicU32::new(seed % span)
    });
    for _ in 0..span {
        let step = cursor.fetch_add(1, Ordering::Relaxed);
        let port = PORTS.start + ((step % span) * 7919 % span) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    bail!("no free port in {PORTS:?}")
}

impl NodeInfo {
    /// The client listener's address.
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The broker's counters, read from `GET /metrics`, by name.
    pub fn metrics(&self) -> Result<BTreeMap<String, u64>> {
        read_metrics(&format!("{}:{}", self.host, self.metrics_port))
            .with_context(|| format!("node {}'s metrics", self.id))
    }
}

/// A broker's counters, read from `GET /metrics` on `address` (its
/// `strom.metrics.listener`), by name.
pub fn read_metrics(address: &str) -> Result<BTreeMap<String, u64>> {
    let mut stream = std::net::TcpStream::connect(address)
        .with_context(|| format!("connecting to the metrics listener {address}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: strom\r\n\r\n")?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let (_, body) = answer
        .split_once("\r\n\r\n")
        .context("the metrics answer has no body")?;
    Ok(body
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (name, value) = l.split_once(' ')?;
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect())
}

impl LocalCluster {
    /// Formats and starts a cluster of this `strom` binary in `dir` (a temporary directory
    /// when `None`) and waits until every broker is unfenced.
    pub fn start(spec: &ClusterSpec, dir: Option<&Path>) -> Result<Self> {
        let binary = std::env::current_exe().context("cannot locate the strom binary")?;
        Self::start_with(&binary, spec, dir)
    }

    /// [`Self::start`] with the `strom` binary at `binary`.
    pub fn start_with(binary: &Path, spec: &ClusterSpec, dir: Option<&Path>) -> Result<Self> {
        let strom = || Command::new(binary);
        let temp = match dir {
            Some(_) => None,
            None => Some(
                tempfile::Builder::new()
                    .prefix("strom-cluster-")
                    .tempdir()?,
            ),
        };
        let dir = dir.map_or_else(
            || temp.as_ref().unwrap().path().to_path_buf(),
            Path::to_path_buf,
        );
        std::fs::create_dir_all(&dir)?;
        let id = strom().args(["storage", "random-uuid"]).output()?;
        let cluster_id = String::from_utf8(id.stdout)?.trim().to_string();
        let mut roles = Vec::new();
        if spec.controllers == 0 {
            roles.extend(std::iter::repeat_n(Role::Combined, spec.brokers));
        } else {
            roles.extend(std::iter::repeat_n(Role::Controller, spec.controllers));
            roles.extend(std::iter::repeat_n(Role::Broker, spec.brokers));
        }
        let ids: Vec<i32> = (1..=roles.len() as i32).collect();
        let network = if spec.isolated {
            Some(TestNetwork::create(&ids)?)
        } else {
            None
        };
        // In its own namespace every port is free: Kafka's.
        let port = |fixed: u16| {
            if network.is_some() {
                Ok(fixed)
            } else {
                free_port()
            }
        };
        let mut nodes = Vec::new();
        for (i, role) in roles.into_iter().enumerate() {
            let id = i as i32 + 1;
            nodes.push(NodeInfo {
                id,
                role,
                port: if role == Role::Controller {
                    0
                } else {
                    port(9092)?
                },
                controller_port: if role == Role::Broker { 0 } else { port(9093)? },
                metrics_port: if role == Role::Controller {
                    0
                } else {
                    port(9644)?
                },
                dir: dir.join(format!("node{id}")),
                pid: None,
                host: if network.is_some() {
                    TestNetwork::address(id)
                } else {
                    loopback()
                },
            });
        }
        let voters = nodes
            .iter()
            .filter(|n| n.role != Role::Broker)
            .map(|n| format!("{}@{}:{}", n.id, n.host, n.controller_port))
            .collect::<Vec<_>>()
            .join(",");
        // As Kafka's sample configs do for small clusters: a replication factor of 3
        // for `__consumer_offsets` would leave groups without a coordinator on fewer
        // brokers.
        let brokers = nodes.iter().filter(|n| n.role != Role::Controller).count();
        let offsets_replication = brokers.clamp(1, 3);
        // The nodes share this machine's cores: each handles requests on its share, so
        // they do not wake more threads than there are cores to run them.
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let io_threads = (cores / nodes.len()).max(1);
        for node in &nodes {
            std::fs::create_dir_all(&node.dir)?;
            let host = &node.host;
            let (roles, listeners) = match node.role {
                Role::Combined => (
                    "broker,controller",
                    format!(
                        "PLAINTEXT://{host}:{},CONTROLLER://{host}:{}",
                        node.port, node.controller_port
                    ),
                ),
                Role::Controller => (
                    "controller",
                    format!("CONTROLLER://{host}:{}", node.controller_port),
                ),
                Role::Broker => ("broker", format!("PLAINTEXT://{host}:{}", node.port)),
            };
            let mut lines = vec![
                format!("process.roles={roles}"),
                format!("node.id={}", node.id),
                format!("controller.quorum.voters={voters}"),
                format!("listeners={listeners}"),
                "controller.listener.names=CONTROLLER".to_string(),
                "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
                    .to_string(),
                format!("log.dirs={}", node.dir.join("data").display()),
                "group.initial.rebalance.delay.ms=0".to_string(),
                format!("offsets.topic.replication.factor={offsets_replication}"),
                format!("num.io.threads={io_threads}"),
            ];
            if node.metrics_port != 0 {
                lines.push(format!(
                    "strom.metrics.listener={host}:{}",
                    node.metrics_port
                ));
            }
            lines.extend(spec.extra.iter().cloned());
            let config = node.dir.join("server.properties");
            std::fs::write(&config, lines.join("\n") + "\n")?;
            let status = strom()
                .args(["storage", "format", "--cluster-id", &cluster_id, "--config"])
                .arg(&config)
                .stdout(Stdio::null())
                .status()?;
            if !status.success() {
                bail!("strom storage format failed for node {}", node.id);
            }
        }
        Self {
            binary: binary.to_path_buf(),
            dir,
            cluster_id,
            children: nodes.iter().map(|_| None).collect(),
            nodes,
            _temp: temp,
            network,
        }
        .launch()
    }

    /// Starts every node and waits until every broker is unfenced.
    fn launch(mut self) -> Result<Self> {
        if let Some(network) = &self.network {
            network.enter_client()?;
        }
        for i in 0..self.nodes.len() {
            self.spawn(i)?;
        }
        self.wait_until_ready(READY_TIMEOUT)?;
        Ok(self)
    }

    /// Starts again the stopped cluster recorded in `dir` (by [`Self::detach`]): every
    /// node with its own configuration, data and ports, no formatting; waits until every
    /// broker is unfenced.
    pub fn resume(dir: &Path) -> Result<Self> {
        let binary = std::env::current_exe().context("cannot locate the strom binary")?;
        let (cluster_id, mut nodes) = Self::recorded(dir)?;
        for node in &mut nodes {
            node.pid = None;
        }
        Self {
            binary,
            dir: dir.to_path_buf(),
            cluster_id,
            children: nodes.iter().map(|_| None).collect(),
            nodes,
            _temp: None,
            network: None,
        }
        .launch()
    }

    fn index(&self, id: i32) -> usize {
        self.nodes
            .iter()
            .position(|n| n.id == id)
            .expect("a node of this cluster")
    }

    /// Starts node `i` and waits for its ready line.
    fn spawn(&mut self, i: usize) -> Result<Duration> {
        let started = Instant::now();
        let node = &self.nodes[i];
        let out = node.dir.join("stdout");
        let mut command = match &self.network {
            Some(network) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", &network.namespace(node.id)])
                    .arg(&self.binary);
                c
            }
            None => Command::new(&self.binary),
        };
        // Every incarnation's log stays, one after another: a fault run that went wrong is
        // read across the restarts that led there.
        let mut stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(node.dir.join("stderr"))?;
        writeln!(stderr, "--- node {} starts ---", node.id)?;
        let child = command
            .arg("server")
            .arg(node.dir.join("server.properties"))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out)?)
            .stderr(stderr)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info,openraft=warn".into()),
            )
            .spawn()
            .context("cannot start strom server")?;
        let ready = if node.role == Role::Controller {
            "strom controller"
        } else {
            "strom broker"
        };
        let mut child = child;
        loop {
            if std::fs::read_to_string(&out)
                .unwrap_or_default()
                .lines()
                .any(|l| l.starts_with(ready))
            {
                break;
            }
            if let Some(status) = child.try_wait()? {
                let log = std::fs::read_to_string(node.dir.join("stderr")).unwrap_or_default();
                bail!(
                    "node {} exited ({status}) before it was ready:\n{}",
                    node.id,
                    tail(&log)
                );
            }
            if started.elapsed() > READY_TIMEOUT {
                let _ = child.kill();
                bail!("node {} did not start within {READY_TIMEOUT:?}", node.id);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        self.nodes[i].pid = Some(child.id());
        self.children[i] = Some(child);
        Ok(started.elapsed())
    }

    /// The client addresses of the running brokers.
    pub fn bootstrap(&self) -> String {
        self.running_brokers()
            .map(NodeInfo::address)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The process ids of the running nodes, controllers included: together they are the
    /// cluster's CPU cost.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().flatten().map(Child::id).collect()
    }

    fn running_brokers(&self) -> impl Iterator<Item = &NodeInfo> {
        self.nodes
            .iter()
            .zip(&self.children)
            .filter(|(n, c)| n.role != Role::Controller && c.is_some())
            .map(|(n, _)| n)
    }

    /// The broker ids the Metadata of broker `addr` lists (live, unfenced brokers).
    pub fn listed_brokers(addr: &str) -> Result<Vec<i32>> {
        let mut ids: Vec<i32> = blocking::metadata(addr, Duration::from_secs(5))?
            .brokers
            .iter()
            .map(|b| b.node_id.0)
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }

    /// Waits until every running broker lists every running broker.
    pub fn wait_until_ready(&self, timeout: Duration) -> Result<()> {
        let expected: Vec<i32> = self.running_brokers().map(|n| n.id).collect();
        let deadline = Instant::now() + timeout;
        for node in self.running_brokers() {
            let addr = node.address();
            while Self::listed_brokers(&addr).ok().as_ref() != Some(&expected) {
                if Instant::now() > deadline {
                    bail!(
                        "broker {} does not list brokers {expected:?} within {timeout:?}",
                        node.id
                    );
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        Ok(())
    }

    /// The active controller, as a running broker reports it (DescribeQuorum).
    pub fn active_controller(&self) -> Result<i32> {
        let quorum = blocking::describe_quorum(&self.bootstrap(), Duration::from_secs(5))?;
        Ok(quorum.topics[0].partitions[0].leader_id.0)
    }

    /// The cluster's private network, when its nodes are isolated.
    pub fn network(&self) -> Option<&TestNetwork> {
        self.network.as_ref()
    }

    /// Node `id`.
    pub fn node(&self, id: i32) -> &NodeInfo {
        &self.nodes[self.index(id)]
    }

    /// What node `id` has written to stderr so far.
    pub fn stderr(&self, id: i32) -> String {
        std::fs::read_to_string(self.node(id).dir.join("stderr")).unwrap_or_default()
    }

    /// SIGSTOP (`true`) or SIGCONT (`false`) to node `id`.
    pub fn pause(&self, id: i32, paused: bool) -> Result<()> {
        let pid = self.node(id).pid.context("node not running")?;
        signal(pid, if paused { libc::SIGSTOP } else { libc::SIGCONT })
    }

    /// Whether node `id` runs.
    pub fn is_running(&self, id: i32) -> bool {
        self.children[self.index(id)].is_some()
    }

    /// `kill -9` of node `id`.
    pub fn kill9(&mut self, id: i32) -> Result<()> {
        let i = self.index(id);
        if let Some(mut child) = self.children[i].take() {
            child.kill()?;
            child.wait()?;
        }
        self.nodes[i].pid = None;
        Ok(())
    }

    /// SIGTERM to node `id`; returns how long it took to exit, and whether it exited 0.
    pub fn terminate(&mut self, id: i32) -> Result<(Duration, bool)> {
        let i = self.index(id);
        let mut child = self.children[i].take().context("node not running")?;
        let started = Instant::now();
        signal(child.id(), libc::SIGTERM)?;
        let status = child.wait()?;
        self.nodes[i].pid = None;
        Ok((started.elapsed(), status.success()))
    }

    /// Starts node `id` again; returns how long it took until it serves: for a broker,
    /// until this incarnation is registered and unfenced (while the previous one's
    /// session runs, the controller still lists that one, so Metadata cannot tell), for a
    /// controller its ready line.
    pub fn restart(&mut self, id: i32) -> Result<Duration> {
        let i = self.index(id);
        let started = Instant::now();
        self.spawn(i)?;
        if self.nodes[i].role == Role::Controller {
            return Ok(started.elapsed());
        }
        let unfenced = format!("strom broker {id} unfenced");
        let out = self.nodes[i].dir.join("stdout");
        while !std::fs::read_to_string(&out)
            .unwrap_or_default()
            .lines()
            .any(|l| l == unfenced)
        {
            if started.elapsed() > READY_TIMEOUT {
                let log = self.stderr(id);
                let lines: Vec<&str> = log.lines().collect();
                let tail = lines[lines.len().saturating_sub(12)..].join("\n");
                bail!("broker {id} was not unfenced within {READY_TIMEOUT:?} of its restart; the end of its log:\n{tail}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(started.elapsed())
    }

    /// Leaves the processes running and records them in `<dir>/cluster.json` for
    /// `strom cluster status` and `stop`.
    pub fn detach(mut self) -> Result<PathBuf> {
        let state = self.dir.join("cluster.json");
        let json = serde_json::to_vec_pretty(&(&self.cluster_id, &self.nodes))?;
        std::fs::write(&state, json)?;
        for child in &mut self.children {
            if let Some(child) = child.take() {
                std::mem::forget(child);
            }
        }
        if let Some(temp) = self._temp.take() {
            let _ = temp.keep();
        }
        Ok(state)
    }

    /// The cluster recorded in `<dir>/cluster.json`.
    pub fn recorded(dir: &Path) -> Result<(String, Vec<NodeInfo>)> {
        let state = dir.join("cluster.json");
        let bytes = std::fs::read(&state).with_context(|| {
            format!(
                "no cluster recorded in {} (start one with strom cluster start --dir {})",
                state.display(),
                dir.display()
            )
        })?;
        Ok(serde_json::from_slice(&bytes)?)
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for child in self.children.iter_mut().flatten() {
            let _ = signal(child.id(), libc::SIGCONT);
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Sends `sig` to process `pid`.
pub fn signal(pid: u32, sig: libc::c_int) -> Result<()> {
    // SAFETY: kill(2) on a pid this tool started; no memory is shared.
    if unsafe { libc::kill(pid as libc::pid_t, sig) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(())
}

fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
