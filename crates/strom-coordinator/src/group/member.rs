//! One member of a classic group, as the coordinator tracks it between requests.

use std::time::Duration;

use bytes::Bytes;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::classic_group::{JoinOutcome, SyncOutcome};

/// Kafka's `GroupCoordinator.NewMemberJoinTimeoutMs`.
const NEW_MEMBER_JOIN_TIMEOUT: Duration = Duration::from_secs(300);

/// A member: who it is, what it supports, what it was assigned, and the requests of it
/// that wait for the rebalance to progress.
#[derive(Debug)]
pub struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    /// (protocol name, metadata), in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    /// The assignment of the current generation (empty until SyncGroup completes).
    pub assignment: Bytes,
    /// Order of arrival, which picks the leader as in Kafka (first member to join).
    pub joined_seq: u64,
    /// The JoinGroup waiting for the rebalance to complete.
    pub awaiting_join: Option<oneshot::Sender<JoinOutcome>>,
    /// The SyncGroup waiting for the leader's assignment.
    pub awaiting_sync: Option<oneshot::Sender<SyncOutcome>>,
    /// When the member is declared dead unless it heartbeats (or joins/syncs) before.
    pub heartbeat_deadline: Instant,
    /// Set until the member's first rebalance completes: a new member that vanishes
    /// while waiting to join is expired (after the new-member join timeout), not kept
    /// alive by its wait.
    pub is_new: bool,
}

impl Member {
    /// Whether the member's session keeps it alive at `now`. A member waiting in a
    /// rebalance counts as alive: its wait is its heartbeat, as in Kafka.
    pub fn is_alive(&self, now: Instant) -> bool {
        if !self.is_new && (self.awaiting_join.is_some() || self.awaiting_sync.is_some()) {
            return true;
        }
        now < self.heartbeat_deadline
    }

    /// Pushes the session deadline forward from `now`. A member that has not yet been
    /// part of a generation gets Kafka's five minutes to complete its first join instead:
    /// the join phase waits for the other members, which may take longer than one
    /// session timeout, and expiring the newcomer then would only restart it.
    pub fn refresh_session(&mut self, now: Instant) {
        let timeout = if self.is_new {
            NEW_MEMBER_JOIN_TIMEOUT
        } else {
            Duration::from_millis(self.session_timeout_ms.max(0) as u64)
        };
        self.heartbeat_deadline = now + timeout;
    }

    /// The metadata this member gave for `protocol`.
    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    /// Whether the member's protocols are exactly `protocols` (a rejoin that changes
    /// nothing need not rebalance a stable group).
    pub fn same_protocols(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }
}
