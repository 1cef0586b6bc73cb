//! A partition hosted by this broker: its log behind a lock, and the fetch requests
//! waiting for it to grow. A partition whose log could not be opened (a corrupt or
//! unreadable file) is offline: every request for it gets KAFKA_STORAGE_ERROR while the
//! broker's other partitions serve.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use bytes::Bytes;
use parking_lot::Mutex;
use strom_log::{AppendInfo, LogError, PartitionLog};
use strom_wire::records::first_record_at_or_after;
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

    /// The leader epoch. A single replica is leader from the start and never changes,
    /// so it is epoch 0 for as long as replication does not exist.
    pub fn leader_epoch(&self) -> i32 {
        0
    }

    /// Whole batches from `offset` for a consumer: at most `max_bytes` unless the first
    /// batch alone is larger and `min_one_batch` (KIP-74), up to the high watermark, with
    /// the partition's offsets as the Fetch response reports them (also beside an error,
    /// such as an offset out of range; -1 while offline).
    pub fn read(&self, offset: i64, max_bytes: usize, min_one_batch: bool) -> PartitionRead {
        let read = self.with_log(|log| PartitionRead {
            records: log
                .read(offset, max_bytes, min_one_batch)
                .map(|fetched| fetched.records),
            high_watermark: log.log_end_offset(),
            log_start_offset: log.log_start_offset(),
        });
        read.unwrap_or_else(|offline| PartitionRead {
            records: Err(offline),
            high_watermark: -1,
            log_start_offset: -1,
        })
    }

    /// The (offset, timestamp) ListOffsets answers for `timestamp`: the log end (-1,
    /// LATEST), the log start (-2 EARLIEST, -4 EARLIEST_LOCAL), the record with the
    /// largest timestamp (-3), or the first record at or after a timestamp; (-1, -1) when
    /// no record matches (Kafka's `fetchOffsetForTimestamp`).
    pub fn fetch_offset_for_timestamp(&self, timestamp: i64) -> Result<(i64, i64), LogError> {
        self.try_with_log(|log| {
            Ok(match timestamp {
                LATEST => (log.log_end_offset(), -1),
                EARLIEST | EARLIEST_LOCAL => (log.log_start_offset(), -1),
                MAX_TIMESTAMP => match log.max_timestamp()? {
                    Some((header, bytes)) => first_record_at_or_after(&bytes, header.max_timestamp)
                        .unwrap_or((header.base_offset, header.max_timestamp)),
                    None => (-1, -1),
                },
                t if t >= 0 => match log.batch_at_timestamp(t)? {
                    Some((header, bytes)) => first_record_at_or_after(&bytes, t)
                        .map(|(o, ts)| (o.max(log.log_start_offset()), ts))
                        .unwrap_or((header.base_offset, header.max_timestamp)),
                    None => (-1, -1),
                },
                _ => (-1, -1),
            })
        })
    }

    /// DeleteRecords: raises the log start offset to `offset` (-1: the high watermark)
    /// and returns the new low watermark.
    pub fn delete_records_before(&self, offset: i64, now_ms: i64) -> Result<i64, LogError> {
        self.try_with_log(|log| {
            let offset = if offset == -1 {
                log.log_end_offset()
            } else {
                offset
            };
            log.delete_records_before(offset, now_ms)
        })
    }

    /// OffsetForLeaderEpoch: the (epoch, end offset) of the largest epoch at most
    /// `epoch`, or (-1, -1) before the first. With one epoch, every record is in it.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        if epoch < 0 {
            (-1, -1)
        } else {
            (self.leader_epoch(), self.high_watermark())
        }
    }
}

/// What a consumer's read of one partition returns.
#[derive(Debug)]
pub struct PartitionRead {
    pub records: Result<Bytes, LogError>,
    pub high_watermark: i64,
    pub log_start_offset: i64,
}

/// ListOffsets' special timestamps.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
