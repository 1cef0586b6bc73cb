//! Membership of a consumer group through Kafka's classic protocol: FindCoordinator,
//! JoinGroup (with the member id the coordinator asks for), SyncGroup (the leader assigns
//! partitions with the range assignor, as the Java consumer's default does), heartbeats
//! in the background, committed offsets (OffsetFetch, OffsetCommit) and LeaveGroup.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedPartitions;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, ConsumerProtocolAssignment, ConsumerProtocolSubscription, FindCoordinatorRequest,
    GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest,
    OffsetFetchRequest, SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::client::NativeClient;
use crate::config::ConsumerConfig;
use crate::connection::Connection;
use crate::errors;

/// MEMBER_ID_REQUIRED: join again with the member id the coordinator chose.
const MEMBER_ID_REQUIRED: i16 = 79;
/// REBALANCE_IN_PROGRESS: the group is forming again; rejoin.
const REBALANCE_IN_PROGRESS: i16 = 27;
/// UNKNOWN_MEMBER_ID and ILLEGAL_GENERATION: this member was dropped; join anew.
const UNKNOWN_MEMBER_ID: i16 = 25;
const ILLEGAL_GENERATION: i16 = 22;
/// The coordinator moved or is loading: find it again and retry.
const COORDINATOR_ERRORS: [i16; 3] = [14, 15, 16];
/// The consumer protocol's assignor.
const RANGE: &str = "range";

/// A member of one group subscribed to one topic.
pub struct GroupMember {
    client: Arc<NativeClient>,
    config: ConsumerConfig,
    group: GroupId,
    topic: String,
    member_id: String,
    generation_id: i32,
    coordinator: Option<Arc<Connection>>,
    /// Set by the heartbeat task when the coordinator asks the member to rejoin.
    rejoin: Arc<AtomicBool>,
    heartbeat: Option<tokio::task::JoinHandle<()>>,
}

impl GroupMember {
    pub fn new(client: Arc<NativeClient>, config: ConsumerConfig, topic: &str) -> Self {
        Self {
            client,
            group: GroupId(StrBytes::from_string(config.group_id.clone())),
            config,
            topic: topic.to_string(),
            member_id: String::new(),
            generation_id: -1,
            coordinator: None,
            rejoin: Arc::new(AtomicBool::new(true)),
            heartbeat: None,
        }
    }

    /// Whether the member must (re)join before consuming on.
    pub fn needs_join(&self) -> bool {
        self.rejoin.load(Ordering::Relaxed)
    }

    /// Joins the group and returns this member's partitions of the topic.
    pub async fn join(&mut self, partitions: i32) -> Result<Vec<i32>> {
        if let Some(heartbeat) = self.heartbeat.take() {
            heartbeat.abort();
        }
        let deadline = tokio::time::Instant::now() + self.config.max_poll_interval;
        loop {
            match self.try_join(partitions).await {
                Ok(assigned) => {
                    self.rejoin.store(false, Ordering::Relaxed);
                    self.start_heartbeats()?;
                    return Ok(assigned);
                }
                Err(JoinError::Retry(reason)) if tokio::time::Instant::now() < deadline => {
                    tracing::debug!("rejoining group {}: {reason}", self.config.group_id);
                    tokio::time::sleep(self.config.retry_backoff).await;
                }
                Err(JoinError::Retry(reason)) => {
                    bail!("cannot join group {}: {reason}", self.config.group_id)
                }
                Err(JoinError::Fatal(e)) => return Err(e),
            }
        }
    }

    async fn coordinator(&mut self) -> Result<Arc<Connection>, JoinError> {
        if let Some(c) = self.coordinator.as_ref().filter(|c| !c.is_closed()) {
            return Ok(Arc::clone(c));
        }
        let any = self
            .client
            .any_connection()
            .await
            .map_err(JoinError::Fatal)?;
        let version = any
            .versions
            .pick(ApiKey::FindCoordinator, 0, 3)
            .map_err(JoinError::Fatal)?;
        let request = FindCoordinatorRequest::default()
            .with_key(StrBytes::from_string(self.config.group_id.clone()))
            .with_key_type(0);
        let response = any.call(version, &request).await.map_err(retry)?;
        if response.error_code != 0 {
            return Err(JoinError::Retry(errors::describe(
                response.error_code,
                "FindCoordinator",
            )));
        }
        let address = format!("{}:{}", response.host.as_str(), response.port);
        self.client.remember_broker(response.node_id.0, &address);
        let connection = self
            .client
            .dedicated_connection(response.node_id.0)
            .await
            .map_err(retry)?;
        self.coordinator = Some(Arc::clone(&connection));
        Ok(connection)
    }

    async fn try_join(&mut self, partitions: i32) -> Result<Vec<i32>, JoinError> {
        let coordinator = self.coordinator().await?;
        let version = coordinator
            .versions
            .pick(ApiKey::JoinGroup, 2, 9)
            .map_err(JoinError::Fatal)?;
        let subscription = versioned(
            0,
            &ConsumerProtocolSubscription::default()
                .with_topics(vec![StrBytes::from_string(self.topic.clone())]),
        )
        .map_err(JoinError::Fatal)?;
        let mut request = JoinGroupRequest::default()
            .with_group_id(self.group.clone())
            .with_session_timeout_ms(self.config.session_timeout.as_millis() as i32)
            .with_rebalance_timeout_ms(self.config.max_poll_interval.as_millis() as i32)
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(StrBytes::from_static_str(RANGE))
                .with_metadata(subscription)]);
        let mut response = coordinator.call(version, &request).await.map_err(retry)?;
        if response.error_code == MEMBER_ID_REQUIRED {
            self.member_id = response.member_id.to_string();
            request.member_id = response.member_id.clone();
            response = coordinator.call(version, &request).await.map_err(retry)?;
        }
        self.check_group_error(response.error_code, "JoinGroup")?;
        self.member_id = response.member_id.to_string();
        self.generation_id = response.generation_id;
        let assignments = if response.leader == response.member_id {
            let mut members: Vec<String> = response
                .members
                .iter()
                .map(|m| m.member_id.to_string())
                .collect();
            members.sort();
            range_assignment(&members, partitions)
                .into_iter()
                .map(|(member, assigned)| {
                    let bytes = versioned(
                        0,
                        &ConsumerProtocolAssignment::default().with_assigned_partitions(vec![
                            AssignedPartitions::default()
                                .with_topic(TopicName(StrBytes::from_string(self.topic.clone())))
                                .with_partitions(assigned),
                        ]),
                    )?;
                    Ok(SyncGroupRequestAssignment::default()
                        .with_member_id(StrBytes::from_string(member))
                        .with_assignment(bytes))
                })
                .collect::<Result<Vec<_>>>()
                .map_err(JoinError::Fatal)?
        } else {
            Vec::new()
        };
        let version = coordinator
            .versions
            .pick(ApiKey::SyncGroup, 1, 5)
            .map_err(JoinError::Fatal)?;
        let sync = SyncGroupRequest::default()
            .with_group_id(self.group.clone())
            .with_generation_id(self.generation_id)
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
            .with_protocol_name(Some(StrBytes::from_static_str(RANGE)))
            .with_assignments(assignments);
        let synced = coordinator.call(version, &sync).await.map_err(retry)?;
        self.check_group_error(synced.error_code, "SyncGroup")?;
        decode_assignment(synced.assignment, &self.topic).map_err(JoinError::Fatal)
    }

    /// Classifies a group error: retried after rejoining, or fatal.
    fn check_group_error(&mut self, code: i16, api: &str) -> Result<(), JoinError> {
        match code {
            0 => Ok(()),
            UNKNOWN_MEMBER_ID | ILLEGAL_GENERATION => {
                self.member_id.clear();
                Err(JoinError::Retry(errors::describe(code, api)))
            }
            REBALANCE_IN_PROGRESS => Err(JoinError::Retry(errors::describe(code, api))),
            c if COORDINATOR_ERRORS.contains(&c) => {
                self.coordinator = None;
                Err(JoinError::Retry(errors::describe(code, api)))
            }
            c => Err(JoinError::Fatal(anyhow!(
                "group {}: {}",
                self.config.group_id,
                errors::describe(c, api)
            ))),
        }
    }

    /// Heartbeats every `heartbeat.interval.ms` until the coordinator asks for a rejoin.
    fn start_heartbeats(&mut self) -> Result<()> {
        let coordinator = self
            .coordinator
            .clone()
            .ok_or_else(|| anyhow!("no coordinator after joining"))?;
        let version = coordinator.versions.pick(ApiKey::Heartbeat, 0, 4)?;
        let request = HeartbeatRequest::default()
            .with_group_id(self.group.clone())
            .with_generation_id(self.generation_id)
            .with_member_id(StrBytes::from_string(self.member_id.clone()));
        let interval = self.config.heartbeat_interval;
        let rejoin = Arc::clone(&self.rejoin);
        self.heartbeat = Some(tokio::spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                match coordinator.call(version, &request).await {
                    Ok(r) if r.error_code == 0 => {}
                    // Any error — a rebalance, a lost member, a moved coordinator, a
                    // broken connection — is answered by joining again.
                    _ => {
                        rejoin.store(true, Ordering::Relaxed);
                        return;
                    }
                }
            }
        }));
        Ok(())
    }

    /// The group's committed offsets of `partitions` (-1 where none).
    pub async fn committed(&mut self, partitions: &[i32]) -> Result<Vec<i64>> {
        let coordinator = self.coordinator().await.map_err(JoinError::into_error)?;
        let version = coordinator.versions.pick(ApiKey::OffsetFetch, 1, 7)?;
        let request = OffsetFetchRequest::default()
            .with_group_id(self.group.clone())
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(TopicName(StrBytes::from_string(self.topic.clone())))
                .with_partition_indexes(partitions.to_vec())]));
        let response = coordinator.call(version, &request).await?;
        if response.error_code != 0 {
            bail!(
                "group {}: {}",
                self.config.group_id,
                errors::describe(response.error_code, "OffsetFetch")
            );
        }
        let mut offsets = vec![-1; partitions.len()];
        for topic in &response.topics {
            for p in &topic.partitions {
                if let Some(i) = partitions.iter().position(|&x| x == p.partition_index) {
                    if p.error_code == 0 {
                        offsets[i] = p.committed_offset;
                    }
                }
            }
        }
        Ok(offsets)
    }

    /// Commits `offsets` (partition, next offset to consume). A commit refused because
    /// the group is rebalancing is dropped: the next generation commits again.
    pub async fn commit(&mut self, offsets: &[(i32, i64)]) -> Result<()> {
        if offsets.is_empty() || self.generation_id < 0 {
            return Ok(());
        }
        let coordinator = self.coordinator().await.map_err(JoinError::into_error)?;
        let version = coordinator.versions.pick(ApiKey::OffsetCommit, 2, 8)?;
        let request = OffsetCommitRequest::default()
            .with_group_id(self.group.clone())
            .with_generation_id_or_member_epoch(self.generation_id)
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_retention_time_ms(-1)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_string(self.topic.clone())))
                .with_partitions(
                    offsets
                        .iter()
                        .map(|&(partition, offset)| {
                            OffsetCommitRequestPartition::default()
                                .with_partition_index(partition)
                                .with_committed_offset(offset)
                                .with_committed_leader_epoch(-1)
                                .with_committed_metadata(Some(StrBytes::default()))
                        })
                        .collect(),
                )]);
        let response = coordinator.call(version, &request).await?;
        for topic in &response.topics {
            for p in &topic.partitions {
                match p.error_code {
                    0 | REBALANCE_IN_PROGRESS | UNKNOWN_MEMBER_ID | ILLEGAL_GENERATION => {}
                    code => bail!(
                        "group {}: {}",
                        self.config.group_id,
                        errors::describe(code, "OffsetCommit")
                    ),
                }
            }
        }
        Ok(())
    }

    /// Leaves the group, so the others get its partitions without waiting for its session
    /// to time out.
    pub async fn leave(&mut self) -> Result<()> {
        if let Some(heartbeat) = self.heartbeat.take() {
            heartbeat.abort();
        }
        if self.member_id.is_empty() {
            return Ok(());
        }
        let coordinator = self.coordinator().await.map_err(JoinError::into_error)?;
        let version = coordinator.versions.pick(ApiKey::LeaveGroup, 0, 4)?;
        let member_id = StrBytes::from_string(self.member_id.clone());
        let request = if version >= 3 {
            LeaveGroupRequest::default()
                .with_group_id(self.group.clone())
                .with_members(vec![MemberIdentity::default().with_member_id(member_id)])
        } else {
            LeaveGroupRequest::default()
                .with_group_id(self.group.clone())
                .with_member_id(member_id)
        };
        coordinator.call(version, &request).await?;
        self.member_id.clear();
        Ok(())
    }
}

impl Drop for GroupMember {
    fn drop(&mut self) {
        if let Some(heartbeat) = self.heartbeat.take() {
            heartbeat.abort();
        }
    }
}

/// Why a join attempt failed.
enum JoinError {
    /// The group or the coordinator is in motion: join again after a backoff.
    Retry(String),
    Fatal(anyhow::Error),
}

impl JoinError {
    fn into_error(self) -> anyhow::Error {
        match self {
            JoinError::Retry(reason) => anyhow!(reason),
            JoinError::Fatal(e) => e,
        }
    }
}

fn retry(e: anyhow::Error) -> JoinError {
    JoinError::Retry(format!("{e:#}"))
}

/// The consumer protocol's framing: a version, then the message at that version.
fn versioned<M: Encodable>(version: i16, message: &M) -> Result<Bytes> {
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    message
        .encode(&mut buf, version)
        .map_err(|e| anyhow!("cannot encode the consumer protocol: {e}"))?;
    Ok(buf.freeze())
}

/// This member's partitions of `topic` from its SyncGroup assignment.
fn decode_assignment(mut bytes: Bytes, topic: &str) -> Result<Vec<i32>> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    if bytes.remaining() < 2 {
        bail!(
            "the coordinator sent an assignment of {} bytes",
            bytes.len()
        );
    }
    let version = bytes.get_i16().min(3);
    let assignment = ConsumerProtocolAssignment::decode(&mut bytes, version)
        .context("the coordinator sent an assignment that does not decode")?;
    Ok(assignment
        .assigned_partitions
        .iter()
        .filter(|t| t.topic.as_str() == topic)
        .flat_map(|t| t.partitions.iter().copied())
        .collect())
}

/// Kafka's RangeAssignor for one topic: members in member-id order each take a
/// contiguous range, the first `partitions % members` one partition more.
fn range_assignment(members: &[String], partitions: i32) -> Vec<(String, Vec<i32>)> {
    let n = members.len().max(1) as i32;
    let (per, extra) = (partitions / n, partitions % n);
    let mut next = 0;
    members
        .iter()
        .enumerate()
        .map(|(i, member)| {
            let count = per + i32::from((i as i32) < extra);
            let range = (next..next + count).collect();
            next += count;
            (member.clone(), range)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_assignment_is_kafkas() {
        let members: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let assigned = range_assignment(&members, 7);
        assert_eq!(assigned[0].1, vec![0, 1, 2]);
        assert_eq!(assigned[1].1, vec![3, 4]);
        assert_eq!(assigned[2].1, vec![5, 6]);
        assert_eq!(range_assignment(&members, 1)[2].1, Vec::<i32>::new());
    }

    #[test]
    fn assignments_round_trip_through_the_consumer_protocol() {
        let bytes = versioned(
            0,
            &ConsumerProtocolAssignment::default().with_assigned_partitions(vec![
                AssignedPartitions::default()
                    .with_topic(TopicName(StrBytes::from_static_str("t")))
                    .with_partitions(vec![4, 5]),
            ]),
        )
        .unwrap();
        assert_eq!(
            crate::assignment::decode(&bytes),
            vec![("t".to_string(), 4), ("t".to_string(), 5)]
        );
        assert_eq!(decode_assignment(bytes, "t").unwrap(), vec![4, 5]);
        assert!(decode_assignment(Bytes::from_static(&[0]), "t").is_err());
    }
}
