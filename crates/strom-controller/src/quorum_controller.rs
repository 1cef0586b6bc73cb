//! The quorum controller: one metadata voter. It owns the openraft node (log store,
//! state machine, network) and, while it is the active controller (the Raft leader), is
//! the single writer of the metadata log: every change is decided by the pure control
//! managers against the applied image, under one lock, and written as one Raft entry per
//! bounded batch, so two changes never decide against the same stale image.
//!
//! Kafka's quorum timeouts map onto openraft's as [`crate::election`] describes: a short
//! lease, openraft's own election timer off, and this voter standing for election when
//! its leader's process is gone, has been silent for `controller.quorum.fetch.timeout.ms`,
//! or is not known.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::raft::AppendEntriesResponse;
use openraft::{BasicNode, Config, ServerState, SnapshotPolicy};
use parking_lot::Mutex;
use strom_metadata::{BrokerId, MetadataImage, MetadataRecord};
use tokio::sync::watch;

use crate::cluster_control::{BrokerHeartbeats, Heartbeat, Registration};
use crate::election::{ElectionTimings, Elections};
use crate::log_store::LogStore;
use crate::network::Network;
use crate::replication_control::{self as replication, MAX_RECORDS_PER_BATCH};
use crate::rpc::{
    codes, AdminResult, AdminWrite, IsrChange, IsrChangeResult, MetadataFetched, QuorumInfo,
    ReplicaState, Request, Response, RpcError,
};
use crate::state_machine::StateMachine;
use crate::types::{MetadataBatch, Raft};

/// Producer ids handed to a broker at a time (Kafka's `ProducerIdsBlock` size).
pub const PRODUCER_ID_BLOCK: i32 = 1000;
/// Records one metadata fetch returns at most (beyond its first batch): a few MB, well
/// inside a broker's fetch timeout on a loaded machine.
const MAX_FETCH_RECORDS: usize = 20_000;
/// How many election timeouts a change may take to commit before it is given up.
const COMMIT_TIMEOUT_ELECTIONS: u64 = 3;

/// What a controller needs to run.
#[derive(Debug, Clone)]
pub struct QuorumConfig {
    pub node_id: i32,
    pub cluster_id: String,
    /// Every voter: id and controller endpoint `host:port`.
    pub voters: Vec<(i32, String)>,
    /// `<metadata.log.dir>/__cluster_metadata-0`.
    pub dir: PathBuf,
    pub election_timeout_ms: u64,
    pub fetch_timeout_ms: u64,
    pub broker_session_timeout_ms: u64,
    /// `leader.imbalance.check.interval.seconds` in ms, or `None` when
    /// `auto.leader.rebalance.enable` is false.
    pub leader_imbalance_check_interval_ms: Option<u64>,
    /// `unclean.leader.election.enable` of this node's server.properties: the default for
    /// topics that do not set it.
    pub unclean_leader_election_enable: bool,
    /// `unclean.leader.election.interval.ms`: the period of the check for partitions
    /// without a leader ([`replication::unclean_elections`]).
    pub unclean_leader_election_interval_ms: u64,
    /// `metadata.log.max.record.bytes.between.snapshots`: a snapshot is taken once the
    /// log holds this many bytes of applied entries after the last one.
    pub max_bytes_between_snapshots: u64,
    /// `metadata.log.max.snapshot.interval.ms`: a snapshot is taken once this long has
    /// passed since the last one with any applied entry after it (0: never by age).
    pub max_snapshot_interval_ms: u64,
    /// The incarnation id of the broker in this node's process, on a combined node.
    pub local_broker_incarnation: Option<uuid::Uuid>,
    /// `max.partitions.per.broker` (strom's own): placements that would give a broker
    /// more replicas are refused with POLICY_VIOLATION.
    pub max_partitions_per_broker: i64,
}

/// What the active controller tracks of each observer's fetches.
#[derive(Debug, Clone, Copy)]
struct ObserverFetch {
    offset: i64,
    at_ms: i64,
}

/// A running metadata voter.
pub struct QuorumController {
    config: QuorumConfig,
    raft: Raft,
    state: StateMachine,
    log: LogStore,
    network: Network,
    /// The term this voter leads and since when ([`Self::active_controller`]).
    leading_since: Mutex<Option<(u64, Instant)>>,
    /// The term in which this voter last became active ([`Self::activity`]).
    active_in_term: Mutex<Option<u64>>,
    heartbeats: Mutex<BrokerHeartbeats>,
    observers: Mutex<HashMap<i32, ObserverFetch>>,
    /// Held across deciding a change and writing it: the single writer.
    writer: tokio::sync::Mutex<()>,
    /// Where placement starts its round-robin, moved on by every creation.
    placement: AtomicUsize,
    /// When to stand for election (a follower's view of its leader).
    elections: Arc<Elections>,
    shutdown: watch::Sender<bool>,
}

impl std::fmt::Debug for QuorumController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuorumController")
            .field("node_id", &self.config.node_id)
            .finish()
    }
}

/// The most partitions one periodic election run changes (Kafka's controller elects at
/// most 1,000 preferred leaders per run): a rebalance of thousands of partitions reaches
/// the brokers in slices they apply while serving, not as one burst (AutoMQ#3509).
const MAX_ELECTIONS_PER_RUN: usize = 1000;

/// The elections one run writes (one record per partition), and whether any are left
/// for the next run.
fn first_elections(mut records: Vec<MetadataRecord>) -> (Vec<MetadataRecord>, bool) {
    let left = records.len() > MAX_ELECTIONS_PER_RUN;
    records.truncate(MAX_ELECTIONS_PER_RUN);
    (records, left)
}

fn not_controller(raft_leader: Option<u64>) -> Response {
    Response::NotController {
        leader: raft_leader.map(|l| l as i32),
    }
}

/// Why a change was not written.
#[derive(Debug)]
enum WriteError {
    /// Refused by the control managers, or not committed in time: a Kafka error.
    Refused(RpcError),
    /// This voter does not lead; the leader it knows, if any.
    NotController(Option<u64>),
}

impl WriteError {
    /// The response to a write request whose reply `wrap` builds, when it failed.
    fn respond<T>(self, wrap: impl FnOnce(Result<T, RpcError>) -> Response) -> Response {
        match self {
            WriteError::Refused(e) => wrap(Err(e)),
            WriteError::NotController(leader) => not_controller(leader),
        }
    }
}

/// The response to a write request: its reply, or why it failed.
fn respond<T>(
    result: Result<(T, i64), WriteError>,
    wrap: impl FnOnce(Result<T, RpcError>) -> Response,
) -> Response {
    match result {
        Ok((reply, _)) => wrap(Ok(reply)),
        Err(e) => e.respond(wrap),
    }
}

impl QuorumController {
    /// Opens the metadata log and starts this voter. A voter whose log is empty proposes
    /// the static voter set (`controller.quorum.voters`); every voter may, with the same
    /// set, and openraft keeps the first.
    pub async fn start(config: QuorumConfig) -> std::io::Result<Arc<Self>> {
        let unclean_leader_election = config.unclean_leader_election_enable;
        let log = LogStore::open(&config.dir)?;
        let state = StateMachine::open(&config.dir, &config.cluster_id)?;
        let timings = ElectionTimings::new(config.election_timeout_ms, config.fetch_timeout_ms);
        let raft_config = timings
            .raft_config(Config {
                cluster_name: config.cluster_id.clone(),
                install_snapshot_timeout: timings.fetch_timeout.as_millis() as u64,
                // Snapshots are taken by size and age (`snapshot_when_due`).
                snapshot_policy: SnapshotPolicy::Never,
                max_in_snapshot_log_to_keep: 1000,
                ..Default::default()
            })
            .validate()
            .map_err(std::io::Error::other)?;
        let network = Network::default();
        let fresh = log.last_log_id().is_none() && state.read(|a| a.last_applied.is_none());
        let raft = Raft::new(
            config.node_id as u64,
            Arc::new(raft_config),
            network.clone(),
            log.clone(),
            state.clone(),
        )
        .await
        .map_err(std::io::Error::other)?;
        if fresh {
            let members: BTreeMap<u64, BasicNode> = config
                .voters
                .iter()
                .map(|(id, addr)| (*id as u64, BasicNode::new(addr)))
                .collect();
            if let Err(e) = raft.initialize(members).await {
                tracing::debug!(error = %e, "metadata quorum already initialized");
            }
        }
        let elections = Arc::new(Elections::new(
            config.node_id,
            config.voters.clone(),
            timings,
            fresh,
            network.refused_for_log.clone(),
            log.clone(),
        ));
        let local_broker = config
            .local_broker_incarnation
            .map(|incarnation| (BrokerId(config.node_id), incarnation));
        let controller = Arc::new(Self {
            config,
            raft,
            state,
            log,
            network,
            leading_since: Mutex::new(None),
            active_in_term: Mutex::new(None),
            heartbeats: Mutex::new(BrokerHeartbeats::new(unclean_leader_election, local_broker)),
            observers: Mutex::new(HashMap::new()),
            writer: tokio::sync::Mutex::new(()),
            placement: AtomicUsize::new(0),
            elections,
            shutdown: watch::channel(false).0,
        });
        tokio::spawn(controller.clone().watch_leadership());
        tokio::spawn(
            controller
                .elections
                .clone()
                .run(controller.raft.clone(), controller.shutdown.subscribe()),
        );
        tokio::spawn(controller.clone().fence_expired_brokers());
        tokio::spawn(controller.clone().snapshot_when_due());
        let unclean_default = controller.config.unclean_leader_election_enable;
        tokio::spawn(controller.clone().elect_periodically(
            Duration::from_millis(controller.config.unclean_leader_election_interval_ms.max(1)),
            "leaders elected for partitions without one",
            move |image| replication::unclean_elections(image, unclean_default),
        ));
        if let Some(ms) = controller.config.leader_imbalance_check_interval_ms {
            tokio::spawn(controller.clone().elect_periodically(
                Duration::from_millis(ms.max(1)),
                "preferred leaders elected",
                replication::preferred_leaders,
            ));
        }
        Ok(controller)
    }

    pub fn node_id(&self) -> i32 {
        self.config.node_id
    }

    /// The applied metadata image.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.state.image()
    }

    /// The active controller as this voter knows it.
    pub fn leader(&self) -> Option<i32> {
        self.active_controller().map(|l| l as i32)
    }

    /// The active controller as this voter knows it: the leader openraft names, except
    /// that a leader no majority of the voters has acknowledged for 1.5 ×
    /// `controller.quorum.fetch.timeout.ms` names none (Kafka's check-quorum, the fix of
    /// the split brain KAFKA-15489). By then the other voters have elected another, and
    /// a leader cut off from them must stop answering brokers as if it were active, or
    /// a broker that reaches only it, or it first, never looks for the new one: its
    /// heartbeats would be answered from memory while the majority fences it. A leader
    /// no follower has acknowledged yet counts from when it took over, as Kafka's
    /// check-quorum timer starts with the leadership. The one voter of a single node is
    /// its own majority.
    fn active_controller(&self) -> Option<u64> {
        let m = self.raft.metrics();
        let m = m.borrow();
        if m.state != ServerState::Leader || self.elections.is_only_voter() {
            return m.current_leader;
        }
        let since = {
            let mut leading = self.leading_since.lock();
            match *leading {
                Some((term, at)) if term == m.current_term => at,
                _ => {
                    let now = Instant::now();
                    *leading = Some((m.current_term, now));
                    now
                }
            }
        };
        let unacknowledged = m
            .millis_since_quorum_ack
            .map_or_else(|| since.elapsed(), Duration::from_millis);
        let check_quorum = self.elections.timings().fetch_timeout * 3 / 2;
        if unacknowledged > check_quorum {
            None
        } else {
            m.current_leader
        }
    }

    /// `Ok` when this voter is the active controller ([`Self::active_controller`]), else
    /// the active controller it knows, for a NOT_CONTROLLER answer. The first caller to
    /// see it become active — in a new term, or again after a spell
    /// without its majority, during which it refused the brokers' heartbeats — starts
    /// every broker's session afresh before anything acts on it, so that no broker is
    /// fenced for the silence of a controller it could not reach (Kafka's new controller
    /// does the same: it cannot know when the brokers were last heard from).
    fn activity(&self) -> Result<(), Option<u64>> {
        let controller = self.active_controller();
        let active = controller == Some(self.config.node_id as u64);
        let (term, leading) = {
            let m = self.raft.metrics();
            let m = m.borrow();
            (m.current_term, m.state == ServerState::Leader)
        };
        let mut active_in_term = self.active_in_term.lock();
        if active && *active_in_term != Some(term) {
            *active_in_term = Some(term);
            self.heartbeats.lock().reset(&self.image(), Instant::now());
            tracing::info!(
                node = self.config.node_id,
                term,
                "this node is the active controller"
            );
        } else if !active && active_in_term.is_some() {
            *active_in_term = None;
            if leading {
                tracing::warn!(
                    node = self.config.node_id,
                    term,
                    "no majority of the voters acknowledged this leader within 1.5 x controller.quorum.fetch.timeout.ms: it stops acting as the active controller until one does"
                );
            }
        }
        if active {
            Ok(())
        } else {
            Err(controller)
        }
    }

    fn is_active(&self) -> bool {
        self.activity().is_ok()
    }

    /// Notices every change of leadership as it happens ([`Self::activity`]), not only
    /// when a request or a periodic task next asks.
    async fn watch_leadership(self: Arc<Self>) {
        let mut metrics = self.raft.metrics();
        let mut shutdown = self.shutdown.subscribe();
        loop {
            self.is_active();
            tokio::select! {
                changed = metrics.changed() => if changed.is_err() { return },
                _ = shutdown.changed() => return,
            }
        }
    }

    /// Fences brokers whose session expired, one at a time, while this voter leads.
    async fn fence_expired_brokers(self: Arc<Self>) {
        let session = Duration::from_millis(self.config.broker_session_timeout_ms);
        let tick =
            Duration::from_millis((self.config.broker_session_timeout_ms / 20).clamp(10, 250));
        let mut shutdown = self.shutdown.subscribe();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(tick) => {}
                _ = shutdown.changed() => return,
            }
            if !self.is_active() {
                continue;
            }
            let expired = self
                .heartbeats
                .lock()
                .expired(&self.image(), session, Instant::now());
            for broker in expired {
                let result = self
                    .write_with(|image, hb| {
                        let still = hb.expired(image, session, Instant::now()).contains(&broker);
                        Ok((
                            if still {
                                hb.fence(image, broker)
                            } else {
                                Vec::new()
                            },
                            (),
                        ))
                    })
                    .await;
                match result {
                    Ok(_) => tracing::warn!(
                        broker = broker.0,
                        session_ms = session.as_millis() as u64,
                        "fenced broker: no heartbeat within broker.session.timeout.ms"
                    ),
                    Err(e) => {
                        tracing::debug!(broker = broker.0, error = ?e, "could not fence broker")
                    }
                }
            }
        }
    }

    /// Decides a change with `decide` against the up-to-date image and writes its records
    /// in batches of at most `MAX_RECORDS_PER_BATCH`. Only the active controller writes;
    /// others answer NOT_CONTROLLER.
    async fn write_with<T>(
        &self,
        decide: impl FnOnce(
            &MetadataImage,
            &mut BrokerHeartbeats,
        ) -> Result<(Vec<MetadataRecord>, T), RpcError>,
    ) -> Result<(T, i64), WriteError> {
        // A leader cut off from its majority cannot commit: the change is given up after
        // a bound (its outcome is then unknown, as a Kafka client's timeout is) rather than
        // holding the single writer's lock until the quorum is back.
        let bound =
            Duration::from_millis(COMMIT_TIMEOUT_ELECTIONS * self.config.election_timeout_ms);
        let timed_out = || {
            WriteError::Refused(RpcError::new(
                codes::REQUEST_TIMED_OUT,
                format!("the metadata quorum did not commit the change within {bound:?}: it has no majority"),
            ))
        };
        self.activity().map_err(WriteError::NotController)?;
        let _writer = self.writer.lock().await;
        match tokio::time::timeout(bound, self.raft.ensure_linearizable()).await {
            Err(_) => return Err(timed_out()),
            Ok(Err(e)) => {
                return Err(WriteError::NotController(
                    e.forward_to_leader().and_then(|f| f.leader_id),
                ))
            }
            Ok(Ok(_)) => {}
        }
        let image = self.image();
        let (records, reply) = {
            let mut hb = self.heartbeats.lock();
            decide(&image, &mut hb)
        }
        .map_err(WriteError::Refused)?;
        let mut offset = image.offset;
        for chunk in records.chunks(MAX_RECORDS_PER_BATCH) {
            match tokio::time::timeout(bound, self.raft.client_write(MetadataBatch(chunk.to_vec())))
                .await
            {
                Err(_) => return Err(timed_out()),
                Ok(Ok(written)) => offset = written.log_id.index as i64,
                Ok(Err(e)) => {
                    return Err(match e.forward_to_leader() {
                        Some(f) => WriteError::NotController(f.leader_id),
                        None => WriteError::Refused(RpcError::new(
                            codes::UNKNOWN_SERVER_ERROR,
                            e.to_string(),
                        )),
                    })
                }
            }
        }
        Ok((reply, offset))
    }

    /// Waits until this voter is the active controller; `false` after `timeout`.
    pub async fn wait_until_active(&self, timeout: Duration) -> bool {
        let mut metrics = self.raft.metrics();
        let wait = async {
            while !self.is_active() {
                if metrics.changed().await.is_err() {
                    return false;
                }
            }
            true
        };
        tokio::time::timeout(timeout, wait).await.unwrap_or(false)
    }

    /// Writes the records `decide` makes of the current image, as the active controller:
    /// records that come from outside the metadata log (Kafka's bootstrap records, or
    /// what an earlier release kept in files of its own), decided against the image so
    /// that writing them again after a crash adds only what is missing. Returns the
    /// offset of the last record written.
    pub async fn write_bootstrap(
        &self,
        decide: impl FnOnce(&MetadataImage) -> Vec<MetadataRecord>,
    ) -> Result<i64, String> {
        match self.write_with(|image, _| Ok((decide(image), ()))).await {
            Ok(((), offset)) => Ok(offset),
            Err(WriteError::NotController(leader)) => Err(format!(
                "this voter is not the active controller (the active one: {leader:?})"
            )),
            Err(WriteError::Refused(e)) => Err(e.message),
        }
    }

    fn check_cluster(&self, cluster_id: &str) -> Result<(), RpcError> {
        if cluster_id != self.config.cluster_id {
            return Err(RpcError::new(
                codes::INCONSISTENT_CLUSTER_ID,
                format!(
                    "The cluster id {cluster_id} in the request does not match this cluster's {}.",
                    self.config.cluster_id
                ),
            ));
        }
        Ok(())
    }

    /// AlterPartition (56) from broker `broker_id` in its incarnation `broker_epoch`: the
    /// proposed ISRs, each checked against the partition's registration (leader and
    /// partition epochs as compare-and-set) and written if valid. A voter that does not
    /// lead answers NOT_CONTROLLER, as Kafka's controller does.
    pub async fn alter_partition(
        &self,
        broker_id: BrokerId,
        broker_epoch: i64,
        partitions: Vec<IsrChange>,
    ) -> Result<Vec<IsrChangeResult>, RpcError> {
        let result = self
            .write_with(|image, _| {
                match image.brokers.get(&broker_id) {
                    Some(b) if b.epoch == broker_epoch && !b.fenced => {}
                    _ => {
                        return Err(RpcError::new(
                            codes::STALE_BROKER_EPOCH,
                            format!(
                                "Broker {} with epoch {broker_epoch} is not a registered, unfenced broker.",
                                broker_id.0
                            ),
                        ))
                    }
                }
                Ok(replication::alter_partition(image, broker_id, &partitions))
            })
            .await;
        match result {
            Ok((results, _)) => Ok(results),
            Err(WriteError::Refused(e)) => Err(e),
            Err(WriteError::NotController(leader)) => Err(RpcError::new(
                codes::NOT_CONTROLLER,
                match leader {
                    Some(l) => format!("This controller is not active; controller {l} is."),
                    None => "This controller is not active.".to_string(),
                },
            )),
        }
    }

    /// Answers one request of the controller listener.
    pub async fn handle(self: &Arc<Self>, request: Request) -> Response {
        match request {
            Request::AppendEntries(r) => {
                let arrived = Instant::now();
                let sender = r.vote.leader_id().voted_for();
                let response = self.raft.append_entries(r).await;
                // A deposed leader that has not yet learnt of its successor still sends
                // AppendEntries, and is refused with the newer vote: it is no leader to
                // wait for. Counted as contact, it made a voter whose leader had just been
                // killed wait the whole fetch timeout for the deposed one instead.
                if matches!(&response, Ok(r) if !matches!(r, AppendEntriesResponse::HigherVote(_)))
                {
                    self.elections.heard_from_leader(sender, arrived);
                }
                Response::AppendEntries(response.map_err(|e| e.to_string()))
            }
            Request::Vote(r) => Response::Vote(self.raft.vote(r).await.map_err(|e| e.to_string())),
            Request::InstallSnapshot(r) => Response::InstallSnapshot(
                self.raft
                    .install_snapshot(r)
                    .await
                    .map_err(|e| e.to_string()),
            ),
            Request::EndQuorumEpoch => {
                if let Some(leader) = self.raft.metrics().borrow().current_leader {
                    self.elections.leader_resigned(leader);
                }
                Response::EndQuorumEpoch
            }
            Request::PreVote { last_log_id } => Response::PreVote(
                self.elections
                    .grants_pre_vote(last_log_id, self.is_active()),
            ),
            Request::FetchMetadata {
                cluster_id,
                broker_id,
                offset,
                max_wait_ms,
            } => Response::FetchMetadata(match self.check_cluster(&cluster_id) {
                Err(e) => Err(e),
                Ok(()) => Ok(self.fetch_metadata(broker_id, offset, max_wait_ms).await),
            }),
            Request::DescribeQuorum => self.describe_quorum(),
            other => self.handle_write(other).await,
        }
    }

    async fn handle_write(self: &Arc<Self>, request: Request) -> Response {
        if let Err(controller) = self.activity() {
            return not_controller(controller);
        }
        match request {
            Request::BrokerRegistration {
                cluster_id,
                broker_id,
                incarnation_id,
                endpoints,
                rack,
            } => {
                if let Err(e) = self.check_cluster(&cluster_id) {
                    return Response::BrokerRegistration(Err(e));
                }
                let session = Duration::from_millis(self.config.broker_session_timeout_ms);
                let registration = Registration {
                    broker_id,
                    incarnation_id,
                    endpoints,
                    rack,
                };
                let result = self
                    .write_with(|image, hb| {
                        Ok((
                            hb.register(image, &registration, session, Instant::now())?,
                            (),
                        ))
                    })
                    .await;
                match result {
                    Ok((_, offset)) => Response::BrokerRegistration(Ok(offset)),
                    Err(e) => e.respond(Response::BrokerRegistration),
                }
            }
            Request::BrokerHeartbeat {
                cluster_id,
                broker_id,
                broker_epoch,
                current_metadata_offset,
                want_fence,
                want_shut_down,
                offline_replicas,
            } => {
                if let Err(e) = self.check_cluster(&cluster_id) {
                    return Response::BrokerHeartbeat(Err(e));
                }
                let beat = Heartbeat {
                    broker_id,
                    broker_epoch,
                    current_metadata_offset,
                    want_fence,
                    want_shut_down,
                    offline_replicas,
                };
                let applied = self.applied_offsets();
                let first = self.heartbeats.lock().heartbeat(
                    &self.image(),
                    &beat,
                    &applied,
                    Instant::now(),
                );
                match first {
                    Err(e) => Response::BrokerHeartbeat(Err(e)),
                    Ok((records, reply)) if records.is_empty() => {
                        Response::BrokerHeartbeat(Ok(reply))
                    }
                    Ok(_) => respond(
                        self.write_with(|image, hb| {
                            hb.heartbeat(image, &beat, &applied, Instant::now())
                        })
                        .await,
                        Response::BrokerHeartbeat,
                    ),
                }
            }
            Request::AllocateProducerIds {
                cluster_id,
                broker_id,
                broker_epoch,
            } => {
                if let Err(e) = self.check_cluster(&cluster_id) {
                    return Response::AllocateProducerIds(Err(e));
                }
                let result = self
                    .write_with(|image, _| {
                        match image.brokers.get(&broker_id) {
                            Some(b) if b.epoch == broker_epoch => {}
                            _ => {
                                return Err(RpcError::new(
                                    codes::STALE_BROKER_EPOCH,
                                    format!(
                                        "Broker {} with epoch {broker_epoch} is not registered.",
                                        broker_id.0
                                    ),
                                ))
                            }
                        }
                        let first = image.next_producer_id;
                        let record = MetadataRecord::ProducerIds {
                            broker_id,
                            broker_epoch,
                            next_producer_id: first + i64::from(PRODUCER_ID_BLOCK),
                        };
                        Ok((vec![record], (first, PRODUCER_ID_BLOCK)))
                    })
                    .await;
                respond(result, Response::AllocateProducerIds)
            }
            Request::Admin { cluster_id, write } => {
                if let Err(e) = self.check_cluster(&cluster_id) {
                    return Response::Admin(Err(e));
                }
                match self.admin(write).await {
                    Ok(result) => Response::Admin(Ok(result)),
                    Err(e) => e.respond(Response::Admin),
                }
            }
            other => Response::Admin(Err(RpcError::new(
                codes::INVALID_REQUEST,
                format!("unexpected request {other:?}"),
            ))),
        }
    }

    async fn admin(&self, write: AdminWrite) -> Result<(AdminResult, i64), WriteError> {
        let start = self.placement.fetch_add(1, Ordering::Relaxed);
        match write {
            AdminWrite::CreateTopics {
                topics,
                validate_only,
            } => {
                self.write_with(|image, _| {
                    let (records, results) = replication::create_topics(
                        image,
                        &topics,
                        start,
                        self.config.max_partitions_per_broker,
                    );
                    Ok((
                        if validate_only { Vec::new() } else { records },
                        AdminResult::CreateTopics(results),
                    ))
                })
                .await
            }
            AdminWrite::CreatePartitions {
                topic,
                count,
                assignments,
                validate_only,
            } => {
                self.write_with(|image, _| {
                    Ok(
                        match replication::create_partitions(
                            image,
                            &topic,
                            count,
                            &assignments,
                            start,
                            self.config.max_partitions_per_broker,
                        ) {
                            Ok(records) => (
                                if validate_only { Vec::new() } else { records },
                                AdminResult::CreatePartitions(Ok(())),
                            ),
                            Err(e) => (Vec::new(), AdminResult::CreatePartitions(Err(e))),
                        },
                    )
                })
                .await
            }
            AdminWrite::DeleteTopics { names } => {
                self.write_with(|image, _| {
                    let (records, results) = replication::delete_topics(image, &names);
                    Ok((records, AdminResult::DeleteTopics(results)))
                })
                .await
            }
            AdminWrite::AlterConfigs {
                resource,
                changes,
                replace,
                validate_only,
            } => {
                self.write_with(|image, _| {
                    Ok(
                        match replication::alter_configs(image, &resource, &changes, replace) {
                            Ok(records) => (
                                if validate_only { Vec::new() } else { records },
                                AdminResult::AlterConfigs(Ok(())),
                            ),
                            Err(e) => (Vec::new(), AdminResult::AlterConfigs(Err(e))),
                        },
                    )
                })
                .await
            }
            AdminWrite::ElectLeaders {
                unclean,
                partitions,
            } => {
                self.write_with(|image, _| {
                    let (records, results) =
                        replication::elect_leaders(image, unclean, partitions.as_deref());
                    Ok((records, AdminResult::ElectLeaders(results)))
                })
                .await
            }
            AdminWrite::UnregisterBroker { broker_id } => {
                self.write_with(|image, hb| {
                    Ok(match hb.unregister(image, broker_id) {
                        Ok(records) => (records, AdminResult::UnregisterBroker(Ok(()))),
                        Err(e) => (Vec::new(), AdminResult::UnregisterBroker(Err(e))),
                    })
                })
                .await
            }
        }
    }

    /// Every `interval` while this voter leads, writes the elections `elect` finds in
    /// the image — the periodic checks of Kafka's controller: preferred leaders every
    /// `leader.imbalance.check.interval.seconds` (`auto.leader.rebalance.enable`), and
    /// leaders for partitions without one every `unclean.leader.election.interval.ms`, so
    /// a topic that allows unclean election after its ISR died is led again without a
    /// broker having to re-register.
    ///
    /// A run elects at most [`MAX_ELECTIONS_PER_RUN`] partitions and the next one follows
    /// at once while any are left, as Kafka's controller does.
    async fn elect_periodically(
        self: Arc<Self>,
        interval: Duration,
        what: &'static str,
        elect: impl Fn(&MetadataImage) -> Vec<MetadataRecord> + Send + 'static,
    ) {
        let mut shutdown = self.shutdown.subscribe();
        let mut more = false;
        loop {
            let pause = if more { Duration::ZERO } else { interval };
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = shutdown.changed() => return,
            }
            more = false;
            if !self.is_active() {
                continue;
            }
            let result = self
                .write_with(|image, _| {
                    let (records, left) = first_elections(elect(image));
                    let elected = records.len();
                    Ok((records, (elected, left)))
                })
                .await;
            if let Ok(((elected, left), _)) = result {
                more = left;
                if elected > 0 {
                    tracing::info!(partitions = elected, more_left = left, "{what}");
                }
            }
        }
    }

    /// Takes a snapshot of the applied image, as Kafka's snapshot generator does, once
    /// the log holds `metadata.log.max.record.bytes.between.snapshots` of applied
    /// entries after the last snapshot, or `metadata.log.max.snapshot.interval.ms` has
    /// passed since it with anything applied after it. Every voter snapshots its own
    /// image; openraft then purges the log before it (keeping the last 1,000 entries
    /// for followers a little behind). A count of entries, openraft's own policy, would
    /// snapshot a log of large batches (seed 003's topic creations) too rarely and one
    /// of small ones (heartbeat changes) too often.
    async fn snapshot_when_due(self: Arc<Self>) {
        let mut shutdown = self.shutdown.subscribe();
        let max_age = Duration::from_millis(self.config.max_snapshot_interval_ms);
        let tick = if max_age.is_zero() {
            Duration::from_millis(250)
        } else {
            Duration::from_millis(250).min(max_age)
        };
        let mut snapshot_index = self.raft.metrics().borrow().snapshot.map(|l| l.index);
        let mut taken_at = Instant::now();
        // A snapshot asked for and not yet taken, and when it was asked for.
        let mut asked: Option<Instant> = None;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(tick) => {}
                _ = shutdown.changed() => return,
            }
            let (snapshot, applied) = {
                let m = self.raft.metrics();
                let m = m.borrow();
                (m.snapshot.map(|l| l.index), m.last_applied.map(|l| l.index))
            };
            if snapshot != snapshot_index {
                snapshot_index = snapshot;
                taken_at = Instant::now();
                asked = None;
            }
            let Some(applied) = applied.filter(|a| Some(*a) > snapshot) else {
                continue;
            };
            if asked.is_some_and(|at| at.elapsed() < self.elections.timings().fetch_timeout) {
                continue;
            }
            let bytes = self.log.bytes_between(snapshot, applied);
            let by_size = bytes >= self.config.max_bytes_between_snapshots;
            let by_age = !max_age.is_zero() && taken_at.elapsed() >= max_age;
            if by_size || by_age {
                tracing::debug!(bytes, applied, by_size, "taking a metadata snapshot");
                if self.raft.trigger().snapshot().await.is_err() {
                    return;
                }
                asked = Some(Instant::now());
            }
        }
    }

    /// The metadata offset each broker last fetched from (what it has applied), as its
    /// metadata fetches to this controller said.
    fn applied_offsets(&self) -> HashMap<BrokerId, i64> {
        self.observers
            .lock()
            .iter()
            .map(|(id, fetch)| (BrokerId(*id), fetch.offset))
            .collect()
    }

    /// An observer's fetch: what it misses after `offset`, waiting up to `max_wait_ms`
    /// for something new when it has everything.
    async fn fetch_metadata(
        &self,
        broker: BrokerId,
        offset: i64,
        max_wait_ms: u64,
    ) -> MetadataFetched {
        self.observers.lock().insert(
            broker.0,
            ObserverFetch {
                offset,
                at_ms: strom_wire::now_ms(),
            },
        );
        let mut applied = self.state.subscribe();
        let deadline = tokio::time::Instant::now() + Duration::from_millis(max_wait_ms.min(30_000));
        loop {
            if let Some(delta) = self
                .state
                .read(|a| a.delta_since(offset, MAX_FETCH_RECORDS))
            {
                return MetadataFetched {
                    leader_id: self.leader().unwrap_or(-1),
                    applied_offset: self.state.read(|a| a.offset()),
                    delta: Some(delta),
                };
            }
            tokio::select! {
                changed = applied.changed() => if changed.is_err() { break },
                _ = tokio::time::sleep_until(deadline) => break,
            }
        }
        MetadataFetched {
            leader_id: self.leader().unwrap_or(-1),
            applied_offset: self.state.read(|a| a.offset()),
            delta: None,
        }
    }

    /// DescribeQuorum, from the active controller's view of replication.
    fn describe_quorum(&self) -> Response {
        if let Err(controller) = self.activity() {
            return not_controller(controller);
        }
        let m = self.raft.metrics().borrow().clone();
        let leo = m.last_log_index.map_or(0, |i| i as i64 + 1);
        let hw = m.last_applied.map_or(0, |l| l.index as i64 + 1);
        let now = strom_wire::now_ms();
        let acks = self.network.acks.lock().clone();
        let matched = m.replication.clone().unwrap_or_default();
        let voter_ids: BTreeSet<u64> = m.membership_config.membership().voter_ids().collect();
        let voters = voter_ids
            .iter()
            .map(|id| {
                if *id == self.config.node_id as u64 {
                    ReplicaState {
                        replica_id: *id as i32,
                        log_end_offset: leo,
                        last_fetch_timestamp: now,
                        last_caught_up_timestamp: now,
                    }
                } else {
                    let end = matched
                        .get(id)
                        .cloned()
                        .flatten()
                        .map_or(-1, |l| l.index as i64 + 1);
                    let at = acks.get(id).copied().unwrap_or(-1);
                    ReplicaState {
                        replica_id: *id as i32,
                        log_end_offset: end,
                        last_fetch_timestamp: at,
                        last_caught_up_timestamp: if end >= leo { at } else { -1 },
                    }
                }
            })
            .collect();
        let observers = self
            .observers
            .lock()
            .iter()
            .filter(|(id, _)| !voter_ids.contains(&(**id as u64)))
            .map(|(id, f)| ReplicaState {
                replica_id: *id,
                log_end_offset: f.offset + 1,
                last_fetch_timestamp: f.at_ms,
                last_caught_up_timestamp: if f.offset + 1 >= hw { f.at_ms } else { -1 },
            })
            .collect();
        Response::DescribeQuorum(Ok(QuorumInfo {
            leader_id: self.config.node_id,
            leader_epoch: m.current_term as i32,
            high_watermark: hw,
            voters,
            observers,
            voter_endpoints: self.config.voters.clone(),
        }))
    }

    /// The connection the leader replicated over has closed: if its process is gone (a
    /// kill -9 closes its sockets at once), this voter stands for election as soon as
    /// the other voters' leases on it run out ([`crate::election`]).
    pub fn leader_connection_closed(&self) {
        if self.raft.metrics().borrow().state != ServerState::Leader {
            self.elections.leader_connection_closed();
        }
    }

    /// Leaves the quorum for a shutdown. An active controller first tells the most
    /// caught-up follower that it resigns (Kafka's EndQuorumEpoch), so that it stands for
    /// election as soon as the other voters' leases on this leader have run out instead of
    /// after `controller.quorum.fetch.timeout.ms`. It does not wait for the outcome:
    /// openraft 0.9 has no leadership transfer, and staying in the quorum would only
    /// extend the leases.
    pub async fn shutdown(&self) {
        let _ = self.shutdown.send(true);
        let m = self.raft.metrics().borrow().clone();
        if m.state == ServerState::Leader && self.config.voters.len() > 1 {
            let successor = m
                .replication
                .clone()
                .unwrap_or_default()
                .into_iter()
                .filter(|(id, _)| *id != self.config.node_id as u64)
                .max_by_key(|(_, l)| l.map(|l| l.index))
                .and_then(|(id, _)| self.config.voters.iter().find(|(v, _)| *v as u64 == id));
            if let Some((id, addr)) = successor {
                let timeout = self.elections.timings().heartbeat;
                if let Ok(mut conn) = crate::rpc::Connection::connect(addr, timeout).await {
                    let asked = conn.call(&Request::EndQuorumEpoch, timeout).await.is_ok();
                    tracing::info!(successor = id, asked, "resigning as active controller");
                }
            }
        }
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "metadata quorum did not shut down cleanly");
        }
        tracing::info!(node = self.config.node_id, "left the metadata quorum");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_elects_at_most_a_thousand_partitions_and_says_when_more_are_left() {
        let records = |n: usize| -> Vec<MetadataRecord> {
            (0..n)
                .map(|_| MetadataRecord::RemoveTopic {
                    topic_id: uuid::Uuid::new_v4(),
                })
                .collect()
        };
        let (first, left) = first_elections(records(2500));
        assert_eq!((first.len(), left), (1000, true));
        let (first, left) = first_elections(records(1000));
        assert_eq!((first.len(), left), (1000, false));
        let (first, left) = first_elections(records(3));
        assert_eq!((first.len(), left), (3, false));
    }
}
