//! ListOffsets: earliest, latest, by timestamp (through the time index) and the record
//! with the largest timestamp.

use super::RequestContext;
use crate::replica_manager;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use strom_wire::ApiError;

/// ListOffsets responses carry the leader epoch from v4.
const LEADER_EPOCH_SINCE: i16 = 4;

pub fn handle(ctx: &RequestContext<'_>, req: ListOffsetsRequest) -> ListOffsetsResponse {
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
                    let result = replica_manager::leader(ctx.state, &topic.name, p.partition_index)
                        .and_then(|part| {
                            part.check_leader_epoch(p.current_leader_epoch)?;
                            let found = part
                                .fetch_offset_for_timestamp(p.timestamp)
                                .map_err(ApiError::from)?;
                            Ok((found, part.leader_epoch()))
                        });
                    match result {
                        Ok(((offset, timestamp), epoch)) => response
                            .with_offset(offset)
                            .with_timestamp(timestamp)
                            .with_leader_epoch(if ctx.version >= LEADER_EPOCH_SINCE {
                                epoch
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
