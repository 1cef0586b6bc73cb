//! DeleteGroups: removes groups without members, with their committed offsets.

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

use super::{error_code, RequestContext};

pub fn handle(ctx: &RequestContext<'_>, req: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let results = req
        .groups_names
        .into_iter()
        .map(|group_id| {
            let result = ctx.state.groups.delete_group(&group_id);
            DeletableGroupResult::default()
                .with_group_id(group_id)
                .with_error_code(error_code(result.err()))
        })
        .collect();
    DeleteGroupsResponse::default().with_results(results)
}
