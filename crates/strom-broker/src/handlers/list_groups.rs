//! ListGroups: every group, optionally filtered by state (v4+) and type (v5+).

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;

/// Every group strom coordinates uses the classic protocol.
const GROUP_TYPE: &str = "classic";

pub fn handle(ctx: &RequestContext<'_>, req: ListGroupsRequest) -> ListGroupsResponse {
    let wants = |filter: &[StrBytes], value: &str| {
        filter.is_empty() || filter.iter().any(|f| f.eq_ignore_ascii_case(value))
    };
    let groups = ctx
        .state
        .groups
        .list_groups()
        .into_iter()
        .filter(|g| {
            wants(&req.states_filter, g.state.name()) && wants(&req.types_filter, GROUP_TYPE)
        })
        .map(|g| {
            ListedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(g.group_id)))
                .with_protocol_type(StrBytes::from_string(g.protocol_type))
                .with_group_state(StrBytes::from_static_str(g.state.name()))
                .with_group_type(StrBytes::from_static_str(GROUP_TYPE))
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}
