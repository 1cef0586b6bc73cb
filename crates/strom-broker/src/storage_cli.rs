//! `strom storage`, like `kafka-storage.sh`: `random-uuid` prints a new cluster id and
//! `format --cluster-id ID --config server.properties [--ignore-formatted]` writes
//! `meta.properties` into every log directory and the metadata directory of that node,
//! which a KRaft node (`process.roles` set) requires before it starts.

use std::process::ExitCode;

use crate::{meta_properties, properties, BrokerConfig};

const USAGE: &str = "USAGE: strom storage random-uuid\n       strom storage format --cluster-id <id> --config <server.properties> [--ignore-formatted]";

/// Entry point of `strom storage`.
pub fn main(args: Vec<String>) -> ExitCode {
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strom storage: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(args: &[String]) -> Result<(), String> {
    match args.first().map(String::as_str) {
        Some("random-uuid") => {
            println!("{}", meta_properties::random_uuid());
            Ok(())
        }
        Some("format") => format(&args[1..]),
        _ => Err(USAGE.to_string()),
    }
}

fn format(args: &[String]) -> Result<(), String> {
    let mut cluster_id = None;
    let mut config_path = None;
    let mut ignore_formatted = false;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--cluster-id" | "-t" => cluster_id = iter.next().cloned(),
            "--config" | "-c" => config_path = iter.next().cloned(),
            "--ignore-formatted" | "-g" => ignore_formatted = true,
            other => return Err(format!("unexpected argument '{other}'\n{USAGE}")),
        }
    }
    let cluster_id = cluster_id.ok_or(format!("--cluster-id is required\n{USAGE}"))?;
    let config_path = config_path.ok_or(format!("--config is required\n{USAGE}"))?;
    let text = std::fs::read_to_string(&config_path)
        .map_err(|e| format!("cannot read {config_path}: {e}"))?;
    let config =
        BrokerConfig::from_properties(&properties::parse(&text)).map_err(|e| e.to_string())?;
    let mut dirs = config.log_dirs.clone();
    if let Some(dir) = config.kraft.metadata_log_dir.clone() {
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    let formatted = meta_properties::format(&dirs, &cluster_id, config.node_id, ignore_formatted)
        .map_err(|e| e.to_string())?;
    for dir in &dirs {
        if formatted.contains(dir) {
            println!(
                "Formatting {} for cluster {cluster_id}, node {}.",
                dir.display(),
                config.node_id
            );
        } else {
            println!(
                "{} is already formatted: left as it is (--ignore-formatted).",
                dir.display()
            );
        }
    }
    Ok(())
}
