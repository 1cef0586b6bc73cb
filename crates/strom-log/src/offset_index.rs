//! The sparse offset index: maps an offset to the byte position of the batch holding it,
//! one entry per `index.interval.bytes` of log. Same entry layout as Kafka's `.index`:
//! relative offset (u32) then position (u32), big-endian.

use crate::index_file::{IndexEntry, IndexFile};

/// One offset-index entry, relative to the segment's base offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetPosition {
    pub relative_offset: u32,
    pub position: u32,
}

impl IndexEntry for OffsetPosition {
    const SIZE: usize = 8;
    fn key(&self) -> i64 {
        self.relative_offset as i64
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.relative_offset.to_be_bytes());
        out.extend_from_slice(&self.position.to_be_bytes());
    }
    fn decode(b: &[u8]) -> Self {
        Self {
            relative_offset: u32::from_be_bytes(b[0..4].try_into().expect("4 bytes")),
            position: u32::from_be_bytes(b[4..8].try_into().expect("4 bytes")),
        }
    }
}

/// A segment's offset index.
pub type OffsetIndex = IndexFile<OffsetPosition>;
