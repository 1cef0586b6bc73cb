//! Durability and start-up against the real `strom` binary:
//!
//! - a `kill -9` in the middle of an acks=all produce stream loses or changes no
//!   acknowledged record (read back after a restart at the same offset, same bytes);
//! - SIGTERM shuts down cleanly (exit status 0) and a restart serves everything;
//! - a configuration error (unknown key, bad value) stops start-up with a non-zero exit
//!   and an error naming the key.

mod common;

use std::collections::BTreeMap;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::client::{create_topic, send_waiting};
use common::StromBroker;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext, PurgeConfig};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

const TIMEOUT: Duration = Duration::from_secs(60);
const PARTITIONS: i32 = 3;

/// Record `i` (key and value both derive from `i`, so any stored record can be checked).
fn key_of(i: u64) -> Vec<u8> {
    format!("record-{i}").into_bytes()
}

fn value_of(i: u64) -> Vec<u8> {
    let len = 50 + (i % 400) as usize;
    let mut value = i.to_be_bytes().to_vec();
    value.extend((0..len).map(|j| (i as usize * 31 + j * 7) as u8));
    value
}

fn index_of_key(key: &[u8]) -> u64 {
    std::str::from_utf8(key)
        .ok()
        .and_then(|k| k.strip_prefix("record-"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("stored key {key:?} was never produced"))
}

/// Delivery reports: record index → (partition, offset), successes only; failures are
/// counted (they are expected once the broker is gone).
#[derive(Default)]
struct Acks {
    acked: Mutex<BTreeMap<u64, (i32, i64)>>,
    failed: Mutex<u64>,
}

impl ClientContext for Acks {}

impl ProducerContext for Acks {
    type DeliveryOpaque = Box<u64>;

    fn delivery(&self, result: &DeliveryResult<'_>, index: Box<u64>) {
        match result {
            Ok(m) => {
                self.acked
                    .lock()
                    .unwrap()
                    .insert(*index, (m.partition(), m.offset()));
            }
            Err(_) => *self.failed.lock().unwrap() += 1,
        }
    }
}

fn new_producer(bootstrap: &str) -> BaseProducer<Acks> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "1")
        .set("batch.num.messages", "200")
        .set("compression.type", "lz4")
        .create_with_context(Acks::default())
        .expect("producer")
}

/// Sends record `i` to partition `i % PARTITIONS`, waiting for queue space if needed.
fn send(producer: &BaseProducer<Acks>, topic: &str, i: u64) {
    let (key, value) = (key_of(i), value_of(i));
    let record = BaseRecord::with_opaque_to(topic, Box::new(i))
        .key(&key)
        .payload(&value)
        .partition((i % PARTITIONS as u64) as i32);
    send_waiting(producer, record);
}

/// partition → [(offset, key, value)], as read back.
type StoredLog = BTreeMap<i32, Vec<(i64, Vec<u8>, Vec<u8>)>>;

/// Every record of every partition of `topic`, read by assign from offset 0 up to the
/// high watermark: partition → [(offset, key, value)].
fn read_all(bootstrap: &str, topic: &str) -> StoredLog {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        // librdkafka's assign() needs a group.id; without subscribe() the group is never
        // joined and nothing is committed.
        .set("group.id", "assign-only")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    let mut remaining = 0;
    let mut out = BTreeMap::new();
    for p in 0..PARTITIONS {
        let (low, high) = consumer.fetch_watermarks(topic, p, TIMEOUT).unwrap();
        assert_eq!(low, 0, "partition {p} low watermark");
        remaining += high;
        out.insert(p, Vec::new());
        assignment
            .add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&assignment).expect("assign");
    let deadline = Instant::now() + TIMEOUT;
    while remaining > 0 {
        assert!(
            Instant::now() < deadline,
            "{remaining} records still unread"
        );
        if let Some(m) = consumer.poll(Duration::from_millis(500)) {
            let m = m.expect("consume");
            out.get_mut(&m.partition()).unwrap().push((
                m.offset(),
                m.key().unwrap_or_default().to_vec(),
                m.payload().unwrap_or_default().to_vec(),
            ));
            remaining -= 1;
        }
    }
    out
}

/// Checks that the log holds contiguous offsets from 0, only records that were produced,
/// each at most once, and every acknowledged record at its acknowledged offset.
fn assert_log_holds(log: &StoredLog, acked: &BTreeMap<u64, (i32, i64)>) {
    let mut stored = BTreeMap::new();
    for (p, records) in log {
        for (n, (offset, key, value)) in records.iter().enumerate() {
            assert_eq!(*offset, n as i64, "partition {p}: offsets are contiguous");
            let i = index_of_key(key);
            assert!(
                *value == value_of(i),
                "record {i} at {p}/{offset}: bytes changed"
            );
            assert_eq!(
                i % PARTITIONS as u64,
                *p as u64,
                "record {i} in partition {p}"
            );
            assert!(
                stored.insert(i, (*p, *offset)).is_none(),
                "record {i} stored twice"
            );
        }
    }
    for (i, at) in acked {
        assert_eq!(
            stored.get(i),
            Some(at),
            "acknowledged record {i} (acked at partition/offset {at:?})"
        );
    }
}

#[test]
fn acknowledged_records_survive_kill_9_mid_stream() {
    const ACKED_BEFORE_KILL: usize = 20_000;
    const MAX_RECORDS: u64 = 2_000_000;
    // Small segments, so that the stream crosses segment rolls before the kill.
    let mut broker = StromBroker::start(&[
        "auto.create.topics.enable=false",
        "log.segment.bytes=262144",
    ]);
    let bootstrap = broker.bootstrap();
    let topic = "crash-stream";
    create_topic(&bootstrap, topic, PARTITIONS);

    let producer = new_producer(&bootstrap);
    let mut sent = 0u64;
    while producer.context().acked.lock().unwrap().len() < ACKED_BEFORE_KILL {
        assert!(sent < MAX_RECORDS, "only {ACKED_BEFORE_KILL} acks expected");
        send(&producer, topic, sent);
        sent += 1;
    }
    let in_flight = producer.in_flight_count();
    broker.kill9();
    assert!(
        in_flight > 0,
        "records were still unacknowledged when the broker was killed"
    );

    // Nothing more can be acknowledged: drop what is queued or in flight and collect the
    // reports, so the acknowledged set is final.
    producer.purge(PurgeConfig::default().queue().inflight());
    let deadline = Instant::now() + TIMEOUT;
    while producer.in_flight_count() > 0 {
        assert!(Instant::now() < deadline, "delivery reports after purge");
        producer.poll(Duration::from_millis(100));
    }
    let acked = std::mem::take(&mut *producer.context().acked.lock().unwrap());
    let failed = *producer.context().failed.lock().unwrap();
    drop(producer);
    assert_eq!(acked.len() as u64 + failed, sent, "every record reported");
    println!(
        "sent {sent}, acknowledged {}, unacknowledged {failed} at kill -9",
        acked.len()
    );

    broker.restart();
    let log = read_all(&bootstrap, topic);
    assert_log_holds(&log, &acked);

    // The log goes on after the recovered end.
    let producer = new_producer(&bootstrap);
    send(&producer, topic, sent);
    producer.flush(TIMEOUT).expect("flush after restart");
    let (p, offset) = producer.context().acked.lock().unwrap()[&sent];
    let end_before = log[&p].len() as i64;
    assert_eq!(offset, end_before, "first offset after recovery");
}

#[test]
fn sigterm_exits_0_and_a_restart_serves_everything() {
    const RECORDS: u64 = 10_000;
    let mut broker = StromBroker::start(&[
        "auto.create.topics.enable=false",
        "log.segment.bytes=262144",
    ]);
    let bootstrap = broker.bootstrap();
    let topic = "sigterm";
    create_topic(&bootstrap, topic, PARTITIONS);
    let producer = new_producer(&bootstrap);
    for i in 0..RECORDS {
        send(&producer, topic, i);
    }
    producer.flush(TIMEOUT).expect("flush");
    let acked = std::mem::take(&mut *producer.context().acked.lock().unwrap());
    drop(producer);
    assert_eq!(acked.len() as u64, RECORDS, "all acknowledged");

    let status = broker.terminate();
    assert!(
        status.success(),
        "SIGTERM exit status {status}; stderr:\n{}",
        broker.stderr()
    );

    broker.restart();
    let log = read_all(&bootstrap, topic);
    let stored: usize = log.values().map(Vec::len).sum();
    assert_eq!(stored as u64, RECORDS, "records after restart");
    assert_log_holds(&log, &acked);
}

/// Runs `strom server args...` on a free port and a temporary directory, expecting it to
/// exit by itself; returns its status and stderr.
fn server_exit(args: &[&str]) -> (ExitStatus, String) {
    let dir = tempfile::tempdir().unwrap();
    let log_dirs = format!("log.dirs={}", dir.path().join("logs").display());
    let mut child = Command::new(env!("CARGO_BIN_EXE_strom"))
        .arg("server")
        .args(args)
        .args(["--override", "listeners=PLAINTEXT://127.0.0.1:0"])
        .args(["--override", &log_dirs])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run strom");
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("strom server {args:?} started instead of refusing its configuration");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    (
        output.status,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn assert_refused(args: &[&str], key: &str) {
    let (status, stderr) = server_exit(args);
    assert!(!status.success(), "{args:?}: exit status {status}");
    assert!(
        stderr.contains(key),
        "{args:?}: stderr does not name '{key}':\n{stderr}"
    );
}

#[test]
fn unknown_config_key_stops_start_up_naming_it() {
    assert_refused(
        &["--override", "log.segmnet.bytes=1048576"],
        "log.segmnet.bytes",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("server.properties");
    std::fs::write(&file, "num.partitions=2\nno.such.setting=yes\n").unwrap();
    assert_refused(&[file.to_str().unwrap()], "no.such.setting");
}

#[test]
fn bad_config_value_stops_start_up_naming_the_key() {
    assert_refused(&["--override", "num.partitions=lots"], "num.partitions");
    assert_refused(&["--override", "log.segment.bytes=-5"], "log.segment.bytes");
    assert_refused(
        &["--override", "auto.create.topics.enable=maybe"],
        "auto.create.topics.enable",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("server.properties");
    std::fs::write(&file, "message.max.bytes=12x\n").unwrap();
    assert_refused(&[file.to_str().unwrap()], "message.max.bytes");
}
