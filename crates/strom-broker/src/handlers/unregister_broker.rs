//! UnregisterBroker (64): forgets a broker's registration at the active controller, as
//! `kafka-cluster.sh unregister` and the Admin client's `unregisterBroker` ask when a
//! broker is decommissioned for good.

use kafka_protocol::messages::{UnregisterBrokerRequest, UnregisterBrokerResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::admin;

/// The request carries no timeout: the longest an admin write waits.
const TIMEOUT_MS: i32 = 30_000;

pub async fn handle(
    ctx: &RequestContext<'_>,
    req: UnregisterBrokerRequest,
) -> UnregisterBrokerResponse {
    let timeout = admin::request_timeout(TIMEOUT_MS);
    match admin::unregister_broker(ctx.state, req.broker_id.0, timeout).await {
        Ok(()) => UnregisterBrokerResponse::default(),
        Err(e) => UnregisterBrokerResponse::default()
            .with_error_code(e.code())
            .with_error_message(Some(StrBytes::from_string(e.message))),
    }
}
