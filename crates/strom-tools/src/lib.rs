//! Kafka's admin CLIs and perf tools, byte-compatible in their output: producer, consumer
//! and end-to-end latency tools, kafka-topics, kafka-configs, kafka-consumer-groups and
//! kafka-metadata-quorum, plus the reports (JSON, HTML) Kafka's tools lack.
//!
//! Each tool talks to any Kafka-compatible cluster through librdkafka or, with `--client
//! native`, through strom's own client (`strom-client`); with no bootstrap server given
//! it starts an embedded strom broker ([`cluster`]).

pub mod cli;
pub mod cluster;
pub mod cluster_cli;
pub mod configs_cli;
pub mod consumer_groups;
pub mod consumer_perf_test;
pub mod cpu;
pub mod date_format;
pub mod e2e_latency;
pub mod environment;
pub mod histogram;
pub mod java_format;
pub mod java_random;
pub mod load_client;
pub mod metadata_quorum;
pub mod metrics;
pub mod process_stats;
pub mod producer_perf_test;
pub mod progress;
pub mod property_map;
pub mod report;
pub mod report_html;
pub mod report_json;
pub mod series;
pub mod topics;
pub mod topics_cli;
