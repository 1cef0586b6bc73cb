//! kafka-consumer-perf-test's flags and messages.

use strom_tools::consumer_perf_test::args::{parse, Outcome};

fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

fn error(s: &str) -> String {
    match parse(&args(s)) {
        Err(Outcome::Error(message)) => message,
        Err(other) => panic!("expected an error for {s:?}, got {other:?}"),
        Ok(_) => panic!("expected an error for {s:?}"),
    }
}

#[test]
fn seed_000_and_001_commands_parse() {
    let a = parse(&args(
        "--topic T --messages 5000000 --fetch-size 10000 --broker-list h:9092",
    ))
    .unwrap();
    assert_eq!(a.topic, "T");
    assert_eq!(a.num_messages, 5_000_000);
    assert_eq!(a.fetch_size, 10_000);
    assert_eq!(a.bootstrap().as_deref(), Some("h:9092"));
    assert_eq!(a.threads, 1);
    assert_eq!(a.timeout_ms, 10_000);
    assert_eq!(a.reporting_interval_ms, 5000);
    assert_eq!(a.date_pattern, "yyyy-MM-dd HH:mm:ss:SSS");

    let b = parse(&args("--fetch-size 100000 --messages 10000000 --threads 3 --topic T --bootstrap-server x:1 --broker-list y:2")).unwrap();
    assert_eq!(b.threads, 3);
    assert_eq!(
        b.bootstrap().as_deref(),
        Some("x:1"),
        "--bootstrap-server beats --broker-list"
    );
}

#[test]
fn defaults_and_flags() {
    let a = parse(&args("--topic T --num-records 7 --from-latest --show-detailed-stats --hide-header --timeout 500 --group g --date-format HH:mm")).unwrap();
    assert_eq!(a.num_messages, 7);
    assert!(a.from_latest && a.show_detailed_stats && a.hide_header);
    assert_eq!(a.timeout_ms, 500);
    assert_eq!(a.group.as_deref(), Some("g"));
    assert_eq!(a.fetch_size, 1024 * 1024);
    assert_eq!(a.socket_buffer_size, 2 * 1024 * 1024);
}

#[test]
fn jopt_style_errors() {
    assert_eq!(
        error("--messages 1"),
        "Missing required argument \"[topic]\""
    );
    assert_eq!(
        error("--topic t"),
        "Missing required argument \"[messages]\""
    );
    assert_eq!(
        error("--topic t --messages x"),
        "Cannot parse argument 'x' of option messages"
    );
    assert_eq!(
        error("--topic t --messages 1 --reporting-interval 0"),
        "Reporting interval must be greater than 0."
    );
    assert_eq!(
        error("--topic t --messages 1 --reporting-interval -5"),
        "Cannot parse argument '-5' of option reporting-interval"
    );
    assert_eq!(
        error("--topic t --messages 1 --nope"),
        "nope is not a recognized option"
    );
    assert_eq!(
        error("--topic t --messages 1 --date-format qq"),
        "Illegal pattern character 'q'"
    );
}

#[test]
fn help_and_version() {
    assert_eq!(parse(&args("--help")).unwrap_err(), Outcome::Help);
    assert_eq!(parse(&args("--version")).unwrap_err(), Outcome::Version);
}
