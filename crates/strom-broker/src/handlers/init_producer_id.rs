//! InitProducerId for idempotent producers. Transactions are not supported yet, so a
//! transactional id is refused rather than half-served.

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use kafka_protocol::ResponseError;

use super::RequestContext;

pub async fn handle(
    ctx: &RequestContext<'_>,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let response = InitProducerIdResponse::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    if req.transactional_id.is_some() {
        tracing::info!(transactional_id = ?req.transactional_id, "refused a transactional producer: transactions are not supported yet");
        return response.with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    // Without a transactional id Kafka always hands out a new producer id at epoch 0,
    // whatever producer id and epoch the request carries (TransactionCoordinator.
    // handleInitProducerId): idempotent producers bump their epoch themselves, and
    // @platformatic/kafka sends producer id 0, epoch 0 on every new producer, so echoing
    // them back would make every such producer producer 0 and fail its first Produce
    // with OUT_OF_ORDER_SEQUENCE_NUMBER.
    match crate::admin::next_producer_id(ctx.state).await {
        Ok(id) => response
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(e) => {
            tracing::error!(error = %e.message, "cannot allocate producer id");
            response.with_error_code(e.code())
        }
    }
}
