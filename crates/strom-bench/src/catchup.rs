//! `strom bench catchup`: how fast a follower that was down catches up (issue 10's "a
//! follower that was down 60 s while 1 GB arrived catches up at ≥ 200 MB/s").
//!
//! Three combined nodes, a topic of `--partitions` partitions with replication factor 3.
//! Each run `kill -9`s node 3, produces `--megabytes` of records with the native producer
//! (acks=1, so the two live replicas take them at full speed), keeps node 3 down until
//! `--down-secs` have passed since it was killed, then starts it again and times:
//!
//! - restart → unfenced (the broker registered, every hosted partition open), and
//! - restart → node 3 back in the ISR of every partition, polled through Metadata;
//!
//! the bytes it fetched are the growth of its partitions' `.log` files, so the rate is
//! what the follower copied per second, from its process start and from its unfencing.
//! Each node's CPU seconds over the catch-up are reported, to show which process limited
//! it. Runs are repeated (`--runs`) and every value printed, never a best run.

use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;

use crate::poll;
use strom_client::blocking;
use strom_testkit::local_cluster::{ClusterSpec, LocalCluster};
use strom_tools::cpu::process_cpu_seconds;
use strom_tools::topics;

const TOPIC: &str = "catchup";
/// The node that is killed and catches up.
const FOLLOWER: i32 = 3;
const TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Parser, Debug)]
#[command(
    name = "strom bench catchup",
    about = "Catch-up rate of a follower that was down while data arrived"
)]
struct Args {
    /// Data produced while the follower is down, in MB (10^6 bytes of record values).
    #[arg(long, default_value_t = 1000)]
    megabytes: usize,
    /// Seconds the follower stays down (from its kill to its restart), at least.
    #[arg(long, default_value_t = 60)]
    down_secs: u64,
    /// Partitions of the topic.
    #[arg(long, default_value_t = 6)]
    partitions: i32,
    /// Size of each record's value, bytes.
    #[arg(long, default_value_t = 1000)]
    record_size: usize,
    /// Repetitions, each on a fresh cluster.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Extra settings for every node, `key=value` (repeatable).
    #[arg(long = "override")]
    overrides: Vec<String>,
}

pub fn main(argv: &[String]) -> ExitCode {
    crate::clap_command::<Args>("strom bench catchup", argv, run)
}

/// One run's figures.
#[derive(Debug)]
struct CatchUp {
    megabytes: f64,
    unfenced_s: f64,
    in_sync_s: f64,
    /// CPU seconds of nodes 1, 2 and 3 from the restart to the last ISR join.
    cpu_s: [f64; 3],
}

fn run(args: &Args, _argv: &[String]) -> Result<()> {
    let mut runs = Vec::new();
    for run in 1..=args.runs {
        let figures = one_run(args).with_context(|| format!("run {run}"))?;
        println!(
            "run {run}: {:.0} MB behind; restart → unfenced {:.2} s, → in every ISR {:.2} s: {:.0} MB/s from the restart, {:.0} MB/s from unfencing; CPU s node 1 / 2 / 3: {:.2} / {:.2} / {:.2}",
            figures.megabytes,
            figures.unfenced_s,
            figures.in_sync_s,
            figures.megabytes / figures.in_sync_s,
            figures.megabytes / (figures.in_sync_s - figures.unfenced_s),
            figures.cpu_s[0],
            figures.cpu_s[1],
            figures.cpu_s[2],
        );
        runs.push(figures);
    }
    let range = |f: &dyn Fn(&CatchUp) -> f64| {
        let (min, max) = crate::min_max(runs.iter().map(f));
        format!("{min:.0}–{max:.0}")
    };
    println!(
        "\nfollower catch-up, {} partitions, {} MB while down ≥ {} s, {} run(s): {} MB/s from the restart, {} MB/s from unfencing (issue 10 aims at ≥ 200 MB/s)",
        args.partitions,
        args.megabytes,
        args.down_secs,
        runs.len(),
        range(&|r| r.megabytes / r.in_sync_s),
        range(&|r| r.megabytes / (r.in_sync_s - r.unfenced_s)),
    );
    Ok(())
}

fn one_run(args: &Args) -> Result<CatchUp> {
    let spec = ClusterSpec {
        brokers: 3,
        extra: args.overrides.clone(),
        ..Default::default()
    };
    let mut cluster = LocalCluster::start(&spec, None)?;
    let bootstrap = cluster.bootstrap();
    topics::create_topic(&bootstrap, TOPIC, args.partitions, 3)?;
    poll(
        "the topic's replicas all in sync",
        TIMEOUT,
        Duration::from_millis(10),
        || all_in_sync(&bootstrap, args.partitions).unwrap_or(false),
    )?;
    let follower_dir = cluster.node(FOLLOWER).dir.clone();
    let before = topic_log_bytes(&follower_dir)?;
    cluster.kill9(FOLLOWER)?;
    let killed = Instant::now();
    let survivors: String = cluster
        .nodes
        .iter()
        .filter(|n| n.id != FOLLOWER)
        .map(|n| n.address())
        .collect::<Vec<_>>()
        .join(",");
    produce(&survivors, args)?;
    let down = Duration::from_secs(args.down_secs);
    if let Some(rest) = down.checked_sub(killed.elapsed()) {
        std::thread::sleep(rest);
    }

    // The killed follower has no process before its restart: its CPU counts from zero.
    let cpu = |c: &LocalCluster| -> Vec<f64> {
        (1..=3)
            .map(|id| {
                c.node(id)
                    .pid
                    .map_or(0.0, |p| process_cpu_seconds(p).unwrap_or(0.0))
            })
            .collect()
    };
    let cpu_before = cpu(&cluster);
    let restarted = Instant::now();
    let unfenced = cluster.restart(FOLLOWER)?.as_secs_f64();
    poll(
        "the restarted follower in every ISR",
        TIMEOUT,
        Duration::from_millis(5),
        || all_in_sync(&survivors, args.partitions).unwrap_or(false),
    )?;
    let in_sync = restarted.elapsed().as_secs_f64();
    let cpu_after = cpu(&cluster);
    let cpu_s = [0, 1, 2].map(|i| cpu_after[i] - cpu_before[i]);
    let after = topic_log_bytes(&follower_dir)?;
    Ok(CatchUp {
        megabytes: after.saturating_sub(before) as f64 / 1e6,
        unfenced_s: unfenced,
        in_sync_s: in_sync,
        cpu_s,
    })
}

/// Whether every partition of the topic has all three replicas in its ISR.
fn all_in_sync(bootstrap: &str, partitions: i32) -> Result<bool> {
    let metadata = blocking::metadata(bootstrap, Duration::from_secs(5))?;
    let Some(topic) = metadata
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == TOPIC))
    else {
        return Ok(false);
    };
    Ok(topic.partitions.len() == partitions as usize
        && topic.partitions.iter().all(|p| p.isr_nodes.len() == 3))
}

/// `--megabytes` of `--record-size` records to the topic with the native producer, acks=1.
fn produce(bootstrap: &str, args: &Args) -> Result<()> {
    let records = args.megabytes * 1_000_000 / args.record_size;
    let exe = std::env::current_exe()?;
    let output = Command::new(exe)
        .args(["producer-perf-test", "--client", "native", "--topic", TOPIC])
        .args(["--num-records", &records.to_string()])
        .args(["--record-size", &args.record_size.to_string()])
        .args(["--throughput", "-1", "--producer-props"])
        .arg(format!("bootstrap.servers={bootstrap}"))
        .arg("acks=1")
        .stdin(Stdio::null())
        .output()?;
    if !output.status.success() {
        bail!(
            "the producer failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let report = String::from_utf8_lossy(&output.stdout);
    if let Some(summary) = report.lines().last() {
        println!("  produced while the follower was down: {summary}");
    }
    Ok(())
}

/// The bytes of the topic's `.log` segment files under a node's data directory.
fn topic_log_bytes(node_dir: &Path) -> Result<u64> {
    let mut total = 0;
    let mut dirs = vec![node_dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let path = entry.path();
            if entry.file_type()?.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "log")
                && path
                    .parent()
                    .and_then(|p| p.file_name())
                    .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{TOPIC}-")))
            {
                total += entry.metadata()?.len();
            }
        }
    }
    Ok(total)
}
