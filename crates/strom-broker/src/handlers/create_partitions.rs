//! CreatePartitions: grow a topic's partition count.

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::standalone_controller;

pub fn handle(ctx: &RequestContext<'_>, req: CreatePartitionsRequest) -> CreatePartitionsResponse {
    let results = req
        .topics
        .into_iter()
        .map(|t| {
            let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
            match standalone_controller::create_partitions(
                ctx.state,
                &t.name,
                t.count,
                req.validate_only,
            ) {
                Ok(()) => result,
                Err(e) => result
                    .with_error_code(e.code())
                    .with_error_message(Some(StrBytes::from_string(e.message))),
            }
        })
        .collect();
    CreatePartitionsResponse::default().with_results(results)
}
