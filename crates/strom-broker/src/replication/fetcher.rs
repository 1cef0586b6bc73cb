//! Followers' fetchers, as Kafka's `ReplicaFetcherManager` / `ReplicaFetcherThread`: one
//! fetcher per source broker (`num.replica.fetchers` of them, a partition always on the
//! same one), each a single task with one strom-client connection that fetches all its
//! partitions in one Fetch (v15, `ReplicaState` naming this broker and its epoch),
//! appends what comes back with the leader's offsets, takes the leader's high watermark,
//! and truncates where the leader says the logs diverged (`DivergingEpoch`). There is no task or
//! request per partition, and after the first Fetch a fetcher works in an incremental
//! fetch session (KIP-227): it names only partitions whose position moved, and the leader
//! answers only for partitions with something new, so thousands of idle partitions cost
//! neither side anything per round trip.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::fetch_request::{
    FetchPartition, FetchTopic, ForgottenTopic, ReplicaState,
};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use strom_client::connection::{CallError, Connection};
use strom_metadata::BrokerId;
use strom_wire::FetchSessionPlanner;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::replication_config::ReplicationConfig;
use crate::BrokerState;
use strom_replica::partition::{FetchPosition, Partition};
use strom_replica::partition_watch::{ChangeSet, PartitionWatch};

/// The Fetch version followers send: the first with `ReplicaState` (KIP-903).
const FETCH_VERSION: i16 = 15;
/// How long a connection attempt, or a fetch with its wait on the leader, may take.
const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a partition waits after its leader first answered that the leadership is
/// moving (it has not applied the metadata this follower acts on yet, a few milliseconds
/// away) instead of `replica.fetch.backoff.ms`, which would hold back a new or newly led
/// partition's first acknowledgements for a second; doubled on each further refusal, up
/// to that backoff.
const LEADERSHIP_MOVING_BACKOFF: Duration = Duration::from_millis(20);

/// A followed partition: (topic, index).
type Key = (String, i32);
/// How a fetch names a partition: (topic id, index).
type FetchKey = (Uuid, i32);
/// The followed partitions by key.
type Followed = BTreeMap<Key, Arc<Partition>>;

/// What [`ReplicaFetcherManager::follow`] hands one fetcher.
#[derive(Debug, Default)]
struct Handoff {
    partitions: Mutex<Followed>,
    /// Bumped whenever `partitions` changes, so the fetcher compares the sets only then.
    generation: AtomicU64,
    changed: Notify,
}

/// One fetcher: the partitions it fetches from one source broker, and its task.
#[derive(Debug)]
struct Fetcher {
    handoff: Arc<Handoff>,
    task: JoinHandle<()>,
}

/// The fetchers of this broker, by (source broker, fetcher id).
#[derive(Debug, Default)]
pub struct ReplicaFetcherManager {
    fetchers: Mutex<BTreeMap<(BrokerId, usize), Fetcher>>,
}

impl ReplicaFetcherManager {
    /// Makes the fetchers follow exactly `followed` (each partition with its leader):
    /// partitions move between fetchers when their leader changes, fetchers start for new
    /// leaders and stop when they have nothing left to fetch.
    pub fn follow(&self, state: &Arc<BrokerState>, followed: Vec<(BrokerId, Arc<Partition>)>) {
        let fetchers_per_source = state.config.replication.num_replica_fetchers;
        let mut wanted: BTreeMap<(BrokerId, usize), Followed> = BTreeMap::new();
        for (leader, partition) in followed {
            let key = (partition.topic.clone(), partition.index);
            let id = fetcher_id(&key, fetchers_per_source);
            wanted
                .entry((leader, id))
                .or_default()
                .insert(key, partition);
        }
        let mut fetchers = self.fetchers.lock();
        fetchers.retain(|key, fetcher| {
            let keep = wanted.contains_key(key);
            if !keep {
                fetcher.task.abort();
            }
            keep
        });
        for (key, partitions) in wanted {
            match fetchers.get(&key) {
                Some(fetcher) => {
                    let handoff = &fetcher.handoff;
                    let mut current = handoff.partitions.lock();
                    let same = current.len() == partitions.len()
                        && current
                            .iter()
                            .zip(&partitions)
                            .all(|((a, pa), (b, pb))| a == b && Arc::ptr_eq(pa, pb));
                    if !same {
                        *current = partitions;
                        handoff.generation.fetch_add(1, Ordering::AcqRel);
                        handoff.changed.notify_one();
                    }
                }
                None => {
                    let handoff = Arc::new(Handoff {
                        partitions: Mutex::new(partitions),
                        generation: AtomicU64::new(1),
                        changed: Notify::new(),
                    });
                    let task = state.replication.runtime.spawn(run_fetcher(
                        state.clone(),
                        key.0,
                        handoff.clone(),
                    ));
                    tracing::info!(
                        source = key.0 .0,
                        fetcher = key.1,
                        "replica fetcher started"
                    );
                    fetchers.insert(key, Fetcher { handoff, task });
                }
            }
        }
    }

    /// Stops every fetcher (shutdown).
    pub fn stop_all(&self) {
        for (_, fetcher) in std::mem::take(&mut *self.fetchers.lock()) {
            fetcher.task.abort();
        }
    }
}

/// The fetcher a partition goes to (Kafka hashes the topic and partition).
fn fetcher_id(key: &Key, fetchers: usize) -> usize {
    let hash = key.0.bytes().fold(key.1 as u32, |h, b| {
        h.wrapping_mul(31).wrapping_add(u32::from(b))
    });
    hash as usize % fetchers.max(1)
}

/// One fetcher's loop: fetch every partition it follows from `source`, apply the answer,
/// repeat; back off `replica.fetch.backoff.ms` after a failure.
async fn run_fetcher(state: Arc<BrokerState>, source: BrokerId, handoff: Arc<Handoff>) {
    FetcherTask::new(state, source, handoff).run().await
}

/// What one fetcher keeps between its fetches (Kafka's `ReplicaFetcherThread`). Each
/// round costs what changed since the last: the partitions the last answer moved, those
/// whose watch fired (a new leader epoch, a deletion), those due again after a backoff,
/// and those handed over or taken away. An idle partition costs nothing.
struct FetcherTask {
    state: Arc<BrokerState>,
    source: BrokerId,
    handoff: Arc<Handoff>,
    /// The handoff's partitions as of `generation`.
    followed: Followed,
    generation: u64,
    /// Each followed partition's watch, and the set they mark.
    watches: HashMap<Key, Arc<PartitionWatch<Key>>>,
    changes: Arc<ChangeSet<Key>>,
    /// Partitions whose fetch position is looked up again before the next fetch.
    stale: HashSet<Key>,
    /// What the fetches ask of each partition, and the position each asks from.
    wanted: HashMap<FetchKey, FetchPartition>,
    positions: HashMap<FetchKey, (Arc<Partition>, FetchPosition)>,
    /// How each wanted partition is named in a fetch.
    fetch_keys: HashMap<Key, FetchKey>,
    /// The entries of `wanted` changed since the last fetch.
    updated: HashSet<FetchKey>,
    config: ReplicationConfig,
    backoff: Duration,
    client_id: String,
    connection: Option<Arc<Connection>>,
    /// Partitions held back after a failed fetch of theirs, until the instant given.
    delayed: BTreeMap<Key, Instant>,
    /// Successive "leadership moving" refusals of each partition, which its retry doubles on.
    refusals: HashMap<Key, u32>,
    session: FetchSessionPlanner<FetchKey, FetchPartition>,
    shutdown: watch::Receiver<bool>,
}

impl FetcherTask {
    fn new(state: Arc<BrokerState>, source: BrokerId, handoff: Arc<Handoff>) -> Self {
        let config = state.config.replication.clone();
        Self {
            backoff: Duration::from_millis(config.fetch_backoff_ms),
            client_id: format!("strom-replica-fetcher-{}", state.node_id()),
            shutdown: state.replication.shutdown.clone(),
            config,
            state,
            source,
            handoff,
            followed: Followed::new(),
            generation: 0,
            watches: HashMap::new(),
            changes: ChangeSet::new(),
            stale: HashSet::new(),
            wanted: HashMap::new(),
            positions: HashMap::new(),
            fetch_keys: HashMap::new(),
            updated: HashSet::new(),
            connection: None,
            delayed: BTreeMap::new(),
            refusals: HashMap::new(),
            session: FetchSessionPlanner::default(),
        }
    }

    async fn run(mut self) {
        while !*self.shutdown.borrow() {
            self.take_handoff();
            self.refresh_positions();
            if self.wanted.is_empty() {
                self.wait_for_partitions().await;
                continue;
            }
            if !self.connect().await {
                continue;
            }
            let request = self.fetch_request();
            let Some(response) = self.send(&request).await else {
                continue;
            };
            self.apply_response(response);
        }
    }

    /// Takes the partitions handed over since the last round: those added, replaced or
    /// taken away are looked up again.
    fn take_handoff(&mut self) {
        let generation = self.handoff.generation.load(Ordering::Acquire);
        if generation == self.generation {
            return;
        }
        self.generation = generation;
        let handed = self.handoff.partitions.lock().clone();
        for (key, p) in &self.followed {
            if !handed.get(key).is_some_and(|h| Arc::ptr_eq(h, p)) {
                self.stale.insert(key.clone());
            }
        }
        for (key, p) in &handed {
            if !self.followed.get(key).is_some_and(|f| Arc::ptr_eq(f, p)) {
                self.stale.insert(key.clone());
            }
        }
        self.followed = handed;
    }

    /// Looks up the position of every stale partition, of those whose watch fired and of
    /// those due again after a backoff.
    fn refresh_positions(&mut self) {
        let now = Instant::now();
        let stale = &mut self.stale;
        self.delayed.retain(|key, until| {
            let held = *until > now;
            if !held {
                stale.insert(key.clone());
            }
            held
        });
        self.stale.extend(self.changes.take());
        let planned = self.stale.len() as u64;
        self.state
            .metrics
            .fetcher_partitions_planned
            .fetch_add(planned, Ordering::Relaxed);
        for key in std::mem::take(&mut self.stale) {
            self.refresh(key);
        }
    }

    /// Looks up where partition `key` is fetched from now, if at all. A partition that
    /// cannot be asked for yet (its topic not hosted yet, its log offline) stays stale and
    /// is looked up again next round.
    fn refresh(&mut self, key: Key) {
        if let Some(fetch_key) = self.fetch_keys.remove(&key) {
            self.wanted.remove(&fetch_key);
            self.positions.remove(&fetch_key);
            self.updated.insert(fetch_key);
        }
        let Some(p) = self.followed.get(&key).cloned() else {
            self.watches.remove(&key);
            return;
        };
        if self.delayed.contains_key(&key) {
            return;
        }
        let changes = &self.changes;
        self.watches
            .entry(key.clone())
            .or_insert_with(|| changes.watch(key.clone()))
            .register(&p);
        // A partition whose leader moved away from `source` waits for `follow` to hand it
        // to the right fetcher. The topic id comes from the hosted topic: the metadata
        // image naming a new topic is published after its partitions are handed to the
        // fetchers. A deleted topic's partition (perhaps re-created under its name since)
        // is never fetched with another topic's id.
        let hosted = self.state.logs.topic(&p.topic).filter(|t| {
            t.partition(p.index)
                .is_some_and(|hosted| Arc::ptr_eq(&hosted, &p))
        });
        let (Some(topic), Ok(position)) = (hosted, p.follower_fetch_position()) else {
            self.stale.insert(key);
            return;
        };
        let Some(at) = position.filter(|at| at.leader == self.source) else {
            return;
        };
        let fetch = FetchPartition::default()
            .with_partition(p.index)
            .with_current_leader_epoch(at.leader_epoch)
            .with_fetch_offset(at.fetch_offset)
            .with_last_fetched_epoch(at.last_fetched_epoch)
            .with_log_start_offset(at.log_start_offset)
            .with_partition_max_bytes(self.config.fetch_max_bytes);
        let fetch_key = (topic.id, p.index);
        self.wanted.insert(fetch_key, fetch);
        self.positions.insert(fetch_key, (p, at));
        self.fetch_keys.insert(key, fetch_key);
        self.updated.insert(fetch_key);
    }

    /// Nothing to fetch: waits for new partitions, a watched one to change, the first
    /// held-back or stale one to be due, or shutdown.
    async fn wait_for_partitions(&mut self) {
        let wait = self.delayed.values().min().map_or(self.backoff, |due| {
            due.saturating_duration_since(Instant::now())
        });
        tokio::select! {
            _ = self.handoff.changed.notified() => {}
            _ = self.changes.changed() => {}
            _ = tokio::time::sleep(wait) => {}
            _ = self.shutdown.changed() => {}
        }
    }
    /// Connects to `source` on the inter-broker listener unless connected; false (after
    /// the backoff) when that fails or the image has no such endpoint.
    async fn connect(&mut self) -> bool {
        if self.connection.is_some() {
            return true;
        }
        let listener = &self.state.config.kraft.inter_broker_listener_name;
        let address = self
            .state
            .metadata
            .image()
            .brokers
            .get(&self.source)
            .and_then(|b| b.endpoint(listener))
            .map(|e| format!("{}:{}", e.host, e.port));
        if let Some(address) = address {
            let connect = Connection::connect(&address, &self.client_id, Arc::default());
            match tokio::time::timeout(IO_TIMEOUT, connect).await {
                Ok(Ok(c)) => {
                    self.connection = Some(c);
                    return true;
                }
                Ok(Err(e)) => {
                    tracing::debug!(source = self.source.0, %address, error = %e, "replica fetcher cannot connect")
                }
                Err(_) => {
                    tracing::debug!(source = self.source.0, %address, "replica fetcher connection timed out")
                }
            }
        }
        tokio::time::sleep(self.backoff).await;
        false
    }

    /// The next Fetch in this fetcher's session: the partitions whose position moved,
    /// and those forgotten since the last one.
    fn fetch_request(&mut self) -> FetchRequest {
        let broker_epoch = self.state.quorum.epoch.load(Ordering::Acquire);
        let updated = std::mem::take(&mut self.updated);
        let (session_epoch, send, forgotten) =
            self.session.plan_updates(&self.wanted, updated, true);
        self.state
            .metrics
            .fetcher_requests
            .fetch_add(1, Ordering::Relaxed);
        let mut topics: Vec<FetchTopic> = Vec::new();
        for (key, fetch) in send {
            match topics.last_mut() {
                Some(t) if t.topic_id == key.0 => t.partitions.push(fetch),
                _ => topics.push(
                    FetchTopic::default()
                        .with_topic_id(key.0)
                        .with_partitions(vec![fetch]),
                ),
            }
        }
        let mut forgotten_topics: Vec<ForgottenTopic> = Vec::new();
        for (topic_id, index) in forgotten {
            match forgotten_topics.last_mut() {
                Some(t) if t.topic_id == topic_id => t.partitions.push(index),
                _ => forgotten_topics.push(
                    ForgottenTopic::default()
                        .with_topic_id(topic_id)
                        .with_partitions(vec![index]),
                ),
            }
        }
        FetchRequest::default()
            .with_replica_state(
                ReplicaState::default()
                    .with_replica_id(kafka_protocol::messages::BrokerId(self.state.node_id()))
                    .with_replica_epoch(broker_epoch),
            )
            .with_max_wait_ms(self.max_wait_ms())
            .with_min_bytes(self.config.fetch_min_bytes)
            .with_max_bytes(self.config.fetch_response_max_bytes)
            .with_session_id(self.session.id)
            .with_session_epoch(session_epoch)
            .with_topics(topics)
            .with_forgotten_topics_data(forgotten_topics)
    }

    /// `replica.fetch.wait.max.ms`, or less: the long poll ends when the first partition
    /// held back is due again.
    fn max_wait_ms(&self) -> i32 {
        self.delayed
            .values()
            .min()
            .map_or(self.config.fetch_wait_max_ms, |due| {
                let due = due.saturating_duration_since(Instant::now()).as_millis() + 1;
                self.config
                    .fetch_wait_max_ms
                    .min(i32::try_from(due).unwrap_or(i32::MAX))
            })
    }

    /// Sends `request` and waits for its answer. `None` when there is none to apply: the
    /// fetch failed or was refused (after the backoff where one is due), or the broker
    /// shuts down.
    async fn send(&mut self, request: &FetchRequest) -> Option<FetchResponse> {
        let outcome = {
            let conn = self.connection.clone().expect("connected before a fetch");
            let fetch = async move {
                let answer = conn
                    .send(FETCH_VERSION, request, &[], Some(IO_TIMEOUT))
                    .await
                    .map_err(|e| CallError::Closed(e.to_string()))?;
                answer.await
            };
            // A partition handed to this fetcher while its fetch waits on the leader joins
            // the next fetch: the leader, which starts leading it from the same metadata,
            // answers the parked fetch at once (see `FetchSessionCache::expect`), so the
            // session and its connection are kept.
            tokio::select! {
                r = fetch => Some(r),
                _ = self.shutdown.changed() => None,
            }
        };
        let source = self.source.0;
        match outcome {
            None => {
                self.connection = None;
                self.session.reopen();
                None
            }
            Some(Ok(response)) if response.error_code == 0 => Some(response),
            Some(Ok(response)) => {
                tracing::info!(
                    source,
                    error = response.error_code,
                    "replica fetch refused; starting a new fetch session"
                );
                self.session.reset();
                tokio::time::sleep(self.backoff).await;
                None
            }
            Some(Err(CallError::TimedOut(_))) => {
                tracing::info!(source, "replica fetch timed out; reconnecting");
                self.connection = None;
                self.session.reset();
                None
            }
            Some(Err(e)) => {
                tracing::info!(source, error = %e, "replica fetch failed; reconnecting after replica.fetch.backoff.ms");
                self.connection = None;
                self.session.reset();
                tokio::time::sleep(self.backoff).await;
                None
            }
        }
    }

    /// Applies each partition's answer to its log, after which its position is looked up
    /// again; a partition that failed is held back (20 ms doubling while its leadership
    /// moves, else `replica.fetch.backoff.ms`).
    fn apply_response(&mut self, response: FetchResponse) {
        self.session.answered(response.session_id);
        for topic in response.responses {
            for data in topic.partitions {
                let fetch_key = (topic.topic_id, data.partition_index);
                let Some((p, at)) = self.positions.get(&fetch_key).cloned() else {
                    tracing::warn!(source = self.source.0, topic_id = %topic.topic_id, partition = data.partition_index, "the leader answered for a partition that was not asked for");
                    continue;
                };
                let code = data.error_code;
                let key = (p.topic.clone(), p.index);
                match apply_fetched(&p, &at, data) {
                    Ok(()) => {
                        self.refusals.remove(&key);
                    }
                    Err(reason) => self.hold_back(&p, key.clone(), code, &reason),
                }
                self.stale.insert(key);
            }
        }
    }

    /// Holds partition `p` back after its fetch failed with `code`.
    fn hold_back(&mut self, p: &Partition, key: Key, code: i16, reason: &str) {
        let partition = p.name();
        let source = self.source.0;
        let message = "replica fetch of a partition failed; retrying after a backoff (20 ms doubling while the leadership moves, else replica.fetch.backoff.ms)";
        let wait = if leadership_moving(code) {
            tracing::debug!(%partition, source, %reason, message);
            let refused = self.refusals.entry(key.clone()).or_insert(0u32);
            *refused += 1;
            LEADERSHIP_MOVING_BACKOFF
                .saturating_mul(1 << (*refused - 1).min(16))
                .min(self.backoff)
        } else {
            tracing::info!(%partition, source, %reason, message);
            self.backoff
        };
        self.delayed.insert(key, Instant::now() + wait);
    }
}

/// Whether a partition's error says only that its leadership is moving: the metadata
/// naming the new leader, or a new topic, is on its way to one side (a follower learns
/// of a new topic's partition from the same records as its leader, and may act on them
/// first). A broker taking over thousands of partitions has each of them refused this
/// way once; Kafka's fetcher logs these at debug.
fn leadership_moving(error_code: i16) -> bool {
    matches!(
        ResponseError::try_from_code(error_code),
        Some(
            ResponseError::NotLeaderOrFollower
                | ResponseError::FencedLeaderEpoch
                | ResponseError::UnknownLeaderEpoch
                | ResponseError::UnknownTopicId
                | ResponseError::UnknownTopicOrPartition
        )
    )
}

/// Applies one partition's part of a fetch response, sent from `at`, to the follower's
/// log. A stale answer (see [`Partition::append_as_follower`]) is dropped silently: the
/// next fetch starts from where the log is now.
fn apply_fetched(p: &Partition, at: &FetchPosition, data: PartitionData) -> Result<(), String> {
    match ResponseError::try_from_code(data.error_code) {
        None => {}
        Some(ResponseError::OffsetOutOfRange) => {
            let log_end = at.fetch_offset;
            if data.log_start_offset >= 0 && log_end < data.log_start_offset {
                let restarted = p
                    .truncate_fully_and_start_at(at, data.log_start_offset)
                    .map_err(|e| e.to_string())?;
                if restarted.is_some() {
                    tracing::info!(partition = %p.name(), log_end, leader_log_start = data.log_start_offset, "follower was behind the leader's log start; restarted the log there");
                }
                return Ok(());
            }
            if data.high_watermark >= 0 && log_end > data.high_watermark {
                let truncated = p
                    .truncate_to(at, data.high_watermark)
                    .map_err(|e| e.to_string())?;
                if truncated.is_some() {
                    tracing::warn!(partition = %p.name(), log_end, leader_high_watermark = data.high_watermark, "follower was ahead of the leader; truncated to the leader's high watermark");
                }
                return Ok(());
            }
            return Err(format!("offset {log_end} out of range on the leader"));
        }
        Some(e) => return Err(format!("{e:?}")),
    }
    if data.diverging_epoch.epoch >= 0 {
        let diverging = data.diverging_epoch;
        let truncated = p
            .truncate_diverged(at, diverging.epoch, diverging.end_offset)
            .map_err(|e| e.to_string())?;
        if let Some(offset) = truncated {
            tracing::info!(partition = %p.name(), offset, leader_epoch = diverging.epoch, leader_end_offset = diverging.end_offset, "truncated a diverged follower log");
        }
        return Ok(());
    }
    let records = data.records.unwrap_or_default();
    p.append_as_follower(at, &records, data.high_watermark, data.log_start_offset)
        .map(drop)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_always_goes_to_the_same_fetcher() {
        let key = ("orders".to_string(), 7);
        assert_eq!(fetcher_id(&key, 3), fetcher_id(&key, 3));
        assert!(fetcher_id(&key, 3) < 3);
        assert_eq!(fetcher_id(&key, 1), 0);
    }
}
