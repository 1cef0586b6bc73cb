//! OffsetForLeaderEpoch: the end offset of a leader epoch, which consumers use to detect
//! log truncation (KIP-320). A single-replica partition has only ever had epoch 0, so
//! the end offset of any epoch at or above 0 is the log end offset.

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use kafka_protocol::ResponseError;

use super::RequestContext;
use crate::replica_manager;

pub fn handle(
    ctx: &RequestContext<'_>,
    req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .into_iter()
                .map(|p| {
                    let response = EpochEndOffset::default().with_partition(p.partition);
                    let partition =
                        match replica_manager::leader(ctx.state, &topic.topic, p.partition) {
                            Ok(partition) => partition,
                            Err(e) => {
                                return response
                                    .with_error_code(e.code())
                                    .with_leader_epoch(-1)
                                    .with_end_offset(-1)
                            }
                        };
                    if p.current_leader_epoch > partition.leader_epoch() {
                        return response
                            .with_error_code(ResponseError::UnknownLeaderEpoch.code())
                            .with_leader_epoch(-1)
                            .with_end_offset(-1);
                    }
                    let (epoch, end_offset) = partition.end_offset_for_epoch(p.leader_epoch);
                    response
                        .with_leader_epoch(epoch)
                        .with_end_offset(end_offset)
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic)
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}
