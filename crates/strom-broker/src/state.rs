//! What every handler can reach: configuration, the advertised address, the logs and
//! the group coordinator.

use std::sync::Arc;

use crate::config::{BrokerConfig, Listener};
use crate::dynamic_config::DynamicBrokerConfigs;
use crate::log_cleaner::LogCleaner;
use crate::log_manager::LogManager;
use crate::memory::MemoryTrimmer;
use crate::metadata_cache::MetadataCache;
use crate::metrics::BrokerMetrics;
use crate::quorum_channel::QuorumChannel;
use crate::replication::Replication;
use strom_coordinator::group::GroupCoordinator;
use strom_replica::fetch_session::FetchSessionCache;

/// Shared broker state, one per running broker.
#[derive(Debug)]
pub struct BrokerState {
    pub config: BrokerConfig,
    /// The address clients are told to use (Metadata, FindCoordinator, DescribeCluster).
    pub advertised: Listener,
    pub logs: Arc<LogManager>,
    /// The log cleaner's threads (compaction).
    pub log_cleaner: Arc<LogCleaner>,
    pub groups: GroupCoordinator,
    pub memory: MemoryTrimmer,
    /// The cluster as Metadata, DescribeCluster and FindCoordinator describe it.
    pub metadata: MetadataCache,
    /// The channel to the metadata quorum.
    pub quorum: Arc<QuorumChannel>,
    /// Followers' fetchers, ISR changes, high-watermark checkpoints.
    pub replication: Replication,
    /// Incremental fetch sessions (KIP-227).
    pub fetch_sessions: FetchSessionCache,
    /// Dynamic broker configs (`kafka-configs --entity-type brokers --alter`).
    pub dynamic_configs: DynamicBrokerConfigs,
    /// Counters served on `strom.metrics.listener`.
    pub metrics: Arc<BrokerMetrics>,
}

impl BrokerState {
    pub fn node_id(&self) -> i32 {
        self.config.node_id
    }
}
