//! The client direction, for broker-to-broker requests (a follower's Fetch) and the
//! native load generator: encoding a request frame and decoding the response that
//! answers it.

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

use crate::parts_buf::{encode_frame_parts, CutOut};
use crate::{FramePart, WireError};

fn request_header<R: Request>(correlation_id: i32, client_id: &str, version: i16) -> RequestHeader {
    RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_string(client_id.to_string())))
}

/// Encodes `body` at `version` as a complete frame (size prefix, request header, body).
pub fn encode_request<R: Request + Encodable>(
    correlation_id: i32,
    client_id: &str,
    version: i16,
    body: &R,
) -> Result<Bytes, WireError> {
    let fail = |e: anyhow::Error| WireError::Encode {
        api_key: R::KEY,
        version,
        reason: e.to_string(),
    };
    let header = request_header::<R>(correlation_id, client_id, version);
    crate::frame::encode_frame(&header, R::header_version(version), body, version).map_err(fail)
}

/// Encodes `body` at `version` as a frame in parts, to be written with one gathering
/// write: each of `shared` that the body holds (a Produce request's record batches) is a
/// part of its own, sent from where it lies instead of copied into the frame, so a
/// producer's records are copied once, into the socket.
pub fn encode_request_parts<R: Request + Encodable>(
    correlation_id: i32,
    client_id: &str,
    version: i16,
    body: &R,
    shared: &[Bytes],
) -> Result<Vec<Bytes>, WireError> {
    let fail = |e: anyhow::Error| WireError::Encode {
        api_key: R::KEY,
        version,
        reason: e.to_string(),
    };
    let header = request_header::<R>(correlation_id, client_id, version);
    let in_shared: usize = shared.iter().map(Bytes::len).sum();
    let shared_bytes = SharedBytes {
        buffers: shared,
        next: 0,
    };
    let (parts, _) = encode_frame_parts(
        &header,
        R::header_version(version),
        body,
        version,
        shared_bytes,
        shared.len(),
        in_shared,
    )
    .map_err(fail)?;
    Ok(parts
        .into_iter()
        .map(|part| match part {
            FramePart::Bytes(bytes) | FramePart::File(bytes) => bytes,
        })
        .collect())
}

/// Recognises the body's slices that are these buffers, by address and length, in the
/// order the body holds them: the encoder copies every field through the buffer, so each
/// copy is compared with the next buffer only, however many partitions a request has.
/// A buffer that does not come in that order is copied into the frame, which is slower
/// but the same frame.
struct SharedBytes<'a> {
    buffers: &'a [Bytes],
    next: usize,
}

impl CutOut for SharedBytes<'_> {
    type Part = Bytes;

    fn cut(&mut self, slice: &[u8]) -> Option<Bytes> {
        let next = self.buffers.get(self.next)?;
        if slice.is_empty() || next.as_ptr() != slice.as_ptr() || next.len() != slice.len() {
            return None;
        }
        self.next += 1;
        Some(next.clone())
    }
}

/// Decodes a response frame (without its size prefix) to request `R` sent at `version`,
/// returning its correlation id and body. A frame that does not decode, or has bytes
/// left over, is malformed: a peer that answers garbage must not be trusted further.
pub fn decode_response<R: Request>(
    version: i16,
    mut frame: Bytes,
) -> Result<(i32, R::Response), WireError>
where
    R::Response: Decodable + HeaderVersion,
{
    let malformed = |reason: String| WireError::Malformed {
        api_key: R::KEY,
        version,
        reason,
    };
    let header_version = <R::Response as HeaderVersion>::header_version(version);
    let header = ResponseHeader::decode(&mut frame, header_version)
        .map_err(|e| malformed(format!("response header: {e}")))?;
    let body = <R::Response as Decodable>::decode(&mut frame, version)
        .map_err(|e| malformed(e.to_string()))?;
    if frame.has_remaining() {
        return Err(malformed(format!(
            "{} bytes after the response body",
            frame.remaining()
        )));
    }
    Ok((header.correlation_id, body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{FetchRequest, FetchResponse};

    #[test]
    fn a_fetch_round_trips_through_both_directions() {
        let request = FetchRequest::default().with_max_wait_ms(500);
        let frame = encode_request(7, "strom-replica-fetcher", 15, &request).unwrap();
        let decoded = crate::decode_request(frame.slice(4..)).unwrap();
        assert_eq!(decoded.header.correlation_id, 7);
        let response = FetchResponse::default().with_throttle_time_ms(3);
        let frame = crate::encode_response(1, 7, 15, &response).unwrap();
        let (cid, body) = decode_response::<FetchRequest>(15, frame.slice(4..)).unwrap();
        assert_eq!((cid, body.throttle_time_ms), (7, 3));
        assert!(decode_response::<FetchRequest>(15, Bytes::from_static(&[0, 0])).is_err());
    }

    /// The parts joined are the frame the whole request encodes to, with each shared
    /// batch a part of its own (the very buffer, not a copy), at a flexible and a
    /// non-flexible version.
    #[test]
    fn shared_batches_are_parts_of_the_same_frame() {
        use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
        use kafka_protocol::messages::{ProduceRequest, TopicName};
        let batches = [Bytes::from(vec![7u8; 300]), Bytes::from(vec![9u8; 5])];
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partition_data(
                    batches
                        .iter()
                        .enumerate()
                        .map(|(i, b)| {
                            PartitionProduceData::default()
                                .with_index(i as i32)
                                .with_records(Some(b.clone()))
                        })
                        .collect(),
                )]);
        for version in [7, 9] {
            let whole = encode_request(3, "c", version, &request).unwrap();
            let parts = encode_request_parts(3, "c", version, &request, &batches).unwrap();
            assert!(parts.iter().any(|p| p.as_ptr() == batches[0].as_ptr()));
            assert!(parts.iter().any(|p| p.as_ptr() == batches[1].as_ptr()));
            assert_eq!(parts.concat(), whole);
        }
    }
}
