//! DeleteRecords: raise a partition's log start offset; segments wholly below it are
//! deleted. An offset of -1 means the high watermark. As Kafka's, the answer waits (up to
//! the request's timeout) until every ISR member has moved its log start too, and reports
//! the smallest log start over the ISR as the low watermark.

use std::time::Duration;

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use tokio::time::Instant;

use super::RequestContext;
use strom_wire::now_ms;

use crate::replica_manager;

pub async fn handle(ctx: &RequestContext<'_>, req: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let deadline = Instant::now() + Duration::from_millis(req.timeout_ms.max(0) as u64);
    let mut topics = Vec::with_capacity(req.topics.len());
    for topic in req.topics {
        // Every partition's log start moves first, then the waits share one deadline.
        let started: Vec<_> = topic
            .partitions
            .into_iter()
            .map(|p| {
                let outcome = replica_manager::leader(ctx.state, &topic.name, p.partition_index)
                    .and_then(|part| {
                        let log_start = part.delete_records_before(p.offset, now_ms())?;
                        Ok((part, log_start))
                    });
                (p.partition_index, outcome)
            })
            .collect();
        let mut partitions = Vec::with_capacity(started.len());
        for (index, outcome) in started {
            let result = DeleteRecordsPartitionResult::default().with_partition_index(index);
            let waited = match outcome {
                Ok((part, log_start)) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    part.wait_for_low_watermark(log_start, left).await
                }
                Err(e) => Err(e),
            };
            partitions.push(match waited {
                Ok(low) => result.with_low_watermark(low),
                Err(e) => result.with_error_code(e.code()).with_low_watermark(-1),
            });
        }
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    DeleteRecordsResponse::default().with_topics(topics)
}
