//! Kafka's offset checkpoint files (`OffsetCheckpointFile`): one offset per partition of a
//! log dir, as a version line `0`, the entry count, then `topic partition offset` per
//! line. `replication-offset-checkpoint` (high watermarks) and `cleaner-offset-checkpoint`
//! (where each compacted log's dirty section starts) are kept in it.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::Path;

/// Offsets by (topic, partition).
pub type PartitionOffsets = BTreeMap<(String, i32), i64>;

/// Reads the checkpoint at `path`; a missing file is empty, a corrupt one is reported
/// (naming `what` it holds) and read as empty: every user of these files falls back to
/// a safe start without them.
pub fn read(path: &Path, what: &str) -> PartitionOffsets {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return PartitionOffsets::new(),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read the {what} checkpoint");
            return PartitionOffsets::new();
        }
    };
    parse(&text).unwrap_or_else(|| {
        tracing::warn!(path = %path.display(), "corrupt {what} checkpoint ignored");
        PartitionOffsets::new()
    })
}

fn parse(text: &str) -> Option<PartitionOffsets> {
    let mut lines = text.lines();
    if lines.next()? != "0" {
        return None;
    }
    let count: usize = lines.next()?.parse().ok()?;
    let mut offsets = PartitionOffsets::new();
    for line in lines {
        let mut parts = line.rsplitn(3, ' ');
        let offset: i64 = parts.next()?.parse().ok()?;
        let partition: i32 = parts.next()?.parse().ok()?;
        let topic = parts.next()?;
        offsets.insert((topic.to_string(), partition), offset);
    }
    (offsets.len() == count).then_some(offsets)
}

/// Replaces the checkpoint at `path` atomically (see [`crate::durable_file`]).
pub fn write(path: &Path, offsets: &PartitionOffsets) -> io::Result<()> {
    let mut text = format!("0\n{}\n", offsets.len());
    for ((topic, partition), offset) in offsets {
        text.push_str(&format!("{topic} {partition} {offset}\n"));
    }
    crate::durable_file::replace_atomically(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_in_kafkas_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cleaner-offset-checkpoint");
        let mut offsets = PartitionOffsets::new();
        offsets.insert(("orders".into(), 0), 42);
        offsets.insert(("dots.and-dashes_x".into(), 11), 7);
        write(&path, &offsets).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with("0\n2\n") && text.contains("\norders 0 42\n"),
            "{text}"
        );
        assert_eq!(read(&path, "test"), offsets);
    }

    #[test]
    fn a_missing_or_corrupt_file_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("replication-offset-checkpoint");
        assert!(read(&path, "test").is_empty());
        fs::write(&path, "0\n3\norders 0 1\n").unwrap();
        assert!(read(&path, "test").is_empty());
    }
}
