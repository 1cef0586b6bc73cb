//! `replication-offset-checkpoint`: the high watermark of every partition of a log dir,
//! in Kafka's format (a version line `0`, the entry count, then `topic partition offset`
//! per line), written every `replica.high.watermark.checkpoint.interval.ms` and at
//! shutdown. A restarted broker starts each partition from it rather than from its log
//! end, so records that were never committed are not shown to consumers.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::partition::Partition;

pub const FILE_NAME: &str = "replication-offset-checkpoint";

/// High watermarks by (topic, partition).
pub type HighWatermarks = BTreeMap<(String, i32), i64>;

/// Reads the checkpoint of log dir `dir`; a missing file is empty, a corrupt one is
/// reported and ignored (partitions then start from their log start, which is safe).
pub fn read(dir: &Path) -> HighWatermarks {
    let path = dir.join(FILE_NAME);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return HighWatermarks::new(),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read the high-watermark checkpoint");
            return HighWatermarks::new();
        }
    };
    match parse(&text) {
        Some(hws) => hws,
        None => {
            tracing::warn!(path = %path.display(), "corrupt high-watermark checkpoint ignored");
            HighWatermarks::new()
        }
    }
}

fn parse(text: &str) -> Option<HighWatermarks> {
    let mut lines = text.lines();
    if lines.next()? != "0" {
        return None;
    }
    let count: usize = lines.next()?.parse().ok()?;
    let mut hws = HighWatermarks::new();
    for line in lines {
        let mut parts = line.rsplitn(3, ' ');
        let offset: i64 = parts.next()?.parse().ok()?;
        let partition: i32 = parts.next()?.parse().ok()?;
        let topic = parts.next()?;
        hws.insert((topic.to_string(), partition), offset);
    }
    (hws.len() == count).then_some(hws)
}

/// Replaces the checkpoint of log dir `dir` atomically.
pub fn write(dir: &Path, hws: &HighWatermarks) -> std::io::Result<()> {
    let mut text = format!("0\n{}\n", hws.len());
    for ((topic, partition), offset) in hws {
        text.push_str(&format!("{topic} {partition} {offset}\n"));
    }
    strom_log::durable_file::replace_atomically(&dir.join(FILE_NAME), text.as_bytes())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_in_kafkas_format() {
        let dir = tempfile::tempdir().unwrap();
        let mut hws = HighWatermarks::new();
        hws.insert(("orders".into(), 0), 42);
        hws.insert(("dots.and-dashes_x".into(), 11), 7);
        write(dir.path(), &hws).unwrap();
        let text = fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        assert!(
            text.starts_with("0\n2\n") && text.contains("\norders 0 42\n"),
            "{text}"
        );
        assert_eq!(read(dir.path()), hws);
    }

    #[test]
    fn a_missing_or_corrupt_file_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(dir.path()).is_empty());
        fs::write(dir.path().join(FILE_NAME), "0\n3\norders 0 1\n").unwrap();
        assert!(read(dir.path()).is_empty());
    }
}
