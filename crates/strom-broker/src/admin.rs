//! Admin changes, forwarded to the active controller of the quorum (Kafka's forwarding),
//! which decides placement and writes the records every broker applies — on a single
//! node too, whose controller is the one voter of its quorum.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::ResponseError;
use strom_controller::rpc::{AdminResult, AdminWrite, NewTopic};
use strom_metadata::{BrokerId, ConfigResource};
use uuid::Uuid;

use crate::{topic_config, BrokerState};
use strom_wire::ApiError;

/// How long a forwarded change may wait for the quorum: the request's `timeout_ms`,
/// at least a second and at most [`crate::quorum_channel::ADMIN_DEADLINE`].
pub fn request_timeout(timeout_ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(0).clamp(1000, 30_000))
}

/// A created topic as CreateTopics reports it.
#[derive(Debug, Clone)]
pub struct Created {
    pub id: Uuid,
    pub partitions: i32,
    pub replication_factor: i16,
}

/// What a CreateTopics entry asks for.
#[derive(Debug, Clone)]
pub struct TopicSpec {
    pub name: String,
    pub partitions: i32,
    /// -1: `default.replication.factor`.
    pub replication_factor: i16,
    pub assignments: Vec<Vec<BrokerId>>,
    pub configs: BTreeMap<String, String>,
}

impl TopicSpec {
    /// The partitions asked for: the assignment's, or the count.
    fn partition_count(&self) -> i32 {
        if self.assignments.is_empty() {
            self.partitions
        } else {
            self.assignments.len() as i32
        }
    }
}

/// What a cluster broker checks before it forwards a CreateTopics entry, as the logs of a
/// standalone node check it: the topic name, the partition count and its limit, and every
/// config value (normalized as the controller records it).
fn validated(spec: &TopicSpec, state: &BrokerState) -> Result<BTreeMap<String, String>, ApiError> {
    crate::topic::check_creatable(&spec.name)?;
    if spec.assignments.is_empty() && spec.partitions < 1 {
        return Err(ApiError::new(
            ResponseError::InvalidPartitions,
            "Number of partitions must be larger than 0.",
        ));
    }
    state.logs.check_request_limit(spec.partition_count())?;
    let mut configs = BTreeMap::new();
    for (k, v) in &spec.configs {
        configs.insert(k.clone(), topic_config::validate(k, v)?);
    }
    topic_config::validate_together(&configs)?;
    Ok(configs)
}

fn unexpected(result: AdminResult) -> ApiError {
    ApiError::new(
        ResponseError::UnknownServerError,
        format!("unexpected controller answer {result:?}"),
    )
}

/// CreateTopics for one topic.
pub async fn create_topic(
    state: &BrokerState,
    spec: TopicSpec,
    validate_only: bool,
    timeout: Duration,
) -> Result<Created, ApiError> {
    let quorum = &state.quorum;
    let configs = validated(&spec, state)?;
    let replication_factor = if spec.replication_factor == -1 {
        state.config.kraft.default_replication_factor
    } else {
        spec.replication_factor
    };
    let write = AdminWrite::CreateTopics {
        topics: vec![NewTopic {
            name: spec.name.clone(),
            partitions: spec.partitions,
            replication_factor,
            assignments: spec.assignments.clone(),
            configs,
        }],
        validate_only,
    };
    match quorum.admin(&state.metadata, write, timeout).await? {
        AdminResult::CreateTopics(mut results) if results.len() == 1 => {
            let created = results
                .pop()
                .expect("one result")
                .map_err(crate::quorum_channel::api_error)?;
            Ok(Created {
                id: created.topic_id,
                partitions: created.partitions,
                replication_factor: created.replication_factor,
            })
        }
        other => Err(unexpected(other)),
    }
}

/// CreatePartitions for one topic.
pub async fn create_partitions(
    state: &BrokerState,
    name: &str,
    count: i32,
    validate_only: bool,
    timeout: Duration,
) -> Result<(), ApiError> {
    let quorum = &state.quorum;
    let current = state
        .metadata
        .image()
        .topic(name)
        .map_or(0, |t| t.partitions.len() as i32);
    state.logs.check_request_limit(count - current)?;
    let write = AdminWrite::CreatePartitions {
        topic: name.to_string(),
        count,
        assignments: Vec::new(),
        validate_only,
    };
    match quorum.admin(&state.metadata, write, timeout).await? {
        AdminResult::CreatePartitions(r) => r.map_err(crate::quorum_channel::api_error),
        other => Err(unexpected(other)),
    }
}

/// ElectLeaders: a PREFERRED or (`unclean`) UNCLEAN election of each named partition
/// (`None`: every partition).
pub async fn elect_leaders(
    state: &BrokerState,
    unclean: bool,
    partitions: Option<Vec<(String, i32)>>,
    timeout: Duration,
) -> Result<Vec<(String, i32, Result<(), ApiError>)>, ApiError> {
    let quorum = &state.quorum;
    let write = AdminWrite::ElectLeaders {
        unclean,
        partitions,
    };
    match quorum.admin(&state.metadata, write, timeout).await? {
        AdminResult::ElectLeaders(results) => Ok(results
            .into_iter()
            .map(|(t, i, r)| (t, i, r.map_err(crate::quorum_channel::api_error)))
            .collect()),
        other => Err(unexpected(other)),
    }
}

/// DeleteTopics for one topic.
pub async fn delete_topic(
    state: &BrokerState,
    name: &str,
    timeout: Duration,
) -> Result<Uuid, ApiError> {
    let quorum = &state.quorum;
    let write = AdminWrite::DeleteTopics {
        names: vec![name.to_string()],
    };
    match quorum.admin(&state.metadata, write, timeout).await? {
        AdminResult::DeleteTopics(mut results) if results.len() == 1 => results
            .pop()
            .expect("one result")
            .map_err(crate::quorum_channel::api_error),
        other => Err(unexpected(other)),
    }
}

/// A topic's config overrides as they are now, `None` if the topic does not exist.
pub fn topic_overrides(state: &BrokerState, name: &str) -> Option<BTreeMap<String, String>> {
    let image = state.metadata.image();
    image.topic(name).map(|_| image.topic_configs(name))
}

/// Validates `configs` as the topic's whole new set of overrides and, unless
/// `validate_only`, makes it so — on a cluster as `changes` alone when the request was
/// incremental (see [`quorum_changes`]).
pub async fn alter_topic_configs(
    state: &BrokerState,
    name: &str,
    configs: BTreeMap<String, String>,
    changes: Option<Vec<(String, Option<String>)>>,
    validate_only: bool,
) -> Result<(), ApiError> {
    if topic_overrides(state, name).is_none() {
        return Err(ApiError::unknown_topic());
    }
    let mut validated = BTreeMap::new();
    for (k, v) in configs {
        let value = topic_config::validate(&k, &v)?;
        validated.insert(k, value);
    }
    topic_config::validate_together(&validated)?;
    let (changes, replace) = quorum_changes(validated, changes);
    alter_configs_in_quorum(
        state,
        &state.quorum,
        ConfigResource::Topic(name.to_string()),
        changes,
        replace,
        validate_only,
    )
    .await
}

/// What a config change writes to the metadata log, from the resource's validated new
/// set: the whole set, replacing the old one (AlterConfigs), or — for an incremental
/// request's `changes` (each key set, `Some`, or deleted) — those keys alone, with their
/// validated values, so that keys changed meanwhile through another broker are not
/// undone by this broker's older view of the set.
fn quorum_changes(
    validated: BTreeMap<String, String>,
    changes: Option<Vec<(String, Option<String>)>>,
) -> (Vec<(String, Option<String>)>, bool) {
    match changes {
        None => (
            validated.into_iter().map(|(k, v)| (k, Some(v))).collect(),
            true,
        ),
        Some(changes) => (
            changes
                .into_iter()
                .map(|(k, v)| {
                    let value = v.and_then(|_| validated.get(&k).cloned());
                    (k, value)
                })
                .collect(),
            false,
        ),
    }
}

/// Has the active controller set (`Some`) or delete (`None`) each of `changes` in the
/// config set of `resource`; with `replace`, every other key is deleted.
async fn alter_configs_in_quorum(
    state: &BrokerState,
    quorum: &crate::quorum_channel::QuorumChannel,
    resource: ConfigResource,
    changes: Vec<(String, Option<String>)>,
    replace: bool,
    validate_only: bool,
) -> Result<(), ApiError> {
    let write = AdminWrite::AlterConfigs {
        resource,
        changes,
        replace,
        validate_only,
    };
    match quorum
        .admin(
            &state.metadata,
            write,
            crate::quorum_channel::ADMIN_DEADLINE,
        )
        .await?
    {
        AdminResult::AlterConfigs(r) => r.map_err(crate::quorum_channel::api_error),
        other => Err(unexpected(other)),
    }
}

/// Validates `configs` as the whole new set of dynamic configs of `entity` (a broker id,
/// `None` for the cluster-wide default) and, unless `validate_only`, makes it so: on a
/// cluster through the metadata log (every broker applies it from there; see
/// [`quorum_changes`]), in the node's own file standalone.
pub async fn alter_broker_configs(
    state: &BrokerState,
    entity: Option<i32>,
    configs: BTreeMap<String, String>,
    changes: Option<Vec<(String, Option<String>)>>,
    validate_only: bool,
) -> Result<(), ApiError> {
    let validate = |configs: &BTreeMap<String, String>| {
        crate::dynamic_config::validate(
            &state.dynamic_configs,
            &state.config.given,
            state.node_id(),
            entity,
            configs,
        )
    };
    let (changes, replace) = quorum_changes(validate(&configs)?, changes);
    alter_configs_in_quorum(
        state,
        &state.quorum,
        ConfigResource::Broker(entity.map(BrokerId)),
        changes,
        replace,
        validate_only,
    )
    .await
}

/// A new producer id, from the blocks the controller allocates.
pub async fn next_producer_id(state: &BrokerState) -> Result<i64, ApiError> {
    state.quorum.next_producer_id().await
}

/// UnregisterBroker: forgets broker `broker_id`'s registration at the active controller.
pub async fn unregister_broker(
    state: &BrokerState,
    broker_id: i32,
    timeout: Duration,
) -> Result<(), ApiError> {
    let quorum = &state.quorum;
    let write = AdminWrite::UnregisterBroker {
        broker_id: BrokerId(broker_id),
    };
    match quorum.admin(&state.metadata, write, timeout).await? {
        AdminResult::UnregisterBroker(result) => result.map_err(crate::quorum_channel::api_error),
        other => Err(unexpected(other)),
    }
}
