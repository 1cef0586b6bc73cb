//! Broker-level configs as one declarative table, as Kafka's `KafkaConfig` `ConfigDef`:
//! every `server.properties` key strom reads, apart from the KRaft keys
//! ([`crate::kraft_config`]) and the topic defaults that are broker synonyms of topic
//! configs ([`crate::topic_config`]). Each key has its type, default, validator,
//! importance, whether it can change at runtime, its doc, and how its checked value sets
//! the broker's configuration.
//!
//! `BrokerConfig::from_properties` checks and applies each key through this table, and
//! docs/configuration.md is generated from it.

use crate::config::Parsing;
use crate::config_def::{ConfigType, Importance, Validator};

/// One broker config.
#[derive(Debug)]
pub struct BrokerConfigDef {
    pub name: &'static str,
    pub config_type: ConfigType,
    /// The value a broker runs with when the key is not given ("" for none).
    pub default: &'static str,
    pub validator: Validator,
    pub importance: Importance,
    /// Whether `kafka-configs --entity-type brokers --alter` may change it at runtime
    /// (Kafka's "cluster-wide" update mode); otherwise it is read-only.
    pub dynamic: bool,
    pub doc: &'static str,
    /// Sets the broker's configuration from the checked value.
    pub apply: fn(&mut Parsing, &str),
}

fn num(v: &str) -> i64 {
    v.parse().expect("validated")
}

/// The broker configs, sorted by name.
pub static BROKER_CONFIGS: &[BrokerConfigDef] = &[
    BrokerConfigDef {
        name: "auto.create.topics.enable",
        config_type: ConfigType::Boolean,
        default: "true",
        validator: Validator::Boolean,
        importance: Importance::High,
        dynamic: false,
        doc: "Whether a Metadata request for a topic that does not exist creates it, with num.partitions partitions.",
        apply: |p, v| p.config.auto_create_topics = v == "true",
    },
    BrokerConfigDef {
        name: "broker.id",
        config_type: ConfigType::Int,
        default: "1",
        validator: Validator::AtLeast(0),
        importance: Importance::High,
        dynamic: false,
        doc: "The older name of node.id.",
        apply: |p, v| p.config.node_id = num(v) as i32,
    },
    BrokerConfigDef {
        name: "connections.max.idle.ms",
        config_type: ConfigType::Long,
        default: "600000",
        validator: Validator::AtLeast(1),
        importance: Importance::Medium,
        dynamic: false,
        doc: "A connection with no request in flight that sends nothing for this long is closed.",
        apply: |p, v| p.config.connections_max_idle_ms = num(v) as u64,
    },
    BrokerConfigDef {
        name: "fetch.max.bytes",
        config_type: ConfigType::Int,
        default: "57671680",
        validator: Validator::AtLeast(1024),
        importance: Importance::Medium,
        dynamic: false,
        doc: "The most bytes a fetch response carries, whatever the client asks for.",
        apply: |p, v| p.config.fetch_max_bytes = num(v) as usize,
    },
    BrokerConfigDef {
        name: "group.initial.rebalance.delay.ms",
        config_type: ConfigType::Int,
        default: "3000",
        validator: Validator::AtLeast(0),
        importance: Importance::Medium,
        dynamic: false,
        doc: "How long a new group waits for more members to join before its first rebalance.",
        apply: |p, v| p.config.group_initial_rebalance_delay_ms = num(v) as i32,
    },
    BrokerConfigDef {
        name: "group.max.session.timeout.ms",
        config_type: ConfigType::Int,
        default: "1800000",
        validator: Validator::Any,
        importance: Importance::Medium,
        dynamic: false,
        doc: "The longest session timeout a member of a classic group may ask for.",
        apply: |p, v| p.config.group_max_session_timeout_ms = num(v) as i32,
    },
    BrokerConfigDef {
        name: "group.max.size",
        config_type: ConfigType::Int,
        default: "1000",
        validator: Validator::AtLeast(1),
        importance: Importance::Medium,
        dynamic: false,
        doc: "The most members a classic group may have. Kafka's default is unbounded; strom's bounds the coordinator's memory per group.",
        apply: |p, v| p.config.group_max_size = num(v) as usize,
    },
    BrokerConfigDef {
        name: "group.min.session.timeout.ms",
        config_type: ConfigType::Int,
        default: "6000",
        validator: Validator::Any,
        importance: Importance::Medium,
        dynamic: false,
        doc: "The shortest session timeout a member of a classic group may ask for.",
        apply: |p, v| p.config.group_min_session_timeout_ms = num(v) as i32,
    },
    BrokerConfigDef {
        name: "log.cleaner.backoff.ms",
        config_type: ConfigType::Long,
        default: "15000",
        validator: Validator::AtLeast(1),
        importance: Importance::Medium,
        dynamic: false,
        doc: "How often the partitions of __consumer_offsets are checked for a snapshot that lets their older segments go.",
        apply: |p, v| p.config.log_cleaner_backoff_ms = num(v) as u64,
    },
    BrokerConfigDef {
        name: "log.dir",
        config_type: ConfigType::String,
        default: "/tmp/strom-logs",
        validator: Validator::Any,
        importance: Importance::High,
        dynamic: false,
        doc: "The directory of the logs, when log.dirs is not given.",
        apply: |p, v| p.log_dir = Some(v.to_string()),
    },
    BrokerConfigDef {
        name: "log.dirs",
        config_type: ConfigType::List,
        default: "",
        validator: Validator::Any,
        importance: Importance::High,
        dynamic: false,
        doc: "The directories of the logs, comma-separated; each partition lives in one of them.",
        apply: |p, v| p.log_dirs = Some(v.to_string()),
    },
    BrokerConfigDef {
        name: "log.flush.interval.messages",
        config_type: ConfigType::Long,
        default: "9223372036854775807",
        validator: Validator::AtLeast(1),
        importance: Importance::High,
        dynamic: true,
        doc: "How many records a partition takes before its log is fsynced.",
        apply: |p, v| p.config.log_defaults.flush_messages = num(v),
    },
    BrokerConfigDef {
        name: "log.flush.interval.ms",
        config_type: ConfigType::Long,
        default: "",
        validator: Validator::AtLeast(0),
        importance: Importance::High,
        dynamic: true,
        doc: "How long a record waits in the page cache before its log is fsynced; unset, log.flush.scheduler.interval.ms.",
        apply: |p, v| p.flush_ms = Some(num(v)),
    },
    BrokerConfigDef {
        name: "log.flush.scheduler.interval.ms",
        config_type: ConfigType::Long,
        default: "9223372036854775807",
        validator: Validator::AtLeast(1),
        importance: Importance::High,
        dynamic: false,
        doc: "How often logs are checked for a flush that is due.",
        apply: |p, v| p.config.flush_scheduler_interval_ms = num(v) as u64,
    },
    BrokerConfigDef {
        name: "log.index.interval.bytes",
        config_type: ConfigType::Int,
        default: "4096",
        validator: Validator::AtLeast(0),
        importance: Importance::Medium,
        dynamic: true,
        doc: "How many bytes of batches lie between two entries of the offset index.",
        apply: |p, v| p.config.log_defaults.index_interval_bytes = num(v) as u64,
    },
    BrokerConfigDef {
        name: "log.index.size.max.bytes",
        config_type: ConfigType::Int,
        default: "10485760",
        validator: Validator::AtLeast(4),
        importance: Importance::Medium,
        dynamic: true,
        doc: "The largest offset or time index of a segment; a full index rolls the segment.",
        apply: |p, v| p.config.log_defaults.segment_index_bytes = num(v) as u64,
    },
    BrokerConfigDef {
        name: "log.open.files.max",
        config_type: ConfigType::Int,
        default: "4096",
        validator: Validator::AtLeast(16),
        importance: Importance::Medium,
        dynamic: false,
        doc: "strom's own: how many segment files the broker keeps open at once, through one cache shared by every partition. Start-up refuses a RLIMIT_NOFILE that cannot hold it.",
        apply: |p, v| p.config.log_open_files_max = num(v) as usize,
    },
    BrokerConfigDef {
        name: "log.retention.bytes",
        config_type: ConfigType::Long,
        default: "-1",
        validator: Validator::AtLeast(-1),
        importance: Importance::High,
        dynamic: true,
        doc: "The most bytes a partition keeps before its oldest segments are deleted; -1 for no limit.",
        apply: |p, v| p.config.log_defaults.retention_bytes = num(v),
    },
    BrokerConfigDef {
        name: "log.retention.check.interval.ms",
        config_type: ConfigType::Long,
        default: "300000",
        validator: Validator::AtLeast(1),
        importance: Importance::Medium,
        dynamic: false,
        doc: "How often logs are checked for segments past their retention.",
        apply: |p, v| p.config.retention_check_interval_ms = num(v) as u64,
    },
    BrokerConfigDef {
        name: "log.retention.hours",
        config_type: ConfigType::Int,
        default: "168",
        validator: Validator::AtLeast(-1),
        importance: Importance::High,
        dynamic: true,
        doc: "How long a segment is kept, in hours, unless log.retention.ms or log.retention.minutes is given; -1 for ever.",
        apply: |p, v| p.retention_hours = Some(num(v)),
    },
    BrokerConfigDef {
        name: "log.retention.minutes",
        config_type: ConfigType::Int,
        default: "",
        validator: Validator::AtLeast(-1),
        importance: Importance::High,
        dynamic: true,
        doc: "How long a segment is kept, in minutes, unless log.retention.ms is given; -1 for ever.",
        apply: |p, v| p.retention_minutes = Some(num(v)),
    },
    BrokerConfigDef {
        name: "log.retention.ms",
        config_type: ConfigType::Long,
        default: "",
        validator: Validator::AtLeast(-1),
        importance: Importance::High,
        dynamic: true,
        doc: "How long a segment is kept after its last record was appended, in ms; -1 for ever.",
        apply: |p, v| p.retention_ms = Some(num(v)),
    },
    BrokerConfigDef {
        name: "log.roll.hours",
        config_type: ConfigType::Int,
        default: "168",
        validator: Validator::AtLeast(1),
        importance: Importance::High,
        dynamic: true,
        doc: "The longest a segment stays active, in hours, unless log.roll.ms is given.",
        apply: |p, v| p.roll_hours = Some(num(v)),
    },
    BrokerConfigDef {
        name: "log.roll.ms",
        config_type: ConfigType::Long,
        default: "",
        validator: Validator::AtLeast(1),
        importance: Importance::High,
        dynamic: true,
        doc: "The longest a segment stays active, in ms, before a new one is rolled.",
        apply: |p, v| p.roll_ms = Some(num(v)),
    },
    BrokerConfigDef {
        name: "log.segment.bytes",
        config_type: ConfigType::Int,
        default: "1073741824",
        validator: Validator::AtLeast(14),
        importance: Importance::High,
        dynamic: true,
        doc: "The largest segment file; a batch that would pass it rolls a new segment.",
        apply: |p, v| p.config.log_defaults.segment_bytes = num(v) as u64,
    },
    BrokerConfigDef {
        name: "max.incremental.fetch.session.cache.slots",
        config_type: ConfigType::Int,
        default: "1000",
        validator: Validator::AtLeast(0),
        importance: Importance::Medium,
        dynamic: false,
        doc: "How many incremental fetch sessions (KIP-227) the broker keeps.",
        apply: |p, v| p.config.max_incremental_fetch_session_cache_slots = num(v) as usize,
    },
    BrokerConfigDef {
        name: "max.partitions.per.broker",
        config_type: ConfigType::Long,
        default: "100000",
        validator: Validator::AtLeast(1),
        importance: Importance::Medium,
        dynamic: false,
        doc: "strom's own: the most partitions a broker hosts; a creation that would pass it fails with POLICY_VIOLATION.",
        apply: |p, v| p.config.max_partitions_per_broker = num(v),
    },
    BrokerConfigDef {
        name: "max.partitions.per.request",
        config_type: ConfigType::Int,
        default: "10000",
        validator: Validator::AtLeast(1),
        importance: Importance::Medium,
        dynamic: false,
        doc: "strom's own: the most partitions one CreateTopics topic or CreatePartitions request may add (INVALID_PARTITIONS beyond it).",
        apply: |p, v| p.config.max_partitions_per_request = num(v) as i32,
    },
    BrokerConfigDef {
        name: "message.max.bytes",
        config_type: ConfigType::Int,
        default: "1048588",
        validator: Validator::AtLeast(0),
        importance: Importance::High,
        dynamic: true,
        doc: "The largest record batch a topic accepts, unless the topic sets max.message.bytes.",
        apply: |p, v| p.config.log_defaults.max_message_bytes = num(v) as usize,
    },
    BrokerConfigDef {
        name: "node.id",
        config_type: ConfigType::Int,
        default: "1",
        validator: Validator::AtLeast(0),
        importance: Importance::High,
        dynamic: false,
        doc: "This node's id in the cluster; required when process.roles is set.",
        apply: |p, v| p.config.node_id = num(v) as i32,
    },
    BrokerConfigDef {
        name: "num.io.threads",
        config_type: ConfigType::Int,
        default: "",
        validator: Validator::AtLeast(1),
        importance: Importance::High,
        dynamic: false,
        doc: "How many threads handle requests, never more than the cores; unset, one per core. strom's request threads never wait on the disk, so more threads than cores only add context switches.",
        apply: |p, v| p.config.num_io_threads = Some(num(v) as usize),
    },
    BrokerConfigDef {
        name: "num.partitions",
        config_type: ConfigType::Int,
        default: "1",
        validator: Validator::AtLeast(1),
        importance: Importance::Medium,
        dynamic: false,
        doc: "The partitions of a topic created without a count (auto-created, or CreateTopics with -1).",
        apply: |p, v| p.config.num_partitions = num(v) as i32,
    },
    BrokerConfigDef {
        name: "num.recovery.threads.per.data.dir",
        config_type: ConfigType::Int,
        default: "1",
        validator: Validator::AtLeast(1),
        importance: Importance::High,
        dynamic: false,
        doc: "Threads per log dir that open (and after a crash recover) partitions at start-up and close them at shutdown.",
        apply: |p, v| p.config.num_recovery_threads_per_data_dir = num(v) as usize,
    },
    BrokerConfigDef {
        name: "num.replica.fetchers",
        config_type: ConfigType::Int,
        default: "1",
        validator: Validator::AtLeast(1),
        importance: Importance::High,
        dynamic: false,
        doc: "Fetchers per source broker; a partition always goes to the same one.",
        apply: |p, v| p.config.replication.num_replica_fetchers = num(v) as usize,
    },
    BrokerConfigDef {
        name: "offset.metadata.max.bytes",
        config_type: ConfigType::Int,
        default: "4096",
        validator: Validator::AtLeast(0),
        importance: Importance::High,
        dynamic: false,
        doc: "The longest metadata string an offset commit may carry.",
        apply: |p, v| p.config.offset_metadata_max_bytes = num(v) as usize,
    },
    BrokerConfigDef {
        name: "offsets.commit.timeout.ms",
        config_type: ConfigType::Int,
        default: "5000",
        validator: Validator::AtLeast(1),
        importance: Importance::High,
        dynamic: false,
        doc: "How long a commit waits for __consumer_offsets to replicate it before the coordinator answers COORDINATOR_NOT_AVAILABLE.",
        apply: |p, v| {
            p.config.offsets_commit_timeout = std::time::Duration::from_millis(num(v) as u64)
        },
    },
    BrokerConfigDef {
        name: "offsets.retention.check.interval.ms",
        config_type: ConfigType::Long,
        default: "600000",
        validator: Validator::AtLeast(1),
        importance: Importance::High,
        dynamic: false,
        doc: "How often expired committed offsets are removed.",
        apply: |p, v| p.config.offsets_retention_check_interval_ms = num(v) as u64,
    },
    BrokerConfigDef {
        name: "offsets.retention.minutes",
        config_type: ConfigType::Int,
        default: "10080",
        validator: Validator::AtLeast(1),
        importance: Importance::High,
        dynamic: false,
        doc: "How long the committed offsets of a group without members are kept.",
        apply: |p, v| p.config.offsets_retention_ms = num(v) * 60_000,
    },
    BrokerConfigDef {
        name: "offsets.topic.num.partitions",
        config_type: ConfigType::Int,
        default: "50",
        validator: Validator::AtLeast(1),
        importance: Importance::High,
        dynamic: false,
        doc: "The partitions of __consumer_offsets, created at the first FindCoordinator for a group.",
        apply: |p, v| p.config.offsets_topic_num_partitions = num(v) as i32,
    },
    BrokerConfigDef {
        name: "offsets.topic.replication.factor",
        config_type: ConfigType::Int,
        default: "3",
        validator: Validator::Between(1, 32767),
        importance: Importance::High,
        dynamic: false,
        doc: "The replication factor of __consumer_offsets; until that many brokers are live, groups have no coordinator. A node without process.roles makes it 1 unless it is given.",
        apply: |p, v| p.config.offsets_topic_replication_factor = num(v) as i16,
    },
    BrokerConfigDef {
        name: "offsets.topic.segment.bytes",
        config_type: ConfigType::Int,
        default: "104857600",
        validator: Validator::AtLeast(1),
        importance: Importance::High,
        dynamic: false,
        doc: "The segment size of __consumer_offsets.",
        apply: |p, v| p.config.offsets_topic_segment_bytes = num(v) as i32,
    },
    BrokerConfigDef {
        name: "producer.id.expiration.check.interval.ms",
        config_type: ConfigType::Int,
        default: "600000",
        validator: Validator::AtLeast(1),
        importance: Importance::Low,
        dynamic: false,
        doc: "How often idle producers' state is removed.",
        apply: |p, v| p.config.producer_id_expiration_check_interval_ms = num(v) as u64,
    },
    BrokerConfigDef {
        name: "producer.id.expiration.ms",
        config_type: ConfigType::Int,
        default: "86400000",
        validator: Validator::AtLeast(1),
        importance: Importance::Low,
        dynamic: false,
        doc: "How long a partition keeps the state of a producer that has stopped writing to it.",
        apply: |p, v| p.config.log_defaults.producer_id_expiration_ms = num(v),
    },
    BrokerConfigDef {
        name: "replica.fetch.backoff.ms",
        config_type: ConfigType::Int,
        default: "1000",
        validator: Validator::AtLeast(0),
        importance: Importance::Medium,
        dynamic: false,
        doc: "How long a fetcher waits after a failed fetch.",
        apply: |p, v| p.config.replication.fetch_backoff_ms = num(v) as u64,
    },
    BrokerConfigDef {
        name: "replica.fetch.max.bytes",
        config_type: ConfigType::Int,
        default: "1048576",
        validator: Validator::AtLeast(0),
        importance: Importance::Medium,
        dynamic: false,
        doc: "The most bytes a follower asks for per partition (a larger first batch still comes whole).",
        apply: |p, v| p.config.replication.fetch_max_bytes = num(v) as i32,
    },
    BrokerConfigDef {
        name: "replica.fetch.min.bytes",
        config_type: ConfigType::Int,
        default: "1",
        validator: Validator::AtLeast(1),
        importance: Importance::High,
        dynamic: false,
        doc: "How many bytes a follower's fetch waits for, up to replica.fetch.wait.max.ms.",
        apply: |p, v| p.config.replication.fetch_min_bytes = num(v) as i32,
    },
    BrokerConfigDef {
        name: "replica.fetch.response.max.bytes",
        config_type: ConfigType::Int,
        default: "10485760",
        validator: Validator::AtLeast(0),
        importance: Importance::Medium,
        dynamic: false,
        doc: "The most bytes a follower asks for in one fetch.",
        apply: |p, v| p.config.replication.fetch_response_max_bytes = num(v) as i32,
    },
    BrokerConfigDef {
        name: "replica.fetch.wait.max.ms",
        config_type: ConfigType::Int,
        default: "500",
        validator: Validator::AtLeast(0),
        importance: Importance::High,
        dynamic: false,
        doc: "How long a follower's fetch waits on the leader for records; at most replica.lag.time.max.ms.",
        apply: |p, v| p.config.replication.fetch_wait_max_ms = num(v) as i32,
    },
    BrokerConfigDef {
        name: "replica.high.watermark.checkpoint.interval.ms",
        config_type: ConfigType::Long,
        default: "5000",
        validator: Validator::AtLeast(1),
        importance: Importance::High,
        dynamic: false,
        doc: "How often each log dir's replication-offset-checkpoint is written.",
        apply: |p, v| p.config.replication.high_watermark_checkpoint_interval_ms = num(v) as u64,
    },
    BrokerConfigDef {
        name: "replica.lag.time.max.ms",
        config_type: ConfigType::Long,
        default: "30000",
        validator: Validator::AtLeast(1),
        importance: Importance::High,
        dynamic: false,
        doc: "A follower that has not caught up with its leader for this long leaves the ISR.",
        apply: |p, v| p.config.replication.lag_time_max_ms = num(v),
    },
    BrokerConfigDef {
        name: "socket.request.max.bytes",
        config_type: ConfigType::Int,
        default: "104857600",
        validator: Validator::AtLeast(1),
        importance: Importance::High,
        dynamic: false,
        doc: "The largest request frame a connection may send; a larger one closes the connection.",
        apply: |p, v| p.config.socket_request_max_bytes = num(v) as usize,
    },
    BrokerConfigDef {
        name: "strom.metrics.listener",
        config_type: ConfigType::String,
        default: "",
        validator: Validator::Any,
        importance: Importance::Low,
        dynamic: false,
        doc: "strom's own: the host:port where GET /metrics serves the broker's counters in Prometheus's text format (replica fetches and the partitions they read, fetcher requests, produced batches). Empty: not served.",
        apply: |p, v| p.config.metrics_listener = (!v.is_empty()).then(|| v.to_string()),
    },
];

/// The definition of broker config `key`.
pub fn def(key: &str) -> Option<&'static BrokerConfigDef> {
    BROKER_CONFIGS
        .binary_search_by(|d| d.name.cmp(key))
        .ok()
        .map(|i| &BROKER_CONFIGS[i])
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::BrokerConfig;

    #[test]
    fn the_table_is_sorted_by_name() {
        assert!(BROKER_CONFIGS.windows(2).all(|w| w[0].name < w[1].name));
    }

    /// A default the table shows is the value a broker runs with when the key is absent
    /// (`offsets.topic.replication.factor` shows a cluster node's: a node without
    /// `process.roles`, as here, makes it 1).
    #[test]
    fn each_default_is_what_an_unset_key_gives() {
        let unset = format!("{:?}", BrokerConfig::default());
        let cluster_only = |d: &&BrokerConfigDef| d.name == "offsets.topic.replication.factor";
        for def in BROKER_CONFIGS
            .iter()
            .filter(|d| !d.default.is_empty() && !cluster_only(d))
        {
            let given = BTreeMap::from([(def.name.to_string(), def.default.to_string())]);
            let mut set = BrokerConfig::from_properties(&given).expect("the default is valid");
            set.given = BTreeMap::new();
            assert_eq!(format!("{set:?}"), unset, "{}={}", def.name, def.default);
        }
    }
}
