//! The native client's settings, read from the Java client's property names with the Java
//! client's defaults, so `--producer-props`/`--consumer.config` files written for Kafka's
//! tools configure it the same way. A property the native client does not implement is
//! named in a warning, never silently ignored.

use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use strom_wire::Codec;

/// Properties that configure nothing on the wire and are accepted silently.
const ACCEPTED: &[&str] = &[
    "bootstrap.servers",
    "key.serializer",
    "value.serializer",
    "key.deserializer",
    "value.deserializer",
];

/// Reads typed values from a property list, remembering which names were used.
struct Reader<'a> {
    properties: &'a [(String, String)],
    used: Vec<&'static str>,
}

impl<'a> Reader<'a> {
    fn new(properties: &'a [(String, String)]) -> Self {
        Self {
            properties,
            used: Vec::new(),
        }
    }

    fn raw(&mut self, name: &'static str) -> Option<&'a str> {
        self.used.push(name);
        self.properties
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim())
    }

    fn parse<T: std::str::FromStr>(&mut self, name: &'static str, default: T) -> Result<T> {
        match self.raw(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| anyhow!("Invalid value {v} for configuration {name}")),
        }
    }

    fn ms(&mut self, name: &'static str, default: u64) -> Result<Duration> {
        self.parse(name, default).map(Duration::from_millis)
    }

    /// Warnings for every property that was neither read nor accepted.
    fn warnings(&self, role: &str) -> Vec<String> {
        self.properties
            .iter()
            .filter(|(k, _)| !self.used.contains(&k.as_str()) && !ACCEPTED.contains(&k.as_str()))
            .map(|(k, _)| format!("the native {role} does not implement {k}; it is ignored"))
            .collect()
    }
}

/// Producer settings (Kafka 4 defaults).
#[derive(Debug, Clone, PartialEq)]
pub struct ProducerConfig {
    pub client_id: String,
    /// -1 (all), 0 or 1.
    pub acks: i16,
    pub batch_size: usize,
    pub linger: Duration,
    pub codec: Codec,
    /// `compression.<codec>.level`; -1 for the codec's default.
    pub compression_level: i32,
    pub max_in_flight: usize,
    pub idempotence: bool,
    pub request_timeout: Duration,
    pub delivery_timeout: Duration,
    pub retries: u32,
    pub retry_backoff: Duration,
    pub buffer_memory: usize,
    pub max_request_size: usize,
    pub warnings: Vec<String>,
}

impl ProducerConfig {
    pub fn from_properties(
        properties: &[(String, String)],
        default_client_id: &str,
    ) -> Result<Self> {
        let mut r = Reader::new(properties);
        let client_id = r.raw("client.id").unwrap_or(default_client_id).to_string();
        let acks = match r.raw("acks").unwrap_or("all") {
            "all" | "-1" => -1,
            "0" => 0,
            "1" => 1,
            other => bail!("Invalid value {other} for configuration acks: String must be one of: all, -1, 0, 1"),
        };
        let codec_name = r.raw("compression.type").unwrap_or("none");
        let codec = match codec_name {
            "none" => Codec::None,
            name => Codec::from_config_name(name)
                .filter(|c| *c != Codec::None)
                .ok_or_else(|| anyhow!("Invalid value {name} for configuration compression.type: String must be one of: none, gzip, snappy, lz4, zstd"))?,
        };
        // Unset levels are the codecs' defaults as librdkafka applies them (for lz4 the
        // fast mode, not the Java client's HC level 9), so both load generators compress
        // alike; an explicit `compression.<codec>.level` is honoured.
        let compression_level = match codec {
            Codec::Gzip => r.parse("compression.gzip.level", -1)?,
            Codec::Lz4 => r.parse("compression.lz4.level", -1)?,
            Codec::Zstd => r.parse("compression.zstd.level", -1)?,
            Codec::None | Codec::Snappy => -1,
        };
        let max_in_flight: usize = r.parse("max.in.flight.requests.per.connection", 5)?;
        if max_in_flight == 0 {
            bail!("Invalid value 0 for configuration max.in.flight.requests.per.connection: Value must be at least 1");
        }
        // Kafka enables idempotence by default, and turns it off silently when the user's
        // other settings conflict with it, but refuses an explicit request that conflicts.
        let idempotence = match r.raw("enable.idempotence") {
            Some("true") => {
                if acks != -1 {
                    bail!("Must set acks to all in order to use the idempotent producer. Otherwise we cannot guarantee idempotence.");
                }
                if max_in_flight > 5 {
                    bail!("Must set max.in.flight.requests.per.connection to at most 5 to use the idempotent producer.");
                }
                true
            }
            Some("false") => false,
            Some(other) => bail!("Invalid value {other} for configuration enable.idempotence: Expected value to be either true or false"),
            None => acks == -1 && max_in_flight <= 5,
        };
        let config = Self {
            client_id,
            acks,
            batch_size: r.parse("batch.size", 16_384usize)?,
            linger: r.ms("linger.ms", 5)?,
            codec,
            compression_level,
            max_in_flight,
            idempotence,
            request_timeout: r.ms("request.timeout.ms", 30_000)?,
            delivery_timeout: r.ms("delivery.timeout.ms", 120_000)?,
            retries: r.parse("retries", i32::MAX as u32)?,
            retry_backoff: r.ms("retry.backoff.ms", 100)?,
            buffer_memory: r.parse("buffer.memory", 33_554_432usize)?,
            max_request_size: r.parse("max.request.size", 1_048_576usize)?,
            warnings: Vec::new(),
        };
        Ok(Self {
            warnings: r.warnings("producer"),
            ..config
        })
    }
}

/// Where a consumer starts in a partition without a committed offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetReset {
    Earliest,
    Latest,
}

/// Consumer settings (Kafka 4 defaults).
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerConfig {
    pub client_id: String,
    pub group_id: String,
    pub fetch_min_bytes: i32,
    pub fetch_max_bytes: i32,
    pub fetch_max_wait: Duration,
    pub max_partition_fetch_bytes: i32,
    pub auto_offset_reset: OffsetReset,
    pub enable_auto_commit: bool,
    pub auto_commit_interval: Duration,
    pub session_timeout: Duration,
    pub heartbeat_interval: Duration,
    pub max_poll_interval: Duration,
    pub request_timeout: Duration,
    pub retry_backoff: Duration,
    /// `read_committed` reads up to the last stable offset; `read_uncommitted` (the
    /// default) up to the high watermark.
    pub isolation_level: i8,
    pub warnings: Vec<String>,
}

impl ConsumerConfig {
    pub fn from_properties(
        properties: &[(String, String)],
        default_client_id: &str,
    ) -> Result<Self> {
        let mut r = Reader::new(properties);
        let client_id = r.raw("client.id").unwrap_or(default_client_id).to_string();
        let group_id = r.raw("group.id").unwrap_or_default().to_string();
        let auto_offset_reset = match r.raw("auto.offset.reset").unwrap_or("latest") {
            "earliest" => OffsetReset::Earliest,
            "latest" => OffsetReset::Latest,
            other => bail!("Invalid value {other} for configuration auto.offset.reset: String must be one of: latest, earliest"),
        };
        let isolation_level = match r.raw("isolation.level").unwrap_or("read_uncommitted") {
            "read_uncommitted" => 0,
            "read_committed" => 1,
            other => bail!("Invalid value {other} for configuration isolation.level"),
        };
        let config = Self {
            client_id,
            group_id,
            fetch_min_bytes: r.parse("fetch.min.bytes", 1)?,
            fetch_max_bytes: r.parse("fetch.max.bytes", 52_428_800)?,
            fetch_max_wait: r.ms("fetch.max.wait.ms", 500)?,
            max_partition_fetch_bytes: r.parse("max.partition.fetch.bytes", 1_048_576)?,
            auto_offset_reset,
            enable_auto_commit: r.parse("enable.auto.commit", true)?,
            auto_commit_interval: r.ms("auto.commit.interval.ms", 5_000)?,
            session_timeout: r.ms("session.timeout.ms", 45_000)?,
            heartbeat_interval: r.ms("heartbeat.interval.ms", 3_000)?,
            max_poll_interval: r.ms("max.poll.interval.ms", 300_000)?,
            request_timeout: r.ms("request.timeout.ms", 30_000)?,
            retry_backoff: r.ms("retry.backoff.ms", 100)?,
            isolation_level,
            warnings: Vec::new(),
        };
        // Read but not needed by the native consumer's wire behaviour: the Java
        // consumer's receive buffer and CRC check (the native client always checks CRCs).
        let _ = r.raw("receive.buffer.bytes");
        let _ = r.raw("check.crcs");
        let _ = r.raw("max.poll.records");
        Ok(Self {
            warnings: r.warnings("consumer"),
            ..config
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::properties::parse as props;

    #[test]
    fn producer_defaults_are_kafkas() {
        let c = ProducerConfig::from_properties(&[], "perf-producer-client").unwrap();
        assert_eq!((c.acks, c.batch_size, c.max_in_flight), (-1, 16_384, 5));
        assert_eq!(c.linger, Duration::from_millis(5));
        assert!(c.idempotence);
        assert_eq!(c.client_id, "perf-producer-client");
    }

    #[test]
    fn idempotence_follows_kafkas_rules() {
        let implicit = ProducerConfig::from_properties(&props("acks=1"), "c").unwrap();
        assert!(!implicit.idempotence);
        let explicit = props("acks=1\nenable.idempotence=true");
        assert!(ProducerConfig::from_properties(&explicit, "c").is_err());
    }

    #[test]
    fn unknown_properties_are_named_in_warnings() {
        let c = ProducerConfig::from_properties(
            &props("compression.type=lz4\nsend.buffer.bytes=1"),
            "c",
        )
        .unwrap();
        assert_eq!(c.codec, Codec::Lz4);
        assert_eq!(c.warnings.len(), 1);
        assert!(c.warnings[0].contains("send.buffer.bytes"));
        assert!(ProducerConfig::from_properties(&props("compression.type=brotli"), "c").is_err());
    }

    #[test]
    fn consumer_settings_are_read() {
        let c = ConsumerConfig::from_properties(
            &props("group.id=g\nauto.offset.reset=earliest\nmax.partition.fetch.bytes=10000"),
            "c",
        )
        .unwrap();
        assert_eq!(
            (c.group_id.as_str(), c.max_partition_fetch_bytes),
            ("g", 10_000)
        );
        assert_eq!(c.auto_offset_reset, OffsetReset::Earliest);
    }
}
