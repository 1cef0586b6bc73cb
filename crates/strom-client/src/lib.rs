//! strom's Kafka client: the native load generator of the perf tools (`--client
//! native`), the one-shot admin calls of the CLIs and the cluster launcher ([`blocking`]).
//!
//! librdkafka is what applications use, so it stays the default load generator; but its
//! cost per record (about 1 µs produced, 0.5–1 µs consumed on this project's machine) is
//! what limited every figure the tools published, not the broker. This client is built
//! for the opposite: the Kafka protocol through the `kafka-protocol` crate and
//! strom-wire's batch builder and record walk, on a current-thread tokio runtime, with
//! batches built in place and records walked without copying, so that the broker is the
//! busier process in a benchmark.
//!
//! It speaks the protocol as Kafka's Java client does (ApiVersions negotiation, Metadata
//! and leader routing, several requests in flight per connection, idempotence, the
//! classic group protocol, fetch sessions), so it runs against any Kafka-compatible
//! cluster, and it never uses the broker's crates.

pub mod assignment;
pub mod blocking;
pub mod buffer_pool;
pub mod client;
pub mod clock;
pub mod config;
pub mod connection;
pub mod consumer;
pub mod errors;
pub mod group;
pub mod metrics;
pub mod partitioner;
pub mod producer;
pub mod properties;
pub mod timer;
