//! What the tool asks of the cluster, through librdkafka: groups (ListGroups,
//! DescribeGroups), committed offsets (OffsetFetch, OffsetCommit), log start and end
//! offsets (ListOffsets) and group deletion (DeleteGroups). Nothing here knows the broker.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use strom_client::assignment;

const TIMEOUT: Duration = Duration::from_secs(30);

/// (topic, partition)
pub type TopicPartition = (String, i32);

/// A member of a group as `--describe` shows it.
#[derive(Debug, Clone)]
pub struct MemberInfo {
    pub member_id: String,
    pub client_id: String,
    pub host: String,
    pub assignment: Vec<TopicPartition>,
}

/// A group's state (Kafka's names: Stable, Empty, Dead, ...) and members.
#[derive(Debug, Clone)]
pub struct GroupInfo {
    pub state: String,
    pub members: Vec<MemberInfo>,
}

/// A connection to the cluster for one invocation.
pub struct GroupClient {
    bootstrap: String,
    consumer: BaseConsumer,
}

impl GroupClient {
    pub fn connect(bootstrap: &str) -> Result<Self> {
        let consumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .create()
            .context("cannot create a client")?;
        Ok(Self {
            bootstrap: bootstrap.to_string(),
            consumer,
        })
    }

    /// A consumer of `group` that never subscribes: offsets are read and written as by a
    /// client that does not use group management.
    fn group_consumer(&self, group: &str) -> Result<BaseConsumer> {
        ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .create()
            .context("cannot create a client")
    }

    /// Every consumer group (protocol type `consumer`, or empty for groups that only
    /// store offsets), sorted.
    pub fn list(&self) -> Result<Vec<String>> {
        let list = self.consumer.fetch_group_list(None, TIMEOUT)?;
        let mut groups: Vec<String> = list
            .groups()
            .iter()
            .filter(|g| matches!(g.protocol_type(), "consumer" | ""))
            .map(|g| g.name().to_string())
            .collect();
        groups.sort();
        Ok(groups)
    }

    /// The group's state and members; a group the cluster does not know is `Dead`, as
    /// Kafka reports it.
    pub fn describe(&self, group: &str) -> Result<GroupInfo> {
        let list = self.consumer.fetch_group_list(Some(group), TIMEOUT)?;
        let Some(info) = list.groups().iter().find(|g| g.name() == group) else {
            return Ok(GroupInfo {
                state: "Dead".to_string(),
                members: Vec::new(),
            });
        };
        let members = info
            .members()
            .iter()
            .map(|m| MemberInfo {
                member_id: m.id().to_string(),
                client_id: m.client_id().to_string(),
                host: m.client_host().to_string(),
                assignment: m.assignment().map(assignment::decode).unwrap_or_default(),
            })
            .collect();
        Ok(GroupInfo {
            state: info.state().to_string(),
            members,
        })
    }

    /// Every partition of every topic (or of `topics`), from the cluster's metadata.
    pub fn partitions(&self, topics: Option<&[String]>) -> Result<Vec<TopicPartition>> {
        let metadata = self.consumer.fetch_metadata(None, TIMEOUT)?;
        let mut out = Vec::new();
        for t in metadata.topics() {
            if topics.is_some_and(|wanted| !wanted.iter().any(|w| w == t.name())) {
                continue;
            }
            if let Some(e) = t.error() {
                return Err(anyhow!("topic {}: {:?}", t.name(), e));
            }
            out.extend(
                t.partitions()
                    .iter()
                    .map(|p| (t.name().to_string(), p.id())),
            );
        }
        out.sort();
        Ok(out)
    }

    /// The committed offsets of `group` among `partitions` (partitions without one are
    /// left out).
    pub fn committed(
        &self,
        group: &str,
        partitions: &[TopicPartition],
    ) -> Result<BTreeMap<TopicPartition, i64>> {
        if partitions.is_empty() {
            return Ok(BTreeMap::new());
        }
        let mut tpl = TopicPartitionList::new();
        for (t, p) in partitions {
            tpl.add_partition(t, *p);
        }
        let committed = self
            .group_consumer(group)?
            .committed_offsets(tpl, TIMEOUT)?;
        Ok(committed
            .elements()
            .iter()
            .filter_map(|e| match e.offset() {
                Offset::Offset(o) => Some(((e.topic().to_string(), e.partition()), o)),
                _ => None,
            })
            .collect())
    }

    /// (log start offset, log end offset) of a partition.
    pub fn watermarks(&self, tp: &TopicPartition) -> Result<(i64, i64)> {
        Ok(self.consumer.fetch_watermarks(&tp.0, tp.1, TIMEOUT)?)
    }

    /// Commits `offsets` for `group` (which must have no active members).
    pub fn commit(&self, group: &str, offsets: &BTreeMap<TopicPartition, i64>) -> Result<()> {
        let mut tpl = TopicPartitionList::new();
        for ((t, p), o) in offsets {
            tpl.add_partition_offset(t, *p, Offset::Offset(*o))?;
        }
        self.group_consumer(group)?
            .commit(&tpl, CommitMode::Sync)
            .context("committing the new offsets failed")
    }

    /// Deletes `group`; the error names Kafka's reason.
    pub fn delete(&self, group: &str) -> Result<()> {
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .create()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let options = AdminOptions::new().request_timeout(Some(TIMEOUT));
        let results = runtime.block_on(admin.delete_groups(&[group], &options))?;
        for result in results {
            if let Err((_, code)) = result {
                return Err(anyhow!("{code}"));
            }
        }
        Ok(())
    }
}
