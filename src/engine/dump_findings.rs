//! What Kafka 4.3.1's `DumpLogSegments` (`kafka-dump-log.sh`) checks while it prints an
//! `.index` or `.timeindex`, and the reports it prints to stderr after the last file:
//! index entries that do not name their batch's last offset, time index entries that
//! name no batch's last offset or the wrong timestamp, and the offset gaps of a deep
//! iteration over a `.log`. `kpfs dump-log` prints the same lines in the same order, so
//! the two tools' outputs can be diffed on any partition directory.
//!
//! Kafka's tool reads an index as its whole length of entries (a preallocated file's
//! zero tail included) and stops at the first entry after the first that names the base
//! offset; it looks entries up with `AbstractIndex`'s binary search over those entries.
//! Both are reproduced here as they are, not as kpfs's engine reads its indexes
//! (`index.rs`), because they decide which lines Kafka prints.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::format::{
    decode_header, records_section, RecordIter, BATCH_HEADER_BYTES, OFFSET_INDEX_ENTRY_BYTES,
    TIME_INDEX_ENTRY_BYTES,
};

/// `DumpLogSegmentsOptions`' default `--max-message-size`: how far past an index entry's
/// position its batch must end.
pub const DEFAULT_MAX_MESSAGE_SIZE: u32 = 5 * 1024 * 1024;

/// Bytes a batch's framing needs before its magic (`FileLogInputStream`'s
/// `HEADER_SIZE_UP_TO_MAGIC`): offset, size, partition leader epoch, magic.
const HEADER_BYTES_UP_TO_MAGIC: u64 = 17;
/// Offset and size fields, which a batch's size does not count (`Records.LOG_OVERHEAD`).
const LOG_OVERHEAD: u64 = 12;
/// The smallest size `FileLogInputStream` accepts (`LegacyRecord.RECORD_OVERHEAD_V0`).
const MIN_RECORD_OVERHEAD: i32 = 14;
/// Where `lastOffsetDelta` sits in a v2 batch header.
const LAST_OFFSET_DELTA_AT: usize = 23;
/// `AbstractIndex.warmEntries`: the newest 8 KiB of entries are searched first.
const WARM_SECTION_BYTES: usize = 8192;

/// A `java.util.HashMap<String, V>` filled by `computeIfAbsent`, as far as its iteration
/// order goes: by bucket of the key's spread `String.hashCode` in the table the entries
/// grew it to, then the latest key first within a bucket (`computeIfAbsent` puts a new
/// node at the head of its bin; a table resize keeps the order; no bucket of a dump's few
/// files grows to the 8 entries at which Java would make it a tree).
#[derive(Debug)]
struct JavaHashMap<V> {
    entries: Vec<(String, V)>,
    /// The table's length: none before the first call, then 16, doubled by a call that
    /// finds more entries than 3/4 of it (before it inserts, hit or miss).
    buckets: usize,
}

impl<V> Default for JavaHashMap<V> {
    fn default() -> Self {
        JavaHashMap {
            entries: Vec::new(),
            buckets: 0,
        }
    }
}

impl<V: Default> JavaHashMap<V> {
    /// `computeIfAbsent(key, k -> new V())`.
    fn entry(&mut self, key: &str) -> &mut V {
        if self.buckets == 0 {
            self.buckets = 16;
        } else if self.entries.len() > self.buckets / 4 * 3 {
            self.buckets *= 2;
        }
        let i = match self.entries.iter().position(|(k, _)| k == key) {
            Some(i) => i,
            None => {
                self.entries.push((key.to_string(), V::default()));
                self.entries.len() - 1
            }
        };
        &mut self.entries[i].1
    }
}

impl<V> JavaHashMap<V> {
    /// The entries as `HashMap.forEach` visits them.
    fn in_java_order(&self) -> Vec<&(String, V)> {
        let buckets = self.buckets.max(1);
        let mut order: Vec<(usize, Reverse<usize>)> = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, (k, _))| {
                let bucket = java_spread_hash(k) as usize & (buckets - 1);
                (bucket, Reverse(i))
            })
            .collect();
        order.sort_unstable();
        order
            .into_iter()
            .map(|(_, Reverse(i))| &self.entries[i])
            .collect()
    }
}

/// `HashMap.hash(key)` of a `String` key.
fn java_spread_hash(s: &str) -> u32 {
    java_spread(java_string_hash(s))
}

/// `String.hashCode`: over UTF-16 code units.
pub(crate) fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// `HashMap.hash`: a key's `hashCode` with its high half XORed into the low, whose bits
/// pick the bucket.
pub(crate) fn java_spread(hash: i32) -> u32 {
    let h = hash as u32;
    h ^ (h >> 16)
}

/// `TopicPartition.hashCode`.
pub(crate) fn topic_partition_hash(topic: &str, partition: i32) -> i32 {
    31i32
        .wrapping_mul(31i32.wrapping_add(partition))
        .wrapping_add(java_string_hash(topic))
}

/// The order in which a `java.util.HashSet<TopicPartition>`, filled by `add` in the
/// order of `partitions` (the admin client's `collectTopicPartitions`, in the order of the
/// DescribeTransactions answer, which is kpfs's by topic and partition), iterates: by
/// bucket of the spread hash in the table the entries grew it to, then in the order they
/// were added within a bucket (`putVal` appends to a bin; a resize keeps each bin's
/// order). The table starts at 16 buckets and doubles once the entries pass 3/4 of it,
/// and when a bin that already holds 8 gets another while the table is under 64 (where
/// Java would make a tree of the bin); the bins that become trees in a larger table,
/// which need 9 entries whose hashes agree in their low 6 bits or more, are not modelled.
pub(crate) fn java_hash_set_order(partitions: &[(String, i32)]) -> Vec<(&str, i32)> {
    let hashes: Vec<i32> = partitions
        .iter()
        .map(|(topic, partition)| topic_partition_hash(topic, *partition))
        .collect();
    java_hash_order(&hashes)
        .into_iter()
        .map(|i| (partitions[i].0.as_str(), partitions[i].1))
        .collect()
}

/// The order (as indexes into `hash_codes`) in which a `java.util.HashMap` or `HashSet`
/// whose keys have these `hashCode`s, put in this order, iterates (see
/// [`java_hash_set_order`]).
pub(crate) fn java_hash_order(hash_codes: &[i32]) -> Vec<usize> {
    let hashes: Vec<u32> = hash_codes.iter().map(|h| java_spread(*h)).collect();
    let mut buckets = 16usize;
    for (added, hash) in hashes.iter().enumerate() {
        let mask = buckets as u32 - 1;
        let in_bin = hashes[..added]
            .iter()
            .filter(|h| *h & mask == hash & mask)
            .count();
        if in_bin >= 8 && buckets < 64 {
            buckets *= 2;
        }
        if added + 1 > buckets / 4 * 3 {
            buckets *= 2;
        }
    }
    let mask = buckets as u32 - 1;
    let mut order: Vec<(u32, usize)> = hashes
        .iter()
        .enumerate()
        .map(|(i, h)| (h & mask, i))
        .collect();
    order.sort_unstable();
    order.into_iter().map(|(_, i)| i).collect()
}

/// What one `kafka-dump-log.sh` run collects over its files and prints to stderr at its
/// end (`DumpLogSegments.execute`), keyed by each file's absolute path.
#[derive(Debug, Default)]
pub struct DumpFindings {
    /// Index offset -> last offset of the batch at the entry's position (printed from the
    /// greatest index offset down, Kafka's `TreeMap(reverseOrder())`).
    index_mismatches: JavaHashMap<BTreeMap<i64, i64>>,
    /// (index timestamp, largest record timestamp of the entry's batch).
    time_mismatches: JavaHashMap<Vec<(i64, i64)>>,
    /// (index timestamp, the previous entry's timestamp).
    time_out_of_order: JavaHashMap<Vec<(i64, i64)>>,
    /// (index offset, last offset of the first batch reaching it, -1 for none).
    time_offsets_not_found: JavaHashMap<Vec<(i64, i64)>>,
    /// Offset -> the offset of the record after it, when that is not the next one.
    non_consecutive: JavaHashMap<BTreeMap<i64, i64>>,
}

impl DumpFindings {
    /// Notes one record of a deep iteration over the `.log` at `path`, `previous` being
    /// the offset of the record before it in that file (-1 before the first).
    pub(crate) fn note_record(&mut self, path: &Path, previous: i64, offset: i64) {
        if offset != previous + 1 {
            self.non_consecutive
                .entry(&java_absolute_path(path))
                .insert(previous, offset);
        }
    }

    /// Prints what `DumpLogSegments` prints after its last file, in its order.
    pub fn print(&self, err: &mut impl Write) -> io::Result<()> {
        for (file, mismatches) in self.index_mismatches.in_java_order() {
            writeln!(err, "Mismatches in :{file}")?;
            for (index_offset, log_offset) in mismatches.iter().rev() {
                writeln!(
                    err,
                    "  Index offset: {index_offset}, log offset: {log_offset}"
                )?;
            }
        }
        for (file, mismatches) in self.time_mismatches.in_java_order() {
            writeln!(err, "Found timestamp mismatch in :{file}")?;
            for (index_ts, log_ts) in mismatches {
                writeln!(
                    err,
                    "  Index timestamp: {index_ts}, log timestamp: {log_ts}"
                )?;
            }
        }
        for (file, out_of_order) in self.time_out_of_order.in_java_order() {
            writeln!(err, "Found out of order timestamp in :{file}")?;
            for (index_ts, previous) in out_of_order {
                writeln!(
                    err,
                    "  Index timestamp: {index_ts}, Previously indexed timestamp: {previous}"
                )?;
            }
        }
        for (file, not_found) in self.time_offsets_not_found.in_java_order() {
            writeln!(
                err,
                "The following indexed offsets are not found in :{file}"
            )?;
            for (index_offset, log_offset) in not_found {
                writeln!(
                    err,
                    "Indexed offset: {index_offset}, found log offset: {log_offset}"
                )?;
            }
        }
        for (file, pairs) in self.non_consecutive.in_java_order() {
            writeln!(err, "Non-consecutive offsets in {file}")?;
            for (offset, next) in pairs {
                writeln!(err, "  {offset} is followed by {next}")?;
            }
        }
        Ok(())
    }
}

/// `File.getAbsolutePath`: a relative path joined to the working directory as it is,
/// without resolving `..` or links.
pub(crate) fn java_absolute_path(path: &Path) -> String {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    absolute.display().to_string()
}

/// Why a file stopped the dump as Kafka's tool would stop with an exception: the text
/// Kafka prints as the exception's message.
#[derive(Debug)]
pub(crate) enum KafkaRefusal {
    Io(io::Error),
    Refused(String),
}

impl From<io::Error> for KafkaRefusal {
    fn from(e: io::Error) -> Self {
        KafkaRefusal::Io(e)
    }
}

/// A v2 batch's framing as `FileLogInputStream.nextBatch` reads it: where it starts, its
/// last offset and its size with the offset and size fields.
#[derive(Clone, Copy, Debug)]
struct FramedBatch {
    position: u64,
    last_offset: i64,
    bytes: u64,
}

/// `FileLogInputStream.nextBatch` over `log` from `position` up to `end`: `None` when no
/// whole batch starts there.
fn batch_at(
    log: &File,
    log_path: &Path,
    position: u64,
    end: u64,
) -> Result<Option<FramedBatch>, KafkaRefusal> {
    if position + HEADER_BYTES_UP_TO_MAGIC >= end {
        return Ok(None);
    }
    let mut head = [0u8; BATCH_HEADER_BYTES];
    let avail = (end - position).min(BATCH_HEADER_BYTES as u64) as usize;
    log.read_exact_at(&mut head[..avail], position)?;
    let base = i64::from_be_bytes(head[..8].try_into().expect("8 bytes"));
    let size = i32::from_be_bytes(head[8..12].try_into().expect("4 bytes"));
    if size < MIN_RECORD_OVERHEAD {
        return Err(KafkaRefusal::Refused(format!(
            "Found record size {size} smaller than minimum record overhead \
             ({MIN_RECORD_OVERHEAD}) in file {}.",
            log_path.display()
        )));
    }
    let bytes = LOG_OVERHEAD + size as u64;
    if position + bytes > end {
        return Ok(None);
    }
    // A size of at least 14 leaves at least 26 bytes, short of a v2 header's offset delta
    // only for a batch no v2 writer makes.
    if avail < LAST_OFFSET_DELTA_AT + 4 {
        return Err(KafkaRefusal::Refused(format!(
            "Failed to read the header of the batch at position {position} of {}",
            log_path.display()
        )));
    }
    let delta_at = LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4;
    let delta = i32::from_be_bytes(head[delta_at].try_into().expect("4 bytes"));
    Ok(Some(FramedBatch {
        position,
        last_offset: base + i64::from(delta),
        bytes,
    }))
}

/// The largest record timestamp of a batch (`Record.timestamp()`: the batch's time for
/// LogAppendTime), -1 for none: what Kafka's time index check compares an entry with.
fn largest_record_timestamp(log: &File, batch: FramedBatch) -> Result<i64, KafkaRefusal> {
    let mut bytes = vec![0u8; batch.bytes as usize];
    log.read_exact_at(&mut bytes, batch.position)?;
    let refused = |e: super::format::DecodeError| {
        KafkaRefusal::Refused(format!(
            "The batch at position {} does not decode: {e}",
            batch.position
        ))
    };
    let header = decode_header(&bytes).map_err(refused)?;
    if header.is_log_append_time() {
        return Ok(header.max_timestamp);
    }
    let mut scratch = Vec::new();
    let section = records_section(&header, &bytes, &mut scratch).map_err(refused)?;
    let mut largest = -1;
    for record in RecordIter::new(&header, section) {
        largest = largest.max(record.map_err(refused)?.timestamp);
    }
    Ok(largest)
}

/// An index file's entries as Kafka's tool sees them: the whole file, preallocated
/// zeroes included.
struct RawIndex {
    bytes: Vec<u8>,
    width: usize,
    base: i64,
}

impl RawIndex {
    fn read(path: &Path, width: usize, base: i64) -> io::Result<RawIndex> {
        Ok(RawIndex {
            bytes: std::fs::read(path)?,
            width,
            base,
        })
    }

    fn entries(&self) -> usize {
        self.bytes.len() / self.width
    }

    fn field_i32(&self, i: usize, at: usize) -> i32 {
        let from = i * self.width + at;
        i32::from_be_bytes(self.bytes[from..from + 4].try_into().expect("4 bytes"))
    }

    /// (offset, position) of an `.index` entry; the relative offset is Java's `int`.
    fn offset_entry(&self, i: usize) -> (i64, i64) {
        (
            self.base + i64::from(self.field_i32(i, 0)),
            i64::from(self.field_i32(i, 4)),
        )
    }

    /// (timestamp, offset) of a `.timeindex` entry.
    fn time_entry(&self, i: usize) -> (i64, i64) {
        let from = i * self.width;
        let ts = i64::from_be_bytes(self.bytes[from..from + 8].try_into().expect("8 bytes"));
        (ts, self.base + i64::from(self.field_i32(i, 8)))
    }

    /// `OffsetIndex.lookup`: `AbstractIndex.largestLowerBoundSlotFor` (the warm section
    /// first, then a binary search that takes the upper middle), else (base offset, 0).
    fn lookup(&self, target: i64) -> (i64, i64) {
        let entries = self.entries();
        if entries == 0 {
            return (self.base, 0);
        }
        let key = |i: usize| self.offset_entry(i).0;
        let search = |mut lo: usize, mut hi: usize| {
            while lo < hi {
                let mid = (lo + hi).div_ceil(2);
                match key(mid).cmp(&target) {
                    std::cmp::Ordering::Greater => hi = mid - 1,
                    std::cmp::Ordering::Less => lo = mid,
                    std::cmp::Ordering::Equal => return mid,
                }
            }
            lo
        };
        let warm = WARM_SECTION_BYTES / self.width;
        let first_hot = (entries - 1).saturating_sub(warm);
        let slot = if key(first_hot) < target {
            Some(search(first_hot, entries - 1))
        } else if key(0) > target {
            None
        } else {
            Some(search(0, first_hot))
        };
        slot.map_or((self.base, 0), |s| self.offset_entry(s))
    }
}

/// How `--index-sanity-check`, `--verify-index-only` and `--max-message-size` shape an
/// index dump.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IndexDumpMode {
    pub(crate) sanity_only: bool,
    pub(crate) verify_only: bool,
    pub(crate) max_message_size: u32,
}

/// `DumpLogSegments.dumpIndex`: prints an `.index`'s entries, noting in `findings` each
/// whose batch at its position does not end at its offset.
pub(crate) fn dump_offset_index(
    path: &Path,
    base: u64,
    log_path: &Path,
    mode: IndexDumpMode,
    out: &mut impl Write,
    findings: &mut DumpFindings,
) -> Result<(), KafkaRefusal> {
    let log = File::open(log_path)?;
    let index = RawIndex::read(path, OFFSET_INDEX_ENTRY_BYTES, base as i64)?;
    let entries = index.entries();
    if entries == 0 {
        writeln!(out, "{} is empty.", path.display())?;
        return Ok(());
    }
    if mode.sanity_only {
        let (last_offset, _) = index.offset_entry(entries - 1);
        if last_offset < index.base {
            return Err(KafkaRefusal::Refused(format!(
                "Corrupt index found, index file {} has non-zero size but the last offset is \
                 {last_offset} which is less than the base offset {}",
                java_absolute_path(path),
                index.base
            )));
        }
        let len = index.bytes.len();
        if !len.is_multiple_of(OFFSET_INDEX_ENTRY_BYTES) {
            return Err(KafkaRefusal::Refused(format!(
                "Index file {} is corrupt, found {len} bytes which is neither positive nor a \
                 multiple of {OFFSET_INDEX_ENTRY_BYTES}",
                java_absolute_path(path)
            )));
        }
        writeln!(out, "{} passed sanity check.", path.display())?;
        return Ok(());
    }
    let log_len = log.metadata()?.len();
    for i in 0..entries {
        let (offset, position) = index.offset_entry(i);
        // Kafka's tool takes a second entry naming the base offset for the zero tail.
        if offset == index.base && i > 0 {
            break;
        }
        let position = u64::try_from(position)
            .ok()
            .filter(|&p| p <= log_len)
            .ok_or_else(|| {
                KafkaRefusal::Refused(format!(
                    "Slice from position {position} exceeds end position of {}",
                    log_path.display()
                ))
            })?;
        let end = log_len.min(position + u64::from(mode.max_message_size));
        let batch = batch_at(&log, log_path, position, end)?.ok_or_else(|| {
            // `slice.batches().iterator().next()` on no batch.
            KafkaRefusal::Refused(format!(
                "No batch ends within --max-message-size {} bytes of position {position} of {}",
                mode.max_message_size,
                log_path.display()
            ))
        })?;
        if batch.last_offset != offset {
            findings
                .index_mismatches
                .entry(&java_absolute_path(path))
                .insert(offset, batch.last_offset);
        }
        if !mode.verify_only {
            writeln!(out, "offset: {offset} position: {position}")?;
        }
    }
    Ok(())
}

/// `DumpLogSegments.dumpTimeIndex`: prints a `.timeindex`'s entries, noting in `findings`
/// each that names no batch's last offset, a timestamp other than its batch's largest, or
/// one not above the entry before.
pub(crate) fn dump_time_index(
    path: &Path,
    base: u64,
    log_path: &Path,
    offset_index_path: &Path,
    mode: IndexDumpMode,
    out: &mut impl Write,
    findings: &mut DumpFindings,
) -> Result<(), KafkaRefusal> {
    let log = File::open(log_path)?;
    let offsets = RawIndex::read(offset_index_path, OFFSET_INDEX_ENTRY_BYTES, base as i64)?;
    let index = RawIndex::read(path, TIME_INDEX_ENTRY_BYTES, base as i64)?;
    let entries = index.entries();
    if mode.sanity_only {
        time_index_sanity_check(path, &index)?;
        writeln!(out, "{} passed sanity check.", path.display())?;
        return Ok(());
    }
    let log_len = log.metadata()?.len();
    let absolute = java_absolute_path(path);
    let mut previous_ts = -1;
    for i in 0..entries {
        let (timestamp, offset) = index.time_entry(i);
        if offset == index.base && i > 0 {
            break;
        }
        let (_, position) = offsets.lookup(offset);
        let mut at = u64::try_from(position).unwrap_or(u64::MAX);
        let mut matching = None;
        while at < log_len {
            let Some(batch) = batch_at(&log, log_path, at, log_len)? else {
                break;
            };
            if batch.last_offset >= offset {
                matching = Some(batch);
                break;
            }
            at += batch.bytes;
        }
        match matching {
            None => findings
                .time_offsets_not_found
                .entry(&absolute)
                .push((offset, -1)),
            Some(b) if b.last_offset != offset => findings
                .time_offsets_not_found
                .entry(&absolute)
                .push((offset, b.last_offset)),
            Some(b) => {
                let largest = largest_record_timestamp(&log, b)?;
                if largest != timestamp {
                    findings
                        .time_mismatches
                        .entry(&absolute)
                        .push((timestamp, largest));
                }
                if previous_ts >= timestamp {
                    findings
                        .time_out_of_order
                        .entry(&absolute)
                        .push((timestamp, previous_ts));
                }
            }
        }
        if !mode.verify_only {
            writeln!(out, "timestamp: {timestamp} offset: {offset}")?;
        }
        previous_ts = timestamp;
    }
    Ok(())
}

/// `TimeIndex.sanityCheck` on the whole file, whose last entry is a preallocated file's
/// last zero one.
fn time_index_sanity_check(path: &Path, index: &RawIndex) -> Result<(), KafkaRefusal> {
    let entries = index.entries();
    let absolute = || java_absolute_path(path);
    if entries > 0 {
        let (last_ts, last_offset) = index.time_entry(entries - 1);
        let (first_ts, _) = index.time_entry(0);
        if last_ts < first_ts {
            return Err(KafkaRefusal::Refused(format!(
                "Corrupt time index found, time index file ({}) has non-zero size but the last \
                 timestamp is {last_ts} which is less than the first timestamp {first_ts}",
                absolute()
            )));
        }
        if last_offset < index.base {
            return Err(KafkaRefusal::Refused(format!(
                "Corrupt time index found, time index file ({}) has non-zero size but the last \
                 offset is {last_offset} which is less than the first offset {}",
                absolute(),
                index.base
            )));
        }
    }
    let len = index.bytes.len();
    if !len.is_multiple_of(TIME_INDEX_ENTRY_BYTES) {
        return Err(KafkaRefusal::Refused(format!(
            "Time index file {} is corrupt, found {len} bytes which is neither positive nor a \
             multiple of {TIME_INDEX_ENTRY_BYTES}",
            absolute()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_map_order_follows_buckets_then_the_latest_key() {
        // "Aa" and "BB" share a String.hashCode (2112), so a bucket; "a" (97) sorts by
        // its own bucket.
        assert_eq!(java_spread_hash("Aa"), java_spread_hash("BB"));
        let mut map: JavaHashMap<Vec<i64>> = JavaHashMap::default();
        for key in ["BB", "a", "Aa"] {
            map.entry(key).push(1);
        }
        let order: Vec<&str> = map
            .in_java_order()
            .iter()
            .map(|(k, _)| k.as_str())
            .collect();
        // 2112 & 15 = 0 (bucket 0: "Aa", put last, first), 97 & 15 = 1: what Java's
        // HashMap.forEach gives for these computeIfAbsent calls.
        assert_eq!(order, ["Aa", "BB", "a"]);
    }

    #[test]
    fn java_hash_map_order_after_a_resize() {
        // What Java 17 prints for these calls (13 keys fill 16 buckets past 3/4; the next
        // call, a hit, doubles the table first).
        let mut map: JavaHashMap<Vec<i64>> = JavaHashMap::default();
        let order = |map: &JavaHashMap<Vec<i64>>| {
            map.in_java_order()
                .iter()
                .map(|(k, _)| k[4..k.find('-').unwrap()].to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        for i in 0..13 {
            map.entry(&format!("/d/t{i}-0/x.index")).push(1);
        }
        assert_eq!(order(&map), "12,9,0,8,2,5,10,7,3,6,4,1,11");
        map.entry("/d/t0-0/x.index").push(2);
        assert_eq!(order(&map), "5,3,4,12,9,0,8,2,10,7,6,1,11");
    }

    #[test]
    fn findings_print_in_kafkas_sections_and_orders() {
        let mut findings = DumpFindings::default();
        let log = Path::new("/d/t-0/00000000000000000007.log");
        for (previous, offset) in [(-1, 7), (7, 9), (9, 10), (10, 12)] {
            findings.note_record(log, previous, offset);
        }
        let index = "/d/t-0/00000000000000000007.index";
        findings.index_mismatches.entry(index).insert(7, 9);
        findings.index_mismatches.entry(index).insert(12, 13);
        let time_index = "/d/t-0/00000000000000000007.timeindex";
        findings
            .time_offsets_not_found
            .entry(time_index)
            .push((7, 9));
        let mut err = Vec::new();
        findings.print(&mut err).unwrap();
        assert_eq!(
            String::from_utf8(err).unwrap(),
            format!(
                "Mismatches in :{index}\n  Index offset: 12, log offset: 13\n  Index offset: 7, log offset: 9\n\
                 The following indexed offsets are not found in :{time_index}\nIndexed offset: 7, found log offset: 9\n\
                 Non-consecutive offsets in {}\n  -1 is followed by 7\n  7 is followed by 9\n  10 is followed by 12\n",
                log.display()
            )
        );
    }

    #[test]
    fn lookup_searches_a_preallocated_index_as_kafka_does() {
        // Two real entries, then the zero tail, which reads as (base, 0) entries.
        let mut bytes = Vec::new();
        for (rel, pos) in [(3i32, 100i32), (5, 200), (0, 0), (0, 0)] {
            bytes.extend_from_slice(&rel.to_be_bytes());
            bytes.extend_from_slice(&pos.to_be_bytes());
        }
        let index = RawIndex {
            bytes,
            width: OFFSET_INDEX_ENTRY_BYTES,
            base: 10,
        };
        // Entry 0 (13) is above 10: no slot, (base, 0).
        assert_eq!(index.lookup(10), (10, 0));
        assert_eq!(index.lookup(13), (13, 100));
        // Above entry 0, the search of 0..=3 probes the zero entries 2 and 3, which are
        // below 14, and settles on the last: Kafka's tool then walks the log from 0.
        assert_eq!(index.lookup(14), (10, 0));
    }
}
