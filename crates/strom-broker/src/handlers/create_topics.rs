//! CreateTopics, with per-topic configs, manual replica assignments and `validate_only`.

use std::collections::BTreeMap;

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::config_resource::topic_configs;
use super::RequestContext;
use crate::{standalone_controller, ApiError};

/// CreateTopics responses describe the created topic's configs from v5.
const CONFIGS_SINCE: i16 = 5;

pub fn handle(ctx: &RequestContext<'_>, req: CreateTopicsRequest) -> CreateTopicsResponse {
    let state = ctx.state;
    let results = req
        .topics
        .into_iter()
        .map(|t| {
            let result = CreatableTopicResult::default().with_name(t.name.clone());
            let partitions = if !t.assignments.is_empty() {
                t.assignments.len() as i32
            } else if t.num_partitions == -1 {
                state.config.num_partitions
            } else {
                t.num_partitions
            };
            let configs: BTreeMap<String, String> = t
                .configs
                .iter()
                .filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())))
                .collect();
            let outcome = if let Err(e) = validate_assignments(&t, &[state.node_id()]) {
                Err(e)
            } else if t.assignments.is_empty()
                && t.replication_factor != -1
                && t.replication_factor != 1
            {
                Err(ApiError::new(
                    ResponseError::InvalidReplicationFactor,
                    format!(
                        "Replication factor: {} larger than available brokers: 1.",
                        t.replication_factor
                    ),
                ))
            } else {
                standalone_controller::create_topic(
                    state,
                    &t.name,
                    partitions,
                    configs,
                    req.validate_only,
                )
            };
            match outcome {
                Ok(topic) => {
                    let configs = topic_configs(state, &topic)
                        .into_iter()
                        .map(|c| {
                            CreatableTopicConfigs::default()
                                .with_name(StrBytes::from_static_str(c.name))
                                .with_value(Some(StrBytes::from_string(c.value)))
                                .with_config_source(c.source)
                        })
                        .collect();
                    result
                        .with_topic_id(topic.id)
                        .with_num_partitions(partitions)
                        .with_replication_factor(1)
                        .with_configs((ctx.version >= CONFIGS_SINCE).then_some(configs))
                }
                Err(e) => result
                    .with_error_code(e.code())
                    .with_error_message(Some(StrBytes::from_string(e.message)))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1),
            }
        })
        .collect();
    CreateTopicsResponse::default().with_topics(results)
}

/// Checks a manual replica assignment as Kafka's `ReplicationControlManager` does:
/// not together with a partition count or replication factor, partitions numbered
/// 0, 1, 2, …, and each replica list non-empty, of one length, without duplicates and
/// naming only registered brokers.
fn validate_assignments(topic: &CreatableTopic, brokers: &[i32]) -> Result<(), ApiError> {
    if topic.assignments.is_empty() {
        return Ok(());
    }
    if topic.num_partitions != -1 || topic.replication_factor != -1 {
        return Err(ApiError::new(
            ResponseError::InvalidRequest,
            "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
        ));
    }
    let invalid = |m: String| ApiError::new(ResponseError::InvalidReplicaAssignment, m);
    let mut indexes: Vec<i32> = topic
        .assignments
        .iter()
        .map(|a| a.partition_index)
        .collect();
    indexes.sort_unstable();
    if indexes.iter().enumerate().any(|(i, &p)| p != i as i32) {
        return Err(invalid(
            "Partitions should be a consecutive 0-based integer sequence".to_string(),
        ));
    }
    let replication_factor = topic.assignments[0].broker_ids.len();
    for assignment in &topic.assignments {
        let replicas = &assignment.broker_ids;
        if replicas.is_empty() {
            return Err(invalid(
                "The manual partition assignment includes an empty replica list.".to_string(),
            ));
        }
        if replicas.len() != replication_factor {
            return Err(invalid(format!(
                "The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {replication_factor} replica(s).",
                replicas.len()
            )));
        }
        for (i, broker) in replicas.iter().enumerate() {
            if replicas[..i].contains(broker) {
                return Err(invalid(format!(
                    "The manual partition assignment includes the broker {} more than once.",
                    broker.0
                )));
            }
            if !brokers.contains(&broker.0) {
                return Err(invalid(format!(
                    "The manual partition assignment includes broker {}, but no broker with that ID is registered.",
                    broker.0
                )));
            }
        }
    }
    Ok(())
}
