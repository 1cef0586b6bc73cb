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
//!   naming the file) while the other partitions serve.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::client::{create_topic, send_waiting};
use common::raw::Conn;
use common::{without_colours, StromBroker};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    ApiKey, CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
    CreateTopicsResponse, FetchRequest, FetchResponse, TopicName,
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
        // The 2,000 written to, and the 50 of `__consumer_offsets` the readers' group made.
        stderr.contains("logs closed") && stderr.contains("closed=2000 syncfs=true recorded=2050"),
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
