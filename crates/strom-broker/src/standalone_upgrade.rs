//! Upgrading a data directory that an earlier release's single node wrote. That release
//! ran a node without `process.roles` outside KRaft: it kept its topics only in
//! `__strom_metadata/topics/<name>.json`, its committed offsets in
//! `__strom_metadata/group-offsets.log`, its producer-id block in
//! `__strom_metadata/producer-id-block` and its dynamic broker configs only in
//! `__strom_metadata/dynamic-broker-configs.json`, and had no metadata log. Such a node
//! is now a one-voter KRaft node, and at its first start
//!
//! 1. the old files are read and what they hold is written, in one atomic step, to a plan
//!    (`__strom_metadata/kraft-upgrade.json`); nothing else is changed before, so a
//!    failure up to here leaves the directory as the earlier release left it;
//! 2. once the node's controller is active, it writes the plan's topics (same ids, same
//!    configs, this node the only replica), `__consumer_offsets`, the producer-id block
//!    and the dynamic broker configs to the metadata log, each only if the log lacks it;
//! 3. once the broker leads every partition, the plan's committed offsets are committed to
//!    `__consumer_offsets`, the two files only the earlier release read are removed, and
//!    the plan last, with one log line saying what was converted.
//!
//! A crash at any step leaves the plan, and the next start does the steps again: each adds
//! only what is missing, and committing an offset twice stores the same offset.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use strom_controller::QuorumController;
use strom_metadata::{
    BrokerId, ConfigResource, LeaderEpoch, MetadataImage, MetadataRecord, PartitionEpoch,
};
use uuid::Uuid;

use crate::topic::TopicRecord;
use crate::{BrokerConfig, BrokerError, BrokerState};
use strom_coordinator::group::earlier_offsets_log;
use strom_coordinator::group::offset_store::{CommittedOffset, TopicPartition};
use strom_coordinator::group::offsets_topic::OFFSETS_TOPIC;

const PLAN: &str = "kraft-upgrade.json";
const PRODUCER_ID_BLOCK: &str = "producer-id-block";
const DYNAMIC_BROKER_CONFIGS: &str = "dynamic-broker-configs.json";
/// How long the upgrade waits for the one voter to become the active controller, and
/// for a committed offset to be written.
const WAIT: Duration = Duration::from_secs(30);

/// What an earlier release's single node kept in files of its own, to be brought into
/// the metadata log and `__consumer_offsets`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StandaloneUpgrade {
    #[serde(skip)]
    dir: PathBuf,
    topics: Vec<PlannedTopic>,
    /// Each group's committed offsets.
    offsets: BTreeMap<String, Vec<(TopicPartition, CommittedOffset)>>,
    /// The first producer id the earlier release had not handed out.
    next_producer_id: i64,
    /// Dynamic broker configs: the cluster-wide default's, then this node's.
    default_broker_configs: BTreeMap<String, String>,
    node_broker_configs: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct PlannedTopic {
    name: String,
    id: Uuid,
    partitions: i32,
    configs: BTreeMap<String, String>,
}

impl StandaloneUpgrade {
    /// The upgrade this node's directories need: a plan left by an earlier start, or one
    /// made now from the earlier release's files; `None` for a node that has a metadata
    /// log of its own, or nothing to upgrade.
    pub fn find(config: &BrokerConfig) -> Result<Option<Self>, BrokerError> {
        let dir = config.log_dirs[0].join("__strom_metadata");
        let plan = dir.join(PLAN);
        if plan.exists() {
            let text = fs::read(&plan)?;
            let mut upgrade: Self = serde_json::from_slice(&text).map_err(|e| {
                BrokerError::Storage(format!(
                    "{}: the plan of an interrupted upgrade cannot be read: {e}",
                    plan.display()
                ))
            })?;
            upgrade.dir = dir;
            return Ok(Some(upgrade));
        }
        if config.metadata_dir().join("__cluster_metadata-0").exists() {
            return Ok(None);
        }
        let upgrade = Self::read_earlier_release(&dir, config.node_id)?;
        if upgrade.is_empty() {
            return Ok(None);
        }
        upgrade.write_plan()?;
        Ok(Some(upgrade))
    }

    /// Reads the earlier release's files in `dir`, naming the file and the cause when one
    /// cannot be read.
    fn read_earlier_release(dir: &Path, node_id: i32) -> Result<Self, BrokerError> {
        let damaged = |path: &Path, cause: String| {
            BrokerError::Storage(format!(
                "{} cannot be upgraded: {} is damaged ({cause}); it is left as it was",
                dir.display(),
                path.display()
            ))
        };
        let topics = TopicRecord::read_all(&dir.join("topics"))
            .map_err(|e| damaged(&dir.join("topics"), e.to_string()))?
            .into_iter()
            .map(|(name, record)| PlannedTopic {
                name,
                id: record.id,
                partitions: record.partitions,
                configs: record.configs,
            })
            .collect();
        let offsets = earlier_offsets_log::read(dir)
            .map_err(|e| damaged(&dir.join(earlier_offsets_log::LOG_FILE), e))?
            .into_iter()
            .map(|(group, committed)| (group, committed.into_iter().collect()))
            .collect();
        let block = dir.join(PRODUCER_ID_BLOCK);
        let next_producer_id = match fs::read_to_string(&block) {
            Ok(text) => text
                .trim()
                .parse()
                .map_err(|_| damaged(&block, "not a number".into()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(damaged(&block, e.to_string())),
        };
        let configs = dir.join(DYNAMIC_BROKER_CONFIGS);
        let (default_broker_configs, node_broker_configs) =
            crate::dynamic_config::DynamicBrokerConfigs::open(dir)
                .map(|c| (c.get(None), c.get(Some(node_id))))
                .map_err(|e| damaged(&configs, e.to_string()))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            topics,
            offsets,
            next_producer_id,
            default_broker_configs,
            node_broker_configs,
        })
    }

    fn is_empty(&self) -> bool {
        self.topics.is_empty()
            && self.offsets.is_empty()
            && self.next_producer_id == 0
            && self.default_broker_configs.is_empty()
            && self.node_broker_configs.is_empty()
    }

    /// Writes the plan atomically ([`strom_log::durable_file::replace_atomically`]).
    fn write_plan(&self) -> Result<(), BrokerError> {
        let json = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        strom_log::durable_file::replace_atomically(&self.dir.join(PLAN), &json)?;
        Ok(())
    }

    /// Step 2: has the node's controller, once active, write what the metadata log lacks.
    pub async fn write_metadata(
        &self,
        quorum: &QuorumController,
        config: &BrokerConfig,
    ) -> Result<(), BrokerError> {
        if !quorum.wait_until_active(WAIT).await {
            return Err(BrokerError::Storage(format!(
                "{}: the upgrade cannot go on: this node's controller did not become active within {WAIT:?}",
                self.dir.display()
            )));
        }
        let node = BrokerId(quorum.node_id());
        quorum
            .write_bootstrap(|image| self.missing_records(image, node, config))
            .await
            .map(|_| ())
            .map_err(|e| {
                BrokerError::Storage(format!(
                    "{}: the upgrade's metadata could not be written: {e}",
                    self.dir.display()
                ))
            })
    }

    /// The records the metadata log needs to hold what the plan holds, for `node`.
    /// `__consumer_offsets` takes the partition count and configs of `config`: the
    /// coordinator hashes groups over that count.
    fn missing_records(
        &self,
        image: &MetadataImage,
        node: BrokerId,
        config: &BrokerConfig,
    ) -> Vec<MetadataRecord> {
        let mut records = Vec::new();
        for topic in &self.topics {
            if image.topic_by_id(topic.id).is_none() {
                records.extend(topic_records(
                    node,
                    &topic.name,
                    topic.id,
                    topic.partitions,
                    &topic.configs,
                ));
            }
        }
        let planned_offsets_topic = self.topics.iter().any(|t| t.name == OFFSETS_TOPIC);
        if !self.offsets.is_empty()
            && !planned_offsets_topic
            && image.topic(OFFSETS_TOPIC).is_none()
        {
            records.extend(topic_records(
                node,
                OFFSETS_TOPIC,
                Uuid::new_v4(),
                config.offsets_topic_num_partitions,
                &strom_coordinator::group::offsets_topic::topic_configs(
                    config.offsets_topic_segment_bytes,
                ),
            ));
        }
        if image.next_producer_id < self.next_producer_id {
            records.push(MetadataRecord::ProducerIds {
                broker_id: node,
                broker_epoch: -1,
                next_producer_id: self.next_producer_id,
            });
        }
        for (resource, configs) in [
            (ConfigResource::Broker(None), &self.default_broker_configs),
            (
                ConfigResource::Broker(Some(node)),
                &self.node_broker_configs,
            ),
        ] {
            let stored = image.configs.get(&resource);
            for (name, value) in configs {
                if stored.and_then(|s| s.get(name)) != Some(value) {
                    records.push(MetadataRecord::Config {
                        resource: resource.clone(),
                        name: name.clone(),
                        value: Some(value.clone()),
                    });
                }
            }
        }
        records
    }

    /// Step 3: commits the plan's offsets through this node's group coordinator, then
    /// removes the files only the earlier release read, and the plan.
    pub async fn commit_offsets(self, state: &BrokerState) -> Result<(), BrokerError> {
        let mut committed = 0usize;
        for (group, offsets) in &self.offsets {
            committed += offsets.len();
            let written = state
                .groups
                .commit_offsets(group, "", None, -1, offsets.clone())
                .map_err(|e| self.offsets_failed(group, e))?;
            written
                .replicated(WAIT)
                .await
                .map_err(|e| self.offsets_failed(group, e))?;
        }
        for file in [earlier_offsets_log::LOG_FILE, PRODUCER_ID_BLOCK] {
            match fs::remove_file(self.dir.join(file)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
        }
        fs::remove_file(self.dir.join(PLAN))?;
        tracing::info!(
            dir = %self.dir.display(),
            topics = self.topics.len(),
            partitions = self.topics.iter().map(|t| i64::from(t.partitions)).sum::<i64>(),
            groups = self.offsets.len(),
            committed_offsets = committed,
            next_producer_id = self.next_producer_id,
            "upgraded an earlier release's single-node data directory to a one-voter KRaft node: its topics, records, committed offsets, producer ids and dynamic broker configs are kept"
        );
        Ok(())
    }

    fn offsets_failed(&self, group: &str, e: kafka_protocol::ResponseError) -> BrokerError {
        BrokerError::Storage(format!(
            "{}: the upgrade could not commit group {group}'s offsets to {OFFSETS_TOPIC} ({e:?}); the next start tries again",
            self.dir.display()
        ))
    }
}

/// The records of a topic whose every partition has `node` as its only replica, led by
/// it in leader epoch 0 (the epoch the earlier release wrote its records in).
fn topic_records(
    node: BrokerId,
    name: &str,
    id: Uuid,
    partitions: i32,
    configs: &BTreeMap<String, String>,
) -> Vec<MetadataRecord> {
    let mut records = vec![MetadataRecord::Topic {
        name: name.to_string(),
        topic_id: id,
    }];
    records.extend(
        (0..partitions).map(|partition_id| MetadataRecord::Partition {
            topic_id: id,
            partition_id,
            replicas: vec![node],
            isr: vec![node],
            leader: node,
            leader_epoch: LeaderEpoch(0),
            partition_epoch: PartitionEpoch(0),
        }),
    );
    records.extend(configs.iter().map(|(k, v)| MetadataRecord::Config {
        resource: ConfigResource::Topic(name.to_string()),
        name: k.clone(),
        value: Some(v.clone()),
    }));
    records
}
