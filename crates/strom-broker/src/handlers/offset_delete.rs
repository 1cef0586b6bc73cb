//! OffsetDelete: removes committed offsets of topics the group no longer consumes.

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};

use super::{error_code, RequestContext};

pub async fn handle(ctx: &RequestContext<'_>, req: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let partitions = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.to_string(), p.partition_index))
        })
        .collect();
    let results = match ctx.state.groups.delete_offsets(&req.group_id, partitions) {
        Ok((results, write)) => match write
            .replicated(ctx.state.config.offsets_commit_timeout)
            .await
        {
            Ok(()) => results,
            Err(e) => return OffsetDeleteResponse::default().with_error_code(e.code()),
        },
        Err(e) => return OffsetDeleteResponse::default().with_error_code(e.code()),
    };
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let error = results
                        .iter()
                        .find(|((topic, index), _)| {
                            t.name.as_str() == topic.as_str() && *index == p.partition_index
                        })
                        .and_then(|(_, e)| *e);
                    OffsetDeleteResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(error_code(error))
                })
                .collect();
            OffsetDeleteResponseTopic::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    OffsetDeleteResponse::default().with_topics(topics)
}
