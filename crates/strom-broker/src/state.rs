//! What every handler can reach: configuration, the advertised address and the logs.

use crate::config::{BrokerConfig, Listener};
use crate::log_manager::LogManager;
use crate::producer_id_manager::ProducerIdManager;

/// Shared broker state, one per running broker.
#[derive(Debug)]
pub struct BrokerState {
    pub config: BrokerConfig,
    /// The address clients are told to use (Metadata, FindCoordinator, DescribeCluster).
    pub advertised: Listener,
    pub logs: LogManager,
    pub producer_ids: ProducerIdManager,
}

impl BrokerState {
    pub fn node_id(&self) -> i32 {
        self.config.node_id
    }
}
