//! Consumer groups with real clients against the real `strom` binary.
//!
//! librdkafka 2.12 (the `rdkafka` crate) with the range, roundrobin and
//! cooperative-sticky assignors: members joining, leaving (close) and dying (a `kcat -G`
//! member killed with SIGKILL, which only the session timeout can detect), with the
//! partition counts checked after each change, partition ownership checked to be
//! disjoint at every rebalance, and every record checked to be delivered. Committed
//! offsets are checked across a clean restart and a `kill -9`. kafka-python 3, kafkajs
//! and `kcat -G` run their own scripts from `tests/clients/`.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::client::create_topic;
use common::client::{describe_group, Assignments};
use common::{run_server_expecting_exit, test_file, StromBroker};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

const PARTITIONS: i32 = 6;
const PER_PARTITION: i64 = 100;
/// Long enough for a rebalance that waits for a session timeout (6 s) and a rejoin on a
/// slow, loaded machine; the conditions are polled, so a fast run finishes early.
const CONDITION_TIMEOUT: Duration = Duration::from_secs(90);
const SESSION_TIMEOUT_MS: &str = "6000";

/// Produces `per_partition` records to each partition and waits for every ack.
fn produce(bootstrap: &str, topic: &str, partitions: i32, per_partition: i64) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .create()
        .expect("producer");
    for i in 0..per_partition {
        for p in 0..partitions {
            let value = format!("p{p}-{i}");
            let mut record = BaseRecord::<(), _>::to(topic).payload(&value).partition(p);
            loop {
                match producer.send(record) {
                    Ok(()) => break,
                    Err((_, r)) => {
                        record = r;
                        producer.poll(Duration::from_millis(10));
                    }
                }
            }
        }
    }
    producer.flush(Duration::from_secs(60)).expect("flush");
}

/// Polls `condition` until it holds, or fails the test with `what` and `state()`.
fn wait_for(what: &str, mut condition: impl FnMut() -> bool, state: impl Fn() -> String) {
    let deadline = Instant::now() + CONDITION_TIMEOUT;
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; state: {}",
            state()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One record delivered to a member, and whether the member's commit past it succeeded.
#[derive(Debug, Clone)]
struct Delivery {
    member: usize,
    partition: i32,
    offset: i64,
    committed: bool,
}

/// What all in-process members share: who owns which partition (updated from the
/// rebalance callbacks), every delivery, and every ownership conflict seen.
#[derive(Default)]
struct Shared {
    owners: Mutex<BTreeMap<i32, usize>>,
    deliveries: Mutex<Vec<Delivery>>,
    conflicts: Mutex<Vec<String>>,
}

impl Shared {
    fn owned_by(&self, member: usize) -> usize {
        self.owners
            .lock()
            .unwrap()
            .values()
            .filter(|m| **m == member)
            .count()
    }

    fn describe(&self) -> String {
        format!("owners {:?}", self.owners.lock().unwrap())
    }
}

/// Tracks the member's partitions as librdkafka assigns and revokes them. A partition
/// assigned while another member still owns it is a conflict: two members of one
/// generation would read it.
struct Tracker {
    member: usize,
    shared: Arc<Shared>,
}

impl ClientContext for Tracker {}

impl ConsumerContext for Tracker {
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(tpl) = rebalance {
            let mut owners = self.shared.owners.lock().unwrap();
            for e in tpl.elements() {
                if owners.get(&e.partition()) == Some(&self.member) {
                    owners.remove(&e.partition());
                }
            }
        }
    }

    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(tpl) = rebalance {
            let mut owners = self.shared.owners.lock().unwrap();
            for e in tpl.elements() {
                if let Some(other) = owners.insert(e.partition(), self.member) {
                    if other != self.member {
                        self.shared.conflicts.lock().unwrap().push(format!(
                            "partition {} assigned to member {} while member {other} owns it",
                            e.partition(),
                            self.member
                        ));
                    }
                }
            }
        }
    }
}

/// A librdkafka group member polling on its own thread, committing after every record.
struct Member {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Member {
    fn start(
        member: usize,
        bootstrap: &str,
        group: &str,
        topic: &str,
        assignor: &str,
        shared: Arc<Shared>,
    ) -> Self {
        let consumer: BaseConsumer<Tracker> = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", group)
            .set("client.id", format!("member-{member}"))
            .set("partition.assignment.strategy", assignor)
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .set("session.timeout.ms", SESSION_TIMEOUT_MS)
            .set("heartbeat.interval.ms", "500")
            .create_with_context(Tracker {
                member,
                shared: shared.clone(),
            })
            .expect("consumer");
        consumer.subscribe(&[topic]).expect("subscribe");
        let stop = Arc::new(AtomicBool::new(false));
        let stop_flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !stop_flag.load(Ordering::Relaxed) {
                let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) else {
                    continue;
                };
                let mut tpl = TopicPartitionList::new();
                tpl.add_partition_offset(m.topic(), m.partition(), Offset::Offset(m.offset() + 1))
                    .expect("offset");
                let committed = consumer.commit(&tpl, CommitMode::Sync).is_ok();
                shared.deliveries.lock().unwrap().push(Delivery {
                    member,
                    partition: m.partition(),
                    offset: m.offset(),
                    committed,
                });
            }
            // Dropping the consumer closes it: it leaves the group (LeaveGroup).
            drop(consumer);
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }

    /// Closes the consumer cleanly (it leaves the group) and waits for it.
    fn close(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().expect("member thread");
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A `kcat -G` member: a separate process, so that it can die without leaving the group.
fn start_kcat_member(bootstrap: &str, group: &str, topic: &str, assignor: &str) -> Child {
    Command::new("kcat")
        .args(["-b", bootstrap, "-G", group, "-q"])
        .args(["-X", &format!("partition.assignment.strategy={assignor}")])
        .args(["-X", &format!("session.timeout.ms={SESSION_TIMEOUT_MS}")])
        .args(["-X", "heartbeat.interval.ms=500"])
        .args(["-X", "auto.offset.reset=earliest"])
        .arg(topic)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kcat (installed by .ci/run) must be on PATH")
}

/// Members join, die and leave; after each change the survivors split the six partitions
/// evenly, no partition is ever owned by two members at once, every record produced
/// after the kcat member died is delivered, and a record delivered twice was only
/// redelivered because its first delivery could not be committed (the generation had
/// moved on).
fn rebalance_scenario(assignor: &str) {
    let broker = StromBroker::start(&[]);
    let bootstrap = broker.bootstrap();
    let topic = format!("groups-{assignor}");
    let group = format!("group-{assignor}");
    create_topic(&bootstrap, &topic, PARTITIONS);
    produce(&bootstrap, &topic, PARTITIONS, PER_PARTITION);
    let shared = Arc::new(Shared::default());
    let state = || shared.describe();

    let a = Member::start(0, &bootstrap, &group, &topic, assignor, shared.clone());
    let b = Member::start(1, &bootstrap, &group, &topic, assignor, shared.clone());
    let mut kcat = start_kcat_member(&bootstrap, &group, &topic, assignor);
    wait_for(
        "three members (two librdkafka, one kcat) to hold two partitions each",
        || shared.owned_by(0) == 2 && shared.owned_by(1) == 2,
        state,
    );

    kcat.kill().expect("kill -9 kcat");
    kcat.wait().expect("reap kcat");
    produce(&bootstrap, &topic, PARTITIONS, PER_PARTITION);
    wait_for(
        "the two survivors of a dead member to hold three partitions each",
        || shared.owned_by(0) == 3 && shared.owned_by(1) == 3,
        state,
    );

    let d = Member::start(2, &bootstrap, &group, &topic, assignor, shared.clone());
    wait_for(
        "three librdkafka members to hold two partitions each",
        || shared.owned_by(0) == 2 && shared.owned_by(1) == 2 && shared.owned_by(2) == 2,
        state,
    );
    d.close();
    produce(&bootstrap, &topic, PARTITIONS, PER_PARTITION);
    wait_for(
        "the two members left after a clean leave to hold three partitions each",
        || shared.owned_by(0) == 3 && shared.owned_by(1) == 3,
        state,
    );

    let expected: BTreeSet<(i32, i64)> = (0..PARTITIONS)
        .flat_map(|p| (PER_PARTITION..3 * PER_PARTITION).map(move |o| (p, o)))
        .collect();
    wait_for(
        "every record produced after the kcat member died to be delivered",
        || {
            let delivered: BTreeSet<(i32, i64)> = shared
                .deliveries
                .lock()
                .unwrap()
                .iter()
                .map(|d| (d.partition, d.offset))
                .collect();
            expected.is_subset(&delivered)
        },
        state,
    );
    a.close();
    b.close();

    let conflicts = shared.conflicts.lock().unwrap();
    assert!(conflicts.is_empty(), "ownership conflicts: {conflicts:#?}");
    let mut by_record: HashMap<(i32, i64), Vec<Delivery>> = HashMap::new();
    for d in shared.deliveries.lock().unwrap().iter() {
        by_record
            .entry((d.partition, d.offset))
            .or_default()
            .push(d.clone());
    }
    for (record, deliveries) in &by_record {
        for earlier in &deliveries[..deliveries.len() - 1] {
            assert!(
                !earlier.committed,
                "record {record:?} was delivered again after member {} committed past it: \
                 {deliveries:?}",
                earlier.member
            );
        }
    }
}

#[test]
fn librdkafka_range_assignor() {
    rebalance_scenario("range");
}

#[test]
fn librdkafka_roundrobin_assignor() {
    rebalance_scenario("roundrobin");
}

#[test]
fn librdkafka_cooperative_sticky_assignor() {
    rebalance_scenario("cooperative-sticky");
}

/// A consumer of `group` that does not subscribe: it only reads and writes offsets.
fn standalone_consumer(bootstrap: &str, group: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .create()
        .expect("consumer")
}

/// The committed offsets of partitions 0..3 of `topic`; -1 where none was committed.
fn committed(bootstrap: &str, group: &str, topic: &str) -> Vec<i64> {
    let consumer = standalone_consumer(bootstrap, group);
    let mut tpl = TopicPartitionList::new();
    for p in 0..3 {
        tpl.add_partition(topic, p);
    }
    let committed = consumer
        .committed_offsets(tpl, Duration::from_secs(30))
        .expect("committed offsets");
    committed
        .elements()
        .iter()
        .map(|e| match e.offset() {
            Offset::Offset(o) => o,
            Offset::Invalid => -1,
            other => panic!("partition {}: unexpected {other:?}", e.partition()),
        })
        .collect()
}

/// Commits `offsets` for partitions 0..3 of `topic` as a consumer that does not use
/// group management (generation -1), the way admin tools and assign()-ing consumers do.
fn commit_standalone(bootstrap: &str, group: &str, topic: &str, offsets: &[i64]) {
    let consumer = standalone_consumer(bootstrap, group);
    let mut tpl = TopicPartitionList::new();
    for (p, o) in offsets.iter().enumerate() {
        tpl.add_partition_offset(topic, p as i32, Offset::Offset(*o))
            .expect("offset");
    }
    consumer.commit(&tpl, CommitMode::Sync).expect("commit");
}

/// Consumes with group management until `count` records were read, committing after
/// each, then closes. Returns the first offset read from each partition.
fn consume_in_group(bootstrap: &str, group: &str, topic: &str, count: usize) -> BTreeMap<i32, i64> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer");
    consumer.subscribe(&[topic]).expect("subscribe");
    let mut first = BTreeMap::new();
    let mut read = 0;
    let deadline = Instant::now() + CONDITION_TIMEOUT;
    while read < count {
        assert!(
            Instant::now() < deadline,
            "read only {read} of {count} records"
        );
        let Some(m) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        let m = m.expect("consume");
        first.entry(m.partition()).or_insert(m.offset());
        consumer
            .commit_message(&m, CommitMode::Sync)
            .expect("commit");
        read += 1;
    }
    first
}

#[test]
fn committed_offsets_survive_a_restart_and_kill_9() {
    let mut broker = StromBroker::start(&[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "durable", 3);
    produce(&bootstrap, "durable", 3, 100);

    consume_in_group(&bootstrap, "members", "durable", 90);
    let by_members = committed(&bootstrap, "members", "durable");
    assert_eq!(
        by_members.iter().map(|o| o.max(&0)).sum::<i64>(),
        90,
        "{by_members:?}"
    );
    commit_standalone(&bootstrap, "standalone", "durable", &[10, 20, 30]);

    assert!(broker.terminate().success());
    broker.restart();
    assert_eq!(committed(&bootstrap, "members", "durable"), by_members);
    assert_eq!(
        committed(&bootstrap, "standalone", "durable"),
        vec![10, 20, 30]
    );

    commit_standalone(&bootstrap, "standalone", "durable", &[11, 21, 31]);
    broker.kill9();
    broker.restart();
    assert_eq!(
        committed(&bootstrap, "standalone", "durable"),
        vec![11, 21, 31]
    );
    assert_eq!(committed(&bootstrap, "members", "durable"), by_members);

    // A member of the group resumes where the group committed.
    let first = consume_in_group(&bootstrap, "members", "durable", 30);
    for (p, offset) in first {
        assert_eq!(offset, by_members[p as usize].max(0), "partition {p}");
    }
}

/// A standalone node stores each settled group in its offsets log, so after a `kill -9`
/// and restart a member that heartbeats within its session goes on in its generation:
/// its commit is accepted and it is not assigned again.
#[test]
fn a_member_keeps_its_generation_across_a_kill_9_of_the_broker() {
    const GROUP: &str = "steady";
    let mut broker = StromBroker::start(&[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "kept", 3);
    let offsets = |values: [i64; 3]| {
        let mut list = TopicPartitionList::new();
        for (p, v) in values.into_iter().enumerate() {
            list.add_partition_offset("kept", p as i32, Offset::Offset(v))
                .expect("offset");
        }
        list
    };
    let assignments = Arc::new(AtomicUsize::new(0));
    let member: BaseConsumer<Assignments> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", GROUP)
        .set("enable.auto.commit", "false")
        .set("session.timeout.ms", "10000")
        .set("heartbeat.interval.ms", "500")
        .create_with_context(Assignments(assignments.clone()))
        .expect("consumer");
    member.subscribe(&["kept"]).expect("subscribe");
    wait_for(
        "an assignment of every partition and a commit",
        || {
            member.poll(Duration::from_millis(100));
            member.assignment().is_ok_and(|a| a.count() == 3)
                && member.commit(&offsets([1, 2, 3]), CommitMode::Sync).is_ok()
        },
        || format!("{:?}", describe_group(&bootstrap, GROUP)),
    );
    assert_eq!(assignments.load(Ordering::SeqCst), 1);
    let (state, members) = describe_group(&bootstrap, GROUP);
    assert_eq!((state.as_str(), members.len()), ("Stable", 1));

    broker.kill9();
    broker.restart();
    assert_eq!(
        describe_group(&bootstrap, GROUP),
        ("Stable".to_string(), members.clone()),
        "the group as it settled before the kill"
    );
    wait_for(
        "a commit after the restart",
        || {
            member.poll(Duration::from_millis(100));
            member.commit(&offsets([4, 5, 6]), CommitMode::Sync).is_ok()
        },
        || format!("{:?}", describe_group(&bootstrap, GROUP)),
    );
    assert_eq!(
        assignments.load(Ordering::SeqCst),
        1,
        "the member was not made to rejoin"
    );
    assert_eq!(
        describe_group(&bootstrap, GROUP),
        ("Stable".to_string(), members),
        "the same member, stable"
    );
    assert_eq!(committed(&bootstrap, GROUP, "kept"), vec![4, 5, 6]);
}

/// `offsets.retention.minutes` and `offsets.retention.check.interval.ms` are understood:
/// with the shortest retention (a minute) checked every 200 ms, fresh commits survive
/// many checks; a retention below one minute stops start-up naming the key. Expiry
/// itself is unit-tested with explicit clocks, as no Kafka key shortens it below a
/// minute.
#[test]
fn offsets_retention_keys_are_understood_and_validated() {
    let broker = StromBroker::start(&[
        "offsets.retention.minutes=1",
        "offsets.retention.check.interval.ms=200",
    ]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "retained", 3);
    commit_standalone(&bootstrap, "retained", "retained", &[1, 2, 3]);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(committed(&bootstrap, "retained", "retained"), vec![1, 2, 3]);

    let dir = tempfile::tempdir().unwrap();
    let log_dirs = format!("log.dirs={}", dir.path().display());
    let (status, stderr) = run_server_expecting_exit(&[
        "--override",
        "listeners=PLAINTEXT://127.0.0.1:0",
        "--override",
        &log_dirs,
        "--override",
        "offsets.retention.minutes=-5",
    ]);
    assert!(!status.success(), "exit status {status}");
    assert!(stderr.contains("offsets.retention.minutes"), "{stderr}");
}

/// Runs a client script under `timeout` and returns its stdout, failing with all its
/// output if it does not exit 0 and print PASS.
fn run_script(program: &str, script: &str, bootstrap: &str) {
    let output = Command::new("timeout")
        .args(["300", program, script, bootstrap])
        .current_dir(test_file("clients"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} (installed by .ci/run): {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    print!("{stdout}");
    assert!(
        output.status.success() && stdout.contains("PASS"),
        "{program} {script} exited with {}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        output.status
    );
}

#[test]
fn kafka_python_group_rebalances_and_commits() {
    let broker = StromBroker::start(&[]);
    run_script("python3", "groups_kafka_python.py", &broker.bootstrap());
}

#[test]
fn kafkajs_group_rebalances_and_commits() {
    assert!(
        test_file("clients/node_modules/kafkajs").is_dir(),
        "kafkajs is not installed: run `npm install kafkajs` in tests/clients (see .ci/run)"
    );
    let broker = StromBroker::start(&[]);
    run_script("node", "groups_kafkajs.js", &broker.bootstrap());
}

/// `kcat -G` reads a topic through a group until the end (`-e`) and commits; a second
/// run in the same group then reads only what was produced after the first.
#[test]
fn kcat_group_consumer_commits_and_resumes() {
    let broker = StromBroker::start(&[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "kcat-group", 3);
    produce(&bootstrap, "kcat-group", 3, 50);
    let read = |expected: usize| {
        let output = Command::new("timeout")
            .args([
                "120",
                "kcat",
                "-b",
                &bootstrap,
                "-G",
                "kcat-group",
                "-e",
                "-q",
            ])
            .args([
                "-X",
                "auto.offset.reset=earliest",
                "-f",
                "%p:%o\\n",
                "kcat-group",
            ])
            .output()
            .expect("kcat (installed by .ci/run) must be on PATH");
        assert!(output.status.success(), "kcat -G failed: {output:?}");
        let lines: BTreeSet<String> = String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        assert_eq!(lines.len(), expected, "{lines:?}");
        lines
    };
    let first = read(150);
    produce(&bootstrap, "kcat-group", 3, 10);
    let second = read(30);
    assert!(first.is_disjoint(&second));
    assert!(
        second.contains("0:50") && second.contains("2:59"),
        "{second:?}"
    );
}

/// Runs `strom consumer-groups args...`; returns (success, stdout, stderr).
fn consumer_groups(args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_strom"))
        .arg("consumer-groups")
        .args(args)
        .output()
        .expect("run strom consumer-groups");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `strom consumer-groups` against a group with a member and without: list, describe
/// (member, assignment, committed offset, log-end offset, lag), reset-offsets (refused
/// while the group is active; dry run; execute), delete.
#[test]
fn consumer_groups_tool_lists_describes_resets_and_deletes() {
    let broker = StromBroker::start(&[]);
    let b = broker.bootstrap();
    create_topic(&b, "cg-tool", 3);
    produce(&b, "cg-tool", 3, 10);
    commit_standalone(&b, "cg", "cg-tool", &[4, 10, 0]);

    let (ok, out, _) = consumer_groups(&["--bootstrap-server", &b, "--list"]);
    assert!(ok && out.lines().any(|l| l == "cg"), "{out}");

    let (ok, out, err) =
        consumer_groups(&["--bootstrap-server", &b, "--describe", "--group", "cg"]);
    assert!(ok, "{err}");
    assert!(
        err.contains("Consumer group 'cg' has no active members."),
        "{err}"
    );
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[1].starts_with("GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID"), "{out}");
    let row0: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(
        row0,
        ["cg", "cg-tool", "0", "4", "10", "6", "-", "-", "-"],
        "{out}"
    );

    // An active member: shown with its assignment; offsets cannot be reset under it.
    let member = Member::start(0, &b, "cg", "cg-tool", "range", Arc::new(Shared::default()));
    wait_for(
        "the member to show in --describe",
        || {
            let (_, out, _) =
                consumer_groups(&["--bootstrap-server", &b, "--describe", "--group", "cg"]);
            out.lines()
                .filter(|l| l.contains("/127.0.0.1") && l.contains("member-0"))
                .count()
                == 3
        },
        String::new,
    );
    let reset = |extra: &[&str]| {
        let mut args = vec![
            "--bootstrap-server",
            &b,
            "--reset-offsets",
            "--group",
            "cg",
            "--topic",
            "cg-tool",
        ];
        args.extend_from_slice(extra);
        consumer_groups(&args)
    };
    let (ok, _, err) = reset(&["--to-earliest", "--execute"]);
    assert!(
        !ok && err.contains("is inactive, but the current state is Stable"),
        "{err}"
    );
    member.close();

    let before = committed(&b, "cg", "cg-tool");
    let (ok, out, _) = reset(&["--to-offset", "3", "--dry-run"]);
    assert!(ok && out.contains("NEW-OFFSET"), "{out}");
    assert_eq!(
        committed(&b, "cg", "cg-tool"),
        before,
        "a dry run changed offsets"
    );
    let (ok, _, err) = reset(&["--to-earliest", "--execute"]);
    assert!(ok, "{err}");
    assert_eq!(committed(&b, "cg", "cg-tool"), vec![0, 0, 0]);
    let (ok, out, _) = reset(&["--to-latest", "--execute"]);
    assert!(
        ok && out
            .lines()
            .filter(|l| l.trim_end().ends_with(" 10"))
            .count()
            == 3,
        "{out}"
    );

    let (ok, out, _) = consumer_groups(&["--bootstrap-server", &b, "--delete", "--group", "cg"]);
    assert!(
        ok && out.contains("Deletion of requested consumer groups ('cg') was successful."),
        "{out}"
    );
    let (_, _, err) = consumer_groups(&["--bootstrap-server", &b, "--describe", "--group", "cg"]);
    assert!(err.contains("Consumer group 'cg' does not exist."), "{err}");
}
