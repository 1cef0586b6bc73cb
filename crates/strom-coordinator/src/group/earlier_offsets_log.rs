//! Reading the committed-offsets log of an earlier release's single node,
//! `__strom_metadata/group-offsets.log`, once, when its directory is upgraded
//! (strom-broker's `standalone_upgrade`): length-prefixed, CRC32C-checked records of commits,
//! deletions and memberships. The reader stops at the first torn or corrupt record, as
//! that release's own replay did after a crash mid-write.

use std::collections::HashMap;
use std::path::Path;

use super::group_metadata::{self, StoredGroup};
use super::offset_store::{apply_change, apply_membership, Change, CommittedOffset, Offsets};

/// The file's name in `__strom_metadata`.
pub const LOG_FILE: &str = "group-offsets.log";
/// Length and CRC before each record body.
const RECORD_HEADER: usize = 8;
/// A record body larger than this was never written: the tail is corrupt.
const MAX_RECORD: usize = 1 << 20;

const KIND_COMMIT: u8 = 1;
const KIND_DELETE_OFFSET: u8 = 2;
const KIND_DELETE_GROUP: u8 = 3;
/// A group's membership: its GroupMetadata value (v3), as in `__consumer_offsets`.
const KIND_MEMBERSHIP: u8 = 4;
/// A group's membership is gone.
const KIND_MEMBERSHIP_GONE: u8 = 5;

/// The committed offsets the log in `dir` leaves (empty when there is no log), or why it
/// cannot be read.
pub fn read(dir: &Path) -> Result<Offsets, String> {
    let path = dir.join(LOG_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Offsets::new()),
        Err(e) => return Err(e.to_string()),
    };
    let mut offsets = Offsets::new();
    let valid = replay(&bytes, &mut offsets, &mut HashMap::new());
    if valid < bytes.len() {
        tracing::warn!(
            file = %path.display(),
            kept = valid,
            dropped = bytes.len() - valid,
            "the earlier release's group offsets log ends in a torn record; the records before it are kept"
        );
    }
    Ok(offsets)
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

    fn put_str(buf: &mut Vec<u8>, s: &str) {
        let bytes = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
        buf.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
        buf.extend_from_slice(bytes);
    }

    /// Appends the record of `change` to `buf`. A membership too large for a record is
    /// written as gone (and logged): its members then rejoin after a restart, as Kafka's do
    /// when their group's metadata is too large for `__consumer_offsets`.
    pub(crate) fn encode_record(change: &Change, buf: &mut Vec<u8>) {
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

    fn offset(o: i64) -> CommittedOffset {
        CommittedOffset {
            offset: o,
            leader_epoch: 0,
            metadata: "m".into(),
            commit_timestamp: 7,
        }
    }

    #[test]
    fn the_last_commit_of_each_partition_is_read_and_a_torn_tail_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let mut buf = Vec::new();
        for change in [
            Change::Commit("g".into(), ("t".into(), 0), offset(5)),
            Change::Commit("g".into(), ("t".into(), 0), offset(9)),
            Change::Commit("h".into(), ("t".into(), 1), offset(3)),
            Change::DeleteGroup("h".into()),
            Change::Commit("k".into(), ("u".into(), 2), offset(4)),
            Change::DeleteOffset("k".into(), ("u".into(), 2)),
        ] {
            encode_record(&change, &mut buf);
        }
        buf.extend_from_slice(&[0, 0, 0, 40, 1, 2]);
        std::fs::write(dir.path().join(LOG_FILE), &buf).unwrap();
        let offsets = read(dir.path()).unwrap();
        assert_eq!(offsets.len(), 1, "{offsets:?}");
        assert_eq!(offsets["g"][&("t".to_string(), 0)], offset(9));
        assert!(read(&dir.path().join("none")).unwrap().is_empty());
    }
}
