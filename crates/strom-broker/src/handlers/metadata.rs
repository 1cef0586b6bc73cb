//! Metadata: brokers, controller and topics with their partitions. Unknown topics are
//! created here when the client allows it and `auto.create.topics.enable` is set, as
//! Kafka does.

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::{authorized_operations, RequestContext};
use crate::topic::Topic;

pub fn handle(ctx: &RequestContext<'_>, req: MetadataRequest) -> MetadataResponse {
    let state = ctx.state;
    let node = state.node_id();
    let logs = &state.logs;
    let broker = MetadataResponseBroker::default()
        .with_node_id(BrokerId(node))
        .with_host(StrBytes::from_string(state.advertised.host.clone()))
        .with_port(state.advertised.port as i32);
    let all = match &req.topics {
        None => true,
        Some(t) => t.is_empty() && ctx.version == 0,
    };
    let topic_operations = authorized_operations::answer(
        req.include_topic_authorized_operations,
        authorized_operations::TOPIC,
    );
    let describe = |t: &Topic| describe(t, node).with_topic_authorized_operations(topic_operations);
    let topics = if all {
        logs.topics().iter().map(|t| describe(t)).collect()
    } else {
        let auto_create =
            state.config.auto_create_topics && (ctx.version < 4 || req.allow_auto_topic_creation);
        req.topics
            .unwrap_or_default()
            .into_iter()
            .map(|requested| {
                let by_id = requested.name.is_none() && !requested.topic_id.is_nil();
                let found = match &requested.name {
                    Some(name) if auto_create => logs.topic(name).or_else(|| {
                        // A concurrent request may create it first: then look it up again.
                        logs.create_topic(
                            name,
                            state.config.num_partitions,
                            Default::default(),
                            false,
                        )
                        .ok()
                        .or_else(|| logs.topic(name))
                    }),
                    Some(name) => logs.topic(name),
                    None => logs.topic_by_id(requested.topic_id),
                };
                match found {
                    Some(topic) => describe(&topic),
                    None => {
                        let error = match &requested.name {
                            Some(name) if crate::topic::validate_topic_name(name).is_err() => {
                                ResponseError::InvalidTopicException
                            }
                            _ if by_id => ResponseError::UnknownTopicId,
                            _ => ResponseError::UnknownTopicOrPartition,
                        };
                        MetadataResponseTopic::default()
                            .with_error_code(error.code())
                            .with_name(requested.name)
                            .with_topic_id(requested.topic_id)
                    }
                }
            })
            .collect()
    };
    MetadataResponse::default()
        .with_brokers(vec![broker])
        .with_cluster_id(Some(StrBytes::from_string(logs.cluster_id().to_string())))
        .with_controller_id(BrokerId(node))
        .with_topics(topics)
        .with_cluster_authorized_operations(authorized_operations::answer(
            req.include_cluster_authorized_operations,
            authorized_operations::CLUSTER,
        ))
}

fn describe(topic: &Topic, node: i32) -> MetadataResponseTopic {
    let partitions = (0..topic.partition_count())
        .map(|p| {
            MetadataResponsePartition::default()
                .with_partition_index(p)
                .with_leader_id(BrokerId(node))
                .with_leader_epoch(0)
                .with_replica_nodes(vec![BrokerId(node)])
                .with_isr_nodes(vec![BrokerId(node)])
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.name.clone()))))
        .with_topic_id(topic.id)
        .with_is_internal(topic.is_internal())
        .with_partitions(partitions)
}
