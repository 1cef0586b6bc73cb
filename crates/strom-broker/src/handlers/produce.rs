//! Produce: validate and append each partition's record set, then acknowledge.
//!
//! Validation (Kafka's `LogValidator`) and the topic's rewrites (recompression,
//! LogAppendTime) happen in the log's append; its record errors (KIP-467) are returned
//! per partition; a partition led elsewhere gets NOT_LEADER_OR_FOLLOWER with its leader
//! (KIP-951). acks=1 is answered after the leader's append; acks=all once every
//! partition's high watermark has passed its records (each waits in its partition's
//! purgatory, all at once, up to the request's `timeout_ms`); acks=0 gets no response.
//! Clients cannot write to `__consumer_offsets` (INVALID_TOPIC_EXCEPTION, as Kafka
//! answers): only the group coordinator appends to it, and it must be able to read back
//! every record there.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse,
    TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::RequestContext;
use crate::replica_manager;
use strom_coordinator::group::offsets_topic::OFFSETS_TOPIC;
use strom_replica::partition::AppendInfo;
use strom_wire::ApiError;

pub async fn handle(ctx: &RequestContext<'_>, req: ProduceRequest) -> Option<ProduceResponse> {
    let acks = req.acks;
    let timeout = Duration::from_millis(req.timeout_ms.max(0) as u64);
    let acks_error = (!matches!(acks, -1..=1)).then(|| {
        ApiError::new(
            ResponseError::InvalidRequiredAcks,
            "Produce request specified an invalid value for required acks.",
        )
    });
    // KIP-951: NOT_LEADER_OR_FOLLOWER carries the current leader and its endpoint (v10+),
    // so the client need not refresh its metadata first.
    let mut endpoints = BTreeMap::new();
    let mut appended: Vec<Vec<(i32, Result<AppendInfo, ApiError>)>> = Vec::new();
    let mut commits = Vec::new();
    for topic in &req.topic_data {
        let mut results = Vec::new();
        for data in &topic.partition_data {
            let result = match &acks_error {
                Some(e) => Err(e.clone()),
                None if topic.name.as_str() == OFFSETS_TOPIC => Err(ApiError::new(
                    ResponseError::InvalidTopicException,
                    format!("Cannot append to internal topic {OFFSETS_TOPIC}"),
                )),
                None => replica_manager::leader(ctx.state, &topic.name, data.index).and_then(|p| {
                    let records = data.records.as_deref().unwrap_or_default();
                    let (info, commit) = p.append_as_leader(records, acks)?;
                    ctx.state
                        .metrics
                        .produce_appends
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if acks == -1 {
                        commits.push((appended.len(), results.len(), p, commit));
                    }
                    Ok(info)
                }),
            };
            results.push((data.index, result));
        }
        appended.push(results);
    }
    // The waits share one deadline; each checks its partition's state first, so waiting
    // for them one after another takes as long as the slowest.
    let deadline = tokio::time::Instant::now() + timeout;
    for (t, i, p, commit) in commits {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if let Err(e) = p.wait_for_commit(&commit, left).await {
            appended[t][i].1 = Err(e);
        }
    }
    let responses = req
        .topic_data
        .into_iter()
        .zip(appended)
        .map(|(topic, results)| {
            let partitions = results
                .into_iter()
                .map(|(index, result)| {
                    let response = PartitionProduceResponse::default()
                        .with_index(index)
                        .with_log_append_time_ms(-1);
                    match result {
                        Ok(info) => response
                            .with_base_offset(info.base_offset)
                            .with_log_start_offset(info.log_start_offset)
                            .with_log_append_time_ms(info.log_append_time_ms),
                        Err(e) => {
                            let hint = (ctx.version >= LEADER_HINTS_SINCE
                                && e.code() == ResponseError::NotLeaderOrFollower.code())
                            .then(|| {
                                replica_manager::leader_hint(
                                    ctx.state,
                                    &topic.name,
                                    index,
                                    ctx.listener,
                                )
                            })
                            .flatten();
                            let current = super::leader_hint!(
                                LeaderIdAndEpoch,
                                NodeEndpoint,
                                hint,
                                endpoints
                            );
                            response
                                .with_current_leader(current)
                                .with_error_code(e.code())
                                .with_base_offset(-1)
                                .with_log_start_offset(-1)
                                .with_record_errors(
                                    e.record_errors
                                        .into_iter()
                                        .map(|(index, message)| {
                                            BatchIndexAndErrorMessage::default()
                                                .with_batch_index(index)
                                                .with_batch_index_error_message(Some(
                                                    StrBytes::from_string(message),
                                                ))
                                        })
                                        .collect(),
                                )
                                .with_error_message(Some(StrBytes::from_string(e.message)))
                        }
                    }
                })
                .collect();
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_partition_responses(partitions)
        })
        .collect();
    (acks != 0).then(|| {
        ProduceResponse::default()
            .with_responses(responses)
            .with_node_endpoints(endpoints.into_values().collect())
    })
}

/// Produce v10 adds the current leader and node endpoints to NOT_LEADER_OR_FOLLOWER.
const LEADER_HINTS_SINCE: i16 = 10;
