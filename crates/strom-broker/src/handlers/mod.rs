//! The request router and one handler module per API.
//!
//! [`handle`] decodes a frame, checks the version against what ApiVersions advertises,
//! dispatches to the API's handler and encodes its response. Handlers take the decoded
//! request and return the response body; they choose Kafka error codes themselves.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestKind};
use strom_wire::request::peek_header;
use strom_wire::{decode_request, encode_response, WireError};

use crate::BrokerState;

pub mod alter_configs;
pub mod api_versions;
pub mod config_resource;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_configs;
pub mod fetch;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod list_offsets;
pub mod metadata;
pub mod offset_for_leader_epoch;
pub mod produce;

/// What a handler gets besides its request.
pub struct RequestContext<'a> {
    pub state: &'a Arc<BrokerState>,
    /// The version the client chose; handlers use it for version-dependent fields.
    pub version: i16,
}

/// Handles one request frame. `Ok(None)` means no response is sent (produce with
/// acks=0); `Err` means the connection must be closed.
pub async fn handle(state: &Arc<BrokerState>, frame: Bytes) -> Result<Option<Bytes>, WireError> {
    let prefix = peek_header(&frame)?;
    if prefix.api_key == ApiKey::ApiVersions as i16
        && api_versions::supported(ApiKey::ApiVersions, prefix.api_version).is_none()
    {
        return api_versions::unsupported_version_response(prefix.correlation_id).map(Some);
    }
    let request = decode_request(frame)?;
    let version = request.header.request_api_version;
    if api_versions::supported(request.api_key, version).is_none() {
        return Err(WireError::UnsupportedVersion {
            api_key: prefix.api_key,
            version,
        });
    }
    let ctx = RequestContext { state, version };
    let key = prefix.api_key;
    let cid = request.header.correlation_id;
    macro_rules! respond {
        ($body:expr) => {
            encode_response(key, cid, version, &$body).map(Some)
        };
    }
    match request.body {
        RequestKind::ApiVersions(_) => respond!(api_versions::handle(&ctx)),
        RequestKind::Metadata(r) => respond!(metadata::handle(&ctx, r)),
        RequestKind::Produce(r) => match produce::handle(&ctx, r) {
            Some(body) => respond!(body),
            None => Ok(None),
        },
        RequestKind::Fetch(r) => respond!(fetch::handle(&ctx, r).await),
        RequestKind::ListOffsets(r) => respond!(list_offsets::handle(&ctx, r)),
        RequestKind::OffsetForLeaderEpoch(r) => respond!(offset_for_leader_epoch::handle(&ctx, r)),
        RequestKind::CreateTopics(r) => respond!(create_topics::handle(&ctx, r)),
        RequestKind::DeleteTopics(r) => respond!(delete_topics::handle(&ctx, r)),
        RequestKind::CreatePartitions(r) => respond!(create_partitions::handle(&ctx, r)),
        RequestKind::DescribeConfigs(r) => respond!(describe_configs::handle(&ctx, r)),
        RequestKind::AlterConfigs(r) => respond!(alter_configs::handle(&ctx, r)),
        RequestKind::IncrementalAlterConfigs(r) => {
            respond!(incremental_alter_configs::handle(&ctx, r))
        }
        RequestKind::DescribeCluster(r) => respond!(describe_cluster::handle(&ctx, r)),
        RequestKind::DeleteRecords(r) => respond!(delete_records::handle(&ctx, r)),
        RequestKind::InitProducerId(r) => respond!(init_producer_id::handle(&ctx, r)),
        _ => Err(WireError::UnsupportedVersion {
            api_key: key,
            version,
        }),
    }
}
