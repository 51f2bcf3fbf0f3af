//! Offline inspection of a data directory: `kpfs dump-log` (modelled on Kafka's
//! `kafka-dump-log.sh`, i.e. `DumpLogSegments`) and `kpfs check`.
//!
//! Nothing here goes through [`Engine`](super::Engine) or [`Segment`](super::segment::Segment):
//! those take the directory lock, map and preallocate indexes, and repair what they find,
//! while inspection must show the bytes exactly as they are and must be safe to run next to
//! a mounted kpfs. Files are opened read-only and read with `pread`; every length read
//! from a file is checked against the bytes that remain before anything is allocated, so
//! arbitrary input can neither panic this code nor make it allocate more than the file holds.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs::{self, File};
use std::io::{self, BufReader, Read, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::batch_validation::{BatchWalker, Step};
use super::codec::CompressionCodec;
use super::config::{BrokerConfig, GroupConfigs, TopicOverrides};
pub use super::dump_findings::DumpFindings;
use super::dump_findings::{
    dump_offset_index, dump_time_index, java_absolute_path, IndexDumpMode, KafkaRefusal,
    DEFAULT_MAX_MESSAGE_SIZE,
};
use super::format::{
    batch_crc, be_i64, be_u32, decode_header, field_len, parse_segment_file_name, records_section,
    segment_file_name, sequence_at, BatchHeader, EndTxnMarker, RecordIter, RecordRef,
    ABORTED_TXN_BYTES, BATCH_HEADER_BYTES, BATCH_MAGIC, CLEANED_SUFFIX, DELETED_SUFFIX,
    INDEX_SUFFIX, LOG_SUFFIX, OFFSET_DIGITS, OFFSET_INDEX_ENTRY_BYTES, SNAPSHOT_SUFFIX,
    STREAM_INDEX_ENTRY_BYTES, STREAM_INDEX_HEADER_BYTES, STREAM_INDEX_SUFFIX, STREAM_INDEX_VERSION,
    STREAM_ORDER_FILE, SWAP_SUFFIX, TIME_INDEX_ENTRY_BYTES, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX,
};
use super::format::{
    CLEANER_CHECKPOINT_FILE, CLEAN_SHUTDOWN_FILE, DAEMON_LOG_FILE, DELETING_SUFFIX,
    DYNAMIC_BROKER_CONFIG_FILE, GROUP_CONFIG_FILE, KPFS_TOPICS_DIR, LEADER_EPOCH_CHECKPOINT_FILE,
    LOCK_FILE, LOG_START_CHECKPOINT_FILE, MAX_SEGMENT_FILE_BYTES, META_PROPERTIES_FILE,
    PARTITION_METADATA_FILE, PRODUCER_ID_BLOCK_FILE, RECOVERY_CHECKPOINT_FILE, RENDERINGS_FILE,
    TMP_SUFFIX, TOPIC_CONFIG_FILE,
};
use super::metadata_files::parse_meta_properties;
use super::partition::validate_renderings;
use super::producer_state::{decode_snapshot, ProducerStateEntry};
use super::stream_index::{
    decode_entry as decode_stream_entry, decode_header as decode_stream_header, StreamEntry,
};
use super::topic_partition::TopicPartition;
use super::txn_index::{decode_entries, RawAbortedTxn};
use super::validate_topic_name;

/// What `dump_file` prints, after `kafka-dump-log.sh`'s flags of the same names.
#[derive(Clone, Debug, Default)]
pub struct DumpOptions {
    /// `--print-data-log`: one line per record, with its key and value.
    pub(crate) print_data_log: bool,
    /// `--deep-iteration`: one line per record, without key and value unless
    /// `print_data_log` is set too (as in Kafka).
    pub(crate) deep_iteration: bool,
    /// `--offsets-decoder`: records are `__consumer_offsets`'s, printed decoded (implies
    /// `print_data_log`, as in Kafka).
    pub(crate) offsets_decoder: bool,
    /// `--index-sanity-check`: check index entries against the segment's `.log`.
    pub(crate) index_sanity_check: bool,
    /// `--verify-index-only`: check index entries against the log, printing none.
    pub(crate) verify_index_only: bool,
    /// `--max-bytes`: only the batches that end within this many bytes of a `.log`'s
    /// start (the whole file when `None`).
    pub(crate) max_bytes: Option<u32>,
    /// `--max-message-size`: how far past an index entry's position its batch may end
    /// ([`DEFAULT_MAX_MESSAGE_SIZE`] when `None`).
    pub(crate) max_message_size: Option<u32>,
}

/// Why `dump_file` failed. Every variant names the file.
#[derive(Debug)]
pub enum DumpError {
    /// Reading the file, or writing the output, failed.
    Io {
        path: PathBuf,
        what: &'static str,
        source: io::Error,
    },
    /// A `.log` or index file whose name does not start with a 20-digit base offset: its
    /// offsets cannot be told.
    BadFileName { path: PathBuf },
    /// A `.log` holds bytes that do not decode as batches from `position` on; recovery
    /// would truncate the segment there.
    InvalidBatch {
        path: PathBuf,
        position: u64,
        invalid_bytes: u64,
        reason: String,
    },
    /// The index sanity check found problems (each one was printed).
    IndexCheckFailed { path: PathBuf, problems: usize },
    /// A producer-state snapshot that Kafka would refuse, with Kafka's reason.
    Corrupt { path: PathBuf, reason: String },
    /// A file on which Kafka's tool stops with an exception: its message. Kafka's tool
    /// dumps no further file and prints none of its findings then, and neither does
    /// `kpfs dump-log`.
    Refused { path: PathBuf, reason: String },
}

impl DumpError {
    /// Whether the dump must stop here, as Kafka's tool does on an exception.
    pub fn stops_the_dump(&self) -> bool {
        matches!(self, DumpError::Refused { .. })
    }
}

impl fmt::Display for DumpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DumpError::Io { path, what, source } => {
                write!(f, "{}: {what}: {source}", path.display())
            }
            DumpError::BadFileName { path } => write!(
                f,
                "{}: cannot tell the base offset: segment file names start with a \
                 {OFFSET_DIGITS}-digit offset, e.g. 00000000000000000000.log",
                path.display()
            ),
            DumpError::InvalidBatch {
                path,
                position,
                invalid_bytes,
                reason,
            } => write!(
                f,
                "{}: {invalid_bytes} invalid bytes at position {position}: {reason}",
                path.display()
            ),
            DumpError::Corrupt { path, reason } | DumpError::Refused { path, reason } => {
                write!(f, "{}: {reason}", path.display())
            }
            DumpError::IndexCheckFailed { path, problems } => write!(
                f,
                "{}: index sanity check found {problems} problem(s)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for DumpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DumpError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The kinds of file named after an offset: a segment's files (the transaction index only
/// once the segment holds an abort), Kafka's producer-state snapshot (partition directory)
/// and kpfs's stream index (the topic's kpfs folder).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Log,
    OffsetIndex,
    TimeIndex,
    TxnIndex,
    ProducerSnapshot,
    StreamIndex,
}

impl Kind {
    const ALL: [Kind; 6] = [
        Kind::Log,
        Kind::OffsetIndex,
        Kind::TimeIndex,
        Kind::TxnIndex,
        Kind::ProducerSnapshot,
        Kind::StreamIndex,
    ];

    fn suffix(self) -> &'static str {
        match self {
            Kind::Log => LOG_SUFFIX,
            Kind::OffsetIndex => INDEX_SUFFIX,
            Kind::TimeIndex => TIME_INDEX_SUFFIX,
            Kind::TxnIndex => TXN_INDEX_SUFFIX,
            Kind::ProducerSnapshot => SNAPSHOT_SUFFIX,
            Kind::StreamIndex => STREAM_INDEX_SUFFIX,
        }
    }
}

/// Splits `.log.deleted` into (`.log`, `.deleted`); a plain suffix has an empty temp part.
fn split_temp_suffix(suffix: &str) -> (&str, &str) {
    for temp in [DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX] {
        if let Some(kind) = suffix.strip_suffix(temp) {
            return (kind, temp);
        }
    }
    (suffix, "")
}

fn kind_of_suffix(suffix: &str) -> Option<Kind> {
    Kind::ALL.into_iter().find(|k| k.suffix() == suffix)
}

/// A segment file name taken apart: `<base><kind suffix><temp suffix>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SegmentName<'a> {
    base: u64,
    kind: Kind,
    temp: &'a str,
}

fn parse_name(name: &str) -> Option<SegmentName<'_>> {
    let (base, suffix) = parse_segment_file_name(name)?;
    let (kind, temp) = split_temp_suffix(suffix);
    Some(SegmentName {
        base,
        kind: kind_of_suffix(kind)?,
        temp,
    })
}

/// A batch walk that remembers where it is, for matching index entries (which come in
/// file order) against the batches.
struct BatchCursor<'f> {
    walker: BatchWalker<'f>,
    current: Step,
    /// Next offset after the last batch passed or current (the segment base before any).
    next_offset: u64,
    /// An earlier walk found an invalid batch right at this walk's end.
    ends_at_invalid: bool,
}

impl<'f> BatchCursor<'f> {
    fn new(walker: BatchWalker<'f>, base_offset: u64) -> io::Result<Self> {
        let mut cursor = BatchCursor {
            walker,
            current: Step::End,
            next_offset: base_offset,
            ends_at_invalid: false,
        };
        cursor.advance()?;
        Ok(cursor)
    }

    fn advance(&mut self) -> io::Result<()> {
        self.current = self.walker.next_step()?;
        if let Step::Batch { header, .. } = &self.current {
            self.next_offset = header.next_offset();
        }
        Ok(())
    }

    /// Moves to the first batch starting at or after `pos`.
    fn seek_position(&mut self, pos: u64) -> io::Result<()> {
        while let Step::Batch { pos: at, .. } = self.current {
            if at >= pos {
                break;
            }
            self.advance()?;
        }
        Ok(())
    }

    /// Moves to the first batch whose last offset is at or above `offset`.
    fn seek_offset(&mut self, offset: u64) -> io::Result<()> {
        while let Step::Batch { header, .. } = &self.current {
            if header.last_offset() >= offset {
                break;
            }
            self.advance()?;
        }
        Ok(())
    }
}

/// Reads the fixed-size entries of an index file in order without loading the file.
struct EntryReader {
    reader: BufReader<File>,
    width: usize,
    entries: u64,
    read: u64,
}

impl EntryReader {
    fn new(file: File, len: u64, width: usize) -> Self {
        EntryReader {
            reader: BufReader::with_capacity(64 * 1024, file),
            width,
            entries: len / width as u64,
            read: 0,
        }
    }

    /// The next entry and the byte position it starts at.
    fn next_entry(&mut self) -> io::Result<Option<(u64, [u8; TIME_INDEX_ENTRY_BYTES])>> {
        if self.read == self.entries {
            return Ok(None);
        }
        let mut e = [0u8; TIME_INDEX_ENTRY_BYTES];
        self.reader.read_exact(&mut e[..self.width])?;
        let at = self.read * self.width as u64;
        self.read += 1;
        Ok(Some((at, e)))
    }
}

/// One output of a stream index walk.
enum IndexLine {
    /// The entry as `kpfs dump-log` prints it.
    Entry(String),
    /// A problem, worded with the byte position of the entry.
    Problem(String),
}

/// Checks an index file entry by entry, for `kpfs check`: the entries among themselves
/// and against the segment's batches, as the engine would load them, up to the zero tail
/// (which must stay zero).
struct IndexWalk<'a, 'f> {
    kind: Kind,
    base: u64,
    log: &'a mut BatchCursor<'f>,
}

impl IndexWalk<'_, '_> {
    /// The problems found, each worded with the byte position of its entry.
    fn run(mut self, file: File, len: u64) -> io::Result<Vec<String>> {
        let width = match self.kind {
            Kind::TimeIndex => TIME_INDEX_ENTRY_BYTES,
            _ => OFFSET_INDEX_ENTRY_BYTES,
        };
        let mut problems = Vec::new();
        let mut reader = EntryReader::new(file, len, width);
        // Previous entry: (key, offset); the key is the position or the timestamp.
        let mut previous: Option<(i64, u64)> = None;
        let mut tail_at: Option<u64> = None;
        while let Some((at, e)) = reader.next_entry()? {
            let e = &e[..width];
            if let Some(tail) = tail_at {
                if e.iter().any(|&b| b != 0) {
                    problems.push(format!(
                        "byte {at}: non-zero entry after the zero tail that starts at byte {tail}; \
                         the engine never reads it"
                    ));
                    break;
                }
                continue;
            }
            // kpfs never indexes position 0 and never writes a zero timestamp entry, so
            // an all-zero entry is the unused, preallocated rest of the file.
            if e.iter().all(|&b| b == 0) {
                tail_at = Some(at);
                continue;
            }
            let findings = match self.kind {
                Kind::TimeIndex => {
                    let (ts, rel) = (be_i64(e, 0), be_u32(e, 8));
                    let offset = self.base.saturating_add(u64::from(rel));
                    let findings = self.check_time_entry(at, ts, offset, previous)?;
                    previous = Some((ts, offset));
                    findings
                }
                _ => {
                    let (rel, position) = (be_u32(e, 0), be_u32(e, 4));
                    let offset = self.base.saturating_add(u64::from(rel));
                    let findings = self.check_offset_entry(at, offset, position, previous)?;
                    previous = Some((i64::from(position), offset));
                    findings
                }
            };
            problems.extend(findings);
        }
        if !len.is_multiple_of(width as u64) {
            problems.push(format!(
                "byte {}: file length {len} is not a whole number of {width}-byte entries; \
                 the engine ignores the last {} bytes",
                len / width as u64 * width as u64,
                len % width as u64
            ));
        }
        Ok(problems)
    }

    fn check_offset_entry(
        &mut self,
        at: u64,
        offset: u64,
        position: u32,
        previous: Option<(i64, u64)>,
    ) -> io::Result<Vec<String>> {
        let mut findings = Vec::new();
        if position == 0 {
            findings.push(format!(
                "byte {at}: Index offset {offset} points to position 0, which is never indexed \
                 (the segment's first batch); the engine stops reading the index here"
            ));
        }
        if let Some((_, prev_offset)) = previous.filter(|&(_, o)| offset <= o) {
            findings.push(format!(
                "byte {at}: Index offset {offset} does not increase (previous entry: {prev_offset}); \
                 the engine ignores the index from here on"
            ));
        }
        if let Some((prev_pos, _)) = previous.filter(|&(p, _)| i64::from(position) <= p) {
            findings.push(format!(
                "byte {at}: Index offset {offset} points to position {position}, not after \
                 the previous entry's position {prev_pos}"
            ));
            // The batch cursor only moves forward; this entry cannot be matched.
            return Ok(findings);
        }
        let log = &mut *self.log;
        let position = u64::from(position);
        log.seek_position(position)?;
        match &log.current {
            Step::Batch { pos, header } if *pos == position => {
                if header.last_offset() != offset {
                    findings.push(format!(
                        "byte {at}: Index offset {offset} points to position {position}, \
                         batch there has last offset {}",
                        header.last_offset()
                    ));
                }
            }
            Step::Batch { .. } => findings.push(format!(
                "byte {at}: Index offset {offset} points to position {position}, \
                 which is not the start of a batch"
            )),
            Step::Invalid { pos, .. } if position < *pos => findings.push(format!(
                "byte {at}: Index offset {offset} points to position {position}, \
                 which is not the start of a batch"
            )),
            Step::Invalid { pos, .. } => findings.push(format!(
                "byte {at}: Index offset {offset} points to position {position}, at or past \
                 the first invalid batch at position {pos} of the log"
            )),
            Step::End if log.ends_at_invalid => findings.push(format!(
                "byte {at}: Index offset {offset} points to position {position}, at or past \
                 the first invalid batch at position {} of the log",
                log.walker.end()
            )),
            Step::End => findings.push(format!(
                "byte {at}: Index offset {offset} points to position {position}, past the \
                 end of the log data ({} bytes)",
                log.walker.end()
            )),
        }
        Ok(findings)
    }

    fn check_time_entry(
        &mut self,
        at: u64,
        timestamp: i64,
        offset: u64,
        previous: Option<(i64, u64)>,
    ) -> io::Result<Vec<String>> {
        let mut findings = Vec::new();
        if let Some((prev_ts, _)) = previous.filter(|&(t, _)| timestamp <= t) {
            findings.push(format!(
                "byte {at}: Time index timestamp {timestamp} does not increase (previous entry: \
                 {prev_ts}); the engine ignores the index from here on"
            ));
        }
        if let Some((_, prev_offset)) = previous.filter(|&(_, o)| offset < o) {
            findings.push(format!(
                "byte {at}: Time index offset {offset} is below the previous entry's offset \
                 {prev_offset}; the engine ignores the index from here on"
            ));
            // The batch cursor only moves forward; this entry cannot be matched.
            return Ok(findings);
        }
        let log = &mut *self.log;
        log.seek_offset(offset)?;
        match &log.current {
            Step::Batch { pos, header } if header.base_offset <= offset => {
                // The entry records the segment's largest timestamp so far and the batch
                // that holds it (Kafka's dump checks the same).
                if header.max_timestamp != timestamp {
                    findings.push(format!(
                        "byte {at}: Time index timestamp {timestamp} for offset {offset}, but the \
                         batch holding that offset (position {pos}) has max timestamp {}",
                        header.max_timestamp
                    ));
                }
            }
            Step::Batch { pos, header } => findings.push(format!(
                "byte {at}: Time index offset {offset} is in no batch (the next batch, at \
                 position {pos}, starts at offset {})",
                header.base_offset
            )),
            Step::Invalid { pos, .. } => findings.push(format!(
                "byte {at}: Time index offset {offset} is past the valid data of the log, \
                 which ends at the invalid batch at position {pos}"
            )),
            Step::End if log.ends_at_invalid => findings.push(format!(
                "byte {at}: Time index offset {offset} is past the valid data of the log, \
                 which ends at the invalid batch at position {}",
                log.walker.end()
            )),
            Step::End => findings.push(format!(
                "byte {at}: Time index offset {offset} is past the end of the log, whose \
                 next offset is {}",
                log.next_offset
            )),
        }
        Ok(findings)
    }
}

/// Prints one file as `kafka-dump-log.sh --files` does: a `.log`, `.index`, `.timeindex`,
/// `.txnindex` or producer-state `.snapshot` of a partition directory, or kpfs's own
/// `.stream` index (its entries, for debugging). Temporary suffixes (`.deleted`,
/// `.cleaned`, `.swap`) are looked through. Any other file is reported as ignored.
/// Returns an error, after printing what it found, when a file has bytes that do not
/// decode or a requested index check finds problems.
///
/// What Kafka's tool prints to stderr after its last file (index mismatches, offset gaps)
/// is collected in `findings`, for [`DumpFindings::print`] after the last file.
pub fn dump_file(
    path: &Path,
    opts: &DumpOptions,
    out: &mut impl Write,
    findings: &mut DumpFindings,
) -> Result<(), DumpError> {
    let io_err = |what| io_failure(path, what);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (_, temp) = split_temp_suffix(&name);
    let stem = &name[..name.len() - temp.len()];
    let kind = Kind::ALL.into_iter().find(|k| stem.ends_with(k.suffix()));
    let file = File::open(path).map_err(io_err("open"))?;
    let meta = file.metadata().map_err(io_err("stat"))?;
    if !meta.is_file() {
        return Err(DumpError::Io {
            path: path.to_path_buf(),
            what: "open",
            source: io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"),
        });
    }
    writeln!(out, "Dumping {}", path.display()).map_err(io_err("write output"))?;
    let Some(kind) = kind else {
        writeln!(out, "Ignoring unknown file {}", path.display())
            .map_err(io_err("write output"))?;
        return Ok(());
    };
    let Some(seg) = parse_name(&name).filter(|s| s.kind == kind) else {
        return Err(DumpError::BadFileName {
            path: path.to_path_buf(),
        });
    };
    let len = meta.len();
    match kind {
        Kind::Log => dump_log(path, &file, len, seg.base, opts, out, findings),
        Kind::OffsetIndex | Kind::TimeIndex => dump_index(path, seg, opts, out, findings),
        Kind::TxnIndex => dump_txn_index(path, &file, len, out),
        Kind::ProducerSnapshot => dump_producer_snapshot(path, &file, len, out),
        Kind::StreamIndex => dump_stream_index(path, &file, len, seg, opts, out),
    }
}

fn dump_log(
    path: &Path,
    file: &File,
    len: u64,
    base: u64,
    opts: &DumpOptions,
    out: &mut impl Write,
    findings: &mut DumpFindings,
) -> Result<(), DumpError> {
    let read_err = |source| DumpError::Io {
        path: path.to_path_buf(),
        what: "read",
        source,
    };
    let write_err = |source| DumpError::Io {
        path: path.to_path_buf(),
        what: "write output",
        source,
    };
    writeln!(out, "Log starting offset: {base}").map_err(write_err)?;
    // Kafka's `isDeepIteration`: `--print-data-log` implies it.
    let deep = opts.deep_iteration || opts.print_data_log || opts.offsets_decoder;
    // Kafka's `--max-bytes` slices the file: the batches that end within it, and no word
    // on what follows.
    let end = opts.max_bytes.map_or(len, |max| len.min(u64::from(max)));
    let mut walker = BatchWalker::new(file, end, base, true);
    // Kafka's gap check starts from -1 in every file, so a segment not at offset 0
    // reports "-1 is followed by <base>".
    let mut previous_offset = -1i64;
    loop {
        match walker.next_step().map_err(read_err)? {
            Step::End => return Ok(()),
            Step::Invalid { .. } if end < len => return Ok(()),
            Step::Invalid { pos, reason } => {
                let invalid_bytes = len - pos;
                if is_zero_from(file, pos, len).map_err(read_err)? {
                    writeln!(
                        out,
                        "Found {invalid_bytes} zero bytes at position {pos}: preallocated space \
                         of an active segment (preallocate=true), not data"
                    )
                    .map_err(write_err)?;
                    return Ok(());
                }
                // Kafka prints a batch whose framing holds whatever its CRC says
                // (`isvalid: false`); kpfs's recovery cuts the segment there, so the dump
                // stops there too.
                if let Some((header, crc_ok)) = framed_batch_at(file, pos, len).map_err(read_err)? {
                    writeln!(out, "{}", batch_line(pos, &header, crc_ok)).map_err(write_err)?;
                }
                let name = path.file_name().unwrap_or_default().to_string_lossy();
                writeln!(
                    out,
                    "Found {invalid_bytes} invalid bytes at the end of {name} (position {pos}: \
                     {reason})"
                )
                .map_err(write_err)?;
                return Err(DumpError::InvalidBatch {
                    path: path.to_path_buf(),
                    position: pos,
                    invalid_bytes,
                    reason,
                });
            }
            Step::Batch { pos, header } => {
                writeln!(out, "{}", batch_line(pos, &header, true)).map_err(write_err)?;
                if deep {
                    // The walker verified every record of the batch already.
                    let mut scratch = Vec::new();
                    let section = records_section(&header, walker.batch_bytes(), &mut scratch)
                        .unwrap_or_default();
                    for record in RecordIter::new(&header, section).filter_map(Result::ok) {
                        let offset = i64::try_from(record.offset).unwrap_or(i64::MAX);
                        findings.note_record(path, previous_offset, offset);
                        previous_offset = offset;
                        let line = record_line(&header, &record, opts);
                        writeln!(out, "{line}").map_err(write_err)?;
                    }
                }
            }
        }
    }
}

/// The header of the batch at `pos` when its framing holds (it decodes and fits before
/// `len`), and whether its CRC32C matches (Kafka's `isValid`).
fn framed_batch_at(file: &File, pos: u64, len: u64) -> io::Result<Option<(BatchHeader, bool)>> {
    let mut head = [0u8; BATCH_HEADER_BYTES];
    if len - pos < BATCH_HEADER_BYTES as u64 {
        return Ok(None);
    }
    file.read_exact_at(&mut head, pos)?;
    let Ok(header) = decode_header(&head) else {
        return Ok(None);
    };
    if header.size as u64 > len - pos {
        return Ok(None);
    }
    let mut batch = vec![0u8; header.size];
    file.read_exact_at(&mut batch, pos)?;
    Ok(Some((header, batch_crc(&batch) == header.crc)))
}

/// Whether the bytes of `file` from `pos` to `len` are the rest of a `.log` that
/// `preallocate` grew to the segment size (or blocks a crash left unwritten): zeros, and
/// at least a batch header of them, which no batch's bytes start with (its size field is
/// not zero), so a torn batch is never mistaken for them.
fn is_zero_from(file: &File, mut pos: u64, len: u64) -> io::Result<bool> {
    if len - pos < BATCH_HEADER_BYTES as u64 {
        return Ok(false);
    }
    let mut buf = vec![0u8; 1 << 16];
    while pos < len {
        let n = (len - pos).min(buf.len() as u64) as usize;
        file.read_exact_at(&mut buf[..n], pos)?;
        if buf[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        pos += n as u64;
    }
    Ok(true)
}

/// Kafka's `TimestampType` name, as `DumpLogSegments` prints it before a timestamp.
fn timestamp_type(h: &BatchHeader) -> &'static str {
    if h.is_log_append_time() {
        "LogAppendTime"
    } else {
        "CreateTime"
    }
}

/// `DumpLogSegments.printBatchLevel` for a v2 batch, field for field: `crc` is the
/// unsigned CRC32C, `compresscodec` Kafka's `CompressionType.name`, `isvalid` whether the
/// CRC matches.
fn batch_line(pos: u64, h: &BatchHeader, crc_ok: bool) -> String {
    let horizon = match h.delete_horizon_ms() {
        Some(ms) => format!("OptionalLong[{ms}]"),
        None => "OptionalLong.empty".to_string(),
    };
    let codec = CompressionCodec::from_attribute_bits(h.attributes)
        .map_or_else(|e| e.to_string(), |c| c.name().to_string());
    format!(
        "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {} \
         producerId: {} producerEpoch: {} partitionLeaderEpoch: {} isTransactional: {} \
         isControl: {} deleteHorizonMs: {horizon} position: {pos} {}: {} size: {} \
         magic: {BATCH_MAGIC} compresscodec: {codec} crc: {} isvalid: {crc_ok}",
        h.base_offset,
        h.last_offset(),
        h.record_count,
        h.base_sequence,
        h.last_sequence(),
        h.producer_id,
        h.producer_epoch,
        h.partition_leader_epoch,
        h.is_transactional(),
        h.is_control(),
        timestamp_type(h),
        h.max_timestamp,
        h.size,
        h.crc,
    )
}

/// `DumpLogSegments.dumpLog`'s line for one record of a v2 batch. With `print_data`,
/// the key and payload as UTF-8 (Kafka's `StringDecoder`), none for a control batch.
fn record_line(h: &BatchHeader, r: &RecordRef<'_>, opts: &DumpOptions) -> String {
    // With LogAppendTime every record carries the batch's time (Kafka's `RecordIterator`).
    let timestamp = if h.is_log_append_time() {
        h.max_timestamp
    } else {
        r.timestamp
    };
    let offset_delta = u32::try_from(r.offset - h.base_offset).unwrap_or(u32::MAX);
    let header_keys: Vec<String> = r
        .header_fields()
        .map(|(key, _)| String::from_utf8_lossy(key).into_owned())
        .collect();
    let mut line = format!(
        "| offset: {} {}: {timestamp} keySize: {} valueSize: {} sequence: {} headerKeys: [{}]",
        r.offset,
        timestamp_type(h),
        field_len(r.key),
        field_len(r.value),
        sequence_at(h.base_sequence, offset_delta),
        header_keys.join(","),
    );
    if h.is_control() {
        line.push_str(&control_record_text(r));
    } else if opts.offsets_decoder {
        let (key, payload) = super::groups::dump_offsets_record(r.key, r.value, r.offset);
        line.push_str(" key: ");
        line.push_str(&key);
        if let Some(payload) = payload {
            line.push_str(" payload: ");
            line.push_str(&payload);
        }
    } else if opts.print_data_log {
        if let Some(key) = r.key {
            line.push_str(" key: ");
            line.push_str(&String::from_utf8_lossy(key));
        }
        if let Some(value) = r.value {
            line.push_str(" payload: ");
            line.push_str(&String::from_utf8_lossy(value));
        }
    }
    line
}

/// What Kafka prints after a control record: the transaction marker of a commit or
/// abort (`EndTransactionMarker`: key = version i16, type i16; value = version i16,
/// coordinator epoch i32), else the control type (Kafka prints KRaft's snapshot and voter
/// records as JSON; kpfs, which never holds them, names their type).
fn control_record_text(r: &RecordRef<'_>) -> String {
    const TYPES: [&str; 7] = [
        "ABORT",
        "COMMIT",
        "LEADER_CHANGE",
        "SNAPSHOT_HEADER",
        "SNAPSHOT_FOOTER",
        "KRAFT_VERSION",
        "KRAFT_VOTERS",
    ];
    if let Some(marker) = EndTxnMarker::of(r) {
        let name = if marker.commit { "COMMIT" } else { "ABORT" };
        return format!(
            " endTxnMarker: {name} coordinatorEpoch: {}",
            marker.coordinator_epoch
        );
    }
    let Some(type_id) = EndTxnMarker::control_type(r) else {
        return " controlType: UNKNOWN(-1)".to_string();
    };
    let name = usize::try_from(type_id)
        .ok()
        .and_then(|i| TYPES.get(i))
        .copied()
        .unwrap_or("UNKNOWN");
    format!(" controlType: {name}({type_id})")
}

/// The file of `kind` an index is checked against: the same directory and base offset,
/// with the index's temporary suffix if that file exists, else the plain name (the one
/// Kafka's tool opens).
fn sibling(index_path: &Path, seg: SegmentName<'_>, kind: Kind) -> PathBuf {
    let dir = index_path.parent().unwrap_or(Path::new("."));
    let plain = segment_file_name(seg.base, kind.suffix());
    let temp = dir.join(format!("{plain}{}", seg.temp));
    if !seg.temp.is_empty() && temp.is_file() {
        temp
    } else {
        dir.join(plain)
    }
}

/// An `.index` or `.timeindex` as `DumpLogSegments.dumpIndex` and `dumpTimeIndex` print
/// it, with their checks against the segment's `.log` (the findings go to `findings`).
fn dump_index(
    path: &Path,
    seg: SegmentName<'_>,
    opts: &DumpOptions,
    out: &mut impl Write,
    findings: &mut DumpFindings,
) -> Result<(), DumpError> {
    let mode = IndexDumpMode {
        sanity_only: opts.index_sanity_check,
        verify_only: opts.verify_index_only,
        max_message_size: opts.max_message_size.unwrap_or(DEFAULT_MAX_MESSAGE_SIZE),
    };
    let log = sibling(path, seg, Kind::Log);
    let result = match seg.kind {
        Kind::TimeIndex => {
            let offset_index = sibling(path, seg, Kind::OffsetIndex);
            dump_time_index(path, seg.base, &log, &offset_index, mode, out, findings)
        }
        _ => dump_offset_index(path, seg.base, &log, mode, out, findings),
    };
    result.map_err(|e| match e {
        KafkaRefusal::Io(source) => DumpError::Io {
            path: path.to_path_buf(),
            what: "read or write",
            source,
        },
        KafkaRefusal::Refused(reason) => DumpError::Refused {
            path: path.to_path_buf(),
            reason,
        },
    })
}

/// What a walk of a stream index found.
#[derive(Debug, Default)]
struct StreamIndexSummary {
    /// The segment's stream start, when the header is valid.
    stream_start: Option<u64>,
    /// Entries that the engine loads (up to the first one it drops).
    entries: usize,
    /// The stream position of the last entry the engine loads.
    last_stream_pos: Option<u64>,
    problems: usize,
}

/// Walks a stream index's bytes (`<base>.stream`, FORMAT.md) as the engine loads them:
/// the header, then entries up to the first that fails its CRC, does not follow the one
/// before or points past the log. With `log`, each entry's `.log` position must also be
/// the start of a batch holding its offset, which the engine trusts without checking.
fn walk_stream_index(
    bytes: &[u8],
    base: u64,
    mut log: Option<&mut BatchCursor<'_>>,
    sink: &mut dyn FnMut(IndexLine) -> io::Result<()>,
) -> io::Result<StreamIndexSummary> {
    fn problem(
        summary: &mut StreamIndexSummary,
        sink: &mut dyn FnMut(IndexLine) -> io::Result<()>,
        text: String,
    ) -> io::Result<()> {
        summary.problems += 1;
        sink(IndexLine::Problem(text))
    }
    let mut summary = StreamIndexSummary::default();
    let Some(stream_start) = decode_stream_header(bytes) else {
        problem(
            &mut summary,
            sink,
            format!(
                "byte 0: not a valid {STREAM_INDEX_HEADER_BYTES}-byte stream index header \
                 (magic, version {STREAM_INDEX_VERSION}, CRC32C); the next open rebuilds the \
                 index from the log, starting the segment's stream where the previous one ends"
            ),
        )?;
        return Ok(summary);
    };
    summary.stream_start = Some(stream_start);
    sink(IndexLine::Entry(format!("streamStart: {stream_start}")))?;
    let body = &bytes[STREAM_INDEX_HEADER_BYTES..];
    let dropped = "the next open drops it and the entries after it, and derives their \
                   records' stream positions from the records again";
    let mut previous: Option<StreamEntry> = None;
    for (i, raw) in body.chunks_exact(STREAM_INDEX_ENTRY_BYTES).enumerate() {
        let at = STREAM_INDEX_HEADER_BYTES + i * STREAM_INDEX_ENTRY_BYTES;
        let Some(e) = decode_stream_entry(raw, base) else {
            let text = format!(
                "byte {at}: entry fails its CRC32C or holds an impossible position; {dropped}"
            );
            problem(&mut summary, sink, text)?;
            return Ok(summary);
        };
        let separator = e
            .shape
            .separator_len
            .map_or_else(|| "none".to_string(), |s| s.to_string());
        sink(IndexLine::Entry(format!(
            "offset: {} position: {} streamPosition: {} keySeparatorBytes: {separator} \
             nullMarkerBytes: {}",
            e.offset, e.file_pos, e.stream_pos, e.shape.null_len
        )))?;
        let out_of_order = match previous {
            None if e.stream_pos < stream_start => Some(format!(
                "stream position {} is below the segment's stream start {stream_start}",
                e.stream_pos
            )),
            Some(p) if e.offset <= p.offset || e.file_pos < p.file_pos => Some(format!(
                "offset {} at position {} does not follow the previous entry's offset {} at \
                 position {}",
                e.offset, e.file_pos, p.offset, p.file_pos
            )),
            Some(p) if e.stream_pos < p.stream_pos => Some(format!(
                "stream position {} is below the previous entry's {}",
                e.stream_pos, p.stream_pos
            )),
            _ => None,
        };
        if let Some(why) = out_of_order {
            problem(&mut summary, sink, format!("byte {at}: {why}; {dropped}"))?;
            return Ok(summary);
        }
        if let Some(log) = log.as_deref_mut() {
            let position = u64::from(e.file_pos);
            if position >= log.walker.end() {
                let text = format!(
                    "byte {at}: offset {} points to position {position}, past the log's valid \
                     data ({} bytes); {dropped}",
                    e.offset,
                    log.walker.end()
                );
                problem(&mut summary, sink, text)?;
                return Ok(summary);
            }
            log.seek_position(position)?;
            let holds = match &log.current {
                Step::Batch { pos, header } if *pos == position => {
                    (header.base_offset..=header.last_offset()).contains(&e.offset)
                }
                _ => false,
            };
            if !holds {
                let text = format!(
                    "byte {at}: offset {} points to position {position}, which is not the \
                     start of the batch holding that offset; `cat log` would place the \
                     records from this offset at wrong stream positions",
                    e.offset
                );
                problem(&mut summary, sink, text)?;
            }
        }
        summary.entries += 1;
        summary.last_stream_pos = Some(e.stream_pos);
        previous = Some(e);
    }
    let torn = body.len() % STREAM_INDEX_ENTRY_BYTES;
    if torn != 0 {
        let text = format!(
            "byte {}: {torn} bytes of a torn last entry (a crash mid-append); the next open \
             cuts them",
            bytes.len() - torn
        );
        problem(&mut summary, sink, text)?;
    }
    Ok(summary)
}

/// The `.log` of the segment whose stream index is `stream_path`: in the partition
/// directory named like the index's kpfs folder (`DATA/kpfs-topics/T-0/<base>.stream` ->
/// `DATA/T-0/<base>.log`), with the index's temporary suffix if that file exists.
fn log_of_stream_index(stream_path: &Path, seg: SegmentName<'_>) -> Option<PathBuf> {
    // A bare file name has no parent to climb from.
    let stream_path = fs::canonicalize(stream_path).ok()?;
    let folder = stream_path.parent()?;
    let data_dir = folder.parent()?.parent()?;
    let partition = data_dir.join(folder.file_name()?);
    let plain = segment_file_name(seg.base, LOG_SUFFIX);
    [format!("{plain}{}", seg.temp), plain]
        .into_iter()
        .map(|n| partition.join(n))
        .find(|p| p.is_file())
}

fn dump_stream_index(
    path: &Path,
    file: &File,
    len: u64,
    seg: SegmentName<'_>,
    opts: &DumpOptions,
    out: &mut impl Write,
) -> Result<(), DumpError> {
    let io_err = |what| io_failure(path, what);
    let bytes = read_whole(file, len).map_err(io_err("read"))?;
    let check = opts.index_sanity_check || opts.verify_index_only;
    let log_file = match check.then(|| log_of_stream_index(path, seg)).flatten() {
        Some(p) => Some(File::open(&p).map_err(io_err("open the segment's .log"))?),
        None => None,
    };
    let mut cursor = match &log_file {
        Some(f) => {
            let log_len = f
                .metadata()
                .map_err(io_err("stat the segment's .log"))?
                .len();
            let walker = BatchWalker::new(f, log_len, seg.base, true);
            Some(BatchCursor::new(walker, seg.base).map_err(io_err("read the segment's .log"))?)
        }
        None => None,
    };
    if check && cursor.is_none() {
        writeln!(
            out,
            "{}: no {} in the partition directory; checking the entries among themselves only",
            path.display(),
            segment_file_name(seg.base, LOG_SUFFIX)
        )
        .map_err(io_err("write output"))?;
    }
    let mut write_failed: Option<io::Error> = None;
    let mut sink = |line: IndexLine| -> io::Result<()> {
        let text = match line {
            IndexLine::Entry(_) if check => return Ok(()),
            IndexLine::Entry(t) => t,
            IndexLine::Problem(t) => format!("{}: {t}", path.display()),
        };
        writeln!(out, "{text}").inspect_err(|e| {
            write_failed = Some(io::Error::new(e.kind(), e.to_string()));
        })
    };
    let result = walk_stream_index(&bytes, seg.base, cursor.as_mut(), &mut sink);
    if let Some(e) = write_failed {
        return Err(io_err("write output")(e));
    }
    let summary = result.map_err(io_err("read the segment's .log"))?;
    if summary.problems > 0 {
        writeln!(
            out,
            "{} failed sanity check: {} problem(s) in {} entries.",
            path.display(),
            summary.problems,
            summary.entries
        )
        .map_err(io_err("write output"))?;
        return Err(DumpError::IndexCheckFailed {
            path: path.to_path_buf(),
            problems: summary.problems,
        });
    }
    if opts.index_sanity_check {
        writeln!(out, "{} passed sanity check.", path.display()).map_err(io_err("write output"))?;
    }
    Ok(())
}

/// An I/O failure on `path` while doing `what`, for `map_err`.
fn io_failure(path: &Path, what: &'static str) -> impl FnOnce(io::Error) -> DumpError {
    let path = path.to_path_buf();
    move |source| DumpError::Io { path, what, source }
}

/// A whole file (a stream index or producer snapshot: small), `len` bytes as its
/// metadata said.
fn read_whole(file: &File, len: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    let mut reader = file;
    reader.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// `DumpLogSegments.dumpProducerIdSnapshot`'s line for one producer: the batch fields
/// only when the producer has a last batch (`lastOffset >= 0`), as Kafka 4.3.1 prints
/// them (with no space after the timestamp when there is none, which the tool's Scala
/// version left).
fn producer_snapshot_line(e: &ProducerStateEntry) -> String {
    let txn_first = if e.current_txn_first_offset >= 0 {
        format!("OptionalLong[{}]", e.current_txn_first_offset)
    } else {
        "OptionalLong.empty".to_string()
    };
    let mut line = format!(
        "producerId: {} producerEpoch: {} coordinatorEpoch: {} currentTxnFirstOffset: \
         {txn_first} lastTimestamp: {}",
        e.producer_id, e.producer_epoch, e.coordinator_epoch, e.timestamp
    );
    if e.last_offset >= 0 {
        // Kafka's `DefaultRecordBatch.decrementSequence`: sequences wrap at i32::MAX.
        let first_sequence = if e.last_sequence < e.offset_delta {
            i32::MAX - (e.offset_delta - e.last_sequence) + 1
        } else {
            e.last_sequence - e.offset_delta
        };
        line.push_str(&format!(
            " firstSequence: {first_sequence} lastSequence: {} lastOffset: {} offsetDelta: {} \
             timestamp: {}",
            e.last_sequence, e.last_offset, e.offset_delta, e.timestamp
        ));
    }
    line
}

fn dump_producer_snapshot(
    path: &Path,
    file: &File,
    len: u64,
    out: &mut impl Write,
) -> Result<(), DumpError> {
    let io_err = |what| io_failure(path, what);
    let bytes = read_whole(file, len).map_err(io_err("read"))?;
    match decode_snapshot(&bytes) {
        Ok(entries) => {
            for e in &entries {
                writeln!(out, "{}", producer_snapshot_line(e)).map_err(io_err("write output"))?;
            }
            Ok(())
        }
        Err(reason) => {
            writeln!(out, "{reason}").map_err(io_err("write output"))?;
            Err(DumpError::Corrupt {
                path: path.to_path_buf(),
                reason: reason.to_string(),
            })
        }
    }
}

/// `DumpLogSegments.dumpTxnIndex`: a line per aborted transaction, its fields as the file
/// holds them. Kafka reads every entry before it prints one (`allAbortedTxns`), so an
/// entry its reader refuses (a version above 0) stops the dump with no line of the file;
/// a torn last entry is not read. Kafka prints an entry whose last offset is below the
/// segment, which its loader would take for corrupt (`sanityCheck`), as any other.
fn dump_txn_index(
    path: &Path,
    file: &File,
    len: u64,
    out: &mut impl Write,
) -> Result<(), DumpError> {
    let io_err = |what| io_failure(path, what);
    let bytes = read_whole(file, len).map_err(io_err("read"))?;
    // Kafka's message names the file by its absolute path.
    let absolute = PathBuf::from(java_absolute_path(path));
    let mut lines = Vec::with_capacity(bytes.len() / ABORTED_TXN_BYTES);
    for entry in bytes.chunks_exact(ABORTED_TXN_BYTES) {
        let e = RawAbortedTxn::read(entry);
        if let Some(reason) = e.version_refusal(&absolute) {
            return Err(DumpError::Refused {
                path: path.to_path_buf(),
                reason,
            });
        }
        lines.push(format!(
            "version: {} producerId: {} firstOffset: {} lastOffset: {} lastStableOffset: {}",
            e.version, e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset
        ));
    }
    for line in lines {
        writeln!(out, "{line}").map_err(io_err("write output"))?;
    }
    Ok(())
}

/// What `check_data_dir` found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Damage or inconsistencies: data the next open would cut, or files it would refuse.
    /// Each names the file and, where there is one, the byte position (or line).
    pub problems: Vec<String>,
    /// States that are normal while a kpfs runs, or that the next open repairs by design
    /// (leftover temporary files, a missing clean-shutdown marker, a held lock).
    pub notes: Vec<String>,
    pub(crate) topics: usize,
    /// Live `.log` files (temporary ones not counted).
    pub(crate) segments: usize,
    /// Records in the batches that decode.
    pub(crate) records: u64,
}

impl CheckReport {
    pub fn is_healthy(&self) -> bool {
        self.problems.is_empty()
    }

    fn problem(&mut self, path: &Path, text: impl fmt::Display) {
        self.problems.push(format!("{}: {text}", path.display()));
    }

    fn note(&mut self, path: &Path, text: impl fmt::Display) {
        self.notes.push(format!("{}: {text}", path.display()));
    }
}

/// Verifies a data directory offline without changing anything: every file is opened
/// read-only and no lock is taken, so it may run next to a mounted kpfs (whose active
/// segments may then change under it; a note says when the lock is held).
pub fn check_data_dir(dir: &Path) -> CheckReport {
    let mut report = CheckReport::default();
    let names = match sorted_entries(dir) {
        Ok(names) => names,
        Err(e) => {
            report.problem(dir, format_args!("cannot list the data directory: {e}"));
            return report;
        }
    };
    // Log end offset of each topic, for the cleaner checkpoint.
    let mut log_ends: BTreeMap<TopicPartition, u64> = BTreeMap::new();
    let mut clean_marker = false;
    let mut checkpoints: Vec<(&str, &str)> = Vec::new();
    let mut kpfs_topics: Option<PathBuf> = None;
    for entry in names {
        let path = dir.join(&entry.name);
        if entry.is_dir {
            if entry.name.ends_with(DELETING_SUFFIX) {
                report.note(
                    &path,
                    "topic deletion was interrupted; the next open removes this directory",
                );
            } else if entry.name == KPFS_TOPICS_DIR {
                kpfs_topics = Some(path);
            } else if let Some(tp) = TopicPartition::parse_dir_name(&entry.name)
                .filter(|tp| validate_topic_name(&tp.topic).is_ok())
            {
                if tp.partition == 0 {
                    report.topics += 1;
                }
                let kpfs_dir = dir.join(KPFS_TOPICS_DIR).join(&entry.name);
                let end = check_partition(&path, &kpfs_dir, &mut report);
                log_ends.insert(tp, end);
            } else {
                report.note(&path, "not a partition directory; kpfs ignores it");
            }
            continue;
        }
        match entry.name.as_str() {
            LOCK_FILE => {
                if let Some(pid) = lock_holder(&path) {
                    report.note(
                        &path,
                        format_args!(
                            "held by process {pid}: the data directory is mounted, so active \
                             segments may change while they are checked"
                        ),
                    );
                }
            }
            CLEAN_SHUTDOWN_FILE => clean_marker = true,
            // `kpfs check` refuses any other version before it gets here.
            super::upgrade::FORMAT_VERSION_FILE => {}
            // The daemon's log: plain text, nothing to verify.
            DAEMON_LOG_FILE => {}
            DYNAMIC_BROKER_CONFIG_FILE => check_settings_file(&path, &mut report, |text| {
                BrokerConfig::defaults()
                    .with_dynamic_properties(text)
                    .map(drop)
            }),
            GROUP_CONFIG_FILE => check_settings_file(&path, &mut report, |text| {
                GroupConfigs::from_properties(text).map(drop)
            }),
            META_PROPERTIES_FILE => check_settings_file(&path, &mut report, |text| {
                parse_meta_properties(&path, text).map(drop)
            }),
            CLEANER_CHECKPOINT_FILE => {
                checkpoints.push((CLEANER_CHECKPOINT_FILE, "cleaner offset"))
            }
            RECOVERY_CHECKPOINT_FILE => {
                checkpoints.push((RECOVERY_CHECKPOINT_FILE, "recovery point"))
            }
            PRODUCER_ID_BLOCK_FILE => {
                if let Err(e) = super::producer_ids::read_block_file(&path) {
                    report.problem(&path, format_args!("{e} (the next mount refuses to open)"));
                }
            }
            LOG_START_CHECKPOINT_FILE => {
                checkpoints.push((LOG_START_CHECKPOINT_FILE, "log start offset"))
            }
            name if name.ends_with(TMP_SUFFIX) => report.note(
                &path,
                "left by an interrupted config or checkpoint write; kpfs never reads it",
            ),
            _ => report.note(&path, "unknown file; kpfs ignores it"),
        }
    }
    if let Some(path) = &kpfs_topics {
        check_topics_of_partitions(dir, path, &log_ends, &mut report);
    }
    if let Some(path) = kpfs_topics {
        check_orphan_kpfs_folders(&path, &log_ends, &mut report);
    }
    if !clean_marker {
        report.note(
            &dir.join(CLEAN_SHUTDOWN_FILE),
            "absent: kpfs is mounted or did not shut down cleanly; the next open \
             recovers every segment from the topic's recovery point on (revalidates the \
             logs and rebuilds the indexes)",
        );
    }
    for (name, what) in checkpoints {
        check_offset_checkpoint(&dir.join(name), what, &log_ends, &mut report);
    }
    report
}

struct DirEntry {
    name: String,
    is_dir: bool,
}

/// Directory entries sorted by name. Non-UTF-8 names are kept lossily: kpfs never
/// creates them, so they are reported as unknown.
fn sorted_entries(dir: &Path) -> io::Result<Vec<DirEntry>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        // `file_type` does not follow symlinks, as the engine's own listing.
        let is_dir = entry.file_type()?.is_dir();
        out.push(DirEntry {
            name: entry.file_name().to_string_lossy().into_owned(),
            is_dir,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The pid holding an `flock` on `path`, from `/proc/locks`, without touching the lock
/// (taking it, even briefly, could make a concurrent mount fail).
fn lock_holder(path: &Path) -> Option<u32> {
    let meta = fs::metadata(path).ok()?;
    let dev = meta.dev();
    // glibc's gnu_dev_major/minor: /proc/locks prints the device as major:minor in hex.
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let locks = fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|line| {
        // `1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF`; waiters have `->` and hold nothing.
        if line.contains("->") {
            return None;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let at = fields.iter().position(|f| *f == "FLOCK")?;
        let pid = fields.get(at + 3)?.parse::<u32>().ok()?;
        let mut id = fields.get(at + 4)?.split(':');
        let maj = u64::from_str_radix(id.next()?, 16).ok()?;
        let min = u64::from_str_radix(id.next()?, 16).ok()?;
        let ino = id.next()?.parse::<u64>().ok()?;
        (maj == major && min == minor && ino == meta.ino()).then_some(pid)
    })
}

/// Reports a settings file that cannot be read or that `parse` refuses: opening the data
/// directory would fail on it.
fn check_settings_file<E: fmt::Display>(
    path: &Path,
    report: &mut CheckReport,
    parse: impl FnOnce(&str) -> Result<(), E>,
) {
    if let Some(Err(e)) = read_text(path, report).map(|text| parse(&text)) {
        report.problem(
            path,
            format_args!("{e} (opening the data directory fails on this)"),
        );
    }
}

/// The text of `path`, or `None` with the reason reported.
fn read_text(path: &Path, report: &mut CheckReport) -> Option<String> {
    fs::read_to_string(path)
        .map_err(|e| report.problem(path, format_args!("cannot read: {e}")))
        .ok()
}

/// Which files of one base offset a partition directory and its kpfs folder hold.
#[derive(Clone, Copy, Debug, Default)]
struct SegmentFiles {
    log: bool,
    index: bool,
    time_index: bool,
    txn_index: bool,
    stream_index: bool,
}

/// What a file with a temporary suffix is, for its note.
/// One note for a directory's `.deleted` files, which retention and the cleaner leave by
/// the dozen in a healthy data directory: a line each would bury anything worth reading.
fn note_awaiting_deletion(dir: &Path, files: usize, report: &mut CheckReport) {
    if files > 0 {
        report.note(
            dir,
            format_args!(
                "{files} file{} awaiting deletion after file.delete.delay.ms (*{DELETED_SUFFIX}); \
                 the next open removes any left",
                if files == 1 { "" } else { "s" }
            ),
        );
    }
}

fn temporary_file_note(temp: &str) -> &'static str {
    match temp {
        CLEANED_SUFFIX => "output of an unfinished clean (a crash); the next open removes it",
        _ => "segment swap interrupted by a crash; the next open completes or rolls it back",
    }
}

/// Checks one `TOPIC-0` directory and the topic's kpfs folder (`kpfs_dir`); returns the
/// log end offset the next open would find.
fn check_partition(dir: &Path, kpfs_dir: &Path, report: &mut CheckReport) -> u64 {
    let mut files: BTreeMap<u64, SegmentFiles> = BTreeMap::new();
    scan_partition_dir(dir, &mut files, report);
    scan_kpfs_folder(kpfs_dir, &mut files, report);
    let mut log_end = 0u64;
    // (path, next offset) of the previous segment, for overlaps.
    let mut previous: Option<(PathBuf, u64)> = None;
    // The previous segment's last indexed stream position: a segment's stream starts
    // after it.
    let mut previous_stream: Option<u64> = None;
    // Set once a segment has bytes that do not decode: recovery truncates there and
    // deletes every later segment, so the log would end there.
    let mut cut = false;
    let last_log = files.iter().rev().find(|(_, f)| f.log).map(|(&b, _)| b);
    for (&base, present) in &files {
        let file = |kind: Kind| dir.join(segment_file_name(base, kind.suffix()));
        let stream_path = kpfs_dir.join(segment_file_name(base, STREAM_INDEX_SUFFIX));
        if !present.log {
            for (there, path) in [
                (present.index, file(Kind::OffsetIndex)),
                (present.time_index, file(Kind::TimeIndex)),
                (present.txn_index, file(Kind::TxnIndex)),
                (present.stream_index, stream_path),
            ] {
                if there {
                    report.problem(
                        &path,
                        "orphaned index with no .log of the same base offset; the next open deletes it",
                    );
                }
            }
            continue;
        }
        report.segments += 1;
        let log_path = file(Kind::Log);
        let Some(facts) = check_log(&log_path, base, Some(base) == last_log, report) else {
            continue;
        };
        if !cut {
            log_end = facts.next_offset;
        }
        if let Some((prev_path, prev_next)) = &previous {
            if *prev_next > base {
                report.problem(
                    &log_path,
                    format_args!(
                        "position 0: base offset {base} overlaps {}, which ends at offset \
                         {prev_next} (opening the data directory fails on this)",
                        prev_path.display()
                    ),
                );
            }
        }
        previous = Some((log_path.clone(), facts.next_offset));
        cut |= facts.invalid_at.is_some();
        for (there, kind) in [
            (present.index, Kind::OffsetIndex),
            (present.time_index, Kind::TimeIndex),
        ] {
            let path = file(kind);
            if !there {
                let consequence = match kind {
                    Kind::OffsetIndex => "the next open rebuilds it from the log",
                    _ => "the next open creates it empty, so time lookups in this segment lose precision",
                };
                report.problem(&path, format_args!("missing ({consequence})"));
                continue;
            }
            check_index(&path, kind, base, &log_path, &facts, report);
        }
        // A segment without aborts has no transaction index: none is missing.
        if present.txn_index {
            check_txn_index(&file(Kind::TxnIndex), base, &facts, report);
        }
        if !present.stream_index {
            report.problem(
                &stream_path,
                "missing: the next open rebuilds it; stream positions after a compaction gap \
                 may shift",
            );
            previous_stream = None;
            continue;
        }
        let Some(stream) = check_stream_index(&stream_path, base, &log_path, &facts, report) else {
            previous_stream = None;
            continue;
        };
        if let (Some(start), Some(prev)) = (stream.stream_start, previous_stream) {
            if start < prev {
                report.problem(
                    &stream_path,
                    format_args!(
                        "byte 0: stream start {start} is below the previous segment's last \
                         indexed stream position {prev}; `cat log` would place this segment's \
                         records over earlier ones"
                    ),
                );
            }
        }
        previous_stream = stream.last_stream_pos.or(stream.stream_start);
    }
    log_end
}

/// The partition directory: segment files, Kafka's producer snapshots, leader-epoch
/// checkpoint and partition metadata.
fn scan_partition_dir(
    dir: &Path,
    files: &mut BTreeMap<u64, SegmentFiles>,
    report: &mut CheckReport,
) {
    let names = match sorted_entries(dir) {
        Ok(names) => names,
        Err(e) => {
            report.problem(dir, format_args!("cannot list: {e}"));
            return;
        }
    };
    let mut awaiting_deletion = 0;
    for entry in &names {
        let path = dir.join(&entry.name);
        if entry.is_dir {
            report.problem(&path, "unexpected directory in a partition directory");
            continue;
        }
        match entry.name.as_str() {
            LEADER_EPOCH_CHECKPOINT_FILE => {
                check_leader_epoch_checkpoint(&path, report);
                continue;
            }
            PARTITION_METADATA_FILE => {
                check_partition_metadata(&path, report);
                continue;
            }
            name if name.ends_with(TMP_SUFFIX) => {
                report.note(
                    &path,
                    "left by an interrupted checkpoint write; kpfs never reads it",
                );
                continue;
            }
            _ => {}
        }
        let seg = parse_name(&entry.name).filter(|s| s.kind != Kind::StreamIndex);
        let Some(seg) = seg else {
            report.problem(
                &path,
                format_args!(
                    "unknown file: not a segment file (<20-digit base offset>.log, .index, \
                     .timeindex or .txnindex), a producer snapshot (.snapshot), \
                     {LEADER_EPOCH_CHECKPOINT_FILE} nor {PARTITION_METADATA_FILE}"
                ),
            );
            continue;
        };
        if seg.temp == DELETED_SUFFIX {
            awaiting_deletion += 1;
            continue;
        }
        if !seg.temp.is_empty() {
            report.note(&path, temporary_file_note(seg.temp));
            continue;
        }
        let present = files.entry(seg.base).or_default();
        match seg.kind {
            Kind::Log => present.log = true,
            Kind::OffsetIndex => present.index = true,
            Kind::TimeIndex => present.time_index = true,
            Kind::TxnIndex => present.txn_index = true,
            Kind::ProducerSnapshot => check_producer_snapshot(&path, report),
            Kind::StreamIndex => unreachable!("filtered out above"),
        }
    }
    note_awaiting_deletion(dir, awaiting_deletion, report);
}

/// The topic's kpfs folder: its config overrides and the segments' stream indexes (the
/// stream order is checked with the topic's partitions).
fn scan_kpfs_folder(dir: &Path, files: &mut BTreeMap<u64, SegmentFiles>, report: &mut CheckReport) {
    let names = match sorted_entries(dir) {
        Ok(names) => names,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            report.problem(
                dir,
                "missing: the next open creates it, with no config overrides, and rebuilds \
                 every stream index; stream positions after a compaction gap may shift",
            );
            return;
        }
        Err(e) => {
            report.problem(dir, format_args!("cannot list: {e}"));
            return;
        }
    };
    let mut awaiting_deletion = 0;
    for entry in &names {
        let path = dir.join(&entry.name);
        if entry.is_dir {
            report.problem(&path, "unexpected directory in a kpfs topic folder");
            continue;
        }
        if entry.name == TOPIC_CONFIG_FILE {
            check_settings_file(&path, report, |text| {
                TopicOverrides::from_properties(text).map(drop)
            });
            continue;
        }
        if entry.name == STREAM_ORDER_FILE {
            // The topic's, checked with its partitions (check_topics_of_partitions).
            continue;
        }
        if entry.name == RENDERINGS_FILE {
            if let Some(Err(reason)) = read_text(&path, report).map(|t| validate_renderings(&t)) {
                report.problem(
                    &path,
                    format_args!(
                        "{reason} (mount ignores the file: lines appended under an earlier \
                         rendering keep their lengths, not always their separator and null \
                         marker)"
                    ),
                );
            }
            continue;
        }
        if entry.name.ends_with(TMP_SUFFIX) {
            report.note(
                &path,
                "left by an interrupted config write; kpfs never reads it",
            );
            continue;
        }
        match parse_name(&entry.name).filter(|s| s.kind == Kind::StreamIndex) {
            Some(seg) if seg.temp.is_empty() => {
                files.entry(seg.base).or_default().stream_index = true
            }
            Some(seg) if seg.temp == DELETED_SUFFIX => awaiting_deletion += 1,
            Some(seg) => report.note(&path, temporary_file_note(seg.temp)),
            None => report.problem(
                &path,
                format_args!(
                    "unknown file: not {TOPIC_CONFIG_FILE}, {RENDERINGS_FILE}, \
                     {STREAM_ORDER_FILE} nor a stream index (<20-digit base offset>.stream)"
                ),
            ),
        }
    }
    note_awaiting_deletion(dir, awaiting_deletion, report);
}

/// What makes the partitions of each topic one topic: partitions `0..n` with no gap (the
/// mount opens no partition after a missing one), and for a topic of several, the order
/// of their records in its `log` (`kpfs-topics/TOPIC-0/stream-order`).
fn check_topics_of_partitions(
    data_dir: &Path,
    kpfs_topics: &Path,
    partitions: &BTreeMap<TopicPartition, u64>,
    report: &mut CheckReport,
) {
    let mut counts: BTreeMap<&str, (u32, Vec<u32>)> = BTreeMap::new();
    for tp in partitions.keys() {
        counts.entry(&tp.topic).or_default().1.push(tp.partition);
    }
    for (topic, (count, present)) in &mut counts {
        // Keys are sorted, so a topic's partitions are in order.
        *count = present
            .iter()
            .enumerate()
            .take_while(|&(i, &p)| i as u32 == p)
            .count() as u32;
        for &p in present.iter().skip(*count as usize) {
            report.problem(
                &data_dir.join(TopicPartition::new(topic, p).dir_name()),
                format_args!(
                    "partition {count} of {topic} is missing, and a topic's partitions are \
                     0..n: the mount does not open this one"
                ),
            );
        }
        let order = kpfs_topics
            .join(TopicPartition::new(topic, 0).dir_name())
            .join(STREAM_ORDER_FILE);
        match (std::fs::read(&order), *count) {
            (Err(e), 2..) if e.kind() == io::ErrorKind::NotFound => report.problem(
                &order,
                "missing for a topic of several partitions: the mount places every \
                 partition's records after partition 0's, so positions in the topic's log \
                 change",
            ),
            (Err(e), 2..) => report.problem(&order, format_args!("cannot read: {e}")),
            (Err(_), _) => {}
            (Ok(_), 0..=1) => report.problem(
                &order,
                "a topic of one partition has no stream order (its log is its partition's); \
                 the mount rewrites it when partitions are added",
            ),
            (Ok(bytes), count) => match super::stream_order::check_file(&bytes, count) {
                Err(reason) => report.problem(
                    &order,
                    format_args!(
                        "{reason}: the mount ignores it and places every partition's records \
                         after partition 0's, so positions in the topic's log change"
                    ),
                ),
                Ok(Some(note)) => report.note(&order, note),
                Ok(None) => {}
            },
        }
    }
}

/// Folders of `kpfs-topics/` whose partition directory is gone.
fn check_orphan_kpfs_folders(
    dir: &Path,
    partitions: &BTreeMap<TopicPartition, u64>,
    report: &mut CheckReport,
) {
    let names = match sorted_entries(dir) {
        Ok(names) => names,
        Err(e) => {
            report.problem(dir, format_args!("cannot list: {e}"));
            return;
        }
    };
    for entry in names {
        let path = dir.join(&entry.name);
        let tp = TopicPartition::parse_dir_name(&entry.name);
        if !entry.is_dir {
            report.problem(
                &path,
                "unknown file: kpfs-topics holds one folder per partition",
            );
        } else if !tp.is_some_and(|tp| partitions.contains_key(&tp)) {
            report.problem(
                &path,
                format_args!(
                    "kpfs folder of a topic without a partition directory ({}); nothing reads \
                     it, and a topic created under this name would start with its config \
                     overrides",
                    entry.name
                ),
            );
        }
    }
}

/// What the walk of one `.log` found.
struct LogFacts {
    /// Bytes of batches that decode, from the start.
    valid_bytes: u64,
    invalid_at: Option<u64>,
    /// Next offset after the last batch that decodes (the base offset if none does).
    next_offset: u64,
    /// The transaction markers among those batches by offset, with their producer ids.
    txn_markers: BTreeMap<u64, (i64, EndTxnMarker)>,
}

/// `last`: the partition's last segment, the only one a live or crashed mount leaves
/// preallocated (zeros after its data).
fn check_log(path: &Path, base: u64, last: bool, report: &mut CheckReport) -> Option<LogFacts> {
    let opened = File::open(path).and_then(|f| {
        let len = f.metadata()?.len();
        Ok((f, len))
    });
    let (file, len) = match opened {
        Ok(x) => x,
        Err(e) => {
            report.problem(path, format_args!("cannot read: {e}"));
            return None;
        }
    };
    if len > MAX_SEGMENT_FILE_BYTES {
        report.problem(
            path,
            format_args!(
                "{len} bytes: larger than {MAX_SEGMENT_FILE_BYTES}, so index positions cannot address it"
            ),
        );
    }
    let mut walker = BatchWalker::new(&file, len, base, true);
    let mut facts = LogFacts {
        valid_bytes: 0,
        invalid_at: None,
        next_offset: base,
        txn_markers: BTreeMap::new(),
    };
    loop {
        match walker.next_step() {
            Ok(Step::Batch { pos, header }) => {
                report.records += u64::from(header.record_count);
                facts.next_offset = header.next_offset();
                facts.valid_bytes = pos + header.size as u64;
                if let Some(marker) = EndTxnMarker::of_batch(&header, walker.batch_bytes()) {
                    facts
                        .txn_markers
                        .insert(header.base_offset, (header.producer_id, marker));
                }
            }
            Ok(Step::End) => break,
            Ok(Step::Invalid { pos, .. })
                if last && is_zero_from(&file, pos, len).unwrap_or(false) =>
            {
                report.note(
                    path,
                    format_args!(
                        "position {pos}: {} zero bytes after the last batch: the preallocated \
                         space of an active segment (preallocate=true); a clean unmount trims \
                         it, the next open after a crash cuts it",
                        len - pos
                    ),
                );
                break;
            }
            Ok(Step::Invalid { pos, reason }) => {
                report.problem(
                    path,
                    format_args!(
                        "position {pos}: {reason}; the {} bytes from here on do not decode \
                         (recovery truncates the segment here and deletes every later segment)",
                        len - pos
                    ),
                );
                facts.invalid_at = Some(pos);
                break;
            }
            Err(e) => {
                report.problem(
                    path,
                    format_args!("position {}: cannot read: {e}", walker.position()),
                );
                facts.invalid_at = Some(walker.position());
                break;
            }
        }
    }
    Some(facts)
}

fn check_index(
    path: &Path,
    kind: Kind,
    base: u64,
    log_path: &Path,
    facts: &LogFacts,
    report: &mut CheckReport,
) {
    let opened = File::open(path)
        .and_then(|f| Ok((f.metadata()?.len(), f)))
        .and_then(|(len, index)| Ok((len, index, File::open(log_path)?)));
    let (len, index, log) = match opened {
        Ok(x) => x,
        Err(e) => {
            report.problem(path, format_args!("cannot read: {e}"));
            return;
        }
    };
    // The log was verified already: walking its valid prefix needs only the headers.
    let walker = BatchWalker::new(&log, facts.valid_bytes, base, false);
    let mut cursor = match BatchCursor::new(walker, base) {
        Ok(mut c) => {
            c.ends_at_invalid = facts.invalid_at.is_some();
            c
        }
        Err(e) => {
            report.problem(log_path, format_args!("cannot read: {e}"));
            return;
        }
    };
    let walk = IndexWalk {
        kind,
        base,
        log: &mut cursor,
    };
    match walk.run(index, len) {
        Ok(problems) => {
            for text in problems {
                report.problem(path, text);
            }
        }
        Err(e) => report.problem(path, format_args!("cannot read: {e}")),
    }
}

/// Checks a segment's transaction index as the engine loads it ([`decode_entries`]: what
/// Kafka's reader and `sanityCheck` refuse, and entries out of marker order), then each
/// entry against the segment's verified batches: the ABORT marker that wrote it must be
/// there, at its last offset, from its producer. Readers trust the entries: `log` hides,
/// and a read_committed fetch lists as aborted, the producer's transactional batches in
/// the entry's range, whatever the markers say.
fn check_txn_index(path: &Path, base: u64, facts: &LogFacts, report: &mut CheckReport) {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) => {
            report.problem(path, format_args!("cannot read: {e}"));
            return;
        }
    };
    let entries = match decode_entries(&bytes, path, base) {
        Ok(entries) => entries,
        Err(corrupt) => {
            report.problem(
                path,
                format_args!(
                    "byte {}: {}; the next open recovers the segment, rebuilding the index \
                     from its markers",
                    corrupt.at, corrupt.reason
                ),
            );
            return;
        }
    };
    for (i, txn) in entries.iter().enumerate() {
        let last = txn.last_offset;
        let found = match facts.txn_markers.get(&last) {
            Some(&(pid, marker)) if pid == txn.producer_id && !marker.commit => continue,
            Some(&(pid, marker)) => format!(
                "offset {last} holds producer {pid}'s {} marker",
                if marker.commit { "COMMIT" } else { "ABORT" }
            ),
            None if last >= facts.next_offset => format!(
                "offset {last} is past the segment's batches, which end before offset {}",
                facts.next_offset
            ),
            None => format!("offset {last} holds no transaction marker"),
        };
        report.problem(
            path,
            format_args!(
                "byte {}: the aborted transaction of producer {} from offset {} to {last}: \
                 {found}, not its ABORT marker; readers take the producer's transactional \
                 records in that range for aborted",
                i * ABORTED_TXN_BYTES,
                txn.producer_id,
                txn.first_offset
            ),
        );
    }
    let torn = bytes.len() % ABORTED_TXN_BYTES;
    if torn != 0 {
        report.problem(
            path,
            format_args!(
                "byte {}: {torn} bytes of a torn last entry (a crash mid-append); the engine \
                 ignores them and writes its next entry over them",
                bytes.len() - torn
            ),
        );
    }
}

/// Checks a segment's stream index against its verified `.log`.
fn check_stream_index(
    path: &Path,
    base: u64,
    log_path: &Path,
    facts: &LogFacts,
    report: &mut CheckReport,
) -> Option<StreamIndexSummary> {
    let opened = File::open(path)
        .and_then(|f| {
            let len = f.metadata()?.len();
            read_whole(&f, len)
        })
        .and_then(|bytes| Ok((bytes, File::open(log_path)?)));
    let (bytes, log) = match opened {
        Ok(x) => x,
        Err(e) => {
            report.problem(path, format_args!("cannot read: {e}"));
            return None;
        }
    };
    // The log was verified already: walking its valid prefix needs only the headers.
    let walker = BatchWalker::new(&log, facts.valid_bytes, base, false);
    let mut cursor = match BatchCursor::new(walker, base) {
        Ok(c) => c,
        Err(e) => {
            report.problem(log_path, format_args!("cannot read: {e}"));
            return None;
        }
    };
    let mut problems = Vec::new();
    let result = walk_stream_index(&bytes, base, Some(&mut cursor), &mut |line| {
        if let IndexLine::Problem(text) = line {
            problems.push(text);
        }
        Ok(())
    });
    for text in problems {
        report.problem(path, text);
    }
    match result {
        Ok(summary) => Some(summary),
        Err(e) => {
            report.problem(log_path, format_args!("cannot read: {e}"));
            None
        }
    }
}

fn check_producer_snapshot(path: &Path, report: &mut CheckReport) {
    match fs::read(path) {
        Ok(bytes) => {
            if let Err(reason) = decode_snapshot(&bytes) {
                report.problem(
                    path,
                    format_args!("{reason} (the next open deletes it, as Kafka does)"),
                );
            }
        }
        Err(e) => report.problem(path, format_args!("cannot read: {e}")),
    }
}

/// Kafka's `LeaderEpochCheckpointFile`: `0`, the entry count, then `epoch startOffset`
/// lines, both increasing.
fn check_leader_epoch_checkpoint(path: &Path, report: &mut CheckReport) {
    let Some(text) = read_text(path, report) else {
        return;
    };
    let mut lines = text.lines();
    if lines.next() != Some("0") {
        report.problem(path, "line 1: version is not 0 (Kafka refuses the file)");
        return;
    }
    let count = lines.next().and_then(|c| c.trim().parse::<usize>().ok());
    let mut previous: Option<(i32, i64)> = None;
    let mut entries = 0;
    for (i, line) in lines.enumerate() {
        let n = i + 3;
        entries += 1;
        let fields: Vec<&str> = line.split_whitespace().collect();
        let parsed = match fields[..] {
            [epoch, offset] => epoch.parse::<i32>().ok().zip(offset.parse::<i64>().ok()),
            _ => None,
        };
        let Some((epoch, offset)) = parsed else {
            report.problem(
                path,
                format_args!("line {n}: {line:?} is not `<epoch> <start offset>`"),
            );
            return;
        };
        if let Some((prev_epoch, prev_offset)) = previous {
            if epoch <= prev_epoch || offset < prev_offset {
                report.problem(
                    path,
                    format_args!(
                        "line {n}: epoch {epoch} from offset {offset} does not follow epoch \
                         {prev_epoch} from offset {prev_offset}"
                    ),
                );
            }
        }
        previous = Some((epoch, offset));
    }
    if count != Some(entries) {
        report.problem(
            path,
            format_args!("line 2: the entry count is not {entries}, the number of entries"),
        );
    }
}

/// Kafka's `PartitionMetadataFile`: `version: 0` and `topic_id: <id>`, the id a UUID in
/// Kafka's text form (22 characters of URL-safe base64).
fn check_partition_metadata(path: &Path, report: &mut CheckReport) {
    let Some(text) = read_text(path, report) else {
        return;
    };
    let mut lines = text.lines();
    if lines.next() != Some("version: 0") {
        report.problem(path, "line 1 is not `version: 0` (Kafka refuses the file)");
        return;
    }
    let id = lines.next().and_then(|l| l.strip_prefix("topic_id: "));
    let is_uuid = id.is_some_and(|id| {
        id.len() == 22
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    });
    if !is_uuid {
        report.problem(
            path,
            "line 2 is not `topic_id: <22-character topic id>` (Kafka refuses the file)",
        );
    }
}

/// `0\n<count>\n<topic> 0 <offset>` lines, as Kafka's `OffsetCheckpointFile`.
/// One of Kafka's offset checkpoint files; `what` names its offsets in reports.
fn check_offset_checkpoint(
    path: &Path,
    what: &str,
    log_ends: &BTreeMap<TopicPartition, u64>,
    report: &mut CheckReport,
) {
    let Some(text) = read_text(path, report) else {
        return;
    };
    let mut lines = text.lines();
    match lines.next() {
        Some("0") => {}
        other => {
            report.problem(
                path,
                format_args!(
                    "line 1: version {:?}, expected \"0\"; kpfs ignores the file's entries",
                    other.unwrap_or("")
                ),
            );
            return;
        }
    }
    let count = match lines.next().map(|c| c.parse::<usize>()) {
        Some(Ok(n)) => Some(n),
        other => {
            report.problem(
                path,
                format_args!("line 2: entry count {other:?} is not a number"),
            );
            None
        }
    };
    let mut seen = BTreeSet::new();
    let mut entries = 0usize;
    for (i, line) in lines.enumerate() {
        let n = i + 3;
        entries += 1;
        let parts: Vec<&str> = line.split(' ').collect();
        let [topic, partition, offset] = parts[..] else {
            report.problem(
                path,
                format_args!(
                    "line {n}: {line:?} is not `<topic> <partition> <offset>`; kpfs ignores it"
                ),
            );
            continue;
        };
        let Ok(partition) = partition.parse::<u32>() else {
            report.problem(
                path,
                format_args!(
                    "line {n}: partition {partition:?} is not a number; kpfs ignores the entry"
                ),
            );
            continue;
        };
        let tp = TopicPartition::new(topic, partition);
        let Ok(offset) = offset.parse::<u64>() else {
            report.problem(
                path,
                format_args!("line {n}: offset {offset:?} is not a number; kpfs ignores the entry"),
            );
            continue;
        };
        if !seen.insert(tp.clone()) {
            report.problem(path, format_args!("line {n}: partition {tp} listed twice"));
        }
        match log_ends.get(&tp) {
            None => report.problem(
                path,
                format_args!("line {n}: partition {tp} does not exist"),
            ),
            Some(&end) if offset > end => report.problem(
                path,
                format_args!(
                    "line {n}: {what} {offset} of partition {tp} is beyond its log end offset {end}"
                ),
            ),
            Some(_) => {}
        }
    }
    if let Some(count) = count.filter(|&c| c != entries) {
        report.problem(
            path,
            format_args!("line 2: announces {count} entries, the file has {entries}"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::format::{
        decode_header, BatchBuilder, ClientBatch, SNAPSHOT_CRC_AT, SNAPSHOT_ENTRIES_AT,
        SNAPSHOT_VERSION,
    };
    use crate::engine::log::TxnMarkerWrite;
    use crate::engine::{Engine, ManualClock};
    use std::sync::Arc;

    const T0: i64 = 1_764_430_000_000;

    fn open(dir: &Path, clock: &Arc<ManualClock>) -> Engine {
        Engine::open_for_test(dir, clock.clone())
    }

    /// Topic `orders` over several 300-byte segments, every batch but a segment's first
    /// indexed, one second between appends.
    fn fill(engine: &Engine, clock: &ManualClock) {
        let t = engine.create_topic("orders", 1).unwrap();
        t.update_config(b"internal.segment.bytes=330\nindex.interval.bytes=0")
            .unwrap();
        for i in 0..12 {
            clock.advance(1000);
            t.append_lines(format!("order-{i}-a\norder-{i}-b\n").as_bytes())
                .unwrap();
        }
    }

    fn build() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let engine = open(dir.path(), &clock);
        fill(&engine, &clock);
        engine.shutdown().unwrap();
        dir
    }

    /// The kpfs folder of `orders`.
    fn kpfs_folder(dir: &Path) -> PathBuf {
        dir.join(KPFS_TOPICS_DIR).join("orders-0")
    }

    /// Live files of `orders` with `suffix`, oldest first (stream indexes from its kpfs
    /// folder).
    fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
        let part = if suffix == STREAM_INDEX_SUFFIX {
            kpfs_folder(dir)
        } else {
            dir.join("orders-0")
        };
        let mut out: Vec<PathBuf> = fs::read_dir(&part)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let name = p.file_name().unwrap().to_str().unwrap();
                parse_segment_file_name(name).is_some_and(|(_, s)| s == suffix)
            })
            .collect();
        out.sort();
        out
    }

    fn healthy(report: &CheckReport) {
        assert!(report.is_healthy(), "{:#?}", report.problems);
    }

    /// The problems mentioning `file`, which must exist.
    fn problems_about(report: &CheckReport, file: &Path) -> Vec<String> {
        let name = file.file_name().unwrap().to_str().unwrap();
        let found: Vec<String> = report
            .problems
            .iter()
            .filter(|p| p.contains(name))
            .cloned()
            .collect();
        assert!(
            !found.is_empty(),
            "no problem names {name}: {:#?}",
            report.problems
        );
        found
    }

    /// What `kpfs dump-log PATH` prints, stdout then stderr (its findings), and its result.
    fn dump(path: &Path, opts: &DumpOptions) -> (String, Result<(), DumpError>) {
        let mut out = Vec::new();
        let mut findings = DumpFindings::default();
        let result = dump_file(path, opts, &mut out, &mut findings);
        findings.print(&mut out).unwrap();
        (String::from_utf8(out).unwrap(), result)
    }

    /// Every file under `dir` with its bytes and length.
    fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut out = BTreeMap::new();
        let mut todo = vec![dir.to_path_buf()];
        while let Some(d) = todo.pop() {
            for e in fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    todo.push(p);
                } else {
                    out.insert(p.clone(), fs::read(&p).unwrap());
                }
            }
        }
        out
    }

    fn set_u32(path: &Path, at: usize, value: u32) {
        let mut bytes = fs::read(path).unwrap();
        bytes[at..at + 4].copy_from_slice(&value.to_be_bytes());
        fs::write(path, bytes).unwrap();
    }

    /// A topic of three partitions: healthy as kpfs leaves it; a torn tail of its stream
    /// order is a note, a missing or unreadable order and a partition after a missing
    /// one are problems.
    #[test]
    fn the_partitions_of_a_topic_are_checked_as_one_topic() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let engine = open(dir.path(), &clock);
        let topic = engine.create_topic("wide", 3).unwrap();
        for p in [2, 0, 1, 2] {
            topic.append_lines_after(Some(p), b"", b"a\nb\n").unwrap();
        }
        drop(topic);
        engine.shutdown().unwrap();
        let report = check_data_dir(dir.path());
        healthy(&report);
        assert_eq!(report.topics, 1);
        assert_eq!(report.records, 8);

        let order = dir
            .path()
            .join(KPFS_TOPICS_DIR)
            .join("wide-0")
            .join(STREAM_ORDER_FILE);
        let bytes = fs::read(&order).unwrap();
        fs::write(&order, &bytes[..bytes.len() - 5]).unwrap();
        let report = check_data_dir(dir.path());
        healthy(&report);
        assert!(
            report
                .notes
                .iter()
                .any(|n| n.contains("27 bytes after run 3 are not runs")),
            "{:#?}",
            report.notes
        );
        fs::write(&order, b"KPSO").unwrap();
        let problems = problems_about(&check_data_dir(dir.path()), &order);
        assert!(problems[0].contains("the mount ignores it"), "{problems:?}");
        fs::remove_file(&order).unwrap();
        let problems = problems_about(&check_data_dir(dir.path()), &order);
        assert!(
            problems[0].contains("missing for a topic of several partitions"),
            "{problems:?}"
        );

        fs::rename(dir.path().join("wide-1"), dir.path().join("elsewhere")).unwrap();
        let problems = problems_about(&check_data_dir(dir.path()), &dir.path().join("wide-2"));
        assert!(
            problems[0]
                .contains("partition 1 of wide is missing, and a topic's partitions are 0..n"),
            "{problems:?}"
        );
    }

    #[test]
    fn a_cleanly_closed_directory_is_healthy() {
        let dir = build();
        fs::write(dir.path().join(DAEMON_LOG_FILE), b"INFO closed cleanly\n").unwrap();
        let report = check_data_dir(dir.path());
        healthy(&report);
        assert!(report.notes.is_empty(), "{:#?}", report.notes);
        assert_eq!(report.topics, 1);
        assert!(report.segments >= 3, "{report:?}");
        assert_eq!(report.segments, files(dir.path(), LOG_SUFFIX).len());
        assert_eq!(report.records, 24);
        let index = &files(dir.path(), INDEX_SUFFIX)[0];
        assert!(
            fs::metadata(index).unwrap().len() > 0,
            "the test indexes batches"
        );
    }

    #[test]
    fn the_producer_id_block_file_is_checked() {
        let dir = build();
        let engine = open(dir.path(), &Arc::new(ManualClock::new(T0)));
        engine.init_producer_id().unwrap();
        engine.shutdown().unwrap();
        drop(engine);
        let report = check_data_dir(dir.path());
        healthy(&report);
        assert!(report.notes.is_empty(), "{:#?}", report.notes);
        fs::write(dir.path().join(PRODUCER_ID_BLOCK_FILE), "0\nlots\n").unwrap();
        let report = check_data_dir(dir.path());
        assert_eq!(report.problems.len(), 1, "{:#?}", report.problems);
        assert!(
            format!("{:?}", report.problems[0]).contains("not a producer id block file"),
            "{:#?}",
            report.problems
        );
    }

    #[test]
    fn a_crashed_directory_is_healthy_with_notes_and_check_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let engine = open(dir.path(), &clock);
        fill(&engine, &clock);
        // Mounted: the lock is held, the active indexes are preallocated, no marker.
        let before = snapshot(dir.path());
        let report = check_data_dir(dir.path());
        assert_eq!(before, snapshot(dir.path()));
        healthy(&report);
        assert!(report.notes.iter().any(|n| n.contains(CLEAN_SHUTDOWN_FILE)));
        if fs::read_to_string("/proc/locks").is_ok() {
            let pid = std::process::id().to_string();
            assert!(
                report
                    .notes
                    .iter()
                    .any(|n| n.contains(LOCK_FILE) && n.contains(&pid)),
                "{:#?}",
                report.notes
            );
        }
        drop(engine);
        healthy(&check_data_dir(dir.path()));
    }

    #[test]
    fn a_flipped_byte_is_reported_with_file_and_position() {
        let dir = build();
        let log = &files(dir.path(), LOG_SUFFIX)[1];
        let mut bytes = fs::read(log).unwrap();
        bytes[BATCH_HEADER_BYTES + 3] ^= 0x10;
        fs::write(log, &bytes).unwrap();
        let before = snapshot(dir.path());
        let report = check_data_dir(dir.path());
        assert_eq!(before, snapshot(dir.path()), "check never writes");
        let found = problems_about(&report, log);
        assert!(
            found.iter().any(|p| p.contains("position 0: CRC mismatch")),
            "{found:#?}"
        );
        // Dumping the same file prints the batch as Kafka does (its framing holds, its
        // CRC does not) and stops at the same place, with an error.
        let (out, result) = dump(log, &DumpOptions::default());
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[2].starts_with("baseOffset: ") && lines[2].ends_with(" isvalid: false"),
            "{out}"
        );
        let name = log.file_name().unwrap().to_str().unwrap();
        assert!(
            lines[3].starts_with(&format!(
                "Found {} invalid bytes at the end of {name} (position 0: CRC mismatch",
                bytes.len()
            )),
            "{out}"
        );
        assert!(matches!(
            result,
            Err(DumpError::InvalidBatch { position: 0, .. })
        ));
    }

    #[test]
    fn a_truncated_log_is_reported() {
        let dir = build();
        let log = files(dir.path(), LOG_SUFFIX)[0].clone();
        let len = fs::metadata(&log).unwrap().len();
        File::options()
            .write(true)
            .open(&log)
            .unwrap()
            .set_len(len - 5)
            .unwrap();
        let report = check_data_dir(dir.path());
        let found = problems_about(&report, &log);
        assert!(
            found.iter().any(|p| p.contains("truncated batch")),
            "{found:#?}"
        );
        // The index entry of the torn batch now points into bytes that do not decode.
        let index = &files(dir.path(), INDEX_SUFFIX)[0];
        let index_problems = problems_about(&report, index);
        assert!(
            index_problems
                .iter()
                .any(|p| p.contains("first invalid batch")),
            "{index_problems:#?}"
        );
    }

    #[test]
    fn bad_names_missing_and_orphaned_indexes_are_reported() {
        let dir = build();
        let time_index = files(dir.path(), TIME_INDEX_SUFFIX)[1].clone();
        let renamed = time_index.with_file_name("00000000000000000000.timeidx");
        fs::rename(&time_index, &renamed).unwrap();
        let index = files(dir.path(), INDEX_SUFFIX)[0].clone();
        fs::remove_file(&index).unwrap();
        let log = files(dir.path(), LOG_SUFFIX)[2].clone();
        let orphan = log.with_file_name(segment_file_name(999_999, INDEX_SUFFIX));
        fs::write(&orphan, b"").unwrap();
        let report = check_data_dir(dir.path());
        assert!(problems_about(&report, &renamed)[0].contains("unknown file"));
        assert!(problems_about(&report, &time_index)[0].contains("missing"));
        assert!(problems_about(&report, &index)[0].contains("missing"));
        assert!(problems_about(&report, &orphan)[0].contains("orphaned"));
        assert_eq!(report.problems.len(), 4, "{:#?}", report.problems);
    }

    #[test]
    fn index_entries_that_do_not_match_the_log_are_reported() {
        let dir = build();
        let index = files(dir.path(), INDEX_SUFFIX)[0].clone();
        let log = files(dir.path(), LOG_SUFFIX)[0].clone();
        let entries = fs::read(&index).unwrap();
        assert!(entries.len() >= 16, "needs two entries");
        let first_pos = be_u32(&entries, 4);
        // Entry 1 claims the offset of entry 0's batch + 7 at entry 0's position + 1.
        set_u32(&index, 4, first_pos + 1);
        let report = check_data_dir(dir.path());
        let found = problems_about(&report, &index);
        assert!(
            found.iter().any(|p| p.contains("byte 0: Index offset")
                && p.contains(&format!(
                    "position {}, which is not the start of a batch",
                    first_pos + 1
                ))),
            "{found:#?}"
        );
        set_u32(&index, 4, first_pos);
        set_u32(&index, 0, be_u32(&entries, 0) + 1);
        let found = problems_about(&check_data_dir(dir.path()), &index);
        assert!(
            found
                .iter()
                .any(|p| p.contains("batch there has last offset")),
            "{found:#?}"
        );
        // The same through dump-log's verification, which reports it after the last file
        // as Kafka's tool does (on stderr) and, as Kafka's, does not fail.
        let opts = DumpOptions {
            verify_index_only: true,
            ..Default::default()
        };
        let (out, result) = dump(&index, &opts);
        result.unwrap();
        let wrong = be_u32(&entries, 0) + 1;
        assert_eq!(
            out,
            format!(
                "Dumping {shown}\nMismatches in :{shown}\n  Index offset: {wrong}, log offset: {}\n",
                wrong - 1,
                shown = index.display()
            )
        );
        assert!(log.exists());
    }

    #[test]
    fn a_time_index_that_goes_back_in_time_is_reported() {
        let dir = build();
        let time_index = files(dir.path(), TIME_INDEX_SUFFIX)[0].clone();
        let mut bytes = fs::read(&time_index).unwrap();
        assert!(bytes.len() >= 24, "needs two entries");
        // Entry 1 gets entry 0's timestamp minus one.
        let ts = be_i64(&bytes, 0) - 1;
        bytes[12..20].copy_from_slice(&ts.to_be_bytes());
        fs::write(&time_index, &bytes).unwrap();
        let found = problems_about(&check_data_dir(dir.path()), &time_index);
        assert!(
            found
                .iter()
                .any(|p| p.contains("byte 12: Time index timestamp")
                    && p.contains("does not increase")),
            "{found:#?}"
        );
        assert!(
            found.iter().any(|p| p.contains("has max timestamp")),
            "{found:#?}"
        );
    }

    #[test]
    fn configs_and_the_cleaner_checkpoint_are_checked() {
        let dir = build();
        let ckpt = dir.path().join(CLEANER_CHECKPOINT_FILE);
        fs::write(&ckpt, "0\n3\norders 0 5\nghost 0 1\norders 0 999\n").unwrap();
        let props = kpfs_folder(dir.path()).join(TOPIC_CONFIG_FILE);
        fs::write(&props, "segment.bytes=lots\n").unwrap();
        let report = check_data_dir(dir.path());
        let found = problems_about(&report, &ckpt);
        assert!(found
            .iter()
            .any(|p| p.contains("line 4: partition ghost-0 does not exist")));
        assert!(found.iter().any(|p| p.contains(
            "line 5: cleaner offset 999 of partition orders-0 is beyond its log end offset 24"
        )));
        assert!(found
            .iter()
            .any(|p| p.contains("line 5: partition orders-0 listed twice")));
        assert_eq!(found.len(), 3, "{found:#?}");
        assert_eq!(problems_about(&report, &props).len(), 1);
        fs::write(&ckpt, "0\n1\norders 0 24\n").unwrap();
        fs::write(&props, "").unwrap();
        healthy(&check_data_dir(dir.path()));
    }

    /// Every settings file that opening the data directory parses is parsed by check too;
    /// one that cannot be read at all is a problem of its own.
    #[test]
    fn settings_files_that_would_stop_a_mount_are_problems() {
        let dir = build();
        let broker = dir.path().join(DYNAMIC_BROKER_CONFIG_FILE);
        let meta = dir.path().join(META_PROPERTIES_FILE);
        let props = kpfs_folder(dir.path()).join(TOPIC_CONFIG_FILE);
        let original_meta = fs::read_to_string(&meta).unwrap();
        fs::write(&broker, "log.retention.ms=soon\n").unwrap();
        fs::write(&meta, original_meta.replace("version=1", "version=0")).unwrap();
        fs::write(&props, [0xff, 0xfe]).unwrap();
        let report = check_data_dir(dir.path());
        let fails_mount = |path: &Path| {
            let found = problems_about(&report, path);
            assert_eq!(found.len(), 1, "{found:#?}");
            assert!(
                found[0].ends_with("(opening the data directory fails on this)"),
                "{found:#?}"
            );
        };
        fails_mount(&broker);
        fails_mount(&meta);
        let unreadable = problems_about(&report, &props);
        assert_eq!(unreadable.len(), 1, "{unreadable:#?}");
        assert!(unreadable[0].contains(": cannot read: "), "{unreadable:#?}");
        assert_eq!(report.problems.len(), 3, "{:#?}", report.problems);
        fs::write(&broker, "log.retention.ms=60000\n").unwrap();
        fs::write(&meta, original_meta).unwrap();
        fs::write(&props, "").unwrap();
        healthy(&check_data_dir(dir.path()));
        // The renderings file does not stop a mount, but its loss shows in `cat`.
        let renderings = kpfs_folder(dir.path()).join(RENDERINGS_FILE);
        fs::write(&renderings, "until=3 separator=3a null=6e756c6c\n").unwrap();
        healthy(&check_data_dir(dir.path()));
        fs::write(&renderings, "until=3 separator=: null=null\n").unwrap();
        let report = check_data_dir(dir.path());
        let found = problems_about(&report, &renderings);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(found[0].contains("line 1: ") && found[0].contains("(mount ignores the file"));
    }

    #[test]
    fn leftover_temporary_files_are_notes() {
        let dir = build();
        for (file, temp) in [
            (&files(dir.path(), LOG_SUFFIX)[0], DELETED_SUFFIX),
            (&files(dir.path(), INDEX_SUFFIX)[0], CLEANED_SUFFIX),
            (&files(dir.path(), TIME_INDEX_SUFFIX)[0], SWAP_SUFFIX),
        ] {
            let mut name = file.as_os_str().to_owned();
            name.push(temp);
            fs::copy(file, PathBuf::from(name)).unwrap();
        }
        fs::write(dir.path().join("orders-0").join("kpfs-topic.tmp"), b"x").unwrap();
        let report = check_data_dir(dir.path());
        healthy(&report);
        assert_eq!(report.notes.len(), 4, "{:#?}", report.notes);
    }

    #[test]
    fn a_compacted_topic_is_healthy_and_dumps_its_delete_horizons() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let engine = open(dir.path(), &clock);
        let t = engine.create_topic("cmp", 1).unwrap();
        t.update_config(
            b"cleanup.policy=compact\nsegment.ms=3000\nmin.cleanable.dirty.ratio=0.01\n\
              delete.retention.ms=60000\nparse.key=true\nkey.separator=:\nnull.marker=NULL\n\
              index.interval.bytes=0",
        )
        .unwrap();
        let mut passes = 0;
        for round in 0..4 {
            for k in ["a", "b", "c"] {
                t.append_lines(format!("{k}:round{round}-{k}\n").as_bytes())
                    .unwrap();
            }
            if round == 1 {
                t.append_lines(b"a:NULL\n").unwrap();
            }
            clock.advance(4000);
            passes += usize::from(engine.run_cleaner_once().is_some());
        }
        assert!(passes >= 2, "the cleaner ran");
        // Mounted, with replaced segments awaiting `file.delete.delay.ms`.
        let report = check_data_dir(dir.path());
        healthy(&report);
        assert!(
            report
                .notes
                .iter()
                .any(|n| n.contains("files awaiting deletion after file.delete.delay.ms")),
            "{:#?}",
            report.notes
        );
        engine.shutdown().unwrap();
        drop(engine);
        assert!(dir.path().join(CLEANER_CHECKPOINT_FILE).exists());
        healthy(&check_data_dir(dir.path()));
        let part = dir.path().join("cmp-0");
        let opts = DumpOptions {
            print_data_log: true,
            index_sanity_check: true,
            ..Default::default()
        };
        let mut horizons = 0;
        for entry in fs::read_dir(&part).unwrap() {
            let path = entry.unwrap().path();
            let (out, result) = dump(&path, &opts);
            result.unwrap();
            horizons += out.matches("deleteHorizonMs: OptionalLong[").count();
        }
        assert!(horizons > 0, "the retained tombstone's batch has a horizon");
    }

    /// `kv`: keys before `:`, `NULL` for a null key or a tombstone.
    fn keyed_log() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let engine = open(dir.path(), &clock);
        let t = engine.create_topic("kv", 1).unwrap();
        t.update_config(b"parse.key=true\nkey.separator=:\nnull.marker=NULL")
            .unwrap();
        t.append_lines(b"a:apple\nNULL:keyless\nb:NULL\n").unwrap();
        clock.advance(5);
        t.append_lines("c:\u{e9}t\u{e9}\n".as_bytes()).unwrap();
        engine.shutdown().unwrap();
        let log = dir
            .path()
            .join("kv-0")
            .join(segment_file_name(0, LOG_SUFFIX));
        (dir, log)
    }

    #[test]
    fn dump_prints_batches_and_records_as_kafka() {
        let (_dir, log) = keyed_log();
        let bytes = fs::read(&log).unwrap();
        let first = decode_header(&bytes).unwrap();
        let second = decode_header(&bytes[first.size..]).unwrap();
        let opts = DumpOptions {
            print_data_log: true,
            ..Default::default()
        };
        let (out, result) = dump(&log, &opts);
        result.unwrap();
        let expected = format!(
            "Dumping {}\n\
             Log starting offset: 0\n\
             baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: {T0} size: {} magic: 2 compresscodec: none crc: {} isvalid: true\n\
             | offset: 0 CreateTime: {T0} keySize: 1 valueSize: 5 sequence: -1 headerKeys: [] key: a payload: apple\n\
             | offset: 1 CreateTime: {T0} keySize: -1 valueSize: 7 sequence: -1 headerKeys: [] payload: keyless\n\
             | offset: 2 CreateTime: {T0} keySize: 1 valueSize: -1 sequence: -1 headerKeys: [] key: b\n\
             baseOffset: 3 lastOffset: 3 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: {} CreateTime: {} size: {} magic: 2 compresscodec: none crc: {} isvalid: true\n\
             | offset: 3 CreateTime: {} keySize: 1 valueSize: 5 sequence: -1 headerKeys: [] key: c payload: \u{e9}t\u{e9}\n",
            log.display(),
            first.size,
            first.crc,
            first.size,
            T0 + 5,
            second.size,
            second.crc,
            T0 + 5,
        );
        assert_eq!(out, expected);

        // Without flags only batch lines; --deep-iteration alone omits keys and values.
        let (plain, _) = dump(&log, &DumpOptions::default());
        assert_eq!(plain.lines().count(), 4);
        assert!(!plain.contains("| offset"));
        let deep = DumpOptions {
            deep_iteration: true,
            ..Default::default()
        };
        let (deep_out, _) = dump(&log, &deep);
        assert!(deep_out.contains(&format!(
            "| offset: 0 CreateTime: {T0} keySize: 1 valueSize: 5 sequence: -1 headerKeys: []\n"
        )));
        assert!(!deep_out.contains("payload:"));
    }

    #[test]
    fn dump_prints_indexes_and_checks_them() {
        let dir = build();
        let index = files(dir.path(), INDEX_SUFFIX)[0].clone();
        let time_index = files(dir.path(), TIME_INDEX_SUFFIX)[0].clone();
        let log = files(dir.path(), LOG_SUFFIX)[0].clone();
        let bytes = fs::read(&log).unwrap();
        let first = decode_header(&bytes).unwrap();
        let second = decode_header(&bytes[first.size..]).unwrap();

        let (out, result) = dump(&index, &DumpOptions::default());
        result.unwrap();
        let mut lines = out.lines();
        assert_eq!(
            lines.next().unwrap(),
            format!("Dumping {}", index.display())
        );
        assert_eq!(
            lines.next().unwrap(),
            format!("offset: {} position: {}", second.last_offset(), first.size)
        );
        let (out, _) = dump(&time_index, &DumpOptions::default());
        assert_eq!(
            out.lines().nth(1).unwrap(),
            format!(
                "timestamp: {} offset: {}",
                second.max_timestamp,
                second.last_offset()
            )
        );

        // Kafka's checks print no entries: a line when the sanity check passes, nothing
        // when the verification finds no mismatch.
        for path in [&index, &time_index] {
            let opts = DumpOptions {
                index_sanity_check: true,
                ..Default::default()
            };
            let (out, result) = dump(path, &opts);
            result.unwrap();
            let shown = path.display();
            assert_eq!(
                out,
                format!("Dumping {shown}\n{shown} passed sanity check.\n")
            );
            let quiet = DumpOptions {
                verify_index_only: true,
                ..Default::default()
            };
            let (out, result) = dump(path, &quiet);
            result.unwrap();
            assert_eq!(out, format!("Dumping {shown}\n"));
        }
        // A preallocated index without entries (an active segment's): Kafka's tool
        // prints its first, zero entry, and reports that the first batch does not end at
        // the base offset.
        for (path, line, finding) in [
            (&index, "offset: 0 position: 0", "Mismatches in :{}\n  Index offset: 0, log offset: 1"),
            (&time_index, "timestamp: 0 offset: 0", "The following indexed offsets are not found in :{}\nIndexed offset: 0, found log offset: 1"),
        ] {
            fs::write(path, vec![0; 120]).unwrap();
            let (out, result) = dump(path, &DumpOptions::default());
            result.unwrap();
            let shown = path.display().to_string();
            assert_eq!(
                out,
                format!("Dumping {shown}\n{line}\n{}\n", finding.replace("{}", &shown))
            );
        }
        fs::write(&index, b"").unwrap();
        let (out, result) = dump(&index, &DumpOptions::default());
        result.unwrap();
        assert!(
            out.ends_with(&format!("{} is empty.\n", index.display())),
            "{out}"
        );
    }

    #[test]
    fn dump_looks_through_temporary_suffixes() {
        let dir = build();
        let part = dir.path().join("orders-0");
        for suffix in [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
            let from = part.join(segment_file_name(0, suffix));
            let to = part.join(format!("{}{DELETED_SUFFIX}", segment_file_name(0, suffix)));
            fs::rename(from, to).unwrap();
        }
        let opts = DumpOptions {
            index_sanity_check: true,
            print_data_log: true,
            ..Default::default()
        };
        let (out, result) = dump(&part.join("00000000000000000000.log.deleted"), &opts);
        result.unwrap();
        assert!(out.contains("| offset: 0 CreateTime:"), "{out}");
        for name in [
            "00000000000000000000.index.deleted",
            "00000000000000000000.timeindex.deleted",
        ] {
            let (out, result) = dump(&part.join(name), &opts);
            result.unwrap();
            assert!(out.contains("passed sanity check"), "{out}");
        }
        let config = kpfs_folder(dir.path()).join(TOPIC_CONFIG_FILE);
        let (out, result) = dump(&config, &opts);
        result.unwrap();
        assert!(out.ends_with(&format!("Ignoring unknown file {}\n", config.display())));
        let stray = part.join("copy.log");
        fs::write(&stray, b"").unwrap();
        assert!(matches!(
            dump(&stray, &opts).1,
            Err(DumpError::BadFileName { .. })
        ));
    }

    #[test]
    fn dump_shows_delete_horizons_and_refuses_impossible_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join(segment_file_name(7, LOG_SUFFIX));
        let horizon = T0 + 86_400_000;
        let mut b = BatchBuilder::new(7);
        b.reset(7, Some(horizon));
        b.push(8, T0, Some(b"k"), None);
        let mut bytes = b.finish(Some(9), Some(horizon));
        // Offsets past i64::MAX would overflow the header's offset arithmetic.
        let mut huge = BatchBuilder::new(u64::MAX - 2);
        huge.push(u64::MAX - 1, T0, None, Some(b"x"));
        bytes.extend(huge.finish(Some(u64::MAX), None));
        fs::write(&log, &bytes).unwrap();
        let opts = DumpOptions {
            print_data_log: true,
            ..Default::default()
        };
        let (out, result) = dump(&log, &opts);
        assert!(
            out.contains("baseOffset: 7 lastOffset: 9 count: 1 ")
                && out.contains(&format!(
                    "deleteHorizonMs: OptionalLong[{}]",
                    T0 + 86_400_000
                )),
            "{out}"
        );
        assert!(out.contains(&format!(
            "| offset: 8 CreateTime: {T0} keySize: 1 valueSize: -1 sequence: -1 headerKeys: [] key: k\n"
        )));
        assert!(out.contains("out of range"), "{out}");
        assert!(matches!(result, Err(DumpError::InvalidBatch { .. })));
    }

    /// A small xorshift generator: deterministic "random" files without a dependency.
    fn noise(seed: u64, len: usize) -> Vec<u8> {
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn dump_survives_random_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let all = DumpOptions {
            print_data_log: true,
            deep_iteration: true,
            offsets_decoder: false,
            index_sanity_check: true,
            verify_index_only: false,
            max_bytes: None,
            max_message_size: None,
        };
        for seed in 0..40u64 {
            let len = (seed as usize * 397) % 5000;
            let mut bytes = noise(seed + 1, len);
            if seed % 2 == 0 && len >= BATCH_HEADER_BYTES {
                // A plausible header start, so decoding goes past the magic check.
                bytes[..8].copy_from_slice(&0u64.to_be_bytes());
                bytes[8..12].copy_from_slice(&((len - 12) as u32).to_be_bytes());
                bytes[12] = BATCH_MAGIC;
            }
            for suffix in [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
                fs::write(dir.path().join(segment_file_name(0, suffix)), &bytes).unwrap();
            }
            let log = dir.path().join(segment_file_name(0, LOG_SUFFIX));
            let (_, result) = dump(&log, &all);
            assert_eq!(result.is_ok(), len == 0, "seed {seed}");
            for suffix in [INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
                let _ = dump(&dir.path().join(segment_file_name(0, suffix)), &all);
            }
        }
        // And the checker over a partition full of noise.
        let part = dir.path().join("noise-0");
        fs::create_dir(&part).unwrap();
        for suffix in [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
            fs::write(part.join(segment_file_name(0, suffix)), noise(99, 4096)).unwrap();
        }
        let report = check_data_dir(dir.path());
        assert!(!report.is_healthy());
    }

    #[test]
    fn dump_of_a_truncated_segment_fails_except_at_batch_boundaries() {
        let dir = build();
        let log = files(dir.path(), LOG_SUFFIX)[0].clone();
        let bytes = fs::read(&log).unwrap();
        let mut boundaries = vec![0];
        let mut at = 0;
        while at < bytes.len() {
            at += decode_header(&bytes[at..]).unwrap().size;
            boundaries.push(at);
        }
        let copy = dir.path().join(segment_file_name(0, LOG_SUFFIX));
        for len in 0..=bytes.len() {
            fs::write(&copy, &bytes[..len]).unwrap();
            let (out, result) = dump(&copy, &DumpOptions::default());
            if boundaries.contains(&len) {
                result.unwrap();
            } else {
                let last = *boundaries.iter().filter(|&&b| b < len).max().unwrap();
                assert!(
                    out.contains(&format!(
                        "Found {} invalid bytes at the end of {} (position {last}: truncated batch",
                        len - last,
                        copy.file_name().unwrap().to_str().unwrap()
                    )),
                    "{len}: {out}"
                );
                assert!(result.is_err());
            }
        }
    }

    /// Rewrites the stream index entry at `at` with `edit` applied, its CRC32C recomputed
    /// (a consistent but wrong entry, which only the check against the log can catch).
    fn rewrite_stream_entry(path: &Path, at: usize, edit: impl FnOnce(&mut [u8])) {
        let mut bytes = fs::read(path).unwrap();
        let entry = &mut bytes[at..at + STREAM_INDEX_ENTRY_BYTES];
        edit(entry);
        let crc = crc_fast::crc32_iscsi(&entry[..24]);
        entry[24..28].copy_from_slice(&crc.to_be_bytes());
        fs::write(path, bytes).unwrap();
    }

    #[test]
    fn stream_indexes_are_checked_against_their_logs() {
        let dir = build();
        let streams = files(dir.path(), STREAM_INDEX_SUFFIX);
        assert_eq!(streams.len(), files(dir.path(), LOG_SUFFIX).len());
        let first_entry = STREAM_INDEX_HEADER_BYTES;
        // An entry moved one byte into its batch.
        rewrite_stream_entry(&streams[0], first_entry, |e| {
            let pos = be_u32(e, 4) + 1;
            e[4..8].copy_from_slice(&pos.to_be_bytes());
        });
        // A flipped byte under the CRC.
        let mut bytes = fs::read(&streams[1]).unwrap();
        bytes[first_entry + 10] ^= 0x01;
        fs::write(&streams[1], bytes).unwrap();
        // A torn last entry.
        let mut bytes = fs::read(&streams[2]).unwrap();
        bytes.extend_from_slice(&[1, 2, 3]);
        fs::write(&streams[2], bytes).unwrap();
        let report = check_data_dir(dir.path());
        let found = problems_about(&report, &streams[0]);
        assert!(
            found.iter().any(|p| p.contains(&format!(
                "byte {first_entry}: offset 0 points to position 1, which is not the start of \
                 the batch holding that offset"
            ))),
            "{found:#?}"
        );
        let found = problems_about(&report, &streams[1]);
        assert!(
            found
                .iter()
                .any(|p| p.contains(&format!("byte {first_entry}: entry fails its CRC32C"))),
            "{found:#?}"
        );
        assert!(problems_about(&report, &streams[2])[0].contains("torn last entry"));
        assert_eq!(report.problems.len(), 3, "{:#?}", report.problems);

        // dump-log prints the entries, and its sanity check finds the same.
        let (out, result) = dump(&streams[3], &DumpOptions::default());
        result.unwrap();
        let log = &files(dir.path(), LOG_SUFFIX)[3];
        let base = parse_segment_file_name(log.file_name().unwrap().to_str().unwrap())
            .unwrap()
            .0;
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[1].starts_with("streamStart: "), "{out}");
        assert!(
            lines[2].starts_with(&format!("offset: {base} position: 0 streamPosition: "))
                && lines[2].ends_with(" keySeparatorBytes: none nullMarkerBytes: 4"),
            "{out}"
        );
        let sanity = DumpOptions {
            index_sanity_check: true,
            ..Default::default()
        };
        let (out, result) = dump(&streams[0], &sanity);
        assert!(out.contains("which is not the start of the batch"), "{out}");
        assert!(matches!(
            result,
            Err(DumpError::IndexCheckFailed { problems: 1, .. })
        ));
        let (out, result) = dump(&streams[3], &sanity);
        result.unwrap();
        assert!(out.ends_with("passed sanity check.\n"), "{out}");
    }

    #[test]
    fn missing_orphaned_and_stray_kpfs_files_are_reported() {
        let dir = build();
        let streams = files(dir.path(), STREAM_INDEX_SUFFIX);
        fs::remove_file(&streams[0]).unwrap();
        let orphan = kpfs_folder(dir.path()).join(segment_file_name(999_999, STREAM_INDEX_SUFFIX));
        fs::write(&orphan, b"").unwrap();
        let gone_topic = dir.path().join(KPFS_TOPICS_DIR).join("gone-0");
        fs::create_dir(&gone_topic).unwrap();
        let report = check_data_dir(dir.path());
        assert!(problems_about(&report, &streams[0])[0].contains(
            "missing: the next open rebuilds it; stream positions after a compaction gap may shift"
        ));
        assert!(problems_about(&report, &orphan)[0].contains("orphaned index"));
        assert!(problems_about(&report, &gone_topic)[0].contains("without a partition directory"));
        assert_eq!(report.problems.len(), 3, "{:#?}", report.problems);
        assert_eq!(report.topics, 1, "kpfs-topics is no topic");
    }

    /// CRC32C covers neither the base offset nor the batch length's neighbours: a base
    /// offset flipped lower is caught by the walk's offset floor, in `check` and `dump-log`.
    #[test]
    fn a_flipped_base_offset_is_reported() {
        let dir = build();
        let log = files(dir.path(), LOG_SUFFIX)[1].clone();
        let mut bytes = fs::read(&log).unwrap();
        let first = decode_header(&bytes).unwrap();
        let second_at = first.size;
        let second = decode_header(&bytes[second_at..]).unwrap();
        // One bit flipped: the lowest one set.
        let flipped = second.base_offset & (second.base_offset - 1);
        assert!(
            flipped < first.next_offset(),
            "the flip goes below the floor"
        );
        bytes[second_at..second_at + 8].copy_from_slice(&flipped.to_be_bytes());
        fs::write(&log, &bytes).unwrap();
        let report = check_data_dir(dir.path());
        let found = problems_about(&report, &log);
        assert!(
            found.iter().any(|p| p.contains(&format!(
                "position {second_at}: batch base offset {flipped} is below the previous \
                 batch's next offset {}",
                first.next_offset()
            ))),
            "{found:#?}"
        );
        let (out, result) = dump(&log, &DumpOptions::default());
        // The CRC still holds, so Kafka would call the batch valid; the walk does not.
        assert!(
            out.contains(&format!(
                "baseOffset: {flipped} lastOffset: {} count: ",
                flipped + (second.last_offset() - second.base_offset)
            )) && out.contains(" isvalid: true\nFound "),
            "{out}"
        );
        assert!(matches!(result, Err(DumpError::InvalidBatch { .. })));
    }

    /// Kafka's `ProducerSnapshot` v1 bytes with one producer.
    fn snapshot_bytes() -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&1i32.to_be_bytes());
        b.extend_from_slice(&7i64.to_be_bytes()); // producer id
        b.extend_from_slice(&2i16.to_be_bytes()); // epoch
        b.extend_from_slice(&5i32.to_be_bytes()); // last sequence
        b.extend_from_slice(&40i64.to_be_bytes()); // last offset
        b.extend_from_slice(&2i32.to_be_bytes()); // offset delta
        b.extend_from_slice(&T0.to_be_bytes()); // timestamp
        b.extend_from_slice(&(-1i32).to_be_bytes()); // coordinator epoch
        b.extend_from_slice(&(-1i64).to_be_bytes()); // current txn first offset
        let crc = crc_fast::crc32_iscsi(&b[SNAPSHOT_ENTRIES_AT..]);
        b[SNAPSHOT_CRC_AT..SNAPSHOT_ENTRIES_AT].copy_from_slice(&crc.to_be_bytes());
        b
    }

    #[test]
    fn kafka_partition_files_are_dumped_and_checked() {
        let dir = build();
        let part = dir.path().join("orders-0");
        let snapshot = part.join(segment_file_name(6, SNAPSHOT_SUFFIX));
        fs::write(&snapshot, snapshot_bytes()).unwrap();
        let empty = part.join(segment_file_name(0, SNAPSHOT_SUFFIX));
        fs::write(&empty, {
            let mut b = snapshot_bytes();
            b.truncate(SNAPSHOT_ENTRIES_AT);
            b.extend_from_slice(&0i32.to_be_bytes());
            let crc = crc_fast::crc32_iscsi(&b[SNAPSHOT_ENTRIES_AT..]);
            b[SNAPSHOT_CRC_AT..SNAPSHOT_ENTRIES_AT].copy_from_slice(&crc.to_be_bytes());
            b
        })
        .unwrap();
        let epochs = part.join(LEADER_EPOCH_CHECKPOINT_FILE);
        fs::write(&epochs, "0\n1\n0 0\n").unwrap();
        let metadata = part.join(PARTITION_METADATA_FILE);
        fs::write(&metadata, "version: 0\ntopic_id: RHSdtuE6TUmMmDd2P6Zpbw").unwrap();
        healthy(&check_data_dir(dir.path()));

        let (out, result) = dump(&snapshot, &DumpOptions::default());
        result.unwrap();
        assert_eq!(
            out.lines().nth(1).unwrap(),
            format!(
                "producerId: 7 producerEpoch: 2 coordinatorEpoch: -1 currentTxnFirstOffset: \
                 OptionalLong.empty lastTimestamp: {T0} firstSequence: 3 lastSequence: 5 \
                 lastOffset: 40 offsetDelta: 2 timestamp: {T0}"
            )
        );
        let (out, result) = dump(&empty, &DumpOptions::default());
        result.unwrap();
        assert_eq!(out.lines().count(), 1, "{out}");

        let mut bad = snapshot_bytes();
        *bad.last_mut().unwrap() ^= 1;
        fs::write(&snapshot, &bad).unwrap();
        fs::write(&epochs, "0\n2\n3 10\n1 5\n").unwrap();
        fs::write(&metadata, "version: 0\ntopic_id: nope").unwrap();
        let report = check_data_dir(dir.path());
        assert!(problems_about(&report, &snapshot)[0]
            .contains("Snapshot is corrupt (CRC is no longer valid). Stored crc: "));
        assert!(problems_about(&report, &epochs)[0].contains("line 4: epoch 1 from offset 5"));
        assert!(problems_about(&report, &metadata)[0].contains("topic_id"));
        assert_eq!(report.problems.len(), 3, "{:#?}", report.problems);
        let (out, result) = dump(&snapshot, &DumpOptions::default());
        assert!(out.contains("Snapshot is corrupt"), "{out}");
        assert!(matches!(result, Err(DumpError::Corrupt { .. })));
    }

    /// Topic `txn`: producer 7's transaction aborted, then producer 8's committed, the
    /// markers from a coordinator at epoch 5 with the producer epoch bumped (Kafka 4's
    /// transaction version 2).
    fn txn_dir() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let engine = open(dir.path(), &clock);
        let t = engine.create_topic("txn", 1).unwrap();
        let txn = ClientBatch {
            transactional: true,
            ..ClientBatch::PLAIN
        };
        let end = |pid, commit| {
            let marker = TxnMarkerWrite::new((pid, 1), commit, 5, 2);
            t.append_txn_marker(0, &marker).unwrap();
        };
        t.append_produced_in_txn(0, &txn.of_values((7, 0, 0), T0, &["a"]))
            .unwrap(); // 0
        end(7, false); // 1
        t.append_produced_in_txn(0, &txn.of_values((8, 0, 0), T0, &["b"]))
            .unwrap(); // 2
        end(8, true); // 3
        engine.shutdown().unwrap();
        let part = dir.path().join("txn-0");
        (dir, part)
    }

    /// The lines Kafka 4.3.1's kafka-dump-log.sh prints for such files
    /// (tests/shell/t_kafka_dump_log.sh diffs the two tools on them).
    #[test]
    fn dump_prints_transactions_their_markers_and_the_txn_index_as_kafka() {
        let (_dir, part) = txn_dir();
        let log = part.join(segment_file_name(0, LOG_SUFFIX));
        let bytes = fs::read(&log).unwrap();
        // (position, size, CRC) of each batch.
        let mut batches = Vec::new();
        let mut pos = 0;
        while pos < bytes.len() {
            let h = decode_header(&bytes[pos..]).unwrap();
            batches.push((pos, h.size, h.crc));
            pos += h.size;
        }
        let batch = |i: usize, pid, epoch, seq, control| {
            let (pos, size, crc) = batches[i];
            format!(
                "baseOffset: {i} lastOffset: {i} count: 1 baseSequence: {seq} lastSequence: {seq} \
                 producerId: {pid} producerEpoch: {epoch} partitionLeaderEpoch: 0 \
                 isTransactional: true isControl: {control} deleteHorizonMs: OptionalLong.empty \
                 position: {pos} CreateTime: {T0} size: {size} magic: 2 compresscodec: none \
                 crc: {crc} isvalid: true\n"
            )
        };
        let data = |i| {
            format!("| offset: {i} CreateTime: {T0} keySize: -1 valueSize: 1 sequence: 0 headerKeys: []\n")
        };
        let marker = |i, kind| {
            format!(
                "| offset: {i} CreateTime: {T0} keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] \
                 endTxnMarker: {kind} coordinatorEpoch: 5\n"
            )
        };
        let deep = DumpOptions {
            deep_iteration: true,
            ..Default::default()
        };
        let (out, result) = dump(&log, &deep);
        result.unwrap();
        assert_eq!(
            out,
            [
                format!("Dumping {}\nLog starting offset: 0\n", log.display()),
                batch(0, 7, 0, 0, false),
                data(0),
                batch(1, 7, 1, -1, true),
                marker(1, "ABORT"),
                batch(2, 8, 0, 0, false),
                data(2),
                batch(3, 8, 1, -1, true),
                marker(3, "COMMIT"),
            ]
            .concat()
        );
        // A marker's key and value are no key and payload to print.
        let data_log = DumpOptions {
            print_data_log: true,
            ..Default::default()
        };
        let (out, _) = dump(&log, &data_log);
        assert!(out.contains(&marker(1, "ABORT")), "{out}");

        let index = part.join(segment_file_name(0, TXN_INDEX_SUFFIX));
        let (out, result) = dump(&index, &DumpOptions::default());
        result.unwrap();
        assert_eq!(
            out,
            format!(
                "Dumping {}\nversion: 0 producerId: 7 firstOffset: 0 lastOffset: 1 \
                 lastStableOffset: 2\n",
                index.display()
            )
        );
        // An entry of a later version: Kafka's reader throws before the tool prints an
        // entry of the file, and the dump stops.
        let mut bytes = fs::read(&index).unwrap();
        bytes[0] = 1;
        fs::write(&index, bytes).unwrap();
        let (out, result) = dump(&index, &DumpOptions::default());
        assert_eq!(out, format!("Dumping {}\n", index.display()));
        let err = result.unwrap_err();
        assert!(err.stops_the_dump());
        assert_eq!(
            err.to_string(),
            format!(
                "{0}: Unexpected aborted transaction version 1 in transaction index {0}, \
                 current version is 0",
                index.display()
            )
        );

        // The markers bumped both producers' epochs, which forgets their last batches.
        let snapshot = part.join(segment_file_name(4, SNAPSHOT_SUFFIX));
        let (out, result) = dump(&snapshot, &DumpOptions::default());
        result.unwrap();
        assert_eq!(
            out.lines().skip(1).collect::<Vec<_>>(),
            [7, 8].map(|pid| format!(
                "producerId: {pid} producerEpoch: 1 coordinatorEpoch: 5 currentTxnFirstOffset: \
                 OptionalLong.empty lastTimestamp: {T0}"
            ))
        );
    }

    #[test]
    fn transaction_indexes_are_checked_against_their_markers() {
        let (dir, part) = txn_dir();
        healthy(&check_data_dir(dir.path()));
        let index = part.join(segment_file_name(0, TXN_INDEX_SUFFIX));
        let good = fs::read(&index).unwrap();
        let problems = |edit: &dyn Fn(&mut Vec<u8>)| {
            let mut bytes = good.clone();
            edit(&mut bytes);
            fs::write(&index, &bytes).unwrap();
            let report = check_data_dir(dir.path());
            assert_eq!(problems_about(&report, &index), report.problems);
            report
                .problems
                .iter()
                .map(|p| {
                    p.strip_prefix(&format!("{}: ", index.display()))
                        .unwrap()
                        .to_string()
                })
                .collect::<Vec<_>>()
        };
        let set = |at: usize, value: i64| {
            move |b: &mut Vec<u8>| b[at..at + 8].copy_from_slice(&value.to_be_bytes())
        };
        let (producer_id, last_offset) = (2, 18);
        let not_the_marker = |pid, last, found: &str| {
            vec![format!(
                "byte 0: the aborted transaction of producer {pid} from offset 0 to {last}: \
                 {found}, not its ABORT marker; readers take the producer's transactional \
                 records in that range for aborted"
            )]
        };
        assert_eq!(
            problems(&set(last_offset, 3)),
            not_the_marker(7, 3, "offset 3 holds producer 8's COMMIT marker")
        );
        assert_eq!(
            problems(&set(producer_id, 8)),
            not_the_marker(8, 1, "offset 1 holds producer 7's ABORT marker")
        );
        assert_eq!(
            problems(&set(last_offset, 2)),
            not_the_marker(7, 2, "offset 2 holds no transaction marker")
        );
        assert_eq!(
            problems(&set(last_offset, 9)),
            not_the_marker(
                7,
                9,
                "offset 9 is past the segment's batches, which end before offset 4"
            )
        );
        assert_eq!(
            problems(&|b| b[0] = 1),
            vec![format!(
                "byte 0: Unexpected aborted transaction version 1 in transaction index {}, \
                 current version is 0; the next open recovers the segment, rebuilding the \
                 index from its markers",
                index.display()
            )]
        );
        assert_eq!(
            problems(&|b| b.extend_from_slice(&[0; 5])),
            vec![
                "byte 34: 5 bytes of a torn last entry (a crash mid-append); the engine \
                  ignores them and writes its next entry over them"
                    .to_string()
            ]
        );
        fs::write(&index, &good).unwrap();
        let orphan = part.join(segment_file_name(99, TXN_INDEX_SUFFIX));
        fs::write(&orphan, &good).unwrap();
        let report = check_data_dir(dir.path());
        assert!(problems_about(&report, &orphan)[0].contains("orphaned"));
        assert_eq!(report.problems.len(), 1, "{:#?}", report.problems);
    }

    /// The seed's `kafka-dump-log.sh --print-data-log` transcript (Kafka 4.3.1, course
    /// notes 000, compaction demo) shows this record line, with the timestamp and the
    /// idempotent producer's `sequence: .. headerKeys: [..]` elided as `...`. kpfs's line
    /// for the same record, elided alike, is the same text.
    #[test]
    fn a_record_line_matches_the_seed_transcript() {
        const SEED_LINE: &str =
            "| offset: 4 CreateTime: ... keySize: 1 valueSize: 18 ... key: b payload: round2-value-for-b";
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let engine = open(dir.path(), &clock);
        let t = engine.create_topic("compact-demo", 1).unwrap();
        t.update_config(b"parse.key=true\nkey.separator=:").unwrap();
        for round in 1..=2 {
            for k in ["a", "b", "c"] {
                t.append_lines(format!("{k}:round{round}-value-for-{k}\n").as_bytes())
                    .unwrap();
            }
        }
        engine.shutdown().unwrap();
        let log = dir
            .path()
            .join("compact-demo-0")
            .join(segment_file_name(0, LOG_SUFFIX));
        let opts = DumpOptions {
            print_data_log: true,
            ..Default::default()
        };
        let (out, result) = dump(&log, &opts);
        result.unwrap();
        let line = out.lines().find(|l| l.starts_with("| offset: 4 ")).unwrap();
        let (head, rest) = line.split_once(" CreateTime: ").unwrap();
        let (timestamp, rest) = rest.split_once(' ').unwrap();
        assert_eq!(timestamp, (T0).to_string());
        let (sizes, rest) = rest.split_once(" sequence: ").unwrap();
        let (_, data) = rest.split_once("] ").unwrap();
        assert_eq!(
            format!("{head} CreateTime: ... {sizes} ... {data}"),
            SEED_LINE
        );
    }
}
