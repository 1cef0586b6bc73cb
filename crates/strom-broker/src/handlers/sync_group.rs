//! SyncGroup: the leader hands in the assignment; every member waits for its share.

use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use strom_coordinator::group::SyncParams;

pub async fn handle(ctx: &RequestContext<'_>, req: SyncGroupRequest) -> SyncGroupResponse {
    let params = SyncParams {
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.map(|s| s.to_string()),
        generation_id: req.generation_id,
        protocol_type: req.protocol_type.map(|s| s.to_string()),
        protocol_name: req.protocol_name.map(|s| s.to_string()),
        assignments: req
            .assignments
            .into_iter()
            .map(|a| (a.member_id.to_string(), a.assignment))
            .collect(),
    };
    match ctx.state.groups.sync(&req.group_id, params).await {
        Ok((protocol_type, protocol_name, assignment)) => SyncGroupResponse::default()
            .with_protocol_type(protocol_type.map(StrBytes::from_string))
            .with_protocol_name(protocol_name.map(StrBytes::from_string))
            .with_assignment(assignment),
        Err(e) => SyncGroupResponse::default().with_error_code(e.code()),
    }
}
