//! FindCoordinator: with one broker, this broker coordinates every group. Transactions do
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

/// The coordinator of one key, or why there is none.
fn locate(ctx: &RequestContext<'_>, key_type: i8) -> Result<(i32, String, i32), ResponseError> {
    match key_type {
        KEY_TYPE_GROUP => {
            // Every group is coordinated by this broker until the offsets topic is
            // partitioned over a cluster; its endpoint comes from the image.
            let image = ctx.state.metadata.image();
            let node = ctx.state.node_id();
            image
                .brokers
                .get(&strom_metadata::BrokerId(node))
                .filter(|b| !b.fenced)
                .and_then(|b| b.endpoint(ctx.listener))
                .map(|e| (node, e.host.clone(), i32::from(e.port)))
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
                let c = Coordinator::default().with_key(key);
                match locate(ctx, req.key_type) {
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
    match locate(ctx, req.key_type) {
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
