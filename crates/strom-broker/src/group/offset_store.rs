//! Committed offsets in memory, made durable by a local log on a standalone node and by
//! `__consumer_offsets` on a cluster broker.
//!
//! Every change passes a journal before it is applied, under the store's lock, so the
//! order changes reach the journal is the order they are applied in: on a cluster the
//! coordinator's journal appends them to the group's partition of `__consumer_offsets`
//! (see `offsets_topic`), whose replicas a new coordinator replays.
//!
//! Beside the offsets, the store keeps the latest membership of each group (see
//! `group_metadata`): a cluster broker as written to `__consumer_offsets`, so that its
//! snapshots of a partition keep them too; a standalone node in its local log, so that
//! after a restart its groups go on in their generation.
//!
//! On a standalone node every commit is appended to `group-offsets.log` before the OffsetCommit response is
//! sent, as one `write` of length-prefixed, CRC32C-checked records. A write that reached
//! the page cache survives `kill -9`, which is the guarantee Kafka gives for its offsets
//! topic too (it does not fsync per commit either). At start-up the log is replayed; a torn
//! or corrupt tail (a crash of the machine mid-write) is cut off at the last whole record.
//!
//! The log only grows by appends, so it is compacted like a compacted topic: once it is
//! several times larger than the live offsets and memberships, they are written to a new
//! file that replaces the old one atomically (write, fsync, rename). Memory holds only
//! what is live, disk at most a bounded multiple of it.
//!
//! Membership records (kinds 4 and 5) are unknown to versions of strom older than them:
//! such a version stops its replay at the first one and cuts off the rest of the log as a
//! torn tail, so going back to it loses the commits made after that record.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use kafka_protocol::ResponseError;
use parking_lot::Mutex;

use super::group_metadata::{self, StoredGroup};
use crate::BrokerError;

const LOG_FILE: &str = "group-offsets.log";
const COMPACT_FILE: &str = "group-offsets.log.compacting";
/// Length and CRC before each record body.
const RECORD_HEADER: usize = 8;
/// A record body larger than this cannot have been written by us: the tail is corrupt.
const MAX_RECORD: usize = 1 << 20;
/// The log is never compacted below this size, so a small group does not rewrite it often.
const MIN_COMPACT_BYTES: u64 = 8 << 20;
/// Compact when the log is this many times the size of the live offsets (the local log
/// and, on a cluster, each partition of `__consumer_offsets`).
pub const COMPACT_RATIO: u64 = 4;

const KIND_COMMIT: u8 = 1;
const KIND_DELETE_OFFSET: u8 = 2;
const KIND_DELETE_GROUP: u8 = 3;
/// A group's membership: its GroupMetadata value (v3), as in `__consumer_offsets`.
const KIND_MEMBERSHIP: u8 = 4;
/// A group's membership is gone.
const KIND_MEMBERSHIP_GONE: u8 = 5;

/// A committed offset with what the client attached to it.
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// The offsets of every group, in memory and in the log.
#[derive(Debug)]
pub struct OffsetStore {
    inner: Mutex<Inner>,
}

/// Every group's committed offsets.
type Offsets = HashMap<String, BTreeMap<TopicPartition, CommittedOffset>>;

#[derive(Debug)]
struct Inner {
    /// `None` on a cluster broker, whose journal is `__consumer_offsets`.
    local: Option<LocalLog>,
    offsets: Offsets,
    /// The latest stored membership of each group.
    memberships: HashMap<String, StoredGroup>,
}

/// The standalone node's `group-offsets.log`.
#[derive(Debug)]
struct LocalLog {
    dir: PathBuf,
    file: File,
    file_bytes: u64,
}

/// A journal that accepts every change as it is: the local log is the only one.
pub fn no_journal(_: &[Change]) -> Result<(), ResponseError> {
    Ok(())
}

impl OffsetStore {
    /// A store without a local log, for a cluster broker: its offsets are loaded from
    /// and journalled to `__consumer_offsets`.
    pub fn in_memory() -> Self {
        Self {
            inner: Mutex::new(Inner {
                local: None,
                offsets: HashMap::new(),
                memberships: HashMap::new(),
            }),
        }
    }

    /// Opens (or creates) the log in `dir` and replays it.
    pub fn open(dir: &Path) -> Result<Self, BrokerError> {
        fs::create_dir_all(dir)?;
        let _ = fs::remove_file(dir.join(COMPACT_FILE));
        let path = dir.join(LOG_FILE);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        let mut offsets = HashMap::new();
        let mut memberships = HashMap::new();
        let valid = replay(&bytes, &mut offsets, &mut memberships);
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        if valid < bytes.len() {
            tracing::warn!(
                file = %path.display(),
                kept = valid,
                dropped = bytes.len() - valid,
                "truncating a torn tail of the group offsets log"
            );
            file.set_len(valid as u64)?;
        }
        let groups = offsets.len();
        tracing::info!(
            groups,
            memberships = memberships.len(),
            "group offsets loaded"
        );
        Ok(Self {
            inner: Mutex::new(Inner {
                local: Some(LocalLog {
                    dir: dir.to_path_buf(),
                    file,
                    file_bytes: valid as u64,
                }),
                offsets,
                memberships,
            }),
        })
    }

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

    /// Passes the live offsets of the groups `owned` selects to `journal` as commits, and
    /// their memberships, changing nothing: a snapshot after which a log holding them may
    /// start. Returns what `journal` returned and how many changes it was given.
    pub fn snapshot<T>(
        &self,
        owned: impl Fn(&str) -> bool,
        journal: impl FnOnce(&[Change]) -> Result<T, ResponseError>,
    ) -> Result<(T, usize), ResponseError> {
        let inner = self.inner.lock();
        let changes: Vec<Change> = inner
            .offsets
            .iter()
            .filter(|(group, _)| owned(group))
            .flat_map(|(group, offsets)| {
                offsets
                    .iter()
                    .map(|(tp, c)| Change::Commit(group.clone(), tp.clone(), c.clone()))
            })
            .chain(
                inner
                    .memberships
                    .iter()
                    .filter(|(group, _)| owned(group))
                    .map(|(group, m)| Change::Membership(group.clone(), Some(m.clone()))),
            )
            .collect();
        let count = changes.len();
        Ok((journal(&changes)?, count))
    }

    /// About how many bytes the live offsets of the groups `owned` selects take as
    /// records.
    pub fn live_bytes(&self, owned: impl Fn(&str) -> bool) -> u64 {
        let inner = self.inner.lock();
        LocalLog::live_bytes(
            inner.offsets.iter().filter(|(group, _)| owned(group)),
            inner.memberships.iter().filter(|(group, _)| owned(group)),
        )
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

    /// Size of the log file, for tests of bounded growth.
    pub fn file_bytes(&self) -> u64 {
        self.inner.lock().local.as_ref().map_or(0, |l| l.file_bytes)
    }
}

impl Inner {
    /// Passes `changes` to `journal` (with a deleted group's offsets deleted one by one,
    /// as a compacted topic needs a tombstone per key), writes them to the local log if
    /// there is one, and applies them.
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
        if let Some(local) = &mut self.local {
            local.append(&changes).map_err(|e| {
                tracing::error!(error = %e, "writing the group offsets log failed");
                ResponseError::KafkaStorageError
            })?;
        }
        for change in changes {
            apply_membership(&mut self.memberships, &change);
            apply_change(&mut self.offsets, change);
        }
        if let Some(local) = &mut self.local {
            if let Err(e) = local.maybe_compact(&self.offsets, &self.memberships) {
                tracing::error!(error = %e, "compacting the group offsets log failed");
            }
        }
        Ok(written)
    }
}

impl LocalLog {
    fn append(&mut self, changes: &[Change]) -> io::Result<()> {
        let mut buf = Vec::new();
        for change in changes {
            encode_record(change, &mut buf);
        }
        if buf.is_empty() {
            return Ok(());
        }
        if let Err(e) = self.file.write_all(&buf) {
            // A partial append would leave a torn record before the next one; cut it off.
            let _ = self.file.set_len(self.file_bytes);
            return Err(e);
        }
        self.file_bytes += buf.len() as u64;
        Ok(())
    }

    /// About how many bytes `offsets` and `memberships` take as records.
    fn live_bytes<'a>(
        offsets: impl IntoIterator<Item = (&'a String, &'a BTreeMap<TopicPartition, CommittedOffset>)>,
        memberships: impl IntoIterator<Item = (&'a String, &'a StoredGroup)>,
    ) -> u64 {
        let offsets: u64 = offsets
            .into_iter()
            .flat_map(|(g, o)| o.iter().map(move |(tp, c)| (g, tp, c)))
            .map(|(g, tp, c)| (RECORD_HEADER + 32 + g.len() + tp.0.len() + c.metadata.len()) as u64)
            .sum();
        let memberships: u64 = memberships
            .into_iter()
            .map(|(group, m)| membership_bytes(group, m))
            .sum();
        offsets + memberships
    }

    /// Rewrites the log as the live offsets and memberships when it has grown far past
    /// them.
    fn maybe_compact(
        &mut self,
        live: &Offsets,
        memberships: &HashMap<String, StoredGroup>,
    ) -> io::Result<()> {
        if self.file_bytes < MIN_COMPACT_BYTES
            || self.file_bytes < COMPACT_RATIO * Self::live_bytes(live, memberships)
        {
            return Ok(());
        }
        let mut buf = Vec::new();
        for (group, offsets) in live {
            for (tp, c) in offsets {
                encode_record(
                    &Change::Commit(group.clone(), tp.clone(), c.clone()),
                    &mut buf,
                );
            }
        }
        for (group, m) in memberships {
            encode_record(
                &Change::Membership(group.clone(), Some(m.clone())),
                &mut buf,
            );
        }
        let tmp = self.dir.join(COMPACT_FILE);
        let mut file = File::create(&tmp)?;
        file.write_all(&buf)?;
        file.sync_all()?;
        drop(file);
        let path = self.dir.join(LOG_FILE);
        fs::rename(&tmp, &path)?;
        File::open(&self.dir)?.sync_all()?;
        self.file = OpenOptions::new().append(true).open(&path)?;
        tracing::debug!(
            before = self.file_bytes,
            after = buf.len(),
            "compacted group offsets log"
        );
        self.file_bytes = buf.len() as u64;
        Ok(())
    }
}

fn apply_change(offsets: &mut Offsets, change: Change) {
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
fn apply_membership(memberships: &mut HashMap<String, StoredGroup>, change: &Change) {
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

/// About how many bytes a membership takes as a record.
fn membership_bytes(group: &str, m: &StoredGroup) -> u64 {
    let members: usize = m
        .members
        .iter()
        .map(|member| {
            32 + member.member_id.len()
                + member.client_id.len()
                + member.client_host.len()
                + member.subscription.len()
                + member.assignment.len()
        })
        .sum();
    (64 + group.len() + m.protocol_type.len() + members) as u64
}

/// Applies every whole, CRC-valid record of `bytes`; returns the length of that prefix.
fn replay(
    bytes: &[u8],
    offsets: &mut Offsets,
    memberships: &mut HashMap<String, StoredGroup>,
) -> usize {
    let mut pos = 0;
    while bytes.len() - pos >= RECORD_HEADER {
        let len = u32::from_be_bytes(bytes[pos..pos + 4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_be_bytes(bytes[pos + 4..pos + 8].try_into().expect("4 bytes"));
        let start = pos + RECORD_HEADER;
        if len > MAX_RECORD || bytes.len() - start < len {
            break;
        }
        let body = &bytes[start..start + len];
        if crc32c::crc32c(body) != crc {
            break;
        }
        match decode_body(body) {
            Some(change) => {
                apply_membership(memberships, &change);
                apply_change(offsets, change);
            }
            None => break,
        }
        pos = start + len;
    }
    pos
}

fn put_str(buf: &mut Vec<u8>, s: &str) {
    let bytes = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
    buf.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
    buf.extend_from_slice(bytes);
}

/// Appends the record of `change` to `buf`. A membership too large for a record is
/// written as gone (and logged): its members then rejoin after a restart, as Kafka's do
/// when their group's metadata is too large for `__consumer_offsets`.
fn encode_record(change: &Change, buf: &mut Vec<u8>) {
    let header_at = buf.len();
    buf.extend_from_slice(&[0; RECORD_HEADER]);
    match change {
        Change::Commit(group, (topic, partition), c) => {
            buf.push(KIND_COMMIT);
            put_str(buf, group);
            put_str(buf, topic);
            buf.extend_from_slice(&partition.to_be_bytes());
            buf.extend_from_slice(&c.offset.to_be_bytes());
            buf.extend_from_slice(&c.leader_epoch.to_be_bytes());
            buf.extend_from_slice(&c.commit_timestamp.to_be_bytes());
            put_str(buf, &c.metadata);
        }
        Change::DeleteOffset(group, (topic, partition)) => {
            buf.push(KIND_DELETE_OFFSET);
            put_str(buf, group);
            put_str(buf, topic);
            buf.extend_from_slice(&partition.to_be_bytes());
        }
        Change::DeleteGroup(group) => {
            buf.push(KIND_DELETE_GROUP);
            put_str(buf, group);
        }
        Change::Membership(group, Some(m)) => {
            let value = group_metadata::value(m);
            if 1 + 2 + group.len() + 4 + value.len() <= MAX_RECORD {
                buf.push(KIND_MEMBERSHIP);
                put_str(buf, group);
                buf.extend_from_slice(&(value.len() as u32).to_be_bytes());
                buf.extend_from_slice(&value);
            } else {
                tracing::warn!(
                    group = %group,
                    bytes = value.len(),
                    "the group's membership is too large to store; its members will rejoin after a restart"
                );
                buf.push(KIND_MEMBERSHIP_GONE);
                put_str(buf, group);
            }
        }
        Change::Membership(group, None) => {
            buf.push(KIND_MEMBERSHIP_GONE);
            put_str(buf, group);
        }
    }
    let body = &buf[header_at + RECORD_HEADER..];
    let len = (body.len() as u32).to_be_bytes();
    let crc = crc32c::crc32c(body).to_be_bytes();
    buf[header_at..header_at + 4].copy_from_slice(&len);
    buf[header_at + 4..header_at + 8].copy_from_slice(&crc);
}

/// A cursor over a record body; every read fails softly on a short body.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn i32(&mut self) -> Option<i32> {
        self.take(4)
            .map(|b| i32::from_be_bytes(b.try_into().expect("4 bytes")))
    }
    fn i64(&mut self) -> Option<i64> {
        self.take(8)
            .map(|b| i64::from_be_bytes(b.try_into().expect("8 bytes")))
    }
    fn string(&mut self) -> Option<String> {
        let len = u16::from_be_bytes(self.take(2)?.try_into().expect("2 bytes")) as usize;
        String::from_utf8(self.take(len)?.to_vec()).ok()
    }
}

fn decode_body(body: &[u8]) -> Option<Change> {
    let mut r = Reader(body);
    Some(match r.u8()? {
        KIND_COMMIT => {
            let group = r.string()?;
            let topic = r.string()?;
            let partition = r.i32()?;
            let offset = r.i64()?;
            let leader_epoch = r.i32()?;
            let commit_timestamp = r.i64()?;
            let metadata = r.string()?;
            Change::Commit(
                group,
                (topic, partition),
                CommittedOffset {
                    offset,
                    leader_epoch,
                    metadata,
                    commit_timestamp,
                },
            )
        }
        KIND_DELETE_OFFSET => {
            let group = r.string()?;
            let topic = r.string()?;
            Change::DeleteOffset(group, (topic, r.i32()?))
        }
        KIND_DELETE_GROUP => Change::DeleteGroup(r.string()?),
        KIND_MEMBERSHIP => {
            let group = r.string()?;
            let len = r.i32()? as u32 as usize;
            let membership = group_metadata::decode_value(r.take(len)?)?;
            Change::Membership(group, Some(membership))
        }
        KIND_MEMBERSHIP_GONE => Change::Membership(r.string()?, None),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offset(o: i64) -> CommittedOffset {
        CommittedOffset {
            offset: o,
            leader_epoch: 0,
            metadata: "m".into(),
            commit_timestamp: 7,
        }
    }

    #[test]
    fn commits_survive_reopen_and_a_torn_tail_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = OffsetStore::open(dir.path()).unwrap();
            store
                .commit("g", vec![(("t".into(), 0), offset(5))], no_journal)
                .unwrap();
            store
                .commit("g", vec![(("t".into(), 0), offset(9))], no_journal)
                .unwrap();
            store
                .commit("h", vec![(("t".into(), 1), offset(3))], no_journal)
                .unwrap();
            store.delete_group("h", no_journal).unwrap();
        }
        let path = dir.path().join(LOG_FILE);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[0, 0, 0, 40, 1, 2]).unwrap();
        drop(f);
        let store = OffsetStore::open(dir.path()).unwrap();
        assert_eq!(store.get("g", &("t".into(), 0)), Some(offset(9)));
        assert!(!store.has_offsets("h"));
        store
            .commit("g", vec![(("t".into(), 1), offset(1))], no_journal)
            .unwrap();
        let store = OffsetStore::open(dir.path()).unwrap();
        assert_eq!(store.group_offsets("g").len(), 2);
    }

    #[test]
    fn expired_offsets_stay_deleted_after_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let old = |o| CommittedOffset {
            commit_timestamp: 1,
            ..offset(o)
        };
        {
            let store = OffsetStore::open(dir.path()).unwrap();
            store
                .commit(
                    "g",
                    vec![(("t".into(), 0), old(5)), (("t".into(), 1), offset(6))],
                    no_journal,
                )
                .unwrap();
            store
                .commit("h", vec![(("t".into(), 0), old(3))], no_journal)
                .unwrap();
            let is_old = |c: &CommittedOffset| c.commit_timestamp < 7;
            let expire = |group| store.expire(group, is_old, no_journal).unwrap();
            assert_eq!(expire("g"), Some((1, ())));
            assert_eq!(expire("h"), Some((1, ())));
            assert_eq!(expire("h"), None);
        }
        let store = OffsetStore::open(dir.path()).unwrap();
        assert_eq!(
            store.group_offsets("g").into_iter().collect::<Vec<_>>(),
            vec![(("t".into(), 1), offset(6))]
        );
        assert!(!store.has_offsets("h"));
    }

    #[test]
    fn memberships_survive_reopen_and_compaction_and_go_with_their_group() {
        let dir = tempfile::tempdir().unwrap();
        let stored = group_metadata::tests::group();
        {
            let store = OffsetStore::open(dir.path()).unwrap();
            for group in ["kept", "gone", "deleted"] {
                store
                    .store_membership(group, Some(stored.clone()), no_journal)
                    .unwrap();
            }
            store.store_membership("gone", None, no_journal).unwrap();
            store.delete_group("deleted", no_journal).unwrap();
        }
        let store = OffsetStore::open(dir.path()).unwrap();
        assert_eq!(store.memberships(), vec![("kept".into(), stored.clone())]);
        // Commits past the compaction threshold: the rewritten log keeps the membership.
        for i in 0..300_000 {
            store
                .commit("kept", vec![(("t".into(), 0), offset(i))], no_journal)
                .unwrap();
        }
        assert!(store.file_bytes() < MIN_COMPACT_BYTES + 1024);
        let reopened = OffsetStore::open(dir.path()).unwrap();
        assert_eq!(reopened.memberships(), vec![("kept".into(), stored)]);
        assert_eq!(
            reopened.get("kept", &("t".into(), 0)),
            Some(offset(299_999))
        );
    }

    #[test]
    fn the_log_is_compacted_to_the_live_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path()).unwrap();
        for i in 0..300_000 {
            store
                .commit(
                    "g",
                    vec![(("topic".into(), i % 3), offset(i as i64))],
                    no_journal,
                )
                .unwrap();
        }
        assert!(store.file_bytes() < MIN_COMPACT_BYTES + 1024);
        let reopened = OffsetStore::open(dir.path()).unwrap();
        assert_eq!(reopened.group_offsets("g"), store.group_offsets("g"));
        assert_eq!(
            reopened.get("g", &("topic".into(), 2)),
            Some(offset(299_999))
        );
    }
}
