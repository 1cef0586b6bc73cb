//! Log compaction, as Kafka's log cleaner does it.
//!
//! A compacted log has a clean section (below the first dirty offset, which each log
//! dir's `cleaner-offset-checkpoint` keeps) and a dirty one. A cleaning:
//!
//! 1. reads the dirty section up to the first uncleanable offset (the active segment,
//!    the high watermark, or the first segment younger than `min.compaction.lag.ms`)
//!    into an [`OffsetMap`] of key → latest offset, in a bounded budget; when the keys do
//!    not fit, the cleaning ends where the map filled and the rest waits for the next;
//! 2. recopies the segments below that end in groups of at most `segment.bytes`, keeping
//!    a record only if it is the latest of its key (or past the map), a tombstone only
//!    until its batch's delete horizon, and each producer's last batch (emptied if need
//!    be) so that idempotent sequences survive;
//! 3. swaps each cleaned group in crash-safely ([`swap`]): written as `.cleaned` files,
//!    renamed `.swap` (the commit), old segments deleted, renamed into place.
//!
//! The copying reads the segment files without the log's lock (sealed segments do not
//! change); only the swap takes it, and gives up if the log was truncated or lost
//! segments meanwhile (its layout generation moved).

pub mod cleaning;
pub mod offset_map;
pub mod swap;
pub mod throttler;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

pub use cleaning::{Cleaner, CleanerConfig, CleanerStats, CleaningOutcome};
pub use offset_map::OffsetMap;
pub use throttler::Throttler;

use crate::{FileCache, LogConfig};

/// Name of each log dir's file of first dirty offsets (Kafka's).
pub const CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";

/// A compacted log's cleanable section, by which the cleaner chooses the log to clean
/// next (Kafka's `LogToClean`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogToClean {
    /// Where the dirty section starts.
    pub first_dirty_offset: i64,
    /// Where cleaning must stop: nothing at or above it is cleaned.
    pub first_uncleanable_offset: i64,
    /// Bytes of the segments wholly below the first dirty offset.
    pub clean_bytes: u64,
    /// Bytes of the segments between the first dirty and the first uncleanable offset.
    pub cleanable_bytes: u64,
    /// How long ago the oldest dirty record passed `max.compaction.lag.ms` (≤ 0: not yet).
    pub compaction_overdue_ms: i64,
    /// Whether a delete horizon stamped by an earlier cleaning has passed, so a cleaning
    /// would remove tombstones even with nothing dirty.
    pub tombstones_expired: bool,
}

impl LogToClean {
    /// Dirty bytes over all bytes the cleaning would read.
    pub fn dirty_ratio(&self) -> f64 {
        let total = self.clean_bytes + self.cleanable_bytes;
        if total == 0 {
            0.0
        } else {
            self.cleanable_bytes as f64 / total as f64
        }
    }
}

/// One segment below the first uncleanable offset, as the cleaner reads it.
#[derive(Debug, Clone)]
pub struct SegmentFile {
    pub base_offset: i64,
    /// The offset after its last batch, or the next segment's base offset.
    pub next_offset: i64,
    pub size: u64,
    pub path: PathBuf,
}

/// Everything a cleaning of one log needs, taken under the log's lock
/// ([`crate::PartitionLog::plan_cleaning`]) and used without it.
#[derive(Debug)]
pub struct CleaningPlan {
    /// `topic-partition`, for messages.
    pub name: String,
    pub dir: PathBuf,
    /// The log's layout generation when planned: a swap under another gives up.
    pub generation: u64,
    pub to_clean: LogToClean,
    /// The segments below the first uncleanable offset, oldest first.
    pub segments: Vec<SegmentFile>,
    /// The last offset of each active producer's newest batch.
    pub producer_last_offsets: HashMap<i64, i64>,
    pub config: LogConfig,
    pub files: Arc<FileCache>,
}

/// The steps of a cleaning a crash can fall between, named for the tests that kill a
/// process at each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CleanerPhase {
    /// Part of a cleaned segment is written beside the old ones.
    Copying,
    /// The cleaned segment is complete and renamed `.swap`: the swap is committed.
    SwapBegun,
    /// The segments it replaces are deleted; it still carries `.swap`.
    OldSegmentsDeleted,
    /// It is in place under its final names.
    Swapped,
}

/// Observes a cleaning's phases (tests crash a process at one; the broker passes
/// [`no_phase_hook`]).
pub type PhaseHook<'a> = &'a dyn Fn(CleanerPhase);

/// The hook that does nothing.
pub fn no_phase_hook(_: CleanerPhase) {}
