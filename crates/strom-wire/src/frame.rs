//! Length-prefixed framing: every Kafka request and response is an `INT32` size followed by
//! that many bytes.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::Encodable;

use crate::WireError;

/// One frame: the size prefix, `header` at `header_version`, then `body` at `version`
/// (requests and responses alike), written into a buffer allocated once at its size.
pub(crate) fn encode_frame<H: Encodable, B: Encodable>(
    header: &H,
    header_version: i16,
    body: &B,
    version: i16,
) -> anyhow::Result<Bytes> {
    let size = header.compute_size(header_version)? + body.compute_size(version)?;
    let mut buf = BytesMut::with_capacity(4 + size);
    buf.put_i32(size as i32);
    header.encode(&mut buf, header_version)?;
    body.encode(&mut buf, version)?;
    Ok(buf.freeze())
}

/// Splits complete frames off a read buffer, refusing any frame above `max_frame_bytes`
/// *before* buffering it, so a client cannot make the broker allocate what it announces.
#[derive(Debug, Clone, Copy)]
pub struct FrameDecoder {
    max_frame_bytes: usize,
}

impl FrameDecoder {
    /// A decoder that accepts frames of at most `max_frame_bytes` (Kafka's
    /// `socket.request.max.bytes`).
    pub fn new(max_frame_bytes: usize) -> Self {
        Self { max_frame_bytes }
    }

    /// Returns the next complete frame (without its size prefix), `None` if more bytes are
    /// needed, or an error if the announced size is invalid. On `None`, `buf` has been
    /// reserved to fit the whole frame so the caller's next read can fill it.
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<BytesMut>, WireError> {
        if buf.len() < 4 {
            return Ok(None);
        }
        let size = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
        if size < 0 {
            return Err(WireError::NegativeFrameSize(size));
        }
        let size = size as usize;
        if size > self.max_frame_bytes {
            return Err(WireError::FrameTooLarge {
                size,
                max: self.max_frame_bytes,
            });
        }
        if buf.len() < 4 + size {
            buf.reserve(4 + size - buf.len());
            return Ok(None);
        }
        buf.advance(4);
        Ok(Some(buf.split_to(size)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_complete_frames_and_waits_for_partial_ones() {
        let decoder = FrameDecoder::new(100);
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&3i32.to_be_bytes());
        buf.extend_from_slice(b"abc");
        buf.extend_from_slice(&5i32.to_be_bytes());
        buf.extend_from_slice(b"de");
        assert_eq!(&decoder.decode(&mut buf).unwrap().unwrap()[..], b"abc");
        assert!(decoder.decode(&mut buf).unwrap().is_none());
        buf.extend_from_slice(b"fgh");
        assert_eq!(&decoder.decode(&mut buf).unwrap().unwrap()[..], b"defgh");
        assert!(buf.is_empty());
    }

    #[test]
    fn rejects_oversized_and_negative_sizes_before_buffering() {
        let decoder = FrameDecoder::new(10);
        let mut buf = BytesMut::from(&11i32.to_be_bytes()[..]);
        assert!(matches!(
            decoder.decode(&mut buf),
            Err(WireError::FrameTooLarge { size: 11, max: 10 })
        ));
        let mut buf = BytesMut::from(&(-1i32).to_be_bytes()[..]);
        assert!(matches!(
            decoder.decode(&mut buf),
            Err(WireError::NegativeFrameSize(-1))
        ));
    }
}
