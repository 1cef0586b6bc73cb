//! AlterConfigs: replace a topic's whole set of overrides (the legacy, non-incremental
//! semantics: keys not given return to their defaults).

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use super::config_resource::{unsupported_resource, RESOURCE_TOPIC};
use super::RequestContext;

pub async fn handle(ctx: &RequestContext<'_>, req: AlterConfigsRequest) -> AlterConfigsResponse {
    let mut responses = Vec::with_capacity(req.resources.len());
    for resource in req.resources {
        {
            let outcome = if resource.resource_type == RESOURCE_TOPIC {
                let configs = resource
                    .configs
                    .iter()
                    .filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())))
                    .collect();
                crate::admin::replace_topic_configs(
                    ctx.state,
                    &resource.resource_name,
                    configs,
                    req.validate_only,
                )
                .await
            } else {
                Err(unsupported_resource(resource.resource_type))
            };
            let response = AlterConfigsResourceResponse::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name);
            responses.push(match outcome {
                Ok(()) => response,
                Err(e) => response
                    .with_error_code(e.code())
                    .with_error_message(Some(StrBytes::from_string(e.message))),
            });
        }
    }
    AlterConfigsResponse::default().with_responses(responses)
}
