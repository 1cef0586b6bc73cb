//! `strom consumer-perf-test`: Kafka's kafka-consumer-perf-test on librdkafka.
//!
//! stdout carries exactly Kafka's header and rows; strom's extras go to stderr and reports.

pub mod args;
pub mod batch_consumer;
pub mod output;
pub mod poller;
pub mod run;

use std::process::ExitCode;

use serde_json::json;

use crate::cluster::Cluster;
use crate::cpu::CpuMeter;
use crate::report::{Report, RunReport};
use args::{ConsumerArgs, Outcome};
use run::ConsumerResult;

pub fn main(argv: Vec<String>) -> ExitCode {
    let args = match args::parse(&argv) {
        Ok(args) => args,
        Err(Outcome::Help) => {
            print!("{}", args::help());
            return ExitCode::SUCCESS;
        }
        Err(Outcome::Version) => {
            println!("{} (strom)", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Err(Outcome::Error(message)) => {
            eprintln!("{message}");
            eprint!("{}", args::help());
            return ExitCode::FAILURE;
        }
    };
    crate::cli::finish(run_and_report(&args, &argv))
}

fn run_and_report(args: &ConsumerArgs, argv: &[String]) -> anyhow::Result<()> {
    let cluster = Cluster::connect(args.bootstrap().as_deref())?;
    let meter = CpuMeter::start(cluster.broker_pids());
    let result = run::run(args, cluster.bootstrap(), &mut std::io::stdout())?;
    let cpu = meter.finish();
    if !result.histogram.is_empty() {
        eprintln!(
            "{}",
            result
                .histogram
                .summary()
                .line("Record age at consumption (now - record timestamp)")
        );
    }
    eprintln!("CPU: {cpu}");
    Report::write_single_run(
        "consumer-perf-test",
        argv,
        args.json.as_deref(),
        args.html.as_deref(),
        || run_report("consumer-perf-test", args, &result).with_cpu(cpu),
    )?;
    drop(cluster);
    Ok(())
}

/// The report entry for one consumer run.
pub fn run_report(name: &str, args: &ConsumerArgs, result: &ConsumerResult) -> RunReport {
    let s = &result.summary;
    let fetch_sec = s.fetch_time_ms() as f64 / 1000.0;
    RunReport {
        name: name.to_string(),
        tool: "consumer-perf-test".to_string(),
        settings: json!({
            "topic": args.topic,
            "messages": args.num_messages,
            "fetch_size": args.fetch_size,
            "threads": args.threads,
            "timeout_ms": args.timeout_ms,
            "from_latest": args.from_latest,
            "client": args.client.name(),
            "client_settings": result.settings.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
        }),
        kafka: json!({
            "start_time_ms": s.start_ms,
            "end_time_ms": s.end_ms,
            "data_consumed_in_mb": s.mib(),
            "mb_sec": s.mib() / s.elapsed_sec(),
            "data_consumed_in_nmsg": s.messages,
            "nmsg_sec": s.messages as f64 / s.elapsed_sec(),
            "rebalance_time_ms": s.join_time_ms,
            "fetch_time_ms": s.fetch_time_ms(),
            "fetch_mb_sec": s.mib() / fetch_sec,
            "fetch_nmsg_sec": s.messages as f64 / fetch_sec,
            "timed_out": result.timed_out,
        }),
        latency_basis: "record timestamp (ms resolution) to consumption".to_string(),
        latency: None,
        latency_curve: Vec::new(),
        series: result.series.clone(),
        cpu: None,
    }
    .with_histogram(&result.histogram)
}
