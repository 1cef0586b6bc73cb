//! The time index: maps a timestamp to the first offset whose batch may hold a record at or
//! after it. Same entry layout as Kafka's `.timeindex`: timestamp (i64) then relative
//! offset (u32), big-endian. Entries are added only when the maximum timestamp grows, so
//! keys are monotonic even when producers send timestamps out of order.

use crate::index_file::{IndexEntry, IndexFile};

/// One time-index entry, relative to the segment's base offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    pub timestamp: i64,
    pub relative_offset: u32,
}

impl IndexEntry for TimestampOffset {
    const SIZE: usize = 12;
    fn key(&self) -> i64 {
        self.timestamp
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.timestamp.to_be_bytes());
        out.extend_from_slice(&self.relative_offset.to_be_bytes());
    }
    fn decode(b: &[u8]) -> Self {
        Self {
            timestamp: i64::from_be_bytes(b[0..8].try_into().expect("8 bytes")),
            relative_offset: u32::from_be_bytes(b[8..12].try_into().expect("4 bytes")),
        }
    }
}

/// A segment's time index.
pub type TimeIndex = IndexFile<TimestampOffset>;
