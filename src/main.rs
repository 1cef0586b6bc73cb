//! `strom`: one binary for the broker and the tools that measure it.
//!
//! Each subcommand owns its own argument parsing, because the perf tools must accept and
//! reject exactly what Kafka's tools do (argparse4j / jopt-simple conventions and messages),
//! which a shared clap definition could not reproduce. This file only dispatches.

mod allocator;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[global_allocator]
static GLOBAL: allocator::StromAllocator = allocator::StromAllocator;

#[derive(Parser)]
#[command(
    name = "strom",
    version,
    about = "A Kafka-compatible streaming platform and its performance tools"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Arguments handed verbatim to the subcommand's own parser.
#[derive(clap::Args)]
struct Passthrough {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    args: Vec<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Run a broker: `strom server [server.properties] [--override key=value]...`
    #[command(disable_help_flag = true)]
    Server(Passthrough),
    /// Format storage like kafka-storage.sh: `strom storage random-uuid | format --cluster-id ID --config FILE`
    #[command(disable_help_flag = true)]
    Storage(Passthrough),
    /// Kafka's kafka-producer-perf-test, same flags and output
    #[command(disable_help_flag = true)]
    ProducerPerfTest(Passthrough),
    /// Kafka's kafka-consumer-perf-test, same flags and output
    #[command(disable_help_flag = true)]
    ConsumerPerfTest(Passthrough),
    /// Kafka's kafka-consumer-groups: --list, --describe, --delete, --reset-offsets
    #[command(disable_help_flag = true)]
    ConsumerGroups(Passthrough),
    /// Kafka's EndToEndLatency tool, same arguments and output
    #[command(disable_help_flag = true)]
    E2eLatency(Passthrough),
    /// The seed experiments, against an embedded broker or any cluster
    #[command(disable_help_flag = true)]
    Bench(Passthrough),
    /// A local KRaft cluster: `strom cluster start --brokers N [--controllers K] | status | stop`
    #[command(disable_help_flag = true)]
    Cluster(Passthrough),
    /// Kafka's kafka-metadata-quorum: `--bootstrap-server H:P describe --status | --replication`
    #[command(disable_help_flag = true)]
    MetadataQuorum(Passthrough),
    /// Kafka's kafka-topics: --create, --list, --describe, --alter --partitions, --delete
    #[command(disable_help_flag = true)]
    Topics(Passthrough),
    /// Kafka's kafka-configs: --describe [--all], --alter --add-config/--delete-config, topics and brokers
    #[command(disable_help_flag = true)]
    Configs(Passthrough),
    /// Kafka's kafka-dump-log: `--files F1,F2 [--print-data-log] [--deep-iteration] [--offsets-decoder]`
    #[command(disable_help_flag = true)]
    DumpLog(Passthrough),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Server(p) => strom_broker::cli::main(p.args),
        Command::Storage(p) => strom_broker::storage_cli::main(p.args),
        Command::DumpLog(p) => strom_broker::dump_log_cli::main(p.args),
        Command::ProducerPerfTest(p) => strom_tools::producer_perf_test::main(p.args),
        Command::ConsumerPerfTest(p) => strom_tools::consumer_perf_test::main(p.args),
        Command::ConsumerGroups(p) => strom_tools::consumer_groups::main(p.args),
        Command::E2eLatency(p) => strom_tools::e2e_latency::main(p.args),
        Command::Bench(p) => strom_bench::main(p.args),
        Command::Cluster(p) => strom_tools::cluster_cli::main(p.args),
        Command::MetadataQuorum(p) => strom_tools::metadata_quorum::main(p.args),
        Command::Topics(p) => strom_tools::topics_cli::main(p.args),
        Command::Configs(p) => strom_tools::configs_cli::main(p.args),
    }
}
