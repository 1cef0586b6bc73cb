//! DeleteGroups: removes groups without members, with their committed offsets.

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

use super::{error_code, RequestContext};

pub async fn handle(ctx: &RequestContext<'_>, req: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let mut results = Vec::with_capacity(req.groups_names.len());
    for group_id in req.groups_names {
        let result = match ctx.state.groups.delete_group(&group_id) {
            Ok(write) => {
                write
                    .replicated(ctx.state.config.offsets_commit_timeout)
                    .await
            }
            Err(e) => Err(e),
        };
        results.push(
            DeletableGroupResult::default()
                .with_group_id(group_id)
                .with_error_code(error_code(result.err())),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}
