//! ApiVersions: what this broker supports, and the KIP-511 answer to versions it does not.
//!
//! [`SUPPORTED`] is the single source of truth: the router refuses anything outside it,
//! so what is advertised is exactly what is handled.

use bytes::Bytes;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};
use kafka_protocol::ResponseError;
use strom_wire::{encode_response, WireError};

use super::RequestContext;

/// (API, highest version handled). The lowest version is the protocol crate's, which
/// follows Kafka 4.0's baseline (KIP-896).
pub const SUPPORTED: &[(ApiKey, i16)] = &[
    (ApiKey::Produce, 12),
    (ApiKey::Fetch, 16),
    (ApiKey::ListOffsets, 9),
    (ApiKey::Metadata, 12),
    (ApiKey::ApiVersions, 4),
    (ApiKey::OffsetForLeaderEpoch, 4),
    (ApiKey::CreateTopics, 7),
    (ApiKey::DeleteTopics, 6),
    (ApiKey::CreatePartitions, 3),
    (ApiKey::DescribeConfigs, 4),
    (ApiKey::AlterConfigs, 2),
    (ApiKey::IncrementalAlterConfigs, 1),
    (ApiKey::DescribeCluster, 1),
    (ApiKey::DescribeQuorum, 2),
    (ApiKey::ElectLeaders, 2),
    (ApiKey::UnregisterBroker, 0),
    (ApiKey::DeleteRecords, 2),
    (ApiKey::InitProducerId, 4),
    (ApiKey::FindCoordinator, 4),
    (ApiKey::JoinGroup, 9),
    (ApiKey::SyncGroup, 5),
    (ApiKey::Heartbeat, 4),
    (ApiKey::LeaveGroup, 5),
    (ApiKey::OffsetCommit, 9),
    (ApiKey::OffsetFetch, 9),
    (ApiKey::ListGroups, 5),
    (ApiKey::DescribeGroups, 5),
    (ApiKey::DeleteGroups, 2),
    (ApiKey::OffsetDelete, 0),
];

/// The supported version range of `key` if `version` is in it.
pub fn supported(key: ApiKey, version: i16) -> Option<(i16, i16)> {
    let (_, max) = SUPPORTED.iter().find(|(k, _)| *k == key)?;
    let min = key.valid_versions().min;
    (min..=*max).contains(&version).then_some((min, *max))
}

fn api_keys() -> Vec<ApiVersion> {
    SUPPORTED
        .iter()
        .map(|(key, max)| {
            ApiVersion::default()
                .with_api_key(*key as i16)
                .with_min_version(key.valid_versions().min)
                .with_max_version(*max)
        })
        .collect()
}

pub fn handle(_ctx: &RequestContext<'_>) -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(api_keys())
}

/// KIP-511: a client that sends a newer ApiVersions than the broker knows gets
/// UNSUPPORTED_VERSION with the supported ranges, encoded as v0 so that it can be read
/// whatever the client sent.
pub fn unsupported_version_response(correlation_id: i32) -> Result<Bytes, WireError> {
    let body = ApiVersionsResponse::default()
        .with_error_code(ResponseError::UnsupportedVersion.code())
        .with_api_keys(api_keys());
    encode_response(ApiKey::ApiVersions as i16, correlation_id, 0, &body)
}
