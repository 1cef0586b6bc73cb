//! The controller listener's Kafka-protocol requests, beside its JSON frames: AlterPartition
//! (56), the call a partition leader makes to change an ISR, in Kafka's own wire format
//! (versions 2–3, topic ids, and in v3 each new member's broker epoch, KIP-903), and
//! ApiVersions so that a Kafka client can learn which versions this listener speaks.
//!
//! A frame is Kafka's when its first byte is zero: every API key is below 256, so a Kafka
//! request starts with a zero byte where a JSON frame starts with `{` or `"`.

use bytes::Bytes;
use kafka_protocol::messages::alter_partition_response::{PartitionData, TopicData};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{
    AlterPartitionRequest, AlterPartitionResponse, ApiKey, ApiVersionsRequest, ApiVersionsResponse,
    RequestKind,
};
use kafka_protocol::protocol::Message;
use strom_metadata::BrokerId;
use strom_wire::WireError;

use crate::quorum_controller::QuorumController;
use crate::rpc::{IsrChange, IsrChangeResult};

/// Whether a frame's body is a Kafka request rather than JSON.
pub fn is_kafka_frame(body: &[u8]) -> bool {
    body.first() == Some(&0)
}

/// Answers one Kafka request frame (its body, after the size prefix) with a whole response
/// frame. A request this listener does not serve, or one that does not decode, is an
/// error: the connection is closed, as for a JSON frame that does not decode.
pub async fn handle(controller: &QuorumController, frame: Bytes) -> Result<Bytes, WireError> {
    let request = strom_wire::decode_request(frame)?;
    let correlation_id = request.header.correlation_id;
    let version = request.header.request_api_version;
    match request.body {
        RequestKind::ApiVersions(_) => strom_wire::encode_response(
            ApiKey::ApiVersions as i16,
            correlation_id,
            version,
            &api_versions(),
        ),
        RequestKind::AlterPartition(r) => {
            let response = alter_partition(controller, r).await;
            strom_wire::encode_response(
                ApiKey::AlterPartition as i16,
                correlation_id,
                version,
                &response,
            )
        }
        _ => Err(WireError::UnknownApiKey(request.api_key as i16)),
    }
}

/// The APIs of this listener's Kafka side.
fn api_versions() -> ApiVersionsResponse {
    let key = |key: ApiKey, min: i16, max: i16| {
        ApiVersion::default()
            .with_api_key(key as i16)
            .with_min_version(min)
            .with_max_version(max)
    };
    ApiVersionsResponse::default().with_api_keys(vec![
        key(
            ApiKey::ApiVersions,
            ApiVersionsRequest::VERSIONS.min,
            ApiVersionsRequest::VERSIONS.max,
        ),
        key(
            ApiKey::AlterPartition,
            AlterPartitionRequest::VERSIONS.min,
            AlterPartitionRequest::VERSIONS.max,
        ),
    ])
}

/// AlterPartition: the request's changes to the controller, its results back in Kafka's
/// shape, per topic in the order the request named them.
async fn alter_partition(
    controller: &QuorumController,
    request: AlterPartitionRequest,
) -> AlterPartitionResponse {
    let changes: Vec<IsrChange> = request
        .topics
        .iter()
        .flat_map(|topic| {
            topic.partitions.iter().map(|p| {
                let (new_isr, new_isr_epochs) = if p.new_isr_with_epochs.is_empty() {
                    (
                        p.new_isr.iter().map(|b| BrokerId(b.0)).collect(),
                        vec![-1; p.new_isr.len()],
                    )
                } else {
                    p.new_isr_with_epochs
                        .iter()
                        .map(|b| (BrokerId(b.broker_id.0), b.broker_epoch))
                        .unzip()
                };
                IsrChange {
                    topic_id: topic.topic_id,
                    partition_id: p.partition_index,
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                    new_isr,
                    new_isr_epochs,
                }
            })
        })
        .collect();
    let results = match controller
        .alter_partition(BrokerId(request.broker_id.0), request.broker_epoch, changes)
        .await
    {
        Ok(results) => results,
        Err(e) => return AlterPartitionResponse::default().with_error_code(e.code),
    };
    let mut topics: Vec<TopicData> = Vec::new();
    for result in results {
        let partition = partition_data(&result);
        match topics.last_mut().filter(|t| t.topic_id == result.topic_id) {
            Some(topic) => topic.partitions.push(partition),
            None => topics.push(
                TopicData::default()
                    .with_topic_id(result.topic_id)
                    .with_partitions(vec![partition]),
            ),
        }
    }
    AlterPartitionResponse::default().with_topics(topics)
}

fn partition_data(result: &IsrChangeResult) -> PartitionData {
    let data = PartitionData::default().with_partition_index(result.partition_id);
    match &result.result {
        Ok(altered) => data
            .with_leader_id(altered.leader.0.into())
            .with_leader_epoch(altered.leader_epoch)
            .with_isr(altered.isr.iter().map(|b| b.0.into()).collect())
            .with_partition_epoch(altered.partition_epoch),
        Err(e) => data.with_error_code(e.code),
    }
}

/// The AlterPartition version brokers send: v3, with each new member's broker epoch.
pub const ALTER_PARTITION_VERSION: i16 = 3;

/// A leader's proposed ISRs as Kafka's AlterPartition request, topics in the order of
/// their first change.
pub fn alter_partition_request(
    broker_id: BrokerId,
    broker_epoch: i64,
    changes: &[IsrChange],
) -> AlterPartitionRequest {
    use kafka_protocol::messages::alter_partition_request::{
        BrokerState, PartitionData as Proposed, TopicData as ProposedTopic,
    };
    let mut topics: Vec<ProposedTopic> = Vec::new();
    for change in changes {
        let partition = Proposed::default()
            .with_partition_index(change.partition_id)
            .with_leader_epoch(change.leader_epoch)
            .with_partition_epoch(change.partition_epoch)
            .with_new_isr_with_epochs(
                change
                    .new_isr
                    .iter()
                    .zip(&change.new_isr_epochs)
                    .map(|(b, epoch)| {
                        BrokerState::default()
                            .with_broker_id(b.0.into())
                            .with_broker_epoch(*epoch)
                    })
                    .collect(),
            );
        match topics.iter_mut().find(|t| t.topic_id == change.topic_id) {
            Some(topic) => topic.partitions.push(partition),
            None => topics.push(
                ProposedTopic::default()
                    .with_topic_id(change.topic_id)
                    .with_partitions(vec![partition]),
            ),
        }
    }
    AlterPartitionRequest::default()
        .with_broker_id(broker_id.0.into())
        .with_broker_epoch(broker_epoch)
        .with_topics(topics)
}

/// Each change's result from an AlterPartition answer, in the order of `changes`; a
/// top-level error fails them all, and a partition the answer leaves out fails alone.
pub fn alter_partition_results(
    changes: &[IsrChange],
    response: &AlterPartitionResponse,
) -> Result<Vec<IsrChangeResult>, crate::rpc::RpcError> {
    use crate::rpc::{AlteredPartition, RpcError};
    if response.error_code != 0 {
        return Err(RpcError::new(
            response.error_code,
            format!("AlterPartition failed with error {}", response.error_code),
        ));
    }
    Ok(changes
        .iter()
        .map(|change| {
            let answered = response
                .topics
                .iter()
                .filter(|t| t.topic_id == change.topic_id)
                .flat_map(|t| &t.partitions)
                .find(|p| p.partition_index == change.partition_id);
            let result = match answered {
                None => Err(RpcError::new(
                    crate::rpc::codes::UNKNOWN_SERVER_ERROR,
                    "The controller's AlterPartition answer left this partition out.",
                )),
                Some(p) if p.error_code != 0 => Err(RpcError::new(
                    p.error_code,
                    format!("AlterPartition refused with error {}", p.error_code),
                )),
                Some(p) => Ok(AlteredPartition {
                    leader: BrokerId(p.leader_id.0),
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                    isr: p.isr.iter().map(|b| BrokerId(b.0)).collect(),
                }),
            };
            IsrChangeResult {
                topic_id: change.topic_id,
                partition_id: change.partition_id,
                result,
            }
        })
        .collect())
}
