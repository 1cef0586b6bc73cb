//! Real clients against the real `strom` binary: confluent-kafka (librdkafka 2.x),
//! kafka-python 3, aiokafka 0.14, kafkajs 2.2.4, @platformatic/kafka 1.x and kcat. Each
//! test starts its own broker and runs one client script from `tests/clients/` (or kcat
//! itself); the script checks what it produced and read back and exits non-zero with a
//! message when anything differs.
//!
//! The clients are installed by `.ci/run` (apt: kcat; pip: confluent-kafka, kafka-python,
//! aiokafka with its lz4/snappy/zstd extras; npm: kafkajs and @platformatic/kafka in
//! tests/clients). A missing client fails its test: CI installs them all.

mod common;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{test_file, StromBroker};

/// Longer than any script's own timeouts, so that a script reports its own failure.
const SCRIPT_DEADLINE: Duration = Duration::from_secs(300);

/// Runs `program args...` with `stdin` as input and returns its stdout, panicking with
/// everything it printed if it fails, cannot be started or outlives [`SCRIPT_DEADLINE`].
fn run(program: &str, args: &[&str], stdin: &[u8]) -> String {
    let mut child = Command::new(program)
        .args(args)
        .current_dir(test_file("clients"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program} (installed by .ci/run): {e}"));
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + SCRIPT_DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    match status {
        Some(s) if s.success() => out,
        Some(s) => panic!(
            "{program} {args:?} exited with {s}\n--- stdout ---\n{out}\n--- stderr ---\n{err}"
        ),
        None => panic!(
            "{program} {args:?} still running after {SCRIPT_DEADLINE:?}, killed\n\
             --- stdout ---\n{out}\n--- stderr ---\n{err}"
        ),
    }
}

/// Starts a broker without topic auto-creation, runs `program script HOST:PORT` in
/// `tests/clients/` and checks that the script passed every part: a script that prints
/// SKIPPED fails the test, since CI installs every client and the broker serves every API
/// the scripts use.
fn run_client_script(program: &str, script: &str) {
    run_client_script_with(program, script, &[], &[]);
}

/// [`run_client_script`] with more `args` after the address, and `overrides` of the
/// broker's settings.
fn run_client_script_with(program: &str, script: &str, args: &[&str], overrides: &[&str]) {
    let mut settings = vec!["auto.create.topics.enable=false"];
    settings.extend_from_slice(overrides);
    let broker = StromBroker::start(&settings);
    let bootstrap = broker.bootstrap();
    let mut all_args = vec![script, bootstrap.as_str()];
    all_args.extend_from_slice(args);
    let out = run(program, &all_args, b"");
    print!("{out}");
    assert!(out.contains("PASS"), "{out}");
    assert!(!out.contains("SKIPPED"), "{script} skipped a part:\n{out}");
}

/// The cleaner looks for dirty logs every 100 ms, so a compacted topic is cleaned while
/// a script waits for it.
const QUICK_CLEANER: &[&str] = &["log.cleaner.backoff.ms=100"];

#[test]
fn librdkafka_reads_back_what_kafka_serves_of_a_compacted_topic() {
    run_client_script_with("python3", "compaction.py", &["confluent"], QUICK_CLEANER);
}

#[test]
fn kafka_python_reads_back_what_kafka_serves_of_a_compacted_topic() {
    run_client_script_with("python3", "compaction.py", &["kafka-python"], QUICK_CLEANER);
}

#[test]
fn kafkajs_reads_back_what_kafka_serves_of_a_compacted_topic() {
    assert_npm_installed("kafkajs");
    run_client_script_with("node", "compaction_kafkajs.js", &[], QUICK_CLEANER);
}

/// Fails with the install hint when the npm package `name` is missing from tests/clients.
fn assert_npm_installed(name: &str) {
    assert!(
        test_file(&format!("clients/node_modules/{name}")).is_dir(),
        "{name} is not installed: run `npm install` in tests/clients (see .ci/run)"
    );
}

#[test]
fn confluent_kafka_every_codec_idempotent_and_admin_client() {
    run_client_script("python3", "produce_consume_confluent.py");
}

#[test]
fn confluent_kafka_replica_assignments_topic_configs_authorized_operations_and_transactions() {
    run_client_script("python3", "admin_and_topic_configs_confluent.py");
}

#[test]
fn kafka_python_3_produce_consume_and_admin() {
    run_client_script("python3", "produce_consume_kafka_python.py");
}

#[test]
fn aiokafka_every_codec_idempotent_group_resume_and_admin() {
    run_client_script("python3", "produce_consume_aiokafka.py");
}

#[test]
fn kafkajs_non_flexible_versions_produce_consume_and_admin() {
    assert_npm_installed("kafkajs");
    // The group APIs are advertised, so the consume part must run (no SKIPPED).
    run_client_script("node", "produce_consume_kafkajs.js");
}

#[test]
fn platformatic_kafka_flexible_versions_idempotent_group_resume_and_admin() {
    assert_npm_installed("@platformatic/kafka");
    run_client_script("node", "produce_consume_platformatic.js");
}

#[test]
fn kcat_metadata_and_round_trip_with_auto_created_topic() {
    // kcat cannot create topics: this broker creates them on first use, with 3 partitions.
    let broker = StromBroker::start(&["auto.create.topics.enable=true", "num.partitions=3"]);
    let bootstrap = broker.bootstrap();
    let topic = "kcat-roundtrip";

    let input: String = (0..100).map(|i| format!("key-{i}:value-{i}\n")).collect();
    run(
        "kcat",
        &[
            "-P", "-b", &bootstrap, "-t", topic, "-p", "1", "-K", ":", "-X", "acks=all",
        ],
        input.as_bytes(),
    );

    let out = run(
        "kcat",
        &[
            "-C",
            "-b",
            &bootstrap,
            "-t",
            topic,
            "-p",
            "1",
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%o|%k|%s\\n",
        ],
        b"",
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 100, "kcat -C read:\n{out}");
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(*line, format!("{i}|key-{i}|value-{i}"));
    }

    let metadata = run("kcat", &["-L", "-b", &bootstrap, "-J"], b"");
    let port = broker.port();
    assert!(
        metadata.contains(&format!(
            r#""brokers":[{{"id":1,"name":"127.0.0.1:{port}"}}]"#
        )),
        "kcat -L -J brokers: {metadata}"
    );
    assert!(
        metadata.contains(r#""controllerid":1"#),
        "kcat -L -J controller: {metadata}"
    );
    let topic_json = metadata
        .split(&format!(r#"{{"topic":"{topic}""#))
        .nth(1)
        .unwrap_or_else(|| panic!("kcat -L -J does not list {topic}: {metadata}"));
    for p in 0..3 {
        assert!(
            topic_json.contains(&format!(
                r#"{{"partition":{p},"leader":1,"replicas":[{{"id":1}}],"isrs":[{{"id":1}}]}}"#
            )),
            "partition {p} of {topic} in kcat -L -J: {metadata}"
        );
    }
    assert!(
        !topic_json.contains(r#""partition":3"#),
        "more than 3 partitions: {metadata}"
    );
}
