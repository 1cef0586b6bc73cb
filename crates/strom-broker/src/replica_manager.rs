//! The one lookup handlers use to reach a partition's data, as Kafka's `ReplicaManager`:
//! it decides whether this broker can serve the partition — the metadata image must name
//! it the leader, it must host the log and have taken up the leadership — answering
//! NOT_LEADER_OR_FOLLOWER otherwise (KAFKA_STORAGE_ERROR while its replica here is
//! offline), so no handler touches a log or decides leadership
//! itself. On a cluster broker it also applies each new metadata image to the logs:
//! partitions assigned to this broker are created and become leaders or followers (the
//! fetchers then follow exactly the followed ones), deleted topics are removed.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::ResponseError;
use strom_log::LogError;
use strom_metadata::{BrokerId, ConfigResource, MetadataImage, TopicImage};
use uuid::Uuid;

use crate::log_dir_workers;
use crate::BrokerState;
use strom_coordinator::group::offsets_topic::OFFSETS_TOPIC;
use strom_replica::partition::Partition;
use strom_replica::partition_state::Registration;
use strom_wire::ApiError;

fn not_leader(topic: &str, index: i32, leader: BrokerId) -> ApiError {
    ApiError::new(
        ResponseError::NotLeaderOrFollower,
        format!(
            "This broker is not the leader of {topic}-{index} (the leader is {}).",
            leader.0
        ),
    )
}

/// The partition `index` of topic `topic` as its leader serves it.
pub fn leader(state: &BrokerState, topic: &str, index: i32) -> Result<Arc<Partition>, ApiError> {
    let image = state.metadata.image();
    let topic = image.topic(topic).ok_or_else(ApiError::unknown_topic)?;
    served(state, topic, index)
}

/// The partition `index` of `topic` if the image names this broker its leader and the
/// log is hosted here.
fn served(state: &BrokerState, topic: &TopicImage, index: i32) -> Result<Arc<Partition>, ApiError> {
    let registration = usize::try_from(index)
        .ok()
        .and_then(|i| topic.partitions.get(i))
        .ok_or_else(ApiError::unknown_topic)?;
    if registration.leader != BrokerId(state.node_id()) {
        return Err(not_leader(&topic.name, index, registration.leader));
    }
    let partition = state
        .logs
        .partition(&topic.name, index)
        .ok_or_else(|| not_leader(&topic.name, index, registration.leader))?;
    if let Some(reason) = partition.offline_reason() {
        return Err(ApiError::new(
            ResponseError::KafkaStorageError,
            format!(
                "The replica of {}-{index} on this broker is offline: {reason}",
                topic.name
            ),
        ));
    }
    Some(partition)
        .filter(|p| p.is_leader())
        .ok_or_else(|| not_leader(&topic.name, index, registration.leader))
}

/// Where a client should go instead (KIP-951): a partition's live leader, its leader
/// epoch and its endpoint on the client's listener.
#[derive(Debug, Clone)]
pub struct LeaderHint {
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
}

/// The [`LeaderHint`] of partition `index` of `topic` for clients of `listener`, when the
/// image knows a live leader.
pub fn leader_hint(
    state: &BrokerState,
    topic: &str,
    index: i32,
    listener: &str,
) -> Option<LeaderHint> {
    let image = state.metadata.image();
    let p = image
        .topic(topic)?
        .partitions
        .get(usize::try_from(index).ok()?)?;
    let broker = image.brokers.get(&p.leader).filter(|b| !b.fenced)?;
    let endpoint = broker.endpoint(listener)?;
    Some(LeaderHint {
        leader_id: broker.id.0,
        leader_epoch: p.leader_epoch.0,
        host: endpoint.host.clone(),
        port: endpoint.port,
        rack: broker.rack.clone(),
    })
}

/// [`leader`] for a topic named by id (Fetch v13+).
pub fn leader_by_id(
    state: &BrokerState,
    topic_id: Uuid,
    index: i32,
) -> Result<Arc<Partition>, ApiError> {
    let image = state.metadata.image();
    let topic = image
        .topic_by_id(topic_id)
        .ok_or_else(|| ApiError::new(ResponseError::UnknownTopicId, "unknown topic id"))?;
    served(state, topic, index)
}

/// Makes the logs match `image` on a cluster broker: hosts every partition whose replicas
/// name this broker, makes it the leader or a follower as the image says, points the
/// fetchers at the followed partitions' leaders, and — once the image is complete
/// (`caught_up`: a restarted broker that has replayed only part of the metadata log must
/// not take a topic created later for a deleted one) — removes local topics the image
/// no longer has.
///
/// Topics that are the same as in `previous` (the image applied before, when that
/// application succeeded: the same registration, shared, and the same configs) are not
/// hosted or re-roled again: a
/// broker of 13,000 replicas otherwise redid all of them for every ISR change anywhere
/// in the cluster, which made metadata lag behind a burst of changes.
pub fn apply_image(
    state: &Arc<BrokerState>,
    image: &MetadataImage,
    previous: Option<&MetadataImage>,
    caught_up: bool,
) -> Result<(), String> {
    let me = BrokerId(state.node_id());
    // Log defaults first: a topic hosted below takes them.
    if state.dynamic_configs.update_from_image(image) {
        crate::dynamic_config::apply(state);
    }
    // Deleted topics go first: their space may be what a new topic needs (a full disk).
    if caught_up {
        for local in state.logs.topics() {
            if image.topic_by_id(local.id).is_none() {
                if let Err(e) = state.logs.delete_topic(&local.name) {
                    tracing::warn!(topic = %local.name, error = %e.message, "could not remove a deleted topic");
                }
            }
        }
    }
    let mut failed = Vec::new();
    let mut followed = Vec::new();
    let mut transitions = Vec::new();
    for topic in image.topics() {
        let indexes: Vec<i32> = topic
            .partitions
            .iter()
            .enumerate()
            .filter(|(_, p)| p.replicas.contains(&me))
            .map(|(i, _)| i as i32)
            .collect();
        if indexes.is_empty() {
            continue;
        }
        let configs = ConfigResource::Topic(topic.name.clone());
        let unchanged = previous.is_some_and(|previous| {
            previous
                .topic_by_id(topic.id)
                .is_some_and(|old| Arc::ptr_eq(old, topic))
                && previous.configs.get(&configs) == image.configs.get(&configs)
        });
        if !unchanged {
            let configs = image.topic_configs(&topic.name);
            if let Err(e) = state.logs.host(&topic.name, topic.id, &configs, &indexes) {
                // The other topics are hosted all the same; this one is tried again
                // with the next image.
                failed.push(format!("{}: {e}", topic.name));
                continue;
            }
        }
        for index in indexes {
            let Some(partition) = state.logs.partition(&topic.name, index) else {
                continue;
            };
            if partition.offline_reason().is_some() {
                continue;
            }
            let p = &topic.partitions[index as usize];
            if unchanged {
                if p.leader != me && p.has_leader() {
                    followed.push((p.leader, partition));
                }
                continue;
            }
            transitions.push(Transition {
                topic_id: topic.id,
                leader: p.leader,
                registration: Registration {
                    leader_epoch: p.leader_epoch.0,
                    partition_epoch: p.partition_epoch.0,
                    replicas: p.replicas.clone(),
                    isr: p.isr.clone(),
                },
                initial_hw: state
                    .replication
                    .take_initial_high_watermark(&topic.name, index),
                partition,
            });
        }
    }
    let outcomes = transition_all(state, &transitions);
    followed.extend(settle_transitions(
        state,
        &transitions,
        outcomes,
        &mut failed,
    ));
    state.replication.fetchers.follow(state, followed);
    coordinate_groups(state, image, me);
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("could not host or lead {}", failed.join(", ")))
    }
}

/// Takes the `outcomes` of `transitions`: the partitions now followed, with their leaders,
/// are returned; failures go to `failed`; and the followers of each partition this broker
/// started to lead are expected to name it in their fetch sessions here.
fn settle_transitions(
    state: &BrokerState,
    transitions: &[Transition],
    outcomes: Vec<Result<bool, LogError>>,
    failed: &mut Vec<String>,
) -> Vec<(BrokerId, Arc<Partition>)> {
    let me = BrokerId(state.node_id());
    let mut followed = Vec::new();
    let mut expected: BTreeMap<BrokerId, Vec<(Uuid, i32)>> = BTreeMap::new();
    for (transition, outcome) in transitions.iter().zip(outcomes) {
        let p = &transition.partition;
        match outcome {
            Err(e) => failed.push(format!("{}-{}: {e}", p.topic, p.index)),
            Ok(_) if transition.leader != me && transition.leader != BrokerId::NONE => {
                followed.push((transition.leader, p.clone()))
            }
            Ok(true) => {
                let followers = transition.registration.replicas.iter();
                for follower in followers.filter(|r| **r != me) {
                    expected
                        .entry(*follower)
                        .or_default()
                        .push((transition.topic_id, p.index));
                }
            }
            Ok(false) => {}
        }
    }
    let now = std::time::Instant::now();
    for (follower, partitions) in expected {
        state.fetch_sessions.expect(follower.0, &partitions, now);
    }
    followed
}

/// Hands the group coordinator the partitions of `__consumer_offsets` this broker leads
/// now, and loads those it did not lead before, each on a blocking thread of its own so
/// that a large partition does not hold up the others or the next metadata image.
fn coordinate_groups(state: &Arc<BrokerState>, image: &MetadataImage, me: BrokerId) {
    let (count, led) = match image.topic(OFFSETS_TOPIC) {
        None => (0, Vec::new()),
        Some(topic) => (
            topic.partitions.len() as i32,
            topic
                .partitions
                .iter()
                .enumerate()
                .filter(|(_, p)| p.leader == me)
                .filter_map(|(i, _)| {
                    let partition = state.logs.partition(OFFSETS_TOPIC, i as i32)?;
                    (partition.is_leader() && partition.offline_reason().is_none())
                        .then_some((i as i32, partition))
                })
                .collect(),
        ),
    };
    for (index, partition) in state.groups.lead_offsets_partitions(count, led) {
        let state = state.clone();
        tokio::task::spawn_blocking(move || {
            state.groups.load_offsets_partition(index, &partition);
        });
    }
}

/// A partition whose registration changed: it becomes the leader or a follower of
/// `leader` in `registration`.
struct Transition {
    partition: Arc<Partition>,
    topic_id: Uuid,
    leader: BrokerId,
    registration: Registration,
    initial_hw: i64,
}

/// Transitions run on up to this many threads. Becoming the leader in a new epoch fsyncs
/// the partition's leader-epoch checkpoint, as Kafka's does; a broker taking over the
/// thousands of partitions a killed broker led did those fsyncs one after another (2.5–3.4 s
/// for 3,600 partitions on this machine's disk, during which the partitions had no
/// serving leader). Overlapping fsyncs share the file system's journal commits.
const TRANSITION_THREADS: usize = 16;
/// Transitions per thread: a few are done on the caller's thread.
const TRANSITIONS_PER_THREAD: usize = 64;

/// Applies every transition; the outcomes in the transitions' order: whether a new
/// leader epoch started here.
fn transition_all(state: &BrokerState, transitions: &[Transition]) -> Vec<Result<bool, LogError>> {
    let me = BrokerId(state.node_id());
    let apply = |t: &Transition| {
        let registration = t.registration.clone();
        if t.leader == me {
            t.partition.become_leader(me, registration, t.initial_hw)
        } else {
            t.partition
                .become_follower(me, t.leader, registration, t.initial_hw);
            Ok(false)
        }
    };
    let threads = (transitions.len() / TRANSITIONS_PER_THREAD).min(TRANSITION_THREADS);
    if threads <= 1 {
        return transitions.iter().map(apply).collect();
    }
    log_dir_workers::run(transitions, &[], threads, |t| t.partition.dir(), apply)
}
