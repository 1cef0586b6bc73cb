//! Kafka's EndToEndLatency loop on strom's native client (`--client native`): send one
//! record and wait for its acknowledgement, then poll it back from a consumer of every
//! partition positioned at the end, and time the whole trip.

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::args::E2eArgs;
use super::run::{E2eResult, POLL_TIMEOUT};
use crate::java_random::Random;
use strom_client::client::NativeClient;
use strom_client::clock;
use strom_client::config::{ConsumerConfig, ProducerConfig};
use strom_client::consumer::{NativeConsumer, StartAt};
use strom_client::producer::{DeliveryHandler, NativeProducer, RecordRun, RecordTag};

/// Keeps the outcome of the one record in flight.
#[derive(Default)]
struct LastOutcome(Option<Result<(), String>>);

impl DeliveryHandler for LastOutcome {
    fn delivered(&mut self, _: &[RecordRun], _: u64, outcome: Result<(), &str>) {
        self.0 = Some(outcome.map_err(String::from));
    }
}

pub fn run(args: &E2eArgs, bootstrap: &str, out: &mut dyn Write) -> Result<E2eResult> {
    let mut consumer_properties = args.properties.clone();
    consumer_properties.extend([
        ("fetch.max.wait.ms".to_string(), "0".to_string()),
        ("enable.auto.commit".to_string(), "false".to_string()),
    ]);
    let consumer_config = ConsumerConfig::from_properties(&consumer_properties, "e2e-consumer")?;
    let mut producer_properties = args.properties.clone();
    producer_properties.extend([
        ("linger.ms".to_string(), "0".to_string()),
        ("acks".to_string(), args.acks.clone()),
    ]);
    let producer_config = ProducerConfig::from_properties(&producer_properties, "e2e-producer")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the native producer's runtime")?;
    let client = NativeClient::new(bootstrap, &producer_config.client_id)?;
    let mut producer = runtime.block_on(NativeProducer::connect(
        client,
        producer_config,
        &args.topic,
        LastOutcome::default(),
    ))?;
    let mut consumer =
        NativeConsumer::assign(bootstrap, consumer_config, &args.topic, StartAt::End)?;
    consumer.position_all()?;

    let mut random = Random::new(0);
    let key = vec![b'k'; args.key_size];
    let header_key = vec![b'h'; args.header_key_size.max(1)];
    let header_value = vec![b'v'; args.header_size];
    let headers: Vec<(&[u8], Option<&[u8]>)> = (0..args.num_headers)
        .map(|_| (&header_key[..], Some(&header_value[..])))
        .collect();
    let mut result = E2eResult::new(args.num_messages);
    for i in 0..args.num_messages {
        let message = vec![random.next_int(26) as u8 + b'A'; args.message_size];
        let begin = Instant::now();
        let tag = RecordTag {
            index: i,
            sent_ns: clock::now_ns(),
            value_len: message.len() as u32,
        };
        let key = (args.key_size > 0).then_some(&key[..]);
        runtime.block_on(async {
            producer.send(key, &message, &headers, tag).await?;
            producer.flush().await
        })?;
        match producer.handler.0.take() {
            Some(Ok(())) => {}
            Some(Err(e)) => bail!("send failed: {e}"),
            None => bail!("no acknowledgement for the record sent"),
        }
        let mut received: Option<Vec<u8>> = None;
        let deadline = Instant::now() + POLL_TIMEOUT;
        while received.is_none() && Instant::now() < deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            consumer.poll(left.min(Duration::from_secs(1)), 1, &mut |record| {
                received.get_or_insert_with(|| record.value.to_vec());
            })?;
        }
        let elapsed = begin.elapsed();
        let read = received.ok_or_else(|| {
            anyhow!(
                "poll() timed out before finding a result (timeout:{})",
                POLL_TIMEOUT.as_millis()
            )
        })?;
        if read != message {
            bail!(
                "The message read [{}] did not match the message sent [{}]",
                String::from_utf8_lossy(&read),
                String::from_utf8_lossy(&message)
            );
        }
        result.record(i, elapsed, out)?;
    }
    consumer.close()?;
    result.finish(out)
}
