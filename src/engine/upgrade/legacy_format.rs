//! The decoding half of kpfs's own batch format (magic 1), the format of every `.log`
//! written before segments became Kafka's RecordBatch v2, kept so `kpfs upgrade` can
//! read old segments after `format.rs` changed. Decode only: nothing writes magic 1 any
//! more. The bytes are those `docs/FORMAT.md` described at commit 2a602bc ("Upgrading
//! from kpfs's own format" there now); `tests/fixtures/legacy-v1` holds segments that
//! release wrote, and the tests below decode them.

use std::fmt;
use std::io::{self, Read};

use crate::engine::format::{be_i64, be_u16, be_u32, be_u64, check_whole_batch, DecodeError};

/// kpfs's own files in an old partition directory, which the new layout keeps outside.
pub(crate) const LEGACY_TOPIC_CONFIG_FILE: &str = "kpfs-topic.properties";
/// `<base offset> <stream position>` of the first segment, written by retention.
pub(crate) const LEGACY_STREAM_START_FILE: &str = "kpfs-stream-start";

/// The magic byte of the old format (not Kafka's message format v1).
pub(crate) const LEGACY_MAGIC: u8 = 1;
/// Where the magic byte sits in a batch header, in both the old format and Kafka's.
pub(crate) const MAGIC_AT: usize = 12;

const BASE_OFFSET_AT: usize = 0;
const BATCH_LENGTH_AT: usize = 8;
const CRC_AT: usize = 13;
/// The CRC covers the base offset and everything from here to the end of the batch.
const CRC_COVERS_FROM: usize = 17;
const ATTRIBUTES_AT: usize = 17;
const LAST_OFFSET_DELTA_AT: usize = 19;
const BASE_TIMESTAMP_AT: usize = 23;
const MAX_TIMESTAMP_AT: usize = 31;
const DELETE_HORIZON_AT: usize = 39;
const BASE_STREAM_POS_AT: usize = 47;
const STREAM_BYTES_AT: usize = 55;
const RECORD_COUNT_AT: usize = 59;
const META_BYTES_AT: usize = 67;
/// Size of the fixed header; the record metadata section follows, then the lines.
pub(crate) const HEADER_BYTES: usize = 71;
/// `batch_length` counts the bytes after the length field itself.
const LENGTH_FIELD_END: usize = 12;

const ATTR_DELETE_HORIZON: u16 = 1;
/// A batch of keyless lines without record metadata (see [`RecordIter::next_plain`]).
const ATTR_PLAIN: u16 = 2;
const KNOWN_ATTRIBUTES: u16 = ATTR_DELETE_HORIZON | ATTR_PLAIN;

/// The largest batch the old format could hold; guards allocations against corrupt
/// length fields.
const MAX_BATCH_BYTES: usize = i32::MAX as usize;

/// The fixed part of an old batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LegacyBatchHeader {
    pub(crate) base_offset: u64,
    /// Total bytes of the batch, header included.
    pub(crate) size: usize,
    crc: u32,
    /// Kept when the cleaner dropped records, so a batch may end past its last record.
    pub(crate) last_offset_delta: u32,
    pub(crate) base_timestamp: i64,
    pub(crate) max_timestamp: i64,
    pub(crate) delete_horizon_ms: Option<i64>,
    /// The stream range the batch covered when appended: `[base_stream_pos, +stream_bytes)`.
    pub(crate) base_stream_pos: u64,
    pub(crate) stream_bytes: u32,
    pub(crate) record_count: u32,
    meta_bytes: u32,
    plain: bool,
}

impl LegacyBatchHeader {
    pub(crate) fn last_offset(&self) -> u64 {
        self.base_offset + u64::from(self.last_offset_delta)
    }

    pub(crate) fn stream_end(&self) -> u64 {
        self.base_stream_pos + u64::from(self.stream_bytes)
    }

    fn lines_at(&self) -> usize {
        HEADER_BYTES + self.meta_bytes as usize
    }
}

/// One record of an old batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LegacyRecord {
    pub(crate) offset: u64,
    pub(crate) timestamp: i64,
    /// Where the record's line starts in the `log` byte stream.
    pub(crate) stream_pos: u64,
    pub(crate) key: Option<Vec<u8>>,
    /// `None` is a tombstone.
    pub(crate) value: Option<Vec<u8>>,
    /// Bytes of the line as written, newline included: the record's stream range.
    pub(crate) line_len: u64,
}

/// CRC32 (IEEE) of the base offset and of everything after the CRC field.
fn batch_crc(batch: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&batch[BASE_OFFSET_AT..BASE_OFFSET_AT + 8]);
    h.update(&batch[CRC_COVERS_FROM..]);
    h.finalize()
}

/// Decodes the header at the start of `bytes` (at least [`HEADER_BYTES`]) without
/// checking the CRC.
pub(crate) fn decode_header(bytes: &[u8]) -> Result<LegacyBatchHeader, DecodeError> {
    if bytes.len() < HEADER_BYTES {
        return Err(DecodeError::Truncated {
            needed: HEADER_BYTES,
            available: bytes.len(),
        });
    }
    let length = u64::from(be_u32(bytes, BATCH_LENGTH_AT));
    let size = length as usize + LENGTH_FIELD_END;
    if !(HEADER_BYTES..=MAX_BATCH_BYTES).contains(&size) {
        return Err(DecodeError::BadLength(length));
    }
    if bytes[MAGIC_AT] != LEGACY_MAGIC {
        return Err(DecodeError::BadMagic(bytes[MAGIC_AT]));
    }
    let base_offset = be_u64(bytes, BASE_OFFSET_AT);
    let last_offset = base_offset.checked_add(u64::from(be_u32(bytes, LAST_OFFSET_DELTA_AT)));
    if last_offset.is_none_or(|l| l >= i64::MAX as u64) {
        return Err(DecodeError::BadRecord(format!(
            "batch offset {base_offset} out of range"
        )));
    }
    let stream_pos = be_u64(bytes, BASE_STREAM_POS_AT);
    if stream_pos
        .checked_add(u64::from(be_u32(bytes, STREAM_BYTES_AT)))
        .is_none_or(|e| e > i64::MAX as u64)
    {
        return Err(DecodeError::BadRecord(format!(
            "batch stream position {stream_pos} out of range"
        )));
    }
    let meta_bytes = be_u32(bytes, META_BYTES_AT);
    if HEADER_BYTES as u64 + u64::from(meta_bytes) > size as u64 {
        return Err(DecodeError::BadRecord(format!(
            "metadata length {meta_bytes} exceeds the batch"
        )));
    }
    let attributes = be_u16(bytes, ATTRIBUTES_AT);
    if attributes & !KNOWN_ATTRIBUTES != 0 {
        return Err(DecodeError::BadRecord(format!(
            "unknown batch attributes {attributes:#06x}"
        )));
    }
    let header = LegacyBatchHeader {
        base_offset,
        size,
        crc: be_u32(bytes, CRC_AT),
        last_offset_delta: be_u32(bytes, LAST_OFFSET_DELTA_AT),
        base_timestamp: be_i64(bytes, BASE_TIMESTAMP_AT),
        max_timestamp: be_i64(bytes, MAX_TIMESTAMP_AT),
        delete_horizon_ms: (attributes & ATTR_DELETE_HORIZON != 0)
            .then(|| be_i64(bytes, DELETE_HORIZON_AT)),
        base_stream_pos: stream_pos,
        stream_bytes: be_u32(bytes, STREAM_BYTES_AT),
        record_count: be_u32(bytes, RECORD_COUNT_AT),
        meta_bytes,
        plain: attributes & ATTR_PLAIN != 0,
    };
    if header.plain {
        check_plain_header(&header)?;
    }
    Ok(header)
}

/// What the header of a plain batch must say, since its records are derived from it.
fn check_plain_header(h: &LegacyBatchHeader) -> Result<(), DecodeError> {
    let lines = h.size - HEADER_BYTES;
    let consistent = h.meta_bytes == 0
        && h.record_count > 0
        && h.record_count as usize <= lines
        && h.last_offset_delta == h.record_count - 1
        && h.stream_bytes as usize == lines
        && h.max_timestamp == h.base_timestamp
        && h.delete_horizon_ms.is_none();
    if consistent {
        Ok(())
    } else {
        Err(DecodeError::BadRecord(format!(
            "plain batch header does not match its {lines}-byte lines section: {h:?}"
        )))
    }
}

/// Decodes and verifies (CRC, every length, increasing offsets, nothing trailing) the
/// whole batch at the start of `bytes`.
pub(crate) fn decode_batch(
    bytes: &[u8],
) -> Result<(LegacyBatchHeader, Vec<LegacyRecord>), DecodeError> {
    let header = decode_header(bytes)?;
    check_whole_batch(bytes, header.size, header.crc, batch_crc)?;
    let records = RecordIter::new(&header, &bytes[..header.size]).collect::<Result<_, _>>()?;
    Ok((header, records))
}

/// Reads the batches of one old `.log` in order. Stops at the end of the file; a batch
/// that does not decode ends the walk with its error and the file position where it
/// starts (the old recovery truncated there).
pub(crate) struct LegacyBatches<R> {
    reader: R,
    position: u64,
    buffer: Vec<u8>,
    done: bool,
}

/// A batch that did not decode, and where in its file it starts.
#[derive(Debug)]
pub(crate) struct BatchAt {
    pub(crate) position: u64,
    pub(crate) error: ReadError,
}

#[derive(Debug)]
pub(crate) enum ReadError {
    Io(io::Error),
    Decode(DecodeError),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::Decode(e) => write!(f, "{e}"),
        }
    }
}

impl<R: Read> LegacyBatches<R> {
    pub(crate) fn new(reader: R) -> Self {
        LegacyBatches {
            reader,
            position: 0,
            buffer: Vec::new(),
            done: false,
        }
    }

    /// Reads up to `want` bytes into the buffer's end; returns how many came.
    fn fill(&mut self, want: usize) -> io::Result<usize> {
        let start = self.buffer.len();
        (&mut self.reader)
            .take(want as u64)
            .read_to_end(&mut self.buffer)?;
        Ok(self.buffer.len() - start)
    }

    fn next_batch(&mut self) -> Result<Option<(LegacyBatchHeader, Vec<LegacyRecord>)>, ReadError> {
        self.buffer.clear();
        let got = self.fill(HEADER_BYTES).map_err(ReadError::Io)?;
        if got == 0 {
            return Ok(None);
        }
        let header = decode_header(&self.buffer).map_err(ReadError::Decode)?;
        // The body is read as it arrives, so a corrupt length costs at most the file.
        self.fill(header.size - HEADER_BYTES)
            .map_err(ReadError::Io)?;
        let batch = decode_batch(&self.buffer).map_err(ReadError::Decode)?;
        Ok(Some(batch))
    }
}

impl<R: Read> Iterator for LegacyBatches<R> {
    type Item = Result<(LegacyBatchHeader, Vec<LegacyRecord>), BatchAt>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.next_batch() {
            Ok(Some(batch)) => {
                self.position += batch.0.size as u64;
                Some(Ok(batch))
            }
            Ok(None) => {
                self.done = true;
                None
            }
            Err(error) => {
                self.done = true;
                Some(Err(BatchAt {
                    position: self.position,
                    error,
                }))
            }
        }
    }
}

/// Iterates the records of one CRC-verified batch (`batch` = the whole batch).
struct RecordIter<'a> {
    header: LegacyBatchHeader,
    meta: &'a [u8],
    lines: &'a [u8],
    line_at: usize,
    remaining: u32,
    previous: Option<u64>,
    failed: bool,
}

impl<'a> RecordIter<'a> {
    fn new(header: &LegacyBatchHeader, batch: &'a [u8]) -> Self {
        let lines_at = header.lines_at();
        RecordIter {
            header: *header,
            meta: &batch[HEADER_BYTES..lines_at],
            lines: &batch[lines_at..header.size],
            line_at: 0,
            remaining: header.record_count,
            previous: None,
            failed: false,
        }
    }

    /// A plain batch has no metadata: record `i` is line `i`, at `base_offset + i`, with
    /// the base timestamp, no key, and the line without its newline as its value.
    fn next_plain(&mut self) -> Result<LegacyRecord, DecodeError> {
        let rest = &self.lines[self.line_at..];
        let Some(newline) = memchr::memchr(b'\n', rest) else {
            return Err(DecodeError::BadRecord(
                "line does not end in a newline".into(),
            ));
        };
        let index = self.header.record_count - self.remaining - 1;
        let record = LegacyRecord {
            offset: self.header.base_offset + u64::from(index),
            timestamp: self.header.base_timestamp,
            stream_pos: self.header.base_stream_pos + self.line_at as u64,
            key: None,
            value: Some(rest[..newline].to_vec()),
            line_len: newline as u64 + 1,
        };
        self.line_at += newline + 1;
        Ok(record)
    }

    /// A metadata entry: offset delta, zigzag timestamp delta, stream delta, zigzag key
    /// and value lengths (-1 = null), line length; the key is the line's first bytes and
    /// the value its last before the newline.
    fn next_with_meta(&mut self) -> Result<LegacyRecord, DecodeError> {
        let offset_delta = read_varint(&mut self.meta)?;
        if offset_delta > u64::from(self.header.last_offset_delta) {
            return Err(DecodeError::BadRecord(format!(
                "offset delta {offset_delta} beyond the batch's last delta {}",
                self.header.last_offset_delta
            )));
        }
        let offset = self.header.base_offset + offset_delta;
        if self.previous.is_some_and(|p| offset <= p) {
            return Err(DecodeError::BadRecord(format!(
                "offset {offset} does not increase"
            )));
        }
        self.previous = Some(offset);
        let timestamp = self
            .header
            .base_timestamp
            .wrapping_add(unzigzag(read_varint(&mut self.meta)?));
        let stream_delta = read_varint(&mut self.meta)?;
        if stream_delta > u64::from(self.header.stream_bytes) {
            return Err(DecodeError::BadRecord(format!(
                "stream delta {stream_delta} beyond the batch"
            )));
        }
        let key_len = unzigzag(read_varint(&mut self.meta)?);
        let value_len = unzigzag(read_varint(&mut self.meta)?);
        let line_len = read_varint(&mut self.meta)?;
        let left = (self.lines.len() - self.line_at) as u64;
        if line_len == 0 || line_len > left {
            return Err(DecodeError::BadRecord(format!(
                "line length {line_len} with {left} bytes left"
            )));
        }
        let line = &self.lines[self.line_at..self.line_at + line_len as usize];
        let body = line.len() - 1;
        if line[body] != b'\n' {
            return Err(DecodeError::BadRecord(
                "line does not end in a newline".into(),
            ));
        }
        let field = |len: i64| -> Result<Option<usize>, DecodeError> {
            match len {
                -1 => Ok(None),
                n if n >= 0 && n as u64 <= body as u64 => Ok(Some(n as usize)),
                n => Err(DecodeError::BadRecord(format!(
                    "field length {n} in a {body}-byte line"
                ))),
            }
        };
        let (key_len, value_len) = (field(key_len)?, field(value_len)?);
        if key_len.unwrap_or(0) + value_len.unwrap_or(0) > body {
            return Err(DecodeError::BadRecord(
                "key and value overlap in their line".into(),
            ));
        }
        self.line_at += line.len();
        Ok(LegacyRecord {
            offset,
            timestamp,
            stream_pos: self.header.base_stream_pos + stream_delta,
            key: key_len.map(|k| line[..k].to_vec()),
            value: value_len.map(|v| line[body - v..body].to_vec()),
            line_len,
        })
    }
}

impl Iterator for RecordIter<'_> {
    type Item = Result<LegacyRecord, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if self.remaining == 0 {
            if !self.meta.is_empty() || self.line_at != self.lines.len() {
                self.failed = true;
                return Some(Err(DecodeError::BadRecord(
                    "bytes after the last record".into(),
                )));
            }
            return None;
        }
        self.remaining -= 1;
        let r = if self.header.plain {
            self.next_plain()
        } else {
            self.next_with_meta()
        };
        self.failed = r.is_err();
        Some(r)
    }
}

/// Unsigned LEB128, at most 10 bytes.
fn read_varint(buf: &mut &[u8]) -> Result<u64, DecodeError> {
    let mut value = 0u64;
    for (i, &byte) in buf.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            *buf = &buf[i + 1..];
            return Ok(value);
        }
    }
    Err(DecodeError::BadRecord("unterminated varint".into()))
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn fixture(path: &str) -> Vec<u8> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/legacy-v1");
        std::fs::read(dir.join(path)).unwrap()
    }

    fn records_of(bytes: &[u8]) -> Vec<LegacyRecord> {
        LegacyBatches::new(bytes)
            .flat_map(|b| b.unwrap().1)
            .collect()
    }

    /// Offset, stream position, key, value, line length.
    type Shown<'a> = (u64, u64, Option<&'a [u8]>, Option<&'a [u8]>, u64);

    fn shown(records: &[LegacyRecord]) -> Vec<Shown<'_>> {
        records
            .iter()
            .map(|r| {
                (
                    r.offset,
                    r.stream_pos,
                    r.key.as_deref(),
                    r.value.as_deref(),
                    r.line_len,
                )
            })
            .collect()
    }

    #[test]
    fn keyed_records_with_tombstones_decode_as_written() {
        let records = records_of(&fixture("clean/keyed-0/00000000000000000000.log"));
        assert_eq!(
            shown(&records),
            [
                (0, 0, Some(&b"a"[..]), Some(&b"1"[..]), 4),
                (1, 4, Some(&b"b"[..]), Some(&b"2"[..]), 4),
                (2, 8, Some(&b"a"[..]), None, 7),
                (3, 15, Some(&b"c"[..]), Some(&b"with:colons"[..]), 14),
            ]
        );
        let records = records_of(&fixture("clean/keyed-0/00000000000000000004.log"));
        assert_eq!(
            shown(&records),
            [
                (4, 29, Some(&b""[..]), Some(&b"empty-key"[..]), 11),
                (5, 40, Some(&b"b"[..]), None, 7),
            ]
        );
    }

    #[test]
    fn plain_batches_decode_to_keyless_lines() {
        let records = records_of(&fixture("clean/plain-0/00000000000000000009.log"));
        assert_eq!(
            shown(&records),
            [
                (9, 72, None, Some(&b"plain-9"[..]), 8),
                (10, 80, None, Some(&b"two"[..]), 4),
                (11, 84, None, Some(&b"lines"[..]), 6),
            ]
        );
    }

    #[test]
    fn a_cleaned_batch_keeps_its_delete_horizon() {
        let bytes = fixture("clean/compacted-0/00000000000000000008.log");
        let batches: Vec<_> = LegacyBatches::new(&bytes[..]).map(Result::unwrap).collect();
        let (header, records) = &batches[0];
        assert!(header.delete_horizon_ms.is_some());
        assert_eq!((records[0].offset, records[0].value.as_ref()), (9, None));
        assert_eq!(header.last_offset(), 9);
        assert_eq!(
            header.stream_end(),
            records[0].stream_pos + records[0].line_len
        );
    }

    #[test]
    fn every_single_byte_flip_is_detected() {
        let bytes = fixture("clean/keyed-0/00000000000000000000.log");
        let first = decode_header(&bytes).unwrap().size;
        let plain = fixture("clean/plain-0/00000000000000000009.log");
        let two_lines = &plain[decode_header(&plain).unwrap().size..];
        for batch in [&bytes[..first], two_lines] {
            decode_batch(batch).unwrap();
            for i in 0..batch.len() {
                let mut copy = batch.to_vec();
                copy[i] ^= 0x40;
                assert!(
                    decode_batch(&copy).is_err(),
                    "flip at byte {i} went unnoticed"
                );
            }
        }
    }

    #[test]
    fn a_torn_tail_ends_the_walk_where_the_batch_starts() {
        let bytes = fixture("clean/plain-0/00000000000000000000.log");
        let first = decode_header(&bytes).unwrap().size;
        for len in first + 1..first * 2 {
            let walked: Vec<_> = LegacyBatches::new(&bytes[..len]).collect();
            assert_eq!(walked.len(), 2, "truncation to {len}");
            assert!(walked[0].is_ok());
            let err = walked[1].as_ref().unwrap_err();
            assert_eq!(err.position, first as u64);
            assert!(matches!(
                err.error,
                ReadError::Decode(DecodeError::Truncated { .. })
            ));
        }
    }
}
