//! OffsetForLeaderEpoch: the end offset of a leader epoch, which consumers use to detect
//! log truncation (KIP-320), from the partition's leader-epoch cache.

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::RequestContext;
use crate::replica_manager;
use strom_wire::ApiError;

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
                    let found = partition
                        .check_leader_epoch(p.current_leader_epoch)
                        .and_then(|()| {
                            partition
                                .end_offset_for_epoch(p.leader_epoch)
                                .map_err(ApiError::from)
                        });
                    let (epoch, end_offset) = match found {
                        Ok(found) => found,
                        Err(e) => {
                            return response
                                .with_error_code(e.code())
                                .with_leader_epoch(-1)
                                .with_end_offset(-1)
                        }
                    };
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
