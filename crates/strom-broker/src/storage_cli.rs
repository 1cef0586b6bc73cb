//! `strom storage`, like `kafka-storage.sh`: `random-uuid` prints a new cluster id and
//! `format --cluster-id ID --config server.properties [--ignore-formatted] [--standalone]`
//! writes `meta.properties` into every log directory and the metadata directory of that
//! node, which a KRaft node (`process.roles` set) requires before it starts.
//! `--standalone` (Kafka 4's quickstart) also makes the node the one voter of its quorum,
//! for a `server.properties` that names the quorum by `controller.quorum.bootstrap.servers`.

use std::process::ExitCode;

use crate::kraft_config::Voter;
use crate::{meta_properties, properties, standalone_quorum, BrokerConfig};

const USAGE: &str = "USAGE: strom storage random-uuid\n       strom storage format --cluster-id <id> --config <server.properties> [--ignore-formatted] [--standalone]";

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
    let mut standalone = false;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--cluster-id" | "-t" => cluster_id = iter.next().cloned(),
            "--config" | "-c" => config_path = iter.next().cloned(),
            "--ignore-formatted" | "-g" => ignore_formatted = true,
            "--standalone" | "-s" => standalone = true,
            other => return Err(format!("unexpected argument '{other}'\n{USAGE}")),
        }
    }
    let cluster_id = cluster_id.ok_or(format!("--cluster-id is required\n{USAGE}"))?;
    let config_path = config_path.ok_or(format!("--config is required\n{USAGE}"))?;
    let text = std::fs::read_to_string(&config_path)
        .map_err(|e| format!("cannot read {config_path}: {e}"))?;
    let config =
        BrokerConfig::from_properties(&properties::parse(&text)).map_err(|e| e.to_string())?;
    let voter = standalone.then(|| standalone_voter(&config)).transpose()?;
    let dirs = config.identity_dirs();
    let formatted = meta_properties::format(&dirs, &cluster_id, config.node_id, ignore_formatted)
        .map_err(|e| e.to_string())?;
    if let Some(voter) = voter {
        let dir = config.metadata_dir();
        if formatted.contains(&dir) {
            standalone_quorum::write(&dir, &voter)
                .map_err(|e| format!("cannot write the voter set into {}: {e}", dir.display()))?;
        }
    }
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

/// The one voter of a `--standalone` quorum: this node, on its controller listener (as
/// advertised, else as bound; an unspecified host is `localhost`).
fn standalone_voter(config: &BrokerConfig) -> Result<Voter, String> {
    let kraft = &config.kraft;
    if !kraft.voters.is_empty() && kraft.quorum_bootstrap_servers.is_none() {
        return Err(
            "--standalone cannot be used with controller.quorum.voters: the voters are already fixed"
                .to_string(),
        );
    }
    if !kraft.roles.controller {
        return Err(
            "--standalone formats a controller: process.roles must contain controller".to_string(),
        );
    }
    let listener = kraft
        .controller_listener()
        .ok_or("--standalone needs a controller listener in listeners")?;
    let address = kraft
        .advertised(&listener.name)
        .unwrap_or(&listener.listener);
    if address.port == 0 {
        return Err(format!(
            "--standalone needs the controller listener {}'s port fixed (it is 0): the voter set names it",
            listener.name
        ));
    }
    let host = match address.host.as_str() {
        "" | "0.0.0.0" => "localhost".to_string(),
        host => host.to_string(),
    };
    Ok(Voter {
        id: config.node_id,
        host,
        port: address.port,
    })
}
