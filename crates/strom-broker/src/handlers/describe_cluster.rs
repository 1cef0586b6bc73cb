//! DescribeCluster: the cluster id, the controller and the brokers (AdminClient's
//! `describeCluster`).

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;

use super::{authorized_operations, RequestContext};

pub fn handle(ctx: &RequestContext<'_>, req: DescribeClusterRequest) -> DescribeClusterResponse {
    let state = ctx.state;
    let broker = DescribeClusterBroker::default()
        .with_broker_id(BrokerId(state.node_id()))
        .with_host(StrBytes::from_string(state.advertised.host.clone()))
        .with_port(state.advertised.port as i32);
    DescribeClusterResponse::default()
        .with_cluster_id(StrBytes::from_string(state.logs.cluster_id().to_string()))
        .with_controller_id(BrokerId(state.node_id()))
        .with_brokers(vec![broker])
        .with_cluster_authorized_operations(authorized_operations::answer(
            req.include_cluster_authorized_operations,
            authorized_operations::CLUSTER,
        ))
}
