//! InitProducerId for idempotent producers. Transactions are not supported yet, so a
//! transactional id is refused rather than half-served.

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use kafka_protocol::ResponseError;

use super::RequestContext;

pub fn handle(ctx: &RequestContext<'_>, req: InitProducerIdRequest) -> InitProducerIdResponse {
    let response = InitProducerIdResponse::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    if req.transactional_id.is_some() {
        return response.with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    if req.producer_id.0 >= 0 && req.producer_epoch >= 0 {
        // KIP-360: an idempotent producer bumping its own epoch after an error.
        if req.producer_epoch == i16::MAX {
            return match ctx.state.producer_ids.next_id() {
                Ok(id) => response
                    .with_producer_id(ProducerId(id))
                    .with_producer_epoch(0),
                Err(_) => response.with_error_code(ResponseError::KafkaStorageError.code()),
            };
        }
        return response
            .with_producer_id(req.producer_id)
            .with_producer_epoch(req.producer_epoch + 1);
    }
    match ctx.state.producer_ids.next_id() {
        Ok(id) => response
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(e) => {
            tracing::error!(error = %e, "cannot allocate producer id");
            response.with_error_code(ResponseError::KafkaStorageError.code())
        }
    }
}
