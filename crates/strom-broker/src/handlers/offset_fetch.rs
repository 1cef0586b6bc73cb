//! OffsetFetch: the committed offsets of a group, or of several groups at once (v8+).
//!
//! A partition without a committed offset answers -1 with no error, as in Kafka; a null
//! topic list asks for every partition the group has an offset for.

use std::collections::BTreeMap;

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::RequestContext;
use strom_coordinator::group::{CommittedOffset, TopicPartition};

/// OffsetFetch v8+ asks for several groups at once (KIP-709).
const MULTI_GROUP_SINCE: i16 = 8;

/// Committed offsets of one group, grouped by topic in request order (or name order).
type TopicOffsets = Vec<(String, Vec<(i32, Option<CommittedOffset>)>)>;

fn fetch(
    ctx: &RequestContext<'_>,
    group: &str,
    topics: Option<Vec<(String, Vec<i32>)>>,
) -> Result<TopicOffsets, ResponseError> {
    let requested: Option<Vec<TopicPartition>> = topics.map(|ts| {
        ts.into_iter()
            .flat_map(|(t, ps)| ps.into_iter().map(move |p| (t.clone(), p)))
            .collect()
    });
    let mut order: Vec<String> = Vec::new();
    let mut by_topic: BTreeMap<String, Vec<(i32, Option<CommittedOffset>)>> = BTreeMap::new();
    for ((topic, partition), committed) in ctx.state.groups.fetch_offsets(group, requested)? {
        if !by_topic.contains_key(&topic) {
            order.push(topic.clone());
        }
        by_topic
            .entry(topic)
            .or_default()
            .push((partition, committed));
    }
    Ok(order
        .into_iter()
        .map(|t| {
            let partitions = by_topic.remove(&t).unwrap_or_default();
            (t, partitions)
        })
        .collect())
}

/// Builds the response's topics from [`fetch`]'s result. The single-group and the
/// multi-group forms use distinct types with the same fields, hence a macro.
macro_rules! topics_response {
    ($offsets:expr, $topic:ty, $partition:ty) => {
        $offsets
            .into_iter()
            .map(|(name, partitions)| {
                let partitions = partitions
                    .into_iter()
                    .map(|(index, committed): (i32, Option<CommittedOffset>)| {
                        let (offset, epoch, metadata) = match committed {
                            Some(c) => {
                                (c.offset, c.leader_epoch, StrBytes::from_string(c.metadata))
                            }
                            None => (-1, -1, StrBytes::default()),
                        };
                        <$partition>::default()
                            .with_partition_index(index)
                            .with_committed_offset(offset)
                            .with_committed_leader_epoch(epoch)
                            .with_metadata(Some(metadata))
                    })
                    .collect();
                <$topic>::default()
                    .with_name(topic_name(name))
                    .with_partitions(partitions)
            })
            .collect()
    };
}

fn topic_name(name: String) -> TopicName {
    TopicName(StrBytes::from_string(name))
}

pub fn handle(ctx: &RequestContext<'_>, req: OffsetFetchRequest) -> OffsetFetchResponse {
    if ctx.version >= MULTI_GROUP_SINCE {
        let groups = req
            .groups
            .into_iter()
            .map(|g| {
                let topics = g.topics.map(|ts| {
                    ts.into_iter()
                        .map(|t| (t.name.to_string(), t.partition_indexes))
                        .collect()
                });
                let group = OffsetFetchResponseGroup::default().with_group_id(g.group_id.clone());
                match fetch(ctx, &g.group_id, topics) {
                    Ok(offsets) => group.with_topics(topics_response!(
                        offsets,
                        OffsetFetchResponseTopics,
                        OffsetFetchResponsePartitions
                    )),
                    Err(e) => group.with_error_code(e.code()),
                }
            })
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let topics = req.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.name.to_string(), t.partition_indexes))
            .collect()
    });
    match fetch(ctx, &req.group_id, topics.clone()) {
        Ok(offsets) => OffsetFetchResponse::default().with_topics(topics_response!(
            offsets,
            OffsetFetchResponseTopic,
            OffsetFetchResponsePartition
        )),
        // v0 and v1 have no top-level error: each requested partition carries it.
        Err(e) => {
            let partitions_with_error = topics
                .unwrap_or_default()
                .into_iter()
                .map(|(name, indexes)| {
                    OffsetFetchResponseTopic::default()
                        .with_name(topic_name(name))
                        .with_partitions(
                            indexes
                                .into_iter()
                                .map(|i| {
                                    OffsetFetchResponsePartition::default()
                                        .with_partition_index(i)
                                        .with_committed_offset(-1)
                                        .with_error_code(e.code())
                                })
                                .collect(),
                        )
                })
                .collect();
            OffsetFetchResponse::default()
                .with_error_code(e.code())
                .with_topics(partitions_with_error)
        }
    }
}
