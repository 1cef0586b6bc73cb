//! What DescribeConfigs, AlterConfigs and IncrementalAlterConfigs share: resource types
//! and replacing a topic's overrides after validating every value.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;

use crate::topic_config::ConfigType;
use crate::{topic_config, ApiError, BrokerState};

/// Kafka's `ConfigResource.Type` ids.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;

/// Kafka's `ConfigSource` ids.
pub const DYNAMIC_TOPIC_CONFIG: i8 = 1;
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

/// Every config of `topic` with its effective value and where that value comes from:
/// the topic's override, the broker's `server.properties`, or the built-in default.
pub fn topic_configs(
    state: &BrokerState,
    overrides: &BTreeMap<String, String>,
) -> Vec<ConfigValue> {
    let defaults = state.logs.defaults();
    let built_in = strom_log::LogConfig::default();
    topic_config::TOPIC_CONFIGS
        .iter()
        .map(|def| {
            let from_broker = def
                .broker_synonym
                .and_then(|b| state.config.given.get(b))
                .and_then(|v| def.validate(v).ok());
            let (value, source) = match (overrides.get(def.name), from_broker) {
                (Some(v), _) => (v.clone(), DYNAMIC_TOPIC_CONFIG),
                (None, Some(given)) => (given, STATIC_BROKER_CONFIG),
                (None, None) => (def.default_value(defaults), DEFAULT_CONFIG),
            };
            let mut synonyms = Vec::new();
            if let Some(v) = overrides.get(def.name) {
                synonyms.push(Synonym {
                    name: def.name,
                    value: v.clone(),
                    source: DYNAMIC_TOPIC_CONFIG,
                });
            }
            if let Some(broker_key) = def.broker_synonym {
                if let Some(given) = state.config.given.get(broker_key) {
                    synonyms.push(Synonym {
                        name: broker_key,
                        value: given.clone(),
                        source: STATIC_BROKER_CONFIG,
                    });
                }
                if !NULL_DEFAULT_BROKER_KEYS.contains(&broker_key) {
                    synonyms.push(Synonym {
                        name: broker_key,
                        value: def.default_value(&built_in),
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
