//! Bad input over raw TCP against the real `strom` binary. Frames are built with the
//! `kafka-protocol` crate and then damaged by hand. Each case gets Kafka's error code, or
//! its connection closed; after each, a second connection still gets ApiVersions
//! answered, and at the end the broker shuts down cleanly without having panicked.

mod common;

use std::io::Write;
use std::net::Shutdown;

use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, ProduceRequest, ProduceResponse,
    ResponseHeader,
};
use kafka_protocol::protocol::Decodable;

use common::raw::{
    assert_broker_serves_others, assert_clean_shutdown, batch, keyless_batch, topic_name, Conn,
};
use common::StromBroker;

/// The bytes of a record batch before its records.
const BATCH_HEADER: usize = 61;
const CORRUPT_MESSAGE: i16 = 2;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const MESSAGE_TOO_LARGE: i16 = 10;
const INVALID_TOPIC_EXCEPTION: i16 = 17;
const INVALID_REQUEST: i16 = 42;
const UNSUPPORTED_VERSION: i16 = 35;
const TOPIC_ALREADY_EXISTS: i16 = 36;
const ILLEGAL_GENERATION: i16 = 22;
const UNKNOWN_MEMBER_ID: i16 = 25;
const REBALANCE_IN_PROGRESS: i16 = 27;
const INVALID_RECORD: i16 = 87;

/// Recomputes the CRC32C of a hand-edited batch (it covers bytes 21..).
fn fix_crc(b: &mut [u8]) {
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
}

#[test]
fn frame_above_socket_request_max_bytes_closes_the_connection() {
    let broker = StromBroker::start(&["socket.request.max.bytes=10000"]);
    let mut conn = Conn::open(&broker);
    // Announce 100 MB; send only the start of it.
    conn.stream
        .write_all(&(100_000_000i32).to_be_bytes())
        .unwrap();
    conn.stream.write_all(&[0u8; 1000]).unwrap();
    conn.assert_closed("frame of 100 MB");
    assert_broker_serves_others(&broker, "an oversized frame");

    // Just above the limit, a well-formed request: closed too.
    let mut conn = Conn::open(&broker);
    let big = vec![b'x'; 10_100];
    let frame = conn.request_bytes(ApiKey::Produce as i16, 9, &ProduceRequest::default());
    let mut padded = frame.to_vec();
    padded.extend_from_slice(&big);
    conn.write_frame(&padded);
    conn.assert_closed("frame just above the limit");
    assert_broker_serves_others(&broker, "a frame just above the limit");
    assert_clean_shutdown(broker);
}

#[test]
fn negative_frame_size_closes_the_connection() {
    let broker = StromBroker::start(&[]);
    let mut conn = Conn::open(&broker);
    conn.stream.write_all(&(-5i32).to_be_bytes()).unwrap();
    conn.assert_closed("negative frame size");
    assert_broker_serves_others(&broker, "a negative frame size");
    assert_clean_shutdown(broker);
}

#[test]
fn truncated_frame_then_close_is_dropped() {
    let broker = StromBroker::start(&[]);
    let mut conn = Conn::open(&broker);
    let frame = conn.request_bytes(
        ApiKey::ApiVersions as i16,
        3,
        &ApiVersionsRequest::default(),
    );
    conn.stream
        .write_all(&(frame.len() as i32 + 50).to_be_bytes())
        .unwrap();
    conn.stream.write_all(&frame).unwrap();
    conn.stream.shutdown(Shutdown::Write).unwrap();
    conn.assert_closed("truncated frame");
    assert_broker_serves_others(&broker, "a truncated frame");

    // A frame cut inside its 4-byte size.
    let mut conn = Conn::open(&broker);
    conn.stream.write_all(&[0, 0]).unwrap();
    conn.stream.shutdown(Shutdown::Write).unwrap();
    conn.assert_closed("truncated size");
    assert_broker_serves_others(&broker, "a truncated size");
    assert_clean_shutdown(broker);
}

#[test]
fn garbage_bytes_close_the_connection() {
    let broker = StromBroker::start(&[]);
    // Random bytes where the header should be.
    let mut conn = Conn::open(&broker);
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let garbage: Vec<u8> = (0..200)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    conn.write_frame(&garbage);
    conn.assert_closed("garbage frame");
    assert_broker_serves_others(&broker, "a garbage frame");

    // A valid CreateTopics v7 header followed by a body cut short.
    let mut conn = Conn::open(&broker);
    let mut frame = conn.header_bytes(ApiKey::CreateTopics as i16, 7).to_vec();
    frame.extend_from_slice(&[0x02, 0x04]);
    conn.write_frame(&frame);
    conn.assert_closed("truncated CreateTopics body");
    assert_broker_serves_others(&broker, "a truncated body");

    // A stream of bytes that is not Kafka at all (an HTTP request).
    let mut conn = Conn::open(&broker);
    conn.stream
        .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    conn.assert_closed("HTTP request");
    assert_broker_serves_others(&broker, "an HTTP request");
    assert_clean_shutdown(broker);
}

/// A 22-byte Metadata request whose topic array claims 2^35 elements. kafka-protocol 0.18
/// calls `Vec::with_capacity` with the claimed length before decoding any element
/// (upstream: kafka-protocol-rs PRs #152/#161/#200, open); the system allocator refuses
/// and the process would abort. strom's allocator (src/allocator.rs) reserves such
/// buffers without backing them, so decoding fails cleanly and only this connection ends.
#[test]
fn array_length_beyond_the_frame_closes_the_connection() {
    let broker = StromBroker::start(&[]);
    let mut conn = Conn::open(&broker);
    let mut frame = conn.header_bytes(ApiKey::Metadata as i16, 12).to_vec();
    frame.extend_from_slice(&[0xff; 7]);
    conn.write_frame(&frame);
    conn.assert_closed("Metadata with a huge topic array");
    assert_broker_serves_others(&broker, "a huge array length");

    let mut conn = Conn::open(&broker);
    let mut frame = conn.header_bytes(ApiKey::Metadata as i16, 4).to_vec();
    frame.extend_from_slice(&0x7fff_ffffi32.to_be_bytes());
    conn.write_frame(&frame);
    conn.assert_closed("Metadata v4 with i32::MAX topics");
    assert_broker_serves_others(&broker, "an i32::MAX array length");
    assert_clean_shutdown(broker);
}

#[test]
fn unknown_api_key_or_version_closes_the_connection() {
    let broker = StromBroker::start(&[]);
    let mut conn = Conn::open(&broker);
    let frame = conn.header_bytes(9999, 0);
    conn.write_frame(&frame);
    conn.assert_closed("API key 9999");
    assert_broker_serves_others(&broker, "an unknown API key");

    let mut conn = Conn::open(&broker);
    let frame = conn.header_bytes(ApiKey::Metadata as i16, 99);
    conn.write_frame(&frame);
    conn.assert_closed("Metadata v99");
    assert_broker_serves_others(&broker, "an unknown Metadata version");
    assert_clean_shutdown(broker);
}

#[test]
fn api_versions_of_an_unknown_version_gets_unsupported_version_and_a_v0_body() {
    let broker = StromBroker::start(&[]);
    let mut conn = Conn::open(&broker);
    let mut frame = conn.header_bytes(ApiKey::ApiVersions as i16, 99);
    // A body in a format the broker cannot know.
    frame.extend_from_slice(&[0x05, b'n', b'e', b'x', b't', 0x02, b'9', 0x00, 0x2a]);
    conn.write_frame(&frame);
    let mut response = conn
        .read_frame()
        .expect("an answer, not a closed connection");
    let header = ResponseHeader::decode(&mut response, 0).unwrap();
    assert_eq!(header.correlation_id, conn.correlation_id);
    let body = ApiVersionsResponse::decode(&mut response, 0).expect("a v0 body");
    assert!(
        response.is_empty(),
        "{} bytes after the v0 body",
        response.len()
    );
    assert_eq!(body.error_code, UNSUPPORTED_VERSION);
    let api_versions = body
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::ApiVersions as i16)
        .expect("ApiVersions listed");
    assert_eq!((api_versions.min_version, api_versions.max_version), (0, 4));
    for key in [ApiKey::Produce, ApiKey::Fetch, ApiKey::Metadata] {
        assert!(
            body.api_keys.iter().any(|k| k.api_key == key as i16),
            "{key:?} listed"
        );
    }

    // The client then retries with a version the broker listed, on the same connection.
    let answer = conn.api_versions(3);
    assert_eq!(answer.error_code, 0);
    assert_eq!(answer.api_keys, body.api_keys, "the same APIs in v3 and v0");
    assert_clean_shutdown(broker);
}

#[test]
fn produce_with_a_wrong_crc_gets_corrupt_message() {
    let broker = StromBroker::start(&["auto.create.topics.enable=false"]);
    let mut conn = Conn::open(&broker);
    assert_eq!(conn.create_topic("crc"), 0);

    let good = batch(&[b"one", b"two", b"three"]);
    // Flip a bit in the last record's value: the CRC (over attributes..end) no longer matches.
    let mut bad = good.to_vec();
    *bad.last_mut().unwrap() ^= 0x01;
    assert_eq!(conn.produce("crc", bad.into()).0, CORRUPT_MESSAGE);

    // Damage the stored CRC itself (bytes 17..21).
    let mut bad = good.to_vec();
    bad[18] ^= 0xff;
    assert_eq!(conn.produce("crc", bad.into()).0, CORRUPT_MESSAGE);

    // Nothing was appended, and the connection still works: a good batch starts at 0.
    assert_eq!(conn.produce("crc", good), (0, 0));
    assert_broker_serves_others(&broker, "a corrupt batch");
    assert_clean_shutdown(broker);
}

#[test]
fn batch_above_message_max_bytes_gets_message_too_large() {
    let broker = StromBroker::start(&["auto.create.topics.enable=false", "message.max.bytes=2000"]);
    let mut conn = Conn::open(&broker);
    assert_eq!(conn.create_topic("large"), 0);
    let value = vec![b'v'; 3000];
    assert_eq!(conn.produce("large", batch(&[&value])).0, MESSAGE_TOO_LARGE);
    // Several records that are small alone but exceed the limit as one batch.
    let small = vec![b's'; 500];
    assert_eq!(
        conn.produce("large", batch(&[&small, &small, &small, &small, &small]))
            .0,
        MESSAGE_TOO_LARGE
    );
    assert_eq!(conn.produce("large", batch(&[&small])), (0, 0));
    assert_broker_serves_others(&broker, "a batch above message.max.bytes");
    assert_clean_shutdown(broker);
}

#[test]
fn produce_to_a_missing_topic_without_auto_create_gets_unknown_topic() {
    let broker = StromBroker::start(&["auto.create.topics.enable=false"]);
    let mut conn = Conn::open(&broker);
    assert_eq!(
        conn.produce("no-such-topic", batch(&[b"x"])).0,
        UNKNOWN_TOPIC_OR_PARTITION
    );
    // A partition that does not exist in an existing topic.
    assert_eq!(conn.create_topic("one-partition"), 0);
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name("one-partition"))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(7)
                .with_records(Some(batch(&[b"x"])))])]);
    let response: ProduceResponse = conn.call(ApiKey::Produce, 9, &request);
    assert_eq!(
        response.responses[0].partition_responses[0].error_code,
        UNKNOWN_TOPIC_OR_PARTITION
    );
    assert_eq!(conn.api_versions(3).error_code, 0, "same connection");
    assert_clean_shutdown(broker);
}

#[test]
fn create_topics_checks_names_as_kafka_does() {
    let broker = StromBroker::start(&[]);
    let mut conn = Conn::open(&broker);
    let too_long = "t".repeat(250);
    for name in [
        "",
        ".",
        "..",
        "bad name",
        "a/b",
        "ünïcode",
        too_long.as_str(),
    ] {
        assert_eq!(
            conn.create_topic(name),
            INVALID_TOPIC_EXCEPTION,
            "topic name {name:?}"
        );
    }
    assert_eq!(conn.create_topic("good.name_with-chars"), 0);
    // The longest legal name: its `.json.tmp` once passed the file name limit.
    assert_eq!(conn.create_topic(&"t".repeat(249)), 0);
    assert_eq!(
        conn.create_topic("__cluster_metadata"),
        INVALID_REQUEST,
        "the metadata log's topic"
    );
    assert_broker_serves_others(&broker, "invalid topic names");
    assert_clean_shutdown(broker);
}

#[test]
fn duplicate_create_topics_gets_topic_already_exists() {
    let broker = StromBroker::start(&[]);
    let mut conn = Conn::open(&broker);
    assert_eq!(conn.create_topic("twice"), 0);
    assert_eq!(conn.create_topic("twice"), TOPIC_ALREADY_EXISTS);
    // From another connection too.
    assert_eq!(
        Conn::open(&broker).create_topic("twice"),
        TOPIC_ALREADY_EXISTS
    );
    assert_clean_shutdown(broker);
}

#[test]
fn a_batch_claiming_more_offsets_than_records_gets_invalid_record() {
    let broker = StromBroker::start(&[]);
    let mut conn = Conn::open(&broker);
    assert_eq!(conn.create_topic("spans"), 0);
    let mut wide = batch(&[b"one"]).to_vec();
    wide[23..27].copy_from_slice(&i32::MAX.to_be_bytes());
    fix_crc(&mut wide);
    let response = conn.produce_response("spans", wide.into());
    assert_eq!(response.error_code, INVALID_RECORD);
    let message = response
        .error_message
        .map(|m| m.to_string())
        .unwrap_or_default();
    assert!(
        message.contains("Inconsistent batch offset range"),
        "{message}"
    );
    // The log end did not move: the next record is at offset 0.
    assert_eq!(conn.produce("spans", batch(&[b"next"])), (0, 0));
    assert_broker_serves_others(&broker, "a batch with a huge offset span");
    assert_clean_shutdown(broker);
}

#[test]
fn a_batch_holding_more_records_than_its_count_gets_invalid_record() {
    let broker = StromBroker::start(&[]);
    let mut conn = Conn::open(&broker);
    assert_eq!(conn.create_topic("counts"), 0);
    let mut three = batch(&[b"a", b"b", b"c"]).to_vec();
    three[23..27].copy_from_slice(&0i32.to_be_bytes());
    three[57..61].copy_from_slice(&1i32.to_be_bytes());
    fix_crc(&mut three);
    assert_eq!(conn.produce("counts", three.into()).0, INVALID_RECORD);
    assert_eq!(conn.produce("counts", batch(&[b"next"])), (0, 0));
    assert_broker_serves_others(&broker, "a batch with a wrong count");
    assert_clean_shutdown(broker);
}

/// Records whose length prefixes add up but whose fields do not parse: Kafka's validator
/// parses every record and refuses them, so no consumer is handed them.
#[test]
fn records_that_do_not_parse_get_invalid_record() {
    let broker = StromBroker::start(&[]);
    let mut conn = Conn::open(&broker);
    assert_eq!(conn.create_topic("fields"), 0);
    let with_records = |count: i32, section: &[u8]| {
        let mut b = batch(&[b"x"])[..BATCH_HEADER].to_vec();
        b.extend_from_slice(section);
        let length = (b.len() - 12) as i32;
        b[8..12].copy_from_slice(&length.to_be_bytes());
        b[23..27].copy_from_slice(&(count - 1).to_be_bytes());
        b[57..61].copy_from_slice(&count.to_be_bytes());
        fix_crc(&mut b);
        b
    };
    // Three records of length 0, too short for their attributes.
    let empty = with_records(3, &[0, 0, 0]);
    // One record (null key and value) whose header count says 2^31 - 1.
    let headers = with_records(1, &[20, 0, 0, 0, 1, 1, 0xfe, 0xff, 0xff, 0xff, 0x0f]);
    for bad in [empty, headers] {
        assert_eq!(conn.produce("fields", bad.into()).0, INVALID_RECORD);
    }
    assert_eq!(conn.produce("fields", batch(&[b"next"])), (0, 0));
    assert_broker_serves_others(&broker, "records that do not parse");
    assert_clean_shutdown(broker);
}

#[test]
fn keyless_records_on_a_compacted_topic_get_invalid_record_with_record_errors() {
    let broker = StromBroker::start(&[]);
    let mut conn = Conn::open(&broker);
    assert_eq!(
        conn.create_topic_with("compacted", &[("cleanup.policy", "compact")]),
        0
    );
    let response = conn.produce_response("compacted", keyless_batch(&[b"a", b"b"]));
    assert_eq!(response.error_code, INVALID_RECORD);
    let indexes: Vec<i32> = response
        .record_errors
        .iter()
        .map(|e| e.batch_index)
        .collect();
    assert_eq!(indexes, vec![0, 1]);
    let first = response.record_errors[0]
        .batch_index_error_message
        .as_ref()
        .map(|m| m.to_string())
        .unwrap_or_default();
    assert_eq!(
        first,
        "Compacted topic cannot accept message without key in topic partition compacted-0."
    );
    assert_eq!(conn.produce("compacted", batch(&[b"keyed"])), (0, 0));
    assert_broker_serves_others(&broker, "keyless records on a compacted topic");
    assert_clean_shutdown(broker);
}

#[test]
fn offset_commit_checks_member_and_generation_before_the_rebalance_state() {
    use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{
        GroupId, JoinGroupRequest, JoinGroupResponse, OffsetCommitRequest, OffsetCommitResponse,
    };
    use kafka_protocol::protocol::StrBytes;

    let broker = StromBroker::start(&["group.initial.rebalance.delay.ms=0"]);
    let mut conn = Conn::open(&broker);
    assert_eq!(conn.create_topic("committed"), 0);
    conn.wait_for_coordinator("precedence");
    let group = || GroupId(StrBytes::from_static_str("precedence"));
    // A lone member's join completes at once; without a SyncGroup the group stays in
    // CompletingRebalance.
    let joined: JoinGroupResponse = conn.call(
        ApiKey::JoinGroup,
        3,
        &JoinGroupRequest::default()
            .with_group_id(group())
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(vec![
                JoinGroupRequestProtocol::default().with_name(StrBytes::from_static_str("range"))
            ]),
    );
    assert_eq!(joined.error_code, 0);
    let mut commit = |member: &str, generation: i32| -> i16 {
        let response: OffsetCommitResponse = conn.call(
            ApiKey::OffsetCommit,
            2,
            &OffsetCommitRequest::default()
                .with_group_id(group())
                .with_generation_id_or_member_epoch(generation)
                .with_member_id(StrBytes::from_string(member.to_string()))
                .with_topics(vec![OffsetCommitRequestTopic::default()
                    .with_name(topic_name("committed"))
                    .with_partitions(vec![OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(0)])]),
        );
        response.topics[0].partitions[0].error_code
    };
    let member = joined.member_id.to_string();
    let generation = joined.generation_id;
    assert_eq!(commit("not-a-member", generation), UNKNOWN_MEMBER_ID);
    assert_eq!(commit(&member, generation + 7), ILLEGAL_GENERATION);
    assert_eq!(commit(&member, generation), REBALANCE_IN_PROGRESS);
    assert_broker_serves_others(&broker, "commits during a rebalance");
    assert_clean_shutdown(broker);
}
