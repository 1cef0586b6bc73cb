//! Which of many partitions changed since they were last looked at, found without looking
//! at the others. A leader's fetch session and a follower's fetcher each hold every
//! partition one broker shares with another — thousands in a real cluster — and only
//! the few being written may cost them anything per round trip (Kafka's delayed-fetch
//! purgatory watches keys for the same reason instead of polling them).
//!
//! A [`PartitionWatch`] is registered with one partition and fires once, at that
//! partition's next change (an append, a moved high watermark or log start, a new role
//! or leader epoch, a deletion or a storage failure). Firing puts its key into the
//! [`ChangeSet`] it belongs to and wakes whoever waits on the set. Whoever looks at the
//! partition again re-registers its watch before reading it, so every partition is at
//! any time either watched or in the set: no change goes unseen.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::partition::Partition;

/// What a partition wakes at its next change.
pub trait Waiter: Send + Sync {
    fn wake(&self);
}

/// A single long-polling fetch without a session waits on a plain `Notify`.
impl Waiter for Notify {
    fn wake(&self) {
        self.notify_one();
    }
}

/// The keys of the partitions that changed since their watches were last registered.
#[derive(Debug)]
pub struct ChangeSet<K> {
    changed: Mutex<Vec<K>>,
    notify: Notify,
}

impl<K: Clone + Send + Sync + 'static> ChangeSet<K> {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            changed: Mutex::new(Vec::new()),
            notify: Notify::new(),
        })
    }

    /// A watch that puts `key` into this set when it fires.
    pub fn watch(self: &Arc<Self>, key: K) -> Arc<PartitionWatch<K>> {
        Arc::new(PartitionWatch {
            key,
            set: Arc::downgrade(self),
            registered_on: AtomicUsize::new(0),
        })
    }

    /// Takes the keys that changed (a key at most once per registration of its watch).
    pub fn take(&self) -> Vec<K> {
        std::mem::take(&mut *self.changed.lock())
    }

    /// Whether a key that changed satisfies `f`, leaving the set as it is.
    pub fn any(&self, f: impl Fn(&K) -> bool) -> bool {
        self.changed.lock().iter().any(f)
    }

    /// Waits for the next change (or returns at once when one came since the last wait).
    pub async fn changed(&self) {
        self.notify.notified().await
    }

    /// Puts `key` into the set and wakes the waiter, as a watch of `key` firing does.
    pub fn mark(&self, key: K) {
        self.changed.lock().push(key);
        self.notify.notify_one();
    }
}

/// One partition's watch in a [`ChangeSet`].
#[derive(Debug)]
pub struct PartitionWatch<K> {
    key: K,
    set: Weak<ChangeSet<K>>,
    /// The address of the partition this watch is registered with (0: none). A watch is
    /// registered at most once at a time, so a partition's waiters stay one per watcher
    /// however often it is looked at; a partition replaced under the same key (a topic
    /// re-created, a log loaded) gets the watch anew.
    registered_on: AtomicUsize,
}

impl<K: Clone + Send + Sync + 'static> PartitionWatch<K> {
    /// Registers this watch with `partition` unless it already is. Call it before reading
    /// the partition: a change after the read then fires it.
    pub fn register(self: &Arc<Self>, partition: &Partition) {
        let address = partition as *const Partition as usize;
        if self.registered_on.swap(address, Ordering::AcqRel) != address {
            let waiter: Arc<dyn Waiter> = self.clone();
            partition.register_waiter(Arc::downgrade(&waiter));
        }
    }
}

impl<K: Clone + Send + Sync + 'static> Waiter for PartitionWatch<K> {
    fn wake(&self) {
        self.registered_on.store(0, Ordering::Release);
        if let Some(set) = self.set.upgrade() {
            set.mark(self.key.clone());
        }
    }
}
