//! A full disk: appends fail with KAFKA_STORAGE_ERROR, the broker keeps serving, nothing
//! acknowledged before is lost, and producing works again once space is freed; a
//! cleaning that meets it is abandoned, the old segments kept, and done once space is
//! freed.
//!
//! The log directory is a real 4 MiB tmpfs (the test runs as root, as CI does).

mod common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::StromBroker;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
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

/// A compacted topic whose cleaning meets a full disk: the cleaning is abandoned (counted
/// on `/metrics`), the original segments stay and are served whole, and once space is
/// freed the next cleaning completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cleaning_that_meets_a_full_disk_is_abandoned_and_done_once_space_is_freed() {
    let disk = Tmpfs::mount("16m");
    let metrics = format!(
        "127.0.0.1:{}",
        strom_testkit::local_cluster::free_port().unwrap()
    );
    let broker = StromBroker::start(&[
        &format!("log.dirs={}", disk.path().display()),
        &format!("strom.metrics.listener={metrics}"),
        "log.cleaner.backoff.ms=100",
    ]);
    let bootstrap = broker.bootstrap();
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    // Cleanable only once its records are 15 s old: the disk is full by then. (Changing
    // the config later would not do: on a full disk the metadata log takes no change.)
    let topic = NewTopic::new("compacted", 1, TopicReplication::Fixed(1))
        .set("cleanup.policy", "compact")
        .set("segment.bytes", "1048576")
        .set("min.compaction.lag.ms", "15000");
    let created = admin
        .create_topics(&[topic], &AdminOptions::new())
        .await
        .unwrap();
    assert!(created.iter().all(|r| r.is_ok()), "{created:?}");

    // Each key twice in a row, so every segment keeps half of its bytes when cleaned.
    let producer = producer(&bootstrap);
    let value = vec![b'v'; 1000];
    let keys: Vec<String> = (0..6000).map(|i| format!("key-{:05}", i / 2)).collect();
    let sends: Vec<_> = keys
        .iter()
        .map(|key| {
            let record = FutureRecord::to("compacted")
                .partition(0)
                .key(key)
                .payload(&value);
            producer.send(record, Duration::from_secs(10))
        })
        .collect();
    for sent in sends {
        sent.await.unwrap();
    }
    let written = read_keys(&bootstrap, "compacted");
    assert_eq!(written.len(), 6000);

    let ballast = disk.path().join("ballast");
    fill(&ballast, 256 << 10);
    assert_eq!(
        common::metric(&metrics, "strom_log_cleaner_cleanings_total"),
        0,
        "cleaned too early"
    );
    assert!(
        common::wait_until(Duration::from_secs(60), || common::metric(
            &metrics,
            "strom_log_cleaner_abandoned_total"
        ) > 0),
        "no cleaning was abandoned: {:?}",
        strom_testkit::local_cluster::read_metrics(&metrics)
    );
    assert_eq!(
        common::metric(&metrics, "strom_log_cleaner_cleanings_total"),
        0
    );
    assert_eq!(
        read_keys(&bootstrap, "compacted"),
        written,
        "the old segments are served whole"
    );

    std::fs::remove_file(&ballast).unwrap();
    assert!(
        common::wait_until(Duration::from_secs(60), || common::metric(
            &metrics,
            "strom_log_cleaner_cleanings_total"
        ) > 0),
        "no cleaning completed once space was freed"
    );
    let kept = read_keys(&bootstrap, "compacted");
    let (held, kept_set): (HashSet<_>, HashSet<_>) =
        (written.iter().collect(), kept.iter().collect());
    assert!(kept.len() < written.len(), "{} records kept", kept.len());
    assert!(
        kept.iter().all(|r| held.contains(r)),
        "a record moved or appeared"
    );
    assert!(
        written
            .iter()
            .skip(1)
            .step_by(2)
            .all(|r| kept_set.contains(r)),
        "a key lost its latest record"
    );
}

/// Fills the file system holding `path` with a file there until less than `free` bytes
/// are left.
fn fill(path: &Path, free: u64) {
    let mount = path.parent().expect("a file in a directory");
    let available = || {
        let out = Command::new("df")
            .args(["--output=avail", "-B1"])
            .arg(mount)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .nth(1)
            .and_then(|l| l.trim().parse::<u64>().ok())
            .expect("df's available bytes")
    };
    let size = available().saturating_sub(free);
    std::fs::write(path, vec![0u8; size as usize]).unwrap();
}

/// The (offset, key) of every record of partition 0 of `topic`, from its start to its
/// high watermark.
fn read_keys(bootstrap: &str, topic: &str) -> Vec<(i64, String)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "full-disk-cleaning")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let (_, high) = consumer
        .fetch_watermarks(topic, 0, Duration::from_secs(10))
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, rdkafka::Offset::Beginning)
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let mut seen = Vec::new();
    let mut next = 0;
    while next < high {
        let m = consumer
            .poll(Duration::from_secs(10))
            .expect("records before the high watermark")
            .unwrap();
        seen.push((
            m.offset(),
            String::from_utf8(m.key().unwrap().to_vec()).unwrap(),
        ));
        next = m.offset() + 1;
    }
    seen
}
