//! The request router and one handler module per API.
//!
//! [`handle`] decodes a frame, checks the version against what ApiVersions advertises,
//! dispatches to the API's handler and encodes its response. Handlers take the decoded
//! request and return the response body; they choose Kafka error codes themselves.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestKind};
use strom_wire::request::peek_header;
use strom_wire::{
    decode_request, encode_response, encode_response_frame, ResponseFrame, WireError,
};

use crate::BrokerState;
use strom_replica::partition::FetchedRecords;

pub mod alter_configs;
pub mod api_versions;
pub mod authorized_operations;
pub mod config_resource;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_quorum;
pub mod elect_leaders;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod sync_group;
pub mod unregister_broker;

/// KIP-951's `current_leader` for a partition answered NOT_LEADER_OR_FOLLOWER, from a
/// [`crate::replica_manager::LeaderHint`], and the leader's endpoint added to the
/// response's `node_endpoints` (keyed by broker id). A macro because Produce and Fetch
/// each have their own generated `LeaderIdAndEpoch` and `NodeEndpoint` types.
macro_rules! leader_hint {
    ($leader:ty, $endpoint:ty, $hint:expr, $endpoints:expr) => {{
        let mut current = <$leader>::default();
        if let Some(h) = $hint {
            current = current
                .with_leader_id(kafka_protocol::messages::BrokerId(h.leader_id))
                .with_leader_epoch(h.leader_epoch);
            $endpoints.insert(
                h.leader_id,
                <$endpoint>::default()
                    .with_node_id(kafka_protocol::messages::BrokerId(h.leader_id))
                    .with_host(kafka_protocol::protocol::StrBytes::from_string(h.host))
                    .with_port(i32::from(h.port))
                    .with_rack(h.rack.map(kafka_protocol::protocol::StrBytes::from_string)),
            );
        }
        current
    }};
}
pub(crate) use leader_hint;

/// What a handler gets besides its request.
pub struct RequestContext<'a> {
    pub state: &'a Arc<BrokerState>,
    /// The version the client chose; handlers use it for version-dependent fields.
    pub version: i16,
    /// The header's client id (group members are described with it).
    pub client_id: &'a str,
    /// The client's address.
    pub peer: SocketAddr,
    /// The listener the request came in on: brokers are described by their endpoint of
    /// that listener, as Kafka does.
    pub listener: &'a str,
}

impl RequestContext<'_> {
    /// The client's address as Kafka shows it in DescribeGroups (`/127.0.0.1`); formatted
    /// only by the requests that keep it, not for every request.
    pub fn client_host(&self) -> String {
        format!("/{}", self.peer.ip())
    }
}

/// A response frame: encoded bytes, and for a fetch its records where they lie (log ranges,
/// or what was read into memory).
pub type Response = ResponseFrame<FetchedRecords>;

/// Handles one request frame. `Ok(None)` means no response is sent (produce with
/// acks=0); `Err` means the connection must be closed.
pub async fn handle(
    state: &Arc<BrokerState>,
    listener: &str,
    peer: SocketAddr,
    frame: Bytes,
) -> Result<Option<Response>, WireError> {
    let prefix = peek_header(&frame)?;
    if prefix.api_key == ApiKey::ApiVersions as i16
        && api_versions::supported(ApiKey::ApiVersions, prefix.api_version).is_none()
    {
        return api_versions::unsupported_version_response(prefix.correlation_id)
            .map(|bytes| Some(bytes.into()));
    }
    let request = decode_request(frame)?;
    let version = request.header.request_api_version;
    if api_versions::supported(request.api_key, version).is_none() {
        return Err(WireError::UnsupportedVersion {
            api_key: prefix.api_key,
            version,
        });
    }
    let client_id = request.header.client_id.as_deref().unwrap_or_default();
    let ctx = RequestContext {
        state,
        version,
        client_id,
        peer,
        listener,
    };
    let key = prefix.api_key;
    let cid = request.header.correlation_id;
    macro_rules! respond {
        ($body:expr) => {
            encode_response(key, cid, version, &$body).map(|bytes| Some(bytes.into()))
        };
    }
    match request.body {
        RequestKind::ApiVersions(_) => respond!(api_versions::handle(&ctx)),
        RequestKind::Metadata(r) => respond!(metadata::handle(&ctx, r).await),
        RequestKind::Produce(r) => match produce::handle(&ctx, r).await {
            Some(body) => respond!(body),
            None => Ok(None),
        },
        RequestKind::Fetch(r) => {
            let (body, records) = fetch::handle(&ctx, r).await;
            encode_response_frame(key, cid, version, &body, records).map(Some)
        }
        RequestKind::ListOffsets(r) => respond!(list_offsets::handle(&ctx, r)),
        RequestKind::OffsetForLeaderEpoch(r) => respond!(offset_for_leader_epoch::handle(&ctx, r)),
        RequestKind::CreateTopics(r) => respond!(create_topics::handle(&ctx, r).await),
        RequestKind::DeleteTopics(r) => respond!(delete_topics::handle(&ctx, r).await),
        RequestKind::CreatePartitions(r) => respond!(create_partitions::handle(&ctx, r).await),
        RequestKind::DescribeConfigs(r) => respond!(describe_configs::handle(&ctx, r)),
        RequestKind::AlterConfigs(r) => respond!(alter_configs::handle(&ctx, r).await),
        RequestKind::IncrementalAlterConfigs(r) => {
            respond!(incremental_alter_configs::handle(&ctx, r).await)
        }
        RequestKind::DescribeCluster(r) => respond!(describe_cluster::handle(&ctx, r)),
        RequestKind::DescribeQuorum(r) => respond!(describe_quorum::handle(&ctx, r).await),
        RequestKind::ElectLeaders(r) => respond!(elect_leaders::handle(&ctx, r).await),
        RequestKind::UnregisterBroker(r) => respond!(unregister_broker::handle(&ctx, r).await),
        RequestKind::DeleteRecords(r) => respond!(delete_records::handle(&ctx, r).await),
        RequestKind::InitProducerId(r) => respond!(init_producer_id::handle(&ctx, r).await),
        RequestKind::FindCoordinator(r) => respond!(find_coordinator::handle(&ctx, r).await),
        RequestKind::JoinGroup(r) => respond!(join_group::handle(&ctx, r).await),
        RequestKind::SyncGroup(r) => respond!(sync_group::handle(&ctx, r).await),
        RequestKind::Heartbeat(r) => respond!(heartbeat::handle(&ctx, r)),
        RequestKind::LeaveGroup(r) => respond!(leave_group::handle(&ctx, r)),
        RequestKind::OffsetCommit(r) => respond!(offset_commit::handle(&ctx, r).await),
        RequestKind::OffsetFetch(r) => respond!(offset_fetch::handle(&ctx, r)),
        RequestKind::ListGroups(r) => respond!(list_groups::handle(&ctx, r)),
        RequestKind::DescribeGroups(r) => respond!(describe_groups::handle(&ctx, r)),
        RequestKind::DeleteGroups(r) => respond!(delete_groups::handle(&ctx, r).await),
        RequestKind::OffsetDelete(r) => respond!(offset_delete::handle(&ctx, r).await),
        _ => Err(WireError::UnsupportedVersion {
            api_key: key,
            version,
        }),
    }
}

/// The wire code of an optional error: 0 (NONE) when there is none.
pub fn error_code(error: Option<kafka_protocol::ResponseError>) -> i16 {
    error.map_or(0, |e| e.code())
}
