//! `strom configs`: Kafka's kafka-configs.sh for topics and brokers — `--describe` (with
//! `--all`) and `--alter --add-config/--delete-config` — with Kafka 3.9's lines, over the
//! Kafka protocol (DescribeConfigs with synonyms, IncrementalAlterConfigs for topics,
//! AlterConfigs for brokers, Metadata to list entities), so it works against any cluster.
//!
//! Argument errors print only the message on stderr, as ConfigCommand does; a failed
//! request prints `Error while executing config command with args '...'` and the broker's
//! message (Kafka adds a stack trace there).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::messages::incremental_alter_configs_request as incremental;
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, ApiKey, DescribeConfigsRequest,
    DescribeConfigsResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    MetadataResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::cli::{self, OptionSpec};
use strom_client::{blocking, properties};

const SPECS: &[OptionSpec] = &[
    OptionSpec::one("bootstrap-server"),
    OptionSpec::one("bootstrap-controller"),
    OptionSpec::one("zookeeper"),
    OptionSpec::one("command-config"),
    OptionSpec::flag("describe"),
    OptionSpec::flag("alter"),
    OptionSpec::flag("all"),
    OptionSpec::one("entity-type"),
    OptionSpec::one("entity-name"),
    OptionSpec::flag("entity-default"),
    OptionSpec::one("topic"),
    OptionSpec::one("broker"),
    OptionSpec::flag("broker-defaults"),
    OptionSpec::one("add-config"),
    OptionSpec::one("add-config-file"),
    OptionSpec::one("delete-config"),
    OptionSpec::flag("force"),
    OptionSpec::flag("help"),
    OptionSpec::flag("version"),
];

const USAGE: &str = "\
This tool helps to manipulate and describe entity config for a topic or broker (as kafka-configs.sh).
Option                                   Description
------                                   -----------
--add-config <k1=v1,k2=[v1,v2,v2],...>   Key Value pairs of configs to add.
--add-config-file <file>                 Path to a properties file with configs to add.
--all                                    List all configs for the given entity, including defaults.
--alter                                  Alter the configuration for the entity.
--bootstrap-server <host:port>           The Kafka server to connect to.
--broker <id>                            The broker's ID.
--broker-defaults                        The config defaults for all brokers.
--delete-config <k1,k2,...>              Config keys to remove.
--describe                               List configs for the given entity.
--entity-default                         Default entity name for brokers.
--entity-name <name>                     Name of the entity (topic name or broker id).
--entity-type <topics|brokers>           Type of entity.
--topic <topic>                          The topic's name.
";

/// Kafka's `ConfigResource.Type` ids.
const TOPIC: i8 = 2;
const BROKER: i8 = 4;
/// Kafka's config-source ids, and the names kafka-configs.sh prints for them.
const SOURCES: [&str; 8] = [
    "UNKNOWN",
    "DYNAMIC_TOPIC_CONFIG",
    "DYNAMIC_BROKER_CONFIG",
    "DYNAMIC_DEFAULT_BROKER_CONFIG",
    "STATIC_BROKER_CONFIG",
    "DEFAULT_CONFIG",
    "DYNAMIC_BROKER_LOGGER_CONFIG",
    "DYNAMIC_CLIENT_METRICS_CONFIG",
];
const TIMEOUT: Duration = Duration::from_secs(60);

/// What the command is about: topics or brokers, one by name, the default broker
/// entity, or (no name) every one.
#[derive(Debug, Clone, PartialEq)]
enum Entity {
    Topics(Option<String>),
    Brokers(Option<String>),
    BrokerDefault,
}

/// How a run ends: output on stdout, or a message on stderr (both exit 1 on error).
enum Failure {
    /// An argument error: the message alone.
    Usage(String),
    /// A failed request: Kafka's "Error while executing" line, then the reason.
    Execution(anyhow::Error),
}

pub fn main(args: Vec<String>) -> ExitCode {
    match run(&args) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(Failure::Usage(message)) => {
            eprintln!("{message}");
            ExitCode::from(1)
        }
        Err(Failure::Execution(e)) => {
            eprintln!(
                "Error while executing config command with args '{}'\n{e:#}",
                args.join(" ")
            );
            ExitCode::from(1)
        }
    }
}

fn run(args: &[String]) -> Result<String, Failure> {
    let parsed =
        cli::parse(args, SPECS, false).map_err(|e| Failure::Usage(cli::jopt_message(&e)))?;
    if let Some(zk) = parsed.value("zookeeper") {
        return Err(Failure::Usage(cli::zookeeper_message("configs", zk)));
    }
    if parsed.has("version") {
        return Ok(format!("{} (strom)\n", env!("CARGO_PKG_VERSION")));
    }
    if parsed.has("help") || args.is_empty() {
        return Err(Failure::Usage(USAGE.to_string()));
    }
    if parsed.has("bootstrap-controller") {
        return Err(Failure::Usage(
            "strom configs talks to brokers: use --bootstrap-server <broker host:port> (--bootstrap-controller is not supported)".to_string(),
        ));
    }
    let Some(bootstrap) = parsed.value("bootstrap-server") else {
        return Err(Failure::Usage(
            "One of the required --bootstrap-server or --bootstrap-controller arguments must be specified".to_string(),
        ));
    };
    if parsed.has("describe") == parsed.has("alter") {
        return Err(Failure::Usage(format!(
            "Command must include exactly one action: --describe, --alter\n{USAGE}"
        )));
    }
    let entity = entity(&parsed).map_err(Failure::Usage)?;
    if parsed.has("describe") {
        describe(bootstrap, &entity, parsed.has("all")).map_err(Failure::Execution)
    } else {
        let adds = added_configs(&parsed).map_err(Failure::Usage)?;
        let deletes: Vec<String> = parsed
            .value("delete-config")
            .map(|v| {
                v.split(',')
                    .map(|k| k.trim().to_string())
                    .filter(|k| !k.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        if adds.is_empty() && deletes.is_empty() {
            return Err(Failure::Usage(
                "At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter".to_string(),
            ));
        }
        alter(bootstrap, &entity, &adds, &deletes)
    }
}

/// The entity from `--entity-type/--entity-name/--entity-default` or the shortcuts.
fn entity(p: &cli::Parsed) -> Result<Entity, String> {
    let shortcuts = [
        p.value("topic").is_some(),
        p.value("broker").is_some(),
        p.has("broker-defaults"),
    ];
    let generic = p.value("entity-type").is_some()
        || p.value("entity-name").is_some()
        || p.has("entity-default");
    if shortcuts.iter().filter(|s| **s).count() > 1 {
        return Err(
            "Only one of --topic, --broker or --broker-defaults can be specified".to_string(),
        );
    }
    if shortcuts.iter().any(|s| *s) {
        if generic {
            return Err("--entity-{type,name,default} should not be used in conjunction with specific entity flags".to_string());
        }
        return Ok(if let Some(t) = p.value("topic") {
            Entity::Topics(Some(t.to_string()))
        } else if let Some(b) = p.value("broker") {
            Entity::Brokers(Some(b.to_string()))
        } else {
            Entity::BrokerDefault
        });
    }
    let name = p.value("entity-name").map(str::to_string);
    match p.value("entity-type") {
        None => Err("At least one of --entity-type or specific entity flags (--topic, --broker, --broker-defaults) must be specified".to_string()),
        Some("topics") if p.has("entity-default") => Err("--entity-default is not supported for topics".to_string()),
        Some("topics") => Ok(Entity::Topics(name)),
        Some("brokers") if p.has("entity-default") => Ok(Entity::BrokerDefault),
        Some("brokers") => Ok(Entity::Brokers(name)),
        Some(other @ ("clients" | "users" | "broker-loggers" | "ips" | "client-metrics")) => Err(format!(
            "strom configs supports --entity-type topics and brokers; {other} configs are not implemented"
        )),
        Some(other) => Err(format!(
            "Invalid entity type {other}, the entity type must be one of topics, clients, users, brokers, ips, broker-loggers, client-metrics"
        )),
    }
}

/// `--add-config k1=v1,k2=[a,b]` (commas inside brackets belong to the value, the
/// brackets go) and `--add-config-file`, in that order.
fn added_configs(p: &cli::Parsed) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    if let Some(raw) = p.value("add-config") {
        for pair in split_outside_brackets(raw) {
            let Some((k, v)) = pair.split_once('=') else {
                return Err("requirement failed: Invalid entity config: all configs to be added must be in the format \"key=val\".".to_string());
            };
            out.push((k.trim().to_string(), v.trim().replace(['[', ']'], "")));
        }
    }
    if let Some(path) = p.value("add-config-file") {
        out.extend(properties::load(path).map_err(|e| format!("{e:#}"))?);
    }
    if let Some((k, _)) = out.iter().find(|(k, _)| {
        !k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    }) {
        return Err(format!("Invalid character found for config key: {k}"));
    }
    Ok(out)
}

fn split_outside_brackets(raw: &str) -> Vec<String> {
    let (mut parts, mut current, mut depth) = (Vec::new(), String::new(), 0i32);
    for c in raw.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current);
    parts.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

fn describe(bootstrap: &str, entity: &Entity, all: bool) -> Result<String> {
    let metadata = blocking::metadata(bootstrap, TIMEOUT)?;
    let targets: Vec<(i8, String)> = match entity {
        Entity::Topics(Some(t)) => vec![(TOPIC, t.clone())],
        Entity::Topics(None) => metadata
            .topics
            .iter()
            .filter_map(|t| t.name.as_ref().map(|n| (TOPIC, n.to_string())))
            .collect(),
        Entity::Brokers(Some(b)) => vec![(BROKER, b.clone())],
        Entity::Brokers(None) => {
            let mut ids: Vec<i32> = metadata.brokers.iter().map(|b| b.node_id.0).collect();
            ids.sort_unstable();
            ids.into_iter()
                .map(|id| (BROKER, id.to_string()))
                .chain([(BROKER, String::new())])
                .collect()
        }
        Entity::BrokerDefault => vec![(BROKER, String::new())],
    };
    let mut out = String::new();
    for (resource_type, name) in targets {
        let result = describe_one(bootstrap, &metadata, resource_type, &name)?;
        out.push_str(&describe_lines(resource_type, &name, &result, all));
    }
    Ok(out)
}

/// The address to ask about `resource_type`/`name`: a broker's own configs come from that
/// broker, as Kafka's admin client routes them; anything else from the bootstrap server.
fn address_for(
    bootstrap: &str,
    metadata: &MetadataResponse,
    resource_type: i8,
    name: &str,
) -> String {
    let broker = (resource_type == BROKER)
        .then(|| name.parse::<i32>().ok())
        .flatten()
        .and_then(|id| metadata.brokers.iter().find(|b| b.node_id.0 == id));
    broker.map_or_else(
        || bootstrap.to_string(),
        |b| format!("{}:{}", b.host.as_str(), b.port),
    )
}

fn describe_one(
    bootstrap: &str,
    metadata: &MetadataResponse,
    resource_type: i8,
    name: &str,
) -> Result<DescribeConfigsResult> {
    let request = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(StrBytes::from_string(name.to_string()))
            .with_configuration_keys(None)]);
    let address = address_for(bootstrap, metadata, resource_type, name);
    let response: DescribeConfigsResponse =
        blocking::call(&address, ApiKey::DescribeConfigs, 4, &request, TIMEOUT)?;
    let result = response
        .results
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("the broker answered DescribeConfigs with no result"))?;
    if result.error_code != 0 {
        bail!(
            "{}",
            result
                .error_message
                .as_deref()
                .unwrap_or("DescribeConfigs failed")
        );
    }
    Ok(result)
}

/// Kafka's header and one line per config, sorted by key: without `--all` only the
/// entity's own dynamic configs.
fn describe_lines(
    resource_type: i8,
    name: &str,
    result: &DescribeConfigsResult,
    all: bool,
) -> String {
    let (kind, own_source) = if resource_type == TOPIC {
        ("topic", 1)
    } else if name.is_empty() {
        ("brokers", 3)
    } else {
        ("broker", 2)
    };
    let scope = if all { "All" } else { "Dynamic" };
    let mut out = if kind == "brokers" {
        let scope = if all { "All" } else { "Default" };
        format!("{scope} configs for brokers in the cluster are:\n")
    } else {
        format!("{scope} configs for {kind} {name} are:\n")
    };
    let mut entries: Vec<_> = result
        .configs
        .iter()
        .filter(|c| all || c.config_source == own_source)
        .collect();
    entries.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
    for c in entries {
        let value = if c.is_sensitive {
            "null".to_string()
        } else {
            c.value.as_deref().unwrap_or("null").to_string()
        };
        let synonyms: Vec<String> = c
            .synonyms
            .iter()
            .map(|s| {
                let value = if c.is_sensitive {
                    "null"
                } else {
                    s.value.as_deref().unwrap_or("null")
                };
                format!("{}:{}={value}", source_name(s.source), s.name.as_str())
            })
            .collect();
        out.push_str(&format!(
            "  {}={value} sensitive={} synonyms={{{}}}\n",
            c.name.as_str(),
            c.is_sensitive,
            synonyms.join(", ")
        ));
    }
    out
}

fn source_name(source: i8) -> &'static str {
    SOURCES.get(source as usize).copied().unwrap_or("UNKNOWN")
}

fn alter(
    bootstrap: &str,
    entity: &Entity,
    adds: &[(String, String)],
    deletes: &[String],
) -> Result<String, Failure> {
    match entity {
        Entity::Topics(None) => Err(Failure::Usage(
            "an entity name must be specified with --alter of topics".to_string(),
        )),
        Entity::Topics(Some(topic)) => alter_topic(bootstrap, topic, adds, deletes),
        Entity::Brokers(None) => Err(Failure::Usage(
            "an entity name must be specified with --alter of brokers (or --entity-default)"
                .to_string(),
        )),
        Entity::Brokers(Some(id)) => alter_broker(bootstrap, id, adds, deletes)
            .map(|()| format!("Completed updating config for broker {id}.\n")),
        Entity::BrokerDefault => alter_broker(bootstrap, "", adds, deletes).map(|()| {
            "Completed updating default config for brokers in the cluster.\n".to_string()
        }),
    }
}

/// IncrementalAlterConfigs: SET for each add, DELETE for each delete, after checking
/// that every deleted key is a current override (as Kafka's tool does).
fn alter_topic(
    bootstrap: &str,
    topic: &str,
    adds: &[(String, String)],
    deletes: &[String],
) -> Result<String, Failure> {
    let metadata = blocking::metadata(bootstrap, TIMEOUT).map_err(Failure::Execution)?;
    let current = describe_one(bootstrap, &metadata, TOPIC, topic).map_err(Failure::Execution)?;
    let invalid: Vec<&str> = deletes
        .iter()
        .filter(|k| {
            !current
                .configs
                .iter()
                .any(|c| c.name.as_str() == k.as_str() && c.config_source == 1)
        })
        .map(String::as_str)
        .collect();
    if !invalid.is_empty() {
        return Err(Failure::Usage(format!(
            "Invalid config(s): {}",
            invalid.join(",")
        )));
    }
    let configs = adds
        .iter()
        .map(|(k, v)| (k, Some(v.as_str()), 0))
        .chain(deletes.iter().map(|k| (k, None, 1)))
        .map(|(k, v, op)| {
            incremental::AlterableConfig::default()
                .with_name(StrBytes::from_string(k.clone()))
                .with_config_operation(op)
                .with_value(v.map(|v| StrBytes::from_string(v.to_string())))
        })
        .collect();
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental::AlterConfigsResource::default()
            .with_resource_type(TOPIC)
            .with_resource_name(StrBytes::from_string(topic.to_string()))
            .with_configs(configs),
    ]);
    let response: IncrementalAlterConfigsResponse = blocking::call(
        bootstrap,
        ApiKey::IncrementalAlterConfigs,
        1,
        &request,
        TIMEOUT,
    )
    .map_err(Failure::Execution)?;
    for r in &response.responses {
        if r.error_code != 0 {
            return Err(Failure::Execution(anyhow!(
                "{}",
                r.error_message
                    .as_deref()
                    .unwrap_or("IncrementalAlterConfigs failed")
            )));
        }
    }
    Ok(format!("Completed updating config for topic {topic}.\n"))
}

/// AlterConfigs, the legacy whole-set replacement Kafka's tool uses for brokers: the
/// broker's current dynamic configs plus the adds, minus the deletes.
fn alter_broker(
    bootstrap: &str,
    id: &str,
    adds: &[(String, String)],
    deletes: &[String],
) -> Result<(), Failure> {
    let metadata = blocking::metadata(bootstrap, TIMEOUT).map_err(Failure::Execution)?;
    let current = describe_one(bootstrap, &metadata, BROKER, id).map_err(Failure::Execution)?;
    let own_source = if id.is_empty() { 3 } else { 2 };
    let mut configs: Vec<(String, Option<String>)> = current
        .configs
        .iter()
        .filter(|c| c.config_source == own_source)
        .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
        .filter(|(k, _)| !deletes.contains(k) && !adds.iter().any(|(a, _)| a == k))
        .collect();
    configs.extend(adds.iter().map(|(k, v)| (k.clone(), Some(v.clone()))));
    let request =
        AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(BROKER)
            .with_resource_name(StrBytes::from_string(id.to_string()))
            .with_configs(
                configs
                    .into_iter()
                    .map(|(k, v)| {
                        AlterableConfig::default()
                            .with_name(StrBytes::from_string(k))
                            .with_value(v.map(StrBytes::from_string))
                    })
                    .collect(),
            )]);
    let address = address_for(bootstrap, &metadata, BROKER, id);
    let response: AlterConfigsResponse =
        blocking::call(&address, ApiKey::AlterConfigs, 2, &request, TIMEOUT)
            .map_err(Failure::Execution)?;
    match response.responses.iter().find(|r| r.error_code != 0) {
        Some(r) => Err(Failure::Execution(anyhow!(
            "{}",
            r.error_message.as_deref().unwrap_or("AlterConfigs failed")
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(s: &str) -> cli::Parsed {
        let args: Vec<String> = s.split_whitespace().map(String::from).collect();
        cli::parse(&args, SPECS, false).unwrap()
    }

    #[test]
    fn entities_come_from_either_form_and_not_both() {
        assert_eq!(
            entity(&parsed("--topic t")),
            Ok(Entity::Topics(Some("t".into())))
        );
        assert_eq!(
            entity(&parsed("--entity-type brokers --entity-default")),
            Ok(Entity::BrokerDefault)
        );
        assert_eq!(
            entity(&parsed("--entity-type brokers")),
            Ok(Entity::Brokers(None))
        );
        assert!(entity(&parsed("--topic t --entity-type topics"))
            .unwrap_err()
            .contains("should not be used in conjunction"));
        assert!(entity(&parsed("--entity-type users"))
            .unwrap_err()
            .contains("topics and brokers"));
    }

    #[test]
    fn add_config_splits_outside_brackets() {
        let p = parsed("--add-config a=1,b=[x,y],c=");
        assert_eq!(
            added_configs(&p).unwrap(),
            vec![
                ("a".to_string(), "1".to_string()),
                ("b".to_string(), "x,y".to_string()),
                ("c".to_string(), String::new())
            ]
        );
        assert!(added_configs(&parsed("--add-config a"))
            .unwrap_err()
            .contains("key=val"));
        assert!(added_configs(&parsed("--add-config a$b=1"))
            .unwrap_err()
            .contains("Invalid character found for config key: a$b"));
    }
}
