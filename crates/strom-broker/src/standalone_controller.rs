//! The controller of a standalone node: the one place where "this broker is the whole
//! cluster" is decided. It registers this broker, and turns each topic change of the log
//! manager into Kafka's metadata records with this broker as the only replica, leader and
//! ISR member at leader epoch 0 (a partition start-up has not opened yet has no leader),
//! which it publishes to the metadata image.
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
use crate::partition::Partition;
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

/// The record of partition `partition_id` of topic `id`: led by this node in leader
/// epoch 0 once its log is open; while start-up is still opening it, without a leader
/// (LEADER_NOT_AVAILABLE to clients) in the epoch before, so that the change to this node
/// ([`partitions_loaded`]) brings it to 0.
fn partition_record(node: i32, id: Uuid, partition_id: i32, serving: bool) -> MetadataRecord {
    MetadataRecord::Partition {
        topic_id: id,
        partition_id,
        replicas: vec![BrokerId(node)],
        isr: vec![BrokerId(node)],
        leader: if serving {
            BrokerId(node)
        } else {
            BrokerId::NONE
        },
        leader_epoch: LeaderEpoch(if serving { 0 } else { -1 }),
        partition_epoch: PartitionEpoch(0),
    }
}

/// The records describing `topic` as it is now.
fn topic_records(node: i32, topic: &Topic) -> Vec<MetadataRecord> {
    let mut records = vec![MetadataRecord::Topic {
        name: topic.name.clone(),
        topic_id: topic.id,
    }];
    records.extend(
        topic
            .hosted()
            .iter()
            .map(|p| partition_record(node, topic.id, p.index, !p.is_loading())),
    );
    records
}

/// Publishes that start-up opened `partitions`: this node leads them from now on.
pub fn partitions_loaded(state: &BrokerState, partitions: &[Arc<Partition>]) {
    let records: Vec<MetadataRecord> = partitions
        .iter()
        .filter_map(|p| {
            Some(MetadataRecord::PartitionChange {
                topic_id: state.logs.topic(&p.topic)?.id,
                partition_id: p.index,
                leader: Some(BrokerId(state.node_id())),
                isr: None,
            })
        })
        .collect();
    state.metadata.publish(&records);
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
            let records: Vec<MetadataRecord> = (before..topic.partition_count())
                .map(|p| partition_record(state.node_id(), topic.id, p, true))
                .collect();
            state.metadata.publish(&records);
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
