//! Committed offsets in memory, made durable by `__consumer_offsets`.
//!
//! Every change passes a journal before it is applied, under the store's lock, so the
//! order changes reach the journal is the order they are applied in: the coordinator's
//! journal appends them to the group's partition of `__consumer_offsets` (see
//! `offsets_topic`), whose replicas a new coordinator replays.
//!
//! Beside the offsets, the store keeps the latest membership of each group (see
//! `group_metadata`) as written to `__consumer_offsets`. The log cleaner keeps the
//! latest record of each key there, so a replay of a cleaned partition gives the same
//! offsets and memberships.

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::ResponseError;
use parking_lot::Mutex;

use super::group_metadata::StoredGroup;

/// A committed offset with what the client attached to it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CommittedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
}

/// (topic, partition)
pub type TopicPartition = (String, i32);

/// One change to the stored offsets, or to a group's stored membership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Commit(String, TopicPartition, CommittedOffset),
    DeleteOffset(String, TopicPartition),
    DeleteGroup(String),
    /// A group's membership at the end of a rebalance; `None` once the group is gone.
    Membership(String, Option<StoredGroup>),
}

/// The offsets of every group, in memory; empty until partitions of `__consumer_offsets`
/// are loaded.
#[derive(Debug, Default)]
pub struct OffsetStore {
    inner: Mutex<Inner>,
}

/// Every group's committed offsets.
pub type Offsets = HashMap<String, BTreeMap<TopicPartition, CommittedOffset>>;

#[derive(Debug, Default)]
struct Inner {
    offsets: Offsets,
    /// The latest stored membership of each group.
    memberships: HashMap<String, StoredGroup>,
}

impl OffsetStore {
    /// The stored membership of every group, for the coordinator to restore its groups
    /// from at start-up.
    pub fn memberships(&self) -> Vec<(String, StoredGroup)> {
        let inner = self.inner.lock();
        inner
            .memberships
            .iter()
            .map(|(group, m)| (group.clone(), m.clone()))
            .collect()
    }

    /// Records `commits` of `group` durably, then makes them visible. All of them are
    /// written in one append, so they are recovered together or (if the machine crashes
    /// mid-write) the torn ones are dropped.
    pub fn commit<T>(
        &self,
        group: &str,
        commits: Vec<(TopicPartition, CommittedOffset)>,
        journal: impl FnOnce(&[Change]) -> Result<T, ResponseError>,
    ) -> Result<T, ResponseError> {
        let changes = commits
            .into_iter()
            .map(|(tp, c)| Change::Commit(group.to_string(), tp, c))
            .collect();
        self.inner.lock().apply(changes, journal)
    }

    /// Deletes some offsets of `group` (OffsetDelete).
    pub fn delete_offsets<T>(
        &self,
        group: &str,
        partitions: Vec<TopicPartition>,
        journal: impl FnOnce(&[Change]) -> Result<T, ResponseError>,
    ) -> Result<T, ResponseError> {
        let changes = partitions
            .into_iter()
            .map(|tp| Change::DeleteOffset(group.to_string(), tp))
            .collect();
        self.inner.lock().apply(changes, journal)
    }

    /// Deletes every offset of `group` (DeleteGroups).
    pub fn delete_group<T>(
        &self,
        group: &str,
        journal: impl FnOnce(&[Change]) -> Result<T, ResponseError>,
    ) -> Result<T, ResponseError> {
        self.inner
            .lock()
            .apply(vec![Change::DeleteGroup(group.to_string())], journal)
    }

    /// Replaces the offsets and memberships of the groups `owned` selects with those
    /// `changes` (a partition of `__consumer_offsets` read from its start) leave: a
    /// broker that became the partition's leader takes its groups over. Returns how many
    /// groups have offsets, and the stored membership of each group that has one.
    pub fn load(
        &self,
        owned: impl Fn(&str) -> bool,
        changes: Vec<Change>,
    ) -> (usize, Vec<(String, StoredGroup)>) {
        let mut loaded = Offsets::new();
        let mut memberships = HashMap::new();
        for change in changes {
            apply_membership(&mut memberships, &change);
            apply_change(&mut loaded, change);
        }
        let mut inner = self.inner.lock();
        inner.offsets.retain(|group, _| !owned(group));
        inner.memberships.retain(|group, _| !owned(group));
        let groups = loaded.len();
        inner
            .offsets
            .extend(loaded.into_iter().filter(|(group, _)| owned(group)));
        let memberships: Vec<(String, StoredGroup)> = memberships
            .into_iter()
            .filter(|(group, _)| owned(group))
            .collect();
        inner.memberships.extend(memberships.iter().cloned());
        (groups, memberships)
    }

    /// Writes the membership of `group` at the end of a rebalance (`None`: the group is
    /// gone) to `journal`.
    pub fn store_membership<T>(
        &self,
        group: &str,
        membership: Option<StoredGroup>,
        journal: impl FnOnce(&[Change]) -> Result<T, ResponseError>,
    ) -> Result<T, ResponseError> {
        self.inner.lock().apply(
            vec![Change::Membership(group.to_string(), membership)],
            journal,
        )
    }

    /// Whether a membership of `group` is stored.
    pub fn has_membership(&self, group: &str) -> bool {
        self.inner.lock().memberships.contains_key(group)
    }

    /// Forgets the offsets of the groups `moved` selects: their partition of
    /// `__consumer_offsets` is led elsewhere now.
    pub fn unload(&self, moved: impl Fn(&str) -> bool) {
        let mut inner = self.inner.lock();
        inner.offsets.retain(|group, _| !moved(group));
        inner.memberships.retain(|group, _| !moved(group));
    }

    /// Deletes the offsets of `group` that `expired` selects (retention), durably: one
    /// DeleteGroup record when none remain, DeleteOffset records otherwise, so they stay
    /// deleted after a restart. Returns how many were deleted. Selecting under the
    /// store's lock means a commit racing with expiry is judged by its own timestamp,
    /// never deleted unseen.
    pub fn expire<T>(
        &self,
        group: &str,
        expired: impl Fn(&CommittedOffset) -> bool,
        journal: impl FnOnce(&[Change]) -> Result<T, ResponseError>,
    ) -> Result<Option<(usize, T)>, ResponseError> {
        let mut inner = self.inner.lock();
        let Some(offsets) = inner.offsets.get(group) else {
            return Ok(None);
        };
        let gone: Vec<TopicPartition> = offsets
            .iter()
            .filter(|(_, c)| expired(c))
            .map(|(tp, _)| tp.clone())
            .collect();
        let count = gone.len();
        if count == 0 {
            return Ok(None);
        }
        let changes = if count == offsets.len() {
            vec![Change::DeleteGroup(group.to_string())]
        } else {
            gone.into_iter()
                .map(|tp| Change::DeleteOffset(group.to_string(), tp))
                .collect()
        };
        let written = inner.apply(changes, journal)?;
        Ok(Some((count, written)))
    }

    /// The committed offset of one partition.
    pub fn get(&self, group: &str, tp: &TopicPartition) -> Option<CommittedOffset> {
        self.inner.lock().offsets.get(group)?.get(tp).cloned()
    }

    /// Every committed offset of `group`, sorted by topic and partition.
    pub fn group_offsets(&self, group: &str) -> BTreeMap<TopicPartition, CommittedOffset> {
        self.inner
            .lock()
            .offsets
            .get(group)
            .cloned()
            .unwrap_or_default()
    }

    pub fn has_offsets(&self, group: &str) -> bool {
        self.inner.lock().offsets.contains_key(group)
    }

    /// The groups that have committed offsets.
    pub fn groups(&self) -> Vec<String> {
        self.inner.lock().offsets.keys().cloned().collect()
    }
}

impl Inner {
    /// Passes `changes` to `journal` (with a deleted group's offsets deleted one by one,
    /// as a compacted topic needs a tombstone per key), and applies them.
    fn apply<T>(
        &mut self,
        changes: Vec<Change>,
        journal: impl FnOnce(&[Change]) -> Result<T, ResponseError>,
    ) -> Result<T, ResponseError> {
        let expanded: Vec<Change>;
        let per_key = if changes.iter().any(|c| matches!(c, Change::DeleteGroup(_))) {
            expanded = changes
                .iter()
                .flat_map(|change| match change {
                    Change::DeleteGroup(group) => self
                        .offsets
                        .get(group)
                        .into_iter()
                        .flat_map(|o| o.keys())
                        .map(|tp| Change::DeleteOffset(group.clone(), tp.clone()))
                        .chain(
                            self.memberships
                                .contains_key(group)
                                .then(|| Change::Membership(group.clone(), None)),
                        )
                        .collect(),
                    other => vec![other.clone()],
                })
                .collect();
            &expanded
        } else {
            &changes
        };
        let written = journal(per_key)?;
        for change in changes {
            apply_membership(&mut self.memberships, &change);
            apply_change(&mut self.offsets, change);
        }
        Ok(written)
    }
}

/// Applies `change` to `offsets`.
pub fn apply_change(offsets: &mut Offsets, change: Change) {
    match change {
        Change::Commit(group, tp, c) => {
            offsets.entry(group).or_default().insert(tp, c);
        }
        Change::DeleteOffset(group, tp) => {
            if let Some(o) = offsets.get_mut(&group) {
                o.remove(&tp);
                if o.is_empty() {
                    offsets.remove(&group);
                }
            }
        }
        Change::DeleteGroup(group) => {
            offsets.remove(&group);
        }
        Change::Membership(..) => {}
    }
}

/// Keeps the latest membership of each group that `change` touches.
pub fn apply_membership(memberships: &mut HashMap<String, StoredGroup>, change: &Change) {
    match change {
        Change::Membership(group, Some(m)) => {
            memberships.insert(group.clone(), m.clone());
        }
        Change::Membership(group, None) | Change::DeleteGroup(group) => {
            memberships.remove(group);
        }
        Change::Commit(..) | Change::DeleteOffset(..) => {}
    }
}
