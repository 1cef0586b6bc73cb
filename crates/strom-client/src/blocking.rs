//! A minimal blocking Kafka client for the admin calls librdkafka does not offer
//! (DescribeQuorum) and for the cluster launcher's readiness checks (Metadata): one
//! request, one response, over the Kafka protocol as encoded by the `kafka-protocol`
//! crate — so it works against strom and against Kafka alike.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bytes::BytesMut;
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::{
    ApiKey, DescribeQuorumRequest, DescribeQuorumResponse, MetadataRequest, MetadataResponse,
    RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// The largest response accepted.
const MAX_RESPONSE: usize = 64 << 20;

/// Sends one request to the first reachable server of `bootstrap` and decodes its answer.
pub fn call<T: Encodable, R: Decodable>(
    bootstrap: &str,
    key: ApiKey,
    version: i16,
    body: &T,
    timeout: Duration,
) -> Result<R> {
    let mut last = None;
    for server in bootstrap
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        match call_one(server, key, version, body, timeout) {
            Ok(r) => return Ok(r),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("no bootstrap server given")))
}

fn call_one<T: Encodable, R: Decodable>(
    server: &str,
    key: ApiKey,
    version: i16,
    body: &T,
    timeout: Duration,
) -> Result<R> {
    let addr = std::net::ToSocketAddrs::to_socket_addrs(server)
        .with_context(|| format!("resolving {server}"))?
        .next()
        .with_context(|| format!("{server} has no address"))?;
    let mut stream = TcpStream::connect_timeout(&addr, timeout)
        .with_context(|| format!("connecting to {server}"))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("strom-admin")));
    let mut buf = BytesMut::new();
    header.encode(&mut buf, key.request_header_version(version))?;
    body.encode(&mut buf, version)?;
    stream.write_all(&(buf.len() as i32).to_be_bytes())?;
    stream.write_all(&buf)?;
    let mut size = [0u8; 4];
    stream
        .read_exact(&mut size)
        .with_context(|| format!("{server} closed the connection"))?;
    let size = i32::from_be_bytes(size);
    if size < 0 || size as usize > MAX_RESPONSE {
        bail!("{server} sent a response of {size} bytes");
    }
    let mut response = vec![0u8; size as usize];
    stream.read_exact(&mut response)?;
    let mut response = bytes::Bytes::from(response);
    let header = ResponseHeader::decode(&mut response, key.response_header_version(version))?;
    if header.correlation_id != 1 {
        bail!("{server} answered correlation id {}", header.correlation_id);
    }
    R::decode(&mut response, version)
        .with_context(|| format!("decoding {key:?} v{version} from {server}"))
}

/// Metadata of every topic and broker.
pub fn metadata(bootstrap: &str, timeout: Duration) -> Result<MetadataResponse> {
    call(
        bootstrap,
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(None),
        timeout,
    )
}

/// DescribeQuorum of `__cluster_metadata` (v2).
pub fn describe_quorum(bootstrap: &str, timeout: Duration) -> Result<DescribeQuorumResponse> {
    let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
    let response: DescribeQuorumResponse =
        call(bootstrap, ApiKey::DescribeQuorum, 2, &request, timeout)?;
    if response.error_code != 0 {
        bail!(
            "DescribeQuorum failed with error {}: {}",
            response.error_code,
            response.error_message.as_deref().unwrap_or("")
        );
    }
    Ok(response)
}
