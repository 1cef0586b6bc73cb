//! Partition logs on disk, laid out as Kafka lays them out: one directory per partition,
//! holding segments (`<base offset>.log`) with a sparse offset index (`.index`), a time
//! index (`.timeindex`), producer-state snapshots (`.snapshot`) and the leader epoch cache
//! (`leader-epoch-checkpoint`). Compacted logs are cleaned by [`cleaner`].
//!
//! The log stores record batches exactly as producers sent them, with only the base offset
//! and partition leader epoch rewritten; it knows nothing of sockets or of the broker.
//! See `docs/storage.md` for the on-disk format.

pub mod checkpoint;
pub mod clean_shutdown;
pub mod cleaner;
pub mod config;
pub mod durable_file;
pub mod error;
pub mod file_cache;
pub mod index_file;
pub mod leader_epoch_cache;
pub mod log_slice;
pub mod offset_checkpoint;
pub mod offset_index;
pub mod partition_log;
pub mod producer_state;
pub mod segment;
pub mod time_index;
pub mod validator;

pub use clean_shutdown::{CleanShutdown, ClosedLog};
pub use config::LogConfig;
pub use error::LogError;
pub use file_cache::FileCache;
pub use leader_epoch_cache::{EpochEntry, LeaderEpochCache};
pub use log_slice::LogSlice;
pub use partition_log::{AppendInfo, FetchData, PartitionLog};
pub use producer_state::{ProducerStateError, ProducerStateManager};

/// Kafka's file name for anything keyed by an offset: 20 zero-padded digits.
pub fn offset_file_name(offset: i64, extension: &str) -> String {
    format!("{offset:020}.{extension}")
}
