//! ElectLeaders (43): preferred-replica (0) or unclean (1, v1+) leader elections of the
//! named partitions, or of all of them, decided by the active controller.

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::RequestContext;
use crate::admin;

/// ElectionType UNCLEAN.
const UNCLEAN: i8 = 1;

pub async fn handle(ctx: &RequestContext<'_>, req: ElectLeadersRequest) -> ElectLeadersResponse {
    let unclean = match req.election_type {
        0 => false,
        UNCLEAN => true,
        _ => {
            return ElectLeadersResponse::default()
                .with_error_code(ResponseError::InvalidRequest.code());
        }
    };
    let partitions = req.topic_partitions.map(|topics| {
        topics
            .into_iter()
            .flat_map(|t| {
                let name = t.topic.to_string();
                t.partitions.into_iter().map(move |p| (name.clone(), p))
            })
            .collect()
    });
    let timeout = admin::request_timeout(req.timeout_ms);
    let results = match admin::elect_leaders(ctx.state, unclean, partitions, timeout).await {
        Ok(results) => results,
        Err(e) => return ElectLeadersResponse::default().with_error_code(e.code()),
    };
    let mut by_topic: Vec<ReplicaElectionResult> = Vec::new();
    for (topic, index, result) in results {
        let (code, message) = match result {
            Ok(()) => (0, None),
            Err(e) => (e.code(), Some(StrBytes::from_string(e.message))),
        };
        let partition = PartitionResult::default()
            .with_partition_id(index)
            .with_error_code(code)
            .with_error_message(message);
        match by_topic.last_mut() {
            Some(t) if t.topic.as_str() == topic => t.partition_result.push(partition),
            _ => by_topic.push(
                ReplicaElectionResult::default()
                    .with_topic(StrBytes::from_string(topic).into())
                    .with_partition_result(vec![partition]),
            ),
        }
    }
    ElectLeadersResponse::default().with_replica_election_results(by_topic)
}
