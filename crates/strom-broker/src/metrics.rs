//! The broker's counters, served by `GET /metrics` in Prometheus's text format on
//! `strom.metrics.listener` (Kafka publishes its own over JMX). They count the work
//! replication does per request, so that what a request costs can be read off a running
//! broker rather than inferred from its CPU time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Counters, each only ever incremented.
#[derive(Debug, Default)]
pub struct BrokerMetrics {
    /// Appends of one partition's records from a Produce request (a Kafka client sends
    /// one batch per partition per request) to a partition this broker leads.
    pub produce_appends: AtomicU64,
    /// Followers' Fetch requests this broker answered as a leader.
    pub replica_fetch_requests: AtomicU64,
    /// Partitions read to answer them, each read after a wake-up counted again.
    pub replica_fetch_partitions_read: AtomicU64,
    /// Times a follower's parked Fetch was woken before its wait ran out.
    pub replica_fetch_wakeups: AtomicU64,
    /// Fetch requests this broker's fetchers sent to leaders.
    pub fetcher_requests: AtomicU64,
    /// Partitions whose fetch position this broker's fetchers looked up for a request.
    pub fetcher_partitions_planned: AtomicU64,
    /// Cleanings of a compacted log the log cleaner completed.
    pub log_cleaner_cleanings: AtomicU64,
    /// Bytes of segments the log cleaner read and wrote.
    pub log_cleaner_bytes_read: AtomicU64,
    pub log_cleaner_bytes_written: AtomicU64,
    /// Times the log cleaner marked a partition uncleanable.
    pub log_cleaner_uncleanable: AtomicU64,
    /// Cleanings given up, the old segments kept: an I/O error (a full disk) or a log
    /// changed under them.
    pub log_cleaner_abandoned: AtomicU64,
}

/// How a request may ask for the counters, and the most of it that is read.
const REQUEST_LINE: &[u8] = b"GET /metrics ";
const MAX_REQUEST_BYTES: usize = 8192;

impl BrokerMetrics {
    /// The counters in Prometheus's text exposition format.
    pub fn render(&self) -> String {
        let counters: [(&str, &AtomicU64, &str); 11] = [
            ("strom_produce_appends_total", &self.produce_appends, "Appends of a partition's records from a Produce request to a partition this broker leads."),
            ("strom_replica_fetch_requests_total", &self.replica_fetch_requests, "Followers' Fetch requests answered as a leader."),
            ("strom_replica_fetch_partitions_read_total", &self.replica_fetch_partitions_read, "Partitions read to answer followers' Fetch requests, each read after a wake-up counted again."),
            ("strom_replica_fetch_wakeups_total", &self.replica_fetch_wakeups, "Wake-ups of followers' parked Fetch requests."),
            ("strom_fetcher_requests_total", &self.fetcher_requests, "Fetch requests this broker's replica fetchers sent."),
            ("strom_fetcher_partitions_planned_total", &self.fetcher_partitions_planned, "Partitions whose fetch position the replica fetchers looked up for a request."),
            ("strom_log_cleaner_cleanings_total", &self.log_cleaner_cleanings, "Cleanings of a compacted log the log cleaner completed."),
            ("strom_log_cleaner_bytes_read_total", &self.log_cleaner_bytes_read, "Bytes of segments the log cleaner read."),
            ("strom_log_cleaner_bytes_written_total", &self.log_cleaner_bytes_written, "Bytes of cleaned segments the log cleaner wrote."),
            ("strom_log_cleaner_uncleanable_total", &self.log_cleaner_uncleanable, "Times the log cleaner marked a partition uncleanable (the broker log says why)."),
            ("strom_log_cleaner_abandoned_total", &self.log_cleaner_abandoned, "Cleanings given up with the old segments kept: an I/O error (a full disk) or a log changed under them."),
        ];
        let mut out = String::new();
        for (name, value, help) in counters {
            let value = value.load(Ordering::Relaxed);
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}\n"
            ));
        }
        out
    }
}

/// Reads one HTTP request (its head, at most [`MAX_REQUEST_BYTES`]) and answers it: the
/// counters for `GET /metrics`, 404 for anything else. One request per connection.
pub async fn answer(mut stream: TcpStream, metrics: Arc<BrokerMetrics>) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST_BYTES {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let (status, body) = if head.starts_with(REQUEST_LINE) {
        ("200 OK", metrics.render())
    } else {
        ("404 Not Found", "only GET /metrics is served\n".to_string())
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
}
