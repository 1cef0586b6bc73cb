//! A consumer that reads through the faults, as Jepsen's Kafka test polls while its
//! nemesis works, and the checks of what it saw against the final read-back.
//!
//! The read-back after the run shows what the log kept; only a reader during the faults
//! can show what consumers were served meanwhile. Offsets are contiguous here (no
//! transactions, no compaction), so one consumer that never seeks must see each
//! partition's offsets one after another: an offset at or below the previous one is a
//! rewind (Jepsen's nonmonotonic poll: a position reset, or a record served twice), one
//! beyond the next is a skip (records a consumer never saw). And a consumer is served
//! only records below the high watermark, which no failover truncates, so every record
//! it saw must be in the final log at the same offset with the same value: a difference
//! is a read of a record that was later truncated (Jepsen's inconsistent offsets).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

/// What the watching consumer was served, in order, per partition: (offset, value).
#[derive(Debug, Default)]
pub struct Watched {
    pub served: BTreeMap<i32, Vec<(i64, usize)>>,
    /// Errors the consumer reported, by message (an offset reset among them).
    pub errors: BTreeMap<String, usize>,
}

/// What the checks found in what the watching consumer was served.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WatchFindings {
    /// Records served.
    pub served: usize,
    /// (partition, previous offset, offset) where a partition's offset did not grow.
    pub rewound: Vec<(i32, i64, i64)>,
    /// (partition, previous offset, offset) where offsets were skipped.
    pub skipped: Vec<(i32, i64, i64)>,
    /// (partition, offset, value served, value kept) where the final log differs.
    pub diverged: Vec<(i32, i64, usize, Option<usize>)>,
    /// Errors the consumer reported, by message: what it met, not a broken promise.
    pub errors: BTreeMap<String, usize>,
}

impl WatchFindings {
    pub fn holds(&self) -> bool {
        self.rewound.is_empty() && self.skipped.is_empty() && self.diverged.is_empty()
    }
}

/// The watching consumer's thread; it stops when finished or dropped (a run that ends
/// early).
pub struct Watcher {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Watched>>,
}

impl Watcher {
    /// Stops polling and hands over what was served.
    pub fn finish(mut self) -> Watched {
        self.stop.store(true, Ordering::Release);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// Starts a consumer of every partition of `topic` from its beginning that polls until
/// it is finished, on a thread of its own. Offsets are never reset: a position out of
/// range is an error it reports, not a jump it hides (`auto.offset.reset=error`).
///
/// It starts at offset 0 (nothing is deleted during a run), not at the logical
/// beginning: librdkafka 2.12 resolves that with a ListOffsets, and when its first one
/// went to a leader that was then killed, the retry reached the restarted broker after
/// the partition had moved on and was answered FENCED_LEADER_EPOCH, as Kafka answers a
/// stale leader epoch; librdkafka took that late answer as a reason to ask for the
/// beginning again and served the partition from offset 0 a second time (a client
/// quirk akin to librdkafka#4620, seen in one run in two with `--network`).
pub fn start(bootstrap: &str, topic: &str, partitions: i32) -> Result<Watcher> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "faults-watch")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "error")
        .set("topic.metadata.refresh.interval.ms", "1000")
        .create()
        .context("the watching consumer")?;
    let mut assignment = TopicPartitionList::new();
    for p in 0..partitions {
        assignment.add_partition_offset(topic, p, Offset::Offset(0))?;
    }
    consumer.assign(&assignment)?;
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let thread = std::thread::spawn(move || {
        let mut watched = Watched::default();
        while !stopped.load(Ordering::Acquire) {
            match consumer.poll(Duration::from_millis(100)) {
                None => {}
                Some(Err(e)) => *watched.errors.entry(e.to_string()).or_default() += 1,
                Some(Ok(message)) => {
                    let value = std::str::from_utf8(message.payload().unwrap_or_default())
                        .ok()
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(usize::MAX);
                    watched
                        .served
                        .entry(message.partition())
                        .or_default()
                        .push((message.offset(), value));
                }
            }
        }
        watched
    });
    Ok(Watcher {
        stop,
        thread: Some(thread),
    })
}

/// Checks what was served against `kept`, the final log: (partition, offset) → value.
pub fn check(watched: Watched, kept: &BTreeMap<(i32, i64), usize>) -> WatchFindings {
    let mut findings = WatchFindings {
        errors: watched.errors,
        ..WatchFindings::default()
    };
    for (p, served) in &watched.served {
        findings.served += served.len();
        let mut previous: Option<i64> = None;
        for (offset, value) in served {
            match previous {
                Some(prev) if *offset <= prev => findings.rewound.push((*p, prev, *offset)),
                Some(prev) if *offset > prev + 1 => findings.skipped.push((*p, prev, *offset)),
                None if *offset > 0 => findings.skipped.push((*p, -1, *offset)),
                _ => {}
            }
            previous = Some(previous.map_or(*offset, |prev| prev.max(*offset)));
            let kept = kept.get(&(*p, *offset)).copied();
            if kept != Some(*value) {
                findings.diverged.push((*p, *offset, *value, kept));
            }
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rewind_a_skip_and_a_truncated_read_are_each_found() {
        let kept: BTreeMap<(i32, i64), usize> = [
            ((0, 0), 10),
            ((0, 1), 11),
            ((0, 2), 12),
            ((1, 0), 20),
            ((1, 1), 21),
        ]
        .into();
        let clean = Watched {
            served: [(0, vec![(0, 10), (1, 11), (2, 12)]), (1, vec![(0, 20)])].into(),
            ..Watched::default()
        };
        let found = check(clean, &kept);
        assert!(found.holds(), "{found:?}");
        assert_eq!(found.served, 4);

        let broken = Watched {
            served: [
                (0, vec![(0, 10), (2, 12), (1, 11)]),
                (1, vec![(0, 20), (1, 99), (2, 22)]),
            ]
            .into(),
            ..Watched::default()
        };
        let found = check(broken, &kept);
        assert_eq!(found.skipped, [(0, 0, 2)]);
        assert_eq!(found.rewound, [(0, 2, 1)]);
        assert_eq!(found.diverged, [(1, 1, 99, Some(21)), (1, 2, 22, None)]);
        assert!(!found.holds());
    }
}
