//! FindCoordinator: the broker that coordinates a group (this one on a standalone node). Transactions do
//! not exist yet: a transaction coordinator lookup gets a fatal error with a message
//! saying so, because the retriable COORDINATOR_NOT_AVAILABLE made transactional
//! producers wait out their whole timeout before failing.
//!
//! v0–v3 ask for one key; v4+ batch keys into `coordinator_keys` and get one entry each.

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::RequestContext;

/// FindCoordinator v4+ carries the keys in a list.
const BATCHED_SINCE: i16 = 4;
const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

/// Java's `String.hashCode`, which Kafka uses to spread groups.
fn java_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, c| {
        h.wrapping_mul(31).wrapping_add(i32::from(c as i16))
    })
}

/// The broker that coordinates group `key`: this node on a standalone node; in a
/// cluster, one of the live brokers chosen by the group id's hash (as Kafka hashes a
/// group to a partition of `__consumer_offsets`), so every broker gives the same answer.
/// Group state (committed offsets) stays on the broker that coordinated it: it is not
/// yet replicated through an internal topic.
fn group_coordinator(ctx: &RequestContext<'_>, key: &str) -> Option<strom_metadata::BrokerId> {
    let image = ctx.state.metadata.image();
    if ctx.state.quorum.is_none() {
        return Some(strom_metadata::BrokerId(ctx.state.node_id()));
    }
    let live: Vec<_> = image.live_brokers().map(|b| b.id).collect();
    if live.is_empty() {
        return None;
    }
    let index = (java_hash(key) & 0x7fff_ffff) as usize % live.len();
    Some(live[index])
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

pub fn handle(ctx: &RequestContext<'_>, req: FindCoordinatorRequest) -> FindCoordinatorResponse {
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
