//! Topic set-up through the Admin API, for runs that need a partition count the broker's
//! auto-creation would not give (bench's 6- and 2-partition topics, e2e-latency's topic).

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

/// Creates `topic` with `partitions` partitions (replication factor 1); an existing topic
/// is left as it is. Returns whether it was created.
pub fn create_topic(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    replication: i32,
) -> Result<bool> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .context("cannot create an admin client")?;
    let new_topic = NewTopic::new(topic, partitions, TopicReplication::Fixed(replication));
    let options = AdminOptions::new().operation_timeout(Some(TIMEOUT));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start a runtime for the admin client")?;
    let results = runtime
        .block_on(admin.create_topics([&new_topic], &options))
        .with_context(|| format!("CreateTopics {topic} failed"))?;
    match results.into_iter().next() {
        Some(Ok(_)) => Ok(true),
        Some(Err((_, RDKafkaErrorCode::TopicAlreadyExists))) => Ok(false),
        Some(Err((_, code))) => Err(anyhow::anyhow!("CreateTopics {topic} failed: {code}")),
        None => Err(anyhow::anyhow!("CreateTopics {topic} returned no result")),
    }
}
