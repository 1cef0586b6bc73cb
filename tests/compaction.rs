//! Log compaction on a replicated partition: every replica cleans its own log, and a
//! consumer reading the partition from its start sees, from whichever replica leads, the
//! latest record of each key at its own offset — through a leader killed with SIGKILL
//! while its cleaner writes a cleaned segment, a follower that was paused and then
//! fetches over ranges the other replica cleaned, and a restarted replica that recovers,
//! truncates and catches up.

mod common;

use std::time::Duration;

use common::client::{block_on, create_replicated_topic};
use common::cluster::TestCluster;
use common::raw::{topic_name, Conn};
use common::wait_until;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse};
use kafka_protocol::records::RecordBatchDecoder;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};

const TIMEOUT: Duration = Duration::from_secs(60);
const TOPIC: &str = "compacted";
const WRITES: usize = 1005;
const KEYS: usize = 20;
const TOMBSTONED: usize = 5;

/// Quick failure detection (as the replication tests), and a cleaner that looks for dirty
/// logs every 100 ms and is throttled to 100 kB/s, so that a cleaning of the partition's
/// quarter megabyte takes seconds and a kill lands inside one.
const SETTINGS: &[&str] = &[
    "broker.session.timeout.ms=3000",
    "broker.heartbeat.interval.ms=500",
    "replica.lag.time.max.ms=3000",
    "log.cleaner.backoff.ms=100",
    "log.cleaner.io.max.bytes.per.second=100000",
];

/// A record as read back: offset, key, value (`None`: a tombstone).
type Read = (i64, String, Option<String>);

/// Every write in order: 1,005 updates over 20 keys, the last of 5 keys a tombstone,
/// then one record written after `segment.ms`.
fn writes() -> Vec<(String, Option<String>)> {
    let last: std::collections::HashMap<usize, usize> =
        (0..WRITES).map(|i| (i % KEYS, i)).collect();
    let mut out: Vec<_> = (0..WRITES)
        .map(|i| {
            let key = i % KEYS;
            let tombstone = key < TOMBSTONED && last[&key] == i;
            let value = format!("value-{i}-{}", "x".repeat(200));
            (format!("key-{key}"), (!tombstone).then_some(value))
        })
        .collect();
    out.push((
        "last".to_string(),
        Some("written after segment.ms".to_string()),
    ));
    out
}

/// What Apache Kafka serves once the sealed segments are cleaned: the latest record of
/// each key at its own offset (tombstones kept within `delete.retention.ms`), then the
/// last record.
fn expected(all: &[(String, Option<String>)]) -> Vec<Read> {
    let mut latest = std::collections::BTreeMap::new();
    for (offset, (key, _)) in all[..all.len() - 1].iter().enumerate() {
        latest.insert(key.clone(), offset);
    }
    let mut kept: Vec<usize> = latest.into_values().collect();
    kept.sort_unstable();
    kept.push(all.len() - 1);
    kept.into_iter()
        .map(|o| (o as i64, all[o].0.clone(), all[o].1.clone()))
        .collect()
}

fn produce(bootstrap: &str, all: &[(String, Option<String>)]) {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("compression.type", "none")
        .create()
        .expect("producer");
    let send = |(key, value): &(String, Option<String>)| {
        let mut record = FutureRecord::<String, String>::to(TOPIC)
            .partition(0)
            .key(key);
        if let Some(value) = value {
            record = record.payload(value);
        }
        producer
            .send_result(record)
            .unwrap_or_else(|(e, _)| panic!("enqueue: {e}"))
    };
    // In ten rounds a segment.ms apart, so the updates fill several segments.
    for round in all[..WRITES].chunks(WRITES / 10 + 1) {
        let deliveries: Vec<_> = round.iter().map(send).collect();
        for delivery in deliveries {
            block_on(delivery)
                .expect("delivery report")
                .unwrap_or_else(|(e, _)| panic!("not delivered: {e}"));
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    block_on(send(&all[WRITES]))
        .expect("delivery report")
        .unwrap_or_else(|(e, _)| panic!("not delivered: {e}"));
    producer.flush(TIMEOUT).expect("flushed");
}

/// The partition read from its start to its high watermark by Fetch requests to the
/// broker at `addr`, decoded as Kafka's clients decode them; `None` if that broker does
/// not lead it (a leader change under way) or answers with an error.
fn read_all(addr: &str) -> Option<Vec<Read>> {
    let mut conn = Conn::connect(addr);
    let mut read = Vec::new();
    let mut offset = 0;
    loop {
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_topics(vec![FetchTopic::default()
                .with_topic(topic_name(TOPIC))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(1 << 20)])]);
        let response: FetchResponse = conn.call(ApiKey::Fetch, 12, &request);
        let partition = &response.responses.first()?.partitions.first()?;
        if partition.error_code != 0 {
            return None;
        }
        if offset >= partition.high_watermark {
            return Some(read);
        }
        let mut records = partition.records.clone().filter(|r| !r.is_empty())?;
        let decoded = RecordBatchDecoder::decode(&mut records).ok()?;
        let text =
            |b: &Option<bytes::Bytes>| b.as_ref().map(|b| String::from_utf8_lossy(b).into_owned());
        for record in decoded.records {
            read.push((record.offset, text(&record.key)?, text(&record.value)));
            offset = record.offset + 1;
        }
        // An empty batch (a producer's last, kept by the cleaner) moves the position too.
        offset = offset.max(last_batch_end(partition.records.as_ref()?));
    }
}

/// The offset after the last batch of a Fetch response's records.
fn last_batch_end(records: &bytes::Bytes) -> i64 {
    strom_wire::RecordBatches::new(records)
        .filter_map(Result::ok)
        .last()
        .map_or(0, |(header, _)| header.next_offset())
}

/// Polls until reading the partition from the broker at `addr` gives `want`.
fn assert_serves(addr: &str, want: &[Read], when: &str) {
    let mut last = None;
    let served = wait_until(TIMEOUT, || {
        last = read_all(addr);
        last.as_deref() == Some(want)
    });
    let got = last.unwrap_or_default();
    let first_difference = got.iter().zip(want).position(|(g, w)| g != w);
    assert!(
        served,
        "{when}: read {} records, not Kafka's {}; first difference at {first_difference:?}: {:?}",
        got.len(),
        want.len(),
        first_difference.map(|i| (&got[i], &want[i]))
    );
}

/// The cleaner's files (`.cleaned`, `.swap`) in a partition directory.
fn cleaner_files(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .filter_map(Result::ok)
            .filter(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.ends_with(".cleaned") || name.ends_with(".swap")
            })
            .count()
    })
}

/// The partition as the first broker of `bootstrap` reports it.
fn partition_state(bootstrap: &str) -> Option<(i32, usize)> {
    let addr = bootstrap.split(',').next().expect("a broker");
    TestCluster::metadata(addr)
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == TOPIC))
        .map(|t| (t.partitions[0].leader_id.0, t.partitions[0].isr_nodes.len()))
}

/// The partition's leader as `bootstrap` reports it (-1: none).
fn leader(bootstrap: &str) -> i32 {
    partition_state(bootstrap).map_or(-1, |(leader, _)| leader)
}

fn isr_len(bootstrap: &str) -> usize {
    partition_state(bootstrap).map_or(0, |(_, isr)| isr)
}

/// Kills `victim` with SIGKILL and waits until another broker leads the partition, as
/// the broker at `ask` reports it; returns that broker's id.
fn kill_leader(cluster: &mut TestCluster, victim: i32, ask: &str) -> i32 {
    cluster.kill9(victim).unwrap();
    let mut new_leader = -1;
    assert!(
        wait_until(TIMEOUT, || {
            new_leader = leader(ask);
            new_leader >= 0 && new_leader != victim
        }),
        "a broker other than {victim} leads {TOPIC}"
    );
    new_leader
}

#[test]
fn every_replica_serves_the_latest_record_of_each_key_through_kills_pauses_and_restarts() {
    let mut cluster = TestCluster::split(1, 3, SETTINGS);
    let bootstrap = cluster.bootstrap();
    create_replicated_topic(
        &bootstrap,
        TOPIC,
        1,
        3,
        &[
            ("cleanup.policy", "compact"),
            ("segment.ms", "100"),
            ("min.cleanable.dirty.ratio", "0.01"),
            ("max.compaction.lag.ms", "100"),
            ("min.insync.replicas", "2"),
        ],
    );
    assert!(wait_until(TIMEOUT, || isr_len(&bootstrap) == 3), "ISR of 3");
    let brokers: Vec<i32> = cluster
        .nodes
        .iter()
        .filter(|n| n.port != 0)
        .map(|n| n.id)
        .collect();
    let addresses: std::collections::HashMap<i32, String> = brokers
        .iter()
        .map(|&b| (b, cluster.node(b).address()))
        .collect();
    let address = |id: i32| addresses[&id].clone();
    let first_leader = leader(&bootstrap);
    let others: Vec<i32> = brokers
        .iter()
        .copied()
        .filter(|&b| b != first_leader)
        .collect();
    let (paused, awake) = (others[0], others[1]);
    // One follower sleeps through the writes and the leader's cleaning.
    cluster.pause(paused, true).unwrap();
    let all = writes();
    let want = expected(&all);
    produce(&address(first_leader), &all);
    let partition_dir = cluster
        .node(first_leader)
        .dir
        .join("data")
        .join(format!("{TOPIC}-0"));
    assert!(
        wait_until(TIMEOUT, || cleaner_files(&partition_dir) > 0),
        "the first leader never began writing a cleaned segment"
    );

    // The leader dies while its cleaner writes; the follower that was awake leads, and
    // the paused one, resumed, fetches from it over what its cleaner removed.
    let awake_addr = address(awake);
    assert_eq!(kill_leader(&mut cluster, first_leader, &awake_addr), awake);
    assert!(
        cleaner_files(&partition_dir) > 0,
        "the kill landed after the cleaning: nothing left to recover"
    );
    cluster.pause(paused, false).unwrap();
    assert_serves(&awake_addr, &want, "the second leader");

    // The first leader comes back, undoes or finishes the interrupted cleaning, truncates
    // to the new leader's log and catches up.
    cluster.restart(first_leader).unwrap();
    assert!(
        wait_until(TIMEOUT, || isr_len(&awake_addr) == 3),
        "ISR of 3 again"
    );

    // Each of the other two replicas now leads in turn and serves the same records.
    let paused_addr = address(paused);
    let third = kill_leader(&mut cluster, awake, &paused_addr);
    assert_serves(&address(third), &want, "the third leader");
    let last_left = if third == paused {
        first_leader
    } else {
        paused
    };
    let last_addr = address(last_left);
    assert_eq!(kill_leader(&mut cluster, third, &last_addr), last_left);
    assert_serves(&last_addr, &want, "the last replica left");
}
