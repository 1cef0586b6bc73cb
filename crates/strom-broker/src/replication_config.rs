//! The broker's replication settings, named and defaulted as Kafka's `replica.*` keys:
//! how followers fetch from leaders, when a follower falls out of the ISR, and how often
//! high watermarks are checkpointed. The keys are read through the broker config table
//! ([`crate::broker_configs`]).

use crate::config::ConfigError;

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

impl ReplicationConfig {
    /// Checks the keys against each other, as Kafka does (each alone is checked by the
    /// broker config table).
    pub fn check(&self) -> Result<(), ConfigError> {
        if i64::from(self.fetch_wait_max_ms) > self.lag_time_max_ms {
            return Err(ConfigError::invalid("replica.fetch.wait.max.ms", &self.fetch_wait_max_ms.to_string(), format!(
                    "replica.fetch.wait.max.ms should always be less than or equal to replica.lag.time.max.ms ({}) to prevent frequent changes in ISR",
                    self.lag_time_max_ms
                )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::BrokerConfig;

    fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn kafka_defaults_and_overrides() {
        assert_eq!(
            BrokerConfig::from_properties(&BTreeMap::new())
                .unwrap()
                .replication,
            ReplicationConfig::default()
        );
        let c = BrokerConfig::from_properties(&props(&[
            ("replica.lag.time.max.ms", "3000"),
            ("num.replica.fetchers", "2"),
        ]))
        .unwrap()
        .replication;
        assert_eq!((c.lag_time_max_ms, c.num_replica_fetchers), (3000, 2));
    }

    #[test]
    fn a_fetch_wait_above_the_lag_time_is_refused_as_kafka_does() {
        let err = BrokerConfig::from_properties(&props(&[
            ("replica.lag.time.max.ms", "100"),
            ("replica.fetch.wait.max.ms", "500"),
        ]))
        .unwrap_err();
        assert!(err.to_string().contains("replica.lag.time.max.ms"), "{err}");
        assert!(BrokerConfig::from_properties(&props(&[("num.replica.fetchers", "0")])).is_err());
    }
}
