//! ListOffsets: earliest, latest, by timestamp (through the time index) and the record
//! with the largest timestamp.

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use strom_log::{LogError, PartitionLog};
use strom_wire::records::first_record_at_or_after;

use super::RequestContext;
use crate::ApiError;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
/// ListOffsets responses carry the leader epoch from v4.
const LEADER_EPOCH_SINCE: i16 = 4;

/// (offset, timestamp) for one query; (-1, -1) when no record matches.
fn lookup(log: &PartitionLog, timestamp: i64) -> Result<(i64, i64), LogError> {
    Ok(match timestamp {
        LATEST => (log.log_end_offset(), -1),
        EARLIEST | EARLIEST_LOCAL => (log.log_start_offset(), -1),
        MAX_TIMESTAMP => match log.max_timestamp()? {
            Some((header, bytes)) => first_record_at_or_after(&bytes, header.max_timestamp)
                .unwrap_or((header.base_offset, header.max_timestamp)),
            None => (-1, -1),
        },
        t if t >= 0 => match log.batch_at_timestamp(t)? {
            Some((header, bytes)) => first_record_at_or_after(&bytes, t)
                .map(|(o, ts)| (o.max(log.log_start_offset()), ts))
                .unwrap_or((header.base_offset, header.max_timestamp)),
            None => (-1, -1),
        },
        _ => (-1, -1),
    })
}

pub fn handle(ctx: &RequestContext<'_>, req: ListOffsetsRequest) -> ListOffsetsResponse {
    let logs = &ctx.state.logs;
    let topics = req
        .topics
        .into_iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .into_iter()
                .map(|p| {
                    let response = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index);
                    let result = logs
                        .partition(&topic.name, p.partition_index)
                        .ok_or_else(ApiError::unknown_topic)
                        .and_then(|part| {
                            part.try_with_log(|log| lookup(log, p.timestamp))
                                .map_err(ApiError::from)
                        });
                    match result {
                        Ok((offset, timestamp)) => response
                            .with_offset(offset)
                            .with_timestamp(timestamp)
                            .with_leader_epoch(if ctx.version >= LEADER_EPOCH_SINCE {
                                0
                            } else {
                                -1
                            }),
                        Err(e) => response
                            .with_error_code(e.code())
                            .with_offset(-1)
                            .with_timestamp(-1),
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}
