//! The client side of incremental fetch sessions (KIP-227), shared by the replica
//! fetchers and the native load generator: which partitions the next Fetch must name and
//! which it must forget, and what the answer's session id means. Pure: the caller builds
//! the request from the plan and hands back the answer's session id.

use std::collections::HashMap;
use std::hash::Hash;

/// A fetch session with one broker. `K` names a partition, `V` is what a request says
/// about it (offset, epochs, limits): a partition is sent again when its `V` changed.
#[derive(Debug, Clone)]
pub struct FetchSessionPlanner<K, V> {
    /// The session id (0: none).
    pub id: i32,
    /// The epoch the next incremental request carries.
    pub epoch: i32,
    /// The broker answered a request for a session with none: send sessionless fetches.
    pub unsupported: bool,
    /// What the session holds: each partition as last sent.
    sent: HashMap<K, V>,
    /// The next request closes session `id` and opens a new one ([`Self::reopen`]).
    reopening: bool,
}

impl<K, V> Default for FetchSessionPlanner<K, V> {
    fn default() -> Self {
        Self {
            id: 0,
            epoch: 0,
            unsupported: false,
            sent: HashMap::new(),
            reopening: false,
        }
    }
}

impl<K: Hash + Eq + Ord + Clone, V: PartialEq + Clone> FetchSessionPlanner<K, V> {
    /// The next request for `wanted`: its session epoch, the partitions to send (with
    /// their requests) and the partitions to forget, both sorted by key. Without a
    /// session every partition is sent — with epoch 0 to ask for one, or -1 (a
    /// sessionless fetch) when the broker or the Fetch version (`sessions` false) has
    /// none; within one, only partitions that are new or whose request changed. `wanted`
    /// becomes what the session holds, so only the partitions sent are copied.
    pub fn plan(&mut self, wanted: HashMap<K, V>, sessions: bool) -> (i32, Vec<(K, V)>, Vec<K>) {
        let full = self.id == 0 || !sessions || self.reopening;
        let epoch = match (full, self.unsupported || !sessions) {
            (false, _) => self.epoch,
            (true, true) => -1,
            (true, false) => 0,
        };
        let mut forgotten: Vec<K> = if full {
            Vec::new()
        } else {
            self.sent
                .keys()
                .filter(|p| !wanted.contains_key(p))
                .cloned()
                .collect()
        };
        let mut send: Vec<(K, V)> = wanted
            .iter()
            .filter(|(p, at)| full || self.sent.get(p) != Some(at))
            .map(|(p, at)| (p.clone(), at.clone()))
            .collect();
        send.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        forgotten.sort_unstable();
        self.sent = wanted;
        (epoch, send, forgotten)
    }

    /// [`Self::plan`] for a caller that knows which partitions may have changed since its
    /// last plan: `updated` names them (a partition no longer in `wanted` is forgotten).
    /// Within a session it costs what `updated` holds, not what `wanted` holds; without
    /// one it is a full [`Self::plan`] of `wanted`.
    pub fn plan_updates(
        &mut self,
        wanted: &HashMap<K, V>,
        updated: impl IntoIterator<Item = K>,
        sessions: bool,
    ) -> (i32, Vec<(K, V)>, Vec<K>) {
        if self.id == 0 || !sessions || self.reopening {
            return self.plan(wanted.clone(), sessions);
        }
        let mut send = Vec::new();
        let mut forgotten = Vec::new();
        for key in updated {
            match (wanted.get(&key), self.sent.get(&key)) {
                (Some(at), Some(sent)) if at == sent => {}
                (Some(at), _) => {
                    self.sent.insert(key.clone(), at.clone());
                    send.push((key, at.clone()));
                }
                (None, Some(_)) => {
                    self.sent.remove(&key);
                    forgotten.push(key);
                }
                (None, None) => {}
            }
        }
        send.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        send.dedup_by(|a, b| a.0 == b.0);
        forgotten.sort_unstable();
        forgotten.dedup();
        (self.epoch, send, forgotten)
    }

    /// Takes the session id of the answer to the last plan: a new session starts at epoch
    /// 1, an existing one moves on by one (wrapping to 1), and no session after asking
    /// for one means the broker grants none.
    pub fn answered(&mut self, session_id: i32) {
        if std::mem::take(&mut self.reopening) {
            self.id = session_id;
            self.epoch = 1;
        } else if session_id == 0 {
            if self.id == 0 {
                self.unsupported = true;
            }
            self.id = 0;
        } else if session_id == self.id {
            self.epoch = if self.epoch == i32::MAX {
                1
            } else {
                self.epoch + 1
            };
        } else {
            self.id = session_id;
            self.epoch = 1;
        }
    }

    /// Gives up on the answer to the last plan (its request was abandoned with its
    /// connection): the next plan is a full fetch that names the session with epoch 0,
    /// which closes it and opens a new one, so the broker does not keep the abandoned
    /// one until it expires.
    pub fn reopen(&mut self) {
        if self.id == 0 {
            self.reset();
        } else {
            self.reopening = true;
            self.sent.clear();
        }
    }

    /// Forgets the session (a session error, or a request whose answer never came): the
    /// next plan asks for a new one with a full fetch.
    pub fn reset(&mut self) {
        *self = Self {
            unsupported: self.unsupported,
            ..Self::default()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wanted(entries: &[(i32, i64)]) -> HashMap<i32, (i64, i32)> {
        entries.iter().map(|&(p, o)| (p, (o, 0))).collect()
    }

    /// A plan with the partitions sent named by key only.
    fn plan(
        session: &mut FetchSessionPlanner<i32, (i64, i32)>,
        entries: &[(i32, i64)],
        sessions: bool,
    ) -> (i32, Vec<i32>, Vec<i32>) {
        let (epoch, send, forgotten) = session.plan(wanted(entries), sessions);
        (epoch, send.into_iter().map(|(p, _)| p).collect(), forgotten)
    }

    #[test]
    fn a_granted_session_sends_only_what_moved_and_forgets_what_left() {
        let mut session = FetchSessionPlanner::default();
        assert_eq!(
            plan(&mut session, &[(0, 10), (1, 20)], true),
            (0, vec![0, 1], vec![])
        );
        session.answered(77);
        assert_eq!((session.id, session.epoch), (77, 1));
        assert_eq!(
            plan(&mut session, &[(0, 15), (1, 20)], true),
            (1, vec![0], vec![])
        );
        session.answered(77);
        assert_eq!(
            plan(&mut session, &[(0, 15), (2, 0)], true),
            (2, vec![2], vec![1])
        );
        session.answered(77);
        assert_eq!(session.epoch, 3);
    }

    #[test]
    fn a_broker_without_sessions_gets_full_sessionless_fetches() {
        let mut session = FetchSessionPlanner::default();
        assert_eq!(plan(&mut session, &[(0, 1)], true).0, 0);
        session.answered(0);
        assert!(session.unsupported);
        assert_eq!(
            plan(&mut session, &[(0, 1), (1, 1)], true),
            (-1, vec![0, 1], vec![])
        );
        let mut old = FetchSessionPlanner::default();
        assert_eq!(plan(&mut old, &[(0, 1)], false).0, -1);
    }

    #[test]
    fn a_lost_or_reset_session_starts_again_with_a_full_fetch() {
        let mut session = FetchSessionPlanner::default();
        plan(&mut session, &[(0, 1)], true);
        session.answered(5);
        session.answered(0);
        assert_eq!(session.id, 0);
        // The broker ended the session (it did not refuse sessions): ask for a new one.
        let (epoch, send, _) = plan(&mut session, &[(0, 9)], true);
        assert_eq!((epoch, send), (0, vec![0]));
        session.answered(6);
        plan(&mut session, &[(0, 9), (1, 1)], true);
        session.reset();
        let (epoch, send, forgotten) = plan(&mut session, &[(0, 9), (1, 1)], true);
        assert_eq!((epoch, send, forgotten), (0, vec![0, 1], vec![]));
    }

    #[test]
    fn an_abandoned_request_reopens_the_session_under_its_id() {
        let mut session = FetchSessionPlanner::default();
        plan(&mut session, &[(0, 1)], true);
        session.answered(5);
        plan(&mut session, &[(0, 2)], true);
        // That request's answer is never read: the next one closes session 5 and opens a
        // new one (id 5, epoch 0) with every partition.
        session.reopen();
        assert_eq!(session.id, 5);
        assert_eq!(
            plan(&mut session, &[(0, 2), (1, 0)], true),
            (0, vec![0, 1], vec![])
        );
        // The new session starts at epoch 1, even when the broker hands out the same id.
        session.answered(5);
        assert_eq!((session.id, session.epoch), (5, 1));
        assert_eq!(
            plan(&mut session, &[(0, 3), (1, 0)], true),
            (1, vec![0], vec![])
        );
        // Without a session to close, reopening is a reset.
        let mut none = FetchSessionPlanner::<i32, (i64, i32)>::default();
        none.reopen();
        assert_eq!(plan(&mut none, &[(0, 1)], true).0, 0);
    }

    #[test]
    fn planning_only_the_updated_partitions_plans_what_a_full_comparison_would() {
        let mut full = FetchSessionPlanner::default();
        let mut updates = FetchSessionPlanner::default();
        let first = wanted(&[(0, 10), (1, 20), (2, 30)]);
        assert_eq!(
            updates.plan_updates(&first, [], true),
            full.plan(first.clone(), true),
            "without a session every partition is sent"
        );
        full.answered(5);
        updates.answered(5);
        let second = wanted(&[(0, 15), (1, 20), (3, 40)]);
        let planned = updates.plan_updates(&second, [0, 1, 2, 3], true);
        assert_eq!(planned, full.plan(second.clone(), true));
        assert_eq!(
            (
                planned.1.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
                planned.2
            ),
            (vec![0, 3], vec![2])
        );
        full.answered(5);
        updates.answered(5);
        assert_eq!(
            updates.plan_updates(&second, [], true),
            (2, vec![], vec![]),
            "nothing updated: nothing sent"
        );
    }
}
