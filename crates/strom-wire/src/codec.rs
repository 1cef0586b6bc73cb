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

/// The most a broker lets one stored or produced batch's records decompress to, whatever
/// its `max.message.bytes`: any client may set a topic's to 2 GiB, which would let a few
/// kB of zstd inflate to 64 GiB in the broker's memory. Kafka's validator streams records
/// and holds none of them; strom holds a batch's records while it reads them, so this
/// bounds that memory per reading thread (25× a 10 MiB batch).
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
        Codec::Gzip => read_bounded(codec, flate2::read::MultiGzDecoder::new(data), limit, out),
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
    let context = Lz4Decompression::new().map_err(|e| corrupt(codec, e))?;
    let mut src = data;
    loop {
        let room = (limit + 1 - out.len()).min(LZ4_BLOCK);
        out.reserve(room);
        let (mut written, mut read) = (room, src.len());
        // SAFETY: `out` has `room` bytes of spare capacity from its length on, and `src`
        // is `read` readable bytes; liblz4 writes at most `written` bytes there, reads at
        // most `read`, and reports how many of each it did.
        let hint = unsafe {
            lz4::liblz4::LZ4F_decompress(
                context.0,
                out.as_mut_ptr().add(out.len()),
                &mut written,
                src.as_ptr(),
                &mut read,
                std::ptr::null(),
            )
        };
        if let Err(e) = lz4::liblz4::check_error(hint) {
            return Err(corrupt(codec, e));
        }
        // SAFETY: liblz4 initialised the `written` bytes after the length.
        unsafe { out.set_len(out.len() + written) };
        if out.len() > limit {
            return Err(too_large(codec, limit));
        }
        src = &src[read..];
        // A hint of 0 ends a frame; another may follow. Otherwise liblz4 wants more
        // input, or (when it filled `out`) more room for what it holds.
        if hint == 0 && src.is_empty() {
            break;
        }
        if (src.is_empty() && written < room) || (read == 0 && written == 0) {
            return Err(corrupt(codec, "the frame is truncated"));
        }
    }
    Ok(())
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

/// Snappy as Kafka's clients write it: xerial-framed blocks (Java) or one raw block
/// (librdkafka).
fn decompress_snappy(data: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<(), BatchError> {
    let codec = Codec::Snappy;
    let mut decoder = snap::raw::Decoder::new();
    let Some(mut blocks) = data.strip_prefix(XERIAL_HEADER) else {
        let len = snap::raw::decompress_len(data).map_err(|e| corrupt(codec, e))?;
        if len > limit {
            return Err(too_large(codec, limit));
        }
        out.resize(len, 0);
        decoder
            .decompress(data, out)
            .map_err(|e| corrupt(codec, e))?;
        return Ok(());
    };
    while !blocks.is_empty() {
        let (len, rest) = blocks
            .split_first_chunk::<4>()
            .ok_or_else(|| corrupt(codec, "truncated block length"))?;
        let len = u32::from_be_bytes(*len) as usize;
        let block = rest
            .get(..len)
            .ok_or_else(|| corrupt(codec, "truncated block"))?;
        let size = snap::raw::decompress_len(block).map_err(|e| corrupt(codec, e))?;
        if out.len() + size > limit {
            return Err(too_large(codec, limit));
        }
        let start = out.len();
        out.resize(start + size, 0);
        decoder
            .decompress(block, &mut out[start..])
            .map_err(|e| corrupt(codec, e))?;
        blocks = &rest[len..];
    }
    Ok(())
}

/// Compresses a records section with `codec` at `level` (the topic's
/// `compression.<codec>.level`; ignored by snappy, which has none).
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
