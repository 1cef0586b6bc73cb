//! Encoding a response frame: size prefix, response header, body.

use bytes::Bytes;
use kafka_protocol::messages::ResponseHeader;
use kafka_protocol::protocol::{Encodable, HeaderVersion};

use crate::WireError;

/// Encodes `body` at `version` as a complete frame answering `correlation_id`.
///
/// The response header version comes from the body type, so ApiVersions keeps its v0
/// header even at v3+ (clients parse it before they know the negotiated versions).
pub fn encode_response<R: Encodable + HeaderVersion>(
    api_key: i16,
    correlation_id: i32,
    version: i16,
    body: &R,
) -> Result<Bytes, WireError> {
    let fail = |e: anyhow::Error| WireError::Encode {
        api_key,
        version,
        reason: e.to_string(),
    };
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    crate::frame::encode_frame(&header, R::header_version(version), body, version).map_err(fail)
}
