//! Kafka wire format for strom: framing, request/response envelopes and zero-copy views of
//! record batches. No I/O happens here: callers hand in bytes and get bytes back, so the same
//! code serves the broker's sockets, the log's recovery scan and the benchmarks.

pub mod api_error;
pub mod batch;
pub mod batch_builder;
pub mod client;
pub mod codec;
pub mod error;
pub mod fetch_session;
pub mod fields;
pub mod frame;
mod parts_buf;
pub mod records;
pub mod request;
pub mod response;
pub mod response_frame;
pub mod retained_batch;

pub use api_error::ApiError;
pub use batch::{BatchError, RecordBatchHeader, RecordBatches, BATCH_HEADER_LEN};
pub use batch_builder::{BatchBuilder, ProducerFields};
pub use codec::Codec;
pub use error::WireError;
pub use fetch_session::FetchSessionPlanner;
pub use fields::FieldReader;
pub use frame::FrameDecoder;
pub use request::{decode_request, DecodedRequest};
pub use response::encode_response;
pub use response_frame::{encode_response_frame, FramePart, ResponseFrame, TransferableRecords};
pub use retained_batch::RetainedBatch;

/// Wall-clock milliseconds since the epoch, the unit of Kafka's timestamps.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
