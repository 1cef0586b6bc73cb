//! `strom producer-perf-test`: Kafka's kafka-producer-perf-test on librdkafka, or on
//! strom's native client with `--client native`.
//!
//! stdout carries exactly Kafka's lines; strom's extra figures (HdrHistogram latency,
//! embedded-broker notice, warnings) go to stderr, so anything that parses Kafka's output
//! keeps working.

pub mod args;
mod context;
mod delivery_queue;
mod native_run;
pub mod output;
pub mod payload;
mod recorder;
pub mod run;
pub mod stats;
mod topic_handle;

use std::process::ExitCode;

use serde_json::json;

use crate::cluster::Cluster;
use crate::cpu::CpuMeter;
use crate::report::{Report, RunReport};
use args::{Outcome, ProducerArgs, PROG};
use run::ProducerResult;

pub fn main(argv: Vec<String>) -> ExitCode {
    let args = match args::parse(&argv) {
        Ok(args) => args,
        Err(Outcome::Help) => {
            print!("{}", args::help());
            return ExitCode::SUCCESS;
        }
        Err(Outcome::Error(message)) => {
            eprint!("{}", args::usage());
            eprintln!("{PROG}: error: {message}");
            return ExitCode::FAILURE;
        }
    };
    crate::cli::finish(run_and_report(&args, &argv))
}

fn run_and_report(args: &ProducerArgs, argv: &[String]) -> anyhow::Result<()> {
    let cluster = Cluster::connect(args.bootstrap().as_deref())?;
    let meter = CpuMeter::start(cluster.broker_pids());
    let result = run::run(args, cluster.bootstrap(), Box::new(std::io::stdout()))?;
    let cpu = meter.finish();
    let label = if result.throttled {
        "Latency from intended send time"
    } else {
        "Latency from send time"
    };
    eprintln!("{}", result.histogram.summary().line(label));
    eprintln!("CPU: {cpu}");
    Report::write_single_run(
        "producer-perf-test",
        argv,
        args.json.as_deref(),
        args.html.as_deref(),
        || run_report("producer-perf-test", args, &result).with_cpu(cpu),
    )?;
    drop(cluster);
    Ok(())
}

/// The report entry for one producer run.
pub fn run_report(name: &str, args: &ProducerArgs, result: &ProducerResult) -> RunReport {
    let mut kafka = totals_json(&result.totals);
    kafka["failed_records"] = json!(result.failures);
    if let Some(steady) = &result.steady {
        kafka["steady_state"] = totals_json(steady);
    }
    let payload = match &args.payload {
        args::PayloadSource::RecordSize(size) => json!({"record_size": size}),
        args::PayloadSource::File { path, .. } => json!({"payload_file": path}),
        args::PayloadSource::Monotonic => json!("monotonic"),
    };
    RunReport {
        name: name.to_string(),
        tool: "producer-perf-test".to_string(),
        settings: json!({
            "topic": args.topic,
            "num_records": args.num_records,
            "throughput": args.throughput,
            "payload": payload,
            "warmup_records": args.warmup_records,
            "client": args.client.name(),
            "client_settings": result.settings.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
        }),
        kafka,
        latency_basis: if result.throttled { "intended send time" } else { "send time" }.to_string(),
        latency: None,
        latency_curve: Vec::new(),
        series: result.series.clone(),
        cpu: None,
    }
    .with_histogram(&result.histogram)
}

/// Kafka's final-line figures under their names, plus the elapsed time they derive from.
fn totals_json(t: &stats::Totals) -> serde_json::Value {
    json!({
        "records_sent": t.count,
        "records_per_sec": t.records_per_sec(),
        "mb_per_sec": t.mib_per_sec(),
        "avg_latency_ms": t.avg_latency_ms(),
        "max_latency_ms": t.max_latency_ms,
        "p50_ms": t.percentiles[0],
        "p95_ms": t.percentiles[1],
        "p99_ms": t.percentiles[2],
        "p999_ms": t.percentiles[3],
        "elapsed_ms": t.elapsed_ms,
    })
}
