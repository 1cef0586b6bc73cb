//! A partition hosted by this broker: its log behind a lock, and the fetch requests
//! waiting for it to grow. A partition whose log could not be opened (a corrupt or
//! unreadable file) is offline: every request for it gets KAFKA_STORAGE_ERROR while the
//! broker's other partitions serve.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use strom_log::{AppendInfo, LogError, PartitionLog};
use tokio::sync::Notify;

/// One topic partition and its log.
#[derive(Debug)]
pub struct Partition {
    pub topic: String,
    pub index: i32,
    dir: PathBuf,
    /// The log, or why it is offline.
    log: Result<Mutex<PartitionLog>, String>,
    /// Long-polling fetches to wake on the next append. Weak, so a fetch that finished
    /// without being woken costs nothing once it is gone; dead entries are pruned on
    /// every registration, so the list is bounded by the fetches in flight.
    waiters: Mutex<Vec<Weak<Notify>>>,
    /// Set when the topic is deleted, so fetches parked on it answer at once.
    deleted: AtomicBool,
}

impl Partition {
    pub fn new(topic: &str, index: i32, log: PartitionLog) -> Self {
        Self {
            topic: topic.to_string(),
            index,
            dir: log.dir().to_path_buf(),
            log: Ok(Mutex::new(log)),
            waiters: Mutex::new(Vec::new()),
            deleted: AtomicBool::new(false),
        }
    }

    /// A partition whose log in `dir` could not be opened, for `reason`.
    pub fn offline(topic: &str, index: i32, dir: &Path, reason: String) -> Self {
        Self {
            topic: topic.to_string(),
            index,
            dir: dir.to_path_buf(),
            log: Err(reason),
            waiters: Mutex::new(Vec::new()),
            deleted: AtomicBool::new(false),
        }
    }

    /// Why the partition is offline, if it is.
    pub fn offline_reason(&self) -> Option<&str> {
        self.log.as_ref().err().map(String::as_str)
    }

    /// The partition's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends a producer's record set and wakes waiting fetches.
    pub fn append(&self, records: &[u8]) -> Result<AppendInfo, LogError> {
        let info = self.try_with_log(|log| log.append(records, crate::now_ms()))?;
        if info.record_count > 0 {
            self.wake_waiters();
        }
        Ok(info)
    }

    /// Marks the partition as deleted and wakes the fetches waiting on it, which then
    /// answer UNKNOWN_TOPIC_OR_PARTITION instead of waiting out their `max_wait_ms`.
    pub fn mark_deleted(&self) {
        self.deleted.store(true, Ordering::Release);
        self.wake_waiters();
    }

    pub fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::Acquire)
    }

    fn wake_waiters(&self) {
        let waiters = std::mem::take(&mut *self.waiters.lock());
        for waiter in waiters.iter().filter_map(Weak::upgrade) {
            waiter.notify_one();
        }
    }

    /// Registers `waiter` to be notified at the next append. `Notify` keeps a permit, so
    /// an append between this call and the wait is not missed.
    pub fn register_waiter(&self, waiter: &Arc<Notify>) {
        let mut waiters = self.waiters.lock();
        waiters.retain(|w| w.strong_count() > 0);
        waiters.push(Arc::downgrade(waiter));
    }

    /// Runs `f` with the log locked; an offline partition is a storage error.
    pub fn with_log<T>(&self, f: impl FnOnce(&mut PartitionLog) -> T) -> Result<T, LogError> {
        match &self.log {
            Ok(log) => Ok(f(&mut log.lock())),
            Err(reason) => Err(LogError::Offline {
                dir: self.dir.display().to_string(),
                reason: reason.clone(),
            }),
        }
    }

    /// [`Self::with_log`] for an `f` that can fail itself.
    pub fn try_with_log<T>(
        &self,
        f: impl FnOnce(&mut PartitionLog) -> Result<T, LogError>,
    ) -> Result<T, LogError> {
        self.with_log(f)?
    }

    /// The high watermark (-1 while offline). With one replica every appended record is
    /// committed, so it is the log end offset.
    pub fn high_watermark(&self) -> i64 {
        self.with_log(|log| log.log_end_offset()).unwrap_or(-1)
    }
}
