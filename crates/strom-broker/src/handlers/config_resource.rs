//! What DescribeConfigs, AlterConfigs and IncrementalAlterConfigs share: resource types
//! and replacing a topic's overrides after validating every value.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;

use crate::topic_config::ConfigType;
use crate::{topic_config, BrokerState};
use strom_wire::ApiError;

/// Kafka's `ConfigResource.Type` ids.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;

/// Kafka's `ConfigSource` ids.
pub const DYNAMIC_TOPIC_CONFIG: i8 = 1;
pub const DYNAMIC_BROKER_CONFIG: i8 = 2;
pub const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
pub const STATIC_BROKER_CONFIG: i8 = 4;
pub const DEFAULT_CONFIG: i8 = 5;

/// Broker keys whose Kafka default is null (another key, such as `log.retention.hours`,
/// supplies the value), so they have no DEFAULT_CONFIG synonym of their own.
const NULL_DEFAULT_BROKER_KEYS: &[&str] = &[
    "log.retention.ms",
    "log.roll.ms",
    "log.roll.jitter.ms",
    "log.flush.interval.ms",
];

/// One place a config's value could come from, as DescribeConfigs lists synonyms.
pub struct Synonym {
    pub name: &'static str,
    pub value: String,
    pub source: i8,
}

/// One topic config as DescribeConfigs and CreateTopics report it.
pub struct ConfigValue {
    pub name: &'static str,
    pub value: String,
    pub source: i8,
    pub config_type: ConfigType,
    pub doc: &'static str,
    /// Where the value could come from, highest precedence first: the topic's override,
    /// the broker's `server.properties`, the built-in default (Kafka's ConfigHelper order).
    pub synonyms: Vec<Synonym>,
}

/// Where this broker's configs come from, highest precedence first: its own dynamic
/// configs, the cluster-wide dynamic default, its `server.properties` (Kafka's
/// ConfigHelper order); for `broker` `None` (the default entity) the dynamic default alone.
pub fn broker_layers(
    state: &BrokerState,
    broker: Option<i32>,
) -> Vec<(i8, BTreeMap<String, String>)> {
    match broker {
        Some(id) => vec![
            (DYNAMIC_BROKER_CONFIG, state.dynamic_configs.get(Some(id))),
            (
                DYNAMIC_DEFAULT_BROKER_CONFIG,
                state.dynamic_configs.get(None),
            ),
            (STATIC_BROKER_CONFIG, state.config.given.clone()),
        ],
        None => vec![(
            DYNAMIC_DEFAULT_BROKER_CONFIG,
            state.dynamic_configs.get(None),
        )],
    }
}

/// Every config of `topic` with its effective value and where that value comes from:
/// the topic's override, a dynamic broker config, the broker's `server.properties`, or
/// the built-in default.
pub fn topic_configs(
    state: &BrokerState,
    overrides: &BTreeMap<String, String>,
) -> Vec<ConfigValue> {
    let defaults = state.logs.defaults();
    let layers = broker_layers(state, Some(state.node_id()));
    topic_config::TOPIC_CONFIGS
        .iter()
        .map(|def| {
            let mut synonyms = Vec::new();
            if let Some(v) = overrides.get(def.name) {
                synonyms.push(Synonym {
                    name: def.name,
                    value: v.clone(),
                    source: DYNAMIC_TOPIC_CONFIG,
                });
            }
            if let Some(broker_key) = def.broker_synonym {
                for (source, configs) in &layers {
                    if let Some(v) = configs.get(broker_key).and_then(|v| def.validate(v).ok()) {
                        synonyms.push(Synonym {
                            name: broker_key,
                            value: v,
                            source: *source,
                        });
                    }
                }
            }
            let (value, source) = match synonyms.first() {
                Some(first) => (first.value.clone(), first.source),
                None => (def.default_value(&defaults), DEFAULT_CONFIG),
            };
            if let Some(broker_key) = def.broker_synonym {
                if !NULL_DEFAULT_BROKER_KEYS.contains(&broker_key) {
                    synonyms.push(Synonym {
                        name: broker_key,
                        value: def.built_in_default(),
                        source: DEFAULT_CONFIG,
                    });
                }
            }
            ConfigValue {
                name: def.name,
                value,
                source,
                config_type: def.config_type,
                doc: def.doc,
                synonyms,
            }
        })
        .collect()
}

/// The error for a resource type other than a topic or a broker.
pub fn unsupported_resource(resource_type: i8) -> ApiError {
    ApiError::new(
        ResponseError::InvalidRequest,
        format!("Unsupported resource type {resource_type}."),
    )
}
