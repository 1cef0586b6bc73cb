//! A partition hosted by this broker: its log behind a lock, its replication state, and
//! the requests waiting for it — fetches for it to grow, acks=all produces for its high
//! watermark to pass their records (Kafka's produce purgatory, woken by high-watermark
//! moves, never polled). A partition whose log could not be opened (a corrupt or
//! unreadable file) is offline: every request for it gets KAFKA_STORAGE_ERROR while the
//! broker's other partitions serve. On a cluster broker a storage error at run time takes
//! the replica offline too, until a restart: its heartbeat reports it and the controller
//! moves the leadership to a replica whose disk works, as Kafka does for a failed log dir.
//!
//! Locks are taken log first, then replication state, never the other way round, so an
//! append and a change of leadership are ordered.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
pub use strom_log::AppendInfo;
use strom_log::{LogError, LogSlice, PartitionLog};
use strom_metadata::BrokerId;
use strom_wire::records::first_record_at_or_after;
use tokio::sync::{watch, Notify};

use crate::partition_state::{Registration, ReplicaState, Role};
use crate::partition_watch::Waiter;
use strom_wire::ApiError;

/// What an acks=all produce waits on: the high watermark and whether this broker still
/// leads the partition in the epoch it appended in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitState {
    pub high_watermark: i64,
    /// The leader epoch while this broker leads, else -1.
    pub leader_epoch: i32,
    pub isr_len: usize,
    /// The smallest log start over the ISR (Kafka's low watermark), which a DeleteRecords
    /// waits for.
    pub low_watermark: i64,
}

/// What an acks=all produce waits for ([`Partition::wait_for_commit`]): the high
/// watermark passing `last_offset` while this broker leads in `leader_epoch` and the ISR
/// keeps `min_insync` members (the topic's `min.insync.replicas` at the append, at most
/// the partition's replica count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingCommit {
    pub last_offset: i64,
    pub leader_epoch: i32,
    pub min_insync: usize,
}

/// An ISR change the leader wants to propose (AlterPartition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrProposal {
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub new_isr: Vec<BrokerId>,
    /// Each member's broker epoch as its last fetch carried it (-1: not known).
    pub new_isr_epochs: Vec<i64>,
}

/// A follower's fetch of one partition as it was sent: the leader and epoch it followed
/// and where its log ended. The answer is applied only while all of it still holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchPosition {
    pub leader: BrokerId,
    pub leader_epoch: i32,
    /// This log's end: the offset fetched from.
    pub fetch_offset: i64,
    /// The epoch of this log's last batch (-1: none), for the leader's divergence check.
    pub last_fetched_epoch: i32,
    pub log_start_offset: i64,
}

/// What stands behind a partition: its open log, why it could not be opened, or nothing
/// yet while start-up is still opening it.
///
/// Nearly every partition is `Open`, and a partition already lives behind an `Arc`:
/// boxing the log would only add a pointer chase to every append and read.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
enum LogSlot {
    Open(Mutex<PartitionLog>),
    Offline(String),
    Loading,
}

/// Why a partition still being loaded has no log, as requests that reach it are told.
const LOADING: &str = "its log is still being opened at start-up";

/// One topic partition and its log.
#[derive(Debug)]
pub struct Partition {
    pub topic: String,
    pub index: i32,
    dir: PathBuf,
    log: LogSlot,
    /// The storage error that took this replica offline at run time.
    failure: OnceLock<String>,
    /// Woken when a storage error takes this replica offline: the broker's heartbeat,
    /// which reports it to the controller. `None` on a single node (one that formats
    /// itself): with no other broker to lead, a storage error (a full disk) is answered
    /// KAFKA_STORAGE_ERROR and the next request tries the disk again.
    report_failure: Option<Arc<Notify>>,
    /// Leader or follower, epochs, ISR and followers' positions.
    replica: Mutex<ReplicaState>,
    /// The offset below which records are committed: consumers read up to it.
    high_watermark: AtomicI64,
    /// The last low watermark computed, published with the commit state.
    low_watermark: AtomicI64,
    commits: watch::Sender<CommitState>,
    /// What to wake at the next change: long-polling fetches, and the watches of fetch
    /// sessions and fetchers (see [`crate::partition_watch`]). Weak, so a waiter that is
    /// gone costs nothing; dead entries are pruned on every registration, so the list is
    /// bounded by the waiters alive.
    waiters: Mutex<Vec<Weak<dyn Waiter>>>,
    /// Set when the topic is deleted, so fetches parked on it answer at once.
    deleted: AtomicBool,
}

impl Partition {
    /// A partition with `log`, neither leader nor follower until the metadata assigns a
    /// role; taken offline by a storage error, which wakes `report_failure` (`None` on a
    /// single node: see the field).
    pub fn new(
        topic: &str,
        index: i32,
        log: PartitionLog,
        report_failure: Option<Arc<Notify>>,
    ) -> Self {
        let end = log.log_end_offset();
        let start = log.log_start_offset();
        let state = ReplicaState::unassigned();
        Self {
            topic: topic.to_string(),
            index,
            dir: log.dir().to_path_buf(),
            log: LogSlot::Open(Mutex::new(log)),
            failure: OnceLock::new(),
            report_failure,
            commits: watch::Sender::new(CommitState {
                high_watermark: end,
                leader_epoch: state.leader_epoch,
                isr_len: state.isr.len(),
                low_watermark: start,
            }),
            replica: Mutex::new(state),
            high_watermark: AtomicI64::new(end),
            low_watermark: AtomicI64::new(start),
            waiters: Mutex::new(Vec::new()),
            deleted: AtomicBool::new(false),
        }
    }

    /// A partition whose log in `dir` could not be opened, for `reason`.
    pub fn offline(topic: &str, index: i32, dir: &Path, reason: String) -> Self {
        Self::without_log(topic, index, dir, LogSlot::Offline(reason))
    }

    /// A partition whose log in `dir` start-up has not opened yet: it stands in the topic
    /// until the opened one replaces it.
    pub fn loading(topic: &str, index: i32, dir: &Path) -> Self {
        Self::without_log(topic, index, dir, LogSlot::Loading)
    }

    fn without_log(topic: &str, index: i32, dir: &Path, log: LogSlot) -> Self {
        Self {
            topic: topic.to_string(),
            index,
            dir: dir.to_path_buf(),
            log,
            failure: OnceLock::new(),
            report_failure: None,
            replica: Mutex::new(ReplicaState::unassigned()),
            high_watermark: AtomicI64::new(-1),
            low_watermark: AtomicI64::new(-1),
            commits: watch::Sender::new(CommitState {
                high_watermark: -1,
                leader_epoch: -1,
                isr_len: 0,
                low_watermark: -1,
            }),
            waiters: Mutex::new(Vec::new()),
            deleted: AtomicBool::new(false),
        }
    }

    /// Why the partition is offline, if it is (one still being loaded is, for now).
    pub fn offline_reason(&self) -> Option<&str> {
        match &self.log {
            LogSlot::Open(_) => self.failure.get().map(String::as_str),
            LogSlot::Offline(reason) => Some(reason),
            LogSlot::Loading => Some(LOADING),
        }
    }

    /// Whether this is a stand-in for a log start-up has not opened yet.
    pub fn is_loading(&self) -> bool {
        matches!(self.log, LogSlot::Loading)
    }

    /// Takes this cluster replica offline after the storage error `error`: it stops
    /// leading and following, waiting produces and fetches answer now, and the broker's
    /// next heartbeat (at once) reports it so the controller moves the leadership.
    fn fail(&self, error: &LogError) {
        let Some(report) = &self.report_failure else {
            return;
        };
        if self.failure.set(error.to_string()).is_err() {
            return;
        }
        tracing::error!(
            partition = %self.name(),
            dir = %self.dir.display(),
            %error,
            "storage error: this replica is offline until the broker restarts (clients get KAFKA_STORAGE_ERROR); the controller moves its leadership, the broker's other partitions serve"
        );
        let mut replica = self.replica.lock();
        replica.role = Role::Follower {
            leader: BrokerId::NONE,
        };
        self.publish_commit_state(&replica);
        drop(replica);
        self.wake_waiters();
        report.notify_one();
    }

    /// `topic-index`, as Kafka names a partition in its logs.
    pub fn name(&self) -> String {
        format!("{}-{}", self.topic, self.index)
    }

    /// The partition's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends a producer's record set as the leader and wakes waiting fetches. With
    /// acks=all (`required_acks` -1) an ISR smaller than `min.insync.replicas` (at most the
    /// replica count) refuses the append with NOT_ENOUGH_REPLICAS. Returns the append and what
    /// [`Self::wait_for_commit`] waits for.
    pub fn append_as_leader(
        &self,
        records: &[u8],
        required_acks: i16,
    ) -> Result<(AppendInfo, PendingCommit), ApiError> {
        let (info, commit, moved) = self.try_with_log(|log| {
            let (leader_epoch, isr_len, min_insync) = {
                let replica = self.replica.lock();
                if !replica.is_leader() {
                    return Ok(Err(self.not_leader()));
                }
                (
                    replica.leader_epoch,
                    replica.isr.len(),
                    replica.effective_min_insync(log.config().min_insync_replicas),
                )
            };
            if required_acks == -1 && isr_len < min_insync {
                return Ok(Err(ApiError::new(
                    ResponseError::NotEnoughReplicas,
                    format!(
                        "The size of the current ISR {isr_len} is insufficient to satisfy the min.isr requirement of {min_insync} for partition {}-{}",
                        self.topic, self.index
                    ),
                )));
            }
            let info = log.append(records, strom_wire::now_ms()).inspect_err(|e| {
                // A refused sequence makes librdkafka bump its producer epoch and send
                // every unacknowledged batch again: the line to read when a fault run
                // finds a batch twice. One per refused batch, and the client backs off.
                if let LogError::ProducerState(refused) = e {
                    tracing::info!(
                        partition = %self.name(),
                        leader_epoch,
                        log_end_offset = log.log_end_offset(),
                        %refused,
                        "produce refused"
                    );
                }
            })?;
            let moved =
                self.advance_high_watermark(&self.replica.lock(), log.log_end_offset(), min_insync);
            let commit = PendingCommit {
                last_offset: info.last_offset,
                leader_epoch,
                min_insync,
            };
            Ok(Ok((info, commit, moved)))
        })??;
        if info.record_count > 0 || moved {
            self.wake_waiters();
        }
        Ok((info, commit))
    }

    /// The purgatory of an acks=all produce: waits until the high watermark passes the
    /// append's last offset, answering NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank
    /// below `min.insync.replicas` meanwhile, NOT_LEADER_OR_FOLLOWER if this broker stopped
    /// leading in the append's epoch, and REQUEST_TIMED_OUT after `timeout`.
    pub async fn wait_for_commit(
        &self,
        commit: &PendingCommit,
        timeout: Duration,
    ) -> Result<(), ApiError> {
        let PendingCommit {
            last_offset,
            leader_epoch,
            min_insync,
        } = *commit;
        let mut commits = self.commits.subscribe();
        let done = |c: &CommitState| {
            c.leader_epoch != leader_epoch
                || c.high_watermark > last_offset
                || c.isr_len < min_insync
        };
        let state = match tokio::time::timeout(timeout, commits.wait_for(done)).await {
            Ok(Ok(state)) => *state,
            Ok(Err(_)) => return Err(self.not_leader()),
            Err(_) => {
                return Err(ApiError::new(
                    ResponseError::RequestTimedOut,
                    format!(
                        "The ISR of {}-{} did not replicate offset {last_offset} within {} ms",
                        self.topic,
                        self.index,
                        timeout.as_millis()
                    ),
                ))
            }
        };
        if state.leader_epoch != leader_epoch {
            Err(self.not_leader())
        } else if state.high_watermark > last_offset {
            Ok(())
        } else {
            Err(ApiError::new(
                ResponseError::NotEnoughReplicasAfterAppend,
                format!(
                    "The ISR of {}-{} shrank to {} below min.insync.replicas {min_insync} after the append",
                    self.topic, self.index, state.isr_len
                ),
            ))
        }
    }

    fn not_leader(&self) -> ApiError {
        ApiError::new(
            ResponseError::NotLeaderOrFollower,
            format!(
                "This broker is not the leader of {}-{}.",
                self.topic, self.index
            ),
        )
    }

    /// Moves the high watermark to what the ISR's log ends allow (`replica` is the locked
    /// replication state), never backwards, and publishes it to the purgatory. Returns
    /// whether it moved: the caller wakes the fetches once it has let go of the lock.
    fn advance_high_watermark(
        &self,
        replica: &ReplicaState,
        log_end_offset: i64,
        min_insync: usize,
    ) -> bool {
        if !replica.is_leader() {
            return false;
        }
        let Some(candidate) = replica.high_watermark_candidate(log_end_offset, min_insync) else {
            return false;
        };
        if candidate <= self.high_watermark.load(Ordering::Acquire) {
            return false;
        }
        assert!(
            candidate <= log_end_offset,
            "the high watermark {candidate} never passes the log end {log_end_offset}"
        );
        self.high_watermark.store(candidate, Ordering::Release);
        self.publish_commit_state(replica);
        true
    }

    fn publish_commit_state(&self, replica: &ReplicaState) {
        let state = CommitState {
            high_watermark: self.high_watermark.load(Ordering::Acquire),
            leader_epoch: if replica.is_leader() {
                replica.leader_epoch
            } else {
                -1
            },
            isr_len: replica.isr.len(),
            low_watermark: self.low_watermark.load(Ordering::Acquire),
        };
        self.commits.send_if_modified(|c| {
            let changed = *c != state;
            *c = state;
            changed
        });
    }

    /// Leads the partition in `registration`'s epoch (a new epoch starts at the log end;
    /// the high watermark stays where it was until the ISR's followers have fetched).
    ///
    /// `initial_high_watermark` is the checkpointed one, used when the partition is first
    /// assigned in this process (clamped to the log). Returns whether a new leader epoch
    /// started here (its followers have yet to fetch it from this broker).
    pub fn become_leader(
        &self,
        local: BrokerId,
        registration: Registration,
        initial_high_watermark: i64,
    ) -> Result<bool, LogError> {
        let (new_epoch, moved) = self.try_with_log(|log| {
            let mut replica = self.replica.lock();
            if replica.local != local {
                self.init_high_watermark(log, initial_high_watermark);
            }
            let new_epoch = replica.local != local
                || !replica.is_leader()
                || replica.leader_epoch != registration.leader_epoch;
            if !new_epoch {
                if registration.partition_epoch > replica.partition_epoch {
                    replica.apply_registration(registration);
                }
            } else {
                log.become_leader(registration.leader_epoch)?;
                // Kafka's state-change line: which log a leader starts each epoch from is
                // what a failover's outcome is read back from.
                tracing::info!(
                    partition = %self.name(),
                    leader_epoch = registration.leader_epoch,
                    partition_epoch = registration.partition_epoch,
                    log_end_offset = log.log_end_offset(),
                    high_watermark = self.high_watermark.load(Ordering::Acquire),
                    isr = ?registration.isr.iter().map(|b| b.0).collect::<Vec<_>>(),
                    "leader starts"
                );
                replica.local = local;
                replica.become_leader(registration, log.log_end_offset(), strom_wire::now_ms());
            }
            self.publish_commit_state(&replica);
            let moved = self.advance_high_watermark(
                &replica,
                log.log_end_offset(),
                log.config().min_insync_replicas,
            );
            Ok((new_epoch, moved))
        })?;
        if new_epoch || moved {
            self.wake_waiters();
        }
        Ok(new_epoch)
    }

    /// Follows `leader` in `registration`'s epoch. Returns whether the leader or epoch
    /// changed (the fetcher must then restart from this log's end).
    pub fn become_follower(
        &self,
        local: BrokerId,
        leader: BrokerId,
        registration: Registration,
        initial_high_watermark: i64,
    ) -> bool {
        let log = match &self.log {
            LogSlot::Open(log) => Some(log.lock()),
            _ => None,
        };
        let mut replica = self.replica.lock();
        if let (true, Some(log)) = (replica.local != local, &log) {
            self.init_high_watermark(log, initial_high_watermark);
        }
        let changed = replica.local != local
            || replica.role != (Role::Follower { leader })
            || replica.leader_epoch != registration.leader_epoch;
        if changed {
            tracing::info!(
                partition = %self.name(),
                leader = leader.0,
                leader_epoch = registration.leader_epoch,
                partition_epoch = registration.partition_epoch,
                // -1: the log is not open (offline, or still loading).
                log_end_offset = log.as_ref().map_or(-1, |l| l.log_end_offset()),
                high_watermark = self.high_watermark.load(Ordering::Acquire),
                "follower starts"
            );
            replica.local = local;
            replica.become_follower(leader, registration);
        } else if registration.partition_epoch > replica.partition_epoch {
            replica.apply_registration(registration);
        }
        self.publish_commit_state(&replica);
        drop(replica);
        if changed {
            self.wake_waiters();
        }
        changed
    }

    /// A cluster broker's partition starts from its checkpointed high watermark, not from
    /// its log end: records past it may not be on the other ISR members, and must not be
    /// shown to consumers until they are.
    fn init_high_watermark(&self, log: &PartitionLog, checkpointed: i64) {
        let hw = checkpointed
            .max(log.log_start_offset())
            .min(log.log_end_offset());
        self.high_watermark.store(hw, Ordering::Release);
    }

    /// Whether this broker leads the partition.
    pub fn is_leader(&self) -> bool {
        self.replica.lock().is_leader()
    }

    /// Checks a request's `current_leader_epoch` (-1: not given) against this leader's:
    /// an older one is FENCED_LEADER_EPOCH (the client's metadata is stale), a newer one
    /// UNKNOWN_LEADER_EPOCH (this broker's is).
    pub fn check_leader_epoch(&self, current_leader_epoch: i32) -> Result<(), ApiError> {
        let epoch = self.replica.lock().leader_epoch;
        if current_leader_epoch == -1 || current_leader_epoch == epoch {
            Ok(())
        } else if current_leader_epoch < epoch {
            Err(ApiError::new(
                ResponseError::FencedLeaderEpoch,
                format!(
                    "The leader epoch {current_leader_epoch} of the request is older than the current {epoch} of {}-{}",
                    self.topic, self.index
                ),
            ))
        } else {
            Err(ApiError::new(
                ResponseError::UnknownLeaderEpoch,
                format!(
                    "The leader epoch {current_leader_epoch} of the request is newer than the current {epoch} of {}-{}",
                    self.topic, self.index
                ),
            ))
        }
    }

    /// Records a follower's fetch from `fetch_offset` (the follower's log end) with its
    /// log start `log_start_offset`, sent by its incarnation `broker_epoch`, and moves the
    /// high and low watermarks. Returns whether the follower is in the ISR and an ISR
    /// expansion to propose if it now qualifies and is `isr_eligible` (see
    /// `MetadataImage::is_isr_eligible`), or NOT_LEADER_OR_FOLLOWER for a broker that is
    /// not a replica.
    pub fn record_follower_fetch(
        &self,
        follower: BrokerId,
        broker_epoch: i64,
        fetch_offset: i64,
        log_start_offset: i64,
        isr_eligible: bool,
    ) -> Result<FollowerFetched, ApiError> {
        let (log_end, min_insync, local_log_start) = self
            .with_log(|log| {
                (
                    log.log_end_offset(),
                    log.config().min_insync_replicas,
                    log.log_start_offset(),
                )
            })
            .map_err(ApiError::from)?;
        let mut replica = self.replica.lock();
        if !replica.is_leader() {
            return Err(self.not_leader());
        }
        if !replica.update_follower(
            follower,
            fetch_offset.min(log_end),
            log_end,
            strom_wire::now_ms(),
        ) {
            return Err(ApiError::new(
                ResponseError::NotLeaderOrFollower,
                format!(
                    "Broker {} is not a replica of {}-{}",
                    follower.0, self.topic, self.index
                ),
            ));
        }
        replica.update_follower_log_start(follower, log_start_offset, broker_epoch);
        self.update_low_watermark(&replica, local_log_start);
        let moved = self.advance_high_watermark(&replica, log_end, min_insync);
        let hw = self.high_watermark.load(Ordering::Acquire);
        let in_isr = replica.isr.contains(&follower);
        let expanded = replica.expanded_isr(follower, hw).filter(|_| isr_eligible);
        let isr_proposal = expanded.map(|new_isr| {
            replica.pending_isr = Some(new_isr.clone());
            IsrProposal {
                leader_epoch: replica.leader_epoch,
                partition_epoch: replica.partition_epoch,
                new_isr_epochs: replica.broker_epochs(&new_isr),
                new_isr,
            }
        });
        drop(replica);
        if moved {
            self.wake_waiters();
        }
        Ok(FollowerFetched {
            in_isr,
            isr_proposal,
        })
    }

    /// An ISR shrink to propose if followers have lagged for `lag_time_max_ms`.
    pub fn maybe_shrink_isr(&self, lag_time_max_ms: i64) -> Option<IsrProposal> {
        let log_end = self.with_log(|log| log.log_end_offset()).ok()?;
        let mut replica = self.replica.lock();
        let new_isr = replica.shrunk_isr(log_end, strom_wire::now_ms(), lag_time_max_ms)?;
        replica.pending_isr = Some(new_isr.clone());
        Some(IsrProposal {
            leader_epoch: replica.leader_epoch,
            partition_epoch: replica.partition_epoch,
            new_isr_epochs: replica.broker_epochs(&new_isr),
            new_isr,
        })
    }

    /// The controller's answer to this partition's AlterPartition: the accepted ISR with
    /// its leader and partition epochs, or `None` when it was refused (the change is
    /// dropped and may be proposed again).
    pub fn isr_change_settled(&self, accepted: Option<(i32, i32, Vec<BrokerId>)>) {
        let log = self.with_log(|log| (log.log_end_offset(), log.config().min_insync_replicas));
        let moved = {
            let mut replica = self.replica.lock();
            match accepted {
                Some((leader_epoch, partition_epoch, isr))
                    if replica.is_leader()
                        && leader_epoch == replica.leader_epoch
                        && partition_epoch > replica.partition_epoch =>
                {
                    let registration = Registration {
                        leader_epoch,
                        partition_epoch,
                        replicas: replica.replicas.clone(),
                        isr,
                    };
                    replica.apply_registration(registration)
                }
                _ => replica.pending_isr = None,
            }
            self.publish_commit_state(&replica);
            log.is_ok_and(|(end, min_insync)| {
                self.advance_high_watermark(&replica, end, min_insync)
            })
        };
        if moved {
            self.wake_waiters();
        }
    }

    /// Where this follower's next fetch starts and whom it fetches from, or `None` when
    /// it is not following a leader.
    pub fn follower_fetch_position(&self) -> Result<Option<FetchPosition>, LogError> {
        self.with_log(|log| {
            let replica = self.replica.lock();
            match replica.role {
                Role::Follower { leader } if leader != BrokerId::NONE => Some(FetchPosition {
                    leader,
                    leader_epoch: replica.leader_epoch,
                    fetch_offset: log.log_end_offset(),
                    last_fetched_epoch: log.latest_epoch().unwrap_or(-1),
                    log_start_offset: log.log_start_offset(),
                }),
                _ => None,
            }
        })
    }

    /// Runs `f` on the log only if this replica still follows `at`'s leader in `at`'s
    /// epoch and its log still ends at `at`'s fetch offset (Kafka's fetcher checks the
    /// same before it processes a response). A response that crossed a leader change —
    /// this broker now leading, or following another leader — or a truncation is
    /// dropped: appending it would give a new leader a batch of a deposed one's epoch
    /// that its epoch cache does not describe, and truncating on it could cut records
    /// the new epoch committed. Role changes take the log lock first, so none happens
    /// while `f` runs. `None`: the response was stale.
    fn if_still_fetching<T>(
        &self,
        at: &FetchPosition,
        f: impl FnOnce(&mut PartitionLog) -> Result<T, LogError>,
    ) -> Result<Option<T>, LogError> {
        self.try_with_log(|log| {
            let follows = {
                let replica = self.replica.lock();
                replica.role == (Role::Follower { leader: at.leader })
                    && replica.leader_epoch == at.leader_epoch
            };
            if !follows || log.log_end_offset() != at.fetch_offset {
                return Ok(None);
            }
            f(log).map(Some)
        })
    }

    /// Appends batches fetched from the leader at `at` (offsets as the leader assigned
    /// them), takes the leader's high watermark, capped at this log's end, and raises this
    /// log's start to the leader's (a DeleteRecords on the leader), capped the same way:
    /// what lies below the leader's log start is below its high watermark, so committed.
    /// `None`: the response was stale and nothing changed.
    pub fn append_as_follower(
        &self,
        at: &FetchPosition,
        records: &[u8],
        leader_high_watermark: i64,
        leader_log_start: i64,
    ) -> Result<Option<AppendInfo>, LogError> {
        let info = self.if_still_fetching(at, |log| {
            let now = strom_wire::now_ms();
            let info = log.append_as_follower(records, now)?;
            let log_end = log.log_end_offset();
            if leader_log_start > log.log_start_offset() {
                log.delete_records_before(leader_log_start.min(log_end), now)?;
            }
            self.set_follower_high_watermark(leader_high_watermark, log_end);
            Ok(info)
        })?;
        if info.as_ref().is_some_and(|i| i.record_count > 0) {
            self.wake_waiters();
        }
        Ok(info)
    }

    fn set_follower_high_watermark(&self, leader_high_watermark: i64, log_end_offset: i64) {
        let hw = leader_high_watermark.min(log_end_offset);
        if self.high_watermark.swap(hw, Ordering::AcqRel) != hw {
            self.publish_commit_state(&self.replica.lock());
        }
    }

    /// Cuts this follower's log where the leader of `at` says it diverged: the leader's
    /// largest epoch at most the last fetched one is `epoch`, ending at `end_offset` on
    /// the leader (Kafka's `truncateOnFetchResponse`). Truncates to the smaller of the two
    /// logs' ends of that epoch, or to this log's end of its own largest epoch below it,
    /// or — when this log knows no epoch that old — to its log start. Returns the offset
    /// truncated to (`None`: the response was stale).
    pub fn truncate_diverged(
        &self,
        at: &FetchPosition,
        epoch: i32,
        end_offset: i64,
    ) -> Result<Option<i64>, LogError> {
        self.if_still_fetching(at, |log| {
            let (local_epoch, local_end) = log.end_offset_for_epoch(epoch);
            let offset = if local_epoch < 0 {
                log.log_start_offset()
            } else if local_epoch == epoch {
                local_end.min(end_offset)
            } else {
                local_end
            };
            self.truncate_locked(log, offset)?;
            Ok(offset)
        })
    }

    /// Cuts this follower's log back to the leader's high watermark after the leader
    /// refused `at` as beyond its log end. `None`: the response was stale.
    pub fn truncate_to(&self, at: &FetchPosition, offset: i64) -> Result<Option<()>, LogError> {
        self.if_still_fetching(at, |log| self.truncate_locked(log, offset))
    }

    /// Truncates to `offset`, keeping the high watermark within the log.
    fn truncate_locked(&self, log: &mut PartitionLog, offset: i64) -> Result<(), LogError> {
        log.truncate_to(offset)?;
        let end = log.log_end_offset();
        if self.high_watermark.load(Ordering::Acquire) > end {
            tracing::warn!(partition = %self.name(), end, "truncated below the high watermark");
            self.set_follower_high_watermark(end, end);
        }
        Ok(())
    }

    /// Empties this follower's log and restarts it at `offset` (its log end `at` is below
    /// the leader's log start). `None`: the response was stale.
    pub fn truncate_fully_and_start_at(
        &self,
        at: &FetchPosition,
        offset: i64,
    ) -> Result<Option<()>, LogError> {
        self.if_still_fetching(at, |log| {
            log.truncate_fully_and_start_at(offset)?;
            self.high_watermark.store(offset, Ordering::Release);
            self.publish_commit_state(&self.replica.lock());
            Ok(())
        })
    }

    /// Marks the partition as deleted and wakes the fetches waiting on it, which then
    /// answer UNKNOWN_TOPIC_OR_PARTITION instead of waiting out their `max_wait_ms`.
    pub fn mark_deleted(&self) {
        self.deleted.store(true, Ordering::Release);
        self.wake_waiters();
    }

    pub fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::Acquire)
    }

    fn wake_waiters(&self) {
        let waiters = std::mem::take(&mut *self.waiters.lock());
        for waiter in waiters.iter().filter_map(Weak::upgrade) {
            waiter.wake();
        }
    }

    /// Registers `waiter` to be woken once, at the next change: an append, a moved high
    /// watermark or log start, a new role or leader epoch, a deletion or a storage
    /// failure. A `Notify` keeps a permit, so a wake between this call and the wait is
    /// not missed.
    pub fn register_waiter(&self, waiter: Weak<dyn Waiter>) {
        let mut waiters = self.waiters.lock();
        waiters.retain(|w| w.strong_count() > 0);
        waiters.push(waiter);
    }

    /// Runs `f` with the log locked; an offline partition is a storage error.
    pub fn with_log<T>(&self, f: impl FnOnce(&mut PartitionLog) -> T) -> Result<T, LogError> {
        match (&self.log, self.offline_reason()) {
            (LogSlot::Open(log), None) => Ok(f(&mut log.lock())),
            (_, reason) => Err(LogError::Offline {
                dir: self.dir.display().to_string(),
                reason: reason
                    .expect("a partition without an open log is offline")
                    .to_string(),
            }),
        }
    }

    /// [`Self::with_log`] for an `f` that can fail itself. An I/O error takes a cluster
    /// replica offline.
    pub fn try_with_log<T>(
        &self,
        f: impl FnOnce(&mut PartitionLog) -> Result<T, LogError>,
    ) -> Result<T, LogError> {
        let result = self.with_log(f)?;
        if let Err(e @ LogError::Io(_)) = &result {
            self.fail(e);
        }
        result
    }

    /// The high watermark (-1 while offline): records below it are on every ISR member.
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark.load(Ordering::Acquire)
    }

    /// The current leader epoch.
    pub fn leader_epoch(&self) -> i32 {
        self.replica.lock().leader_epoch
    }

    /// Whole batches from `offset` for a consumer (up to the high watermark) or, with
    /// `follower`, for a follower (up to the log end): at most `max_bytes` unless the
    /// first batch alone is larger and `min_one_batch` (KIP-74), with the partition's
    /// offsets as the Fetch response reports them (also beside an error, such as an offset
    /// out of range; -1 while offline).
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
        follower: bool,
    ) -> PartitionRead {
        let high_watermark = self.high_watermark();
        let read = self.with_log(|log| {
            let upper = if follower {
                log.log_end_offset()
            } else {
                high_watermark
            };
            PartitionRead {
                records: log
                    .slice_up_to(offset, max_bytes, min_one_batch, upper)
                    .and_then(FetchedRecords::of),
                high_watermark,
                log_start_offset: log.log_start_offset(),
                readable_end: upper,
            }
        });
        read.unwrap_or_else(|offline| PartitionRead {
            records: Err(offline),
            high_watermark: -1,
            log_start_offset: -1,
            readable_end: -1,
        })
    }

    /// OffsetForLeaderEpoch: the (epoch, end offset) of the largest epoch at most
    /// `epoch`, or (-1, -1) before the first.
    /// A log without leader epochs (written by an earlier release's single node, always
    /// led in epoch 0) answers with its one epoch.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> Result<(i32, i64), LogError> {
        self.with_log(|log| match log.latest_epoch() {
            None if epoch >= 0 => (log.leader_epoch(), log.log_end_offset()),
            _ => log.end_offset_for_epoch(epoch),
        })
    }

    /// The (offset, timestamp) ListOffsets answers for `timestamp`: the log end (-1,
    /// LATEST), the log start (-2 EARLIEST, -4 EARLIEST_LOCAL), the record with the
    /// largest timestamp (-3), or the first record at or after a timestamp; (-1, -1) when
    /// no record matches (Kafka's `fetchOffsetForTimestamp`).
    pub fn fetch_offset_for_timestamp(&self, timestamp: i64) -> Result<(i64, i64), LogError> {
        self.try_with_log(|log| {
            Ok(match timestamp {
                LATEST => (self.high_watermark(), -1),
                EARLIEST | EARLIEST_LOCAL => (log.log_start_offset(), -1),
                MAX_TIMESTAMP => match log.max_timestamp()? {
                    Some((header, bytes)) => first_record_at_or_after(&bytes, header.max_timestamp)
                        .unwrap_or((header.base_offset, header.max_timestamp)),
                    None => (-1, -1),
                },
                t if t >= 0 => match log.batch_at_timestamp(t)? {
                    Some((header, bytes)) => first_record_at_or_after(&bytes, t)
                        .map(|(o, ts)| (o.max(log.log_start_offset()), ts))
                        .unwrap_or((header.base_offset, header.max_timestamp)),
                    None => (-1, -1),
                },
                _ => (-1, -1),
            })
        })
    }

    /// DeleteRecords on the leader: raises the log start offset to `offset` (-1: the high
    /// watermark; beyond it is OFFSET_OUT_OF_RANGE, as Kafka's, since uncommitted records
    /// may still be truncated). Returns the new log start, which
    /// [`Self::wait_for_low_watermark`] then waits for on the ISR.
    pub fn delete_records_before(&self, offset: i64, now_ms: i64) -> Result<i64, ApiError> {
        let log_start = self.try_with_log(|log| {
            let replica = self.replica.lock();
            if !replica.is_leader() {
                return Ok(Err(self.not_leader()));
            }
            let high_watermark = self.high_watermark();
            let offset = if offset == -1 { high_watermark } else { offset };
            if offset < 0 || offset > high_watermark {
                return Ok(Err(ApiError::new(
                    ResponseError::OffsetOutOfRange,
                    format!(
                        "Cannot increment the log start offset to {offset} of partition {}-{} since it is larger than the high watermark {high_watermark}",
                        self.topic, self.index
                    ),
                )));
            }
            let log_start = log.delete_records_before(offset, now_ms)?;
            self.update_low_watermark(&replica, log_start);
            Ok(Ok(log_start))
        })??;
        // The followers learn the new log start from their next fetch answer.
        self.wake_waiters();
        Ok(log_start)
    }

    /// Recomputes the low watermark from the locked replication state and this log's
    /// start, publishing it when it changed.
    fn update_low_watermark(&self, replica: &ReplicaState, local_log_start: i64) {
        let low = replica.low_watermark(local_log_start);
        if self.low_watermark.swap(low, Ordering::AcqRel) != low {
            self.publish_commit_state(replica);
        }
    }

    /// The purgatory of a DeleteRecords: waits until every ISR member's log start has
    /// reached `offset` and returns the low watermark then; NOT_LEADER_OR_FOLLOWER if this
    /// broker stops leading meanwhile, REQUEST_TIMED_OUT after `timeout`.
    pub async fn wait_for_low_watermark(
        &self,
        offset: i64,
        timeout: Duration,
    ) -> Result<i64, ApiError> {
        let mut commits = self.commits.subscribe();
        let leader_epoch = commits.borrow().leader_epoch;
        let done = |c: &CommitState| c.leader_epoch != leader_epoch || c.low_watermark >= offset;
        let waited = tokio::time::timeout(timeout, commits.wait_for(done))
            .await
            .map(|r| r.map(|state| *state));
        match waited {
            Ok(Ok(state)) if state.leader_epoch == leader_epoch && leader_epoch >= 0 => {
                Ok(state.low_watermark)
            }
            Ok(_) => Err(self.not_leader()),
            Err(_) => Err(ApiError::new(
                ResponseError::RequestTimedOut,
                format!(
                    "The ISR of {}-{} did not delete the records below offset {offset} within {} ms",
                    self.topic,
                    self.index,
                    timeout.as_millis()
                ),
            )),
        }
    }
}

/// Below this many bytes a fetch's records are read into the response rather than sent
/// from the file. Measured on loopback (docs/replication.md, session 29): a consumer
/// reading a backlog in 1 MiB fetches costs the broker about half the CPU with `sendfile`,
/// but a follower's fetches of what was just appended (tens of KiB per partition) cost
/// the three brokers 15–20 % more with it than with a copy, so only large reads go from
/// the file.
const SEND_FROM_FILE_MIN_BYTES: usize = 256 * 1024;

/// The records a fetch returns from one partition. Either way they are not copied into
/// the response: the connection writes them from where they lie.
#[derive(Debug, Clone)]
pub enum FetchedRecords {
    /// Read into memory (a small read).
    Memory(Bytes),
    /// The range of the log file they lie in, sent from it as it is.
    File(LogSlice),
}

impl FetchedRecords {
    /// The records of `slice`, read now if it is small (under the log's lock, so a
    /// truncation cannot race the read).
    fn of(slice: LogSlice) -> Result<Self, LogError> {
        Ok(if slice.len() < SEND_FROM_FILE_MIN_BYTES {
            Self::Memory(slice.read()?)
        } else {
            Self::File(slice)
        })
    }

    pub fn len(&self) -> usize {
        match self {
            Self::Memory(bytes) => bytes.len(),
            Self::File(slice) => slice.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What the leader made of a follower's fetch.
#[derive(Debug)]
pub struct FollowerFetched {
    /// The follower was in the ISR when it fetched.
    pub in_isr: bool,
    /// An ISR expansion to send to the controller.
    pub isr_proposal: Option<IsrProposal>,
}

/// What a read of one partition returns.
#[derive(Debug)]
pub struct PartitionRead {
    pub records: Result<FetchedRecords, LogError>,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// Where this reader's records end: the log end for a follower, the high watermark
    /// for a consumer. A read that returned nothing from below it was cut by a limit.
    pub readable_end: i64,
}

/// ListOffsets' special timestamps.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;

#[cfg(test)]
mod tests {
    use super::*;
    use strom_log::{FileCache, LogConfig};

    const LEADER: BrokerId = BrokerId(2);

    fn partition(dir: &Path) -> Partition {
        let log =
            PartitionLog::open(dir, LogConfig::default(), &FileCache::new(16), true, 0).unwrap();
        Partition::new("t", 0, log, Some(Arc::new(Notify::new())))
    }

    fn registration(leader_epoch: i32) -> Registration {
        Registration {
            leader_epoch,
            partition_epoch: leader_epoch,
            replicas: vec![BrokerId(1), LEADER],
            isr: vec![BrokerId(1), LEADER],
        }
    }

    /// One batch of `n` records as a leader in epoch 1 wrote it, read back from its log.
    fn leader_records(dir: &Path, n: usize) -> Bytes {
        let mut log =
            PartitionLog::open(dir, LogConfig::default(), &FileCache::new(16), true, 0).unwrap();
        log.become_leader(1).unwrap();
        let batch = strom_wire::records::plain_batch(
            (0..n).map(|_| (None, Some(Bytes::from_static(b"v")))),
            0,
            1,
        );
        log.append(&batch, 0).unwrap();
        log.read(0, 1 << 20, true).unwrap().records
    }

    #[test]
    fn a_fetch_answer_is_applied_only_while_its_leader_epoch_and_offset_still_hold() {
        let dirs = tempfile::tempdir().unwrap();
        let records = leader_records(&dirs.path().join("leader"), 3);
        let p = partition(&dirs.path().join("follower"));
        assert_eq!(p.follower_fetch_position().unwrap(), None, "no leader yet");
        p.become_follower(BrokerId(1), LEADER, registration(1), 0);
        let at = p.follower_fetch_position().unwrap().unwrap();
        assert_eq!(
            (at.leader, at.leader_epoch, at.fetch_offset),
            (LEADER, 1, 0)
        );

        // This broker took over before the answer came: the answer is dropped, so the
        // new leader's log holds nothing of an epoch its cache does not describe.
        p.become_leader(BrokerId(1), registration(2), 0).unwrap();
        assert!(p.append_as_follower(&at, &records, 3, 0).unwrap().is_none());
        assert_eq!(p.truncate_diverged(&at, 0, 0).unwrap(), None);
        assert_eq!(p.with_log(|l| l.log_end_offset()).unwrap(), 0);

        // Following again in a newer epoch: an answer to the old epoch's fetch is stale.
        p.become_follower(BrokerId(1), LEADER, registration(3), 0);
        assert!(p.append_as_follower(&at, &records, 3, 0).unwrap().is_none());
        let at = p.follower_fetch_position().unwrap().unwrap();
        let info = p.append_as_follower(&at, &records, 3, 0).unwrap().unwrap();
        assert_eq!((info.base_offset, info.last_offset), (0, 2));

        // The same answer twice: the second finds the log moved on and is dropped.
        assert!(p.append_as_follower(&at, &records, 3, 0).unwrap().is_none());
        assert_eq!(p.with_log(|l| l.log_end_offset()).unwrap(), 3);
    }
}
