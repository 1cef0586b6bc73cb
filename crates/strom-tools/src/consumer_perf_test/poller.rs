//! The consumer a perf run polls: librdkafka's batch consumer, or strom's native client
//! (`--client native`). Both hand out records a batch at a time with the same `Record`
//! view, so the consume loop, its statistics and its output are the same for both.

use std::time::Duration;

use anyhow::Result;

use super::args::ConsumerArgs;
use strom_client::consumer::Record;

use super::batch_consumer::BatchConsumer;
use crate::load_client::LoadClient;
use crate::property_map::Mapped;
use strom_client::config::ConsumerConfig;
use strom_client::consumer::NativeConsumer;

pub enum Poller {
    Librdkafka(BatchConsumer),
    Native(Box<NativeConsumer>),
}

impl Poller {
    /// Subscribes a member of `group` to the run's topic with the run's client.
    /// `mapped` holds librdkafka's settings, built from the same properties.
    pub fn subscribe(
        args: &ConsumerArgs,
        mapped: &Mapped,
        bootstrap: &str,
        group: &str,
        batch: usize,
    ) -> Result<Self> {
        match args.client {
            LoadClient::Librdkafka => Ok(Self::Librdkafka(BatchConsumer::subscribe(
                &mapped.settings,
                &args.topic,
                batch,
            )?)),
            LoadClient::Native => {
                let config = native_config(args, group)?;
                Ok(Self::Native(Box::new(NativeConsumer::subscribe(
                    bootstrap,
                    config,
                    &args.topic,
                )?)))
            }
        }
    }

    /// Waits up to `timeout_ms` for records and hands up to `batch` of them to
    /// `on_record`; problems the client recovers from go to `on_error`. A native client
    /// that meets a broker it cannot trust (a corrupt batch, an answer to a question it
    /// did not ask) fails the run.
    pub fn consume(
        &mut self,
        timeout_ms: i32,
        batch: usize,
        mut on_record: impl FnMut(&Record<'_>),
        on_error: impl FnMut(String),
    ) -> Result<usize> {
        match self {
            Self::Librdkafka(consumer) => Ok(consumer.consume(timeout_ms, on_record, on_error)),
            Self::Native(consumer) => consumer.poll(
                Duration::from_millis(timeout_ms.max(0) as u64),
                batch,
                &mut on_record,
            ),
        }
    }

    pub fn join_time_ms(&self) -> u64 {
        match self {
            Self::Librdkafka(consumer) => consumer.join_time_ms(),
            Self::Native(consumer) => consumer.join_time_ms(),
        }
    }

    /// Kafka's `--print-metrics` lines: from librdkafka's last statistics, or the native
    /// client's own metrics; empty when there are none.
    pub fn metric_lines(&self, client_id: &str) -> Vec<String> {
        match self {
            Self::Librdkafka(consumer) => crate::metrics::lines(
                consumer.last_stats().as_deref(),
                "consumer-fetch-manager-metrics",
                client_id,
            ),
            Self::Native(consumer) => crate::metrics::format_block(&consumer.metrics()),
        }
    }

    /// Commits what was consumed and leaves the group (librdkafka does so when dropped).
    pub fn close(&mut self) -> Result<()> {
        match self {
            Self::Librdkafka(_) => Ok(()),
            Self::Native(consumer) => consumer.close(),
        }
    }
}

/// The settings the native consumer runs with, under Kafka's names, for the reports.
pub fn native_settings(args: &ConsumerArgs, group: &str) -> Result<Vec<(String, String)>> {
    let c =
        ConsumerConfig::from_properties(&native_properties(args, group), "perf-consumer-client")?;
    Ok([
        ("client", "native".to_string()),
        ("group.id", c.group_id),
        ("fetch.min.bytes", c.fetch_min_bytes.to_string()),
        ("fetch.max.bytes", c.fetch_max_bytes.to_string()),
        (
            "fetch.max.wait.ms",
            c.fetch_max_wait.as_millis().to_string(),
        ),
        (
            "max.partition.fetch.bytes",
            c.max_partition_fetch_bytes.to_string(),
        ),
        ("enable.auto.commit", c.enable_auto_commit.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect())
}

/// The native consumer's settings: the user's properties with Kafka's tool's forced
/// settings on top (group, `--fetch-size` as `max.partition.fetch.bytes`, the reset
/// policy of `--from-latest`).
fn native_config(args: &ConsumerArgs, group: &str) -> Result<ConsumerConfig> {
    let config =
        ConsumerConfig::from_properties(&native_properties(args, group), "perf-consumer-client")?;
    config
        .warnings
        .iter()
        .for_each(|w| eprintln!("WARNING: {w}"));
    Ok(config)
}

fn native_properties(args: &ConsumerArgs, group: &str) -> Vec<(String, String)> {
    let mut properties = args.properties.clone();
    properties.extend([
        ("group.id".to_string(), group.to_string()),
        (
            "max.partition.fetch.bytes".to_string(),
            args.fetch_size.to_string(),
        ),
        (
            "auto.offset.reset".to_string(),
            if args.from_latest {
                "latest"
            } else {
                "earliest"
            }
            .to_string(),
        ),
        (
            "receive.buffer.bytes".to_string(),
            args.socket_buffer_size.to_string(),
        ),
    ]);
    properties
}
