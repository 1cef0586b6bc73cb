//! OffsetCommit: a member (or a client without group management) stores its positions.
//!
//! The group decides whether the committer may commit (membership, generation); each
//! partition must exist and its metadata fit `offset.metadata.max.bytes`. Accepted
//! offsets are durable when the response is sent: replicated in `__consumer_offsets`
//! (waiting up to `offsets.commit.timeout.ms`).

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};
use kafka_protocol::ResponseError;

use super::{error_code, RequestContext};
use strom_coordinator::group::CommittedOffset;
use strom_wire::now_ms;

pub async fn handle(ctx: &RequestContext<'_>, req: OffsetCommitRequest) -> OffsetCommitResponse {
    let state = ctx.state;
    let now = now_ms();
    let max_metadata = state.config.offset_metadata_max_bytes;
    // The error of each partition, topic by topic, and the offsets to write.
    let mut errors: Vec<Vec<Option<ResponseError>>> = Vec::with_capacity(req.topics.len());
    let mut accepted = Vec::new();
    let image = state.metadata.image();
    for topic in &req.topics {
        let found = image.topic(&topic.name);
        let mut topic_errors = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let metadata = p.committed_metadata.as_deref().unwrap_or_default();
            let exists = found.is_some_and(|t| {
                usize::try_from(p.partition_index).is_ok_and(|i| i < t.partitions.len())
            });
            let error = if !exists {
                Some(ResponseError::UnknownTopicOrPartition)
            } else if metadata.len() > max_metadata {
                Some(ResponseError::OffsetMetadataTooLarge)
            } else {
                accepted.push((
                    (topic.name.to_string(), p.partition_index),
                    CommittedOffset {
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata: metadata.to_string(),
                        commit_timestamp: now,
                    },
                ));
                None
            };
            topic_errors.push(error);
        }
        errors.push(topic_errors);
    }
    let instance = req.group_instance_id.as_ref().map(|s| s.to_string());
    let written = state.groups.commit_offsets(
        &req.group_id,
        &req.member_id,
        instance.as_ref(),
        req.generation_id_or_member_epoch,
        accepted,
    );
    let group_error = match written {
        Ok(write) => write
            .replicated(state.config.offsets_commit_timeout)
            .await
            .err(),
        Err(e) => Some(e),
    };
    let topics = req
        .topics
        .into_iter()
        .zip(errors)
        .map(|(topic, topic_errors)| {
            let partitions = topic
                .partitions
                .iter()
                .zip(topic_errors)
                .map(|(p, e)| {
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(error_code(e.or(group_error)))
                })
                .collect();
            OffsetCommitResponseTopic::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}
