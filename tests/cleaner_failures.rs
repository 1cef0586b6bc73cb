//! A partition whose segment the log cleaner cannot read (a flipped byte, so a batch's
//! CRC fails) is marked uncleanable once, with the reason in the broker's log, and served
//! as it is; the other compacted partitions of the broker keep being cleaned.

mod common;

use std::time::Duration;

use common::client::create_replicated_topic;
use common::{wait_until, StromBroker};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};

const TIMEOUT: Duration = Duration::from_secs(60);

/// 2,000 records of 1 KiB, each key twice in a row, to partition 0 of `topic`.
fn produce(bootstrap: &str, topic: &str) {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .create()
        .expect("producer");
    let value = vec![b'v'; 1000];
    let keys: Vec<String> = (0..2000).map(|i| format!("key-{:05}", i / 2)).collect();
    let sends: Vec<_> = keys
        .iter()
        .map(|key| {
            let record = FutureRecord::to(topic)
                .partition(0)
                .key(key)
                .payload(&value);
            producer
                .send_result(record)
                .unwrap_or_else(|(e, _)| panic!("enqueue: {e}"))
        })
        .collect();
    for sent in sends {
        common::client::block_on(sent)
            .expect("report")
            .expect("delivered");
    }
}

#[test]
fn a_damaged_partition_is_marked_uncleanable_and_the_others_are_still_cleaned() {
    let metrics = format!(
        "127.0.0.1:{}",
        strom_testkit::local_cluster::free_port().unwrap()
    );
    let mut broker = StromBroker::start(&[
        &format!("strom.metrics.listener={metrics}"),
        "log.cleaner.backoff.ms=100",
    ]);
    let bootstrap = broker.bootstrap();
    // Cleanable once their records are 10 s old: the damage is done by then.
    let configs = [
        ("cleanup.policy", "compact"),
        ("segment.bytes", "65536"),
        ("min.compaction.lag.ms", "10000"),
    ];
    for topic in ["damaged", "healthy"] {
        create_replicated_topic(&bootstrap, topic, 1, 1, &configs);
        produce(&bootstrap, topic);
    }
    let segment = broker
        .log_dir()
        .join("damaged-0")
        .join("00000000000000000000.log");
    let mut bytes = std::fs::read(&segment).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&segment, &bytes).unwrap();
    assert_eq!(
        common::metric(&metrics, "strom_log_cleaner_cleanings_total"),
        0,
        "cleaned too early"
    );

    assert!(
        wait_until(TIMEOUT, || common::metric(
            &metrics,
            "strom_log_cleaner_uncleanable_total"
        ) == 1
            && common::metric(&metrics, "strom_log_cleaner_cleanings_total")
                >= 1),
        "{:?}",
        strom_testkit::local_cluster::read_metrics(&metrics)
    );
    // Another cleaning of the healthy partition passes (new writes make it dirty again)
    // and the damaged one is not tried again.
    let cleanings = common::metric(&metrics, "strom_log_cleaner_cleanings_total");
    produce(&bootstrap, "healthy");
    assert!(
        wait_until(TIMEOUT, || common::metric(
            &metrics,
            "strom_log_cleaner_cleanings_total"
        ) > cleanings),
        "the healthy partition was not cleaned again"
    );
    assert_eq!(
        common::metric(&metrics, "strom_log_cleaner_uncleanable_total"),
        1
    );
    assert!(broker.terminate().success());
    let log = broker.stderr();
    assert!(
        log.contains("marking the partition uncleanable") && log.contains("damaged-0"),
        "the broker's log does not name the partition and the reason"
    );
}
