//! librdkafka helpers the black-box tests share: an admin client to create topics, and a
//! send that waits for queue space instead of failing.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::message::ToBytes;
use rdkafka::producer::{BaseProducer, BaseRecord, ProducerContext};
use rdkafka::util::IntoOpaque;

const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `future` to completion on a throwaway runtime (rdkafka's admin API is async).
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(future)
}

pub fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client")
}

/// Creates `topic` with `partitions` partitions through CreateTopics, or panics.
pub fn create_topic(bootstrap: &str, topic: &str, partitions: i32) {
    create_replicated_topic(bootstrap, topic, partitions, 1, &[]);
}

/// Creates `topic` with `partitions` partitions of `replication_factor` replicas and
/// `configs` through CreateTopics, or panics.
pub fn create_replicated_topic(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    replication_factor: i32,
    configs: &[(&str, &str)],
) {
    let options = AdminOptions::new().request_timeout(Some(ADMIN_TIMEOUT));
    let mut new_topic = NewTopic::new(
        topic,
        partitions,
        TopicReplication::Fixed(replication_factor),
    );
    for (k, v) in configs {
        new_topic = new_topic.set(k, v);
    }
    let results = block_on(admin(bootstrap).create_topics(&[new_topic], &options))
        .expect("create_topics request");
    for result in results {
        result.unwrap_or_else(|(t, e)| panic!("create topic {t}: {e}"));
    }
}

/// Hands `record` to librdkafka, serving delivery reports while its queue is full.
pub fn send_waiting<'a, K, P, C>(
    producer: &BaseProducer<C>,
    mut record: BaseRecord<'a, K, P, C::DeliveryOpaque>,
) where
    K: ToBytes + ?Sized,
    P: ToBytes + ?Sized,
    C: ProducerContext,
    C::DeliveryOpaque: IntoOpaque,
{
    while let Err((e, r)) = producer.send(record) {
        assert_eq!(
            e.rdkafka_error_code(),
            Some(RDKafkaErrorCode::QueueFull),
            "send: {e}"
        );
        producer.poll(Duration::from_millis(10));
        record = r;
    }
    producer.poll(Duration::ZERO);
}

/// Counts the assignments a member is given.
pub struct Assignments(pub std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl rdkafka::ClientContext for Assignments {}

impl rdkafka::consumer::ConsumerContext for Assignments {
    fn post_rebalance(
        &self,
        _: &rdkafka::consumer::BaseConsumer<Self>,
        rebalance: &rdkafka::consumer::Rebalance<'_>,
    ) {
        if let rdkafka::consumer::Rebalance::Assign(_) = rebalance {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// DescribeGroups (v5) of `group` at `addr`: (state, member ids).
pub fn describe_group(addr: &str, group: &str) -> (String, Vec<String>) {
    use kafka_protocol::messages::{
        ApiKey, DescribeGroupsRequest, DescribeGroupsResponse, GroupId,
    };
    let response: DescribeGroupsResponse = super::raw::Conn::connect(addr).call(
        ApiKey::DescribeGroups,
        5,
        &DescribeGroupsRequest::default().with_groups(vec![GroupId(
            kafka_protocol::protocol::StrBytes::from_string(group.to_string()),
        )]),
    );
    let described = &response.groups[0];
    (
        described.group_state.to_string(),
        described
            .members
            .iter()
            .map(|m| m.member_id.to_string())
            .collect(),
    )
}
