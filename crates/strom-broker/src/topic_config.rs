//! Topic-level configs as one declarative table, Kafka's `LogConfig` `ConfigDef`: every
//! Kafka 3.9 topic key with its type, default, broker synonym, validator and doc, and
//! how strom honours it.
//!
//! A key whose feature strom has is applied to the partition's [`LogConfig`]. A key for
//! a feature not built yet (tiered storage, throttling) is accepted,
//! validated and reported like any other, with a warning in the log when it is set, so a
//! client never sees a value silently different from Kafka's.

use std::collections::BTreeMap;

use strom_log::LogConfig;

use crate::config::ConfigError;
pub use crate::config_def::{ConfigType, Validator};

/// Where a topic's value comes from when it has no override.
#[derive(Debug, Clone, Copy)]
pub enum DefaultValue {
    /// Kafka's default, fixed.
    Fixed(&'static str),
    /// Read from the broker's log defaults (which `server.properties` may have set).
    Log(fn(&LogConfig) -> String),
}

/// One topic config.
#[derive(Debug)]
pub struct TopicConfigDef {
    pub name: &'static str,
    pub config_type: ConfigType,
    pub default: DefaultValue,
    /// The broker key that sets the default (Kafka's first synonym).
    pub broker_synonym: Option<&'static str>,
    pub validator: Validator,
    pub doc: &'static str,
    /// How the (validated) value changes the partition's log; `None` for a key whose
    /// feature strom does not have yet.
    pub apply: Option<fn(&mut LogConfig, &str)>,
}

const L: &str = "9223372036854775807";
const CODECS: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];

fn num(v: &str) -> i64 {
    v.parse().expect("validated")
}

/// Kafka 3.9's 36 topic configs, sorted by name as `LogConfig.configNames()` lists them.
pub static TOPIC_CONFIGS: &[TopicConfigDef] = &[
    TopicConfigDef {
        name: "cleanup.policy",
        config_type: ConfigType::List,
        default: DefaultValue::Log(|c| c.cleanup_policy.clone()),
        broker_synonym: Some("log.cleanup.policy"),
        validator: Validator::ListOf(&["compact", "delete"]),
        doc: "The retention policy of old log segments: \"delete\" discards them by time or size, \"compact\" keeps the latest value of each key (the log cleaner), \"compact,delete\" does both.",
        apply: Some(|c, v| c.cleanup_policy = v.to_string()),
    },
    TopicConfigDef {
        name: "compression.gzip.level",
        config_type: ConfigType::Int,
        default: DefaultValue::Log(|c| c.compression_gzip_level.to_string()),
        broker_synonym: Some("compression.gzip.level"),
        validator: Validator::GzipLevel,
        doc: "The compression level to use if compression.type is set to gzip.",
        apply: Some(|c, v| c.compression_gzip_level = num(v) as i32),
    },
    TopicConfigDef {
        name: "compression.lz4.level",
        config_type: ConfigType::Int,
        default: DefaultValue::Log(|c| c.compression_lz4_level.to_string()),
        broker_synonym: Some("compression.lz4.level"),
        validator: Validator::Between(1, 17),
        doc: "The compression level to use if compression.type is set to lz4.",
        apply: Some(|c, v| c.compression_lz4_level = num(v) as i32),
    },
    TopicConfigDef {
        name: "compression.type",
        config_type: ConfigType::String,
        default: DefaultValue::Log(|c| c.compression_type.clone()),
        broker_synonym: Some("compression.type"),
        validator: Validator::OneOf(CODECS),
        doc: "The final compression type of the topic's batches: a codec (batches in another codec are recompressed), 'uncompressed', or 'producer' to keep the producer's codec.",
        apply: Some(|c, v| c.compression_type = v.to_string()),
    },
    TopicConfigDef {
        name: "compression.zstd.level",
        config_type: ConfigType::Int,
        default: DefaultValue::Log(|c| c.compression_zstd_level.to_string()),
        broker_synonym: Some("compression.zstd.level"),
        validator: Validator::Between(-131072, 22),
        doc: "The compression level to use if compression.type is set to zstd.",
        apply: Some(|c, v| c.compression_zstd_level = num(v) as i32),
    },
    TopicConfigDef {
        name: "delete.retention.ms",
        config_type: ConfigType::Long,
        default: DefaultValue::Log(|c| c.delete_retention_ms.to_string()),
        broker_synonym: Some("log.cleaner.delete.retention.ms"),
        validator: Validator::AtLeast(0),
        doc: "How long the cleaner keeps a tombstone after it first kept it, so a consumer that reads the topic from its start within that time sees the deletion.",
        apply: Some(|c, v| c.delete_retention_ms = num(v)),
    },
    TopicConfigDef {
        name: "file.delete.delay.ms",
        config_type: ConfigType::Long,
        default: DefaultValue::Fixed("60000"),
        broker_synonym: Some("log.segment.delete.delay.ms"),
        validator: Validator::AtLeast(0),
        doc: "The time to wait before deleting a file from the filesystem (strom deletes at once).",
        apply: None,
    },
    TopicConfigDef {
        name: "flush.messages",
        config_type: ConfigType::Long,
        default: DefaultValue::Log(|c| c.flush_messages.to_string()),
        broker_synonym: Some("log.flush.interval.messages"),
        validator: Validator::AtLeast(1),
        doc: "The number of messages appended between two fsyncs of the log.",
        apply: Some(|c, v| c.flush_messages = num(v)),
    },
    TopicConfigDef {
        name: "flush.ms",
        config_type: ConfigType::Long,
        default: DefaultValue::Log(|c| c.flush_ms.to_string()),
        broker_synonym: Some("log.flush.interval.ms"),
        validator: Validator::AtLeast(0),
        doc: "The maximum time between two fsyncs of the log.",
        apply: Some(|c, v| c.flush_ms = num(v)),
    },
    TopicConfigDef {
        name: "follower.replication.throttled.replicas",
        config_type: ConfigType::List,
        default: DefaultValue::Fixed(""),
        broker_synonym: None,
        validator: Validator::ThrottledReplicas,
        doc: "Replicas whose log should be throttled on the follower side (replication throttling is not built yet).",
        apply: None,
    },
    TopicConfigDef {
        name: "index.interval.bytes",
        config_type: ConfigType::Int,
        default: DefaultValue::Log(|c| c.index_interval_bytes.to_string()),
        broker_synonym: Some("log.index.interval.bytes"),
        validator: Validator::AtLeast(0),
        doc: "How many bytes of batches lie between two offset-index entries.",
        apply: Some(|c, v| c.index_interval_bytes = num(v) as u64),
    },
    TopicConfigDef {
        name: "leader.replication.throttled.replicas",
        config_type: ConfigType::List,
        default: DefaultValue::Fixed(""),
        broker_synonym: None,
        validator: Validator::ThrottledReplicas,
        doc: "Replicas whose log should be throttled on the leader side (replication throttling is not built yet).",
        apply: None,
    },
    TopicConfigDef {
        name: "local.retention.bytes",
        config_type: ConfigType::Long,
        default: DefaultValue::Fixed("-2"),
        broker_synonym: Some("log.local.retention.bytes"),
        validator: Validator::AtLeast(-2),
        doc: "Tiered storage: the local size limit of a partition; -2 uses retention.bytes (tiered storage is not built yet).",
        apply: None,
    },
    TopicConfigDef {
        name: "local.retention.ms",
        config_type: ConfigType::Long,
        default: DefaultValue::Fixed("-2"),
        broker_synonym: Some("log.local.retention.ms"),
        validator: Validator::AtLeast(-2),
        doc: "Tiered storage: the local time limit of a partition; -2 uses retention.ms (tiered storage is not built yet).",
        apply: None,
    },
    TopicConfigDef {
        name: "max.compaction.lag.ms",
        config_type: ConfigType::Long,
        default: DefaultValue::Log(|c| c.max_compaction_lag_ms.to_string()),
        broker_synonym: Some("log.cleaner.max.compaction.lag.ms"),
        validator: Validator::AtLeast(1),
        doc: "The longest a record stays uncompacted: a log with an older dirty record is cleaned whatever its dirty ratio.",
        apply: Some(|c, v| c.max_compaction_lag_ms = num(v)),
    },
    TopicConfigDef {
        name: "max.message.bytes",
        config_type: ConfigType::Int,
        default: DefaultValue::Log(|c| c.max_message_bytes.to_string()),
        broker_synonym: Some("message.max.bytes"),
        validator: Validator::AtLeast(0),
        doc: "The largest record batch size allowed, after compression.",
        apply: Some(|c, v| c.max_message_bytes = num(v) as usize),
    },
    TopicConfigDef {
        name: "message.downconversion.enable",
        config_type: ConfigType::Boolean,
        default: DefaultValue::Fixed("true"),
        broker_synonym: Some("log.message.downconversion.enable"),
        validator: Validator::Boolean,
        doc: "Whether fetches of old message formats are down-converted; strom serves magic v2 only, as Kafka 4 does, so there is nothing to convert.",
        apply: Some(|_, _| {}),
    },
    TopicConfigDef {
        name: "message.format.version",
        config_type: ConfigType::String,
        default: DefaultValue::Fixed("3.0-IV1"),
        broker_synonym: Some("log.message.format.version"),
        validator: Validator::Any,
        doc: "Deprecated since Kafka 3.0 and ignored, as Kafka ignores it: batches are always magic v2.",
        apply: Some(|_, _| {}),
    },
    TopicConfigDef {
        name: "message.timestamp.after.max.ms",
        config_type: ConfigType::Long,
        default: DefaultValue::Fixed(L),
        broker_synonym: Some("log.message.timestamp.after.max.ms"),
        validator: Validator::AtLeast(0),
        doc: "How far in the future a CreateTime timestamp may be.",
        apply: Some(|c, v| c.timestamp_after_max_ms = num(v)),
    },
    TopicConfigDef {
        name: "message.timestamp.before.max.ms",
        config_type: ConfigType::Long,
        default: DefaultValue::Fixed(L),
        broker_synonym: Some("log.message.timestamp.before.max.ms"),
        validator: Validator::AtLeast(0),
        doc: "How far in the past a CreateTime timestamp may be.",
        apply: Some(|c, v| c.timestamp_before_max_ms = num(v)),
    },
    TopicConfigDef {
        name: "message.timestamp.difference.max.ms",
        config_type: ConfigType::Long,
        default: DefaultValue::Fixed(L),
        broker_synonym: Some("log.message.timestamp.difference.max.ms"),
        validator: Validator::AtLeast(0),
        doc: "Deprecated: the bound of message.timestamp.before.max.ms and after.max.ms while those are unset.",
        apply: None,
    },
    TopicConfigDef {
        name: "message.timestamp.type",
        config_type: ConfigType::String,
        default: DefaultValue::Log(|c| {
            if c.log_append_time {
                "LogAppendTime".into()
            } else {
                "CreateTime".into()
            }
        }),
        broker_synonym: Some("log.message.timestamp.type"),
        validator: Validator::OneOf(&["CreateTime", "LogAppendTime"]),
        doc: "Whether batches keep the producer's timestamps (CreateTime) or are stamped with the broker's append time (LogAppendTime).",
        apply: Some(|c, v| c.log_append_time = v == "LogAppendTime"),
    },
    TopicConfigDef {
        name: "min.cleanable.dirty.ratio",
        config_type: ConfigType::Double,
        default: DefaultValue::Log(|c| c.min_cleanable_dirty_ratio.to_string()),
        broker_synonym: Some("log.cleaner.min.cleanable.ratio"),
        validator: Validator::Ratio,
        doc: "The share of the log's bytes not yet cleaned above which the cleaner cleans it.",
        apply: Some(|c, v| c.min_cleanable_dirty_ratio = v.parse().expect("validated")),
    },
    TopicConfigDef {
        name: "min.compaction.lag.ms",
        config_type: ConfigType::Long,
        default: DefaultValue::Log(|c| c.min_compaction_lag_ms.to_string()),
        broker_synonym: Some("log.cleaner.min.compaction.lag.ms"),
        validator: Validator::AtLeast(0),
        doc: "The least time a record stays uncompacted.",
        apply: Some(|c, v| c.min_compaction_lag_ms = num(v)),
    },
    TopicConfigDef {
        name: "min.insync.replicas",
        config_type: ConfigType::Int,
        default: DefaultValue::Fixed("1"),
        broker_synonym: Some("min.insync.replicas"),
        validator: Validator::AtLeast(1),
        doc: "The in-sync replicas an acks=all write needs: with fewer, it is refused with NOT_ENOUGH_REPLICAS.",
        apply: Some(|c, v| c.min_insync_replicas = num(v) as usize),
    },
    TopicConfigDef {
        name: "preallocate",
        config_type: ConfigType::Boolean,
        default: DefaultValue::Fixed("false"),
        broker_synonym: Some("log.preallocate"),
        validator: Validator::Boolean,
        doc: "Whether segment files are preallocated (not done by strom yet).",
        apply: None,
    },
    TopicConfigDef {
        name: "remote.log.copy.disable",
        config_type: ConfigType::Boolean,
        default: DefaultValue::Fixed("false"),
        broker_synonym: None,
        validator: Validator::Boolean,
        doc: "Tiered storage: stop copying segments to remote storage (tiered storage is not built yet).",
        apply: None,
    },
    TopicConfigDef {
        name: "remote.log.delete.on.disable",
        config_type: ConfigType::Boolean,
        default: DefaultValue::Fixed("false"),
        broker_synonym: None,
        validator: Validator::Boolean,
        doc: "Tiered storage: delete remote data when tiering is disabled (tiered storage is not built yet).",
        apply: None,
    },
    TopicConfigDef {
        name: "remote.storage.enable",
        config_type: ConfigType::Boolean,
        default: DefaultValue::Fixed("false"),
        broker_synonym: None,
        validator: Validator::Boolean,
        doc: "Tiered storage for the topic; refused as Kafka refuses it on a broker without tiered storage.",
        apply: None,
    },
    TopicConfigDef {
        name: "retention.bytes",
        config_type: ConfigType::Long,
        default: DefaultValue::Log(|c| c.retention_bytes.to_string()),
        broker_synonym: Some("log.retention.bytes"),
        validator: Validator::Any,
        doc: "The largest size a partition grows to before old segments are deleted; negative for no limit.",
        apply: Some(|c, v| c.retention_bytes = num(v)),
    },
    TopicConfigDef {
        name: "retention.ms",
        config_type: ConfigType::Long,
        default: DefaultValue::Log(|c| c.retention_ms.to_string()),
        broker_synonym: Some("log.retention.ms"),
        validator: Validator::AtLeast(-1),
        doc: "How long a segment is kept after its newest record; -1 for no limit.",
        apply: Some(|c, v| c.retention_ms = num(v)),
    },
    TopicConfigDef {
        name: "segment.bytes",
        config_type: ConfigType::Int,
        default: DefaultValue::Log(|c| c.segment_bytes.to_string()),
        broker_synonym: Some("log.segment.bytes"),
        validator: Validator::AtLeast(14),
        doc: "The segment file size at which the log rolls.",
        apply: Some(|c, v| c.segment_bytes = num(v) as u64),
    },
    TopicConfigDef {
        name: "segment.index.bytes",
        config_type: ConfigType::Int,
        default: DefaultValue::Log(|c| c.segment_index_bytes.to_string()),
        broker_synonym: Some("log.index.size.max.bytes"),
        validator: Validator::AtLeast(4),
        doc: "The largest size of a segment's offset or time index; a full index rolls the log.",
        apply: Some(|c, v| c.segment_index_bytes = num(v) as u64),
    },
    TopicConfigDef {
        name: "segment.jitter.ms",
        config_type: ConfigType::Long,
        default: DefaultValue::Fixed("0"),
        broker_synonym: Some("log.roll.jitter.ms"),
        validator: Validator::AtLeast(0),
        doc: "Random jitter subtracted from segment.ms (not applied by strom yet).",
        apply: None,
    },
    TopicConfigDef {
        name: "segment.ms",
        config_type: ConfigType::Long,
        default: DefaultValue::Log(|c| c.segment_ms.to_string()),
        broker_synonym: Some("log.roll.ms"),
        validator: Validator::AtLeast(1),
        doc: "The age of a segment's first batch at which the log rolls.",
        apply: Some(|c, v| c.segment_ms = num(v)),
    },
    TopicConfigDef {
        name: "unclean.leader.election.enable",
        config_type: ConfigType::Boolean,
        default: DefaultValue::Fixed("false"),
        broker_synonym: Some("unclean.leader.election.enable"),
        validator: Validator::Boolean,
        doc: "Whether a replica outside the ISR may become leader when no ISR member is alive, at the risk of losing committed records.",
        apply: Some(|c, v| c.unclean_leader_election = v == "true"),
    },
];

/// The definition of topic config `key`.
pub fn def(key: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS
        .binary_search_by(|d| d.name.cmp(key))
        .ok()
        .map(|i| &TOPIC_CONFIGS[i])
}

/// The topic config whose default broker key is `broker_key`.
pub fn by_broker_synonym(broker_key: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS
        .iter()
        .find(|d| d.broker_synonym == Some(broker_key))
}

impl TopicConfigDef {
    /// Checks `value` by this key's type and validator, returning it normalized.
    pub fn validate(&self, value: &str) -> Result<String, ConfigError> {
        self.validator.check(self.name, self.config_type, value)
    }

    /// The value a topic has without an override.
    pub fn default_value(&self, defaults: &LogConfig) -> String {
        match self.default {
            DefaultValue::Fixed(v) => v.to_string(),
            DefaultValue::Log(f) => f(defaults),
        }
    }

    /// The value a topic has with no override and no broker setting: Kafka's default.
    pub fn built_in_default(&self) -> String {
        self.default_value(&LogConfig::default())
    }
}

/// Validates one topic config, returning its normalized value.
pub fn validate(key: &str, value: &str) -> Result<String, ConfigError> {
    let def = def(key).ok_or_else(|| ConfigError::UnknownKey(key.to_string()))?;
    let value = def.validate(value)?;
    if key == "remote.storage.enable" && value == "true" {
        return Err(ConfigError::invalid(
            key,
            &value,
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.",
        ));
    }
    if def.apply.is_none() && value != def.default_value(&LogConfig::default()) {
        tracing::warn!(key, value = %value, "topic config accepted, but strom does not have its feature yet: it has no effect");
    }
    Ok(value)
}

/// Checks configs against each other, as Kafka's `LogConfig.validate` does.
pub fn validate_together(configs: &BTreeMap<String, String>) -> Result<(), ConfigError> {
    let get = |k: &str| configs.get(k).and_then(|v| v.parse::<i64>().ok());
    if let (Some(min), Some(max)) = (get("min.compaction.lag.ms"), get("max.compaction.lag.ms")) {
        if min > max {
            return Err(ConfigError::invalid(
                "min.compaction.lag.ms",
                &min.to_string(),
                format!("conflict topic config setting min.compaction.lag.ms ({min}) > max.compaction.lag.ms ({max})"),
            ));
        }
    }
    Ok(())
}

/// The broker config that sets the default of a topic config (Kafka's synonym).
pub fn broker_synonym(key: &str) -> Option<&'static str> {
    def(key).and_then(|d| d.broker_synonym)
}

/// The value a topic gets for `key` when it has no override.
pub fn default_value(defaults: &LogConfig, key: &str) -> String {
    def(key).map_or_else(String::new, |d| d.default_value(defaults))
}

/// The log settings of a topic: broker defaults overridden by the topic's configs
/// (which were validated when they were set). The deprecated
/// `message.timestamp.difference.max.ms` bounds both directions while the newer keys are
/// unset, as in Kafka 3.6+.
pub fn log_config(defaults: &LogConfig, overrides: &BTreeMap<String, String>) -> LogConfig {
    let mut c = defaults.clone();
    for (key, value) in overrides {
        if let Some(apply) = def(key).and_then(|d| d.apply) {
            apply(&mut c, value);
        }
    }
    if let Some(difference) = overrides
        .get("message.timestamp.difference.max.ms")
        .and_then(|v| v.parse::<i64>().ok())
    {
        if c.timestamp_before_max_ms == i64::MAX {
            c.timestamp_before_max_ms = difference;
        }
        if c.timestamp_after_max_ms == i64::MAX {
            c.timestamp_after_max_ms = difference;
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_kafkas_36_keys_sorted() {
        assert_eq!(TOPIC_CONFIGS.len(), 36);
        assert!(TOPIC_CONFIGS.windows(2).all(|w| w[0].name < w[1].name));
    }

    #[test]
    fn overrides_replace_defaults() {
        let overrides: BTreeMap<String, String> = [
            ("retention.ms", "1000"),
            ("segment.bytes", "4096"),
            ("compression.type", "zstd"),
            ("message.timestamp.type", "LogAppendTime"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let c = log_config(&LogConfig::default(), &overrides);
        assert_eq!(c.retention_ms, 1000);
        assert_eq!(c.segment_bytes, 4096);
        assert_eq!(c.compression_type, "zstd");
        assert!(c.log_append_time);
        assert_eq!(c.max_message_bytes, LogConfig::default().max_message_bytes);
    }

    #[test]
    fn difference_max_ms_bounds_both_directions_while_the_new_keys_are_unset() {
        let overrides: BTreeMap<String, String> = [
            ("message.timestamp.difference.max.ms", "1000"),
            ("message.timestamp.after.max.ms", "5"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let c = log_config(&LogConfig::default(), &overrides);
        assert_eq!(c.timestamp_before_max_ms, 1000);
        assert_eq!(c.timestamp_after_max_ms, 5);
    }

    #[test]
    fn validation_follows_kafkas_validators() {
        assert!(validate("retention.ms", "-2").is_err());
        assert!(validate("segment.bytes", "abc").is_err());
        assert!(validate("segment.bytes", "3000000000").is_err());
        assert_eq!(
            validate("cleanup.policy", "delete, compact").unwrap(),
            "delete,compact"
        );
        assert!(validate("cleanup.policy", "forever").is_err());
        assert!(validate("compression.gzip.level", "-1").is_ok());
        assert!(validate("compression.gzip.level", "0").is_err());
        assert!(validate("compression.lz4.level", "18").is_err());
        assert!(validate("compression.type", "brotli").is_err());
        assert!(validate("min.cleanable.dirty.ratio", "1.5").is_err());
        assert!(validate("leader.replication.throttled.replicas", "0:1,1:2").is_ok());
        assert!(validate("leader.replication.throttled.replicas", "0-1").is_err());
        assert!(validate("delete.retention.ms", "1000").is_ok());
        assert!(validate("message.format.version", "2.8").is_ok());
        assert!(validate("remote.storage.enable", "true").is_err());
        assert!(matches!(
            validate("no.such", "1"),
            Err(ConfigError::UnknownKey(_))
        ));
    }
}
