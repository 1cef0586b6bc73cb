//! A topic: its id, its configs and its partitions, and the small file that persists the
//! first two across restarts.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::Arc;

use kafka_protocol::ResponseError;
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::BrokerError;
use strom_replica::partition::Partition;
use strom_wire::ApiError;

/// One topic hosted by the broker: the partitions of which it is a replica.
#[derive(Debug)]
pub struct Topic {
    pub name: String,
    pub id: Uuid,
    pub configs: RwLock<BTreeMap<String, String>>,
    pub partitions: RwLock<BTreeMap<i32, Arc<Partition>>>,
}

impl Topic {
    pub fn partition(&self, index: i32) -> Option<Arc<Partition>> {
        self.partitions.read().get(&index).cloned()
    }

    /// How many partitions this broker hosts.
    pub fn partition_count(&self) -> i32 {
        self.partitions.read().len() as i32
    }

    /// The partitions hosted here, by index.
    pub fn hosted(&self) -> Vec<Arc<Partition>> {
        self.partitions.read().values().cloned().collect()
    }

    /// What is persisted of this topic.
    pub fn record(&self) -> TopicRecord {
        let indexes: Vec<i32> = self.partitions.read().keys().copied().collect();
        let contiguous = indexes.iter().enumerate().all(|(i, p)| *p == i as i32);
        TopicRecord {
            id: self.id,
            partitions: indexes.len() as i32,
            hosted: (!contiguous).then_some(indexes),
            configs: self.configs.read().clone(),
        }
    }
}

/// The persisted description of a topic, `<metadata dir>/topics/<name>.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TopicRecord {
    pub id: Uuid,
    /// How many partitions are hosted here.
    pub partitions: i32,
    /// Which ones, when they are not `0..partitions` (a broker of a cluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosted: Option<Vec<i32>>,
    pub configs: BTreeMap<String, String>,
}

impl TopicRecord {
    /// The indexes of the hosted partitions.
    pub fn indexes(&self) -> Vec<i32> {
        self.hosted
            .clone()
            .unwrap_or_else(|| (0..self.partitions).collect())
    }
}

impl TopicRecord {
    /// Writes the record atomically ([`strom_log::durable_file::replace_atomically`]).
    pub fn write(&self, dir: &Path, name: &str) -> Result<(), BrokerError> {
        let json = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        strom_log::durable_file::replace_atomically(&dir.join(format!("{name}.json")), &json)?;
        Ok(())
    }

    /// Reads every topic record in `dir`.
    pub fn read_all(dir: &Path) -> Result<Vec<(String, TopicRecord)>, BrokerError> {
        let mut out = Vec::new();
        let entries = match fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(e.into()),
        };
        for entry in entries {
            let path = entry?.path();
            let Some(name) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".json"))
            else {
                continue;
            };
            let record = serde_json::from_slice(&fs::read(&path)?)
                .map_err(|e| BrokerError::Corrupt(format!("{}: {e}", path.display())))?;
            out.push((name.to_string(), record));
        }
        Ok(out)
    }

    pub fn delete(dir: &Path, name: &str) -> Result<(), BrokerError> {
        fs::remove_file(dir.join(format!("{name}.json")))?;
        Ok(())
    }
}

/// The metadata log's topic, which no client may create: its partition's directory would
/// be the metadata log's own (`__cluster_metadata-0`).
pub const CLUSTER_METADATA_TOPIC: &str = "__cluster_metadata";

/// Checks that a topic named `name` may be created (CreateTopics, auto-creation), with
/// Kafka's errors: INVALID_TOPIC_EXCEPTION for an illegal name, INVALID_REQUEST for the
/// metadata log's.
pub fn check_creatable(name: &str) -> Result<(), ApiError> {
    validate_topic_name(name)
        .map_err(|m| ApiError::new(ResponseError::InvalidTopicException, m))?;
    if name == CLUSTER_METADATA_TOPIC {
        return Err(ApiError::new(
            ResponseError::InvalidRequest,
            format!("Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited."),
        ));
    }
    Ok(())
}

/// Checks a topic name as Kafka does, returning the reason it is invalid.
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("Topic name is illegal, it can't be empty".into());
    }
    if name == "." || name == ".." {
        return Err("Topic name cannot be \".\" or \"..\"".into());
    }
    if name.len() > 249 {
        return Err(format!(
            "Topic name is illegal, it can't be longer than 249 characters, topic name: {name}"
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-')
    {
        return Err(format!(
            "Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name of the longest length Kafka allows is written, rewritten and read back, and
    /// no temp file is left beside it.
    #[test]
    fn a_topic_of_the_longest_legal_name_is_stored() {
        let dir = tempfile::tempdir().unwrap();
        let name = "q".repeat(249);
        validate_topic_name(&name).unwrap();
        let mut record = TopicRecord {
            id: Uuid::new_v4(),
            partitions: 1,
            hosted: None,
            configs: BTreeMap::new(),
        };
        record.write(dir.path(), &name).unwrap();
        record.partitions = 3;
        record.write(dir.path(), &name).unwrap();
        let read = TopicRecord::read_all(dir.path()).unwrap();
        assert_eq!(read.len(), 1);
        assert_eq!(
            (read[0].0.as_str(), read[0].1.partitions),
            (name.as_str(), 3)
        );
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
