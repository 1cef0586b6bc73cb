//! The partition checkpoint: the offsets a partition must remember across restarts that
//! are not implied by its segments.
//!
//! * `recovery.point` — every batch below it was fsynced; after an unclean shutdown only
//!   the segments at or above it are read and CRC-checked.
//! * `log.start.offset` — raised by DeleteRecords and retention; records below it are gone
//!   for clients even if their segment still exists.
//!
//! Kafka keeps these in per-log-dir files; strom keeps one small file per partition
//! (`partition.checkpoint`) so a partition directory is self-contained.
//!
//! The file holds two fixed-size slots, each a whole checkpoint with a sequence number
//! and a CRC32C, written alternately in place: a write replaces the older slot, so a torn
//! write leaves the newer one intact and the reader takes the valid slot with the higher
//! sequence — either the old checkpoint or the new one, as a write-and-rename would give.
//! Writing in place allocates no inode: a shutdown that checkpoints 13,300 partitions
//! through temporary files and renames spent most of its time in the file system's inode
//! allocator (ext4 without a journal checks every new inode against recent deletions).
//! The file is created (or converted from the text format of earlier versions) once,
//! by write, fsync and rename.

use std::fs;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::LogError;

const FILE_NAME: &str = "partition.checkpoint";
/// The first line of the text format earlier versions wrote, still read.
const TEXT_VERSION: &str = "0";
const MAGIC: &[u8; 4] = b"SCK1";
/// magic, sequence u64, recovery point i64, log start offset i64, CRC32C of the rest.
const SLOT_LEN: usize = 32;

/// Offsets persisted beside a partition's segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PartitionCheckpoint {
    pub recovery_point: i64,
    pub log_start_offset: i64,
}

/// Where the next checkpoint goes: its sequence number, and whether the file already has
/// the two slots (otherwise it is created whole).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CheckpointFile {
    sequence: u64,
    slotted: bool,
}

impl PartitionCheckpoint {
    /// Reads the checkpoint of the partition in `dir`; `None` if there is none.
    pub fn read(dir: &Path) -> Result<Option<Self>, LogError> {
        Ok(Self::read_with_file(dir)?.map(|(checkpoint, _)| checkpoint))
    }

    /// [`Self::read`], with what the next write needs to know about the file.
    pub fn read_with_file(dir: &Path) -> Result<Option<(Self, CheckpointFile)>, LogError> {
        let path = dir.join(FILE_NAME);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let corrupt = |reason: &str| LogError::CorruptFile {
            path: path.display().to_string(),
            reason: reason.to_string(),
        };
        if bytes.len() == 2 * SLOT_LEN && bytes.starts_with(MAGIC) {
            let newest = bytes
                .chunks_exact(SLOT_LEN)
                .filter_map(decode_slot)
                .max_by_key(|(sequence, _)| *sequence)
                .ok_or_else(|| corrupt("neither slot is valid"))?;
            let (sequence, checkpoint) = newest;
            return Ok(Some((
                checkpoint,
                CheckpointFile {
                    sequence,
                    slotted: true,
                },
            )));
        }
        let text = String::from_utf8(bytes).map_err(|_| corrupt("not a checkpoint"))?;
        let mut lines = text.lines();
        if lines.next() != Some(TEXT_VERSION) {
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
        Ok(Some((checkpoint, CheckpointFile::default())))
    }

    /// Replaces the checkpoint of the partition in `dir`; with `sync` false the caller
    /// makes it durable (one `syncfs` for every partition of a log dir at shutdown).
    pub fn write(&self, dir: &Path, file: &mut CheckpointFile, sync: bool) -> Result<(), LogError> {
        let sequence = file.sequence + 1;
        let slot = encode_slot(sequence, self);
        let path = dir.join(FILE_NAME);
        if file.slotted {
            let handle = fs::OpenOptions::new().write(true).open(&path)?;
            handle.write_all_at(&slot, (sequence % 2) * SLOT_LEN as u64)?;
            if sync {
                handle.sync_data()?;
            }
        } else {
            let tmp = dir.join(format!("{FILE_NAME}.tmp"));
            let mut handle = fs::File::create(&tmp)?;
            handle.write_all(&slot)?;
            handle.write_all(&slot)?;
            if sync {
                handle.sync_all()?;
            }
            fs::rename(&tmp, &path)?;
        }
        *file = CheckpointFile {
            sequence,
            slotted: true,
        };
        Ok(())
    }
}

fn encode_slot(sequence: u64, checkpoint: &PartitionCheckpoint) -> [u8; SLOT_LEN] {
    let mut slot = [0u8; SLOT_LEN];
    slot[..4].copy_from_slice(MAGIC);
    slot[4..12].copy_from_slice(&sequence.to_be_bytes());
    slot[12..20].copy_from_slice(&checkpoint.recovery_point.to_be_bytes());
    slot[20..28].copy_from_slice(&checkpoint.log_start_offset.to_be_bytes());
    let crc = crc32c::crc32c(&slot[..28]);
    slot[28..].copy_from_slice(&crc.to_be_bytes());
    slot
}

/// A slot's sequence and checkpoint, or `None` if it is torn or was never written.
fn decode_slot(slot: &[u8]) -> Option<(u64, PartitionCheckpoint)> {
    if slot.len() != SLOT_LEN || &slot[..4] != MAGIC {
        return None;
    }
    let crc = u32::from_be_bytes(slot[28..32].try_into().expect("4 bytes"));
    if crc32c::crc32c(&slot[..28]) != crc {
        return None;
    }
    let i64_at = |at: usize| i64::from_be_bytes(slot[at..at + 8].try_into().expect("8 bytes"));
    Some((
        u64::from_be_bytes(slot[4..12].try_into().expect("8 bytes")),
        PartitionCheckpoint {
            recovery_point: i64_at(12),
            log_start_offset: i64_at(20),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(recovery_point: i64, log_start_offset: i64) -> PartitionCheckpoint {
        PartitionCheckpoint {
            recovery_point,
            log_start_offset,
        }
    }

    #[test]
    fn writes_alternate_slots_and_the_newest_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = CheckpointFile::default();
        for i in 1..=5 {
            at(i * 10, i).write(dir.path(), &mut file, false).unwrap();
            let (read, read_file) = PartitionCheckpoint::read_with_file(dir.path())
                .unwrap()
                .unwrap();
            assert_eq!(read, at(i * 10, i));
            assert_eq!(read_file, file);
        }
        assert_eq!(fs::metadata(dir.path().join(FILE_NAME)).unwrap().len(), 64);
    }

    #[test]
    fn a_torn_slot_leaves_the_previous_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = CheckpointFile::default();
        at(10, 0).write(dir.path(), &mut file, false).unwrap();
        at(20, 5).write(dir.path(), &mut file, false).unwrap();
        // Tear the newest slot (sequence 2, slot 0).
        let path = dir.path().join(FILE_NAME);
        let mut bytes = fs::read(&path).unwrap();
        bytes[15] ^= 0xff;
        fs::write(&path, &bytes).unwrap();
        assert_eq!(
            PartitionCheckpoint::read(dir.path()).unwrap(),
            Some(at(10, 0))
        );
        // Both torn: a corrupt file, never a silent default.
        bytes[SLOT_LEN + 15] ^= 0xff;
        fs::write(&path, &bytes).unwrap();
        assert!(PartitionCheckpoint::read(dir.path()).is_err());
    }

    #[test]
    fn the_text_format_of_earlier_versions_is_read_and_converted_on_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        fs::write(&path, "0\nrecovery.point 42\nlog.start.offset 7\n").unwrap();
        let (read, mut file) = PartitionCheckpoint::read_with_file(dir.path())
            .unwrap()
            .unwrap();
        assert_eq!(read, at(42, 7));
        at(50, 7).write(dir.path(), &mut file, false).unwrap();
        assert_eq!(
            PartitionCheckpoint::read(dir.path()).unwrap(),
            Some(at(50, 7))
        );
        assert_eq!(fs::metadata(&path).unwrap().len(), 64);
    }
}
