//! Durable committed offsets: the role Kafka's `__consumer_offsets` plays.
//!
//! Every commit is appended to `group-offsets.log` before the OffsetCommit response is
//! sent, as one `write` of length-prefixed, CRC32C-checked records. A write that reached
//! the page cache survives `kill -9`, which is the guarantee Kafka gives for its offsets
//! topic too (it does not fsync per commit either). At start-up the log is replayed; a torn
//! or corrupt tail (a crash of the machine mid-write) is cut off at the last whole record.
//!
//! The log only grows by appends, so it is compacted like a compacted topic: once it is
//! several times larger than the live offsets, the live offsets are written to a new file
//! that replaces the old one atomically (write, fsync, rename). Memory holds only the live
//! offsets, disk at most a bounded multiple of them.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use crate::BrokerError;

const LOG_FILE: &str = "group-offsets.log";
const COMPACT_FILE: &str = "group-offsets.log.compacting";
/// Length and CRC before each record body.
const RECORD_HEADER: usize = 8;
/// A record body larger than this cannot have been written by us: the tail is corrupt.
const MAX_RECORD: usize = 1 << 20;
/// The log is never compacted below this size, so a small group does not rewrite it often.
const MIN_COMPACT_BYTES: u64 = 8 << 20;
/// Compact when the log is this many times the size of the live offsets.
const COMPACT_RATIO: u64 = 4;

const KIND_COMMIT: u8 = 1;
const KIND_DELETE_OFFSET: u8 = 2;
const KIND_DELETE_GROUP: u8 = 3;

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

/// One change to the stored offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Change {
    Commit(String, TopicPartition, CommittedOffset),
    DeleteOffset(String, TopicPartition),
    DeleteGroup(String),
}

/// The offsets of every group, in memory and in the log.
#[derive(Debug)]
pub struct OffsetStore {
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    file: File,
    file_bytes: u64,
    offsets: HashMap<String, BTreeMap<TopicPartition, CommittedOffset>>,
}

impl OffsetStore {
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
        let valid = replay(&bytes, &mut offsets);
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
        tracing::info!(groups, "group offsets loaded");
        Ok(Self {
            inner: Mutex::new(Inner {
                dir: dir.to_path_buf(),
                file,
                file_bytes: valid as u64,
                offsets,
            }),
        })
    }

    /// Durably records `commits` of `group`, then makes them visible. All of them are
    /// written in one append, so they are recovered together or (if the machine crashes
    /// mid-write) the torn ones are dropped.
    pub fn commit(
        &self,
        group: &str,
        commits: Vec<(TopicPartition, CommittedOffset)>,
    ) -> io::Result<()> {
        let changes = commits
            .into_iter()
            .map(|(tp, c)| Change::Commit(group.to_string(), tp, c))
            .collect();
        self.inner.lock().apply(changes)
    }

    /// Deletes some offsets of `group` (OffsetDelete).
    pub fn delete_offsets(&self, group: &str, partitions: Vec<TopicPartition>) -> io::Result<()> {
        let changes = partitions
            .into_iter()
            .map(|tp| Change::DeleteOffset(group.to_string(), tp))
            .collect();
        self.inner.lock().apply(changes)
    }

    /// Deletes every offset of `group` (DeleteGroups).
    pub fn delete_group(&self, group: &str) -> io::Result<()> {
        self.inner
            .lock()
            .apply(vec![Change::DeleteGroup(group.to_string())])
    }

    /// Deletes the offsets of `group` that `expired` selects (retention), durably: one
    /// DeleteGroup record when none remain, DeleteOffset records otherwise, so they stay
    /// deleted after a restart. Returns how many were deleted. Selecting under the
    /// store's lock means a commit racing with expiry is judged by its own timestamp,
    /// never deleted unseen.
    pub fn expire(
        &self,
        group: &str,
        expired: impl Fn(&CommittedOffset) -> bool,
    ) -> io::Result<usize> {
        let mut inner = self.inner.lock();
        let Some(offsets) = inner.offsets.get(group) else {
            return Ok(0);
        };
        let gone: Vec<TopicPartition> = offsets
            .iter()
            .filter(|(_, c)| expired(c))
            .map(|(tp, _)| tp.clone())
            .collect();
        let count = gone.len();
        if count == 0 {
            return Ok(0);
        }
        let changes = if count == offsets.len() {
            vec![Change::DeleteGroup(group.to_string())]
        } else {
            gone.into_iter()
                .map(|tp| Change::DeleteOffset(group.to_string(), tp))
                .collect()
        };
        inner.apply(changes)?;
        Ok(count)
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
        self.inner.lock().file_bytes
    }
}

impl Inner {
    fn apply(&mut self, changes: Vec<Change>) -> io::Result<()> {
        let mut buf = Vec::new();
        for change in &changes {
            encode_record(change, &mut buf);
        }
        if let Err(e) = self.file.write_all(&buf) {
            // A partial append would leave a torn record before the next one; cut it off.
            let _ = self.file.set_len(self.file_bytes);
            return Err(e);
        }
        self.file_bytes += buf.len() as u64;
        for change in changes {
            apply_change(&mut self.offsets, change);
        }
        self.maybe_compact()
    }

    fn live_bytes(&self) -> u64 {
        self.offsets
            .iter()
            .flat_map(|(g, o)| o.iter().map(move |(tp, c)| (g, tp, c)))
            .map(|(g, tp, c)| (RECORD_HEADER + 32 + g.len() + tp.0.len() + c.metadata.len()) as u64)
            .sum()
    }

    /// Rewrites the log as the live offsets when it has grown far past them.
    fn maybe_compact(&mut self) -> io::Result<()> {
        if self.file_bytes < MIN_COMPACT_BYTES
            || self.file_bytes < COMPACT_RATIO * self.live_bytes()
        {
            return Ok(());
        }
        let mut buf = Vec::new();
        for (group, offsets) in &self.offsets {
            for (tp, c) in offsets {
                encode_record(
                    &Change::Commit(group.clone(), tp.clone(), c.clone()),
                    &mut buf,
                );
            }
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

fn apply_change(
    offsets: &mut HashMap<String, BTreeMap<TopicPartition, CommittedOffset>>,
    change: Change,
) {
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
    }
}

/// Applies every whole, CRC-valid record of `bytes`; returns the length of that prefix.
fn replay(
    bytes: &[u8],
    offsets: &mut HashMap<String, BTreeMap<TopicPartition, CommittedOffset>>,
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
            Some(change) => apply_change(offsets, change),
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
                .commit("g", vec![(("t".into(), 0), offset(5))])
                .unwrap();
            store
                .commit("g", vec![(("t".into(), 0), offset(9))])
                .unwrap();
            store
                .commit("h", vec![(("t".into(), 1), offset(3))])
                .unwrap();
            store.delete_group("h").unwrap();
        }
        let path = dir.path().join(LOG_FILE);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[0, 0, 0, 40, 1, 2]).unwrap();
        drop(f);
        let store = OffsetStore::open(dir.path()).unwrap();
        assert_eq!(store.get("g", &("t".into(), 0)), Some(offset(9)));
        assert!(!store.has_offsets("h"));
        store
            .commit("g", vec![(("t".into(), 1), offset(1))])
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
                )
                .unwrap();
            store.commit("h", vec![(("t".into(), 0), old(3))]).unwrap();
            let is_old = |c: &CommittedOffset| c.commit_timestamp < 7;
            assert_eq!(store.expire("g", is_old).unwrap(), 1);
            assert_eq!(store.expire("h", is_old).unwrap(), 1);
            assert_eq!(store.expire("h", is_old).unwrap(), 0);
        }
        let store = OffsetStore::open(dir.path()).unwrap();
        assert_eq!(
            store.group_offsets("g").into_iter().collect::<Vec<_>>(),
            vec![(("t".into(), 1), offset(6))]
        );
        assert!(!store.has_offsets("h"));
    }

    #[test]
    fn the_log_is_compacted_to_the_live_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path()).unwrap();
        for i in 0..300_000 {
            store
                .commit("g", vec![(("topic".into(), i % 3), offset(i as i64))])
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
