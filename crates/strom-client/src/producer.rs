//! The native producer: records appended in place to one open batch per partition,
//! batches sealed when full or after `linger.ms`, sent to each partition's leader with up
//! to `max.in.flight.requests.per.connection` Produce requests in flight per broker, and
//! every acknowledgement (or failure) handed to a [`DeliveryHandler`].
//!
//! Everything runs on the caller's task (a current-thread runtime): the send loop appends,
//! seals and writes requests, and yields after each write so the connections' readers
//! can hand over responses. There is no sender thread to hand records to, no lock and no
//! per-record allocation; a record costs its copy into the batch and a few varints.
//!
//! Idempotence as Kafka's: a producer id from InitProducerId, a sequence per partition
//! assigned when a batch is sealed and kept across retries, and a partition whose batch
//! must be retried sends nothing else until its in-flight batches have come back, so
//! retried batches reach the broker in sequence order.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, InitProducerIdRequest, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use strom_wire::{BatchBuilder, ProducerFields};
use tokio::sync::mpsc;

use crate::buffer_pool::BufferPool;
use crate::client::{NativeClient, PartitionLeader};
use crate::clock;
use crate::config::ProducerConfig;
use crate::connection::CallError;
use crate::errors;
use crate::metrics::Stat;
use crate::partitioner::Partitioner;
use crate::timer::DeadlineTimer;

/// DUPLICATE_SEQUENCE_NUMBER: the broker already has this batch (a retry of one whose
/// answer was lost), which is a success for the producer.
const DUPLICATE_SEQUENCE_NUMBER: i16 = 46;
/// OUT_OF_ORDER_SEQUENCE_NUMBER: an earlier batch of the partition is being retried.
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
/// NETWORK_EXCEPTION, what a request whose connection broke counts as.
const NETWORK_EXCEPTION: i16 = 13;
/// REQUEST_TIMED_OUT, for a request not answered within `request.timeout.ms`.
const REQUEST_TIMED_OUT: i16 = 7;

/// What the caller tracks per record: its index, when it was sent and its value's size.
#[derive(Debug, Clone, Copy)]
pub struct RecordTag {
    pub index: u64,
    pub sent_ns: u64,
    pub value_len: u32,
}

/// Consecutive records of a batch (by index) sent at one time with values of one size,
/// kept as one entry: a send loop that reads the clock once for several records appends
/// runs of them, and a batch's records cost no entry each, appended or acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRun {
    pub first_index: u64,
    pub count: u32,
    pub sent_ns: u64,
    pub value_len: u32,
}

impl RecordRun {
    /// Adds `tag` to this run when it continues it.
    #[inline]
    fn extend(&mut self, tag: &RecordTag) -> bool {
        let continues = self.first_index + u64::from(self.count) == tag.index
            && self.sent_ns == tag.sent_ns
            && self.value_len == tag.value_len;
        self.count += u32::from(continues);
        continues
    }
}

/// The records `runs` hold.
pub fn record_count(runs: &[RecordRun]) -> usize {
    runs.iter().map(|run| run.count as usize).sum()
}

/// When each record of a throttled run is due: record `i` at `start_ns + i · interval_ns`,
/// as Kafka's tool spaces sends at `--throughput` records per second.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    pub start_ns: u64,
    pub interval_ns: f64,
}

impl Schedule {
    #[inline]
    pub fn due_ns(&self, index: u64) -> u64 {
        self.start_ns + (index as f64 * self.interval_ns) as u64
    }

    /// The send time counted for a record due at `due_ns` and appended at `now_ns`: now
    /// when it is due, else the start of the millisecond it is due in. Kafka's latency
    /// counts whole milliseconds, so records due in one millisecond are one run.
    #[inline]
    pub fn sent_ns(due_ns: u64, now_ns: u64) -> u64 {
        if due_ns > now_ns {
            due_ns - due_ns % 1_000_000
        } else {
            now_ns
        }
    }
}

/// Where the values of records appended in bulk come from.
pub trait RecordValues {
    /// The value of the record numbered `index`.
    fn value(&mut self, index: u64) -> &[u8];
}

/// Receives every record's outcome, a batch at a time, as Kafka's callbacks would.
pub trait DeliveryHandler {
    fn delivered(&mut self, records: &[RecordRun], ack_ns: u64, outcome: Result<(), &str>);
}

/// A batch still taking records.
struct OpenBatch {
    builder: BatchBuilder,
    runs: Vec<RecordRun>,
    created_ns: u64,
}

impl OpenBatch {
    /// Counts an appended record in the batch's runs.
    #[inline]
    fn add(&mut self, tag: &RecordTag) {
        if !self.runs.last_mut().is_some_and(|run| run.extend(tag)) {
            self.runs.push(RecordRun {
                first_index: tag.index,
                count: 1,
                sent_ns: tag.sent_ns,
                value_len: tag.value_len,
            });
        }
    }
}

/// Whether a throttled record that is not due yet may be appended now, to `open`, the
/// open batch of its partition if there is one: when that batch would hold it anyway,
/// lingering past the record's due time, or when it opens a batch, which then lingers
/// from that due time; and only if it does not fill the batch, which would seal it
/// before the record is due.
fn takes_early(
    open: Option<&OpenBatch>,
    due_ns: u64,
    timestamp: i64,
    key_len: Option<usize>,
    value_len: usize,
    linger_ns: u64,
    batch_size: usize,
) -> bool {
    // Without batching (`batch.size` 0) every record fills its batch.
    let below_full = batch_size.saturating_sub(1);
    match open.filter(|open| open.builder.count() > 0) {
        Some(open) => {
            due_ns < open.created_ns.saturating_add(linger_ns)
                && open
                    .builder
                    .fits_at(timestamp, key_len, Some(value_len), below_full)
        }
        None => BatchBuilder::fits_alone(key_len, Some(value_len), below_full),
    }
}

/// A sealed batch waiting to be sent, in flight, or waiting to be retried.
struct SealedBatch {
    partition: i32,
    bytes: Bytes,
    runs: Vec<RecordRun>,
    base_sequence: i32,
    created_ns: u64,
    attempts: u32,
}

#[derive(Default)]
struct PartitionQueue {
    open: Option<OpenBatch>,
    ready: VecDeque<SealedBatch>,
    next_sequence: i32,
    in_flight: usize,
    /// A batch failed and is retried: send one batch at a time until one succeeds.
    retrying: bool,
    retry_at_ns: u64,
}

/// The answer (or failure) of one Produce request.
struct Completion {
    node: i32,
    batches: Vec<SealedBatch>,
    ack_ns: u64,
    response: Result<ProduceResponse, CallError>,
}

/// The producer's own metrics (Java's `producer-metrics` names), beside the requests its
/// connections count.
struct Sensors {
    record_send: Arc<Stat>,
    record_retry: Arc<Stat>,
    record_error: Arc<Stat>,
    batch_size: Arc<Stat>,
    records_per_request: Arc<Stat>,
    produce_throttle_time: Arc<Stat>,
}

impl Sensors {
    fn new(client: &NativeClient) -> Self {
        let m = &client.metrics;
        Self {
            record_send: m.counter("record-send"),
            record_retry: m.counter("record-retry"),
            record_error: m.counter("record-error"),
            batch_size: m.sizes("batch-size"),
            records_per_request: m.sizes("records-per-request"),
            produce_throttle_time: m.times("produce-throttle-time"),
        }
    }
}

pub struct NativeProducer<H: DeliveryHandler> {
    client: Arc<NativeClient>,
    sensors: Sensors,
    config: ProducerConfig,
    topic: TopicName,
    leaders: Vec<PartitionLeader>,
    partitions: Vec<PartitionQueue>,
    partitioner: Partitioner,
    in_flight: HashMap<i32, usize>,
    producer: ProducerFields,
    completions_tx: mpsc::UnboundedSender<Completion>,
    completions: mpsc::UnboundedReceiver<Completion>,
    /// Bytes of sealed batches not yet acknowledged, bounded by `buffer.memory`.
    buffered: usize,
    /// Batches sealed and not yet completed, over all partitions.
    outstanding: usize,
    metadata_stale: bool,
    /// The earliest time an open batch's linger ends.
    linger_deadline_ns: Option<u64>,
    /// Wall-clock milliseconds at `clock` 0, for record timestamps.
    wall_offset_ms: i64,
    /// Buffers of acknowledged batches, for the next ones.
    pool: BufferPool,
    /// Wakes the send loop at linger deadlines, retry backoffs and due records.
    timer: DeadlineTimer,
    pub handler: H,
}

impl<H: DeliveryHandler> NativeProducer<H> {
    /// Connects to the cluster, looks up `topic` (waiting for its partitions to have
    /// leaders) and obtains a producer id when idempotence is on.
    pub async fn connect(
        client: Arc<NativeClient>,
        config: ProducerConfig,
        topic: &str,
        handler: H,
    ) -> Result<Self> {
        let leaders = wait_for_leaders(&client, topic).await?;
        let producer = if config.idempotence {
            init_producer_id(&client).await?
        } else {
            ProducerFields::NONE
        };
        let (completions_tx, completions) = mpsc::unbounded_channel();
        let wall_now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        Ok(Self {
            sensors: Sensors::new(&client),
            client,
            partitions: (0..leaders.len())
                .map(|_| PartitionQueue::default())
                .collect(),
            partitioner: Partitioner::new(leaders.len()),
            leaders,
            pool: BufferPool::new(config.buffer_memory),
            timer: DeadlineTimer::new().context("cannot create the producer's timer")?,
            config,
            topic: TopicName(StrBytes::from_string(topic.to_string())),
            in_flight: HashMap::new(),
            producer,
            completions_tx,
            completions,
            buffered: 0,
            outstanding: 0,
            metadata_stale: false,
            linger_deadline_ns: None,
            wall_offset_ms: wall_now_ms - clock::ms(clock::now_ns()) as i64,
            handler,
        })
    }

    /// Appends one record; seals and sends its batch when full. Waits only when
    /// `buffer.memory` is used up by unacknowledged batches.
    pub async fn send(
        &mut self,
        key: Option<&[u8]>,
        value: &[u8],
        headers: &[(&[u8], Option<&[u8]>)],
        tag: RecordTag,
    ) -> Result<()> {
        if self.append(key, value, headers, tag)? {
            self.send_sealed().await?;
        }
        Ok(())
    }

    /// Appends one record without waiting, sealing its batch when full (and any batch whose
    /// linger ended). Returns whether a batch was sealed: the caller then calls
    /// [`NativeProducer::send_sealed`]. The send loop's path for every record, kept
    /// synchronous so that a record costs no future of its own.
    pub fn append(
        &mut self,
        key: Option<&[u8]>,
        value: &[u8],
        headers: &[(&[u8], Option<&[u8]>)],
        tag: RecordTag,
    ) -> Result<bool> {
        self.append_record(key, value, headers, tag, tag.sent_ns, tag.sent_ns)
    }

    /// [`NativeProducer::append`] for a throttled record due at `due_ns`, if it may go in
    /// at `now_ns`: when it is due, or before then where [`takes_early`] allows for the
    /// batch of the partition its key picks. So the send loop runs up to a batch ahead
    /// and wakes about once a batch (when a record that fills it is due, or the batch
    /// lingers out) and once an answer, instead of every millisecond, while the batches
    /// go out when, and with the records, they would if every record were appended at
    /// its due time. A batch it opens early lingers from the record's due time; one it
    /// opens late (the run is behind its schedule) lingers from now, as Kafka's producer
    /// lingers from a batch's creation, so a run that cannot keep its rate fills its
    /// batches instead of sealing every record alone. Returns `None` when the record must
    /// wait, else whether a batch was sealed.
    pub fn append_due(
        &mut self,
        key: Option<&[u8]>,
        value: &[u8],
        tag: RecordTag,
        due_ns: u64,
        now_ns: u64,
    ) -> Result<Option<bool>> {
        if due_ns > now_ns {
            let partition = self.partitioner.partition(key);
            let early = takes_early(
                self.partitions[partition].open.as_ref(),
                due_ns,
                self.wall_offset_ms + clock::ms(tag.sent_ns) as i64,
                key.map(<[u8]>::len),
                value.len(),
                self.config.linger.as_nanos() as u64,
                self.config.batch_size,
            );
            if !early {
                return Ok(None);
            }
        }
        self.append_record(key, value, &[], tag, due_ns.max(now_ns), now_ns)
            .map(Some)
    }

    /// Appends one record to its partition's batch, opening it at `created_ns`, and seals
    /// what is full or lingered out by `now_ns`.
    fn append_record(
        &mut self,
        key: Option<&[u8]>,
        value: &[u8],
        headers: &[(&[u8], Option<&[u8]>)],
        tag: RecordTag,
        created_ns: u64,
        now_ns: u64,
    ) -> Result<bool> {
        let mut partition = self.partitioner.partition(key);
        let timestamp = self.wall_offset_ms + clock::ms(tag.sent_ns) as i64;
        let queue = &mut self.partitions[partition];
        let mut sealed = false;
        if let Some(open) = &queue.open {
            let fits = open.builder.fits(
                key.map(<[u8]>::len),
                Some(value.len()),
                self.config.batch_size,
            );
            if !fits && open.builder.count() > 0 {
                self.seal(partition)?;
                sealed = true;
                // Sealing moved the sticky partition on: a record without a key opens
                // the next partition's batch, as Kafka's does (KIP-794), not a batch of
                // its own on the partition just sealed.
                partition = self.partitioner.partition(key);
            }
        }
        let open = self.open_batch(partition, timestamp, created_ns);
        open.builder.append(timestamp, key, Some(value), headers);
        open.add(&tag);
        if open.builder.size() >= self.config.batch_size {
            self.seal(partition)?;
            sealed = true;
        }
        if self.linger_deadline_ns.is_some_and(|d| now_ns >= d) {
            self.seal_lingered(now_ns)?;
            sealed = true;
        }
        Ok(sealed)
    }

    /// Appends records `first_index..first_index + count`, without keys or headers and all
    /// sent at `sent_ns`, to the sticky partition's open batch until that batch is full:
    /// the unthrottled send loop's path, where the partition, the timestamp and the linger
    /// are decided once per call and a record costs its copy into the batch. Returns how
    /// many records went in and whether a batch was sealed (then the caller calls
    /// [`NativeProducer::send_sealed`] and goes on with the rest).
    pub fn append_unkeyed(
        &mut self,
        values: &mut impl RecordValues,
        first_index: u64,
        count: u64,
        sent_ns: u64,
    ) -> Result<(u64, bool)> {
        let partition = self.partitioner.partition(None);
        let timestamp = self.wall_offset_ms + clock::ms(sent_ns) as i64;
        let batch_size = self.config.batch_size;
        let open = self.open_batch(partition, timestamp, sent_ns);
        let mut appended = 0;
        let mut full = false;
        while appended < count {
            let index = first_index + appended;
            let value = values.value(index);
            if open.builder.count() > 0 && !open.builder.fits(None, Some(value.len()), batch_size) {
                full = true;
                break;
            }
            open.builder.append(timestamp, None, Some(value), &[]);
            open.add(&RecordTag {
                index,
                sent_ns,
                value_len: value.len() as u32,
            });
            appended += 1;
            if open.builder.size() >= batch_size {
                full = true;
                break;
            }
        }
        if full {
            self.seal(partition)?;
        }
        let lingered = self.linger_deadline_ns.is_some_and(|d| sent_ns >= d);
        if lingered {
            self.seal_lingered(sent_ns)?;
        }
        Ok((appended, full || lingered))
    }

    /// The open batch of `partition`, opened at `sent_ns` if there is none; a batch's
    /// first record starts its linger.
    fn open_batch(&mut self, partition: usize, timestamp: i64, sent_ns: u64) -> &mut OpenBatch {
        let queue = &mut self.partitions[partition];
        let pool = &mut self.pool;
        let batch_size = self.config.batch_size;
        let open = queue.open.get_or_insert_with(|| OpenBatch {
            builder: BatchBuilder::new(pool.buffer(batch_size), timestamp),
            runs: Vec::with_capacity(batch_size / 512),
            created_ns: sent_ns,
        });
        if open.builder.count() == 0 {
            let deadline = sent_ns + self.config.linger.as_nanos() as u64;
            self.linger_deadline_ns = Some(
                self.linger_deadline_ns
                    .map_or(deadline, |d| d.min(deadline)),
            );
        }
        open
    }

    /// After a batch was sealed: hand over answers that arrived, send what can be sent,
    /// let the connections read, and wait while the buffer is full.
    pub async fn send_sealed(&mut self) -> Result<()> {
        self.drain_completions()?;
        self.dispatch().await?;
        tokio::task::yield_now().await;
        self.drain_completions()?;
        while self.buffered > self.config.buffer_memory {
            self.wait(None).await?;
        }
        Ok(())
    }

    /// Waits for one answer, the end of a linger or a retry backoff, or until `until_ns`,
    /// whichever comes first, and serves what became due: a throttled run's wait for its
    /// next record, which may go in before it is due once a batch was sealed
    /// ([`NativeProducer::append_due`]).
    pub async fn idle(&mut self, until_ns: u64) -> Result<()> {
        self.wait(Some(until_ns)).await
    }

    /// Waits until `until_ns` (the next intended send time of a throttled run) while
    /// serving answers, lingering batches and retries.
    pub async fn idle_until(&mut self, until_ns: u64) -> Result<()> {
        while clock::now_ns() < until_ns {
            self.wait(Some(until_ns)).await?;
        }
        Ok(())
    }

    /// Seals every open batch and waits until every record has its outcome.
    pub async fn flush(&mut self) -> Result<()> {
        for partition in 0..self.partitions.len() {
            if self.partitions[partition].open.is_some() {
                self.seal(partition)?;
            }
        }
        self.linger_deadline_ns = None;
        self.dispatch().await?;
        while self.outstanding > 0 {
            self.wait(None).await?;
        }
        Ok(())
    }

    /// Waits for one answer, or until the earliest of `until_ns`, a linger deadline and a
    /// retry backoff; then serves whatever became due.
    async fn wait(&mut self, until_ns: Option<u64>) -> Result<()> {
        let now = clock::now_ns();
        let retry_at = self
            .partitions
            .iter()
            .filter(|p| !p.ready.is_empty() && p.retry_at_ns > now)
            .map(|p| p.retry_at_ns)
            .min();
        // Batches waiting for a partition that has no leader (or metadata that could not
        // be read) need the metadata again after a backoff, answer or not.
        let leaderless = self
            .partitions
            .iter()
            .zip(&self.leaders)
            .any(|(q, l)| !q.ready.is_empty() && l.leader < 0);
        let refresh_at = (leaderless || self.metadata_stale).then(|| {
            self.metadata_stale = true;
            now + self.config.retry_backoff.as_nanos() as u64
        });
        let wake = [until_ns, self.linger_deadline_ns, retry_at, refresh_at]
            .into_iter()
            .flatten()
            .min();
        let received = match wake {
            Some(at) => tokio::select! {
                biased;
                completion = self.completions.recv() => completion,
                fired = self.timer.sleep_until(at) => {
                    fired.context("the producer's timer failed")?;
                    None
                }
            },
            None => self.completions.recv().await,
        };
        if let Some(completion) = received {
            self.complete(completion)?;
        }
        self.drain_completions()?;
        let now = clock::now_ns();
        if self.linger_deadline_ns.is_some_and(|d| now >= d) {
            self.seal_lingered(now)?;
        }
        self.dispatch().await
    }

    fn drain_completions(&mut self) -> Result<()> {
        while let Ok(completion) = self.completions.try_recv() {
            self.complete(completion)?;
        }
        Ok(())
    }

    /// Seals the open batch of `partition`, assigning its sequence numbers.
    fn seal(&mut self, partition: usize) -> Result<()> {
        let queue = &mut self.partitions[partition];
        let Some(open) = queue.open.take() else {
            return Ok(());
        };
        let count = open.builder.count();
        let base_sequence = if self.config.idempotence {
            let base = queue.next_sequence;
            queue.next_sequence = base.wrapping_add(count) & i32::MAX;
            base
        } else {
            -1
        };
        let fields = ProducerFields {
            base_sequence,
            ..self.producer
        };
        let bytes = open
            .builder
            .finish(self.config.codec, self.config.compression_level, fields)
            .context("cannot compress a batch")?;
        self.buffered += bytes.len();
        self.outstanding += 1;
        queue.ready.push_back(SealedBatch {
            partition: partition as i32,
            bytes: Bytes::from(bytes),
            runs: open.runs,
            base_sequence,
            created_ns: open.created_ns,
            attempts: 0,
        });
        self.partitioner.on_batch_sealed(partition);
        Ok(())
    }

    /// Seals every open batch whose linger ended by `now`, and finds the next deadline.
    fn seal_lingered(&mut self, now: u64) -> Result<()> {
        let linger = self.config.linger.as_nanos() as u64;
        let mut next = None;
        for partition in 0..self.partitions.len() {
            let Some(created) = self.partitions[partition]
                .open
                .as_ref()
                .map(|o| o.created_ns)
            else {
                continue;
            };
            if created + linger <= now {
                self.seal(partition)?;
            } else {
                next = Some(next.map_or(created + linger, |n: u64| n.min(created + linger)));
            }
        }
        self.linger_deadline_ns = next;
        Ok(())
    }

    /// Sends one Produce request per broker with spare in-flight capacity, holding at
    /// most one batch per partition (as Kafka's sender drains), until nothing can go.
    async fn dispatch(&mut self) -> Result<()> {
        if self.metadata_stale {
            self.refresh_leaders().await?;
        }
        self.expire_leaderless()?;
        loop {
            let now = clock::now_ns();
            let mut by_node: HashMap<i32, Vec<SealedBatch>> = HashMap::new();
            let mut sizes: HashMap<i32, usize> = HashMap::new();
            for (partition, queue) in self.partitions.iter_mut().enumerate() {
                let leader = self.leaders[partition].leader;
                if leader < 0
                    || queue.ready.is_empty()
                    || queue.retry_at_ns > now
                    || (queue.retrying && queue.in_flight > 0)
                    || self.in_flight.get(&leader).copied().unwrap_or(0)
                        >= self.config.max_in_flight
                {
                    continue;
                }
                let size = sizes.entry(leader).or_default();
                let next = queue.ready.front().map_or(0, |b| b.bytes.len());
                if *size > 0 && *size + next > self.config.max_request_size {
                    continue;
                }
                *size += next;
                let batch = queue.ready.pop_front().expect("not empty");
                queue.in_flight += 1;
                by_node.entry(leader).or_default().push(batch);
            }
            if by_node.is_empty() {
                return Ok(());
            }
            for (node, batches) in by_node {
                *self.in_flight.entry(node).or_default() += 1;
                self.send_request(node, batches).await?;
            }
        }
    }

    /// Fails the batches of partitions without a leader that have waited longer than
    /// `delivery.timeout.ms`, as Kafka's accumulator expires them.
    fn expire_leaderless(&mut self) -> Result<()> {
        let now = clock::now_ns();
        let timeout = self.config.delivery_timeout.as_nanos() as u64;
        for partition in 0..self.partitions.len() {
            if self.leaders[partition].leader >= 0 {
                continue;
            }
            while let Some(batch) = self.partitions[partition]
                .ready
                .front()
                .filter(|b| now.saturating_sub(b.created_ns) > timeout)
            {
                let reason = format!(
                    "Expiring {} record(s) for {}-{partition}: no leader within delivery.timeout.ms",
                    record_count(&batch.runs),
                    self.topic.as_str()
                );
                if self.config.idempotence {
                    bail!("the idempotent producer cannot deliver a batch: {reason}");
                }
                let batch = self.partitions[partition]
                    .ready
                    .pop_front()
                    .expect("a front batch");
                self.finish(batch, now, Err(&reason));
            }
        }
        Ok(())
    }

    /// Writes one Produce request to `node`; its answer arrives as a [`Completion`].
    async fn send_request(&mut self, node: i32, batches: Vec<SealedBatch>) -> Result<()> {
        let count: usize = batches.iter().map(|b| record_count(&b.runs)).sum();
        self.sensors.record_send.record(count as u64);
        self.sensors.records_per_request.record(count as u64);
        let records: Vec<Bytes> = batches.iter().map(|b| b.bytes.clone()).collect();
        for batch in &batches {
            self.sensors.batch_size.record(batch.bytes.len() as u64);
        }
        let request = ProduceRequest::default()
            .with_acks(self.config.acks)
            .with_timeout_ms(self.config.request_timeout.as_millis() as i32)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(self.topic.clone())
                .with_partition_data(
                    batches
                        .iter()
                        .map(|b| {
                            PartitionProduceData::default()
                                .with_index(b.partition)
                                .with_records(Some(b.bytes.clone()))
                        })
                        .collect(),
                )]);
        let tx = self.completions_tx.clone();
        // Every way the request ends is one Completion, sent from wherever it ends.
        let complete = move |batches: Vec<SealedBatch>, response| {
            let _ = tx.send(Completion {
                node,
                batches,
                ack_ns: clock::now_ns(),
                response,
            });
        };
        let closed = |e: anyhow::Error| CallError::Closed(format!("{e:#}"));
        let connection = match self.client.connection(node).await {
            Ok(connection) => connection,
            Err(e) => {
                complete(batches, Err(closed(e)));
                return Ok(());
            }
        };
        let version = connection.versions.pick(ApiKey::Produce, 3, 11)?;
        if self.config.acks == 0 {
            let written = connection
                .send_without_response(version, &request, &records)
                .await;
            complete(
                batches,
                written.map(|()| ProduceResponse::default()).map_err(closed),
            );
            return Ok(());
        }
        let timeout = Some(self.config.request_timeout);
        match connection.send(version, &request, &records, timeout).await {
            Ok(answer) => {
                tokio::spawn(async move { complete(batches, answer.await) });
            }
            Err(e) => complete(batches, Err(closed(e))),
        }
        Ok(())
    }

    /// Accounts one request's answer: deliveries, retries, or the end of the run when the
    /// broker answered something it was not asked.
    fn complete(&mut self, completion: Completion) -> Result<()> {
        if let Some(n) = self.in_flight.get_mut(&completion.node) {
            *n = n.saturating_sub(1);
        }
        let codes: Vec<i16> = match &completion.response {
            Ok(response) if self.config.acks == 0 => vec![0; completion.batches.len()],
            Ok(response) => {
                let throttle_ms = u64::try_from(response.throttle_time_ms).unwrap_or(0);
                self.sensors
                    .produce_throttle_time
                    .record(throttle_ms * 1000);
                self.partition_codes(response, &completion.batches)?
            }
            Err(CallError::Violation(reason)) => bail!("{reason}"),
            Err(failure @ (CallError::Closed(_) | CallError::TimedOut(_))) => {
                if completion.batches.iter().all(|b| b.attempts == 0) {
                    eprintln!("WARNING: native producer: {failure}; retrying");
                }
                let code = match failure {
                    CallError::TimedOut(_) => REQUEST_TIMED_OUT,
                    _ => NETWORK_EXCEPTION,
                };
                self.metadata_stale = true;
                vec![code; completion.batches.len()]
            }
        };
        for (batch, code) in completion.batches.into_iter().zip(codes) {
            self.complete_batch(batch, code, completion.ack_ns)?;
        }
        Ok(())
    }

    /// The error code of each batch of a request, in request order; a partition missing
    /// from the answer, or one not asked for, ends the run.
    fn partition_codes(
        &self,
        response: &ProduceResponse,
        batches: &[SealedBatch],
    ) -> Result<Vec<i16>> {
        let mut codes: HashMap<i32, i16> = HashMap::new();
        for topic in &response.responses {
            if topic.name != self.topic {
                bail!(
                    "the broker answered Produce for topic {}, which was not in the request",
                    topic.name.as_str()
                );
            }
            for p in &topic.partition_responses {
                if !batches.iter().any(|b| b.partition == p.index) {
                    bail!(
                        "the broker answered Produce for partition {}-{}, which was not in the request",
                        self.topic.as_str(),
                        p.index
                    );
                }
                codes.insert(p.index, p.error_code);
            }
        }
        batches
            .iter()
            .map(|b| {
                codes.get(&b.partition).copied().ok_or_else(|| {
                    anyhow!(
                        "the broker's Produce answer left out partition {}-{}",
                        self.topic.as_str(),
                        b.partition
                    )
                })
            })
            .collect()
    }

    fn complete_batch(&mut self, mut batch: SealedBatch, code: i16, ack_ns: u64) -> Result<()> {
        let partition = batch.partition as usize;
        let queue = &mut self.partitions[partition];
        queue.in_flight -= 1;
        if code == 0 || code == DUPLICATE_SEQUENCE_NUMBER {
            queue.retrying = false;
            self.finish(batch, ack_ns, Ok(()));
            return Ok(());
        }
        let retriable = errors::is_retriable(code)
            || (self.config.idempotence && code == OUT_OF_ORDER_SEQUENCE_NUMBER);
        let expired = clock::now_ns().saturating_sub(batch.created_ns)
            > self.config.delivery_timeout.as_nanos() as u64;
        if retriable && batch.attempts < self.config.retries && !expired {
            batch.attempts += 1;
            self.sensors
                .record_retry
                .record(record_count(&batch.runs) as u64);
            if errors::needs_metadata(code) {
                self.metadata_stale = true;
            }
            queue.retrying = true;
            queue.retry_at_ns = clock::now_ns() + self.config.retry_backoff.as_nanos() as u64;
            // Back in sequence order: the batches that come back after this one have
            // higher sequences, and go behind it.
            let at = queue
                .ready
                .iter()
                .position(|b| b.base_sequence > batch.base_sequence || !self.config.idempotence)
                .unwrap_or(queue.ready.len());
            queue.ready.insert(at, batch);
            return Ok(());
        }
        let reason = errors::describe(code, "Produce");
        if self.config.idempotence {
            bail!(
                "the idempotent producer cannot deliver a batch of partition {}-{partition}: {reason}",
                self.topic.as_str()
            );
        }
        self.sensors
            .record_error
            .record(record_count(&batch.runs) as u64);
        self.finish(batch, ack_ns, Err(&reason));
        Ok(())
    }

    fn finish(&mut self, batch: SealedBatch, ack_ns: u64, outcome: Result<(), &str>) {
        self.buffered -= batch.bytes.len();
        self.outstanding -= 1;
        self.handler.delivered(&batch.runs, ack_ns, outcome);
        self.pool.give_back(batch.bytes);
    }

    async fn refresh_leaders(&mut self) -> Result<()> {
        self.metadata_stale = false;
        match self.client.leaders(self.topic.as_str(), false).await {
            Ok(leaders) if leaders.len() == self.leaders.len() => self.leaders = leaders,
            Ok(leaders) => bail!(
                "topic {} changed from {} to {} partitions during the run",
                self.topic.as_str(),
                self.leaders.len(),
                leaders.len()
            ),
            // The cluster may be between leaders; the next failure asks again.
            Err(_) => self.metadata_stale = true,
        }
        Ok(())
    }
}

/// The partitions' leaders once every partition has one (up to Kafka's `max.block.ms`
/// of 60 s: a topic just created may not have them yet).
async fn wait_for_leaders(client: &NativeClient, topic: &str) -> Result<Vec<PartitionLeader>> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let result = client.leaders(topic, true).await;
        match result {
            Ok(leaders) if leaders.iter().all(|l| l.leader >= 0) => return Ok(leaders),
            Ok(_) | Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok(_) => bail!("topic {topic} has partitions without a leader after 60 s"),
            Err(e) => {
                return Err(e.context(format!(
                    "Topic {topic} not present in metadata after 60000 ms."
                )))
            }
        }
    }
}

/// A producer id and epoch for an idempotent producer without a transactional id.
async fn init_producer_id(client: &NativeClient) -> Result<ProducerFields> {
    let connection = client.any_connection().await?;
    let version = connection.versions.pick(ApiKey::InitProducerId, 0, 4)?;
    let request = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000)
        .with_producer_id((-1).into())
        .with_producer_epoch(-1);
    let response = connection.call(version, &request).await?;
    if response.error_code != 0 {
        bail!(
            "cannot get a producer id: {}",
            errors::describe(response.error_code, "InitProducerId")
        );
    }
    Ok(ProducerFields {
        producer_id: response.producer_id.0,
        producer_epoch: response.producer_epoch,
        base_sequence: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_takes_only_the_next_record_sent_at_its_time_with_its_value_size() {
        let tag = |index, sent_ns, value_len| RecordTag {
            index,
            sent_ns,
            value_len,
        };
        let mut run = RecordRun {
            first_index: 10,
            count: 1,
            sent_ns: 500,
            value_len: 100,
        };
        assert!(run.extend(&tag(11, 500, 100)));
        assert!(!run.extend(&tag(13, 500, 100)), "index 12 is missing");
        assert!(!run.extend(&tag(12, 501, 100)), "sent at another time");
        assert!(!run.extend(&tag(12, 500, 99)), "another value size");
        assert_eq!(run.count, 2);
    }

    #[test]
    fn a_record_not_yet_due_goes_only_in_a_batch_that_will_not_leave_before_it_is_due() {
        let (linger, batch_size) = (5_000_000, 1000);
        assert!(
            takes_early(None, 1_000_001, 0, None, 10, linger, batch_size),
            "a record that opens a batch starts its linger at its due time"
        );
        assert!(
            !takes_early(None, 1_000_001, 0, None, batch_size, linger, batch_size),
            "a record that fills a batch alone seals it at once"
        );
        let mut open = OpenBatch {
            builder: BatchBuilder::new(Vec::new(), 0),
            runs: Vec::new(),
            created_ns: 1_000_000,
        };
        open.builder.append(0, None, Some(&[0; 10]), &[]);
        assert!(takes_early(
            Some(&open),
            5_999_999,
            0,
            None,
            10,
            linger,
            batch_size
        ));
        assert!(
            !takes_early(Some(&open), 6_000_000, 0, None, 10, linger, batch_size),
            "due when the batch has lingered out: it goes in a later batch"
        );
        let filling = batch_size - open.builder.size() - 8;
        assert!(
            !takes_early(Some(&open), 2_000_000, 0, None, filling, linger, batch_size),
            "a record that fills the batch seals it, which waits until it is due"
        );
        assert!(takes_early(
            Some(&open),
            2_000_000,
            0,
            None,
            filling - 4,
            linger,
            batch_size
        ));
        assert!(
            !takes_early(
                Some(&open),
                2_000_000,
                0,
                Some(8),
                filling - 4,
                linger,
                batch_size
            ),
            "the key counts too"
        );
    }
}
