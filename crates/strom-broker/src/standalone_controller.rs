//! The controller of a standalone node: the one place where "this broker is the whole
//! cluster" is decided. It registers this broker, and turns each topic change of the log
//! manager into Kafka's metadata records with this broker as the only replica, leader and
//! ISR member at leader epoch 0, which it publishes to the metadata image.
//!
//! Admin handlers call these functions rather than the log manager, so that the KRaft
//! controller can take this module's place (writing the records to the quorum instead of
//! publishing them directly) without touching a handler.

use std::collections::BTreeMap;
use std::sync::Arc;

use strom_metadata::{
    BrokerId, Endpoint, LeaderEpoch, MetadataImage, MetadataRecord, PartitionEpoch,
};
use uuid::Uuid;

use crate::log_manager::LogManager;
use crate::topic::Topic;
use crate::{ApiError, BrokerConfig, BrokerState};

/// The image a standalone node starts with: itself, registered with the advertised
/// endpoint of each of its client listeners and never fenced, and every topic its logs
/// hold.
pub fn initial_image(
    config: &BrokerConfig,
    endpoints: Vec<Endpoint>,
    logs: &LogManager,
) -> MetadataImage {
    let node = config.node_id;
    let mut records = vec![MetadataRecord::RegisterBroker {
        broker_id: BrokerId(node),
        incarnation_id: Uuid::nil(),
        endpoints,
        rack: None,
        fenced: false,
    }];
    for topic in logs.topics() {
        records.extend(topic_records(node, &topic));
    }
    MetadataImage::new(logs.cluster_id(), node).apply(&records)
}

/// The partition records of partitions `from..to` of topic `id`.
fn partition_records(node: i32, id: Uuid, from: i32, to: i32) -> Vec<MetadataRecord> {
    (from..to)
        .map(|partition_id| MetadataRecord::Partition {
            topic_id: id,
            partition_id,
            replicas: vec![BrokerId(node)],
            isr: vec![BrokerId(node)],
            leader: BrokerId(node),
            leader_epoch: LeaderEpoch(0),
            partition_epoch: PartitionEpoch(0),
        })
        .collect()
}

/// The records describing `topic` as it is now.
pub fn topic_records(node: i32, topic: &Topic) -> Vec<MetadataRecord> {
    let mut records = vec![MetadataRecord::Topic {
        name: topic.name.clone(),
        topic_id: topic.id,
    }];
    records.extend(partition_records(
        node,
        topic.id,
        0,
        topic.partition_count(),
    ));
    records
}

/// Creates a topic in the log and publishes it.
pub fn create_topic(
    state: &BrokerState,
    name: &str,
    partitions: i32,
    configs: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<Arc<Topic>, ApiError> {
    state.metadata.change(|| {
        let topic = state
            .logs
            .create_topic(name, partitions, configs, validate_only)?;
        if !validate_only {
            state
                .metadata
                .publish(&topic_records(state.node_id(), &topic));
        }
        Ok(topic)
    })
}

/// Grows a topic in the log and publishes its new partitions.
pub fn create_partitions(
    state: &BrokerState,
    name: &str,
    count: i32,
    validate_only: bool,
) -> Result<(), ApiError> {
    state.metadata.change(|| {
        let before = state.logs.topic(name).map_or(0, |t| t.partition_count());
        state.logs.create_partitions(name, count, validate_only)?;
        if let Some(topic) = state.logs.topic(name).filter(|_| !validate_only) {
            state.metadata.publish(&partition_records(
                state.node_id(),
                topic.id,
                before,
                topic.partition_count(),
            ));
        }
        Ok(())
    })
}

/// Deletes a topic from the log and publishes its removal.
pub fn delete_topic(state: &BrokerState, name: &str) -> Result<Uuid, ApiError> {
    state.metadata.change(|| {
        let id = state.logs.delete_topic(name)?;
        state
            .metadata
            .publish(&[MetadataRecord::RemoveTopic { topic_id: id }]);
        Ok(id)
    })
}
