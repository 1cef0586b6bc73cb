//! The native client's metrics for `--print-metrics`, named as the Java client's: the
//! client's group (`producer-metrics`, `consumer-fetch-manager-metrics`) and one node group
//! per broker connection (`producer-node-metrics` with `node-id=node-N`, the bootstrap
//! connection `node--1` as Java numbers it).
//!
//! Each measured quantity is a [`Stat`] (count, sum, max) from which the Java names follow:
//! `-total`, `-rate`, `-avg`, `-max`. Java's rates are windowed (two 30 s samples); here a
//! rate is the total over the time since the client started, which is what the Java figure
//! converges to over a run of steady load. Counting is per request or per batch, never per
//! record, so it costs the load generator nothing it would notice.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use serde_json::Value;

/// A count of events, the sum of their sizes and the largest.
#[derive(Debug, Default)]
pub struct Stat {
    count: AtomicU64,
    sum: AtomicU64,
    max: AtomicU64,
}

impl Stat {
    /// One event of `value`.
    pub fn record(&self, value: u64) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
        self.max.fetch_max(value, Ordering::Relaxed);
    }

    fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    fn sum(&self) -> u64 {
        self.sum.load(Ordering::Relaxed)
    }

    fn avg(&self) -> f64 {
        match self.count() {
            0 => 0.0,
            n => self.sum() as f64 / n as f64,
        }
    }

    fn max(&self) -> u64 {
        self.max.load(Ordering::Relaxed)
    }
}

/// One broker connection's requests, as the Java client's node metrics count them.
#[derive(Debug, Default)]
pub struct NodeMetrics {
    /// Request size in bytes, per request written.
    pub requests: Stat,
    /// Response size in bytes, per response read.
    pub responses: Stat,
    /// Time from writing a request to its answer, in microseconds.
    pub latency_us: Stat,
}

/// How a client-level quantity is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Events counted by their values' sum: `-total` and `-rate`.
    Counter,
    /// Sizes of events: `-avg` and `-max`.
    Sizes,
    /// Durations of events, recorded in microseconds: `-avg` and `-max` in milliseconds.
    Times,
}

/// What one client measured.
#[derive(Debug)]
pub struct ClientMetrics {
    started: Instant,
    nodes: Mutex<BTreeMap<i32, Arc<NodeMetrics>>>,
    stats: Mutex<BTreeMap<&'static str, (Kind, Arc<Stat>)>>,
}

impl Default for ClientMetrics {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            nodes: Mutex::new(BTreeMap::new()),
            stats: Mutex::new(BTreeMap::new()),
        }
    }
}

impl ClientMetrics {
    /// The metrics of connections to broker `node` (-1: a bootstrap server).
    pub fn node(&self, node: i32) -> Arc<NodeMetrics> {
        Arc::clone(self.nodes.lock().entry(node).or_default())
    }

    /// A count (Java's `<name>-total` and `<name>-rate`): `record(n)` adds n.
    pub fn counter(&self, name: &'static str) -> Arc<Stat> {
        self.stat(name, Kind::Counter)
    }

    /// Sizes (Java's `<name>-avg` and `<name>-max`): `record(v)` is one event.
    pub fn sizes(&self, name: &'static str) -> Arc<Stat> {
        self.stat(name, Kind::Sizes)
    }

    /// Durations (Java's `<name>-avg` and `<name>-max`, in ms): `record(µs)` is one event.
    pub fn times(&self, name: &'static str) -> Arc<Stat> {
        self.stat(name, Kind::Times)
    }

    fn stat(&self, name: &'static str, kind: Kind) -> Arc<Stat> {
        let mut stats = self.stats.lock();
        Arc::clone(
            &stats
                .entry(name)
                .or_insert_with(|| (kind, Arc::default()))
                .1,
        )
    }

    /// The metrics Kafka's `--print-metrics` shows, by Java's full name: the client's
    /// quantities under `group`, the requests of all its connections under
    /// `requests_group`, each connection's under `node_group`, all tagged with `client_id`.
    pub fn by_name(
        &self,
        group: &str,
        requests_group: &str,
        node_group: &str,
        client_id: &str,
    ) -> BTreeMap<String, Value> {
        let seconds = self.started.elapsed().as_secs_f64().max(1e-3);
        let tags = format!("{{client-id={client_id}}}");
        let mut metrics: BTreeMap<String, Value> = BTreeMap::new();
        for (name, (kind, stat)) in self.stats.lock().iter() {
            let values = match kind {
                Kind::Counter => [
                    ("total", stat.sum() as f64),
                    ("rate", stat.sum() as f64 / seconds),
                ],
                Kind::Sizes => [("avg", stat.avg()), ("max", stat.max() as f64)],
                Kind::Times => [
                    ("avg", stat.avg() / 1000.0),
                    ("max", stat.max() as f64 / 1000.0),
                ],
            };
            for (suffix, value) in values {
                metrics.insert(
                    format!("{group}:{name}-{suffix}:{tags}"),
                    Value::from(value),
                );
            }
        }
        let all = NodeMetrics::default();
        for (id, node) in self.nodes.lock().iter() {
            let node_tags = format!("{{client-id={client_id}, node-id=node-{id}}}");
            for (name, value) in node_values(node, seconds) {
                metrics.insert(format!("{node_group}:{name}:{node_tags}"), value);
            }
            all.add(node);
        }
        for (name, value) in node_values(&all, seconds) {
            metrics.insert(format!("{requests_group}:{name}:{tags}"), value);
        }
        metrics
    }
}

impl NodeMetrics {
    /// Adds `other`'s events to these.
    fn add(&self, other: &NodeMetrics) {
        for (into, from) in [
            (&self.requests, &other.requests),
            (&self.responses, &other.responses),
            (&self.latency_us, &other.latency_us),
        ] {
            into.count.fetch_add(from.count(), Ordering::Relaxed);
            into.sum.fetch_add(from.sum(), Ordering::Relaxed);
            into.max.fetch_max(from.max(), Ordering::Relaxed);
        }
    }
}

/// Request metrics under Java's names.
fn node_values(node: &NodeMetrics, seconds: f64) -> Vec<(String, Value)> {
    let requests = node.requests.count() as f64;
    [
        ("request-total", requests),
        ("request-rate", requests / seconds),
        ("request-size-avg", node.requests.avg()),
        ("request-size-max", node.requests.max() as f64),
        ("outgoing-byte-total", node.requests.sum() as f64),
        ("outgoing-byte-rate", node.requests.sum() as f64 / seconds),
        ("response-total", node.responses.count() as f64),
        ("incoming-byte-total", node.responses.sum() as f64),
        ("incoming-byte-rate", node.responses.sum() as f64 / seconds),
        ("request-latency-avg", node.latency_us.avg() / 1000.0),
        ("request-latency-max", node.latency_us.max() as f64 / 1000.0),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_string(), Value::from(value)))
    .collect()
}
