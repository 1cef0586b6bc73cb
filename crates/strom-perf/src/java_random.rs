//! Java's `java.util.SplittableRandom`, so payloads match Kafka's byte for byte.
//!
//! Kafka's producer perf test fills each record with `(byte)(random.nextInt(26) + 65)` from
//! `new SplittableRandom(0)`, and picks `--payload-file` entries with `nextInt(size)`. Using the
//! same generator gives the same payloads, hence the same compression ratios.

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
    fn power_of_two_bounds_mask_the_mixed_value() {
        let mut r = SplittableRandom::new(42);
        for _ in 0..1000 {
            assert!(r.next_int(8) < 8);
        }
    }
}
