//! `strom bench`: the seed experiments (reports 000 and 002) in one command, strom's
//! figures printed beside the published ones, with JSON and HTML reports;
//! `strom bench consumer-scaling` runs seed 004 the same way; `strom bench partitions`
//! measures partition density on one broker (issue 8); `strom bench partitions-idle`
//! what idle partitions cost replication (issue 40); `strom bench quorum` times metadata
//! propagation and controller failover on a local cluster; `strom bench faults` checks
//! that no acknowledged record is lost under kill -9, SIGTERM and SIGSTOP; `strom bench
//! network` runs seed 001 on bandwidth-capped links; `strom bench controller` seed 003.

pub mod args;
pub mod catchup;
pub mod consumer_scaling;
pub mod controller;
pub mod fault_resends;
pub mod fault_watch;
pub mod faults;
pub mod network;
pub mod partitions;
pub mod partitions_idle;
pub mod quorum;
pub mod seeds;
pub mod table;

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};

use args::{BenchArgs, Defaults, Outcome};
use seeds::ProducerFigures;
use strom_testkit::local_cluster::{ClusterSpec, LocalCluster};
use strom_tools::cluster::Cluster;
use strom_tools::consumer_perf_test::{self, args::ConsumerArgs, run::ConsumerResult};
use strom_tools::cpu::{CpuMeter, CpuUse};
use strom_tools::date_format::DateFormat;
use strom_tools::histogram::LatencySummary;
use strom_tools::load_client::LoadClient;
use strom_tools::producer_perf_test::{
    self,
    args::{PayloadSource, ProducerArgs},
    run::ProducerResult,
};
use strom_tools::report::{ComparisonRow, Report};
use strom_tools::topics;
use table::thousands;

pub fn main(argv: Vec<String>) -> ExitCode {
    match argv.split_first() {
        Some((first, rest)) if first == "partitions" => partitions::main(rest),
        Some((first, rest)) if first == "partitions-idle" => partitions_idle::main(rest),
        Some((first, rest)) if first == "quorum" => quorum::main(rest),
        Some((first, rest)) if first == "faults" => faults::main(rest),
        Some((first, rest)) if first == "catchup" => catchup::main(rest),
        Some((first, rest)) if first == "network" => network::main(rest),
        Some((first, rest)) if first == "controller" => controller::main(rest),
        Some((first, rest)) if first == "consumer-scaling" => command(
            "bench consumer-scaling",
            rest,
            &consumer_scaling::DEFAULTS,
            consumer_scaling::HELP,
            consumer_scaling::run,
        ),
        _ => command("bench", &argv, &args::BENCH, args::HELP, run),
    }
}

/// Polls `condition` every `interval` until it holds, or fails after `timeout` naming
/// `what` did not happen. The cluster benches wait with it instead of sleeping.
fn poll(
    what: &str,
    timeout: std::time::Duration,
    interval: std::time::Duration,
    mut condition: impl FnMut() -> bool,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while !condition() {
        if Instant::now() > deadline {
            anyhow::bail!("{what} did not happen within {timeout:?}");
        }
        std::thread::sleep(interval);
    }
    Ok(())
}

/// The median and the max of `values` (not empty): the benches that repeat a measurement
/// report it so, never as a best run.
fn median_max(values: &[f64]) -> (f64, f64) {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    (sorted[sorted.len() / 2], sorted[sorted.len() - 1])
}

/// The smallest and the largest of `values`: the range a bench reports beside its median.
fn min_max(values: impl IntoIterator<Item = f64>) -> (f64, f64) {
    values
        .into_iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)))
}

/// Parses `argv` for the bench command `name`, whose flags clap defines (`A`), and runs
/// it; `run` gets the flags as given too, for the report's command line. clap prints
/// help and usage errors itself.
fn clap_command<A: clap::Parser>(
    name: &str,
    argv: &[String],
    run: impl Fn(&A, &[String]) -> Result<()>,
) -> ExitCode {
    let args =
        match A::try_parse_from(std::iter::once(name.to_string()).chain(argv.iter().cloned())) {
            Ok(args) => args,
            Err(e) => {
                let _ = e.print();
                return if e.use_stderr() {
                    ExitCode::FAILURE
                } else {
                    ExitCode::SUCCESS
                };
            }
        };
    match run(&args, argv) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Parses the flags of the bench command `name` and runs it; `run` gets the flags as given,
/// for the report's command line.
fn command(
    name: &str,
    argv: &[String],
    defaults: &Defaults,
    help: &str,
    run: fn(&BenchArgs, &[String]) -> Result<()>,
) -> ExitCode {
    let args = match args::parse(argv, defaults) {
        Ok(args) => args,
        Err(Outcome::Help) => {
            print!("{help}");
            return ExitCode::SUCCESS;
        }
        Err(Outcome::Error(message)) => {
            eprintln!("strom {name}: {message}");
            eprint!("{help}");
            return ExitCode::FAILURE;
        }
    };
    match run(&args, argv) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strom {name}: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs every experiment, prints the table and writes both reports.
pub fn run(args: &BenchArgs, argv: &[String]) -> Result<()> {
    let started = Instant::now();
    let cluster = Cluster::connect(args.bootstrap_server.as_deref())?;
    let bootstrap = cluster.bootstrap().to_string();
    let prefix = format!("strom-bench-{}", std::process::id());
    let mut report = Report::new("bench", argv);
    let n = args.records;

    let topic_default = format!("{prefix}-default");
    let topic_tuned = format!("{prefix}-tuned");
    let topic_latency = format!("{prefix}-latency");
    let topic_consume = format!("{prefix}-consume");
    for (topic, partitions) in [
        (&topic_default, 6),
        (&topic_tuned, 6),
        (&topic_latency, 2),
        (&topic_consume, 2),
    ] {
        topics::create_topic(&bootstrap, topic, partitions, 1)?;
        topics::wait_until_led(&bootstrap, topic, partitions as usize)?;
    }

    let tuned_props = seeds::TUNED_PROPERTIES
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let experiments = [
        (
            "002 default settings",
            producer_args(&topic_default, n, 100, -1.0, Vec::new()),
            seeds::DEFAULT_PRODUCER,
        ),
        (
            "002 tuned settings",
            producer_args(&topic_tuned, n, 100, -1.0, tuned_props),
            seeds::TUNED_PRODUCER,
        ),
        (
            "000 throttled 100k/s",
            producer_args(&topic_latency, n / 2, 10, 100_000.0, Vec::new()),
            seeds::THROTTLED_PRODUCER,
        ),
    ];
    for &client in &args.clients {
        for (name, producer, seed) in &experiments {
            let producer = ProducerArgs {
                client,
                ..producer.clone()
            };
            measure_producer(
                &mut report,
                ProducerRun {
                    name,
                    producer: &producer,
                    seed,
                    bootstrap: &bootstrap,
                    broker_pids: cluster.broker_pids(),
                },
                args,
            );
        }
    }

    if args.replicated {
        replicated_runs(args, &prefix, &mut report)?;
    }

    eprintln!("strom bench: loading {n} records of 10 bytes for the consumer runs...");
    let fill = ProducerArgs {
        client: args.clients[0],
        ..producer_args(&topic_consume, n, 10, -1.0, Vec::new())
    };
    let meter = CpuMeter::start(cluster.broker_pids());
    let fill_result = producer_perf_test::run::run(&fill, &bootstrap, Box::new(std::io::sink()))
        .context("loading records for the consumer runs")?;
    report.runs.push(
        producer_perf_test::run_report("producer, load for consumer runs", &fill, &fill_result)
            .with_cpu(meter.finish()),
    );
    for &client in &args.clients {
        for (fetch_size, seed_msgs, seed_mb) in seeds::CONSUMER {
            eprintln!("strom bench: consumer, fetch size {fetch_size}, {client}...");
            let name = format!("000 consumer fetch {fetch_size}");
            let consumer = ConsumerArgs {
                client,
                ..consumer_args(
                    &topic_consume,
                    n,
                    fetch_size,
                    &format!("{prefix}-group-{fetch_size}-{client}"),
                )?
            };
            let meter = CpuMeter::start(cluster.broker_pids());
            let result =
                match consumer_perf_test::run::run(&consumer, &bootstrap, &mut std::io::sink()) {
                    Ok(result) => result,
                    Err(e) => {
                        report.comparison.push(failed(&name, &e));
                        continue;
                    }
                };
            let cpu = meter.finish();
            report.comparison.extend(consumer_rows(
                &name,
                &result,
                seed_msgs,
                seed_mb,
                cpu,
                client.name(),
            ));
            report.runs.push(
                consumer_perf_test::run_report(
                    &run_name(
                        "consumer",
                        &format!("fetch size {fetch_size}"),
                        client,
                        args,
                    ),
                    &consumer,
                    &result,
                )
                .with_cpu(cpu),
            );
        }
    }
    drop(cluster);

    finish(&report, args, "run", started)
}

/// Seed 002's replicated case: its producer runs on a 6-partition topic of replication
/// factor 3 — of the `--bootstrap-server` cluster, or of a local 3-broker cluster started
/// for them — beside LinkedIn's 2014 figures for 3x synchronous (acks=all) and
/// asynchronous (acks=1) replication.
fn replicated_runs(args: &BenchArgs, prefix: &str, report: &mut Report) -> Result<()> {
    let local = match &args.bootstrap_server {
        Some(_) => None,
        None => {
            eprintln!("strom bench: starting a local 3-broker cluster for the replicated runs...");
            let spec = ClusterSpec {
                brokers: 3,
                controllers: 0,
                extra: Vec::new(),
                isolated: false,
            };
            Some(LocalCluster::start(&spec, None)?)
        }
    };
    let bootstrap = match (&local, &args.bootstrap_server) {
        (Some(cluster), _) => cluster.bootstrap(),
        (None, Some(b)) => b.clone(),
        (None, None) => unreachable!("one of them is set"),
    };
    let tuned: Vec<(String, String)> = seeds::TUNED_PROPERTIES
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let acks_one = vec![("acks".to_string(), "1".to_string())];
    let runs = [
        (
            "002 default settings, RF 3",
            Vec::new(),
            seeds::LINKEDIN_SYNC_3X,
        ),
        ("002 tuned settings, RF 3", tuned, seeds::LINKEDIN_SYNC_3X),
        (
            "002 default settings, RF 3, acks=1",
            acks_one,
            seeds::LINKEDIN_ASYNC_3X,
        ),
    ];
    let runs = args
        .clients
        .iter()
        .flat_map(|&client| runs.iter().map(move |run| (client, run)));
    for (i, (client, (name, properties, seed))) in runs.enumerate() {
        let topic = format!("{prefix}-replicated-{i}");
        topics::create_topic(&bootstrap, &topic, 6, 3)?;
        topics::wait_until_led(&bootstrap, &topic, 6)?;
        let producer = ProducerArgs {
            client,
            ..producer_args(&topic, args.records, 100, -1.0, properties.clone())
        };
        // The brokers of a cluster given with --bootstrap-server are not ours to read.
        measure_producer(
            report,
            ProducerRun {
                name,
                producer: &producer,
                seed,
                bootstrap: &bootstrap,
                broker_pids: local.as_ref().map(LocalCluster::pids),
            },
            args,
        );
    }
    Ok(())
}

/// One producer experiment of a bench.
struct ProducerRun<'a> {
    name: &'a str,
    producer: &'a ProducerArgs,
    seed: &'a ProducerFigures,
    bootstrap: &'a str,
    /// The processes whose CPU seconds are the broker's (`None`: not ours to read).
    broker_pids: Option<Vec<u32>>,
}

/// Runs one producer experiment and adds its rows and its run to `report`; a run that
/// fails gets a row saying why, so one broken experiment does not hide the others.
fn measure_producer(report: &mut Report, run: ProducerRun<'_>, args: &BenchArgs) {
    let (name, client) = (run.name, run.producer.client);
    eprintln!(
        "strom bench: producer, {name}, {client} ({} records)...",
        run.producer.num_records
    );
    let meter = CpuMeter::start(run.broker_pids);
    match producer_perf_test::run::run(run.producer, run.bootstrap, Box::new(std::io::sink())) {
        Ok(result) => {
            let cpu = meter.finish();
            report
                .comparison
                .extend(producer_rows(name, &result, run.seed, cpu, client.name()));
            report.runs.push(
                producer_perf_test::run_report(
                    &run_name("producer", name, client, args),
                    run.producer,
                    &result,
                )
                .with_cpu(cpu),
            );
        }
        Err(e) => report.comparison.push(failed(name, &e)),
    }
}

/// A run's name in the reports: the client is named when several ran.
fn run_name(tool: &str, name: &str, client: LoadClient, args: &BenchArgs) -> String {
    if args.clients.len() > 1 {
        format!("{tool}, {name}, {client}")
    } else {
        format!("{tool}, {name}")
    }
}

/// Prints the comparison table and a line on what was run, then writes both reports.
fn finish(report: &Report, args: &BenchArgs, unit: &str, started: Instant) -> Result<()> {
    println!("{}", table::render(&report.comparison));
    let replicated = match (args.replicated, &args.bootstrap_server) {
        (false, _) => "",
        (true, Some(_)) => " (RF 3 runs on the same cluster)",
        (true, None) => " (RF 3 runs on a local 3-broker cluster)",
    };
    println!(
        "\nstrom: {} records per {unit} against {}{replicated}; {:.1} s in all. Seed figures: docs/seeds.md.",
        args.records,
        args.bootstrap_server
            .as_deref()
            .unwrap_or("an embedded strom broker"),
        started.elapsed().as_secs_f64()
    );
    write_reports(report, &args.json, &args.html)
}

/// Writes both reports and says where they are, as the last line of a bench.
fn write_reports(report: &Report, json: &str, html: &str) -> Result<()> {
    report.write(Some(json), Some(html))?;
    println!("Reports: {json} and {html}");
    Ok(())
}

fn producer_args(
    topic: &str,
    records: u64,
    size: usize,
    throughput: f64,
    properties: Vec<(String, String)>,
) -> ProducerArgs {
    ProducerArgs {
        topic: topic.to_string(),
        num_records: records.max(1),
        payload: PayloadSource::RecordSize(size),
        throughput,
        properties,
        bootstrap_server: None,
        print_metrics: false,
        transactional_id: None,
        transaction_duration_ms: None,
        warmup_records: 0,
        reporting_interval_ms: 5000,
        key_range: None,
        json: None,
        html: None,
        client: LoadClient::default(),
    }
}

fn consumer_args(topic: &str, records: u64, fetch_size: u64, group: &str) -> Result<ConsumerArgs> {
    let pattern = "yyyy-MM-dd HH:mm:ss:SSS";
    Ok(ConsumerArgs {
        bootstrap_server: None,
        topic: topic.to_string(),
        num_messages: records,
        group: Some(group.to_string()),
        fetch_size,
        socket_buffer_size: 2 * 1024 * 1024,
        from_latest: false,
        properties: Vec::new(),
        print_metrics: false,
        show_detailed_stats: false,
        timeout_ms: 10_000,
        reporting_interval_ms: 5000,
        date_format: DateFormat::new(pattern)?,
        date_pattern: pattern.to_string(),
        hide_header: true,
        threads: 1,
        json: None,
        html: None,
        client: LoadClient::default(),
    })
}

/// A row whose figures are text only (not charted).
fn row(experiment: &str, metric: &str, strom: String, seed: Option<String>) -> ComparisonRow {
    ComparisonRow {
        experiment: experiment.to_string(),
        metric: metric.to_string(),
        strom,
        seed: seed.unwrap_or_else(|| "-".to_string()),
        ..ComparisonRow::default()
    }
}

/// A row of one number each, printed with `show` and kept as a number for the charts.
fn figure(
    experiment: &str,
    metric: &str,
    strom: f64,
    seed: Option<f64>,
    show: impl Fn(f64) -> String,
) -> ComparisonRow {
    ComparisonRow {
        strom_value: Some(strom),
        seed_value: seed,
        ..row(experiment, metric, show(strom), seed.map(&show))
    }
}

/// The CPU seconds of one run, client and broker; the seeds published none.
fn cpu_row(experiment: &str, cpu: CpuUse) -> ComparisonRow {
    let broker = cpu
        .broker_s
        .map_or_else(|| "unknown".to_string(), |s| format!("{s:.2}"));
    row(
        experiment,
        "CPU s (client / broker)",
        format!("{:.2} / {broker}", cpu.client_s),
        None,
    )
}

/// Marks `rows` as measured with the load generator `client`.
fn measured_with(rows: Vec<ComparisonRow>, client: &str) -> Vec<ComparisonRow> {
    rows.into_iter()
        .map(|r| ComparisonRow {
            client: Some(client.to_string()),
            ..r
        })
        .collect()
}

/// A run that failed still gets a row, so one broken experiment does not hide the others.
fn failed(name: &str, error: &anyhow::Error) -> ComparisonRow {
    row(name, "failed", format!("{error:#}"), None)
}

fn producer_rows(
    name: &str,
    result: &ProducerResult,
    seed: &ProducerFigures,
    cpu: CpuUse,
    client: &str,
) -> Vec<ComparisonRow> {
    let t = &result.totals;
    let [p50, p95, p99, p999] = t.percentiles;
    let ms = |v: f64| format!("{v:.0} ms");
    let ms_of = |v: Option<u32>| v.map(f64::from);
    let hdr: LatencySummary = result.histogram.summary();
    let rows = vec![
        figure(
            name,
            "records/s",
            t.records_per_sec(),
            seed.records_per_sec,
            thousands,
        ),
        figure(name, "MB/s (MiB)", t.mib_per_sec(), seed.mb_per_sec, |v| {
            format!("{v:.2}")
        }),
        figure(name, "avg latency", t.avg_latency_ms(), seed.avg_ms, |v| {
            format!("{v:.2} ms")
        }),
        figure(name, "p50", f64::from(p50), ms_of(seed.p50_ms), ms),
        figure(name, "p95", f64::from(p95), ms_of(seed.p95_ms), ms),
        figure(name, "p99", f64::from(p99), ms_of(seed.p99_ms), ms),
        figure(name, "p99.9", f64::from(p999), ms_of(seed.p999_ms), ms),
        figure(name, "max", t.max_latency_ms as f64, ms_of(seed.max_ms), ms),
        figure(
            name,
            "p99.99 (HdrHistogram)",
            hdr.p9999_us as f64 / 1000.0,
            None,
            |v| format!("{v:.2} ms"),
        ),
        cpu_row(name, cpu),
    ];
    measured_with(rows, client)
}

fn consumer_rows(
    name: &str,
    result: &ConsumerResult,
    seed_msgs: f64,
    seed_mb: Option<f64>,
    cpu: CpuUse,
    client: &str,
) -> Vec<ComparisonRow> {
    let s = &result.summary;
    let name = if result.timed_out {
        format!("{name} (timed out)")
    } else {
        name.to_string()
    };
    let rows = vec![
        figure(
            &name,
            "msg/s",
            s.messages as f64 / s.elapsed_sec(),
            Some(seed_msgs),
            thousands,
        ),
        figure(
            &name,
            "MB/s (MiB)",
            s.mib() / s.elapsed_sec(),
            seed_mb,
            |v| format!("{v:.2}"),
        ),
        figure(&name, "records", s.messages as f64, None, |v| {
            format!("{v:.0}")
        }),
        cpu_row(&name, cpu),
    ];
    measured_with(rows, client)
}
