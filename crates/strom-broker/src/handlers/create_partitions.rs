//! CreatePartitions: grow a topic's partition count.

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;

pub async fn handle(
    ctx: &RequestContext<'_>,
    req: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
        results.push(
            match crate::admin::create_partitions(
                ctx.state,
                &t.name,
                t.count,
                req.validate_only,
                crate::admin::request_timeout(req.timeout_ms),
            )
            .await
            {
                Ok(()) => result,
                Err(e) => result
                    .with_error_code(e.code())
                    .with_error_message(Some(StrBytes::from_string(e.message))),
            },
        );
    }
    CreatePartitionsResponse::default().with_results(results)
}
