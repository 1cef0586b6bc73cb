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

/// A followed partition, keyed by (topic, index).
type Followed = BTreeMap<(String, i32), Arc<Partition>>;

/// One fetcher: the partitions it fetches from one source broker, and its task.
#[derive(Debug)]
struct Fetcher {
    partitions: Arc<Mutex<Followed>>,
    changed: Arc<Notify>,
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
                    let mut current = fetcher.partitions.lock();
                    let same = current.len() == partitions.len()
                        && current
                            .iter()
                            .zip(&partitions)
                            .all(|((a, pa), (b, pb))| a == b && Arc::ptr_eq(pa, pb));
                    if !same {
                        *current = partitions;
                        fetcher.changed.notify_one();
                    }
                }
                None => {
                    let partitions = Arc::new(Mutex::new(partitions));
                    let changed = Arc::new(Notify::new());
                    let task = state.replication.runtime.spawn(run_fetcher(
                        state.clone(),
                        key.0,
                        partitions.clone(),
                        changed.clone(),
                    ));
                    tracing::info!(
                        source = key.0 .0,
                        fetcher = key.1,
                        "replica fetcher started"
                    );
                    fetchers.insert(
                        key,
                        Fetcher {
                            partitions,
                            changed,
                            task,
                        },
                    );
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
fn fetcher_id(key: &(String, i32), fetchers: usize) -> usize {
    let hash = key.0.bytes().fold(key.1 as u32, |h, b| {
        h.wrapping_mul(31).wrapping_add(u32::from(b))
    });
    hash as usize % fetchers.max(1)
}

/// One fetcher's loop: fetch every partition it follows from `source`, apply the answer,
/// repeat; back off `replica.fetch.backoff.ms` after a failure.
async fn run_fetcher(
    state: Arc<BrokerState>,
    source: BrokerId,
    partitions: Arc<Mutex<Followed>>,
    changed: Arc<Notify>,
) {
    FetcherTask::new(state, source, partitions, changed)
        .run()
        .await
}

/// What one fetcher keeps between its fetches (Kafka's `ReplicaFetcherThread`).
struct FetcherTask {
    state: Arc<BrokerState>,
    source: BrokerId,
    /// The partitions `ReplicaFetcherManager::follow` hands this fetcher.
    partitions: Arc<Mutex<Followed>>,
    /// Notified when `partitions` changes.
    changed: Arc<Notify>,
    config: ReplicationConfig,
    backoff: Duration,
    client_id: String,
    connection: Option<Arc<Connection>>,
    /// Partitions held back after a failed fetch of theirs, until the instant given.
    delayed: BTreeMap<(String, i32), Instant>,
    /// Successive "leadership moving" refusals of each partition, which its retry doubles on.
    refusals: HashMap<(String, i32), u32>,
    session: FetchSessionPlanner<(Uuid, i32), FetchPartition>,
    shutdown: watch::Receiver<bool>,
}

/// The partitions one fetch asks for.
struct Round {
    /// Every partition the fetcher followed when the round was planned.
    followed: Vec<Arc<Partition>>,
    /// What the fetch asks of each partition, by (topic id, index).
    wanted: HashMap<(Uuid, i32), FetchPartition>,
    /// Each partition asked for and the position it was asked from.
    requested: BTreeMap<(Uuid, i32), (Arc<Partition>, FetchPosition)>,
}

impl FetcherTask {
    fn new(
        state: Arc<BrokerState>,
        source: BrokerId,
        partitions: Arc<Mutex<Followed>>,
        changed: Arc<Notify>,
    ) -> Self {
        let config = state.config.replication.clone();
        Self {
            backoff: Duration::from_millis(config.fetch_backoff_ms),
            client_id: format!("strom-replica-fetcher-{}", state.node_id()),
            shutdown: state.replication.shutdown.clone(),
            config,
            state,
            source,
            partitions,
            changed,
            connection: None,
            delayed: BTreeMap::new(),
            refusals: HashMap::new(),
            session: FetchSessionPlanner::default(),
        }
    }

    async fn run(mut self) {
        while !*self.shutdown.borrow() {
            let round = self.plan_round();
            if round.requested.is_empty() {
                self.wait_for_partitions().await;
                continue;
            }
            if !self.connect().await {
                continue;
            }
            let request = self.fetch_request(round.wanted);
            let Some(response) = self.send(&request, &round.followed).await else {
                continue;
            };
            self.apply_response(response, &round.requested);
        }
    }

    /// The partitions to fetch now: those that follow `source`, are not held back, and
    /// are still the hosted partition of their topic.
    fn plan_round(&mut self) -> Round {
        let followed: Vec<Arc<Partition>> = self.partitions.lock().values().cloned().collect();
        let now = Instant::now();
        self.delayed.retain(|_, until| *until > now);
        let mut wanted = HashMap::new();
        let mut requested = BTreeMap::new();
        for p in &followed {
            if self.delayed.contains_key(&(p.topic.clone(), p.index)) {
                continue;
            }
            // A partition whose leader moved away from `source` waits for `follow` to
            // hand it to the right fetcher. The topic id comes from the hosted topic: the
            // metadata image naming a new topic is published after its partitions are
            // handed to the fetchers.
            let Some(topic) = self.state.logs.topic(&p.topic).filter(|t| {
                t.partition(p.index)
                    .is_some_and(|hosted| Arc::ptr_eq(&hosted, p))
            }) else {
                // A deleted topic's partition (perhaps re-created under its name since)
                // is never fetched with another topic's id.
                continue;
            };
            let Ok(Some(at)) = p.follower_fetch_position() else {
                continue;
            };
            if at.leader != self.source {
                continue;
            }
            let fetch = FetchPartition::default()
                .with_partition(p.index)
                .with_current_leader_epoch(at.leader_epoch)
                .with_fetch_offset(at.fetch_offset)
                .with_last_fetched_epoch(at.last_fetched_epoch)
                .with_log_start_offset(at.log_start_offset)
                .with_partition_max_bytes(self.config.fetch_max_bytes);
            wanted.insert((topic.id, p.index), fetch);
            requested.insert((topic.id, p.index), (p.clone(), at));
        }
        Round {
            followed,
            wanted,
            requested,
        }
    }

    /// Nothing to fetch: waits for new partitions, the first held-back one to be due, or
    /// shutdown.
    async fn wait_for_partitions(&mut self) {
        let wait = self.delayed.values().min().map_or(self.backoff, |due| {
            due.saturating_duration_since(Instant::now())
        });
        tokio::select! {
            _ = self.changed.notified() => {}
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

    /// The Fetch for `wanted` in this fetcher's session: the partitions whose position
    /// moved, and those forgotten since the last one.
    fn fetch_request(&mut self, wanted: HashMap<(Uuid, i32), FetchPartition>) -> FetchRequest {
        let broker_epoch = self
            .state
            .quorum
            .epoch
            .load(std::sync::atomic::Ordering::Acquire);
        let (session_epoch, send, forgotten) = self.session.plan(wanted, true);
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
    /// fetch failed or was refused (after the backoff where one is due), the broker shuts
    /// down, or a partition not among `followed` arrived while it waited.
    async fn send(
        &mut self,
        request: &FetchRequest,
        followed: &[Arc<Partition>],
    ) -> Option<FetchResponse> {
        let outcome = {
            let conn = self.connection.clone().expect("connected before a fetch");
            let fetch = async move {
                let answer = conn
                    .send(FETCH_VERSION, request, &[], Some(IO_TIMEOUT))
                    .await
                    .map_err(|e| CallError::Closed(e.to_string()))?;
                answer.await
            };
            tokio::pin!(fetch);
            loop {
                tokio::select! {
                    r = &mut fetch => break Some(r),
                    _ = self.shutdown.changed() => break None,
                    // A partition handed to this fetcher while its fetch waits on the
                    // leader (up to `replica.fetch.wait.max.ms`) would otherwise join only
                    // the next one, holding back the acknowledgements of a new or newly led
                    // partition that long: the long poll is abandoned, with its connection
                    // and session.
                    _ = self.changed.notified() => if has_new(&self.partitions, followed) {
                        break None;
                    },
                }
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

    /// Applies each partition's answer to its log; a partition that failed is held back
    /// (20 ms doubling while its leadership moves, else `replica.fetch.backoff.ms`).
    fn apply_response(
        &mut self,
        response: FetchResponse,
        requested: &BTreeMap<(Uuid, i32), (Arc<Partition>, FetchPosition)>,
    ) {
        self.session.answered(response.session_id);
        for topic in response.responses {
            for data in topic.partitions {
                let Some((p, at)) = requested.get(&(topic.topic_id, data.partition_index)) else {
                    tracing::warn!(source = self.source.0, topic_id = %topic.topic_id, partition = data.partition_index, "the leader answered for a partition that was not asked for");
                    continue;
                };
                let code = data.error_code;
                let key = (p.topic.clone(), p.index);
                match apply_fetched(p, at, data) {
                    Ok(()) => {
                        self.refusals.remove(&key);
                    }
                    Err(reason) => self.hold_back(p, key, code, &reason),
                }
            }
        }
    }

    /// Holds partition `p` back after its fetch failed with `code`.
    fn hold_back(&mut self, p: &Partition, key: (String, i32), code: i16, reason: &str) {
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

/// Whether `partitions` now holds one that was not among `followed` when the fetch in
/// flight was built.
fn has_new(partitions: &Mutex<Followed>, followed: &[Arc<Partition>]) -> bool {
    let known: HashSet<*const Partition> = followed.iter().map(Arc::as_ptr).collect();
    partitions
        .lock()
        .values()
        .any(|p| !known.contains(&Arc::as_ptr(p)))
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
