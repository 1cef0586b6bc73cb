//! FindCoordinator: the broker that coordinates a group — the leader of the group's
//! partition of `__consumer_offsets`, which the
//! first lookup creates (answering COORDINATOR_NOT_AVAILABLE until it has leaders, as
//! Kafka does). Transactions do
//! not exist yet: a transaction coordinator lookup gets a fatal error with a message
//! saying so, because the retriable COORDINATOR_NOT_AVAILABLE made transactional
//! producers wait out their whole timeout before failing.
//!
//! v0–v3 ask for one key; v4+ batch keys into `coordinator_keys` and get one entry each.

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;
use std::time::Duration;

use kafka_protocol::ResponseError;

use super::RequestContext;
use strom_coordinator::group::offsets_topic::{partition_for, OFFSETS_TOPIC};

/// FindCoordinator v4+ carries the keys in a list.
const BATCHED_SINCE: i16 = 4;
const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

/// How long a lookup waits for the controller to create `__consumer_offsets`.
const CREATE_TIMEOUT: Duration = Duration::from_secs(5);

/// The broker that coordinates group `key`: the leader of the group's partition of
/// `__consumer_offsets`.
fn group_coordinator(ctx: &RequestContext<'_>, key: &str) -> Option<strom_metadata::BrokerId> {
    let image = ctx.state.metadata.image();
    let topic = image.topic(OFFSETS_TOPIC)?;
    let index = partition_for(key, topic.partitions.len() as i32);
    let leader = topic.partitions.get(usize::try_from(index).ok()?)?.leader;
    (leader.0 >= 0).then_some(leader)
}

/// Creates `__consumer_offsets` if the cluster has none yet, with
/// `offsets.topic.num.partitions`, `offsets.topic.replication.factor` and
/// `offsets.topic.segment.bytes`; a failure (too
/// few live brokers for the replication factor) is logged and the lookup answers
/// COORDINATOR_NOT_AVAILABLE, so clients retry.
async fn create_offsets_topic(ctx: &RequestContext<'_>) {
    let state = ctx.state;
    if state.metadata.image().topic(OFFSETS_TOPIC).is_some() {
        return;
    }
    let spec = crate::admin::TopicSpec {
        name: OFFSETS_TOPIC.to_string(),
        partitions: state.config.offsets_topic_num_partitions,
        replication_factor: state.config.offsets_topic_replication_factor,
        assignments: Vec::new(),
        configs: strom_coordinator::group::offsets_topic::topic_configs(
            state.config.offsets_topic_segment_bytes,
        ),
    };
    match crate::admin::create_topic(state, spec, false, CREATE_TIMEOUT).await {
        Ok(_) => tracing::info!(
            partitions = state.config.offsets_topic_num_partitions,
            replication_factor = state.config.offsets_topic_replication_factor,
            "created __consumer_offsets"
        ),
        Err(e) if e.code == ResponseError::TopicAlreadyExists => {}
        Err(e) => tracing::warn!(
            error = %e.message,
            "could not create __consumer_offsets (offsets.topic.replication.factor is {}); groups have no coordinator until it exists",
            state.config.offsets_topic_replication_factor
        ),
    }
}

/// The coordinator of one key, or why there is none.
fn locate(
    ctx: &RequestContext<'_>,
    key_type: i8,
    key: &str,
) -> Result<(i32, String, i32), ResponseError> {
    match key_type {
        KEY_TYPE_GROUP => {
            let image = ctx.state.metadata.image();
            let node = group_coordinator(ctx, key).ok_or(ResponseError::CoordinatorNotAvailable)?;
            image
                .brokers
                .get(&node)
                .filter(|b| !b.fenced)
                .and_then(|b| b.endpoint(ctx.listener))
                .map(|e| (node.0, e.host.clone(), i32::from(e.port)))
                .ok_or(ResponseError::CoordinatorNotAvailable)
        }
        KEY_TYPE_TRANSACTION => Err(ResponseError::TransactionalIdAuthorizationFailed),
        _ => Err(ResponseError::InvalidRequest),
    }
}

/// The message that goes with a lookup's error.
fn message(e: ResponseError) -> StrBytes {
    match e {
        ResponseError::TransactionalIdAuthorizationFailed => {
            StrBytes::from_static_str(TRANSACTIONS_UNSUPPORTED)
        }
        other => StrBytes::from_string(other.to_string()),
    }
}

/// What a transactional client is told until transactions exist.
pub const TRANSACTIONS_UNSUPPORTED: &str =
    "Transactions are not supported by this broker yet (strom): use an idempotent producer (enable.idempotence=true) without transactional.id.";

pub async fn handle(
    ctx: &RequestContext<'_>,
    req: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    if req.key_type == KEY_TYPE_GROUP {
        create_offsets_topic(ctx).await;
    }
    if ctx.version >= BATCHED_SINCE {
        let coordinators = req
            .coordinator_keys
            .into_iter()
            .map(|key| {
                let located = locate(ctx, req.key_type, &key);
                let c = Coordinator::default().with_key(key);
                match located {
                    Ok((node, host, port)) => c
                        .with_node_id(BrokerId(node))
                        .with_host(StrBytes::from_string(host))
                        .with_port(port),
                    Err(e) => c
                        .with_error_code(e.code())
                        .with_error_message(Some(message(e)))
                        .with_node_id(BrokerId(-1))
                        .with_port(-1),
                }
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    match locate(ctx, req.key_type, &req.key) {
        Ok((node, host, port)) => FindCoordinatorResponse::default()
            .with_node_id(BrokerId(node))
            .with_host(StrBytes::from_string(host))
            .with_port(port),
        Err(e) => FindCoordinatorResponse::default()
            .with_error_code(e.code())
            .with_error_message(Some(message(e)))
            .with_node_id(BrokerId(-1))
            .with_port(-1),
    }
}
