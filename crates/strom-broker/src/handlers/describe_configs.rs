//! DescribeConfigs for topics (every topic config, with its source and, when asked, its
//! synonyms) and for brokers: a broker id gets every key strom reads, each from its
//! dynamic configs, the keys it was started with, or the built-in default; the
//! default-broker entity (an empty name) gets the cluster-wide dynamic defaults.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::config_resource::{
    broker_layers, topic_configs, unsupported_resource, DEFAULT_CONFIG, RESOURCE_BROKER,
    RESOURCE_TOPIC,
};
use super::RequestContext;
use crate::broker_configs::{self, BROKER_CONFIGS};
use crate::dynamic_config;
use crate::topic_config::TOPIC_CONFIGS;
use strom_wire::ApiError;

fn entry(
    name: &str,
    value: Option<String>,
    source: i8,
    read_only: bool,
) -> DescribeConfigsResourceResult {
    DescribeConfigsResourceResult::default()
        .with_name(StrBytes::from_string(name.to_string()))
        .with_value(value.map(StrBytes::from_string))
        .with_read_only(read_only)
        .with_config_source(source)
}

fn synonym(name: &str, value: Option<String>, source: i8) -> DescribeConfigsSynonym {
    DescribeConfigsSynonym::default()
        .with_name(StrBytes::from_string(name.to_string()))
        .with_value(value.map(StrBytes::from_string))
        .with_source(source)
}

fn topic_entries(
    ctx: &RequestContext<'_>,
    name: &str,
    req: &DescribeConfigsRequest,
) -> Result<Vec<DescribeConfigsResourceResult>, ApiError> {
    let overrides =
        crate::admin::topic_overrides(ctx.state, name).ok_or_else(ApiError::unknown_topic)?;
    Ok(topic_configs(ctx.state, &overrides)
        .into_iter()
        .map(|c| {
            let synonyms = if req.include_synonyms {
                c.synonyms
                    .into_iter()
                    .map(|s| synonym(s.name, Some(s.value), s.source))
                    .collect()
            } else {
                Vec::new()
            };
            entry(c.name, Some(c.value), c.source, false)
                .with_config_type(c.config_type as i8)
                .with_documentation(
                    req.include_documentation
                        .then(|| StrBytes::from_static_str(c.doc)),
                )
                .with_synonyms(synonyms)
        })
        .collect())
}

/// A broker's configs: its dynamic configs, the cluster-wide dynamic defaults and what its
/// `server.properties` and `--override`s gave, each key with the value of the first of
/// these that sets it and, as synonyms, every one that does. The default-broker entity
/// (`""`) holds the cluster-wide dynamic defaults only.
fn broker_entries(
    ctx: &RequestContext<'_>,
    resource_name: &str,
    include_synonyms: bool,
) -> Result<Vec<DescribeConfigsResourceResult>, ApiError> {
    let entity = dynamic_config::parse_entity(resource_name)?;
    let me = ctx.state.node_id();
    if entity.is_some_and(|id| id != me) {
        // As Kafka: a broker describes its own configs; the admin client asks each broker.
        return Err(ApiError::new(
            ResponseError::InvalidRequest,
            format!(
                "Unexpected broker id, expected {me} or empty string, but received {resource_name}"
            ),
        ));
    }
    // Each key with every layer that sets it, the first one winning: the layers come in
    // Kafka's precedence, and a broker's built-in defaults come last.
    let layers = broker_layers(ctx.state, entity);
    let mut set: BTreeMap<&str, Vec<(i8, Option<String>)>> = BTreeMap::new();
    for (source, configs) in &layers {
        for (key, value) in configs {
            set.entry(key)
                .or_default()
                .push((*source, Some(value.clone())));
        }
    }
    if entity.is_some() {
        for (key, value) in built_in_defaults() {
            set.entry(key)
                .or_insert_with(|| vec![(DEFAULT_CONFIG, value)]);
        }
    }
    Ok(set
        .into_iter()
        .map(|(key, layers)| {
            let synonyms = if include_synonyms {
                layers
                    .iter()
                    .map(|(source, value)| synonym(key, value.clone(), *source))
                    .collect()
            } else {
                Vec::new()
            };
            let (source, value) = layers.into_iter().next().expect("a key has a layer");
            entry(key, value, source, !dynamic_config::is_dynamic(key)).with_synonyms(synonyms)
        })
        .collect())
}

/// Every broker key strom reads with the value a broker has when it is not given (`None`
/// for a key without a default): the broker table's keys, and the broker synonyms of
/// topic configs. Kafka lists the same with `kafka-configs --describe --all`.
fn built_in_defaults() -> impl Iterator<Item = (&'static str, Option<String>)> {
    let broker = BROKER_CONFIGS.iter().map(|d| {
        (
            d.name,
            Some(d.default.to_string()).filter(|v| !v.is_empty()),
        )
    });
    let synonyms = TOPIC_CONFIGS.iter().filter_map(|d| {
        let key = d.broker_synonym?;
        broker_configs::def(key)
            .is_none()
            .then(|| (key, Some(d.built_in_default())))
    });
    broker.chain(synonyms)
}

pub fn handle(ctx: &RequestContext<'_>, req: DescribeConfigsRequest) -> DescribeConfigsResponse {
    let results = req
        .resources
        .iter()
        .cloned()
        .map(|resource| {
            let entries = match resource.resource_type {
                RESOURCE_TOPIC => topic_entries(ctx, &resource.resource_name, &req),
                RESOURCE_BROKER => {
                    broker_entries(ctx, &resource.resource_name, req.include_synonyms)
                }
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
