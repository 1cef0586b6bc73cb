//! `strom cluster start | status | stop`: a local KRaft cluster in one command, for
//! trying strom's cluster and for running the cluster experiments against it.
//!
//! `start --brokers N [--controllers K] [--dir D] [--override key=value]...` formats and
//! starts N combined nodes (or K controller-only plus N broker-only), waits until every
//! broker is unfenced, prints the bootstrap list and leaves the processes running; on a
//! directory that holds a stopped cluster it starts that cluster again, data and all;
//! `status` describes them; `stop` shuts them down with SIGTERM (a controlled shutdown),
//! brokers first.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::cli::{self, OptionSpec};
use strom_client::blocking;
use strom_testkit::local_cluster::{signal, ClusterSpec, LocalCluster, NodeInfo, Role};

const SPECS: &[OptionSpec] = &[
    OptionSpec::one("brokers"),
    OptionSpec::one("controllers"),
    OptionSpec::one("dir"),
    OptionSpec::one("override"),
    OptionSpec::flag("help"),
];

const USAGE: &str = "\
Usage: strom cluster start [--brokers N] [--controllers K] [--dir D] [--override key=value]...
       strom cluster status [--dir D]
       strom cluster stop [--dir D]
  --brokers N       brokers to start (default 3)
  --controllers K   controller-only nodes; 0 (default) makes every broker a controller too
  --dir D           where the nodes keep their configs, data and logs (default /tmp/strom-cluster);
                    start on a stopped cluster's directory starts it again with its data
  --override k=v    a server.properties setting for every node (repeatable)
";

const DEFAULT_DIR: &str = "/tmp/strom-cluster";

pub fn main(args: Vec<String>) -> ExitCode {
    let parsed = match cli::parse(&args, SPECS, true) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("strom cluster: {e:?}\n{USAGE}");
            return ExitCode::from(1);
        }
    };
    if parsed.has("help") {
        print!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let dir = PathBuf::from(parsed.value("dir").unwrap_or(DEFAULT_DIR));
    let result = match parsed.positional.first().map(String::as_str) {
        Some("start") => start(&parsed, dir),
        Some("status") => status(dir),
        Some("stop") => stop(dir),
        _ => {
            eprint!("{USAGE}");
            return ExitCode::from(1);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strom cluster: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// Whether node `n` runs: its recorded process exists, is not a zombie (a node `start`
/// left behind is reparented to init, which may reap it late), and is that node's
/// `strom server` — a recorded pid the system has since given to another process (the
/// directory outlives the cluster's processes) is not the node.
fn alive(n: &NodeInfo) -> bool {
    n.pid.is_some_and(|p| {
        let config = n.dir.join("server.properties");
        signal(p, 0).is_ok()
            && std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
            })
            && std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|cmdline| {
                cmdline
                    .split(|b| *b == 0)
                    .any(|arg| arg == config.as_os_str().as_encoded_bytes())
            })
    })
}

fn start(args: &cli::Parsed, dir: PathBuf) -> Result<()> {
    let number = |name: &str, default: usize| -> Result<usize> {
        args.value(name).map_or(Ok(default), |v| {
            v.parse()
                .with_context(|| format!("--{name} {v} is not a number"))
        })
    };
    let spec = ClusterSpec {
        brokers: number("brokers", 3)?,
        controllers: number("controllers", 0)?,
        extra: args.values("override").to_vec(),
        isolated: false,
    };
    if spec.brokers == 0 {
        bail!("--brokers must be at least 1");
    }
    let started = Instant::now();
    let (cluster, verb) = match LocalCluster::recorded(&dir) {
        Ok((_, nodes)) => {
            check_resumable(args, &spec, &nodes, &dir)?;
            (LocalCluster::resume(&dir)?, "Restarted")
        }
        Err(_) => (LocalCluster::start(&spec, Some(&dir))?, "Started"),
    };
    let bootstrap = cluster.bootstrap();
    let controller = cluster.active_controller().unwrap_or(-1);
    let id = cluster.cluster_id.clone();
    let brokers = cluster
        .nodes
        .iter()
        .filter(|n| n.role != Role::Controller)
        .count();
    cluster.detach()?;
    eprintln!(
        "{verb} cluster {id} in {}: {brokers} broker(s), active controller {controller}, every broker unfenced after {:.1} s.",
        dir.display(),
        started.elapsed().as_secs_f64()
    );
    println!("{bootstrap}");
    Ok(())
}

/// A directory that holds a cluster starts that cluster again, with its data, as a
/// stopped Kafka cluster is started again; it is never formatted anew. Flags that would
/// describe another cluster are refused rather than ignored.
fn check_resumable(
    args: &cli::Parsed,
    spec: &ClusterSpec,
    nodes: &[NodeInfo],
    dir: &std::path::Path,
) -> Result<()> {
    if nodes.iter().any(alive) {
        bail!(
            "a cluster is already running in {} (strom cluster stop --dir {} first)",
            dir.display(),
            dir.display()
        );
    }
    let count = |role: Role| nodes.iter().filter(|n| n.role == role).count();
    let (brokers, controllers) = match count(Role::Controller) {
        0 => (count(Role::Combined), 0),
        k => (count(Role::Broker), k),
    };
    let reshaped = (args.value("brokers").is_some() && spec.brokers != brokers)
        || (args.value("controllers").is_some() && spec.controllers != controllers);
    if reshaped || !spec.extra.is_empty() {
        bail!(
            "{} holds a stopped cluster of {brokers} broker(s) and {controllers} controller-only node(s), which start starts again with its data and settings; to start a different one, remove that directory or choose another --dir",
            dir.display()
        );
    }
    Ok(())
}

fn status(dir: PathBuf) -> Result<()> {
    let (cluster_id, nodes) = LocalCluster::recorded(&dir)?;
    let bootstrap = nodes
        .iter()
        .filter(|n| n.role != Role::Controller && alive(n))
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect::<Vec<_>>()
        .join(",");
    let listed = if bootstrap.is_empty() {
        Vec::new()
    } else {
        LocalCluster::listed_brokers(&bootstrap).unwrap_or_default()
    };
    let controller = blocking::describe_quorum(&bootstrap, Duration::from_secs(5))
        .map(|q| q.topics[0].partitions[0].leader_id.0.to_string())
        .unwrap_or_else(|_| "none".to_string());
    println!(
        "Cluster {cluster_id} in {}: active controller {controller}",
        dir.display()
    );
    println!("Bootstrap: {bootstrap}");
    println!(
        "{:<7} {:<18} {:<22} {:<22} {:<8} Status",
        "NodeId", "Roles", "Listener", "Controller", "Pid"
    );
    for n in &nodes {
        print_node(n, alive(n), listed.contains(&n.id));
    }
    Ok(())
}

fn print_node(n: &NodeInfo, running: bool, listed: bool) {
    let roles = match n.role {
        Role::Combined => "broker,controller",
        Role::Controller => "controller",
        Role::Broker => "broker",
    };
    let addr = |p: u16| {
        if p == 0 {
            "-".to_string()
        } else {
            format!("127.0.0.1:{p}")
        }
    };
    let status = match (running, n.role, listed) {
        (false, _, _) => "stopped",
        (true, Role::Controller, _) => "running",
        (true, _, true) => "running, unfenced",
        (true, _, false) => "running, fenced",
    };
    println!(
        "{:<7} {:<18} {:<22} {:<22} {:<8} {status}",
        n.id,
        roles,
        addr(n.port),
        addr(n.controller_port),
        n.pid.map_or("-".to_string(), |p| p.to_string())
    );
}

fn stop(dir: PathBuf) -> Result<()> {
    let (_, mut nodes) = LocalCluster::recorded(&dir)?;
    nodes.sort_by_key(|n| n.role == Role::Controller);
    let mut stopped = 0;
    for n in nodes.iter().filter(|n| alive(n)) {
        let pid = n.pid.expect("alive");
        signal(pid, libc::SIGTERM)?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while alive(n) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if alive(n) {
            signal(pid, libc::SIGKILL)?;
        }
        stopped += 1;
    }
    println!(
        "Stopped {stopped} node(s) of the cluster in {}.",
        dir.display()
    );
    Ok(())
}
