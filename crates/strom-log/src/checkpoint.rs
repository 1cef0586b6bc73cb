//! The partition checkpoint: the offsets a partition must remember across restarts that
//! are not implied by its segments.
//!
//! * `recovery.point` — every batch below it was fsynced; after an unclean shutdown only
//!   the segments at or above it are read and CRC-checked.
//! * `log.start.offset` — raised by DeleteRecords and retention; records below it are gone
//!   for clients even if their segment still exists.
//!
//! Kafka keeps these in per-log-dir files; strom keeps one small text file per partition
//! (`partition.checkpoint`) so a partition directory is self-contained. It is replaced
//! atomically (write, fsync, rename).

use std::fs;
use std::io::Write;
use std::path::Path;

use crate::LogError;

const FILE_NAME: &str = "partition.checkpoint";
const VERSION: &str = "0";

/// Offsets persisted beside a partition's segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PartitionCheckpoint {
    pub recovery_point: i64,
    pub log_start_offset: i64,
}

impl PartitionCheckpoint {
    /// Reads the checkpoint of the partition in `dir`; `None` if there is none.
    pub fn read(dir: &Path) -> Result<Option<Self>, LogError> {
        let path = dir.join(FILE_NAME);
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let corrupt = |reason: &str| LogError::CorruptFile {
            path: path.display().to_string(),
            reason: reason.to_string(),
        };
        let mut lines = text.lines();
        if lines.next() != Some(VERSION) {
            return Err(corrupt("unknown version"));
        }
        let mut checkpoint = Self::default();
        for line in lines {
            let (key, value) = line.split_once(' ').ok_or_else(|| corrupt(line))?;
            let value: i64 = value.parse().map_err(|_| corrupt(line))?;
            match key {
                "recovery.point" => checkpoint.recovery_point = value,
                "log.start.offset" => checkpoint.log_start_offset = value,
                _ => return Err(corrupt(line)),
            }
        }
        Ok(Some(checkpoint))
    }

    /// Replaces the checkpoint of the partition in `dir`; with `sync` false the caller
    /// makes it durable (one `syncfs` for every partition of a log dir at shutdown).
    pub fn write(&self, dir: &Path, sync: bool) -> Result<(), LogError> {
        let tmp = dir.join(format!("{FILE_NAME}.tmp"));
        let text = format!(
            "{VERSION}\nrecovery.point {}\nlog.start.offset {}\n",
            self.recovery_point, self.log_start_offset
        );
        let mut file = fs::File::create(&tmp)?;
        file.write_all(text.as_bytes())?;
        if sync {
            file.sync_all()?;
        }
        fs::rename(&tmp, dir.join(FILE_NAME))?;
        Ok(())
    }
}
