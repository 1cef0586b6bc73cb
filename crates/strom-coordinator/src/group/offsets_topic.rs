//! `__consumer_offsets` on a cluster: which partition holds a group, and committed offsets
//! as that topic's records, in Kafka's own key and value formats (so Kafka's tools that
//! read the topic read strom's too).
//!
//! A group lives in partition `abs(hash(group id)) % partitions`, with Java's
//! `String.hashCode` and Kafka's `Utils.abs` (which maps `i32::MIN` to 0): the broker
//! that leads that partition coordinates the group, as in Kafka. Each offset is one
//! record keyed by (group, topic, partition); deleting it writes a tombstone (a null
//! value) for the same key, so the latest record of each key is the offset's state.
//! A group's membership is one record keyed by the group (`group_metadata`).

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::records::RecordBatchDecoder;
use strom_wire::FieldReader;

use super::group_metadata::{self, GROUP_METADATA_KEY_V2};
use super::offset_store::{Change, CommittedOffset};

/// The internal topic's name.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// The configs `__consumer_offsets` is created with, as Kafka's: compacted, batches kept
/// as the coordinator wrote them, `offsets.topic.segment.bytes` = `segment_bytes`.
pub fn topic_configs(segment_bytes: i32) -> std::collections::BTreeMap<String, String> {
    [
        ("cleanup.policy", "compact".to_string()),
        ("compression.type", "producer".to_string()),
        ("segment.bytes", segment_bytes.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Key versions 0 and 1 are an offset commit; 2 is a group's metadata.
const OFFSET_COMMIT_KEY_V1: i16 = 1;
/// Value version 3: offset, leader epoch, metadata, commit timestamp.
const OFFSET_COMMIT_VALUE_V3: i16 = 3;

/// Java's `String.hashCode`, which Kafka uses to spread groups.
pub fn java_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, c| {
        h.wrapping_mul(31).wrapping_add(i32::from(c as i16))
    })
}

/// The partition of `__consumer_offsets` (of `partitions`) that holds `group`.
pub fn partition_for(group: &str, partitions: i32) -> i32 {
    let hash = java_hash(group);
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs % partitions.max(1)
}

/// One record batch holding `changes` (a group deleted as a whole becomes a tombstone
/// for each of its offsets, which the caller expands first), stamped `now_ms`.
pub fn encode(changes: &[Change], now_ms: i64) -> Bytes {
    let records = changes.iter().filter_map(|change| match change {
        Change::Commit(group, (topic, partition), c) => {
            Some((Some(key(group, topic, *partition)), Some(value(c))))
        }
        Change::DeleteOffset(group, (topic, partition)) => {
            Some((Some(key(group, topic, *partition)), None))
        }
        Change::DeleteGroup(_) => None,
        Change::Membership(group, membership) => Some((
            Some(group_metadata::key(group)),
            membership.as_ref().map(group_metadata::value),
        )),
    });
    strom_wire::records::plain_batch(records, now_ms, 0)
}

/// The changes in `batches` (whole record batches as the log returns them), in order,
/// and the offset after the last batch. A record that is not an offset commit (group
/// metadata, or a key version strom does not know) is skipped; a batch that does not
/// decode ends the read with an error.
pub fn decode(mut batches: Bytes) -> Result<(Vec<Change>, i64), String> {
    /// The batch header's base offset and, at byte 23, its last offset delta.
    const LAST_OFFSET_DELTA_END: usize = 27;
    let mut changes = Vec::new();
    let mut next = -1;
    while !batches.is_empty() {
        if batches.len() < LAST_OFFSET_DELTA_END {
            return Err(format!("a truncated batch of {} bytes", batches.len()));
        }
        let base = i64::from_be_bytes(batches[..8].try_into().expect("8 bytes"));
        let delta = i32::from_be_bytes(batches[23..27].try_into().expect("4 bytes"));
        next = base + i64::from(delta) + 1;
        let set = RecordBatchDecoder::decode(&mut batches).map_err(|e| e.to_string())?;
        for record in set.records.iter().filter(|r| !r.control) {
            let Some(key) = &record.key else { continue };
            match (decode_key(key), &record.value) {
                (Some(Key::Offset(group, tp)), None) => {
                    changes.push(Change::DeleteOffset(group, tp));
                }
                (Some(Key::Offset(group, tp)), Some(value)) => {
                    if let Some(c) = decode_value(value) {
                        changes.push(Change::Commit(group, tp, c));
                    }
                }
                (Some(Key::Group(group)), None) => changes.push(Change::Membership(group, None)),
                (Some(Key::Group(group)), Some(value)) => {
                    if let Some(m) = group_metadata::decode_value(value) {
                        changes.push(Change::Membership(group, Some(m)));
                    }
                }
                (None, _) => {}
            }
        }
    }
    Ok((changes, next))
}

fn put_string(buf: &mut BytesMut, s: &str) {
    let bytes = &s.as_bytes()[..s.len().min(i16::MAX as usize)];
    buf.put_i16(bytes.len() as i16);
    buf.put_slice(bytes);
}

fn key(group: &str, topic: &str, partition: i32) -> Bytes {
    let mut buf = BytesMut::with_capacity(8 + group.len() + topic.len());
    buf.put_i16(OFFSET_COMMIT_KEY_V1);
    put_string(&mut buf, group);
    put_string(&mut buf, topic);
    buf.put_i32(partition);
    buf.freeze()
}

fn value(c: &CommittedOffset) -> Bytes {
    let mut buf = BytesMut::with_capacity(24 + c.metadata.len());
    buf.put_i16(OFFSET_COMMIT_VALUE_V3);
    buf.put_i64(c.offset);
    buf.put_i32(c.leader_epoch);
    put_string(&mut buf, &c.metadata);
    buf.put_i64(c.commit_timestamp);
    buf.freeze()
}

/// What a record of the topic is about.
enum Key {
    /// An offset commit (key versions 0 and 1 are the same): group, (topic, partition).
    Offset(String, (String, i32)),
    /// A group's metadata.
    Group(String),
}

fn decode_key(key: &[u8]) -> Option<Key> {
    let mut r = FieldReader(key);
    match r.i16()? {
        0 | OFFSET_COMMIT_KEY_V1 => Some(Key::Offset(r.string()?, (r.string()?, r.i32()?))),
        GROUP_METADATA_KEY_V2 => Some(Key::Group(r.string()?)),
        _ => None,
    }
}

/// An offset commit value of versions 0 to 3 (1 adds an expiry timestamp after the
/// commit timestamp, 2 drops it again, 3 adds the leader epoch).
fn decode_value(value: &[u8]) -> Option<CommittedOffset> {
    let mut r = FieldReader(value);
    let version = r.i16()?;
    let offset = r.i64()?;
    let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
    let metadata = r.string()?;
    let commit_timestamp = r.i64()?;
    Some(CommittedOffset {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp,
    })
}

/// A record of the topic as `kafka-dump-log --offsets-decoder` prints it: the key and
/// the value as Kafka's coordinator record JSON (`{"type":…,"data":…}` and
/// `{"version":…,"data":…}`, fields in schema order, `<DELETE>` for a tombstone).
/// Members' subscriptions and assignments are their bytes in base64, as Jackson writes
/// bytes. `None` for a key this topic does not hold.
pub fn describe_record(key: &[u8], value: Option<&[u8]>) -> Option<(String, String)> {
    let version = |v: &[u8]| json(&i16::from_be_bytes([v[0], v[1]]).to_string());
    let (record_type, key_json, value_json) = match decode_key(key)? {
        Key::Offset(group, (topic, partition)) => {
            let value = value.and_then(|v| {
                let c = decode_value(v)?;
                let data = object(&[
                    ("offset", json(&c.offset)),
                    ("leaderEpoch", json(&c.leader_epoch)),
                    ("metadata", json(&c.metadata)),
                    ("commitTimestamp", json(&c.commit_timestamp)),
                ]);
                Some(object(&[("version", version(v)), ("data", data)]))
            });
            let key = object(&[
                ("group", json(&group)),
                ("topic", json(&topic)),
                ("partition", json(&partition)),
            ]);
            ("1", key, value)
        }
        Key::Group(group) => {
            let value = value.and_then(|v| {
                let g = group_metadata::decode_value(v)?;
                Some(object(&[
                    ("version", version(v)),
                    ("data", group_metadata_json(&g)),
                ]))
            });
            ("2", object(&[("group", json(&group))]), value)
        }
    };
    let key = object(&[("type", json(&record_type)), ("data", key_json)]);
    Some((key, value_json.unwrap_or_else(|| "<DELETE>".to_string())))
}

fn group_metadata_json(g: &group_metadata::StoredGroup) -> String {
    use base64::Engine as _;
    let encode = |b: &[u8]| json(&base64::engine::general_purpose::STANDARD.encode(b));
    let members: Vec<String> = g
        .members
        .iter()
        .map(|m| {
            object(&[
                ("memberId", json(&m.member_id)),
                ("groupInstanceId", json(&m.group_instance_id)),
                ("clientId", json(&m.client_id)),
                ("clientHost", json(&m.client_host)),
                ("rebalanceTimeout", json(&m.rebalance_timeout_ms)),
                ("sessionTimeout", json(&m.session_timeout_ms)),
                ("subscription", encode(&m.subscription)),
                ("assignment", encode(&m.assignment)),
            ])
        })
        .collect();
    object(&[
        ("protocolType", json(&g.protocol_type)),
        ("generation", json(&g.generation)),
        ("protocol", json(&g.protocol)),
        ("leader", json(&g.leader)),
        ("currentStateTimestamp", json(&g.current_state_timestamp)),
        ("members", format!("[{}]", members.join(","))),
    ])
}

/// `value` as JSON.
fn json(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).expect("plain values serialize")
}

/// A JSON object of already encoded `fields`, in their order.
fn object(fields: &[(&str, String)]) -> String {
    let fields: Vec<String> = fields
        .iter()
        .map(|(name, value)| format!("{}:{value}", json(name)))
        .collect();
    format!("{{{}}}", fields.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_land_in_the_partitions_kafka_puts_them_in() {
        // "".hashCode() = 0; "a" = 97; "group" = 98629247; "polygenelubricants" is
        // Integer.MIN_VALUE, which Kafka's Utils.abs maps to 0.
        assert_eq!(partition_for("", 50), 0);
        assert_eq!(partition_for("a", 50), 97 % 50);
        assert_eq!(java_hash("group"), 98_629_247);
        assert_eq!(partition_for("group", 50), 98_629_247 % 50);
        assert_eq!(java_hash("polygenelubricants"), i32::MIN);
        assert_eq!(partition_for("polygenelubricants", 50), 0);
    }

    #[test]
    fn commits_and_tombstones_round_trip_in_order() {
        let c = CommittedOffset {
            offset: 42,
            leader_epoch: 3,
            metadata: "m".to_string(),
            commit_timestamp: 1_700_000_000_000,
        };
        let membership = group_metadata::StoredGroup {
            protocol_type: "consumer".into(),
            generation: 4,
            protocol: Some("range".into()),
            leader: None,
            current_state_timestamp: 5,
            members: Vec::new(),
        };
        let changes = vec![
            Change::Commit("g".into(), ("t".into(), 0), c.clone()),
            Change::Membership("g".into(), Some(membership)),
            Change::Commit("g".into(), ("t".into(), 1), c.clone()),
            Change::DeleteOffset("g".into(), ("t".into(), 0)),
            Change::Membership("g".into(), None),
        ];
        let mut log = BytesMut::new();
        log.extend_from_slice(&encode(&changes, 1));
        log.extend_from_slice(&encode(&changes[..1], 2));
        let mut expected = changes.clone();
        expected.push(changes[0].clone());
        assert_eq!(decode(log.freeze()).unwrap(), (expected, 1));
    }

    #[test]
    fn records_are_described_as_kafkas_offsets_decoder_prints_them() {
        let c = CommittedOffset {
            offset: 42,
            leader_epoch: 3,
            metadata: "m".to_string(),
            commit_timestamp: 7,
        };
        let (k, v) = describe_record(&key("g", "t", 0), Some(&value(&c))).unwrap();
        assert_eq!(
            k,
            r#"{"type":"1","data":{"group":"g","topic":"t","partition":0}}"#
        );
        assert_eq!(
            v,
            r#"{"version":"3","data":{"offset":42,"leaderEpoch":3,"metadata":"m","commitTimestamp":7}}"#
        );
        let (_, deleted) = describe_record(&key("g", "t", 0), None).unwrap();
        assert_eq!(deleted, "<DELETE>");
        assert!(describe_record(&[0, 9], None).is_none());
    }

    #[test]
    fn a_damaged_batch_is_an_error_not_a_panic() {
        let batch = encode(&[Change::DeleteOffset("g".into(), ("t".into(), 0))], 1);
        assert!(decode(batch.slice(..batch.len() - 3)).is_err());
    }
}
