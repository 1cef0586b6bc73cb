//! A response frame in parts: encoded bytes, and record ranges of files that the
//! connection sends to the socket without reading them (Kafka's `TransferableRecords`).
//!
//! Fetch responses are encoded by the `kafka-protocol` crate like every other message, but
//! their records are not in memory: the body carries a stand-in for each file range, a
//! slice of one shared region of zero pages whose address names the range and whose
//! length is the range's, so the crate writes the right length prefix. The encoder's
//! buffer recognises a stand-in when the crate copies it, and cuts the frame there into a
//! bytes part and a file part instead. The region is allocated once and never touched, so
//! it costs address space, not memory. The file type is the caller's: this crate does no
//! I/O.

use std::sync::OnceLock;

use bytes::Bytes;
use kafka_protocol::messages::ResponseHeader;
use kafka_protocol::protocol::{Encodable, HeaderVersion};

use crate::parts_buf::{encode_frame_parts, CutOut};
use crate::WireError;

/// The address space stand-ins are cut from: stand-in `k` starts `k` bytes into it, so a
/// range plus its index must fit (a range beyond that is sent from memory instead).
const STAND_IN_REGION: usize = 256 << 20;

fn stand_in_region() -> &'static [u8] {
    static REGION: OnceLock<&'static [u8]> = OnceLock::new();
    REGION.get_or_init(|| vec![0u8; STAND_IN_REGION].leak())
}

/// One part of a response frame, written in order.
#[derive(Debug)]
pub enum FramePart<F> {
    Bytes(Bytes),
    /// A part sent as it lies instead of copied into the frame: a range of a file (or
    /// records already read into memory) in a broker's Fetch answer, a producer's batch
    /// in a Produce request.
    File(F),
}

/// A complete response frame (size prefix included) in the order its parts are sent.
#[derive(Debug)]
pub struct ResponseFrame<F> {
    parts: Vec<FramePart<F>>,
}

impl<F> ResponseFrame<F> {
    pub fn parts(&self) -> &[FramePart<F>] {
        &self.parts
    }

    pub fn into_parts(self) -> Vec<FramePart<F>> {
        self.parts
    }
}

impl<F> From<Bytes> for ResponseFrame<F> {
    fn from(bytes: Bytes) -> Self {
        Self {
            parts: vec![FramePart::Bytes(bytes)],
        }
    }
}

/// The file ranges a response body stands in for, in the order they were registered.
#[derive(Debug)]
pub struct TransferableRecords<F> {
    ranges: Vec<Option<(F, usize)>>,
}

impl<F> Default for TransferableRecords<F> {
    fn default() -> Self {
        Self { ranges: Vec::new() }
    }
}

impl<F> TransferableRecords<F> {
    /// A stand-in for the `len` bytes of `range`, to put in the body where the records
    /// go; `None` if `len` is 0 or too long for a stand-in, when the caller must put the
    /// records themselves there.
    pub fn stand_in(&mut self, range: F, len: usize) -> Option<Bytes> {
        let k = self.ranges.len();
        if len == 0 || k + len > STAND_IN_REGION {
            return None;
        }
        self.ranges.push(Some((range, len)));
        Some(Bytes::from_static(&stand_in_region()[k..k + len]))
    }
}

impl<F> CutOut for TransferableRecords<F> {
    type Part = F;

    /// The range a slice the encoder copies stands in for, taken out so each is sent once.
    fn cut(&mut self, slice: &[u8]) -> Option<F> {
        let base = stand_in_region().as_ptr() as usize;
        let k = (slice.as_ptr() as usize).checked_sub(base)?;
        let (_, len) = self.ranges.get(k)?.as_ref()?;
        if *len != slice.len() {
            return None;
        }
        self.ranges[k].take().map(|(range, _)| range)
    }
}

/// Encodes `body` at `version` as a frame answering `correlation_id`, with each of
/// `records`' stand-ins in it replaced by the file range it stands for.
pub fn encode_response_frame<R: Encodable + HeaderVersion, F>(
    api_key: i16,
    correlation_id: i32,
    version: i16,
    body: &R,
    records: TransferableRecords<F>,
) -> Result<ResponseFrame<F>, WireError> {
    let fail = |reason: String| WireError::Encode {
        api_key,
        version,
        reason,
    };
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let in_files: usize = records.ranges.iter().flatten().map(|(_, len)| len).sum();
    let cuts = records.ranges.len();
    let (parts, records) = encode_frame_parts(
        &header,
        R::header_version(version),
        body,
        version,
        records,
        cuts,
        in_files,
    )
    .map_err(|e| fail(e.to_string()))?;
    if records.ranges.iter().any(Option::is_some) {
        return Err(fail("a record range's stand-in was not in the body".into()));
    }
    Ok(ResponseFrame { parts })
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::messages::FetchResponse;

    use super::*;
    use crate::encode_response;

    fn response(records: [Bytes; 2]) -> FetchResponse {
        let partitions = records
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                PartitionData::default()
                    .with_partition_index(i as i32)
                    .with_records(Some(r))
            })
            .collect();
        FetchResponse::default().with_responses(vec![
            FetchableTopicResponse::default().with_partitions(partitions)
        ])
    }

    /// The parts, with each file range replaced by what it names, are the frame the
    /// records in memory encode to, at a flexible and a non-flexible version.
    #[test]
    fn stand_ins_become_file_parts_of_the_same_frame() {
        let records = [Bytes::from(vec![7u8; 300]), Bytes::from(vec![9u8; 5])];
        for version in [11, 16] {
            let whole = encode_response(1, 42, version, &response(records.clone())).unwrap();
            let mut transferable = TransferableRecords::default();
            let stand_ins = [0, 1].map(|i| transferable.stand_in(i, records[i].len()).unwrap());
            let frame =
                encode_response_frame(1, 42, version, &response(stand_ins), transferable).unwrap();
            assert!(!matches!(frame.parts(), [FramePart::Bytes(_)]));
            let mut joined = Vec::new();
            let mut files = Vec::new();
            for part in frame.parts() {
                match part {
                    FramePart::Bytes(b) => joined.extend_from_slice(b),
                    FramePart::File(i) => {
                        files.push(*i);
                        joined.extend_from_slice(&records[*i]);
                    }
                }
            }
            assert_eq!(files, [0, 1]);
            assert_eq!(joined, whole);
        }
    }

    #[test]
    fn a_stand_in_missing_from_the_body_is_an_error_and_empty_ranges_get_none() {
        let mut transferable = TransferableRecords::default();
        assert!(transferable.stand_in(0, 0).is_none());
        transferable.stand_in(1, 10).unwrap();
        let body = response([Bytes::from_static(b"abc"), Bytes::new()]);
        assert!(encode_response_frame(1, 1, 12, &body, transferable).is_err());
    }
}
