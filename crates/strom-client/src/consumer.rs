//! The native consumer: a group member (or a consumer of explicitly assigned partitions)
//! that fetches from each partition's leader and walks every record it hands out.
//!
//! One Fetch per broker is in flight at a time, as with Kafka's consumer, but the next
//! one is sent as soon as an answer arrives — its offsets come from the batch headers —
//! so the broker prepares the next answer while the caller reads this one. Fetch
//! sessions (KIP-227) are used when the broker grants them: after the first full request
//! only partitions whose offsets moved are sent.
//!
//! Every batch's CRC is checked and compressed batches are decompressed; every record's
//! lengths are walked, so counts and bytes are those of the records, not of batch
//! headers. A broker that answers with a corrupt batch, a partition it was not asked for,
//! or bytes that do not decode ends the run with a message saying so.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, FetchRequest, FetchResponse, ListOffsetsRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use strom_wire::batch::verify_crc;
use strom_wire::codec::{self, Codec};
use strom_wire::records::walk_records_in;
use strom_wire::{FetchSessionPlanner, RecordBatchHeader, BATCH_HEADER_LEN};
use tokio::sync::mpsc;

use crate::client::{NativeClient, PartitionLeader};
use crate::config::{ConsumerConfig, OffsetReset};
use crate::connection::CallError;
use crate::errors;
use crate::group::GroupMember;
use crate::metrics::Stat;

/// OFFSET_OUT_OF_RANGE: the position is gone (retention) or not yet there.
const OFFSET_OUT_OF_RANGE: i16 = 1;
/// FETCH_SESSION_ID_NOT_FOUND and INVALID_FETCH_SESSION_EPOCH: start a new session.
const SESSION_ERRORS: [i16; 2] = [70, 71];
/// A batch attribute bit: a transaction marker, not records.
const CONTROL_FLAG: i16 = 0x20;
/// A batch attribute bit: timestamps are the broker's append time.
const LOG_APPEND_TIME_FLAG: i16 = 0x08;

/// One record handed to a caller, borrowed from the fetched batch (or from librdkafka's
/// message, for the perf tools' librdkafka consumer) until the next poll.
pub struct Record<'a> {
    pub key: &'a [u8],
    pub value: &'a [u8],
    /// CreateTime or LogAppendTime, in ms.
    pub timestamp: Option<i64>,
}

/// Where an assigned (not group-managed) consumer starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    Earliest,
    End,
}

/// A fetch session with one broker (KIP-227): partition → (fetch offset, leader epoch).
type FetchSession = FetchSessionPlanner<i32, (i64, i32)>;

/// Records of one partition from one Fetch answer, walked a batch at a time.
struct PartitionRecords {
    partition: i32,
    records: Bytes,
    at: usize,
}

/// A Fetch answer, or why there is none.
struct FetchDone {
    node: i32,
    /// The partitions the request covered (with the session, everything it holds).
    asked: HashSet<i32>,
    sent: Instant,
    response: Result<FetchResponse, CallError>,
}

/// The consumer's fetch metrics (Java's `consumer-fetch-manager-metrics` names).
struct Sensors {
    fetch: Arc<Stat>,
    fetch_latency: Arc<Stat>,
    fetch_size: Arc<Stat>,
    records_per_request: Arc<Stat>,
    bytes_consumed: Arc<Stat>,
    records_consumed: Arc<Stat>,
}

impl Sensors {
    fn new(client: &NativeClient) -> Self {
        let m = &client.metrics;
        Self {
            fetch: m.counter("fetch"),
            fetch_latency: m.times("fetch-latency"),
            fetch_size: m.sizes("fetch-size"),
            records_per_request: m.sizes("records-per-request"),
            bytes_consumed: m.counter("bytes-consumed"),
            records_consumed: m.counter("records-consumed"),
        }
    }

    /// One Fetch answered after `latency` with `bytes` of record batches holding
    /// `records` records.
    fn fetched(&self, latency: Duration, bytes: u64, records: u64) {
        self.fetch.record(1);
        self.fetch_latency.record(latency.as_micros() as u64);
        self.fetch_size.record(bytes);
        self.records_per_request.record(records);
        self.bytes_consumed.record(bytes);
        self.records_consumed.record(records);
    }
}

pub struct NativeConsumer {
    runtime: tokio::runtime::Runtime,
    state: ConsumerState,
}

struct ConsumerState {
    client: Arc<NativeClient>,
    sensors: Sensors,
    config: ConsumerConfig,
    topic: TopicName,
    group: Option<GroupMember>,
    start_at: StartAt,
    leaders: Vec<PartitionLeader>,
    assigned: Vec<i32>,
    /// Next offset to fetch, per assigned partition (ahead of `consumed` by what is
    /// buffered or in flight).
    fetch_at: HashMap<i32, i64>,
    /// Next offset to hand out, per assigned partition; what a commit stores.
    consumed: HashMap<i32, i64>,
    sessions: HashMap<i32, FetchSession>,
    in_flight: HashSet<i32>,
    backoff_until: HashMap<i32, Instant>,
    done_tx: mpsc::UnboundedSender<FetchDone>,
    done: mpsc::UnboundedReceiver<FetchDone>,
    buffered: VecDeque<PartitionRecords>,
    buffered_bytes: usize,
    metadata_stale: bool,
    join_started: Option<Instant>,
    join_total: Duration,
    last_commit: Instant,
    /// Connection problems already reported, each once.
    reported: HashSet<String>,
}

impl NativeConsumer {
    /// A member of `config.group_id` subscribed to `topic`.
    pub fn subscribe(bootstrap: &str, config: ConsumerConfig, topic: &str) -> Result<Self> {
        Self::new(bootstrap, config, topic, None)
    }

    /// A consumer of every partition of `topic`, without a group, starting at `start`.
    pub fn assign(
        bootstrap: &str,
        config: ConsumerConfig,
        topic: &str,
        start: StartAt,
    ) -> Result<Self> {
        Self::new(bootstrap, config, topic, Some(start))
    }

    fn new(
        bootstrap: &str,
        config: ConsumerConfig,
        topic: &str,
        assigned: Option<StartAt>,
    ) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the native consumer's runtime")?;
        let client = NativeClient::new(bootstrap, &config.client_id)?;
        let leaders = runtime.block_on(client.leaders(topic, false))?;
        let group = match assigned {
            None => {
                if config.group_id.is_empty() {
                    bail!("a subscribing consumer needs a group.id");
                }
                Some(GroupMember::new(Arc::clone(&client), config.clone(), topic))
            }
            Some(_) => None,
        };
        let (done_tx, done) = mpsc::unbounded_channel();
        let all: Vec<i32> = (0..leaders.len() as i32).collect();
        Ok(Self {
            runtime,
            state: ConsumerState {
                sensors: Sensors::new(&client),
                client,
                topic: TopicName(StrBytes::from_string(topic.to_string())),
                start_at: assigned.unwrap_or(match config.auto_offset_reset {
                    OffsetReset::Earliest => StartAt::Earliest,
                    OffsetReset::Latest => StartAt::End,
                }),
                assigned: if group.is_some() { Vec::new() } else { all },
                group,
                config,
                leaders,
                fetch_at: HashMap::new(),
                consumed: HashMap::new(),
                sessions: HashMap::new(),
                in_flight: HashSet::new(),
                backoff_until: HashMap::new(),
                done_tx,
                done,
                buffered: VecDeque::new(),
                buffered_bytes: 0,
                metadata_stale: false,
                join_started: Some(Instant::now()),
                join_total: Duration::ZERO,
                last_commit: Instant::now(),
                reported: HashSet::new(),
            },
        })
    }

    /// Hands up to about `max_records` records (whole batches) to `on_record`, waiting up
    /// to `timeout` for some to arrive; returns how many were handed out.
    pub fn poll(
        &mut self,
        timeout: Duration,
        max_records: usize,
        on_record: &mut impl FnMut(&Record<'_>),
    ) -> Result<usize> {
        let state = &mut self.state;
        self.runtime
            .block_on(state.poll(timeout, max_records, on_record))
    }

    /// Positions every assigned partition (committed offsets, else the reset policy)
    /// without fetching: an end-to-end test starts producing only after this.
    pub fn position_all(&mut self) -> Result<()> {
        let state = &mut self.state;
        self.runtime.block_on(state.ensure_positions())
    }

    /// Total time spent joining the group, as Kafka's tool sums its rebalance listener's
    /// intervals.
    pub fn join_time_ms(&self) -> u64 {
        self.state.join_total.as_millis() as u64
    }

    /// The metrics Kafka's `--print-metrics` shows for this consumer, by name.
    pub fn metrics(&self) -> BTreeMap<String, serde_json::Value> {
        self.state.client.metrics.by_name(
            "consumer-fetch-manager-metrics",
            "consumer-metrics",
            "consumer-node-metrics",
            &self.state.client.client_id,
        )
    }

    /// Commits what was consumed and leaves the group.
    pub fn close(&mut self) -> Result<()> {
        let state = &mut self.state;
        self.runtime.block_on(async {
            state.commit().await?;
            if let Some(group) = state.group.as_mut() {
                group.leave().await?;
            }
            Ok(())
        })
    }
}

impl ConsumerState {
    async fn poll(
        &mut self,
        timeout: Duration,
        max_records: usize,
        on_record: &mut impl FnMut(&Record<'_>),
    ) -> Result<usize> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.group.as_ref().is_some_and(GroupMember::needs_join) {
                self.rejoin().await?;
            }
            if self.config.enable_auto_commit
                && self.last_commit.elapsed() >= self.config.auto_commit_interval
            {
                self.commit().await?;
            }
            if !self.buffered.is_empty() {
                if !self.in_flight.is_empty() {
                    // Let the connections read what has arrived of the next answers
                    // (one poll of the I/O driver), so that receiving overlaps with the
                    // walk over these records instead of waiting for its end.
                    tokio::task::yield_now().await;
                }
                let n = self.drain(max_records, on_record)?;
                if n > 0 {
                    self.send_fetches().await?;
                    return Ok(n);
                }
                continue;
            }
            if self.metadata_stale {
                self.refresh_leaders().await;
            }
            self.ensure_positions().await?;
            self.send_fetches().await?;
            let wait_until = self
                .backoff_until
                .values()
                .min()
                .map(|&t| tokio::time::Instant::from_std(t).min(deadline))
                .filter(|_| self.in_flight.is_empty())
                .unwrap_or(deadline);
            match tokio::time::timeout_at(wait_until, self.done.recv()).await {
                Ok(Some(done)) => self.handle_fetch(done)?,
                Ok(None) => bail!("the fetch channel closed"),
                Err(_) if wait_until >= deadline => return Ok(0),
                Err(_) => {}
            }
            if tokio::time::Instant::now() >= deadline && self.buffered.is_empty() {
                return Ok(0);
            }
        }
    }

    /// Joins (again), keeping the positions of partitions that stay assigned.
    async fn rejoin(&mut self) -> Result<()> {
        self.commit().await?;
        let started = *self.join_started.get_or_insert_with(Instant::now);
        let partitions = self.leaders.len() as i32;
        let group = self.group.as_mut().expect("only group members rejoin");
        let assigned = group.join(partitions).await?;
        self.join_total += started.elapsed();
        self.join_started = None;
        self.assigned = assigned;
        // Every position comes from the commits made before the rebalance, so a
        // partition that moved between members continues where its last owner stopped.
        self.fetch_at.clear();
        self.consumed.clear();
        self.buffered.clear();
        self.buffered_bytes = 0;
        Ok(())
    }

    async fn commit(&mut self) -> Result<()> {
        self.last_commit = Instant::now();
        let Some(group) = self.group.as_mut() else {
            return Ok(());
        };
        let mut offsets: Vec<(i32, i64)> = self.consumed.iter().map(|(&p, &o)| (p, o)).collect();
        offsets.sort_unstable();
        group.commit(&offsets).await
    }

    /// Gives every assigned partition without a position one: the group's committed
    /// offset, else the earliest or latest offset per `auto.offset.reset`.
    async fn ensure_positions(&mut self) -> Result<()> {
        let missing: Vec<i32> = self
            .assigned
            .iter()
            .copied()
            .filter(|p| !self.consumed.contains_key(p))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let committed = match self.group.as_mut() {
            Some(group) => group.committed(&missing).await?,
            None => vec![-1; missing.len()],
        };
        let mut reset = Vec::new();
        for (&partition, &offset) in missing.iter().zip(&committed) {
            if offset >= 0 {
                self.consumed.insert(partition, offset);
                self.fetch_at.insert(partition, offset);
            } else {
                reset.push(partition);
            }
        }
        if !reset.is_empty() {
            self.reset_offsets(&reset).await?;
        }
        Ok(())
    }

    /// Sets `partitions` to their earliest or latest offsets (ListOffsets to each leader).
    async fn reset_offsets(&mut self, partitions: &[i32]) -> Result<()> {
        let timestamp = match self.start_at {
            StartAt::Earliest => -2,
            StartAt::End => -1,
        };
        let mut by_leader: HashMap<i32, Vec<i32>> = HashMap::new();
        for &p in partitions {
            by_leader
                .entry(self.leaders[p as usize].leader)
                .or_default()
                .push(p);
        }
        for (leader, partitions) in by_leader {
            if leader < 0 {
                self.metadata_stale = true;
                continue;
            }
            let connection = self.client.connection(leader).await?;
            let version = connection.versions.pick(ApiKey::ListOffsets, 1, 7)?;
            let request = ListOffsetsRequest::default()
                .with_replica_id((-1).into())
                .with_isolation_level(self.config.isolation_level)
                .with_topics(vec![ListOffsetsTopic::default()
                    .with_name(self.topic.clone())
                    .with_partitions(
                        partitions
                            .iter()
                            .map(|&p| {
                                ListOffsetsPartition::default()
                                    .with_partition_index(p)
                                    .with_current_leader_epoch(-1)
                                    .with_timestamp(timestamp)
                            })
                            .collect(),
                    )]);
            let response = connection.call(version, &request).await?;
            for topic in &response.topics {
                for p in &topic.partitions {
                    if !partitions.contains(&p.partition_index) {
                        bail!(
                            "{} answered ListOffsets for partition {}-{}, which was not asked for",
                            connection.address,
                            self.topic.as_str(),
                            p.partition_index
                        );
                    }
                    if p.error_code != 0 {
                        if errors::is_retriable(p.error_code) {
                            self.metadata_stale = true;
                            continue;
                        }
                        bail!(
                            "partition {}-{}: {}",
                            self.topic.as_str(),
                            p.partition_index,
                            errors::describe(p.error_code, "ListOffsets")
                        );
                    }
                    self.consumed.insert(p.partition_index, p.offset);
                    self.fetch_at.insert(p.partition_index, p.offset);
                }
            }
        }
        Ok(())
    }

    async fn refresh_leaders(&mut self) {
        self.metadata_stale = false;
        match self.client.leaders(self.topic.as_str(), false).await {
            Ok(leaders) if leaders.len() == self.leaders.len() => self.leaders = leaders,
            _ => self.metadata_stale = true,
        }
    }

    /// Sends a Fetch to every leader of assigned partitions that has none in flight,
    /// unless enough is buffered already.
    async fn send_fetches(&mut self) -> Result<()> {
        if self.buffered_bytes >= self.config.fetch_max_bytes as usize {
            return Ok(());
        }
        let now = Instant::now();
        let mut by_node: HashMap<i32, Vec<i32>> = HashMap::new();
        for &p in &self.assigned {
            let leader = self.leaders[p as usize].leader;
            if leader < 0 {
                // Looked up again on the next poll, until the partition has a leader.
                self.metadata_stale = true;
            }
            if leader >= 0 && self.fetch_at.contains_key(&p) && !self.in_flight.contains(&leader) {
                by_node.entry(leader).or_default().push(p);
            }
        }
        for (node, partitions) in by_node {
            if self.backoff_until.get(&node).is_some_and(|&t| t > now) {
                continue;
            }
            self.backoff_until.remove(&node);
            self.send_fetch(node, partitions).await?;
        }
        Ok(())
    }

    async fn send_fetch(&mut self, node: i32, partitions: Vec<i32>) -> Result<()> {
        let tx = self.done_tx.clone();
        let connection = match self.client.connection(node).await {
            Ok(connection) => connection,
            Err(e) => {
                self.connection_problem(node, &format!("{e:#}"));
                return Ok(());
            }
        };
        let version = connection.versions.pick(ApiKey::Fetch, 4, 12)?;
        let session = self.sessions.entry(node).or_default();
        let wanted: HashMap<i32, (i64, i32)> = partitions
            .iter()
            .map(|&p| {
                (
                    p,
                    (self.fetch_at[&p], self.leaders[p as usize].leader_epoch),
                )
            })
            .collect();
        let asked: HashSet<i32> = wanted.keys().copied().collect();
        let (epoch, send, forgotten) = session.plan(wanted, version >= 7);
        let partition_max_bytes = self.config.max_partition_fetch_bytes;
        let request = FetchRequest::default()
            .with_replica_id((-1).into())
            .with_max_wait_ms(self.config.fetch_max_wait.as_millis() as i32)
            .with_min_bytes(self.config.fetch_min_bytes)
            .with_max_bytes(self.config.fetch_max_bytes)
            .with_isolation_level(self.config.isolation_level)
            .with_session_id(session.id)
            .with_session_epoch(epoch)
            .with_topics(if send.is_empty() {
                Vec::new()
            } else {
                vec![FetchTopic::default()
                    .with_topic(self.topic.clone())
                    .with_partitions(
                        send.into_iter()
                            .map(|(p, (offset, leader_epoch))| {
                                FetchPartition::default()
                                    .with_partition(p)
                                    .with_current_leader_epoch(leader_epoch)
                                    .with_fetch_offset(offset)
                                    .with_log_start_offset(-1)
                                    .with_partition_max_bytes(partition_max_bytes)
                            })
                            .collect(),
                    )]
            })
            .with_forgotten_topics_data(if forgotten.is_empty() {
                Vec::new()
            } else {
                vec![ForgottenTopic::default()
                    .with_topic(self.topic.clone())
                    .with_partitions(forgotten)]
            });
        let timeout = self.config.request_timeout + self.config.fetch_max_wait;
        let sent = Instant::now();
        match connection.send(version, &request, &[], Some(timeout)).await {
            Ok(answer) => {
                self.in_flight.insert(node);
                tokio::spawn(async move {
                    let response = answer.await;
                    let _ = tx.send(FetchDone {
                        node,
                        asked,
                        sent,
                        response,
                    });
                });
            }
            Err(e) => self.connection_problem(node, &format!("{e:#}")),
        }
        Ok(())
    }

    /// A broker could not be reached: report it once, back off and look up leaders again.
    fn connection_problem(&mut self, node: i32, reason: &str) {
        if self.reported.insert(reason.to_string()) {
            eprintln!("WARNING: native consumer: {reason}");
        }
        self.sessions.remove(&node);
        self.backoff_until
            .insert(node, Instant::now() + self.config.retry_backoff);
        self.metadata_stale = true;
    }

    /// Takes one Fetch answer: session bookkeeping, errors, and the records buffered with
    /// the next fetch offsets taken from their batch headers.
    fn handle_fetch(&mut self, done: FetchDone) -> Result<()> {
        self.in_flight.remove(&done.node);
        let response = match done.response {
            Ok(response) => response,
            Err(CallError::Violation(reason)) => bail!("{reason}"),
            Err(CallError::Closed(reason) | CallError::TimedOut(reason)) => {
                self.connection_problem(done.node, &reason);
                return Ok(());
            }
        };
        let session = self.sessions.entry(done.node).or_default();
        if SESSION_ERRORS.contains(&response.error_code) {
            session.reset();
            return Ok(());
        }
        if response.error_code != 0 {
            if errors::is_retriable(response.error_code) {
                self.connection_problem(done.node, &errors::describe(response.error_code, "Fetch"));
                return Ok(());
            }
            bail!(
                "broker {} answered {}",
                done.node,
                errors::describe(response.error_code, "Fetch")
            );
        }
        session.answered(response.session_id);
        let (mut bytes, mut records) = (0, 0);
        for topic in response.responses {
            if topic.topic != self.topic {
                bail!(
                    "broker {} answered Fetch for topic {}, which was not asked for",
                    done.node,
                    topic.topic.as_str()
                );
            }
            for p in topic.partitions {
                let partition = p.partition_index;
                if !done.asked.contains(&partition) {
                    bail!(
                        "broker {} answered Fetch for partition {}-{partition}, which was not asked for",
                        done.node,
                        self.topic.as_str()
                    );
                }
                if !self.assigned.contains(&partition) {
                    continue;
                }
                match p.error_code {
                    0 => {}
                    OFFSET_OUT_OF_RANGE => {
                        self.consumed.remove(&partition);
                        self.fetch_at.remove(&partition);
                        continue;
                    }
                    code if errors::needs_metadata(code) || errors::is_retriable(code) => {
                        self.metadata_stale = true;
                        self.sessions.remove(&done.node);
                        continue;
                    }
                    code => bail!(
                        "partition {}-{partition}: {}",
                        self.topic.as_str(),
                        errors::describe(code, "Fetch")
                    ),
                }
                let Some(batches) = p.records.filter(|r| !r.is_empty()) else {
                    continue;
                };
                let (b, r) = self.buffer(partition, batches)?;
                bytes += b;
                records += r;
            }
        }
        self.sensors.fetched(done.sent.elapsed(), bytes, records);
        Ok(())
    }

    /// Buffers the whole batches of `records` and moves the partition's fetch offset past
    /// them. A last batch cut short by the size limit is dropped (fetched again next).
    /// Returns the bytes and the records buffered.
    fn buffer(&mut self, partition: i32, records: Bytes) -> Result<(u64, u64)> {
        let mut at = 0;
        let mut next = None;
        let mut count = 0u64;
        while records.len() - at >= BATCH_HEADER_LEN {
            let header = RecordBatchHeader::parse(&records[at..]).map_err(|e| {
                anyhow!(
                    "partition {}-{partition}: a batch that does not parse: {e}",
                    self.topic.as_str()
                )
            })?;
            if records.len() - at < header.total_len() {
                break;
            }
            at += header.total_len();
            count += u64::try_from(header.record_count).unwrap_or(0);
            next = Some(header.next_offset());
        }
        let Some(next) = next else {
            bail!(
                "partition {}-{partition}: the broker returned {} bytes without a whole record batch (a batch larger than max.partition.fetch.bytes, or a truncated answer)",
                self.topic.as_str(),
                records.len()
            );
        };
        let position = self.fetch_at.entry(partition).or_insert(next);
        *position = (*position).max(next);
        self.buffered_bytes += at;
        self.buffered.push_back(PartitionRecords {
            partition,
            records: records.slice(..at),
            at: 0,
        });
        Ok((at as u64, count))
    }

    /// Hands out buffered records a batch at a time until `max_records` were handed out.
    fn drain(
        &mut self,
        max_records: usize,
        on_record: &mut impl FnMut(&Record<'_>),
    ) -> Result<usize> {
        let mut handed = 0;
        while handed < max_records {
            let Some(front) = self.buffered.front_mut() else {
                break;
            };
            if front.at >= front.records.len() {
                self.buffered.pop_front();
                continue;
            }
            let partition = front.partition;
            let rest = &front.records[front.at..];
            let header = RecordBatchHeader::parse(rest).expect("checked when buffered");
            let batch = &rest[..header.total_len()];
            front.at += batch.len();
            self.buffered_bytes -= batch.len();
            let consumed = self.consumed.get(&partition).copied().unwrap_or(0);
            if header.next_offset() <= consumed {
                continue;
            }
            verify_crc(batch).map_err(|e| {
                anyhow!(
                    "partition {}-{partition}: corrupt record batch at offset {}: {e}",
                    self.topic.as_str(),
                    header.base_offset
                )
            })?;
            if header.attributes & CONTROL_FLAG == 0 {
                handed += walk_batch(&header, batch, consumed, on_record).map_err(|e| {
                    anyhow!(
                        "partition {}-{partition}: invalid record batch at offset {}: {e}",
                        self.topic.as_str(),
                        header.base_offset
                    )
                })?;
            }
            self.consumed.insert(partition, header.next_offset());
        }
        Ok(handed)
    }
}

/// Hands every record of `batch` at or after `from` to `on_record`, a compressed batch
/// decompressed as it is walked (as the broker validates it: whatever the batch inflates
/// to, memory is a window of this thread's or the largest record, which may inflate to
/// at most `codec::DECOMPRESSED_LIMIT_MAX`); returns how many.
fn walk_batch(
    header: &RecordBatchHeader,
    batch: &[u8],
    from: i64,
    on_record: &mut impl FnMut(&Record<'_>),
) -> Result<usize> {
    let codec = Codec::from_attributes(header.attributes).ok_or_else(|| {
        anyhow!(
            "unknown compression codec in attributes {}",
            header.attributes
        )
    })?;
    let log_append_time = header.attributes & LOG_APPEND_TIME_FLAG != 0;
    let mut handed = 0;
    walk_records_in(
        codec,
        &batch[BATCH_HEADER_LEN..],
        header.record_count,
        codec::DECOMPRESSED_LIMIT_MAX,
        |record| {
            if header.base_offset + i64::from(record.offset_delta) >= from {
                let timestamp = if log_append_time {
                    header.max_timestamp
                } else {
                    header.base_timestamp + record.timestamp_delta
                };
                on_record(&Record {
                    key: record.key.unwrap_or_default(),
                    value: record.value.unwrap_or_default(),
                    timestamp: Some(timestamp),
                });
                handed += 1;
            }
            Ok(())
        },
    )?;
    Ok(handed)
}
