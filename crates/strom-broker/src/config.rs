//! Broker configuration: Kafka's `server.properties` keys, meanings and defaults.
//!
//! Every key is either understood, or known to Kafka and accepted with a warning that it
//! has no effect in strom; anything else stops start-up with an error naming it, so a typo
//! never silently falls back to a default.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use strom_log::LogConfig;

use crate::broker_configs;
use crate::kraft_config::{self, KraftConfig};
use crate::log_cleaner::LogCleanerConfig;
use crate::replication_config::ReplicationConfig;
use thiserror::Error;

/// A configuration problem, naming the key.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("unknown configuration key '{0}'")]
    UnknownKey(String),
    #[error("invalid value '{value}' for configuration '{key}': {reason}")]
    InvalidValue {
        key: String,
        value: String,
        reason: String,
    },
}

/// One listener, `PLAINTEXT://host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    pub host: String,
    pub port: u16,
}

impl ConfigError {
    /// `value` of `key` is refused, for `reason` (Kafka's words where it has them).
    pub fn invalid(key: &str, value: &str, reason: impl Into<String>) -> Self {
        Self::InvalidValue {
            key: key.to_string(),
            value: value.to_string(),
            reason: reason.into(),
        }
    }
}

impl Listener {
    /// The socket address to bind; an empty host binds all interfaces, as in Kafka.
    pub fn bind_address(&self) -> String {
        let host = if self.host.is_empty() {
            "0.0.0.0"
        } else {
            &self.host
        };
        format!("{host}:{}", self.port)
    }
}

/// The broker's configuration.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// `node.id`
    pub node_id: i32,
    /// The client listener: the first of `listeners` that is not a controller listener.
    pub listener: Listener,
    /// `advertised.listeners`; defaults to the listener, with the bound port when it is 0.
    pub advertised_listener: Option<Listener>,
    /// `log.dirs` (or `log.dir`)
    pub log_dirs: Vec<PathBuf>,
    /// `num.partitions`
    pub num_partitions: i32,
    /// `auto.create.topics.enable`
    pub auto_create_topics: bool,
    /// `message.max.bytes`, `log.segment.bytes`, `log.roll.*`, `log.retention.*`,
    /// `log.flush.*`, `log.index.*`, `log.cleanup.policy`: defaults of every topic's log.
    pub log_defaults: LogConfig,
    /// `log.retention.check.interval.ms`
    pub retention_check_interval_ms: u64,
    /// `log.open.files.max` (strom's own): how many segment files the broker keeps open at
    /// once, through one cache shared by every partition. Kafka keeps every segment open,
    /// so a broker's descriptors grow with its data; strom's are bounded by this plus
    /// the connections. Start-up refuses a `RLIMIT_NOFILE` that cannot hold it.
    pub log_open_files_max: usize,
    /// `num.recovery.threads.per.data.dir`: threads opening (and, after a crash,
    /// recovering) the partitions of each log dir at start-up, and closing them at shutdown.
    pub num_recovery_threads_per_data_dir: usize,
    /// `num.io.threads`: how many threads handle requests, i.e. the async runtime's
    /// workers, never more than the cores; `None` (unset) is one per core. Kafka's
    /// request threads block on disk, so its default of 8 sizes a pool of mostly waiting
    /// threads; strom's workers do not wait, and more of them than cores only adds
    /// context switches. Brokers sharing one machine each take their share of its cores.
    pub num_io_threads: Option<usize>,
    /// `max.partitions.per.request` (strom's own): the most partitions one CreateTopics
    /// topic or CreatePartitions request may add (INVALID_PARTITIONS beyond it), so one
    /// request cannot tie up the broker creating directories for minutes.
    pub max_partitions_per_request: i32,
    /// `max.partitions.per.broker` (strom's own): the most partitions this broker hosts;
    /// a creation that would exceed it fails with POLICY_VIOLATION.
    pub max_partitions_per_broker: i64,
    /// `log.flush.scheduler.interval.ms`
    pub flush_scheduler_interval_ms: u64,
    /// `producer.id.expiration.check.interval.ms`
    pub producer_id_expiration_check_interval_ms: u64,
    /// `socket.request.max.bytes`
    pub socket_request_max_bytes: usize,
    /// `fetch.max.bytes`: caps a fetch response whatever the client asks for, so a
    /// client cannot make the broker buffer more.
    pub fetch_max_bytes: usize,
    /// `max.incremental.fetch.session.cache.slots`: how many incremental fetch sessions
    /// (KIP-227) the broker keeps.
    pub max_incremental_fetch_session_cache_slots: usize,
    /// `connections.max.idle.ms`: a connection with no request in flight that sends
    /// nothing for this long is closed.
    pub connections_max_idle_ms: u64,
    /// `strom.metrics.listener`: where `GET /metrics` is served, if anywhere.
    pub metrics_listener: Option<String>,
    /// `group.min.session.timeout.ms`
    pub group_min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`
    pub group_max_session_timeout_ms: i32,
    /// `group.max.size`: Kafka's default is unbounded; strom caps groups at 1000 members
    /// so that one group cannot grow the coordinator's memory without limit.
    pub group_max_size: usize,
    /// `group.initial.rebalance.delay.ms`: how long an empty group waits for more members
    /// before its first rebalance (Kafka's default 3000; its sample server.properties uses 0).
    pub group_initial_rebalance_delay_ms: i32,
    /// `offset.metadata.max.bytes`
    pub offset_metadata_max_bytes: usize,
    /// `offsets.retention.minutes`, in ms: how long the committed offsets of a group
    /// without members are kept, so group ids used once do not accumulate forever.
    pub offsets_retention_ms: i64,
    /// `offsets.retention.check.interval.ms`
    pub offsets_retention_check_interval_ms: u64,
    /// `offsets.topic.num.partitions`: the partitions of `__consumer_offsets`, created on
    /// a cluster at the first FindCoordinator for a group.
    pub offsets_topic_num_partitions: i32,
    /// `offsets.topic.replication.factor`: until that many brokers are live the topic is
    /// not created and groups have no coordinator, as in Kafka.
    pub offsets_topic_replication_factor: i16,
    /// `offsets.topic.segment.bytes`: the segment size of `__consumer_offsets`, which
    /// bounds how much of it lies beyond the snapshot that lets older segments go.
    pub offsets_topic_segment_bytes: i32,
    /// The `log.cleaner.*` keys.
    pub log_cleaner: LogCleanerConfig,
    /// `offsets.commit.timeout.ms`: how long a commit waits for `__consumer_offsets` to
    /// replicate it before the coordinator answers COORDINATOR_NOT_AVAILABLE.
    pub offsets_commit_timeout: std::time::Duration,
    /// `process.roles`, the quorum, named listeners and the KRaft timeouts.
    pub kraft: KraftConfig,
    /// The `replica.*` keys: follower fetching, ISR lag, high-watermark checkpoints.
    pub replication: ReplicationConfig,
    /// Every key as given, for DescribeConfigs on the broker resource.
    pub given: BTreeMap<String, String>,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        Self::from_properties(&BTreeMap::new()).expect("defaults are valid")
    }
}

/// [`BrokerConfig::from_properties`] while it reads the keys: the configuration so far,
/// and the keys whose effect depends on others (Kafka's precedences), which
/// [`Parsing::finish`] settles once every key is read.
#[derive(Debug)]
pub struct Parsing {
    pub config: BrokerConfig,
    pub log_dir: Option<String>,
    pub log_dirs: Option<String>,
    pub roll_ms: Option<i64>,
    pub roll_hours: Option<i64>,
    pub retention_ms: Option<i64>,
    pub retention_minutes: Option<i64>,
    pub retention_hours: Option<i64>,
    pub flush_ms: Option<i64>,
}

impl Parsing {
    /// Applies Kafka's precedences: `log.dirs` over `log.dir`, `log.roll.ms` over
    /// `.hours`, `log.retention.ms` over `.minutes` over `.hours` (a negative value keeps
    /// records for ever); an unset `log.flush.interval.ms` is the flush scheduler's
    /// interval.
    fn finish(self) -> Result<BrokerConfig, ConfigError> {
        let mut c = self.config;
        let dirs =
            (self.log_dirs.map(|d| ("log.dirs", d))).or(self.log_dir.map(|d| ("log.dir", d)));
        if let Some((key, value)) = dirs {
            c.log_dirs = value
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(PathBuf::from)
                .collect();
            if c.log_dirs.is_empty() {
                return Err(ConfigError::invalid(
                    key,
                    &value,
                    "at least one directory is required",
                ));
            }
        }
        if let Some(ms) = self.roll_ms.or(self.roll_hours.map(|h| h * 3_600_000)) {
            c.log_defaults.segment_ms = ms;
        }
        let forever_or = |n: i64, unit: i64| if n < 0 { -1 } else { n * unit };
        let retention = self
            .retention_ms
            .or(self.retention_minutes.map(|m| forever_or(m, 60_000)))
            .or(self.retention_hours.map(|h| forever_or(h, 3_600_000)));
        if let Some(ms) = retention {
            c.log_defaults.retention_ms = ms;
        }
        c.log_defaults.flush_ms = self
            .flush_ms
            .unwrap_or(c.flush_scheduler_interval_ms as i64);
        Ok(c)
    }
}

impl BrokerConfig {
    /// The directory of the metadata log: `metadata.log.dir`, else the first of `log.dirs`.
    pub fn metadata_dir(&self) -> PathBuf {
        self.kraft
            .metadata_log_dir
            .clone()
            .unwrap_or_else(|| self.log_dirs[0].clone())
    }

    /// The directories that carry this node's identity (`meta.properties`): every log
    /// dir and the metadata dir.
    pub fn identity_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = self.log_dirs.clone();
        dirs.extend(
            self.kraft
                .metadata_log_dir
                .clone()
                .filter(|d| !self.log_dirs.contains(d)),
        );
        dirs
    }

    /// Builds the configuration from properties, applying Kafka's defaults and precedence
    /// (`log.roll.ms` over `log.roll.hours`, `log.retention.ms` over `.minutes` over
    /// `.hours`, `log.dirs` over `log.dir`).
    pub fn from_properties(props: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        let c = Self {
            node_id: 1,
            listener: Listener {
                host: "127.0.0.1".to_string(),
                port: 9092,
            },
            advertised_listener: None,
            log_dirs: vec![PathBuf::from("/tmp/strom-logs")],
            num_partitions: 1,
            auto_create_topics: true,
            log_defaults: LogConfig::default(),
            retention_check_interval_ms: 300_000,
            log_open_files_max: 4096,
            num_recovery_threads_per_data_dir: 1,
            num_io_threads: None,
            max_partitions_per_request: 10_000,
            max_partitions_per_broker: 100_000,
            flush_scheduler_interval_ms: i64::MAX as u64,
            producer_id_expiration_check_interval_ms: 600_000,
            socket_request_max_bytes: 104_857_600,
            fetch_max_bytes: 57_671_680,
            max_incremental_fetch_session_cache_slots: 1000,
            connections_max_idle_ms: 600_000,
            metrics_listener: None,
            group_min_session_timeout_ms: 6_000,
            group_max_session_timeout_ms: 1_800_000,
            group_max_size: 1000,
            group_initial_rebalance_delay_ms: 3000,
            offset_metadata_max_bytes: 4096,
            offsets_retention_ms: 10_080 * 60_000,
            offsets_retention_check_interval_ms: 600_000,
            offsets_topic_num_partitions: 50,
            offsets_topic_replication_factor: 3,
            offsets_commit_timeout: std::time::Duration::from_millis(5000),
            log_cleaner: LogCleanerConfig::default(),
            offsets_topic_segment_bytes: 104_857_600,
            given: props.clone(),
            kraft: KraftConfig::from_properties(&BTreeMap::new(), 1)?,
            replication: ReplicationConfig::default(),
        };
        let mut p = Parsing {
            config: c,
            log_dir: None,
            log_dirs: None,
            roll_ms: None,
            roll_hours: None,
            retention_ms: None,
            retention_minutes: None,
            retention_hours: None,
            flush_ms: None,
        };
        let mut timestamp_difference = None;
        for (key, value) in props {
            let k = key.as_str();
            let v = value.as_str();
            if kraft_config::KEYS.contains(&k) {
                continue;
            }
            if let Some(def) = broker_configs::def(k) {
                let value = def.validator.check(k, def.config_type, v)?;
                (def.apply)(&mut p, &value);
                continue;
            }
            match k {
                _ if crate::topic_config::by_broker_synonym(k).is_some() => {
                    let def = crate::topic_config::by_broker_synonym(k).expect("checked");
                    let value = def.validator.check(k, def.config_type, v)?;
                    match def.apply {
                        Some(apply) => apply(&mut p.config.log_defaults, &value),
                        None if k == "log.message.timestamp.difference.max.ms" => {
                            timestamp_difference = Some(value.parse::<i64>().expect("validated"))
                        }
                        None => tracing::warn!(
                            key = k,
                            "configuration accepted, but strom does not have its feature yet: it has no effect"
                        ),
                    }
                }
                "zookeeper.connect" => {
                    return Err(ConfigError::invalid(k, v, "strom runs in KRaft mode only (as Kafka 4 does): set process.roles, node.id and controller.quorum.voters instead"))
                }
                "authorizer.class.name" if !v.trim().is_empty() => {
                    return Err(ConfigError::invalid(k, v, "strom has no authorizer yet, and would otherwise serve every client what the authorizer was meant to refuse"))
                }
                _ if crate::kafka_broker_keys::is_kafka_broker_key(k) => {
                    tracing::warn!(key = k, "configuration accepted but has no effect in strom");
                }
                _ => return Err(ConfigError::UnknownKey(key.clone())),
            }
        }
        let mut c = p.finish()?;
        if props.contains_key("process.roles") && !props.contains_key("node.id") {
            return Err(ConfigError::invalid("node.id", "", "Missing required configuration \"node.id\" which has no default value (process.roles is set)"));
        }
        c.kraft = KraftConfig::from_properties(props, c.node_id)?;
        // A single node is the only broker its internal topics can live on: Kafka's own
        // single-node configuration (its quickstart server.properties) sets their
        // replication factor to 1, and so does a node that formats itself.
        if c.kraft.formats_itself && !props.contains_key("offsets.topic.replication.factor") {
            c.offsets_topic_replication_factor = 1;
        }
        if c.kraft.voters.is_empty() && c.kraft.quorum_bootstrap_servers.is_some() {
            if let Some(voters) = crate::standalone_quorum::read(&c.metadata_dir())? {
                c.kraft.voters = voters;
                c.kraft.validate(c.node_id)?;
            }
        }
        c.replication.check()?;
        if let Some(client) = c.kraft.client_listener().cloned() {
            c.advertised_listener = c.kraft.advertised(&client.name).cloned();
            c.listener = client.listener;
        }
        if let Some(difference) = timestamp_difference {
            for bound in [
                &mut c.log_defaults.timestamp_before_max_ms,
                &mut c.log_defaults.timestamp_after_max_ms,
            ] {
                if *bound == i64::MAX {
                    *bound = difference;
                }
            }
        }
        Ok(c)
    }

    /// The listener clients are told to connect to, given the address actually bound.
    pub fn advertised(&self, bound: SocketAddr) -> Listener {
        match &self.advertised_listener {
            Some(l) => l.clone(),
            None => Listener {
                host: if self.listener.host.is_empty() {
                    bound.ip().to_string()
                } else {
                    self.listener.host.clone()
                },
                port: bound.port(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::properties::from_pairs as props;

    #[test]
    fn defaults_follow_kafka() {
        let c = BrokerConfig::default();
        assert_eq!(
            c.listener,
            Listener {
                host: "127.0.0.1".into(),
                port: 9092
            }
        );
        assert_eq!(c.num_partitions, 1);
        assert!(c.auto_create_topics);
        assert_eq!(c.log_defaults.segment_bytes, 1 << 30);
        assert_eq!(c.log_defaults.retention_ms, 168 * 3_600_000);
        assert_eq!(c.log_defaults.max_message_bytes, 1_048_588);
        assert_eq!(c.socket_request_max_bytes, 104_857_600);
        assert_eq!(c.offsets_retention_ms, 7 * 24 * 3_600_000);
        assert_eq!(c.offsets_retention_check_interval_ms, 600_000);
    }

    #[test]
    fn offsets_retention_is_given_in_minutes_of_at_least_one() {
        let c = BrokerConfig::from_properties(&props(&[
            ("offsets.retention.minutes", "2"),
            ("offsets.retention.check.interval.ms", "1000"),
        ]))
        .unwrap();
        assert_eq!(c.offsets_retention_ms, 120_000);
        assert_eq!(c.offsets_retention_check_interval_ms, 1000);
        for (key, value) in [
            ("offsets.retention.minutes", "0"),
            ("offsets.retention.minutes", "-5"),
            ("offsets.retention.check.interval.ms", "0"),
        ] {
            let err = BrokerConfig::from_properties(&props(&[(key, value)])).unwrap_err();
            assert!(err.to_string().contains(key), "{err}");
        }
    }

    #[test]
    fn a_server_properties_written_for_kafka_starts_strom() {
        let kafka = props(&[
            ("controlled.shutdown.enable", "true"),
            ("broker.rack", "rack-1"),
            ("leader.imbalance.per.broker.percentage", "10"),
            ("controller.quorum.request.timeout.ms", "2000"),
            ("log.cleaner.enable", "true"),
            ("queued.max.requests", "500"),
            ("ssl.keystore.location", "/etc/kafka/keystore.jks"),
            ("authorizer.class.name", ""),
        ]);
        assert!(BrokerConfig::from_properties(&kafka).is_ok());
        for (key, value, reason) in [
            ("zookeeper.connect", "zk:2181", "KRaft mode only"),
            (
                "authorizer.class.name",
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "no authorizer",
            ),
        ] {
            let err = BrokerConfig::from_properties(&props(&[(key, value)])).unwrap_err();
            assert!(err.to_string().contains(reason), "{key}: {err}");
        }
    }

    #[test]
    fn num_io_threads_sets_the_workers_and_is_at_least_one() {
        assert_eq!(BrokerConfig::default().num_io_threads, None);
        let c = BrokerConfig::from_properties(&props(&[("num.io.threads", "3")])).unwrap();
        assert_eq!(c.num_io_threads, Some(3));
        let err = BrokerConfig::from_properties(&props(&[("num.io.threads", "0")])).unwrap_err();
        assert!(err.to_string().contains("num.io.threads"), "{err}");
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_key() {
        assert_eq!(
            BrokerConfig::from_properties(&props(&[("log.segmnet.bytes", "1")])).unwrap_err(),
            ConfigError::UnknownKey("log.segmnet.bytes".into())
        );
        let err = BrokerConfig::from_properties(&props(&[("num.partitions", "x")])).unwrap_err();
        assert!(err.to_string().contains("num.partitions"), "{err}");
        let err = BrokerConfig::from_properties(&props(&[("listeners", "SSL://h:1")])).unwrap_err();
        assert!(err.to_string().contains("listeners"), "{err}");
    }

    #[test]
    fn retention_precedence_is_ms_then_minutes_then_hours() {
        let c = BrokerConfig::from_properties(&props(&[
            ("log.retention.hours", "1"),
            ("log.retention.minutes", "2"),
        ]))
        .unwrap();
        assert_eq!(c.log_defaults.retention_ms, 120_000);
    }
}
