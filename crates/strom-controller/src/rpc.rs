//! The controller listener's protocol: length-prefixed frames, one request then one
//! response per connection at a time. Most are JSON: openraft's messages between voters
//! and the broker-to-controller calls of KRaft (BrokerRegistration, BrokerHeartbeat,
//! metadata fetches of observers, forwarded admin writes, producer-id blocks,
//! DescribeQuorum) with Kafka's semantics and error codes — exact Kafka wire compatibility
//! is not their point (strom's voters run openraft, which no JVM voter speaks). The calls a
//! partition leader makes are Kafka's own frames (AlterPartition, 56; see
//! [`crate::kafka_api`]), which the listener tells apart by their first byte. A frame that
//! does not decode closes its connection and nothing else.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request as KafkaRequest};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use strom_metadata::{BrokerId, ConfigResource, Endpoint};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use uuid::Uuid;

use crate::state_machine::MetadataDelta;
use crate::types::{LogId, TypeConfig};

/// The largest frame either side accepts (snapshots travel in openraft's chunks).
pub const MAX_FRAME: usize = 64 << 20;

/// Kafka error codes the controller answers with.
pub mod codes {
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    pub const REQUEST_TIMED_OUT: i16 = 7;
    pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
    pub const INVALID_PARTITIONS: i16 = 37;
    pub const POLICY_VIOLATION: i16 = 44;
    pub const INVALID_REPLICATION_FACTOR: i16 = 38;
    pub const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
    pub const INVALID_CONFIG: i16 = 40;
    pub const NOT_CONTROLLER: i16 = 41;
    pub const INVALID_REQUEST: i16 = 42;
    pub const TOPIC_ALREADY_EXISTS: i16 = 36;
    pub const FENCED_LEADER_EPOCH: i16 = 74;
    pub const STALE_BROKER_EPOCH: i16 = 77;
    pub const PREFERRED_LEADER_NOT_AVAILABLE: i16 = 80;
    pub const ELIGIBLE_LEADERS_NOT_AVAILABLE: i16 = 83;
    pub const ELECTION_NOT_NEEDED: i16 = 84;
    pub const INVALID_UPDATE_VERSION: i16 = 95;
    pub const UNKNOWN_TOPIC_ID: i16 = 100;
    pub const UNKNOWN_SERVER_ERROR: i16 = -1;
    pub const DUPLICATE_BROKER_REGISTRATION: i16 = 101;
    pub const BROKER_ID_NOT_REGISTERED: i16 = 102;
    pub const INCONSISTENT_CLUSTER_ID: i16 = 104;
    pub const INELIGIBLE_REPLICA: i16 = 107;
}

/// A Kafka error code and message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpcError {
    pub code: i16,
    pub message: String,
}

impl RpcError {
    pub fn new(code: i16, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (error {})", self.message, self.code)
    }
}

/// A topic to create.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NewTopic {
    pub name: String,
    /// -1: `num.partitions` of the controller's broker defaults (sent resolved by brokers).
    pub partitions: i32,
    pub replication_factor: i16,
    /// Manual assignment: the replicas of each partition, in partition order.
    pub assignments: Vec<Vec<BrokerId>>,
    /// Validated config overrides.
    pub configs: BTreeMap<String, String>,
}

/// What a created topic looks like.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CreatedTopic {
    pub topic_id: Uuid,
    pub partitions: i32,
    pub replication_factor: i16,
}

/// Admin changes brokers forward to the active controller.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum AdminWrite {
    CreateTopics {
        topics: Vec<NewTopic>,
        validate_only: bool,
    },
    CreatePartitions {
        topic: String,
        count: i32,
        assignments: Vec<Vec<BrokerId>>,
        validate_only: bool,
    },
    DeleteTopics {
        names: Vec<String>,
    },
    /// Sets (`Some`) or removes (`None`) config keys of a resource; with `replace`, every
    /// other key of the resource is removed (AlterConfigs, as opposed to
    /// IncrementalAlterConfigs).
    AlterConfigs {
        resource: ConfigResource,
        changes: Vec<(String, Option<String>)>,
        replace: bool,
        validate_only: bool,
    },
    /// ElectLeaders: PREFERRED or (`unclean`) UNCLEAN elections of the named partitions
    /// (`None`: all).
    ElectLeaders {
        unclean: bool,
        partitions: Option<Vec<(String, i32)>>,
    },
    /// UnregisterBroker: forget a broker's registration (a broker decommissioned for good).
    UnregisterBroker {
        broker_id: BrokerId,
    },
}

/// The answer to an [`AdminWrite`]: one result per item, in order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum AdminResult {
    CreateTopics(Vec<Result<CreatedTopic, RpcError>>),
    CreatePartitions(Result<(), RpcError>),
    DeleteTopics(Vec<Result<Uuid, RpcError>>),
    AlterConfigs(Result<(), RpcError>),
    ElectLeaders(Vec<ElectionResult>),
    UnregisterBroker(Result<(), RpcError>),
}

/// One partition's ElectLeaders result: topic, partition, outcome.
pub type ElectionResult = (String, i32, Result<(), RpcError>);

/// One voter or observer as DescribeQuorum describes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReplicaState {
    pub replica_id: i32,
    pub log_end_offset: i64,
    pub last_fetch_timestamp: i64,
    pub last_caught_up_timestamp: i64,
}

/// DescribeQuorum's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QuorumInfo {
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub high_watermark: i64,
    pub voters: Vec<ReplicaState>,
    pub observers: Vec<ReplicaState>,
    /// Each voter's controller endpoint.
    pub voter_endpoints: Vec<(i32, String)>,
}

/// A request on the controller listener.
#[derive(Debug, Serialize, Deserialize)]
pub enum Request {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<u64>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    /// Kafka's EndQuorumEpoch: the active controller is resigning; start an election now.
    EndQuorumEpoch,
    /// KIP-996's pre-vote, asked before a candidacy: would this voter vote for a candidate
    /// whose log ends at `last_log_id`? A candidacy raises the term whether it wins or not,
    /// and a voter that could not win — cut off from the others, or behind them — raised
    /// it until a live leader was deposed by the higher term when it came back.
    PreVote {
        last_log_id: Option<LogId>,
    },
    BrokerRegistration {
        cluster_id: String,
        broker_id: BrokerId,
        incarnation_id: Uuid,
        endpoints: Vec<Endpoint>,
        rack: Option<String>,
    },
    BrokerHeartbeat {
        cluster_id: String,
        broker_id: BrokerId,
        broker_epoch: i64,
        current_metadata_offset: i64,
        want_fence: bool,
        want_shut_down: bool,
        /// The broker's replicas a storage error took offline, by topic id (as KIP-858's
        /// offline log dirs): the controller moves them out of ISRs and leaderships.
        offline_replicas: Vec<(Uuid, i32)>,
    },
    /// An observer's fetch of the committed metadata after `offset`, waiting up to
    /// `max_wait_ms` for some.
    FetchMetadata {
        cluster_id: String,
        broker_id: BrokerId,
        offset: i64,
        max_wait_ms: u64,
    },
    Admin {
        cluster_id: String,
        write: AdminWrite,
    },
    AllocateProducerIds {
        cluster_id: String,
        broker_id: BrokerId,
        broker_epoch: i64,
    },
    DescribeQuorum,
}

/// One partition's proposed ISR in an AlterPartition, with the leader and partition
/// epochs the leader saw: the partition epoch is the compare-and-set version.
#[derive(Debug, Clone)]
pub struct IsrChange {
    pub topic_id: Uuid,
    pub partition_id: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub new_isr: Vec<BrokerId>,
    /// Each new ISR member's broker epoch as its last Fetch carried it (KIP-903), in
    /// `new_isr`'s order; -1 where unknown (AlterPartition v2 carries none).
    pub new_isr_epochs: Vec<i64>,
}

/// AlterPartition's answer for one partition: its registration after the change, or
/// why the change was refused.
#[derive(Debug, Clone)]
pub struct IsrChangeResult {
    pub topic_id: Uuid,
    pub partition_id: i32,
    pub result: Result<AlteredPartition, RpcError>,
}

/// A partition's leader and ISR as AlterPartition reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlteredPartition {
    pub leader: BrokerId,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub isr: Vec<BrokerId>,
}

/// A response on the controller listener.
#[derive(Debug, Serialize, Deserialize)]
pub enum Response {
    AppendEntries(Result<AppendEntriesResponse<u64>, String>),
    Vote(Result<VoteResponse<u64>, String>),
    InstallSnapshot(Result<InstallSnapshotResponse<u64>, String>),
    EndQuorumEpoch,
    /// Whether the pre-vote is granted.
    PreVote(bool),
    BrokerRegistration(Result<i64, RpcError>),
    BrokerHeartbeat(Result<HeartbeatReply, RpcError>),
    FetchMetadata(Result<MetadataFetched, RpcError>),
    /// The result, and the metadata offset a broker must reach to see the change.
    Admin(Result<(AdminResult, i64), RpcError>),
    AllocateProducerIds(Result<(i64, i32), RpcError>),
    DescribeQuorum(Result<QuorumInfo, RpcError>),
    /// This controller is not the active one; `leader` is, if known.
    NotController {
        leader: Option<i32>,
    },
}

/// BrokerHeartbeat's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HeartbeatReply {
    pub is_caught_up: bool,
    pub is_fenced: bool,
    pub should_shut_down: bool,
}

/// FetchMetadata's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MetadataFetched {
    /// The active controller as this voter knows it (-1: none).
    pub leader_id: i32,
    /// The offset this voter has applied: an observer that reached it is caught up.
    pub applied_offset: i64,
    pub delta: Option<MetadataDelta>,
}

/// Writes one JSON frame.
pub async fn write_frame<T: Serialize>(stream: &mut TcpStream, msg: &T) -> std::io::Result<()> {
    let body = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
    if body.len() > MAX_FRAME {
        return Err(std::io::Error::other(format!(
            "controller frame of {} bytes exceeds {MAX_FRAME}",
            body.len()
        )));
    }
    let mut buf = Vec::with_capacity(4 + body.len());
    buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
    buf.extend_from_slice(&body);
    stream.write_all(&buf).await
}

/// Reads one frame's body, whatever it holds; `Ok(None)` at a clean end of stream.
pub async fn read_raw_frame(stream: &mut TcpStream) -> std::io::Result<Option<Bytes>> {
    let mut len = [0u8; 4];
    match stream.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("controller frame of {len} bytes exceeds {MAX_FRAME}"),
        ));
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await?;
    Ok(Some(Bytes::from(body)))
}

/// Reads one JSON frame; `Ok(None)` at a clean end of stream.
pub async fn read_frame<T: DeserializeOwned>(stream: &mut TcpStream) -> std::io::Result<Option<T>> {
    match read_raw_frame(stream).await? {
        Some(body) => decode_json(&body).map(Some),
        None => Ok(None),
    }
}

/// A JSON frame's message.
pub fn decode_json<T: DeserializeOwned>(body: &[u8]) -> std::io::Result<T> {
    serde_json::from_slice(body)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// A connection to one controller: one request in flight at a time.
#[derive(Debug)]
pub struct Connection {
    stream: TcpStream,
}

impl Connection {
    pub async fn connect(addr: &str, timeout: Duration) -> std::io::Result<Self> {
        let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| {
                std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("connecting to {addr} timed out"),
                )
            })??;
        stream.set_nodelay(true)?;
        Ok(Self { stream })
    }

    /// Sends `request` and waits up to `timeout` for its response.
    pub async fn call(
        &mut self,
        request: &Request,
        timeout: Duration,
    ) -> std::io::Result<Response> {
        let exchange = async {
            write_frame(&mut self.stream, request).await?;
            read_frame::<Response>(&mut self.stream)
                .await?
                .ok_or_else(|| {
                    std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "controller closed the connection",
                    )
                })
        };
        tokio::time::timeout(timeout, exchange).await.map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::TimedOut, "controller request timed out")
        })?
    }

    /// Sends `body` as a Kafka request at `version` and waits up to `timeout` for its
    /// response.
    pub async fn call_kafka<R>(
        &mut self,
        version: i16,
        body: &R,
        timeout: Duration,
    ) -> std::io::Result<R::Response>
    where
        R: KafkaRequest + Encodable,
        R::Response: Decodable + HeaderVersion,
    {
        let invalid = |e: strom_wire::WireError| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string())
        };
        let frame = strom_wire::client::encode_request(0, KAFKA_CLIENT_ID, version, body)
            .map_err(invalid)?;
        let exchange = async {
            self.stream.write_all(&frame).await?;
            read_raw_frame(&mut self.stream).await?.ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "controller closed the connection",
                )
            })
        };
        let answer = tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::TimedOut, "controller request timed out")
            })??;
        strom_wire::client::decode_response::<R>(version, answer)
            .map(|(_, response)| response)
            .map_err(invalid)
    }
}

/// The client id of a broker's Kafka-protocol requests to the controllers.
const KAFKA_CLIENT_ID: &str = "strom-broker-to-controller";
