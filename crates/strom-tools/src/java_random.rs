//! Java's random generators, so payloads match Kafka's byte for byte.
//!
//! Kafka's producer perf test fills each record with `(byte)(random.nextInt(26) + 65)` from
//! `new SplittableRandom(0)` and picks `--payload-file` entries with `nextInt(size)`;
//! EndToEndLatency fills each message with one letter from `new java.util.Random(0)`. Using
//! the same generators gives the same payloads, hence the same compression ratios.

const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// The generator state: Java's `seed` and `gamma` for a root (unsplit) instance.
#[derive(Debug, Clone)]
pub struct SplittableRandom {
    seed: u64,
}

impl SplittableRandom {
    /// Java's `new SplittableRandom(seed)`.
    pub fn new(seed: u64) -> Self {
        Self { seed }
    }

    fn next_seed(&mut self) -> u64 {
        self.seed = self.seed.wrapping_add(GOLDEN_GAMMA);
        self.seed
    }

    fn mix32(z: u64) -> u32 {
        let z = (z ^ (z >> 33)).wrapping_mul(0x62a9_d9ed_7997_05f5);
        ((z ^ (z >> 28)).wrapping_mul(0xcb24_d0a5_c88c_35b3) >> 32) as u32
    }

    /// Java's `nextInt(bound)` for `bound > 0`, including its rejection loop.
    pub fn next_int(&mut self, bound: u32) -> u32 {
        assert!(bound > 0, "bound must be positive");
        let mut r = Self::mix32(self.next_seed());
        let m = bound - 1;
        if bound & m == 0 {
            return r & m;
        }
        let mut u = r >> 1;
        loop {
            r = u % bound;
            // Java: `u + m - r < 0` in signed 32-bit arithmetic rejects the biased tail.
            if (u.wrapping_add(m).wrapping_sub(r) as i32) >= 0 {
                return r;
            }
            u = Self::mix32(self.next_seed()) >> 1;
        }
    }

    /// One upper-case letter, as Kafka draws each payload byte.
    pub fn next_letter(&mut self) -> u8 {
        self.next_int(26) as u8 + b'A'
    }
}

/// Java's `java.util.Random`, a 48-bit linear congruential generator.
#[derive(Debug, Clone)]
pub struct Random {
    seed: u64,
}

const MULTIPLIER: u64 = 0x5_DEEC_E66D;
const MASK_48: u64 = (1 << 48) - 1;

impl Random {
    /// Java's `new Random(seed)`, which scrambles the seed.
    pub fn new(seed: u64) -> Self {
        Self {
            seed: (seed ^ MULTIPLIER) & MASK_48,
        }
    }

    fn next(&mut self, bits: u32) -> i32 {
        self.seed = (self.seed.wrapping_mul(MULTIPLIER).wrapping_add(0xB)) & MASK_48;
        (self.seed >> (48 - bits)) as i32
    }

    /// Java's `nextInt(bound)` for `bound > 0`.
    pub fn next_int(&mut self, bound: i32) -> i32 {
        assert!(bound > 0, "bound must be positive");
        if bound & (bound - 1) == 0 {
            return ((i64::from(bound) * i64::from(self.next(31))) >> 31) as i32;
        }
        loop {
            let bits = self.next(31);
            let value = bits % bound;
            if bits.wrapping_sub(value).wrapping_add(bound - 1) >= 0 {
                return value;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_stay_in_range_and_are_deterministic() {
        let mut a = SplittableRandom::new(0);
        let mut b = SplittableRandom::new(0);
        for _ in 0..10_000 {
            let x = a.next_letter();
            assert!(x.is_ascii_uppercase());
            assert_eq!(x, b.next_letter());
        }
    }

    #[test]
    fn java_util_random_matches_known_values() {
        // The widely quoted first `nextInt()` of `new Random(0)` and `new Random(42)`.
        assert_eq!(Random::new(0).next(32), -1_155_484_576);
        assert_eq!(Random::new(42).next(32), -1_170_105_035);
        let mut r = Random::new(0);
        assert!((0..1000).all(|_| (0..26).contains(&r.next_int(26))));
    }

    #[test]
    fn power_of_two_bounds_mask_the_mixed_value() {
        let mut r = SplittableRandom::new(42);
        for _ in 0..1000 {
            assert!(r.next_int(8) < 8);
        }
    }
}
