//! The perf tools against a real strom broker: record counts, Kafka's output lines and the
//! report files. Each test starts its own broker (the shared harness in `common`), except
//! the embedded-default test, where the tool starts one itself.

mod common;

use common::{stdout_of, strom, StromBroker};

/// The final producer line: `N records sent, R records/sec (M MB/sec), …, P ms 99.9th.`
fn assert_final_producer_line(line: &str, records: u64) {
    let prefix = format!("{records} records sent, ");
    assert!(line.starts_with(&prefix), "unexpected final line: {line}");
    assert!(
        line.ends_with(" ms 99.9th."),
        "unexpected final line: {line}"
    );
    let fields: Vec<&str> = line.split(", ").collect();
    assert_eq!(
        fields.len(),
        8,
        "Kafka's final line has 8 comma-separated parts: {line}"
    );
    let rate = fields[1].split(' ').next().unwrap();
    let decimals = rate.split('.').nth(1).expect("records/sec has decimals");
    assert_eq!(decimals.len(), 6, "records/sec is Java %f: {line}");
}

#[test]
fn producer_perf_test_sends_every_record_with_kafkas_lines() {
    let broker = StromBroker::start(&[]);
    let bootstrap = format!("bootstrap.servers={}", broker.bootstrap());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("p.json");
    let html = dir.path().join("p.html");
    let output = strom(&[
        "producer-perf-test",
        "--topic",
        "perf-p",
        "--num-records",
        "20000",
        "--record-size",
        "100",
        "--throughput",
        "-1",
        "--producer-props",
        &bootstrap,
        "acks=all",
        "--json",
        json.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    let stdout = stdout_of(&output);
    let last = stdout.lines().last().expect("a final line");
    assert_final_producer_line(last, 20000);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("HdrHistogram, 20000 samples"), "{stderr}");

    let report = std::fs::read_to_string(&json).unwrap();
    assert!(report.contains("\"records_sent\": 20000"), "{report}");
    assert!(report.contains("\"p9999_us\""), "{report}");
    assert!(report.contains("\"cpu_model\""), "{report}");
    assert!(report.contains("\"librdkafka_version\""), "{report}");
    assert!(report.contains("\"series\""), "{report}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg") && page.contains("Latency by percentile"));
    assert!(!page.contains("<script src"));
}

#[test]
fn throttled_producer_with_warmup_prints_steady_state() {
    let broker = StromBroker::start(&[]);
    let output = strom(&[
        "producer-perf-test",
        "--topic",
        "perf-w",
        "--num-records",
        "3000",
        "--payload-monotonic",
        "--throughput",
        "3000",
        "--warmup-records",
        "1000",
        "--bootstrap-server",
        &broker.bootstrap(),
    ]);
    assert_warmup_then_steady_state(&output, 1000, 3000);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("Latency from intended send time"),
        "{stderr}"
    );
}

#[test]
fn unthrottled_native_producer_with_warmup_prints_steady_state() {
    let broker = StromBroker::start(&[]);
    let output = strom(&[
        "producer-perf-test",
        "--client",
        "native",
        "--topic",
        "perf-wn",
        "--num-records",
        "50000",
        "--record-size",
        "100",
        "--throughput",
        "-1",
        "--warmup-records",
        "20001",
        "--bootstrap-server",
        &broker.bootstrap(),
    ]);
    assert_warmup_then_steady_state(&output, 20001, 50000);
}

#[test]
fn throttled_native_producer_with_warmup_prints_steady_state_and_histogram() {
    let broker = StromBroker::start(&[]);
    // A long linger, so that most records go in ahead of their due time; records without
    // keys go in a run at a time, keyed ones one by one.
    for (topic, keys) in [("perf-wtn", None), ("perf-wtk", Some("10"))] {
        let mut args = vec![
            "producer-perf-test",
            "--client",
            "native",
            "--topic",
            topic,
            "--num-records",
            "3000",
            "--record-size",
            "100",
            "--throughput",
            "3000",
            "--warmup-records",
            "1000",
            "--producer-props",
            "linger.ms=100",
        ];
        if let Some(range) = keys {
            args.extend(["--record-key-range", range]);
        }
        let bootstrap = broker.bootstrap();
        args.extend(["--bootstrap-server", &bootstrap]);
        let output = strom(&args);
        assert_warmup_then_steady_state(&output, 1000, 3000);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("Latency from intended send time (HdrHistogram, 2000 samples)"),
            "{stderr}"
        );
    }
}

/// Kafka's lines around a warm-up: announced first, the summary of all records, then the
/// steady state's.
fn assert_warmup_then_steady_state(output: &std::process::Output, warmup: u64, total: u64) {
    let stdout = stdout_of(output);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[0],
        format!("Warmup first {warmup} records. Steady state results will print after the complete test summary.")
    );
    let n = lines.len();
    assert_final_producer_line(lines[n - 2], total);
    assert!(
        lines[n - 1].starts_with(&format!("{} steady state records sent, ", total - warmup)),
        "{stdout}"
    );
}

#[test]
fn producer_perf_test_starts_an_embedded_broker_without_bootstrap() {
    let output = strom(&[
        "producer-perf-test",
        "--topic",
        "perf-embedded",
        "--num-records",
        "5000",
        "--record-size",
        "10",
        "--throughput",
        "-1",
    ]);
    let stdout = stdout_of(&output);
    assert_final_producer_line(stdout.lines().last().unwrap(), 5000);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("started an embedded strom broker"),
        "{stderr}"
    );
}

#[test]
fn consumer_perf_test_reads_what_was_produced() {
    let broker = StromBroker::start(&[]);
    let produced = strom(&[
        "producer-perf-test",
        "--topic",
        "perf-c",
        "--num-records",
        "10000",
        "--record-size",
        "10",
        "--throughput",
        "-1",
        "--bootstrap-server",
        &broker.bootstrap(),
    ]);
    stdout_of(&produced);
    let output = strom(&[
        "consumer-perf-test",
        "--topic",
        "perf-c",
        "--messages",
        "10000",
        "--broker-list",
        &broker.bootstrap(),
        "--fetch-size",
        "100000",
        "--threads",
        "2",
    ]);
    let stdout = stdout_of(&output);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[0],
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    );
    let row: Vec<&str> = lines[1].split(", ").collect();
    assert_eq!(row.len(), 10, "{stdout}");
    assert_eq!(row[4], "10000", "{stdout}");
    assert_eq!(
        row[2], "0.0954",
        "10000 records of 10 bytes in MiB: {stdout}"
    );
}

#[test]
fn e2e_latency_round_trips_every_record() {
    let broker = StromBroker::start(&[]);
    let output = strom(&[
        "e2e-latency",
        &broker.bootstrap(),
        "perf-e2e",
        "2001",
        "all",
        "64",
    ]);
    let stdout = stdout_of(&output);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("Topic \"perf-e2e\" does not exist."),
        "{stdout}"
    );
    assert!(lines[1].starts_with("0\t"), "{stdout}");
    assert!(lines[2].starts_with("1000\t"), "{stdout}");
    assert!(lines[3].starts_with("2000\t"), "{stdout}");
    assert!(
        lines[4].starts_with("Avg latency: ") && lines[4].ends_with(" ms"),
        "{stdout}"
    );
    assert!(lines[5].starts_with("Percentiles: 50th = "), "{stdout}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("HdrHistogram, 2001 samples"), "{stderr}");
}

#[test]
fn bench_runs_every_experiment_and_writes_reports() {
    let broker = StromBroker::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("b.json");
    let html = dir.path().join("b.html");
    let output = strom(&[
        "bench",
        "--bootstrap-server",
        &broker.bootstrap(),
        "--records",
        "20000",
        "--json",
        json.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    let stdout = stdout_of(&output);
    for experiment in [
        "002 default settings",
        "002 tuned settings",
        "000 throttled 100k/s",
        "000 consumer fetch 10000",
        "000 consumer fetch 100000",
        "000 consumer fetch 1000000",
    ] {
        assert!(
            stdout.contains(experiment),
            "missing {experiment}:\n{stdout}"
        );
    }
    assert!(!stdout.contains("failed"), "{stdout}");
    assert!(!stdout.contains("timed out"), "{stdout}");
    let report = std::fs::read_to_string(&json).unwrap();
    assert!(report.contains("\"records_sent\": 20000"), "{report}");
    assert!(
        report.contains("\"records_sent\": 10000"),
        "the throttled run sends half: {report}"
    );
    assert!(
        report.contains("\"data_consumed_in_nmsg\": 20000"),
        "{report}"
    );
    assert!(report.contains("\"comparison\""));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("strom vs. the seed reports"));
}

#[test]
fn bench_consumer_scaling_runs_every_size_and_group_against_the_embedded_broker() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.json");
    let html = dir.path().join("s.html");
    let output = strom(&[
        "bench",
        "consumer-scaling",
        "--records",
        "3000",
        "--json",
        json.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    let stdout = stdout_of(&output);
    assert!(!stdout.contains("failed"), "{stdout}");
    assert!(!stdout.contains("timed out"), "{stdout}");
    for size in [10, 100, 1000, 5000] {
        assert!(
            stdout.contains(&format!("004 {size}-byte records")),
            "missing {size}-byte records:\n{stdout}"
        );
    }
    let rate_rows = stdout.lines().filter(|l| l.contains("records/s, ")).count();
    assert_eq!(
        rate_rows,
        4 * 3,
        "one records/s row per size and group:\n{stdout}"
    );
    for seed in [
        "150,000", "210,000", "195,000", "140,000", "60,000", "70,000",
    ] {
        assert!(
            stdout.contains(seed),
            "seed figure {seed} missing:\n{stdout}"
        );
    }

    let report = std::fs::read_to_string(&json).unwrap();
    for size in [10, 100, 1000, 5000] {
        for (consumers, label) in [(1, "1 consumer"), (3, "3 consumers"), (6, "6 consumers")] {
            let figure = |metric: &str| {
                comparison_figure(
                    &report,
                    &format!("004 {size}-byte records"),
                    &format!("{metric}, {label}"),
                )
            };
            let rate: f64 = figure("records/s").replace(',', "").parse().unwrap();
            assert!(rate > 0.0, "{size} B, {label}: {rate}");
            assert_eq!(figure("committed offsets"), "3,000", "{size} B, {label}");
            let per_consumer = figure("records per consumer");
            let counts: Vec<u64> = per_consumer
                .split(" / ")
                .map(|c| c.replace(',', "").parse().unwrap())
                .collect();
            assert_eq!(counts.len(), consumers, "{per_consumer}");
            assert_eq!(counts.iter().sum::<u64>(), 3000, "{per_consumer}");
        }
    }
    assert_eq!(
        report.matches("\"tool\": \"consumer-perf-test\"").count(),
        12,
        "one consumer run per size and group"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("004 5000-byte records"));
}

/// The `strom` figure of the comparison row (`experiment`, `metric`) in a pretty-printed
/// JSON report.
fn comparison_figure(report: &str, experiment: &str, metric: &str) -> String {
    let row = format!(
        "\"experiment\": \"{experiment}\",\n      \"metric\": \"{metric}\",\n      \"strom\": \""
    );
    let at = report
        .find(&row)
        .unwrap_or_else(|| panic!("no row {experiment} / {metric} in the report"))
        + row.len();
    report[at..].split('"').next().unwrap().to_string()
}

#[test]
fn validation_errors_use_kafkas_words() {
    let output = strom(&[
        "producer-perf-test",
        "--topic",
        "t",
        "--num-records",
        "0",
        "--record-size",
        "1",
        "--throughput",
        "-1",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("usage: producer-performance [-h] --topic TOPIC"),
        "{stderr}"
    );
    assert!(
        stderr
            .ends_with("producer-performance: error: --num-records should be greater than zero\n"),
        "{stderr}"
    );

    let output = strom(&["e2e-latency", "localhost:9092", "t", "10", "0", "100"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr)
        .contains("Latency testing requires synchronous acknowledgement. Please use 1 or all"));
}
