//! Per-partition log settings, named and defaulted as Kafka's topic configs are.

/// Settings of one partition log. Each field is the topic-level config named in its doc;
/// the broker fills them from `log.*` defaults overridden by topic configs.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// `cleanup.policy`: `delete`, `compact` or both (compaction is not run yet; `delete`
    /// retention applies whenever the policy includes it).
    pub cleanup_policy: String,
    /// `producer.id.expiration.ms` (a broker config): idempotent-producer state of a
    /// producer that has not written for this long is forgotten.
    pub producer_id_expiration_ms: i64,
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
            producer_id_expiration_ms: 24 * 60 * 60 * 1000,
        }
    }
}

impl LogConfig {
    /// Whether time and size retention delete segments.
    pub fn deletes(&self) -> bool {
        self.cleanup_policy.split(',').any(|p| p.trim() == "delete")
    }
}
