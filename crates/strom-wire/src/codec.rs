//! The record-batch codecs: gzip, snappy (xerial framing), lz4 (frame format) and zstd,
//! as Kafka writes them, with the levels of KIP-390.
//!
//! The broker only decompresses where Kafka's validator must look inside a batch (a
//! compacted topic checking keys, a topic whose `compression.type` differs from the
//! producer's). Decompression is bounded: a few bytes that inflate without limit are a
//! client asking for unbounded memory, and are refused as a corrupt batch.

use std::io::{Read, Write};

use crate::BatchError;

/// The codec id in the low three bits of a batch's attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    None = 0,
    Gzip = 1,
    Snappy = 2,
    Lz4 = 3,
    Zstd = 4,
}

impl Codec {
    /// Every codec, in id order.
    pub const ALL: [Codec; 5] = [
        Codec::None,
        Codec::Gzip,
        Codec::Snappy,
        Codec::Lz4,
        Codec::Zstd,
    ];

    /// The codec of a batch's attributes; `None` for the unused ids 5–7.
    pub fn from_attributes(attributes: i16) -> Option<Self> {
        Some(match attributes & 0x07 {
            0 => Self::None,
            1 => Self::Gzip,
            2 => Self::Snappy,
            3 => Self::Lz4,
            4 => Self::Zstd,
            _ => return None,
        })
    }

    /// The codec a `compression.type` value names (`uncompressed` is no codec);
    /// `producer` names none, as it keeps whatever the batch has.
    pub fn from_config_name(name: &str) -> Option<Self> {
        Some(match name {
            "uncompressed" => Self::None,
            "gzip" => Self::Gzip,
            "snappy" => Self::Snappy,
            "lz4" => Self::Lz4,
            "zstd" => Self::Zstd,
            _ => return None,
        })
    }
}

/// snappy-java's stream header, which Kafka's Java clients and broker write.
const XERIAL_HEADER: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";
/// Block size of the xerial framing Kafka writes.
const XERIAL_BLOCK: usize = 32 * 1024;

fn corrupt(codec: Codec, what: impl std::fmt::Display) -> BatchError {
    BatchError::Compression(format!("{codec:?}: {what}"))
}

fn too_large(codec: Codec, limit: usize) -> BatchError {
    corrupt(codec, format!("decompresses to more than {limit} bytes"))
}

/// The most a broker holds decompressed at once for one batch, whatever its topic's
/// `max.message.bytes`: any client may set that to 2 GiB, which would let a few kB of
/// zstd inflate to 64 GiB in the broker's memory. A walk over a batch's records holds one
/// record at a time, so this bounds a record; a recompression holds the batch's records
/// all at once, so there it bounds the batch (25× a 10 MiB batch).
pub const DECOMPRESSED_LIMIT_MAX: usize = 256 << 20;

/// Decompresses a batch's records section, refusing output larger than `limit` bytes.
pub fn decompress(codec: Codec, data: &[u8], limit: usize) -> Result<Vec<u8>, BatchError> {
    let mut out = Vec::new();
    decompress_into(codec, data, limit, &mut out)?;
    Ok(out)
}

/// [`decompress`] into `out` (cleared first), so that a caller decompressing batch after
/// batch reuses one buffer's pages.
pub fn decompress_into(
    codec: Codec,
    data: &[u8],
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), BatchError> {
    out.clear();
    match codec {
        Codec::None => {
            out.extend_from_slice(data);
            Ok(())
        }
        Codec::Gzip => read_bounded(
            codec,
            flate2::bufread::MultiGzDecoder::new(data),
            limit,
            out,
        ),
        Codec::Lz4 => decompress_lz4(data, limit, out),
        Codec::Zstd => {
            let decoder = zstd::stream::read::Decoder::new(data).map_err(|e| corrupt(codec, e))?;
            read_bounded(codec, decoder, limit, out)
        }
        Codec::Snappy => decompress_snappy(data, limit, out),
    }
}

/// The most bytes liblz4 is given room for at once: one 64 KiB block (the size Kafka's
/// clients write), which it then decodes straight into `out`.
const LZ4_BLOCK: usize = 64 * 1024;

/// LZ4 frames decoded with liblz4's frame API straight into `out`. The `lz4` crate's
/// reader copies its input into a buffer of its own first, and `Read::read_to_end` zeroes
/// the output before each read: two extra passes over every byte a leader validates.
fn decompress_lz4(data: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<(), BatchError> {
    let codec = Codec::Lz4;
    let mut reader = Lz4Reader::new(data).map_err(|e| corrupt(codec, e))?;
    loop {
        let room = (limit + 1 - out.len()).min(LZ4_BLOCK);
        out.reserve(room);
        // SAFETY: `out` has `room` bytes of spare capacity from its length on.
        let written = unsafe { reader.decode(out.as_mut_ptr().add(out.len()), room) }
            .map_err(|e| corrupt(codec, e))?;
        if written == 0 {
            return Ok(());
        }
        // SAFETY: liblz4 initialised the `written` bytes after the length.
        unsafe { out.set_len(out.len() + written) };
        if out.len() > limit {
            return Err(too_large(codec, limit));
        }
    }
}

/// A liblz4 frame decompression context, freed when dropped.
struct Lz4Decompression(lz4::liblz4::LZ4FDecompressionContext);

impl Lz4Decompression {
    fn new() -> std::io::Result<Self> {
        let mut context = lz4::liblz4::LZ4FDecompressionContext(std::ptr::null_mut());
        // SAFETY: liblz4 fills `context` with a context of its own allocation.
        lz4::liblz4::check_error(unsafe {
            lz4::liblz4::LZ4F_createDecompressionContext(&mut context, lz4::liblz4::LZ4F_VERSION)
        })?;
        Ok(Self(context))
    }
}

impl Drop for Lz4Decompression {
    fn drop(&mut self) {
        // SAFETY: created by `LZ4F_createDecompressionContext` and freed only here.
        unsafe { lz4::liblz4::LZ4F_freeDecompressionContext(self.0) };
    }
}

fn read_bounded(
    codec: Codec,
    reader: impl Read,
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), BatchError> {
    reader
        .take(limit as u64 + 1)
        .read_to_end(out)
        .map_err(|e| corrupt(codec, e))?;
    if out.len() > limit {
        return Err(too_large(codec, limit));
    }
    Ok(())
}

/// A compressed records section read as a stream, for the walks that look at each record
/// once and need not hold them all: memory is what the reader buffers (a codec block),
/// not what the section inflates to.
pub enum Decoder<'a> {
    Gzip(flate2::bufread::MultiGzDecoder<&'a [u8]>),
    Snappy(SnappyReader<'a>),
    Lz4(Lz4Reader<'a>),
    Zstd(Box<zstd::stream::read::Decoder<'static, &'a [u8]>>),
}

/// A stream over `data` compressed with `codec` (not [`Codec::None`], whose records are
/// read where they lie). A snappy block may decompress to at most `block_limit` bytes:
/// snappy names a block's size up front and is decoded a block at a time.
pub fn decoder(codec: Codec, data: &[u8], block_limit: usize) -> Result<Decoder<'_>, BatchError> {
    Ok(match codec {
        Codec::None => return Err(corrupt(codec, "no decoder for uncompressed records")),
        Codec::Gzip => Decoder::Gzip(flate2::bufread::MultiGzDecoder::new(data)),
        Codec::Snappy => Decoder::Snappy(SnappyReader::new(data, block_limit)),
        Codec::Lz4 => Decoder::Lz4(Lz4Reader::new(data).map_err(|e| corrupt(codec, e))?),
        Codec::Zstd => Decoder::Zstd(Box::new(
            zstd::stream::read::Decoder::with_buffer(data).map_err(|e| corrupt(codec, e))?,
        )),
    })
}

impl Decoder<'_> {
    /// The codec being decoded, for error messages.
    pub fn codec(&self) -> Codec {
        match self {
            Decoder::Gzip(_) => Codec::Gzip,
            Decoder::Snappy(_) => Codec::Snappy,
            Decoder::Lz4(_) => Codec::Lz4,
            Decoder::Zstd(_) => Codec::Zstd,
        }
    }

    /// Reads decompressed bytes into `buf` as [`Read::read`]; a malformed stream is a
    /// corrupt batch.
    pub fn read_some(&mut self, buf: &mut [u8]) -> Result<usize, BatchError> {
        let codec = self.codec();
        match self {
            Decoder::Gzip(r) => r.read(buf),
            Decoder::Snappy(r) => return r.read_some(buf),
            Decoder::Lz4(r) => r.read(buf),
            Decoder::Zstd(r) => r.read(buf),
        }
        .map_err(|e| corrupt(codec, e))
    }
}

/// LZ4 frames (one or more) decoded with liblz4's frame API into the caller's memory.
pub struct Lz4Reader<'a> {
    context: Lz4Decompression,
    src: &'a [u8],
    finished: bool,
}

impl<'a> Lz4Reader<'a> {
    fn new(src: &'a [u8]) -> std::io::Result<Self> {
        Ok(Self {
            context: Lz4Decompression::new()?,
            src,
            finished: false,
        })
    }

    /// Decodes up to `room` bytes to `dst`, returning how many; 0 at the end of the last
    /// frame, an error for a damaged or truncated one.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `room` bytes.
    unsafe fn decode(&mut self, dst: *mut u8, room: usize) -> std::io::Result<usize> {
        while !self.finished && room > 0 {
            let (mut written, mut read) = (room, self.src.len());
            // SAFETY: `dst` is `written` writable bytes (the caller's promise) and `src`
            // `read` readable ones; liblz4 writes and reads at most that many and reports
            // how many it did.
            let hint = unsafe {
                lz4::liblz4::LZ4F_decompress(
                    self.context.0,
                    dst,
                    &mut written,
                    self.src.as_ptr(),
                    &mut read,
                    std::ptr::null(),
                )
            };
            lz4::liblz4::check_error(hint)?;
            self.src = &self.src[read..];
            // A hint of 0 ends a frame; another may follow.
            self.finished = hint == 0 && self.src.is_empty();
            if written > 0 {
                return Ok(written);
            }
            if read == 0 && !self.finished {
                return Err(std::io::Error::other("the frame is truncated"));
            }
        }
        Ok(0)
    }
}

impl Read for Lz4Reader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        // SAFETY: `buf` is `buf.len()` writable bytes.
        unsafe { self.decode(buf.as_mut_ptr(), buf.len()) }
    }
}

/// Snappy decoded a block at a time: xerial-framed blocks (Java) or one raw block
/// (librdkafka).
pub struct SnappyReader<'a> {
    /// The blocks not decoded yet: xerial-framed, or `raw` for one raw block.
    blocks: &'a [u8],
    raw: bool,
    block: Vec<u8>,
    at: usize,
    block_limit: usize,
    decoder: snap::raw::Decoder,
}

impl<'a> SnappyReader<'a> {
    fn new(data: &'a [u8], block_limit: usize) -> Self {
        let (blocks, raw) = match data.strip_prefix(XERIAL_HEADER) {
            Some(blocks) => (blocks, false),
            None => (data, true),
        };
        Self {
            blocks,
            raw,
            block: Vec::new(),
            at: 0,
            block_limit,
            decoder: snap::raw::Decoder::new(),
        }
    }

    /// The next compressed block and the size it decompresses to; `None` when there is
    /// none.
    fn next_block(&mut self) -> Result<Option<(&'a [u8], usize)>, BatchError> {
        let codec = Codec::Snappy;
        if self.blocks.is_empty() {
            return Ok(None);
        }
        let block = if self.raw {
            std::mem::take(&mut self.blocks)
        } else {
            let (len, rest) = self
                .blocks
                .split_first_chunk::<4>()
                .ok_or_else(|| corrupt(codec, "truncated block length"))?;
            let len = u32::from_be_bytes(*len) as usize;
            let block = rest
                .get(..len)
                .ok_or_else(|| corrupt(codec, "truncated block"))?;
            self.blocks = &rest[len..];
            block
        };
        let size = snap::raw::decompress_len(block).map_err(|e| corrupt(codec, e))?;
        if size > self.block_limit {
            return Err(too_large(codec, self.block_limit));
        }
        Ok(Some((block, size)))
    }

    /// Decodes `block` into `out`, exactly its decompressed size.
    fn decode(&mut self, block: &[u8], out: &mut [u8]) -> Result<(), BatchError> {
        self.decoder
            .decompress(block, out)
            .map(drop)
            .map_err(|e| corrupt(Codec::Snappy, e))
    }

    /// Reads decompressed bytes into `buf` as [`Read::read`]: a block that fits `buf` is
    /// decoded straight into it, a larger one into the reader's buffer first.
    fn read_some(&mut self, buf: &mut [u8]) -> Result<usize, BatchError> {
        while self.at == self.block.len() {
            let Some((block, size)) = self.next_block()? else {
                return Ok(0);
            };
            if size == 0 {
                continue;
            }
            if size <= buf.len() {
                self.decode(block, &mut buf[..size])?;
                return Ok(size);
            }
            let mut whole = std::mem::take(&mut self.block);
            whole.resize(size, 0);
            self.decode(block, &mut whole)?;
            self.block = whole;
            self.at = 0;
        }
        let n = buf.len().min(self.block.len() - self.at);
        buf[..n].copy_from_slice(&self.block[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Snappy decompressed whole into `out`, each block straight into its place.
fn decompress_snappy(data: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<(), BatchError> {
    let mut reader = SnappyReader::new(data, limit);
    while let Some((block, size)) = reader.next_block()? {
        if out.len() + size > limit {
            return Err(too_large(Codec::Snappy, limit));
        }
        let start = out.len();
        out.resize(start + size, 0);
        reader.decode(block, &mut out[start..])?;
    }
    Ok(())
}

/// Compresses a records section with `codec` at `level` (the topic's
/// `compression.<codec>.level`; ignored by snappy, which has none).
/// `level`, or for -1 the codec's own default as librdkafka applies it: LZ4 frame's fast
/// mode (not the HC levels above 2), zstd's 3, gzip's 6.
pub fn level_or_default(codec: Codec, level: i32) -> i32 {
    match (codec, level) {
        (Codec::Lz4, l) if l < 0 => 0,
        (Codec::Zstd, l) if l < 0 => 3,
        (_, l) => l,
    }
}

pub fn compress(codec: Codec, level: i32, data: &[u8]) -> Result<Vec<u8>, BatchError> {
    match codec {
        Codec::None => Ok(data.to_vec()),
        Codec::Gzip => {
            let level = if level < 0 {
                flate2::Compression::default()
            } else {
                flate2::Compression::new(level as u32)
            };
            let mut encoder = flate2::write::GzEncoder::new(Vec::new(), level);
            encoder.write_all(data).map_err(|e| corrupt(codec, e))?;
            encoder.finish().map_err(|e| corrupt(codec, e))
        }
        Codec::Lz4 => {
            // Frames as Kafka's clients write them: 64 KiB independent blocks, no block or
            // content checksums (the batch's CRC32C covers the bytes; the lz4 crate's
            // default checksums cost producer and broker an XXH32 pass each).
            let mut encoder = lz4::EncoderBuilder::new()
                .level(level.max(0) as u32)
                .block_size(lz4::BlockSize::Max64KB)
                .block_mode(lz4::BlockMode::Independent)
                .block_checksum(lz4::liblz4::BlockChecksum::NoBlockChecksum)
                .checksum(lz4::ContentChecksum::NoChecksum)
                .build(Vec::new())
                .map_err(|e| corrupt(codec, e))?;
            encoder.write_all(data).map_err(|e| corrupt(codec, e))?;
            let (out, result) = encoder.finish();
            result.map_err(|e| corrupt(codec, e))?;
            Ok(out)
        }
        Codec::Zstd => zstd::bulk::compress(data, level).map_err(|e| corrupt(codec, e)),
        Codec::Snappy => {
            let mut encoder = snap::raw::Encoder::new();
            let mut out = XERIAL_HEADER.to_vec();
            for block in data.chunks(XERIAL_BLOCK) {
                let compressed = encoder.compress_vec(block).map_err(|e| corrupt(codec, e))?;
                out.extend_from_slice(&(compressed.len() as u32).to_be_bytes());
                out.extend_from_slice(&compressed);
            }
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lz4_frames_are_written_as_kafkas_clients_write_them() {
        let packed = compress(Codec::Lz4, 0, &[b'k'; 200_000]).unwrap();
        assert_eq!(packed[..4], 0x184D_2204u32.to_le_bytes());
        assert_eq!(
            packed[4], 0x60,
            "FLG: version 1, independent blocks, no block or content checksum"
        );
        assert_eq!(packed[5], 0x40, "BD: 64 KiB blocks");
    }

    #[test]
    fn every_codec_round_trips() {
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_be_bytes())
            .collect();
        for codec in Codec::ALL {
            let level = if codec == Codec::Lz4 { 9 } else { 3 };
            let packed = compress(codec, level, &data).unwrap();
            assert_eq!(
                decompress(codec, &packed, data.len()).unwrap(),
                data,
                "{codec:?}"
            );
        }
    }

    #[test]
    fn lz4_frames_one_after_another_decompress_and_a_cut_or_damaged_one_is_refused() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 26) as u8 + b'A').collect();
        let frame = compress(Codec::Lz4, 0, &data).unwrap();
        let two = [frame.clone(), frame.clone()].concat();
        assert_eq!(
            decompress(Codec::Lz4, &two, 1 << 20).unwrap(),
            [data.clone(), data].concat()
        );
        for cut in [0, 3, 7, frame.len() / 2, frame.len() - 1] {
            let err = decompress(Codec::Lz4, &frame[..cut], 1 << 20).unwrap_err();
            assert!(err.to_string().contains("Lz4"), "cut at {cut}: {err}");
        }
        let mut damaged = frame;
        damaged[4] ^= 0xff;
        assert!(decompress(Codec::Lz4, &damaged, 1 << 20).is_err());
    }

    #[test]
    fn decompression_beyond_the_limit_is_refused() {
        let zeros = vec![0u8; 1 << 20];
        for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
            let packed = compress(codec, 3, &zeros).unwrap();
            let err = decompress(codec, &packed, 4096).unwrap_err();
            assert!(
                err.to_string().contains("more than 4096"),
                "{codec:?}: {err}"
            );
        }
    }

    #[test]
    fn raw_snappy_from_librdkafka_is_read() {
        let data = b"hello hello hello hello".repeat(10);
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(decompress(Codec::Snappy, &raw, 1 << 20).unwrap(), data);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
            assert!(decompress(codec, b"\x00\x01garbage", 1 << 20).is_err());
        }
    }
}
