//! `strom e2e-latency`: Kafka's EndToEndLatency (produce, ack, fetch — a round trip per
//! record), same arguments and output, plus an HdrHistogram of the round trips.

pub mod args;
mod native_run;
pub mod run;

use std::process::ExitCode;

use serde_json::json;

use crate::cluster::Cluster;
use crate::report::{Report, RunReport};
use args::{E2eArgs, Outcome};
use run::E2eResult;

pub fn main(argv: Vec<String>) -> ExitCode {
    let args = match args::parse(&argv) {
        Ok(args) => args,
        Err(Outcome::Help) => {
            println!("{}\n{}", args::USAGE, args::STROM_OPTIONS);
            return ExitCode::SUCCESS;
        }
        Err(Outcome::Error(message)) => {
            eprintln!("{message}");
            return ExitCode::FAILURE;
        }
    };
    crate::cli::finish(run_and_report(&args, &argv))
}

fn run_and_report(args: &E2eArgs, argv: &[String]) -> anyhow::Result<()> {
    let cluster = Cluster::connect(args.bootstrap.as_deref())?;
    let result = run::run(args, cluster.bootstrap(), &mut std::io::stdout())?;
    eprintln!("{}", result.histogram.summary().line("Round-trip latency"));
    Report::write_single_run(
        "e2e-latency",
        argv,
        args.json.as_deref(),
        args.html.as_deref(),
        || run_report("e2e-latency", args, &result),
    )?;
    drop(cluster);
    Ok(())
}

pub fn run_report(name: &str, args: &E2eArgs, result: &E2eResult) -> RunReport {
    let [p50, p99, p999] = result.percentiles();
    RunReport {
        name: name.to_string(),
        tool: "e2e-latency".to_string(),
        settings: json!({
            "topic": args.topic,
            "num_messages": args.num_messages,
            "producer_acks": args.acks,
            "message_size_bytes": args.message_size,
        }),
        kafka: json!({ "avg_latency_ms": result.avg_ms(), "p50_ms": p50, "p99_ms": p99, "p999_ms": p999 }),
        latency_basis: "send to receipt of the same record (round trip)".to_string(),
        latency: None,
        latency_curve: Vec::new(),
        series: Vec::new(),
        cpu: None,
    }
    .with_histogram(&result.histogram)
}
