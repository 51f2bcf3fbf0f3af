//! Every on-disk constant and byte layout of kpfs in one place: the names of the files in
//! the data directory and in a partition directory, the record batch framing inside `.log`
//! files, the index entry layouts, and the bounds those layouts impose (the largest
//! segment file, the largest relative offset). `docs/FORMAT.md` describes the same bytes
//! for humans; keep the two in step. Bounds the engine chooses, not the format, are in
//! [`limits`](super::limits).
//!
//! All integers are big-endian, as in Kafka. Batches are checksummed with CRC32 (IEEE,
//! `crc32fast`) so recovery can tell a torn or corrupt tail from valid data.
//!
//! A batch keeps each record's line exactly as it is rendered in the `log` file (key,
//! separator, value, newline) in one contiguous section after the record metadata. As
//! long as the topic renders records the way they were written (the batch's render id
//! matches), reading is a copy of that section, not a per-record rebuild.

use std::fmt;

/// Suffixes of the files of one segment.
pub(crate) const LOG_SUFFIX: &str = ".log";
pub(crate) const INDEX_SUFFIX: &str = ".index";
pub(crate) const TIME_INDEX_SUFFIX: &str = ".timeindex";
/// Temporary suffixes appended after the normal one (`...log.deleted`).
pub(crate) const DELETED_SUFFIX: &str = ".deleted";
pub(crate) const CLEANED_SUFFIX: &str = ".cleaned";
pub(crate) const SWAP_SUFFIX: &str = ".swap";

/// Width of the zero-padded base offset in file names (Kafka's `filenamePrefixFromOffset`).
pub(crate) const OFFSET_DIGITS: usize = 20;

/// Partition directory suffix: one partition per topic (`TOPIC-0`).
pub(crate) const PARTITION_SUFFIX: &str = "-0";
/// Suffix of a topic directory being deleted (Kafka's `LocalLog.logDeleteDirName`).
pub(crate) const DELETING_SUFFIX: &str = "-delete";
/// Suffix of `files::write_atomically`'s temporary files, renamed over the target.
pub(crate) const TMP_SUFFIX: &str = ".tmp";

// Files of the data directory.
/// Marker left by a clean shutdown (Kafka's `.kafka_cleanshutdown`).
pub const CLEAN_SHUTDOWN_FILE: &str = ".kpfs_cleanshutdown";
/// Lock file holding the daemon's pid; `flock`ed while a kpfs owns the data directory.
pub(crate) const LOCK_FILE: &str = "kpfs.lock";
/// The daemon's own log (written by the CLI, named here so `kpfs check` knows it).
pub(crate) const DAEMON_LOG_FILE: &str = "kpfs.log";
/// Dynamic broker config overrides written through `.kpfs/config`.
pub const DYNAMIC_BROKER_CONFIG_FILE: &str = "kpfs-dynamic-broker.properties";
/// Kafka's cleaner checkpoint file: first dirty offset per partition.
pub const CLEANER_CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";
/// Kafka's recovery-point checkpoint file: per partition, the offset below which every
/// record was fsynced, so recovery after a crash validates only what follows.
pub const RECOVERY_CHECKPOINT_FILE: &str = "recovery-point-offset-checkpoint";

// Files of a partition directory besides the segments.
/// The topic's config overrides.
pub const TOPIC_CONFIG_FILE: &str = "kpfs-topic.properties";
/// `<base offset> <stream position>` of the first segment, so an empty first segment
/// keeps its stream position across a reopen.
pub(crate) const STREAM_START_FILE: &str = "kpfs-stream-start";

/// `.index` entry: relative offset u32 + file position u32.
pub(crate) const OFFSET_INDEX_ENTRY_BYTES: usize = 8;
/// Where the file position starts in an `.index` entry (after the relative offset).
pub(crate) const OFFSET_INDEX_POSITION_AT: usize = 4;
/// `.timeindex` entry: timestamp i64 + relative offset u32.
pub(crate) const TIME_INDEX_ENTRY_BYTES: usize = 12;
/// Where the relative offset starts in a `.timeindex` entry (after the timestamp).
pub(crate) const TIME_INDEX_OFFSET_AT: usize = 8;
const _: () = assert!(OFFSET_INDEX_POSITION_AT + 4 == OFFSET_INDEX_ENTRY_BYTES);
const _: () = assert!(TIME_INDEX_OFFSET_AT + 4 == TIME_INDEX_ENTRY_BYTES);

/// The largest `.log` kpfs writes: positions in `.index` are u32.
pub(crate) const MAX_SEGMENT_FILE_BYTES: u64 = u32::MAX as u64;
/// The largest offset distance from a segment's base offset: relative offsets in both
/// indexes are u32, and Kafka keeps them to `Int.MaxValue`
/// (`LogSegment.canConvertToRelativeOffset`), so a segment rolls before exceeding it.
pub(crate) const MAX_RELATIVE_OFFSET: u64 = i32::MAX as u64;

/// The only batch format version kpfs writes.
pub(crate) const BATCH_MAGIC: u8 = 1;

/// Byte positions inside a batch header.
const BASE_OFFSET_AT: usize = 0;
const BATCH_LENGTH_AT: usize = 8;
const MAGIC_AT: usize = 12;
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
const RENDER_ID_AT: usize = 63;
const META_BYTES_AT: usize = 67;
/// Size of the fixed batch header; the record metadata section follows, then the lines.
pub const BATCH_HEADER_BYTES: usize = 71;
/// `batch_length` counts the bytes after the length field itself.
const LENGTH_FIELD_END: usize = 12;

/// Attribute bit: the batch carries a KIP-534 delete horizon for its tombstones.
const ATTR_DELETE_HORIZON: u16 = 1;
/// Attribute bit: a plain batch, with no record metadata. Every line of its lines section
/// is one keyless record whose value is the line; offsets, timestamps and stream
/// positions follow from the header. Appends of keyless lines are written this way, so
/// their per-record cost is finding newlines.
const ATTR_PLAIN: u16 = 2;
const KNOWN_ATTRIBUTES: u16 = ATTR_DELETE_HORIZON | ATTR_PLAIN;

/// The largest batch kpfs will decode. Guards allocations against corrupt length fields;
/// larger than any batch kpfs writes (one write is at most one segment).
pub(crate) const MAX_BATCH_BYTES: usize = i32::MAX as usize;

/// Upper bound of one record's metadata (six varints of at most 10 bytes).
const MAX_RECORD_META_BYTES: usize = 60;

pub fn segment_file_name(base_offset: u64, suffix: &str) -> String {
    format!("{base_offset:0width$}{suffix}", width = OFFSET_DIGITS)
}

/// Parses `00000000000000000042.log` (or `.index`, ...) into (42, ".log"). Temporary
/// suffixes stay in the returned suffix (`.log.deleted`).
pub(crate) fn parse_segment_file_name(name: &str) -> Option<(u64, &str)> {
    if name.len() < OFFSET_DIGITS || !name.is_char_boundary(OFFSET_DIGITS) {
        return None;
    }
    let (digits, suffix) = name.split_at(OFFSET_DIGITS);
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let base = digits.parse::<u64>().ok()?;
    Some((base, suffix))
}

/// One record as the engine sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg(any(test, feature = "internals"))]
pub struct Record {
    pub offset: u64,
    pub(crate) timestamp: i64,
    /// Position of this record's rendering in the `log` byte stream.
    pub stream_pos: u64,
    pub key: Option<Vec<u8>>,
    /// `None` is a tombstone.
    pub value: Option<Vec<u8>>,
    /// The line as written, newline included.
    pub line: Vec<u8>,
}

/// The fixed part of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: u64,
    /// Total bytes of the batch, header included.
    pub size: usize,
    pub(crate) crc: u32,
    pub(crate) last_offset_delta: u32,
    pub(crate) base_timestamp: i64,
    pub(crate) max_timestamp: i64,
    /// KIP-534: set by the cleaner the first time it retains a tombstone of this batch.
    pub(crate) delete_horizon_ms: Option<i64>,
    /// Stream range this batch covered when appended: `[base_stream_pos, +stream_bytes)`.
    pub base_stream_pos: u64,
    pub(crate) stream_bytes: u32,
    pub record_count: u32,
    /// Which rendering (parse.key, key.separator, null.marker) the lines were written in.
    pub(crate) render_id: u32,
    /// Bytes of record metadata after the header; the lines section follows.
    pub(crate) meta_bytes: u32,
    /// A plain batch: no record metadata; record `i` is line `i`, at offset
    /// `base_offset + i`, with the base timestamp, no key and the line as its value.
    pub plain: bool,
}

impl BatchHeader {
    pub fn last_offset(&self) -> u64 {
        self.base_offset + u64::from(self.last_offset_delta)
    }

    pub(crate) fn next_offset(&self) -> u64 {
        self.last_offset() + 1
    }

    pub(crate) fn stream_end(&self) -> u64 {
        self.base_stream_pos + u64::from(self.stream_bytes)
    }

    /// Where the lines section starts, from the start of the batch.
    pub fn lines_at(&self) -> usize {
        BATCH_HEADER_BYTES + self.meta_bytes as usize
    }
}

/// Why bytes do not decode as a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes than the header or the length field announce (a torn tail).
    Truncated {
        needed: usize,
        available: usize,
    },
    BadMagic(u8),
    BadLength(u64),
    CrcMismatch {
        stored: u32,
        computed: u32,
    },
    BadRecord(String),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated { needed, available } => {
                write!(
                    f,
                    "truncated batch: needs {needed} bytes, {available} present"
                )
            }
            DecodeError::BadMagic(m) => write!(f, "unknown batch magic {m}"),
            DecodeError::BadLength(l) => write!(f, "impossible batch length {l}"),
            DecodeError::CrcMismatch { stored, computed } => write!(
                f,
                "CRC mismatch: stored {stored:#010x}, computed {computed:#010x}"
            ),
            DecodeError::BadRecord(why) => write!(f, "malformed record: {why}"),
        }
    }
}

fn be_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
/// The big-endian `u32` at `at` (batch headers, index entries).
pub(crate) fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn be_u64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
/// The big-endian `i64` at `at` (batch timestamps, `.timeindex` entries).
pub(crate) fn be_i64(b: &[u8], at: usize) -> i64 {
    be_u64(b, at) as i64
}

/// CRC32 of the base offset and of everything after the CRC field. Unlike Kafka's, it
/// covers the base offset too, so a flipped offset bit cannot pass as valid data; the
/// length is covered implicitly (a wrong length changes the checked range).
fn batch_crc(batch: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&batch[BASE_OFFSET_AT..BASE_OFFSET_AT + 8]);
    h.update(&batch[CRC_COVERS_FROM..]);
    h.finalize()
}

/// Decodes the header at the start of `bytes` without checking the CRC. Needs only
/// [`BATCH_HEADER_BYTES`] bytes; `size` tells how many the whole batch has.
pub fn decode_header(bytes: &[u8]) -> Result<BatchHeader, DecodeError> {
    if bytes.len() < BATCH_HEADER_BYTES {
        return Err(DecodeError::Truncated {
            needed: BATCH_HEADER_BYTES,
            available: bytes.len(),
        });
    }
    let length = u64::from(be_u32(bytes, BATCH_LENGTH_AT));
    let size = length as usize + LENGTH_FIELD_END;
    if !(BATCH_HEADER_BYTES..=MAX_BATCH_BYTES).contains(&size) {
        return Err(DecodeError::BadLength(length));
    }
    let magic = bytes[MAGIC_AT];
    if magic != BATCH_MAGIC {
        return Err(DecodeError::BadMagic(magic));
    }
    // Offsets are Kafka longs: anything past i64::MAX (or a range that would overflow)
    // is corruption, and refusing it here keeps every later offset sum in range.
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
    if BATCH_HEADER_BYTES as u64 + u64::from(meta_bytes) > size as u64 {
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
    let horizon = be_i64(bytes, DELETE_HORIZON_AT);
    let header = BatchHeader {
        base_offset,
        size,
        crc: be_u32(bytes, CRC_AT),
        last_offset_delta: be_u32(bytes, LAST_OFFSET_DELTA_AT),
        base_timestamp: be_i64(bytes, BASE_TIMESTAMP_AT),
        max_timestamp: be_i64(bytes, MAX_TIMESTAMP_AT),
        delete_horizon_ms: (attributes & ATTR_DELETE_HORIZON != 0).then_some(horizon),
        base_stream_pos: stream_pos,
        stream_bytes: be_u32(bytes, STREAM_BYTES_AT),
        record_count: be_u32(bytes, RECORD_COUNT_AT),
        render_id: be_u32(bytes, RENDER_ID_AT),
        meta_bytes,
        plain: attributes & ATTR_PLAIN != 0,
    };
    if header.plain {
        check_plain_header(&header)?;
    }
    Ok(header)
}

/// What the header of a plain batch must say, since its records are derived from it: the
/// lines are the whole stream range, one offset per record, one timestamp, no tombstones.
fn check_plain_header(h: &BatchHeader) -> Result<(), DecodeError> {
    let lines = h.size - BATCH_HEADER_BYTES;
    // Every record takes at least its newline, which also bounds what a reader of the
    // count may allocate.
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

/// Decodes and verifies a whole batch at the start of `bytes`, copying its records.
#[cfg(any(test, feature = "internals"))]
pub fn decode_batch(bytes: &[u8]) -> Result<(BatchHeader, Vec<Record>), DecodeError> {
    let header = verify_batch(bytes)?;
    let records = RecordIter::new(&header, &bytes[..header.size])
        .map(|r| r.map(|r| r.to_record()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((header, records))
}

/// Decodes the header and checks the CRC of the whole batch at the start of `bytes`.
pub fn verify_batch(bytes: &[u8]) -> Result<BatchHeader, DecodeError> {
    let header = decode_header(bytes)?;
    if bytes.len() < header.size {
        return Err(DecodeError::Truncated {
            needed: header.size,
            available: bytes.len(),
        });
    }
    let computed = batch_crc(&bytes[..header.size]);
    if computed != header.crc {
        return Err(DecodeError::CrcMismatch {
            stored: header.crc,
            computed,
        });
    }
    Ok(header)
}

/// A record borrowed from a batch buffer (the read path renders without copying).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordRef<'a> {
    pub offset: u64,
    pub(crate) timestamp: i64,
    pub stream_pos: u64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    /// The line as written, newline included.
    pub line: &'a [u8],
    /// Where `line` starts in the batch's lines section.
    pub line_at: usize,
}

impl RecordRef<'_> {
    #[cfg(any(test, feature = "internals"))]
    pub(crate) fn to_record(self) -> Record {
        Record {
            offset: self.offset,
            timestamp: self.timestamp,
            stream_pos: self.stream_pos,
            key: self.key.map(<[u8]>::to_vec),
            value: self.value.map(<[u8]>::to_vec),
            line: self.line.to_vec(),
        }
    }

    /// The line without its newline (what a builder takes).
    pub fn line_body(&self) -> &[u8] {
        &self.line[..self.line.len() - 1]
    }
}

/// Iterates the records of one verified batch (`bytes` = the whole batch). Checks every
/// length, that offsets increase and stay within the batch, that keys and values lie in
/// their lines, and that nothing trails.
#[derive(Debug)]
pub struct RecordIter<'a> {
    header: BatchHeader,
    meta: &'a [u8],
    lines: &'a [u8],
    line_at: usize,
    remaining: u32,
    previous: Option<u64>,
    failed: bool,
}

impl<'a> RecordIter<'a> {
    pub fn new(header: &BatchHeader, batch: &'a [u8]) -> Self {
        let lines_at = header.lines_at();
        RecordIter {
            header: *header,
            meta: &batch[BATCH_HEADER_BYTES..lines_at],
            lines: &batch[lines_at..header.size],
            line_at: 0,
            remaining: header.record_count,
            previous: None,
            failed: false,
        }
    }

    /// The next record of a plain batch: the next line, read as a keyless value.
    /// [`check_plain_header`] already tied offsets and stream bytes to the lines.
    fn next_plain_record(&mut self) -> Result<RecordRef<'a>, DecodeError> {
        let rest = &self.lines[self.line_at..];
        let Some(newline) = memchr::memchr(b'\n', rest) else {
            return Err(DecodeError::BadRecord(
                "line does not end in a newline".into(),
            ));
        };
        let line = &rest[..=newline];
        let index = self.header.record_count - self.remaining - 1;
        let record = RecordRef {
            offset: self.header.base_offset + u64::from(index),
            timestamp: self.header.base_timestamp,
            stream_pos: self.header.base_stream_pos + self.line_at as u64,
            key: None,
            value: Some(&line[..newline]),
            line,
            line_at: self.line_at,
        };
        self.line_at += line.len();
        Ok(record)
    }

    fn next_record(&mut self) -> Result<RecordRef<'a>, DecodeError> {
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
        let record = RecordRef {
            offset,
            timestamp,
            stream_pos: self.header.base_stream_pos + stream_delta,
            key: key_len.map(|k| &line[..k]),
            value: value_len.map(|v| &line[body - v..body]),
            line,
            line_at: self.line_at,
        };
        self.line_at += line.len();
        Ok(record)
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<RecordRef<'a>, DecodeError>;

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
            self.next_plain_record()
        } else {
            self.next_record()
        };
        self.failed = r.is_err();
        Some(r)
    }
}

fn read_varint(buf: &mut &[u8]) -> Result<u64, DecodeError> {
    // Most fields are small: one byte, no loop.
    if let Some(&first) = buf.first() {
        if first < 0x80 {
            *buf = &buf[1..];
            return Ok(u64::from(first));
        }
    }
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

/// Writes `value` as a varint at the start of `out` (at least 10 bytes); returns its length.
fn put_varint(out: &mut [u8], mut value: u64) -> usize {
    let mut n = 0;
    while value >= 0x80 {
        out[n] = (value as u8) | 0x80;
        value >>= 7;
        n += 1;
    }
    out[n] = value as u8;
    n + 1
}

fn varint_len(mut value: u64) -> usize {
    let mut n = 1;
    while value >= 0x80 {
        value >>= 7;
        n += 1;
    }
    n
}

/// A key's or value's length as the format stores it: -1 for null.
pub(crate) fn field_len(field: Option<&[u8]>) -> i64 {
    field.map_or(-1, |f| f.len() as i64)
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Identifies a rendering of records into lines (parse.key, key.separator, null.marker),
/// so a reader can tell whether a batch's stored lines are already what it must return.
pub(crate) fn render_id(parse_key: bool, separator: &[u8], null_marker: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&[u8::from(parse_key)]);
    if parse_key {
        h.update(&(separator.len() as u32).to_be_bytes());
        h.update(separator);
    }
    h.update(null_marker);
    h.finalize()
}

/// Builds one batch in memory. Records must be added in increasing offset order.
#[derive(Debug)]
pub struct BatchBuilder {
    meta: Vec<u8>,
    lines: Vec<u8>,
    base_offset: u64,
    base_timestamp: i64,
    base_stream_pos: u64,
    render_id: u32,
    max_timestamp: i64,
    last_offset: Option<u64>,
    record_count: u32,
    /// Bytes of lines pushed so far (with or without copying them).
    lines_len: usize,
}

impl BatchBuilder {
    pub fn new(
        base_offset: u64,
        base_timestamp: i64,
        base_stream_pos: u64,
        render_id: u32,
    ) -> Self {
        BatchBuilder {
            meta: Vec::new(),
            lines: Vec::new(),
            base_offset,
            base_timestamp,
            base_stream_pos,
            render_id,
            max_timestamp: i64::MIN,
            last_offset: None,
            record_count: 0,
            lines_len: 0,
        }
    }

    /// Exact size of a batch holding just this record (Kafka checks a batch against the
    /// segment size; a record that cannot fit alone can never be appended).
    /// Key and value lengths are -1 for null, as [`field_len`] gives.
    pub fn single_record_batch_size(key_len: i64, value_len: i64, line_body: usize) -> usize {
        // The three deltas of a batch's first record are 0: one byte each.
        BATCH_HEADER_BYTES
            + 3
            + varint_len(zigzag(key_len))
            + varint_len(zigzag(value_len))
            + varint_len(line_body as u64 + 1)
            + line_body
            + 1
    }

    /// Upper bound of the bytes a record with a `line_body`-byte line adds.
    pub(crate) fn record_size(line_body: usize) -> usize {
        line_body + 1 + MAX_RECORD_META_BYTES
    }

    /// Adds a record. `line_body` is the rendered line without its newline; `key` must be
    /// its prefix and `value` its suffix (as the line protocol produces them).
    pub fn push(
        &mut self,
        offset: u64,
        timestamp: i64,
        stream_pos: u64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        line_body: &[u8],
    ) {
        debug_assert!(
            key.is_none_or(|k| line_body.starts_with(k)),
            "key is the line's prefix"
        );
        debug_assert!(
            value.is_none_or(|v| line_body.ends_with(v)),
            "value is the line's suffix"
        );
        let (key_len, value_len) = (field_len(key), field_len(value));
        self.push_meta(
            offset,
            timestamp,
            stream_pos,
            key_len,
            value_len,
            line_body.len(),
        );
        self.lines.extend_from_slice(line_body);
        self.lines.push(b'\n');
    }

    /// Adds a record's metadata only: the caller supplies the lines section when it
    /// finishes the batch ([`BatchBuilder::finish_parts_with`]), so an append whose lines
    /// already sit contiguously in the written buffer is never copied.
    /// Key and value lengths are -1 for null, as [`field_len`] gives.
    pub(crate) fn push_meta(
        &mut self,
        offset: u64,
        timestamp: i64,
        stream_pos: u64,
        key_len: i64,
        value_len: i64,
        line_body_len: usize,
    ) {
        assert!(offset >= self.base_offset, "record offset below batch base");
        assert!(
            self.last_offset.is_none_or(|last| offset > last),
            "offsets must strictly increase within a batch"
        );
        assert!(
            stream_pos >= self.base_stream_pos,
            "stream position below batch base"
        );
        // Encoded on the stack and added with one copy: this runs once per record.
        let mut entry = [0u8; MAX_RECORD_META_BYTES];
        let mut n = 0;
        for v in [
            offset - self.base_offset,
            zigzag(timestamp.wrapping_sub(self.base_timestamp)),
            stream_pos - self.base_stream_pos,
            zigzag(key_len),
            zigzag(value_len),
            line_body_len as u64 + 1,
        ] {
            n += put_varint(&mut entry[n..], v);
        }
        self.meta.extend_from_slice(&entry[..n]);
        self.lines_len += line_body_len + 1;
        self.last_offset = Some(offset);
        self.max_timestamp = self.max_timestamp.max(timestamp);
        self.record_count += 1;
    }

    /// The builder's own lines buffer, for a caller of [`BatchBuilder::push_meta`] that
    /// must assemble the lines after all.
    pub(crate) fn lines_buffer(&mut self) -> &mut Vec<u8> {
        &mut self.lines
    }

    /// Adds a decoded record unchanged (the cleaner's copy).
    pub(crate) fn push_record(&mut self, rec: &RecordRef<'_>) {
        self.push(
            rec.offset,
            rec.timestamp,
            rec.stream_pos,
            rec.key,
            rec.value,
            rec.line_body(),
        );
    }

    pub(crate) fn record_count(&self) -> u32 {
        self.record_count
    }

    pub(crate) fn encoded_len(&self) -> usize {
        BATCH_HEADER_BYTES + self.meta.len() + self.lines_len
    }

    /// Finishes the batch. `last_offset` may exceed the last record's offset (a cleaned
    /// batch keeps its original last offset); `stream_end` is the end of the stream range
    /// the batch covers.
    pub fn finish(
        self,
        last_offset: Option<u64>,
        stream_end: u64,
        delete_horizon_ms: Option<i64>,
    ) -> Vec<u8> {
        self.finish_parts(last_offset, stream_end, delete_horizon_ms)
            .to_vec()
    }

    /// Empties the builder for a new batch, keeping its buffers' capacity (the append path
    /// reuses one builder, so its buffers are never allocated or faulted in again).
    pub(crate) fn reset(
        &mut self,
        base_offset: u64,
        base_timestamp: i64,
        base_stream_pos: u64,
        render_id: u32,
    ) {
        self.meta.clear();
        self.lines.clear();
        self.base_offset = base_offset;
        self.base_timestamp = base_timestamp;
        self.base_stream_pos = base_stream_pos;
        self.render_id = render_id;
        self.max_timestamp = i64::MIN;
        self.last_offset = None;
        self.record_count = 0;
        self.lines_len = 0;
    }

    /// Finishes the batch as its three parts, without copying the records into one
    /// buffer. `last_offset` may exceed the last record's offset (a cleaned batch keeps
    /// its original last offset); `stream_end` is the end of the stream range it covers.
    pub(crate) fn finish_parts(
        &self,
        last_offset: Option<u64>,
        stream_end: u64,
        delete_horizon_ms: Option<i64>,
    ) -> BatchParts<'_> {
        self.finish_parts_with(
            [&self.lines, &[]],
            last_offset,
            stream_end,
            delete_horizon_ms,
        )
    }

    /// [`BatchBuilder::finish_parts`] with the lines section supplied by the caller, in
    /// two pieces that follow each other: every pushed record's line, newline included,
    /// in order.
    pub(crate) fn finish_parts_with<'a>(
        &'a self,
        lines: [&'a [u8]; 2],
        last_offset: Option<u64>,
        stream_end: u64,
        delete_horizon_ms: Option<i64>,
    ) -> BatchParts<'a> {
        assert_eq!(
            lines[0].len() + lines[1].len(),
            self.lines_len,
            "lines section matches the pushed records"
        );
        let last = last_offset.or(self.last_offset).unwrap_or(self.base_offset);
        assert!(
            self.last_offset.is_none_or(|l| last >= l),
            "batch last offset below its last record"
        );
        let last_delta =
            u32::try_from(last - self.base_offset).expect("batch offset span fits u32");
        let stream_bytes =
            u32::try_from(stream_end - self.base_stream_pos).expect("batch stream span fits u32");
        let max_timestamp = if self.record_count == 0 {
            self.base_timestamp
        } else {
            self.max_timestamp
        };
        let header = BatchHeader {
            base_offset: self.base_offset,
            size: self.encoded_len(),
            crc: 0,
            last_offset_delta: last_delta,
            base_timestamp: self.base_timestamp,
            max_timestamp,
            delete_horizon_ms,
            base_stream_pos: self.base_stream_pos,
            stream_bytes,
            record_count: self.record_count,
            render_id: self.render_id,
            meta_bytes: u32::try_from(self.meta.len()).expect("metadata fits u32"),
            plain: false,
        };
        BatchParts {
            header: encode_header(&header, &self.meta, lines),
            meta: &self.meta,
            lines,
        }
    }
}

/// A plain batch of `record_count` keyless records appended at `timestamp`: `lines`, in
/// two pieces that follow each other, are the records' lines, each ending in a newline.
pub fn plain_batch<'a>(
    base_offset: u64,
    timestamp: i64,
    base_stream_pos: u64,
    render_id: u32,
    record_count: u32,
    lines: [&'a [u8]; 2],
) -> BatchParts<'a> {
    assert!(record_count > 0, "a plain batch holds records");
    let lines_len = lines[0].len() + lines[1].len();
    let header = BatchHeader {
        base_offset,
        size: BATCH_HEADER_BYTES + lines_len,
        crc: 0,
        last_offset_delta: record_count - 1,
        base_timestamp: timestamp,
        max_timestamp: timestamp,
        delete_horizon_ms: None,
        base_stream_pos,
        stream_bytes: u32::try_from(lines_len).expect("batch stream span fits u32"),
        record_count,
        render_id,
        meta_bytes: 0,
        plain: true,
    };
    BatchParts {
        header: encode_header(&header, &[], lines),
        meta: &[],
        lines,
    }
}

/// Size of a plain batch holding one record with a `line_body`-byte line.
pub(crate) fn plain_batch_size(line_body: usize) -> usize {
    BATCH_HEADER_BYTES + line_body + 1
}

/// The header bytes of a batch whose other sections are `meta` and `lines`, with their
/// CRC (the stored `crc` field of `h` is ignored).
fn encode_header(h: &BatchHeader, meta: &[u8], lines: [&[u8]; 2]) -> [u8; BATCH_HEADER_BYTES] {
    debug_assert_eq!(
        h.size,
        BATCH_HEADER_BYTES + meta.len() + lines[0].len() + lines[1].len()
    );
    let length = u32::try_from(h.size - LENGTH_FIELD_END).expect("batch fits u32");
    let mut attributes = 0;
    if h.delete_horizon_ms.is_some() {
        attributes |= ATTR_DELETE_HORIZON;
    }
    if h.plain {
        attributes |= ATTR_PLAIN;
    }
    let mut b = [0u8; BATCH_HEADER_BYTES];
    b[BASE_OFFSET_AT..BASE_OFFSET_AT + 8].copy_from_slice(&h.base_offset.to_be_bytes());
    b[BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4].copy_from_slice(&length.to_be_bytes());
    b[MAGIC_AT] = BATCH_MAGIC;
    b[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    b[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4]
        .copy_from_slice(&h.last_offset_delta.to_be_bytes());
    b[BASE_TIMESTAMP_AT..BASE_TIMESTAMP_AT + 8].copy_from_slice(&h.base_timestamp.to_be_bytes());
    b[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&h.max_timestamp.to_be_bytes());
    b[DELETE_HORIZON_AT..DELETE_HORIZON_AT + 8]
        .copy_from_slice(&h.delete_horizon_ms.unwrap_or(-1).to_be_bytes());
    b[BASE_STREAM_POS_AT..BASE_STREAM_POS_AT + 8].copy_from_slice(&h.base_stream_pos.to_be_bytes());
    b[STREAM_BYTES_AT..STREAM_BYTES_AT + 4].copy_from_slice(&h.stream_bytes.to_be_bytes());
    b[RECORD_COUNT_AT..RECORD_COUNT_AT + 4].copy_from_slice(&h.record_count.to_be_bytes());
    b[RENDER_ID_AT..RENDER_ID_AT + 4].copy_from_slice(&h.render_id.to_be_bytes());
    b[META_BYTES_AT..META_BYTES_AT + 4].copy_from_slice(&h.meta_bytes.to_be_bytes());
    // Same bytes as `batch_crc` over the assembled batch.
    let mut crc = crc32fast::Hasher::new();
    crc.update(&b[BASE_OFFSET_AT..BASE_OFFSET_AT + 8]);
    crc.update(&b[CRC_COVERS_FROM..]);
    crc.update(meta);
    crc.update(lines[0]);
    crc.update(lines[1]);
    b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.finalize().to_be_bytes());
    b
}

/// A finished batch as header, record metadata and lines (in two pieces: a line an
/// earlier write left unterminated, then the rest); written with one vectored write, so
/// the lines are never copied into a batch buffer.
#[derive(Debug)]
pub struct BatchParts<'a> {
    pub(crate) header: [u8; BATCH_HEADER_BYTES],
    pub(crate) meta: &'a [u8],
    pub(crate) lines: [&'a [u8]; 2],
}

impl BatchParts<'_> {
    pub(crate) fn len(&self) -> usize {
        BATCH_HEADER_BYTES + self.meta.len() + self.lines[0].len() + self.lines[1].len()
    }

    pub(crate) fn slices(&self) -> [&[u8]; 4] {
        [&self.header, self.meta, self.lines[0], self.lines[1]]
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(self.len());
        for part in self.slices() {
            b.extend_from_slice(part);
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_batch() -> Vec<u8> {
        let mut b = BatchBuilder::new(10, 1_000, 500, 7);
        b.push(10, 1_000, 500, Some(b"a"), Some(b"1"), b"a:1");
        b.push(11, 990, 504, None, Some(b"no key"), b"no key");
        b.push(13, 1_005, 511, Some(b"k"), None, b"k:NULL");
        b.finish(None, 518, None)
    }

    #[test]
    fn batch_round_trips() {
        let bytes = sample_batch();
        let (h, recs) = decode_batch(&bytes).unwrap();
        assert_eq!(h.base_offset, 10);
        assert_eq!(h.last_offset(), 13);
        assert_eq!(h.size, bytes.len());
        assert_eq!(h.max_timestamp, 1_005);
        assert_eq!(h.stream_end(), 518);
        assert_eq!(h.render_id, 7);
        assert_eq!(h.delete_horizon_ms, None);
        assert_eq!(recs.len(), 3);
        assert_eq!(recs[0].key.as_deref(), Some(&b"a"[..]));
        assert_eq!(recs[0].value.as_deref(), Some(&b"1"[..]));
        assert_eq!(recs[1].key, None);
        assert_eq!(recs[1].timestamp, 990);
        assert_eq!(recs[1].stream_pos, 504);
        assert_eq!(recs[2].value, None);
        assert_eq!(recs[2].offset, 13);
        assert_eq!(recs[2].line, b"k:NULL\n");
        assert_eq!(&bytes[h.lines_at()..], b"a:1\nno key\nk:NULL\n");
    }

    /// Three keyless lines, the first two in the first piece.
    fn plain_sample() -> Vec<u8> {
        plain_batch(10, 1_000, 500, 7, 3, [b"a:1\n\n", b"no key\n"]).to_vec()
    }

    #[test]
    fn plain_batch_round_trips() {
        let bytes = plain_sample();
        let (h, recs) = decode_batch(&bytes).unwrap();
        assert!(h.plain);
        assert_eq!(
            (h.base_offset, h.last_offset(), h.size),
            (10, 12, bytes.len())
        );
        assert_eq!(
            (h.max_timestamp, h.stream_end(), h.meta_bytes),
            (1_000, 512, 0)
        );
        let shown: Vec<_> = recs
            .iter()
            .map(|r| {
                (
                    r.offset,
                    r.timestamp,
                    r.stream_pos,
                    r.key.clone(),
                    r.value.clone(),
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                (10, 1_000, 500, None, Some(b"a:1".to_vec())),
                (11, 1_000, 504, None, Some(Vec::new())),
                (12, 1_000, 505, None, Some(b"no key".to_vec())),
            ]
        );
        assert_eq!(&bytes[h.lines_at()..], b"a:1\n\nno key\n");
    }

    /// `bytes` with fields overwritten and the CRC rewritten to match, as a writer with
    /// a bug would leave them.
    fn resealed(mut bytes: Vec<u8>, fields: &[(usize, &[u8])]) -> Vec<u8> {
        for (at, value) in fields {
            bytes[*at..*at + value.len()].copy_from_slice(value);
        }
        let crc = batch_crc(&bytes);
        bytes[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        bytes
    }

    #[test]
    fn a_plain_header_that_does_not_match_its_lines_is_refused() {
        let both = ATTR_PLAIN | ATTR_DELETE_HORIZON;
        let cases: [(usize, &[u8]); 5] = [
            (RECORD_COUNT_AT, &2u32.to_be_bytes()),
            (LAST_OFFSET_DELTA_AT, &3u32.to_be_bytes()),
            (STREAM_BYTES_AT, &11u32.to_be_bytes()),
            (MAX_TIMESTAMP_AT, &1_001i64.to_be_bytes()),
            (ATTRIBUTES_AT, &both.to_be_bytes()),
        ];
        for field in cases {
            let bytes = resealed(plain_sample(), &[field]);
            assert!(
                matches!(decode_batch(&bytes), Err(DecodeError::BadRecord(_))),
                "field {field:?} was accepted"
            );
        }
        // A record count that matches the header but not the lines.
        let two_lines = plain_batch(0, 5, 0, 7, 2, [b"one line, two\n!", b"\n"]).to_vec();
        let one_record = [
            (RECORD_COUNT_AT, &1u32.to_be_bytes()[..]),
            (LAST_OFFSET_DELTA_AT, &0u32.to_be_bytes()[..]),
        ];
        let bytes = resealed(two_lines, &one_record);
        assert!(
            decode_batch(&bytes).is_err(),
            "a trailing line was accepted"
        );
        // More records than the lines section has bytes: refused from the header alone,
        // before anything sized by the count is allocated.
        let thousand = [
            (RECORD_COUNT_AT, &1_000u32.to_be_bytes()[..]),
            (LAST_OFFSET_DELTA_AT, &999u32.to_be_bytes()[..]),
        ];
        let bytes = resealed(plain_sample(), &thousand);
        assert!(
            decode_header(&bytes).is_err(),
            "an impossible count was accepted"
        );
        let unknown = [(ATTRIBUTES_AT, &0x8002u16.to_be_bytes()[..])];
        let bytes = resealed(plain_sample(), &unknown);
        assert!(
            decode_header(&bytes).is_err(),
            "an unknown attribute was accepted"
        );
    }

    #[test]
    fn every_single_byte_flip_is_detected() {
        for bytes in [sample_batch(), plain_sample()] {
            for i in 0..bytes.len() {
                let mut copy = bytes.clone();
                copy[i] ^= 0x40;
                assert!(
                    decode_batch(&copy).is_err(),
                    "flip at byte {i} went unnoticed"
                );
            }
        }
    }

    #[test]
    fn every_truncation_is_detected() {
        for bytes in [sample_batch(), plain_sample()] {
            for len in 0..bytes.len() {
                assert!(decode_batch(&bytes[..len]).is_err(), "truncation to {len}");
            }
        }
    }

    proptest::proptest! {
        /// A plain batch is another encoding of keyless records: it decodes to exactly the
        /// records the metadata layout holds for the same lines.
        #[test]
        fn plain_and_metadata_batches_of_the_same_lines_decode_alike(
            lines in proptest::collection::vec("[^\n]{0,20}", 1..20),
            base_offset in 0u64..1 << 40,
            timestamp in proptest::num::i64::ANY,
            base_stream_pos in 0u64..1 << 40,
            split in proptest::sample::select(vec![0usize, 1, 7, 100]),
        ) {
            let mut builder = BatchBuilder::new(base_offset, timestamp, base_stream_pos, 9);
            let mut joined = Vec::new();
            for (i, line) in lines.iter().enumerate() {
                let stream_pos = base_stream_pos + joined.len() as u64;
                builder.push(base_offset + i as u64, timestamp, stream_pos, None, Some(line.as_bytes()), line.as_bytes());
                joined.extend_from_slice(line.as_bytes());
                joined.push(b'\n');
            }
            let stream_end = base_stream_pos + joined.len() as u64;
            let with_meta = builder.finish(None, stream_end, None);
            let (first, second) = joined.split_at(split.min(joined.len()));
            let plain = plain_batch(base_offset, timestamp, base_stream_pos, 9, lines.len() as u32, [first, second]).to_vec();
            let (hm, rm) = decode_batch(&with_meta).unwrap();
            let (hp, rp) = decode_batch(&plain).unwrap();
            proptest::prop_assert_eq!(rm, rp);
            proptest::prop_assert_eq!(
                (hm.last_offset(), hm.max_timestamp, hm.stream_end(), hm.record_count, hm.lines_at() + joined.len()),
                (hp.last_offset(), hp.max_timestamp, hp.stream_end(), hp.record_count, hm.size)
            );
            proptest::prop_assert_eq!(hp.size, BATCH_HEADER_BYTES + joined.len());
        }
    }

    #[test]
    fn single_record_batch_size_is_exact() {
        for (key, value, line) in [
            (Some(&b"k"[..]), Some(&b"v"[..]), &b"k:v"[..]),
            (None, Some(&b"plain"[..]), &b"plain"[..]),
            (Some(&b"k"[..]), None, &b"k:NULL"[..]),
        ] {
            let mut b = BatchBuilder::new(5, 7, 9, 0);
            b.push(5, 7, 9, key, value, line);
            let real = b.finish(None, 9 + line.len() as u64 + 1, None).len();
            assert_eq!(
                BatchBuilder::single_record_batch_size(
                    field_len(key),
                    field_len(value),
                    line.len()
                ),
                real
            );
        }
    }

    #[test]
    fn empty_batch_keeps_its_offsets() {
        let b = BatchBuilder::new(7, 5, 100, 0);
        let bytes = b.finish(Some(9), 130, Some(42));
        let (h, recs) = decode_batch(&bytes).unwrap();
        assert!(recs.is_empty());
        assert_eq!(h.last_offset(), 9);
        assert_eq!(h.delete_horizon_ms, Some(42));
    }

    #[test]
    fn file_names_round_trip() {
        assert_eq!(segment_file_name(42, ".log"), "00000000000000000042.log");
        assert_eq!(
            parse_segment_file_name("00000000000000000042.index.deleted"),
            Some((42, ".index.deleted"))
        );
        assert_eq!(parse_segment_file_name("leader-epoch-checkpoint"), None);
    }

    #[test]
    fn varints_round_trip() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut out = vec![0u8; 10];
            let len = put_varint(&mut out, v);
            out.truncate(len);
            assert_eq!(out.len(), varint_len(v));
            let mut s = out.as_slice();
            assert_eq!(read_varint(&mut s).unwrap(), v);
            assert!(s.is_empty());
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }

    #[test]
    fn render_ids_tell_renderings_apart() {
        let plain = render_id(false, b"\t", b"");
        assert_eq!(
            plain,
            render_id(false, b":", b""),
            "the separator is unused without keys"
        );
        assert_ne!(render_id(true, b":", b""), render_id(true, b"::", b""));
        assert_ne!(render_id(true, b":", b""), render_id(true, b":", b"NULL"));
    }
}
