//! The clean-shutdown record: one file per log dir, written last by a clean shutdown,
//! that holds for every log the shutdown closed what opening it needs — its log end
//! offset, log start offset, active segment (base offset and size), leader epochs and
//! producer state — so the next start reads none of the partition's own small files.
//!
//! A close used to write two small files per partition (`partition.checkpoint` and a
//! producer snapshot) and make them durable with a second `syncfs`: at 13,300 partitions
//! that was half of the shutdown, and reading them back a third of the start. The record
//! replaces both with one sequential write and one read.
//!
//! Only the logs it names count as closed cleanly: the next start recovers every other
//! partition of the log dir (one that was offline, or not yet opened by a start the
//! shutdown interrupted) from its own checkpoint, as after a crash. A named log whose
//! active segment is not the size the record says (it changed after the close) is
//! recovered too. The partition's own checkpoint and snapshot may be older than the
//! record (`own_files_current` says whether they are); they are read only after a crash,
//! where an older recovery point or snapshot only means more to check or replay.
//!
//! Layout (big-endian): magic `SCR1`, entry count (u32), then per log the partition
//! directory's name (u16 length, UTF-8), log end offset, log start offset, active segment
//! base offset (i64 each), active segment size (u64), own files current (u8), the leader
//! epochs (u32 count, then i32 epoch and i64 start offset each), the producer state (u32
//! length, then the bytes of a producer snapshot); then a CRC32C of everything before it.
//! It is written to a temporary file, fsynced and renamed, so it is whole or absent.

use std::collections::HashMap;
use std::fs;
use std::path::Path;

use crate::{EpochEntry, LogError, ProducerStateManager};

const MAGIC: &[u8; 4] = b"SCR1";

/// What a clean shutdown knows of a log it closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClosedLog {
    /// Every batch below it was made durable before the record was written.
    pub log_end_offset: i64,
    pub log_start_offset: i64,
    /// The active segment's base offset and size in bytes at the close.
    pub active_base_offset: i64,
    pub active_size: u64,
    /// Whether the partition's own checkpoint and producer snapshot are at the log end.
    pub own_files_current: bool,
    pub leader_epochs: Vec<EpochEntry>,
    /// The producer state at `log_end_offset`.
    pub producer_state: ProducerStateManager,
}

/// The logs a clean shutdown closed, by partition directory name.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CleanShutdown {
    pub logs: HashMap<String, ClosedLog>,
}

impl CleanShutdown {
    /// Reads the record at `path`: `None` if there is none, an error naming the file if
    /// it is not a whole record.
    pub fn read(path: &Path) -> Result<Option<Self>, LogError> {
        let bytes = match fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        Self::decode(&bytes)
            .map(Some)
            .ok_or_else(|| LogError::CorruptFile {
                path: path.display().to_string(),
                reason: "not a whole clean-shutdown record".to_string(),
            })
    }

    /// Writes the record for `logs` to `path` and makes it durable: a temporary file,
    /// fsynced, renamed into place, and the directory fsynced. The caller has made the
    /// logs' data durable first.
    pub fn write<'a>(
        path: &Path,
        logs: impl IntoIterator<Item = (&'a str, &'a ClosedLog)>,
    ) -> Result<(), LogError> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&0u32.to_be_bytes());
        let mut count = 0u32;
        for (name, log) in logs {
            // A directory name: at most 255 bytes.
            out.extend_from_slice(&(name.len() as u16).to_be_bytes());
            out.extend_from_slice(name.as_bytes());
            for value in [
                log.log_end_offset,
                log.log_start_offset,
                log.active_base_offset,
            ] {
                out.extend_from_slice(&value.to_be_bytes());
            }
            out.extend_from_slice(&log.active_size.to_be_bytes());
            out.push(u8::from(log.own_files_current));
            out.extend_from_slice(&(log.leader_epochs.len() as u32).to_be_bytes());
            for entry in &log.leader_epochs {
                out.extend_from_slice(&entry.epoch.to_be_bytes());
                out.extend_from_slice(&entry.start_offset.to_be_bytes());
            }
            let state = log.producer_state.encode(log.log_end_offset);
            out.extend_from_slice(&(state.len() as u32).to_be_bytes());
            out.extend_from_slice(&state);
            count += 1;
        }
        out[4..8].copy_from_slice(&count.to_be_bytes());
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        crate::durable_file::replace_durably(path, &out)?;
        Ok(())
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        let (body, crc) = bytes.split_at(bytes.len().checked_sub(4)?);
        if crc32c::crc32c(body).to_be_bytes() != crc {
            return None;
        }
        let mut r = Reader(body.strip_prefix(MAGIC)?);
        let count = r.u32()?;
        let mut logs = HashMap::new();
        for _ in 0..count {
            let name_len = r.u16()? as usize;
            let name = std::str::from_utf8(r.bytes(name_len)?).ok()?.to_string();
            let log_end_offset = r.i64()?;
            let log_start_offset = r.i64()?;
            let active_base_offset = r.i64()?;
            let active_size = r.i64()? as u64;
            let own_files_current = r.bytes(1)? != [0];
            let epochs = r.u32()?;
            let mut leader_epochs = Vec::new();
            for _ in 0..epochs {
                leader_epochs.push(EpochEntry {
                    epoch: r.u32()? as i32,
                    start_offset: r.i64()?,
                });
            }
            let state_len = r.u32()? as usize;
            let producer_state = ProducerStateManager::decode(r.bytes(state_len)?, log_end_offset)?;
            logs.insert(
                name,
                ClosedLog {
                    log_end_offset,
                    log_start_offset,
                    active_base_offset,
                    active_size,
                    own_files_current,
                    leader_epochs,
                    producer_state,
                },
            );
        }
        r.0.is_empty().then_some(Self { logs })
    }
}

/// A cursor over the record's bytes that returns `None` when they run out.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_be_bytes(self.bytes(2)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_be_bytes(self.bytes(4)?.try_into().ok()?))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_be_bytes(self.bytes(8)?.try_into().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn closed(end: i64) -> ClosedLog {
        ClosedLog {
            log_end_offset: end,
            log_start_offset: 1,
            active_base_offset: 2,
            active_size: 300,
            own_files_current: end % 2 == 0,
            leader_epochs: vec![EpochEntry {
                epoch: 4,
                start_offset: 2,
            }],
            producer_state: ProducerStateManager::default(),
        }
    }

    fn write(path: &Path, logs: &[(String, ClosedLog)]) {
        CleanShutdown::write(path, logs.iter().map(|(n, l)| (n.as_str(), l))).unwrap();
    }

    #[test]
    fn a_written_record_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("record");
        write(
            &path,
            &[
                ("a-0".to_string(), closed(3)),
                ("b-7".to_string(), closed(4)),
            ],
        );
        let read = CleanShutdown::read(&path).unwrap().unwrap();
        assert_eq!(read.logs.len(), 2);
        assert_eq!(read.logs["a-0"], closed(3));
        assert_eq!(read.logs["b-7"], closed(4));
        assert_eq!(CleanShutdown::read(&dir.path().join("none")).unwrap(), None);
    }

    #[test]
    fn a_torn_or_empty_record_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("record");
        write(&path, &[("a-0".to_string(), closed(3))]);
        let bytes = fs::read(&path).unwrap();
        for cut in [bytes.len() - 1, 9, 4, 0] {
            fs::write(&path, &bytes[..cut]).unwrap();
            let err = CleanShutdown::read(&path).unwrap_err();
            assert!(err.to_string().contains("record"), "{err}");
        }
    }
}
