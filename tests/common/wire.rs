//! A raw Kafka-protocol connection for black-box tests that need to see exact error codes
//! and messages (librdkafka retries or hides some): requests are encoded with the
//! `kafka-protocol` crate and written as frames by hand.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::StromBroker;

const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// A raw client connection.
pub struct Conn {
    pub stream: TcpStream,
    pub correlation_id: i32,
}

impl Conn {
    pub fn open(broker: &StromBroker) -> Self {
        let stream = TcpStream::connect(broker.bootstrap()).expect("connect");
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
            .with_client_id(Some(StrBytes::from_static_str("strom-test")));
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
        let frame = self.request_bytes(key as i16, version, body);
        self.write_frame(&frame);
        let mut response = self
            .read_frame()
            .unwrap_or_else(|| panic!("{key:?} v{version}: connection closed"));
        let header =
            ResponseHeader::decode(&mut response, key.response_header_version(version)).unwrap();
        assert_eq!(header.correlation_id, self.correlation_id, "correlation id");
        R::decode(&mut response, version).unwrap()
    }
}
