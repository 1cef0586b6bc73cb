//! Incremental fetch sessions (KIP-227) on a real broker: a full fetch opens a session, an
//! incremental one names only what changed and is answered only for partitions with
//! something new, and a stale epoch or unknown session gets Kafka's errors. kafka-python's
//! and the native load generator's consumers use these sessions in their own tests.

mod common;

use common::raw::{batch, topic_name, Conn};
use common::StromBroker;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, FetchRequest, FetchResponse};
use kafka_protocol::ResponseError;

/// Fetch v12: topics by name, sessions.
const VERSION: i16 = 12;

fn fetch(conn: &mut Conn, id: i32, epoch: i32, partitions: &[(&str, i64)]) -> FetchResponse {
    let topics = partitions
        .iter()
        .map(|(topic, offset)| {
            FetchTopic::default()
                .with_topic(topic_name(topic))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(*offset)
                    .with_partition_max_bytes(1 << 20)])
        })
        .collect();
    let request = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_id(id)
        .with_session_epoch(epoch)
        .with_topics(topics);
    conn.call(ApiKey::Fetch, VERSION, &request)
}

/// (topic, record bytes) of every partition in the answer.
fn answered(r: &FetchResponse) -> Vec<(String, usize)> {
    r.responses
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    t.topic.to_string(),
                    p.records.as_ref().map_or(0, |r| r.len()),
                )
            })
        })
        .collect()
}

#[test]
fn an_incremental_fetch_is_answered_only_for_partitions_with_something_new() {
    let broker = StromBroker::start(&[]);
    let mut conn = Conn::open(&broker);
    assert_eq!(conn.create_topic("a"), 0);
    assert_eq!(conn.create_topic("b"), 0);
    assert_eq!(conn.produce("a", batch(&[b"one", b"two"])).0, 0);

    let full = fetch(&mut conn, 0, 0, &[("a", 0), ("b", 0)]);
    let id = full.session_id;
    assert!(id > 0, "a session is opened");
    let parts = answered(&full);
    assert_eq!(parts.len(), 2, "a full fetch answers every partition");
    assert!(parts[0].1 > 0 && parts[1].1 == 0, "{parts:?}");

    // Partition a-0 read to its end: nothing is new anywhere.
    let quiet = fetch(&mut conn, id, 1, &[("a", 2)]);
    assert_eq!((quiet.error_code, quiet.session_id), (0, id));
    assert_eq!(answered(&quiet), vec![]);

    // Only b-0 has news, and the request names no partition.
    assert_eq!(conn.produce("b", batch(&[b"three"])).0, 0);
    let news = fetch(&mut conn, id, 2, &[]);
    let parts = answered(&news);
    assert_eq!(parts.len(), 1, "{parts:?}");
    assert!(parts[0].0 == "b" && parts[0].1 > 0, "{parts:?}");

    let stale = fetch(&mut conn, id, 2, &[]);
    assert_eq!(
        stale.error_code,
        ResponseError::InvalidFetchSessionEpoch.code()
    );
    let unknown = fetch(&mut conn, id ^ 1, 1, &[]);
    assert_eq!(
        unknown.error_code,
        ResponseError::FetchSessionIdNotFound.code()
    );
    let sessionless = fetch(&mut conn, id, -1, &[("a", 0)]);
    assert_eq!((sessionless.error_code, sessionless.session_id), (0, 0));
    assert_eq!(
        fetch(&mut conn, id, 3, &[]).error_code,
        ResponseError::FetchSessionIdNotFound.code(),
        "epoch -1 closed the session"
    );
}
