//! Reading the consumer protocol's subscription out of member metadata.
//!
//! The coordinator treats member metadata as opaque bytes except in one place: Kafka's
//! OffsetDelete refuses to delete offsets of a topic the group is still subscribed to,
//! which needs the topics of each member's `ConsumerProtocolSubscription`.

use bytes::{Buf, Bytes};
use kafka_protocol::messages::ConsumerProtocolSubscription;
use kafka_protocol::protocol::{Decodable, Message};

/// The topics any of `metadata` (consumer protocol subscriptions) subscribes to.
/// Metadata that does not decode contributes nothing.
pub fn subscribed_topics(metadata: &[Bytes]) -> Vec<String> {
    let mut topics: Vec<String> = Vec::new();
    for m in metadata {
        let mut buf = m.clone();
        if buf.remaining() < 2 {
            continue;
        }
        let version = buf
            .get_i16()
            .clamp(0, ConsumerProtocolSubscription::VERSIONS.max);
        if let Ok(sub) = ConsumerProtocolSubscription::decode(&mut buf, version) {
            for t in sub.topics {
                let t = t.to_string();
                if !topics.contains(&t) {
                    topics.push(t);
                }
            }
        }
    }
    topics
}
