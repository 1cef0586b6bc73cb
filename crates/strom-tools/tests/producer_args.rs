//! kafka-producer-perf-test's flags and validation messages.

use strom_tools::producer_perf_test::args::{parse, KeyDistribution, Outcome, PayloadSource};

fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

fn error(s: &str) -> String {
    match parse(&args(s)) {
        Err(Outcome::Error(message)) => message,
        other => panic!("expected an error for {s:?}, got {other:?}"),
    }
}

#[test]
fn seed_000_command_parses() {
    let a = parse(&args(
        "--topic T --num-records 500000 --throughput 100000 --record-size 10 --producer-props bootstrap.servers=h:9092 key.serializer=org.apache.kafka.common.serialization.StringSerializer value.serializer=org.apache.kafka.common.serialization.StringSerializer",
    ))
    .unwrap();
    assert_eq!(a.topic, "T");
    assert_eq!(a.num_records, 500_000);
    assert_eq!(a.throughput, 100_000.0);
    assert_eq!(a.payload, PayloadSource::RecordSize(10));
    assert_eq!(a.bootstrap().as_deref(), Some("h:9092"));
    assert_eq!(a.properties.len(), 3);
    assert_eq!(a.reporting_interval_ms, 5000);
    assert!(!a.transactions_enabled());
}

#[test]
fn no_arguments_or_help_show_help() {
    assert_eq!(parse(&[]).unwrap_err(), Outcome::Help);
    assert_eq!(parse(&args("--help")).unwrap_err(), Outcome::Help);
}

#[test]
fn required_arguments() {
    assert_eq!(
        error("--num-records 1 --throughput 1 --record-size 1"),
        "argument --topic is required"
    );
    assert_eq!(
        error("--topic t --throughput 1 --record-size 1"),
        "argument --num-records is required"
    );
    assert_eq!(
        error("--topic t --num-records 1 --record-size 1"),
        "argument --throughput is required"
    );
    assert_eq!(
        error("--topic t --num-records 1 --throughput 1"),
        "one of the arguments --record-size --payload-file --payload-monotonic is required"
    );
    assert_eq!(
        error("--topic t --num-records 1 --throughput 1 --record-size 1 --payload-monotonic"),
        "argument --payload-monotonic: not allowed with argument --record-size"
    );
}

#[test]
fn kafkas_value_checks() {
    let base = "--topic t --throughput -1";
    assert_eq!(
        error(&format!("{base} --num-records 0 --record-size 1")),
        "--num-records should be greater than zero"
    );
    assert_eq!(
        error(&format!("{base} --num-records 5 --record-size 0")),
        "--record-size should be greater than zero"
    );
    assert_eq!(
        error(&format!(
            "{base} --num-records 5 --record-size 1 --transaction-duration-ms 0"
        )),
        "--transaction-duration-ms should be greater than zero"
    );
    assert_eq!(
        error(&format!("{base} --num-records 5 --record-size 1 --warmup-records 5")),
        "The value for --warmup-records must be strictly fewer than the number of records in the test, --num-records."
    );
    assert_eq!(
        error(&format!(
            "{base} --num-records 5 --record-size 1 --reporting-interval 0"
        )),
        "--reporting-interval should be greater than zero."
    );
    assert_eq!(
        error(&format!(
            "{base} --num-records 5 --record-size 1 --producer-props a=b=c"
        )),
        "Invalid property: a=b=c"
    );
}

#[test]
fn type_errors_read_like_argparse4j() {
    assert_eq!(
        error("--topic t --num-records x --throughput 1 --record-size 1"),
        "argument --num-records: could not convert 'x' to Long (For input string: \"x\")"
    );
    assert_eq!(
        error("--topic t --num-records 1 --throughput fast --record-size 1"),
        "argument --throughput: could not convert 'fast' to Double (For input string: \"fast\")"
    );
    assert_eq!(
        error("--topic t --bogus"),
        "unrecognized arguments: '--bogus'"
    );
    assert_eq!(error("--topic"), "argument --topic: expected one argument");
    assert_eq!(
        error("--topic t --num-records 1 --throughput 1 --record-size 1 --producer-props"),
        "argument --producer-props: expected at least one argument"
    );
}

#[test]
fn fractional_throughput_and_4x_flags() {
    let a = parse(&args(
        "--topic t --num-records 10 --throughput 0.5 --payload-monotonic --bootstrap-server b:1 --command-property bootstrap.servers=c:2 linger.ms=3 --warmup-records 2 --reporting-interval 1000 --record-key-range 7 --key-distribution random --transactional-id tx",
    ))
    .unwrap();
    assert_eq!(a.throughput, 0.5);
    assert_eq!(a.payload, PayloadSource::Monotonic);
    assert_eq!(
        a.bootstrap().as_deref(),
        Some("b:1"),
        "--bootstrap-server wins"
    );
    assert_eq!(a.warmup_records, 2);
    assert_eq!(a.reporting_interval_ms, 1000);
    assert_eq!(a.key_range, Some((7, KeyDistribution::Random)));
    assert!(a.transactions_enabled());
}

#[test]
fn property_precedence_flags_over_files() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("producer.properties");
    std::fs::write(&file, "bootstrap.servers=file:1\nlinger.ms=9\n").unwrap();
    let a = parse(&args(&format!(
        "--topic t --num-records 1 --throughput -1 --record-size 1 --producer.config {} --producer-props linger.ms=1",
        file.display()
    )))
    .unwrap();
    assert_eq!(a.bootstrap().as_deref(), Some("file:1"));
    let linger: Vec<&str> = a
        .properties
        .iter()
        .filter(|(k, _)| k == "linger.ms")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(linger, ["9", "1"], "the flag comes last, so it wins");
}

#[test]
fn payload_file_delimiter_default_is_a_newline() {
    let a = parse(&args(
        "--topic t --num-records 1 --throughput -1 --payload-file f.txt",
    ))
    .unwrap();
    assert_eq!(
        a.payload,
        PayloadSource::File {
            path: "f.txt".into(),
            delimiter: "\n".into()
        }
    );
}
