//! The immutable metadata image: brokers, topics by name and by id with their partition
//! registrations, configs and the producer-id high-water mark. [`MetadataImage::apply_at`]
//! replays records into a new image and shares every topic it did not touch with the old
//! one (the maps are copied, the topics and their partition lists are not), so readers
//! holding the old image are never blocked.
//!
//! Records that contradict the image (a partition of an unknown topic, an epoch going
//! back) are a bug of the controller that wrote them: they are asserted, not skipped.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{BrokerId, ConfigResource, LeaderEpoch, MetadataRecord, PartitionEpoch};

/// Where a broker listens, per listener name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    pub listener: String,
    pub host: String,
    pub port: u16,
}

/// A registered broker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    pub id: BrokerId,
    /// The metadata offset of its `RegisterBrokerRecord`.
    pub epoch: i64,
    pub incarnation_id: Uuid,
    pub endpoints: Vec<Endpoint>,
    pub rack: Option<String>,
    pub fenced: bool,
    pub in_controlled_shutdown: bool,
}

impl BrokerRegistration {
    /// The endpoint of `listener`, or the first one when the listener is not known.
    pub fn endpoint(&self, listener: &str) -> Option<&Endpoint> {
        self.endpoints
            .iter()
            .find(|e| e.listener == listener)
            .or_else(|| self.endpoints.first())
    }

    /// Whether it may lead partitions and join ISRs: unfenced and not shutting down.
    pub fn is_active(&self) -> bool {
        !self.fenced && !self.in_controlled_shutdown
    }
}

/// One partition's registration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRegistration {
    pub replicas: Vec<BrokerId>,
    pub isr: Vec<BrokerId>,
    pub leader: BrokerId,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: PartitionEpoch,
}

impl PartitionRegistration {
    /// Whether the partition has a leader (-1 when none can be elected).
    pub fn has_leader(&self) -> bool {
        self.leader != BrokerId::NONE
    }
}

/// A topic and its partitions, indexed by partition id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

    /// The replication factor (of partition 0; Kafka's tools print it so).
    pub fn replication_factor(&self) -> usize {
        self.partitions.first().map_or(0, |p| p.replicas.len())
    }
}

/// The cluster as the last applied records describe it.
#[derive(Debug, Clone, Default)]
pub struct MetadataImage {
    pub cluster_id: String,
    /// The metadata offset of the last record applied (-1: none).
    pub offset: i64,
    /// The active controller, -1 when there is none.
    pub controller_id: i32,
    pub brokers: BTreeMap<BrokerId, BrokerRegistration>,
    topics_by_name: BTreeMap<String, Arc<TopicImage>>,
    topics_by_id: HashMap<Uuid, Arc<TopicImage>>,
    /// Config overrides per resource (`ConfigRecord`s).
    pub configs: BTreeMap<ConfigResource, BTreeMap<String, String>>,
    /// The first producer id no block has handed out.
    pub next_producer_id: i64,
}

/// The serialized form of an image (metadata snapshots).
#[derive(Serialize, Deserialize)]
struct ImageSnapshot {
    cluster_id: String,
    offset: i64,
    brokers: Vec<BrokerRegistration>,
    topics: Vec<TopicImage>,
    configs: Vec<(ConfigResource, BTreeMap<String, String>)>,
    next_producer_id: i64,
}

impl MetadataImage {
    /// Whether `broker` leads every partition it is a replica of.
    pub fn leads_every_partition_it_hosts(&self, broker: BrokerId) -> bool {
        self.topics_by_name
            .values()
            .flat_map(|t| &t.partitions)
            .filter(|p| p.replicas.contains(&broker))
            .all(|p| p.leader == broker)
    }

    /// An empty image of cluster `cluster_id`.
    pub fn new(cluster_id: &str, controller_id: i32) -> Self {
        Self {
            cluster_id: cluster_id.to_string(),
            offset: -1,
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

    /// How many partitions all topics have.
    pub fn partition_count(&self) -> usize {
        self.topics_by_name
            .values()
            .map(|t| t.partitions.len())
            .sum()
    }

    /// The brokers clients may use: registered and not fenced.
    pub fn live_brokers(&self) -> impl Iterator<Item = &BrokerRegistration> {
        self.brokers.values().filter(|b| !b.fenced)
    }

    /// The controller id clients are told (Metadata, DescribeCluster). A KRaft broker
    /// forwards admin requests to the quorum itself, so, as Kafka does, clients are
    /// pointed at a live broker: the active controller when it is one (a combined node),
    /// else the first live broker; -1 when none is live.
    pub fn client_controller_id(&self) -> i32 {
        let live = |id: i32| self.brokers.get(&BrokerId(id)).is_some_and(|b| !b.fenced);
        if live(self.controller_id) {
            return self.controller_id;
        }
        self.live_brokers().next().map_or(-1, |b| b.id.0)
    }

    /// Whether broker `id` is registered, unfenced and not shutting down.
    pub fn is_active(&self, id: BrokerId) -> bool {
        self.brokers
            .get(&id)
            .is_some_and(BrokerRegistration::is_active)
    }

    /// Whether broker `id`, fetching as the incarnation of `broker_epoch` (-1: not
    /// said), may join an ISR (Kafka's `Partition.isReplicaIsrEligible`): active, and
    /// (KIP-903) that incarnation the registered one. The controller refuses any other
    /// with INELIGIBLE_REPLICA.
    pub fn is_isr_eligible(&self, id: BrokerId, broker_epoch: i64) -> bool {
        self.brokers
            .get(&id)
            .is_some_and(|b| b.is_active() && (broker_epoch == -1 || b.epoch == broker_epoch))
    }

    /// A topic's config overrides.
    pub fn topic_configs(&self, name: &str) -> BTreeMap<String, String> {
        self.configs
            .get(&ConfigResource::Topic(name.to_string()))
            .cloned()
            .unwrap_or_default()
    }

    /// The image after `records` written at metadata offset `offset`.
    pub fn apply_at(&self, offset: i64, records: &[MetadataRecord]) -> Self {
        assert!(
            offset >= self.offset,
            "metadata offsets only grow: {offset} after {}",
            self.offset
        );
        let mut next = self.clone();
        next.offset = offset;
        // Topics changed by these records, each copied once and published at the end: a
        // copy per record made creating (or failing over) a topic of P partitions cost
        // O(P²) partition copies — 0.7 s of start-up at 13,300 partitions.
        let mut edited = HashMap::new();
        for record in records {
            next.replay(offset, record, &mut edited);
        }
        for topic in edited.into_values() {
            next.replace_topic(topic);
        }
        next
    }

    /// [`Self::apply_at`] the current offset (a standalone node, which has no log).
    pub fn apply(&self, records: &[MetadataRecord]) -> Self {
        self.apply_at(self.offset.max(0), records)
    }

    /// The image as bytes, for a metadata snapshot.
    pub fn to_snapshot(&self) -> Vec<u8> {
        let snapshot = ImageSnapshot {
            cluster_id: self.cluster_id.clone(),
            offset: self.offset,
            brokers: self.brokers.values().cloned().collect(),
            topics: self.topics().map(|t| TopicImage::clone(t)).collect(),
            configs: self
                .configs
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            next_producer_id: self.next_producer_id,
        };
        serde_json::to_vec(&snapshot).expect("an image always serializes")
    }

    /// The image a snapshot holds.
    pub fn from_snapshot(bytes: &[u8]) -> Result<Self, String> {
        let s: ImageSnapshot = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        let mut image = MetadataImage::new(&s.cluster_id, -1);
        image.offset = s.offset;
        image.next_producer_id = s.next_producer_id;
        image.brokers = s.brokers.into_iter().map(|b| (b.id, b)).collect();
        image.configs = s.configs.into_iter().collect();
        for topic in s.topics {
            let topic = Arc::new(topic);
            image.topics_by_id.insert(topic.id, topic.clone());
            image.topics_by_name.insert(topic.name.clone(), topic);
        }
        Ok(image)
    }

    fn replace_topic(&mut self, topic: TopicImage) {
        let topic = Arc::new(topic);
        self.topics_by_name
            .insert(topic.name.clone(), topic.clone());
        self.topics_by_id.insert(topic.id, topic);
    }

    /// The working copy of topic `topic_id` among the `edited` ones of an
    /// [`Self::apply_at`], copied from the image on its first change.
    fn topic_mut<'a>(
        &self,
        edited: &'a mut HashMap<Uuid, TopicImage>,
        topic_id: &Uuid,
        what: &str,
    ) -> &'a mut TopicImage {
        edited.entry(*topic_id).or_insert_with(|| {
            let old = self
                .topics_by_id
                .get(topic_id)
                .unwrap_or_else(|| panic!("{what} for unknown topic {topic_id}"));
            TopicImage::clone(old)
        })
    }

    fn replay(
        &mut self,
        offset: i64,
        record: &MetadataRecord,
        edited: &mut HashMap<Uuid, TopicImage>,
    ) {
        match record {
            MetadataRecord::RegisterBroker {
                broker_id,
                incarnation_id,
                endpoints,
                rack,
                fenced,
            } => {
                self.brokers.insert(
                    *broker_id,
                    BrokerRegistration {
                        id: *broker_id,
                        epoch: offset,
                        incarnation_id: *incarnation_id,
                        endpoints: endpoints.clone(),
                        rack: rack.clone(),
                        fenced: *fenced,
                        in_controlled_shutdown: false,
                    },
                );
            }
            MetadataRecord::UnregisterBroker {
                broker_id,
                broker_epoch,
            } => {
                if self
                    .brokers
                    .get(broker_id)
                    .is_some_and(|b| b.epoch == *broker_epoch)
                {
                    self.brokers.remove(broker_id);
                }
            }
            MetadataRecord::BrokerRegistrationChange {
                broker_id,
                broker_epoch,
                fenced,
                in_controlled_shutdown,
            } => {
                let broker = self.brokers.get_mut(broker_id).unwrap_or_else(|| {
                    panic!("registration change of unknown broker {broker_id:?}")
                });
                assert_eq!(
                    broker.epoch, *broker_epoch,
                    "change of a stale registration"
                );
                if let Some(fenced) = fenced {
                    broker.fenced = *fenced;
                }
                if let Some(shutting_down) = in_controlled_shutdown {
                    broker.in_controlled_shutdown = *shutting_down;
                }
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
                let topic = self.topic_mut(edited, topic_id, "PartitionRecord");
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
            }
            MetadataRecord::PartitionChange {
                topic_id,
                partition_id,
                leader,
                isr,
            } => {
                let topic = self.topic_mut(edited, topic_id, "PartitionChangeRecord");
                let p = topic
                    .partitions
                    .get_mut(*partition_id as usize)
                    .unwrap_or_else(|| {
                        panic!("PartitionChangeRecord for unknown partition {partition_id}")
                    });
                if let Some(leader) = leader.filter(|l| *l != p.leader) {
                    p.leader = leader;
                    p.leader_epoch = LeaderEpoch(p.leader_epoch.0 + 1);
                }
                if let Some(isr) = isr {
                    assert!(!isr.is_empty(), "an ISR is never emptied");
                    p.isr = isr.clone();
                }
                p.partition_epoch = PartitionEpoch(p.partition_epoch.0 + 1);
            }
            MetadataRecord::Config {
                resource,
                name,
                value,
            } => {
                let configs = self.configs.entry(resource.clone()).or_default();
                match value {
                    Some(v) => {
                        configs.insert(name.clone(), v.clone());
                    }
                    None => {
                        configs.remove(name);
                    }
                }
                if configs.is_empty() {
                    self.configs.remove(resource);
                }
            }
            MetadataRecord::RemoveTopic { topic_id } => {
                edited.remove(topic_id);
                let topic = self
                    .topics_by_id
                    .remove(topic_id)
                    .unwrap_or_else(|| panic!("RemoveTopicRecord for unknown topic {topic_id}"));
                self.topics_by_name.remove(&topic.name);
                self.configs
                    .remove(&ConfigResource::Topic(topic.name.clone()));
            }
            MetadataRecord::ProducerIds {
                next_producer_id, ..
            } => {
                assert!(
                    *next_producer_id > self.next_producer_id,
                    "producer id blocks only move forward"
                );
                self.next_producer_id = *next_producer_id;
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

    /// Only an active broker, fetching as its registered incarnation, may join an ISR.
    #[test]
    fn isr_eligibility_is_an_active_registration_of_the_fetching_incarnation() {
        let registration = |epoch, fenced, in_controlled_shutdown| BrokerRegistration {
            id: BrokerId(2),
            epoch,
            incarnation_id: Uuid::nil(),
            endpoints: Vec::new(),
            rack: None,
            fenced,
            in_controlled_shutdown,
        };
        let mut image = MetadataImage::default();
        assert!(!image.is_isr_eligible(BrokerId(2), -1), "not registered");
        image
            .brokers
            .insert(BrokerId(2), registration(40, true, false));
        assert!(!image.is_isr_eligible(BrokerId(2), 40), "fenced");
        image
            .brokers
            .insert(BrokerId(2), registration(40, false, true));
        assert!(!image.is_isr_eligible(BrokerId(2), 40), "shutting down");
        image
            .brokers
            .insert(BrokerId(2), registration(40, false, false));
        assert!(image.is_isr_eligible(BrokerId(2), 40));
        assert!(image.is_isr_eligible(BrokerId(2), -1), "an epoch not said");
        assert!(
            !image.is_isr_eligible(BrokerId(2), 12),
            "an incarnation that has since re-registered"
        );
    }

    #[test]
    fn replaying_records_builds_topics_by_name_and_id() {
        let id = Uuid::new_v4();
        let image = MetadataImage::new("c", 1).apply(&[
            MetadataRecord::RegisterBroker {
                broker_id: BrokerId(1),
                incarnation_id: Uuid::nil(),
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

    #[test]
    fn a_partition_change_bumps_the_leader_epoch_only_when_the_leader_changes() {
        let id = Uuid::new_v4();
        let image = MetadataImage::new("c", 1).apply_at(
            3,
            &[
                MetadataRecord::Topic {
                    name: "t".into(),
                    topic_id: id,
                },
                partition(id, 0),
            ],
        );
        let shrunk = image.apply_at(
            4,
            &[MetadataRecord::PartitionChange {
                topic_id: id,
                partition_id: 0,
                leader: None,
                isr: Some(vec![BrokerId(1)]),
            }],
        );
        let p = &shrunk.topic("t").unwrap().partitions[0];
        assert_eq!(
            (p.leader_epoch, p.partition_epoch),
            (LeaderEpoch(0), PartitionEpoch(1))
        );
        let moved = shrunk.apply_at(
            5,
            &[MetadataRecord::PartitionChange {
                topic_id: id,
                partition_id: 0,
                leader: Some(BrokerId(2)),
                isr: None,
            }],
        );
        let p = &moved.topic("t").unwrap().partitions[0];
        assert_eq!(
            (p.leader, p.leader_epoch, p.partition_epoch),
            (BrokerId(2), LeaderEpoch(1), PartitionEpoch(2))
        );
        assert_eq!(moved.offset, 5);
    }

    #[test]
    fn a_snapshot_restores_the_same_image() {
        let id = Uuid::new_v4();
        let image = MetadataImage::new("c", 1).apply_at(
            7,
            &[
                MetadataRecord::RegisterBroker {
                    broker_id: BrokerId(2),
                    incarnation_id: Uuid::new_v4(),
                    endpoints: vec![],
                    rack: Some("r".into()),
                    fenced: true,
                },
                MetadataRecord::Topic {
                    name: "t".into(),
                    topic_id: id,
                },
                partition(id, 0),
                MetadataRecord::Config {
                    resource: ConfigResource::Topic("t".into()),
                    name: "retention.ms".into(),
                    value: Some("1".into()),
                },
                MetadataRecord::ProducerIds {
                    broker_id: BrokerId(2),
                    broker_epoch: 7,
                    next_producer_id: 1000,
                },
            ],
        );
        let restored = MetadataImage::from_snapshot(&image.to_snapshot()).unwrap();
        assert_eq!(restored.offset, 7);
        assert_eq!(restored.brokers, image.brokers);
        assert_eq!(restored.brokers[&BrokerId(2)].epoch, 7);
        assert_eq!(restored.topic_by_id(id), image.topic_by_id(id));
        assert_eq!(
            restored
                .topic_configs("t")
                .get("retention.ms")
                .map(String::as_str),
            Some("1")
        );
        assert_eq!(restored.next_producer_id, 1000);
    }
}
