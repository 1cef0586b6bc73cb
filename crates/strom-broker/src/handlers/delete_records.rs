//! DeleteRecords: raise a partition's log start offset; segments wholly below it are
//! deleted. An offset of -1 means the high watermark.

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use super::RequestContext;
use crate::{now_ms, ApiError};

pub fn handle(ctx: &RequestContext<'_>, req: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let logs = &ctx.state.logs;
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
                    let outcome = logs
                        .partition(&topic.name, p.partition_index)
                        .ok_or_else(ApiError::unknown_topic)
                        .and_then(|part| {
                            part.try_with_log(|log| {
                                let offset = if p.offset == -1 {
                                    log.log_end_offset()
                                } else {
                                    p.offset
                                };
                                log.delete_records_before(offset, now_ms())
                            })
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
