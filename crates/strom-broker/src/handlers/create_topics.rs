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
use crate::admin::{self, TopicSpec};
use strom_wire::ApiError;

/// CreateTopics responses describe the created topic's configs from v5.
const CONFIGS_SINCE: i16 = 5;

pub async fn handle(ctx: &RequestContext<'_>, req: CreateTopicsRequest) -> CreateTopicsResponse {
    let state = ctx.state;
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let result = CreatableTopicResult::default().with_name(t.name.clone());
        let configs: BTreeMap<String, String> = t
            .configs
            .iter()
            .filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())))
            .collect();
        let spec = TopicSpec {
            name: t.name.to_string(),
            partitions: if t.num_partitions == -1 {
                state.config.num_partitions
            } else {
                t.num_partitions
            },
            replication_factor: t.replication_factor,
            assignments: {
                let mut a: Vec<_> = t.assignments.iter().collect();
                a.sort_by_key(|a| a.partition_index);
                a.iter()
                    .map(|a| {
                        a.broker_ids
                            .iter()
                            .map(|b| strom_metadata::BrokerId(b.0))
                            .collect()
                    })
                    .collect()
            },
            configs: configs.clone(),
        };
        let outcome = match validate_assignments(&t) {
            Err(e) => Err(e),
            Ok(()) => {
                admin::create_topic(
                    state,
                    spec,
                    req.validate_only,
                    admin::request_timeout(req.timeout_ms),
                )
                .await
            }
        };
        results.push(match outcome {
            Ok(created) => {
                let overrides = admin::topic_overrides(state, &t.name).unwrap_or(configs);
                let configs = topic_configs(state, &overrides)
                    .into_iter()
                    .map(|c| {
                        CreatableTopicConfigs::default()
                            .with_name(StrBytes::from_static_str(c.name))
                            .with_value(Some(StrBytes::from_string(c.value)))
                            .with_config_source(c.source)
                    })
                    .collect();
                result
                    .with_topic_id(created.id)
                    .with_num_partitions(created.partitions)
                    .with_replication_factor(created.replication_factor)
                    .with_configs((ctx.version >= CONFIGS_SINCE).then_some(configs))
            }
            Err(e) => result
                .with_error_code(e.code())
                .with_error_message(Some(StrBytes::from_string(e.message)))
                .with_num_partitions(-1)
                .with_replication_factor(-1),
        });
    }
    CreateTopicsResponse::default().with_topics(results)
}

/// Checks the shape of a manual replica assignment as Kafka does: not together with a
/// partition count or replication factor, and partitions numbered 0, 1, 2, …. The replica
/// lists themselves are checked where the topic is placed (`admin::create_topic`).
fn validate_assignments(topic: &CreatableTopic) -> Result<(), ApiError> {
    if topic.assignments.is_empty() {
        return Ok(());
    }
    if topic.num_partitions != -1 || topic.replication_factor != -1 {
        return Err(ApiError::new(
            ResponseError::InvalidRequest,
            "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
        ));
    }
    let mut indexes: Vec<i32> = topic
        .assignments
        .iter()
        .map(|a| a.partition_index)
        .collect();
    indexes.sort_unstable();
    if indexes.iter().enumerate().any(|(i, &p)| p != i as i32) {
        return Err(ApiError::new(
            ResponseError::InvalidReplicaAssignment,
            "Partitions should be a consecutive 0-based integer sequence",
        ));
    }
    Ok(())
}
