//! The cluster's metadata as KRaft models it, with no runtime and no I/O: newtype ids,
//! metadata records named as Kafka's (`RegisterBrokerRecord`, `TopicRecord`,
//! `PartitionRecord`, `PartitionChangeRecord`, `ConfigRecord`, …) and the immutable
//! [`MetadataImage`] that replaying them builds. Both planes read the image: the request
//! handlers (Metadata, DescribeCluster, FindCoordinator), the replica manager, and the
//! controller, whose managers decide every change against it.

pub mod ids;
pub mod image;
pub mod records;

pub use ids::{BrokerId, LeaderEpoch, PartitionEpoch};
pub use image::{BrokerRegistration, Endpoint, MetadataImage, PartitionRegistration, TopicImage};
pub use records::{ConfigResource, MetadataRecord};
