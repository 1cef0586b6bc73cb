//! What DescribeConfigs, AlterConfigs and IncrementalAlterConfigs share: resource types
//! and replacing a topic's overrides after validating every value.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;

use super::RequestContext;
use crate::{topic_config, ApiError};

/// Kafka's `ConfigResource.Type` ids.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;

/// Validates `configs` and, unless `validate_only`, makes them the topic's overrides.
pub fn replace_topic_configs(
    ctx: &RequestContext<'_>,
    topic: &str,
    configs: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<(), ApiError> {
    let logs = &ctx.state.logs;
    if logs.topic(topic).is_none() {
        return Err(ApiError::unknown_topic());
    }
    let mut validated = BTreeMap::new();
    for (k, v) in configs {
        let value = topic_config::validate(&k, &v)?;
        validated.insert(k, value);
    }
    if validate_only {
        return Ok(());
    }
    logs.set_topic_configs(topic, validated)
}

/// The error for altering a resource other than a topic.
pub fn unsupported_resource(resource_type: i8) -> ApiError {
    if resource_type == RESOURCE_BROKER {
        ApiError::new(
            ResponseError::InvalidRequest,
            "Broker configs are static in strom: set them in server.properties.",
        )
    } else {
        ApiError::new(
            ResponseError::InvalidRequest,
            format!("Unsupported resource type {resource_type}."),
        )
    }
}
