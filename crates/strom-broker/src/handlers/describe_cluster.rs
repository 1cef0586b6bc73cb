//! DescribeCluster: the cluster id, the controller and the live brokers of the metadata
//! image (AdminClient's `describeCluster`).

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;

use super::{authorized_operations, RequestContext};

pub fn handle(ctx: &RequestContext<'_>, req: DescribeClusterRequest) -> DescribeClusterResponse {
    let image = ctx.state.metadata.image();
    let brokers = image
        .live_brokers()
        .filter_map(|b| {
            let endpoint = b.endpoint(ctx.listener)?;
            Some(
                DescribeClusterBroker::default()
                    .with_broker_id(BrokerId(b.id.0))
                    .with_host(StrBytes::from_string(endpoint.host.clone()))
                    .with_port(i32::from(endpoint.port))
                    .with_rack(b.rack.clone().map(StrBytes::from_string)),
            )
        })
        .collect();
    DescribeClusterResponse::default()
        .with_cluster_id(StrBytes::from_string(image.cluster_id.clone()))
        .with_controller_id(BrokerId(image.client_controller_id()))
        .with_brokers(brokers)
        .with_cluster_authorized_operations(authorized_operations::answer(
            req.include_cluster_authorized_operations,
            authorized_operations::CLUSTER,
        ))
}
