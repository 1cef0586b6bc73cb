//! `strom topics`: Kafka's kafka-topics.sh — `--bootstrap-server` with exactly one of
//! `--create`, `--list`, `--describe`, `--alter --partitions`, `--delete` — printing
//! Kafka 3.9's lines, over the Kafka protocol (CreateTopics, DeleteTopics,
//! CreatePartitions, Metadata, DescribeConfigs), so it works against any cluster.
//!
//! The seeds' own command lines use `--zookeeper host:2181`, which Kafka 3.9 no longer
//! knows either: strom says which `--bootstrap-server` form to use instead.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
    CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse, DescribeConfigsRequest,
    DescribeConfigsResponse, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::cli::{self, OptionSpec};
use strom_client::blocking;

const SPECS: &[OptionSpec] = &[
    OptionSpec::one("bootstrap-server"),
    OptionSpec::one("command-config"),
    OptionSpec::flag("create"),
    OptionSpec::flag("list"),
    OptionSpec::flag("describe"),
    OptionSpec::flag("alter"),
    OptionSpec::flag("delete"),
    OptionSpec::one("topic"),
    OptionSpec::one("partitions"),
    OptionSpec::one("replication-factor"),
    OptionSpec::one("replica-assignment"),
    OptionSpec::one("config"),
    OptionSpec::flag("if-exists"),
    OptionSpec::flag("if-not-exists"),
    OptionSpec::flag("exclude-internal"),
    OptionSpec::flag("under-replicated-partitions"),
    OptionSpec::flag("unavailable-partitions"),
    OptionSpec::one("zookeeper"),
    OptionSpec::flag("help"),
];

const USAGE: &str = "\
This tool helps to create, delete, describe, or change a topic (as kafka-topics.sh).
Option                                   Description
------                                   -----------
--alter                                  Alter the number of partitions of a topic.
--bootstrap-server <host:port>           REQUIRED: the Kafka server to connect to.
--config <name=value>                    A topic configuration override (repeatable; --create).
--create                                 Create a new topic.
--delete                                 Delete a topic.
--describe                               List details for the given topics.
--exclude-internal                       Exclude internal topics from --list and --describe.
--if-exists                              With --alter, --delete or --describe: only if the topic exists.
--if-not-exists                          With --create: only if the topic does not exist.
--list                                   List all available topics.
--partitions <n>                         The number of partitions (--create, --alter).
--replica-assignment <p0r0:p0r1,p1r0:..> Manual replica assignment (--create).
--replication-factor <n>                 The replication factor of each partition (--create).
--topic <topic>                          The topic to create, alter, describe or delete (a regex but for --create).
--unavailable-partitions                 With --describe: only partitions without an available leader.
--under-replicated-partitions            With --describe: only under-replicated partitions.
";

const TIMEOUT: Duration = Duration::from_secs(60);

pub fn main(args: Vec<String>) -> ExitCode {
    let parsed = match cli::parse(&args, SPECS, false) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{}", cli::jopt_message(&e));
            return ExitCode::from(1);
        }
    };
    if let Some(zk) = parsed.value("zookeeper") {
        eprintln!("{}", cli::zookeeper_message("topics", zk));
        return ExitCode::from(1);
    }
    if parsed.has("help") || args.is_empty() {
        eprint!("{USAGE}");
        return ExitCode::from(1);
    }
    let actions = ["create", "list", "describe", "alter", "delete"]
        .iter()
        .filter(|a| parsed.has(a))
        .count();
    if actions != 1 {
        eprintln!("Command must include exactly one action: --list, --describe, --create, --alter or --delete\n{USAGE}");
        return ExitCode::from(1);
    }
    let Some(bootstrap) = parsed.value("bootstrap-server").map(str::to_string) else {
        eprintln!("--bootstrap-server must be specified");
        return ExitCode::from(1);
    };
    match run(&parsed, &bootstrap) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("Error while executing topic command : {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run(args: &cli::Parsed, bootstrap: &str) -> Result<String> {
    if args.has("create") {
        create(args, bootstrap)
    } else if args.has("list") {
        let metadata = blocking::metadata(bootstrap, TIMEOUT)?;
        let mut names = matching(&metadata, args)?
            .iter()
            .map(|t| name(t))
            .collect::<Vec<_>>();
        names.sort();
        Ok(format!("{}\n", names.join("\n")))
    } else if args.has("describe") {
        describe(args, bootstrap)
    } else if args.has("alter") {
        alter(args, bootstrap)
    } else {
        delete(args, bootstrap)
    }
}

fn name(t: &MetadataResponseTopic) -> String {
    t.name.as_ref().map(|n| n.to_string()).unwrap_or_default()
}

/// The topics `--topic` names (a regex, `,` meaning `|`, matched whole), or every topic.
fn matching<'a>(
    metadata: &'a MetadataResponse,
    args: &cli::Parsed,
) -> Result<Vec<&'a MetadataResponseTopic>> {
    let pattern = match args.value("topic") {
        Some(t) => {
            let t = t
                .trim()
                .trim_matches('"')
                .replace(',', "|")
                .replace(' ', "");
            Some(regex::Regex::new(&format!("^(?:{t})$"))?)
        }
        None => None,
    };
    let exclude_internal = args.has("exclude-internal");
    Ok(metadata
        .topics
        .iter()
        .filter(|t| pattern.as_ref().is_none_or(|p| p.is_match(&name(t))))
        .filter(|t| !(exclude_internal && t.is_internal))
        .collect())
}

fn required_topic(args: &cli::Parsed) -> Result<String> {
    args.value("topic")
        .map(str::to_string)
        .ok_or_else(|| anyhow!("Missing required argument \"[topic]\""))
}

fn number(args: &cli::Parsed, option: &str) -> Result<Option<i32>> {
    args.value(option)
        .map(|v| {
            v.trim()
                .parse::<i32>()
                .map_err(|_| anyhow!("Invalid value {v} for option --{option}"))
        })
        .transpose()
}

fn create(args: &cli::Parsed, bootstrap: &str) -> Result<String> {
    let topic = required_topic(args)?;
    let mut out = String::new();
    if topic.contains('.') || topic.contains('_') {
        out.push_str("WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could collide. To avoid issues it is best to use either, but not both.\n");
    }
    let partitions = number(args, "partitions")?.unwrap_or(-1);
    let rf = number(args, "replication-factor")?.unwrap_or(-1);
    if partitions != -1 && partitions < 1 {
        bail!("The partitions must be greater than 0");
    }
    if rf != -1 && !(1..=32767).contains(&rf) {
        bail!("The replication factor must be between 1 and 32767 inclusive");
    }
    let mut configs = Vec::new();
    for c in args.values("config") {
        let parts: Vec<&str> = c.split('=').map(str::trim).collect();
        if parts.len() != 2 {
            bail!("requirement failed: Invalid topic config: all configs to be added must be in the format \"key=val\".");
        }
        configs.push(
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_string(parts[0].to_string()))
                .with_value(Some(StrBytes::from_string(parts[1].to_string()))),
        );
    }
    let mut request_topic = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(topic.clone())))
        .with_num_partitions(partitions)
        .with_replication_factor(rf as i16)
        .with_configs(configs);
    if let Some(assignment) = args.value("replica-assignment") {
        if args.has("partitions") || args.has("replication-factor") {
            bail!("Option \"[replica-assignment]\" can't be used with option \"[partitions]\"");
        }
        let assignments = assignment
            .split(',')
            .enumerate()
            .map(|(p, replicas)| {
                let ids = replicas
                    .split(':')
                    .map(|b| {
                        b.trim()
                            .parse::<i32>()
                            .map(BrokerId)
                            .map_err(|_| anyhow!("Invalid replica assignment {assignment}"))
                    })
                    .collect::<Result<Vec<_>>>()?;
                Ok(CreatableReplicaAssignment::default()
                    .with_partition_index(p as i32)
                    .with_broker_ids(ids))
            })
            .collect::<Result<Vec<_>>>()?;
        request_topic = request_topic
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(assignments);
    }
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![request_topic]);
    let response: CreateTopicsResponse =
        blocking::call(bootstrap, ApiKey::CreateTopics, 7, &request, TIMEOUT)?;
    let result = response
        .topics
        .first()
        .ok_or_else(|| anyhow!("CreateTopics returned no topic"))?;
    match result.error_code {
        0 => out.push_str(&format!("Created topic {topic}.\n")),
        36 if args.has("if-not-exists") => {}
        _ => bail!(
            "{}",
            result
                .error_message
                .as_deref()
                .map(|m| m.to_string())
                .unwrap_or_else(|| format!("error {}", result.error_code))
        ),
    }
    Ok(out)
}

fn not_found(args: &cli::Parsed) -> anyhow::Error {
    anyhow!(
        "Topic 'Optional[{}]' does not exist as expected",
        args.value("topic").unwrap_or_default()
    )
}

fn describe(args: &cli::Parsed, bootstrap: &str) -> Result<String> {
    let metadata = blocking::metadata(bootstrap, TIMEOUT)?;
    let topics = matching(&metadata, args)?;
    if topics.is_empty() && args.has("topic") && !args.has("if-exists") {
        return Err(not_found(args));
    }
    let live: Vec<i32> = metadata.brokers.iter().map(|b| b.node_id.0).collect();
    let filtered = args.has("under-replicated-partitions") || args.has("unavailable-partitions");
    let ids = |v: &[BrokerId]| {
        v.iter()
            .map(|b| b.0.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut out = String::new();
    for topic in topics {
        let name = name(topic);
        let rf = topic
            .partitions
            .first()
            .map_or(0, |p| p.replica_nodes.len());
        if !filtered {
            let configs = non_default_configs(bootstrap, &name)?;
            let id = if topic.topic_id.is_nil() {
                String::new()
            } else {
                format!(
                    "\tTopicId: {}",
                    crate::metadata_quorum::base64_uuid(&topic.topic_id)
                )
            };
            out.push_str(&format!(
                "Topic: {name}{id}\tPartitionCount: {}\tReplicationFactor: {rf}\tConfigs: {configs}\n",
                topic.partitions.len()
            ));
        }
        let mut partitions: Vec<_> = topic.partitions.iter().collect();
        partitions.sort_by_key(|p| p.partition_index);
        for p in partitions {
            let leader = p.leader_id.0;
            let under = p.replica_nodes.len() > p.isr_nodes.len();
            let unavailable = leader < 0 || !live.contains(&leader);
            if filtered
                && !(args.has("under-replicated-partitions") && under
                    || args.has("unavailable-partitions") && unavailable)
            {
                continue;
            }
            out.push_str(&format!(
                "\tTopic: {name}\tPartition: {}\tLeader: {}\tReplicas: {}\tIsr: {}\tElr: N/A\tLastKnownElr: N/A\n",
                p.partition_index,
                if leader < 0 { "none".to_string() } else { leader.to_string() },
                ids(&p.replica_nodes),
                ids(&p.isr_nodes),
            ));
        }
    }
    Ok(out)
}

/// The topic's configs whose source is not the built-in default, `k=v` joined by `,`.
fn non_default_configs(bootstrap: &str, topic: &str) -> Result<String> {
    const TOPIC: i8 = 2;
    const DEFAULT_CONFIG: i8 = 5;
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(TOPIC)
            .with_resource_name(StrBytes::from_string(topic.to_string()))
            .with_configuration_keys(None)]);
    let response: DescribeConfigsResponse =
        blocking::call(bootstrap, ApiKey::DescribeConfigs, 4, &request, TIMEOUT)?;
    let configs: Vec<String> = response
        .results
        .iter()
        .flat_map(|r| r.configs.iter())
        .filter(|c| c.config_source != DEFAULT_CONFIG)
        .map(|c| format!("{}={}", c.name.as_str(), c.value.as_deref().unwrap_or("")))
        .collect();
    Ok(configs.join(","))
}

/// The names of the existing topics `--topic` matches (required), for --alter and
/// --delete; an empty list when none does and `--if-exists` allows it.
fn targets(args: &cli::Parsed, bootstrap: &str) -> Result<Vec<TopicName>> {
    required_topic(args)?;
    let metadata = blocking::metadata(bootstrap, TIMEOUT)?;
    let names: Vec<TopicName> = matching(&metadata, args)?
        .iter()
        .map(|t| TopicName(StrBytes::from_string(name(t))))
        .collect();
    if names.is_empty() && !args.has("if-exists") {
        return Err(not_found(args));
    }
    Ok(names)
}

/// Fails with the first error a per-topic result carries.
fn first_error<'a>(
    mut errors: impl Iterator<Item = (i16, Option<&'a StrBytes>)>,
    what: &str,
) -> Result<String> {
    match errors.find(|(code, _)| *code != 0) {
        Some((_, message)) => bail!("{}", message.map_or(what, |m| m.as_str())),
        None => Ok(String::new()),
    }
}

fn alter(args: &cli::Parsed, bootstrap: &str) -> Result<String> {
    if args.has("config") {
        bail!("Option \"[config]\" can't be used with option \"[alter]\" (the kafka-configs CLI supports altering topic configs with a --bootstrap-server option)");
    }
    let count = number(args, "partitions")?
        .ok_or_else(|| anyhow!("Missing required argument \"[partitions]\""))?;
    let topics = targets(args, bootstrap)?;
    if topics.is_empty() {
        return Ok(String::new());
    }
    let request = CreatePartitionsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(
            topics
                .into_iter()
                .map(|name| {
                    CreatePartitionsTopic::default()
                        .with_name(name)
                        .with_count(count)
                })
                .collect(),
        );
    let response: CreatePartitionsResponse =
        blocking::call(bootstrap, ApiKey::CreatePartitions, 3, &request, TIMEOUT)?;
    first_error(
        response
            .results
            .iter()
            .map(|r| (r.error_code, r.error_message.as_ref())),
        "CreatePartitions failed",
    )
}

fn delete(args: &cli::Parsed, bootstrap: &str) -> Result<String> {
    let topics = targets(args, bootstrap)?;
    if topics.is_empty() {
        return Ok(String::new());
    }
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(
            topics
                .into_iter()
                .map(|name| DeleteTopicState::default().with_name(Some(name)))
                .collect(),
        );
    let response: DeleteTopicsResponse =
        blocking::call(bootstrap, ApiKey::DeleteTopics, 6, &request, TIMEOUT)?;
    first_error(
        response
            .responses
            .iter()
            .map(|r| (r.error_code, r.error_message.as_ref())),
        "DeleteTopics failed",
    )
}
