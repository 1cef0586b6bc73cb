//! Consumer groups with Kafka's classic protocol: the coordinator, its groups and
//! members, and the store of committed offsets, made durable in `__consumer_offsets`.
//!
//! The handlers (`handlers::join_group` and friends) translate requests into calls on
//! [`GroupCoordinator`] and its results into responses; the protocol's rules live here.

pub mod classic_group;
pub mod coordinator;
pub mod earlier_offsets_log;
pub mod group_metadata;
pub mod member;
pub mod offset_store;
pub mod offsets_partitions;
pub mod offsets_topic;
pub mod subscription;

pub use classic_group::{GroupDescription, GroupState, JoinOutcome, JoinParams, SyncParams};
pub use coordinator::{CoordinatorConfig, GroupCoordinator, ListedGroup};
pub use offset_store::{CommittedOffset, TopicPartition};
