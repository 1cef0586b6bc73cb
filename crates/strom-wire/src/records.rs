//! Record-level access for the rare paths that need it (ListOffsets by timestamp): one
//! batch is decoded, and decompressed if needed, with the protocol crate's decoder.

use bytes::Bytes;
use kafka_protocol::records::RecordBatchDecoder;

/// The offset and timestamp of the first record in `batch` whose timestamp is at least
/// `timestamp`, or `None` if there is none or the batch cannot be decoded.
pub fn first_record_at_or_after(batch: &[u8], timestamp: i64) -> Option<(i64, i64)> {
    let mut bytes = Bytes::copy_from_slice(batch);
    let set = RecordBatchDecoder::decode(&mut bytes).ok()?;
    set.records
        .iter()
        .find(|r| r.timestamp >= timestamp)
        .map(|r| (r.offset, r.timestamp))
}
