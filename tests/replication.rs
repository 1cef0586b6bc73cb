//! Replication between real `strom` processes (issue "Cluster, part 2"): acknowledged
//! acks=all records survive kill -9, SIGTERM and SIGSTOP of leaders, followers and the
//! active controller, checked from outside as Jepsen checks (the fault harness of
//! `strom bench faults`, at a small scale), and a leader cut off by a network partition
//! (each node in its own network namespace; root only); acks=1 loses records a leader
//! acknowledged alone while acks=all does not acknowledge them; an ISR below
//! `min.insync.replicas` refuses acks=all writes with NOT_ENOUGH_REPLICAS, while a setting
//! above a partition's replica count asks for every replica and no more; followers leave
//! the ISR when they die and rejoin when they return, as kcat shows, and a live follower
//! that stops fetching leaves it after `replica.lag.time.max.ms`; leader epochs fence
//! stale requests and a broker that is not a replica cannot fetch as one; ElectLeaders
//! moves leadership back to the preferred replica; DeleteRecords moves every ISR member's
//! log start, so a new leader starts where the old one did; a storage error takes one
//! replica offline and moves its leadership while the broker's other partitions serve; `strom bench network` runs seed 001 on
//! capped links and `strom bench controller` seed 003's steps. Every wait polls its
//! condition.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use common::client::create_replicated_topic;
use common::cluster::{run_bench, BenchRun, TestCluster};
use common::raw::Conn;
use common::wait_until;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use kafka_protocol::messages::{
    ApiKey, BrokerId, DeleteRecordsRequest, DeleteRecordsResponse, ElectLeadersRequest,
    ElectLeadersResponse, FetchRequest, FetchResponse,
};
use kafka_protocol::ResponseError;
use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use strom_bench::faults::{run_faults, Fault, FaultReport, FaultRun, ALL_FAULTS, WITH_NETWORK};

const TIMEOUT: Duration = Duration::from_secs(60);

/// Settings that make failures show quickly: a broker is fenced 3 s after its last
/// heartbeat, a follower leaves the ISR 3 s after it last caught up.
const FAST: &[&str] = &[
    "broker.session.timeout.ms=3000",
    "broker.heartbeat.interval.ms=500",
    "replica.lag.time.max.ms=3000",
];

/// A partition's leader, replicas and ISR.
type PartitionState = (i32, Vec<i32>, Vec<i32>);

/// Each partition's (leader, replicas, ISR) as the first broker of `bootstrap` reports it.
fn partitions(bootstrap: &str, topic: &str) -> Vec<PartitionState> {
    let addr = bootstrap.split(',').next().expect("a broker");
    let metadata = TestCluster::metadata(addr);
    let t = metadata
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == topic))
        .expect("topic in metadata");
    t.partitions
        .iter()
        .map(|p| {
            (
                p.leader_id.0,
                p.replica_nodes.iter().map(|b| b.0).collect(),
                p.isr_nodes.iter().map(|b| b.0).collect(),
            )
        })
        .collect()
}

fn wait_for_isr(addr: &str, topic: &str, isr_len: usize) {
    assert!(
        wait_until(TIMEOUT, || partitions(addr, topic)
            .iter()
            .all(|(l, _, isr)| *l >= 0 && isr.len() == isr_len)),
        "ISRs of {isr_len}: {:?}",
        partitions(addr, topic)
    );
}

#[test]
fn acknowledged_records_survive_kill_sigterm_and_sigstop_of_leaders_followers_and_the_controller() {
    // The harness starts its own cluster; hold the one-cluster-at-a-time lock meanwhile.
    let _serial = TestCluster::serial();
    let report = run_faults(
        Path::new(env!("CARGO_BIN_EXE_strom")),
        &FaultRun {
            faults: ALL_FAULTS.len(),
            acks: "all".into(),
            partitions: 3,
            rate: 500,
            extra: Vec::new(),
            network: false,
        },
    )
    .expect("the fault run");
    report.print();
    let injected: Vec<Fault> = report.faults.iter().map(|f| f.0).collect();
    assert_eq!(injected, ALL_FAULTS);
    assert!(
        report.acknowledged > 100,
        "{} acknowledged",
        report.acknowledged
    );
    assert!(
        report.lost.is_empty(),
        "acknowledged records lost: {:?}",
        report.lost
    );
    // A record librdkafka sent again under a bumped producer epoch is a new batch to any
    // broker (confluentinc/librdkafka#4953): the report counts it, the cluster answers
    // for the rest.
    assert_eq!(
        report.duplicated_by_cluster(),
        0,
        "duplicated: {:?}, of which sent again under a new producer epoch: {:?}",
        report.duplicated,
        report.resent_by_client
    );
    assert!(
        report.reordered.is_empty(),
        "reordered: {:?}",
        report.reordered
    );
    assert!(report.read >= report.acknowledged);
    assert_watched_in_order(&report);
}

#[test]
fn acknowledged_records_survive_a_leader_cut_off_by_a_network_partition() {
    common::assert_root("this test cuts links between network namespaces");
    let _serial = TestCluster::serial();
    // The harness moves its thread into the cluster's client namespace: not this one.
    let report = std::thread::spawn(|| {
        run_faults(
            Path::new(env!("CARGO_BIN_EXE_strom")),
            &FaultRun {
                faults: WITH_NETWORK.len(),
                acks: "all".into(),
                partitions: 3,
                rate: 500,
                extra: Vec::new(),
                network: true,
            },
        )
    })
    .join()
    .expect("the harness thread")
    .expect("the fault run");
    report.print();
    let injected: Vec<Fault> = report.faults.iter().map(|f| f.0).collect();
    assert_eq!(injected, WITH_NETWORK);
    assert!(
        report.acknowledged > 100,
        "{} acknowledged",
        report.acknowledged
    );
    assert!(
        report.holds(),
        "lost {:?}, duplicated {:?}, reordered {:?}",
        report.lost,
        report.duplicated,
        report.reordered
    );
    assert_watched_in_order(&report);
}

/// The consumer that read during the faults was served records, each partition's
/// offsets in order and none skipped, and only records the log kept where it read them.
fn assert_watched_in_order(report: &FaultReport) {
    let watch = &report.watch;
    assert!(
        watch.served > 100,
        "{} served during the faults",
        watch.served
    );
    assert!(watch.holds(), "{watch:?}");
}

/// Delivery reports by record number.
#[derive(Default)]
struct Deliveries(Mutex<BTreeMap<usize, Result<i64, RDKafkaErrorCode>>>);

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = Box<usize>;

    fn delivery(&self, result: &DeliveryResult<'_>, index: Self::DeliveryOpaque) {
        let outcome = match result {
            Ok(m) => Ok(m.offset()),
            Err((e, _)) => Err(e.rdkafka_error_code().unwrap_or(RDKafkaErrorCode::Unknown)),
        };
        self.0.lock().unwrap().insert(*index, outcome);
    }
}

/// A producer whose delivery reports carry the broker's error: no retries.
fn producer(bootstrap: &str, acks: &str, timeout_ms: &str) -> BaseProducer<Deliveries> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("retries", "0")
        .set("acks", acks)
        .set("enable.idempotence", "false")
        .set("linger.ms", "0")
        .set("message.timeout.ms", timeout_ms)
        .create_with_context(Deliveries::default())
        .expect("producer")
}

/// Sends `values` to partition 0 of `topic` and waits for every delivery report.
fn send_all(producer: &BaseProducer<Deliveries>, topic: &str, values: std::ops::Range<usize>) {
    let count = values.len();
    producer.context().0.lock().unwrap().clear();
    for i in values {
        let value = i.to_string();
        producer
            .send(
                BaseRecord::<str, str, _>::with_opaque_to(topic, Box::new(i))
                    .payload(value.as_str())
                    .partition(0),
            )
            .expect("send");
    }
    assert!(
        wait_until(TIMEOUT, || {
            producer.poll(Duration::from_millis(10));
            producer.context().0.lock().unwrap().len() == count
        }),
        "delivery reports"
    );
}

/// The values of partition 0 of `topic`, read from the start to its high watermark.
fn read_values(bootstrap: &str, topic: &str) -> Vec<usize> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "replication-check")
        .create()
        .expect("consumer");
    let (_, high) = consumer
        .fetch_watermarks(topic, 0, TIMEOUT)
        .expect("watermarks");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&assignment).unwrap();
    let mut values = Vec::new();
    let mut next = 0;
    assert!(
        wait_until(TIMEOUT, || {
            if next >= high {
                return true;
            }
            if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
                values.push(
                    std::str::from_utf8(m.payload().unwrap())
                        .unwrap()
                        .parse()
                        .unwrap(),
                );
                next = m.offset() + 1;
            }
            false
        }),
        "reading {topic} to {high}"
    );
    values
}

/// Pauses both followers of partition 0 of `topic`, sends `values` with `acks`, kills the
/// leader, resumes the followers, waits for one of them to lead and for the old leader to
/// rejoin, and returns (the values acknowledged, the values read back).
///
/// A follower may have had a fetch parked at the leader when it was paused: the leader
/// answers it with whatever arrives first, and that answer waits in the paused follower's
/// socket. With `one_at_a_time` each value is sent only after the previous one was
/// acknowledged, so that answer can carry the first values away but never the last.
fn leader_dies_alone_with(
    cluster: &mut TestCluster,
    topic: &str,
    acks: &str,
    values: std::ops::Range<usize>,
    one_at_a_time: bool,
) -> (Vec<usize>, Vec<usize>) {
    let addr = cluster.bootstrap();
    let (leader, replicas, _) = partitions(&addr, topic)[0].clone();
    let producer = producer(&addr, acks, "4000");
    // A first record, acknowledged by all, so the producer knows the leader.
    send_all(&producer, topic, 1_000_000..1_000_001);
    let followers: Vec<i32> = replicas.into_iter().filter(|b| *b != leader).collect();
    for f in &followers {
        cluster.pause(*f, true).unwrap();
    }
    let mut acknowledged = Vec::new();
    let batches: Vec<std::ops::Range<usize>> = if one_at_a_time {
        values.map(|v| v..v + 1).collect()
    } else {
        vec![values]
    };
    for batch in batches {
        send_all(&producer, topic, batch);
        let deliveries = producer.context().0.lock().unwrap();
        acknowledged.extend(
            deliveries
                .iter()
                .filter(|(_, r)| r.is_ok())
                .map(|(i, _)| *i),
        );
    }
    acknowledged.sort_unstable();
    kill9_leader(cluster, leader, topic, &followers);
    cluster.restart(leader).unwrap();
    wait_for_isr(&cluster.bootstrap(), topic, 3);
    let read = read_values(&cluster.bootstrap(), topic)
        .into_iter()
        .filter(|v| *v != 1_000_000)
        .collect();
    (acknowledged, read)
}

/// Kills `leader` of partition 0 of `topic` with SIGKILL, resumes the `paused` brokers
/// and waits until another broker leads it. Returns a surviving broker's address.
fn kill9_leader(cluster: &mut TestCluster, leader: i32, topic: &str, paused: &[i32]) -> String {
    cluster.kill9(leader).unwrap();
    for f in paused {
        cluster.pause(*f, false).unwrap();
    }
    let survivor = cluster.broker_other_than(leader);
    assert!(
        wait_until(TIMEOUT, || {
            let l = partitions(&survivor, topic)[0].0;
            l >= 0 && l != leader
        }),
        "a broker other than {leader} leads {topic}"
    );
    survivor
}

#[test]
fn acks_one_loses_what_a_leader_acknowledged_alone_and_acks_all_never_acknowledges_it() {
    // The followers stay paused past the producer's 4 s delivery timeout; with FAST's
    // 3 s lag time the leader could drop them from the ISR first, and with no ISR member
    // left after its kill no other broker could lead. They must stay in the ISR here.
    let mut cluster = TestCluster::combined(
        3,
        &[
            "broker.session.timeout.ms=3000",
            "broker.heartbeat.interval.ms=500",
            "replica.lag.time.max.ms=30000",
        ],
    );
    let addr = cluster.bootstrap();
    create_replicated_topic(&addr, "acks-one", 1, 3, &[]);
    create_replicated_topic(&addr, "acks-all", 1, 3, &[("min.insync.replicas", "2")]);
    wait_for_isr(&addr, "acks-one", 3);
    wait_for_isr(&addr, "acks-all", 3);

    // acks=1: the leader acknowledges records no follower has, then dies; a follower
    // becomes leader without them and the old leader truncates them when it returns.
    // Only what a fetch parked before the pause carried away survives: a prefix of the
    // values, never the last.
    let (acknowledged, read) = leader_dies_alone_with(&mut cluster, "acks-one", "1", 0..20, true);
    assert_eq!(
        acknowledged,
        (0..20).collect::<Vec<_>>(),
        "acks=1 acknowledged"
    );
    assert_eq!(
        read,
        (0..read.len()).collect::<Vec<_>>(),
        "acks=1 kept a prefix"
    );
    assert!(
        read.len() < 20,
        "acks=1 lost the last acknowledged records: {read:?}"
    );

    // acks=all: the same records are never acknowledged, so nothing acknowledged is lost.
    let (acknowledged, read) =
        leader_dies_alone_with(&mut cluster, "acks-all", "all", 0..20, false);
    assert_eq!(acknowledged, Vec::<usize>::new(), "acks=all acknowledged");
    assert!(read.iter().all(|v| *v < 20), "acks=all read back {read:?}");
}

#[test]
fn min_insync_above_the_replica_count_asks_for_every_replica_and_no_more() {
    // A broker-wide min.insync.replicas of 2 and a partition of one replica (here a
    // standalone node): Kafka's effective min ISR is 1, so acks=all is accepted and what
    // is written is committed and readable.
    let broker = common::StromBroker::start(&["min.insync.replicas=2"]);
    let mut conn = Conn::open(&broker);
    assert_eq!(conn.create_topic("one-replica"), 0);
    let (error, base_offset) = conn.produce(
        "one-replica",
        common::raw::batch(&[b"first".as_slice(), b"second".as_slice()]),
    );
    assert_eq!(
        (error, base_offset),
        (0, 0),
        "acks=all with one replica of one"
    );
    let fetch = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(common::raw::topic_name("one-replica"))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let response: FetchResponse = conn.call(ApiKey::Fetch, 11, &fetch);
    let partition = &response.responses[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    assert_eq!(partition.high_watermark, 2, "both records are committed");
    assert!(partition.records.as_ref().is_some_and(|r| !r.is_empty()));
}

#[test]
fn an_isr_below_min_insync_refuses_acks_all_and_followers_leave_and_rejoin_the_isr() {
    let mut cluster = TestCluster::combined(3, FAST);
    let addr = cluster.bootstrap();
    create_replicated_topic(&addr, "strict", 1, 3, &[("min.insync.replicas", "3")]);
    wait_for_isr(&addr, "strict", 3);
    let (leader, replicas, _) = partitions(&addr, "strict")[0].clone();
    let follower = *replicas.iter().find(|b| **b != leader).unwrap();
    let all = producer(&addr, "all", "3000");
    send_all(&all, "strict", 0..5);
    assert!(all.context().0.lock().unwrap().values().all(Result::is_ok));

    // kcat sees the follower leave the ISR once it is fenced...
    cluster.kill9(follower).unwrap();
    let kcat_isrs = |bootstrap: &str| -> Vec<i64> {
        let out = Command::new("kcat")
            .args(["-b", bootstrap, "-L", "-J", "-t", "strict"])
            .output()
            .expect("kcat");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let mut isrs: Vec<i64> = json["topics"][0]["partitions"][0]["isrs"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v["id"].as_i64()).collect())
            .unwrap_or_default();
        isrs.sort_unstable();
        isrs
    };
    let survivor = cluster.broker_other_than(follower);
    assert!(
        wait_until(TIMEOUT, || kcat_isrs(&survivor).len() == 2),
        "ISR after the follower died: {:?}",
        kcat_isrs(&survivor)
    );
    assert!(!kcat_isrs(&survivor).contains(&i64::from(follower)));

    // ... so acks=all is refused with NOT_ENOUGH_REPLICAS, while acks=1 is accepted.
    let all = producer(&survivor, "all", "2000");
    send_all(&all, "strict", 5..6);
    assert_eq!(
        all.context().0.lock().unwrap()[&5],
        Err(RDKafkaErrorCode::NotEnoughReplicas)
    );
    let one = producer(&survivor, "1", "10000");
    send_all(&one, "strict", 6..7);
    assert!(one.context().0.lock().unwrap()[&6].is_ok());

    // The follower returns, catches up and rejoins; acks=all works again and every
    // acknowledged record is there.
    cluster.restart(follower).unwrap();
    assert!(
        wait_until(TIMEOUT, || kcat_isrs(&survivor).len() == 3),
        "ISR after the follower returned: {:?}",
        kcat_isrs(&survivor)
    );
    let all = producer(&cluster.bootstrap(), "all", "10000");
    send_all(&all, "strict", 7..8);
    assert!(all.context().0.lock().unwrap()[&7].is_ok());
    assert_eq!(
        read_values(&cluster.bootstrap(), "strict"),
        vec![0, 1, 2, 3, 4, 6, 7]
    );
}

#[test]
fn a_live_follower_that_stops_fetching_leaves_the_isr_after_the_lag_time_and_rejoins() {
    // Sessions far longer than the lag time: only the lag can take the follower out, not
    // fencing (the kill -9 test above leaves the ISR through fencing).
    let cluster = TestCluster::combined(
        3,
        &[
            "broker.session.timeout.ms=60000",
            "broker.heartbeat.interval.ms=500",
            "replica.lag.time.max.ms=2000",
        ],
    );
    let addr = cluster.bootstrap();
    create_replicated_topic(&addr, "lagging", 1, 3, &[]);
    wait_for_isr(&addr, "lagging", 3);
    let (leader, replicas, _) = partitions(&addr, "lagging")[0].clone();
    let first = addr.split(',').next().expect("a broker");
    let controller = TestCluster::active_controller(first);
    let follower = *replicas
        .iter()
        .find(|b| **b != leader && **b != controller)
        .expect("a follower that is not the active controller");
    cluster.pause(follower, true).unwrap();
    let survivor = cluster.broker_other_than(follower);
    // A caught-up follower of an idle partition stays in sync (Kafka's rule), so the
    // leader gets a record the paused follower cannot fetch.
    let one = producer(&survivor, "1", "10000");
    send_all(&one, "lagging", 0..1);
    assert!(one.context().0.lock().unwrap()[&0].is_ok());
    let isr = || partitions(&survivor, "lagging")[0].2.clone();
    assert!(
        wait_until(TIMEOUT, || isr().len() == 2 && !isr().contains(&follower)),
        "ISR while follower {follower} is paused: {:?}",
        isr()
    );
    assert!(
        TestCluster::listed_brokers(&survivor).contains(&follower),
        "the follower left the ISR by being fenced, not by lagging"
    );
    cluster.pause(follower, false).unwrap();
    assert!(
        wait_until(TIMEOUT, || isr().len() == 3),
        "ISR after follower {follower} resumed: {:?}",
        isr()
    );
}

/// A Fetch of partition 0 of `topic` (by id) from `replica_id` (-1: a consumer) with
/// `current_leader_epoch`.
fn fetch(addr: &str, topic: &str, replica_id: i32, current_leader_epoch: i32) -> FetchResponse {
    let metadata = TestCluster::metadata(addr);
    let topic_id = metadata
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == topic))
        .unwrap()
        .topic_id;
    let request = FetchRequest::default()
        .with_replica_state(ReplicaState::default().with_replica_id(BrokerId(replica_id)))
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic_id(topic_id)
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(current_leader_epoch)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    Conn::connect(addr).call(ApiKey::Fetch, 15, &request)
}

#[test]
fn leader_epochs_fence_stale_requests_and_only_replicas_fetch_as_followers() {
    let mut cluster = TestCluster::combined(3, FAST);
    let addr = cluster.bootstrap();
    create_replicated_topic(&addr, "epochs", 1, 2, &[]);
    wait_for_isr(&addr, "epochs", 2);
    let (leader, replicas, _) = partitions(&addr, "epochs")[0].clone();
    let leader_addr = format!("127.0.0.1:{}", cluster.node(leader).port);
    let code = |r: FetchResponse| r.responses[0].partitions[0].error_code;
    assert_eq!(code(fetch(&leader_addr, "epochs", -1, 0)), 0);
    assert_eq!(
        code(fetch(&leader_addr, "epochs", -1, 1)),
        ResponseError::UnknownLeaderEpoch.code()
    );
    let outsider = (1..=3).find(|b| !replicas.contains(b)).unwrap();
    assert_eq!(
        code(fetch(&leader_addr, "epochs", outsider, -1)),
        ResponseError::NotLeaderOrFollower.code()
    );

    // A leader change bumps the epoch: the old one is fenced on the new leader.
    let survivor = kill9_leader(&mut cluster, leader, "epochs", &[]);
    let new_leader = partitions(&survivor, "epochs")[0].0;
    let new_addr = format!("127.0.0.1:{}", cluster.node(new_leader).port);
    assert_eq!(
        code(fetch(&new_addr, "epochs", -1, 0)),
        ResponseError::FencedLeaderEpoch.code()
    );
    assert_eq!(code(fetch(&new_addr, "epochs", -1, 1)), 0);
}

/// DeleteRecords of partition 0 of `topic` below `offset` through `addr`: (error code, low
/// watermark).
fn delete_records(addr: &str, topic: &str, offset: i64) -> (i16, i64) {
    let request = DeleteRecordsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(common::raw::topic_name(topic))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(0)
                .with_offset(offset)])]);
    let response: DeleteRecordsResponse =
        Conn::connect(addr).call(ApiKey::DeleteRecords, 2, &request);
    let p = &response.topics[0].partitions[0];
    (p.error_code, p.low_watermark)
}

#[test]
fn delete_records_moves_the_log_start_of_every_isr_member_and_survives_a_failover() {
    let mut cluster = TestCluster::combined(3, FAST);
    let addr = cluster.bootstrap();
    create_replicated_topic(&addr, "trimmed", 1, 3, &[("min.insync.replicas", "2")]);
    wait_for_isr(&addr, "trimmed", 3);
    send_all(&producer(&addr, "all", "10000"), "trimmed", 0..10);
    let (leader, _, _) = partitions(&addr, "trimmed")[0].clone();
    let leader_addr = format!("127.0.0.1:{}", cluster.node(leader).port);

    assert_eq!(
        delete_records(&leader_addr, "trimmed", 11),
        (ResponseError::OffsetOutOfRange.code(), -1),
        "beyond the high watermark"
    );
    // Answered once every ISR member's log start is 6: the low watermark.
    assert_eq!(delete_records(&leader_addr, "trimmed", 6), (0, 6));

    // A follower that now leads starts its log where the old leader's did.
    let survivor = kill9_leader(&mut cluster, leader, "trimmed", &[]);
    assert_eq!(
        read_values(&survivor, "trimmed"),
        (6..10).collect::<Vec<_>>()
    );
}

/// Creates `topic` with one partition on `replicas` (the first preferred) and `configs`.
fn create_assigned_topic(bootstrap: &str, topic: &str, replicas: &[i32], configs: &[(&str, &str)]) {
    let assignment = [replicas];
    let mut new_topic = NewTopic::new(topic, 1, TopicReplication::Variable(&assignment));
    for (k, v) in configs {
        new_topic = new_topic.set(k, v);
    }
    let options = AdminOptions::new().request_timeout(Some(TIMEOUT));
    let results = common::client::block_on(
        common::client::admin(bootstrap).create_topics(&[new_topic], &options),
    )
    .expect("create_topics request");
    for result in results {
        result.unwrap_or_else(|(t, e)| panic!("create topic {t}: {e}"));
    }
}

#[test]
fn a_storage_error_takes_one_replica_offline_and_its_leadership_moves() {
    let cluster = TestCluster::combined(3, FAST);
    let addr = cluster.bootstrap();
    // Broker 1 leads both; "failing" rolls a segment every few records.
    let configs = [("min.insync.replicas", "2"), ("segment.bytes", "4096")];
    create_assigned_topic(&addr, "failing", &[1, 2, 3], &configs);
    create_assigned_topic(&addr, "healthy", &[1, 2, 3], &configs);
    wait_for_isr(&addr, "failing", 3);
    wait_for_isr(&addr, "healthy", 3);
    assert_eq!(partitions(&addr, "failing")[0].0, 1);

    // The storage under failing-0 on broker 1 goes away: its next roll fails.
    std::fs::remove_dir_all(cluster.node(1).dir.join("data").join("failing-0")).unwrap();
    let idempotent: BaseProducer<Deliveries> = ClientConfig::new()
        .set("bootstrap.servers", &addr)
        .set("enable.idempotence", "true")
        .set("linger.ms", "0")
        .set("message.timeout.ms", "60000")
        .create_with_context(Deliveries::default())
        .expect("producer");
    send_all(&idempotent, "failing", 0..300);
    let failed: Vec<_> = idempotent
        .context()
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, r)| r.is_err())
        .map(|(i, r)| (*i, *r))
        .collect();
    assert_eq!(failed, vec![], "every record is acknowledged");
    let (leader, _, isr) = partitions(&addr, "failing")[0].clone();
    assert!(
        leader != 1 && !isr.contains(&1),
        "leader {leader}, ISR {isr:?}"
    );
    assert!(
        cluster
            .stderr(1)
            .contains("storage error: this replica is offline"),
        "broker 1 says why"
    );
    assert_eq!(read_values(&addr, "failing"), (0..300).collect::<Vec<_>>());

    // Nothing else on broker 1 is touched: it still leads "healthy" with a whole ISR.
    assert_eq!(
        partitions(&addr, "healthy")[0],
        (1, vec![1, 2, 3], vec![1, 2, 3])
    );
    send_all(&producer(&addr, "all", "10000"), "healthy", 0..10);
    assert_eq!(read_values(&addr, "healthy"), (0..10).collect::<Vec<_>>());
}

/// ElectLeaders PREFERRED of partition 0 of `topic` through `addr`: its error code.
fn elect_preferred(addr: &str, topic: &str) -> i16 {
    let request = ElectLeadersRequest::default()
        .with_election_type(0)
        .with_timeout_ms(30_000)
        .with_topic_partitions(Some(vec![TopicPartitions::default()
            .with_topic(common::raw::topic_name(topic))
            .with_partitions(vec![0])]));
    let response: ElectLeadersResponse =
        Conn::connect(addr).call(ApiKey::ElectLeaders, 2, &request);
    assert_eq!(response.error_code, 0);
    response.replica_election_results[0].partition_result[0].error_code
}

#[test]
fn elect_leaders_moves_leadership_back_to_the_preferred_replica() {
    let mut cluster =
        TestCluster::combined(3, &[FAST, &["auto.leader.rebalance.enable=false"]].concat());
    let addr = cluster.bootstrap();
    create_replicated_topic(&addr, "preferred", 1, 3, &[]);
    wait_for_isr(&addr, "preferred", 3);
    let (preferred, replicas, _) = partitions(&addr, "preferred")[0].clone();
    assert_eq!(preferred, replicas[0]);
    let any = cluster.broker_other_than(-1);
    assert_eq!(
        elect_preferred(&any, "preferred"),
        ResponseError::ElectionNotNeeded.code()
    );

    let survivor = kill9_leader(&mut cluster, preferred, "preferred", &[]);
    assert_eq!(
        elect_preferred(&survivor, "preferred"),
        ResponseError::PreferredLeaderNotAvailable.code()
    );
    cluster.restart(preferred).unwrap();
    wait_for_isr(&survivor, "preferred", 3);
    assert_ne!(partitions(&survivor, "preferred")[0].0, preferred);
    assert_eq!(elect_preferred(&survivor, "preferred"), 0);
    assert!(
        wait_until(TIMEOUT, || partitions(&survivor, "preferred")[0].0
            == preferred),
        "the preferred replica leads again"
    );
}

#[test]
fn bench_network_runs_seed_001_on_capped_links_and_removes_its_namespaces() {
    common::assert_root("strom bench network caps links between network namespaces");
    let _serial = TestCluster::serial();
    let namespaces = || {
        String::from_utf8(
            Command::new("ip")
                .args(["netns", "list"])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
    };
    let before = namespaces();
    let BenchRun { stdout, json, html } =
        run_bench(&["bench", "network", "--records", "20000", "--linger-ms", "0"]);
    for experiment in [
        "producer, default settings",
        "producer, batch.size=500",
        "producer, linger.ms=0",
        "consumer, --fetch-size 10000 --threads 1",
        "consumer, --fetch-size 100000 --threads 1",
    ] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(experiment))
            .unwrap_or_else(|| panic!("no {experiment} row in\n{stdout}"));
        assert!(
            line.contains("MB/s (MiB)") && !line.contains("failed"),
            "{line}"
        );
    }
    assert!(
        stdout.contains("3 brokers x 100 Mbit/s / RF 2 = 17.88 MiB/s"),
        "{stdout}"
    );
    assert_eq!(namespaces(), before, "namespaces left behind");

    let limit = json["figures"]["link_limit_mib_per_sec"].as_f64().unwrap();
    assert!((limit - 17.88).abs() < 0.01, "{limit}");
    assert_eq!(json["cluster"]["brokers"], 3);
    assert_eq!(json["cluster"]["replication_factor"], 2);
    assert_eq!(json["settings"]["records"], 20000);
    let default_mb = json["comparison"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["experiment"] == "producer, default settings" && r["metric"] == "MB/s (MiB)")
        .expect("the default producer's MB/s row");
    assert!(default_mb["strom_value"].as_f64().unwrap() > 0.0);
    assert_eq!(default_mb["seed_value"], 15.76);
    // Two producer runs, one linger.ms run and two consumer runs.
    assert_eq!(json["runs"].as_array().unwrap().len(), 5);
    assert!(html.contains("aria-label=\"Throughput, MB/s (MiB)\""));
    assert!(html.contains("17.88 MiB/s"), "the link-bound limit");
}

#[test]
fn bench_controller_times_seed_003_steps_beside_the_seed() {
    let _serial = TestCluster::serial();
    let BenchRun { stdout, json, html } = run_bench(&[
        "bench",
        "controller",
        "--max-topics",
        "2",
        "--session-timeout-ms",
        "3000",
        "--rounds",
        "2",
    ]);
    assert!(
        stdout.contains("broker.session.timeout.ms=3000"),
        "{stdout}"
    );
    assert!(stdout.contains("the median of 2 rounds"), "{stdout}");
    for (topics, replicas, seed) in [("1", "60", "40"), ("2", "120", "100")] {
        let row: Vec<&str> = stdout
            .lines()
            .map(|l| {
                l.split_whitespace()
                    .filter(|w| *w != "|")
                    .collect::<Vec<_>>()
            })
            .find(|w| w.first() == Some(&topics))
            .unwrap_or_else(|| panic!("no row for {topics} topics in\n{stdout}"));
        assert_eq!((row[1], row[2]), (replicas, seed), "{row:?}");
        let kill9: f64 = row[12].parse().unwrap();
        // The session runs from the broker's last heartbeat, which came up to one
        // broker.heartbeat.interval.ms (2 s by default) before the kill.
        assert!(
            kill9 >= 3.0 - 2.0,
            "kill -9 handling {kill9} s cannot beat the 3 s session timeout less one heartbeat interval"
        );
        let rss: f64 = row[15].parse().unwrap();
        assert!(rss > 1.0, "the restarted broker's RSS in MB: {row:?}");
    }

    let sweeps = json["figures"]["sweeps"].as_array().unwrap();
    assert_eq!(sweeps.len(), 1);
    assert_eq!(sweeps[0]["session_timeout_ms"], 3000);
    let steps: Vec<_> = sweeps[0]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["topics"].clone(), s["replicas_per_broker"].clone()))
        .collect();
    assert_eq!(steps, [(1.into(), 60.into()), (2.into(), 120.into())]);
    assert!(sweeps[0]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["broker_rss_mb"].as_f64().is_some_and(|mb| mb > 1.0)));
    for step in sweeps[0]["steps"].as_array().unwrap() {
        let rounds = step["rounds"].as_array().unwrap();
        assert_eq!(rounds.len(), 2, "every round is in the JSON: {step}");
        assert!(
            rounds
                .iter()
                .all(|r| r["kill9_s"].as_f64().is_some_and(|s| s >= 1.0)),
            "{step}"
        );
    }
    assert_eq!(
        (&json["cluster"]["brokers"], &json["cluster"]["controllers"]),
        (&5.into(), &3.into())
    );
    assert_eq!(json["settings"]["max_topics"], 2);
    let charts = &html[..html.find("<h2>Environment").unwrap()];
    for measure in [
        "broker start-up",
        "controlled shutdown",
        "controller failover",
        "kill -9 handling",
    ] {
        let title = format!("aria-label=\"seed 003: {measure}\"");
        let at = charts
            .find(&title)
            .unwrap_or_else(|| panic!("no {measure} chart above the environment"));
        let chart = &charts[at..at + charts[at..].find("</svg>").unwrap()];
        assert!(
            chart.contains(">strom, broker.session.timeout.ms=3000<"),
            "{chart}"
        );
        assert!(chart.contains(">Kafka 1.1 (seed 003, ZooKeeper session 6 s)<"));
        assert_eq!(chart.matches("<circle").count(), 2 + 1, "{measure}");
    }
}

#[test]
fn bench_faults_reports_each_fault_and_every_count() {
    let _serial = TestCluster::serial();
    let BenchRun { stdout, json, html } = run_bench(&["bench", "faults", "--faults", "2"]);
    assert!(stdout.contains("lost or changed: 0"), "{stdout}");
    assert_eq!(json["figures"]["holds"], true);
    let faults: Vec<_> = json["figures"]["faults"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["fault"].as_str().unwrap())
        .collect();
    assert_eq!(faults, ["KillLeader", "TerminateLeader"]);
    assert_eq!(json["cluster"]["replication_factor"], 3);
    assert_eq!(json["settings"]["faults"], 2);
    assert!(html.contains("aria-label=\"Fault → every ISR whole again\""));
    assert!(html.contains("<td>acknowledged, lost or changed</td><td class=\"num\">0</td>"));
}
