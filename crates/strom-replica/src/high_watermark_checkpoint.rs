//! `replication-offset-checkpoint`: the high watermark of every partition of a log dir,
//! in Kafka's offset checkpoint format, written every `replica.high.watermark.checkpoint.interval.ms` and at
//! shutdown. A restarted broker starts each partition from it rather than from its log
//! end, so records that were never committed are not shown to consumers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use strom_log::offset_checkpoint::{self, PartitionOffsets};

use crate::partition::Partition;

pub const FILE_NAME: &str = "replication-offset-checkpoint";

/// High watermarks by (topic, partition).
pub type HighWatermarks = PartitionOffsets;

/// Reads the checkpoint of log dir `dir`; a missing file is empty, a corrupt one is
/// reported and ignored (partitions then start from their log start, which is safe).
pub fn read(dir: &Path) -> HighWatermarks {
    offset_checkpoint::read(&dir.join(FILE_NAME), "high-watermark")
}

/// Replaces the checkpoint of log dir `dir` atomically.
pub fn write(dir: &Path, hws: &HighWatermarks) -> std::io::Result<()> {
    offset_checkpoint::write(&dir.join(FILE_NAME), hws)
}

/// Writes the high watermarks of every online partition of `hosted`, one file per log
/// dir of `log_dirs` (a dir with no partition gets an empty file).
pub fn checkpoint_all(log_dirs: &[PathBuf], hosted: impl IntoIterator<Item = Arc<Partition>>) {
    let mut by_dir: BTreeMap<PathBuf, HighWatermarks> = log_dirs
        .iter()
        .map(|d| (d.clone(), HighWatermarks::new()))
        .collect();
    for p in hosted {
        if p.offline_reason().is_some() {
            continue;
        }
        if let Some(dir) = p.dir().parent() {
            by_dir
                .entry(dir.to_path_buf())
                .or_default()
                .insert((p.topic.clone(), p.index), p.high_watermark());
        }
    }
    for (dir, hws) in by_dir {
        if let Err(e) = write(&dir, &hws) {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot write the high-watermark checkpoint");
        }
    }
}
