//! OffsetForLeaderEpoch: the end offset of a leader epoch, which consumers use to detect
//! log truncation (KIP-320). A single-replica partition has only ever had epoch 0, so
//! the end offset of any epoch at or above 0 is the log end offset.

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use kafka_protocol::ResponseError;

use super::RequestContext;
use crate::ApiError;

pub fn handle(
    ctx: &RequestContext<'_>,
    req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let logs = &ctx.state.logs;
    let topics = req
        .topics
        .into_iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .into_iter()
                .map(|p| {
                    let response = EpochEndOffset::default().with_partition(p.partition);
                    let Some(partition) = logs.partition(&topic.topic, p.partition) else {
                        return response
                            .with_error_code(ApiError::unknown_topic().code())
                            .with_leader_epoch(-1)
                            .with_end_offset(-1);
                    };
                    if p.current_leader_epoch > 0 {
                        return response
                            .with_error_code(ResponseError::UnknownLeaderEpoch.code())
                            .with_leader_epoch(-1)
                            .with_end_offset(-1);
                    }
                    if p.leader_epoch < 0 {
                        return response.with_leader_epoch(-1).with_end_offset(-1);
                    }
                    response
                        .with_leader_epoch(0)
                        .with_end_offset(partition.high_watermark())
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic)
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}
