//! The log manager: owns the log directories, the topics and their partitions' logs.
//!
//! It decides where partitions live (`<log dir>/<topic>-<partition>`, spread over
//! `log.dirs`), persists topic metadata under `<first log dir>/__strom_metadata/`, tells
//! the logs what the last shutdown left them (the clean-shutdown record), and
//! runs retention and time-based flushing.
//!
//! Density (thousands of partitions per broker): every segment file is opened through one
//! bounded [`FileCache`] (`log.open.files.max`); start-up opens partitions in parallel
//! (`num.recovery.threads.per.data.dir`) and lazily; shutdown closes only partitions with
//! something to write, in parallel, and makes them durable with one `syncfs` per log dir
//! when there are many; admin requests are bounded by `max.partitions.per.request` and
//! `max.partitions.per.broker`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{self, File};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use kafka_protocol::ResponseError;
use parking_lot::{Condvar, Mutex, MutexGuard, RwLock};
use strom_log::{CleanShutdown, ClosedLog, FileCache, LogConfig, LogError, PartitionLog};
use tokio::sync::Notify;
use uuid::Uuid;

use crate::topic::{Topic, TopicRecord};
use strom_replica::partition::Partition;
use strom_wire::now_ms;

use crate::{log_dir_workers, open_files_limit, topic_config};
use crate::{BrokerConfig, BrokerError};
use strom_wire::ApiError;

/// The clean-shutdown record of a log dir (`strom_log::clean_shutdown`).
const CLEAN_SHUTDOWN_RECORD: &str = ".strom_clean_shutdown_record";
/// The empty clean-shutdown marker earlier versions wrote: every partition of the log dir
/// was closed with its own checkpoint and snapshot. A new name for the record keeps an
/// earlier version from taking the record for that marker.
const LEGACY_CLEAN_SHUTDOWN_MARKER: &str = ".strom_cleanshutdown";
const METADATA_DIR: &str = "__strom_metadata";
const META_PROPERTIES: &str = "meta.properties";
/// The metadata log's directory (`__cluster_metadata-0`), which is not a partition of
/// this broker's.
const METADATA_LOG_PREFIX: &str = crate::topic::CLUSTER_METADATA_TOPIC;
/// Up to this many partitions to close, each is fsynced on its own (in parallel); above
/// it one `syncfs` per log dir is cheaper than an fsync per file.
const FSYNC_EACH_UP_TO: usize = 64;

/// The partitions start-up found and has yet to open.
#[derive(Debug)]
struct PendingLoad {
    partitions: Vec<PartitionToLoad>,
}

/// Lets topic changes through once loading ends, however it ends (a panic included).
struct OpensTopicChanges<'a>(&'a LogManager);

impl Drop for OpensTopicChanges<'_> {
    fn drop(&mut self) {
        *self.0.loading.lock() = false;
        self.0.loaded.notify_all();
    }
}

/// One partition to open at start-up.
#[derive(Debug)]
struct PartitionToLoad {
    topic: String,
    index: i32,
    dir: PathBuf,
    config: LogConfig,
    /// Whether its log dir holds an earlier version's clean-shutdown marker (or no data
    /// at all): the log may be opened as closed cleanly without a record of it.
    clean: bool,
}

/// Owner of all topics and partition logs of this broker.
#[derive(Debug)]
pub struct LogManager {
    dirs: Vec<PathBuf>,
    /// The broker's log defaults: `server.properties` overlaid with the dynamic broker
    /// configs (KIP-226), which can change while the broker runs.
    defaults: RwLock<LogConfig>,
    cluster_id: String,
    topics: RwLock<HashMap<String, Arc<Topic>>>,
    /// Serializes topic creation, deletion and alteration, which touch files and the map.
    admin: Arc<Mutex<()>>,
    /// The open segment files of every partition (`log.open.files.max`).
    files: Arc<FileCache>,
    recovery_threads: usize,
    max_partitions_per_request: i32,
    /// A node that formats itself: the only broker of its cluster.
    single_node: bool,
    /// Woken when a storage error takes a cluster replica offline, so the broker's
    /// heartbeat reports it at once.
    pub storage_failures: Arc<Notify>,
    /// What start-up has yet to open ([`Self::load_partitions`]).
    pending: Mutex<Option<PendingLoad>>,
    /// Whether start-up is still opening partitions; topic changes wait on `loaded`.
    loading: Mutex<bool>,
    loaded: Condvar,
    /// Set when shutdown begins: loading stops opening partitions.
    closing: Arc<AtomicBool>,
    /// What the clean-shutdown record says of the partitions start-up has not opened
    /// yet: taken by each as it opens, and written back by a shutdown that comes first.
    unopened: Mutex<HashMap<PathBuf, ClosedLog>>,
}

impl LogManager {
    /// Opens the log directories under `config.log_dirs` with `defaults` as the broker's
    /// log defaults (the static ones overlaid with the dynamic ones known at start):
    /// every topic, each partition a stand-in until [`Self::load_partitions`] opens it.
    pub fn open(config: &BrokerConfig, defaults: LogConfig) -> Result<Self, BrokerError> {
        let recovery_threads = config.num_recovery_threads_per_data_dir;
        open_files_limit::ensure(open_files_limit::needed(
            config.log_open_files_max,
            recovery_threads * config.log_dirs.len(),
        ))?;
        let mut recorded = HashMap::new();
        let mut clean_dirs = Vec::new();
        for dir in &config.log_dirs {
            fs::create_dir_all(dir)?;
            let record = match CleanShutdown::read(&dir.join(CLEAN_SHUTDOWN_RECORD)) {
                Err(e @ LogError::CorruptFile { .. }) => {
                    tracing::warn!(error = %e, "ignoring a torn clean-shutdown record");
                    None
                }
                record => record?,
            };
            let has_data = fs::read_dir(dir)?.any(|e| {
                e.is_ok_and(|e| {
                    let name = e.file_name();
                    let name = name.to_string_lossy();
                    !name.starts_with(CLEAN_SHUTDOWN_RECORD)
                        && name != crate::dir_lock::LOCK_FILE
                        && name != LEGACY_CLEAN_SHUTDOWN_MARKER
                        && name != META_PROPERTIES
                        && !name.starts_with(METADATA_LOG_PREFIX)
                })
            });
            let legacy_marker = dir.join(LEGACY_CLEAN_SHUTDOWN_MARKER).exists();
            if legacy_marker && record.is_some() {
                tracing::warn!(dir = %dir.display(), "ignoring the clean-shutdown record: an earlier version ran on this log dir after it was written");
            }
            match record.filter(|_| !legacy_marker) {
                Some(record) => recorded.extend(
                    record
                        .logs
                        .into_iter()
                        .map(|(name, log)| (dir.join(name), log)),
                ),
                None if !has_data || legacy_marker => {
                    clean_dirs.push(dir.clone());
                }
                None => {
                    tracing::warn!(dir = %dir.display(), "previous shutdown was not clean: recovering unflushed segment tails")
                }
            }
        }
        let cluster_id =
            crate::meta_properties::load(&config.identity_dirs(), config.node_id, false)?;
        let manager = Self {
            dirs: config.log_dirs.clone(),
            defaults: RwLock::new(defaults),
            cluster_id,
            topics: RwLock::new(HashMap::new()),
            admin: Arc::new(Mutex::new(())),
            files: FileCache::new(config.log_open_files_max),
            recovery_threads,
            max_partitions_per_request: config.max_partitions_per_request,
            single_node: config.kraft.formats_itself,
            storage_failures: Arc::new(Notify::new()),
            pending: Mutex::new(None),
            loading: Mutex::new(false),
            loaded: Condvar::new(),
            closing: Arc::new(AtomicBool::new(false)),
            unopened: Mutex::new(HashMap::new()),
        };
        let records = TopicRecord::read_all(&manager.metadata_dir())?;
        let existing = manager.list_log_dirs()?;
        let mut to_load = Vec::new();
        for (name, record) in records {
            let log_config = topic_config::log_config(&manager.defaults.read(), &record.configs);
            let mut partitions = BTreeMap::new();
            for index in record.indexes() {
                let dir_name = format!("{name}-{index}");
                let dir = existing.get(&dir_name).cloned().unwrap_or_else(|| {
                    manager.dirs[index as usize % manager.dirs.len()].join(&dir_name)
                });
                partitions.insert(index, Arc::new(Partition::loading(&name, index, &dir)));
                to_load.push(PartitionToLoad {
                    topic: name.clone(),
                    index,
                    clean: clean_dirs.iter().any(|d| dir.starts_with(d)),
                    dir,
                    config: log_config.clone(),
                });
            }
            let topic = Topic {
                name: name.clone(),
                id: record.id,
                configs: RwLock::new(record.configs),
                partitions: RwLock::new(partitions),
            };
            manager.topics.write().insert(name, Arc::new(topic));
        }
        manager.remove_orphaned_partition_dirs(&existing, &to_load)?;
        *manager.unopened.lock() = to_load
            .iter()
            .filter_map(|p| Some((p.dir.clone(), recorded.remove(&p.dir)?)))
            .collect();
        // From here on a partition can be written as soon as it is open, so a crash must
        // not find the record of the previous clean shutdown: the next start recovers.
        for dir in &manager.dirs {
            let mut removed = false;
            for name in [CLEAN_SHUTDOWN_RECORD, LEGACY_CLEAN_SHUTDOWN_MARKER] {
                match fs::remove_file(dir.join(name)) {
                    Ok(()) => removed = true,
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                    Err(_) => {}
                }
            }
            if removed {
                File::open(dir)?.sync_all()?;
            }
        }
        *manager.pending.lock() = Some(PendingLoad {
            partitions: to_load,
        });
        *manager.loading.lock() = true;
        Ok(manager)
    }

    /// Opens every partition [`Self::open`] found, `num.recovery.threads.per.data.dir`
    /// threads per log dir, each replacing its stand-in as soon as it is open. A
    /// partition whose log cannot be opened is offline; the others serve. Stops early
    /// when [`Self::stop_loading`] is called. Topic changes wait until it returns.
    pub fn load_partitions(&self) {
        let _gate = OpensTopicChanges(self);
        let Some(PendingLoad { partitions }) = self.pending.lock().take() else {
            return;
        };
        let started = Instant::now();
        let now = now_ms();
        let from_record = Mutex::new(Vec::new());
        let outcomes = log_dir_workers::run(
            &partitions,
            &self.dirs,
            self.recovery_threads,
            |p| &p.dir,
            |p| {
                if self.closing.load(Ordering::Relaxed) {
                    return None;
                }
                let (partition, recorded) = self.load_partition(p, now);
                let online = partition.offline_reason().is_none();
                if online && recorded {
                    from_record.lock().push(partition.clone());
                }
                if let Some(topic) = self.topic(&p.topic) {
                    topic.partitions.write().insert(p.index, partition);
                }
                Some(online)
            },
        );
        let loaded = outcomes.iter().flatten().count();
        let from_record = from_record.into_inner();
        tracing::info!(
            topics = self.topics.read().len(),
            partitions = partitions.len(),
            loaded,
            offline = outcomes.iter().flatten().filter(|online| !**online).count(),
            from_record = from_record.len(),
            threads_per_dir = self.recovery_threads,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "logs loaded"
        );
        if !from_record.is_empty() {
            self.catch_up_checkpoints(from_record);
        }
    }

    /// Writes the own checkpoint and producer snapshot of the partitions opened from the
    /// clean-shutdown record whose files were behind it, on a thread of its own while the
    /// broker serves: until then a crash would recover them from their older checkpoints.
    /// Each is written under the admin lock and skipped once deleted, so a topic deleted
    /// (and perhaps re-created under its name) meanwhile is never written to. Stops when
    /// the broker does: its shutdown records every partition anyway.
    fn catch_up_checkpoints(&self, partitions: Vec<Arc<Partition>>) {
        let closing = self.closing.clone();
        let admin = self.admin.clone();
        let spawned = std::thread::Builder::new()
            .name("strom-checkpoints".to_string())
            .spawn(move || {
                let started = Instant::now();
                let mut written = 0;
                for p in &partitions {
                    let _admin = admin.lock();
                    if closing.load(Ordering::Relaxed) {
                        return;
                    }
                    if p.is_deleted() || !p.with_log(|log| log.needs_close()).unwrap_or(false) {
                        continue;
                    }
                    match p.try_with_log(PartitionLog::catch_up_checkpoint) {
                        Ok(()) => written += 1,
                        Err(e) => {
                            tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "could not write the partition's checkpoint")
                        }
                    }
                }
                tracing::info!(
                    partitions = written,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "checkpoints caught up with the clean-shutdown record"
                );
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "could not start the checkpoint thread: a crash before the next shutdown recovers from older checkpoints");
        }
    }

    /// Makes [`Self::load_partitions`] stop opening partitions: the broker is stopping.
    pub fn stop_loading(&self) {
        self.closing.store(true, Ordering::Relaxed);
    }

    /// The lock topic changes hold, taken once start-up has opened every partition (a
    /// change must not race a partition's opening, and must see every log it applies to).
    /// Waited for off the async workers.
    fn admin(&self) -> MutexGuard<'_, ()> {
        off_async_workers(|| {
            let mut loading = self.loading.lock();
            while *loading {
                self.loaded.wait(&mut loading);
            }
            drop(loading);
            self.admin.lock()
        })
    }

    /// Whom a partition's storage error wakes: the heartbeat, which reports it; on a
    /// single node no one (see `Partition::report_failure`).
    fn report_failure(&self) -> Option<Arc<Notify>> {
        (!self.single_node).then(|| self.storage_failures.clone())
    }

    /// The partitions offline on this broker (a log that could not be opened, or a
    /// storage error since), by topic id: what the heartbeat reports to the controller.
    pub fn offline_replicas(&self) -> Vec<(Uuid, i32)> {
        self.topics
            .read()
            .values()
            .flat_map(|t| {
                t.partitions
                    .read()
                    .values()
                    .filter(|p| p.offline_reason().is_some())
                    .map(|p| (t.id, p.index))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Opens one partition's log — from the clean-shutdown record if it names it, as
    /// closed cleanly if its log dir had an earlier version's marker, recovered
    /// otherwise — or makes it offline with a log line naming the reason (for a damaged
    /// segment, the file and what is wrong with it). Says whether the record named it.
    fn load_partition(&self, p: &PartitionToLoad, now: i64) -> (Arc<Partition>, bool) {
        let recorded = self.unopened.lock().remove(&p.dir);
        let from_record = recorded.is_some();
        let opened = match recorded {
            Some(closed) => {
                PartitionLog::open_closed(&p.dir, p.config.clone(), &self.files, closed, now)
            }
            None => PartitionLog::open(&p.dir, p.config.clone(), &self.files, p.clean, now),
        };
        let partition = match opened {
            Ok(log) => Arc::new(Partition::new(
                &p.topic,
                p.index,
                log,
                self.report_failure(),
            )),
            Err(e) => {
                tracing::error!(
                    topic = %p.topic,
                    partition = p.index,
                    dir = %p.dir.display(),
                    error = %e,
                    "partition offline: its log cannot be opened (clients get KAFKA_STORAGE_ERROR); the other partitions serve"
                );
                Arc::new(Partition::offline(&p.topic, p.index, &p.dir, e.to_string()))
            }
        };
        (partition, from_record)
    }

    /// Removes partition directories no topic names (left by a creation that failed
    /// half-way in an older version, or by a deletion interrupted by a crash), with a log
    /// line for each, so they do not pile up unseen.
    fn remove_orphaned_partition_dirs(
        &self,
        existing: &HashMap<String, PathBuf>,
        expected: &[PartitionToLoad],
    ) -> Result<(), BrokerError> {
        let expected: HashSet<&Path> = expected.iter().map(|p| p.dir.as_path()).collect();
        for (name, path) in existing {
            let looks_like_partition = !name.starts_with(METADATA_LOG_PREFIX)
                && name
                    .rsplit_once('-')
                    .is_some_and(|(topic, p)| !topic.is_empty() && p.parse::<u32>().is_ok());
            if !looks_like_partition || expected.contains(path.as_path()) {
                continue;
            }
            tracing::warn!(dir = %path.display(), "removing orphaned partition directory: no topic names it");
            fs::remove_dir_all(path)?;
        }
        Ok(())
    }

    /// The directories in the log dirs, by name: one listing at start-up instead of
    /// asking the file system about each partition's directory.
    fn list_log_dirs(&self) -> Result<HashMap<String, PathBuf>, BrokerError> {
        let mut found = HashMap::new();
        for dir in &self.dirs {
            for entry in fs::read_dir(dir)? {
                let entry = entry?;
                if entry.file_type()?.is_dir() {
                    found
                        .entry(entry.file_name().to_string_lossy().into_owned())
                        .or_insert_with(|| entry.path());
                }
            }
        }
        Ok(found)
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

    pub fn defaults(&self) -> LogConfig {
        self.defaults.read().clone()
    }

    /// Makes `defaults` the broker's log defaults (a dynamic broker config changed) and
    /// applies them to every hosted partition whose topic does not override them.
    pub fn set_defaults(&self, defaults: LogConfig) {
        let _admin = self.admin();
        *self.defaults.write() = defaults;
        for topic in self.topics.read().values() {
            let log_config = topic_config::log_config(&self.defaults.read(), &topic.configs.read());
            for partition in topic.hosted() {
                let _ = partition.with_log(|log| log.set_config(log_config.clone()));
            }
        }
    }

    /// Refuses to add `adding` partitions in one request beyond `max.partitions.per.request`,
    /// naming the limit, before the request is forwarded to the controller.
    pub fn check_request_limit(&self, adding: i32) -> Result<(), ApiError> {
        if adding > self.max_partitions_per_request {
            return Err(ApiError::new(
                ResponseError::InvalidPartitions,
                format!(
                    "Cannot add {adding} partitions in one request: max.partitions.per.request is {}.",
                    self.max_partitions_per_request
                ),
            ));
        }
        Ok(())
    }

    /// Creates the partitions `indexes` of `topic`. On failure every partition this call
    /// created is dropped and its directory removed, so a failed request leaves nothing
    /// behind.
    fn add_partitions(
        &self,
        topic: &Topic,
        indexes: impl IntoIterator<Item = i32>,
    ) -> Result<(), BrokerError> {
        let log_config = topic_config::log_config(&self.defaults.read(), &topic.configs.read());
        let mut created = Vec::new();
        let result = indexes.into_iter().try_for_each(|p| {
            let dir = self.partition_dir(&topic.name, p);
            if dir.exists() {
                fs::remove_dir_all(&dir)?;
            }
            let opened = PartitionLog::open(&dir, log_config.clone(), &self.files, true, now_ms());
            let log = opened.inspect_err(|_| {
                let _ = fs::remove_dir_all(&dir);
            })?;
            topic.partitions.write().insert(
                p,
                Arc::new(Partition::new(&topic.name, p, log, self.report_failure())),
            );
            created.push(p);
            Ok::<_, BrokerError>(())
        });
        if let Err(e) = &result {
            tracing::warn!(topic = %topic.name, error = %e, "partition creation failed; removing the partitions it created");
            self.remove_partitions(topic, &created);
        }
        result
    }

    /// Drops the partitions `indexes` of `topic` and removes their directories.
    fn remove_partitions(&self, topic: &Topic, indexes: &[i32]) {
        let removed: Vec<_> = {
            let mut partitions = topic.partitions.write();
            indexes
                .iter()
                .filter_map(|i| partitions.remove(i))
                .collect()
        };
        for partition in removed {
            if let Err(e) = fs::remove_dir_all(partition.dir()) {
                tracing::warn!(dir = %partition.dir().display(), error = %e, "could not remove partition directory");
            }
        }
    }

    /// Hosts the partitions `indexes` of topic `name` (id `id`) as the metadata image
    /// assigns them to this broker of a cluster: creates the topic and the partitions it
    /// does not have yet. A local topic of that name with another id is a deleted topic's
    /// leftover and is removed first.
    pub fn host(
        &self,
        name: &str,
        id: Uuid,
        configs: &BTreeMap<String, String>,
        indexes: &[i32],
    ) -> Result<(), BrokerError> {
        let _admin = self.admin();
        let existing = self.topic(name);
        if existing.as_ref().is_some_and(|t| t.id != id) {
            drop(_admin);
            self.delete_topic(name)
                .map_err(|e| BrokerError::Corrupt(e.message))?;
            return self.host(name, id, configs, indexes);
        }
        let topic = existing.unwrap_or_else(|| {
            Arc::new(Topic {
                name: name.to_string(),
                id,
                configs: RwLock::new(configs.clone()),
                partitions: RwLock::new(BTreeMap::new()),
            })
        });
        let missing: Vec<i32> = {
            let hosted = topic.partitions.read();
            indexes
                .iter()
                .copied()
                .filter(|i| !hosted.contains_key(i))
                .collect()
        };
        let configs_changed = *topic.configs.read() != *configs;
        if missing.is_empty() && !configs_changed && self.topics.read().contains_key(name) {
            return Ok(());
        }
        if configs_changed {
            *topic.configs.write() = configs.clone();
            let log_config = topic_config::log_config(&self.defaults.read(), configs);
            for partition in topic.hosted() {
                let _ = partition.with_log(|log| log.set_config(log_config.clone()));
            }
        }
        off_async_workers(|| self.add_partitions(&topic, missing.iter().copied()))?;
        if let Err(e) = topic.record().write(&self.metadata_dir(), name) {
            self.remove_partitions(&topic, &missing);
            return Err(e);
        }
        if self
            .topics
            .write()
            .insert(name.to_string(), topic)
            .is_none()
        {
            tracing::info!(topic = name, partitions = ?indexes, "hosting topic");
        }
        Ok(())
    }

    /// Deletes a topic and its partitions' files.
    pub fn delete_topic(&self, name: &str) -> Result<Uuid, ApiError> {
        let _admin = self.admin();
        let topic = self
            .topics
            .write()
            .remove(name)
            .ok_or_else(ApiError::unknown_topic)?;
        TopicRecord::delete(&self.metadata_dir(), name).map_err(ApiError::from)?;
        for partition in topic.hosted() {
            partition.mark_deleted();
            let dir = partition.dir();
            if let Err(e) = fs::remove_dir_all(dir) {
                tracing::warn!(dir = %dir.display(), error = %e, "could not delete partition directory");
            }
        }
        tracing::info!(topic = name, "deleted topic");
        Ok(topic.id)
    }

    /// Every partition with a log or the reason it has none: not the stand-ins of those
    /// start-up has yet to open.
    pub(crate) fn all_partitions(&self) -> Vec<Arc<Partition>> {
        self.topics
            .read()
            .values()
            .flat_map(|t| t.hosted())
            .filter(|p| !p.is_loading())
            .collect()
    }

    /// Applies retention to every partition.
    pub fn run_retention(&self) {
        let now = now_ms();
        for partition in self.all_partitions() {
            if let Err(e) = partition.try_with_log(|log| log.apply_retention(now)) {
                tracing::error!(topic = %partition.topic, partition = partition.index, error = %e, "retention failed");
            }
        }
    }

    /// Forgets idle idempotent producers in every partition (`producer.id.expiration.ms`).
    pub fn expire_producers(&self) {
        let now = now_ms();
        for partition in self.all_partitions() {
            let _ = partition.with_log(|log| log.expire_producers(now));
        }
    }

    /// Flushes every partition whose `flush.ms` has passed.
    pub fn flush_due(&self) {
        let now = now_ms();
        for partition in self.all_partitions() {
            if let Err(e) = partition.try_with_log(|log| log.flush_if_due(now)) {
                tracing::error!(topic = %partition.topic, partition = partition.index, error = %e, "flush failed");
            }
        }
    }

    /// Closes every log and writes the clean-shutdown record of each log dir.
    ///
    /// Every online partition is closed and sealed ([`PartitionLog::seal`]) under its log's
    /// lock, `num.recovery.threads.per.data.dir` at a time per log dir. Those with
    /// something to write are, when few, closed file by file (fsync, checkpoint, producer
    /// snapshot); when more than [`FSYNC_EACH_UP_TO`], their pending index entries are
    /// written without fsync and one `syncfs` per log dir makes everything durable. Then
    /// the record names every sealed log — and every log start-up had not opened yet, as
    /// the previous record described it — so the next start opens them without reading
    /// their own checkpoints and snapshots. A partition that is offline, or fails its
    /// close, is left out: the next start recovers it.
    pub fn shutdown(&self) -> Result<(), BrokerError> {
        self.stop_loading();
        let _admin = self.admin();
        let started = Instant::now();
        let now = now_ms();
        let online: Vec<Arc<Partition>> = self
            .all_partitions()
            .into_iter()
            .filter(|p| p.offline_reason().is_none())
            .collect();
        let dirty = online
            .iter()
            .filter(|p| p.with_log(|log| log.needs_close()).unwrap_or(false))
            .count();
        let syncfs = dirty > FSYNC_EACH_UP_TO;
        let sealed = log_dir_workers::run(
            &online,
            &self.dirs,
            self.recovery_threads,
            |p| p.dir(),
            |p| {
                p.try_with_log(|log| {
                    if log.needs_close() {
                        if syncfs {
                            log.close_before_sync()?;
                        } else {
                            log.close(now)?;
                        }
                    }
                    Ok(log.seal())
                })
                .inspect_err(|e| {
                    tracing::error!(topic = %p.topic, partition = p.index, error = %e, "close failed: the next start recovers the partition");
                })
            },
        );
        let mut sync_ms = 0;
        if syncfs {
            let synced = Instant::now();
            self.sync_log_dirs()?;
            sync_ms = synced.elapsed().as_millis() as u64;
        }
        let unopened = std::mem::take(&mut *self.unopened.lock());
        let sealed: Vec<(&Path, ClosedLog)> = online
            .iter()
            .zip(sealed)
            .filter_map(|(p, closed)| Some((p.dir(), closed.ok()?)))
            .collect();
        let mut recorded = 0;
        for dir in &self.dirs {
            let logs: Vec<(&str, &ClosedLog)> = sealed
                .iter()
                .map(|(path, log)| (*path, log))
                .chain(unopened.iter().map(|(path, log)| (path.as_path(), log)))
                .filter(|(path, _)| path.parent() == Some(dir.as_path()))
                .filter_map(|(path, log)| Some((path.file_name()?.to_str()?, log)))
                .collect();
            recorded += logs.len();
            CleanShutdown::write(&dir.join(CLEAN_SHUTDOWN_RECORD), logs)?;
        }
        tracing::info!(
            partitions = self.all_partitions().len(),
            closed = dirty,
            syncfs,
            recorded,
            sync_ms,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "logs closed"
        );
        Ok(())
    }

    /// `syncfs` on the file system of each log dir: everything written is durable.
    fn sync_log_dirs(&self) -> Result<(), BrokerError> {
        for dir in &self.dirs {
            let handle = File::open(dir)?;
            // SAFETY: syncfs takes a descriptor we own for the duration of the call.
            if unsafe { libc::syncfs(handle.as_raw_fd()) } != 0 {
                return Err(std::io::Error::last_os_error().into());
            }
        }
        Ok(())
    }

    /// How many segment files are open in the cache now.
    pub fn open_segment_files(&self) -> usize {
        self.files.open_count()
    }
}

/// Runs blocking file work (creating thousands of partition directories) off tokio's async
/// workers when called from one, so other connections keep being served meanwhile.
pub(crate) fn off_async_workers<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}
