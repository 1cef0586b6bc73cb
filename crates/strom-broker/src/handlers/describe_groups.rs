//! DescribeGroups: state, protocol and members (with metadata and assignment once the
//! group is stable) of each group. A group that does not exist is described as `Dead`
//! with no error, as Kafka does before v6.

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::{authorized_operations, RequestContext};
use strom_coordinator::group::GroupState;

pub fn handle(ctx: &RequestContext<'_>, req: DescribeGroupsRequest) -> DescribeGroupsResponse {
    let operations = authorized_operations::answer(
        req.include_authorized_operations,
        authorized_operations::GROUP,
    );
    let groups = req
        .groups
        .into_iter()
        .map(|group_id| {
            let described = DescribedGroup::default().with_authorized_operations(operations);
            if group_id.is_empty() {
                return described
                    .with_group_id(group_id)
                    .with_error_code(ResponseError::InvalidGroupId.code());
            }
            let d = match ctx.state.groups.describe(&group_id) {
                Ok(Some(d)) => d,
                Ok(None) => {
                    return described
                        .with_group_id(group_id)
                        .with_group_state(StrBytes::from_static_str(GroupState::Dead.name()))
                }
                Err(e) => return described.with_group_id(group_id).with_error_code(e.code()),
            };
            let members = d
                .members
                .into_iter()
                .map(|m| {
                    DescribedGroupMember::default()
                        .with_member_id(StrBytes::from_string(m.member_id))
                        .with_group_instance_id(m.group_instance_id.map(StrBytes::from_string))
                        .with_client_id(StrBytes::from_string(m.client_id))
                        .with_client_host(StrBytes::from_string(m.client_host))
                        .with_member_metadata(m.metadata)
                        .with_member_assignment(m.assignment)
                })
                .collect();
            described
                .with_group_id(group_id)
                .with_group_state(StrBytes::from_static_str(d.state.name()))
                .with_protocol_type(StrBytes::from_string(d.protocol_type))
                .with_protocol_data(StrBytes::from_string(d.protocol_name))
                .with_members(members)
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}
