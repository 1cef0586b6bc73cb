//! `strom consumer-groups`: Kafka's kafka-consumer-groups.sh — `--list`, `--describe`,
//! `--delete` and `--reset-offsets` — as a client of any Kafka-compatible cluster.
//!
//! It only speaks the Kafka protocol (through librdkafka): it works the same against
//! strom and against Kafka.

pub mod client;
pub mod describe;
pub mod reset;

use std::process::ExitCode;

use anyhow::{bail, Result};

use crate::cli::{self, CliError, OptionSpec};
use client::GroupClient;
use reset::{ResetTo, Scope};

const SPECS: &[OptionSpec] = &[
    OptionSpec::one("bootstrap-server"),
    OptionSpec::flag("list"),
    OptionSpec::flag("describe"),
    OptionSpec::flag("delete"),
    OptionSpec::flag("reset-offsets"),
    OptionSpec::one("group"),
    OptionSpec::flag("all-groups"),
    OptionSpec::one("topic"),
    OptionSpec::flag("all-topics"),
    OptionSpec::flag("to-earliest"),
    OptionSpec::flag("to-latest"),
    OptionSpec::one("to-offset"),
    OptionSpec::flag("dry-run"),
    OptionSpec::flag("execute"),
    OptionSpec::flag("help"),
];

const USAGE: &str = "\
Usage: strom consumer-groups --bootstrap-server <host:port> ACTION [options]
Actions (exactly one):
  --list                      List all consumer groups.
  --describe                  Describe --group G (or --all-groups): members, assignment,
                              committed offset, log-end offset and lag of each partition.
  --delete                    Delete --group G (it must have no active members).
  --reset-offsets             Reset the offsets of --group G for --topic T[:p,...] (repeatable)
                              or --all-topics, --to-earliest | --to-latest | --to-offset N,
                              with --dry-run (default) or --execute.
";

/// Runs the tool; exit code 0 on success, 1 on any error (printed on stderr).
pub fn main(args: Vec<String>) -> ExitCode {
    let parsed = match cli::parse(&args, SPECS, false) {
        Ok(p) => p,
        Err(e) => {
            let message = match e {
                CliError::Unrecognized(t) => format!("{t} is not a recognized option"),
                CliError::Ambiguous(t, names) => format!("{t} is ambiguous: {names:?}"),
                CliError::MissingValue(n) => format!("Option {n} requires an argument"),
                CliError::UnexpectedValue(n) => format!("Option {n} does not take an argument"),
            };
            eprintln!("Error: {message}\n{USAGE}");
            return ExitCode::from(1);
        }
    };
    if parsed.has("help") {
        print!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    match run(&parsed) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run(args: &cli::Parsed) -> Result<()> {
    let Some(bootstrap) = args.value("bootstrap-server") else {
        bail!("Missing required argument \"[bootstrap-server]\"\n{USAGE}");
    };
    let actions = ["list", "describe", "delete", "reset-offsets"];
    let chosen: Vec<&str> = actions.into_iter().filter(|a| args.has(a)).collect();
    if chosen.len() != 1 {
        bail!(
            "Command must include exactly one action: --list, --describe, --delete, --reset-offsets\n{USAGE}"
        );
    }
    let client = GroupClient::connect(bootstrap)?;
    let groups = || -> Result<Vec<String>> {
        if args.has("all-groups") {
            return client.list();
        }
        let groups = args.values("group").to_vec();
        if groups.is_empty() {
            bail!(
                "Option [{}] takes one of these options: [group], [all-groups]",
                chosen[0]
            );
        }
        Ok(groups)
    };
    match chosen[0] {
        "list" => {
            for g in client.list()? {
                println!("{g}");
            }
        }
        "describe" => {
            for group in groups()? {
                let info = client.describe(&group)?;
                match describe::state_notice(&group, &info.state) {
                    None => eprintln!("Error: Consumer group '{group}' does not exist."),
                    Some(notice) => {
                        if !notice.is_empty() {
                            eprintln!("{notice}");
                        }
                        print!("{}", describe::render(&describe::rows(&client, &group)?));
                    }
                }
            }
        }
        "delete" => {
            for group in groups()? {
                match client.delete(&group) {
                    Ok(()) => println!(
                        "Deletion of requested consumer groups ('{group}') was successful."
                    ),
                    Err(e) => bail!(
                        "Deletion of some consumer groups failed:\n* Group '{group}' could not be deleted due to: {e}"
                    ),
                }
            }
        }
        _ => reset_offsets(args, &client, &groups()?)?,
    }
    Ok(())
}

fn reset_offsets(args: &cli::Parsed, client: &GroupClient, groups: &[String]) -> Result<()> {
    let scope = if args.has("all-topics") {
        Scope::AllTopics
    } else if !args.values("topic").is_empty() {
        Scope::Topics(args.values("topic").to_vec())
    } else {
        bail!("One of the reset scopes should be defined: --all-topics, --topic.");
    };
    let to = match (
        args.has("to-earliest"),
        args.has("to-latest"),
        args.value("to-offset"),
    ) {
        (true, false, None) => ResetTo::Earliest,
        (false, true, None) => ResetTo::Latest,
        (false, false, Some(n)) => match n.parse() {
            Ok(n) => ResetTo::Offset(n),
            Err(_) => bail!("--to-offset needs a number, not '{n}'"),
        },
        _ => bail!(
            "Option [reset-offsets] takes exactly one of --to-earliest, --to-latest, --to-offset"
        ),
    };
    let execute = args.has("execute");
    if execute && args.has("dry-run") {
        bail!("Option [reset-offsets] takes at most one of these options: [dry-run], [execute]");
    }
    if !execute && !args.has("dry-run") {
        eprintln!(
            "WARN: No action will be performed as the --execute option is missing. \
             You should add the --dry-run option explicitly if you are scripting this command."
        );
    }
    for group in groups {
        let plan = reset::plan(client, group, &scope, to)?;
        if execute {
            client.commit(group, &plan)?;
        }
        print!("{}", reset::render(group, &plan));
    }
    Ok(())
}
