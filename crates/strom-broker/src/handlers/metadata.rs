//! Metadata: brokers, controller and topics with their partitions, read from the
//! metadata image (each broker's endpoint for the listener the request came in on).
//! Unknown topics are created here when the client allows it and
//! `auto.create.topics.enable` is set, as Kafka does.

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::{authorized_operations, RequestContext};
use strom_metadata::{MetadataImage, TopicImage};

/// How long a Metadata request waits for a topic it auto-creates: the topic is then in
/// this answer; a quorum without majority must not hold the answer up longer.
const AUTO_CREATE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

pub async fn handle(ctx: &RequestContext<'_>, req: MetadataRequest) -> MetadataResponse {
    let state = ctx.state;
    let all = match &req.topics {
        None => true,
        Some(t) => t.is_empty() && ctx.version == 0,
    };
    let topic_operations = authorized_operations::answer(
        req.include_topic_authorized_operations,
        authorized_operations::TOPIC,
    );
    let auto_create =
        state.config.auto_create_topics && (ctx.version < 4 || req.allow_auto_topic_creation);
    // Auto-create first, so the image read below holds the new topics.
    if !all && auto_create {
        for name in req.topics.iter().flatten().filter_map(|t| t.name.as_ref()) {
            if state.metadata.image().topic(name).is_none() {
                // A concurrent request may create it first: the image then has it anyway.
                let spec = crate::admin::TopicSpec {
                    name: name.to_string(),
                    partitions: state.config.num_partitions,
                    replication_factor: -1,
                    assignments: Vec::new(),
                    configs: Default::default(),
                };
                if let Err(e) =
                    crate::admin::create_topic(state, spec, false, AUTO_CREATE_TIMEOUT).await
                {
                    tracing::debug!(topic = %name.as_str(), error = %e.message, "auto-creation failed");
                }
            }
        }
    }
    let image = state.metadata.image();
    let describe =
        |t: &TopicImage| describe(&image, t).with_topic_authorized_operations(topic_operations);
    let topics = if all {
        image.topics().map(|t| describe(t)).collect()
    } else {
        req.topics
            .unwrap_or_default()
            .into_iter()
            .map(|requested| {
                let by_id = requested.name.is_none() && !requested.topic_id.is_nil();
                let found = match &requested.name {
                    Some(name) => image.topic(name),
                    None => image.topic_by_id(requested.topic_id),
                };
                match found {
                    Some(topic) => describe(topic),
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
    let brokers = image
        .live_brokers()
        .filter_map(|b| {
            let endpoint = b.endpoint(ctx.listener)?;
            Some(
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(b.id.0))
                    .with_host(StrBytes::from_string(endpoint.host.clone()))
                    .with_port(i32::from(endpoint.port))
                    .with_rack(b.rack.clone().map(StrBytes::from_string)),
            )
        })
        .collect();
    MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(Some(StrBytes::from_string(image.cluster_id.clone())))
        .with_controller_id(BrokerId(image.client_controller_id()))
        .with_topics(topics)
        .with_cluster_authorized_operations(authorized_operations::answer(
            req.include_cluster_authorized_operations,
            authorized_operations::CLUSTER,
        ))
}

/// A topic as Metadata describes it: per partition the leader and its epoch (none, and
/// LEADER_NOT_AVAILABLE, as Kafka's, while no replica leads it), the replicas, the ISR,
/// and the replicas on brokers that are not live (offline).
fn describe(image: &MetadataImage, topic: &TopicImage) -> MetadataResponseTopic {
    let ids = |v: &[strom_metadata::BrokerId]| v.iter().map(|b| BrokerId(b.0)).collect();
    let partitions = topic
        .partitions
        .iter()
        .enumerate()
        .map(|(p, registration)| {
            MetadataResponsePartition::default()
                .with_error_code(if registration.has_leader() {
                    0
                } else {
                    ResponseError::LeaderNotAvailable.code()
                })
                .with_partition_index(p as i32)
                .with_leader_id(BrokerId(registration.leader.0))
                .with_leader_epoch(registration.leader_epoch.0)
                .with_replica_nodes(ids(&registration.replicas))
                .with_isr_nodes(ids(&registration.isr))
                .with_offline_replicas(
                    registration
                        .replicas
                        .iter()
                        .filter(|r| image.brokers.get(r).is_none_or(|b| b.fenced))
                        .map(|b| BrokerId(b.0))
                        .collect(),
                )
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.name.clone()))))
        .with_topic_id(topic.id)
        .with_is_internal(topic.is_internal())
        .with_partitions(partitions)
}
