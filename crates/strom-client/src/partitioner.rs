//! Which partition a record goes to, as Kafka's default partitioner decides: a keyed
//! record by the murmur2 hash of its key, so the same key always lands in the same
//! partition as with the Java client; a record without a key in the "sticky" partition
//! (KIP-480), which changes each time its batch is sealed, so batches fill up instead of
//! one record going to every partition in turn.

pub struct Partitioner {
    partitions: usize,
    sticky: usize,
}

impl Partitioner {
    pub fn new(partitions: usize) -> Self {
        Self {
            partitions,
            sticky: std::process::id() as usize % partitions.max(1),
        }
    }

    #[inline]
    pub fn partition(&self, key: Option<&[u8]>) -> usize {
        match key {
            Some(key) => (murmur2(key) & 0x7fff_ffff) as usize % self.partitions,
            None => self.sticky,
        }
    }

    /// A batch of `partition` was sealed: records without a key move on to the next one.
    pub fn on_batch_sealed(&mut self, partition: usize) {
        if partition == self.sticky {
            self.sticky = (self.sticky + 1) % self.partitions;
        }
    }
}

/// Kafka's `Utils.murmur2` (seed 0x9747b28c), as the Java client hashes keys.
pub fn murmur2(data: &[u8]) -> u32 {
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h: u32 = 0x9747_b28c ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes(chunk.try_into().expect("4 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_the_java_clients_hashes() {
        // Kafka's UtilsTest.testMurmur2 expectations.
        let cases: [(&[u8], i32); 5] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
        ];
        for (key, expected) in cases {
            assert_eq!(
                murmur2(key) as i32,
                expected,
                "{:?}",
                std::str::from_utf8(key)
            );
        }
    }

    #[test]
    fn keyless_records_stick_until_their_batch_is_sealed() {
        let mut p = Partitioner::new(3);
        let first = p.partition(None);
        assert_eq!(p.partition(None), first);
        p.on_batch_sealed((first + 1) % 3);
        assert_eq!(p.partition(None), first);
        p.on_batch_sealed(first);
        assert_eq!(p.partition(None), (first + 1) % 3);
        assert_eq!(p.partition(Some(b"k")), p.partition(Some(b"k")));
    }
}
