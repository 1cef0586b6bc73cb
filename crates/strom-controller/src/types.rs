//! openraft's type configuration for the metadata log: an entry's data is one batch of
//! metadata records, written by the active controller as one unit, so the records of one
//! change (a topic and its partitions, a fence and its elections) are applied together.

use std::io::Cursor;

use openraft::BasicNode;
use serde::{Deserialize, Serialize};
use strom_metadata::MetadataRecord;

/// One batch of metadata records: the data of one Raft entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataBatch(pub Vec<MetadataRecord>);

openraft::declare_raft_types!(
    /// The metadata quorum's Raft types: node ids are Kafka node ids (`node.id`), a node
    /// is known by its controller endpoint (`host:port`).
    pub TypeConfig:
        D = MetadataBatch,
        R = (),
        NodeId = u64,
        Node = BasicNode,
        SnapshotData = Cursor<Vec<u8>>,
);

pub type Raft = openraft::Raft<TypeConfig>;
pub type NodeId = u64;
pub type Entry = openraft::Entry<TypeConfig>;
pub type LogId = openraft::LogId<NodeId>;
pub type Vote = openraft::Vote<NodeId>;
pub type StorageError = openraft::StorageError<NodeId>;
pub type StoredMembership = openraft::StoredMembership<NodeId, BasicNode>;
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, BasicNode>;
