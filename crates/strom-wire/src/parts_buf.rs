//! An encoder's buffer that cuts parts out of a frame instead of copying them.
//!
//! The `kafka-protocol` crate encodes a message by copying every field into one buffer,
//! records included. A frame whose records are large — a broker's Fetch answer, a
//! producer's Produce request — would pay a copy of every record byte for nothing, since
//! the socket can take the records from where they already are. This buffer watches the
//! slices the crate copies: one that a [`CutOut`] recognises closes the bytes gathered so
//! far as a part and becomes a part of its own, and everything else accumulates as usual.

use bytes::buf::UninitSlice;
use bytes::{BufMut, BytesMut};
use kafka_protocol::protocol::buf::ByteBufMut;
use kafka_protocol::protocol::Encodable;

use crate::FramePart;

/// Recognises the slices of a message that are sent as they lie.
pub(crate) trait CutOut {
    /// What a recognised slice becomes in the frame.
    type Part;

    /// The part `slice` stands for, if it is one; each part is handed out once.
    fn cut(&mut self, slice: &[u8]) -> Option<Self::Part>;
}

/// Encodes one frame — the size prefix, `header` at `header_version`, `body` at
/// `version` — in parts, each slice `cut_out` recognises a part of its own. `cuts` slices
/// of `cut_bytes` in all are expected to be cut, so the bytes around them are allocated
/// once at their size. Returns the parts in order and the recogniser (to check that
/// nothing it was meant to recognise went missing).
pub(crate) fn encode_frame_parts<H: Encodable, B: Encodable, C: CutOut>(
    header: &H,
    header_version: i16,
    body: &B,
    version: i16,
    cut_out: C,
    cuts: usize,
    cut_bytes: usize,
) -> anyhow::Result<(Vec<FramePart<C::Part>>, C)> {
    let size = header.compute_size(header_version)? + body.compute_size(version)?;
    let mut buf = PartsBuf::new((4 + size).saturating_sub(cut_bytes), cuts, cut_out);
    buf.put_i32(size as i32);
    header.encode(&mut buf, header_version)?;
    body.encode(&mut buf, version)?;
    Ok(buf.finish())
}

/// The encoder's buffer: bytes accumulate in `head` until a recognised slice is copied,
/// which closes `head` as a part and adds the slice's part as the next.
struct PartsBuf<C: CutOut> {
    head: BytesMut,
    parts: Vec<FramePart<C::Part>>,
    cut_out: C,
}

impl<C: CutOut> PartsBuf<C> {
    /// A buffer for `head_bytes` of encoded bytes and up to `cuts` recognised slices.
    fn new(head_bytes: usize, cuts: usize, cut_out: C) -> Self {
        Self {
            head: BytesMut::with_capacity(head_bytes),
            parts: Vec::with_capacity(2 * cuts + 1),
            cut_out,
        }
    }

    /// The frame's parts in order, and the recogniser.
    fn finish(mut self) -> (Vec<FramePart<C::Part>>, C) {
        if !self.head.is_empty() {
            self.parts.push(FramePart::Bytes(self.head.freeze()));
        }
        (self.parts, self.cut_out)
    }
}

// SAFETY: every method forwards to `BytesMut`'s, which upholds `BufMut`'s contract;
// `put_slice` either forwards too or writes nothing to `head`.
unsafe impl<C: CutOut> BufMut for PartsBuf<C> {
    fn remaining_mut(&self) -> usize {
        self.head.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller initialised `cnt` bytes of the chunk `head` handed out.
        unsafe { self.head.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.head.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        match self.cut_out.cut(src) {
            Some(part) => {
                let head = self.head.split().freeze();
                if !head.is_empty() {
                    self.parts.push(FramePart::Bytes(head));
                }
                self.parts.push(FramePart::File(part));
            }
            None => self.head.put_slice(src),
        }
    }
}

impl<C: CutOut> ByteBufMut for PartsBuf<C> {
    fn offset(&self) -> usize {
        self.head.len()
    }

    fn seek(&mut self, offset: usize) {
        self.head.seek(offset)
    }

    fn range(&mut self, r: std::ops::Range<usize>) -> &mut [u8] {
        self.head.range(r)
    }
}
