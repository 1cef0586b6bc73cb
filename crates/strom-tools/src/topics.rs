//! Topic set-up through the Admin API, for runs that need a partition count the broker's
//! auto-creation would not give (bench's 6- and 2-partition topics, e2e-latency's topic),
//! and clean-up for runs whose topics would otherwise fill the disk (consumer-scaling's).

use std::time::Duration;

use anyhow::{Context, Result};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::types::RDKafkaErrorCode;

const TIMEOUT: Duration = Duration::from_secs(30);

/// The partition count of `topic`, or `None` if the cluster does not have it.
pub fn partition_count(bootstrap: &str, topic: &str) -> Result<Option<usize>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("allow.auto.create.topics", "false")
        .create()
        .context("cannot create a metadata client")?;
    let metadata = consumer
        .fetch_metadata(Some(topic), TIMEOUT)
        .with_context(|| format!("cannot fetch metadata for {topic}"))?;
    Ok(metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic && t.error().is_none())
        .map(|t| t.partitions().len())
        .filter(|&n| n > 0))
}

/// Creates `topic` with `partitions` partitions of `replication` replicas; an existing topic
/// is left as it is. Returns whether it was created.
pub fn create_topic(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    replication: i32,
) -> Result<bool> {
    let admin = Admin::connect(bootstrap)?;
    let new_topic = NewTopic::new(topic, partitions, TopicReplication::Fixed(replication));
    let results = admin
        .runtime
        .block_on(admin.client.create_topics([&new_topic], &admin.options))
        .with_context(|| format!("CreateTopics {topic} failed"))?;
    match results.into_iter().next() {
        Some(Ok(_)) => Ok(true),
        Some(Err((_, RDKafkaErrorCode::TopicAlreadyExists))) => Ok(false),
        Some(Err((_, code))) => Err(anyhow::anyhow!("CreateTopics {topic} failed: {code}")),
        None => Err(anyhow::anyhow!("CreateTopics {topic} returned no result")),
    }
}

/// Waits until every broker of `bootstrap` (a comma-separated list) names a leader for
/// each of the `partitions` partitions of `topic`: a created topic's leaders reach the
/// brokers' metadata a moment after CreateTopics answers, and a run started before would
/// time its producer's first metadata retries instead of the brokers.
pub fn wait_until_led(bootstrap: &str, topic: &str, partitions: usize) -> Result<()> {
    let deadline = std::time::Instant::now() + TIMEOUT;
    for address in bootstrap.split(',') {
        loop {
            let led = strom_client::blocking::metadata(address, TIMEOUT).is_ok_and(|m| {
                m.topics.iter().any(|t| {
                    t.name.as_ref().is_some_and(|n| n.as_str() == topic)
                        && t.partitions.len() == partitions
                        && t.partitions
                            .iter()
                            .all(|p| p.error_code == 0 && p.leader_id.0 >= 0)
                })
            });
            if led {
                break;
            }
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "{address} named no leader for every partition of {topic} within {TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    Ok(())
}

/// Deletes `topic`; one that is already gone is no error.
pub fn delete_topic(bootstrap: &str, topic: &str) -> Result<()> {
    let admin = Admin::connect(bootstrap)?;
    let results = admin
        .runtime
        .block_on(admin.client.delete_topics(&[topic], &admin.options))
        .with_context(|| format!("DeleteTopics {topic} failed"))?;
    match results.into_iter().next() {
        Some(Ok(_)) | Some(Err((_, RDKafkaErrorCode::UnknownTopicOrPartition))) => Ok(()),
        Some(Err((_, code))) => Err(anyhow::anyhow!("DeleteTopics {topic} failed: {code}")),
        None => Err(anyhow::anyhow!("DeleteTopics {topic} returned no result")),
    }
}

/// An admin client with the runtime its futures are driven on, for one request.
struct Admin {
    client: AdminClient<DefaultClientContext>,
    options: AdminOptions,
    runtime: tokio::runtime::Runtime,
}

impl Admin {
    fn connect(bootstrap: &str) -> Result<Self> {
        Ok(Self {
            client: ClientConfig::new()
                .set("bootstrap.servers", bootstrap)
                .create()
                .context("cannot create an admin client")?,
            options: AdminOptions::new().operation_timeout(Some(TIMEOUT)),
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start a runtime for the admin client")?,
        })
    }
}
