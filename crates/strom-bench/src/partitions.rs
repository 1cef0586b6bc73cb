//! `strom bench partitions`: partition density on one broker (issue 8, seed 003's
//! per-broker part). A `strom server` child hosts N partitions of a few records each (one
//! or more segments per partition); the command measures what seed 003 timed for Kafka,
//! and what the descriptor limit makes matter:
//!
//! - descriptors and RSS at rest, and the most descriptors seen while a producer writes to
//!   every partition and while a consumer reads every partition from offset 0 (old
//!   segments);
//! - SIGTERM → exit with every partition holding unflushed records;
//! - start-up after that clean shutdown, and after `kill -9` with unflushed records in
//!   every partition: spawn → a Metadata response naming a leader for some partition (the
//!   broker serves each partition as soon as its log is open), → the ready line (every log
//!   opened) and → a Metadata response listing every partition without error;
//! - the broker's CPU seconds over its lifetimes (the client runs on the same cores).
//!
//! Runs are repeated and reported as ranges, never as a best run.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

use strom_client::blocking;
use strom_testkit::embedded::parse_ready_line;
use strom_tools::process_stats::{descriptor_count, resident_mb};
use strom_tools::topics;

const TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Parser, Debug)]
#[command(
    name = "strom bench partitions",
    about = "Partition density of one broker: descriptors, RSS, start-up and shutdown times"
)]
struct Args {
    /// Partitions hosted by the broker.
    #[arg(long, default_value_t = 13_300)]
    partitions: usize,
    /// Partitions per topic (the last topic takes the remainder).
    #[arg(long, default_value_t = 1000)]
    partitions_per_topic: usize,
    /// Records written to each partition.
    #[arg(long, default_value_t = 3)]
    records: usize,
    /// Segments per partition: the records are written in this many rounds with a tiny
    /// `log.segment.bytes`, so each round rolls a new segment.
    #[arg(long, default_value_t = 1)]
    segments: usize,
    /// Repetitions; figures are reported as ranges over them.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Extra broker settings, `key=value` (repeatable).
    #[arg(long = "override")]
    overrides: Vec<String>,
}

pub fn main(argv: &[String]) -> ExitCode {
    crate::clap_command::<Args>("strom bench partitions", argv, |args, _| run(args))
}

/// One run's figures.
#[derive(Debug, Default, Clone)]
struct Figures {
    create_s: f64,
    descriptors_at_rest: usize,
    rss_mb_at_rest: f64,
    descriptors_max_producing: usize,
    descriptors_max_fetching: usize,
    sigterm_s: f64,
    clean_first_served_s: f64,
    clean_ready_s: f64,
    clean_serving_s: f64,
    clean_descriptors: usize,
    clean_rss_mb: f64,
    kill9_first_served_s: f64,
    kill9_ready_s: f64,
    kill9_serving_s: f64,
    kill9_descriptors: usize,
    kill9_rss_mb: f64,
    sigterm_after_recovery_s: f64,
    broker_cpu_s: f64,
}

fn run(args: &Args) -> Result<()> {
    if args.partitions == 0 || args.partitions_per_topic == 0 || args.segments == 0 {
        bail!("--partitions, --partitions-per-topic and --segments must be positive");
    }
    let mut all = Vec::new();
    for run in 1..=args.runs {
        let figures = one_run(args).with_context(|| format!("run {run}"))?;
        println!("run {run}: {figures:?}");
        all.push(figures);
    }
    print_summary(args, &all);
    Ok(())
}

fn one_run(args: &Args) -> Result<Figures> {
    let data = tempfile::Builder::new()
        .prefix("strom-bench-partitions-")
        .tempdir()?;
    let mut overrides = args.overrides.clone();
    if args.segments > 1 {
        overrides.push("log.segment.bytes=14".to_string());
    }
    let cpu_before = children_cpu_seconds();
    let mut f = Figures::default();
    let mut broker = BrokerProcess::start(data.path(), 0, &overrides)?;
    let bootstrap = broker.bootstrap.clone();
    let topics = topic_layout(args);
    let started = Instant::now();
    for (name, partitions) in &topics {
        topics::create_topic(&bootstrap, name, *partitions as i32, 1)?;
    }
    f.create_s = started.elapsed().as_secs_f64();

    let rounds = args.segments.min(args.records.max(1));
    let watcher = DescriptorWatcher::start(broker.pid());
    for round in 0..rounds {
        let count = args.records / rounds + usize::from(round < args.records % rounds);
        produce(&bootstrap, &topics, count)?;
    }
    f.descriptors_max_producing = watcher.stop();
    f.descriptors_at_rest = broker.descriptors()?;
    f.rss_mb_at_rest = broker.rss_mb()?;
    let watcher = DescriptorWatcher::start(broker.pid());
    consume_all(&bootstrap, &topics, args.records)?;
    f.descriptors_max_fetching = watcher.stop();

    f.sigterm_s = broker.terminate()?;
    let port = broker.port;
    let (broker_clean, first, ready) = timed_start(data.path(), port, &overrides)?;
    f.clean_first_served_s = first;
    f.clean_ready_s = ready;
    f.clean_serving_s = ready + serving_after(&broker_clean.bootstrap, args.partitions)?;
    f.clean_descriptors = broker_clean.descriptors()?;
    f.clean_rss_mb = broker_clean.rss_mb()?;

    produce(&bootstrap, &topics, 1)?;
    let mut broker_clean = broker_clean;
    broker_clean.kill9()?;
    let (mut broker_recovered, first, ready) = timed_start(data.path(), port, &overrides)?;
    f.kill9_first_served_s = first;
    f.kill9_ready_s = ready;
    f.kill9_serving_s = ready + serving_after(&broker_recovered.bootstrap, args.partitions)?;
    f.kill9_descriptors = broker_recovered.descriptors()?;
    f.kill9_rss_mb = broker_recovered.rss_mb()?;
    f.sigterm_after_recovery_s = broker_recovered.terminate()?;
    f.broker_cpu_s = children_cpu_seconds() - cpu_before;
    Ok(f)
}

/// Restarts the broker on `port`: seconds from spawning it until a Metadata response
/// names a leader for some partition (a standalone node serves each partition as soon as
/// its log is open), and until its ready line (every partition open).
fn timed_start(dir: &Path, port: u16, overrides: &[String]) -> Result<(BrokerProcess, f64, f64)> {
    let started = Instant::now();
    let address = format!("127.0.0.1:{port}");
    let first_served = std::thread::spawn(move || loop {
        let serving = blocking::metadata(&address, Duration::from_secs(5)).is_ok_and(|m| {
            m.topics
                .iter()
                .flat_map(|t| &t.partitions)
                .any(|p| p.error_code == 0 && p.leader_id.0 >= 0)
        });
        if serving || started.elapsed() > TIMEOUT {
            return started.elapsed().as_secs_f64();
        }
        std::thread::sleep(Duration::from_millis(2));
    });
    let broker = BrokerProcess::start(dir, port, overrides)?;
    let ready = started.elapsed().as_secs_f64();
    let first = first_served
        .join()
        .map_err(|_| anyhow::anyhow!("the Metadata poller panicked"))?;
    Ok((broker, first, ready))
}

/// Topic names and partition counts adding up to `--partitions`.
fn topic_layout(args: &Args) -> Vec<(String, usize)> {
    let mut left = args.partitions;
    let mut out = Vec::new();
    while left > 0 {
        let n = left.min(args.partitions_per_topic);
        out.push((format!("density-{}", out.len()), n));
        left -= n;
    }
    out
}

/// Sends `count` records of 100 bytes to every partition and waits for every ack.
fn produce(bootstrap: &str, topics: &[(String, usize)], count: usize) -> Result<()> {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "1")
        .set("linger.ms", "50")
        .set("queue.buffering.max.messages", "1000000")
        .create()?;
    let payload = [b'x'; 100];
    for (topic, partitions) in topics {
        for p in 0..*partitions {
            for _ in 0..count {
                let mut record = BaseRecord::<(), _>::to(topic)
                    .partition(p as i32)
                    .payload(&payload[..]);
                while let Err((e, r)) = producer.send(record) {
                    if e.rdkafka_error_code() != Some(rdkafka::types::RDKafkaErrorCode::QueueFull) {
                        bail!("send: {e}");
                    }
                    producer.poll(Duration::from_millis(10));
                    record = r;
                }
            }
        }
    }
    producer.flush(TIMEOUT).context("flush")?;
    Ok(())
}

/// Reads every partition from offset 0 until `per_partition` records of each arrived.
fn consume_all(bootstrap: &str, topics: &[(String, usize)], per_partition: usize) -> Result<()> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "strom-bench-partitions")
        .set("enable.auto.commit", "false")
        .create()?;
    let mut assignment = TopicPartitionList::new();
    let mut expected = 0;
    for (topic, partitions) in topics {
        for p in 0..*partitions {
            assignment.add_partition_offset(topic, p as i32, Offset::Beginning)?;
            expected += per_partition;
        }
    }
    consumer.assign(&assignment)?;
    let deadline = Instant::now() + TIMEOUT;
    let mut received = 0;
    while received < expected {
        if Instant::now() > deadline {
            bail!("read {received} of {expected} records");
        }
        if let Some(message) = consumer.poll(Duration::from_millis(100)) {
            message.context("consume")?;
            received += 1;
        }
    }
    Ok(())
}

/// Seconds until a Metadata response lists `partitions` partitions without error.
fn serving_after(bootstrap: &str, partitions: usize) -> Result<f64> {
    let started = Instant::now();
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    loop {
        let metadata = consumer.fetch_metadata(None, TIMEOUT)?;
        let serving: usize = metadata
            .topics()
            .iter()
            .filter(|t| t.name().starts_with("density-"))
            .map(|t| {
                t.partitions()
                    .iter()
                    .filter(|p| p.error().is_none())
                    .count()
            })
            .sum();
        if serving >= partitions {
            return Ok(started.elapsed().as_secs_f64());
        }
        if started.elapsed() > TIMEOUT {
            bail!("only {serving} of {partitions} partitions served");
        }
    }
}

/// Samples a process's descriptor count until stopped; returns the largest seen.
struct DescriptorWatcher {
    stop: Arc<AtomicBool>,
    max: Arc<AtomicUsize>,
    thread: std::thread::JoinHandle<()>,
}

impl DescriptorWatcher {
    fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let max = Arc::new(AtomicUsize::new(0));
        let (s, m) = (stop.clone(), max.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                if let Ok(n) = descriptor_count(pid) {
                    m.fetch_max(n, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Self { stop, max, thread }
    }

    fn stop(self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        self.max.load(Ordering::Relaxed)
    }
}

/// CPU seconds (user + system) of this process's reaped children: the brokers.
fn children_cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct we own.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// A `strom server` child on a fixed data directory, restartable on the same port.
struct BrokerProcess {
    child: Option<Child>,
    bootstrap: String,
    port: u16,
}

impl BrokerProcess {
    /// Starts the broker and returns once it printed its ready line.
    fn start(dir: &Path, port: u16, overrides: &[String]) -> Result<Self> {
        let exe = std::env::current_exe()?;
        let log_dir: PathBuf = dir.join("data");
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("broker.stderr"))?;
        let mut command = Command::new(exe);
        command
            .arg("server")
            .arg("--override")
            .arg(format!("listeners=PLAINTEXT://127.0.0.1:{port}"))
            .arg("--override")
            .arg(format!("log.dirs={}", log_dir.display()));
        for o in overrides {
            command.arg("--override").arg(o);
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .spawn()?;
        let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        let bootstrap = loop {
            match lines.next() {
                Some(line) => {
                    if let Some(address) = parse_ready_line(&line?) {
                        break address;
                    }
                }
                None => bail!(
                    "the broker exited before it was ready; see {}",
                    dir.join("broker.stderr").display()
                ),
            }
        };
        std::thread::spawn(move || lines.for_each(drop));
        let port = bootstrap
            .rsplit_once(':')
            .map_or(Ok(0), |(_, p)| p.parse())?;
        Ok(Self {
            child: Some(child),
            bootstrap,
            port,
        })
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    fn descriptors(&self) -> Result<usize> {
        descriptor_count(self.pid())
    }

    fn rss_mb(&self) -> Result<f64> {
        resident_mb(self.pid())
    }

    /// SIGTERM; seconds until the process exited (with success).
    fn terminate(&mut self) -> Result<f64> {
        let mut child = self.child.take().context("not running")?;
        let started = Instant::now();
        // SAFETY: kill(2) on our own unreaped child.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let status = child.wait()?;
        let elapsed = started.elapsed().as_secs_f64();
        if !status.success() {
            bail!("the broker exited with {status} after SIGTERM");
        }
        Ok(elapsed)
    }

    fn kill9(&mut self) -> Result<()> {
        let mut child = self.child.take().context("not running")?;
        child.kill()?;
        child.wait()?;
        Ok(())
    }
}

/// One printed row: its label and how to read it from a run's figures.
type Row = (&'static str, fn(&Figures) -> f64);

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn print_summary(args: &Args, runs: &[Figures]) {
    let range = |f: fn(&Figures) -> f64| {
        let min = runs.iter().map(f).fold(f64::INFINITY, f64::min);
        let max = runs.iter().map(f).fold(f64::NEG_INFINITY, f64::max);
        format!("{min:.2}–{max:.2}")
    };
    println!(
        "\n{} partitions × {} records, {} segment(s) each, {} run(s):",
        args.partitions,
        args.records,
        args.segments,
        runs.len()
    );
    let rows: [Row; 18] = [
        ("create topics (s)", |f| f.create_s),
        ("descriptors at rest", |f| f.descriptors_at_rest as f64),
        ("RSS at rest (MB)", |f| f.rss_mb_at_rest),
        ("descriptors max, producing to all", |f| {
            f.descriptors_max_producing as f64
        }),
        ("descriptors max, fetching all from 0", |f| {
            f.descriptors_max_fetching as f64
        }),
        ("SIGTERM → exit, all unflushed (s)", |f| f.sigterm_s),
        ("clean start → first served (s)", |f| {
            f.clean_first_served_s
        }),
        ("clean start → ready line (s)", |f| f.clean_ready_s),
        ("clean start → all served (s)", |f| f.clean_serving_s),
        ("descriptors after clean start", |f| {
            f.clean_descriptors as f64
        }),
        ("RSS after clean start (MB)", |f| f.clean_rss_mb),
        ("kill -9 start → first served (s)", |f| {
            f.kill9_first_served_s
        }),
        ("kill -9 start → ready line (s)", |f| f.kill9_ready_s),
        ("kill -9 start → all served (s)", |f| f.kill9_serving_s),
        ("descriptors after kill -9 start", |f| {
            f.kill9_descriptors as f64
        }),
        ("RSS after kill -9 start (MB)", |f| f.kill9_rss_mb),
        ("SIGTERM → exit after recovery (s)", |f| {
            f.sigterm_after_recovery_s
        }),
        ("broker CPU seconds, whole run", |f| f.broker_cpu_s),
    ];
    for (name, f) in rows {
        println!("  {name:<40} {}", range(f));
    }
}
