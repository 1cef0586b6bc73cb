//! AlterConfigs: replace a topic's whole set of overrides (the legacy, non-incremental
//! semantics: keys not given return to their defaults).

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use super::config_resource::{replace_topic_configs, unsupported_resource, RESOURCE_TOPIC};
use super::RequestContext;

pub fn handle(ctx: &RequestContext<'_>, req: AlterConfigsRequest) -> AlterConfigsResponse {
    let responses = req
        .resources
        .into_iter()
        .map(|resource| {
            let outcome = if resource.resource_type == RESOURCE_TOPIC {
                let configs = resource
                    .configs
                    .iter()
                    .filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())))
                    .collect();
                replace_topic_configs(ctx, &resource.resource_name, configs, req.validate_only)
            } else {
                Err(unsupported_resource(resource.resource_type))
            };
            let response = AlterConfigsResourceResponse::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name);
            match outcome {
                Ok(()) => response,
                Err(e) => response
                    .with_error_code(e.code())
                    .with_error_message(Some(StrBytes::from_string(e.message))),
            }
        })
        .collect();
    AlterConfigsResponse::default().with_responses(responses)
}
