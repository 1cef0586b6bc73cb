//! A full disk: appends fail with KAFKA_STORAGE_ERROR, the broker keeps serving, nothing
//! acknowledged before is lost, and producing works again once space is freed.
//!
//! The log directory is a real 4 MiB tmpfs (the test runs as root, as CI does).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::StromBroker;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;
use rdkafka::{Message, TopicPartitionList};

/// A tmpfs mount that is unmounted when dropped (before its directory is removed).
struct Tmpfs {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mnt");
        std::fs::create_dir(&path).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&path)
            .status()
            .expect("run mount");
        assert!(status.success(), "mounting a tmpfs needs root");
        Self { path, _dir: dir }
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
    }
}

fn producer(bootstrap: &str) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("message.send.max.retries", "0")
        .set("message.timeout.ms", "10000")
        .set("linger.ms", "0")
        .create()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_disk_gives_storage_error_and_keeps_acknowledged_records() {
    let disk = Tmpfs::mount("4m");
    let broker = StromBroker::start(&[
        &format!("log.dirs={}", disk.path().display()),
        "log.segment.bytes=1048576",
    ]);
    let producer = producer(&broker.bootstrap());
    let value = vec![b'x'; 64 * 1024];
    let mut acknowledged = Vec::new();
    let mut storage_error = false;
    for i in 0..200 {
        let key = format!("k{i}");
        let record = FutureRecord::to("fill").key(&key).payload(&value);
        match producer.send(record, Duration::from_secs(10)).await {
            Ok(delivery) => acknowledged.push((delivery.offset, key)),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::KafkaStorageError), _)) => {
                storage_error = true;
                break;
            }
            Err((e, _)) => panic!("unexpected produce error: {e}"),
        }
    }
    assert!(
        storage_error,
        "a 4 MiB disk must fill up within 200 x 64 KiB"
    );
    assert!(!acknowledged.is_empty());

    // Everything acknowledged before the disk filled is still there, in order.
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", "full-disk-check")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("fill", 0, rdkafka::Offset::Beginning)
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let mut seen = Vec::new();
    while seen.len() < acknowledged.len() {
        if let Some(m) = consumer.poll(Duration::from_secs(10)) {
            let m = m.unwrap();
            seen.push((
                m.offset(),
                String::from_utf8(m.key().unwrap().to_vec()).unwrap(),
            ));
        } else {
            panic!(
                "timed out reading back {} records, got {}",
                acknowledged.len(),
                seen.len()
            );
        }
    }
    assert_eq!(seen, acknowledged);

    // Deleting the topic frees the disk; the broker accepts writes again.
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .create()
        .unwrap();
    let deleted = admin
        .delete_topics(&["fill"], &AdminOptions::new())
        .await
        .unwrap();
    assert!(deleted.iter().all(|r| r.is_ok()), "{deleted:?}");
    let after = producer
        .send(
            FutureRecord::to("after").key("k").payload("v"),
            Duration::from_secs(10),
        )
        .await;
    assert!(after.is_ok(), "{after:?}");
}

#[test]
fn no_acks_producer_does_not_stall_on_a_full_disk() {
    let disk = Tmpfs::mount("2m");
    let broker = StromBroker::start(&[&format!("log.dirs={}", disk.path().display())]);
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("acks", "0")
        .create()
        .unwrap();
    let value = vec![b'y'; 16 * 1024];
    for _ in 0..400 {
        let mut record = BaseRecord::<(), _>::to("fill0").payload(&value);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((_, r)) => {
                    producer.poll(Duration::from_millis(10));
                    record = r;
                }
            }
        }
    }
    producer
        .flush(Timeout::After(Duration::from_secs(30)))
        .unwrap();
    // The broker is still up and answers metadata requests.
    let metadata = producer
        .client()
        .fetch_metadata(Some("fill0"), Duration::from_secs(10))
        .unwrap();
    assert_eq!(metadata.topics()[0].partitions().len(), 1);
}
