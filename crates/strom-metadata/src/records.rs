//! Metadata records, by name and meaning Kafka's (`metadata/src/main/resources/common/
//! metadata/*.json`), in strom's own in-memory form. Only the records the broker produces
//! today are here; the controller quorum adds `PartitionChangeRecord`,
//! `BrokerRegistrationChangeRecord`, `ConfigRecord` and `ProducerIdsRecord`.

use uuid::Uuid;

use crate::{BrokerId, Endpoint, LeaderEpoch, PartitionEpoch};

/// One metadata record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataRecord {
    /// A broker registered (or re-registered) with its endpoints.
    RegisterBroker {
        broker_id: BrokerId,
        /// The offset of this record when the quorum writes it; 0 standalone.
        broker_epoch: i64,
        endpoints: Vec<Endpoint>,
        rack: Option<String>,
        fenced: bool,
    },
    /// A topic was created.
    Topic { name: String, topic_id: Uuid },
    /// A partition was created, with its whole registration.
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
    /// A topic and all its partitions were removed.
    RemoveTopic { topic_id: Uuid },
}
