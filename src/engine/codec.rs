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
