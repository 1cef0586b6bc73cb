//! The one lookup handlers use to reach a partition's data, as Kafka's `ReplicaManager`:
//! it decides whether this broker can serve the partition (today: whether it hosts it;
//! with replication: whether it leads it, answering NOT_LEADER_OR_FOLLOWER or
//! FENCED_LEADER_EPOCH here), so no handler touches a log or decides leadership itself.

use std::sync::Arc;

use kafka_protocol::ResponseError;
use uuid::Uuid;

use crate::partition::Partition;
use crate::{ApiError, BrokerState};

/// The partition `index` of topic `topic` as its leader serves it.
pub fn leader(state: &BrokerState, topic: &str, index: i32) -> Result<Arc<Partition>, ApiError> {
    state
        .logs
        .partition(topic, index)
        .ok_or_else(ApiError::unknown_topic)
}

/// [`leader`] for a topic named by id (Fetch v13+).
pub fn leader_by_id(
    state: &BrokerState,
    topic_id: Uuid,
    index: i32,
) -> Result<Arc<Partition>, ApiError> {
    let topic = state
        .logs
        .topic_by_id(topic_id)
        .ok_or_else(|| ApiError::new(ResponseError::UnknownTopicId, "unknown topic id"))?;
    topic.partition(index).ok_or_else(ApiError::unknown_topic)
}
