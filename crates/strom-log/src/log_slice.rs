//! A range of whole batches in one segment file, as a fetch returns them.
//!
//! The broker hands a consumer's or a follower's fetch the batches as they lie in the log,
//! so it need not read them at all: the connection sends the range from the file to the
//! socket with `sendfile`, as Kafka's `FileRecords.writeTo` uses `transferTo`. In-process
//! readers (tests, the group coordinator loading its offsets) read it into memory instead.
//!
//! The slice holds the segment's file open, so a segment deleted meanwhile (retention, a
//! deleted topic) still reads as it was. A file truncated meanwhile (a leader that became
//! a follower and cut its log) reads short, which [`LogSlice::read`] reports as an error
//! and the connection's writer answers by closing the connection, as Kafka does.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;

use crate::LogError;

/// `len` bytes of whole batches at `position` of a segment file; empty when no batch was
/// read.
#[derive(Debug, Clone, Default)]
pub struct LogSlice {
    file: Option<Arc<File>>,
    position: u64,
    len: usize,
}

impl LogSlice {
    pub(crate) fn new(file: Arc<File>, position: u64, len: usize) -> Self {
        Self {
            file: (len > 0).then_some(file),
            position,
            len,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The segment file and the position of the first byte, unless empty.
    pub fn file(&self) -> Option<(&Arc<File>, u64)> {
        self.file.as_ref().map(|f| (f, self.position))
    }

    /// Reads the batches into memory (an error if the file was truncated since).
    pub fn read(&self) -> Result<Bytes, LogError> {
        let Some(file) = &self.file else {
            return Ok(Bytes::new());
        };
        let mut buf = vec![0u8; self.len];
        file.read_exact_at(&mut buf, self.position)?;
        Ok(Bytes::from(buf))
    }
}
