//! A group's membership as Kafka stores it in `__consumer_offsets` (the GroupMetadata
//! key, version 2, and value, versions 0 to 3): its generation, protocol, leader and
//! every member with its subscription and assignment, written when a rebalance settles.
//! A broker that takes over the group's partition restores the group from it, so the
//! members go on with their member ids and generation instead of rejoining, as they do
//! when Kafka's coordinator moves.

use bytes::{BufMut, Bytes, BytesMut};
use strom_wire::FieldReader;

/// The key version of a group's metadata (0 and 1 are offset commits).
pub const GROUP_METADATA_KEY_V2: i16 = 2;
/// The value version written: v3 adds `group_instance_id` to each member.
const GROUP_METADATA_VALUE_V3: i16 = 3;

/// A group at the end of a rebalance: Stable with its members, or Empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredGroup {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    /// Wall-clock ms of the state change (Kafka's `currentStateTimestamp`).
    pub current_state_timestamp: i64,
    pub members: Vec<StoredMember>,
}

/// One member of a stored group, in join order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    /// The member's metadata for the group's protocol.
    pub subscription: Bytes,
    pub assignment: Bytes,
}

/// The GroupMetadata key of `group`.
pub fn key(group: &str) -> Bytes {
    let mut buf = BytesMut::with_capacity(4 + group.len());
    buf.put_i16(GROUP_METADATA_KEY_V2);
    put_string(&mut buf, group);
    buf.freeze()
}

/// The GroupMetadata value (v3) of `group`.
pub fn value(group: &StoredGroup) -> Bytes {
    let mut buf = BytesMut::with_capacity(64);
    buf.put_i16(GROUP_METADATA_VALUE_V3);
    put_string(&mut buf, &group.protocol_type);
    buf.put_i32(group.generation);
    put_nullable_string(&mut buf, group.protocol.as_deref());
    put_nullable_string(&mut buf, group.leader.as_deref());
    buf.put_i64(group.current_state_timestamp);
    buf.put_i32(group.members.len() as i32);
    for member in &group.members {
        put_string(&mut buf, &member.member_id);
        put_nullable_string(&mut buf, member.group_instance_id.as_deref());
        put_string(&mut buf, &member.client_id);
        put_string(&mut buf, &member.client_host);
        buf.put_i32(member.rebalance_timeout_ms);
        buf.put_i32(member.session_timeout_ms);
        put_bytes(&mut buf, &member.subscription);
        put_bytes(&mut buf, &member.assignment);
    }
    buf.freeze()
}

/// A GroupMetadata value of versions 0 to 3 (1 adds each member's rebalance timeout,
/// 2 the state timestamp, 3 each member's group instance id); `None` for another
/// version or bytes that do not parse.
pub fn decode_value(value: &[u8]) -> Option<StoredGroup> {
    let mut r = FieldReader(value);
    let version = r.i16()?;
    if !(0..=GROUP_METADATA_VALUE_V3).contains(&version) {
        return None;
    }
    let protocol_type = r.string()?;
    let generation = r.i32()?;
    let protocol = r.nullable_string()?;
    let leader = r.nullable_string()?;
    let current_state_timestamp = if version >= 2 { r.i64()? } else { -1 };
    let count = r.i32()?;
    let mut members = Vec::new();
    for _ in 0..count.max(0) {
        let member_id = r.string()?;
        let group_instance_id = if version >= 3 {
            r.nullable_string()?
        } else {
            None
        };
        let client_id = r.string()?;
        let client_host = r.string()?;
        let rebalance_timeout_ms = if version >= 1 { Some(r.i32()?) } else { None };
        let session_timeout_ms = r.i32()?;
        members.push(StoredMember {
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms: rebalance_timeout_ms.unwrap_or(session_timeout_ms),
            session_timeout_ms,
            subscription: Bytes::copy_from_slice(r.bytes()?),
            assignment: Bytes::copy_from_slice(r.bytes()?),
        });
    }
    Some(StoredGroup {
        protocol_type,
        generation,
        protocol,
        leader,
        current_state_timestamp,
        members,
    })
}

fn put_string(buf: &mut BytesMut, s: &str) {
    let bytes = &s.as_bytes()[..s.len().min(i16::MAX as usize)];
    buf.put_i16(bytes.len() as i16);
    buf.put_slice(bytes);
}

fn put_nullable_string(buf: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_string(buf, s),
        None => buf.put_i16(-1),
    }
}

fn put_bytes(buf: &mut BytesMut, bytes: &[u8]) {
    buf.put_i32(bytes.len() as i32);
    buf.put_slice(bytes);
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A stored group of two members, one of them static.
    pub(in crate::group) fn group() -> StoredGroup {
        StoredGroup {
            protocol_type: "consumer".into(),
            generation: 7,
            protocol: Some("range".into()),
            leader: Some("m-1".into()),
            current_state_timestamp: 1_700_000_000_000,
            members: vec![
                StoredMember {
                    member_id: "m-1".into(),
                    group_instance_id: None,
                    client_id: "rdkafka".into(),
                    client_host: "/127.0.0.1".into(),
                    rebalance_timeout_ms: 300_000,
                    session_timeout_ms: 45_000,
                    subscription: Bytes::from_static(b"\x00\x01sub"),
                    assignment: Bytes::from_static(b"\x00\x01assign"),
                },
                StoredMember {
                    member_id: "m-2".into(),
                    group_instance_id: Some("instance-2".into()),
                    client_id: "kafka-python".into(),
                    client_host: "/127.0.0.2".into(),
                    rebalance_timeout_ms: 60_000,
                    session_timeout_ms: 10_000,
                    subscription: Bytes::new(),
                    assignment: Bytes::new(),
                },
            ],
        }
    }

    #[test]
    fn a_group_round_trips_through_its_value() {
        assert_eq!(decode_value(&value(&group())), Some(group()));
        let empty = StoredGroup {
            protocol: None,
            leader: None,
            members: Vec::new(),
            ..group()
        };
        assert_eq!(decode_value(&value(&empty)), Some(empty));
    }

    #[test]
    fn a_version_0_value_as_kafka_0_10_wrote_it_is_read() {
        let mut v0 = BytesMut::new();
        v0.put_i16(0);
        put_string(&mut v0, "consumer");
        v0.put_i32(3);
        put_nullable_string(&mut v0, Some("range"));
        put_nullable_string(&mut v0, Some("m"));
        v0.put_i32(1);
        put_string(&mut v0, "m");
        put_string(&mut v0, "c");
        put_string(&mut v0, "/h");
        v0.put_i32(30_000);
        put_bytes(&mut v0, b"s");
        put_bytes(&mut v0, b"a");
        let read = decode_value(&v0).unwrap();
        assert_eq!((read.generation, read.current_state_timestamp), (3, -1));
        let member = &read.members[0];
        assert_eq!(
            (member.session_timeout_ms, member.rebalance_timeout_ms),
            (30_000, 30_000)
        );
        assert_eq!(member.assignment, Bytes::from_static(b"a"));
    }

    #[test]
    fn unknown_versions_and_truncated_values_are_not_read() {
        let bytes = value(&group());
        assert_eq!(decode_value(&bytes[..bytes.len() - 1]), None);
        let mut v9 = bytes.to_vec();
        v9[..2].copy_from_slice(&9i16.to_be_bytes());
        assert_eq!(decode_value(&v9), None);
    }
}
