//! Connections and the work parked on them: an abandoned long-poll or JoinGroup gives its descriptor
//! back at once, idle connections are closed after `connections.max.idle.ms`, a client
//! that stops reading its answers is cut off after it and holds little of the broker's
//! memory meanwhile, a shutdown ends parked fetches, a fetch parked on a deleted topic
//! answers at once, and a loop of connections that open and close does not grow the
//! broker's memory.

mod common;

use std::io::Read;
use std::net::Shutdown;
use std::time::Duration;

use common::raw::{assert_broker_serves_others, keyless_batch, topic_name, Conn};
use common::{wait_until, StromBroker};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    ApiKey, DeleteTopicsRequest, DeleteTopicsResponse, FetchRequest, FetchResponse,
};

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
/// Fetch v11: topics by name, no fetch sessions needed.
const FETCH_VERSION: i16 = 11;
const SETTLE: Duration = Duration::from_secs(10);

/// A Fetch of partition 0 of `topic` from offset 0 that waits `max_wait_ms` for one byte.
fn long_poll(topic: &str, max_wait_ms: i32) -> FetchRequest {
    FetchRequest::default()
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])])
}

#[test]
fn abandoned_long_polls_give_their_descriptors_back_at_once() {
    let broker = StromBroker::start(&[]);
    // Kept open, so that the baseline counts its descriptor for the whole test.
    let mut admin = Conn::open(&broker);
    assert_eq!(admin.create_topic("quiet"), 0);
    // A first read opens the segment's files (the broker opens them on demand).
    let _: FetchResponse = admin.call(ApiKey::Fetch, FETCH_VERSION, &long_poll("quiet", 0));
    let baseline = broker.open_descriptors();
    let mut parked: Vec<Conn> = (0..300).map(|_| Conn::open(&broker)).collect();
    for conn in &mut parked {
        conn.send(ApiKey::Fetch, FETCH_VERSION, &long_poll("quiet", i32::MAX));
    }
    assert!(
        wait_until(SETTLE, || broker.open_descriptors() >= baseline + 300),
        "the broker holds {} descriptors, expected at least {}",
        broker.open_descriptors(),
        baseline + 300
    );
    for conn in &parked {
        conn.stream.shutdown(Shutdown::Both).unwrap();
    }
    drop(parked);
    assert!(
        wait_until(SETTLE, || broker.open_descriptors() <= baseline),
        "descriptors still held after the clients left: {} (baseline {baseline})",
        broker.open_descriptors()
    );
    // The broker still answers a fetch of its own.
    let response: FetchResponse = admin.call(ApiKey::Fetch, FETCH_VERSION, &long_poll("quiet", 0));
    assert_eq!(response.responses[0].partitions[0].error_code, 0);
}

#[test]
fn idle_connections_are_closed_after_connections_max_idle_ms() {
    let broker = StromBroker::start(&["connections.max.idle.ms=300"]);
    let mut conn = Conn::open(&broker);
    assert_eq!(conn.api_versions(3).error_code, 0);
    conn.assert_closed("a connection idle for longer than connections.max.idle.ms");
}

#[test]
fn a_client_that_stops_reading_its_answers_is_cut_off_and_holds_little_memory_meanwhile() {
    const TOPICS: usize = 16;
    const REQUESTS: usize = 150;
    let broker = StromBroker::start(&["connections.max.idle.ms=1000"]);
    let mut admin = Conn::open(&broker);
    // Each of 16 topics holds one batch of about 200 KiB, so each answer below is 3.2 MiB
    // of records copied into memory (reads under 256 KiB are not sent from the file).
    let value = vec![b'v'; 4096];
    let values: Vec<&[u8]> = (0..50).map(|_| &value[..]).collect();
    let topics: Vec<String> = (0..TOPICS).map(|i| format!("backlog-{i}")).collect();
    for topic in &topics {
        assert_eq!(admin.create_topic(topic), 0);
        assert_eq!(admin.produce(topic, keyless_batch(&values)).0, 0);
    }
    let fetch = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(64 << 20)
        .with_topics(
            topics
                .iter()
                .map(|topic| {
                    FetchTopic::default()
                        .with_topic(topic_name(topic))
                        .with_partitions(vec![FetchPartition::default()
                            .with_partition(0)
                            .with_fetch_offset(0)
                            .with_partition_max_bytes(256 * 1024 - 1)])
                })
                .collect(),
        );
    let answer: FetchResponse = admin.call(ApiKey::Fetch, FETCH_VERSION, &fetch);
    let answer_bytes: usize = answer
        .responses
        .iter()
        .map(|t| t.partitions[0].records.as_ref().map_or(0, |r| r.len()))
        .sum();
    assert!(
        answer_bytes > 3 << 20,
        "each answer holds {answer_bytes} bytes of records"
    );
    let peak_before = broker.peak_rss_bytes();

    // 150 answers of 3.2 MiB asked for and none read.
    let mut stuck = Conn::open(&broker);
    let client_port = stuck.stream.local_addr().unwrap().port();
    for _ in 0..REQUESTS {
        stuck.send(ApiKey::Fetch, FETCH_VERSION, &fetch);
    }
    assert!(
        wait_until(SETTLE, || !established(broker.port(), client_port)),
        "the connection whose client reads nothing is still open {SETTLE:?} after it stopped"
    );
    // Meanwhile the broker held at most its allowance of 16 MiB of queued answers (and the
    // answers being written): queueing 64 answers, as it did, took 200 MB more.
    let grown = broker.peak_rss_bytes().saturating_sub(peak_before);
    assert!(
        grown < 64 << 20,
        "the broker's peak RSS grew by {grown} bytes while the client read nothing"
    );
    // From the client's side: what reached its socket before the cut, then the end (or a
    // reset: the broker closed with requests of this client unread).
    let mut received = 0;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match stuck.stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => received += n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the connection did not end: {e}"),
        }
    }
    assert!(
        received < REQUESTS * answer_bytes / 2,
        "{received} bytes of answers arrived"
    );
    assert_broker_serves_others(&broker, "a client that read nothing was cut off");
}

/// Whether the broker's side of the connection from `client_port` is still established
/// (`/proc/net/tcp`: local and remote address in hex, state 01).
fn established(broker_port: u16, client_port: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("read /proc/net/tcp");
    let local = format!(":{broker_port:04X}");
    let remote = format!(":{client_port:04X}");
    table.lines().skip(1).any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.len() > 3
            && fields[1].ends_with(&local)
            && fields[2].ends_with(&remote)
            && fields[3] == "01"
    })
}

#[test]
fn a_connection_in_use_is_not_idle() {
    let broker = StromBroker::start(&["connections.max.idle.ms=2000"]);
    assert_eq!(Conn::open(&broker).create_topic("busy"), 0);
    let mut conn = Conn::open(&broker);
    // A parked fetch longer than the idle limit is answered, not cut off.
    let response: FetchResponse = conn.call(ApiKey::Fetch, FETCH_VERSION, &long_poll("busy", 3000));
    assert_eq!(response.responses[0].partitions[0].error_code, 0);
    assert_eq!(conn.api_versions(3).error_code, 0);
}

#[test]
fn shutdown_ends_parked_fetches() {
    let mut broker = StromBroker::start(&[]);
    assert_eq!(Conn::open(&broker).create_topic("parked"), 0);
    let mut conn = Conn::open(&broker);
    conn.send(ApiKey::Fetch, FETCH_VERSION, &long_poll("parked", i32::MAX));
    broker.signal_terminate();
    conn.assert_closed("a parked fetch during shutdown");
    let status = broker.wait_exit();
    assert!(status.success(), "exit status {status}");
}

#[test]
fn a_fetch_parked_on_a_deleted_topic_answers_unknown_topic_at_once() {
    let broker = StromBroker::start(&[]);
    let mut admin = Conn::open(&broker);
    assert_eq!(admin.create_topic("doomed"), 0);
    let mut fetcher = Conn::open(&broker);
    // Longer than the read timeout of the raw connection: waiting it out fails the test.
    fetcher.stream.set_read_timeout(Some(SETTLE)).unwrap();
    fetcher.send(ApiKey::Fetch, FETCH_VERSION, &long_poll("doomed", 25_000));
    let deleted: DeleteTopicsResponse = admin.call(
        ApiKey::DeleteTopics,
        6,
        &DeleteTopicsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![
                DeleteTopicState::default().with_name(Some(topic_name("doomed")))
            ]),
    );
    assert_eq!(deleted.responses[0].error_code, 0);
    let response: FetchResponse = fetcher.receive(ApiKey::Fetch, FETCH_VERSION);
    assert_eq!(
        response.responses[0].partitions[0].error_code,
        UNKNOWN_TOPIC_OR_PARTITION
    );
}

#[test]
fn connections_that_come_and_go_do_not_grow_memory() {
    let broker = StromBroker::start(&[]);
    let mut admin = Conn::open(&broker);
    assert_eq!(admin.create_topic("churn"), 0);
    let _: FetchResponse = admin.call(ApiKey::Fetch, FETCH_VERSION, &long_poll("churn", 0));
    let baseline = broker.open_descriptors();
    let mut rss_after_round = Vec::new();
    for _ in 0..5 {
        let mut conns: Vec<Conn> = (0..1000).map(|_| Conn::open(&broker)).collect();
        for conn in &mut conns {
            let response: FetchResponse =
                conn.call(ApiKey::Fetch, FETCH_VERSION, &long_poll("churn", 0));
            assert_eq!(response.responses[0].partitions[0].error_code, 0);
        }
        drop(conns);
        assert!(
            wait_until(SETTLE, || broker.open_descriptors() <= baseline),
            "connections not closed"
        );
        rss_after_round.push(broker.rss_bytes());
    }
    // Freed memory goes back to the system once the connections are gone: RSS falls
    // back below what it was after the first round (glibc alone kept growing, by about
    // 5 MB a round, to 59 MB after 16 rounds).
    let first = rss_after_round[0];
    let limit = first + 4 * 1024 * 1024;
    assert!(
        wait_until(SETTLE, || broker.rss_bytes() <= limit),
        "RSS {} bytes after 5 rounds of 1000 connections, above {limit} (per round: {rss_after_round:?})",
        broker.rss_bytes()
    );
}

#[test]
fn an_abandoned_join_group_gives_its_descriptor_back_at_once() {
    use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
    use kafka_protocol::messages::{GroupId, JoinGroupRequest};
    use kafka_protocol::protocol::StrBytes;

    // The first join of an empty group waits out the initial rebalance delay: 25 s here.
    let broker = StromBroker::start(&["group.initial.rebalance.delay.ms=25000"]);
    let mut admin = Conn::open(&broker);
    assert_eq!(admin.api_versions(3).error_code, 0);
    for i in 0..50 {
        admin.wait_for_coordinator(&format!("parked-{i}"));
    }
    let baseline = broker.open_descriptors();
    let mut joiners: Vec<Conn> = (0..50).map(|_| Conn::open(&broker)).collect();
    for (i, conn) in joiners.iter_mut().enumerate() {
        conn.send(
            ApiKey::JoinGroup,
            3,
            &JoinGroupRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(format!("parked-{i}"))))
                .with_session_timeout_ms(30_000)
                .with_rebalance_timeout_ms(30_000)
                .with_protocol_type(StrBytes::from_static_str("consumer"))
                .with_protocols(vec![JoinGroupRequestProtocol::default()
                    .with_name(StrBytes::from_static_str("range"))]),
        );
    }
    assert!(
        wait_until(SETTLE, || broker.open_descriptors() >= baseline + 50),
        "joins not parked"
    );
    for conn in &joiners {
        conn.stream.shutdown(Shutdown::Both).unwrap();
    }
    drop(joiners);
    assert!(
        wait_until(SETTLE, || broker.open_descriptors() <= baseline),
        "descriptors still held after the members left: {} (baseline {baseline})",
        broker.open_descriptors()
    );
    assert_eq!(admin.api_versions(3).error_code, 0);
}
