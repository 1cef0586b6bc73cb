//! Kafka's EndToEndLatency loop: send one record synchronously, poll it back, repeat.

use std::io::Write;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use parking_lot::Mutex;
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};

use super::args::E2eArgs;
use crate::histogram::LatencyHistogram;
use crate::java_format::{double_to_string, fixed};
use crate::java_random::Random;
use crate::load_client::LoadClient;
use crate::property_map::{self, Role};
use crate::topics;

/// Kafka's `POLL_TIMEOUT_MS`.
pub const POLL_TIMEOUT: Duration = Duration::from_millis(60_000);

pub struct E2eResult {
    pub latencies_ms: Vec<u64>,
    pub total_ns: u128,
    pub histogram: LatencyHistogram,
}

impl E2eResult {
    pub fn new(records: u64) -> Self {
        Self {
            latencies_ms: Vec::with_capacity(records as usize),
            total_ns: 0,
            histogram: LatencyHistogram::new(),
        }
    }

    /// Accounts the round trip of record `i`, printing Kafka's line every 1000 records.
    pub fn record(&mut self, i: u64, elapsed: Duration, out: &mut dyn Write) -> Result<()> {
        if i.is_multiple_of(1000) {
            writeln!(
                out,
                "{i}\t{}",
                double_to_string(elapsed.as_nanos() as f64 / 1000.0 / 1000.0)
            )?;
        }
        self.total_ns += elapsed.as_nanos();
        self.latencies_ms
            .push((elapsed.as_nanos() / 1_000_000) as u64);
        self.histogram.record(elapsed.as_micros() as u64);
        Ok(())
    }

    /// Prints Kafka's final lines.
    pub fn finish(self, out: &mut dyn Write) -> Result<Self> {
        for line in final_lines(&self) {
            writeln!(out, "{line}")?;
        }
        Ok(self)
    }

    pub fn avg_ms(&self) -> f64 {
        self.total_ns as f64 / self.latencies_ms.len() as f64 / 1000.0 / 1000.0
    }

    /// 50th, 99th and 99.9th percentile, `latencies[(int)(len * p)]` of the sorted ms.
    pub fn percentiles(&self) -> [u64; 3] {
        let mut sorted = self.latencies_ms.clone();
        sorted.sort_unstable();
        [0.5, 0.99, 0.999].map(|p| {
            sorted
                .get((sorted.len() as f64 * p) as usize)
                .copied()
                .unwrap_or(0)
        })
    }
}

/// `"Avg latency: %.4f ms%n"` and `"Percentiles: 50th = %d, 99th = %d, 99.9th = %d%n"`.
pub fn final_lines(result: &E2eResult) -> [String; 2] {
    let [p50, p99, p999] = result.percentiles();
    [
        format!("Avg latency: {} ms", fixed(result.avg_ms(), 4)),
        format!("Percentiles: 50th = {p50}, 99th = {p99}, 99.9th = {p999}"),
    ]
}

/// Hands each delivery result to the waiting send loop.
struct Delivery {
    tx: Mutex<mpsc::Sender<Result<(), String>>>,
}

impl ClientContext for Delivery {}

impl ProducerContext for Delivery {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        let outcome = result.as_ref().map(|_| ()).map_err(|(e, _)| e.to_string());
        let _ = self.tx.lock().send(outcome);
    }
}

pub fn run(args: &E2eArgs, bootstrap: &str, out: &mut dyn Write) -> Result<E2eResult> {
    if args.client == LoadClient::Native {
        ensure_topic(args, bootstrap, out)?;
        return super::native_run::run(args, bootstrap, out);
    }
    let consumer = consumer(args, bootstrap)?;
    let partitions = ensure_topic(args, bootstrap, out)?;
    seek_to_end(&consumer, &args.topic, partitions)?;
    let (tx, rx) = mpsc::channel();
    let producer = producer(args, bootstrap, tx)?;

    let mut random = Random::new(0);
    let key = vec![b'k'; args.key_size];
    let header_key = "h".repeat(args.header_key_size.max(1));
    let header_value = vec![b'v'; args.header_size];
    let mut result = E2eResult::new(args.num_messages);
    for i in 0..args.num_messages {
        let message = vec![random.next_int(26) as u8 + b'A'; args.message_size];
        let begin = Instant::now();
        let mut record = BaseRecord::<[u8], [u8]>::to(&args.topic).payload(&message);
        if args.key_size > 0 {
            record = record.key(&key);
        }
        if args.num_headers > 0 {
            let headers = (0..args.num_headers).fold(OwnedHeaders::new(), |h, _| {
                h.insert(Header {
                    key: &header_key,
                    value: Some(&header_value),
                })
            });
            record = record.headers(headers);
        }
        producer
            .send(record)
            .map_err(|(e, _)| anyhow!("send failed: {e}"))?;
        rx.recv_timeout(POLL_TIMEOUT)
            .context("no delivery report")?
            .map_err(|e| anyhow!("send failed: {e}"))?;
        let received = consumer.poll(POLL_TIMEOUT);
        let elapsed = begin.elapsed();
        validate(received, &message)?;
        result.record(i, elapsed, out)?;
    }
    result.finish(out)
}

/// The topic's partition count; a missing topic is created with one partition, as
/// Kafka's tool does.
fn ensure_topic(args: &E2eArgs, bootstrap: &str, out: &mut dyn Write) -> Result<usize> {
    match topics::partition_count(bootstrap, &args.topic)? {
        Some(n) => Ok(n),
        None => {
            writeln!(
                out,
                "Topic \"{}\" does not exist. Will create topic with {} partition(s) and replication factor = {}",
                args.topic, 1, 1
            )?;
            topics::create_topic(bootstrap, &args.topic, 1, 1)?;
            Ok(1)
        }
    }
}

/// Kafka's `validate`: exactly the record just sent must come back.
fn validate(
    received: Option<rdkafka::error::KafkaResult<rdkafka::message::BorrowedMessage<'_>>>,
    sent: &[u8],
) -> Result<()> {
    let message = match received {
        None => bail!(
            "poll() timed out before finding a result (timeout:{})",
            POLL_TIMEOUT.as_millis()
        ),
        Some(Err(e)) => bail!("poll() failed: {e}"),
        Some(Ok(m)) => m,
    };
    let read = message.payload().unwrap_or_default();
    if read != sent {
        bail!(
            "The message read [{}] did not match the message sent [{}]",
            String::from_utf8_lossy(read),
            String::from_utf8_lossy(sent)
        );
    }
    Ok(())
}

fn consumer(args: &E2eArgs, bootstrap: &str) -> Result<BaseConsumer> {
    let mut mapped = property_map::map(&args.properties, Role::Consumer)?;
    mapped.print_warnings();
    let group = format!("test-group-{}", crate::consumer_perf_test::run::wall_ms());
    mapped.set("bootstrap.servers", bootstrap);
    mapped.set("group.id", &group);
    mapped.set("enable.auto.commit", "false");
    mapped.set("auto.offset.reset", "latest");
    mapped.set("fetch.wait.max.ms", "0");
    let mut config = ClientConfig::new();
    mapped.settings.iter().for_each(|(k, v)| {
        config.set(k, v);
    });
    config.create().context("cannot create the consumer")
}

/// Assigns every partition at its current end: explicit offsets rather than `Offset::End`,
/// so the first record sent cannot race the end-offset lookup (Kafka calls `position()`).
fn seek_to_end(consumer: &BaseConsumer, topic: &str, partitions: usize) -> Result<()> {
    let mut assignment = TopicPartitionList::new();
    for partition in 0..partitions as i32 {
        let (_, high) = consumer
            .fetch_watermarks(topic, partition, Duration::from_secs(30))
            .with_context(|| format!("cannot read the end offset of {topic}-{partition}"))?;
        assignment.add_partition_offset(topic, partition, Offset::Offset(high))?;
    }
    consumer.assign(&assignment).context("assign failed")
}

fn producer(
    args: &E2eArgs,
    bootstrap: &str,
    tx: mpsc::Sender<Result<(), String>>,
) -> Result<ThreadedProducer<Delivery>> {
    let mut mapped = property_map::map(&args.properties, Role::Producer)?;
    mapped.print_warnings();
    mapped.set("bootstrap.servers", bootstrap);
    mapped.set("linger.ms", "0");
    mapped.set("acks", &args.acks);
    let mut config = ClientConfig::new();
    mapped.settings.iter().for_each(|(k, v)| {
        config.set(k, v);
    });
    let producer: ThreadedProducer<Delivery> = config
        .create_with_context(Delivery { tx: Mutex::new(tx) })
        .context("cannot create the producer")?;
    producer
        .client()
        .fetch_metadata(Some(&args.topic), Duration::from_secs(30))?;
    Ok(producer)
}
