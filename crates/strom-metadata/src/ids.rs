//! Newtypes for the numbers that must not be mixed up: a broker id is not an epoch.

use serde::{Deserialize, Serialize};

/// `node.id` of a broker or controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BrokerId(pub i32);

impl BrokerId {
    /// Kafka's "no broker" (a partition without a leader).
    pub const NONE: BrokerId = BrokerId(-1);
}

/// A partition's leader epoch: bumped when its leader changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LeaderEpoch(pub i32);

/// A partition's epoch: bumped on every change of its registration (the compare-and-set
/// version of AlterPartition).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PartitionEpoch(pub i32);
