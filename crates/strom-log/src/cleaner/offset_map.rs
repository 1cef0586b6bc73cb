//! The key → latest offset map a cleaning builds over the dirty section of a log, in a
//! fixed memory budget (Kafka's `SkimpyOffsetMap`, sized by `log.cleaner.dedupe.buffer.size`).
//!
//! Keys are not stored, only a 128-bit hash of each (xxh3, seeded afresh for every map, so
//! no producer can aim a collision at another key): two keys collide with a probability
//! of about n²/2¹²⁹, far below one in 10²⁵ for the 5.6 M keys the default budget holds.
//! Slots are probed by double hashing over a prime number of slots; the map is full at
//! `log.cleaner.io.buffer.load.factor` of its slots, where a lookup still costs a few
//! probes. The slots are allocated zeroed, so the pages a small cleaning never touches
//! cost no memory.

use xxhash_rust::xxh3::xxh3_128_with_seed;

/// Bytes a slot takes: the key's 128-bit hash and its offset.
pub const BYTES_PER_ENTRY: usize = 24;

/// A bounded map from key hashes to the offset of the key's latest record.
#[derive(Debug)]
pub struct OffsetMap {
    /// Three words per slot: the hash's halves and the offset plus one (0: empty).
    slots: Vec<u64>,
    capacity: usize,
    /// Entries at which the map counts as full.
    max_entries: usize,
    entries: usize,
    seed: u64,
    latest_offset: i64,
}

impl OffsetMap {
    /// A map using at most `budget_bytes`, full at `load_factor` of its slots, with no
    /// more slots than `max_keys` keys need at that load.
    pub fn new(budget_bytes: usize, load_factor: f64, max_keys: usize) -> Self {
        let load_factor = load_factor.clamp(0.05, 0.95);
        let by_budget = budget_bytes / BYTES_PER_ENTRY;
        let by_need = ((max_keys as f64 / load_factor).ceil() as usize).saturating_add(1);
        let capacity = largest_prime_at_most(by_budget.min(by_need).max(3));
        Self {
            slots: vec![0; capacity * 3],
            capacity,
            max_entries: ((capacity as f64 * load_factor) as usize).max(1),
            entries: 0,
            seed: fastrand::u64(..),
            latest_offset: -1,
        }
    }

    /// Records that the key's latest record so far is at `offset` (offsets arrive in
    /// log order). Returns `false`, recording nothing, when the key is new and the map
    /// is full.
    pub fn put(&mut self, key: &[u8], offset: i64) -> bool {
        let (hi, lo) = self.hash(key);
        let slot = self.probe(hi, lo);
        let at = slot * 3;
        if self.slots[at + 2] == 0 {
            if self.is_full() {
                return false;
            }
            self.slots[at] = hi;
            self.slots[at + 1] = lo;
            self.entries += 1;
        }
        self.slots[at + 2] = offset as u64 + 1;
        self.latest_offset = self.latest_offset.max(offset);
        true
    }

    /// The offset of the key's latest record, if the map has the key.
    pub fn get(&self, key: &[u8]) -> Option<i64> {
        let (hi, lo) = self.hash(key);
        let stored = self.slots[self.probe(hi, lo) * 3 + 2];
        (stored != 0).then(|| stored as i64 - 1)
    }

    /// Records that the map covers the log up to `offset` (a batch without keys, or
    /// whose keys are all in the map, still moves the end of what the map covers).
    pub fn note_offset(&mut self, offset: i64) {
        self.latest_offset = self.latest_offset.max(offset);
    }

    /// Whether a new key would no longer fit.
    pub fn is_full(&self) -> bool {
        self.entries >= self.max_entries
    }

    /// The highest offset put, -1 if none.
    pub fn latest_offset(&self) -> i64 {
        self.latest_offset
    }

    pub fn len(&self) -> usize {
        self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Bytes the slots take.
    pub fn size_bytes(&self) -> usize {
        self.capacity * BYTES_PER_ENTRY
    }

    fn hash(&self, key: &[u8]) -> (u64, u64) {
        let h = xxh3_128_with_seed(key, self.seed);
        ((h >> 64) as u64, h as u64)
    }

    /// The slot holding the hash, or the empty slot where it would go. The step is in
    /// 1..capacity and the capacity prime, so the probe visits every slot; the map never
    /// fills every slot, so it ends.
    fn probe(&self, hi: u64, lo: u64) -> usize {
        let n = self.capacity as u64;
        let mut slot = hi % n;
        let step = 1 + lo % (n - 1);
        loop {
            let at = slot as usize * 3;
            if self.slots[at + 2] == 0 || (self.slots[at] == hi && self.slots[at + 1] == lo) {
                return slot as usize;
            }
            slot = (slot + step) % n;
        }
    }
}

/// The largest prime at most `n` (n ≥ 3), by trial division: a few thousand divisions
/// for the millions of slots of a default budget.
fn largest_prime_at_most(n: usize) -> usize {
    let is_prime = |m: usize| {
        m >= 2
            && (2..)
                .take_while(|d| d * d <= m)
                .all(|d| !m.is_multiple_of(d))
    };
    (3..=n).rev().find(|&m| is_prime(m)).unwrap_or(3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_offset_of_each_key_is_kept() {
        let mut map = OffsetMap::new(1 << 20, 0.9, 1_000);
        for offset in 0..1_000i64 {
            assert!(map.put(format!("k{}", offset % 100).as_bytes(), offset));
        }
        assert_eq!(map.len(), 100);
        for k in 0..100 {
            assert_eq!(map.get(format!("k{k}").as_bytes()), Some(900 + k));
        }
        assert_eq!(map.get(b"absent"), None);
        assert_eq!(map.latest_offset(), 999);
    }

    #[test]
    fn a_full_map_refuses_new_keys_and_still_updates_known_ones() {
        let mut map = OffsetMap::new(24 * 11, 0.9, 1_000_000);
        let mut accepted = 0;
        while map.put(format!("k{accepted}").as_bytes(), accepted) {
            accepted += 1;
        }
        assert!(map.is_full());
        assert_eq!(accepted as usize, map.len());
        assert!(map.size_bytes() <= 24 * 11);
        assert!(map.put(b"k0", 5_000));
        assert_eq!(map.get(b"k0"), Some(5_000));
    }

    #[test]
    fn the_slots_fit_the_budget_and_the_need() {
        let map = OffsetMap::new(128 << 20, 0.9, 10);
        assert!(map.size_bytes() < 24 * 16);
        let map = OffsetMap::new(1 << 20, 0.9, usize::MAX);
        assert!(map.size_bytes() <= 1 << 20 && map.size_bytes() > (1 << 20) - 24 * 100);
    }
}
