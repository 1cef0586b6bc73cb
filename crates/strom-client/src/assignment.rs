//! Decoding a member's assignment, which the broker treats as opaque bytes: the
//! consumer protocol's `ConsumerProtocolAssignment` (a version, then topics with their
//! partitions, then user data the tool does not need).

use strom_wire::FieldReader;

/// (topic, partition) pairs of a consumer-protocol assignment; empty if the bytes are not
/// one (another protocol type, or a member not yet assigned).
pub fn decode(bytes: &[u8]) -> Vec<(String, i32)> {
    parse(bytes).unwrap_or_default()
}

fn parse(bytes: &[u8]) -> Option<Vec<(String, i32)>> {
    let mut r = FieldReader(bytes);
    let _version = r.i16()?;
    let topics = r.i32()?;
    let mut out = Vec::new();
    for _ in 0..topics.max(0) {
        let topic = r.string()?;
        let partitions = r.i32()?;
        for _ in 0..partitions.max(0) {
            out.push((topic.clone(), r.i32()?));
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn decodes_topics_and_partitions() {
        let mut b = vec![0, 1, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 2];
        b.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(super::decode(&b), vec![("t".into(), 4), ("t".into(), 5)]);
        assert!(super::decode(&[0, 1, 0]).is_empty());
    }
}
