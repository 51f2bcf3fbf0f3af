//! Every bound and tick the engine chooses, in one place (TigerBeetle's `constants.zig`),
//! each with why its value, and compile-time assertions of how they relate to each other
//! and to the on-disk format. What the format imposes (entry sizes, the largest segment
//! file, the largest relative offset) is in [`format`](super::format); Kafka's config
//! defaults and validators, which a user may change, are in [`config`](super::config).
//! Nothing here runs: a wrong relation fails the build.

use super::format::{
    BATCH_HEADER_BYTES, MAX_BATCH_BYTES, MAX_SEGMENT_FILE_BYTES, OFFSET_INDEX_ENTRY_BYTES,
    TIME_INDEX_ENTRY_BYTES,
};

// --- Names ---

/// Kafka's topic name limit (`Topic.MAX_NAME_LENGTH`): a partition directory
/// `TOPIC-N` must fit a file name.
pub(crate) const MAX_TOPIC_NAME_CHARS: usize = 249;
/// The longest file name (bytes) Linux filesystems take (`NAME_MAX`).
pub(crate) const MAX_FILE_NAME_BYTES: usize = 255;
/// The most partitions a topic may have. Kafka sets no bound of its own, but its
/// partition directory `TOPIC-N` must fit a file name: with 249-character topic names,
/// `-9999` is the longest suffix that does, so a larger count would work for some names
/// and fail half way for others. Far above what one machine serves well.
pub(crate) const MAX_PARTITIONS: u32 = 10_000;
const fn decimal_digits(mut n: u32) -> usize {
    let mut digits = 1;
    while n >= 10 {
        n /= 10;
        digits += 1;
    }
    digits
}
// Every partition directory name fits (topic names are ASCII, so chars are bytes).
const _: () =
    assert!(MAX_TOPIC_NAME_CHARS + 1 + decimal_digits(MAX_PARTITIONS - 1) <= MAX_FILE_NAME_BYTES);

// --- Appends ---

/// The largest batch an append writes (`max.message.bytes` and the segment size may make
/// it smaller): the read path holds one batch in memory, so this bounds what one read
/// needs; 1 MiB is about Kafka's default `max.message.bytes` (1,048,588), so a default
/// topic's batches are already this size.
pub(crate) const MAX_APPEND_BATCH_BYTES: u64 = 1 << 20;
/// Kafka's floor of `segment.bytes` and `log.segment.bytes` ("Value must be at least
/// 1048576"); the test-only `internal.segment.bytes` goes below it.
pub(crate) const MIN_SEGMENT_BYTES: i64 = 1 << 20;
// A batch of the largest size fits the smallest segment a user can configure, so the cap
// never makes a record need a segment of its own beyond `segment.bytes`.
const _: () = assert!(MAX_APPEND_BATCH_BYTES <= MIN_SEGMENT_BYTES as u64);
// Every batch an append writes fits a segment file, and recovery decodes it.
const _: () = assert!(MAX_APPEND_BATCH_BYTES <= MAX_SEGMENT_FILE_BYTES);
const _: () = assert!(MAX_APPEND_BATCH_BYTES <= MAX_BATCH_BYTES as u64);
// A batch at the cap has room for its header and at least one line.
const _: () = assert!(MAX_APPEND_BATCH_BYTES > BATCH_HEADER_BYTES as u64);

/// Parsed records the append path's per-thread buffer keeps room for between writes
/// (2 MiB of `PendingRecord`s): a 1 MiB write of 100-byte lines holds 10,000 of them, so
/// ordinary writes never grow it, while one huge write does not pin its memory forever.
pub(crate) const PARSED_RECORDS_KEPT: usize = 1 << 16;

/// Bytes of batch buffers the keyed append path's per-thread builders keep between
/// writes ([`KeyedBatches`](super::keyed_batches::KeyedBatches)): a keyed write of
/// `max_write` (1 MiB) builds about that much over its partitions' batches, each buffer
/// up to twice what it holds (it grows by doubling), so ordinary writes reuse theirs,
/// while a write to thousands of partitions does not pin a builder for each.
pub(crate) const KEYED_BATCH_BYTES_KEPT: usize = 4 * MAX_APPEND_BATCH_BYTES as usize;

/// The size from which a keyed write to a topic of several partitions is built and
/// appended on two threads ([`KeyedBuild`](super::keyed_batches::KeyedBuild)): below it,
/// the hand-over to the append helper (a wake-up, some 10-30 µs) costs more than it saves.
pub(crate) const PARALLEL_KEYED_WRITE_BYTES: usize = 32 << 10;

/// Past renderings of `log` a topic keeps the bytes of (its `renderings` file): lines
/// appended under older ones still read at their length, with the bytes of a kept
/// rendering of the same lengths, else `?`s.
pub(crate) const PAST_RENDERINGS_KEPT: usize = 64;

// --- Producers ---

/// How many bytes of batches a log's open maps at a time while it replays the producer
/// state after the latest snapshot: only headers are read, so the size only bounds how
/// much of the segment is mapped at once.
pub(crate) const PRODUCER_REPLAY_READ_BYTES: usize = 1 << 20;
/// Kafka's internal `producer.id.expiration.check.interval.ms` default: how often idle
/// producers are looked for (their expiry is `producer.id.expiration.ms`, a day).
pub(crate) const PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS: i64 = 600_000;
/// Kafka's `ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`: producer ids are handed out from
/// blocks this large, each recorded on disk before its first id is given, so a restart
/// never reuses one and costs at most one unused block.
pub(crate) const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

// --- Indexes ---

/// The smallest `segment.index.bytes` an index accepts: room for one entry of the larger
/// index (`AbstractIndex`'s "Invalid max index size"); Kafka's `atLeast(4)` comes first.
pub(crate) const MIN_INDEX_BYTES: i64 = TIME_INDEX_ENTRY_BYTES as i64;
const _: () = assert!(MIN_INDEX_BYTES as usize >= OFFSET_INDEX_ENTRY_BYTES);
const _: () = assert!(MIN_INDEX_BYTES as usize >= TIME_INDEX_ENTRY_BYTES);

/// The page size assumed when rounding the `fallocate` ranges of a mapped index and the
/// `madvise` ranges of a read mapping: 4 KiB is the page of the platforms kpfs runs on.
/// On a larger page nothing breaks: `fallocate` takes any range, and a misaligned
/// `madvise` fails and is ignored (the pages stay the process's until unmapped).
pub(crate) const PAGE_BYTES: usize = 4096;

// --- Reads ---

/// Growth step of a segment's read mapping: one `mmap` per 64 MiB appended, so a
/// growing active segment is remapped rarely and a mount holds about one mapping per
/// topic (`vm.max_map_count` is 65,530).
pub(crate) const READ_MAP_STEP_BYTES: u64 = 64 << 20;
const _: () = assert!(READ_MAP_STEP_BYTES.is_multiple_of(PAGE_BYTES as u64));
// A step holds whole batches of the largest size an append writes many times over.
const _: () = assert!(READ_MAP_STEP_BYTES >= 16 * MAX_APPEND_BATCH_BYTES);

/// The fewest and the most bytes of batches one read borrows from a mapping (whole
/// batches, so a read may take more), and the most its output reserves ahead: FUSE reads
/// are at most 1 MiB, so 4 MiB is never the limit for one, and 8 KiB keeps a small read
/// from verifying batches one at a time.
pub(crate) const READ_MIN_BYTES: usize = 8 << 10;
pub(crate) const READ_MAX_BYTES: usize = 4 << 20;
const _: () = assert!(READ_MIN_BYTES <= READ_MAX_BYTES);
const _: () = assert!(READ_MAX_BYTES as u64 >= MAX_APPEND_BATCH_BYTES);

/// Bytes of batches one step of a repositioning scan borrows (from the index entry
/// below the target to the record): an index interval (4 KiB by default) many times over.
pub(crate) const REPOSITION_SCAN_BYTES: usize = 256 << 10;

/// Reads up to this size are kept for re-reads after a short seek back (bash `read`,
/// `head`): a few of the kernel's 4 KiB to 128 KiB reads.
pub(crate) const REPLAY_LIMIT_BYTES: usize = 64 << 10;

/// How often one read starts again on a fresh snapshot after a segment vanished under
/// it: each retry follows a deletion or a swap that completed meanwhile, so more than a
/// few in a row means something else is wrong.
pub(crate) const STALE_READ_RETRIES: u32 = 3;

// --- Config files ---

/// Longer config lines are refused rather than buffered: no config value comes near it.
pub(crate) const MAX_CONFIG_LINE_BYTES: usize = 1 << 20;

// --- Errors and events ---

/// Bytes of a user's value an error message shows. Errors are kept (`.kpfs/errors`,
/// `events`) and printed; one refused 1 MiB line must not make a 1 MiB error.
pub(crate) const EXCERPT_BYTES: usize = 200;
const _: () = assert!((EXCERPT_BYTES as u64) < MAX_APPEND_BATCH_BYTES);

/// How many refused operations `.kpfs/errors` remembers: enough for an operator to see
/// a burst, bounded so a misbehaving writer cannot grow the daemon (about 1,000 of at
/// most a few hundred bytes each, thanks to [`EXCERPT_BYTES`]).
pub(crate) const MAX_REJECTIONS: usize = 1000;
/// How many events a topic remembers (`TOPIC/events`): lines of about 100 bytes, so a
/// few hundred KiB per topic, and thousands of rolls, deletions and passes to look back on.
pub(crate) const MAX_EVENTS: usize = 4096;

// --- Cleaner ---

/// The least memory of a cleaner thread's offset map: Kafka refuses a
/// `log.cleaner.dedupe.buffer.size` that gives a thread no more than 1 MiB
/// (`LogCleaner.validateReconfiguration`), and the map is sized from it.
pub(crate) const MIN_OFFSET_MAP_BYTES: i64 = 1 << 20;
/// The most: Kafka sizes the map with an `Int` (`math.min(dedupeBufferSize / numThreads,
/// Int.MaxValue)`).
pub(crate) const MAX_OFFSET_MAP_BYTES: i64 = i32::MAX as i64;
const _: () = assert!(MIN_OFFSET_MAP_BYTES < MAX_OFFSET_MAP_BYTES);

/// The I/O throttle measures its rate over at least this window (Kafka's `Throttler`
/// `checkIntervalMs` of the cleaner), so short bursts are not throttled.
pub(crate) const THROTTLE_CHECK_INTERVAL_MS: u64 = 300;
/// The throttle sleeps in slices of this, so a restart of the cleaner threads (Kafka's
/// `checkDone`) never waits for a long sleep.
pub(crate) const THROTTLE_SLEEP_SLICE_MS: u64 = 50;
const _: () = assert!(THROTTLE_SLEEP_SLICE_MS < THROTTLE_CHECK_INTERVAL_MS);

// --- Background threads ---

/// The `kpfs-scheduler` thread's tick: the resolution of `file.delete.delay.ms`,
/// `flush.ms` and the flush of rolled segments; short enough that a test waiting for a
/// deletion polls only a few times, long enough that an idle mount costs nothing.
pub(crate) const SCHEDULER_TICK_MS: i64 = 100;
/// The longest one wait of a background thread (the retention interval, an idle
/// cleaner's backoff): a longer configured interval is cut to it, so retention looks at
/// least once a minute, even under Kafka's 5-minute default
/// `log.retention.check.interval.ms`.
pub(crate) const MAX_BACKGROUND_WAIT_MS: i64 = 60_000;
const _: () = assert!(0 < SCHEDULER_TICK_MS && SCHEDULER_TICK_MS < MAX_BACKGROUND_WAIT_MS);

// --- Stream index ---

/// `.log` bytes between two lookup entries of a segment's stream index (entries where a
/// run of records starts come on top). A lookup by stream position scans at most this
/// much; the index keeps every entry in memory, 28 bytes per 64 KiB of log.
pub(crate) const STREAM_INDEX_INTERVAL_BYTES: u64 = 64 << 10;

/// Stream index descriptors the process keeps open between entries (a segment being
/// written gets one per 64 KiB of appends, and each append of a keyed write to 12
/// partitions is about 87 KiB: opening the file for each entry cost more than writing
/// it). A mount otherwise
/// holds one descriptor per partition, and this kind of machine caps a process at 20,000
/// that even root cannot raise: 1,000 topics of 12 partitions hold 12,000, and this
/// budget keeps the rest below the cap. Segments past the budget open their file per
/// entry, as all did before.
pub(crate) const KEPT_STREAM_INDEX_FILES: usize = 1024;

// --- Shutdown ---

/// Threads closing topics at shutdown. A close waits on fsyncs of its own files and the
/// disk serves several at once: unmounting 2,000 idle topics took 8.8 s one after the
/// other and 0.6 s with 8 threads on the machines here.
pub(crate) const SHUTDOWN_CLOSE_THREADS: usize = 8;
