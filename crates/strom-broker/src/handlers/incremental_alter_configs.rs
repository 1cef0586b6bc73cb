//! IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on a topic's overrides or on
//! a broker's dynamic configs.

use kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::config_resource::{unsupported_resource, RESOURCE_BROKER, RESOURCE_TOPIC};
use super::RequestContext;
use crate::{dynamic_config, topic_config};
use strom_wire::ApiError;

/// Where a list key's value comes from when the resource's own set does not hold it.
type Inherited<'a> = Box<dyn Fn(&str) -> String + Send + Sync + 'a>;

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

async fn alter(
    ctx: &RequestContext<'_>,
    resource: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), ApiError> {
    let name = resource.resource_name.as_str();
    let state = ctx.state;
    // The resource's current set, and where a list key's value comes from when the set
    // does not hold it (APPEND and SUBTRACT start from the inherited value: a topic's
    // broker default, a broker key's built-in default).
    let (mut configs, inherited): (_, Inherited<'_>) = match resource.resource_type {
        RESOURCE_TOPIC => (
            crate::admin::topic_overrides(state, name).ok_or_else(ApiError::unknown_topic)?,
            Box::new(|key| topic_config::default_value(&state.logs.defaults(), key)),
        ),
        RESOURCE_BROKER => (
            state
                .dynamic_configs
                .get(dynamic_config::parse_entity(name)?),
            Box::new(|key| {
                topic_config::by_broker_synonym(key)
                    .map(|d| d.built_in_default())
                    .unwrap_or_default()
            }),
        ),
        other => return Err(unsupported_resource(other)),
    };
    // Each key as the request leaves it (`None`: deleted): what a cluster writes to the
    // metadata log.
    let mut changes = Vec::with_capacity(resource.configs.len());
    for c in &resource.configs {
        let key = c.name.to_string();
        let value = c.value.as_ref().map(|v| v.to_string()).unwrap_or_default();
        let list_op = |configs: &std::collections::BTreeMap<String, String>| {
            let current = configs
                .get(&key)
                .cloned()
                .unwrap_or_else(|| inherited(&key));
            current
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        match c.config_operation {
            SET => {
                changes.push((key.clone(), Some(value.clone())));
                configs.insert(key, value);
            }
            DELETE => {
                changes.push((key.clone(), None));
                configs.remove(&key);
            }
            APPEND | SUBTRACT => {
                let def = match resource.resource_type {
                    RESOURCE_TOPIC => topic_config::def(&key),
                    _ => topic_config::by_broker_synonym(&key),
                };
                if def.map(|d| d.config_type) != Some(topic_config::ConfigType::List) {
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
                let joined = items.join(",");
                changes.push((key.clone(), Some(joined.clone())));
                configs.insert(key, joined);
            }
            op => {
                return Err(ApiError::new(
                    ResponseError::InvalidRequest,
                    format!("Unknown config operation {op}"),
                ))
            }
        }
    }
    match resource.resource_type {
        RESOURCE_TOPIC => {
            crate::admin::alter_topic_configs(state, name, configs, Some(changes), validate_only)
                .await
        }
        _ => {
            let entity = dynamic_config::parse_entity(name)?;
            crate::admin::alter_broker_configs(state, entity, configs, Some(changes), validate_only)
                .await
        }
    }
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
