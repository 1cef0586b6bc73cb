//! The metadata state machine: openraft's `RaftStateMachine` whose state is the
//! [`MetadataImage`]. Applying a committed entry replays its records into a new image at
//! the entry's index (its metadata offset), which is what brokers and the controller's
//! managers read.
//!
//! Besides the image it keeps the last `HISTORY` applied batches, so a broker (a metadata
//! observer) that is a little behind gets just the records it misses, and one further
//! behind gets the image whole. Snapshots are the image serialized, written to
//! `<offset>-<term>.checkpoint` (Kafka's snapshot file name) beside the log.

use std::collections::VecDeque;
use std::fs;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, RaftSnapshotBuilder, Snapshot, StorageIOError};
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use strom_metadata::{MetadataImage, MetadataRecord};
use tokio::sync::watch;

use crate::log_store::{blocking, write_durably};
use crate::types::{Entry, LogId, SnapshotMeta, StorageError, StoredMembership, TypeConfig};

/// How many applied batches are kept for observers that are behind.
const HISTORY: usize = 8192;

/// What has been applied: the image and the batches that led to it.
#[derive(Debug)]
pub struct Applied {
    pub image: Arc<MetadataImage>,
    pub last_applied: Option<LogId>,
    pub membership: StoredMembership,
    /// (offset, records) of the last applied entries, oldest first, contiguous.
    history: VecDeque<(i64, Arc<Vec<MetadataRecord>>)>,
}

/// What an observer at `offset` needs to catch up.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum MetadataDelta {
    /// The batches after its offset, in order.
    Batches(Vec<(i64, Arc<Vec<MetadataRecord>>)>),
    /// It is too far behind: the whole image.
    Image(Vec<u8>),
}

impl Applied {
    /// The applied metadata offset (-1 before anything was applied).
    pub fn offset(&self) -> i64 {
        self.image.offset
    }

    /// What an observer at `offset` is missing, at most `max_records` records of it (but
    /// at least one batch), or `None` when it has everything. An observer with nothing
    /// yet (a broker that just started) gets the image, which is bounded by the cluster's
    /// size, where the history from the start can hold every change ever made.
    ///
    /// The bound keeps each answer small enough to arrive within the observer's fetch
    /// timeout: a broker restarted into a cluster of 18,000 partitions whose history held
    /// a thousand batches of up to 10,000 records each never received an answer in time,
    /// asked again from the same offset, and was never unfenced.
    pub fn delta_since(&self, offset: i64, max_records: usize) -> Option<MetadataDelta> {
        if offset >= self.image.offset {
            return None;
        }
        let first = self.history.front().map_or(i64::MAX, |(o, _)| *o);
        if offset < 0 || offset + 1 < first {
            return Some(MetadataDelta::Image(self.image.to_snapshot()));
        }
        let skip = (offset + 1 - first) as usize;
        let mut records = 0;
        Some(MetadataDelta::Batches(
            self.history
                .iter()
                .skip(skip)
                .take_while(|(_, batch)| {
                    let first_batch = records == 0;
                    records += batch.len().max(1);
                    first_batch || records <= max_records
                })
                .cloned()
                .collect(),
        ))
    }
}

/// The current snapshot: its metadata and the bytes of its file.
type StoredSnapshot = (SnapshotMeta, Vec<u8>);

/// The snapshot file's content.
#[derive(Serialize, Deserialize)]
struct SnapshotFile {
    meta: SnapshotMeta,
    image: Vec<u8>,
}

/// The state machine; clones share the same state.
#[derive(Debug, Clone)]
pub struct StateMachine {
    dir: PathBuf,
    applied: Arc<RwLock<Applied>>,
    /// The applied offset, for waiters (long-polling observers, the controller).
    notify: Arc<watch::Sender<i64>>,
    current: Arc<RwLock<Option<StoredSnapshot>>>,
}

impl StateMachine {
    /// The state machine of cluster `cluster_id`, starting from the newest snapshot in
    /// `dir`, if any.
    pub fn open(dir: &Path, cluster_id: &str) -> std::io::Result<Self> {
        fs::create_dir_all(dir)?;
        let mut image = MetadataImage::new(cluster_id, -1);
        let mut last_applied = None;
        let mut membership = StoredMembership::default();
        let mut current = None;
        if let Some(path) = newest_snapshot(dir)? {
            let file: SnapshotFile =
                serde_json::from_slice(&fs::read(&path)?).map_err(std::io::Error::other)?;
            image = MetadataImage::from_snapshot(&file.image).map_err(std::io::Error::other)?;
            last_applied = file.meta.last_log_id;
            membership = file.meta.last_membership.clone();
            current = Some((file.meta, file.image));
        }
        let offset = image.offset;
        Ok(Self {
            dir: dir.to_path_buf(),
            applied: Arc::new(RwLock::new(Applied {
                image: Arc::new(image),
                last_applied,
                membership,
                history: VecDeque::new(),
            })),
            notify: Arc::new(watch::channel(offset).0),
            current: Arc::new(RwLock::new(current)),
        })
    }

    /// Reads the applied state.
    pub fn read<T>(&self, f: impl FnOnce(&Applied) -> T) -> T {
        f(&self.applied.read())
    }

    pub fn image(&self) -> Arc<MetadataImage> {
        self.applied.read().image.clone()
    }

    /// A receiver of the applied offset, which changes after every apply.
    pub fn subscribe(&self) -> watch::Receiver<i64> {
        self.notify.subscribe()
    }
}

impl StateMachine {
    /// Makes `bytes` (a [`SnapshotFile`]) the current snapshot: written durably as
    /// `<offset>-<term>.checkpoint`, older ones removed.
    fn keep_snapshot(&self, meta: &SnapshotMeta, bytes: Vec<u8>) -> std::io::Result<()> {
        let name = format!(
            "{:020}-{:010}.checkpoint",
            meta.last_log_id.map_or(0, |l| l.index),
            meta.last_log_id.map_or(0, |l| l.leader_id.term)
        );
        blocking(|| {
            write_durably(&self.dir, &name, &bytes)?;
            remove_older_snapshots(&self.dir, &name)
        })?;
        *self.current.write() = Some((meta.clone(), bytes));
        Ok(())
    }
}

fn newest_snapshot(dir: &Path) -> std::io::Result<Option<PathBuf>> {
    let mut newest: Option<(u64, PathBuf)> = None;
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let Some(offset) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".checkpoint"))
            .and_then(|n| n.split('-').next())
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        if newest.as_ref().is_none_or(|(o, _)| offset > *o) {
            newest = Some((offset, path));
        }
    }
    Ok(newest.map(|(_, p)| p))
}

fn storage_error(e: impl std::fmt::Display) -> StorageError {
    StorageIOError::write_snapshot(None, &std::io::Error::other(e.to_string())).into()
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let (meta, image) = {
            let applied = self.applied.read();
            let last = applied.last_applied;
            let meta = SnapshotMeta {
                last_log_id: last,
                last_membership: applied.membership.clone(),
                snapshot_id: format!(
                    "{}-{}",
                    last.map_or(0, |l| l.index),
                    last.map_or(0, |l| l.leader_id.term)
                ),
            };
            (meta, applied.image.to_snapshot())
        };
        let file = SnapshotFile {
            meta: meta.clone(),
            image,
        };
        let bytes = serde_json::to_vec(&file).map_err(storage_error)?;
        self.keep_snapshot(&meta, bytes.clone())
            .map_err(storage_error)?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(bytes)),
        })
    }
}

fn remove_older_snapshots(dir: &Path, keep: &str) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".checkpoint") && name != keep {
            fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let applied = self.applied.read();
        Ok((applied.last_applied, applied.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<()>, StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut replies = Vec::new();
        let offset = {
            let mut applied = self.applied.write();
            for entry in entries {
                let offset = entry.log_id.index as i64;
                let records = match entry.payload {
                    EntryPayload::Normal(batch) => batch.0,
                    EntryPayload::Membership(m) => {
                        applied.membership = StoredMembership::new(Some(entry.log_id), m);
                        Vec::new()
                    }
                    EntryPayload::Blank => Vec::new(),
                };
                applied.image = Arc::new(applied.image.apply_at(offset, &records));
                applied.last_applied = Some(entry.log_id);
                if applied.history.len() == HISTORY {
                    applied.history.pop_front();
                }
                applied.history.push_back((offset, Arc::new(records)));
                replies.push(());
            }
            applied.image.offset
        };
        self.notify.send_replace(offset);
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let bytes = snapshot.into_inner();
        let file: SnapshotFile = serde_json::from_slice(&bytes).map_err(storage_error)?;
        let image = MetadataImage::from_snapshot(&file.image).map_err(storage_error)?;
        self.keep_snapshot(meta, bytes).map_err(storage_error)?;
        let offset = {
            let mut applied = self.applied.write();
            applied.image = Arc::new(image);
            applied.last_applied = meta.last_log_id;
            applied.membership = meta.last_membership.clone();
            applied.history.clear();
            applied.image.offset
        };
        self.notify.send_replace(offset);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        Ok(self.current.read().clone().map(|(meta, bytes)| Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(bytes)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, EntryPayload};
    use strom_metadata::BrokerId;
    use uuid::Uuid;

    use super::*;
    use crate::types::MetadataBatch;

    fn entry(index: u64, records: Vec<MetadataRecord>) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 0), index),
            payload: EntryPayload::Normal(MetadataBatch(records)),
        }
    }

    fn topic(name: &str) -> Vec<MetadataRecord> {
        let id = Uuid::new_v4();
        vec![
            MetadataRecord::Topic {
                name: name.into(),
                topic_id: id,
            },
            MetadataRecord::Partition {
                topic_id: id,
                partition_id: 0,
                replicas: vec![BrokerId(1)],
                isr: vec![BrokerId(1)],
                leader: BrokerId(1),
                leader_epoch: strom_metadata::LeaderEpoch(0),
                partition_epoch: strom_metadata::PartitionEpoch(0),
            },
        ]
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_snapshot_installs_the_same_image_and_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let mut sm = StateMachine::open(dir.path(), "c").unwrap();
        sm.apply([entry(0, topic("a")), entry(1, topic("b"))])
            .await
            .unwrap();
        let snapshot = sm
            .get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .unwrap();
        assert_eq!(snapshot.meta.last_log_id.map(|l| l.index), Some(1));

        let other = tempfile::tempdir().unwrap();
        let mut follower = StateMachine::open(other.path(), "c").unwrap();
        follower
            .install_snapshot(&snapshot.meta, snapshot.snapshot)
            .await
            .unwrap();
        let image = follower.image();
        assert!(image.topic("a").is_some() && image.topic("b").is_some());
        assert_eq!(image.offset, 1);
        assert!(
            follower
                .read(|a| a.delta_since(0, 10))
                .is_some_and(|d| matches!(d, MetadataDelta::Image(_))),
            "an observer behind the snapshot gets the whole image"
        );

        let reopened = StateMachine::open(other.path(), "c").unwrap();
        assert!(
            reopened.image().topic("b").is_some(),
            "the snapshot file is loaded at start"
        );
        assert_eq!(reopened.read(|a| a.last_applied.map(|l| l.index)), Some(1));
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn an_observer_a_little_behind_gets_only_the_batches_it_misses() {
        let dir = tempfile::tempdir().unwrap();
        let mut sm = StateMachine::open(dir.path(), "c").unwrap();
        sm.apply([
            entry(0, topic("a")),
            entry(1, topic("b")),
            entry(2, topic("c")),
        ])
        .await
        .unwrap();
        match sm.read(|a| a.delta_since(0, 10)) {
            Some(MetadataDelta::Batches(b)) => {
                assert_eq!(b.iter().map(|(o, _)| *o).collect::<Vec<_>>(), vec![1, 2])
            }
            other => panic!("{other:?}"),
        }
        match sm.read(|a| a.delta_since(0, 1)) {
            Some(MetadataDelta::Batches(b)) => assert_eq!(
                b.iter().map(|(o, _)| *o).collect::<Vec<_>>(),
                vec![1],
                "at most one record's worth, but always a batch"
            ),
            other => panic!("{other:?}"),
        }
        assert!(
            sm.read(|a| a.delta_since(-1, 10))
                .is_some_and(|d| matches!(d, MetadataDelta::Image(_))),
            "an observer with nothing gets the image, not the history from the start"
        );
        assert!(
            sm.read(|a| a.delta_since(2, 10)).is_none(),
            "nothing to send at the head"
        );
    }
}
