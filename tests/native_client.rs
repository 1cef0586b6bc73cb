//! The native load generator (`--client native`) against a real strom broker: it produces
//! and consumes what librdkafka does, record for record and byte for byte, under every
//! codec; keys land where the Java client's partitioner puts them; a group of native
//! consumers splits a topic and commits; and a broker that answers with a corrupt batch,
//! a truncated answer or a partition it was not asked for ends the run with a message,
//! never a hang or a panic. The misbehaving broker is a real strom broker behind a proxy
//! that alters one kind of answer.

mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use common::client::create_topic;
use common::{stdout_of, strom, StromBroker};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{ApiKey, ProduceResponse, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

const RECORDS: u64 = 20_000;

fn produce(bootstrap: &str, topic: &str, client: &str, extra: &[&str]) -> String {
    let records = RECORDS.to_string();
    let mut args = vec![
        "producer-perf-test",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--num-records",
        &records,
        "--record-size",
        "100",
        "--throughput",
        "-1",
        "--client",
        client,
    ];
    args.extend_from_slice(extra);
    stdout_of(&strom(&args))
}

/// consumer-perf-test's output, reading the `RECORDS` records of `topic` in `group`.
fn consume_output(
    bootstrap: &str,
    topic: &str,
    client: &str,
    group: &str,
    extra: &[&str],
) -> String {
    let records = RECORDS.to_string();
    let mut args = vec![
        "consumer-perf-test",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--messages",
        &records,
        "--group",
        group,
        "--timeout",
        "20000",
        "--hide-header",
        "--client",
        client,
    ];
    args.extend_from_slice(extra);
    stdout_of(&strom(&args))
}

/// consumer-perf-test's summary row: (MB consumed, records consumed).
fn consume(bootstrap: &str, topic: &str, client: &str, group: &str, extra: &[&str]) -> (f64, u64) {
    let stdout = consume_output(bootstrap, topic, client, group, extra);
    let row = stdout.lines().last().expect("a summary row");
    let fields: Vec<&str> = row.split(", ").collect();
    assert_eq!(fields.len(), 10, "Kafka's summary row: {row}");
    (fields[2].parse().unwrap(), fields[4].parse().unwrap())
}

/// The log's end offsets, summed over partitions: what strom itself holds.
fn records_in_log(bootstrap: &str, topic: &str, partitions: i32) -> i64 {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    (0..partitions)
        .map(|p| {
            let (low, high) = consumer
                .fetch_watermarks(topic, p, Duration::from_secs(10))
                .unwrap();
            high - low
        })
        .sum()
}

#[test]
fn both_clients_move_the_same_records_and_bytes_under_every_codec() {
    let broker = StromBroker::start(&["group.initial.rebalance.delay.ms=0"]);
    let bootstrap = broker.bootstrap();
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
        for producer in ["native", "librdkafka"] {
            let topic = format!("fidelity-{codec}-{producer}");
            create_topic(&bootstrap, &topic, 3);
            let compression = format!("compression.type={codec}");
            let out = produce(
                &bootstrap,
                &topic,
                producer,
                &["--producer-props", &compression],
            );
            let last = out.lines().last().unwrap();
            assert!(
                last.starts_with(&format!("{RECORDS} records sent, ")),
                "{producer}/{codec}: {last}"
            );
            assert_eq!(
                records_in_log(&bootstrap, &topic, 3),
                RECORDS as i64,
                "{producer}/{codec}"
            );
            let by_native = consume(&bootstrap, &topic, "native", &format!("{topic}-n"), &[]);
            let by_librdkafka =
                consume(&bootstrap, &topic, "librdkafka", &format!("{topic}-l"), &[]);
            assert_eq!(by_native.1, RECORDS, "{producer}/{codec}");
            assert_eq!(by_native, by_librdkafka, "{producer}/{codec}");
            let expected_mb = (RECORDS * 100) as f64 / (1024.0 * 1024.0);
            assert!((by_native.0 - expected_mb).abs() < 1e-3, "{by_native:?}");
        }
    }
}

/// The `--print-metrics` block of a tool's output: metric name → value.
fn printed_metrics(stdout: &str) -> HashMap<String, f64> {
    let mut lines = stdout.lines().skip_while(|l| !l.starts_with("Metric Name"));
    assert!(lines.next().is_some(), "no metrics block in:\n{stdout}");
    lines
        .map_while(|l| l.split_once(" : "))
        .map(|(name, value)| (name.trim().to_string(), value.parse().expect("a number")))
        .collect()
}

#[test]
fn native_print_metrics_count_what_the_run_moved_under_the_java_clients_names() {
    let broker = StromBroker::start(&[]);
    let b = broker.bootstrap();
    create_topic(&b, "metrics", 2);
    let produced = printed_metrics(&produce(&b, "metrics", "native", &["--print-metrics"]));
    let producer = |name: &str| {
        produced[&format!("producer-metrics:{name}:{{client-id=perf-producer-client}}")]
    };
    assert_eq!(producer("record-send-total"), RECORDS as f64);
    assert_eq!(producer("record-error-total"), 0.0);
    assert_eq!(producer("record-retry-total"), 0.0);
    assert!(producer("batch-size-avg") > 0.0 && producer("batch-size-max") <= 16_384.0 + 1024.0);
    assert!(producer("request-latency-max") >= producer("request-latency-avg"));
    assert!(producer("outgoing-byte-total") > (RECORDS * 100) as f64);
    assert!(
        produced.contains_key(
            "producer-node-metrics:request-total:{client-id=perf-producer-client, node-id=node-1}"
        ),
        "{produced:?}"
    );
    assert_eq!(records_in_log(&b, "metrics", 2), RECORDS as i64);

    let consumed = printed_metrics(&consume_output(
        &b,
        "metrics",
        "native",
        "metrics-group",
        &["--print-metrics"],
    ));
    let fetches = |name: &str| {
        consumed
            [&format!("consumer-fetch-manager-metrics:{name}:{{client-id=perf-consumer-client}}")]
    };
    assert_eq!(fetches("records-consumed-total"), RECORDS as f64);
    assert!(fetches("fetch-total") >= 1.0);
    assert!(fetches("bytes-consumed-total") > (RECORDS * 100) as f64);
    assert!(fetches("fetch-size-max") >= fetches("fetch-size-avg"));
}

/// The average batch size the native producer reports for a throttled run of 100-byte
/// records to a new 6-partition topic.
fn throttled_batch_size(topic: &str, records: &str, throughput: &str, props: &[&str]) -> f64 {
    let broker = StromBroker::start(&[]);
    let b = broker.bootstrap();
    create_topic(&b, topic, 6);
    let mut args = vec![
        "producer-perf-test",
        "--bootstrap-server",
        &b,
        "--topic",
        topic,
        "--num-records",
        records,
        "--record-size",
        "100",
        "--throughput",
        throughput,
        "--client",
        "native",
        "--print-metrics",
        "--producer-props",
    ];
    args.extend_from_slice(props);
    let metrics = printed_metrics(&stdout_of(&strom(&args)));
    metrics["producer-metrics:batch-size-avg:{client-id=perf-producer-client}"]
}

#[test]
fn throttled_records_without_keys_fill_their_batches() {
    // Batches of about eight 100-byte records, full in 2 ms, long before the 5 ms linger
    // ends: a record that does not fit must open the next sticky partition's batch
    // (KIP-794), not a batch of its own on the partition just sealed, which would linger
    // out with that one record before the sticky partition came back to it.
    let batch_size = throttled_batch_size("sticky", "2000", "4000", &["batch.size=1000"]);
    assert!(
        batch_size > 800.0,
        "batches of {batch_size} bytes on average"
    );
}

/// A rate the tool cannot reach leaves every record behind its schedule: its batches must
/// still fill, lingering from when they open. Lingering from the records' past due times
/// sealed every record alone (258-byte batches, a fifteenth of the unthrottled rate), and a
/// run that fell behind once never caught up.
#[test]
fn a_throttled_run_behind_its_schedule_fills_its_batches() {
    let batch_size = throttled_batch_size("behind", "100000", "100000000", &["acks=1"]);
    assert!(
        batch_size > 4_000.0,
        "batches of {batch_size} bytes on average"
    );
}

#[test]
fn keyed_records_land_where_the_java_partitioner_puts_them() {
    let broker = StromBroker::start(&[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "keyed", 5);
    produce(&bootstrap, "keyed", "native", &["--record-key-range", "50"]);
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "keyed-check")
        .create()
        .unwrap();
    let mut assignment = TopicPartitionList::new();
    for p in 0..5 {
        assignment
            .add_partition_offset("keyed", p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let mut seen = 0u64;
    let mut keys: HashMap<Vec<u8>, i32> = HashMap::new();
    while seen < RECORDS {
        let message = consumer
            .poll(Duration::from_secs(10))
            .expect("records within 10 s")
            .unwrap();
        let key = message.key().expect("every record has a key").to_vec();
        let expected = (strom_client::partitioner::murmur2(&key) & 0x7fff_ffff) % 5;
        assert_eq!(message.partition(), expected as i32, "key {key:?}");
        keys.insert(key, message.partition());
        seen += 1;
    }
    assert_eq!(keys.len(), 50);
}

#[test]
fn a_group_of_native_consumers_splits_the_topic_and_commits_its_offsets() {
    let broker = StromBroker::start(&["group.initial.rebalance.delay.ms=0"]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "grouped", 6);
    produce(&bootstrap, "grouped", "native", &[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let (_, records) = consume(
        &bootstrap,
        "grouped",
        "native",
        "split",
        &["--threads", "3", "--json", json.to_str().unwrap()],
    );
    assert_eq!(records, RECORDS);
    let report = std::fs::read_to_string(&json).unwrap();
    assert!(report.contains("\"client\": \"native\""), "{report}");
    // Everything was committed: the same group finds nothing left to read.
    let output = strom(&[
        "consumer-perf-test",
        "--bootstrap-server",
        &bootstrap,
        "--topic",
        "grouped",
        "--messages",
        "1",
        "--group",
        "split",
        "--timeout",
        "3000",
        "--hide-header",
        "--client",
        "native",
    ]);
    let stdout = stdout_of(&output);
    assert!(
        stdout.contains("Exiting before consuming the expected number of messages"),
        "{stdout}"
    );
    let row = stdout.lines().last().unwrap();
    assert_eq!(row.split(", ").nth(4), Some("0"), "{row}");
}

#[test]
fn native_end_to_end_latency_reads_back_every_record() {
    let broker = StromBroker::start(&[]);
    let bootstrap = broker.bootstrap();
    let stdout = stdout_of(&strom(&[
        "e2e-latency",
        "--bootstrap-server",
        &bootstrap,
        "--topic",
        "e2e-native",
        "--num-records",
        "300",
        "--producer-acks",
        "all",
        "--record-size",
        "64",
        "--record-key-size",
        "4",
        "--num-headers",
        "2",
        "--client",
        "native",
    ]));
    assert!(stdout.contains("Avg latency: "), "{stdout}");
    assert!(stdout.contains("Percentiles: 50th = "), "{stdout}");
}

#[test]
fn a_native_producer_whose_broker_dies_ends_at_the_delivery_timeout() {
    let mut broker = StromBroker::start(&[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "orphaned", 1);
    let child = Command::new(env!("CARGO_BIN_EXE_strom"))
        .args([
            "producer-perf-test",
            "--bootstrap-server",
            &bootstrap,
            "--topic",
            "orphaned",
            "--num-records",
            "5000",
            "--record-size",
            "10",
            "--throughput",
            "1000",
            "--client",
            "native",
            "--producer-props",
            "acks=1",
            "delivery.timeout.ms=2000",
            "request.timeout.ms=1000",
            "retry.backoff.ms=50",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Some records are acknowledged before the broker goes.
    assert!(common::wait_until(
        Duration::from_secs(30),
        || records_in_log(&bootstrap, "orphaned", 1) > 0
    ));
    broker.kill9();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let last = stdout.lines().last().unwrap_or_default();
    let sent: u64 = last.split(' ').next().unwrap().parse().unwrap();
    assert!(sent > 0 && sent < 5_000, "{last}");
    assert!(stderr.contains("delivery failed"), "{stderr}");
}

/// How the proxy alters the broker's answers.
#[derive(Clone, Copy, Debug)]
enum Tamper {
    /// Flips a byte inside the records of every Fetch answer that has some.
    CorruptFetchedRecords,
    /// Cuts the last bytes off each Fetch answer (its size prefix still matches).
    TruncateFetch,
    /// Adds a partition nobody asked about to each Produce answer.
    ProduceForeignPartition,
}

/// A proxy to `upstream` on a port of its own, altering answers per `tamper`.
fn tampering_proxy(upstream: String, tamper: Tamper) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let public = format!("127.0.0.1:{}", address.port());
    let advertised = public.clone();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let server = TcpStream::connect(&upstream).unwrap();
            let requests: Arc<Mutex<Vec<(i16, i16)>>> = Arc::default();
            let (mut c_in, mut s_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            let seen = Arc::clone(&requests);
            std::thread::spawn(move || {
                while let Some(frame) = read_frame(&mut c_in) {
                    let key = i16::from_be_bytes([frame[0], frame[1]]);
                    let version = i16::from_be_bytes([frame[2], frame[3]]);
                    seen.lock().unwrap().push((key, version));
                    if s_out
                        .write_all(&(frame.len() as i32).to_be_bytes())
                        .is_err()
                        || s_out.write_all(&frame).is_err()
                    {
                        return;
                    }
                }
            });
            let (mut s_in, mut c_out) = (server, client);
            let upstream_port = upstream.rsplit(':').next().unwrap().to_string();
            let advertised = advertised.clone();
            std::thread::spawn(move || {
                while let Some(frame) = read_frame(&mut s_in) {
                    let (key, version) = requests.lock().unwrap().remove(0);
                    let frame = alter(frame, key, version, tamper, &upstream_port, &advertised);
                    if c_out
                        .write_all(&(frame.len() as i32).to_be_bytes())
                        .is_err()
                        || c_out.write_all(&frame).is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    public
}

fn read_frame(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).ok()?;
    let mut frame = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut frame).ok()?;
    Some(frame)
}

/// One answer, altered: Metadata always points clients back at the proxy; the rest per
/// `tamper`.
fn alter(
    frame: Vec<u8>,
    key: i16,
    version: i16,
    tamper: Tamper,
    port: &str,
    proxy: &str,
) -> Vec<u8> {
    let api = ApiKey::try_from(key).unwrap();
    let header_version = api.response_header_version(version);
    let mut bytes = Bytes::from(frame.clone());
    let mut header = || ResponseHeader::decode(&mut bytes, header_version).unwrap();
    match (api, tamper) {
        (ApiKey::Metadata, _) => {
            let header = header();
            let mut response =
                kafka_protocol::messages::MetadataResponse::decode(&mut bytes, version).unwrap();
            let proxy_port: i32 = proxy.rsplit(':').next().unwrap().parse().unwrap();
            for broker in &mut response.brokers {
                assert_eq!(broker.port.to_string(), port);
                broker.port = proxy_port;
            }
            encode(&header, header_version, &response, version)
        }
        (ApiKey::FindCoordinator, _) => {
            let header = header();
            let mut response =
                kafka_protocol::messages::FindCoordinatorResponse::decode(&mut bytes, version)
                    .unwrap();
            response.port = proxy.rsplit(':').next().unwrap().parse().unwrap();
            for c in &mut response.coordinators {
                c.port = response.port;
            }
            encode(&header, header_version, &response, version)
        }
        (ApiKey::Fetch, Tamper::CorruptFetchedRecords) if frame.len() > 200 => {
            let mut frame = frame;
            let at = frame.len() - 20;
            frame[at] ^= 0xff;
            frame
        }
        (ApiKey::Fetch, Tamper::TruncateFetch) => frame[..frame.len() / 2].to_vec(),
        (ApiKey::Produce, Tamper::ProduceForeignPartition) => {
            let header = header();
            let mut response = ProduceResponse::decode(&mut bytes, version).unwrap();
            response.responses[0]
                .partition_responses
                .push(PartitionProduceResponse::default().with_index(99));
            encode(&header, header_version, &response, version)
        }
        _ => frame,
    }
}

fn encode<T: Encodable>(
    header: &ResponseHeader,
    header_version: i16,
    body: &T,
    version: i16,
) -> Vec<u8> {
    let mut out = BytesMut::new();
    header.encode(&mut out, header_version).unwrap();
    body.encode(&mut out, version).unwrap();
    out.to_vec()
}

/// Runs `args` against a broker that misbehaves per `tamper`; the run must fail with a
/// message containing `expected`, within the test's time (no hang).
fn fails_against(tamper: Tamper, args: &[&str], expected: &str) {
    let broker = StromBroker::start(&["group.initial.rebalance.delay.ms=0"]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "tampered", 1);
    produce(&bootstrap, "tampered", "librdkafka", &[]);
    let proxy = tampering_proxy(bootstrap, tamper);
    let mut full = vec![args[0], "--bootstrap-server", &proxy];
    full.extend_from_slice(&args[1..]);
    let output = strom(&full);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "{tamper:?} must fail the run: {stderr}"
    );
    assert!(stderr.contains(expected), "{tamper:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{tamper:?}: {stderr}");
}

const CONSUME: &[&str] = &[
    "consumer-perf-test",
    "--topic",
    "tampered",
    "--messages",
    "20000",
    "--timeout",
    "20000",
    "--client",
    "native",
];

#[test]
fn a_corrupt_batch_ends_the_run_naming_the_partition_and_offset() {
    fails_against(
        Tamper::CorruptFetchedRecords,
        CONSUME,
        "corrupt record batch at offset",
    );
}

#[test]
fn a_truncated_answer_ends_the_run_as_malformed() {
    fails_against(
        Tamper::TruncateFetch,
        CONSUME,
        "sent a malformed Fetch response",
    );
}

#[test]
fn an_answer_for_a_partition_not_asked_for_ends_the_run() {
    fails_against(
        Tamper::ProduceForeignPartition,
        &[
            "producer-perf-test",
            "--topic",
            "tampered",
            "--num-records",
            "1000",
            "--record-size",
            "10",
            "--throughput",
            "-1",
            "--client",
            "native",
        ],
        "tampered-99, which was not in the request",
    );
}
