//! `strom dump-log` on the files a broker wrote, as `kafka-dump-log.sh` prints them:
//! each batch of a segment with its offsets, producer fields, codec, CRC and validity;
//! each record with `--deep-iteration`, its key and value with `--print-data-log`; a
//! `__consumer_offsets` commit as Kafka's JSON with `--offsets-decoder`; the entries of
//! the indexes and the producer state of a snapshot.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::client::{block_on, create_topic};
use common::{stdout_of, strom, wait_until, StromBroker};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

const TOPIC: &str = "dumped";
const GROUP: &str = "dump-log-group";

fn produce(bootstrap: &str) {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .set("compression.type", "lz4")
        .set("linger.ms", "50")
        .create()
        .expect("producer");
    let deliveries: Vec<_> = (0..10)
        .map(|i| {
            let key = format!("key-{i}");
            let value = format!("value-{i}");
            producer
                .send_result(
                    FutureRecord::to(TOPIC)
                        .partition(0)
                        .key(&key)
                        .payload(&value),
                )
                .unwrap_or_else(|(e, _)| panic!("enqueue: {e}"))
        })
        .collect();
    for delivery in deliveries {
        block_on(delivery).expect("report").expect("delivered");
    }
    producer.flush(Duration::from_secs(10)).unwrap();
}

fn commit(bootstrap: &str) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", GROUP)
        .create()
        .expect("consumer");
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset(TOPIC, 0, Offset::Offset(7))
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(30), || consumer
            .commit(&offsets, CommitMode::Sync)
            .is_ok()),
        "commit"
    );
}

fn dump(args: &[&str]) -> String {
    let mut all = vec!["dump-log"];
    all.extend_from_slice(args);
    stdout_of(&strom(&all))
}

/// The first segment file with `extension` under `dir`.
fn file(dir: &Path, extension: &str) -> String {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .collect();
    files.sort();
    files[0].display().to_string()
}

#[test]
fn segments_indexes_snapshots_and_offsets_commits_print_as_kafka_prints_them() {
    let mut broker = StromBroker::start(&[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, TOPIC, 1);
    produce(&bootstrap);
    commit(&bootstrap);
    // A clean shutdown writes the indexes (kept in memory until a flush) and a snapshot.
    assert!(broker.terminate().success());
    let partition = broker.log_dir().join(format!("{TOPIC}-0"));
    let segment = file(&partition, "log");

    let shallow = dump(&["--files", &segment]);
    assert!(
        shallow.starts_with(&format!("Dumping {segment}\nLog starting offset: 0\n")),
        "{shallow}"
    );
    let first_batch = shallow.lines().nth(2).expect("a batch line");
    for part in [
        "baseOffset: 0 lastOffset: ",
        " baseSequence: 0 ",
        " producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: ",
        " magic: 2 compresscodec: lz4 crc: ",
        " isvalid: true",
    ] {
        assert!(first_batch.contains(part), "{part:?} not in {first_batch}");
    }
    assert!(
        !shallow.contains("| offset:"),
        "records only with --deep-iteration"
    );

    let deep = dump(&["--files", &segment, "--print-data-log"]);
    let records: Vec<&str> = deep
        .lines()
        .filter(|l| l.starts_with("| offset: "))
        .collect();
    assert_eq!(records.len(), 10, "{deep}");
    assert!(
        records[3].starts_with("| offset: 3 CreateTime: "),
        "{}",
        records[3]
    );
    assert!(
        records[3].ends_with(
            " keySize: 5 valueSize: 7 sequence: 3 headerKeys: [] key: key-3 payload: value-3"
        ),
        "{}",
        records[3]
    );

    let index = dump(&["--files", &file(&partition, "index")]);
    assert!(
        index
            .lines()
            .nth(1)
            .is_some_and(|l| l == "offset: 0 position: 0"),
        "{index}"
    );
    let time_index = dump(&["--files", &file(&partition, "timeindex")]);
    assert!(
        time_index
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("timestamp: ") && l.ends_with(" offset: 0")),
        "{time_index}"
    );

    let snapshot = dump(&["--files", &file(&partition, "snapshot")]);
    let producer = snapshot.lines().nth(1).expect("a producer");
    assert!(
        producer.starts_with("producerId: ")
            && producer.contains(
                " producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
            )
            && producer.contains(" lastSequence: 9 lastOffset: 9 "),
        "{snapshot}"
    );

    let offsets_partition = std::fs::read_dir(broker.log_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("__consumer_offsets-")
        })
        .find(|p| std::fs::metadata(p.join("00000000000000000000.log")).is_ok_and(|m| m.len() > 0))
        .expect("the group's partition of __consumer_offsets");
    let offsets = dump(&[
        "--files",
        &file(&offsets_partition, "log"),
        "--offsets-decoder",
    ]);
    assert!(
        offsets.contains(&format!(
            r#"key: {{"type":"1","data":{{"group":"{GROUP}","topic":"{TOPIC}","partition":0}}}} payload: {{"version":"3","data":{{"offset":7,"leaderEpoch":-1,"metadata":"","commitTimestamp":"#
        )),
        "{offsets}"
    );

    let refused = strom(&["dump-log", "--files", &segment, "--transaction-log-decoder"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("not supported"));
}
