//! Replication between brokers, the broker's side: the followers' fetchers, the leader's
//! ISR changes and the periodic high-watermark checkpoint. The leader's
//! side of a follower's fetch is in the Fetch handler; what a metadata image changes
//! (become leader, become follower) is decided in [`crate::replica_manager`].

pub mod alter_partition;
pub mod fetcher;

use parking_lot::Mutex;
use strom_replica::high_watermark_checkpoint;
use tokio::sync::watch;

use alter_partition::AlterPartitionSender;
use fetcher::ReplicaFetcherManager;
use high_watermark_checkpoint::HighWatermarks;

use crate::BrokerState;

/// A broker's replication machinery.
#[derive(Debug)]
pub struct Replication {
    pub fetchers: ReplicaFetcherManager,
    pub isr_changes: AlterPartitionSender,
    /// The high watermarks the previous run checkpointed, each taken when its partition
    /// is first assigned a role.
    initial_high_watermarks: Mutex<HighWatermarks>,
    /// True once the broker shuts down: fetchers stop.
    pub shutdown: watch::Receiver<bool>,
    /// Where fetchers run (metadata images are applied on a blocking thread).
    pub runtime: tokio::runtime::Handle,
}

impl Replication {
    pub fn new(
        isr_changes: AlterPartitionSender,
        initial_high_watermarks: HighWatermarks,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        Self {
            fetchers: ReplicaFetcherManager::default(),
            isr_changes,
            initial_high_watermarks: Mutex::new(initial_high_watermarks),
            shutdown,
            runtime: tokio::runtime::Handle::current(),
        }
    }

    /// The checkpointed high watermark of (`topic`, `index`) (0 if none: the log start
    /// then bounds it).
    pub fn take_initial_high_watermark(&self, topic: &str, index: i32) -> i64 {
        self.initial_high_watermarks
            .lock()
            .remove(&(topic.to_string(), index))
            .unwrap_or(0)
    }
}

/// Writes every log dir's `replication-offset-checkpoint` from the hosted partitions.
pub fn checkpoint_high_watermarks(state: &BrokerState) {
    let hosted = state.logs.topics().into_iter().flat_map(|t| t.hosted());
    high_watermark_checkpoint::checkpoint_all(&state.config.log_dirs, hosted);
}
