//! The broker's replication settings, named and defaulted as Kafka's `replica.*` keys:
//! how followers fetch from leaders, when a follower falls out of the ISR, and how often
//! high watermarks are checkpointed.

use std::collections::BTreeMap;

use crate::config::ConfigError;

/// The keys this module reads; `BrokerConfig` skips them.
pub const KEYS: &[&str] = &[
    "num.replica.fetchers",
    "replica.fetch.max.bytes",
    "replica.fetch.response.max.bytes",
    "replica.fetch.wait.max.ms",
    "replica.fetch.min.bytes",
    "replica.fetch.backoff.ms",
    "replica.lag.time.max.ms",
    "replica.high.watermark.checkpoint.interval.ms",
];

/// How this broker replicates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicationConfig {
    /// `num.replica.fetchers`: fetchers (connections) per source broker; a partition
    /// always goes to the same one.
    pub num_replica_fetchers: usize,
    /// `replica.fetch.max.bytes`: the most bytes one partition returns per fetch (the
    /// first batch is returned even if larger, KIP-74).
    pub fetch_max_bytes: i32,
    /// `replica.fetch.response.max.bytes`: the most bytes one fetch response carries.
    pub fetch_response_max_bytes: i32,
    /// `replica.fetch.wait.max.ms`: how long the leader holds a follower's fetch that has
    /// nothing new. Kept below `replica.lag.time.max.ms`, or followers would drop out of
    /// the ISR of partitions with little traffic.
    pub fetch_wait_max_ms: i32,
    /// `replica.fetch.min.bytes`: the bytes a follower's fetch waits for.
    pub fetch_min_bytes: i32,
    /// `replica.fetch.backoff.ms`: the pause after a fetch failed.
    pub fetch_backoff_ms: u64,
    /// `replica.lag.time.max.ms`: a follower that has not caught up with the leader's log
    /// end for this long leaves the ISR.
    pub lag_time_max_ms: i64,
    /// `replica.high.watermark.checkpoint.interval.ms`: how often the high watermarks
    /// are written to `replication-offset-checkpoint`.
    pub high_watermark_checkpoint_interval_ms: u64,
}

impl Default for ReplicationConfig {
    fn default() -> Self {
        Self {
            num_replica_fetchers: 1,
            fetch_max_bytes: 1024 * 1024,
            fetch_response_max_bytes: 10 * 1024 * 1024,
            fetch_wait_max_ms: 500,
            fetch_min_bytes: 1,
            fetch_backoff_ms: 1000,
            lag_time_max_ms: 30_000,
            high_watermark_checkpoint_interval_ms: 5000,
        }
    }
}

fn number<T>(
    props: &BTreeMap<String, String>,
    key: &str,
    default: T,
    min: T,
) -> Result<T, ConfigError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display,
{
    let Some(v) = props.get(key) else {
        return Ok(default);
    };
    let invalid = |reason: String| ConfigError::InvalidValue {
        key: key.to_string(),
        value: v.clone(),
        reason,
    };
    let n: T = v
        .trim()
        .parse()
        .map_err(|_| invalid("not a valid number".into()))?;
    if n < min {
        return Err(invalid(format!("Value must be at least {min}")));
    }
    Ok(n)
}

impl ReplicationConfig {
    pub fn from_properties(props: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        let d = Self::default();
        let config = Self {
            num_replica_fetchers: number(props, "num.replica.fetchers", d.num_replica_fetchers, 1)?,
            fetch_max_bytes: number(props, "replica.fetch.max.bytes", d.fetch_max_bytes, 0)?,
            fetch_response_max_bytes: number(
                props,
                "replica.fetch.response.max.bytes",
                d.fetch_response_max_bytes,
                0,
            )?,
            fetch_wait_max_ms: number(props, "replica.fetch.wait.max.ms", d.fetch_wait_max_ms, 0)?,
            fetch_min_bytes: number(props, "replica.fetch.min.bytes", d.fetch_min_bytes, 1)?,
            fetch_backoff_ms: number(props, "replica.fetch.backoff.ms", d.fetch_backoff_ms, 0)?,
            lag_time_max_ms: number(props, "replica.lag.time.max.ms", d.lag_time_max_ms, 1)?,
            high_watermark_checkpoint_interval_ms: number(
                props,
                "replica.high.watermark.checkpoint.interval.ms",
                d.high_watermark_checkpoint_interval_ms,
                1,
            )?,
        };
        if i64::from(config.fetch_wait_max_ms) > config.lag_time_max_ms {
            return Err(ConfigError::InvalidValue {
                key: "replica.fetch.wait.max.ms".into(),
                value: config.fetch_wait_max_ms.to_string(),
                reason: format!(
                    "replica.fetch.wait.max.ms should always be less than or equal to replica.lag.time.max.ms ({}) to prevent frequent changes in ISR",
                    config.lag_time_max_ms
                ),
            });
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn kafka_defaults_and_overrides() {
        assert_eq!(
            ReplicationConfig::from_properties(&BTreeMap::new()).unwrap(),
            ReplicationConfig::default()
        );
        let c = ReplicationConfig::from_properties(&props(&[
            ("replica.lag.time.max.ms", "3000"),
            ("num.replica.fetchers", "2"),
        ]))
        .unwrap();
        assert_eq!((c.lag_time_max_ms, c.num_replica_fetchers), (3000, 2));
    }

    #[test]
    fn a_fetch_wait_above_the_lag_time_is_refused_as_kafka_does() {
        let err = ReplicationConfig::from_properties(&props(&[
            ("replica.lag.time.max.ms", "100"),
            ("replica.fetch.wait.max.ms", "500"),
        ]))
        .unwrap_err();
        assert!(err.to_string().contains("replica.lag.time.max.ms"), "{err}");
        assert!(
            ReplicationConfig::from_properties(&props(&[("num.replica.fetchers", "0")])).is_err()
        );
    }
}
