//! Produce: validate and append each partition's record set, then acknowledge.
//!
//! Validation (Kafka's `LogValidator`) and the topic's rewrites (recompression,
//! LogAppendTime) happen in the log's append; its record errors (KIP-467) are returned
//! per partition; a partition led elsewhere gets NOT_LEADER_OR_FOLLOWER with its leader
//! (KIP-951). With a single replica, an append is committed as soon as it is written, so acks=1 and
//! acks=all are answered at the same point; acks=0 gets no response at all.

use std::collections::BTreeMap;

use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse,
    TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::RequestContext;
use crate::{replica_manager, ApiError};

pub fn handle(ctx: &RequestContext<'_>, req: ProduceRequest) -> Option<ProduceResponse> {
    let acks = req.acks;
    let acks_error = (!matches!(acks, -1..=1)).then(|| {
        ApiError::new(
            ResponseError::InvalidRequiredAcks,
            "Produce request specified an invalid value for required acks.",
        )
    });
    // KIP-951: NOT_LEADER_OR_FOLLOWER carries the current leader and its endpoint (v10+),
    // so the client need not refresh its metadata first.
    let mut endpoints = BTreeMap::new();
    let responses = req
        .topic_data
        .into_iter()
        .map(|topic| {
            let partitions = topic
                .partition_data
                .into_iter()
                .map(|data| {
                    let response = PartitionProduceResponse::default()
                        .with_index(data.index)
                        .with_log_append_time_ms(-1);
                    let result = match &acks_error {
                        Some(e) => Err(e.clone()),
                        None => replica_manager::leader(ctx.state, &topic.name, data.index)
                            .and_then(|p| {
                                let records = data.records.unwrap_or_default();
                                p.append(&records).map_err(ApiError::from)
                            }),
                    };
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
                                    data.index,
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
