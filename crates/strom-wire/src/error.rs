//! The one error type of the wire layer.

use thiserror::Error;

/// What can go wrong turning bytes into a request. The broker maps each case to a Kafka
/// error code or to closing the connection, as Kafka's `SocketServer` does.
#[derive(Debug, Error)]
pub enum WireError {
    /// The 4-byte size prefix announced more than `socket.request.max.bytes`.
    #[error("frame of {size} bytes exceeds the limit of {max} bytes (socket.request.max.bytes)")]
    FrameTooLarge { size: usize, max: usize },
    /// A negative size prefix: the peer does not speak the Kafka protocol.
    #[error("invalid negative frame size {0}")]
    NegativeFrameSize(i32),
    /// The request header names an API key Kafka does not define.
    #[error("unknown API key {0}")]
    UnknownApiKey(i16),
    /// The request is shorter than a request header.
    #[error("request of {0} bytes is too short for a request header")]
    TruncatedHeader(usize),
    /// The API key is known but the version is outside what the protocol crate can decode.
    #[error("unsupported version {version} of API key {api_key}")]
    UnsupportedVersion { api_key: i16, version: i16 },
    /// The header or body does not decode at the announced version.
    #[error("malformed request (api key {api_key} v{version}): {reason}")]
    Malformed {
        api_key: i16,
        version: i16,
        reason: String,
    },
    /// A response could not be encoded at the requested version.
    #[error("cannot encode response (api key {api_key} v{version}): {reason}")]
    Encode {
        api_key: i16,
        version: i16,
        reason: String,
    },
}
