//! DescribeConfigs for topics (every topic config, with its source) and for the broker
//! (the keys it was started with).

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use super::config_resource::{
    topic_configs, unsupported_resource, RESOURCE_BROKER, RESOURCE_TOPIC, STATIC_BROKER_CONFIG,
};
use super::RequestContext;
use crate::ApiError;

fn entry(name: &str, value: String, source: i8, read_only: bool) -> DescribeConfigsResourceResult {
    DescribeConfigsResourceResult::default()
        .with_name(StrBytes::from_string(name.to_string()))
        .with_value(Some(StrBytes::from_string(value)))
        .with_read_only(read_only)
        .with_config_source(source)
}

fn topic_entries(
    ctx: &RequestContext<'_>,
    name: &str,
    include_documentation: bool,
) -> Result<Vec<DescribeConfigsResourceResult>, ApiError> {
    let overrides =
        crate::admin::topic_overrides(ctx.state, name).ok_or_else(ApiError::unknown_topic)?;
    Ok(topic_configs(ctx.state, &overrides)
        .into_iter()
        .map(|c| {
            entry(c.name, c.value, c.source, false)
                .with_config_type(c.config_type as i8)
                .with_documentation(include_documentation.then(|| StrBytes::from_static_str(c.doc)))
        })
        .collect())
}

fn broker_entries(ctx: &RequestContext<'_>) -> Vec<DescribeConfigsResourceResult> {
    ctx.state
        .config
        .given
        .iter()
        .map(|(k, v)| entry(k, v.clone(), STATIC_BROKER_CONFIG, true))
        .collect()
}

pub fn handle(ctx: &RequestContext<'_>, req: DescribeConfigsRequest) -> DescribeConfigsResponse {
    let results = req
        .resources
        .into_iter()
        .map(|resource| {
            let entries = match resource.resource_type {
                RESOURCE_TOPIC => {
                    topic_entries(ctx, &resource.resource_name, req.include_documentation)
                }
                RESOURCE_BROKER => Ok(broker_entries(ctx)),
                other => Err(unsupported_resource(other)),
            };
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name);
            match entries {
                Ok(mut entries) => {
                    if let Some(keys) = &resource.configuration_keys {
                        entries.retain(|e| keys.iter().any(|k| k.as_str() == e.name.as_str()));
                    }
                    result.with_configs(entries)
                }
                Err(e) => result
                    .with_error_code(e.code())
                    .with_error_message(Some(StrBytes::from_string(e.message))),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}
