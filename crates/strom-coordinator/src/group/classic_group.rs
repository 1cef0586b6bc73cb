//! One classic group: membership, generations and the rebalance state machine.
//!
//! The states are Kafka's: `Empty` (no members, maybe offsets), `PreparingRebalance`
//! (waiting for members to rejoin), `CompletingRebalance` (joined, waiting for the
//! leader's assignment), `Stable`, and `Dead` (deleted). Everything here is synchronous
//! and runs under the group's lock; requests that must wait for other members
//! (JoinGroup, SyncGroup) get a one-shot receiver that a later request or a timer
//! completes. Time is passed in, so the group never reads a clock itself.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::group_metadata::{StoredGroup, StoredMember};
use super::member::Member;

/// The classic group states, named as Kafka names them in DescribeGroups/ListGroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::PreparingRebalance => "PreparingRebalance",
            Self::CompletingRebalance => "CompletingRebalance",
            Self::Stable => "Stable",
            Self::Dead => "Dead",
        }
    }
}

/// What a JoinGroup gets back.
#[derive(Debug, Clone)]
pub struct JoinOutcome {
    pub error: Option<ResponseError>,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// Every member with its metadata for the chosen protocol: for the leader only.
    pub members: Vec<JoinedMember>,
}

impl JoinOutcome {
    pub fn error(error: ResponseError, member_id: &str) -> Self {
        Self {
            error: Some(error),
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            member_id: member_id.to_string(),
            members: Vec::new(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct JoinedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

/// What a SyncGroup gets back: (protocol type, protocol name, this member's assignment).
pub type SyncOutcome = Result<(Option<String>, Option<String>, Bytes), ResponseError>;

/// An answer now, or a receiver for an answer a later event will give.
pub enum Reply<T> {
    Now(T),
    Wait(oneshot::Receiver<T>),
}

/// A JoinGroup request, in the coordinator's terms.
#[derive(Debug, Clone)]
pub struct JoinParams {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// v4+: an unknown member first gets MEMBER_ID_REQUIRED and a member id to rejoin with.
    pub require_known_member_id: bool,
    /// `group.max.size`
    pub max_size: usize,
    /// `group.initial.rebalance.delay.ms`
    pub initial_rebalance_delay_ms: i32,
}

/// A SyncGroup request, in the coordinator's terms.
#[derive(Debug, Clone)]
pub struct SyncParams {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignments: Vec<(String, Bytes)>,
}

/// A member as DescribeGroups shows it.
#[derive(Debug, Clone)]
pub struct MemberDescription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

/// A group as DescribeGroups shows it.
#[derive(Debug, Clone)]
pub struct GroupDescription {
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol_name: String,
    pub members: Vec<MemberDescription>,
}

/// A classic group.
#[derive(Debug)]
pub struct Group {
    pub id: String,
    pub state: GroupState,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: Option<String>,
    members: HashMap<String, Member>,
    /// group.instance.id → member id of the static member holding it.
    static_members: HashMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, until they rejoin or time out.
    pending_members: HashMap<String, Instant>,
    /// Members of the generation that have not sent SyncGroup yet.
    pending_sync: HashSet<String>,
    rebalance_deadline: Option<Instant>,
    sync_deadline: Option<Instant>,
    /// While an empty group's first rebalance is held back for
    /// `group.initial.rebalance.delay.ms` (Kafka's InitialDelayedJoin): (when the delay ends,
    /// the delay, the latest it may be pushed to). Members starting together then form
    /// one generation instead of a rebalance per arrival.
    initial_delay: Option<(Instant, Duration, Instant)>,
    next_seq: u64,
    /// When the group was created or last became `Empty` (Kafka's currentStateTimestamp
    /// as offset expiry uses it); meaningful only while the group is `Empty`.
    empty_since: Instant,
    /// The generation and state of the membership last stored, so each settled
    /// generation is stored once.
    stored: Option<(i32, GroupState)>,
}

fn millis(ms: i32) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
}

impl Group {
    pub fn new(id: &str, now: Instant) -> Self {
        Self {
            id: id.to_string(),
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: HashMap::new(),
            static_members: HashMap::new(),
            pending_members: HashMap::new(),
            pending_sync: HashSet::new(),
            rebalance_deadline: None,
            sync_deadline: None,
            initial_delay: None,
            next_seq: 0,
            empty_since: now,
            stored: None,
        }
    }

    /// The group as a new coordinator finds it stored: Stable with its members and their
    /// assignments (each member's session starting `now`), or Empty.
    pub fn restore(id: &str, stored: StoredGroup, now: Instant) -> Self {
        let mut group = Self::new(id, now);
        group.generation = stored.generation;
        group.protocol_type = Some(stored.protocol_type);
        group.protocol_name = stored.protocol;
        for (seq, m) in stored.members.into_iter().enumerate() {
            let protocols = group
                .protocol_name
                .clone()
                .map(|name| vec![(name, m.subscription)])
                .unwrap_or_default();
            let mut member = Member {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id,
                client_host: m.client_host,
                session_timeout_ms: m.session_timeout_ms,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                protocol_type: group.protocol_type.clone().unwrap_or_default(),
                protocols,
                assignment: m.assignment,
                joined_seq: seq as u64,
                awaiting_join: None,
                awaiting_sync: None,
                heartbeat_deadline: now,
                is_new: false,
            };
            member.refresh_session(now);
            if let Some(instance) = m.group_instance_id {
                group.static_members.insert(instance, m.member_id.clone());
            }
            group.members.insert(m.member_id, member);
        }
        group.next_seq = group.members.len() as u64;
        if group.members.is_empty() {
            group.protocol_name = None;
        } else {
            group.state = GroupState::Stable;
            group.leader = stored
                .leader
                .filter(|l| group.members.contains_key(l))
                .or_else(|| group.ordered_members().first().map(|m| m.member_id.clone()));
        }
        group.stored = Some((group.generation, group.state));
        group
    }

    /// The group's membership to store, if it settled in a generation not stored yet:
    /// Stable once the leader's assignment arrived, or Empty after its members left.
    /// Kafka's coordinator stores the same two moments.
    pub fn unstored(&mut self, now_ms: i64) -> Option<StoredGroup> {
        let settled = matches!(self.state, GroupState::Stable | GroupState::Empty);
        let point = (self.generation, self.state);
        if !settled || self.generation == 0 || self.stored == Some(point) {
            return None;
        }
        self.stored = Some(point);
        let protocol = self.protocol_name.clone().unwrap_or_default();
        Some(StoredGroup {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol_name.clone(),
            leader: self.leader.clone(),
            current_state_timestamp: now_ms,
            members: self
                .ordered_members()
                .into_iter()
                .map(|m| StoredMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: m.metadata(&protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        })
    }

    /// Since when the group has had no members, if it has none: its offsets expire a
    /// retention period after that.
    pub fn empty_since(&self) -> Option<Instant> {
        (self.state == GroupState::Empty).then_some(self.empty_since)
    }

    pub fn member_count(&self) -> usize {
        self.members.len()
    }

    pub fn has_member(&self, member_id: &str) -> bool {
        self.members.contains_key(member_id)
    }

    /// Members in the order they joined.
    fn ordered_members(&self) -> Vec<&Member> {
        let mut all: Vec<&Member> = self.members.values().collect();
        all.sort_by_key(|m| m.joined_seq);
        all
    }

    /// Kafka's `isStaticMemberFenced`: the instance id is held by another member id.
    fn is_fenced(&self, instance: Option<&String>, member_id: &str) -> bool {
        instance
            .and_then(|i| self.static_members.get(i))
            .is_some_and(|holder| holder != member_id)
    }

    /// Protocols every member supports.
    fn candidate_protocols(&self) -> Vec<String> {
        let mut members = self.ordered_members().into_iter();
        let Some(first) = members.next() else {
            return Vec::new();
        };
        let rest: Vec<&Member> = members.collect();
        first
            .protocols
            .iter()
            .map(|(name, _)| name.clone())
            .filter(|name| {
                rest.iter()
                    .all(|m| m.protocols.iter().any(|(n, _)| n == name))
            })
            .collect()
    }

    fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        let candidates = self.candidate_protocols();
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols.iter().any(|(name, _)| candidates.contains(name))
    }

    /// Kafka's vote: every member votes for its most preferred protocol among those all
    /// members support; the most votes win, ties go to the earlier-joined member's order.
    fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let ordered = self.ordered_members();
        let mut votes: Vec<(String, usize)> = candidates.iter().map(|c| (c.clone(), 0)).collect();
        for member in &ordered {
            if let Some((name, _)) = member
                .protocols
                .iter()
                .find(|(n, _)| candidates.contains(n))
            {
                if let Some(v) = votes.iter_mut().find(|(c, _)| c == name) {
                    v.1 += 1;
                }
            }
        }
        let best = votes.iter().map(|(_, n)| *n).max().unwrap_or(0);
        votes
            .into_iter()
            .find(|(_, n)| *n == best && best > 0)
            .map(|(c, _)| c)
            .or_else(|| {
                ordered
                    .first()
                    .and_then(|m| m.protocols.first())
                    .map(|(n, _)| n.clone())
            })
    }

    fn is_full(&self, max_size: usize) -> bool {
        self.members.len() + self.pending_members.len() >= max_size
    }

    /// JoinGroup.
    pub fn join(&mut self, p: JoinParams, now: Instant) -> Reply<JoinOutcome> {
        let reply = self.route_join(p, now);
        self.assert_member_states();
        reply
    }

    /// A JoinGroup by who sends it: a member the group knows, or a new one.
    fn route_join(&mut self, p: JoinParams, now: Instant) -> Reply<JoinOutcome> {
        if self.state == GroupState::Dead {
            return Reply::Now(JoinOutcome::error(
                ResponseError::CoordinatorNotAvailable,
                &p.member_id,
            ));
        }
        if !self.supports_protocols(&p.protocol_type, &p.protocols) {
            return Reply::Now(JoinOutcome::error(
                ResponseError::InconsistentGroupProtocol,
                &p.member_id,
            ));
        }
        if p.member_id.is_empty() {
            self.join_unknown_member(p, now)
        } else {
            self.join_known_member(p, now)
        }
    }

    fn join_unknown_member(&mut self, p: JoinParams, now: Instant) -> Reply<JoinOutcome> {
        let prefix = p.group_instance_id.as_deref().unwrap_or(&p.client_id);
        let new_id = format!("{prefix}-{}", uuid::Uuid::new_v4());
        if let Some(instance) = &p.group_instance_id {
            if let Some(old_id) = self.static_members.get(instance).cloned() {
                return self.replace_static_member(&old_id, new_id, p, now);
            }
        }
        if self.is_full(p.max_size) {
            return Reply::Now(JoinOutcome::error(ResponseError::GroupMaxSizeReached, ""));
        }
        if p.require_known_member_id && p.group_instance_id.is_none() {
            self.pending_members
                .insert(new_id.clone(), now + millis(p.session_timeout_ms));
            return Reply::Now(JoinOutcome::error(ResponseError::MemberIdRequired, &new_id));
        }
        self.add_member_and_rebalance(new_id, p, now)
    }

    fn join_known_member(&mut self, p: JoinParams, now: Instant) -> Reply<JoinOutcome> {
        let id = p.member_id.clone();
        if self.pending_members.remove(&id).is_some() {
            return self.add_member_and_rebalance(id, p, now);
        }
        if self.is_fenced(p.group_instance_id.as_ref(), &id) {
            return Reply::Now(JoinOutcome::error(ResponseError::FencedInstanceId, &id));
        }
        let Some(member) = self.members.get_mut(&id) else {
            return Reply::Now(JoinOutcome::error(ResponseError::UnknownMemberId, &id));
        };
        member.refresh_session(now);
        let unchanged = member.same_protocols(&p.protocols);
        match self.state {
            GroupState::PreparingRebalance => self.await_join(p, now),
            GroupState::CompletingRebalance if unchanged => {
                Reply::Now(self.current_outcome(&id, true))
            }
            GroupState::Stable if unchanged && self.leader.as_deref() != Some(&id) => {
                Reply::Now(self.current_outcome(&id, true))
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                let reply = self.await_join(p, now);
                self.prepare_rebalance(now);
                reply
            }
            GroupState::Empty | GroupState::Dead => {
                Reply::Now(JoinOutcome::error(ResponseError::UnknownMemberId, &id))
            }
        }
    }

    /// Updates a known member from its JoinGroup and parks the request until the
    /// rebalance completes.
    fn await_join(&mut self, p: JoinParams, now: Instant) -> Reply<JoinOutcome> {
        let (tx, rx) = oneshot::channel();
        if let Some(member) = self.members.get_mut(&p.member_id) {
            member.protocols = p.protocols;
            member.session_timeout_ms = p.session_timeout_ms;
            member.rebalance_timeout_ms = p.rebalance_timeout_ms;
            member.awaiting_join = Some(tx);
            member.refresh_session(now);
        }
        self.try_complete_join(now);
        Reply::Wait(rx)
    }

    fn add_member_and_rebalance(
        &mut self,
        member_id: String,
        p: JoinParams,
        now: Instant,
    ) -> Reply<JoinOutcome> {
        if self.members.is_empty() {
            self.protocol_type = Some(p.protocol_type.clone());
        }
        let (tx, rx) = oneshot::channel();
        let mut member = Member {
            member_id: member_id.clone(),
            group_instance_id: p.group_instance_id.clone(),
            client_id: p.client_id,
            client_host: p.client_host,
            session_timeout_ms: p.session_timeout_ms,
            rebalance_timeout_ms: p.rebalance_timeout_ms,
            protocol_type: p.protocol_type,
            protocols: p.protocols,
            assignment: Bytes::new(),
            joined_seq: self.next_seq,
            awaiting_join: Some(tx),
            awaiting_sync: None,
            heartbeat_deadline: now,
            is_new: true,
        };
        self.next_seq += 1;
        member.refresh_session(now);
        if let Some(instance) = &p.group_instance_id {
            self.static_members
                .insert(instance.clone(), member_id.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(member_id.clone());
        }
        let was_empty = self.state == GroupState::Empty;
        let rebalance_timeout = millis(p.rebalance_timeout_ms);
        self.members.insert(member_id, member);
        self.hold_initial_rebalance(
            was_empty,
            millis(p.initial_rebalance_delay_ms),
            rebalance_timeout,
            now,
        );
        self.maybe_prepare_rebalance(now);
        self.try_complete_join(now);
        Reply::Wait(rx)
    }

    /// Starts the initial delay when the first member joins an empty group, and pushes
    /// it back by one delay when another member joins during it, never past the
    /// rebalance timeout counted from the first join.
    fn hold_initial_rebalance(
        &mut self,
        was_empty: bool,
        delay: Duration,
        rebalance_timeout: Duration,
        now: Instant,
    ) {
        if delay.is_zero() {
            return;
        }
        if was_empty {
            let limit = now + rebalance_timeout;
            self.initial_delay = Some(((now + delay).min(limit), delay, limit));
        } else if let Some((until, delay, limit)) = self.initial_delay {
            self.initial_delay = Some(((now + delay).min(limit).max(until), delay, limit));
        }
    }

    /// A static member rejoined without its member id (it restarted): the new id takes
    /// over its place, the old one is fenced. A stable group whose protocol would not
    /// change keeps its assignment and does not rebalance: that is what static
    /// membership is for.
    fn replace_static_member(
        &mut self,
        old_id: &str,
        new_id: String,
        p: JoinParams,
        now: Instant,
    ) -> Reply<JoinOutcome> {
        let Some(mut member) = self.members.remove(old_id) else {
            self.static_members
                .remove(p.group_instance_id.as_deref().unwrap_or_default());
            return self.join_unknown_member(p, now);
        };
        if let Some(tx) = member.awaiting_join.take() {
            let _ = tx.send(JoinOutcome::error(ResponseError::FencedInstanceId, old_id));
        }
        if let Some(tx) = member.awaiting_sync.take() {
            let _ = tx.send(Err(ResponseError::FencedInstanceId));
        }
        member.member_id = new_id.clone();
        member.client_id = p.client_id.clone();
        member.client_host = p.client_host.clone();
        member.refresh_session(now);
        if self.leader.as_deref() == Some(old_id) {
            self.leader = Some(new_id.clone());
        }
        if self.pending_sync.remove(old_id) {
            self.pending_sync.insert(new_id.clone());
        }
        if let Some(instance) = &p.group_instance_id {
            self.static_members.insert(instance.clone(), new_id.clone());
        }
        let unchanged = member.same_protocols(&p.protocols);
        self.members.insert(new_id.clone(), member);
        match self.state {
            GroupState::Stable if unchanged => Reply::Now(self.current_outcome(&new_id, false)),
            _ => {
                let reply = self.await_join(
                    JoinParams {
                        member_id: new_id,
                        ..p
                    },
                    now,
                );
                self.maybe_prepare_rebalance(now);
                reply
            }
        }
    }

    /// The current generation as a JoinGroup response, for a member whose rejoin does not
    /// need a rebalance. `with_members` gives the leader the member list again.
    fn current_outcome(&self, member_id: &str, with_members: bool) -> JoinOutcome {
        let is_leader = self.leader.as_deref() == Some(member_id);
        JoinOutcome {
            error: None,
            generation_id: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: member_id.to_string(),
            members: if is_leader && with_members {
                self.joined_members()
            } else {
                Vec::new()
            },
        }
    }

    fn joined_members(&self) -> Vec<JoinedMember> {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        self.ordered_members()
            .into_iter()
            .map(|m| JoinedMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                metadata: m.metadata(&protocol),
            })
            .collect()
    }

    fn maybe_prepare_rebalance(&mut self, now: Instant) {
        if matches!(
            self.state,
            GroupState::Empty | GroupState::CompletingRebalance | GroupState::Stable
        ) {
            self.prepare_rebalance(now);
        }
    }

    /// Starts a rebalance: the assignment of the generation is void, members waiting for
    /// it are told to rejoin, and the join phase lasts at most the longest rebalance
    /// timeout of the members.
    fn prepare_rebalance(&mut self, now: Instant) {
        for member in self.members.values_mut() {
            member.assignment = Bytes::new();
            if let Some(tx) = member.awaiting_sync.take() {
                let _ = tx.send(Err(ResponseError::RebalanceInProgress));
            }
        }
        self.pending_sync.clear();
        self.sync_deadline = None;
        self.state = GroupState::PreparingRebalance;
        self.rebalance_deadline = Some(now + self.rebalance_timeout());
        self.try_complete_join(now);
    }

    /// How long a rebalance phase may last: the longest rebalance timeout of the members,
    /// as in Kafka.
    fn rebalance_timeout(&self) -> Duration {
        millis(
            self.members
                .values()
                .map(|m| m.rebalance_timeout_ms)
                .max()
                .unwrap_or(0),
        )
    }

    fn try_complete_join(&mut self, now: Instant) {
        if self.initial_delay.is_some_and(|(until, _, _)| now < until) {
            return;
        }
        self.initial_delay = None;
        if self.state == GroupState::PreparingRebalance
            && self.pending_members.is_empty()
            && self.members.values().all(|m| m.awaiting_join.is_some())
        {
            self.complete_join(now);
        }
    }

    /// Ends the join phase: dynamic members that did not rejoin are dropped, the next
    /// generation starts with a protocol chosen by vote, and every waiting JoinGroup is
    /// answered (the leader with the member list).
    fn complete_join(&mut self, now: Instant) {
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none() && m.group_instance_id.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        for id in gone {
            self.drop_member(&id);
        }
        self.rebalance_deadline = None;
        self.generation += 1;
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            self.empty_since = now;
            self.protocol_name = None;
            self.leader = None;
            return;
        }
        self.protocol_name = self.select_protocol();
        let leader_rejoined = self
            .leader
            .as_ref()
            .and_then(|l| self.members.get(l))
            .is_some_and(|m| m.awaiting_join.is_some());
        if !leader_rejoined {
            self.leader = self
                .ordered_members()
                .into_iter()
                .find(|m| m.awaiting_join.is_some())
                .or_else(|| self.ordered_members().into_iter().next())
                .map(|m| m.member_id.clone());
        }
        self.state = GroupState::CompletingRebalance;
        self.sync_deadline = Some(now + self.rebalance_timeout());
        self.pending_sync = self.members.keys().cloned().collect();
        let members = self.joined_members();
        let leader = self.leader.clone().unwrap_or_default();
        for member in self.members.values_mut() {
            member.is_new = false;
            member.refresh_session(now);
            if let Some(tx) = member.awaiting_join.take() {
                let _ = tx.send(JoinOutcome {
                    error: None,
                    generation_id: self.generation,
                    protocol_type: self.protocol_type.clone(),
                    protocol_name: self.protocol_name.clone(),
                    leader: leader.clone(),
                    member_id: member.member_id.clone(),
                    members: if member.member_id == leader {
                        members.clone()
                    } else {
                        Vec::new()
                    },
                });
            }
        }
    }

    /// SyncGroup.
    pub fn sync(&mut self, p: SyncParams, now: Instant) -> Reply<SyncOutcome> {
        let reply = self.take_sync(p, now);
        self.assert_member_states();
        reply
    }

    fn take_sync(&mut self, p: SyncParams, now: Instant) -> Reply<SyncOutcome> {
        if let Err(e) =
            self.validate_member(&p.member_id, p.group_instance_id.as_ref(), p.generation_id)
        {
            return Reply::Now(Err(e));
        }
        let type_mismatch = p
            .protocol_type
            .as_ref()
            .is_some_and(|t| Some(t) != self.protocol_type.as_ref());
        let name_mismatch = p
            .protocol_name
            .as_ref()
            .is_some_and(|n| Some(n) != self.protocol_name.as_ref());
        if type_mismatch || name_mismatch {
            return Reply::Now(Err(ResponseError::InconsistentGroupProtocol));
        }
        let member = self
            .members
            .get_mut(&p.member_id)
            .expect("validated member");
        member.refresh_session(now);
        match self.state {
            GroupState::PreparingRebalance => Reply::Now(Err(ResponseError::RebalanceInProgress)),
            GroupState::Stable => {
                self.pending_sync.remove(&p.member_id);
                let assignment = self.members[&p.member_id].assignment.clone();
                Reply::Now(Ok((
                    self.protocol_type.clone(),
                    self.protocol_name.clone(),
                    assignment,
                )))
            }
            GroupState::CompletingRebalance => {
                let (tx, rx) = oneshot::channel();
                member.awaiting_sync = Some(tx);
                self.pending_sync.remove(&p.member_id);
                if self.leader.as_deref() == Some(p.member_id.as_str()) {
                    self.complete_sync(p.assignments);
                }
                Reply::Wait(rx)
            }
            GroupState::Empty | GroupState::Dead => Reply::Now(Err(ResponseError::UnknownMemberId)),
        }
    }

    /// The leader's assignment arrived: store it, become stable, answer every waiting
    /// SyncGroup. Members the leader left out get an empty assignment.
    fn complete_sync(&mut self, assignments: Vec<(String, Bytes)>) {
        let mut by_member: HashMap<String, Bytes> = assignments.into_iter().collect();
        self.state = GroupState::Stable;
        self.sync_deadline = None;
        for member in self.members.values_mut() {
            member.assignment = by_member.remove(&member.member_id).unwrap_or_default();
            if let Some(tx) = member.awaiting_sync.take() {
                let _ = tx.send(Ok((
                    self.protocol_type.clone(),
                    self.protocol_name.clone(),
                    member.assignment.clone(),
                )));
            }
        }
    }

    /// The checks Heartbeat, SyncGroup and OffsetCommit share, in Kafka's order.
    fn validate_member(
        &self,
        member_id: &str,
        instance: Option<&String>,
        generation: i32,
    ) -> Result<(), ResponseError> {
        if self.state == GroupState::Dead {
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        if self.is_fenced(instance, member_id) {
            return Err(ResponseError::FencedInstanceId);
        }
        if !self.members.contains_key(member_id) {
            return Err(ResponseError::UnknownMemberId);
        }
        if generation != self.generation {
            return Err(ResponseError::IllegalGeneration);
        }
        Ok(())
    }

    /// Heartbeat: keeps the session alive and tells the member whether to rejoin.
    pub fn heartbeat(
        &mut self,
        member_id: &str,
        instance: Option<&String>,
        generation: i32,
        now: Instant,
    ) -> Result<(), ResponseError> {
        self.validate_member(member_id, instance, generation)?;
        if let Some(member) = self.members.get_mut(member_id) {
            member.refresh_session(now);
        }
        match self.state {
            GroupState::PreparingRebalance => Err(ResponseError::RebalanceInProgress),
            GroupState::Stable => {
                self.pending_sync.remove(member_id);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Whether an OffsetCommit of this member and generation may be written, with
    /// Kafka's precedence: the member and its generation are checked before the state,
    /// so a stale member learns it must rejoin instead of retrying a rebalance that is
    /// not its own. A generation below zero on an empty group is a commit of a client
    /// that does not use group management (or of an admin tool), as in Kafka.
    pub fn validate_commit(
        &self,
        member_id: &str,
        instance: Option<&String>,
        generation: i32,
    ) -> Result<(), ResponseError> {
        use ResponseError::{IllegalGeneration, UnknownMemberId};
        match self.validate_member(member_id, instance, generation) {
            Err(UnknownMemberId | IllegalGeneration)
                if generation < 0 && self.state == GroupState::Empty =>
            {
                Ok(())
            }
            Ok(()) if self.state == GroupState::CompletingRebalance => {
                Err(ResponseError::RebalanceInProgress)
            }
            other => other,
        }
    }

    /// LeaveGroup for one member, by member id or by group.instance.id.
    pub fn leave(
        &mut self,
        member_id: &str,
        instance: Option<&String>,
        now: Instant,
    ) -> Result<(), ResponseError> {
        let left = self.remove_leaving(member_id, instance, now);
        self.assert_member_states();
        left
    }

    fn remove_leaving(
        &mut self,
        member_id: &str,
        instance: Option<&String>,
        now: Instant,
    ) -> Result<(), ResponseError> {
        if self.state == GroupState::Dead {
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        let id = match instance {
            Some(instance) => match self.static_members.get(instance) {
                None => return Err(ResponseError::UnknownMemberId),
                Some(holder) if !member_id.is_empty() && holder != member_id => {
                    return Err(ResponseError::FencedInstanceId)
                }
                Some(holder) => holder.clone(),
            },
            None => {
                if self.pending_members.remove(member_id).is_some() {
                    self.try_complete_join(now);
                    return Ok(());
                }
                member_id.to_string()
            }
        };
        if !self.members.contains_key(&id) {
            return Err(ResponseError::UnknownMemberId);
        }
        self.remove_member(&id, now);
        Ok(())
    }

    /// Removes a member that left or died, and rebalances the rest.
    fn remove_member(&mut self, member_id: &str, now: Instant) {
        self.drop_member(member_id);
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => self.prepare_rebalance(now),
            GroupState::PreparingRebalance => self.try_complete_join(now),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    /// Forgets a member; its waiting requests fail with UNKNOWN_MEMBER_ID.
    fn drop_member(&mut self, member_id: &str) {
        let Some(mut member) = self.members.remove(member_id) else {
            return;
        };
        if let Some(tx) = member.awaiting_join.take() {
            let _ = tx.send(JoinOutcome::error(
                ResponseError::UnknownMemberId,
                member_id,
            ));
        }
        if let Some(tx) = member.awaiting_sync.take() {
            let _ = tx.send(Err(ResponseError::UnknownMemberId));
        }
        if let Some(instance) = &member.group_instance_id {
            if self.static_members.get(instance).map(String::as_str) == Some(member_id) {
                self.static_members.remove(instance);
            }
        }
        self.pending_sync.remove(member_id);
        if self.leader.as_deref() == Some(member_id) {
            self.leader = self.ordered_members().first().map(|m| m.member_id.clone());
        }
    }

    /// Applies every deadline that has passed: members whose session expired, member ids
    /// never used to rejoin, the end of the join phase, and members that never sent
    /// SyncGroup. Returns whether anything changed.
    pub fn expire(&mut self, now: Instant) -> bool {
        let changed = self.apply_deadlines(now);
        self.assert_member_states();
        changed
    }

    fn apply_deadlines(&mut self, now: Instant) -> bool {
        let mut changed = false;
        let stale: Vec<String> = self
            .pending_members
            .iter()
            .filter(|(_, deadline)| **deadline <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in stale {
            self.pending_members.remove(&id);
            changed = true;
        }
        let dead: Vec<String> = self
            .members
            .values()
            .filter(|m| !m.is_alive(now))
            .map(|m| m.member_id.clone())
            .collect();
        for id in dead {
            tracing::info!(group = %self.id, member = %id, "member session expired");
            self.remove_member(&id, now);
            changed = true;
        }
        if self.state == GroupState::PreparingRebalance {
            let delay_over = self.initial_delay.is_some_and(|(until, _, _)| until <= now);
            if self.rebalance_deadline.is_some_and(|d| d <= now) {
                self.initial_delay = None;
                self.complete_join(now);
                changed = true;
            } else if changed || delay_over {
                self.try_complete_join(now);
                changed = true;
            }
        }
        if self.state == GroupState::CompletingRebalance
            && self.sync_deadline.is_some_and(|d| d <= now)
        {
            let missing: Vec<String> = self.pending_sync.drain().collect();
            for id in &missing {
                self.drop_member(id);
            }
            self.prepare_rebalance(now);
            changed = true;
        }
        changed
    }

    /// What every operation leaves true: a member waits for a join or for a sync, never
    /// both (a rejoin while its sync is parked answers the sync first), a parked sync
    /// exists only while the group completes a rebalance, and an Empty group has no
    /// members.
    fn assert_member_states(&self) {
        for m in self.members.values() {
            assert!(
                m.awaiting_join.is_none() || m.awaiting_sync.is_none(),
                "member {} of group {} waits for a join and a sync at once",
                m.member_id,
                self.id
            );
            assert!(
                m.awaiting_sync.is_none() || self.state == GroupState::CompletingRebalance,
                "member {} of group {} waits for a sync in state {}",
                m.member_id,
                self.id,
                self.state.name()
            );
        }
        assert!(
            self.state != GroupState::Empty || self.members.is_empty(),
            "group {} is Empty with {} members",
            self.id,
            self.members.len()
        );
    }

    /// The earliest deadline still to come, if any: when the timer must look again.
    pub fn next_deadline(&self) -> Option<Instant> {
        let sessions = self
            .members
            .values()
            .filter(|m| m.is_new || (m.awaiting_join.is_none() && m.awaiting_sync.is_none()))
            .map(|m| m.heartbeat_deadline);
        let phase = match self.state {
            GroupState::PreparingRebalance => self
                .initial_delay
                .map(|(until, _, _)| until)
                .or(self.rebalance_deadline),
            GroupState::CompletingRebalance => self.sync_deadline,
            _ => None,
        };
        sessions
            .chain(self.pending_members.values().copied())
            .chain(phase)
            .min()
    }

    /// Marks the group deleted: nothing may join it any more.
    pub fn mark_dead(&mut self) {
        self.state = GroupState::Dead;
    }

    /// Ends the group here because another broker coordinates it now: members waiting
    /// in a join or sync get NOT_COORDINATOR, so they look for the new coordinator.
    pub fn unload(&mut self) {
        for member in self.members.values_mut() {
            if let Some(tx) = member.awaiting_join.take() {
                let _ = tx.send(JoinOutcome::error(
                    ResponseError::NotCoordinator,
                    &member.member_id,
                ));
            }
            if let Some(tx) = member.awaiting_sync.take() {
                let _ = tx.send(Err(ResponseError::NotCoordinator));
            }
        }
        self.mark_dead();
    }

    pub fn describe(&self) -> GroupDescription {
        let stable = self.state == GroupState::Stable;
        let protocol = if stable {
            self.protocol_name.clone().unwrap_or_default()
        } else {
            String::new()
        };
        let members = self
            .ordered_members()
            .into_iter()
            .map(|m| MemberDescription {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                metadata: if stable {
                    m.metadata(&protocol)
                } else {
                    Bytes::new()
                },
                assignment: if stable {
                    m.assignment.clone()
                } else {
                    Bytes::new()
                },
            })
            .collect();
        GroupDescription {
            state: self.state,
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            protocol_name: protocol,
            members,
        }
    }

    /// The (protocol name, metadata) of every member for the chosen protocol, for
    /// OffsetDelete's check of subscribed topics.
    pub fn member_metadata(&self) -> Vec<Bytes> {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        self.members
            .values()
            .map(|m| m.metadata(&protocol))
            .collect()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A consumer's JoinGroup with one protocol, as a new member when `member_id` is empty.
    pub(in crate::group) fn join_params(member_id: &str, delay_ms: i32) -> JoinParams {
        JoinParams {
            member_id: member_id.to_string(),
            group_instance_id: None,
            client_id: "test".to_string(),
            client_host: "/127.0.0.1".to_string(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 60_000,
            protocol_type: "consumer".to_string(),
            protocols: vec![("range".to_string(), Bytes::new())],
            require_known_member_id: false,
            max_size: 100,
            initial_rebalance_delay_ms: delay_ms,
        }
    }

    fn generation_of(reply: Reply<JoinOutcome>) -> i32 {
        match reply {
            Reply::Wait(mut rx) => rx.try_recv().expect("join completed").generation_id,
            Reply::Now(outcome) => outcome.generation_id,
        }
    }

    /// A group one member has just joined, and the instant it joined.
    fn one_member() -> (Group, Instant) {
        let start = Instant::now();
        let mut group = Group::new("g", start);
        let _ = group.join(join_params("", 5_000), start);
        (group, start)
    }

    #[test]
    #[should_panic(expected = "is Empty with 1 members")]
    fn an_empty_group_with_a_member_is_refused() {
        let (mut group, start) = one_member();
        group.state = GroupState::Empty;
        group.expire(start);
    }

    #[test]
    #[should_panic(expected = "waits for a sync in state PreparingRebalance")]
    fn a_parked_sync_outside_a_completing_rebalance_is_refused() {
        let (mut group, start) = one_member();
        let member = group.members.values_mut().next().expect("joined");
        member.awaiting_join = None;
        member.awaiting_sync = Some(oneshot::channel().0);
        group.expire(start);
    }

    #[test]
    #[should_panic(expected = "waits for a join and a sync at once")]
    fn a_member_parked_in_a_join_and_a_sync_is_refused() {
        let (mut group, start) = one_member();
        let member = group.members.values_mut().next().expect("joined");
        member.awaiting_sync = Some(oneshot::channel().0);
        group.expire(start);
    }

    #[test]
    fn members_joining_within_the_initial_delay_form_one_generation() {
        let start = Instant::now();
        let second = Duration::from_secs(1);
        let mut group = Group::new("g", start);
        let first = group.join(join_params("", 3000), start);
        let late = group.join(join_params("", 3000), start + 2 * second);
        // The second arrival pushed the delay to 2 s + 3 s: nothing completes at 4 s.
        group.expire(start + 4 * second);
        assert_eq!(group.state, GroupState::PreparingRebalance);
        assert_eq!(group.next_deadline(), Some(start + 5 * second));
        group.expire(start + 5 * second);
        assert_eq!(group.state, GroupState::CompletingRebalance);
        assert_eq!(generation_of(first), 1);
        assert_eq!(generation_of(late), 1);
        assert_eq!(group.member_count(), 2);
    }

    #[test]
    fn without_an_initial_delay_the_first_member_completes_the_join_at_once() {
        let mut group = Group::new("g", Instant::now());
        let reply = group.join(join_params("", 0), Instant::now());
        assert_eq!(group.state, GroupState::CompletingRebalance);
        assert_eq!(generation_of(reply), 1);
    }

    #[test]
    fn a_group_is_empty_since_its_creation_or_its_last_member_leaving() {
        let start = Instant::now();
        let second = Duration::from_secs(1);
        let mut group = Group::new("g", start);
        assert_eq!(group.empty_since(), Some(start));
        let reply = group.join(join_params("", 0), start + second);
        let member = match reply {
            Reply::Wait(mut rx) => rx.try_recv().expect("join completed").member_id,
            Reply::Now(outcome) => panic!("join failed: {:?}", outcome.error),
        };
        assert_eq!(group.empty_since(), None);
        group.leave(&member, None, start + 5 * second).unwrap();
        assert_eq!(group.state, GroupState::Empty);
        assert_eq!(group.empty_since(), Some(start + 5 * second));
    }

    fn member_of(reply: Reply<JoinOutcome>) -> String {
        match reply {
            Reply::Wait(mut rx) => rx.try_recv().expect("join completed").member_id,
            Reply::Now(outcome) => panic!("join failed: {:?}", outcome.error),
        }
    }

    #[test]
    fn a_settled_generation_is_stored_once_and_restores_to_the_same_group() {
        let now = Instant::now();
        let mut group = Group::new("g", now);
        assert_eq!(group.unstored(1), None, "a new group has nothing to store");
        let member = member_of(group.join(join_params("", 0), now));
        assert_eq!(group.unstored(1), None, "not settled while completing");
        let sync = SyncParams {
            member_id: member.clone(),
            group_instance_id: None,
            generation_id: 1,
            protocol_type: None,
            protocol_name: None,
            assignments: vec![(member.clone(), Bytes::from_static(b"partitions"))],
        };
        assert!(matches!(group.sync(sync.clone(), now), Reply::Wait(_)));
        let stored = group.unstored(1_000).expect("stable in generation 1");
        assert_eq!(group.unstored(2_000), None, "stored once");
        assert_eq!(
            (stored.generation, stored.leader.as_deref()),
            (1, Some(member.as_str()))
        );
        assert_eq!(
            stored.members[0].assignment,
            Bytes::from_static(b"partitions")
        );

        // A new coordinator restores it: the member heartbeats and syncs in its
        // generation and gets its assignment back; nothing is stored again.
        let later = now + Duration::from_secs(60);
        let mut restored = Group::restore("g", stored.clone(), later);
        assert_eq!(restored.state, GroupState::Stable);
        assert_eq!(restored.heartbeat(&member, None, 1, later), Ok(()));
        match restored.sync(sync, later) {
            Reply::Now(Ok((_, protocol, assignment))) => {
                assert_eq!(protocol.as_deref(), Some("range"));
                assert_eq!(assignment, Bytes::from_static(b"partitions"));
            }
            _ => panic!("a restored member's sync is answered at once"),
        }
        assert_eq!(restored.unstored(3_000), None);
        assert_eq!(
            restored.next_deadline(),
            Some(later + Duration::from_secs(10)),
            "the member's session starts at the restore"
        );

        // The last member leaving settles an empty generation, which is stored too and
        // restores as an empty group that keeps its generation.
        restored.leave(&member, None, later).unwrap();
        let empty = restored.unstored(4_000).expect("empty in generation 2");
        assert_eq!((empty.generation, empty.members.len()), (2, 0));
        let back = Group::restore("g", empty, later);
        assert_eq!(
            (back.state, back.generation, back.member_count()),
            (GroupState::Empty, 2, 0)
        );
    }
}
