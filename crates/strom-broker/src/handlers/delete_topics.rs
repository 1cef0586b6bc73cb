//! DeleteTopics, by name (all versions) or by id (v6+).

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::RequestContext;
use strom_wire::ApiError;

pub async fn handle(ctx: &RequestContext<'_>, req: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let image = ctx.state.metadata.image();
    let mut targets: Vec<(Option<TopicName>, Uuid)> = req
        .topic_names
        .into_iter()
        .map(|n| (Some(n), Uuid::nil()))
        .collect();
    targets.extend(req.topics.into_iter().map(|t| (t.name, t.topic_id)));
    let mut responses = Vec::with_capacity(targets.len());
    for (name, id) in targets {
        {
            let name = name.or_else(|| {
                image
                    .topic_by_id(id)
                    .map(|t| TopicName(StrBytes::from_string(t.name.clone())))
            });
            let result = DeletableTopicResult::default().with_name(name.clone());
            let outcome = match &name {
                Some(n) => {
                    crate::admin::delete_topic(
                        ctx.state,
                        n,
                        crate::admin::request_timeout(req.timeout_ms),
                    )
                    .await
                }
                None => Err(ApiError::new(
                    ResponseError::UnknownTopicId,
                    "unknown topic id",
                )),
            };
            responses.push(match outcome {
                Ok(deleted_id) => result.with_topic_id(deleted_id),
                Err(e) => result
                    .with_topic_id(id)
                    .with_error_code(e.code())
                    .with_error_message(Some(StrBytes::from_string(e.message))),
            });
        }
    }
    DeleteTopicsResponse::default().with_responses(responses)
}
