//! Heartbeat: keeps a member's session alive and tells it when to rejoin.

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use super::{error_code, RequestContext};

pub fn handle(ctx: &RequestContext<'_>, req: HeartbeatRequest) -> HeartbeatResponse {
    let instance = req.group_instance_id.map(|s| s.to_string());
    let result = ctx.state.groups.heartbeat(
        &req.group_id,
        &req.member_id,
        instance.as_ref(),
        req.generation_id,
    );
    HeartbeatResponse::default().with_error_code(error_code(result.err()))
}
