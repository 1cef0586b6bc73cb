//! Topic-level configs: which keys exist, how values are validated, and how a topic's
//! overrides combine with the broker's `log.*` defaults into its [`LogConfig`].

use std::collections::BTreeMap;

use strom_log::LogConfig;

use crate::config::ConfigError;

/// DescribeConfigs' `config_type` values (Kafka's `ConfigDef.Type` ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Long = 5,
    List = 7,
}

/// The topic configs strom understands, with their types.
pub const TOPIC_CONFIGS: &[(&str, ConfigType)] = &[
    ("cleanup.policy", ConfigType::List),
    ("compression.type", ConfigType::String),
    ("flush.messages", ConfigType::Long),
    ("flush.ms", ConfigType::Long),
    ("index.interval.bytes", ConfigType::Int),
    ("max.message.bytes", ConfigType::Int),
    ("message.timestamp.type", ConfigType::String),
    ("min.insync.replicas", ConfigType::Int),
    ("retention.bytes", ConfigType::Long),
    ("retention.ms", ConfigType::Long),
    ("segment.bytes", ConfigType::Int),
    ("segment.index.bytes", ConfigType::Int),
    ("segment.ms", ConfigType::Long),
    ("unclean.leader.election.enable", ConfigType::Boolean),
];

fn invalid(key: &str, value: &str, reason: &str) -> ConfigError {
    ConfigError::InvalidValue {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

/// Validates `cleanup.policy`: a list of `delete` and `compact`.
pub fn validate_cleanup_policy(key: &str, value: &str) -> Result<String, ConfigError> {
    let parts: Vec<&str> = value.split(',').map(str::trim).collect();
    if parts.is_empty() || parts.iter().any(|p| *p != "delete" && *p != "compact") {
        return Err(invalid(key, value, "expected a list of delete and compact"));
    }
    Ok(parts.join(","))
}

fn min_long(key: &str, value: &str, min: i64) -> Result<String, ConfigError> {
    match value.trim().parse::<i64>() {
        Ok(n) if n >= min => Ok(n.to_string()),
        Ok(_) => Err(invalid(key, value, &format!("must be at least {min}"))),
        Err(_) => Err(invalid(key, value, "not a valid number")),
    }
}

fn min_int(key: &str, value: &str, min: i64) -> Result<String, ConfigError> {
    let v = min_long(key, value, min)?;
    if v.parse::<i64>().map_or(true, |n| n > i32::MAX as i64) {
        return Err(invalid(key, value, "must fit in an int"));
    }
    Ok(v)
}

/// Validates one topic config, returning its normalized value.
pub fn validate(key: &str, value: &str) -> Result<String, ConfigError> {
    match key {
        "cleanup.policy" => validate_cleanup_policy(key, value),
        "compression.type" if value == "producer" => Ok(value.to_string()),
        "compression.type" => Err(invalid(
            key,
            value,
            "strom stores batches as the producer compressed them; only 'producer' is supported",
        )),
        "message.timestamp.type" if value == "CreateTime" => Ok(value.to_string()),
        "message.timestamp.type" => Err(invalid(key, value, "only CreateTime is supported")),
        "unclean.leader.election.enable" => match value {
            "true" | "false" => Ok(value.to_string()),
            _ => Err(invalid(key, value, "expected true or false")),
        },
        "flush.messages" | "flush.ms" => min_long(key, value, 0),
        "retention.ms" | "retention.bytes" => min_long(key, value, -1),
        "segment.ms" => min_long(key, value, 1),
        "segment.bytes" => min_int(key, value, 14),
        "segment.index.bytes" => min_int(key, value, 4),
        "index.interval.bytes" | "max.message.bytes" => min_int(key, value, 0),
        "min.insync.replicas" => min_int(key, value, 1),
        _ => Err(ConfigError::UnknownKey(key.to_string())),
    }
}

/// The broker config that sets the default of a topic config (Kafka's synonym).
pub fn broker_synonym(key: &str) -> Option<&'static str> {
    Some(match key {
        "cleanup.policy" => "log.cleanup.policy",
        "flush.messages" => "log.flush.interval.messages",
        "flush.ms" => "log.flush.interval.ms",
        "index.interval.bytes" => "log.index.interval.bytes",
        "max.message.bytes" => "message.max.bytes",
        "retention.bytes" => "log.retention.bytes",
        "retention.ms" => "log.retention.ms",
        "segment.bytes" => "log.segment.bytes",
        "segment.index.bytes" => "log.index.size.max.bytes",
        "segment.ms" => "log.roll.ms",
        _ => return None,
    })
}

/// The value a topic gets for `key` when it has no override.
pub fn default_value(defaults: &LogConfig, key: &str) -> String {
    match key {
        "cleanup.policy" => defaults.cleanup_policy.clone(),
        "compression.type" => "producer".into(),
        "flush.messages" => defaults.flush_messages.to_string(),
        "flush.ms" => defaults.flush_ms.to_string(),
        "index.interval.bytes" => defaults.index_interval_bytes.to_string(),
        "max.message.bytes" => defaults.max_message_bytes.to_string(),
        "message.timestamp.type" => "CreateTime".into(),
        "min.insync.replicas" => "1".into(),
        "retention.bytes" => defaults.retention_bytes.to_string(),
        "retention.ms" => defaults.retention_ms.to_string(),
        "segment.bytes" => defaults.segment_bytes.to_string(),
        "segment.index.bytes" => defaults.segment_index_bytes.to_string(),
        "segment.ms" => defaults.segment_ms.to_string(),
        "unclean.leader.election.enable" => "false".into(),
        _ => String::new(),
    }
}

/// The log settings of a topic: broker defaults overridden by the topic's configs
/// (which were validated when they were set).
pub fn log_config(defaults: &LogConfig, overrides: &BTreeMap<String, String>) -> LogConfig {
    let mut c = defaults.clone();
    let num = |k: &str| overrides.get(k).and_then(|v| v.parse::<i64>().ok());
    if let Some(v) = overrides.get("cleanup.policy") {
        c.cleanup_policy = v.clone();
    }
    if let Some(v) = num("flush.messages") {
        c.flush_messages = v;
    }
    if let Some(v) = num("flush.ms") {
        c.flush_ms = v;
    }
    if let Some(v) = num("index.interval.bytes") {
        c.index_interval_bytes = v as u64;
    }
    if let Some(v) = num("max.message.bytes") {
        c.max_message_bytes = v as usize;
    }
    if let Some(v) = num("retention.bytes") {
        c.retention_bytes = v;
    }
    if let Some(v) = num("retention.ms") {
        c.retention_ms = v;
    }
    if let Some(v) = num("segment.bytes") {
        c.segment_bytes = v as u64;
    }
    if let Some(v) = num("segment.index.bytes") {
        c.segment_index_bytes = v as u64;
    }
    if let Some(v) = num("segment.ms") {
        c.segment_ms = v;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_replace_defaults() {
        let overrides: BTreeMap<String, String> =
            [("retention.ms", "1000"), ("segment.bytes", "4096")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        let c = log_config(&LogConfig::default(), &overrides);
        assert_eq!(c.retention_ms, 1000);
        assert_eq!(c.segment_bytes, 4096);
        assert_eq!(c.max_message_bytes, LogConfig::default().max_message_bytes);
    }

    #[test]
    fn validation_rejects_unknown_keys_and_bad_values() {
        assert!(validate("retention.ms", "-2").is_err());
        assert!(validate("segment.bytes", "abc").is_err());
        assert!(validate("cleanup.policy", "delete,compact").is_ok());
        assert!(validate("cleanup.policy", "forever").is_err());
        assert!(matches!(
            validate("no.such", "1"),
            Err(ConfigError::UnknownKey(_))
        ));
    }
}
