//! The group coordinator: every classic group this broker coordinates, their timers and
//! their committed offsets.
//!
//! With one broker, it coordinates every group. Each group sits behind its own lock,
//! so groups never wait for each other; the map of groups is locked only to find or
//! create one. Deadlines (session timeouts, the end of a join phase, a leader that never
//! syncs) are served by one tokio task per group that sleeps until the group's earliest
//! deadline and exits when the group has none, so an idle group costs no task and no
//! polling.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::classic_group::{
    Group, GroupDescription, GroupState, JoinOutcome, JoinParams, Reply, SyncOutcome, SyncParams,
};
use super::offset_store::{CommittedOffset, OffsetStore, TopicPartition};
use super::subscription::subscribed_topics;
use crate::BrokerError;

/// The coordinator's settings (Kafka's `group.*` broker configs).
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub max_size: usize,
    /// `group.initial.rebalance.delay.ms`
    pub initial_rebalance_delay_ms: i32,
}

/// A group and what wakes its timer.
#[derive(Debug)]
struct GroupEntry {
    group: Mutex<Group>,
    wake: Notify,
    timer_running: AtomicBool,
}

/// Coordinator of all groups of this broker.
#[derive(Debug)]
pub struct GroupCoordinator {
    config: CoordinatorConfig,
    groups: Mutex<HashMap<String, Arc<GroupEntry>>>,
    offsets: OffsetStore,
}

/// A group as ListGroups shows it.
#[derive(Debug, Clone)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    pub state: GroupState,
}

impl GroupCoordinator {
    /// Opens the coordinator, reloading committed offsets from `offsets_dir`.
    pub fn open(config: CoordinatorConfig, offsets_dir: &Path) -> Result<Self, BrokerError> {
        Ok(Self {
            config,
            groups: Mutex::new(HashMap::new()),
            offsets: OffsetStore::open(offsets_dir)?,
        })
    }

    fn entry(&self, group_id: &str) -> Option<Arc<GroupEntry>> {
        self.groups.lock().get(group_id).cloned()
    }

    fn entry_or_create(&self, group_id: &str) -> Arc<GroupEntry> {
        self.groups
            .lock()
            .entry(group_id.to_string())
            .or_insert_with(|| {
                Arc::new(GroupEntry {
                    group: Mutex::new(Group::new(group_id)),
                    wake: Notify::new(),
                    timer_running: AtomicBool::new(false),
                })
            })
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
                drop(group);
                groups.remove(group_id);
            }
        }
    }

    /// Makes sure the group's timer sees its deadlines: starts it if it is not running,
    /// otherwise wakes it when a deadline may have moved earlier (`wake`).
    fn arm_timer(entry: &Arc<GroupEntry>, wake: bool) {
        if !entry.timer_running.swap(true, Ordering::AcqRel) {
            tokio::spawn(run_timer(entry.clone()));
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
        if let Err(e) = self.validate_session_timeout(params.session_timeout_ms) {
            return JoinOutcome::error(e, &params.member_id);
        }
        params.max_size = self.config.max_size;
        params.initial_rebalance_delay_ms = self.config.initial_rebalance_delay_ms;
        let member_id = params.member_id.clone();
        let entry = if member_id.is_empty() {
            self.entry_or_create(group_id)
        } else {
            match self.entry(group_id) {
                Some(e) => e,
                None => return JoinOutcome::error(ResponseError::UnknownMemberId, &member_id),
            }
        };
        tracing::debug!(group = group_id, member = %member_id, "join requested");
        let reply = entry.group.lock().join(params, Instant::now());
        Self::arm_timer(&entry, true);
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
        let entry = self.entry(group_id).ok_or(ResponseError::UnknownMemberId)?;
        let (member, generation) = (params.member_id.clone(), params.generation_id);
        let reply = entry.group.lock().sync(params, Instant::now());
        Self::arm_timer(&entry, true);
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
        let entry = self.entry(group_id).ok_or(ResponseError::UnknownMemberId)?;
        let result = entry
            .group
            .lock()
            .heartbeat(member_id, instance, generation, Instant::now());
        Self::arm_timer(&entry, false);
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
        let entry = self.entry(group_id).ok_or(ResponseError::UnknownMemberId)?;
        let results = {
            let mut group = entry.group.lock();
            if group.state == GroupState::Dead {
                return Err(ResponseError::CoordinatorNotAvailable);
            }
            let now = Instant::now();
            members
                .iter()
                .map(|(id, instance)| group.leave(id, instance.as_ref(), now))
                .collect()
        };
        Self::arm_timer(&entry, true);
        self.remove_if_unused(group_id);
        Ok(results)
    }

    /// OffsetCommit: checks the committer's membership and generation, then writes the
    /// offsets durably before returning.
    pub fn commit_offsets(
        &self,
        group_id: &str,
        member_id: &str,
        instance: Option<&String>,
        generation: i32,
        offsets: Vec<(TopicPartition, CommittedOffset)>,
    ) -> Result<(), ResponseError> {
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
            return Ok(());
        }
        self.offsets.commit(group_id, offsets).map_err(|e| {
            tracing::error!(group = group_id, error = %e, "writing committed offsets failed");
            ResponseError::KafkaStorageError
        })
    }

    /// OffsetFetch: the committed offset of each requested partition (`None` asks for
    /// every partition with one).
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<Vec<TopicPartition>>,
    ) -> Vec<(TopicPartition, Option<CommittedOffset>)> {
        match partitions {
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
        }
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
    pub fn describe(&self, group_id: &str) -> Option<GroupDescription> {
        if let Some(entry) = self.entry(group_id) {
            let group = entry.group.lock();
            if group.state != GroupState::Dead {
                return Some(group.describe());
            }
        }
        self.offsets
            .has_offsets(group_id)
            .then(|| GroupDescription {
                state: GroupState::Empty,
                protocol_type: String::new(),
                protocol_name: String::new(),
                members: Vec::new(),
            })
    }

    /// DeleteGroups for one group: only a group without members can be deleted.
    pub fn delete_group(&self, group_id: &str) -> Result<(), ResponseError> {
        if group_id.is_empty() {
            return Err(ResponseError::InvalidGroupId);
        }
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
        if had_offsets {
            self.offsets.delete_group(group_id).map_err(|e| {
                tracing::error!(group = group_id, error = %e, "deleting group offsets failed");
                ResponseError::KafkaStorageError
            })?;
        }
        Ok(())
    }

    /// OffsetDelete: removes offsets of partitions of topics no member is subscribed to.
    /// Returns the error of each partition.
    pub fn delete_offsets(
        &self,
        group_id: &str,
        partitions: Vec<TopicPartition>,
    ) -> Result<Vec<(TopicPartition, Option<ResponseError>)>, ResponseError> {
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
        self.offsets
            .delete_offsets(group_id, deletable.clone())
            .map_err(|e| {
                tracing::error!(group = group_id, error = %e, "deleting offsets failed");
                ResponseError::KafkaStorageError
            })?;
        Ok(deletable
            .into_iter()
            .map(|tp| (tp, None))
            .chain(
                blocked
                    .into_iter()
                    .map(|tp| (tp, Some(ResponseError::GroupSubscribedToTopic))),
            )
            .collect())
    }
}

/// Serves a group's deadlines until it has none left.
async fn run_timer(entry: Arc<GroupEntry>) {
    loop {
        let next = {
            let mut group = entry.group.lock();
            group.expire(Instant::now());
            match group.next_deadline() {
                Some(next) if group.state != GroupState::Dead => next,
                _ => {
                    entry.timer_running.store(false, Ordering::Release);
                    return;
                }
            }
        };
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = entry.wake.notified() => {}
        }
    }
}
