//! LeaveGroup: members leave and the rest rebalance without waiting for a session
//! timeout. v0–v2 name one member; v3+ batch members, possibly by group.instance.id.

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};

use super::{error_code, RequestContext};

/// LeaveGroup v3+ batches members (KIP-345).
const BATCHED_SINCE: i16 = 3;

pub fn handle(ctx: &RequestContext<'_>, req: LeaveGroupRequest) -> LeaveGroupResponse {
    let batched = ctx.version >= BATCHED_SINCE;
    let members: Vec<(String, Option<String>)> = if batched {
        req.members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|s| s.to_string()),
                )
            })
            .collect()
    } else {
        vec![(req.member_id.to_string(), None)]
    };
    match ctx.state.groups.leave(&req.group_id, &members) {
        Err(e) => LeaveGroupResponse::default().with_error_code(e.code()),
        Ok(results) if !batched => {
            LeaveGroupResponse::default().with_error_code(error_code(results[0].err()))
        }
        Ok(results) => {
            let responses = req
                .members
                .into_iter()
                .zip(results)
                .map(|(m, r)| {
                    MemberResponse::default()
                        .with_member_id(m.member_id)
                        .with_group_instance_id(m.group_instance_id)
                        .with_error_code(error_code(r.err()))
                })
                .collect();
            LeaveGroupResponse::default().with_members(responses)
        }
    }
}
