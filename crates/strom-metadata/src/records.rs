//! Metadata records, by name and meaning Kafka's (`metadata/src/main/resources/common/
//! metadata/*.json`), in strom's own encoding (serde). A record never carries what its
//! position in the metadata log says: a broker's epoch is the offset of its
//! `RegisterBrokerRecord`, as in Kafka, and the image takes it from the offset it is
//! applied at.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{BrokerId, Endpoint, LeaderEpoch, PartitionEpoch};

/// What a `ConfigRecord` configures.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ConfigResource {
    Topic(String),
    /// A broker's dynamic configs; `None` is the cluster-wide default (`--entity-default`).
    Broker(Option<BrokerId>),
}

/// One metadata record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetadataRecord {
    /// `RegisterBrokerRecord`: a broker registered (or re-registered with a new
    /// incarnation); it starts fenced unless `fenced` is false (a standalone node).
    RegisterBroker {
        broker_id: BrokerId,
        incarnation_id: Uuid,
        endpoints: Vec<Endpoint>,
        rack: Option<String>,
        fenced: bool,
    },
    /// `UnregisterBrokerRecord`.
    UnregisterBroker {
        broker_id: BrokerId,
        broker_epoch: i64,
    },
    /// `BrokerRegistrationChangeRecord`: fenced / unfenced, in controlled shutdown.
    /// `None` leaves a field unchanged.
    BrokerRegistrationChange {
        broker_id: BrokerId,
        broker_epoch: i64,
        fenced: Option<bool>,
        in_controlled_shutdown: Option<bool>,
    },
    /// `TopicRecord`: a topic was created.
    Topic { name: String, topic_id: Uuid },
    /// `PartitionRecord`: a partition was created, with its whole registration.
    Partition {
        topic_id: Uuid,
        partition_id: i32,
        replicas: Vec<BrokerId>,
        isr: Vec<BrokerId>,
        /// -1 when the partition has no leader.
        leader: BrokerId,
        leader_epoch: LeaderEpoch,
        partition_epoch: PartitionEpoch,
    },
    /// `PartitionChangeRecord`: only what changed (`None`: unchanged). Applying it bumps
    /// the partition epoch, and the leader epoch when the leader changes.
    PartitionChange {
        topic_id: Uuid,
        partition_id: i32,
        leader: Option<BrokerId>,
        isr: Option<Vec<BrokerId>>,
    },
    /// `ConfigRecord`: sets (`Some`) or removes (`None`) one config key.
    Config {
        resource: ConfigResource,
        name: String,
        value: Option<String>,
    },
    /// `RemoveTopicRecord`: a topic and all its partitions were removed.
    RemoveTopic { topic_id: Uuid },
    /// `ProducerIdsRecord`: the block of producer ids below `next_producer_id` is taken.
    ProducerIds {
        broker_id: BrokerId,
        broker_epoch: i64,
        next_producer_id: i64,
    },
}
