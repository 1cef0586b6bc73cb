//! The broker's log cleaner (Kafka's `LogCleaner` and `LogCleanerManager`):
//! `log.cleaner.threads` threads, each cleaning one compacted log at a time, the
//! dirtiest due one first, with strom-log's [`Cleaner`].
//!
//! A log is due when its dirty ratio reaches `min.cleanable.dirty.ratio`, when a dirty
//! record is older than `max.compaction.lag.ms`, or, with nothing else due, when a delete
//! horizon it stamped has passed. Each log dir's `cleaner-offset-checkpoint` keeps where
//! every log's dirty section starts. A log the cleaner cannot read (a damaged segment)
//! is marked uncleanable with the reason and served as it is; the others go on being
//! cleaned. An I/O error (a full disk) abandons that cleaning, leaving the old segments,
//! and it is tried again later. Cleaner threads are plain threads: their work is
//! blocking file I/O.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};
use strom_log::cleaner::{
    self, no_phase_hook, Cleaner, CleanerConfig, CleaningOutcome, LogToClean,
};
use strom_log::offset_checkpoint::{self, PartitionOffsets};
use strom_log::LogError;
use strom_replica::partition::Partition;
use strom_wire::now_ms;

use crate::log_manager::LogManager;
use crate::metrics::BrokerMetrics;

/// The `log.cleaner.*` broker configs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogCleanerConfig {
    /// `log.cleaner.enable`
    pub enable: bool,
    /// `log.cleaner.threads`
    pub threads: usize,
    /// `log.cleaner.dedupe.buffer.size`, shared by the threads.
    pub dedupe_buffer_size: usize,
    /// `log.cleaner.io.buffer.size`
    pub io_buffer_size: usize,
    /// `log.cleaner.io.buffer.load.factor`
    pub io_buffer_load_factor: f64,
    /// `log.cleaner.io.max.bytes.per.second`
    pub io_max_bytes_per_second: f64,
    /// `log.cleaner.backoff.ms`
    pub backoff_ms: u64,
}

impl Default for LogCleanerConfig {
    fn default() -> Self {
        Self {
            enable: true,
            threads: 1,
            dedupe_buffer_size: 128 << 20,
            io_buffer_size: 512 << 10,
            io_buffer_load_factor: 0.9,
            io_max_bytes_per_second: f64::MAX,
            backoff_ms: 15_000,
        }
    }
}

impl LogCleanerConfig {
    /// One thread's settings: its share of the dedupe buffer.
    fn per_thread(&self) -> CleanerConfig {
        CleanerConfig {
            dedupe_buffer_bytes: self.dedupe_buffer_size / self.threads.max(1),
            load_factor: self.io_buffer_load_factor,
            io_buffer_bytes: self.io_buffer_size,
            max_io_bytes_per_second: self.io_max_bytes_per_second,
        }
    }
}

/// A partition, as the cleaner's bookkeeping names it.
type PartitionKey = (String, i32);

/// The cleaner's bookkeeping, under one lock.
#[derive(Debug, Default)]
struct Manager {
    /// First dirty offsets, by log dir (each dir's `cleaner-offset-checkpoint`).
    checkpoints: HashMap<PathBuf, PartitionOffsets>,
    /// Logs a thread is cleaning.
    in_progress: HashSet<PartitionKey>,
    /// Logs that cannot be cleaned, with the reason.
    uncleanable: HashMap<PartitionKey, String>,
    /// The threads started, by id (a thread whose id is not below `log.cleaner.threads`
    /// ends).
    threads: HashMap<usize, JoinHandle<()>>,
}

/// The log cleaner of one broker.
#[derive(Debug)]
pub struct LogCleaner {
    logs: Arc<LogManager>,
    metrics: Arc<BrokerMetrics>,
    config: RwLock<LogCleanerConfig>,
    manager: Mutex<Manager>,
    /// Wakes sleeping threads: at shutdown and when the config changes.
    wake: Condvar,
    stopping: Arc<AtomicBool>,
}

impl LogCleaner {
    /// Reads every log dir's checkpoint and starts the threads (none when
    /// `log.cleaner.enable` is off).
    pub fn start(
        logs: Arc<LogManager>,
        metrics: Arc<BrokerMetrics>,
        config: LogCleanerConfig,
        log_dirs: &[PathBuf],
    ) -> Arc<Self> {
        let checkpoints = log_dirs
            .iter()
            .map(|dir| (dir.clone(), read_checkpoint(dir)))
            .collect();
        let cleaner = Arc::new(Self {
            logs,
            metrics,
            config: RwLock::new(config),
            manager: Mutex::new(Manager {
                checkpoints,
                ..Manager::default()
            }),
            wake: Condvar::new(),
            stopping: Arc::new(AtomicBool::new(false)),
        });
        cleaner.spawn_threads();
        cleaner
    }

    /// Applies changed dynamic `log.cleaner.*` configs: the threads pick them up at
    /// their next cleaning, and the thread count follows `log.cleaner.threads`.
    pub fn reconfigure(self: &Arc<Self>, config: LogCleanerConfig) {
        let enable = self.config.read().enable;
        *self.config.write() = LogCleanerConfig { enable, ..config };
        self.spawn_threads();
        self.wake.notify_all();
    }

    /// Stops the threads, abandoning the cleanings in progress (their files are
    /// removed, or by the next start), and waits for them.
    pub fn shutdown(&self) {
        self.stopping.store(true, Ordering::Release);
        self.wake.notify_all();
        let threads: Vec<JoinHandle<()>> = {
            let mut manager = self.manager.lock();
            manager.threads.drain().map(|(_, t)| t).collect()
        };
        for thread in threads {
            let _ = thread.join();
        }
    }

    fn spawn_threads(self: &Arc<Self>) {
        let config = *self.config.read();
        if !config.enable || self.stopping.load(Ordering::Acquire) {
            return;
        }
        let mut manager = self.manager.lock();
        manager.threads.retain(|_, t| !t.is_finished());
        for id in 0..config.threads {
            if manager.threads.contains_key(&id) {
                continue;
            }
            let cleaner = self.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("log-cleaner-{id}"))
                .spawn(move || cleaner.run(id));
            match spawned {
                Ok(thread) => {
                    manager.threads.insert(id, thread);
                }
                Err(e) => tracing::error!(error = %e, "cannot start a log cleaner thread"),
            }
        }
    }

    /// A cleaner thread: cleans the dirtiest due log, or sleeps `log.cleaner.backoff.ms`
    /// when none is due.
    fn run(self: Arc<Self>, id: usize) {
        loop {
            let config = *self.config.read();
            if self.stopping.load(Ordering::Acquire) || id >= config.threads {
                return;
            }
            let mut cleaner = Cleaner::new(config.per_thread()).with_abort(self.stopping.clone());
            if !self.clean_dirtiest(id, &mut cleaner) {
                let mut manager = self.manager.lock();
                if !self.stopping.load(Ordering::Acquire) {
                    self.wake.wait_for(
                        &mut manager,
                        Duration::from_millis(config.backoff_ms.max(1)),
                    );
                }
            }
        }
    }

    /// Cleans the dirtiest due log. Returns whether a cleaning completed.
    fn clean_dirtiest(&self, id: usize, cleaner: &mut Cleaner) -> bool {
        let now = now_ms();
        let Some((partition, to_clean)) = self.grab_dirtiest(now) else {
            return false;
        };
        let key = (partition.topic.clone(), partition.index);
        let completed = self.clean_partition(id, &partition, to_clean, cleaner, now);
        self.manager.lock().in_progress.remove(&key);
        completed
    }

    /// Chooses the log to clean and marks it in progress (Kafka's
    /// `grabFilthiestCompactedLog`): the highest dirty ratio among those at or above
    /// their `min.cleanable.dirty.ratio` or past `max.compaction.lag.ms`; else one whose
    /// tombstones' delete horizon has passed.
    fn grab_dirtiest(&self, now: i64) -> Option<(Arc<Partition>, LogToClean)> {
        let mut manager = self.manager.lock();
        let mut due: Option<(Arc<Partition>, LogToClean, f64)> = None;
        let mut expired: Option<(Arc<Partition>, LogToClean)> = None;
        for partition in self.logs.all_partitions() {
            let key = (partition.topic.clone(), partition.index);
            if manager.in_progress.contains(&key) || manager.uncleanable.contains_key(&key) {
                continue;
            }
            let checkpointed = log_dir(&partition)
                .and_then(|dir| manager.checkpoints.get(dir))
                .and_then(|offsets| offsets.get(&key).copied());
            let high_watermark = partition.high_watermark();
            let Ok(Ok(Some((to_clean, min_ratio)))) = partition.with_log(|log| {
                let ratio = log.config().min_cleanable_dirty_ratio;
                log.to_clean(checkpointed, high_watermark, now)
                    .map(|t| t.map(|t| (t, ratio)))
            }) else {
                continue;
            };
            let ratio = to_clean.dirty_ratio();
            let cleanable = to_clean.cleanable_bytes > 0;
            let needed = cleanable && (ratio >= min_ratio || to_clean.compaction_overdue_ms > 0);
            if needed && due.as_ref().is_none_or(|(_, _, r)| ratio > *r) {
                due = Some((partition, to_clean, ratio));
            } else if !needed && to_clean.tombstones_expired && expired.is_none() {
                expired = Some((partition, to_clean));
            }
        }
        let (partition, to_clean) = due.map(|(p, t, _)| (p, t)).or(expired)?;
        manager
            .in_progress
            .insert((partition.topic.clone(), partition.index));
        Some((partition, to_clean))
    }

    /// Cleans one log and records the outcome. Returns whether the cleaning completed.
    fn clean_partition(
        &self,
        id: usize,
        partition: &Partition,
        to_clean: LogToClean,
        cleaner: &mut Cleaner,
        now: i64,
    ) -> bool {
        let Ok(plan) = partition.with_log(|log| log.plan_cleaning(to_clean)) else {
            return false;
        };
        let started = Instant::now();
        let outcome = cleaner.clean(
            &plan,
            now,
            |group| partition.try_with_log(|log| log.replace_cleaned(group, &no_phase_hook)),
            &no_phase_hook,
        );
        match outcome {
            Ok(outcome) if outcome.completed => {
                let first_dirty = partition.with_log(|log| {
                    log.cleaned_up_to(outcome.end_offset, outcome.latest_delete_horizon)
                });
                if let Ok(first_dirty) = first_dirty {
                    self.checkpoint(partition, first_dirty);
                }
                self.record(id, &plan.name, &outcome, started.elapsed());
                true
            }
            Ok(_) => {
                self.abandoned();
                tracing::info!(cleaner = id, log = %plan.name, "cleaning abandoned: the log changed while it was cleaned");
                false
            }
            Err(e) => {
                let changed = partition
                    .with_log(|log| log.layout_generation())
                    .map_or(true, |g| g != plan.generation);
                match e {
                    _ if changed => {
                        self.abandoned();
                        tracing::info!(cleaner = id, log = %plan.name, error = %e, "cleaning abandoned: the log changed while it was cleaned")
                    }
                    LogError::Closed { .. } => {}
                    LogError::Io(_) => {
                        self.abandoned();
                        tracing::warn!(cleaner = id, log = %plan.name, error = %e, "cleaning abandoned, the old segments kept; it is tried again later")
                    }
                    e => self.mark_uncleanable(partition, &plan.name, e),
                }
                false
            }
        }
    }

    fn abandoned(&self) {
        self.metrics
            .log_cleaner_abandoned
            .fetch_add(1, Ordering::Relaxed);
    }

    fn mark_uncleanable(&self, partition: &Partition, name: &str, error: LogError) {
        tracing::error!(log = %name, error = %error, "marking the partition uncleanable: it is served as it is and not cleaned until the broker restarts");
        self.metrics
            .log_cleaner_uncleanable
            .fetch_add(1, Ordering::Relaxed);
        self.manager.lock().uncleanable.insert(
            (partition.topic.clone(), partition.index),
            error.to_string(),
        );
    }

    /// Records that `partition` is clean below `first_dirty` in its log dir's checkpoint,
    /// which is rewritten without the partitions the dir no longer hosts.
    fn checkpoint(&self, partition: &Partition, first_dirty: i64) {
        let Some(dir) = log_dir(partition) else {
            return;
        };
        let hosted: HashSet<PartitionKey> = self
            .logs
            .all_partitions()
            .iter()
            .filter(|p| log_dir(p) == Some(dir))
            .map(|p| (p.topic.clone(), p.index))
            .collect();
        let mut manager = self.manager.lock();
        let offsets = manager.checkpoints.entry(dir.to_path_buf()).or_default();
        offsets.insert((partition.topic.clone(), partition.index), first_dirty);
        offsets.retain(|key, _| hosted.contains(key));
        let path = dir.join(cleaner::CHECKPOINT_FILE);
        if let Err(e) = offset_checkpoint::write(&path, offsets) {
            tracing::warn!(path = %path.display(), error = %e, "cannot write the cleaner checkpoint");
        }
    }

    /// Counts a completed cleaning and logs its summary, as Kafka's cleaner does.
    fn record(&self, id: usize, name: &str, outcome: &CleaningOutcome, took: Duration) {
        let stats = &outcome.stats;
        self.metrics
            .log_cleaner_cleanings
            .fetch_add(1, Ordering::Relaxed);
        self.metrics
            .log_cleaner_bytes_read
            .fetch_add(stats.bytes_read + stats.map_bytes_read, Ordering::Relaxed);
        self.metrics
            .log_cleaner_bytes_written
            .fetch_add(stats.bytes_written, Ordering::Relaxed);
        let mb = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
        let rate = |bytes: u64, time: Duration| mb(bytes) / time.as_secs_f64().max(1e-6);
        tracing::info!(
            cleaner = id,
            log = %name,
            cleaned_up_to = outcome.end_offset,
            "cleaned: {:.1} MB of log processed in {:.2} s ({:.1} MB/s); indexed {:.1} MB in {:.2} s \
             ({:.1} MB/s), {} keys, buffer {:.1}% used; cleaned {:.1} MB in {:.2} s ({:.1} MB/s), \
             throttled {:.2} s; start size {:.2} MB ({} records), end size {:.2} MB ({} records), \
             {:.1}% size reduction ({:.1}% fewer records), {} records without a key removed; \
             {} segments became {}",
            mb(stats.bytes_read),
            took.as_secs_f64(),
            rate(stats.bytes_read, took),
            mb(stats.map_bytes_read),
            stats.map_time.as_secs_f64(),
            rate(stats.map_bytes_read, stats.map_time),
            stats.map_keys,
            100.0 * (stats.map_keys * cleaner::offset_map::BYTES_PER_ENTRY) as f64
                / stats.map_size_bytes.max(1) as f64,
            mb(stats.bytes_read),
            stats.copy_time.as_secs_f64(),
            rate(stats.bytes_read, stats.copy_time),
            stats.throttled.as_secs_f64(),
            mb(stats.bytes_read),
            stats.records_read,
            mb(stats.bytes_written),
            stats.records_kept,
            100.0 * (1.0 - stats.bytes_written as f64 / stats.bytes_read.max(1) as f64),
            100.0 * (1.0 - stats.records_kept as f64 / stats.records_read.max(1) as f64),
            stats.records_without_key,
            stats.segments_before,
            stats.segments_after,
        );
    }
}

/// The log dir holding `partition`.
fn log_dir(partition: &Partition) -> Option<&Path> {
    partition.dir().parent()
}

fn read_checkpoint(dir: &Path) -> PartitionOffsets {
    offset_checkpoint::read(&dir.join(cleaner::CHECKPOINT_FILE), "cleaner offset")
}
