//! AlterConfigs: replace a topic's whole set of overrides, or a broker's whole set of
//! dynamic configs (the legacy, non-incremental semantics: keys not given return to their
//! defaults; kafka-configs.sh alters brokers this way).

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use super::config_resource::{unsupported_resource, RESOURCE_BROKER, RESOURCE_TOPIC};
use super::RequestContext;

pub async fn handle(ctx: &RequestContext<'_>, req: AlterConfigsRequest) -> AlterConfigsResponse {
    let mut responses = Vec::with_capacity(req.resources.len());
    for resource in req.resources {
        {
            let configs = resource
                .configs
                .iter()
                .filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())))
                .collect();
            let outcome = match resource.resource_type {
                RESOURCE_TOPIC => {
                    crate::admin::alter_topic_configs(
                        ctx.state,
                        &resource.resource_name,
                        configs,
                        None,
                        req.validate_only,
                    )
                    .await
                }
                RESOURCE_BROKER => {
                    match crate::dynamic_config::parse_entity(&resource.resource_name) {
                        Ok(entity) => {
                            crate::admin::alter_broker_configs(
                                ctx.state,
                                entity,
                                configs,
                                None,
                                req.validate_only,
                            )
                            .await
                        }
                        Err(e) => Err(e),
                    }
                }
                other => Err(unsupported_resource(other)),
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
