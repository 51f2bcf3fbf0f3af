//! Kafka's record-batch compression: the codec in a RecordBatch v2's attributes (bits 0-2)
//! and the exact byte streams Kafka's `org.apache.kafka.common.compress` classes write and
//! read for the records section of a batch.
//!
//! | codec  | id | what Kafka writes | what is read here |
//! |--------|----|-------------------|-------------------|
//! | none   | 0  | the records as they are | the same |
//! | gzip   | 1  | one gzip member (`GZIPOutputStream`, zlib level 6 unless `compression.gzip.level`) | any number of members, as `GZIPInputStream` |
//! | snappy | 2  | snappy-java's `SnappyOutputStream` ("xerial" framing): 8 bytes magic `0x82 SNAPPY 0`, int32 BE version 1, int32 BE compatible version 1, then per 32 KiB of input an int32 BE length and a raw snappy block | that framing, and raw snappy (what librdkafka writes; snappy-java's `SnappyInputStream`, librdkafka and kafka-python all fall back to it when the magic is absent) |
//! | lz4    | 3  | an LZ4 frame (`Lz4BlockOutputStream`): version 1, independent blocks of at most 64 KiB, no block or content checksum, no content size, a correct header checksum, incompressible blocks stored | any LZ4 frame of 64 KiB to 4 MiB blocks, Kafka's reader's range (content size, checksums, linked blocks, concatenated frames) |
//! | zstd   | 4  | a zstd frame (zstd-jni, level 3 unless `compression.zstd.level`); kpfs's carries its content size | any sequence of zstd frames |
//!
//! One difference from Kafka: lz4_flex has only lz4's fast compressor, the one Kafka uses
//! at its default lz4 level 9, so other levels compress as 9 does (Kafka switches to lz4's
//! high-compression compressor there). The bytes are a valid frame either way.
//!
//! Decompression never produces more than the caller's `max_output` bytes and grows the
//! output no further than that: a batch whose records would be larger is refused as soon
//! as the limit is crossed, so a small hostile batch cannot expand into gigabytes. Every
//! malformed input is an error, never a panic. The decoders' own working memory is bounded
//! by their formats: gzip's 32 KiB window, LZ4's block buffers (blocks of at most 4 MiB),
//! snappy none (it decodes into the output), and zstd's window as the frame declares it,
//! up to libzstd's default limit of 128 MiB (the limit Kafka's zstd-jni reader applies
//! too); a zstd frame that declares a content size over `max_output` is refused before
//! any of that is allocated.

// Until the RecordBatch v2 encoder and decoder in `format` call it (issue 14), the
// binary's build (without `internals`) uses none of this.

use std::fmt;
use std::io::{self, Read, Write};

/// The compression bits of a batch's attributes (`DefaultRecordBatch.COMPRESSION_CODEC_MASK`).
pub const COMPRESSION_CODEC_MASK: u16 = 0x07;

/// Kafka's `CompressionType`: the codec of a record batch, with Kafka's attribute ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompressionCodec {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

/// The levels a codec accepts and the one it uses unless configured (Kafka's
/// `CompressionType.minLevel`/`maxLevel`/`defaultLevel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Levels {
    pub min: i32,
    pub max: i32,
    pub default: i32,
}

/// `Deflater.BEST_SPEED`..`BEST_COMPRESSION`, and `DEFAULT_COMPRESSION` (-1), which zlib
/// takes as level 6. -1 is accepted besides the range.
pub const GZIP_LEVELS: Levels = Levels {
    min: 1,
    max: 9,
    default: -1,
};

/// lz4-java's `LZ4Constants`. Kafka uses lz4's fast compressor at the default level and
/// its high-compression one at any other.
pub const LZ4_LEVELS: Levels = Levels {
    min: 1,
    max: 17,
    default: 9,
};

/// libzstd's `ZSTD_minCLevel()` (-(1 << 17)), `ZSTD_MAX_CLEVEL` and `ZSTD_CLEVEL_DEFAULT`.
pub const ZSTD_LEVELS: Levels = Levels {
    min: -131_072,
    max: 22,
    default: 3,
};

/// The level zlib gives `Deflater.DEFAULT_COMPRESSION`.
const ZLIB_DEFAULT_LEVEL: u32 = 6;

/// Java's `GZIPOutputStream` header writes 0 (FAT) as the operating system, not flate2's
/// 255 ("unknown"); kept so kpfs's gzip members start with the bytes Kafka's do.
const JAVA_GZIP_OS: u8 = 0;

/// snappy-java's `SnappyCodec` header: magic, then version and minimum compatible version.
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_VERSION: i32 = 1;
const XERIAL_COMPATIBLE_VERSION: i32 = 1;
const XERIAL_HEADER_LEN: usize = XERIAL_MAGIC.len() + 8;
/// snappy-java's `SnappyOutputStream.DEFAULT_BLOCK_SIZE`: input bytes per snappy block.
const XERIAL_BLOCK_SIZE: usize = 32 * 1024;

/// The LZ4 frame format's magic number (`Lz4BlockOutputStream.MAGIC`), little endian.
const LZ4_FRAME_MAGIC: u32 = 0x184D_2204;

/// The smallest step the output of a streaming decoder grows by; later steps double what
/// it holds, up to the caller's limit.
const MIN_OUTPUT_STEP: usize = 16 * 1024;

impl CompressionCodec {
    pub const ALL: [CompressionCodec; 5] = [
        CompressionCodec::None,
        CompressionCodec::Gzip,
        CompressionCodec::Snappy,
        CompressionCodec::Lz4,
        CompressionCodec::Zstd,
    ];

    /// The codec of a batch's attributes (Kafka's `CompressionType.forId(attributes & 0x07)`);
    /// ids 5 to 7 are no codec.
    pub fn from_attribute_bits(attributes: u16) -> Result<CompressionCodec, CodecError> {
        let id = attributes & COMPRESSION_CODEC_MASK;
        CompressionCodec::ALL
            .get(usize::from(id))
            .copied()
            .ok_or(CodecError::UnknownCodecId { id })
    }

    /// The attribute bits that name this codec.
    pub fn attribute_bits(self) -> u16 {
        self as u16
    }

    /// Kafka's `CompressionType.name`: what `kafka-dump-log.sh` prints after `compresscodec:`
    /// (`none`, `gzip`, `snappy`, `lz4`, `zstd`), and the value of `compression.type` that
    /// names the codec (but `uncompressed` for none).
    pub fn name(self) -> &'static str {
        match self {
            CompressionCodec::None => "none",
            CompressionCodec::Gzip => "gzip",
            CompressionCodec::Snappy => "snappy",
            CompressionCodec::Lz4 => "lz4",
            CompressionCodec::Zstd => "zstd",
        }
    }

    /// The codec named `name` (`CompressionType.forName`).
    pub fn from_name(name: &str) -> Option<CompressionCodec> {
        CompressionCodec::ALL
            .into_iter()
            .find(|codec| codec.name() == name)
    }

    /// The levels the codec has, `None` for the codecs without (none, snappy).
    pub fn levels(self) -> Option<Levels> {
        match self {
            CompressionCodec::None | CompressionCodec::Snappy => None,
            CompressionCodec::Gzip => Some(GZIP_LEVELS),
            CompressionCodec::Lz4 => Some(LZ4_LEVELS),
            CompressionCodec::Zstd => Some(ZSTD_LEVELS),
        }
    }
}

impl fmt::Display for CompressionCodec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Kafka's `Compression`: a codec and the level it compresses at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compression {
    codec: CompressionCodec,
    /// The codec's default for codecs without levels, never read for them.
    level: i32,
}

impl Compression {
    pub const NONE: Compression = Compression {
        codec: CompressionCodec::None,
        level: 0,
    };

    /// The codec at its default level (`Compression.of(type).build()`).
    pub fn default_level(codec: CompressionCodec) -> Compression {
        Compression {
            codec,
            level: codec.levels().map_or(0, |levels| levels.default),
        }
    }

    /// The codec at `level`, refused as Kafka's builders refuse it when out of the codec's
    /// range (gzip also takes its default, -1). Codecs without levels ignore it.
    pub fn with_level(codec: CompressionCodec, level: i32) -> Result<Compression, CodecError> {
        let Some(levels) = codec.levels() else {
            return Ok(Compression::default_level(codec));
        };
        if (levels.min..=levels.max).contains(&level) || level == levels.default {
            Ok(Compression { codec, level })
        } else {
            Err(CodecError::UnsupportedLevel { codec, level })
        }
    }

    pub fn codec(self) -> CompressionCodec {
        self.codec
    }

    /// The configured level; for codecs without levels a placeholder.
    #[cfg(any(test, feature = "internals"))]
    pub fn level(self) -> i32 {
        self.level
    }
}

/// Why a codec refused its input.
#[derive(Debug)]
pub enum CodecError {
    /// Attribute bits 5 to 7 (`CompressionType.forId`'s text).
    UnknownCodecId { id: u16 },
    /// A level outside the codec's range (Kafka's builders' text).
    UnsupportedLevel { codec: CompressionCodec, level: i32 },
    /// The decompressed records would be larger than the caller allows.
    TooLarge {
        codec: CompressionCodec,
        max_output: usize,
    },
    /// Bytes the codec cannot decode, with the library's reason.
    Corrupt {
        codec: CompressionCodec,
        reason: String,
    },
    /// The encoder failed (it writes to memory, so only for want of memory).
    CompressFailed {
        codec: CompressionCodec,
        reason: String,
    },
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodecError::UnknownCodecId { id } => write!(f, "Unknown compression type id: {id}"),
            CodecError::UnsupportedLevel { codec, level } => {
                write!(
                    f,
                    "{codec} doesn't support given compression level: {level}"
                )
            }
            CodecError::TooLarge { codec, max_output } => write!(
                f,
                "{codec} records decompress to more than {max_output} bytes"
            ),
            CodecError::Corrupt { codec, reason } => {
                write!(f, "Failed to decompress {codec} records: {reason}")
            }
            CodecError::CompressFailed { codec, reason } => {
                write!(f, "Failed to compress {codec} records: {reason}")
            }
        }
    }
}

impl std::error::Error for CodecError {}

fn corrupt(codec: CompressionCodec, reason: impl fmt::Display) -> CodecError {
    CodecError::Corrupt {
        codec,
        reason: reason.to_string(),
    }
}

/// Appends `input` compressed as Kafka writes a batch's records with `compression`.
pub fn compress(
    compression: Compression,
    input: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    let codec = compression.codec;
    let failed = |e: &dyn fmt::Display| CodecError::CompressFailed {
        codec,
        reason: e.to_string(),
    };
    match codec {
        CompressionCodec::None => out.extend_from_slice(input),
        CompressionCodec::Gzip => {
            let level = u32::try_from(compression.level).unwrap_or(ZLIB_DEFAULT_LEVEL);
            let mut encoder = flate2::GzBuilder::new()
                .operating_system(JAVA_GZIP_OS)
                .write(out, flate2::Compression::new(level));
            encoder.write_all(input).map_err(|e| failed(&e))?;
            encoder.finish().map_err(|e| failed(&e))?;
        }
        CompressionCodec::Snappy => compress_xerial_snappy(input, out, failed)?,
        CompressionCodec::Lz4 => {
            // The level is not used: see the module doc.
            let frame = lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_mode(lz4_flex::frame::BlockMode::Independent);
            let mut encoder = lz4_flex::frame::FrameEncoder::with_frame_info(frame, out);
            encoder.write_all(input).map_err(|e| failed(&e))?;
            encoder.finish().map_err(|e| failed(&e))?;
        }
        CompressionCodec::Zstd => {
            let mut encoder = zstd::stream::write::Encoder::new(out, compression.level)
                .map_err(|e| failed(&e))?;
            // The size known up front goes into the frame header, so a reader can refuse
            // an oversized batch before decoding it.
            encoder
                .set_pledged_src_size(Some(input.len() as u64))
                .map_err(|e| failed(&e))?;
            encoder.include_contentsize(true).map_err(|e| failed(&e))?;
            encoder.write_all(input).map_err(|e| failed(&e))?;
            encoder.finish().map_err(|e| failed(&e))?;
        }
    }
    Ok(())
}

fn compress_xerial_snappy(
    input: &[u8],
    out: &mut Vec<u8>,
    failed: impl Fn(&dyn fmt::Display) -> CodecError,
) -> Result<(), CodecError> {
    out.extend_from_slice(&XERIAL_MAGIC);
    out.extend_from_slice(&XERIAL_VERSION.to_be_bytes());
    out.extend_from_slice(&XERIAL_COMPATIBLE_VERSION.to_be_bytes());
    let mut encoder = snap::raw::Encoder::new();
    for block in input.chunks(XERIAL_BLOCK_SIZE) {
        let length_at = out.len();
        let data_at = length_at + 4;
        out.resize(data_at + snap::raw::max_compress_len(block.len()), 0);
        let written = encoder
            .compress(block, &mut out[data_at..])
            .map_err(|e| failed(&e))?;
        out.truncate(data_at + written);
        let length = u32::try_from(written).expect("a 32 KiB block compresses to < 4 GiB");
        out[length_at..data_at].copy_from_slice(&length.to_be_bytes());
    }
    Ok(())
}

/// Appends the records `input` decompresses to with `codec`, at most `max_output` bytes:
/// more is [`CodecError::TooLarge`], and `out` then holds a partial result the caller
/// discards.
pub fn decompress(
    codec: CompressionCodec,
    input: &[u8],
    max_output: usize,
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    // Every codec but none writes a header even for no records; some decoders take an
    // empty input as zero frames.
    if input.is_empty() && codec != CompressionCodec::None {
        return Err(corrupt(codec, "empty input"));
    }
    match codec {
        CompressionCodec::None => {
            if input.len() > max_output {
                return Err(CodecError::TooLarge { codec, max_output });
            }
            out.extend_from_slice(input);
            Ok(())
        }
        CompressionCodec::Gzip => read_bounded(
            codec,
            flate2::read::MultiGzDecoder::new(input),
            max_output,
            out,
        ),
        CompressionCodec::Snappy => decompress_snappy(input, max_output, out),
        CompressionCodec::Lz4 => {
            check_lz4_frames(input)?;
            read_bounded(
                codec,
                lz4_flex::frame::FrameDecoder::new(input),
                max_output,
                out,
            )
        }
        CompressionCodec::Zstd => {
            if let Ok(Some(size)) = zstd::zstd_safe::get_frame_content_size(input) {
                if size > max_output as u64 {
                    return Err(CodecError::TooLarge { codec, max_output });
                }
            }
            let decoder =
                zstd::stream::read::Decoder::with_buffer(input).map_err(|e| corrupt(codec, e))?;
            read_bounded(codec, decoder, max_output, out)
        }
    }
}

/// Reads `reader` to its end into `out`, growing `out` geometrically but never past
/// `max_output` new bytes, and refusing a stream that has more.
fn read_bounded(
    codec: CompressionCodec,
    mut reader: impl Read,
    max_output: usize,
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    let start = out.len();
    loop {
        let produced = out.len() - start;
        let allowed = max_output - produced;
        if allowed == 0 {
            let mut probe = [0u8; 1];
            return match read_retrying(&mut reader, &mut probe) {
                Ok(0) => Ok(()),
                Ok(_) => Err(CodecError::TooLarge { codec, max_output }),
                Err(e) => Err(corrupt(codec, e)),
            };
        }
        let step = produced.max(MIN_OUTPUT_STEP).min(allowed);
        let filled = out.len();
        out.try_reserve_exact(step)
            .map_err(|e| corrupt(codec, format!("no memory for {step} bytes: {e}")))?;
        out.resize(filled + step, 0);
        match read_retrying(&mut reader, &mut out[filled..]) {
            Ok(0) => {
                out.truncate(filled);
                return Ok(());
            }
            Ok(n) => out.truncate(filled + n),
            Err(e) => {
                out.truncate(filled);
                return Err(corrupt(codec, e));
            }
        }
    }
}

fn read_retrying(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match reader.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Walks the frames' structure (descriptors, block lengths, end marks) as Kafka's
/// `Lz4BlockInputStream` reads it, for what lz4_flex lets through: a lone magic number or a
/// frame cut before its end mark (both read as a shorter stream there), and block sizes
/// Kafka does not support (above 4 MiB, which would size the decoder's buffers).
fn check_lz4_frames(mut input: &[u8]) -> Result<(), CodecError> {
    let codec = CompressionCodec::Lz4;
    let premature = || corrupt(codec, "Stream ended prematurely");
    let take = |input: &mut &[u8], n: usize| -> Result<(), CodecError> {
        *input = input.get(n..).ok_or_else(premature)?;
        Ok(())
    };
    while !input.is_empty() {
        let (magic, rest) = input.split_first_chunk::<4>().ok_or_else(premature)?;
        if u32::from_le_bytes(*magic) != LZ4_FRAME_MAGIC {
            return Err(corrupt(codec, "not an LZ4 frame"));
        }
        let [flg, bd, ..] = *rest else {
            return Err(premature());
        };
        let block_size_id = (bd >> 4) & 0x07;
        if !(4..=7).contains(&block_size_id) {
            return Err(corrupt(
                codec,
                format!("unsupported block size id {block_size_id}"),
            ));
        }
        let max_block_size = 1usize << (8 + 2 * block_size_id);
        let block_checksum = flg & 0x10 != 0;
        let content_size = flg & 0x08 != 0;
        let content_checksum = flg & 0x04 != 0;
        let dict_id = flg & 0x01 != 0;
        // Magic, FLG, BD, optional content size and dictionary id, header checksum.
        let header = 4 + 2 + 8 * usize::from(content_size) + 4 * usize::from(dict_id) + 1;
        take(&mut input, header)?;
        loop {
            let (word, _) = input.split_first_chunk::<4>().ok_or_else(premature)?;
            let word = u32::from_le_bytes(*word);
            take(&mut input, 4)?;
            if word == 0 {
                take(&mut input, 4 * usize::from(content_checksum))?;
                break;
            }
            let length = (word & 0x7fff_ffff) as usize;
            if length > max_block_size {
                return Err(corrupt(
                    codec,
                    format!("Block size {length} exceeded max: {max_block_size}"),
                ));
            }
            take(&mut input, length + 4 * usize::from(block_checksum))?;
        }
    }
    Ok(())
}

fn decompress_snappy(input: &[u8], max_output: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
    let codec = CompressionCodec::Snappy;
    // snappy-java's `SnappyInputStream` and kafka-python look at the magic only (some
    // writers get version and compatible version wrong); raw snappy cannot start with it,
    // as its first element after the length would be a copy with nothing to copy from.
    let Some(mut blocks) = input
        .strip_prefix(&XERIAL_MAGIC)
        .and_then(|rest| rest.get(XERIAL_HEADER_LEN - XERIAL_MAGIC.len()..))
    else {
        return decompress_raw_snappy(input, max_output, out);
    };
    let start = out.len();
    while !blocks.is_empty() {
        let (length, rest) = blocks
            .split_first_chunk::<4>()
            .ok_or_else(|| corrupt(codec, "truncated xerial block length"))?;
        let length = usize::try_from(i32::from_be_bytes(*length))
            .map_err(|_| corrupt(codec, "negative xerial block length"))?;
        let block = rest
            .get(..length)
            .ok_or_else(|| corrupt(codec, "xerial block longer than the input"))?;
        let remaining = max_output - (out.len() - start);
        decompress_raw_snappy(block, remaining, out).map_err(|e| match e {
            CodecError::TooLarge { .. } => CodecError::TooLarge { codec, max_output },
            other => other,
        })?;
        blocks = &rest[length..];
    }
    Ok(())
}

fn decompress_raw_snappy(
    input: &[u8],
    max_output: usize,
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    let codec = CompressionCodec::Snappy;
    let length = snap::raw::decompress_len(input).map_err(|e| corrupt(codec, e))?;
    if length > max_output {
        return Err(CodecError::TooLarge { codec, max_output });
    }
    let filled = out.len();
    out.try_reserve_exact(length)
        .map_err(|e| corrupt(codec, format!("no memory for {length} bytes: {e}")))?;
    out.resize(filled + length, 0);
    match snap::raw::Decoder::new().decompress(input, &mut out[filled..]) {
        Ok(n) if n == length => Ok(()),
        Ok(n) => {
            out.truncate(filled);
            Err(corrupt(
                codec,
                format!("{n} bytes decoded, the header says {length}"),
            ))
        }
        Err(e) => {
            out.truncate(filled);
            Err(corrupt(codec, e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }

    fn compressed(compression: Compression, input: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        compress(compression, input, &mut out).unwrap();
        out
    }

    fn decompressed(codec: CompressionCodec, input: &[u8], max_output: usize) -> Vec<u8> {
        let mut out = Vec::new();
        decompress(codec, input, max_output, &mut out).unwrap();
        out
    }

    /// Record-like text that compresses well, `len` bytes.
    fn records(len: usize) -> Vec<u8> {
        (0..)
            .flat_map(|i: u32| format!("key-{}\tvalue number {i}\n", i % 97).into_bytes())
            .take(len)
            .collect()
    }

    /// Bytes no codec shrinks (a seeded ChaCha stream), `len` of them.
    fn noise(len: usize) -> Vec<u8> {
        use proptest::prelude::Rng;
        use proptest::test_runner::{RngAlgorithm, TestRng};
        let mut bytes = vec![0; len];
        TestRng::deterministic_rng(RngAlgorithm::ChaCha).fill_bytes(&mut bytes);
        bytes
    }

    fn every_compression() -> Vec<Compression> {
        let mut all: Vec<Compression> = CompressionCodec::ALL
            .into_iter()
            .map(Compression::default_level)
            .collect();
        for (codec, level) in [
            (CompressionCodec::Gzip, 1),
            (CompressionCodec::Gzip, 9),
            (CompressionCodec::Lz4, 17),
            (CompressionCodec::Zstd, -5),
            (CompressionCodec::Zstd, 19),
        ] {
            all.push(Compression::with_level(codec, level).unwrap());
        }
        all
    }

    #[test]
    fn attribute_bits_are_kafkas_ids_and_5_to_7_are_refused() {
        for (id, codec) in CompressionCodec::ALL.into_iter().enumerate() {
            assert_eq!(usize::from(codec.attribute_bits()), id);
            assert_eq!(
                CompressionCodec::from_attribute_bits(codec.attribute_bits()).unwrap(),
                codec
            );
        }
        // Timestamp type, transactional, control and delete-horizon bits are not the codec.
        assert_eq!(
            CompressionCodec::from_attribute_bits(0x0078 | 3).unwrap(),
            CompressionCodec::Lz4
        );
        for id in 5..=7 {
            let e = CompressionCodec::from_attribute_bits(0x0040 | id).unwrap_err();
            assert_eq!(e.to_string(), format!("Unknown compression type id: {id}"));
        }
    }

    #[test]
    fn names_are_kafkas_compression_type_names() {
        let names: Vec<&str> = CompressionCodec::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(names, ["none", "gzip", "snappy", "lz4", "zstd"]);
        for codec in CompressionCodec::ALL {
            assert_eq!(CompressionCodec::from_name(codec.name()), Some(codec));
        }
        assert_eq!(CompressionCodec::from_name("GZIP"), None);
        assert_eq!(CompressionCodec::from_name("uncompressed"), None);
    }

    #[test]
    fn levels_are_refused_outside_kafkas_ranges() {
        let refused = |codec, level| {
            Compression::with_level(codec, level)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            refused(CompressionCodec::Gzip, 10),
            "gzip doesn't support given compression level: 10"
        );
        assert_eq!(
            refused(CompressionCodec::Gzip, 0),
            "gzip doesn't support given compression level: 0"
        );
        assert_eq!(
            Compression::with_level(CompressionCodec::Gzip, -1)
                .unwrap()
                .level(),
            -1
        );
        assert_eq!(
            refused(CompressionCodec::Lz4, 18),
            "lz4 doesn't support given compression level: 18"
        );
        refused(CompressionCodec::Lz4, 0);
        refused(CompressionCodec::Zstd, 23);
        refused(CompressionCodec::Zstd, -131_073);
        Compression::with_level(CompressionCodec::Zstd, -131_072).unwrap();
        assert_eq!(
            Compression::with_level(CompressionCodec::Snappy, 1234).unwrap(),
            Compression::default_level(CompressionCodec::Snappy)
        );
        assert_eq!(
            Compression::default_level(CompressionCodec::Zstd).level(),
            3
        );
        assert_eq!(Compression::default_level(CompressionCodec::Lz4).level(), 9);
    }

    #[test]
    fn every_codec_round_trips_empty_small_large_and_incompressible_records() {
        for compression in every_compression() {
            for input in [
                Vec::new(),
                b"one record\n".to_vec(),
                records(300_000),
                noise(70_000),
            ] {
                let bytes = compressed(compression, &input);
                let mut out = b"kept".to_vec();
                decompress(compression.codec(), &bytes, input.len(), &mut out).unwrap();
                assert_eq!(&out[..4], b"kept", "{compression:?} appends");
                assert!(
                    out[4..] == input[..],
                    "{compression:?}, {} bytes",
                    input.len()
                );
            }
        }
    }

    #[test]
    fn compressing_appends_to_what_the_output_holds() {
        for compression in every_compression() {
            let mut out = b"header".to_vec();
            compress(compression, b"records", &mut out).unwrap();
            assert_eq!(&out[..6], b"header");
            assert_eq!(decompressed(compression.codec(), &out[6..], 7), b"records");
        }
    }

    #[test]
    fn gzip_is_one_member_with_javas_header() {
        let bytes = compressed(
            Compression::default_level(CompressionCodec::Gzip),
            &records(1000),
        );
        // ID1 ID2 deflate, no flags, mtime 0, XFL 0 (level 6), OS 0 as GZIPOutputStream writes.
        assert_eq!(bytes[..10], [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0]);
        let size = u32::from_le_bytes(bytes[bytes.len() - 4..].try_into().unwrap());
        assert_eq!(size, 1000);
    }

    #[test]
    fn gzip_reads_concatenated_members_as_gzipinputstream_does() {
        let gzip = Compression::default_level(CompressionCodec::Gzip);
        let mut bytes = compressed(gzip, b"first\n");
        compress(gzip, b"second\n", &mut bytes).unwrap();
        assert_eq!(
            decompressed(CompressionCodec::Gzip, &bytes, 100),
            b"first\nsecond\n"
        );
    }

    #[test]
    fn snappy_is_xerial_framed_in_32_kib_blocks() {
        let input = records(40_000);
        let bytes = compressed(Compression::default_level(CompressionCodec::Snappy), &input);
        assert_eq!(bytes[..8], XERIAL_MAGIC);
        assert_eq!(bytes[8..16], [0, 0, 0, 1, 0, 0, 0, 1]);
        let mut rest = &bytes[16..];
        let mut block_sizes = Vec::new();
        while !rest.is_empty() {
            let length = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
            let block = &rest[4..4 + length];
            block_sizes.push(snap::raw::decompress_len(block).unwrap());
            rest = &rest[4 + length..];
        }
        assert_eq!(block_sizes, [32 * 1024, 40_000 - 32 * 1024]);
    }

    #[test]
    fn snappy_reads_raw_snappy_as_librdkafka_writes_it() {
        let input = records(5000);
        let raw = snap::raw::Encoder::new().compress_vec(&input).unwrap();
        assert_eq!(decompressed(CompressionCodec::Snappy, &raw, 5000), input);
    }

    #[test]
    fn lz4_is_kafkas_frame_of_independent_64_kib_blocks() {
        let input = [records(100_000), noise(70_000)].concat();
        let bytes = compressed(Compression::default_level(CompressionCodec::Lz4), &input);
        // Magic, FLG (version 1, independent blocks, nothing else), BD (64 KiB), and the
        // header checksum: the bytes every Kafka-written lz4 batch starts with.
        assert_eq!(bytes[..7], [0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, 0x82]);
        let mut rest = &bytes[7..];
        let mut blocks = Vec::new();
        loop {
            let word = u32::from_le_bytes(rest[..4].try_into().unwrap());
            rest = &rest[4..];
            if word == 0 {
                break;
            }
            let stored = word & 0x8000_0000 != 0;
            let length = (word & 0x7fff_ffff) as usize;
            assert!(length <= 64 * 1024);
            blocks.push(stored);
            rest = &rest[length..];
        }
        assert!(rest.is_empty(), "no content checksum after the end mark");
        // 170,000 bytes: compressible blocks, then the noise stored as it is.
        assert_eq!(blocks, [false, false, true]);
    }

    #[test]
    fn zstd_is_a_standard_frame_with_its_content_size() {
        let input = records(10_000);
        let bytes = compressed(Compression::default_level(CompressionCodec::Zstd), &input);
        assert_eq!(bytes[..4], [0x28, 0xb5, 0x2f, 0xfd]);
        assert_eq!(
            zstd::zstd_safe::get_frame_content_size(&bytes).unwrap(),
            Some(10_000)
        );
    }

    /// Bytes produced by kafka-python 3.0.12's `kafka.codec` encoders (python-snappy,
    /// lz4 and zstandard underneath) for the payload below.
    #[test]
    fn decodes_what_kafka_python_encodes() {
        let payload = b"kpfs golden: abcabcabcabcabcabcabcabcabcabcabcabc\n";
        for (codec, bytes) in [
            (
                CompressionCodec::Gzip,
                "1f8b08001fcc0d6b02ffcb2e482b5648cfcf4949cdb352484c4a2688b8005f15b68132000000",
            ),
            (
                CompressionCodec::Snappy,
                "82534e4150505900000000010000000100000017323c6b70667320676f6c64656e3a20616263820300000a",
            ),
            (
                CompressionCodec::Snappy,
                "323c6b70667320676f6c64656e3a20616263820300000a",
            ),
            (
                CompressionCodec::Lz4,
                "04224d1868403200000000000000841b000000ff016b70667320676f6c64656e3a2061626303000a50636162630a00000000",
            ),
            (
                CompressionCodec::Zstd,
                "28b52ffd2032bd0000886b70667320676f6c64656e3a206162630a01001cdd12",
            ),
        ] {
            assert_eq!(
                decompressed(codec, &hex(bytes), payload.len()),
                payload,
                "{codec}"
            );
        }
    }

    #[test]
    fn output_stops_at_the_limit_however_much_the_input_expands() {
        let zeros = vec![0u8; 8 << 20];
        let limit = 1 << 20;
        for compression in every_compression() {
            let codec = compression.codec();
            let bytes = compressed(compression, &zeros);
            let mut out = Vec::new();
            let e = decompress(codec, &bytes, limit, &mut out).unwrap_err();
            assert!(matches!(e, CodecError::TooLarge { .. }), "{codec}: {e}");
            assert!(
                out.capacity() <= limit,
                "{codec} grew to {}",
                out.capacity()
            );

            // Exactly at the limit is fine; one byte under is not.
            let input = records(100_000);
            let bytes = compressed(compression, &input);
            assert_eq!(decompressed(codec, &bytes, input.len()), input);
            let mut out = Vec::new();
            let e = decompress(codec, &bytes, input.len() - 1, &mut out).unwrap_err();
            assert!(matches!(e, CodecError::TooLarge { .. }), "{codec}: {e}");
            assert!(out.capacity() < input.len(), "{codec}");
        }
    }

    #[test]
    fn every_truncation_of_a_compressed_stream_is_refused_or_a_prefix() {
        let input = records(3000);
        for compression in every_compression() {
            let codec = compression.codec();
            let bytes = compressed(compression, &input);
            for len in 0..bytes.len() {
                let mut out = Vec::new();
                match decompress(codec, &bytes[..len], input.len(), &mut out) {
                    // An uncompressed or xerial stream cut between blocks is a shorter batch:
                    // the batch's own length and CRC catch that, not the codec.
                    Ok(()) => assert!(
                        matches!(codec, CompressionCodec::None | CompressionCodec::Snappy)
                            && input.starts_with(&out),
                        "{codec} accepted a truncation to {len}"
                    ),
                    // A cut xerial header reads as raw snappy, whose length may be anything.
                    Err(CodecError::Corrupt { .. } | CodecError::TooLarge { .. }) => {}
                    Err(e) => panic!("{codec}, truncation to {len}: {e}"),
                }
            }
        }
    }

    proptest::proptest! {
        // Every case runs all ten compressions through debug builds of the codecs.
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        #[test]
        fn garbage_is_an_error_never_a_panic_or_an_overrun(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..2000),
            max_output in 0usize..100_000,
        ) {
            for codec in CompressionCodec::ALL {
                let mut out = Vec::new();
                let _ = decompress(codec, &bytes, max_output, &mut out);
                proptest::prop_assert!(out.len() <= max_output);
            }
        }

        #[test]
        fn damaged_streams_are_an_error_never_a_panic_or_an_overrun(
            input in proptest::collection::vec(proptest::num::u8::ANY, 0..5000),
            flips in proptest::collection::vec((proptest::num::usize::ANY, 1u8..=255), 1..4),
        ) {
            for compression in every_compression() {
                let mut bytes = compressed(compression, &input);
                if bytes.is_empty() {
                    continue;
                }
                for &(at, mask) in &flips {
                    let at = at % bytes.len();
                    bytes[at] ^= mask;
                }
                let mut out = Vec::new();
                let _ = decompress(compression.codec(), &bytes, input.len(), &mut out);
                proptest::prop_assert!(out.len() <= input.len());
            }
        }

        #[test]
        fn any_bytes_round_trip_through_every_codec(
            input in proptest::collection::vec(0u8..4, 0..20_000),
        ) {
            for compression in every_compression() {
                let bytes = compressed(compression, &input);
                proptest::prop_assert_eq!(decompressed(compression.codec(), &bytes, input.len()), input.clone());
            }
        }
    }
}
