//! The log manager: owns the log directories, the topics and their partitions' logs.
//!
//! It decides where partitions live (`<log dir>/<topic>-<partition>`, spread over
//! `log.dirs`), persists topic metadata under `<first log dir>/__strom_metadata/`, tells
//! the logs whether the last shutdown was clean (the `.strom_cleanshutdown` marker), and
//! runs retention and time-based flushing.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kafka_protocol::ResponseError;
use parking_lot::{Mutex, RwLock};
use strom_log::{LogConfig, PartitionLog};
use uuid::Uuid;

use crate::partition::Partition;
use crate::topic::{validate_topic_name, Topic, TopicRecord};
use crate::{now_ms, topic_config, ApiError, BrokerConfig, BrokerError};

const CLEAN_SHUTDOWN_MARKER: &str = ".strom_cleanshutdown";
const METADATA_DIR: &str = "__strom_metadata";
const META_PROPERTIES: &str = "meta.properties";

/// Owner of all topics and partition logs of this broker.
#[derive(Debug)]
pub struct LogManager {
    dirs: Vec<PathBuf>,
    defaults: LogConfig,
    cluster_id: String,
    topics: RwLock<HashMap<String, Arc<Topic>>>,
    /// Serializes topic creation, deletion and alteration, which touch files and the map.
    admin: Mutex<()>,
}

impl LogManager {
    /// Opens the log directories, loading every topic and opening its partitions.
    pub fn open(config: &BrokerConfig) -> Result<Self, BrokerError> {
        let mut clean = true;
        for dir in &config.log_dirs {
            fs::create_dir_all(dir)?;
            let marker = dir.join(CLEAN_SHUTDOWN_MARKER);
            let had_marker = marker.exists();
            let has_data = fs::read_dir(dir)?.any(|e| {
                e.is_ok_and(|e| {
                    e.file_name() != CLEAN_SHUTDOWN_MARKER && e.file_name() != META_PROPERTIES
                })
            });
            clean &= had_marker || !has_data;
        }
        let cluster_id = Self::load_cluster_id(&config.log_dirs[0], config.node_id)?;
        let manager = Self {
            dirs: config.log_dirs.clone(),
            defaults: config.log_defaults.clone(),
            cluster_id,
            topics: RwLock::new(HashMap::new()),
            admin: Mutex::new(()),
        };
        if !clean {
            tracing::warn!("previous shutdown was not clean: recovering unflushed segment tails");
        }
        let now = now_ms();
        for (name, record) in TopicRecord::read_all(&manager.metadata_dir())? {
            let log_config = topic_config::log_config(&manager.defaults, &record.configs);
            let mut partitions = Vec::with_capacity(record.partitions as usize);
            for p in 0..record.partitions {
                let dir = manager.partition_dir(&name, p);
                let log = PartitionLog::open(&dir, log_config.clone(), clean, now)?;
                partitions.push(Arc::new(Partition::new(&name, p, log)));
            }
            let topic = Topic {
                name: name.clone(),
                id: record.id,
                configs: RwLock::new(record.configs),
                partitions: RwLock::new(partitions),
            };
            manager.topics.write().insert(name, Arc::new(topic));
        }
        for dir in &manager.dirs {
            match fs::remove_file(dir.join(CLEAN_SHUTDOWN_MARKER)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
        }
        tracing::info!(topics = manager.topics.read().len(), clean, "logs loaded");
        Ok(manager)
    }

    /// Reads the cluster id from `meta.properties`, creating the file on first start.
    fn load_cluster_id(dir: &Path, node_id: i32) -> Result<String, BrokerError> {
        let path = dir.join(META_PROPERTIES);
        if let Ok(text) = fs::read_to_string(&path) {
            if let Some(id) = crate::properties::parse(&text).remove("cluster.id") {
                return Ok(id);
            }
        }
        let id = Uuid::new_v4().simple().to_string()[..22].to_string();
        fs::write(
            &path,
            format!("version=1\ncluster.id={id}\nnode.id={node_id}\n"),
        )?;
        Ok(id)
    }

    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    fn metadata_dir(&self) -> PathBuf {
        self.dirs[0].join(METADATA_DIR).join("topics")
    }

    /// The directory of a partition: spread over the log dirs by partition index.
    fn partition_dir(&self, topic: &str, partition: i32) -> PathBuf {
        let name = format!("{topic}-{partition}");
        if let Some(existing) = self.dirs.iter().map(|d| d.join(&name)).find(|p| p.exists()) {
            return existing;
        }
        self.dirs[partition as usize % self.dirs.len()].join(name)
    }

    pub fn topic(&self, name: &str) -> Option<Arc<Topic>> {
        self.topics.read().get(name).cloned()
    }

    pub fn topic_by_id(&self, id: Uuid) -> Option<Arc<Topic>> {
        self.topics.read().values().find(|t| t.id == id).cloned()
    }

    /// All topics, sorted by name.
    pub fn topics(&self) -> Vec<Arc<Topic>> {
        let mut all: Vec<_> = self.topics.read().values().cloned().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    pub fn partition(&self, topic: &str, partition: i32) -> Option<Arc<Partition>> {
        self.topic(topic).and_then(|t| t.partition(partition))
    }

    pub fn defaults(&self) -> &LogConfig {
        &self.defaults
    }

    /// Creates a topic (CreateTopics, or auto-creation). With `validate_only` nothing is
    /// created but every check runs.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<Arc<Topic>, ApiError> {
        validate_topic_name(name)
            .map_err(|m| ApiError::new(ResponseError::InvalidTopicException, m))?;
        if partitions < 1 {
            return Err(ApiError::new(
                ResponseError::InvalidPartitions,
                "Number of partitions must be larger than 0.",
            ));
        }
        let mut validated = BTreeMap::new();
        for (k, v) in &configs {
            validated.insert(k.clone(), topic_config::validate(k, v)?);
        }
        topic_config::validate_together(&validated)?;
        let _admin = self.admin.lock();
        if self.topics.read().contains_key(name) {
            return Err(ApiError::new(
                ResponseError::TopicAlreadyExists,
                format!("Topic '{name}' already exists."),
            ));
        }
        let topic = Arc::new(Topic {
            name: name.to_string(),
            id: Uuid::new_v4(),
            configs: RwLock::new(validated),
            partitions: RwLock::new(Vec::new()),
        });
        if validate_only {
            return Ok(topic);
        }
        self.add_partitions(&topic, partitions)?;
        topic.record().write(&self.metadata_dir(), name)?;
        self.topics.write().insert(name.to_string(), topic.clone());
        tracing::info!(topic = name, partitions, "created topic");
        Ok(topic)
    }

    fn add_partitions(&self, topic: &Topic, count: i32) -> Result<(), BrokerError> {
        let log_config = topic_config::log_config(&self.defaults, &topic.configs.read());
        let mut partitions = topic.partitions.write();
        for p in partitions.len() as i32..count {
            let dir = self.partition_dir(&topic.name, p);
            if dir.exists() {
                fs::remove_dir_all(&dir)?;
            }
            let log = PartitionLog::open(&dir, log_config.clone(), true, now_ms())?;
            partitions.push(Arc::new(Partition::new(&topic.name, p, log)));
        }
        Ok(())
    }

    /// Grows a topic to `count` partitions (CreatePartitions).
    pub fn create_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<(), ApiError> {
        let _admin = self.admin.lock();
        let topic = self.topic(name).ok_or_else(ApiError::unknown_topic)?;
        let current = topic.partition_count();
        if count <= current {
            return Err(ApiError::new(
                ResponseError::InvalidPartitions,
                format!("Topic currently has {current} partitions, which is higher than the requested {count}."),
            ));
        }
        if validate_only {
            return Ok(());
        }
        self.add_partitions(&topic, count)?;
        topic.record().write(&self.metadata_dir(), name)?;
        Ok(())
    }

    /// Deletes a topic and its partitions' files.
    pub fn delete_topic(&self, name: &str) -> Result<Uuid, ApiError> {
        let _admin = self.admin.lock();
        let topic = self
            .topics
            .write()
            .remove(name)
            .ok_or_else(ApiError::unknown_topic)?;
        TopicRecord::delete(&self.metadata_dir(), name).map_err(ApiError::from)?;
        for partition in topic.partitions.read().iter() {
            partition.mark_deleted();
            let dir = partition.with_log(|log| log.dir().to_path_buf());
            if let Err(e) = fs::remove_dir_all(&dir) {
                tracing::warn!(dir = %dir.display(), error = %e, "could not delete partition directory");
            }
        }
        tracing::info!(topic = name, "deleted topic");
        Ok(topic.id)
    }

    /// Replaces a topic's config overrides (AlterConfigs semantics) and applies them to
    /// its logs. Values must already be validated.
    pub fn set_topic_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<(), ApiError> {
        let _admin = self.admin.lock();
        let topic = self.topic(name).ok_or_else(ApiError::unknown_topic)?;
        *topic.configs.write() = configs;
        topic.record().write(&self.metadata_dir(), name)?;
        let log_config = topic_config::log_config(&self.defaults, &topic.configs.read());
        for partition in topic.partitions.read().iter() {
            partition.with_log(|log| log.set_config(log_config.clone()));
        }
        Ok(())
    }

    fn all_partitions(&self) -> Vec<Arc<Partition>> {
        self.topics
            .read()
            .values()
            .flat_map(|t| t.partitions.read().clone())
            .collect()
    }

    /// Applies retention to every partition.
    pub fn run_retention(&self) {
        let now = now_ms();
        for partition in self.all_partitions() {
            if let Err(e) = partition.with_log(|log| log.apply_retention(now)) {
                tracing::error!(topic = %partition.topic, partition = partition.index, error = %e, "retention failed");
            }
        }
    }

    /// Forgets idle idempotent producers in every partition (`producer.id.expiration.ms`).
    pub fn expire_producers(&self) {
        let now = now_ms();
        for partition in self.all_partitions() {
            partition.with_log(|log| log.expire_producers(now));
        }
    }

    /// Flushes every partition whose `flush.ms` has passed.
    pub fn flush_due(&self) {
        let now = now_ms();
        for partition in self.all_partitions() {
            if let Err(e) = partition.with_log(|log| log.flush_if_due(now)) {
                tracing::error!(topic = %partition.topic, partition = partition.index, error = %e, "flush failed");
            }
        }
    }

    /// Closes every log (flush, producer snapshot) and marks the shutdown clean.
    pub fn shutdown(&self) -> Result<(), BrokerError> {
        let now = now_ms();
        for partition in self.all_partitions() {
            partition.with_log(|log| log.close(now))?;
        }
        for dir in &self.dirs {
            fs::write(dir.join(CLEAN_SHUTDOWN_MARKER), b"")?;
        }
        tracing::info!("logs closed cleanly");
        Ok(())
    }
}
