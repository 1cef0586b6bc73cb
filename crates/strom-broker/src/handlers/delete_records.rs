//! DeleteRecords: raise a partition's log start offset; segments wholly below it are
//! deleted. An offset of -1 means the high watermark.

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use super::RequestContext;
use crate::{now_ms, replica_manager, ApiError};

pub fn handle(ctx: &RequestContext<'_>, req: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .into_iter()
                .map(|p| {
                    let result = DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index);
                    let outcome =
                        replica_manager::leader(ctx.state, &topic.name, p.partition_index)
                            .and_then(|part| {
                                part.delete_records_before(p.offset, now_ms())
                                    .map_err(ApiError::from)
                            });
                    match outcome {
                        Ok(low) => result.with_low_watermark(low),
                        Err(e) => result.with_error_code(e.code()).with_low_watermark(-1),
                    }
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    DeleteRecordsResponse::default().with_topics(topics)
}
