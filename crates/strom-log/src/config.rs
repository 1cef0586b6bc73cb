//! Per-partition log settings, named and defaulted as Kafka's topic configs are.

/// Settings of one partition log. Each field is the topic-level config named in its doc;
/// the broker fills them from `log.*` defaults overridden by topic configs.
#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: roll the active segment when an append would exceed this size.
    pub segment_bytes: u64,
    /// `segment.ms`: roll the active segment when its first batch is older than this.
    pub segment_ms: i64,
    /// `retention.ms`: delete segments whose newest record is older (-1: keep forever).
    pub retention_ms: i64,
    /// `retention.bytes`: delete the oldest segments while the log is larger (-1: no limit).
    pub retention_bytes: i64,
    /// `flush.messages`: fsync after this many appended records.
    pub flush_messages: i64,
    /// `flush.ms`: fsync when the last flush is older than this (checked by the broker).
    pub flush_ms: i64,
    /// `index.interval.bytes`: bytes between two offset-index entries.
    pub index_interval_bytes: u64,
    /// `segment.index.bytes`: maximum size of an index file; a full index rolls the segment.
    pub segment_index_bytes: u64,
    /// `max.message.bytes`: the largest record batch accepted.
    pub max_message_bytes: usize,
    /// `cleanup.policy`: `delete`, `compact` or both (`delete` retention applies whenever
    /// the policy includes it, then the cleaner compacts what is left).
    pub cleanup_policy: String,
    /// `delete.retention.ms`: how long the cleaner keeps a tombstone after it first kept
    /// it (its batch's delete horizon).
    pub delete_retention_ms: i64,
    /// `min.cleanable.dirty.ratio`: the share of dirty bytes above which the log is
    /// cleaned.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: a record younger than this is not cleaned.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a dirty record older than this makes the log due for
    /// cleaning whatever its dirty ratio.
    pub max_compaction_lag_ms: i64,
    /// `compression.type`: `producer` keeps each batch's codec; any other value is the
    /// codec batches are stored with (`uncompressed` for none), recompressing those that
    /// differ.
    pub compression_type: String,
    /// `compression.gzip.level` (-1: zlib's default).
    pub compression_gzip_level: i32,
    /// `compression.lz4.level`
    pub compression_lz4_level: i32,
    /// `compression.zstd.level`
    pub compression_zstd_level: i32,
    /// `message.timestamp.type=LogAppendTime`: batches are stamped with the append time.
    pub log_append_time: bool,
    /// `message.timestamp.before.max.ms` (or the deprecated `difference.max.ms` while it
    /// is unset): how far in the past a CreateTime record may be.
    pub timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms` (same fallback): how far in the future.
    pub timestamp_after_max_ms: i64,
    /// `producer.id.expiration.ms` (a broker config): idempotent-producer state of a
    /// producer that has not written for this long is forgotten.
    pub producer_id_expiration_ms: i64,
    /// `min.insync.replicas`: the in-sync replicas an acks=all produce needs (Kafka's
    /// `LogConfig` carries it too; the log itself does not use it).
    pub min_insync_replicas: usize,
    /// `unclean.leader.election.enable`: whether a replica outside the ISR may be elected
    /// when no ISR member is alive (read by the controller).
    pub unclean_leader_election: bool,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: 1024 * 1024 * 1024,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            retention_ms: 7 * 24 * 60 * 60 * 1000,
            retention_bytes: -1,
            flush_messages: i64::MAX,
            flush_ms: i64::MAX,
            index_interval_bytes: 4096,
            segment_index_bytes: 10 * 1024 * 1024,
            max_message_bytes: 1024 * 1024 + 12,
            cleanup_policy: "delete".to_string(),
            delete_retention_ms: 24 * 60 * 60 * 1000,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            compression_type: "producer".to_string(),
            compression_gzip_level: -1,
            compression_lz4_level: 9,
            compression_zstd_level: 3,
            log_append_time: false,
            timestamp_before_max_ms: i64::MAX,
            timestamp_after_max_ms: i64::MAX,
            producer_id_expiration_ms: 24 * 60 * 60 * 1000,
            min_insync_replicas: 1,
            unclean_leader_election: false,
        }
    }
}

impl LogConfig {
    /// Whether time and size retention delete segments.
    pub fn deletes(&self) -> bool {
        self.cleanup_policy.split(',').any(|p| p.trim() == "delete")
    }

    /// Whether the policy includes compaction, so every record needs a key.
    pub fn compacts(&self) -> bool {
        self.cleanup_policy
            .split(',')
            .any(|p| p.trim() == "compact")
    }

    /// The codec batches are stored with, `None` to keep the producer's.
    pub fn target_codec(&self) -> Option<strom_wire::Codec> {
        strom_wire::Codec::from_config_name(&self.compression_type)
    }

    /// The level of `codec` (`compression.<codec>.level`).
    pub fn compression_level(&self, codec: strom_wire::Codec) -> i32 {
        match codec {
            strom_wire::Codec::Gzip => self.compression_gzip_level,
            strom_wire::Codec::Lz4 => self.compression_lz4_level,
            strom_wire::Codec::Zstd => self.compression_zstd_level,
            strom_wire::Codec::None | strom_wire::Codec::Snappy => 0,
        }
    }
}
