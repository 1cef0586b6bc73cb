//! A node without `process.roles` is a one-voter KRaft node: it formats its directory on
//! first start, keeps its metadata in `__cluster_metadata`, its committed offsets in
//! `__consumer_offsets` and gets producer ids from its controller; and a directory an
//! earlier release's single node wrote (`tests/fixtures/earlier-release-single-node`,
//! made by that release's `strom server`, kcat and `strom consumer-groups`) is upgraded
//! in place at its first start. A second node on a directory in use, and an earlier
//! release's directory with a damaged file, are refused with one line naming the
//! directory, and nothing is changed; a first start killed half way is finished by the
//! next.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::client::create_topic;
use common::raw::Conn;
use common::{run_server_expecting_exit, test_file, without_colours, StromBroker};
use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

const TIMEOUT: Duration = Duration::from_secs(30);

/// Unpacks the earlier release's data directory into `dir`.
fn unpack_fixture(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let status = Command::new("tar")
        .arg("-xzf")
        .arg(test_file("fixtures/earlier-release-single-node.tar.gz"))
        .arg("-C")
        .arg(dir)
        .status()
        .expect("run tar");
    assert!(status.success(), "unpack the fixture");
}

/// Every file under `dir` and its bytes.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let name = path.strip_prefix(dir).unwrap().display().to_string();
                files.insert(name, std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

/// Every record of `topic` (partitions `0..partitions`) as "key value" lines, sorted.
fn records(bootstrap: &str, topic: &str, partitions: i32, expected: usize) -> Vec<String> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "one-world-reader")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut assignment = TopicPartitionList::new();
    for p in 0..partitions {
        assignment
            .add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let deadline = std::time::Instant::now() + TIMEOUT;
    let mut out = Vec::new();
    while out.len() < expected && std::time::Instant::now() < deadline {
        if let Some(message) = consumer.poll(Duration::from_millis(100)) {
            let m = message.expect("no consume error");
            let key = m.key().map(|k| String::from_utf8_lossy(k).into_owned());
            let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
            out.push(format!("{} {value}", key.unwrap_or_default()));
        }
    }
    out.sort();
    out
}

/// The committed offsets of `group` on `topic`'s partitions `0..partitions`.
fn committed(bootstrap: &str, group: &str, topic: &str, partitions: i32) -> Vec<i64> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .create()
        .unwrap();
    let mut list = TopicPartitionList::new();
    for p in 0..partitions {
        list.add_partition(topic, p);
    }
    let committed = consumer.committed_offsets(list, TIMEOUT).unwrap();
    (0..partitions)
        .map(
            |p| match committed.find_partition(topic, p).unwrap().offset() {
                Offset::Offset(o) => o,
                other => panic!("no committed offset for {topic}-{p}: {other:?}"),
            },
        )
        .collect()
}

#[test]
fn an_earlier_release_single_node_directory_is_upgraded_in_place() {
    let mut broker = StromBroker::start_on(unpack_fixture, &[]);
    let bootstrap = broker.bootstrap();

    let mut events: Vec<String> = (0..300).map(|i| format!("k{i} v{i}")).collect();
    events.sort();
    assert_eq!(records(&bootstrap, "events", 3, 300), events);
    let mut audit: Vec<String> = (0..10).map(|i| format!(" a{i}")).collect();
    audit.sort();
    assert_eq!(records(&bootstrap, "audit", 1, 10), audit);
    assert_eq!(
        committed(&bootstrap, "billing", "events", 3),
        vec![40, 40, 40]
    );
    assert_eq!(committed(&bootstrap, "reports", "audit", 1), vec![10]);

    let init: InitProducerIdResponse = Conn::connect(&bootstrap).call(
        ApiKey::InitProducerId,
        4,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(-1)
            .with_producer_id((-1).into())
            .with_producer_epoch(-1),
    );
    assert_eq!(init.error_code, 0);
    assert!(
        init.producer_id.0 >= 1000,
        "producer ids continue past the earlier release's block (1000): {:?}",
        init.producer_id
    );

    let metadata = broker.log_dir().join("__strom_metadata");
    for gone in [
        "group-offsets.log",
        "producer-id-block",
        "kraft-upgrade.json",
    ] {
        assert!(!metadata.join(gone).exists(), "{gone} is removed");
    }
    assert!(broker.terminate().success());
    let stderr = without_colours(&broker.stderr());
    assert_eq!(
        stderr.matches("upgraded an earlier release's").count(),
        1,
        "one line says what was converted:\n{stderr}"
    );
    assert!(stderr.contains("topics=2") && stderr.contains("committed_offsets=4"));

    broker.restart();
    assert_eq!(
        committed(&bootstrap, "billing", "events", 3),
        vec![40, 40, 40]
    );
    assert_eq!(records(&bootstrap, "events", 3, 300).len(), 300);
    assert!(broker.terminate().success());
    assert!(
        !broker.stderr().contains("upgraded an earlier release's"),
        "a restart upgrades nothing again"
    );
}

/// Starts `strom server` on `logs`, expecting it to stop with an error; returns its stderr.
fn refused_start(logs: &Path) -> String {
    let (status, stderr) = run_server_expecting_exit(&[
        "--override",
        "listeners=PLAINTEXT://127.0.0.1:0",
        "--override",
        &format!("log.dirs={}", logs.display()),
    ]);
    assert!(!status.success(), "{stderr}");
    stderr
}

#[test]
fn an_earlier_release_directory_with_a_damaged_file_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    unpack_fixture(&logs);
    std::fs::write(
        logs.join("__strom_metadata/topics/events.json"),
        b"{\"id\": \"not",
    )
    .unwrap();
    let before = snapshot(&logs);
    let stderr = refused_start(&logs);
    let line = stderr
        .lines()
        .find(|l| l.starts_with("strom server:"))
        .unwrap_or_else(|| panic!("one line names the cause:\n{stderr}"));
    assert!(
        line.contains(&logs.display().to_string()) && line.contains("events.json"),
        "{line}"
    );
    let mut after = snapshot(&logs);
    after.remove(".lock");
    assert_eq!(after, before, "nothing was changed");
}

#[test]
fn a_second_node_on_a_directory_in_use_is_refused() {
    let broker = StromBroker::start(&[]);
    let logs = broker.log_dir();
    let stderr = refused_start(&logs);
    assert!(
        stderr.contains(&format!(
            "Failed to acquire lock on file .lock in {}",
            logs.display()
        )),
        "{stderr}"
    );
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "still-served", 1);
    assert!(records(&bootstrap, "still-served", 1, 0).is_empty());
}

#[test]
fn a_single_node_keeps_its_metadata_in_a_one_voter_quorum() {
    let broker = StromBroker::start(&[]);
    let logs = broker.log_dir();
    assert!(logs.join("meta.properties").exists());
    assert!(logs.join("__cluster_metadata-0").is_dir());
    let out = common::strom(&[
        "metadata-quorum",
        "--bootstrap-server",
        &broker.bootstrap(),
        "describe",
        "--status",
    ]);
    let status = common::stdout_of(&out);
    assert!(status.contains("LeaderId:               1"), "{status}");
    assert!(
        status.contains("CurrentVoters:          [{\"id\": 1"),
        "{status}"
    );
}

/// A first start killed after it wrote `meta.properties` and created the metadata log's
/// directory, before its quorum wrote anything: the next start finishes the format in the
/// cluster the directory names, and serves.
#[test]
fn a_first_start_killed_half_way_is_finished_by_the_next() {
    let cluster_id = "half-formatted-cluster";
    let broker = StromBroker::start_on(
        |logs| {
            std::fs::create_dir_all(logs.join("__cluster_metadata-0")).unwrap();
            std::fs::write(
                logs.join("meta.properties"),
                format!("node.id=1\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAA\nversion=1\ncluster.id={cluster_id}\n"),
            )
            .unwrap();
        },
        &[],
    );
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "after-half", 1);
    assert!(records(&bootstrap, "after-half", 1, 0).is_empty());
    let meta = std::fs::read_to_string(broker.log_dir().join("meta.properties")).unwrap();
    assert!(meta.contains(&format!("cluster.id={cluster_id}")), "{meta}");
    let out = common::strom(&[
        "metadata-quorum",
        "--bootstrap-server",
        &bootstrap,
        "describe",
        "--status",
    ]);
    assert!(common::stdout_of(&out).contains(cluster_id));
}
