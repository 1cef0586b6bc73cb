//! Fetch: return whole batches from each requested partition, long-polling until
//! `min_bytes` are available or `max_wait_ms` passes.
//!
//! A consumer reads up to the high watermark; a follower (a `replica_id`, or from v15 a
//! `ReplicaState`, naming a broker) reads up to the log end, and its fetch offset tells
//! the leader how far its log reaches: that moves the high watermark and may add it to
//! the ISR. A follower whose last fetched epoch ended earlier on the leader is told where
//! (`DivergingEpoch`) and truncates before it fetches on.
//!
//! The wait is woken by appends (each partition notifies its registered fetches), never
//! by a polling loop. Limits follow Kafka: `partition_max_bytes` per partition,
//! `max_bytes` for the response, and the first batch returned may exceed them so that a
//! consumer always progresses (KIP-74). Incremental fetch sessions (KIP-227) are kept in
//! [`strom_replica::fetch_session`]: an incremental request reads only the session's
//! active partitions (named, changed, or unsettled), the watches of its partitions wake
//! its long poll, and the answer is then cut to what is new — so a fetch costs what
//! changed, not what the session holds.
//!
//! Records are not copied into the response: each partition's batches go out as a range
//! of their segment file, which the connection sends with `sendfile`, or, for a small
//! read, as the buffer they were read into, written beside the encoded fields with one
//! vectored write (see [`FetchedRecords`]).

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::{
    EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData,
};
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use kafka_protocol::ResponseError;
use strom_metadata::BrokerId;
use strom_wire::TransferableRecords;
use tokio::sync::Notify;

use super::RequestContext;
use crate::replica_manager;
use strom_replica::fetch_session::{self, PartitionKey, SessionWatch, REPLICA_STATE_SINCE};
use strom_replica::partition::{FetchedRecords, Partition};
use strom_replica::partition_watch::Waiter;
use strom_wire::ApiError;

/// Fetch v13+ names topics by id instead of by name.
const TOPIC_IDS_SINCE: i16 = 13;
/// NOT_LEADER_OR_FOLLOWER names the current leader from v12, and its endpoint from v16
/// (KIP-951).
const CURRENT_LEADER_SINCE: i16 = 12;
const NODE_ENDPOINTS_SINCE: i16 = 16;

/// The longest a fetch is parked, whatever its `max_wait_ms` asks (up to 24.8 days in
/// the field). Clients time their requests out after `request.timeout.ms` (30 s by
/// default) anyway, and an empty answer after the cap only makes them fetch again.
pub const MAX_WAIT_CAP_MS: u64 = 30_000;

/// The response, with the file ranges its records stand for.
pub async fn handle(
    ctx: &RequestContext<'_>,
    req: FetchRequest,
) -> (FetchResponse, TransferableRecords<FetchedRecords>) {
    let sessions = &ctx.state.fetch_sessions;
    match sessions.prepare(req, ctx.version, Instant::now()) {
        Ok(prepared) => {
            let read = serve(ctx, &prepared.request, prepared.watch.as_ref()).await;
            let response = sessions.complete(prepared.how, read.response, &read.unsettled);
            (response, read.records)
        }
        Err(e) => (
            FetchResponse::default()
                .with_error_code(e.code())
                .with_session_id(0),
            TransferableRecords::default(),
        ),
    }
}

/// Answers `req` (for an incremental fetch, the active partitions of its session, whose
/// `watch` then wakes the long poll).
async fn serve(ctx: &RequestContext<'_>, req: &FetchRequest, watch: Option<&SessionWatch>) -> Read {
    let wait_ms = (req.max_wait_ms.max(0) as u64).min(MAX_WAIT_CAP_MS);
    let wait = Duration::from_millis(wait_ms);
    let deadline = Instant::now() + watch.map_or(wait, |w| w.max_wait(wait));
    let replica_id = fetch_session::replica_id(req, ctx.version);
    let follower = (replica_id >= 0).then_some(BrokerId(replica_id));
    // The follower's incarnation (KIP-903), which an ISR expansion names; -1 before v15.
    let broker_epoch = if ctx.version >= REPLICA_STATE_SINCE {
        req.replica_state.replica_epoch
    } else {
        -1
    };
    let partitions = resolve(ctx, req, follower.map(|f| (f, broker_epoch)));
    let metrics = &ctx.state.metrics;
    let count = |counter: &AtomicU64, n: usize| {
        if follower.is_some() {
            counter.fetch_add(n as u64, Ordering::Relaxed);
        }
    };
    count(&metrics.replica_fetch_requests, 1);
    let waiter = Arc::new(Notify::new());
    let sessionless: Weak<dyn Waiter> = Arc::downgrade(&waiter) as Weak<Notify>;
    loop {
        for requested in &partitions {
            if let Ok(Resolved {
                partition,
                diverging: None,
                ..
            }) = &requested.resolved
            {
                match watch {
                    Some(watch) => watch.register(&requested.key, partition),
                    None => partition.register_waiter(sessionless.clone()),
                }
            }
        }
        count(&metrics.replica_fetch_partitions_read, partitions.len());
        let read = read_all(ctx, req, &partitions, follower.is_some());
        let now = Instant::now();
        let diverged = partitions
            .iter()
            .any(|p| matches!(&p.resolved, Ok(r) if r.diverging.is_some()));
        let others_changed = watch.is_some_and(SessionWatch::others_changed);
        if read.bytes >= req.min_bytes.max(0) as usize
            || read.has_error
            || diverged
            || others_changed
            || now >= deadline
        {
            return read;
        }
        wait_for_change(watch, &waiter, deadline).await;
        count(&metrics.replica_fetch_wakeups, 1);
    }
}

/// Waits until a partition read changes or `deadline` passes. A session's watches also
/// wake it for a change before this fetch began (its set keeps a permit): that wait
/// goes on, so such a change costs no second read.
async fn wait_for_change(watch: Option<&SessionWatch>, waiter: &Notify, deadline: Instant) {
    let Some(watch) = watch else {
        let _ = tokio::time::timeout_at(deadline.into(), waiter.notified()).await;
        return;
    };
    while tokio::time::timeout_at(deadline.into(), watch.changed())
        .await
        .is_ok()
    {
        if watch.has_changes() {
            return;
        }
    }
}

/// A requested partition this broker leads, and — for a follower whose log diverged —
/// the (epoch, end offset) it must truncate to instead of reading.
struct Resolved {
    partition: Arc<Partition>,
    diverging: Option<(i32, i64)>,
    /// A consumer, or a follower in the ISR: nothing more is due to it while the
    /// partition is unchanged. A follower outside the ISR keeps its partition read at
    /// every fetch of its session, so it joins once it may.
    settled: bool,
}

/// One partition of the request.
struct Requested {
    /// Its topic's index in the request.
    topic: usize,
    /// How its session names it.
    key: PartitionKey,
    resolved: Result<Resolved, ApiError>,
}

/// Looks up every requested partition once, checks the request's leader epoch, and for a
/// follower (its id and broker epoch) checks its last fetched epoch and records its fetch
/// position (proposing it for the ISR when it caught up).
fn resolve(
    ctx: &RequestContext<'_>,
    req: &FetchRequest,
    follower: Option<(BrokerId, i64)>,
) -> Vec<Requested> {
    let mut out = Vec::new();
    // A follower the controller would refuse (fenced, shutting down, or fetching as an
    // incarnation that has since restarted and re-registered) is not proposed for the
    // ISR: each of its fetches would propose it again, a thousand refused AlterPartitions
    // a second while it waits to be unfenced.
    let isr_eligible = follower.is_some_and(|(id, broker_epoch)| {
        ctx.state.metadata.image().is_isr_eligible(id, broker_epoch)
    });
    for (ti, topic) in req.topics.iter().enumerate() {
        for p in &topic.partitions {
            let partition = if ctx.version >= TOPIC_IDS_SINCE {
                replica_manager::leader_by_id(ctx.state, topic.topic_id, p.partition)
            } else {
                replica_manager::leader(ctx.state, &topic.topic, p.partition)
            };
            let resolved = partition.and_then(|partition| {
                partition.check_leader_epoch(p.current_leader_epoch)?;
                let Some((follower, broker_epoch)) = follower else {
                    return Ok(Resolved {
                        partition,
                        diverging: None,
                        settled: true,
                    });
                };
                if p.last_fetched_epoch >= 0 {
                    let (epoch, end) = partition
                        .end_offset_for_epoch(p.last_fetched_epoch)
                        .map_err(ApiError::from)?;
                    if epoch != p.last_fetched_epoch || end < p.fetch_offset {
                        return Ok(Resolved {
                            partition,
                            diverging: Some((epoch, end)),
                            settled: false,
                        });
                    }
                }
                let fetched = partition.record_follower_fetch(
                    follower,
                    broker_epoch,
                    p.fetch_offset,
                    p.log_start_offset,
                    isr_eligible,
                )?;
                if let Some(proposal) = fetched.isr_proposal {
                    ctx.state
                        .replication
                        .isr_changes
                        .propose(partition.clone(), proposal);
                }
                Ok(Resolved {
                    partition,
                    diverging: None,
                    settled: fetched.in_isr,
                })
            });
            out.push(Requested {
                topic: ti,
                key: (topic.topic_id, topic.topic.clone(), p.partition),
                resolved,
            });
        }
    }
    out
}

/// One read of every partition: the response, the file ranges its records stand for,
/// the record bytes in it, whether any partition had an error (which ends the wait, as
/// in Kafka), and the partitions a session must read again even with nothing new (see
/// [`Resolved::settled`], and a read cut short by the response's limit).
#[derive(Default)]
struct Read {
    response: FetchResponse,
    records: TransferableRecords<FetchedRecords>,
    bytes: usize,
    has_error: bool,
    unsettled: HashSet<PartitionKey>,
}

/// Reads every partition once.
fn read_all(
    ctx: &RequestContext<'_>,
    req: &FetchRequest,
    partitions: &[Requested],
    follower: bool,
) -> Read {
    let mut topics: Vec<FetchableTopicResponse> = req
        .topics
        .iter()
        .map(|t| {
            let r = FetchableTopicResponse::default();
            if ctx.version >= TOPIC_IDS_SINCE {
                r.with_topic_id(t.topic_id)
            } else {
                r.with_topic(t.topic.clone())
            }
        })
        .collect();
    let mut read = Read::default();
    let budget = (req.max_bytes.max(0) as usize).min(ctx.state.config.fetch_max_bytes);
    let mut requested = req.topics.iter().flat_map(|t| t.partitions.iter());
    let mut endpoints = BTreeMap::new();
    for Requested {
        topic,
        key,
        resolved,
    } in partitions
    {
        let spec = requested.next().expect("one spec per resolved partition");
        let data = PartitionData::default()
            .with_partition_index(spec.partition)
            .with_preferred_read_replica(kafka_protocol::messages::BrokerId(-1));
        let deleted =
            matches!(resolved, Ok(r) if r.partition.is_deleted()).then(ApiError::unknown_topic);
        let data = match deleted.as_ref().map_or(resolved.as_ref(), Err) {
            Err(e) => {
                read.has_error = true;
                let hint = leader_hint(ctx, &req.topics[*topic], spec.partition, e);
                let current = super::leader_hint!(LeaderIdAndEpoch, NodeEndpoint, hint, endpoints);
                data.with_error_code(e.code())
                    .with_current_leader(current)
                    .with_high_watermark(-1)
                    .with_last_stable_offset(-1)
                    .with_log_start_offset(-1)
                    .with_records(Some(Bytes::new()))
            }
            Ok(Resolved {
                partition: p,
                diverging: Some((epoch, end_offset)),
                ..
            }) => data
                .with_high_watermark(p.high_watermark())
                .with_last_stable_offset(p.high_watermark())
                .with_log_start_offset(-1)
                .with_diverging_epoch(
                    EpochEndOffset::default()
                        .with_epoch(*epoch)
                        .with_end_offset(*end_offset),
                )
                .with_records(Some(Bytes::new())),
            Ok(Resolved {
                partition: p,
                diverging: None,
                settled,
            }) => {
                let limit = (spec.partition_max_bytes.max(0) as usize)
                    .min(budget.saturating_sub(read.bytes));
                let (data, unread) = read.records_of(data, p, spec, limit, follower);
                if !settled || unread {
                    read.unsettled.insert(key.clone());
                }
                data
            }
        };
        topics[*topic].partitions.push(data);
    }
    let endpoints = if ctx.version >= NODE_ENDPOINTS_SINCE {
        endpoints.into_values().collect()
    } else {
        Vec::new()
    };
    read.response = FetchResponse::default()
        .with_responses(topics)
        .with_node_endpoints(endpoints);
    read
}

/// Where a partition's NOT_LEADER_OR_FOLLOWER `e` sends the client (Fetch v12+), when
/// this broker knows a live leader.
fn leader_hint(
    ctx: &RequestContext<'_>,
    topic: &FetchTopic,
    index: i32,
    e: &ApiError,
) -> Option<replica_manager::LeaderHint> {
    if ctx.version < CURRENT_LEADER_SINCE || e.code() != ResponseError::NotLeaderOrFollower.code() {
        return None;
    }
    let name = if ctx.version >= TOPIC_IDS_SINCE {
        ctx.state
            .metadata
            .image()
            .topic_by_id(topic.topic_id)
            .map(|t| t.name.clone())?
    } else {
        topic.topic.to_string()
    };
    replica_manager::leader_hint(ctx.state, &name, index, ctx.listener)
}

impl Read {
    /// Reads `p` from `spec`'s offset, at most `limit` bytes (the first batch of the
    /// response whatever its size), into `data`, adding its records to this read.
    /// Returns the data and whether records below the reader's end were left unread.
    fn records_of(
        &mut self,
        data: PartitionData,
        p: &Partition,
        spec: &FetchPartition,
        limit: usize,
        follower: bool,
    ) -> (PartitionData, bool) {
        let read = p.read(spec.fetch_offset, limit, self.bytes == 0, follower);
        let unread = read.records.as_ref().is_ok_and(|r| r.is_empty())
            && spec.fetch_offset < read.readable_end;
        let data = data
            .with_high_watermark(read.high_watermark)
            .with_last_stable_offset(read.high_watermark)
            .with_log_start_offset(read.log_start_offset);
        let records = read.records.and_then(|records| {
            match self.records.stand_in(records.clone(), records.len()) {
                Some(stand_in) => Ok(stand_in),
                None => match records {
                    FetchedRecords::Memory(bytes) => Ok(bytes),
                    FetchedRecords::File(slice) => slice.read(),
                },
            }
        });
        let data = match records {
            Ok(records) => {
                self.bytes += records.len();
                data.with_records(Some(records))
            }
            Err(e) => {
                self.has_error = true;
                data.with_error_code(ApiError::from(e).code())
                    .with_records(Some(Bytes::new()))
            }
        };
        (data, unread)
    }
}
