//! Allocation of producer ids for InitProducerId.
//!
//! Ids must never be reused, or a new producer would inherit an old one's sequence state.
//! Like Kafka's controller, the broker reserves ids in blocks and persists the end of the
//! current block before handing any of it out, so a crash skips at most a block.

use std::fs;
use std::path::PathBuf;

use parking_lot::Mutex;

use crate::BrokerError;

const BLOCK_SIZE: i64 = 1000;

/// Hands out unique producer ids.
#[derive(Debug)]
pub struct ProducerIdManager {
    path: PathBuf,
    /// (next id to hand out, end of the persisted block)
    state: Mutex<(i64, i64)>,
}

impl ProducerIdManager {
    /// Loads the manager from `<metadata dir>/producer-id-block`.
    pub fn open(metadata_dir: PathBuf) -> Result<Self, BrokerError> {
        fs::create_dir_all(&metadata_dir)?;
        let path = metadata_dir.join("producer-id-block");
        let next = match fs::read_to_string(&path) {
            Ok(text) => text
                .trim()
                .parse()
                .map_err(|_| BrokerError::Corrupt(format!("{}: not a number", path.display())))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e.into()),
        };
        Ok(Self {
            path,
            state: Mutex::new((next, next)),
        })
    }

    /// The next unused producer id.
    pub fn next_id(&self) -> Result<i64, BrokerError> {
        let mut state = self.state.lock();
        if state.0 >= state.1 {
            let end = state.0 + BLOCK_SIZE;
            let tmp = self.path.with_extension("tmp");
            fs::write(&tmp, end.to_string())?;
            fs::File::open(&tmp)?.sync_all()?;
            fs::rename(&tmp, &self.path)?;
            state.1 = end;
        }
        let id = state.0;
        state.0 += 1;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let first = ProducerIdManager::open(dir.path().to_path_buf()).unwrap();
        let a = first.next_id().unwrap();
        let b = first.next_id().unwrap();
        assert_ne!(a, b);
        drop(first);
        let second = ProducerIdManager::open(dir.path().to_path_buf()).unwrap();
        assert!(second.next_id().unwrap() > b);
    }
}
