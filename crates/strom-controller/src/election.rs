//! When a voter stands for election. openraft 0.9 ties two things to one setting: a
//! voter refuses every candidate for `election_timeout_max` after it last heard from its
//! leader (its lease), and its own timer stands after that lease plus a random
//! `election_timeout_min..max`. A lease of Kafka's `controller.quorum.election.timeout.ms`
//! (E, 1000 ms) makes every failover take more than E; a short lease with openraft's timer
//! makes a loaded two-core machine elect whenever a heartbeat is late. So openraft's timer
//! is off (`enable_elect: false`), its lease is short (3E/10), and this module decides, as
//! Kafka's voters do:
//!
//! * a voter that knows its leader stands after `controller.quorum.fetch.timeout.ms`
//!   without an AppendEntries from it (a paused or cut-off leader);
//! * when the leader's connection closes and its controller port then refuses
//!   connections, its process is gone (a kill -9 closes its sockets at once, a live
//!   process keeps its listener open however busy or paused it is), and so is a leader
//!   that resigned (Kafka's EndQuorumEpoch): the voter stands as soon as the other
//!   voters' leases on it have run out, and again after a random one to two leases
//!   until a leader speaks (a candidacy renews the candidate's own lease, in which it
//!   refuses other candidates: two survivors retrying every half lease, the one with the
//!   shorter log first, refused each other for ever);
//! * a voter that knows no leader (a new quorum, or after a candidacy that did not win)
//!   stands after a random E/2..E, Kafka's election backoff; a restarted voter, which
//!   knows no leader until one speaks, waits the fetch timeout first, so that a voter
//!   restarted into a busy quorum does not depose a leader whose heartbeats are late.
//!
//! Each waits a fifth of the lease longer per voter of lower id, so that two survivors
//! do not split the vote, and a voter whose vote moved (it voted for a candidate) waits
//! from then on. A voter whose candidacy a voter with a longer log refused waits a
//! further 2E before standing again, as openraft's own timer waits after "seeing a
//! greater log": openraft refuses a candidate with a shorter log before it looks at the
//! candidate's term, so the voter with the longer log never learns the other's term from
//! its requests, only from the answer to a candidacy of its own, and wins only with a
//! second candidacy above that term before the other stands again. Two survivors standing
//! at the same pace kept the same terms, each refused by the other — the one for its log,
//! the other for its term — for a minute (seen in `strom bench faults --network` when the
//! active controller was cut off right after taking over from a leader whose last entries
//! the third voter lacked); with a further E only, the longer log still lost the race
//! three times in a row after a kill -9 of the active controller, 5.8 s without one.
//!
//! The one voter of a single node's quorum stands at once, whether its log is new or
//! restarted: no other voter can lead or be deposed, so waiting only delays start-up.
//!
//! Only an AppendEntries openraft accepts counts as word from a leader: a deposed leader
//! that has not yet learnt of its successor is refused with the newer vote.
//!
//! Before each candidacy a voter asks the others for a pre-vote (Kafka's KIP-996), and
//! stands only if a majority, itself included, would vote for it: its log is at least as
//! long as theirs, none of them is the active controller, and none has heard from a
//! leader within the fetch timeout (within the lease, if it found that leader gone).
//! A candidacy raises the voter's term even when it cannot win, and a higher term
//! deposes any leader it reaches: a voter cut off from the others stood every few
//! seconds, and when the cut healed its term made the live leader step down for a new
//! election. A voter behind the others no longer raises the term past the one that can
//! win either, which leaves the 2E above for the rare candidacy whose pre-vote passed
//! before the logs moved.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::ServerState;
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::log_store::LogStore;
use crate::rpc::{Connection, Request, Response};
use crate::types::{LogId, Raft};

/// The quorum's timings, all derived from `controller.quorum.election.timeout.ms` and
/// `controller.quorum.fetch.timeout.ms`.
#[derive(Debug, Clone, Copy)]
pub struct ElectionTimings {
    /// E.
    pub election: Duration,
    /// openraft's heartbeat interval, which is also the time it gives an AppendEntries to
    /// answer: E/4. At E/10 (100 ms) a follower fsyncing its log on a disk busy with
    /// thousands of partitions' checkpoints missed it, the leader dropped the connection
    /// and backed off, and the quorum changed leaders over and over.
    pub heartbeat: Duration,
    /// openraft's `election_timeout_max`: how long after an AppendEntries a voter refuses
    /// candidates. Longer than the heartbeat, as openraft requires.
    pub lease: Duration,
    /// Silence from a known leader before standing.
    pub fetch_timeout: Duration,
}

impl ElectionTimings {
    pub fn new(election_timeout_ms: u64, fetch_timeout_ms: u64) -> Self {
        let election = election_timeout_ms.max(10);
        let heartbeat = (election / 4).max(1);
        let lease = (election * 3 / 10).max(heartbeat + 2);
        Self {
            election: Duration::from_millis(election),
            heartbeat: Duration::from_millis(heartbeat),
            lease: Duration::from_millis(lease),
            fetch_timeout: Duration::from_millis(fetch_timeout_ms.max(election)),
        }
    }

    /// openraft's settings: its own election timer off, the lease as its
    /// `election_timeout_max` (the minimum only has to lie between heartbeat and lease).
    pub fn raft_config(&self, config: openraft::Config) -> openraft::Config {
        let ms = |d: Duration| d.as_millis() as u64;
        openraft::Config {
            election_timeout_min: ms(self.heartbeat) + 1,
            election_timeout_max: ms(self.lease),
            heartbeat_interval: ms(self.heartbeat),
            enable_elect: false,
            ..config
        }
    }
}

/// One voter's view of its leader's liveness, and the task that stands for election.
pub struct Elections {
    node_id: i32,
    /// Every voter: id and controller endpoint.
    voters: Vec<(i32, String)>,
    timings: ElectionTimings,
    /// When the last AppendEntries arrived, and which leader sent it.
    contact: Mutex<(Instant, Option<u64>)>,
    /// A leader whose process was found gone, or that resigned.
    leader_gone: Mutex<Option<u64>>,
    /// Whether this voter's metadata log was empty at start (a new quorum).
    fresh: bool,
    /// A voter refused this one's candidacy for a longer log (set by the network).
    refused_for_log: Arc<AtomicBool>,
    /// This voter's metadata log, whose end a pre-vote carries.
    log: LogStore,
}

impl Elections {
    pub fn new(
        node_id: i32,
        voters: Vec<(i32, String)>,
        timings: ElectionTimings,
        fresh: bool,
        refused_for_log: Arc<AtomicBool>,
        log: LogStore,
    ) -> Self {
        Self {
            fresh,
            refused_for_log,
            log,
            node_id,
            voters,
            timings,
            contact: Mutex::new((Instant::now(), None)),
            leader_gone: Mutex::new(None),
        }
    }

    pub fn timings(&self) -> ElectionTimings {
        self.timings
    }

    /// An AppendEntries of `leader`, which arrived at `at`, was accepted as the current
    /// leader's.
    pub fn heard_from_leader(&self, leader: Option<u64>, at: Instant) {
        let mut contact = self.contact.lock();
        // AppendEntries are answered concurrently: one that arrived earlier but finished
        // later does not move the contact back.
        if at >= contact.0 {
            *contact = (at, leader);
        }
        drop(contact);
        // An election is over: a refusal seen in it says nothing about the next one.
        self.refused_for_log.store(false, Ordering::Relaxed);
    }

    /// Whether this voter grants a pre-vote to a candidate whose log ends at
    /// `last_log_id`, `active` telling whether it is the active controller itself. The
    /// candidate's log must be at least as long as this one's, and this voter must not
    /// lead with a majority behind it. A voter that has a leader refuses for the fetch
    /// timeout after its last word, as Kafka's voters do, unless it found that leader's
    /// process gone or it resigned: then, as with no leader known, once its lease has
    /// run out (when openraft would grant the vote itself). Refusing only for the lease
    /// let a voter coming back from a cut depose the leader whenever a heartbeat to the
    /// others was a little late.
    pub fn grants_pre_vote(&self, last_log_id: Option<LogId>, active: bool) -> bool {
        if active || last_log_id < self.log.last_log_id() {
            return false;
        }
        let (contact, sender) = *self.contact.lock();
        let silent = contact.elapsed();
        match sender {
            Some(leader) if *self.leader_gone.lock() != Some(leader) => {
                silent >= self.timings.fetch_timeout
            }
            _ => silent >= self.timings.lease,
        }
    }

    /// Asks every other voter for a pre-vote at once; whether a majority, this voter
    /// included, grants it. A voter that does not answer within the heartbeat interval
    /// (cut off, or gone) does not.
    async fn pre_vote(&self) -> bool {
        let majority = self.voters.len() / 2 + 1;
        let last_log_id = self.log.last_log_id();
        let timeout = self.timings.heartbeat;
        let mut asked = tokio::task::JoinSet::new();
        for (_, address) in self.voters.iter().filter(|(id, _)| *id != self.node_id) {
            let address = address.clone();
            asked.spawn(async move {
                let mut connection = Connection::connect(&address, timeout).await.ok()?;
                let request = Request::PreVote { last_log_id };
                match connection.call(&request, timeout).await {
                    Ok(Response::PreVote(granted)) => Some(granted),
                    _ => None,
                }
            });
        }
        let mut granted = 1;
        while let Some(answer) = asked.join_next().await {
            if matches!(answer, Ok(Some(true))) {
                granted += 1;
                if granted >= majority {
                    return true;
                }
            }
        }
        granted >= majority
    }

    /// `leader` resigned: it sends nothing after its last AppendEntries.
    pub fn leader_resigned(&self, leader: u64) {
        *self.leader_gone.lock() = Some(leader);
    }

    /// The connection a leader's AppendEntries came over has closed: finds out whether
    /// that leader's process is gone by connecting to its controller port.
    pub fn leader_connection_closed(self: &Arc<Self>) {
        let Some(leader) = self.contact.lock().1 else {
            return;
        };
        let Some((_, address)) = self.voters.iter().find(|(id, _)| *id as u64 == leader) else {
            return;
        };
        let address = address.clone();
        let elections = self.clone();
        tokio::spawn(async move {
            // A dying process closes its sockets one by one: the listener may still accept
            // for a moment after the replication connection closed, so a connection that
            // succeeds is asked again, until the leader speaks or its silence alone is
            // reason enough to stand (a loaded machine can notice the close late).
            let contact = elections.contact.lock().0;
            let interval = elections.timings.lease / 10;
            while elections.contact.lock().0 == contact
                && contact.elapsed() < elections.timings.fetch_timeout
            {
                let probe = tokio::time::timeout(
                    elections.timings.heartbeat,
                    tokio::net::TcpStream::connect(&address),
                )
                .await;
                if matches!(probe, Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused)
                {
                    tracing::info!(
                        node = elections.node_id,
                        leader,
                        "the active controller's connection closed and its port refuses connections: standing for election when the leases on it run out"
                    );
                    *elections.leader_gone.lock() = Some(leader);
                    return;
                }
                tokio::time::sleep(interval).await;
            }
        });
    }

    /// Waits a fifth of the lease per voter of lower id than this one.
    fn stagger(&self) -> Duration {
        let rank = self
            .voters
            .iter()
            .filter(|(id, _)| *id < self.node_id)
            .count() as u32;
        self.timings.lease / 5 * rank
    }

    /// The wait before standing again while the leader is gone: past this voter's own
    /// lease from its last candidacy, and random, so that survivors' candidacies drift
    /// apart.
    fn retry(&self) -> Duration {
        let lease = self.timings.lease.as_millis() as u64;
        Duration::from_millis(fastrand::u64(lease..=2 * lease))
    }

    fn backoff(&self) -> Duration {
        if self.is_only_voter() {
            return Duration::ZERO;
        }
        let election = self.timings.election.as_millis() as u64;
        Duration::from_millis(fastrand::u64(election / 2..=election))
    }

    /// Whether this voter is the whole quorum (a single node).
    pub fn is_only_voter(&self) -> bool {
        self.voters.len() == 1
    }

    /// Stands for election when one of the module's rules says so, until shutdown.
    pub async fn run(self: Arc<Self>, raft: Raft, mut shutdown: watch::Receiver<bool>) {
        let tick = (self.timings.lease / 10).max(Duration::from_millis(1));
        let stagger = self.stagger();
        let mut vote = raft.metrics().borrow().vote;
        // The later of this voter's last candidacy and its vote's last move.
        let mut since = Instant::now();
        let mut retry = self.retry();
        let mut backoff = if self.fresh || self.is_only_voter() {
            self.backoff()
        } else {
            self.timings.fetch_timeout
        };
        // The last word from a leader before the silence in which a refused pre-vote was
        // logged.
        let mut refused_in: Option<Instant> = None;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(tick) => {}
                _ = shutdown.changed() => return,
            }
            let (leading, current) = {
                let m = raft.metrics();
                let m = m.borrow();
                (m.state == ServerState::Leader, m.vote)
            };
            let now = Instant::now();
            if current != vote {
                vote = current;
                since = now;
            }
            if leading {
                self.refused_for_log.store(false, Ordering::Relaxed);
                continue;
            }
            let (contact, sender) = *self.contact.lock();
            let gone = sender.is_some() && *self.leader_gone.lock() == sender;
            let (due, why) = if gone {
                let leases_out = contact + self.timings.lease + self.timings.lease / 5;
                (
                    leases_out.max(since + retry),
                    "the active controller's process is gone",
                )
            } else if vote.is_committed() {
                (
                    contact.max(since) + self.timings.fetch_timeout,
                    "controller.quorum.fetch.timeout.ms passed without a word from it",
                )
            } else {
                (contact.max(since) + backoff, "no leader is known")
            };
            let defer = if self.refused_for_log.load(Ordering::Relaxed) {
                self.timings.election * 2
            } else {
                Duration::ZERO
            };
            if now < due + stagger + defer {
                continue;
            }
            self.refused_for_log.store(false, Ordering::Relaxed);
            since = now;
            retry = self.retry();
            backoff = self.backoff();
            let granted = tokio::select! {
                granted = self.pre_vote() => granted,
                _ = shutdown.changed() => return,
            };
            // The pre-vote took a round trip: a leader may have spoken, or won with this
            // voter's vote, meanwhile. Standing now would depose it.
            let (state, vote_now) = {
                let m = raft.metrics();
                let m = m.borrow();
                (m.state, m.vote)
            };
            if state == ServerState::Leader || vote_now != vote || self.contact.lock().0 != contact
            {
                continue;
            }
            let silent_ms = now.duration_since(contact).as_millis() as u64;
            if !granted {
                // Once per silence: a cut-off voter asks every second or two.
                if refused_in != Some(contact) {
                    tracing::info!(
                        node = self.node_id,
                        silent_ms,
                        "not standing for election ({why}): no majority of the voters granted a pre-vote"
                    );
                    refused_in = Some(contact);
                }
                continue;
            }
            tracing::info!(
                node = self.node_id,
                silent_ms,
                "standing for election: {why}"
            );
            if raft.trigger().elect().await.is_err() {
                return;
            }
        }
    }
}
