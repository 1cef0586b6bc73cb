//! The clean-shutdown record: one file per log dir, written last by a clean shutdown,
//! that holds for every log the shutdown closed its log end offset and producer state.
//!
//! A close used to write two small files per partition (`partition.checkpoint` and a
//! producer snapshot) and make them durable with a second `syncfs`: at 13,300 partitions
//! that was half of the shutdown. The record replaces both with one sequential write.
//! Its presence still means what the empty marker of earlier versions meant — every log
//! was closed and its data made durable — and a log named in it is opened from it: its
//! end is known without reading the segment and its producer state without reading a
//! snapshot or replaying batches.
//!
//! The partition's own checkpoint and snapshots are left as they were. They stay true
//! (an older recovery point and an older snapshot only mean more to check or replay after
//! a crash), so the record is needed only by the start that follows the shutdown, which
//! removes it before anything is written. An empty file is the marker of an earlier
//! version: clean, with nothing recorded.
//!
//! Layout: magic `SCS1`, entry count (u32), then per log the partition directory's name
//! (u16 length and UTF-8 bytes), the log end offset (i64) and the producer state
//! (u32 length and the bytes of a producer snapshot), then a CRC32C of everything before
//! it. A torn record fails its CRC and the start recovers as after a crash.

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::path::Path;

use crate::{LogError, ProducerStateManager};

const MAGIC: &[u8; 4] = b"SCS1";

/// What a clean shutdown knows of a log it closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClosedLog {
    /// Every batch below it was made durable before the record was written.
    pub log_end_offset: i64,
    /// The producer state at `log_end_offset`.
    pub producer_state: ProducerStateManager,
}

/// The logs a clean shutdown closed, by partition directory name.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CleanShutdown {
    pub logs: HashMap<String, ClosedLog>,
}

impl CleanShutdown {
    /// Reads the record at `path`: `None` if there is none (the last shutdown was not
    /// clean), an error naming the file if it is torn or not a record.
    pub fn read(path: &Path) -> Result<Option<Self>, LogError> {
        let bytes = match fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        if bytes.is_empty() {
            return Ok(Some(Self::default()));
        }
        Self::decode(&bytes)
            .map(Some)
            .ok_or_else(|| LogError::CorruptFile {
                path: path.display().to_string(),
                reason: "not a whole clean-shutdown record".to_string(),
            })
    }

    /// Writes the record for `logs` to `path` and makes it durable (the file and its
    /// directory entry). The caller has made the logs' data durable first.
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
            out.extend_from_slice(&log.log_end_offset.to_be_bytes());
            let state = log.producer_state.encode();
            out.extend_from_slice(&(state.len() as u32).to_be_bytes());
            out.extend_from_slice(&state);
            count += 1;
        }
        out[4..8].copy_from_slice(&count.to_be_bytes());
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        let mut file = fs::File::create(path)?;
        file.write_all(&out)?;
        file.sync_all()?;
        if let Some(dir) = path.parent() {
            fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        let (body, crc) = bytes.split_at(bytes.len().checked_sub(4)?);
        if crc32c::crc32c(body).to_be_bytes() != crc {
            return None;
        }
        let mut rest = body.strip_prefix(MAGIC)?;
        let mut take = |n: usize| -> Option<&[u8]> {
            let (head, tail) = rest.split_at_checked(n)?;
            rest = tail;
            Some(head)
        };
        let count = u32::from_be_bytes(take(4)?.try_into().ok()?);
        let mut logs = HashMap::new();
        for _ in 0..count {
            let name_len = u16::from_be_bytes(take(2)?.try_into().ok()?) as usize;
            let name = std::str::from_utf8(take(name_len)?).ok()?.to_string();
            let log_end_offset = i64::from_be_bytes(take(8)?.try_into().ok()?);
            let state_len = u32::from_be_bytes(take(4)?.try_into().ok()?) as usize;
            let producer_state = ProducerStateManager::decode(take(state_len)?)?;
            logs.insert(
                name,
                ClosedLog {
                    log_end_offset,
                    producer_state,
                },
            );
        }
        (take(1).is_none()).then_some(Self { logs })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn closed(end: i64) -> ClosedLog {
        ClosedLog {
            log_end_offset: end,
            producer_state: ProducerStateManager::default(),
        }
    }

    #[test]
    fn a_written_record_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("record");
        let logs = [
            ("a-0".to_string(), closed(3)),
            ("b-7".to_string(), closed(0)),
        ];
        CleanShutdown::write(&path, logs.iter().map(|(n, l)| (n.as_str(), l))).unwrap();
        let read = CleanShutdown::read(&path).unwrap().unwrap();
        assert_eq!(read.logs.len(), 2);
        assert_eq!(read.logs["a-0"], closed(3));
        assert_eq!(read.logs["b-7"], closed(0));
    }

    #[test]
    fn an_empty_file_is_a_clean_shutdown_with_nothing_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("record");
        fs::write(&path, b"").unwrap();
        assert_eq!(
            CleanShutdown::read(&path).unwrap(),
            Some(CleanShutdown::default())
        );
        assert_eq!(CleanShutdown::read(&dir.path().join("none")).unwrap(), None);
    }

    #[test]
    fn a_torn_record_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("record");
        let logs = [("a-0".to_string(), closed(3))];
        CleanShutdown::write(&path, logs.iter().map(|(n, l)| (n.as_str(), l))).unwrap();
        let bytes = fs::read(&path).unwrap();
        for cut in [bytes.len() - 1, 9, 4] {
            fs::write(&path, &bytes[..cut]).unwrap();
            let err = CleanShutdown::read(&path).unwrap_err();
            assert!(err.to_string().contains("record"), "{err}");
        }
    }
}
