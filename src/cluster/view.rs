//! The `log` byte streams of a cluster's topic: positions a Kafka cluster does not have,
//! kept by the mount (docs/ARCHITECTURE.md, "The cluster mount").
//!
//! A tracker thread per topic (started by the first look at its `log` or size) consumes
//! every partition from its log start and measures each record's line. The positions it
//! hands out are fixed once given: a partition's stream is its records' lines in offset
//! order from the first one the tracker saw; the topic's stream is the partitions' lines
//! in the order the tracker received them, as runs of one partition each. What it keeps is
//! a chunk table per partition (first and next offset, start and end position, the line
//! format in force) and the rendered bytes of recent chunks within a budget; a chunk whose
//! bytes were dropped is fetched again by offset and rendered under its own format.
//! Records the cluster deleted since (retention, compaction, DeleteRecords) leave a gap
//! at the front of their chunk, which a reader skips, as the local mount skips what its
//! retention deleted.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use super::batch::{Batch, Item};
use super::{ClientSettings, OwnedFormat};
use crate::deadline::Deadline;

/// A chunk closes once its lines reach this many bytes: the unit of re-fetching.
const CHUNK_BYTES: u64 = 256 * 1024;
/// Rendered bytes a topic keeps for closed chunks; the oldest go first.
const CACHE_BYTES: u64 = 32 * 1024 * 1024;
/// How long a read at the end of a stream waits for the tracker to reach the ends the
/// cluster reports before it answers end of file.
const CATCH_UP: Duration = Duration::from_secs(10);
/// How many records the tracker takes in one hold of the lock.
const TRACK_BATCH: usize = 4096;
/// How long one poll of the tracker waits, which bounds how late it sees a stop.
const POLL: Duration = Duration::from_millis(200);
/// How many chunks one re-fetch renders: the one read and those after it.
const READ_AHEAD: usize = 16;
/// How long a re-fetch of one chunk may take.
const REFETCH: Duration = Duration::from_secs(30);

/// Where one handle reads a stream: the file offset the kernel will ask for next and the
/// stream position it stands for (after a gap they differ).
#[derive(Default)]
pub(crate) struct ViewCursor {
    kernel_pos: u64,
    stream_pos: u64,
}

/// Which stream of a topic.
#[derive(Clone, Copy)]
pub(crate) enum Stream {
    Topic,
    Partition(u32),
}

struct Chunk {
    first_offset: i64,
    /// The offset after its last record.
    next_offset: i64,
    start: u64,
    end: u64,
    /// The index of the line format its records render under.
    format: usize,
    /// Its lines, while cached; the open (last) chunk always has them.
    bytes: Option<Arc<Vec<u8>>>,
}

#[derive(Default)]
struct PartitionTrack {
    chunks: Vec<Chunk>,
    end: u64,
    /// The offset after the last record seen.
    next_offset: i64,
    /// The tracker reached the end of what the cluster had, at this offset: a read there
    /// waits for nothing more.
    end_of_partition: Option<i64>,
}

/// One run of the topic stream: `len` bytes of a partition's stream from `partition_pos`.
struct Run {
    partition: u32,
    topic_pos: u64,
    partition_pos: u64,
    len: u64,
}

#[derive(Default)]
struct Tracked {
    partitions: Vec<PartitionTrack>,
    runs: Vec<Run>,
    topic_end: u64,
    /// Every line format records were measured under; chunks name theirs by index.
    formats: Vec<OwnedFormat>,
    /// Closed chunks with bytes, oldest first, to drop when over [`CACHE_BYTES`].
    cached: VecDeque<(u32, usize)>,
    cached_bytes: u64,
    /// Why the tracker stopped, if it failed: reads report it.
    failure: Option<String>,
}

/// A topic's streams.
pub(crate) struct TopicView {
    topic: String,
    settings: Arc<ClientSettings>,
    tracked: Mutex<Tracked>,
    grew: Condvar,
    started: AtomicBool,
    stop: AtomicBool,
    /// The partition count the tracker should follow.
    partitions: AtomicU32,
    /// The partitions' high watermarks a reader at the end last asked the cluster for.
    asked_ends: Mutex<Vec<i64>>,
    /// The consumer that fetches a chunk again (one at a time per topic).
    refetcher: Mutex<Option<Refetcher>>,
}

impl TopicView {
    pub(crate) fn new(topic: &str, settings: Arc<ClientSettings>, partitions: u32) -> TopicView {
        TopicView {
            topic: topic.to_string(),
            settings,
            tracked: Mutex::new(Tracked::default()),
            grew: Condvar::new(),
            started: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            partitions: AtomicU32::new(partitions),
            asked_ends: Mutex::new(Vec::new()),
            refetcher: Mutex::new(None),
        }
    }

    /// How many partitions the tracker follows.
    pub(crate) fn partition_count(&self) -> u32 {
        self.partitions.load(Ordering::Acquire)
    }

    pub(crate) fn set_partitions(&self, count: u32) {
        self.partitions.fetch_max(count, Ordering::AcqRel);
    }

    /// The topic is gone: the tracker ends and the re-fetching consumer is dropped, so
    /// neither asks for the topic again.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.refetcher.lock().take();
    }

    /// The tracker, started once; `format` is the line format lines are measured under
    /// from now on.
    fn ensure_started(self: &Arc<Self>, format: impl FnOnce() -> OwnedFormat) {
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        self.tracked.lock().formats.push(format());
        let view = Arc::downgrade(self);
        let name = format!("kpfs-view-{}", self.topic);
        let spawned = std::thread::Builder::new()
            .name(name.chars().take(15).collect())
            .spawn(move || track(&view));
        if let Err(e) = spawned {
            self.tracked.lock().failure = Some(format!("cannot start its tracker: {e}"));
        }
    }

    /// Records from now on render under `format` (a change of `parse.key`,
    /// `key.separator` or `null.marker`); records already measured keep theirs.
    pub(crate) fn set_format(&self, format: OwnedFormat) {
        let mut tracked = self.tracked.lock();
        if !tracked.formats.is_empty() && tracked.formats.last() != Some(&format) {
            tracked.formats.push(format);
        }
    }

    /// The stream's length: every position handed out so far.
    pub(crate) fn len(
        self: &Arc<Self>,
        stream: Stream,
        format: impl FnOnce() -> OwnedFormat,
    ) -> u64 {
        self.ensure_started(format);
        let tracked = self.tracked.lock();
        match stream {
            Stream::Topic => tracked.topic_end,
            Stream::Partition(p) => tracked.partitions.get(p as usize).map_or(0, |t| t.end),
        }
    }

    /// Up to `len` bytes of `stream` from the kernel's `pos`, continuing where `cursor`
    /// left off when the kernel asks for the offset after its last read; empty at the
    /// end once the tracker has reached what the cluster holds.
    pub(crate) fn read(
        self: &Arc<Self>,
        stream: Stream,
        cursor: &mut ViewCursor,
        pos: u64,
        len: usize,
        partition_ends: impl Fn() -> Result<Vec<i64>, String>,
        format: impl FnOnce() -> OwnedFormat,
    ) -> Result<Vec<u8>, String> {
        self.ensure_started(format);
        let start = if pos == cursor.kernel_pos && cursor.kernel_pos != 0 {
            cursor.stream_pos
        } else {
            pos
        };
        let (mut bytes, mut next) = self.read_at(stream, start, len)?;
        if bytes.is_empty() {
            let ends = match self.known_ends(stream) {
                Some(ends) => ends,
                None => {
                    let ends = partition_ends()?;
                    *self.asked_ends.lock() = ends.clone();
                    ends
                }
            };
            self.await_more(stream, start, &ends)?;
            (bytes, next) = self.read_at(stream, start, len)?;
        }
        cursor.kernel_pos = pos + bytes.len() as u64;
        cursor.stream_pos = next;
        Ok(bytes)
    }

    /// The partition ends last asked of the cluster, while the tracker has not reached
    /// them yet for `stream` (so there is more to wait for without asking again).
    fn known_ends(&self, stream: Stream) -> Option<Vec<i64>> {
        let ends = self.asked_ends.lock().clone();
        let tracked = self.tracked.lock();
        let reached = |p: usize, end: i64| {
            tracked.partitions.get(p).is_some_and(|t| {
                t.next_offset >= end || t.end_of_partition.is_some_and(|at| at >= end)
            })
        };
        let behind = match stream {
            Stream::Topic => ends.iter().enumerate().any(|(p, &end)| !reached(p, end)),
            Stream::Partition(p) => ends
                .get(p as usize)
                .is_some_and(|&end| !reached(p as usize, end)),
        };
        behind.then_some(ends)
    }

    /// Waits until `stream` has bytes past `pos`, or the tracker has every partition up to
    /// `ends` (the cluster's high watermarks a moment ago) or the end of what it could
    /// fetch: a reader follows the tracker rather than waiting for all of it.
    fn await_more(&self, stream: Stream, pos: u64, ends: &[i64]) -> Result<(), String> {
        let deadline = Deadline::after(CATCH_UP);
        let mut tracked = self.tracked.lock();
        loop {
            if let Some(failure) = &tracked.failure {
                return Err(failure.clone());
            }
            let end = match stream {
                Stream::Topic => tracked.topic_end,
                Stream::Partition(p) => tracked.partitions.get(p as usize).map_or(0, |t| t.end),
            };
            let behind = ends.iter().enumerate().any(|(p, &end)| {
                let read = match stream {
                    Stream::Topic => true,
                    Stream::Partition(only) => only as usize == p,
                };
                read && tracked.partitions.get(p).is_none_or(|t| {
                    t.next_offset < end && t.end_of_partition.is_none_or(|at| at < end)
                })
            });
            if end > pos
                || !behind
                || self
                    .grew
                    .wait_until(&mut tracked, deadline.instant())
                    .timed_out()
            {
                return Ok(());
            }
        }
    }

    /// The bytes at stream position `start` (or after it, past a gap) and the position
    /// after them.
    fn read_at(&self, stream: Stream, start: u64, len: usize) -> Result<(Vec<u8>, u64), String> {
        let mut out = Vec::new();
        let mut pos = start;
        while out.len() < len {
            let piece = {
                let tracked = self.tracked.lock();
                match stream {
                    Stream::Partition(p) => tracked
                        .partitions
                        .get(p as usize)
                        .filter(|t| pos < t.end)
                        .map(|t| (p, pos, t.end)),
                    Stream::Topic => run_at(&tracked.runs, pos).map(|run| {
                        let offset = pos - run.topic_pos;
                        (
                            run.partition,
                            run.partition_pos + offset,
                            run.partition_pos + run.len,
                        )
                    }),
                }
            };
            let Some((partition, partition_pos, limit)) = piece else {
                break;
            };
            let want = (len - out.len()).min((limit - partition_pos) as usize);
            let (bytes, skipped) = self.partition_bytes(partition, partition_pos, want)?;
            pos += skipped + bytes.len() as u64;
            if bytes.is_empty() && skipped == 0 {
                break;
            }
            out.extend_from_slice(&bytes);
        }
        Ok((out, pos))
    }

    /// Up to `want` bytes of partition `p`'s stream at `pos`, and how many bytes of gap
    /// were skipped before them.
    fn partition_bytes(&self, p: u32, pos: u64, want: usize) -> Result<(Vec<u8>, u64), String> {
        let (index, start, end, bytes) = {
            let tracked = self.tracked.lock();
            let track = &tracked.partitions[p as usize];
            let index = track.chunks.partition_point(|c| c.end <= pos);
            let Some(chunk) = track.chunks.get(index) else {
                return Ok((Vec::new(), 0));
            };
            (index, chunk.start, chunk.end, chunk.bytes.clone())
        };
        let bytes = match bytes {
            Some(bytes) => bytes,
            None => self.refetch(p, index)?,
        };
        // Lines deleted from the cluster since they were measured leave a gap at the
        // chunk's front: what is left sits at its end.
        let live_start = end - bytes.len() as u64;
        let from = pos.max(live_start);
        let at = (from - live_start) as usize;
        let take = want.min(bytes.len() - at);
        debug_assert!(start <= from && from <= end, "a read stays in its chunk");
        Ok((bytes[at..at + take].to_vec(), from - pos))
    }

    /// Fetches chunk `index` of partition `p` again and renders it under its format, and
    /// the uncached chunks after it up to [`READ_AHEAD`] (a reader of a stream reads on),
    /// continuing from where the last re-fetch of the partition stopped when it can.
    fn refetch(&self, p: u32, index: usize) -> Result<Arc<Vec<u8>>, String> {
        let mut refetcher = self.refetcher.lock();
        if refetcher.is_none() {
            let consumer = self.settings.consumer().map_err(|e| e.to_string())?;
            *refetcher = Some(Refetcher { consumer, at: None });
        }
        let refetcher = refetcher.as_mut().expect("made above");
        let Some(mut chunk) = self.chunk_to_fetch(p, index, true) else {
            return Err(format!("no chunk {index} of partition {p}"));
        };
        if refetcher.at != Some((p, chunk.first)) {
            let mut assignment = TopicPartitionList::new();
            assignment
                .add_partition_offset(&self.topic, p as i32, Offset::Offset(chunk.first))
                .map_err(|e| e.to_string())?;
            refetcher
                .consumer
                .assign(&assignment)
                .map_err(|e| e.to_string())?;
        }
        refetcher.at = None;
        let deadline = Deadline::after(REFETCH);
        let mut wanted = None;
        let mut ahead = 0;
        'fetch: while !deadline.passed() {
            let batch = Batch::take(&refetcher.consumer, POLL, TRACK_BATCH);
            let last = batch.len().saturating_sub(1);
            for (i, item) in batch.items().enumerate() {
                match item {
                    Item::Record {
                        partition,
                        offset,
                        key,
                        value,
                    } if partition == p as i32 => {
                        while offset >= chunk.next {
                            match self.store_and_go_on(
                                p,
                                index,
                                &mut ahead,
                                &mut chunk,
                                &mut wanted,
                            ) {
                                Some(next) => chunk = next,
                                // The chunks after are cached: the consumer stands beyond
                                // what is wanted.
                                None => break 'fetch,
                            }
                        }
                        if offset >= chunk.first {
                            chunk
                                .format
                                .as_format()
                                .render(key, value, &mut chunk.lines);
                        }
                        if offset + 1 == chunk.next {
                            match self.store_and_go_on(
                                p,
                                index,
                                &mut ahead,
                                &mut chunk,
                                &mut wanted,
                            ) {
                                Some(next) => chunk = next,
                                None => {
                                    // Where the consumer stands, unless the batch held
                                    // more: those are taken off its queue, unread.
                                    refetcher.at = (i == last).then_some((p, offset + 1));
                                    break 'fetch;
                                }
                            }
                        }
                    }
                    Item::Record { .. } => {}
                    // What is left of the partition is less than the chunk measured: the
                    // cluster deleted records since.
                    Item::EndOfPartition { .. } => {
                        let bytes = self.store_refetched(p, index + ahead, &mut chunk);
                        wanted.get_or_insert(bytes);
                        break 'fetch;
                    }
                    Item::Error(e) => return Err(format!("{e:?}")),
                }
            }
        }
        match wanted {
            Some(bytes) => Ok(bytes),
            // The deadline passed before the chunk was whole: what came of it, a gap before.
            None => Ok(self.store_refetched(p, index, &mut chunk)),
        }
    }

    /// Keeps chunk `index + ahead`, now whole, as the one asked for if it is the first,
    /// and moves on: the next chunk to fetch, unless read-ahead is done or it is cached.
    fn store_and_go_on(
        &self,
        p: u32,
        index: usize,
        ahead: &mut usize,
        chunk: &mut Refetch,
        wanted: &mut Option<Arc<Vec<u8>>>,
    ) -> Option<Refetch> {
        let bytes = self.store_refetched(p, index + *ahead, chunk);
        wanted.get_or_insert(bytes);
        *ahead += 1;
        (*ahead < READ_AHEAD)
            .then(|| self.chunk_to_fetch(p, index + *ahead, false))
            .flatten()
    }

    /// Keeps a re-fetched chunk's lines (cut to its length) and returns them.
    fn store_refetched(&self, p: u32, index: usize, chunk: &mut Refetch) -> Arc<Vec<u8>> {
        let mut lines = std::mem::take(&mut chunk.lines);
        lines.truncate(chunk.len as usize);
        let bytes = Arc::new(lines);
        let mut tracked = self.tracked.lock();
        tracked.partitions[p as usize].chunks[index].bytes = Some(bytes.clone());
        tracked.cached.push_back((p, index));
        tracked.cached_bytes += bytes.len() as u64;
        evict(&mut tracked);
        bytes
    }

    /// What a re-fetch of chunk `index` of partition `p` needs: its offsets, length and
    /// format; `None` past the closed chunks, or for one cached already (unless `always`).
    fn chunk_to_fetch(&self, p: u32, index: usize, always: bool) -> Option<Refetch> {
        let tracked = self.tracked.lock();
        let chunks = &tracked.partitions[p as usize].chunks;
        let chunk = chunks.get(index)?;
        if !always && chunk.bytes.is_some() {
            return None;
        }
        let len = chunk.end - chunk.start;
        Some(Refetch {
            first: chunk.first_offset,
            next: chunk.next_offset,
            len,
            format: tracked.formats[chunk.format].clone(),
            lines: Vec::with_capacity(len as usize),
        })
    }
}

/// A chunk being fetched again: what it held when measured, and its lines so far.
struct Refetch {
    first: i64,
    next: i64,
    len: u64,
    format: OwnedFormat,
    lines: Vec<u8>,
}

/// The consumer that re-fetches chunks, and where it stands: the partition and the offset
/// its next record has, when a re-fetch ended at a chunk's end.
struct Refetcher {
    consumer: BaseConsumer,
    at: Option<(u32, i64)>,
}

fn run_at(runs: &[Run], pos: u64) -> Option<&Run> {
    let index = runs.partition_point(|r| r.topic_pos + r.len <= pos);
    runs.get(index)
}

/// Drops the bytes of the oldest cached chunks while over the budget.
fn evict(tracked: &mut Tracked) {
    while tracked.cached_bytes > CACHE_BYTES {
        let Some((p, index)) = tracked.cached.pop_front() else {
            break;
        };
        if let Some(bytes) = tracked.partitions[p as usize].chunks[index].bytes.take() {
            tracked.cached_bytes -= bytes.len() as u64;
        }
    }
}

/// The tracker: consumes every partition from its log start while the view lives.
fn track(view: &Weak<TopicView>) {
    let Some(first) = view.upgrade() else { return };
    let consumer = match first.settings.consumer() {
        Ok(consumer) => consumer,
        Err(e) => {
            first.tracked.lock().failure = Some(e.to_string());
            first.grew.notify_all();
            return;
        }
    };
    let topic = first.topic.clone();
    drop(first);
    let mut assigned = 0u32;
    loop {
        let Some(view) = view.upgrade() else { return };
        if view.stop.load(Ordering::Acquire) {
            return;
        }
        let wanted = view.partitions.load(Ordering::Acquire);
        if wanted > assigned {
            // The whole assignment again, each partition from where the tracker is: a
            // consumer without a group cannot add partitions incrementally.
            let mut tracked = view.tracked.lock();
            tracked
                .partitions
                .resize_with(wanted as usize, PartitionTrack::default);
            let mut all = TopicPartitionList::new();
            for (p, track) in tracked.partitions.iter().enumerate() {
                let resume = track.end_of_partition.unwrap_or(0).max(track.next_offset);
                let from = if resume > 0 {
                    Offset::Offset(resume)
                } else {
                    Offset::Beginning
                };
                let added = all.add_partition_offset(&topic, p as i32, from);
                debug_assert!(added.is_ok(), "a partition's start offset is valid");
            }
            drop(tracked);
            if let Err(e) = consumer.assign(&all) {
                view.tracked.lock().failure = Some(e.to_string());
                view.grew.notify_all();
                return;
            }
            assigned = wanted;
        }
        // What has arrived is taken in one hold of the lock and told to readers once: a
        // reader then gets a batch's lines in one read, not a line per wake-up.
        let batch = Batch::take(&consumer, POLL, TRACK_BATCH);
        if batch.is_empty() {
            continue;
        }
        let mut tracked = view.tracked.lock();
        for item in batch.items() {
            match item {
                Item::Record {
                    partition,
                    offset,
                    key,
                    value,
                } if (partition as u32) < assigned => {
                    measure(&mut tracked, partition as u32, offset, key, value);
                }
                Item::Record { .. } => {}
                Item::EndOfPartition { partition, end } => {
                    if let Some(track) = tracked.partitions.get_mut(partition as usize) {
                        track.end_of_partition = Some(end.max(track.next_offset));
                    }
                }
                // Transient (a leader moving, a broker down): the client retries on its own.
                Item::Error(e) => tracing::debug!("view of {topic}: {e:?}"),
            }
        }
        drop(tracked);
        view.grew.notify_all();
    }
}

/// Gives the record at `offset` of partition `p` its line's positions.
fn measure(tracked: &mut Tracked, p: u32, offset: i64, key: Option<&[u8]>, value: Option<&[u8]>) {
    let format_index = tracked.formats.len() - 1;
    let format = tracked.formats[format_index].as_format();
    let line_len = format.line_len(key, value);
    let track = &mut tracked.partitions[p as usize];
    if offset < track.next_offset {
        return; // seen already (a re-delivery after a leader change)
    }
    let open = track.chunks.last().is_some_and(|c| {
        c.end - c.start < CHUNK_BYTES && c.format == format_index && c.bytes.is_some()
    });
    let mut closed = None;
    if !open {
        if track.chunks.last().is_some() {
            closed = Some(track.chunks.len() - 1);
        }
        track.chunks.push(Chunk {
            first_offset: offset,
            next_offset: offset,
            start: track.end,
            end: track.end,
            format: format_index,
            bytes: Some(Arc::new(Vec::with_capacity(
                CHUNK_BYTES as usize + line_len as usize,
            ))),
        });
    }
    let chunk = track.chunks.last_mut().expect("pushed above");
    let bytes = Arc::make_mut(chunk.bytes.as_mut().expect("the open chunk has its bytes"));
    format.render(key, value, bytes);
    chunk.next_offset = offset + 1;
    chunk.end += line_len;
    let partition_pos = track.end;
    track.end += line_len;
    track.next_offset = offset + 1;
    track.end_of_partition = None;
    match tracked.runs.last_mut() {
        Some(run) if run.partition == p && run.partition_pos + run.len == partition_pos => {
            run.len += line_len;
        }
        _ => tracked.runs.push(Run {
            partition: p,
            topic_pos: tracked.topic_end,
            partition_pos,
            len: line_len,
        }),
    }
    tracked.topic_end += line_len;
    if let Some(index) = closed {
        let size = tracked.partitions[p as usize].chunks[index]
            .bytes
            .as_ref()
            .map_or(0, |b| b.len());
        tracked.cached.push_back((p, index));
        tracked.cached_bytes += size as u64;
        evict(tracked);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view_of(partitions: u32) -> TopicView {
        let view = TopicView::new(
            "t",
            Arc::new(ClientSettings::new("127.0.0.1:1", Vec::new())),
            partitions,
        );
        let mut tracked = view.tracked.lock();
        tracked.formats.push(OwnedFormat::default());
        tracked
            .partitions
            .resize_with(partitions as usize, PartitionTrack::default);
        drop(tracked);
        view
    }

    fn add(view: &TopicView, p: u32, offset: i64, value: &str) {
        measure(
            &mut view.tracked.lock(),
            p,
            offset,
            None,
            Some(value.as_bytes()),
        );
    }

    fn read_all(view: &TopicView, stream: Stream) -> String {
        let (bytes, _) = view.read_at(stream, 0, usize::MAX >> 1).unwrap();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn the_topic_stream_is_the_partitions_lines_in_the_order_they_arrived() {
        let view = view_of(2);
        add(&view, 0, 0, "a");
        add(&view, 0, 1, "b");
        add(&view, 1, 0, "x");
        add(&view, 0, 2, "c");
        add(&view, 1, 5, "y"); // offsets 1-4: markers or compacted, never delivered
        assert_eq!(read_all(&view, Stream::Topic), "a\nb\nx\nc\ny\n");
        assert_eq!(read_all(&view, Stream::Partition(0)), "a\nb\nc\n");
        assert_eq!(read_all(&view, Stream::Partition(1)), "x\ny\n");
        let tracked = view.tracked.lock();
        assert_eq!(tracked.topic_end, 10);
        assert_eq!(tracked.runs.len(), 4, "a run per change of partition");
        assert_eq!(tracked.partitions[1].next_offset, 6);
    }

    #[test]
    fn a_record_delivered_again_keeps_its_one_place() {
        let view = view_of(1);
        add(&view, 0, 0, "a");
        add(&view, 0, 1, "b");
        add(&view, 0, 1, "b"); // a re-delivery after a leader change
        assert_eq!(read_all(&view, Stream::Topic), "a\nb\n");
    }

    #[test]
    fn a_read_from_the_middle_of_a_line_and_across_runs_gives_the_bytes_there() {
        let view = view_of(2);
        add(&view, 0, 0, "hello");
        add(&view, 1, 0, "world");
        let (bytes, next) = view.read_at(Stream::Topic, 3, 5).unwrap();
        assert_eq!(bytes, b"lo\nwo");
        assert_eq!(next, 8);
    }

    #[test]
    fn chunks_close_at_their_size_and_the_cache_keeps_within_its_budget() {
        let view = view_of(1);
        let line = "v".repeat(1023);
        let records = (2 * CACHE_BYTES / 1024) as i64;
        for offset in 0..records {
            add(&view, 0, offset, &line);
        }
        let tracked = view.tracked.lock();
        let chunks = &tracked.partitions[0].chunks;
        assert_eq!(chunks.len() as u64, 2 * CACHE_BYTES / CHUNK_BYTES);
        assert!(chunks.iter().all(|c| c.end - c.start == CHUNK_BYTES));
        assert!(tracked.cached_bytes <= CACHE_BYTES);
        assert!(
            chunks[0].bytes.is_none(),
            "the oldest chunk's bytes were dropped"
        );
        assert!(
            chunks.last().unwrap().bytes.is_some(),
            "the open chunk keeps its bytes"
        );
    }

    #[test]
    fn lines_the_cluster_deleted_since_leave_a_gap_that_a_reader_skips() {
        let view = Arc::new(view_of(1));
        view.started.store(true, Ordering::Release); // no tracker: the test is it
        add(&view, 0, 0, "old");
        add(&view, 0, 1, "new");
        // What a re-fetch finds once retention deleted offset 0: the rest of the chunk.
        view.tracked.lock().partitions[0].chunks[0].bytes = Some(Arc::new(b"new\n".to_vec()));
        let mut cursor = ViewCursor::default();
        let ends = || Ok(vec![2]);
        let bytes = view
            .read(
                Stream::Topic,
                &mut cursor,
                0,
                100,
                ends,
                OwnedFormat::default,
            )
            .unwrap();
        assert_eq!(bytes, b"new\n");
        assert_eq!((cursor.kernel_pos, cursor.stream_pos), (4, 8));
        // The kernel asks for the offset after what it got: the stream's end, not "w\n".
        let more = view.read(
            Stream::Topic,
            &mut cursor,
            4,
            100,
            ends,
            OwnedFormat::default,
        );
        assert_eq!(more.unwrap(), b"");
    }
}
