//! The group coordinator: every classic group this broker coordinates, their timers and
//! their committed offsets.
//!
//! It coordinates the groups whose partition of `__consumer_offsets` this broker leads
//! (see `offsets_partitions`); the rest get NOT_COORDINATOR. Each group sits behind its own lock,
//! so groups never wait for each other; the map of groups is locked only to find or
//! create one. Deadlines (session timeouts, the end of a join phase, a leader that never
//! syncs) are served by one tokio task per group that sleeps until the group's earliest
//! deadline and exits when the group has none, so an idle group costs no task and no
//! polling.
//!
//! Each group's membership is stored whenever a rebalance settles (Stable with the
//! leader's assignment, or Empty), as Kafka's coordinator stores it, in
//! `__consumer_offsets`, where a broker that takes the partition over (or the same one,
//! restarted) restores its groups. Members then go on heartbeating and committing in
//! their generation instead of rejoining. The record is appended before the members learn anything more from this
//! coordinator but not waited for; if it is lost with a dying leader, the next
//! coordinator has an older generation and the members rejoin, as they would without it.
//!
//! Committed offsets expire as in Kafka since 2.1 (KIP-211), so that group ids used once
//! do not grow memory and disk without bound: see [`GroupCoordinator::expire_offsets`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::classic_group::{
    Group, GroupDescription, GroupState, JoinOutcome, JoinParams, Reply, SyncOutcome, SyncParams,
};
use super::group_metadata::StoredGroup;
use super::offset_store::{Change, CommittedOffset, OffsetStore, TopicPartition};
use super::offsets_partitions::{self, OffsetsPartitions, PendingWrite};
use super::subscription::subscribed_topics;
use strom_replica::partition::Partition;

/// The coordinator's settings (Kafka's `group.*` broker configs).
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub max_size: usize,
    /// `group.initial.rebalance.delay.ms`
    pub initial_rebalance_delay_ms: i32,
    /// `offsets.retention.minutes`, in ms
    pub offsets_retention_ms: i64,
}

/// A group and what wakes its timer.
#[derive(Debug)]
struct GroupEntry {
    group: Mutex<Group>,
    wake: Notify,
    timer_running: AtomicBool,
    /// The partition of `__consumer_offsets` its changes go to; an entry lives only
    /// while this broker leads that partition.
    partition: Arc<Partition>,
}

impl GroupEntry {
    fn new(group: Group, partition: Arc<Partition>) -> Arc<Self> {
        Arc::new(Self {
            group: Mutex::new(group),
            wake: Notify::new(),
            timer_running: AtomicBool::new(false),
            partition,
        })
    }

    /// Runs `change` on the group under its lock, then stores the group's membership if
    /// the change settled it in a new generation: every change of a group goes through
    /// here, so no settled generation goes unstored.
    fn change<R>(&self, offsets: &OffsetStore, change: impl FnOnce(&mut Group) -> R) -> R {
        let mut group = self.group.lock();
        let result = change(&mut group);
        self.store_settled(offsets, &mut group);
        result
    }

    /// Stores the group's membership if it settled in a new generation. A failed append
    /// is logged: the members then rejoin the next coordinator (or the restarted node),
    /// nothing worse.
    fn store_settled(&self, offsets: &OffsetStore, group: &mut Group) {
        let Some(membership) = group.unstored(strom_wire::now_ms()) else {
            return;
        };
        let generation = membership.generation;
        let journal = GroupCoordinator::journal(self.partition.clone());
        if let Err(e) = offsets.store_membership(&group.id, Some(membership), journal) {
            tracing::warn!(group = %group.id, generation, error = ?e, "storing the group's membership failed; its members will rejoin the next coordinator");
        }
    }
}

/// Coordinator of all groups of this broker.
#[derive(Debug)]
pub struct GroupCoordinator {
    config: CoordinatorConfig,
    groups: Mutex<HashMap<String, Arc<GroupEntry>>>,
    offsets: Arc<OffsetStore>,
    /// The partitions of `__consumer_offsets` this broker leads.
    offsets_partitions: Mutex<OffsetsPartitions>,
    /// When the offsets were loaded. When a group became empty is kept in memory only,
    /// so every group loaded from disk counts as empty since start-up: a restart can only
    /// extend its offsets' retention, never cut it short.
    started: Instant,
}

/// Each partition of an OffsetDelete with its error, if any.
pub type PartitionResults = Vec<(TopicPartition, Option<ResponseError>)>;

/// A group as ListGroups shows it.
#[derive(Debug, Clone)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    pub state: GroupState,
}

impl GroupCoordinator {
    /// A coordinator of no group until this broker leads partitions of
    /// `__consumer_offsets` ([`Self::lead_offsets_partitions`]).
    pub fn new(config: CoordinatorConfig) -> Self {
        Self {
            config,
            groups: Mutex::new(HashMap::new()),
            offsets: Arc::new(OffsetStore::default()),
            offsets_partitions: Mutex::new(OffsetsPartitions::default()),
            started: Instant::now(),
        }
    }

    /// Restores the stored `memberships` as groups whose changes go to `partition`;
    /// the caller arms their timers once it is sure to coordinate them.
    fn restore_groups(
        &self,
        memberships: Vec<(String, StoredGroup)>,
        partition: Arc<Partition>,
    ) -> Vec<Arc<GroupEntry>> {
        let now = Instant::now();
        let entries: Vec<Arc<GroupEntry>> = memberships
            .into_iter()
            .map(|(id, membership)| {
                GroupEntry::new(Group::restore(&id, membership, now), partition.clone())
            })
            .collect();
        let mut map = self.groups.lock();
        for entry in &entries {
            let id = entry.group.lock().id.clone();
            map.insert(id, entry.clone());
        }
        entries
    }

    /// Where changes of `group_id` are appended, or NOT_COORDINATOR /
    /// COORDINATOR_LOAD_IN_PROGRESS.
    fn owner(&self, group_id: &str) -> Result<Arc<Partition>, ResponseError> {
        self.offsets_partitions.lock().owner(group_id).cloned()
    }

    /// The journal of a group's changes: its partition of `__consumer_offsets`.
    fn journal(
        partition: Arc<Partition>,
    ) -> impl FnOnce(&[Change]) -> Result<PendingWrite, ResponseError> {
        move |changes| offsets_partitions::append(&partition, changes)
    }

    /// Takes up the partitions of `__consumer_offsets` (of `count`) this broker leads
    /// now: forgets the groups of those it no longer leads and returns those it must
    /// load with [`Self::load_offsets_partition`].
    pub fn lead_offsets_partitions(
        &self,
        count: i32,
        led: Vec<(i32, Arc<Partition>)>,
    ) -> Vec<(i32, Arc<Partition>)> {
        let mut partitions = self.offsets_partitions.lock();
        let (gone, load) = partitions.lead(count, led);
        let changed: HashSet<i32> = gone
            .iter()
            .chain(load.iter().map(|(i, _)| i))
            .copied()
            .collect();
        if !changed.is_empty() {
            self.forget_groups(|g| partitions.index_of(g).is_some_and(|i| changed.contains(&i)));
        }
        for index in gone {
            tracing::info!(
                partition = index,
                "no longer coordinating the groups of __consumer_offsets partition"
            );
        }
        load
    }

    /// Replays partition `index` of `__consumer_offsets` and starts coordinating its
    /// groups, unless its leadership changed meanwhile.
    pub fn load_offsets_partition(&self, index: i32, partition: &Arc<Partition>) {
        let leader_epoch = partition.leader_epoch();
        let started = std::time::Instant::now();
        let changes = match offsets_partitions::read_all(partition) {
            Ok(changes) => changes,
            Err(e) => {
                tracing::error!(partition = index, error = %e, "loading the groups of a __consumer_offsets partition failed; its groups stay unavailable");
                return;
            }
        };
        let mut partitions = self.offsets_partitions.lock();
        let (groups, memberships) = self.offsets.load(|g| partitions.holds(index, g), changes);
        let restored = memberships.len();
        let entries = self.restore_groups(memberships, partition.clone());
        if partitions.loaded(index, partition, leader_epoch) {
            for entry in &entries {
                self.arm_timer(entry, false);
            }
            tracing::info!(
                partition = index,
                groups,
                restored,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "coordinating the groups of __consumer_offsets partition"
            );
        } else {
            self.forget_groups(|g| partitions.holds(index, g));
        }
    }

    /// When the offsets of `group_id` were loaded.
    fn loaded_at(&self, group_id: &str) -> Instant {
        self.offsets_partitions
            .lock()
            .loaded_at(group_id)
            .unwrap_or(self.started)
    }

    /// Drops the members and offsets of the groups `moved` selects: another broker
    /// coordinates them now. Members waiting in a join or sync are answered as for a
    /// group that ended, and find the new coordinator when they rejoin.
    fn forget_groups(&self, moved: impl Fn(&str) -> bool) {
        let mut groups = self.groups.lock();
        groups.retain(|group_id, entry| {
            if moved(group_id) {
                entry.group.lock().unload();
                false
            } else {
                true
            }
        });
        drop(groups);
        self.offsets.unload(moved);
    }

    fn entry(&self, group_id: &str) -> Option<Arc<GroupEntry>> {
        self.groups.lock().get(group_id).cloned()
    }

    fn entry_or_create(&self, group_id: &str, partition: Arc<Partition>) -> Arc<GroupEntry> {
        self.groups
            .lock()
            .entry(group_id.to_string())
            .or_insert_with(|| GroupEntry::new(Group::new(group_id, Instant::now()), partition))
            .clone()
    }

    /// Forgets a group that has neither members nor offsets, so that group ids used once
    /// (or only for a failed join) do not accumulate.
    fn remove_if_unused(&self, group_id: &str) {
        let mut groups = self.groups.lock();
        if let Some(entry) = groups.get(group_id) {
            let mut group = entry.group.lock();
            if group.state == GroupState::Empty
                && group.member_count() == 0
                && group.next_deadline().is_none()
                && !self.offsets.has_offsets(group_id)
            {
                group.mark_dead();
                if self.offsets.has_membership(group_id) {
                    let journal = Self::journal(entry.partition.clone());
                    if let Err(e) = self.offsets.store_membership(group_id, None, journal) {
                        tracing::warn!(group = group_id, error = ?e, "removing the group's stored membership failed");
                    }
                }
                drop(group);
                groups.remove(group_id);
            }
        }
    }

    /// Makes sure the group's timer sees its deadlines: starts it if it is not running,
    /// otherwise wakes it when a deadline may have moved earlier (`wake`).
    fn arm_timer(&self, entry: &Arc<GroupEntry>, wake: bool) {
        if !entry.timer_running.swap(true, Ordering::AcqRel) {
            tokio::spawn(run_timer(entry.clone(), self.offsets.clone()));
        } else if wake {
            entry.wake.notify_one();
        }
    }

    fn validate_session_timeout(&self, ms: i32) -> Result<(), ResponseError> {
        if ms < self.config.min_session_timeout_ms || ms > self.config.max_session_timeout_ms {
            return Err(ResponseError::InvalidSessionTimeout);
        }
        Ok(())
    }

    /// JoinGroup: waits until the rebalance this join takes part in completes.
    pub async fn join(&self, group_id: &str, mut params: JoinParams) -> JoinOutcome {
        if group_id.is_empty() {
            return JoinOutcome::error(ResponseError::InvalidGroupId, &params.member_id);
        }
        let partition = match self.owner(group_id) {
            Ok(partition) => partition,
            Err(e) => return JoinOutcome::error(e, &params.member_id),
        };
        if let Err(e) = self.validate_session_timeout(params.session_timeout_ms) {
            return JoinOutcome::error(e, &params.member_id);
        }
        params.max_size = self.config.max_size;
        params.initial_rebalance_delay_ms = self.config.initial_rebalance_delay_ms;
        let member_id = params.member_id.clone();
        let entry = if member_id.is_empty() {
            self.entry_or_create(group_id, partition)
        } else {
            match self.entry(group_id) {
                Some(e) => e,
                None => return JoinOutcome::error(ResponseError::UnknownMemberId, &member_id),
            }
        };
        tracing::debug!(group = group_id, member = %member_id, "join requested");
        let reply = entry.change(&self.offsets, |g| g.join(params, Instant::now()));
        self.arm_timer(&entry, true);
        let outcome = match reply {
            Reply::Now(outcome) => outcome,
            Reply::Wait(rx) => rx
                .await
                .unwrap_or_else(|_| JoinOutcome::error(ResponseError::UnknownMemberId, &member_id)),
        };
        tracing::debug!(
            group = group_id,
            member = %outcome.member_id,
            generation = outcome.generation_id,
            leader = %outcome.leader,
            error = ?outcome.error,
            "join completed"
        );
        if outcome.error.is_some() {
            self.remove_if_unused(group_id);
        }
        outcome
    }

    /// SyncGroup: the leader's call completes the rebalance; followers wait for it.
    pub async fn sync(&self, group_id: &str, params: SyncParams) -> SyncOutcome {
        if group_id.is_empty() {
            return Err(ResponseError::InvalidGroupId);
        }
        self.owner(group_id)?;
        let entry = self.entry(group_id).ok_or(ResponseError::UnknownMemberId)?;
        let (member, generation) = (params.member_id.clone(), params.generation_id);
        let reply = entry.change(&self.offsets, |g| g.sync(params, Instant::now()));
        self.arm_timer(&entry, true);
        let outcome = match reply {
            Reply::Now(outcome) => outcome,
            Reply::Wait(rx) => rx.await.unwrap_or(Err(ResponseError::UnknownMemberId)),
        };
        tracing::debug!(group = group_id, %member, generation, error = ?outcome.as_ref().err(), "sync completed");
        outcome
    }

    pub fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        instance: Option<&String>,
        generation: i32,
    ) -> Result<(), ResponseError> {
        if group_id.is_empty() {
            return Err(ResponseError::InvalidGroupId);
        }
        self.owner(group_id)?;
        let entry = self.entry(group_id).ok_or(ResponseError::UnknownMemberId)?;
        let result = entry
            .group
            .lock()
            .heartbeat(member_id, instance, generation, Instant::now());
        self.arm_timer(&entry, false);
        if let Err(e) = result {
            tracing::debug!(group = group_id, member = member_id, generation, error = ?e, "heartbeat refused");
        }
        result
    }

    /// LeaveGroup for a batch of (member id, group.instance.id); one result per member.
    pub fn leave(
        &self,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> Result<Vec<Result<(), ResponseError>>, ResponseError> {
        if group_id.is_empty() {
            return Err(ResponseError::InvalidGroupId);
        }
        self.owner(group_id)?;
        let entry = self.entry(group_id).ok_or(ResponseError::UnknownMemberId)?;
        let results = entry.change(&self.offsets, |group| {
            if group.state == GroupState::Dead {
                return Err(ResponseError::CoordinatorNotAvailable);
            }
            let now = Instant::now();
            Ok(members
                .iter()
                .map(|(id, instance)| group.leave(id, instance.as_ref(), now))
                .collect())
        })?;
        self.arm_timer(&entry, true);
        self.remove_if_unused(group_id);
        Ok(results)
    }

    /// OffsetCommit: checks the committer's membership and generation, then appends the
    /// offsets to `__consumer_offsets`; the caller waits for the returned write before
    /// answering.
    pub fn commit_offsets(
        &self,
        group_id: &str,
        member_id: &str,
        instance: Option<&String>,
        generation: i32,
        offsets: Vec<(TopicPartition, CommittedOffset)>,
    ) -> Result<PendingWrite, ResponseError> {
        let partition = self.owner(group_id)?;
        match self.entry(group_id) {
            Some(entry) => entry
                .group
                .lock()
                .validate_commit(member_id, instance, generation)?,
            None if generation >= 0 && !member_id.is_empty() => {
                return Err(ResponseError::IllegalGeneration)
            }
            None => {}
        }
        if offsets.is_empty() {
            return Ok(PendingWrite::DONE);
        }
        self.offsets
            .commit(group_id, offsets, Self::journal(partition))
    }

    /// OffsetFetch: the committed offset of each requested partition (`None` asks for
    /// every partition with one).
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<Vec<TopicPartition>>,
    ) -> Result<Vec<(TopicPartition, Option<CommittedOffset>)>, ResponseError> {
        self.owner(group_id)?;
        Ok(match partitions {
            Some(list) => list
                .into_iter()
                .map(|tp| {
                    let committed = self.offsets.get(group_id, &tp);
                    (tp, committed)
                })
                .collect(),
            None => self
                .offsets
                .group_offsets(group_id)
                .into_iter()
                .map(|(tp, c)| (tp, Some(c)))
                .collect(),
        })
    }

    /// Every group: those with members and those that exist only through offsets.
    pub fn list_groups(&self) -> Vec<ListedGroup> {
        let mut listed: BTreeMap<String, ListedGroup> = BTreeMap::new();
        for group_id in self.offsets.groups() {
            listed.insert(
                group_id.clone(),
                ListedGroup {
                    group_id,
                    protocol_type: String::new(),
                    state: GroupState::Empty,
                },
            );
        }
        let entries: Vec<Arc<GroupEntry>> = self.groups.lock().values().cloned().collect();
        for entry in entries {
            let group = entry.group.lock();
            if group.state == GroupState::Dead {
                continue;
            }
            listed.insert(
                group.id.clone(),
                ListedGroup {
                    group_id: group.id.clone(),
                    protocol_type: group.protocol_type.clone().unwrap_or_default(),
                    state: group.state,
                },
            );
        }
        listed.into_values().collect()
    }

    /// DescribeGroups for one group; `None` if it does not exist.
    pub fn describe(&self, group_id: &str) -> Result<Option<GroupDescription>, ResponseError> {
        self.owner(group_id)?;
        if let Some(entry) = self.entry(group_id) {
            let group = entry.group.lock();
            if group.state != GroupState::Dead {
                return Ok(Some(group.describe()));
            }
        }
        Ok(self
            .offsets
            .has_offsets(group_id)
            .then(|| GroupDescription {
                state: GroupState::Empty,
                protocol_type: String::new(),
                protocol_name: String::new(),
                members: Vec::new(),
            }))
    }

    /// DeleteGroups for one group: only a group without members can be deleted.
    pub fn delete_group(&self, group_id: &str) -> Result<PendingWrite, ResponseError> {
        if group_id.is_empty() {
            return Err(ResponseError::InvalidGroupId);
        }
        let partition = self.owner(group_id)?;
        let mut groups = self.groups.lock();
        let had_offsets = self.offsets.has_offsets(group_id);
        match groups.get(group_id) {
            Some(entry) => {
                let mut group = entry.group.lock();
                match group.state {
                    GroupState::Dead => return Err(ResponseError::GroupIdNotFound),
                    GroupState::Empty => group.mark_dead(),
                    _ => return Err(ResponseError::NonEmptyGroup),
                }
            }
            None if !had_offsets => return Err(ResponseError::GroupIdNotFound),
            None => {}
        }
        groups.remove(group_id);
        drop(groups);
        if !had_offsets && !self.offsets.has_membership(group_id) {
            return Ok(PendingWrite::DONE);
        }
        self.offsets
            .delete_group(group_id, Self::journal(partition))
    }

    /// OffsetDelete: removes offsets of partitions of topics no member is subscribed to.
    /// Returns the error of each partition.
    pub fn delete_offsets(
        &self,
        group_id: &str,
        partitions: Vec<TopicPartition>,
    ) -> Result<(PartitionResults, PendingWrite), ResponseError> {
        let partition = self.owner(group_id)?;
        let subscribed = match self.entry(group_id) {
            Some(entry) => {
                let group = entry.group.lock();
                match group.state {
                    GroupState::Dead => return Err(ResponseError::GroupIdNotFound),
                    GroupState::Empty => Vec::new(),
                    _ if group.protocol_type.as_deref() == Some("consumer") => {
                        subscribed_topics(&group.member_metadata())
                    }
                    _ => return Err(ResponseError::NonEmptyGroup),
                }
            }
            None if self.offsets.has_offsets(group_id) => Vec::new(),
            None => return Err(ResponseError::GroupIdNotFound),
        };
        let (blocked, deletable): (Vec<_>, Vec<_>) = partitions
            .into_iter()
            .partition(|(topic, _)| subscribed.contains(topic));
        let write =
            self.offsets
                .delete_offsets(group_id, deletable.clone(), Self::journal(partition))?;
        let results = deletable
            .into_iter()
            .map(|tp| (tp, None))
            .chain(
                blocked
                    .into_iter()
                    .map(|tp| (tp, Some(ResponseError::GroupSubscribedToTopic))),
            )
            .collect();
        Ok((results, write))
    }

    /// Deletes the committed offsets past `offsets.retention.minutes` (Kafka's offset
    /// expiry since 2.1, KIP-211), durably, and forgets groups left empty and without
    /// offsets. A group with members keeps every offset. An empty group's offsets expire
    /// together once it has been empty for the retention period; a group not in the map
    /// (commits without group management, or loaded from `__consumer_offsets`) counts as
    /// empty since its offsets were loaded, as Kafka's group metadata would have kept its
    /// members. Each offset is also kept for the retention period after its own commit
    /// (`now_ms` against its commit timestamp): that is the whole rule for commits
    /// without group management, and keeps an admin's offset reset of a long-empty group
    /// from vanishing at the next check, where Kafka would drop it. The deletions are
    /// appended to `__consumer_offsets` without waiting for them: no client waits for
    /// expiry.
    pub fn expire_offsets(&self, now: Instant, now_ms: i64) {
        let retention_ms = self.config.offsets_retention_ms;
        let retention = Duration::from_millis(retention_ms.max(0) as u64);
        let old = |c: &CommittedOffset| now_ms.saturating_sub(c.commit_timestamp) >= retention_ms;
        let mut expired = 0;
        for group_id in self.offsets.groups() {
            let Ok(partition) = self.owner(&group_id) else {
                continue;
            };
            let loaded = self.loaded_at(&group_id);
            let journal = Self::journal(partition);
            let groups = self.groups.lock();
            let result = match groups.get(&group_id).cloned() {
                // The group's lock keeps members from joining while its offsets go.
                Some(entry) => {
                    drop(groups);
                    let group = entry.group.lock();
                    match group.empty_since() {
                        Some(since) if now.saturating_duration_since(since) >= retention => {
                            self.offsets.expire(&group_id, old, journal)
                        }
                        _ => continue,
                    }
                }
                // The map stays locked so that no member can create the group meanwhile.
                None if now.saturating_duration_since(loaded) >= retention => {
                    self.offsets.expire(&group_id, old, journal)
                }
                None => continue,
            };
            match result {
                Ok(Some((n, _unawaited))) => expired += n,
                Ok(None) => {}
                Err(e) => {
                    tracing::error!(group = %group_id, error = %e, "writing expired offsets failed");
                    break;
                }
            }
        }
        if expired > 0 {
            tracing::info!(offsets = expired, "expired committed offsets");
        }
        let group_ids: Vec<String> = self.groups.lock().keys().cloned().collect();
        for group_id in group_ids {
            self.remove_if_unused(&group_id);
        }
    }
}

/// Serves a group's deadlines until it has none left, storing the membership of a
/// rebalance they settle.
async fn run_timer(entry: Arc<GroupEntry>, offsets: Arc<OffsetStore>) {
    loop {
        // The timer stops under the group's lock, so that a deadline set after it looked
        // finds it stopped and starts a new one.
        let next = entry.change(&offsets, |group| {
            group.expire(Instant::now());
            let next = group
                .next_deadline()
                .filter(|_| group.state != GroupState::Dead);
            if next.is_none() {
                entry.timer_running.store(false, Ordering::Release);
            }
            next
        });
        let Some(next) = next else {
            return;
        };
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = entry.wake.notified() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::classic_group::tests::join_params;
    use super::*;

    const RETENTION_MS: i64 = 60_000;
    const RETENTION: Duration = Duration::from_millis(RETENTION_MS as u64);
    /// A wall clock far past every commit of these tests, so that only the group's
    /// emptiness decides.
    const LATE_MS: i64 = 1_000_000_000;

    /// A coordinator that leads the one partition of a `__consumer_offsets` kept in
    /// `dir`, loaded from what it holds.
    fn coordinator(dir: &Path) -> GroupCoordinator {
        let config = CoordinatorConfig {
            min_session_timeout_ms: 1,
            max_session_timeout_ms: 60_000,
            max_size: 10,
            initial_rebalance_delay_ms: 0,
            offsets_retention_ms: RETENTION_MS,
        };
        let files = strom_log::FileCache::new(64);
        let log = strom_log::PartitionLog::open(
            &dir.join("__consumer_offsets-0"),
            strom_log::LogConfig::default(),
            &files,
            true,
            strom_wire::now_ms(),
        )
        .unwrap();
        let partition = Arc::new(Partition::new("__consumer_offsets", 0, log, None));
        let me = strom_metadata::BrokerId(1);
        let registration = strom_replica::partition_state::Registration {
            leader_epoch: 0,
            partition_epoch: 0,
            replicas: vec![me],
            isr: vec![me],
        };
        partition.become_leader(me, registration, 0).unwrap();
        let c = GroupCoordinator::new(config);
        for (index, led) in c.lead_offsets_partitions(1, vec![(0, partition)]) {
            c.load_offsets_partition(index, &led);
        }
        c
    }

    fn committed_at(offset: i64, commit_timestamp: i64) -> (TopicPartition, CommittedOffset) {
        (
            ("t".to_string(), offset as i32),
            CommittedOffset {
                offset,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp,
            },
        )
    }

    fn offsets_of(c: &GroupCoordinator, group: &str) -> Vec<i64> {
        c.fetch_offsets(group, None)
            .unwrap()
            .into_iter()
            .filter_map(|(_, o)| o.map(|o| o.offset))
            .collect()
    }

    /// Joins one member to `group`, makes it stable and commits offsets 0 and 1 as it;
    /// returns the member id.
    async fn stable_member_commits(c: &GroupCoordinator, group: &str) -> String {
        let joined = c.join(group, join_params("", 0)).await;
        assert_eq!(joined.error, None);
        let sync = SyncParams {
            member_id: joined.member_id.clone(),
            group_instance_id: None,
            generation_id: joined.generation_id,
            protocol_type: None,
            protocol_name: None,
            assignments: Vec::new(),
        };
        c.sync(group, sync).await.unwrap();
        let written = c
            .commit_offsets(
                group,
                &joined.member_id,
                None,
                joined.generation_id,
                vec![committed_at(0, 0), committed_at(1, 0)],
            )
            .unwrap();
        written.replicated(Duration::from_secs(1)).await.unwrap();
        joined.member_id
    }

    #[tokio::test]
    async fn a_group_with_members_keeps_its_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let c = coordinator(dir.path());
        stable_member_commits(&c, "g").await;
        c.expire_offsets(Instant::now() + 100 * RETENTION, LATE_MS);
        assert_eq!(offsets_of(&c, "g"), vec![0, 1]);
    }

    #[tokio::test]
    async fn an_empty_groups_offsets_expire_a_retention_after_it_became_empty() {
        let dir = tempfile::tempdir().unwrap();
        let c = coordinator(dir.path());
        let member = stable_member_commits(&c, "g").await;
        let before_leave = Instant::now();
        c.leave("g", &[(member, None)]).unwrap();
        let after_leave = Instant::now();

        c.expire_offsets(before_leave + RETENTION - Duration::from_millis(1), LATE_MS);
        assert_eq!(offsets_of(&c, "g"), vec![0, 1]);
        assert!(c.describe("g").unwrap().is_some());

        c.expire_offsets(after_leave + RETENTION, LATE_MS);
        assert_eq!(offsets_of(&c, "g"), Vec::<i64>::new());
        assert!(c.describe("g").unwrap().is_none());
        assert!(c.groups.lock().is_empty(), "the empty group is forgotten");
    }

    #[tokio::test]
    async fn offsets_without_a_group_expire_a_retention_after_their_commit() {
        let dir = tempfile::tempdir().unwrap();
        let c = coordinator(dir.path());
        for commit in [committed_at(0, 0), committed_at(1, 50_000)] {
            let written = c.commit_offsets("s", "", None, -1, vec![commit]).unwrap();
            written.replicated(Duration::from_secs(1)).await.unwrap();
        }

        // Within a retention of start-up, offsets loaded at start-up may be of groups
        // that only just became empty: nothing goes.
        c.expire_offsets(Instant::now(), LATE_MS);
        assert_eq!(offsets_of(&c, "s"), vec![0, 1]);

        let later = Instant::now() + RETENTION;
        c.expire_offsets(later, RETENTION_MS - 1);
        assert_eq!(offsets_of(&c, "s"), vec![0, 1]);
        c.expire_offsets(later, RETENTION_MS);
        assert_eq!(offsets_of(&c, "s"), vec![1]);
        c.expire_offsets(later, 50_000 + RETENTION_MS);
        assert!(c.describe("s").unwrap().is_none());

        drop(c);
        assert!(coordinator(dir.path()).describe("s").unwrap().is_none());
    }
}
