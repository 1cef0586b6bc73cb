//! Decoding a member's assignment, which the broker treats as opaque bytes: the
//! consumer protocol's `ConsumerProtocolAssignment` (a version, then topics with their
//! partitions, then user data the tool does not need).

/// (topic, partition) pairs of a consumer-protocol assignment; empty if the bytes are not
/// one (another protocol type, or a member not yet assigned).
pub fn decode(bytes: &[u8]) -> Vec<(String, i32)> {
    parse(bytes).unwrap_or_default()
}

fn parse(bytes: &[u8]) -> Option<Vec<(String, i32)>> {
    let mut r = Reader(bytes);
    let _version = r.i16()?;
    let topics = r.i32()?;
    let mut out = Vec::new();
    for _ in 0..topics.max(0) {
        let len = usize::try_from(r.i16()?).ok()?;
        let topic = String::from_utf8(r.take(len)?.to_vec()).ok()?;
        let partitions = r.i32()?;
        for _ in 0..partitions.max(0) {
            out.push((topic.clone(), r.i32()?));
        }
    }
    Some(out)
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        (self.0.len() >= n).then(|| {
            let (head, rest) = self.0.split_at(n);
            self.0 = rest;
            head
        })
    }
    fn i16(&mut self) -> Option<i16> {
        self.take(2).map(|b| i16::from_be_bytes([b[0], b[1]]))
    }
    fn i32(&mut self) -> Option<i32> {
        self.take(4)
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
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
