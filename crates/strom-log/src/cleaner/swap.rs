//! Swapping cleaned segments into a log so that a crash at any moment leaves either the
//! old segments or the cleaned one, never a mix and never neither (Kafka's
//! `replaceSegments` and the `.cleaned`/`.swap` handling of its `LogLoader`).
//!
//! A cleaned segment is written and fsynced with `.cleaned` files; its indexes then its
//! `.log` are renamed `.swap` and the directory fsynced — the commit point; the old
//! segments are deleted; its files are renamed to their final names and the directory
//! fsynced again. At open, [`complete_interrupted`] finishes what a crash left:
//!
//! - `.cleaned` files are an unfinished cleaning: deleted;
//! - a `<base>.log.swap` is a committed swap: the segments it replaces (those based in
//!   `[base, its next offset)`) are deleted and its files renamed into place;
//! - a `.index.swap` or `.timeindex.swap` without its `.log.swap` is an index renamed
//!   before the crash stopped the commit: deleted (the `.log` then still carries
//!   `.cleaned`, also deleted).

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::Path;

use strom_wire::{RecordBatchHeader, BATCH_HEADER_LEN};

use crate::segment::{Segment, CLEANED_SUFFIX, SEGMENT_EXTENSIONS, SWAP_SUFFIX};
use crate::{offset_file_name, LogError};

/// Finishes or undoes the swaps a crash interrupted in the partition directory `dir`.
/// Returns whether it found any.
pub fn complete_interrupted(dir: &Path) -> Result<bool, LogError> {
    let mut cleaned = Vec::new();
    let mut swapped_logs = BTreeSet::new();
    let mut swapped_indexes = Vec::new();
    let mut segment_bases = BTreeSet::new();
    let listing = match fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        listing => listing?,
    };
    for entry in listing {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let Some((stem, rest)) = name.split_once('.') else {
            continue;
        };
        let Ok(base) = stem.parse::<i64>() else {
            continue;
        };
        if rest.ends_with(CLEANED_SUFFIX) {
            cleaned.push(name);
        } else if rest == format!("log{SWAP_SUFFIX}") {
            swapped_logs.insert(base);
        } else if rest.ends_with(SWAP_SUFFIX) {
            swapped_indexes.push((base, name));
        } else if rest == "log" {
            segment_bases.insert(base);
        }
    }
    if cleaned.is_empty() && swapped_logs.is_empty() && swapped_indexes.is_empty() {
        return Ok(false);
    }
    for name in &cleaned {
        remove_if_present(&dir.join(name))?;
    }
    for (base, name) in &swapped_indexes {
        if !swapped_logs.contains(base) {
            remove_if_present(&dir.join(name))?;
        }
    }
    for &base in &swapped_logs {
        let swap = dir.join(offset_file_name(base, "log") + SWAP_SUFFIX);
        let next = next_offset_of(&swap)?;
        for &old in segment_bases.range(base..next.max(base + 1)) {
            Segment::delete_files(dir, old)?;
        }
        for extension in SEGMENT_EXTENSIONS.iter().rev() {
            let from = dir.join(offset_file_name(base, extension) + SWAP_SUFFIX);
            if from.exists() {
                fs::rename(&from, dir.join(offset_file_name(base, extension)))?;
            }
        }
        tracing::warn!(dir = %dir.display(), base, next_offset = next, "completed a cleaned segment's swap a crash interrupted");
    }
    File::open(dir)?.sync_all()?;
    if !cleaned.is_empty() {
        tracing::warn!(dir = %dir.display(), files = cleaned.len(), "deleted the files of a cleaning a crash interrupted");
    }
    Ok(true)
}

/// The offset after the last whole batch of the segment file at `path`.
fn next_offset_of(path: &Path) -> Result<i64, LogError> {
    let file = File::open(path)?;
    let size = file.metadata()?.len();
    let mut position = 0u64;
    let mut next = 0i64;
    let mut header = [0u8; BATCH_HEADER_LEN];
    while position + BATCH_HEADER_LEN as u64 <= size {
        file.read_exact_at(&mut header, position)?;
        let Ok(parsed) = RecordBatchHeader::parse(&header) else {
            break;
        };
        next = parsed.next_offset();
        position += parsed.total_len() as u64;
    }
    Ok(next)
}

fn remove_if_present(path: &Path) -> Result<(), LogError> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
        _ => Ok(()),
    }
}
