//! librdkafka (the `rdkafka` crate, librdkafka 2.12 bundled, zstd on) against the real
//! `strom` binary: a round trip with every codec through the idempotent producer with
//! acks=all, ListOffsets by timestamp, and watermarks before and after DeleteRecords.

mod common;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::client::{admin, block_on, create_topic, send_waiting};
use common::StromBroker;
use rdkafka::admin::AdminOptions;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaResult;
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

const TIMEOUT: Duration = Duration::from_secs(60);
const RECORDS: usize = 3000;

/// Kafka's record-batch attribute values for each codec (attributes & 0x7).
const CODECS: [(&str, i16); 5] = [
    ("none", 0),
    ("gzip", 1),
    ("snappy", 2),
    ("lz4", 3),
    ("zstd", 4),
];

/// Record `i`'s value: a mix of compressible text and pseudo-random bytes (every byte
/// value occurs), of varying length, some empty.
fn value_of(i: usize) -> Vec<u8> {
    let mut state = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let len = (i * 37) % 700;
    let mut value = format!("value-{i}-").into_bytes();
    value.extend(b"compressible ".iter().cycle().take(len / 2));
    value.extend((0..len / 2).map(|_| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state as u8
    }));
    if i % 500 == 7 {
        value.clear();
    }
    value
}

fn key_of(i: usize) -> Vec<u8> {
    format!("key-{i}").into_bytes()
}

/// Records each delivery report: record index → (partition, offset) or the error.
#[derive(Default)]
struct Deliveries(Mutex<BTreeMap<usize, KafkaResult<(i32, i64)>>>);

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = Box<usize>;

    fn delivery(&self, result: &DeliveryResult<'_>, index: Box<usize>) {
        let outcome = match result {
            Ok(m) => Ok((m.partition(), m.offset())),
            Err((e, _)) => Err(e.clone()),
        };
        self.0.lock().unwrap().insert(*index, outcome);
    }
}

/// Produces `records` (index, key, value, timestamp) to partition 0 of `topic` and returns
/// each record's acknowledged offset, in index order.
fn produce(
    bootstrap: &str,
    topic: &str,
    config: &[(&str, &str)],
    records: &[(Vec<u8>, Vec<u8>, Option<i64>)],
) -> Vec<i64> {
    let mut client = ClientConfig::new();
    client
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "5");
    for (k, v) in config {
        client.set(*k, *v);
    }
    let producer: BaseProducer<Deliveries> = client
        .create_with_context(Deliveries::default())
        .expect("producer");
    for (i, (key, value, timestamp)) in records.iter().enumerate() {
        let mut record = BaseRecord::with_opaque_to(topic, Box::new(i))
            .key(key)
            .payload(value)
            .partition(0);
        if let Some(ts) = timestamp {
            record = record.timestamp(*ts);
        }
        send_waiting(&producer, record);
    }
    producer.flush(TIMEOUT).expect("flush");
    let deliveries = producer.context().0.lock().unwrap();
    assert_eq!(deliveries.len(), records.len(), "delivery reports");
    deliveries
        .iter()
        .map(|(i, outcome)| match outcome {
            Ok((0, offset)) => *offset,
            other => panic!("record {i}: {other:?}"),
        })
        .collect()
}

fn consumer(bootstrap: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        // librdkafka's assign() needs a group.id; without subscribe() the group is never
        // joined and nothing is committed.
        .set("group.id", "assign-only")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .create()
        .expect("consumer")
}

/// A record read back: (offset, key, value, timestamp).
type Consumed = (i64, Vec<u8>, Vec<u8>, Option<i64>);

/// Reads `count` records of partition 0 of `topic` from `from` by assign (no group):
/// (offset, key, value, timestamp).
fn consume(bootstrap: &str, topic: &str, from: i64, count: usize) -> Vec<Consumed> {
    let consumer = consumer(bootstrap);
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Offset(from))
        .unwrap();
    consumer.assign(&assignment).expect("assign");
    let deadline = Instant::now() + TIMEOUT;
    let mut out = Vec::with_capacity(count);
    while out.len() < count && Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(500)) {
            None => {}
            Some(Err(e)) => panic!("consume {topic}: {e}"),
            Some(Ok(m)) => out.push((
                m.offset(),
                m.key().unwrap_or_default().to_vec(),
                m.payload().unwrap_or_default().to_vec(),
                m.timestamp().to_millis(),
            )),
        }
    }
    assert_eq!(out.len(), count, "records read from {topic} by {TIMEOUT:?}");
    out
}

/// The compression codec of the first batch in `topic`-0's first segment, as stored.
fn stored_codec(broker: &StromBroker, topic: &str) -> i16 {
    let dir = broker.log_dir().join(format!("{topic}-0"));
    let mut logs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    let bytes = std::fs::read(&logs[0]).unwrap();
    // baseOffset(8) batchLength(4) partitionLeaderEpoch(4) magic(1) crc(4) attributes(2)
    assert_eq!(bytes[16], 2, "magic of the first stored batch");
    i16::from_be_bytes([bytes[21], bytes[22]]) & 0x7
}

#[test]
fn every_codec_round_trips_byte_identical_through_the_idempotent_producer() {
    let broker = StromBroker::start(&["auto.create.topics.enable=false"]);
    let bootstrap = broker.bootstrap();
    let records: Vec<_> = (0..RECORDS)
        .map(|i| (key_of(i), value_of(i), None))
        .collect();
    for (codec, attribute) in CODECS {
        let topic = format!("rdkafka-{codec}");
        create_topic(&bootstrap, &topic, 1);
        let offsets = produce(
            &bootstrap,
            &topic,
            &[("compression.type", codec), ("batch.num.messages", "500")],
            &records,
        );
        let expected: Vec<i64> = (0..RECORDS as i64).collect();
        assert_eq!(offsets, expected, "{codec}: acknowledged offsets");

        let read = consume(&bootstrap, &topic, 0, RECORDS);
        for (i, (offset, key, value, _)) in read.iter().enumerate() {
            assert_eq!(*offset, i as i64, "{codec}: offset of record {i}");
            assert_eq!(key, &records[i].0, "{codec}: key at offset {i}");
            assert!(
                value == &records[i].1,
                "{codec}: value at offset {i} differs"
            );
        }
        assert_eq!(
            stored_codec(&broker, &topic),
            attribute,
            "{codec}: the stored batch keeps the producer's compression"
        );
    }
}

#[test]
fn offsets_for_times_finds_the_first_record_at_or_after_a_timestamp() {
    let broker = StromBroker::start(&["auto.create.topics.enable=false"]);
    let bootstrap = broker.bootstrap();
    let topic = "rdkafka-times";
    create_topic(&bootstrap, topic, 1);
    // Recent timestamps (retention must not delete them), one second apart.
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let t0 = now.as_millis() as i64 - 3_600_000;
    let records: Vec<_> = (0..200)
        .map(|i| (key_of(i), value_of(i), Some(t0 + 1000 * i as i64)))
        .collect();
    // Small batches, so that the lookup has to find a record inside the log, not at its ends.
    produce(&bootstrap, topic, &[("batch.num.messages", "7")], &records);
    let read = consume(&bootstrap, topic, 0, 200);
    for (i, (_, _, _, ts)) in read.iter().enumerate() {
        assert_eq!(*ts, Some(t0 + 1000 * i as i64), "timestamp of record {i}");
    }

    let consumer = consumer(&bootstrap);
    let lookup = |timestamp: i64| {
        let mut query = TopicPartitionList::new();
        query
            .add_partition_offset(topic, 0, Offset::Offset(timestamp))
            .unwrap();
        let answer = consumer
            .offsets_for_times(query, TIMEOUT)
            .expect("offsets_for_times");
        let element = answer.find_partition(topic, 0).expect("partition 0");
        assert!(element.error().is_ok(), "{:?}", element.error());
        element.offset()
    };
    assert_eq!(lookup(t0 - 5000), Offset::Offset(0), "before the first");
    assert_eq!(lookup(t0), Offset::Offset(0), "exactly the first");
    assert_eq!(lookup(t0 + 50_000), Offset::Offset(50), "exactly record 50");
    assert_eq!(
        lookup(t0 + 50_001),
        Offset::Offset(51),
        "just after record 50"
    );
    assert_eq!(
        lookup(t0 + 123_500),
        Offset::Offset(124),
        "between 123 and 124"
    );
    assert_eq!(lookup(t0 + 199_000), Offset::Offset(199), "the last");
    assert_eq!(
        lookup(t0 + 200_000),
        Offset::End,
        "after the last: no offset"
    );
}

#[test]
fn watermarks_follow_produce_and_delete_records() {
    let broker = StromBroker::start(&["auto.create.topics.enable=false"]);
    let bootstrap = broker.bootstrap();
    let topic = "rdkafka-watermarks";
    create_topic(&bootstrap, topic, 1);
    let consumer = consumer(&bootstrap);
    assert_eq!(
        consumer.fetch_watermarks(topic, 0, TIMEOUT).unwrap(),
        (0, 0),
        "empty partition"
    );

    let records: Vec<_> = (0..100).map(|i| (key_of(i), value_of(i), None)).collect();
    produce(&bootstrap, topic, &[("batch.num.messages", "10")], &records);
    assert_eq!(
        consumer.fetch_watermarks(topic, 0, TIMEOUT).unwrap(),
        (0, 100),
        "after 100 records"
    );

    let mut before = TopicPartitionList::new();
    before
        .add_partition_offset(topic, 0, Offset::Offset(30))
        .unwrap();
    let options = AdminOptions::new().request_timeout(Some(TIMEOUT));
    let result = block_on(admin(&bootstrap).delete_records(&before, &options)).expect("delete");
    let element = result.find_partition(topic, 0).expect("partition 0");
    assert!(element.error().is_ok(), "{:?}", element.error());
    assert_eq!(element.offset(), Offset::Offset(30), "new low watermark");
    assert_eq!(
        consumer.fetch_watermarks(topic, 0, TIMEOUT).unwrap(),
        (30, 100),
        "after DeleteRecords before offset 30"
    );

    let read = consume(&bootstrap, topic, 30, 70);
    assert_eq!(read[0].0, 30, "first readable offset");
    assert!(read[0].2 == records[30].1, "record 30 intact");
}
