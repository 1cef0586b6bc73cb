//! Fetch: return whole batches from each requested partition, long-polling until
//! `min_bytes` are available or `max_wait_ms` passes.
//!
//! The wait is woken by appends (each partition notifies its registered fetches), never
//! by a polling loop. Limits follow Kafka: `partition_max_bytes` per partition,
//! `max_bytes` for the response, and the first batch returned may exceed them so that a
//! consumer always progresses (KIP-74).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use std::collections::BTreeMap;

use kafka_protocol::messages::fetch_response::{
    FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData,
};
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use kafka_protocol::ResponseError;
use tokio::sync::Notify;

use super::RequestContext;
use crate::partition::Partition;
use crate::{replica_manager, ApiError};

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

pub async fn handle(ctx: &RequestContext<'_>, req: FetchRequest) -> FetchResponse {
    let wait_ms = (req.max_wait_ms.max(0) as u64).min(MAX_WAIT_CAP_MS);
    let deadline = Instant::now() + Duration::from_millis(wait_ms);
    let waiter = Arc::new(Notify::new());
    let partitions = resolve(ctx, &req);
    loop {
        for (_, _, p) in &partitions {
            if let Ok(partition) = p {
                partition.register_waiter(&waiter);
            }
        }
        let (response, bytes, has_error) = read_all(ctx, &req, &partitions);
        let now = Instant::now();
        if bytes >= req.min_bytes.max(0) as usize || has_error || now >= deadline {
            return response;
        }
        let _ = tokio::time::timeout(deadline - now, waiter.notified()).await;
    }
}

type Resolved = (usize, i32, Result<Arc<Partition>, ApiError>);

/// Looks up every requested partition once: (topic index in the request, partition, log).
fn resolve(ctx: &RequestContext<'_>, req: &FetchRequest) -> Vec<Resolved> {
    let mut out = Vec::new();
    for (ti, topic) in req.topics.iter().enumerate() {
        for p in &topic.partitions {
            let partition = if ctx.version >= TOPIC_IDS_SINCE {
                replica_manager::leader_by_id(ctx.state, topic.topic_id, p.partition)
            } else {
                replica_manager::leader(ctx.state, &topic.topic, p.partition)
            };
            out.push((ti, p.partition, partition));
        }
    }
    out
}

/// Reads every partition once. Returns the response, the record bytes in it and whether
/// any partition had an error (which ends the wait, as in Kafka).
fn read_all(
    ctx: &RequestContext<'_>,
    req: &FetchRequest,
    partitions: &[Resolved],
) -> (FetchResponse, usize, bool) {
    let mut remaining = (req.max_bytes.max(0) as usize).min(ctx.state.config.fetch_max_bytes);
    let mut total = 0usize;
    let mut has_error = false;
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
    let mut requested = req.topics.iter().flat_map(|t| t.partitions.iter());
    let mut endpoints = BTreeMap::new();
    for (ti, index, partition) in partitions {
        let spec = requested.next().expect("one spec per resolved partition");
        let data = PartitionData::default()
            .with_partition_index(*index)
            .with_preferred_read_replica(kafka_protocol::messages::BrokerId(-1));
        let deleted = matches!(partition, Ok(p) if p.is_deleted()).then(ApiError::unknown_topic);
        let data = match deleted.as_ref().map_or(partition.as_ref(), Err) {
            Err(e) => {
                has_error = true;
                let hint = (ctx.version >= CURRENT_LEADER_SINCE
                    && e.code() == ResponseError::NotLeaderOrFollower.code())
                .then(|| {
                    let topic = &req.topics[*ti];
                    let name = if ctx.version >= TOPIC_IDS_SINCE {
                        ctx.state
                            .metadata
                            .image()
                            .topic_by_id(topic.topic_id)
                            .map(|t| t.name.clone())?
                    } else {
                        topic.topic.to_string()
                    };
                    replica_manager::leader_hint(ctx.state, &name, *index, ctx.listener)
                })
                .flatten();
                let current = super::leader_hint!(LeaderIdAndEpoch, NodeEndpoint, hint, endpoints);
                data.with_error_code(e.code())
                    .with_current_leader(current)
                    .with_high_watermark(-1)
                    .with_last_stable_offset(-1)
                    .with_log_start_offset(-1)
                    .with_records(Some(Bytes::new()))
            }
            Ok(p) => {
                let limit = (spec.partition_max_bytes.max(0) as usize).min(remaining);
                let read = p.read(spec.fetch_offset, limit, total == 0);
                let data = data
                    .with_high_watermark(read.high_watermark)
                    .with_last_stable_offset(read.high_watermark)
                    .with_log_start_offset(read.log_start_offset);
                match read.records {
                    Ok(records) => {
                        let n = records.len();
                        total += n;
                        remaining = remaining.saturating_sub(n);
                        data.with_records(Some(records))
                    }
                    Err(e) => {
                        has_error = true;
                        data.with_error_code(ApiError::from(e).code())
                            .with_records(Some(Bytes::new()))
                    }
                }
            }
        };
        topics[*ti].partitions.push(data);
    }
    let endpoints = if ctx.version >= NODE_ENDPOINTS_SINCE {
        endpoints.into_values().collect()
    } else {
        Vec::new()
    };
    (
        FetchResponse::default()
            .with_responses(topics)
            .with_node_endpoints(endpoints),
        total,
        has_error,
    )
}
