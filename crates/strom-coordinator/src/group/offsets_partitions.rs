//! On a cluster broker, the partitions of `__consumer_offsets` this broker leads: the
//! groups it coordinates, whether their offsets are loaded yet, and where their changes
//! are appended.
//!
//! A broker that becomes a partition's leader replays it from its log start before it
//! serves the partition's groups (COORDINATOR_LOAD_IN_PROGRESS meanwhile, as in Kafka);
//! a broker that stops leading it forgets them at once (NOT_COORDINATOR), and their
//! members rejoin the new leader. A change is appended to the partition with acks=all
//! and answered once the partition's high watermark passes it, so an acknowledged commit
//! survives as the partition's acknowledged records do.

use std::collections::hash_map::{Entry, HashMap};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;
use tokio::time::Instant;

use super::offset_store::Change;
use super::offsets_topic::{self, partition_for};
use strom_replica::partition::{Partition, PendingCommit};
use strom_wire::ApiError;

/// A partition this broker leads, in the leader epoch it was taken up in.
#[derive(Debug)]
struct Led {
    partition: Arc<Partition>,
    leader_epoch: i32,
    /// When its groups were loaded; `None` while loading.
    loaded: Option<Instant>,
}

impl Led {
    /// Whether this is `partition` led in `leader_epoch`.
    fn is(&self, partition: &Arc<Partition>, leader_epoch: i32) -> bool {
        Arc::ptr_eq(&self.partition, partition) && self.leader_epoch == leader_epoch
    }
}

/// The led partitions of `__consumer_offsets`.
#[derive(Debug, Default)]
pub struct OffsetsPartitions {
    /// The topic's partition count; 0 until the topic exists.
    count: i32,
    led: HashMap<i32, Led>,
}

/// A change appended to `__consumer_offsets`, not yet known to be replicated; `None` when
/// nothing was appended.
#[derive(Debug)]
#[must_use = "a commit is acknowledged only once it is replicated"]
pub struct PendingWrite(Option<(Arc<Partition>, PendingCommit)>);

impl PendingWrite {
    pub const DONE: Self = Self(None);

    /// Waits until the change is replicated as the partition's acks=all produce would be.
    pub async fn replicated(self, timeout: Duration) -> Result<(), ResponseError> {
        match self.0 {
            None => Ok(()),
            Some((partition, commit)) => partition
                .wait_for_commit(&commit, timeout)
                .await
                .map_err(coordinator_error),
        }
    }
}

/// The error a group client gets for a failed append, as Kafka maps them: the
/// coordinator is busy or moving, never a partition-level error the client would not
/// expect from its coordinator.
fn coordinator_error(e: ApiError) -> ResponseError {
    match e.code {
        ResponseError::UnknownTopicOrPartition
        | ResponseError::NotEnoughReplicas
        | ResponseError::NotEnoughReplicasAfterAppend
        | ResponseError::RequestTimedOut => ResponseError::CoordinatorNotAvailable,
        ResponseError::NotLeaderOrFollower | ResponseError::KafkaStorageError => {
            ResponseError::NotCoordinator
        }
        ResponseError::MessageTooLarge
        | ResponseError::RecordListTooLarge
        | ResponseError::InvalidFetchSize => ResponseError::InvalidCommitOffsetSize,
        other => other,
    }
}

impl OffsetsPartitions {
    /// The partition holding `group`, if this broker coordinates it and has loaded it.
    pub fn owner(&self, group: &str) -> Result<&Arc<Partition>, ResponseError> {
        match self.index_of(group).and_then(|i| self.led.get(&i)) {
            Some(led) if led.loaded.is_some() => Ok(&led.partition),
            Some(_) => Err(ResponseError::CoordinatorLoadInProgress),
            None => Err(ResponseError::NotCoordinator),
        }
    }

    /// The led partitions whose groups are loaded.
    pub fn loaded_partitions(&self) -> impl Iterator<Item = (i32, &Arc<Partition>)> {
        self.led
            .iter()
            .filter(|(_, led)| led.loaded.is_some())
            .map(|(i, led)| (*i, &led.partition))
    }

    /// When the partition holding `group` was loaded, if it is.
    pub fn loaded_at(&self, group: &str) -> Option<Instant> {
        self.led.get(&self.index_of(group)?)?.loaded
    }

    /// The partition `group` lives in; `None` until the topic exists.
    pub fn index_of(&self, group: &str) -> Option<i32> {
        (self.count > 0).then(|| partition_for(group, self.count))
    }

    /// Whether `group` lives in partition `index`.
    pub fn holds(&self, index: i32, group: &str) -> bool {
        self.index_of(group) == Some(index)
    }

    /// Takes up the partitions led now (`count` in all): returns the indexes no longer
    /// led, whose groups must be forgotten, and the partitions newly led (or led in a new
    /// epoch), which must be loaded.
    pub fn lead(
        &mut self,
        count: i32,
        now_led: Vec<(i32, Arc<Partition>)>,
    ) -> (Vec<i32>, Vec<(i32, Arc<Partition>)>) {
        self.count = count;
        let now_led: HashMap<i32, Arc<Partition>> = now_led.into_iter().collect();
        let gone: Vec<i32> = self
            .led
            .iter()
            .filter(|(i, led)| !now_led.get(i).is_some_and(|p| led.is(p, p.leader_epoch())))
            .map(|(i, _)| *i)
            .collect();
        for i in &gone {
            self.led.remove(i);
        }
        let mut load = Vec::new();
        for (i, partition) in now_led {
            if let Entry::Vacant(entry) = self.led.entry(i) {
                entry.insert(Led {
                    partition: partition.clone(),
                    leader_epoch: partition.leader_epoch(),
                    loaded: None,
                });
                load.push((i, partition));
            }
        }
        (gone, load)
    }

    /// Marks partition `index` loaded if it is still led as it was when its load began.
    pub fn loaded(&mut self, index: i32, partition: &Arc<Partition>, leader_epoch: i32) -> bool {
        match self.led.get_mut(&index) {
            Some(led) if led.is(partition, leader_epoch) => {
                led.loaded = Some(Instant::now());
                true
            }
            _ => false,
        }
    }
}

/// Appends `changes` to `partition` with acks=all; the append is in the log (and so in
/// the order the store applies changes) when this returns.
pub fn append(
    partition: &Arc<Partition>,
    changes: &[Change],
) -> Result<PendingWrite, ResponseError> {
    if changes.is_empty() {
        return Ok(PendingWrite::DONE);
    }
    append_batch(partition, changes).map(|(_, write)| write)
}

/// Appends `changes` (at least one) as one batch with acks=all: its base offset and the
/// write to wait for.
fn append_batch(
    partition: &Arc<Partition>,
    changes: &[Change],
) -> Result<(i64, PendingWrite), ResponseError> {
    let batch = offsets_topic::encode(changes, strom_wire::now_ms());
    let (info, commit) = partition
        .append_as_leader(&batch, -1)
        .map_err(coordinator_error)?;
    Ok((
        info.base_offset,
        PendingWrite(Some((partition.clone(), commit))),
    ))
}

/// Every change in `partition`'s log, from its start to its end, for a new leader.
pub fn read_all(partition: &Partition) -> Result<Vec<Change>, String> {
    const CHUNK: usize = 1 << 20;
    let end = partition
        .with_log(|log| log.log_end_offset())
        .map_err(|e| e.to_string())?;
    let mut offset = partition
        .with_log(|log| log.log_start_offset())
        .map_err(|e| e.to_string())?;
    let mut changes = Vec::new();
    while offset < end {
        let bytes = partition
            .with_log(|log| log.read(offset, CHUNK, true))
            .and_then(|read| read)
            .map_err(|e| e.to_string())?
            .records;
        if bytes.is_empty() {
            break;
        }
        let (read, next) = offsets_topic::decode(bytes)?;
        changes.extend(read);
        if next <= offset {
            return Err(format!("the log did not advance past offset {offset}"));
        }
        offset = next;
    }
    Ok(changes)
}
