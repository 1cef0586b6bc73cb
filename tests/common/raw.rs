//! A raw Kafka connection for tests that drive the broker byte by byte: requests are
//! built with the `kafka-protocol` crate and can be damaged by hand before they are sent.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, ProduceRequest, ProduceResponse,
    RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::StromBroker;

pub const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// A raw client connection.
pub struct Conn {
    pub stream: TcpStream,
    pub correlation_id: i32,
}

impl Conn {
    pub fn open(broker: &StromBroker) -> Self {
        Self::connect(&broker.bootstrap())
    }

    /// A connection to the broker listening on `addr`.
    pub fn connect(addr: &str) -> Self {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        Self {
            stream,
            correlation_id: 0,
        }
    }

    /// The bytes of a request frame's body (header + request), without the size prefix.
    pub fn request_bytes<T: Encodable>(&mut self, key: i16, version: i16, body: &T) -> BytesMut {
        let mut buf = self.header_bytes(key, version);
        body.encode(&mut buf, version).unwrap();
        buf
    }

    /// A request header with the next correlation id.
    pub fn header_bytes(&mut self, key: i16, version: i16) -> BytesMut {
        self.correlation_id += 1;
        let header = RequestHeader::default()
            .with_request_api_key(key)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("bad-input-test")));
        let header_version = ApiKey::try_from(key)
            .map(|k| k.request_header_version(version))
            .unwrap_or(1);
        let mut buf = BytesMut::new();
        header.encode(&mut buf, header_version).unwrap();
        buf
    }

    /// Writes `body` as one frame (4-byte size prefix).
    pub fn write_frame(&mut self, body: &[u8]) {
        self.stream
            .write_all(&(body.len() as i32).to_be_bytes())
            .unwrap();
        self.stream.write_all(body).unwrap();
    }

    /// Reads one response frame; `None` if the broker closed the connection.
    pub fn read_frame(&mut self) -> Option<Bytes> {
        let mut size = [0u8; 4];
        match self.stream.read_exact(&mut size) {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset
                ) =>
            {
                return None
            }
            Err(e) => panic!("reading a response: {e}"),
        }
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut body).expect("response body");
        Some(body.into())
    }

    /// Sends a request and decodes its response (response header version from the key).
    pub fn call<T: Encodable, R: Decodable>(&mut self, key: ApiKey, version: i16, body: &T) -> R {
        self.send(key, version, body);
        self.receive(key, version)
    }

    /// Sends a request without waiting for its response.
    pub fn send<T: Encodable>(&mut self, key: ApiKey, version: i16, body: &T) {
        let frame = self.request_bytes(key as i16, version, body);
        self.write_frame(&frame);
    }

    /// Reads and decodes the response to the last request sent.
    pub fn receive<R: Decodable>(&mut self, key: ApiKey, version: i16) -> R {
        let mut response = self
            .read_frame()
            .unwrap_or_else(|| panic!("{key:?} v{version}: connection closed"));
        let header =
            ResponseHeader::decode(&mut response, key.response_header_version(version)).unwrap();
        assert_eq!(header.correlation_id, self.correlation_id, "correlation id");
        R::decode(&mut response, version).unwrap()
    }

    /// Asserts that the broker closes this connection (end of stream or reset), without
    /// answering anything.
    pub fn assert_closed(&mut self, what: &str) {
        let mut buf = [0u8; 64];
        match self.stream.read(&mut buf) {
            Ok(0) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
            Ok(n) => panic!("{what}: the broker answered {n} bytes instead of closing"),
            Err(e) => panic!("{what}: connection not closed: {e}"),
        }
    }

    /// Asks FindCoordinator for `group` until it names a coordinator, as a client does
    /// before its first group request (the first lookup creates `__consumer_offsets`).
    pub fn wait_for_coordinator(&mut self, group: &str) {
        let ready = super::wait_until(IO_TIMEOUT, || {
            let response: FindCoordinatorResponse = self.call(
                ApiKey::FindCoordinator,
                3,
                &FindCoordinatorRequest::default()
                    .with_key(StrBytes::from_string(group.to_string())),
            );
            response.error_code == 0
        });
        assert!(ready, "group {group} has a coordinator");
    }

    pub fn api_versions(&mut self, version: i16) -> ApiVersionsResponse {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("bad-input-test"))
            .with_client_software_version(StrBytes::from_static_str("1"));
        self.call(ApiKey::ApiVersions, version, &request)
    }

    pub fn create_topic(&mut self, name: &str) -> i16 {
        self.create_topic_with(name, &[])
    }

    /// Creates a one-partition topic with `configs` and returns the error code.
    pub fn create_topic_with(&mut self, name: &str, configs: &[(&str, &str)]) -> i16 {
        let configs = configs
            .iter()
            .map(|(k, v)| {
                CreatableTopicConfig::default()
                    .with_name(StrBytes::from_string(k.to_string()))
                    .with_value(Some(StrBytes::from_string(v.to_string())))
            })
            .collect();
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(topic_name(name))
                .with_num_partitions(1)
                .with_replication_factor(1)
                .with_configs(configs)]);
        let response: CreateTopicsResponse = self.call(ApiKey::CreateTopics, 7, &request);
        assert_eq!(response.topics.len(), 1);
        response.topics[0].error_code
    }

    /// Produces `batch` to partition 0 of `topic` (acks=all) and returns (error, base offset).
    pub fn produce(&mut self, topic: &str, batch: Bytes) -> (i16, i64) {
        let partition = self.produce_response(topic, batch);
        (partition.error_code, partition.base_offset)
    }

    /// Produces `batch` to partition 0 of `topic` (acks=all) and returns the partition's
    /// response.
    pub fn produce_response(&mut self, topic: &str, batch: Bytes) -> PartitionProduceResponse {
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(topic_name(topic))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch))])]);
        let response: ProduceResponse = self.call(ApiKey::Produce, 9, &request);
        response.responses[0].partition_responses[0].clone()
    }
}

pub fn topic_name(name: &str) -> TopicName {
    StrBytes::from_string(name.to_string()).into()
}

/// A record batch (v2, uncompressed, not idempotent) holding `values` with keys.
pub fn batch(values: &[&[u8]]) -> Bytes {
    encode_batch(values, true)
}

/// A record batch like [`batch`] whose records have null keys.
pub fn keyless_batch(values: &[&[u8]]) -> Bytes {
    encode_batch(values, false)
}

fn encode_batch(values: &[&[u8]], keyed: bool) -> Bytes {
    let records = values.iter().enumerate().map(|(i, value)| {
        (
            keyed.then(|| Bytes::from(format!("key-{i}"))),
            Some(Bytes::copy_from_slice(value)),
        )
    });
    strom_wire::records::plain_batch(records, 1_700_000_000_000, 1)
}

/// A new connection gets ApiVersions (v3, flexible) answered: other clients are unaffected.
pub fn assert_broker_serves_others(broker: &StromBroker, after: &str) {
    let response = Conn::open(broker).api_versions(3);
    assert_eq!(response.error_code, 0, "ApiVersions after {after}");
    assert!(
        !response.api_keys.is_empty(),
        "ApiVersions after {after}: no APIs"
    );
}

/// Stops the broker with SIGTERM: it exits 0 and never panicked.
pub fn assert_clean_shutdown(mut broker: StromBroker) {
    let status = broker.terminate();
    let stderr = broker.stderr();
    assert!(status.success(), "exit status {status}; stderr:\n{stderr}");
    assert!(
        !stderr.contains("panicked"),
        "the broker panicked:\n{stderr}"
    );
}
