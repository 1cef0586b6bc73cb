//! CreateTopics, with per-topic configs and `validate_only`.

use std::collections::BTreeMap;

use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::config_resource::topic_configs;
use super::RequestContext;
use crate::ApiError;

/// CreateTopics responses describe the created topic's configs from v5.
const CONFIGS_SINCE: i16 = 5;

pub fn handle(ctx: &RequestContext<'_>, req: CreateTopicsRequest) -> CreateTopicsResponse {
    let state = ctx.state;
    let results = req
        .topics
        .into_iter()
        .map(|t| {
            let result = CreatableTopicResult::default().with_name(t.name.clone());
            let partitions = if t.num_partitions == -1 {
                state.config.num_partitions
            } else {
                t.num_partitions
            };
            let configs: BTreeMap<String, String> = t
                .configs
                .iter()
                .filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())))
                .collect();
            let outcome = if !t.assignments.is_empty() {
                Err(ApiError::new(
                    ResponseError::InvalidRequest,
                    "Manual replica assignment is not supported by a single-node broker.",
                ))
            } else if t.replication_factor != -1 && t.replication_factor != 1 {
                Err(ApiError::new(
                    ResponseError::InvalidReplicationFactor,
                    format!(
                        "Replication factor: {} larger than available brokers: 1.",
                        t.replication_factor
                    ),
                ))
            } else {
                state
                    .logs
                    .create_topic(&t.name, partitions, configs, req.validate_only)
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
