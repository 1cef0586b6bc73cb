//! Every output line against Kafka's format strings (perf-tools.md §1.5, §2, §3).

use strom_tools::consumer_perf_test::output::{self as consumer, Summary};
use strom_tools::e2e_latency::run::{final_lines, E2eResult};
use strom_tools::histogram::LatencyHistogram;
use strom_tools::producer_perf_test::output as producer;
use strom_tools::producer_perf_test::stats::Stats;

#[test]
fn producer_window_and_final_lines_from_stats() {
    let mut stats = Stats::new(6, 5000, 0);
    assert!(stats.record(1, 1000, 10).is_none());
    assert!(stats.record(3, 1000, 4000).is_none());
    let window = stats.record(2, 1000, 5000).expect("a window at 5000 ms");
    assert_eq!(
        window.line(),
        "3 records sent, 0.6 records/sec (0.00 MB/sec), 2.0 ms avg latency, 3.0 ms max latency."
    );
    stats.record(4, 1000, 6000);
    let totals = stats.totals(7000);
    assert_eq!(
        producer::total_line(&totals, false),
        "4 records sent, 0.571429 records/sec (0.00 MB/sec), 2.50 ms avg latency, 4.00 ms max latency, 3 ms 50th, 4 ms 95th, 4 ms 99th, 4 ms 99.9th."
    );
}

#[test]
fn producer_warmup_lines() {
    assert_eq!(
        producer::warmup_line(1000),
        "Warmup first 1000 records. Steady state results will print after the complete test summary."
    );
    assert_eq!(producer::STEADY_STATE_LINE, "In steady state.");
}

#[test]
fn seed_000_style_final_line() {
    // 500000 10-byte records in 5003 ms at ~2 ms: the shape of seed 000's result line.
    let mut stats = Stats::new(500_000, 5000, 0);
    for i in 0..500_000u64 {
        stats.record(if i % 100 == 0 { 13 } else { 1 }, 10, 1);
    }
    let totals = stats.totals(5003);
    assert_eq!(
        producer::total_line(&totals, false),
        "500000 records sent, 99940.035978 records/sec (0.95 MB/sec), 1.12 ms avg latency, 13.00 ms max latency, 1 ms 50th, 1 ms 95th, 13 ms 99th, 13 ms 99.9th."
    );
}

#[test]
fn consumer_lines() {
    let s = Summary {
        start_ms: 1000,
        end_ms: 3000,
        bytes: 10 * 1024 * 1024,
        messages: 1_000_000,
        join_time_ms: 500,
    };
    assert_eq!(
        consumer::summary_row(&s, |ms| format!("T{ms}")),
        "T1000, T3000, 10.0000, 5.0000, 1000000, 500000.0000, 500, 1500, 6.6667, 666666.6667"
    );
    assert_eq!(
        consumer::timeout_warning(10000),
        "WARNING: Exiting before consuming the expected number of messages: timeout (10000 ms) exceeded. You can use the --timeout option to increase the timeout."
    );
}

#[test]
fn e2e_final_lines() {
    let result = E2eResult {
        latencies_ms: (0..1000).map(|i| i / 100).collect(),
        total_ns: 4_567_891_234,
        histogram: LatencyHistogram::new(),
    };
    assert_eq!(
        final_lines(&result),
        [
            "Avg latency: 4.5679 ms".to_string(),
            "Percentiles: 50th = 5, 99th = 9, 99.9th = 9".to_string()
        ]
    );
}
