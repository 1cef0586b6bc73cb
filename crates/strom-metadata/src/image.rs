//! The immutable metadata image: brokers, and topics by name and by id with their
//! partition registrations. [`MetadataImage::apply`] replays records into a new image and
//! shares every topic it did not touch with the old one (the maps are copied, the topics
//! and their partition lists are not), so readers holding the old image are never blocked.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use uuid::Uuid;

use crate::{BrokerId, LeaderEpoch, MetadataRecord, PartitionEpoch};

/// Where a broker listens, per listener name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub listener: String,
    pub host: String,
    pub port: u16,
}

/// A registered broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerRegistration {
    pub id: BrokerId,
    pub epoch: i64,
    pub endpoints: Vec<Endpoint>,
    pub rack: Option<String>,
    pub fenced: bool,
}

impl BrokerRegistration {
    /// The endpoint of `listener`, or the first one when the listener is not known.
    pub fn endpoint(&self, listener: &str) -> Option<&Endpoint> {
        self.endpoints
            .iter()
            .find(|e| e.listener == listener)
            .or_else(|| self.endpoints.first())
    }
}

/// One partition's registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRegistration {
    pub replicas: Vec<BrokerId>,
    pub isr: Vec<BrokerId>,
    pub leader: BrokerId,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: PartitionEpoch,
}

/// A topic and its partitions, indexed by partition id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicImage {
    pub name: String,
    pub id: Uuid,
    pub partitions: Vec<PartitionRegistration>,
}

impl TopicImage {
    /// Kafka's internal topics (`__consumer_offsets`, …) are named with two underscores.
    pub fn is_internal(&self) -> bool {
        self.name.starts_with("__")
    }
}

/// The cluster as the last applied records describe it.
#[derive(Debug, Clone, Default)]
pub struct MetadataImage {
    pub cluster_id: String,
    /// The active controller, -1 when there is none.
    pub controller_id: i32,
    pub brokers: BTreeMap<BrokerId, BrokerRegistration>,
    topics_by_name: BTreeMap<String, Arc<TopicImage>>,
    topics_by_id: HashMap<Uuid, Arc<TopicImage>>,
}

impl MetadataImage {
    /// An empty image of cluster `cluster_id`.
    pub fn new(cluster_id: &str, controller_id: i32) -> Self {
        Self {
            cluster_id: cluster_id.to_string(),
            controller_id,
            ..Self::default()
        }
    }

    pub fn topic(&self, name: &str) -> Option<&Arc<TopicImage>> {
        self.topics_by_name.get(name)
    }

    pub fn topic_by_id(&self, id: Uuid) -> Option<&Arc<TopicImage>> {
        self.topics_by_id.get(&id)
    }

    /// Every topic, sorted by name.
    pub fn topics(&self) -> impl Iterator<Item = &Arc<TopicImage>> {
        self.topics_by_name.values()
    }

    /// The brokers clients may use: registered and not fenced.
    pub fn live_brokers(&self) -> impl Iterator<Item = &BrokerRegistration> {
        self.brokers.values().filter(|b| !b.fenced)
    }

    /// The image after `records`. Records about a topic that does not exist are a bug
    /// of whoever wrote them: they are asserted, not skipped.
    pub fn apply(&self, records: &[MetadataRecord]) -> Self {
        let mut next = self.clone();
        for record in records {
            next.replay(record);
        }
        next
    }

    fn replay(&mut self, record: &MetadataRecord) {
        match record {
            MetadataRecord::RegisterBroker {
                broker_id,
                broker_epoch,
                endpoints,
                rack,
                fenced,
            } => {
                self.brokers.insert(
                    *broker_id,
                    BrokerRegistration {
                        id: *broker_id,
                        epoch: *broker_epoch,
                        endpoints: endpoints.clone(),
                        rack: rack.clone(),
                        fenced: *fenced,
                    },
                );
            }
            MetadataRecord::Topic { name, topic_id } => {
                let topic = Arc::new(TopicImage {
                    name: name.clone(),
                    id: *topic_id,
                    partitions: Vec::new(),
                });
                assert!(
                    self.topics_by_name
                        .insert(name.clone(), topic.clone())
                        .is_none(),
                    "TopicRecord for existing topic {name}"
                );
                self.topics_by_id.insert(*topic_id, topic);
            }
            MetadataRecord::Partition {
                topic_id,
                partition_id,
                replicas,
                isr,
                leader,
                leader_epoch,
                partition_epoch,
            } => {
                let old = self
                    .topics_by_id
                    .get(topic_id)
                    .unwrap_or_else(|| panic!("PartitionRecord for unknown topic {topic_id}"));
                let mut topic = TopicImage::clone(old);
                assert_eq!(
                    *partition_id as usize,
                    topic.partitions.len(),
                    "partitions of {} are created in order",
                    topic.name
                );
                topic.partitions.push(PartitionRegistration {
                    replicas: replicas.clone(),
                    isr: isr.clone(),
                    leader: *leader,
                    leader_epoch: *leader_epoch,
                    partition_epoch: *partition_epoch,
                });
                let topic = Arc::new(topic);
                self.topics_by_name
                    .insert(topic.name.clone(), topic.clone());
                self.topics_by_id.insert(*topic_id, topic);
            }
            MetadataRecord::RemoveTopic { topic_id } => {
                let topic = self
                    .topics_by_id
                    .remove(topic_id)
                    .unwrap_or_else(|| panic!("RemoveTopicRecord for unknown topic {topic_id}"));
                self.topics_by_name.remove(&topic.name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(topic_id: Uuid, partition_id: i32) -> MetadataRecord {
        MetadataRecord::Partition {
            topic_id,
            partition_id,
            replicas: vec![BrokerId(1)],
            isr: vec![BrokerId(1)],
            leader: BrokerId(1),
            leader_epoch: LeaderEpoch(0),
            partition_epoch: PartitionEpoch(0),
        }
    }

    #[test]
    fn replaying_records_builds_topics_by_name_and_id() {
        let id = Uuid::new_v4();
        let image = MetadataImage::new("c", 1).apply(&[
            MetadataRecord::RegisterBroker {
                broker_id: BrokerId(1),
                broker_epoch: 0,
                endpoints: vec![Endpoint {
                    listener: "PLAINTEXT".into(),
                    host: "h".into(),
                    port: 9092,
                }],
                rack: None,
                fenced: false,
            },
            MetadataRecord::Topic {
                name: "t".into(),
                topic_id: id,
            },
            partition(id, 0),
            partition(id, 1),
        ]);
        assert_eq!(image.topic("t").unwrap().partitions.len(), 2);
        assert_eq!(image.topic_by_id(id).unwrap().name, "t");
        assert_eq!(image.live_brokers().count(), 1);
        let removed = image.apply(&[MetadataRecord::RemoveTopic { topic_id: id }]);
        assert!(removed.topic("t").is_none() && removed.topic_by_id(id).is_none());
        assert!(image.topic("t").is_some(), "the old image is unchanged");
    }

    #[test]
    fn untouched_topics_are_shared_with_the_previous_image() {
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let image = MetadataImage::new("c", 1).apply(&[
            MetadataRecord::Topic {
                name: "a".into(),
                topic_id: a,
            },
            partition(a, 0),
        ]);
        let next = image.apply(&[
            MetadataRecord::Topic {
                name: "b".into(),
                topic_id: b,
            },
            partition(b, 0),
        ]);
        assert!(Arc::ptr_eq(
            image.topic("a").unwrap(),
            next.topic("a").unwrap()
        ));
    }
}
