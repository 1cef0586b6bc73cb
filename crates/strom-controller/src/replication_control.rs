//! Replication control, as Kafka's `ReplicationControlManager`: topics, their partitions'
//! placement, and leader elections when brokers come and go. Every function here is pure:
//! it reads the image and returns the records of the change (and the reply), which take
//! effect only once the quorum has committed them.
//!
//! Elections follow `PartitionChangeBuilder`: keep the current leader while it is valid,
//! else the first replica in assignment order that is in the ISR and active; the ISR is
//! never emptied (the last member stays, with leader -1, "last replica standing").

use std::collections::{BTreeMap, BTreeSet, HashMap};

use strom_metadata::{
    BrokerId, ConfigResource, LeaderEpoch, MetadataImage, MetadataRecord, PartitionEpoch,
    PartitionRegistration, TopicImage,
};
use uuid::Uuid;

use crate::rpc::{
    codes, AlteredPartition, CreatedTopic, ElectionResult, IsrChange, IsrChangeResult, NewTopic,
    RpcError,
};

/// The most records one change writes in one batch (Kafka's `MAX_RECORDS_PER_BATCH`).
pub const MAX_RECORDS_PER_BATCH: usize = 10_000;

/// The active brokers, sorted: the candidates for new replicas.
fn usable_brokers(image: &MetadataImage) -> Vec<BrokerId> {
    image
        .brokers
        .values()
        .filter(|b| b.is_active())
        .map(|b| b.id)
        .collect()
}

/// The active brokers new partitions of `rf` replicas are placed on, or
/// INVALID_REPLICATION_FACTOR when there are fewer than `rf`.
fn brokers_for(image: &MetadataImage, rf: usize) -> Result<Vec<BrokerId>, RpcError> {
    let brokers = usable_brokers(image);
    if rf > brokers.len() {
        return Err(RpcError::new(
            codes::INVALID_REPLICATION_FACTOR,
            format!(
                "Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only {} broker(s) are registered.",
                brokers.len()
            ),
        ));
    }
    Ok(brokers)
}

/// Replicas for `count` new partitions, starting at partition `first`: replica j of
/// partition p on broker `(start + p + j) mod n`, so leaders (replica 0) go round-robin
/// over the brokers and a partition's replicas are distinct.
fn place(
    brokers: &[BrokerId],
    first: i32,
    count: i32,
    rf: usize,
    start: usize,
) -> Vec<Vec<BrokerId>> {
    (first..first + count)
        .map(|p| {
            (0..rf)
                .map(|j| brokers[(start + p as usize + j) % brokers.len()])
                .collect()
        })
        .collect()
}

/// How many partition replicas each broker holds: the image's, plus those of the topics
/// a request created before the one being decided.
struct ReplicaCounts(HashMap<BrokerId, i64>);

impl ReplicaCounts {
    fn of(image: &MetadataImage) -> Self {
        let mut counts = HashMap::new();
        for replica in image
            .topics()
            .flat_map(|t| &t.partitions)
            .flat_map(|p| &p.replicas)
        {
            *counts.entry(*replica).or_insert(0) += 1;
        }
        Self(counts)
    }

    /// Refuses `assignments` if a broker would then hold more than `limit` replicas
    /// (`max.partitions.per.broker`), naming the limit; otherwise counts them.
    fn add(&mut self, assignments: &[Vec<BrokerId>], limit: i64) -> Result<(), RpcError> {
        let mut after = self.0.clone();
        for replica in assignments.iter().flatten() {
            *after.entry(*replica).or_insert(0) += 1;
        }
        if let Some((broker, count)) = after.iter().find(|(_, count)| **count > limit) {
            let hosted = self.0.get(broker).copied().unwrap_or(0);
            return Err(RpcError::new(
                codes::POLICY_VIOLATION,
                format!(
                    "Adding {} partitions to the {hosted} broker {} hosts would exceed max.partitions.per.broker {limit}.",
                    count - hosted,
                    broker.0
                ),
            ));
        }
        self.0 = after;
        Ok(())
    }
}

/// Checks a manual replica assignment (the replicas of each partition, in partition
/// order) as Kafka's `ReplicationControlManager` does: each list non-empty, of one length,
/// without duplicates, naming only registered brokers. An empty assignment passes.
pub fn check_assignment(
    image: &MetadataImage,
    assignments: &[Vec<BrokerId>],
) -> Result<(), RpcError> {
    let invalid = |m: String| RpcError::new(codes::INVALID_REPLICA_ASSIGNMENT, m);
    let rf = assignments.first().map_or(0, Vec::len);
    for replicas in assignments {
        if replicas.is_empty() {
            return Err(invalid(
                "The manual partition assignment includes an empty replica list.".into(),
            ));
        }
        if replicas.len() != rf {
            return Err(invalid(format!(
                "The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {rf} replica(s).",
                replicas.len()
            )));
        }
        for (i, b) in replicas.iter().enumerate() {
            if replicas[..i].contains(b) {
                return Err(invalid(format!(
                    "The manual partition assignment includes the broker {} more than once.",
                    b.0
                )));
            }
            if !image.brokers.contains_key(b) {
                return Err(invalid(format!(
                    "The manual partition assignment includes broker {}, but no broker with that ID is registered.",
                    b.0
                )));
            }
        }
    }
    Ok(())
}

/// The registrations of new partitions: the ISR is the active replicas, the leader the
/// first of them.
fn partition_records(
    image: &MetadataImage,
    topic_id: Uuid,
    first: i32,
    assignments: Vec<Vec<BrokerId>>,
) -> Vec<MetadataRecord> {
    assignments
        .into_iter()
        .enumerate()
        .map(|(i, replicas)| {
            let active: Vec<BrokerId> = replicas
                .iter()
                .copied()
                .filter(|b| image.is_active(*b))
                .collect();
            let isr = if active.is_empty() {
                replicas.clone()
            } else {
                active
            };
            let leader = isr
                .iter()
                .copied()
                .find(|b| image.is_active(*b))
                .unwrap_or(BrokerId::NONE);
            MetadataRecord::Partition {
                topic_id,
                partition_id: first + i as i32,
                replicas,
                isr,
                leader,
                leader_epoch: LeaderEpoch(0),
                partition_epoch: PartitionEpoch(0),
            }
        })
        .collect()
}

/// CreateTopics: the records of every topic that can be created, and a result for each.
/// `start` picks the first leader (the caller passes a rotating value, as Kafka starts
/// at a random broker); no broker is given more than `limit` replicas.
pub fn create_topics(
    image: &MetadataImage,
    topics: &[NewTopic],
    start: usize,
    limit: i64,
) -> (Vec<MetadataRecord>, Vec<Result<CreatedTopic, RpcError>>) {
    let mut records = Vec::new();
    let mut results = Vec::new();
    let mut names_in_request = BTreeSet::new();
    let mut counts = ReplicaCounts::of(image);
    for topic in topics {
        let result = create_topic(image, topic, start, &names_in_request, &mut counts, limit);
        if let Ok((created, topic_records)) = result {
            names_in_request.insert(topic.name.clone());
            records.extend(topic_records);
            results.push(Ok(created));
        } else if let Err(e) = result {
            results.push(Err(e));
        }
    }
    (records, results)
}

fn create_topic(
    image: &MetadataImage,
    topic: &NewTopic,
    start: usize,
    earlier: &BTreeSet<String>,
    counts: &mut ReplicaCounts,
    limit: i64,
) -> Result<(CreatedTopic, Vec<MetadataRecord>), RpcError> {
    if image.topic(&topic.name).is_some() || earlier.contains(&topic.name) {
        return Err(RpcError::new(
            codes::TOPIC_ALREADY_EXISTS,
            format!("Topic '{}' already exists.", topic.name),
        ));
    }
    let assignments = if topic.assignments.is_empty() {
        if topic.partitions < 1 {
            return Err(RpcError::new(
                codes::INVALID_PARTITIONS,
                "Number of partitions must be larger than 0.",
            ));
        }
        if topic.replication_factor < 1 {
            return Err(RpcError::new(
                codes::INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0.",
            ));
        }
        let rf = topic.replication_factor as usize;
        let brokers = brokers_for(image, rf)?;
        place(&brokers, 0, topic.partitions, rf, start)
    } else {
        check_assignment(image, &topic.assignments)?;
        topic.assignments.clone()
    };
    counts.add(&assignments, limit)?;
    let topic_id = Uuid::new_v4();
    let created = CreatedTopic {
        topic_id,
        partitions: assignments.len() as i32,
        replication_factor: assignments[0].len() as i16,
    };
    let mut records = vec![MetadataRecord::Topic {
        name: topic.name.clone(),
        topic_id,
    }];
    for (name, value) in &topic.configs {
        records.push(MetadataRecord::Config {
            resource: ConfigResource::Topic(topic.name.clone()),
            name: name.clone(),
            value: Some(value.clone()),
        });
    }
    records.extend(partition_records(image, topic_id, 0, assignments));
    Ok((created, records))
}

/// CreatePartitions: grows `name` to `count` partitions, placed as its existing ones,
/// giving no broker more than `limit` replicas.
pub fn create_partitions(
    image: &MetadataImage,
    name: &str,
    count: i32,
    assignments: &[Vec<BrokerId>],
    start: usize,
    limit: i64,
) -> Result<Vec<MetadataRecord>, RpcError> {
    let topic = image.topic(name).ok_or_else(|| {
        RpcError::new(
            codes::UNKNOWN_TOPIC_OR_PARTITION,
            "This server does not host this topic-partition.",
        )
    })?;
    let current = topic.partitions.len() as i32;
    if count <= current {
        return Err(RpcError::new(
            codes::INVALID_PARTITIONS,
            format!("Topic currently has {current} partitions, which is higher than the requested {count}."),
        ));
    }
    let adding = count - current;
    let assignments = if assignments.is_empty() {
        let rf = topic.replication_factor().max(1);
        let brokers = brokers_for(image, rf)?;
        place(&brokers, current, adding, rf, start)
    } else {
        if assignments.len() as i32 != adding {
            return Err(RpcError::new(
                codes::INVALID_REPLICA_ASSIGNMENT,
                format!(
                    "Increasing the number of partitions by {adding} but {} assignments provided.",
                    assignments.len()
                ),
            ));
        }
        check_assignment(image, assignments)?;
        assignments.to_vec()
    };
    ReplicaCounts::of(image).add(&assignments, limit)?;
    Ok(partition_records(image, topic.id, current, assignments))
}

/// DeleteTopics: a `RemoveTopicRecord` per topic, or why not.
pub fn delete_topics(
    image: &MetadataImage,
    names: &[String],
) -> (Vec<MetadataRecord>, Vec<Result<Uuid, RpcError>>) {
    let mut records = Vec::new();
    let mut seen = BTreeSet::new();
    let results = names
        .iter()
        .map(|name| match image.topic(name) {
            Some(t) if seen.insert(t.id) => {
                records.push(MetadataRecord::RemoveTopic { topic_id: t.id });
                Ok(t.id)
            }
            _ => Err(RpcError::new(
                codes::UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.",
            )),
        })
        .collect();
    (records, results)
}

/// AlterConfigs / IncrementalAlterConfigs (values validated by the broker).
pub fn alter_configs(
    image: &MetadataImage,
    resource: &ConfigResource,
    changes: &[(String, Option<String>)],
    replace: bool,
) -> Result<Vec<MetadataRecord>, RpcError> {
    if let ConfigResource::Topic(name) = resource {
        if image.topic(name).is_none() {
            return Err(RpcError::new(
                codes::UNKNOWN_TOPIC_OR_PARTITION,
                format!("Topic {name} does not exist."),
            ));
        }
    }
    let current: BTreeMap<String, String> =
        image.configs.get(resource).cloned().unwrap_or_default();
    let mut records = Vec::new();
    if replace {
        for key in current
            .keys()
            .filter(|k| !changes.iter().any(|(c, _)| c == *k))
        {
            records.push(MetadataRecord::Config {
                resource: resource.clone(),
                name: key.clone(),
                value: None,
            });
        }
    }
    for (name, value) in changes {
        records.push(MetadataRecord::Config {
            resource: resource.clone(),
            name: name.clone(),
            value: value.clone(),
        });
    }
    Ok(records)
}

/// The leader a partition should have when the brokers for which `active` holds are
/// the ones that may lead: the current one if it still may, else the first active ISR
/// member in assignment order, else none.
fn elect(
    p: &PartitionRegistration,
    isr: &[BrokerId],
    active: &impl Fn(BrokerId) -> bool,
) -> BrokerId {
    if p.has_leader() && isr.contains(&p.leader) && active(p.leader) {
        return p.leader;
    }
    p.replicas
        .iter()
        .copied()
        .find(|r| isr.contains(r) && active(*r))
        .unwrap_or(BrokerId::NONE)
}

/// Whether `topic` may elect a replica outside its ISR when no ISR member is alive: its
/// `unclean.leader.election.enable`, else the cluster-wide dynamic broker default
/// (`kafka-configs --entity-type brokers --entity-default`), else `default` (the
/// controller's own `unclean.leader.election.enable` from server.properties, false unless
/// set, as Kafka).
pub fn unclean_allowed(image: &MetadataImage, topic: &str, default: bool) -> bool {
    const KEY: &str = "unclean.leader.election.enable";
    image
        .topic_configs(topic)
        .get(KEY)
        .or_else(|| {
            image
                .configs
                .get(&strom_metadata::ConfigResource::Broker(None))
                .and_then(|c| c.get(KEY))
        })
        .map_or(default, |v| v == "true")
}

/// An unclean election of partition `index` of `topic`: the first active replica in
/// assignment order leads alone (its ISR is itself), at the cost of the committed records
/// only the dead ISR had — which is logged.
fn elect_unclean(
    topic: &str,
    index: usize,
    p: &PartitionRegistration,
    active: &impl Fn(BrokerId) -> bool,
) -> Option<(BrokerId, Vec<BrokerId>)> {
    let leader = p.replicas.iter().copied().find(|r| active(*r))?;
    tracing::warn!(
        topic,
        partition = index,
        leader = leader.0,
        "unclean leader election: committed records may be lost"
    );
    Some((leader, vec![leader]))
}

/// The partition changes after `broker` stops being usable (fenced, or in controlled
/// shutdown): it leaves every ISR it can leave, and partitions it led get new leaders
/// (out of the ISR only where unclean election is allowed, `unclean_default` for topics
/// that do not say).
pub fn broker_gone(
    image: &MetadataImage,
    broker: BrokerId,
    unclean_default: bool,
) -> Vec<MetadataRecord> {
    let mut records = Vec::new();
    for topic in image.topics() {
        let unclean = unclean_allowed(image, &topic.name, unclean_default);
        for index in 0..topic.partitions.len() {
            records.extend(replica_gone(image, topic, index, broker, unclean));
        }
    }
    records
}

/// The partition changes after a storage error took `broker`'s replicas `offline` (topic
/// id, partition) offline: as [`broker_gone`], for those partitions only. Partitions it
/// no longer leads or is in the ISR of (a repeated report) change nothing.
pub fn replicas_offline(
    image: &MetadataImage,
    broker: BrokerId,
    offline: &[(Uuid, i32)],
    unclean_default: bool,
) -> Vec<MetadataRecord> {
    offline
        .iter()
        .filter_map(|(topic_id, index)| {
            let topic = image.topic_by_id(*topic_id)?;
            let index = usize::try_from(*index)
                .ok()
                .filter(|i| *i < topic.partitions.len())?;
            let unclean = unclean_allowed(image, &topic.name, unclean_default);
            replica_gone(image, topic, index, broker, unclean)
        })
        .collect()
}

/// The change to partition `index` of `topic` when `broker`'s replica cannot serve: it
/// leaves the ISR unless it is the last member (the ISR is never emptied), and if it
/// led, the next active ISR member leads (an active replica outside the ISR if `unclean`).
fn replica_gone(
    image: &MetadataImage,
    topic: &TopicImage,
    index: usize,
    broker: BrokerId,
    unclean: bool,
) -> Option<MetadataRecord> {
    let p = &topic.partitions[index];
    if !p.isr.contains(&broker) && p.leader != broker {
        return None;
    }
    let active = |b: BrokerId| b != broker && image.is_active(b);
    let mut isr: Vec<BrokerId> = if p.isr.len() > 1 {
        p.isr.iter().copied().filter(|b| *b != broker).collect()
    } else {
        p.isr.clone()
    };
    let mut leader = elect(p, &isr, &active);
    if leader == BrokerId::NONE && unclean {
        if let Some((l, i)) = elect_unclean(&topic.name, index, p, &active) {
            (leader, isr) = (l, i);
        }
    }
    change_record(topic.id, index, p, leader, isr)
}

/// A `PartitionChange` from `p` to `leader` and `isr`, if anything changes.
fn change_record(
    topic_id: Uuid,
    index: usize,
    p: &PartitionRegistration,
    leader: BrokerId,
    isr: Vec<BrokerId>,
) -> Option<MetadataRecord> {
    let leader = (leader != p.leader).then_some(leader);
    let isr = (isr != p.isr).then_some(isr);
    (leader.is_some() || isr.is_some()).then_some(MetadataRecord::PartitionChange {
        topic_id,
        partition_id: index as i32,
        leader,
        isr,
    })
}

/// The partition changes after `broker` becomes usable again: partitions without a
/// leader whose ISR holds it get one; where unclean election is allowed, so do those
/// whose ISR is gone but of which it is a replica.
pub fn broker_back(
    image: &MetadataImage,
    broker: BrokerId,
    unclean_default: bool,
) -> Vec<MetadataRecord> {
    leaderless_elections(
        image,
        |b| b == broker || image.is_active(b),
        |p| p.replicas.contains(&broker),
        unclean_default,
    )
}

/// The controller's periodic check (Kafka's, every `unclean.leader.election.interval.ms`):
/// every partition without a leader gets one if an ISR member is active, or, where
/// unclean election is allowed now, any active replica — so enabling
/// `unclean.leader.election.enable` on a topic whose ISR is gone takes effect without a
/// broker having to come back.
pub fn unclean_elections(image: &MetadataImage, unclean_default: bool) -> Vec<MetadataRecord> {
    leaderless_elections(image, |b| image.is_active(b), |_| true, unclean_default)
}

/// Elections for the partitions without a leader that `wanted` selects, among the
/// brokers for which `active` holds: the first active ISR member, else, where unclean
/// election is allowed, the first active replica.
fn leaderless_elections(
    image: &MetadataImage,
    active: impl Fn(BrokerId) -> bool,
    wanted: impl Fn(&PartitionRegistration) -> bool,
    unclean_default: bool,
) -> Vec<MetadataRecord> {
    let mut records = Vec::new();
    for topic in image.topics() {
        let unclean = unclean_allowed(image, &topic.name, unclean_default);
        for (index, p) in topic.partitions.iter().enumerate() {
            if p.has_leader() || !wanted(p) {
                continue;
            }
            let leader = elect(p, &p.isr, &active);
            let change = if leader != BrokerId::NONE {
                change_record(topic.id, index, p, leader, p.isr.clone())
            } else if unclean {
                elect_unclean(&topic.name, index, p, &active)
                    .and_then(|(l, isr)| change_record(topic.id, index, p, l, isr))
            } else {
                None
            };
            records.extend(change);
        }
    }
    records
}

/// Preferred-leader elections (`auto.leader.rebalance.enable`, ElectLeaders PREFERRED):
/// partitions led by another replica than their first, while the first is active and
/// in the ISR, move back to it, so leadership spreads as placement intended after
/// brokers came and went.
pub fn preferred_leaders(image: &MetadataImage) -> Vec<MetadataRecord> {
    let mut records = Vec::new();
    for topic in image.topics() {
        for (index, p) in topic.partitions.iter().enumerate() {
            if let Ok(Some(change)) = preferred_election(image, topic.id, index, p) {
                records.push(change);
            }
        }
    }
    records
}

/// The change that makes `p`'s first replica its leader; `None` if it already is,
/// PREFERRED_LEADER_NOT_AVAILABLE if it cannot be.
fn preferred_election(
    image: &MetadataImage,
    topic_id: Uuid,
    index: usize,
    p: &PartitionRegistration,
) -> Result<Option<MetadataRecord>, RpcError> {
    let preferred = p.replicas[0];
    if p.leader == preferred {
        return Ok(None);
    }
    if !p.isr.contains(&preferred) || !image.is_active(preferred) {
        return Err(RpcError::new(
            codes::PREFERRED_LEADER_NOT_AVAILABLE,
            format!(
                "The preferred leader {} is not available (in the ISR and unfenced).",
                preferred.0
            ),
        ));
    }
    Ok(change_record(topic_id, index, p, preferred, p.isr.clone()))
}

/// ElectLeaders (43): a PREFERRED (`unclean` false) or UNCLEAN election of each named
/// partition (`None`: every partition), answered per partition as Kafka does —
/// ELECTION_NOT_NEEDED when the leader is already the one the election would choose.
pub fn elect_leaders(
    image: &MetadataImage,
    unclean: bool,
    partitions: Option<&[(String, i32)]>,
) -> (Vec<MetadataRecord>, Vec<ElectionResult>) {
    let all: Vec<(String, i32)>;
    let partitions = match partitions {
        Some(p) => p,
        None => {
            all = image
                .topics()
                .flat_map(|t| (0..t.partitions.len() as i32).map(|i| (t.name.clone(), i)))
                .collect();
            &all
        }
    };
    let mut records = Vec::new();
    let results = partitions
        .iter()
        .map(|(name, index)| {
            let result = (|| {
                let topic = image.topic(name).ok_or_else(|| {
                    RpcError::new(
                        codes::UNKNOWN_TOPIC_OR_PARTITION,
                        format!("Unknown topic {name}."),
                    )
                })?;
                let p = usize::try_from(*index)
                    .ok()
                    .and_then(|i| topic.partitions.get(i))
                    .ok_or_else(|| {
                        RpcError::new(
                            codes::UNKNOWN_TOPIC_OR_PARTITION,
                            format!("Unknown partition {name}-{index}."),
                        )
                    })?;
                let not_needed = || {
                    RpcError::new(
                        codes::ELECTION_NOT_NEEDED,
                        format!("Leader election not needed for topic partition {name}-{index}"),
                    )
                };
                let change = if unclean {
                    let active = |b: BrokerId| image.is_active(b);
                    if p.has_leader() && active(p.leader) {
                        return Err(not_needed());
                    }
                    let leader = elect(p, &p.isr, &active);
                    if leader != BrokerId::NONE {
                        change_record(topic.id, *index as usize, p, leader, p.isr.clone())
                    } else {
                        let (leader, isr) = elect_unclean(name, *index as usize, p, &active)
                            .ok_or_else(|| {
                                RpcError::new(
                                    codes::ELIGIBLE_LEADERS_NOT_AVAILABLE,
                                    format!("No replica of {name}-{index} is alive to lead."),
                                )
                            })?;
                        change_record(topic.id, *index as usize, p, leader, isr)
                    }
                } else {
                    preferred_election(image, topic.id, *index as usize, p)?
                };
                records.push(change.ok_or_else(not_needed)?);
                Ok(())
            })();
            (name.clone(), *index, result)
        })
        .collect();
    (records, results)
}

/// AlterPartition from the leader `broker`: each proposed ISR is checked as Kafka's
/// `ReplicationControlManager` does — the sender must be the leader in the leader epoch it
/// names, the partition epoch is a compare-and-set version (INVALID_UPDATE_VERSION when
/// another change came first), and every new member must be a replica that is registered,
/// unfenced and not shutting down (INELIGIBLE_REPLICA, KIP-841) — and accepted changes
/// become `PartitionChange` records (an unchanged ISR writes nothing).
pub fn alter_partition(
    image: &MetadataImage,
    broker: BrokerId,
    changes: &[IsrChange],
) -> (Vec<MetadataRecord>, Vec<IsrChangeResult>) {
    let mut records = Vec::new();
    let results = changes
        .iter()
        .map(|change| {
            let result = check_isr_change(image, broker, change).map(|p| {
                let changed = p.isr != change.new_isr;
                if changed {
                    records.push(MetadataRecord::PartitionChange {
                        topic_id: change.topic_id,
                        partition_id: change.partition_id,
                        leader: None,
                        isr: Some(change.new_isr.clone()),
                    });
                }
                AlteredPartition {
                    leader: p.leader,
                    leader_epoch: p.leader_epoch.0,
                    partition_epoch: p.partition_epoch.0 + i32::from(changed),
                    isr: change.new_isr.clone(),
                }
            });
            IsrChangeResult {
                topic_id: change.topic_id,
                partition_id: change.partition_id,
                result,
            }
        })
        .collect();
    (records, results)
}

fn check_isr_change<'a>(
    image: &'a MetadataImage,
    broker: BrokerId,
    change: &IsrChange,
) -> Result<&'a PartitionRegistration, RpcError> {
    let topic = image.topic_by_id(change.topic_id).ok_or_else(|| {
        RpcError::new(
            codes::UNKNOWN_TOPIC_ID,
            format!("Unknown topic id {}.", change.topic_id),
        )
    })?;
    let p = usize::try_from(change.partition_id)
        .ok()
        .and_then(|i| topic.partitions.get(i))
        .ok_or_else(|| {
            RpcError::new(
                codes::UNKNOWN_TOPIC_OR_PARTITION,
                format!("Unknown partition {}-{}.", topic.name, change.partition_id),
            )
        })?;
    let name = || format!("{}-{}", topic.name, change.partition_id);
    if change.leader_epoch != p.leader_epoch.0 {
        return Err(RpcError::new(
            codes::FENCED_LEADER_EPOCH,
            format!(
                "Rejecting AlterPartition for {} with leader epoch {}: the current leader epoch is {}.",
                name(), change.leader_epoch, p.leader_epoch.0
            ),
        ));
    }
    if p.leader != broker {
        return Err(RpcError::new(
            codes::INVALID_REQUEST,
            format!(
                "Broker {} is not the leader of {} (the leader is {}).",
                broker.0,
                name(),
                p.leader.0
            ),
        ));
    }
    if change.partition_epoch != p.partition_epoch.0 {
        return Err(RpcError::new(
            codes::INVALID_UPDATE_VERSION,
            format!(
                "Rejecting AlterPartition for {} with partition epoch {}: the current partition epoch is {}.",
                name(), change.partition_epoch, p.partition_epoch.0
            ),
        ));
    }
    if !change.new_isr.contains(&broker) {
        return Err(RpcError::new(
            codes::INVALID_REQUEST,
            format!(
                "The proposed ISR of {} does not include its leader {}.",
                name(),
                broker.0
            ),
        ));
    }
    for (i, r) in change.new_isr.iter().enumerate() {
        if !p.replicas.contains(r) || change.new_isr[..i].contains(r) {
            return Err(RpcError::new(
                codes::INVALID_REQUEST,
                format!("The proposed ISR of {} names broker {} that is not a replica or is named twice.", name(), r.0),
            ));
        }
        if !p.isr.contains(r) && !image.is_active(*r) {
            return Err(RpcError::new(
                codes::INELIGIBLE_REPLICA,
                format!(
                    "Rejecting AlterPartition for {}: broker {} is fenced, shutting down or not registered.",
                    name(), r.0
                ),
            ));
        }
        // KIP-903: a member added on the strength of an incarnation that has since
        // restarted (and may have lost its log) is not eligible.
        let epoch = change.new_isr_epochs.get(i).copied().unwrap_or(-1);
        let registered = image.brokers.get(r).map(|b| b.epoch);
        if !p.isr.contains(r) && epoch != -1 && registered != Some(epoch) {
            return Err(RpcError::new(
                codes::INELIGIBLE_REPLICA,
                format!(
                    "Rejecting AlterPartition for {}: broker {} has epoch {epoch} in the request but {} in the metadata.",
                    name(), r.0, registered.unwrap_or(-1)
                ),
            ));
        }
    }
    Ok(p)
}

/// How many partitions `broker` leads.
pub fn leader_count(image: &MetadataImage, broker: BrokerId) -> usize {
    image
        .topics()
        .flat_map(|t| t.partitions.iter())
        .filter(|p| p.leader == broker)
        .count()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An image of unfenced brokers `brokers`, registered at offset 1.
    pub(crate) fn cluster(brokers: &[i32]) -> MetadataImage {
        let records: Vec<MetadataRecord> = brokers
            .iter()
            .map(|b| MetadataRecord::RegisterBroker {
                broker_id: BrokerId(*b),
                incarnation_id: Uuid::new_v4(),
                endpoints: vec![],
                rack: None,
                fenced: false,
            })
            .collect();
        MetadataImage::new("c", 1).apply_at(1, &records)
    }

    fn new_topic(name: &str, partitions: i32, rf: i16) -> NewTopic {
        NewTopic {
            name: name.into(),
            partitions,
            replication_factor: rf,
            assignments: vec![],
            configs: BTreeMap::new(),
        }
    }

    #[test]
    fn leaders_are_spread_round_robin() {
        let image = cluster(&[1, 2, 3]);
        let (records, results) = create_topics(&image, &[new_topic("t", 6, 1)], 0, i64::MAX);
        assert!(results[0].is_ok());
        let image = image.apply_at(2, &records);
        let leaders: Vec<i32> = image
            .topic("t")
            .unwrap()
            .partitions
            .iter()
            .map(|p| p.leader.0)
            .collect();
        assert_eq!(leaders, vec![1, 2, 3, 1, 2, 3]);
    }

    #[test]
    fn a_replication_factor_above_the_live_brokers_is_refused() {
        let image = cluster(&[1]);
        let (records, results) = create_topics(&image, &[new_topic("t", 1, 2)], 0, i64::MAX);
        assert!(records.is_empty());
        let e = results[0].clone().unwrap_err();
        assert_eq!(e.code, codes::INVALID_REPLICATION_FACTOR);
        assert!(
            e.message.contains("only 1 broker(s) are registered"),
            "{}",
            e.message
        );
    }

    #[test]
    fn a_gone_leader_leaves_its_partitions_leaderless_but_never_empties_an_isr() {
        let image = cluster(&[1, 2]);
        let (records, _) = create_topics(&image, &[new_topic("t", 2, 1)], 0, i64::MAX);
        let image = image.apply_at(2, &records);
        let changes = broker_gone(&image, BrokerId(1), false);
        assert_eq!(changes.len(), 1);
        let image = image.apply_at(3, &changes);
        let p0 = &image.topic("t").unwrap().partitions[0];
        assert_eq!(
            (p0.leader, p0.isr.clone()),
            (BrokerId::NONE, vec![BrokerId(1)])
        );
        assert_eq!(p0.leader_epoch, LeaderEpoch(1));
        let back = broker_back(&image, BrokerId(1), false);
        let image = image.apply_at(4, &back);
        let p0 = &image.topic("t").unwrap().partitions[0];
        assert_eq!((p0.leader, p0.leader_epoch), (BrokerId(1), LeaderEpoch(2)));
    }

    #[test]
    fn a_gone_leader_hands_over_to_the_next_isr_member_in_assignment_order() {
        let image = cluster(&[1, 2, 3]);
        let id = Uuid::new_v4();
        let image = image.apply_at(
            2,
            &[
                MetadataRecord::Topic {
                    name: "t".into(),
                    topic_id: id,
                },
                MetadataRecord::Partition {
                    topic_id: id,
                    partition_id: 0,
                    replicas: vec![BrokerId(1), BrokerId(3), BrokerId(2)],
                    isr: vec![BrokerId(1), BrokerId(2), BrokerId(3)],
                    leader: BrokerId(1),
                    leader_epoch: LeaderEpoch(0),
                    partition_epoch: PartitionEpoch(0),
                },
            ],
        );
        let image = image.apply_at(3, &broker_gone(&image, BrokerId(1), false));
        let p = &image.topic("t").unwrap().partitions[0];
        assert_eq!(p.leader, BrokerId(3));
        assert_eq!(p.isr, vec![BrokerId(2), BrokerId(3)]);
    }

    #[test]
    fn an_offline_replica_leaves_its_isr_and_leadership_and_nothing_else() {
        let image = cluster(&[1, 2, 3]);
        let (records, results) = create_topics(&image, &[new_topic("t", 3, 3)], 0, i64::MAX);
        let id = results[0].as_ref().unwrap().topic_id;
        let image = image.apply_at(2, &records);
        let led_by_1 = image.topic("t").unwrap().partitions[0].clone();
        assert_eq!(led_by_1.leader, BrokerId(1));
        let changes = replicas_offline(&image, BrokerId(1), &[(id, 0), (id, 7)], false);
        assert_eq!(changes.len(), 1, "partition 7 does not exist");
        let after = image.apply_at(3, &changes);
        let t = after.topic("t").unwrap();
        assert_ne!(t.partitions[0].leader, BrokerId(1));
        assert!(!t.partitions[0].isr.contains(&BrokerId(1)));
        assert_eq!(t.partitions[1], image.topic("t").unwrap().partitions[1]);
        assert_eq!(t.partitions[2], image.topic("t").unwrap().partitions[2]);
        assert!(
            replicas_offline(&after, BrokerId(1), &[(id, 0)], false).is_empty(),
            "a repeated report changes nothing"
        );
    }

    fn replicated(image: &MetadataImage) -> (MetadataImage, Uuid) {
        let (records, results) = create_topics(image, &[new_topic("r", 1, 3)], 0, i64::MAX);
        let id = results[0].as_ref().unwrap().topic_id;
        (image.apply_at(2, &records), id)
    }

    fn change(id: Uuid, leader_epoch: i32, partition_epoch: i32, isr: &[i32]) -> IsrChange {
        IsrChange {
            topic_id: id,
            partition_id: 0,
            leader_epoch,
            partition_epoch,
            new_isr: isr.iter().map(|b| BrokerId(*b)).collect(),
            new_isr_epochs: vec![-1; isr.len()],
        }
    }

    #[test]
    fn alter_partition_changes_the_isr_and_bumps_the_partition_epoch_only() {
        let (image, id) = replicated(&cluster(&[1, 2, 3]));
        let (records, results) = alter_partition(&image, BrokerId(1), &[change(id, 0, 0, &[1, 2])]);
        let altered = results[0].result.clone().unwrap();
        assert_eq!((altered.leader_epoch, altered.partition_epoch), (0, 1));
        let image = image.apply_at(3, &records);
        let p = &image.topic("r").unwrap().partitions[0];
        assert_eq!(p.isr, vec![BrokerId(1), BrokerId(2)]);
        assert_eq!(
            (p.leader_epoch, p.partition_epoch),
            (LeaderEpoch(0), PartitionEpoch(1))
        );
        // The same ISR again writes nothing.
        let (records, results) = alter_partition(&image, BrokerId(1), &[change(id, 0, 1, &[1, 2])]);
        assert!(records.is_empty() && results[0].result.is_ok());
    }

    #[test]
    fn alter_partition_refuses_stale_epochs_non_leaders_and_ineligible_replicas() {
        let (image, id) = replicated(&cluster(&[1, 2, 3]));
        let code = |broker: i32, c: IsrChange| {
            alter_partition(&image, BrokerId(broker), &[c]).1[0]
                .result
                .clone()
                .unwrap_err()
                .code
        };
        assert_eq!(
            code(1, change(id, 0, 5, &[1])),
            codes::INVALID_UPDATE_VERSION
        );
        assert_eq!(code(1, change(id, 3, 0, &[1])), codes::FENCED_LEADER_EPOCH);
        assert_eq!(code(2, change(id, 0, 0, &[2])), codes::INVALID_REQUEST);
        assert_eq!(code(1, change(id, 0, 0, &[2, 3])), codes::INVALID_REQUEST);
        assert_eq!(code(1, change(id, 0, 0, &[1, 4])), codes::INVALID_REQUEST);
        assert_eq!(
            code(1, change(Uuid::new_v4(), 0, 0, &[1])),
            codes::UNKNOWN_TOPIC_ID
        );
        // A fenced broker cannot join an ISR it is not in (KIP-841).
        let image = image.apply_at(
            3,
            &[MetadataRecord::PartitionChange {
                topic_id: id,
                partition_id: 0,
                leader: None,
                isr: Some(vec![BrokerId(1), BrokerId(2)]),
            }],
        );
        // A member added with a broker epoch that is not its registration's is not
        // eligible (KIP-903); with the current epoch it is.
        let mut stale = change(id, 0, 1, &[1, 2, 3]);
        stale.new_isr_epochs = vec![1, 1, 0];
        let (_, results) = alter_partition(&image, BrokerId(1), &[stale.clone()]);
        assert_eq!(
            results[0].result.clone().unwrap_err().code,
            codes::INELIGIBLE_REPLICA
        );
        stale.new_isr_epochs = vec![1, 1, 1];
        assert!(alter_partition(&image, BrokerId(1), &[stale]).1[0]
            .result
            .is_ok());
        let image = image.apply_at(
            4,
            &[MetadataRecord::BrokerRegistrationChange {
                broker_id: BrokerId(3),
                broker_epoch: 1,
                fenced: Some(true),
                in_controlled_shutdown: None,
            }],
        );
        let (_, results) = alter_partition(&image, BrokerId(1), &[change(id, 0, 1, &[1, 2, 3])]);
        assert_eq!(
            results[0].result.clone().unwrap_err().code,
            codes::INELIGIBLE_REPLICA
        );
    }

    /// Fences (`fenced`) or unfences `broker` at `offset`, with the partition changes
    /// that follow at `offset + 1`.
    fn set_fenced(
        image: &MetadataImage,
        offset: i64,
        broker: i32,
        fenced: bool,
        unclean_default: bool,
    ) -> MetadataImage {
        let id = BrokerId(broker);
        let changed = image.apply_at(
            offset,
            &[MetadataRecord::BrokerRegistrationChange {
                broker_id: id,
                broker_epoch: image.brokers[&id].epoch,
                fenced: Some(fenced),
                in_controlled_shutdown: None,
            }],
        );
        let follow = if fenced {
            broker_gone(&changed, id, unclean_default)
        } else {
            broker_back(&changed, id, unclean_default)
        };
        changed.apply_at(offset + 1, &follow)
    }

    #[test]
    fn unclean_election_enabled_on_a_topic_without_a_live_isr_elects_at_the_next_check() {
        let (image, _) = replicated(&cluster(&[1, 2, 3]));
        let image = set_fenced(&image, 3, 2, true, false);
        let image = set_fenced(&image, 5, 3, true, false);
        let image = set_fenced(&image, 7, 1, true, false);
        let image = set_fenced(&image, 9, 2, false, false);
        let p = &image.topic("r").unwrap().partitions[0];
        assert_eq!(
            (p.leader, p.isr.clone()),
            (BrokerId::NONE, vec![BrokerId(1)])
        );
        assert!(
            unclean_elections(&image, false).is_empty(),
            "the topic does not allow it"
        );
        let enable = alter_configs(
            &image,
            &strom_metadata::ConfigResource::Topic("r".into()),
            &[("unclean.leader.election.enable".into(), Some("true".into()))],
            false,
        )
        .unwrap();
        let image = image.apply_at(11, &enable);
        let image = image.apply_at(12, &unclean_elections(&image, false));
        let p = &image.topic("r").unwrap().partitions[0];
        assert_eq!((p.leader, p.isr.clone()), (BrokerId(2), vec![BrokerId(2)]));
        assert!(
            unclean_elections(&image, false).is_empty(),
            "once elected, nothing more"
        );
    }

    #[test]
    fn preferred_leaders_move_back_once_their_replica_is_in_the_isr_again() {
        let (image, _) = replicated(&cluster(&[1, 2, 3]));
        let image = set_fenced(&image, 3, 1, true, false);
        let p = &image.topic("r").unwrap().partitions[0];
        assert_eq!((p.leader, p.leader_epoch), (BrokerId(2), LeaderEpoch(1)));
        let image = set_fenced(&image, 5, 1, false, false);
        assert!(
            preferred_leaders(&image).is_empty(),
            "1 is not in the ISR yet"
        );
        let (_, results) = elect_leaders(&image, false, Some(&[("r".into(), 0)]));
        assert_eq!(
            results[0].2.clone().unwrap_err().code,
            codes::PREFERRED_LEADER_NOT_AVAILABLE
        );
        let id = image.topic("r").unwrap().id;
        let rejoined = alter_partition(&image, BrokerId(2), &[change(id, 1, 1, &[2, 3, 1])]).0;
        let image = image.apply_at(7, &rejoined);
        let image = image.apply_at(8, &preferred_leaders(&image));
        let p = &image.topic("r").unwrap().partitions[0];
        assert_eq!((p.leader, p.leader_epoch), (BrokerId(1), LeaderEpoch(2)));
        let (records, results) = elect_leaders(&image, false, None);
        assert!(records.is_empty());
        assert_eq!(
            results[0].2.clone().unwrap_err().code,
            codes::ELECTION_NOT_NEEDED
        );
    }

    #[test]
    fn unclean_election_only_where_the_topic_or_cluster_allows_it() {
        let (image, id) = replicated(&cluster(&[1, 2, 3]));
        // The ISR shrinks to the leader alone, which then dies.
        let image = image.apply_at(
            3,
            &alter_partition(&image, BrokerId(1), &[change(id, 0, 0, &[1])]).0,
        );
        let clean = set_fenced(&image, 4, 1, true, false);
        let p = &clean.topic("r").unwrap().partitions[0];
        assert_eq!(
            (p.leader, p.isr.clone()),
            (BrokerId::NONE, vec![BrokerId(1)])
        );
        let (_, results) = elect_leaders(&clean, true, Some(&[("r".into(), 0)]));
        assert!(
            results[0].2.is_ok(),
            "an explicit UNCLEAN election is always allowed"
        );

        // `unclean.leader.election.enable` of `resource` set to `value`, at offset `at`.
        let set = |image: &MetadataImage, at: i64, resource: ConfigResource, value: &str| {
            image.apply_at(
                at,
                &[MetadataRecord::Config {
                    resource,
                    name: "unclean.leader.election.enable".into(),
                    value: Some(value.into()),
                }],
            )
        };
        // Who leads and which ISR after broker 1 dies, the controller's default `default`.
        let after_1_dies = |image: &MetadataImage, at: i64, default: bool| {
            let after = set_fenced(image, at, 1, true, default);
            let p = &after.topic("r").unwrap().partitions[0];
            (p.leader, p.isr.clone())
        };
        let elected = (BrokerId(2), vec![BrokerId(2)]);
        let none = (BrokerId::NONE, vec![BrokerId(1)]);

        // Allowed by the controller's default...
        assert_eq!(after_1_dies(&image, 4, true), elected);
        // ... unless the topic says otherwise.
        let strict = set(&image, 4, ConfigResource::Topic("r".into()), "false");
        assert_eq!(after_1_dies(&strict, 5, true), none);
        // The cluster-wide dynamic broker default is above the controller's own...
        let allowed = set(&image, 4, ConfigResource::Broker(None), "true");
        assert_eq!(after_1_dies(&allowed, 5, false), elected);
        // ... and below the topic's.
        let strict = set(&allowed, 5, ConfigResource::Topic("r".into()), "false");
        assert_eq!(after_1_dies(&strict, 6, false), none);
    }

    #[test]
    fn placements_beyond_max_partitions_per_broker_are_refused() {
        let image = cluster(&[1]);
        let (records, results) =
            create_topics(&image, &[new_topic("a", 3, 1), new_topic("b", 2, 1)], 0, 4);
        assert!(results[0].is_ok());
        let refused = results[1].as_ref().unwrap_err();
        assert_eq!(refused.code, codes::POLICY_VIOLATION);
        assert!(
            refused.message.contains("max.partitions.per.broker 4"),
            "{}",
            refused.message
        );
        let image = image.apply_at(2, &records);
        let grown = create_partitions(&image, "a", 5, &[], 0, 4).unwrap_err();
        assert_eq!(grown.code, codes::POLICY_VIOLATION);
        assert!(create_partitions(&image, "a", 4, &[], 0, 4).is_ok());
    }
}
