//! The client direction, for broker-to-broker requests (a follower's Fetch): encoding a
//! request frame and decoding the response that answers it.

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

use crate::WireError;

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
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_string(client_id.to_string())));
    crate::frame::encode_frame(&header, R::header_version(version), body, version).map_err(fail)
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
}
