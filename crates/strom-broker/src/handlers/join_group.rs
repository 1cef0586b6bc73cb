//! JoinGroup: enter (or re-enter) a group's rebalance and wait for it to complete.
//!
//! The response is sent when the join phase ends, as in Kafka: the connection's next
//! request waits, which is what clients expect (they use the coordinator connection for
//! the group protocol only).

use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};
use kafka_protocol::protocol::StrBytes;

use super::{error_code, RequestContext};
use strom_coordinator::group::JoinParams;

/// v4+: a member without an id is first given one and asked to rejoin with it (KIP-394).
const MEMBER_ID_REQUIRED_SINCE: i16 = 4;
/// v0 has no rebalance timeout: the session timeout serves as both.
const REBALANCE_TIMEOUT_SINCE: i16 = 1;

fn str_opt(s: Option<String>) -> Option<StrBytes> {
    s.map(StrBytes::from_string)
}

pub async fn handle(ctx: &RequestContext<'_>, req: JoinGroupRequest) -> JoinGroupResponse {
    let params = JoinParams {
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.map(|s| s.to_string()),
        client_id: ctx.client_id.to_string(),
        client_host: ctx.client_host(),
        session_timeout_ms: req.session_timeout_ms,
        rebalance_timeout_ms: if ctx.version >= REBALANCE_TIMEOUT_SINCE {
            req.rebalance_timeout_ms
        } else {
            req.session_timeout_ms
        },
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .into_iter()
            .map(|p| (p.name.to_string(), p.metadata))
            .collect(),
        require_known_member_id: ctx.version >= MEMBER_ID_REQUIRED_SINCE,
        max_size: usize::MAX,
        initial_rebalance_delay_ms: 0,
    };
    let outcome = ctx.state.groups.join(&req.group_id, params).await;
    let members = outcome
        .members
        .into_iter()
        .map(|m| {
            JoinGroupResponseMember::default()
                .with_member_id(StrBytes::from_string(m.member_id))
                .with_group_instance_id(str_opt(m.group_instance_id))
                .with_metadata(m.metadata)
        })
        .collect();
    JoinGroupResponse::default()
        .with_error_code(error_code(outcome.error))
        .with_generation_id(outcome.generation_id)
        .with_protocol_type(str_opt(outcome.protocol_type))
        .with_protocol_name(str_opt(outcome.protocol_name))
        .with_leader(StrBytes::from_string(outcome.leader))
        .with_member_id(StrBytes::from_string(outcome.member_id))
        .with_members(members)
}
