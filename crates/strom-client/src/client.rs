//! The cluster as the native client sees it: bootstrap, Metadata, one connection per
//! broker, and where each partition's leader is.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{ApiKey, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;

use crate::connection::Connection;
use crate::errors;
use crate::metrics::ClientMetrics;

/// One partition of a topic: its leader and the leader's epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionLeader {
    /// -1 while the partition has no leader.
    pub leader: i32,
    pub leader_epoch: i32,
}

/// A client's view of the cluster, shared by its tasks.
pub struct NativeClient {
    pub client_id: String,
    bootstrap: Vec<String>,
    brokers: Mutex<HashMap<i32, String>>,
    connections: tokio::sync::Mutex<HashMap<i32, Arc<Connection>>>,
    bootstrap_connection: tokio::sync::Mutex<Option<Arc<Connection>>>,
    /// What `--print-metrics` prints.
    pub metrics: ClientMetrics,
}

impl NativeClient {
    pub fn new(bootstrap: &str, client_id: &str) -> Result<Arc<Self>> {
        let servers: Vec<String> = bootstrap
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        if servers.is_empty() {
            bail!("no bootstrap server given");
        }
        Ok(Arc::new(Self {
            client_id: client_id.to_string(),
            bootstrap: servers,
            brokers: Mutex::new(HashMap::new()),
            connections: tokio::sync::Mutex::new(HashMap::new()),
            bootstrap_connection: tokio::sync::Mutex::new(None),
            metrics: ClientMetrics::default(),
        }))
    }

    /// A connection to any broker: a known broker's if there is one, else a bootstrap
    /// server's (the first that answers).
    pub async fn any_connection(&self) -> Result<Arc<Connection>> {
        let known = self.brokers.lock().keys().min().copied();
        if let Some(id) = known {
            if let Ok(connection) = self.connection(id).await {
                return Ok(connection);
            }
        }
        let mut cached = self.bootstrap_connection.lock().await;
        if let Some(connection) = cached.as_ref().filter(|c| !c.is_closed()) {
            return Ok(Arc::clone(connection));
        }
        let mut last = None;
        for server in &self.bootstrap {
            match Connection::connect(server, &self.client_id, self.metrics.node(-1)).await {
                Ok(connection) => {
                    *cached = Some(Arc::clone(&connection));
                    return Ok(connection);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| anyhow!("no bootstrap server")))
            .context("no bootstrap server answered")
    }

    /// The connection to broker `id`, opened on first use and again after it closed.
    pub async fn connection(&self, id: i32) -> Result<Arc<Connection>> {
        let mut connections = self.connections.lock().await;
        if let Some(connection) = connections.get(&id).filter(|c| !c.is_closed()) {
            return Ok(Arc::clone(connection));
        }
        let connection = self.dedicated_connection(id).await?;
        connections.insert(id, Arc::clone(&connection));
        Ok(connection)
    }

    /// A new connection to broker `id`, not shared until [`Self::connection`] keeps it: a
    /// group member talks to its coordinator on one of its own, so a commit or heartbeat
    /// never waits behind a Fetch the broker holds for `fetch.max.wait.ms` (Kafka's
    /// consumer does the same).
    pub async fn dedicated_connection(&self, id: i32) -> Result<Arc<Connection>> {
        let address = self
            .brokers
            .lock()
            .get(&id)
            .cloned()
            .ok_or_else(|| anyhow!("broker {id} is not in the cluster's metadata"))?;
        Connection::connect(&address, &self.client_id, self.metrics.node(id)).await
    }

    /// Remembers broker `id`'s address (a coordinator found by FindCoordinator).
    pub fn remember_broker(&self, id: i32, address: &str) {
        self.brokers.lock().insert(id, address.to_string());
    }

    /// Metadata of `topics`, remembering every broker's address; `auto_create` asks the
    /// broker to create missing topics (if it allows that), as Kafka's producer does.
    pub async fn metadata(&self, topics: &[&str], auto_create: bool) -> Result<MetadataResponse> {
        let connection = self.any_connection().await?;
        let version = connection.versions.pick(ApiKey::Metadata, 4, 12)?;
        let request = MetadataRequest::default()
            .with_topics(Some(
                topics
                    .iter()
                    .map(|t| {
                        MetadataRequestTopic::default()
                            .with_name(Some(TopicName(StrBytes::from_string(t.to_string()))))
                    })
                    .collect(),
            ))
            .with_allow_auto_topic_creation(auto_create);
        let response = connection.call(version, &request).await?;
        let mut brokers = self.brokers.lock();
        for broker in &response.brokers {
            brokers.insert(
                broker.node_id.0,
                format!("{}:{}", broker.host.as_str(), broker.port),
            );
        }
        Ok(response)
    }

    /// The leaders of `topic`'s partitions, by partition index; fails naming the topic
    /// when it does not exist (and `auto_create` did not create it).
    pub async fn leaders(&self, topic: &str, auto_create: bool) -> Result<Vec<PartitionLeader>> {
        let response = self.metadata(&[topic], auto_create).await?;
        let meta = response
            .topics
            .iter()
            .find(|t| t.name.as_ref().map(|n| n.0.as_str()) == Some(topic))
            .ok_or_else(|| anyhow!("the broker did not describe topic {topic}"))?;
        if meta.error_code != 0 && meta.partitions.is_empty() {
            bail!(
                "topic {topic}: {}",
                errors::describe(meta.error_code, "Metadata")
            );
        }
        let count = meta.partitions.len();
        let mut leaders = vec![
            PartitionLeader {
                leader: -1,
                leader_epoch: -1
            };
            count
        ];
        for p in &meta.partitions {
            let index = usize::try_from(p.partition_index)
                .ok()
                .filter(|&i| i < count)
                .ok_or_else(|| {
                    anyhow!(
                        "the broker described partition {} of {topic}, which has {count} partitions",
                        p.partition_index
                    )
                })?;
            leaders[index] = PartitionLeader {
                leader: if p.error_code == 0 { p.leader_id.0 } else { -1 },
                leader_epoch: p.leader_epoch,
            };
        }
        if leaders.is_empty() {
            bail!("topic {topic} has no partitions");
        }
        Ok(leaders)
    }
}
