//! DescribeQuorum (55): the metadata quorum as its active controller sees it (leader,
//! epoch, high watermark, each voter's and observer's log end and last fetch), forwarded
//! to the active controller as Kafka's brokers forward it.

use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{
    BrokerId, DescribeQuorumRequest, DescribeQuorumResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use strom_controller::rpc::{Request, Response};

use super::RequestContext;
use crate::topic::CLUSTER_METADATA_TOPIC as METADATA_TOPIC;

/// Nodes (voter endpoints) are in the response from v2.
const NODES_SINCE: i16 = 2;

fn replica(r: &strom_controller::rpc::ReplicaState) -> ReplicaState {
    ReplicaState::default()
        .with_replica_id(BrokerId(r.replica_id))
        .with_log_end_offset(r.log_end_offset)
        .with_last_fetch_timestamp(r.last_fetch_timestamp)
        .with_last_caught_up_timestamp(r.last_caught_up_timestamp)
}

pub async fn handle(
    ctx: &RequestContext<'_>,
    req: DescribeQuorumRequest,
) -> DescribeQuorumResponse {
    let asks_metadata = req.topics.iter().all(|t| {
        t.topic_name.as_str() == METADATA_TOPIC
            && t.partitions.iter().all(|p| p.partition_index == 0)
    });
    if !asks_metadata || req.topics.is_empty() {
        return DescribeQuorumResponse::default()
            .with_error_code(ResponseError::InvalidRequest.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "DescribeQuorum describes only __cluster_metadata, partition 0.",
            )));
    }
    let answer = ctx
        .state
        .quorum
        .client
        .call(
            || Request::DescribeQuorum,
            std::time::Duration::from_secs(5),
            std::time::Duration::from_secs(15),
        )
        .await;
    let info = match answer {
        Ok(Response::DescribeQuorum(Ok(info))) => Ok(info),
        Ok(Response::DescribeQuorum(Err(e))) => Err(e.message),
        Ok(other) => Err(format!("unexpected controller response {other:?}")),
        Err(e) => Err(e.to_string()),
    };
    let info = match info {
        Ok(info) => info,
        Err(message) => {
            return DescribeQuorumResponse::default()
                .with_error_code(ResponseError::RequestTimedOut.code())
                .with_error_message(Some(StrBytes::from_string(message)))
        }
    };
    let partition = PartitionData::default()
        .with_partition_index(0)
        .with_leader_id(BrokerId(info.leader_id))
        .with_leader_epoch(info.leader_epoch)
        .with_high_watermark(info.high_watermark)
        .with_current_voters(info.voters.iter().map(replica).collect())
        .with_observers(info.observers.iter().map(replica).collect());
    let nodes = info
        .voter_endpoints
        .iter()
        .filter_map(|(id, addr)| {
            let (host, port) = addr.rsplit_once(':')?;
            let listener = ctx
                .state
                .config
                .kraft
                .controller_listener_names
                .first()
                .cloned()
                .unwrap_or_else(|| "CONTROLLER".to_string());
            Some(Node::default().with_node_id(BrokerId(*id)).with_listeners(
                vec![Listener::default()
                    .with_name(StrBytes::from_string(listener))
                    .with_host(StrBytes::from_string(host.to_string()))
                    .with_port(port.parse().ok()?)],
            ))
        })
        .collect();
    DescribeQuorumResponse::default()
        .with_topics(vec![TopicData::default()
            .with_topic_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
            .with_partitions(vec![partition])])
        .with_nodes(if ctx.version >= NODES_SINCE {
            nodes
        } else {
            Vec::new()
        })
}
