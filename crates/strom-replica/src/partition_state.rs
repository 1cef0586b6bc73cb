//! The replication state of one partition on this broker, as Kafka's `Partition` keeps
//! it: whether this replica leads or follows, the leader and partition epochs, the ISR
//! (and the one an AlterPartition in flight proposes), and — on the leader — each
//! follower's log end and when it last caught up. Pure: no I/O, no locks; the
//! [`crate::partition::Partition`] that owns it decides when it changes.

use std::collections::BTreeMap;

use strom_metadata::BrokerId;

/// This replica's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Leader,
    /// Following `leader` (`BrokerId::NONE`: the partition has no leader now).
    Follower {
        leader: BrokerId,
    },
}

/// What the leader knows of one follower.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerState {
    /// The follower's log end: the offset of its last fetch (-1 until it fetched).
    pub log_end_offset: i64,
    /// The follower's log start, as its last fetch reported it (-1 until it fetched): a
    /// DeleteRecords completes once every ISR member's log start has reached its offset.
    pub log_start_offset: i64,
    /// When the follower last had everything the leader had (Kafka's
    /// `lastCaughtUpTimeMs`): the ISR shrinks when it is older than
    /// `replica.lag.time.max.ms`.
    pub last_caught_up_ms: i64,
    /// The broker epoch the follower's last fetch carried (KIP-903; -1 before its first
    /// fetch, or from a Fetch older than v15): an ISR expansion names it, so that the
    /// controller refuses a member whose incarnation has changed since it caught up.
    pub broker_epoch: i64,
    /// The leader's log end and the time of the follower's previous fetch: a fetch that
    /// reaches the leader's log end as it was then proves the follower was caught up then.
    last_fetch_leader_log_end: i64,
    last_fetch_ms: i64,
}

/// The replication state of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaState {
    /// This broker (`BrokerId::NONE` until the metadata gave the partition a role).
    pub local: BrokerId,
    pub role: Role,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub replicas: Vec<BrokerId>,
    /// The ISR the metadata holds.
    pub isr: Vec<BrokerId>,
    /// The ISR an AlterPartition in flight proposes: one change at a time per partition.
    pub pending_isr: Option<Vec<BrokerId>>,
    /// The leader's followers (every replica but this one).
    pub followers: BTreeMap<BrokerId, FollowerState>,
    /// The leader's log end when it became leader in this epoch: a follower joins the
    /// ISR only once it has everything before it (Kafka's `leaderEpochStartOffset`).
    pub leader_epoch_start_offset: i64,
}

impl ReplicaState {
    /// A partition before the metadata gave it a role: it serves nothing and fetches
    /// nothing.
    pub fn unassigned() -> Self {
        Self {
            local: BrokerId::NONE,
            role: Role::Follower {
                leader: BrokerId::NONE,
            },
            leader_epoch: 0,
            partition_epoch: 0,
            replicas: vec![BrokerId::NONE],
            isr: vec![BrokerId::NONE],
            pending_isr: None,
            followers: BTreeMap::new(),
            leader_epoch_start_offset: 0,
        }
    }

    pub fn is_leader(&self) -> bool {
        self.role == Role::Leader
    }

    /// The ISR the high watermark waits for: the committed one plus the members an
    /// AlterPartition in flight adds (Kafka's "maximal ISR"), so a follower being added
    /// is waited for before the controller has confirmed it.
    pub fn maximal_isr(&self) -> Vec<BrokerId> {
        let mut isr = self.isr.clone();
        if let Some(pending) = &self.pending_isr {
            isr.extend(pending.iter().filter(|b| !self.isr.contains(b)));
        }
        isr
    }

    /// The in-sync replicas that `min.insync.replicas` = `configured` asks for here:
    /// never more than the partition has (Kafka's `effectiveMinIsr`), so a setting above
    /// a topic's replication factor — a broker-wide 2 and a topic of one replica, or a
    /// single node — does not stop every write and every commit.
    pub fn effective_min_insync(&self, configured: usize) -> usize {
        configured.min(self.replicas.len().max(1))
    }

    /// The high watermark the leader may advance to with log end `log_end_offset`: the
    /// smallest log end over the maximal ISR — unless that ISR is smaller than the
    /// effective `min_insync`, when nothing more is committed: a record is committed only
    /// once `min.insync.replicas` replicas have it.
    pub fn high_watermark_candidate(&self, log_end_offset: i64, min_insync: usize) -> Option<i64> {
        let isr = self.maximal_isr();
        if isr.len() < self.effective_min_insync(min_insync) {
            return None;
        }
        Some(
            isr.iter()
                .filter(|b| **b != self.local)
                .map(|b| self.followers.get(b).map_or(-1, |f| f.log_end_offset))
                .fold(log_end_offset, i64::min),
        )
    }

    /// Takes up leadership in a new epoch: every follower's position is unknown, and ISR
    /// members count as caught up now, so none is dropped before it had a chance to fetch.
    pub fn become_leader(&mut self, registration: Registration, log_end_offset: i64, now_ms: i64) {
        self.role = Role::Leader;
        self.apply_registration(registration);
        assert!(
            self.isr.contains(&self.local),
            "a leader is in its ISR ({:?} leads with ISR {:?})",
            self.local,
            self.isr
        );
        self.leader_epoch_start_offset = log_end_offset;
        let isr = &self.isr;
        self.followers = self
            .replicas
            .iter()
            .filter(|b| **b != self.local)
            .map(|b| {
                let caught_up = if isr.contains(b) { now_ms } else { 0 };
                (
                    *b,
                    FollowerState {
                        log_end_offset: -1,
                        log_start_offset: -1,
                        last_caught_up_ms: caught_up,
                        broker_epoch: -1,
                        last_fetch_leader_log_end: -1,
                        last_fetch_ms: 0,
                    },
                )
            })
            .collect();
    }

    /// Follows `leader` in a new epoch.
    pub fn become_follower(&mut self, leader: BrokerId, registration: Registration) {
        self.role = Role::Follower { leader };
        self.apply_registration(registration);
        self.followers.clear();
    }

    /// Takes a newer partition epoch's replicas and ISR; an AlterPartition in flight is
    /// settled by it (the controller has answered or another change came first).
    pub fn apply_registration(&mut self, r: Registration) {
        assert!(
            r.leader_epoch >= self.leader_epoch,
            "leader epochs only grow ({} after {})",
            r.leader_epoch,
            self.leader_epoch
        );
        assert!(
            r.partition_epoch >= self.partition_epoch,
            "partition epochs only grow ({} after {})",
            r.partition_epoch,
            self.partition_epoch
        );
        assert!(
            !r.isr.is_empty() && r.isr.iter().all(|b| r.replicas.contains(b)),
            "the ISR {:?} is a non-empty subset of the replicas {:?}",
            r.isr,
            r.replicas
        );
        self.leader_epoch = r.leader_epoch;
        self.partition_epoch = r.partition_epoch;
        self.replicas = r.replicas;
        self.isr = r.isr;
        self.pending_isr = None;
    }

    /// Records a follower's fetch from `fetch_offset` when the leader's log end is
    /// `leader_log_end`, as Kafka's `updateFetchState`. Returns false for a broker that is
    /// not a follower of this partition.
    pub fn update_follower(
        &mut self,
        follower: BrokerId,
        fetch_offset: i64,
        leader_log_end: i64,
        now_ms: i64,
    ) -> bool {
        let Some(f) = self.followers.get_mut(&follower) else {
            return false;
        };
        if fetch_offset >= leader_log_end {
            f.last_caught_up_ms = f.last_caught_up_ms.max(now_ms);
        } else if fetch_offset >= f.last_fetch_leader_log_end {
            f.last_caught_up_ms = f.last_caught_up_ms.max(f.last_fetch_ms);
        }
        f.log_end_offset = fetch_offset;
        f.last_fetch_leader_log_end = leader_log_end;
        f.last_fetch_ms = now_ms;
        true
    }

    /// Records the log start and the broker epoch a follower's fetch reported. Returns
    /// false for a broker that is not a follower of this partition.
    pub fn update_follower_log_start(
        &mut self,
        follower: BrokerId,
        log_start_offset: i64,
        broker_epoch: i64,
    ) -> bool {
        match self.followers.get_mut(&follower) {
            Some(f) => {
                f.log_start_offset = log_start_offset;
                f.broker_epoch = broker_epoch;
                true
            }
            None => false,
        }
    }

    /// The broker epoch each of `members` last fetched with (-1 for this replica and for
    /// a follower not heard from), for an AlterPartition of them.
    pub fn broker_epochs(&self, members: &[BrokerId]) -> Vec<i64> {
        members
            .iter()
            .map(|b| self.followers.get(b).map_or(-1, |f| f.broker_epoch))
            .collect()
    }

    /// The smallest log start over the ISR, this replica's `local_log_start` included
    /// (Kafka's low watermark): what a DeleteRecords reports and waits for. An ISR member
    /// that has not fetched in this epoch makes it -1 (unknown). Replicas outside the ISR
    /// are not waited for: they take the leader's log start when they fetch again.
    pub fn low_watermark(&self, local_log_start: i64) -> i64 {
        self.isr
            .iter()
            .filter(|b| **b != self.local)
            .map(|b| self.followers.get(b).map_or(-1, |f| f.log_start_offset))
            .fold(local_log_start, i64::min)
    }

    /// The ISR with `follower` added, when it may join: it is not in the ISR, no change
    /// is in flight, and it has reached both the high watermark and the start of this
    /// leader epoch (Kafka's `isFollowerInSync`).
    pub fn expanded_isr(&self, follower: BrokerId, high_watermark: i64) -> Option<Vec<BrokerId>> {
        let f = self.followers.get(&follower)?;
        let joins = self.is_leader()
            && self.pending_isr.is_none()
            && !self.isr.contains(&follower)
            && f.log_end_offset >= high_watermark
            && f.log_end_offset >= self.leader_epoch_start_offset;
        joins.then(|| {
            let mut isr = self.isr.clone();
            isr.push(follower);
            isr
        })
    }

    /// The ISR without the followers that have not caught up for `lag_time_max_ms`
    /// (Kafka's `getOutOfSyncReplicas`), when there are any and no change is in flight.
    /// A follower whose log reaches the leader's end `log_end_offset` is caught up however
    /// long ago it last fetched, as in Kafka's `isCaughtUp`: a fetch session does not name
    /// an idle partition, so its followers' fetches are not recorded while nothing is
    /// written (a follower that stops fetching is fenced by the controller instead).
    pub fn shrunk_isr(
        &self,
        log_end_offset: i64,
        now_ms: i64,
        lag_time_max_ms: i64,
    ) -> Option<Vec<BrokerId>> {
        if !self.is_leader() || self.pending_isr.is_some() {
            return None;
        }
        let lagging = |b: &BrokerId| {
            *b != self.local
                && self.followers.get(b).is_some_and(|f| {
                    f.log_end_offset < log_end_offset
                        && now_ms - f.last_caught_up_ms > lag_time_max_ms
                })
        };
        let isr: Vec<BrokerId> = self.isr.iter().copied().filter(|b| !lagging(b)).collect();
        assert!(
            isr.contains(&self.local),
            "a leader never drops itself from its ISR"
        );
        (isr.len() < self.isr.len()).then_some(isr)
    }
}

/// A partition's registration as the metadata image gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub replicas: Vec<BrokerId>,
    pub isr: Vec<BrokerId>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The only replica, leading in epoch 0.
    fn sole_leader() -> ReplicaState {
        ReplicaState {
            role: Role::Leader,
            ..ReplicaState::unassigned()
        }
    }

    fn b(ids: &[i32]) -> Vec<BrokerId> {
        ids.iter().map(|i| BrokerId(*i)).collect()
    }

    fn leader_of(isr: &[i32]) -> ReplicaState {
        let mut s = sole_leader();
        s.local = BrokerId(1);
        s.become_leader(
            Registration {
                leader_epoch: 1,
                partition_epoch: 1,
                replicas: b(&[1, 2, 3]),
                isr: b(isr),
            },
            100,
            1_000,
        );
        s
    }

    #[test]
    #[should_panic(expected = "partition epochs only grow")]
    fn a_registration_from_an_older_partition_epoch_is_refused() {
        let mut s = leader_of(&[1, 2, 3]);
        s.apply_registration(Registration {
            leader_epoch: 1,
            partition_epoch: 0,
            replicas: b(&[1, 2, 3]),
            isr: b(&[1, 2]),
        });
    }

    #[test]
    #[should_panic(expected = "a leader is in its ISR")]
    fn leading_outside_the_isr_is_refused() {
        leader_of(&[2, 3]);
    }

    #[test]
    #[should_panic(expected = "non-empty subset of the replicas")]
    fn an_isr_outside_the_replicas_is_refused() {
        leader_of(&[1, 4]);
    }

    #[test]
    fn the_high_watermark_is_the_smallest_log_end_of_the_isr() {
        let mut s = leader_of(&[1, 2, 3]);
        assert_eq!(s.high_watermark_candidate(120, 1), Some(-1));
        s.update_follower(BrokerId(2), 110, 120, 1_100);
        s.update_follower(BrokerId(3), 120, 120, 1_100);
        assert_eq!(s.high_watermark_candidate(120, 1), Some(110));
        assert_eq!(s.high_watermark_candidate(120, 3), Some(110));
    }

    #[test]
    fn min_insync_counts_at_most_the_partitions_replicas() {
        let mut s = leader_of(&[1, 2, 3]);
        s.update_follower(BrokerId(2), 110, 120, 1_100);
        s.update_follower(BrokerId(3), 120, 120, 1_100);
        assert_eq!(s.effective_min_insync(4), 3);
        assert_eq!(
            s.high_watermark_candidate(120, 4),
            Some(110),
            "4 asks for every replica of 3"
        );
        let two = leader_of(&[1, 2]);
        assert_eq!(two.high_watermark_candidate(120, 3), None);
        assert_eq!(sole_leader().effective_min_insync(2), 1);
    }

    #[test]
    fn an_isr_change_names_the_broker_epoch_each_follower_last_fetched_with() {
        let mut s = leader_of(&[1, 2]);
        assert!(s.update_follower_log_start(BrokerId(3), 0, 42));
        assert!(
            !s.update_follower_log_start(BrokerId(4), 0, 7),
            "not a replica"
        );
        assert_eq!(s.broker_epochs(&b(&[1, 2, 3])), vec![-1, -1, 42]);
    }

    #[test]
    fn a_follower_outside_the_isr_does_not_hold_the_high_watermark_back() {
        let mut s = leader_of(&[1, 2]);
        s.update_follower(BrokerId(2), 120, 120, 1_100);
        assert_eq!(s.high_watermark_candidate(120, 2), Some(120));
        assert_eq!(s.high_watermark_candidate(120, 3), None);
    }

    #[test]
    fn a_follower_joins_once_it_reaches_the_high_watermark_and_the_epoch_start() {
        let mut s = leader_of(&[1, 2]);
        s.update_follower(BrokerId(3), 90, 120, 1_100);
        assert_eq!(
            s.expanded_isr(BrokerId(3), 95),
            None,
            "below the epoch start"
        );
        s.update_follower(BrokerId(3), 110, 120, 1_200);
        assert_eq!(
            s.expanded_isr(BrokerId(3), 115),
            None,
            "below the high watermark"
        );
        assert_eq!(s.expanded_isr(BrokerId(3), 110), Some(b(&[1, 2, 3])));
        s.pending_isr = Some(b(&[1, 2, 3]));
        assert_eq!(
            s.expanded_isr(BrokerId(3), 110),
            None,
            "one change at a time"
        );
        assert_eq!(s.maximal_isr(), b(&[1, 2, 3]));
    }

    #[test]
    fn a_follower_that_stops_catching_up_leaves_the_isr_after_the_lag_time() {
        let mut s = leader_of(&[1, 2, 3]);
        s.update_follower(BrokerId(2), 100, 100, 2_000);
        s.update_follower(BrokerId(3), 100, 100, 2_000);
        // Broker 3 keeps fetching but never reaches the log end again.
        s.update_follower(BrokerId(2), 150, 150, 9_000);
        s.update_follower(BrokerId(3), 120, 150, 9_000);
        assert_eq!(s.shrunk_isr(150, 9_000, 10_000), None);
        assert_eq!(s.shrunk_isr(150, 12_001, 10_000), Some(b(&[1, 2])));
        // A fetch reaching the log end as it was at the previous fetch counts as caught up
        // at that previous fetch.
        s.update_follower(BrokerId(3), 150, 170, 12_500);
        assert_eq!(s.followers[&BrokerId(3)].last_caught_up_ms, 9_000);
    }

    #[test]
    fn a_follower_at_the_log_end_of_an_idle_partition_stays_in_the_isr() {
        let mut s = leader_of(&[1, 2]);
        s.update_follower(BrokerId(2), 100, 100, 2_000);
        // Nothing written since: the fetch session does not name the partition again.
        assert_eq!(s.shrunk_isr(100, 600_000, 10_000), None);
        assert_eq!(s.shrunk_isr(101, 600_000, 10_000), Some(b(&[1])));
    }

    #[test]
    fn the_low_watermark_is_the_smallest_log_start_of_the_isr() {
        let mut s = leader_of(&[1, 2]);
        assert_eq!(s.low_watermark(40), -1, "broker 2 has not fetched yet");
        assert!(s.update_follower_log_start(BrokerId(2), 30, 1));
        assert!(s.update_follower_log_start(BrokerId(3), 0, 1));
        assert_eq!(s.low_watermark(40), 30, "broker 3 is outside the ISR");
        assert!(!s.update_follower_log_start(BrokerId(4), 0, 1));
        assert_eq!(sole_leader().low_watermark(40), 40);
    }

    #[test]
    #[should_panic(expected = "leader epochs only grow")]
    fn an_older_leader_epoch_is_a_bug() {
        let mut s = leader_of(&[1, 2, 3]);
        s.apply_registration(Registration {
            leader_epoch: 0,
            partition_epoch: 2,
            replicas: b(&[1, 2, 3]),
            isr: b(&[1]),
        });
    }
}
