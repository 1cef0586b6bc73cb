//! Decoding a request frame into its header and typed body.

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind};
use kafka_protocol::protocol::Decodable;

use crate::WireError;

/// A request with its header, decoded at the version the client chose.
#[derive(Debug)]
pub struct DecodedRequest {
    pub api_key: ApiKey,
    pub header: RequestHeader,
    pub body: RequestKind,
}

/// The three fields every request header version starts with. They can be read even when
/// the rest cannot be decoded, which is what lets the broker answer an ApiVersions
/// request of a version it does not know (KIP-511).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderPrefix {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
}

/// Reads the fixed prefix of a request header.
pub fn peek_header(frame: &[u8]) -> Result<HeaderPrefix, WireError> {
    if frame.len() < 8 {
        return Err(WireError::TruncatedHeader(frame.len()));
    }
    Ok(HeaderPrefix {
        api_key: i16::from_be_bytes([frame[0], frame[1]]),
        api_version: i16::from_be_bytes([frame[2], frame[3]]),
        correlation_id: i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]),
    })
}

/// Decodes a whole request frame. Record sets inside produce requests stay slices of
/// `frame` (no copy).
pub fn decode_request(mut frame: Bytes) -> Result<DecodedRequest, WireError> {
    let prefix = peek_header(&frame)?;
    let api_key =
        ApiKey::try_from(prefix.api_key).map_err(|_| WireError::UnknownApiKey(prefix.api_key))?;
    let range = api_key.valid_versions();
    if prefix.api_version < range.min || prefix.api_version > range.max {
        return Err(WireError::UnsupportedVersion {
            api_key: prefix.api_key,
            version: prefix.api_version,
        });
    }
    let malformed = |e: anyhow::Error| WireError::Malformed {
        api_key: prefix.api_key,
        version: prefix.api_version,
        reason: e.to_string(),
    };
    let header_version = api_key.request_header_version(prefix.api_version);
    let header = RequestHeader::decode(&mut frame, header_version).map_err(malformed)?;
    let body = RequestKind::decode(api_key, &mut frame, prefix.api_version).map_err(malformed)?;
    Ok(DecodedRequest {
        api_key,
        header,
        body,
    })
}
