//! What replication costs per produced batch, read from the brokers' counters
//! (`strom.metrics.listener`, `GET /metrics`) on a real three-node cluster: the partitions
//! a leader reads to answer its followers' fetches and the partitions the followers'
//! fetchers look up do not grow when idle partitions are added beside the written one
//! (issue 40; `strom bench partitions-idle` measures it at scale). The test asserts the
//! counters, never a time.

mod common;

use std::time::Duration;

use common::client::create_replicated_topic;
use common::cluster::TestCluster;
use common::wait_until;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

const TIMEOUT: Duration = Duration::from_secs(60);
const RECORDS: usize = 200;
const IDLE_PARTITIONS: i32 = 200;
/// The counters of the work replication does for a batch.
const WORK: [&str; 2] = [
    "strom_replica_fetch_partitions_read_total",
    "strom_fetcher_partitions_planned_total",
];
const APPENDS: &str = "strom_produce_appends_total";

/// One counter summed over every broker of `cluster`.
fn total(cluster: &TestCluster, counters: &[&str]) -> u64 {
    cluster
        .nodes
        .iter()
        .map(|n| n.metrics().expect("the broker's metrics"))
        .map(|m| counters.iter().map(|c| m[*c]).sum::<u64>())
        .sum()
}

/// Every partition has a leader and its whole replica set in the ISR.
fn settled(cluster: &TestCluster) -> bool {
    let metadata = TestCluster::metadata(&cluster.nodes[0].address());
    metadata
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .all(|p| p.leader_id.0 >= 0 && p.isr_nodes.len() == p.replica_nodes.len())
}

/// Waits (up to 10 s) until replication has nothing left to do: the work counters stand
/// still over a `replica.fetch.wait.max.ms` round of every fetcher. A broker whose idle
/// fetches still read partitions never gets there, and its idle work then counts in
/// what the batches cost.
fn wait_until_quiet(cluster: &TestCluster) {
    let mut last = total(cluster, &WORK);
    wait_until(Duration::from_secs(10), || {
        std::thread::sleep(Duration::from_millis(600));
        let now = total(cluster, &WORK);
        std::mem::replace(&mut last, now) == now
    });
}

/// Produces `RECORDS` records to `topic` one at a time (one batch each, acks=all) and
/// returns the replication work per appended batch.
fn work_per_batch(cluster: &TestCluster, topic: &str) -> f64 {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap())
        .set("acks", "all")
        .set("linger.ms", "0")
        .create()
        .expect("producer");
    let (work, appends) = (total(cluster, &WORK), total(cluster, &[APPENDS]));
    for i in 0..RECORDS {
        let value = format!("record {i}");
        producer
            .send(BaseRecord::<(), _>::to(topic).payload(&value))
            .expect("send");
        producer.flush(TIMEOUT).expect("acknowledged");
    }
    let work = total(cluster, &WORK) - work;
    let appends = total(cluster, &[APPENDS]) - appends;
    assert_eq!(appends, RECORDS as u64, "one append per record sent alone");
    eprintln!("{topic}: {work} partitions read or looked up for {appends} batches");
    work as f64 / appends as f64
}

#[test]
fn replication_work_per_produced_batch_does_not_grow_with_idle_partitions() {
    let cluster = TestCluster::combined(3, &[]);
    let bootstrap = cluster.bootstrap();
    create_replicated_topic(&bootstrap, "written", 1, 3, &[]);
    assert!(wait_until(TIMEOUT, || settled(&cluster)), "ISR never whole");
    wait_until_quiet(&cluster);
    let alone = work_per_batch(&cluster, "written");

    create_replicated_topic(&bootstrap, "idle", IDLE_PARTITIONS, 3, &[]);
    assert!(
        wait_until(TIMEOUT, || settled(&cluster)),
        "ISRs never whole"
    );
    wait_until_quiet(&cluster);
    let beside_idle = work_per_batch(&cluster, "written");

    // Reading every partition a follower shares with its leader would be some hundred
    // partitions per batch here; what changed is the one written partition on each
    // side of two followers.
    assert!(
        beside_idle <= alone * 1.5 + 2.0,
        "partitions read and looked up per batch: {alone:.1} alone, {beside_idle:.1} beside {IDLE_PARTITIONS} idle partitions"
    );
}
