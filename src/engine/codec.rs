//! PLACEHOLDER until the codec module lands (i14-codec).
use std::fmt;

#[derive(Debug)]
pub(crate) struct CodecError(String);
impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub(crate) fn decompress_batch_records(
    id: u16,
    _input: &[u8],
    _max: usize,
    _out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    Err(CodecError(format!(
        "compression type {id} is not supported"
    )))
}

pub(crate) fn compress_batch_records(id: u16, _input: &[u8], _out: &mut Vec<u8>) {
    panic!("compression type {id} is not supported")
}

/// The compression bits of a batch's attributes (`DefaultRecordBatch.COMPRESSION_CODEC_MASK`).
pub const COMPRESSION_CODEC_MASK: u16 = 0x07;

/// Kafka's `CompressionType`, with the signatures of i14-codec's (which replaces this
/// file whole): `dump-log` prints its names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompressionCodec {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl CompressionCodec {
    pub const ALL: [CompressionCodec; 5] = [
        CompressionCodec::None,
        CompressionCodec::Gzip,
        CompressionCodec::Snappy,
        CompressionCodec::Lz4,
        CompressionCodec::Zstd,
    ];

    /// The codec of a batch's attributes (Kafka's `CompressionType.forId(attributes & 0x07)`).
    pub fn from_attribute_bits(attributes: u16) -> Result<CompressionCodec, CodecError> {
        let id = attributes & COMPRESSION_CODEC_MASK;
        CompressionCodec::ALL
            .get(usize::from(id))
            .copied()
            .ok_or_else(|| CodecError(format!("Unknown compression type id: {id}")))
    }

    /// Kafka's `CompressionType.name`.
    pub fn name(self) -> &'static str {
        match self {
            CompressionCodec::None => "none",
            CompressionCodec::Gzip => "gzip",
            CompressionCodec::Snappy => "snappy",
            CompressionCodec::Lz4 => "lz4",
            CompressionCodec::Zstd => "zstd",
        }
    }
}
