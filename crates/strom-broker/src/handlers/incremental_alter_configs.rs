//! IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on a topic's overrides.

use kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::config_resource::{unsupported_resource, RESOURCE_TOPIC};
use super::RequestContext;
use crate::{topic_config, ApiError};

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

async fn alter(
    ctx: &RequestContext<'_>,
    resource: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), ApiError> {
    if resource.resource_type != RESOURCE_TOPIC {
        return Err(unsupported_resource(resource.resource_type));
    }
    let name = resource.resource_name.as_str();
    let mut configs =
        crate::admin::topic_overrides(ctx.state, name).ok_or_else(ApiError::unknown_topic)?;
    for c in &resource.configs {
        let key = c.name.to_string();
        let value = c.value.as_ref().map(|v| v.to_string()).unwrap_or_default();
        let list_op = |configs: &std::collections::BTreeMap<String, String>| {
            let current = configs
                .get(&key)
                .cloned()
                .unwrap_or_else(|| topic_config::default_value(ctx.state.logs.defaults(), &key));
            current
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        match c.config_operation {
            SET => {
                configs.insert(key, value);
            }
            DELETE => {
                configs.remove(&key);
            }
            APPEND | SUBTRACT => {
                if topic_config::def(&key).map(|d| d.config_type)
                    != Some(topic_config::ConfigType::List)
                {
                    return Err(ApiError::new(
                        ResponseError::InvalidConfig,
                        format!("Config value append/subtract is not allowed for config key {key}"),
                    ));
                }
                let mut items = list_op(&configs);
                for v in value.split(',').filter(|s| !s.is_empty()) {
                    if c.config_operation == APPEND && !items.iter().any(|i| i == v) {
                        items.push(v.to_string());
                    } else if c.config_operation == SUBTRACT {
                        items.retain(|i| i != v);
                    }
                }
                configs.insert(key, items.join(","));
            }
            op => {
                return Err(ApiError::new(
                    ResponseError::InvalidRequest,
                    format!("Unknown config operation {op}"),
                ))
            }
        }
    }
    crate::admin::replace_topic_configs(ctx.state, name, configs, validate_only).await
}

pub async fn handle(
    ctx: &RequestContext<'_>,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut responses = Vec::with_capacity(req.resources.len());
    for resource in &req.resources {
        {
            let response = AlterConfigsResourceResponse::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            responses.push(match alter(ctx, resource, req.validate_only).await {
                Ok(()) => response,
                Err(e) => response
                    .with_error_code(e.code())
                    .with_error_message(Some(StrBytes::from_string(e.message))),
            });
        }
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}
