//! Consumer groups on a cluster of real `strom` processes: the coordinator of a group is
//! the leader of the group's partition of `__consumer_offsets` (created, with three
//! replicas, by the first FindCoordinator), committed offsets are replicated there, and
//! when the coordinator is killed with SIGKILL the partition's new leader loads them and
//! answers for the group — librdkafka reads the same committed offsets from it, commits
//! go on, and a real group member resumes from them; clients cannot produce to the
//! topic. A member whose coordinator is killed goes on in its generation at the new one,
//! which restored the group's membership from the topic. A partition of `__consumer_offsets`
//! that grew past its live offsets is compacted by the log cleaner on every replica, and
//! a new coordinator replays the compacted log to the latest offsets. Every wait polls its
//! condition.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::client::{create_replicated_topic, describe_group, Assignments};
use common::cluster::TestCluster;
use common::raw::{batch, Conn};
use common::wait_until;
use kafka_protocol::messages::{ApiKey, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

const TIMEOUT: Duration = Duration::from_secs(60);
const TOPIC: &str = "orders";
const GROUP: &str = "survivors";
const PARTITIONS: i32 = 3;

/// Brokers are fenced 3 s after their last heartbeat, so a killed coordinator's
/// partitions move quickly.
const FAST: &[&str] = &[
    "broker.session.timeout.ms=3000",
    "broker.heartbeat.interval.ms=500",
    "replica.lag.time.max.ms=3000",
];

/// The first broker of a bootstrap list.
fn first(bootstrap: &str) -> &str {
    bootstrap.split(',').next().expect("a broker")
}

/// FindCoordinator (v3) for `group` at the first broker of `bootstrap`: the
/// coordinator's id, or the error code.
fn coordinator(bootstrap: &str, group: &str) -> Result<i32, i16> {
    let response: FindCoordinatorResponse = Conn::connect(first(bootstrap)).call(
        ApiKey::FindCoordinator,
        3,
        &FindCoordinatorRequest::default().with_key(StrBytes::from_string(group.to_string())),
    );
    match response.error_code {
        0 => Ok(response.node_id.0),
        e => Err(e),
    }
}

/// The partition of `__consumer_offsets` that Kafka puts `group` in: Java's
/// `String.hashCode`, made non-negative as Kafka's `Utils.abs` does, modulo the count.
fn offsets_partition(group: &str, count: i32) -> usize {
    let hash = group.encode_utf16().fold(0i32, |h, c| {
        h.wrapping_mul(31).wrapping_add(i32::from(c as i16))
    });
    (if hash == i32::MIN { 0 } else { hash.abs() } % count) as usize
}

/// (leader, replicas) of each partition of `topic`, as the first broker of `bootstrap`
/// sees it.
fn leaders_and_replicas(bootstrap: &str, topic: &str) -> Vec<(i32, usize)> {
    TestCluster::metadata(first(bootstrap))
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == topic))
        .map(|t| {
            t.partitions
                .iter()
                .map(|p| (p.leader_id.0, p.replica_nodes.len()))
                .collect()
        })
        .unwrap_or_default()
}

fn consumer(bootstrap: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", GROUP)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "6000")
        .create()
        .expect("consumer")
}

fn offsets(values: [i64; 3]) -> TopicPartitionList {
    let mut list = TopicPartitionList::new();
    for (p, v) in values.into_iter().enumerate() {
        list.add_partition_offset(TOPIC, p as i32, Offset::Offset(v))
            .expect("offset");
    }
    list
}

/// Commits `values` for partitions 0, 1, 2 of the topic without joining the group (as
/// an admin's offset reset does).
fn commit(bootstrap: &str, values: [i64; 3]) -> bool {
    consumer(bootstrap)
        .commit(&offsets(values), CommitMode::Sync)
        .is_ok()
}

/// The group's committed offsets of partitions 0, 1, 2, read by a new client.
fn committed(bootstrap: &str) -> Option<Vec<i64>> {
    let list = consumer(bootstrap)
        .committed_offsets(offsets([0, 0, 0]), Duration::from_secs(5))
        .ok()?;
    list.elements()
        .iter()
        .map(|e| match e.offset() {
            Offset::Offset(o) if e.error().is_ok() => Some(o),
            _ => None,
        })
        .collect()
}

#[test]
fn committed_offsets_survive_the_kill_of_their_coordinator() {
    let mut cluster = TestCluster::combined(3, FAST);
    let addr = cluster.bootstrap();
    create_replicated_topic(&addr, TOPIC, PARTITIONS, 3, &[("min.insync.replicas", "2")]);
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &addr)
        .set("acks", "all")
        .create()
        .expect("producer");
    for i in 0..30 {
        let value = i.to_string();
        producer
            .send(
                BaseRecord::<str, str>::to(TOPIC)
                    .payload(&value)
                    .partition(i % PARTITIONS),
            )
            .expect("send");
    }
    producer.flush(TIMEOUT).expect("flush");

    // The first lookup creates __consumer_offsets; the group's coordinator is the
    // leader of its partition of it, which has three replicas.
    assert!(
        wait_until(TIMEOUT, || coordinator(&addr, GROUP).is_ok()),
        "a coordinator for {GROUP}: {:?}",
        coordinator(&addr, GROUP)
    );
    let coordinating = coordinator(&addr, GROUP).unwrap();
    let internal = leaders_and_replicas(&addr, "__consumer_offsets");
    assert_eq!(internal.len(), 50, "offsets.topic.num.partitions");
    assert_eq!(internal[offsets_partition(GROUP, 50)], (coordinating, 3));
    // Only coordinators write to it, as in Kafka.
    let (error, _) = Conn::connect(first(&addr)).produce("__consumer_offsets", batch(&[b"x"]));
    assert_eq!(error, ResponseError::InvalidTopicException.code());

    assert!(wait_until(TIMEOUT, || commit(&addr, [5, 6, 7])), "commit");
    assert_eq!(committed(&addr), Some(vec![5, 6, 7]));

    // SIGKILL of the coordinator: another replica leads the partition, loads it and
    // answers for the group with the same offsets.
    let (survivor, _) = kill_coordinator(&mut cluster, coordinating, GROUP);
    assert!(
        wait_until(TIMEOUT, || committed(&survivor) == Some(vec![5, 6, 7])),
        "the offsets at the new coordinator: {:?}",
        committed(&survivor)
    );

    // A member of the group resumes from them: it reads exactly the records after them.
    let member = consumer(&survivor);
    member.subscribe(&[TOPIC]).expect("subscribe");
    let mut read = Vec::new();
    assert!(
        wait_until(TIMEOUT, || {
            if let Some(Ok(m)) = member.poll(Duration::from_millis(100)) {
                read.push((m.partition(), m.offset()));
            }
            read.len() == 30 - (5 + 6 + 7)
        }),
        "records after the committed offsets: {read:?}"
    );
    assert!(
        read.iter().all(|(p, o)| *o >= [5, 6, 7][*p as usize]),
        "nothing before a committed offset was read again: {read:?}"
    );
    member
        .commit_consumer_state(CommitMode::Sync)
        .expect("commit");
    drop(member);

    // The old coordinator returns as a follower and the offsets stay.
    cluster.restart(coordinating).unwrap();
    assert!(
        wait_until(TIMEOUT, || committed(&cluster.bootstrap())
            == Some(vec![10, 10, 10])),
        "the offsets after the old coordinator returned: {:?}",
        committed(&cluster.bootstrap())
    );
}

#[test]
fn a_member_keeps_its_generation_when_its_coordinator_is_killed() {
    const GROUP: &str = "steady";
    let mut cluster = TestCluster::combined(3, FAST);
    let addr = cluster.bootstrap();
    create_replicated_topic(&addr, TOPIC, PARTITIONS, 3, &[("min.insync.replicas", "2")]);
    assert!(
        wait_until(TIMEOUT, || coordinator(&addr, GROUP).is_ok()),
        "a coordinator for {GROUP}: {:?}",
        coordinator(&addr, GROUP)
    );
    let coordinating = coordinator(&addr, GROUP).unwrap();

    // One member, assigned every partition once; its commit is answered only when
    // replicated, and the group's membership was appended before it.
    let assignments = Arc::new(AtomicUsize::new(0));
    let member: BaseConsumer<Assignments> = ClientConfig::new()
        .set("bootstrap.servers", &addr)
        .set("group.id", GROUP)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "500")
        .create_with_context(Assignments(assignments.clone()))
        .expect("consumer");
    member.subscribe(&[TOPIC]).expect("subscribe");
    assert!(
        wait_until(TIMEOUT, || {
            member.poll(Duration::from_millis(100));
            member.assignment().is_ok_and(|a| a.count() == 3)
                && member.commit(&offsets([1, 2, 3]), CommitMode::Sync).is_ok()
        }),
        "an assignment and a commit"
    );
    assert_eq!(assignments.load(Ordering::SeqCst), 1);
    let (state, members) = describe_group(&node_address(&cluster, coordinating), GROUP);
    assert_eq!((state.as_str(), members.len()), ("Stable", 1));

    // SIGKILL of the coordinator. The new one restored the group: the member's
    // heartbeats and commits are accepted in its generation, with no new rebalance.
    let (_, new_coordinator) = kill_coordinator(&mut cluster, coordinating, GROUP);
    assert!(
        wait_until(TIMEOUT, || {
            member.poll(Duration::from_millis(100));
            member.commit(&offsets([4, 5, 6]), CommitMode::Sync).is_ok()
        }),
        "a commit through the new coordinator"
    );
    assert_eq!(
        describe_group(&node_address(&cluster, new_coordinator), GROUP),
        ("Stable".to_string(), members),
        "the same member, stable at the new coordinator"
    );
    assert_eq!(
        assignments.load(Ordering::SeqCst),
        1,
        "the member was not made to rejoin"
    );
    let committed: Vec<Offset> = member
        .committed_offsets(offsets([0, 0, 0]), Duration::from_secs(5))
        .expect("committed offsets")
        .elements()
        .iter()
        .map(|e| e.offset())
        .collect();
    assert_eq!(
        committed,
        [4, 5, 6].map(Offset::Offset),
        "the commit at the new coordinator"
    );
}

/// SIGKILL of `group`'s coordinator `coordinating`; waits until another broker
/// coordinates the group and returns a surviving broker's address and the new
/// coordinator's id.
fn kill_coordinator(cluster: &mut TestCluster, coordinating: i32, group: &str) -> (String, i32) {
    cluster.kill9(coordinating).unwrap();
    let survivor = cluster.broker_other_than(coordinating);
    assert!(
        wait_until(TIMEOUT, || coordinator(&survivor, group)
            .is_ok_and(|c| c != coordinating)),
        "a new coordinator: {:?}",
        coordinator(&survivor, group)
    );
    let new_coordinator = coordinator(&survivor, group).unwrap();
    (survivor, new_coordinator)
}

/// The client address of node `id`.
fn node_address(cluster: &TestCluster, id: i32) -> String {
    cluster
        .nodes
        .iter()
        .find(|n| n.id == id)
        .map(|n| n.address())
        .expect("the node")
}

/// The bytes of the `.log` segment files of partition 0 of `__consumer_offsets` on node
/// `id`.
fn offsets_log_bytes(cluster: &TestCluster, id: i32) -> u64 {
    let node = cluster.nodes.iter().find(|n| n.id == id).expect("node");
    std::fs::read_dir(node.dir.join("data").join("__consumer_offsets-0"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

#[test]
fn a_partition_of_consumer_offsets_is_compacted_to_its_live_offsets_on_every_replica() {
    let mut extra = FAST.to_vec();
    extra.extend([
        "offsets.topic.num.partitions=1",
        "offsets.topic.segment.bytes=4096",
        "log.cleaner.backoff.ms=100",
    ]);
    let mut cluster = TestCluster::combined(3, &extra);
    let addr = cluster.bootstrap();
    create_replicated_topic(&addr, TOPIC, PARTITIONS, 3, &[]);
    assert!(wait_until(TIMEOUT, || commit(&addr, [0, 0, 0])), "commit");

    // 300 commits of three offsets: about 60 kB of records, fifteen segments' worth.
    let committer = consumer(&addr);
    for i in 1..=300 {
        committer
            .commit(&offsets([i, i + 1, i + 2]), CommitMode::Sync)
            .expect("commit");
    }
    drop(committer);

    // Each replica's cleaner keeps the three live offsets and the group's membership of
    // the sealed segments: less than the active segment's 4 kB beside it.
    assert!(
        wait_until(TIMEOUT, || {
            (1..=3).all(|id| offsets_log_bytes(&cluster, id) < 2 * 4096)
        }),
        "bytes of __consumer_offsets-0 per replica: {:?}",
        (1..=3)
            .map(|id| offsets_log_bytes(&cluster, id))
            .collect::<Vec<_>>()
    );

    // A new coordinator replays the compacted log to the latest offsets.
    let coordinating = coordinator(&addr, GROUP).unwrap();
    cluster.kill9(coordinating).unwrap();
    let survivor = cluster.broker_other_than(coordinating);
    assert!(
        wait_until(TIMEOUT, || committed(&survivor)
            == Some(vec![300, 301, 302])),
        "the offsets at the new coordinator: {:?}",
        committed(&survivor)
    );
}
