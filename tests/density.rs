//! Partition density against the real `strom` binary (issue 8, at a scale that fits CI):
//!
//! - 2,000 partitions of 2 segments each (12,000 segment and index files) are created,
//!   produced to, read back from offset 0 (so old segments are opened) and restarted after
//!   SIGTERM and after `kill -9`, all under an `RLIMIT_NOFILE` of 1,600 set for the broker
//!   process, and the broker's descriptors stay within `log.open.files.max` plus its
//!   connections throughout;
//! - start-up under a limit too low for `log.open.files.max` stops with one line saying
//!   how many descriptors it needs and how to raise the limit;
//! - CreateTopics/CreatePartitions beyond `max.partitions.per.request` or
//!   `max.partitions.per.broker` get INVALID_PARTITIONS/POLICY_VIOLATION naming the limit
//!   and create no directory; orphaned partition directories are removed at start-up;
//! - a damaged segment takes only its partition offline (KAFKA_STORAGE_ERROR, a log line
//!   naming the file) while the other partitions serve;
//! - a standalone node serves each partition as soon as its log is open, not after all.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::client::{create_topic, send_waiting};
use common::raw::Conn;
use common::{wait_until, StromBroker};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
    CreateTopicsResponse, FetchRequest, FetchResponse, MetadataRequest, MetadataResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

const TIMEOUT: Duration = Duration::from_secs(120);
const TOPICS: usize = 20;
const PARTITIONS_PER_TOPIC: i32 = 100;
/// The broker's `RLIMIT_NOFILE`: far below the 12,000 files its logs hold.
const OPEN_FILES_LIMIT: u64 = 1600;
const LOG_OPEN_FILES_MAX: usize = 200;
/// Descriptors besides cached segment files: a few connections, the listener, epoll,
/// stdio, the offset store. Generous, but far below one per segment.
const OTHER_DESCRIPTORS: usize = 100;

const INVALID_PARTITIONS: i16 = 37;
const POLICY_VIOLATION: i16 = 44;
const KAFKA_STORAGE_ERROR: i16 = 56;

fn topic_name(t: usize) -> String {
    format!("dense-{t}")
}

fn value(t: usize, p: i32, i: i64) -> String {
    format!("{t}/{p}/{i}")
}

/// Sends `count` records to every partition, the `first`-th to the `first + count - 1`-th
/// of each, and waits until all are acknowledged.
fn produce_round(bootstrap: &str, first: i64, count: i64) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("linger.ms", "20")
        .set("queue.buffering.max.messages", "100000")
        .create()
        .expect("producer");
    for t in 0..TOPICS {
        let topic = topic_name(t);
        for p in 0..PARTITIONS_PER_TOPIC {
            for i in first..first + count {
                let v = value(t, p, i);
                send_waiting(
                    &producer,
                    BaseRecord::<(), _>::to(&topic).partition(p).payload(&v),
                );
            }
        }
    }
    producer.flush(TIMEOUT).expect("every record acknowledged");
}

/// Reads every partition from offset 0 and checks it holds exactly `per_partition`
/// records, the ones produced, at offsets 0, 1, 2...
fn assert_all_records(bootstrap: &str, per_partition: i64) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "density-check")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    for t in 0..TOPICS {
        for p in 0..PARTITIONS_PER_TOPIC {
            assignment
                .add_partition_offset(&topic_name(t), p, Offset::Beginning)
                .unwrap();
        }
    }
    consumer.assign(&assignment).expect("assign");
    let expected = TOPICS as i64 * PARTITIONS_PER_TOPIC as i64 * per_partition;
    let mut seen = BTreeMap::new();
    let deadline = Instant::now() + TIMEOUT;
    while (seen.len() as i64) < expected {
        assert!(
            Instant::now() < deadline,
            "only {} of {expected} records read",
            seen.len()
        );
        let Some(message) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        let message = message.expect("no consume error");
        let t: usize = message.topic()["dense-".len()..].parse().unwrap();
        let key = (t, message.partition(), message.offset());
        let v = value(t, message.partition(), message.offset());
        assert_eq!(message.payload(), Some(v.as_bytes()), "record {key:?}");
        assert!(
            message.offset() < per_partition,
            "unexpected record {key:?}"
        );
        seen.insert(key, ());
    }
}

/// `text` without the terminal colour codes tracing puts around field names.
fn without_colours(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|&c| c == 'm');
        } else {
            out.push(c);
        }
    }
    out
}

fn assert_descriptors_bounded(broker: &StromBroker, when: &str) {
    let open = broker.open_descriptors();
    assert!(
        open <= LOG_OPEN_FILES_MAX + OTHER_DESCRIPTORS,
        "{when}: the broker holds {open} descriptors"
    );
}

#[test]
fn two_thousand_partitions_of_two_segments_live_within_a_1600_descriptor_limit() {
    let open_files_max = format!("log.open.files.max={LOG_OPEN_FILES_MAX}");
    let mut broker = StromBroker::start_limited(
        Some(OPEN_FILES_LIMIT),
        &[
            &open_files_max,
            "num.recovery.threads.per.data.dir=2",
            // Every batch after a segment's first one rolls a new segment.
            "log.segment.bytes=100",
        ],
    );
    let bootstrap = broker.bootstrap();
    for t in 0..TOPICS {
        create_topic(&bootstrap, &topic_name(t), PARTITIONS_PER_TOPIC);
    }
    assert_descriptors_bounded(&broker, "after creating 2,000 partitions");
    produce_round(&bootstrap, 0, 2);
    produce_round(&bootstrap, 2, 1);
    assert_descriptors_bounded(&broker, "after producing to every partition");
    let segments = std::fs::read_dir(broker.log_dir().join("dense-0-0"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "log")
        })
        .count();
    assert_eq!(segments, 2, "each partition has two segments");
    assert_all_records(&bootstrap, 3);
    assert_descriptors_bounded(&broker, "after reading every partition from offset 0");

    assert!(broker.terminate().success(), "SIGTERM exits cleanly");
    let stderr = without_colours(&broker.stderr());
    assert!(
        stderr.contains("logs closed") && stderr.contains("closed=2000 syncfs=true recorded=2000"),
        "every partition had something to write at shutdown:\n{stderr}"
    );
    let record = std::fs::metadata(broker.log_dir().join(".strom_clean_shutdown_record")).unwrap();
    assert!(
        record.len() > 2000 * 20,
        "the clean-shutdown record names every partition closed ({} bytes)",
        record.len()
    );
    broker.restart();
    assert_descriptors_bounded(&broker, "after a clean restart");
    assert_all_records(&bootstrap, 3);

    produce_round(&bootstrap, 3, 1);
    broker.kill9();
    broker.restart();
    assert_descriptors_bounded(&broker, "after recovery from kill -9");
    assert_all_records(&bootstrap, 4);
    assert!(broker.terminate().success());
}

#[test]
fn start_up_under_a_too_low_descriptor_limit_says_what_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    let log_dirs = format!("log.dirs={}", dir.path().display());
    let (status, stderr) = common::run_limited_server_expecting_exit(
        Some(600),
        &[
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:0",
            "--override",
            &log_dirs,
        ],
    );
    assert!(!status.success());
    let line = stderr
        .lines()
        .find(|l| l.contains("RLIMIT_NOFILE"))
        .unwrap_or_else(|| panic!("no line about RLIMIT_NOFILE:\n{stderr}"));
    // 4096 cached segment files (the default log.open.files.max) + 1024 + 4 per thread.
    assert!(line.contains("needs 5124 open files"), "{line}");
    assert!(line.contains("allows 600"), "{line}");
    assert!(line.contains("ulimit -n 5124"), "{line}");
}

fn create_topics(conn: &mut Conn, name: &str, partitions: i32) -> (i16, String) {
    let request = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.to_string())))
            .with_num_partitions(partitions)
            .with_replication_factor(1)])
        .with_timeout_ms(30_000);
    let response: CreateTopicsResponse = conn.call(ApiKey::CreateTopics, 5, &request);
    let topic = &response.topics[0];
    let message = topic.error_message.as_ref().map(|m| m.to_string());
    (topic.error_code, message.unwrap_or_default())
}

fn partition_dirs(broker: &StromBroker) -> usize {
    std::fs::read_dir(broker.log_dir())
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            let name = name.to_string_lossy();
            !name.starts_with("__") && e.as_ref().unwrap().path().is_dir()
        })
        .count()
}

#[test]
fn partition_limits_refuse_big_creations_and_leave_no_directories() {
    let mut broker = StromBroker::start(&[
        "max.partitions.per.request=50",
        "max.partitions.per.broker=120",
    ]);
    let mut conn = Conn::open(&broker);
    let (code, message) = create_topics(&mut conn, "huge", 100_000);
    assert_eq!(code, INVALID_PARTITIONS, "{message}");
    assert!(
        message.contains("max.partitions.per.request is 50"),
        "{message}"
    );
    assert_eq!(create_topics(&mut conn, "first", 50).0, 0);
    assert_eq!(create_topics(&mut conn, "second", 50).0, 0);
    let (code, message) = create_topics(&mut conn, "third", 30);
    assert_eq!(code, POLICY_VIOLATION, "{message}");
    assert!(
        message.contains("max.partitions.per.broker 120"),
        "{message}"
    );

    let request = CreatePartitionsRequest::default()
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("first")))
            .with_count(80)])
        .with_timeout_ms(30_000);
    let response: CreatePartitionsResponse = conn.call(ApiKey::CreatePartitions, 2, &request);
    assert_eq!(response.results[0].error_code, POLICY_VIOLATION);
    assert_eq!(
        partition_dirs(&broker),
        100,
        "only the two created topics' directories"
    );

    // A directory no topic names (left by a crash mid-deletion, say) goes at start-up.
    assert!(broker.terminate().success());
    let orphan = broker.log_dir().join("ghost-0");
    std::fs::create_dir(&orphan).unwrap();
    std::fs::write(orphan.join("00000000000000000000.log"), b"").unwrap();
    broker.restart();
    assert!(!orphan.exists(), "the orphaned directory was removed");
    assert!(broker.terminate().success());
    let stderr = broker.stderr();
    assert!(
        stderr.contains("orphaned partition directory") && stderr.contains("ghost-0"),
        "{stderr}"
    );
}

fn fetch_error(conn: &mut Conn, topic: &str, partition: i32) -> (i16, usize) {
    let request = FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let response: FetchResponse = conn.call(ApiKey::Fetch, 11, &request);
    let data = &response.responses[0].partitions[0];
    (
        data.error_code,
        data.records.as_ref().map_or(0, |r| r.len()),
    )
}

#[test]
fn a_damaged_segment_takes_only_its_partition_offline() {
    let mut broker = StromBroker::start(&["log.segment.bytes=100"]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "damaged", 2);
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("acks", "all")
        .create()
        .unwrap();
    for round in 0..2 {
        for p in 0..2 {
            let v = format!("record {round}");
            send_waiting(
                &producer,
                BaseRecord::<(), _>::to("damaged").partition(p).payload(&v),
            );
        }
        producer.flush(TIMEOUT).unwrap();
    }
    assert!(broker.terminate().success());
    let segment = broker
        .log_dir()
        .join("damaged-0")
        .join("00000000000000000000.log");
    let len = std::fs::metadata(&segment).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap()
        .set_len(len - 5)
        .unwrap();
    broker.restart();
    let mut conn = Conn::open(&broker);
    assert_eq!(fetch_error(&mut conn, "damaged", 0).0, KAFKA_STORAGE_ERROR);
    let (code, bytes) = fetch_error(&mut conn, "damaged", 1);
    assert_eq!(code, 0);
    assert!(bytes > 0, "the undamaged partition serves its records");
    assert!(broker.terminate().success());
    let stderr = broker.stderr();
    assert!(
        stderr.contains("damaged segment") && stderr.contains("damaged-0/00000000000000000000.log"),
        "{stderr}"
    );
}

/// Each partition's leader and error code in a Metadata response for `topic`.
fn leaders(conn: &mut Conn, topic: &str) -> Vec<(i32, i16)> {
    let request =
        MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(topic.to_string()))))]));
    let response: MetadataResponse = conn.call(ApiKey::Metadata, 12, &request);
    let mut partitions: Vec<_> = response.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.leader_id.0, p.error_code))
        .collect();
    partitions.sort();
    partitions.into_iter().map(|(_, l, e)| (l, e)).collect()
}

/// The values of every record in `topic`-`partition`, read from offset 0.
fn read_partition(bootstrap: &str, topic: &str, partition: i32, expected: usize) -> Vec<String> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "loading-check")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, partition, Offset::Beginning)
        .unwrap();
    consumer.assign(&assignment).expect("assign");
    let mut values = Vec::new();
    let deadline = Instant::now() + TIMEOUT;
    while values.len() < expected && Instant::now() < deadline {
        if let Some(message) = consumer.poll(Duration::from_millis(100)) {
            let message = message.expect("no consume error");
            values.push(String::from_utf8_lossy(message.payload().unwrap()).into_owned());
        }
    }
    values
}

/// A standalone node serves each partition as soon as its log is open, not after all of
/// them: after a `kill -9`, the recovery of partition 3 of 6 (one loading thread, the
/// default, so partitions open in order) is held in the `open` of its offset index, made
/// a FIFO that blocks until the test writes to it. Meanwhile partitions 0–2 are led and
/// serve their recovered records, 3–5 are LEADER_NOT_AVAILABLE in Metadata and
/// NOT_LEADER_OR_FOLLOWER to a Fetch, and the ready line (every partition open) has not
/// been printed. A SIGTERM then stops the loading after partition 3: the broker exits 0
/// without marking the shutdown clean, and the next start recovers 4 and 5 with every
/// record.
#[test]
fn a_standalone_broker_serves_each_partition_as_soon_as_its_log_is_open() {
    const TOPIC: &str = "loading";
    const HELD: i32 = 3;
    let mut broker = StromBroker::start(&[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, TOPIC, 6);
    let producer_round = |first: usize| {
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("acks", "all")
            .create()
            .unwrap();
        for p in 0..6 {
            for i in first..first + 5 {
                let v = format!("{p}/{i}");
                send_waiting(
                    &producer,
                    BaseRecord::<(), _>::to(TOPIC).partition(p).payload(&v),
                );
            }
        }
        producer.flush(TIMEOUT).expect("every record acknowledged");
    };
    let all_records = |p: i32| (0..10).map(|i| format!("{p}/{i}")).collect::<Vec<_>>();
    // Records below the recovery point (a clean shutdown), then above it (kill -9): the
    // restart recovers each partition's tail and reads its offset index to do so.
    producer_round(0);
    assert!(broker.terminate().success());
    broker.restart();
    producer_round(5);
    broker.kill9();
    let index = broker
        .log_dir()
        .join(format!("{TOPIC}-{HELD}"))
        .join("00000000000000000000.index");
    hold_open(&index);

    let ready = broker.restart_unready();
    wait_listening(&bootstrap);
    let mut conn = Conn::connect(&bootstrap);
    let served = |p: i32| if p < HELD { (1, 0) } else { (-1, 5) };
    let expected: Vec<_> = (0..6).map(served).collect();
    assert!(
        wait_until(TIMEOUT, || leaders(&mut conn, TOPIC) == expected),
        "partitions 0-2 led, 3-5 LEADER_NOT_AVAILABLE: {:?}",
        leaders(&mut conn, TOPIC)
    );
    assert_eq!(
        fetch_error(&mut conn, TOPIC, HELD).0,
        6,
        "NOT_LEADER_OR_FOLLOWER"
    );
    assert_eq!(
        read_partition(&bootstrap, TOPIC, 0, 10),
        all_records(0),
        "an opened partition serves its recovered records"
    );
    assert!(
        ready.try_recv().is_err(),
        "no ready line while partitions are still being opened"
    );

    terminate_while_held(&broker, &bootstrap, &index);
    assert!(
        broker.wait_exit().success(),
        "SIGTERM while loading exits 0"
    );
    let stderr = without_colours(&broker.stderr());
    assert!(
        stderr.contains("loaded=4") && stderr.contains("recorded=4"),
        "loading stopped after the held partition; the record names only the partitions opened:\n{stderr}"
    );

    let assert_all_served = |broker: &mut StromBroker| {
        assert_eq!(
            leaders(&mut Conn::connect(&bootstrap), TOPIC),
            vec![(1, 0); 6]
        );
        for p in 0..6 {
            assert_eq!(read_partition(&bootstrap, TOPIC, p, 10), all_records(p));
        }
        assert!(broker.terminate().success());
        without_colours(&broker.stderr())
    };
    broker.restart();
    let stderr = assert_all_served(&mut broker);
    assert!(
        stderr.contains("from_record=4") && stderr.contains("recorded=6"),
        "the partitions the record did not name were recovered, and all six are recorded now:\n{stderr}"
    );

    // The same interruption of a start from a record: the held partition's active segment
    // grew after the record (a torn write appended), so it is recovered, and held there.
    let log = index.with_extension("log");
    let mut appended = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    std::io::Write::write_all(&mut appended, b"torn").unwrap();
    hold_open(&index);
    let _ready = broker.restart_unready();
    wait_listening(&bootstrap);
    let mut conn = Conn::connect(&bootstrap);
    assert!(
        wait_until(TIMEOUT, || leaders(&mut conn, TOPIC) == expected),
        "partitions 0-2 led, 3-5 LEADER_NOT_AVAILABLE: {:?}",
        leaders(&mut conn, TOPIC)
    );
    terminate_while_held(&broker, &bootstrap, &index);
    assert!(broker.wait_exit().success());
    let stderr = without_colours(&broker.stderr());
    assert!(
        stderr.contains("the active segment changed after the clean shutdown recorded it")
            && stderr.contains("loaded=4")
            && stderr.contains("recorded=6"),
        "the partitions not opened keep what the record said of them:\n{stderr}"
    );
    broker.restart();
    let stderr = assert_all_served(&mut broker);
    assert!(stderr.contains("from_record=6"), "{stderr}");

    // An earlier version ran on the log dir after the record was written and shut down
    // with its own marker: the record no longer describes the logs and is not used.
    std::fs::File::create(broker.log_dir().join(".strom_cleanshutdown")).unwrap();
    broker.restart();
    let stderr = assert_all_served(&mut broker);
    assert!(
        stderr.contains("ignoring the clean-shutdown record") && stderr.contains("from_record=0"),
        "{stderr}"
    );
}

/// Puts a FIFO in place of `index`, so the next `open` of it blocks until [`release`].
fn hold_open(index: &std::path::Path) {
    std::fs::remove_file(index).unwrap();
    let fifo = std::ffi::CString::new(index.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads a NUL-terminated path we own.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
}

/// Releases the open [`hold_open`] holds: one byte (a torn index, which recovery
/// rebuilds), with a regular file in the FIFO's place for the rebuilt index before the
/// byte's end is read.
fn release(index: &std::path::Path) {
    let mut writer = std::fs::OpenOptions::new().write(true).open(index).unwrap();
    std::io::Write::write_all(&mut writer, b"x").unwrap();
    let replacement = index.with_extension("replacement");
    std::fs::File::create(&replacement).unwrap();
    std::fs::rename(&replacement, index).unwrap();
    drop(writer);
}

/// SIGTERM to a broker whose loading is held at `index`, then the release of the hold
/// once the broker has seen the signal: it stops loading before it stops accepting, so
/// refused connections say so. (Released at once, loading raced the signal and sometimes
/// opened the partitions after the held one too.)
fn terminate_while_held(broker: &StromBroker, bootstrap: &str, index: &std::path::Path) {
    broker.signal_terminate();
    assert!(
        wait_until(TIMEOUT, || std::net::TcpStream::connect(bootstrap).is_err()),
        "the broker still accepts connections after SIGTERM"
    );
    release(index);
}

/// Waits until `bootstrap` accepts connections.
fn wait_listening(bootstrap: &str) {
    assert!(
        wait_until(TIMEOUT, || std::net::TcpStream::connect(bootstrap).is_ok()),
        "{bootstrap} never accepted a connection"
    );
}
