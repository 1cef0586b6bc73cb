//! Record values and keys, generated as Kafka's tool generates them but without per-record
//! work on the hot path.
//!
//! Kafka refills one buffer per record with the next `record_size` letters of
//! `SplittableRandom(0)`. Here that same letter stream is generated once into a pool and
//! each record is the next slice of it: the pool's worth of payloads are exactly Kafka's,
//! later ones repeat the pool, and the send loop only borrows a slice. The pool holds
//! twice the largest batch (at least 2 MiB, twice Kafka's default `message.max.bytes`),
//! so no batch repeats a value within itself and compression sees Kafka's entropy; and it
//! is small enough to stay in a core's cache: a 16 MiB pool made copying each value into
//! its batch wait on memory, a tenth of the native producer's CPU.

use std::io::Write as _;

use anyhow::{bail, Context, Result};
use regex::Regex;

use super::args::{KeyDistribution, PayloadSource};
use crate::java_random::SplittableRandom;

/// The smallest pool: twice Kafka's default `message.max.bytes`.
const MIN_POOL_BYTES: u64 = 2 << 20;

/// Values in Kafka's order. Each variant remembers which record it last served and
/// where that value lies, so that asking again for the same record (a send loop that
/// looked at a value and found the batch full) gives the same value and leaves the
/// sequence as it was.
pub enum Payloads {
    Letters {
        pool: Vec<u8>,
        size: usize,
        offset: usize,
        last: Option<(u64, usize)>,
    },
    File {
        entries: Vec<Vec<u8>>,
        random: SplittableRandom,
        last: Option<(u64, usize)>,
    },
    Monotonic {
        buffer: Vec<u8>,
    },
}

impl Payloads {
    /// Prepares payloads for batches of up to `batch_size` bytes; a payload file is
    /// announced on `out` as Kafka does.
    pub fn new(
        source: &PayloadSource,
        num_records: u64,
        batch_size: usize,
        out: &mut dyn std::io::Write,
    ) -> Result<Self> {
        Ok(match source {
            PayloadSource::RecordSize(size) => {
                let pool_bytes = MIN_POOL_BYTES.max(2 * batch_size as u64);
                let records_in_pool = pool_bytes.div_ceil(*size as u64).clamp(1, num_records);
                let mut random = SplittableRandom::new(0);
                let pool = (0..records_in_pool as usize * size)
                    .map(|_| random.next_letter())
                    .collect();
                Payloads::Letters {
                    pool,
                    size: *size,
                    offset: 0,
                    last: None,
                }
            }
            PayloadSource::File { path, delimiter } => {
                let entries = read_payload_file(path, delimiter, out)?;
                Payloads::File {
                    entries,
                    random: SplittableRandom::new(0),
                    last: None,
                }
            }
            PayloadSource::Monotonic => Payloads::Monotonic {
                buffer: Vec::with_capacity(20),
            },
        })
    }

    /// The value of record `i`: the next one in Kafka's order, or the one record `i` was
    /// given when it was asked for last.
    pub fn next(&mut self, i: u64) -> &[u8] {
        match self {
            Payloads::Letters {
                pool,
                size,
                offset,
                last,
            } => {
                let start = remembered(last, i, || {
                    if *offset + *size > pool.len() {
                        *offset = 0;
                    }
                    let start = *offset;
                    *offset += *size;
                    start
                });
                &pool[start..start + *size]
            }
            Payloads::File {
                entries,
                random,
                last,
            } => {
                let pick = remembered(last, i, || random.next_int(entries.len() as u32) as usize);
                &entries[pick]
            }
            Payloads::Monotonic { buffer } => {
                buffer.clear();
                let _ = write!(buffer, "{i}");
                buffer
            }
        }
    }
}

/// Where record `i`'s value lies: remembered in `last` if it was the record asked for
/// last, else found by `next` (which moves the sequence on) and remembered.
#[inline]
fn remembered(last: &mut Option<(u64, usize)>, i: u64, next: impl FnOnce() -> usize) -> usize {
    match *last {
        Some((index, at)) if index == i => at,
        _ => {
            let at = next();
            *last = Some((i, at));
            at
        }
    }
}

/// Kafka's `--payload-file` handling: UTF-8 text split on a regex, trailing empty pieces
/// dropped as Java's `String.split` drops them.
fn read_payload_file(
    path: &str,
    delimiter: &str,
    out: &mut dyn std::io::Write,
) -> Result<Vec<Vec<u8>>> {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.into());
    writeln!(out, "Reading payloads from: {}", absolute.display())?;
    let empty = std::fs::metadata(path)
        .map(|m| m.len() == 0)
        .unwrap_or(true);
    if empty {
        bail!("File does not exist or empty file provided.");
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {path} as UTF-8"))?;
    let splitter = Regex::new(delimiter)
        .with_context(|| format!("invalid --payload-delimiter {delimiter:?}"))?;
    let mut entries: Vec<Vec<u8>> = splitter
        .split(&text)
        .map(|s| s.as_bytes().to_vec())
        .collect();
    while entries.len() > 1 && entries.last().is_some_and(Vec::is_empty) {
        entries.pop();
    }
    writeln!(out, "Number of messages read: {}", entries.len())?;
    Ok(entries)
}

/// KIP-1299 keys: `Integer.toString(i % range)` or a uniform pick in the range.
pub struct Keys {
    range: u64,
    distribution: KeyDistribution,
    random: SplittableRandom,
    buffer: Vec<u8>,
}

impl Keys {
    pub fn new(range: u64, distribution: KeyDistribution) -> Self {
        Self {
            range,
            distribution,
            random: SplittableRandom::new(1),
            buffer: Vec::with_capacity(20),
        }
    }

    pub fn next(&mut self, i: u64) -> &[u8] {
        let key = match self.distribution {
            KeyDistribution::Range => i % self.range,
            KeyDistribution::Random => {
                u64::from(self.random.next_int(self.range.min(i32::MAX as u64) as u32))
            }
        };
        self.buffer.clear();
        let _ = write!(self.buffer, "{key}");
        &self.buffer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_are_consecutive_slices_of_kafkas_stream() {
        let mut p =
            Payloads::new(&PayloadSource::RecordSize(10), 3, 16_384, &mut Vec::new()).unwrap();
        let mut random = SplittableRandom::new(0);
        let stream: Vec<u8> = (0..30).map(|_| random.next_letter()).collect();
        assert_eq!(p.next(0), &stream[0..10]);
        assert_eq!(p.next(1), &stream[10..20]);
        assert_eq!(p.next(2), &stream[20..30]);
        assert_eq!(p.next(3), &stream[0..10], "the pool wraps around");
    }

    #[test]
    fn no_batch_repeats_a_value_within_itself() {
        for (batch_size, pool_bytes) in [(16_384, 2 << 20), (4 << 20, 8 << 20)] {
            let p = Payloads::new(
                &PayloadSource::RecordSize(100),
                u64::MAX,
                batch_size,
                &mut Vec::new(),
            )
            .unwrap();
            let Payloads::Letters { pool, .. } = p else {
                panic!("letters")
            };
            assert_eq!(
                pool.len(),
                (pool_bytes as usize).div_ceil(100) * 100,
                "batch.size {batch_size}"
            );
            assert!(pool.len() >= 2 * batch_size);
        }
    }

    #[test]
    fn asking_again_for_a_record_gives_its_value_and_keeps_the_sequence() {
        let letters = PayloadSource::RecordSize(10);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("payloads.txt");
        std::fs::write(&path, "a,bb,ccc,dddd,eeeee").unwrap();
        let file = PayloadSource::File {
            path: path.display().to_string(),
            delimiter: ",".to_string(),
        };
        for source in [letters, file] {
            let new = || Payloads::new(&source, 100, 16_384, &mut Vec::new()).unwrap();
            let (mut once, mut twice) = (new(), new());
            for i in 0..50 {
                let first = twice.next(i).to_vec();
                assert_eq!(twice.next(i), first, "record {i} asked for again");
                assert_eq!(once.next(i), first, "record {i} in sequence");
            }
        }
    }

    #[test]
    fn monotonic_payload_is_the_index() {
        let mut p = Payloads::new(&PayloadSource::Monotonic, 10, 16_384, &mut Vec::new()).unwrap();
        assert_eq!(p.next(0), b"0");
        assert_eq!(p.next(12345), b"12345");
    }

    #[test]
    fn payload_file_splits_on_a_regex_and_announces_itself() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("payloads.txt");
        std::fs::write(&path, "a,b;;c\n").unwrap();
        let mut out = Vec::new();
        let source = PayloadSource::File {
            path: path.display().to_string(),
            delimiter: "[,;]+".to_string(),
        };
        let mut p = Payloads::new(&source, 10, 16_384, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("Reading payloads from: "));
        assert!(text.ends_with("Number of messages read: 3\n"));
        for i in 0..20 {
            assert!([&b"a"[..], b"b", b"c\n"].contains(&p.next(i)));
        }
    }

    #[test]
    fn missing_or_empty_payload_file_is_kafkas_error() {
        let source = PayloadSource::File {
            path: "/nonexistent/x".to_string(),
            delimiter: "\n".to_string(),
        };
        let err = Payloads::new(&source, 1, 16_384, &mut Vec::new())
            .err()
            .unwrap();
        assert_eq!(
            err.to_string(),
            "File does not exist or empty file provided."
        );
    }

    #[test]
    fn keys_in_range() {
        let mut k = Keys::new(3, KeyDistribution::Range);
        assert_eq!(k.next(4), b"1");
        let mut r = Keys::new(5, KeyDistribution::Random);
        for i in 0..100 {
            let key: u64 = std::str::from_utf8(r.next(i)).unwrap().parse().unwrap();
            assert!(key < 5);
        }
    }
}
