//! A KRaft cluster of real `strom` processes (issue "Cluster, part 1"): three combined
//! nodes formatted with one cluster id spread a topic's leaders over all three and serve
//! librdkafka through the bootstrap list; kafka-python and kafkajs see the three brokers;
//! a kill -9 of the active controller elects another that takes writes; SIGTERM is a
//! controlled shutdown and the restarted broker rejoins; a broker killed with -9 is fenced
//! after its session timeout, can be unregistered (UnregisterBroker) and registers anew
//! when started again; three controller-only and two broker-only processes work as
//! well; the controller listener refuses foreign clusters, duplicate registrations and
//! garbage, and speaks Kafka's AlterPartition; `strom bench quorum` reports every round it timed; dynamic broker configs
//! reach every broker through the metadata log. Every wait polls its condition.

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use common::client::{block_on, create_topic, send_waiting};
use common::cluster::{run_bench, BenchRun, TestCluster};
use common::{test_file, wait_until};
use kafka_protocol::messages::{
    ApiKey, BrokerId as KafkaBrokerId, DescribeQuorumResponse, UnregisterBrokerRequest,
    UnregisterBrokerResponse,
};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use strom_bench::faults::Deliveries;
use strom_controller::rpc::{codes, Connection, Request, Response};
use strom_controller::ControllerClient;

const TIMEOUT: Duration = Duration::from_secs(60);

/// Produces `count` records to `topic` (record i to partition i mod `partitions`, value
/// `i`) with an idempotent acks=all librdkafka producer, and returns where each landed.
fn produce(bootstrap: &str, topic: &str, partitions: i32, count: usize) -> Vec<(i32, i64)> {
    let producer: BaseProducer<Deliveries> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .create_with_context(Deliveries::default())
        .expect("producer");
    for i in 0..count {
        let value = i.to_string();
        let record = BaseRecord::with_opaque_to(topic, Box::new(i))
            .payload(&value)
            .key(&value)
            .partition(i as i32 % partitions);
        send_waiting(&producer, record);
    }
    producer.flush(TIMEOUT).expect("flush");
    let deliveries = producer.context().reports.lock().unwrap();
    assert_eq!(deliveries.len(), count, "delivery reports");
    deliveries
        .iter()
        .map(|(i, outcome)| {
            outcome
                .clone()
                .unwrap_or_else(|e| panic!("record {i}: {e}"))
        })
        .collect()
}

/// Reads every partition of `topic` from the beginning until `count` records came back;
/// returns the values of each partition in offset order.
fn consume(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    count: usize,
) -> BTreeMap<i32, Vec<String>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "cluster-test-assign-only")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    for p in 0..partitions {
        assignment
            .add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&assignment).expect("assign");
    let mut out: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    let mut read = 0;
    let deadline = Instant::now() + TIMEOUT;
    while read < count && Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            out.entry(m.partition())
                .or_default()
                .push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
            read += 1;
        }
    }
    assert_eq!(read, count, "records read back from {topic}");
    out
}

/// The leader of each partition of `topic` in `addr`'s Metadata (empty if unknown).
fn leaders(addr: &str, topic: &str) -> Vec<i32> {
    TestCluster::metadata(addr)
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == topic))
        .map(|t| t.partitions.iter().map(|p| p.leader_id.0).collect())
        .unwrap_or_default()
}

/// Checks that every record `produce` wrote came back, in order per partition.
fn assert_all_read(read: &BTreeMap<i32, Vec<String>>, partitions: i32, count: usize) {
    for p in 0..partitions {
        let expected: Vec<String> = (0..count)
            .filter(|i| *i as i32 % partitions == p)
            .map(|i| i.to_string())
            .collect();
        assert_eq!(
            read.get(&p).cloned().unwrap_or_default(),
            expected,
            "partition {p}"
        );
    }
}

#[test]
fn three_combined_nodes_spread_leaders_and_serve_every_record_through_the_bootstrap_list() {
    let cluster = TestCluster::combined(3, &[]);
    cluster.wait_for_brokers(&[1, 2, 3]);
    create_topic(&cluster.bootstrap(), "spread", 6);
    for node in &cluster.nodes {
        let addr = node.address();
        assert!(
            wait_until(TIMEOUT, || leaders(&addr, "spread").len() == 6),
            "broker {} does not see the topic",
            node.id
        );
        let mut per_broker = BTreeMap::new();
        for leader in leaders(&addr, "spread") {
            *per_broker.entry(leader).or_insert(0) += 1;
        }
        assert_eq!(
            per_broker,
            BTreeMap::from([(1, 2), (2, 2), (3, 2)]),
            "leaders as broker {} sees them",
            node.id
        );
    }
    let landed = produce(&cluster.bootstrap(), "spread", 6, 600);
    for (i, (partition, _)) in landed.iter().enumerate() {
        assert_eq!(*partition, i as i32 % 6);
    }
    assert_all_read(&consume(&cluster.bootstrap(), "spread", 6, 600), 6, 600);
    let quorum = TestCluster::describe_quorum(&cluster.nodes[0].address());
    let partition = &quorum.topics[0].partitions[0];
    assert_eq!(partition.current_voters.len(), 3);
    assert!(partition.high_watermark > 0);
    assert_produce_elsewhere_names_the_leader(&cluster, "spread");
}

/// A Produce (v12) to a broker that does not lead partition 0 gets NOT_LEADER_OR_FOLLOWER
/// with the current leader and its endpoint (KIP-951).
fn assert_produce_elsewhere_names_the_leader(cluster: &TestCluster, topic: &str) {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};
    let leader = leaders(&cluster.nodes[0].address(), topic)[0];
    let elsewhere = cluster.broker_other_than(leader);
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(common::raw::topic_name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(common::raw::batch(&[b"x"])))])]);
    let response: ProduceResponse =
        common::raw::Conn::connect(&elsewhere).call(ApiKey::Produce, 12, &request);
    let partition = &response.responses[0].partition_responses[0];
    assert_eq!(partition.error_code, 6, "NOT_LEADER_OR_FOLLOWER");
    assert_eq!(partition.current_leader.leader_id.0, leader);
    assert_eq!(
        response
            .node_endpoints
            .iter()
            .map(|e| (e.node_id.0, e.port))
            .collect::<Vec<_>>(),
        vec![(leader, i32::from(cluster.node(leader).port))]
    );
}

#[test]
fn kill_9_of_the_active_controller_elects_another_that_takes_writes() {
    let mut cluster = TestCluster::combined(3, &[]);
    cluster.wait_for_brokers(&[1, 2, 3]);
    let any = cluster.nodes[0].address();
    assert!(wait_until(TIMEOUT, || TestCluster::active_controller(&any) > 0));
    let old = TestCluster::active_controller(&any);
    cluster.kill9(old).unwrap();
    let (other, new) = another_active_controller(&cluster, old);
    assert!(
        wait_until(TIMEOUT, || TestCluster::metadata(&other).controller_id.0
            == new),
        "Metadata names the new active controller (a combined node is a live broker)"
    );
    create_topic(&other, "after-failover", 2);
    assert!(wait_until(TIMEOUT, || leaders(&other, "after-failover")
        .len()
        == 2));
    let epoch_before = TestCluster::describe_quorum(&other).topics[0].partitions[0].leader_epoch;
    cluster.restart(old).unwrap();
    let back = cluster.node(old).address();
    assert!(
        wait_until(TIMEOUT, || leaders(&back, "after-failover").len() == 2),
        "the restarted node catches up"
    );
    assert!(
        TestCluster::describe_quorum(&back).topics[0].partitions[0].leader_epoch >= epoch_before
    );
}

/// Waits until a node other than `old` is the active controller: a broker's address
/// other than `old`'s, and the new controller's id.
fn another_active_controller(cluster: &TestCluster, old: i32) -> (String, i32) {
    let other = cluster.broker_other_than(old);
    assert!(
        wait_until(TIMEOUT, || {
            let now = TestCluster::active_controller(&other);
            now > 0 && now != old
        }),
        "no new active controller after {old} stopped"
    );
    let new = TestCluster::active_controller(&other);
    (other, new)
}

/// A paused active controller closes no socket and keeps its port open: the other voters
/// stand for election once `controller.quorum.fetch.timeout.ms` passes without a word
/// from it; resumed, it follows the new leader.
#[test]
fn sigstop_of_the_active_controller_elects_another_and_the_resumed_one_follows() {
    let cluster = TestCluster::combined(3, &[]);
    cluster.wait_for_brokers(&[1, 2, 3]);
    let any = cluster.nodes[0].address();
    assert!(wait_until(TIMEOUT, || TestCluster::active_controller(&any) > 0));
    let old = TestCluster::active_controller(&any);
    cluster.pause(old, true).unwrap();
    let (other, new) = another_active_controller(&cluster, old);
    // The paused node is a broker too: once its session expires it is fenced and no
    // longer listed, so the admin client does not send to it.
    assert!(
        wait_until(TIMEOUT, || !TestCluster::listed_brokers(&other)
            .contains(&old)),
        "the paused broker {old} is fenced"
    );
    create_topic(&other, "while-paused", 2);
    assert!(wait_until(TIMEOUT, || leaders(&other, "while-paused")
        .len()
        == 2));
    cluster.pause(old, false).unwrap();
    let back = cluster.node(old).address();
    assert!(
        wait_until(TIMEOUT, || TestCluster::active_controller(&back) == new
            && leaders(&back, "while-paused").len() == 2),
        "the resumed node follows controller {new} and learns the topic"
    );
}

/// Runs `test` on three controllers and two brokers, each in its own network namespace
/// (root only), once both brokers are registered.
fn on_split_cluster_in_namespaces(test: impl FnOnce(&TestCluster) + Send + 'static) {
    common::assert_root("this test cuts links between network namespaces");
    // The cluster moves its thread into its client namespace: not the test's own.
    std::thread::spawn(|| {
        let cluster = TestCluster::isolated_split(3, 2, &[]);
        cluster.wait_for_brokers(&[4, 5]);
        test(&cluster);
    })
    .join()
    .expect("the test's thread");
}

/// Kafka's check-quorum (the split brain of KAFKA-15489): an active controller cut off
/// from the other voters, which the brokers still reach, stops acting as active once no
/// majority has acknowledged it for 1.5 × `controller.quorum.fetch.timeout.ms`. Before,
/// it answered the brokers' heartbeats from memory while the new controller, hearing
/// none, fenced every broker: all partitions went offline and no broker knew why.
#[test]
fn an_active_controller_cut_off_from_the_other_voters_steps_aside_and_the_brokers_follow_the_new_one(
) {
    on_split_cluster_in_namespaces(|cluster| {
        let brokers = [4, 5].map(|id| cluster.node(id).address());
        let old = TestCluster::active_controller(&brokers[0]);
        assert!((1..=3).contains(&old), "active controller {old}");
        let majority: Vec<i32> = (1..=3).filter(|v| *v != old).collect();
        let network = cluster.network().expect("an isolated cluster's network");
        network.cut(old, &majority).unwrap();
        let followed = wait_until(TIMEOUT, || {
            brokers.iter().all(|b| {
                majority.contains(&TestCluster::active_controller(b))
                    && TestCluster::listed_brokers(b) == [4, 5]
            })
        });
        assert!(
            followed,
            "brokers 4 and 5 name controllers {:?} and list {:?}",
            brokers
                .each_ref()
                .map(|b| TestCluster::active_controller(b)),
            brokers.each_ref().map(|b| TestCluster::listed_brokers(b))
        );
        // The majority's controller takes writes from the brokers.
        create_topic(&brokers[1], "after-the-cut", 2);
        assert!(wait_until(TIMEOUT, || leaders(
            &brokers[0],
            "after-the-cut"
        )
        .len()
            == 2));
        network.mend(old, &majority).unwrap();
        // Healed, the old controller follows the new one and catches up.
        assert!(
            wait_until(TIMEOUT, || {
                let quorum = TestCluster::describe_quorum(&brokers[0]);
                let partition = &quorum.topics[0].partitions[0];
                quorum.error_code == 0
                    && majority.contains(&partition.leader_id.0)
                    && partition
                        .current_voters
                        .iter()
                        .all(|v| v.log_end_offset >= partition.high_watermark)
            }),
            "{:?}",
            TestCluster::describe_quorum(&brokers[0])
        );
    });
}

/// KIP-996's pre-vote: a voter cut off from the others asks them for pre-votes, which
/// nobody answers, instead of standing for election, so its term stays where it was, and
/// when the cut heals it follows the leader it left, still leading in the same epoch.
/// Before, it stood every few seconds while away, and its higher term deposed that leader
/// as soon as the two could talk again.
#[test]
fn a_voter_cut_off_from_the_others_does_not_depose_the_leader_when_it_comes_back() {
    on_split_cluster_in_namespaces(|cluster| {
        let broker = cluster.node(4).address();
        let quorum = TestCluster::describe_quorum(&broker);
        let partition = &quorum.topics[0].partitions[0];
        let (leader, epoch) = (partition.leader_id.0, partition.leader_epoch);
        let away = (1..=3).find(|v| *v != leader).expect("a follower voter");
        let others: Vec<i32> = (1..=3).filter(|v| *v != away).collect();
        let network = cluster.network().expect("an isolated cluster's network");
        let logged_before = cluster.stderr(away).len();
        network.cut(away, &others).unwrap();
        // Away past its fetch timeout, the voter wants to stand (without pre-vote it
        // does: "standing for election: ...").
        let since_cut = || {
            cluster
                .stderr(away)
                .get(logged_before..)
                .unwrap_or("")
                .to_string()
        };
        assert!(
            wait_until(TIMEOUT, || since_cut().contains("standing for election")),
            "voter {away} never wanted to stand while cut off"
        );
        network.mend(away, &others).unwrap();
        // Back, it takes a write of the leader's: only possible from a leader of at least
        // its own term.
        create_topic(&broker, "after-the-heal", 1);
        let written = TestCluster::describe_quorum(&broker).topics[0].partitions[0].high_watermark;
        let took_it = |q: &DescribeQuorumResponse| {
            q.error_code == 0
                && q.topics[0].partitions[0]
                    .current_voters
                    .iter()
                    .any(|v| v.replica_id.0 == away && v.log_end_offset >= written)
        };
        assert!(
            wait_until(TIMEOUT, || took_it(&TestCluster::describe_quorum(&broker))),
            "{:?}",
            TestCluster::describe_quorum(&broker)
        );
        let quorum = TestCluster::describe_quorum(&broker);
        let partition = &quorum.topics[0].partitions[0];
        assert_eq!(
            (partition.leader_id.0, partition.leader_epoch),
            (leader, epoch),
            "the leader and epoch before voter {away} was cut off, and after it came back"
        );
        assert!(
            !since_cut().contains("standing for election: "),
            "voter {away} stood for election:\n{}",
            since_cut()
        );
    });
}

/// The metadata snapshots of voter `id`'s log directory, by name.
fn metadata_snapshots(cluster: &TestCluster, id: i32) -> Vec<String> {
    let dir = cluster
        .node(id)
        .dir
        .join("data")
        .join("__cluster_metadata-0");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.ends_with(".checkpoint"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Kafka's snapshot policy: a controller snapshots its metadata log once it holds
/// `metadata.log.max.record.bytes.between.snapshots` after the last snapshot, or once
/// `metadata.log.max.snapshot.interval.ms` passed with anything new. (openraft's own
/// policy, a count of 10,000 entries, took none for a handful of topics.)
#[test]
fn a_controller_snapshots_its_metadata_log_by_size_and_by_age() {
    for (setting, topics) in [
        ("metadata.log.max.record.bytes.between.snapshots=4096", 8),
        ("metadata.log.max.snapshot.interval.ms=300", 1),
    ] {
        let cluster = TestCluster::combined(1, &[setting]);
        cluster.wait_for_brokers(&[1]);
        let bootstrap = cluster.bootstrap();
        for t in 0..topics {
            create_topic(&bootstrap, &format!("snapshot-{t}"), 4);
        }
        assert!(
            wait_until(TIMEOUT, || !metadata_snapshots(&cluster, 1).is_empty()),
            "{setting}: no snapshot after {topics} topics"
        );
        let offset: u64 = metadata_snapshots(&cluster, 1)[0][..20].parse().unwrap();
        assert!(offset > 0, "{setting}: a snapshot at offset {offset}");
    }
}

#[test]
fn bench_quorum_reports_every_round() {
    let _serial = TestCluster::serial();
    let BenchRun { stdout, json, html } = run_bench(&["bench", "quorum", "--rounds", "1"]);
    assert!(stdout.contains("kill -9 of the active controller -> write"));
    let rounds = json["figures"]["ms_per_round"].as_array().unwrap();
    assert_eq!(rounds.len(), 3);
    assert!(rounds
        .iter()
        .all(|r| r["ms"].as_array().unwrap().len() == 1));
    assert_eq!(
        (
            &json["cluster"]["controllers"],
            &json["cluster"]["combined"]
        ),
        (&3.into(), &true.into())
    );
    assert_eq!(json["settings"]["rounds"], 1);
    assert!(html.contains("aria-label=\"Each round: propagation and failover\""));
    assert!(html.contains("<td>kill -9 of the active controller -&gt; elected</td><td>median</td>"));
}

#[test]
fn sigterm_is_a_controlled_shutdown_and_the_restarted_broker_rejoins() {
    let mut cluster = TestCluster::combined(3, &[]);
    cluster.wait_for_brokers(&[1, 2, 3]);
    let bootstrap = cluster.bootstrap();
    create_topic(&bootstrap, "controlled", 3);
    let first = cluster.nodes[0].address();
    assert!(wait_until(TIMEOUT, || {
        let l = leaders(&first, "controlled");
        l.len() == 3 && !l.contains(&-1)
    }));
    produce(&bootstrap, "controlled", 3, 90);
    let victim = leaders(&first, "controlled")[1];
    assert!(cluster.terminate(victim), "SIGTERM exits 0");
    let stderr = cluster.stderr(victim);
    assert!(
        stderr.contains("controlled shutdown: the controller moved every leadership away"),
        "{stderr}"
    );
    let other = cluster.broker_other_than(victim);
    // With one replica nobody can take the partition over: it has no leader until its
    // broker is back.
    assert!(wait_until(TIMEOUT, || leaders(&other, "controlled")[1] == -1));
    cluster.restart(victim).unwrap();
    assert!(
        wait_until(TIMEOUT, || leaders(&other, "controlled")[1] == victim),
        "the restarted broker leads its partition again"
    );
    cluster.wait_for_brokers(&[1, 2, 3]);
    assert_all_read(&consume(&cluster.bootstrap(), "controlled", 3, 90), 3, 90);
}

#[test]
fn a_broker_killed_with_9_is_fenced_after_its_session_timeout_and_can_be_unregistered() {
    let mut cluster = TestCluster::combined(
        3,
        &[
            "broker.session.timeout.ms=2000",
            "broker.heartbeat.interval.ms=300",
        ],
    );
    cluster.wait_for_brokers(&[1, 2, 3]);
    let any = cluster.nodes[0].address();
    assert!(wait_until(TIMEOUT, || TestCluster::active_controller(&any) > 0));
    let controller = TestCluster::active_controller(&any);
    let victim = (1..=3).find(|id| *id != controller).unwrap();
    cluster.kill9(victim).unwrap();
    let others: Vec<i32> = (1..=3).filter(|id| *id != victim).collect();
    cluster.wait_for_brokers(&others);

    // Decommissioned for good, as `kafka-cluster.sh unregister` does it: the registration
    // goes (a second request finds none), and a broker started again later registers anew.
    let mut admin = common::raw::Conn::connect(&cluster.broker_other_than(victim));
    let unregister = |admin: &mut common::raw::Conn, id: i32| {
        let response: UnregisterBrokerResponse = admin.call(
            ApiKey::UnregisterBroker,
            0,
            &UnregisterBrokerRequest::default().with_broker_id(KafkaBrokerId(id)),
        );
        response.error_code
    };
    assert_eq!(unregister(&mut admin, victim), 0);
    assert_eq!(
        unregister(&mut admin, victim),
        codes::BROKER_ID_NOT_REGISTERED
    );
    assert_eq!(unregister(&mut admin, 42), codes::BROKER_ID_NOT_REGISTERED);
    cluster.restart(victim).unwrap();
    cluster.wait_for_brokers(&[1, 2, 3]);
}

#[test]
fn three_controllers_and_two_brokers_serve_clients() {
    let cluster = TestCluster::split(3, 2, &[]);
    cluster.wait_for_brokers(&[4, 5]);
    let bootstrap = cluster.bootstrap();
    create_topic(&bootstrap, "split", 4);
    let first = cluster.nodes[3].address();
    assert!(wait_until(TIMEOUT, || {
        let l = leaders(&first, "split");
        l.len() == 4 && l.iter().all(|b| *b == 4 || *b == 5)
    }));
    produce(&bootstrap, "split", 4, 100);
    assert_all_read(&consume(&bootstrap, "split", 4, 100), 4, 100);
    let controller = TestCluster::active_controller(&cluster.nodes[3].address());
    assert!(
        (1..=3).contains(&controller),
        "a controller-only node is active: {controller}"
    );
}

fn run_script(program: &str, script: &str, bootstrap: &str) -> String {
    let out = Command::new(program)
        .arg(script)
        .arg(bootstrap)
        .current_dir(test_file("clients"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} (installed by .ci/run): {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{script} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn kafka_python_and_kafkajs_see_the_three_brokers() {
    let cluster = TestCluster::combined(3, &[]);
    cluster.wait_for_brokers(&[1, 2, 3]);
    let first = cluster.nodes[0].address();
    let python = run_script("python3", "cluster_brokers_kafka_python.py", &first);
    assert!(python.contains("brokers 1,2,3"), "{python}");
    let node = run_script("node", "cluster_brokers_kafkajs.js", &first);
    assert!(node.contains("brokers 1,2,3"), "{node}");
}

#[test]
fn the_controller_refuses_a_foreign_cluster_a_duplicate_registration_and_garbage_and_speaks_kafkas_alter_partition(
) {
    let cluster = TestCluster::combined(3, &[]);
    cluster.wait_for_brokers(&[1, 2, 3]);
    let voters: Vec<(i32, String)> = cluster
        .nodes
        .iter()
        .map(|n| (n.id, format!("127.0.0.1:{}", n.controller_port)))
        .collect();
    let client = ControllerClient::new(voters.clone());
    let register = |cluster_id: &str, broker: i32| {
        let request = || Request::BrokerRegistration {
            cluster_id: cluster_id.to_string(),
            broker_id: strom_metadata::BrokerId(broker),
            incarnation_id: uuid::Uuid::new_v4(),
            endpoints: vec![],
            rack: None,
        };
        match block_on(client.call(request, Duration::from_secs(5), TIMEOUT))
            .expect("a controller answers")
        {
            Response::BrokerRegistration(r) => r,
            other => panic!("unexpected {other:?}"),
        }
    };
    let foreign = register("AAAAAAAAAAAAAAAAAAAAAA", 7).unwrap_err();
    assert_eq!(foreign.code, codes::INCONSISTENT_CLUSTER_ID, "{foreign}");
    let duplicate = register(&cluster.cluster_id, 2).unwrap_err();
    assert_eq!(
        duplicate.code,
        codes::DUPLICATE_BROKER_REGISTRATION,
        "{duplicate}"
    );

    // A frame that is not a request closes that connection and nothing else.
    use std::io::{Read, Write};
    let mut garbage = std::net::TcpStream::connect(&voters[0].1).unwrap();
    garbage.set_read_timeout(Some(TIMEOUT)).unwrap();
    garbage
        .write_all(&[0, 0, 0, 5, b'n', b'o', b'p', b'e', b'!'])
        .unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(
        garbage.read(&mut buf).unwrap_or(0),
        0,
        "the connection is closed"
    );
    let answered = block_on(async {
        let mut conn = Connection::connect(&voters[0].1, Duration::from_secs(5))
            .await
            .unwrap();
        conn.call(&Request::DescribeQuorum, Duration::from_secs(5))
            .await
    });
    assert!(
        answered.is_ok(),
        "the controller still answers: {answered:?}"
    );
    cluster.wait_for_brokers(&[1, 2, 3]);

    // AlterPartition is Kafka's own wire format on this listener: ApiVersions names it,
    // a voter that does not lead answers NOT_CONTROLLER, and the active one refuses a
    // broker epoch that is not the broker's registration.
    use kafka_protocol::messages::{
        AlterPartitionRequest, AlterPartitionResponse, ApiKey, ApiVersionsRequest,
        ApiVersionsResponse,
    };
    let active = TestCluster::active_controller(&cluster.nodes[0].address());
    for (id, address) in &voters {
        let mut conn = common::raw::Conn::connect(address);
        let versions: ApiVersionsResponse =
            conn.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
        let alter = versions
            .api_keys
            .iter()
            .find(|k| k.api_key == ApiKey::AlterPartition as i16)
            .map(|k| (k.min_version, k.max_version));
        assert_eq!(alter, Some((2, 3)), "voter {id}");
        let request = AlterPartitionRequest::default()
            .with_broker_id(1.into())
            .with_broker_epoch(-5);
        let answer: AlterPartitionResponse = conn.call(ApiKey::AlterPartition, 3, &request);
        let expected = if *id == active {
            codes::STALE_BROKER_EPOCH
        } else {
            codes::NOT_CONTROLLER
        };
        assert_eq!(answer.error_code, expected, "voter {id} (active: {active})");
    }
}

fn strom_tool(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_strom"))
        .args(args)
        .output()
        .expect("run strom");
    assert!(
        out.status.success(),
        "strom {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn metadata_quorum_describes_the_leader_voters_and_their_replication() {
    let cluster = TestCluster::combined(3, &[]);
    cluster.wait_for_brokers(&[1, 2, 3]);
    let addr = cluster.nodes[0].address();
    let quorum = |flag: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_strom"))
            .args([
                "metadata-quorum",
                "--bootstrap-server",
                &addr,
                "describe",
                flag,
            ])
            .output()
            .expect("run strom metadata-quorum");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // A quorum that has just formed may still change its leader once: the outputs are
    // checked against the leader DescribeQuorum reports before and after them.
    let mut last = (String::new(), String::new());
    let consistent = wait_until(TIMEOUT, || {
        let before = TestCluster::active_controller(&addr);
        let (status, replication) = (quorum("--status"), quorum("--replication"));
        let after = TestCluster::active_controller(&addr);
        let rows: Vec<String> = replication.lines().map(str::to_string).collect();
        let ok = before > 0
            && before == after
            && status.contains(&format!("\nLeaderId:               {before}\n"))
            && rows.len() == 4
            && rows[1].starts_with(&format!("{before} "))
            && rows[1].contains("Leader");
        last = (status, replication);
        ok
    });
    let (status, replication) = last;
    assert!(consistent, "{status}\n{replication}");
    assert!(
        status.starts_with(&format!("ClusterId:              {}\n", cluster.cluster_id)),
        "{status}"
    );
    let voters = status
        .lines()
        .find(|l| l.starts_with("CurrentVoters:"))
        .unwrap();
    assert_eq!(voters.matches("\"id\"").count(), 3, "{voters}");
    let rows: Vec<&str> = replication.lines().collect();
    assert!(rows[0].starts_with("NodeId\tDirectoryId"), "{replication}");
    assert_eq!(
        rows.iter().filter(|r| r.contains("Follower")).count(),
        2,
        "{replication}"
    );
}

#[test]
fn strom_cluster_starts_describes_and_stops_a_local_cluster() {
    /// Stops the detached cluster in its directory even when an assertion fails first,
    /// so no node outlives the test.
    struct StopOnDrop(tempfile::TempDir);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            let _ = Command::new(env!("CARGO_BIN_EXE_strom"))
                .args(["cluster", "stop", "--dir"])
                .arg(self.0.path())
                .output();
        }
    }
    // One cluster at a time, as every cluster test: its ports are free while it is
    // stopped, and another test's cluster must not take them before it starts again.
    let _serial = TestCluster::serial();
    let dir = StopOnDrop(tempfile::tempdir().unwrap());
    let d = dir.0.path().to_str().unwrap();
    let bootstrap = strom_tool(&[
        "cluster",
        "start",
        "--brokers",
        "2",
        "--controllers",
        "1",
        "--dir",
        d,
    ]);
    assert_eq!(bootstrap.trim().split(',').count(), 2, "{bootstrap}");
    let first = bootstrap.trim().split(',').next().unwrap().to_string();
    assert_eq!(
        TestCluster::listed_brokers(&first),
        vec![2, 3],
        "every broker is unfenced when start returns"
    );
    let status = strom_tool(&["cluster", "status", "--dir", d]);
    assert_eq!(status.matches("running, unfenced").count(), 2, "{status}");
    assert!(status.contains("active controller 1"), "{status}");
    let cluster_line = status.lines().next().unwrap().to_string();
    assert!(
        topics(
            &first,
            &["--create", "--topic", "kept", "--partitions", "2"]
        )
        .0
    );
    let stopped = strom_tool(&["cluster", "stop", "--dir", d]);
    assert!(stopped.starts_with("Stopped 3 node(s)"), "{stopped}");
    let status = strom_tool(&["cluster", "status", "--dir", d]);
    assert_eq!(status.matches("stopped").count(), 3, "{status}");

    // Started again on its directory, the same cluster comes back with its topics; a
    // start asking for another shape is refused, not applied over it.
    let refused = Command::new(env!("CARGO_BIN_EXE_strom"))
        .args(["cluster", "start", "--brokers", "3", "--dir", d])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success()
            && err.contains("holds a stopped cluster of 2 broker(s) and 1 controller-only node(s)"),
        "{err}"
    );
    let again = strom_tool(&["cluster", "start", "--dir", d]);
    assert_eq!(again, bootstrap, "the same nodes on the same ports");
    let status = strom_tool(&["cluster", "status", "--dir", d]);
    assert_eq!(
        status.lines().next(),
        Some(cluster_line.as_str()),
        "{status}"
    );
    assert_eq!(topics(&first, &["--list"]).1, "kept\n");
}

#[test]
fn a_quorum_without_majority_refuses_writes_and_still_answers_metadata() {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::{ApiKey, CreateTopicsRequest, CreateTopicsResponse};
    let mut cluster = TestCluster::combined(3, &[]);
    create_topic(&cluster.bootstrap(), "before", 1);
    let survivor = cluster.node(1).address();
    assert!(wait_until(TIMEOUT, || leaders(&survivor, "before").len() == 1));
    cluster.kill9(2).unwrap();
    cluster.kill9(3).unwrap();
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(2000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(common::raw::topic_name("after"))
            .with_num_partitions(1)
            .with_replication_factor(-1)]);
    let response: CreateTopicsResponse =
        common::raw::Conn::connect(&survivor).call(ApiKey::CreateTopics, 7, &request);
    let topic = &response.topics[0];
    assert_eq!(
        topic.error_code, 7,
        "REQUEST_TIMED_OUT: {:?}",
        topic.error_message
    );
    let message = topic
        .error_message
        .as_deref()
        .unwrap_or_default()
        .to_string();
    assert!(
        message.contains("controller") || message.contains("majority"),
        "{message}"
    );
    assert_eq!(
        leaders(&survivor, "before").len(),
        1,
        "Metadata answers from the last image"
    );
    assert!(
        leaders(&survivor, "after").is_empty(),
        "nothing is invented"
    );
}

/// Runs `strom topics ARGS` against `bootstrap`; (exit success, stdout, stderr).
fn topics(bootstrap: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_strom"))
        .args(["topics", "--bootstrap-server", bootstrap])
        .args(args)
        .output()
        .expect("run strom topics");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn strom_topics_creates_lists_describes_alters_and_deletes_as_kafka_topics_does() {
    let cluster = TestCluster::combined(3, &[]);
    let b = cluster.nodes[0].address();
    let (ok, out, _) = topics(
        &b,
        &[
            "--create",
            "--topic",
            "orders",
            "--partitions",
            "3",
            "--config",
            "retention.ms=60000",
        ],
    );
    assert!(ok && out == "Created topic orders.\n", "{out}");
    let (ok, out, _) = topics(&b, &["--create", "--topic", "orders"]);
    assert!(
        !ok && out == "Error while executing topic command : Topic 'orders' already exists.\n",
        "{out}"
    );
    assert!(topics(&b, &["--create", "--topic", "orders", "--if-not-exists"]).0);
    let (_, out, _) = topics(
        &b,
        &["--create", "--topic", "wide", "--replication-factor", "4"],
    );
    assert!(
        out.starts_with("Error while executing topic command : ")
            && out.contains("only 3 broker(s) are registered"),
        "{out}"
    );
    assert_eq!(topics(&b, &["--list"]).1, "orders\n");
    let (_, out, _) = topics(&b, &["--describe", "--topic", "orders"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(lines[0].starts_with("Topic: orders\tTopicId: "), "{out}");
    assert!(
        lines[0]
            .ends_with("\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=60000"),
        "{out}"
    );
    let led = leaders(&b, "orders");
    for (p, line) in lines[1..].iter().enumerate() {
        let l = led[p];
        assert_eq!(
            *line,
            format!("\tTopic: orders\tPartition: {p}\tLeader: {l}\tReplicas: {l}\tIsr: {l}\tElr: N/A\tLastKnownElr: N/A")
        );
    }
    assert!(topics(&b, &["--alter", "--topic", "orders", "--partitions", "5"]).0);
    assert!(wait_until(TIMEOUT, || leaders(&b, "orders").len() == 5));
    assert_eq!(
        topics(&b, &["--describe", "--under-replicated-partitions"]).1,
        ""
    );
    assert!(topics(&b, &["--delete", "--topic", "orders"]).0);
    assert_eq!(topics(&b, &["--list"]).1, "\n");
    let (ok, out, _) = topics(&b, &["--describe", "--topic", "orders"]);
    assert!(
        !ok && out.contains("Topic 'Optional[orders]' does not exist as expected"),
        "{out}"
    );
    let (ok, _, err) = topics(&b, &["--zookeeper", "localhost:2181", "--list"]);
    assert!(!ok && err.contains("--bootstrap-server"), "{err}");
}

/// The error code of a one-record batch of `size` bytes produced to `topic`-`partition`
/// on the broker at `addr` (acks=1).
fn produce_code(addr: &str, topic: &str, partition: i32, size: usize) -> i16 {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};
    let value = vec![b'x'; size];
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(common::raw::topic_name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(common::raw::batch(&[&value])))])]);
    let response: ProduceResponse =
        common::raw::Conn::connect(addr).call(ApiKey::Produce, 9, &request);
    response.responses[0].partition_responses[0].error_code
}

#[test]
fn dynamic_broker_configs_reach_every_broker_through_the_metadata_log_and_survive_a_restart() {
    const MESSAGE_TOO_LARGE: i16 = 10;
    let mut cluster = TestCluster::combined(3, &[]);
    let b = cluster.nodes[0].address();
    assert!(topics(&b, &["--create", "--topic", "dyn", "--partitions", "3"]).0);
    assert!(wait_until(TIMEOUT, || {
        let led = leaders(&b, "dyn");
        led.len() == 3 && led.iter().all(|l| *l > 0)
    }));
    let led = leaders(&b, "dyn");
    let code = |p: usize| produce_code(&cluster.node(led[p]).address(), "dyn", p as i32, 2500);
    // Each leader serves once it has applied the image that made it leader.
    assert!(wait_until(TIMEOUT, || (0..3).all(|p| code(p) == 0)));

    // The cluster-wide default, written through one broker, reaches every leader.
    strom_tool(&[
        "configs",
        "--bootstrap-server",
        &b,
        "--broker-defaults",
        "--alter",
        "--add-config",
        "message.max.bytes=2000",
    ]);
    assert!(wait_until(TIMEOUT, || (0..3).all(|p| code(p) == MESSAGE_TOO_LARGE)));
    // Each broker keeps a copy, which its logs open with before the controllers answer.
    for node in &cluster.nodes {
        let copy = node
            .dir
            .join("data/__strom_metadata/dynamic-broker-configs.json");
        let stored = || std::fs::read_to_string(&copy).unwrap_or_default();
        assert!(
            wait_until(TIMEOUT, || stored()
                .contains("\"message.max.bytes\": \"2000\"")),
            "{}: {}",
            copy.display(),
            stored()
        );
    }

    // One broker's own value applies to that broker alone.
    let own = led[0];
    strom_tool(&[
        "configs",
        "--bootstrap-server",
        &b,
        "--broker",
        &own.to_string(),
        "--alter",
        "--add-config",
        "message.max.bytes=3000",
    ]);
    assert!(wait_until(TIMEOUT, || code(0) == 0));
    for (p, leader) in led.iter().enumerate().skip(1) {
        if *leader != own {
            assert_eq!(code(p), MESSAGE_TOO_LARGE, "partition {p}");
        }
    }
    let described = strom_tool(&[
        "configs",
        "--bootstrap-server",
        &b,
        "--broker",
        &own.to_string(),
        "--describe",
    ]);
    assert_eq!(
        described,
        format!("Dynamic configs for broker {own} are:\n  message.max.bytes=3000 sensitive=false synonyms={{DYNAMIC_BROKER_CONFIG:message.max.bytes=3000, DYNAMIC_DEFAULT_BROKER_CONFIG:message.max.bytes=2000}}\n")
    );

    // A restarted broker takes both again from the metadata log.
    let other = (1..=3).find(|id| *id != own).expect("another broker");
    assert!(cluster.terminate(other));
    cluster.restart(other).expect("restart");
    let address = cluster.node(other).address();
    // (Polled: the topic is unknown there until the broker has replayed the metadata.)
    let max_message_bytes = || {
        let out = Command::new(env!("CARGO_BIN_EXE_strom"))
            .args(["configs", "--bootstrap-server", &address])
            .args(["--topic", "dyn", "--describe", "--all"])
            .output()
            .expect("run strom configs");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find(|l| l.starts_with("  max.message.bytes="))
            .map(str::to_string)
    };
    assert!(
        wait_until(TIMEOUT, || {
            max_message_bytes().is_some_and(|l| l.starts_with(
            "  max.message.bytes=2000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:message.max.bytes=2000,"
        ))
        }),
        "{:?}",
        max_message_bytes()
    );
}
