//! The batches of a keyed write to a topic's `log`, built in one pass over its records in
//! write order: each record is encoded into the batch of its key's partition as it comes.
//! The write's lines are read once, front to back, and no record is first copied to a
//! place sorted by partition; sorting the records by partition, then building each
//! partition's batch from lines scattered over the write (a cache miss per line once the
//! write is out of L2), was most of what a keyed write to 12 partitions cost beyond one
//! to a single partition (docs/PERFORMANCE.md, issue 26).
//!
//! A large write's partitions are built by two builders at once ([`KeyedBuild`]), each
//! taking every other partition: the encoding of the records, the largest part of a
//! keyed write's cost, then takes half the time on the writer's thread, which one
//! partition's append (one batch, built on that thread) cannot split. Each partition's
//! batches are the same, byte for byte, whichever builder made them.
//!
//! A batch is built before its partition's log end is known: its offsets count from 0
//! and [`Log::append_built`](super::log::Log::append_built) moves it to the log end under
//! the writer lock. Its records carry the append's time, taken before the build.

use super::format::BatchBuilder;
use super::limits::PARALLEL_KEYED_WRITE_BYTES;
use super::log::{push_parsed, BuiltBatch, PendingRecord, WriteBytes};
use super::parallel;

/// `KeyedBatches::slot` of a partition without records in the write.
const NO_PART: usize = usize::MAX;

/// One partition's part of a keyed write: its records' batches, in write order.
#[derive(Debug)]
pub(crate) struct Part {
    pub(crate) partition: u32,
    /// The index in the write of the part's first record: parts are appended in this
    /// order.
    first_record: usize,
    /// `..filled` hold this write's records; the rest are kept for their buffers.
    batches: Vec<BuiltBatch>,
    filled: usize,
}

impl Part {
    /// The batches of this write.
    pub(crate) fn batches(&mut self) -> &mut [BuiltBatch] {
        &mut self.batches[..self.filled]
    }

    /// Bytes of the `log` stream the part's records take.
    pub(crate) fn stream_len(&self) -> u64 {
        self.batches[..self.filled]
            .iter()
            .map(|b| b.stream_len)
            .sum()
    }

    /// Adds `r` to the part's last batch, or to a new one when the last would grow past
    /// `limit`.
    fn push(&mut self, data: WriteBytes<'_>, r: &PendingRecord, timestamp: i64, limit: usize) {
        let last = &mut self.batches[self.filled - 1];
        let offset = u64::from(last.builder.record_count());
        let batch = if push_parsed(&mut last.builder, data, r, offset, timestamp, limit) {
            last
        } else {
            let batch = self.next_batch(timestamp);
            let pushed = push_parsed(&mut batch.builder, data, r, 0, timestamp, limit);
            debug_assert!(pushed, "a batch's first record always goes in");
            batch
        };
        batch.stream_len += r.line_len as u64 + 1;
    }

    /// Starts the part's next batch, empty.
    fn next_batch(&mut self, timestamp: i64) -> &mut BuiltBatch {
        if self.filled == self.batches.len() {
            self.batches.push(BuiltBatch {
                builder: BatchBuilder::new(0),
                stream_len: 0,
            });
        }
        let batch = &mut self.batches[self.filled];
        self.filled += 1;
        batch.builder.reset(0, Some(timestamp));
        batch.stream_len = 0;
        batch
    }
}

/// The parts of one keyed write, their buffers reused from write to write (one per
/// FUSE thread, as the parsed records are): building allocates nothing once warm.
#[derive(Debug, Default)]
pub(crate) struct KeyedBatches {
    /// Per partition of the topic, its index in `parts` for this write ([`NO_PART`]:
    /// none yet); only the entries of this write's parts are set, and they are reset
    /// before the next.
    slot: Vec<usize>,
    /// `..used`: the write's parts, in the order of their first records; the rest are
    /// kept for their buffers.
    parts: Vec<Part>,
    used: usize,
}

impl KeyedBatches {
    /// Builds the batches of the `records` whose partition, `target_of(index, record)`
    /// (below `partitions`), `takes` accepts, in write order, stamped `timestamp`; a
    /// batch grows while it stays within `limit` bytes (a first record always goes in),
    /// as [`Log::append`](super::log::Log::append) cuts a write's batches.
    #[allow(clippy::too_many_arguments)]
    fn build(
        &mut self,
        data: WriteBytes<'_>,
        records: &[PendingRecord],
        partitions: u32,
        target_of: impl Fn(usize, &PendingRecord) -> u32,
        takes: impl Fn(u32) -> bool,
        timestamp: i64,
        limit: usize,
    ) {
        self.clear();
        if self.slot.len() < partitions as usize {
            self.slot.resize(partitions as usize, NO_PART);
        }
        for (i, r) in records.iter().enumerate() {
            let p = target_of(i, r);
            if !takes(p) {
                continue;
            }
            let mut at = self.slot[p as usize];
            if at == NO_PART {
                at = self.start_part(p, i, timestamp);
                self.slot[p as usize] = at;
            }
            self.parts[at].push(data, r, timestamp, limit);
        }
    }

    /// The write's parts, in the order of their first records.
    pub(crate) fn parts(&mut self) -> &mut [Part] {
        &mut self.parts[..self.used]
    }

    /// Forgets the write and frees buffers past `keep` bytes, so one write to thousands
    /// of partitions does not pin a builder for each.
    pub(crate) fn shrink(&mut self, keep: usize) {
        self.clear();
        let mut kept = 0;
        for part in &mut self.parts {
            let fit = part
                .batches
                .iter()
                .take_while(|b| {
                    kept += b.builder.capacity();
                    kept <= keep
                })
                .count();
            part.batches.truncate(fit);
        }
        self.parts.retain(|part| !part.batches.is_empty());
    }

    fn clear(&mut self) {
        for part in &self.parts[..self.used] {
            self.slot[part.partition as usize] = NO_PART;
        }
        self.used = 0;
    }

    /// The next part, for partition `partition` from record `first_record` on, with an
    /// empty batch; returns its index.
    fn start_part(&mut self, partition: u32, first_record: usize, timestamp: i64) -> usize {
        if self.used == self.parts.len() {
            self.parts.push(Part {
                partition,
                first_record,
                batches: Vec::new(),
                filled: 0,
            });
        }
        let part = &mut self.parts[self.used];
        part.partition = partition;
        part.first_record = first_record;
        part.filled = 0;
        part.next_batch(timestamp);
        self.used += 1;
        self.used - 1
    }
}

/// Which of the two builders of a [`KeyedBuild`] made a part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Builder {
    /// The writer's thread's: the even partitions of a large write, all of a small one.
    Here,
    /// The helper's: the odd partitions of a large write.
    There,
}

/// A part of a [`KeyedBuild`]: its builder and its index among that builder's parts.
pub(crate) type PartRef = (Builder, usize);

/// The batches of one keyed write, built by two [`KeyedBatches`] at once when the write is
/// large ([`PARALLEL_KEYED_WRITE_BYTES`]): the writer's thread and the append helper
/// ([`parallel::join`]) first find the partitions of half the records each, then build
/// the even partitions' batches and the odd ones'. Each record's key is hashed once, and
/// each builder reads only its own records' lines. A small write is built on the writer's
/// thread alone: handing work over costs a wake-up, more than a few records' encoding.
#[derive(Debug)]
pub(crate) struct KeyedBuild {
    here: KeyedBatches,
    there: KeyedBatches,
    /// Of a split build, each record's partition.
    targets: Vec<u32>,
    /// The size from which a write is split ([`PARALLEL_KEYED_WRITE_BYTES`]; tests set
    /// their own).
    split_from: usize,
}

impl Default for KeyedBuild {
    fn default() -> Self {
        KeyedBuild {
            here: KeyedBatches::default(),
            there: KeyedBatches::default(),
            targets: Vec::new(),
            split_from: PARALLEL_KEYED_WRITE_BYTES,
        }
    }
}

impl KeyedBuild {
    /// Builds the batches of `records`, each to partition `target_of(record)` (below
    /// `partitions`), stamped `timestamp`, cut at `limit` bytes as
    /// [`Log::append`](super::log::Log::append) cuts a write's batches.
    pub(crate) fn build(
        &mut self,
        data: WriteBytes<'_>,
        records: &[PendingRecord],
        partitions: u32,
        target_of: impl Fn(&PendingRecord) -> u32 + Sync,
        timestamp: i64,
        limit: usize,
    ) {
        let split = partitions > 1 && data.len() >= self.split_from;
        let (here, there) = (&mut self.here, &mut self.there);
        if !split {
            let target_of = |_, r: &PendingRecord| target_of(r);
            here.build(
                data,
                records,
                partitions,
                target_of,
                |_| true,
                timestamp,
                limit,
            );
            there.clear();
            return;
        }
        self.targets.clear();
        self.targets.resize(records.len(), 0);
        let half = records.len() / 2;
        let (first, second) = self.targets.split_at_mut(half);
        let find = |targets: &mut [u32], records: &[PendingRecord]| {
            for (target, r) in targets.iter_mut().zip(records) {
                *target = target_of(r);
            }
        };
        parallel::join(
            || find(first, &records[..half]),
            || find(second, &records[half..]),
        );
        let targets = &self.targets;
        let build = |builder: &mut KeyedBatches, odd: bool| {
            let target_of = |i: usize, _: &PendingRecord| targets[i];
            let takes = |p: u32| (p % 2 == 1) == odd;
            builder.build(
                data, records, partitions, target_of, takes, timestamp, limit,
            );
        };
        parallel::join(|| build(here, false), || build(there, true));
    }

    /// The write's parts, each builder's in the order of their first records.
    pub(crate) fn parts(&mut self) -> (&mut [Part], &mut [Part]) {
        (self.here.parts(), self.there.parts())
    }

    /// The write's parts in the order of their first records, the order of their appends.
    pub(crate) fn in_write_order(&self) -> Vec<PartRef> {
        let here = &self.here.parts[..self.here.used];
        let there = &self.there.parts[..self.there.used];
        let (mut h, mut t) = (0, 0);
        let mut order = Vec::with_capacity(here.len() + there.len());
        while h < here.len() || t < there.len() {
            let from_here = t == there.len()
                || (h < here.len() && here[h].first_record < there[t].first_record);
            if from_here {
                order.push((Builder::Here, h));
                h += 1;
            } else {
                order.push((Builder::There, t));
                t += 1;
            }
        }
        order
    }

    /// A part of the write.
    pub(crate) fn part(&mut self, (builder, index): PartRef) -> &mut Part {
        match builder {
            Builder::Here => &mut self.here.parts()[index],
            Builder::There => &mut self.there.parts()[index],
        }
    }

    /// Forgets the write and frees buffers past `keep` bytes in all.
    pub(crate) fn shrink(&mut self, keep: usize, records_kept: usize) {
        self.here.shrink(keep / 2);
        self.there.shrink(keep / 2);
        self.targets.clear();
        self.targets.shrink_to(records_kept);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::format::BatchEnd;
    use proptest::prelude::*;

    const NOW: i64 = 1_700_000_000_000;

    /// A write's batches: per partition, in the order of their first records, each batch
    /// finished (bytes) with the stream bytes its records take.
    type Batches = Vec<(u32, Vec<(Vec<u8>, u64)>)>;

    /// A write of `lines` as `key:value` lines (`None`: a line without a key), with the
    /// records the line protocol would find in it.
    fn write_of(lines: &[(Option<Vec<u8>>, Vec<u8>)]) -> (Vec<u8>, Vec<PendingRecord>) {
        let (mut data, mut records) = (Vec::new(), Vec::new());
        for (key, value) in lines {
            let line_start = data.len();
            if let Some(key) = key {
                data.extend_from_slice(key);
                data.push(b':');
            }
            data.extend_from_slice(value);
            records.push(PendingRecord {
                line_start,
                line_len: data.len() - line_start,
                key_len: key.as_ref().map_or(-1, |k| k.len() as i64),
                value_len: value.len() as i64,
            });
            data.push(b'\n');
        }
        (data, records)
    }

    /// The reference: the records grouped by partition (stably), each group's batches
    /// cut as a write of those records alone to one partition cuts them, at offset 0.
    fn grouped(
        data: WriteBytes<'_>,
        records: &[PendingRecord],
        target_of: impl Fn(&PendingRecord) -> u32,
        limit: usize,
    ) -> Batches {
        let mut groups: Vec<(u32, Vec<PendingRecord>)> = Vec::new();
        for r in records {
            let p = target_of(r);
            match groups.iter_mut().find(|(q, _)| *q == p) {
                Some((_, group)) => group.push(*r),
                None => groups.push((p, vec![*r])),
            }
        }
        groups
            .into_iter()
            .map(|(p, group)| {
                let mut batches = Vec::new();
                let mut offset = 0;
                let mut rest = &group[..];
                while !rest.is_empty() {
                    let mut builder = BatchBuilder::new(offset);
                    builder.reset(offset, Some(NOW));
                    let mut stream = 0;
                    let mut taken = 0;
                    for r in rest {
                        let at = offset + taken as u64;
                        if !push_parsed(&mut builder, data, r, at, NOW, limit) {
                            break;
                        }
                        stream += r.line_len as u64 + 1;
                        taken += 1;
                    }
                    offset += taken as u64;
                    rest = &rest[taken..];
                    batches.push((builder.finish(None, None), stream));
                }
                (p, batches)
            })
            .collect()
    }

    /// What `keyed` built, in write order, each batch moved to its place after the
    /// part's earlier ones (from offset 0) and finished, in the reference's shape.
    fn built(keyed: &mut KeyedBuild) -> Batches {
        keyed
            .in_write_order()
            .into_iter()
            .map(|at| {
                let part = keyed.part(at);
                let mut offset = 0;
                let batches = part
                    .batches()
                    .iter_mut()
                    .map(|b| {
                        b.builder.move_to(offset);
                        offset += u64::from(b.builder.record_count());
                        let bytes = b.builder.finish_parts(&BatchEnd::PLAIN).unwrap().to_vec();
                        (bytes, b.stream_len)
                    })
                    .collect();
                (part.partition, batches)
            })
            .collect()
    }

    fn lines() -> impl Strategy<Value = Vec<(Option<Vec<u8>>, Vec<u8>)>> {
        let key = prop::option::weighted(0.9, prop::collection::vec(b'a'..=b'z', 0..6));
        let value = prop::collection::vec(b'0'..=b'9', 0..40);
        prop::collection::vec((key, value), 0..300)
    }

    proptest! {
        /// The one pass builds, byte for byte and in the same order, the batches that
        /// grouping the records by partition and cutting each group's batches builds, by
        /// one builder or two, over several writes with one `KeyedBuild` (buffers reused,
        /// a shrink between some).
        #[test]
        fn one_pass_builds_what_grouping_builds(
            writes in prop::collection::vec(
                (lines(), 1u32..20, 70usize..2000, any::<bool>(), any::<bool>()),
                1..5,
            ),
        ) {
            let mut keyed = KeyedBuild::default();
            for (lines, partitions, limit, split, shrink) in writes {
                keyed.split_from = if split { 0 } else { usize::MAX };
                let (bytes, records) = write_of(&lines);
                let data = WriteBytes::new(&bytes);
                let lead = partitions - 1;
                let target_of = |r: &PendingRecord| match usize::try_from(r.key_len) {
                    Ok(len) => crate::lines::partitioner::partition_for_key(
                        data.slice(r.line_start, r.line_start + len),
                        partitions,
                    ),
                    Err(_) => lead,
                };
                let expected = grouped(data, &records, target_of, limit);
                keyed.build(data, &records, partitions, target_of, NOW, limit);
                let (here, there) = keyed.parts();
                let stream: u64 = here.iter().chain(there.iter()).map(Part::stream_len).sum();
                prop_assert_eq!(stream, bytes.len() as u64);
                prop_assert_eq!(built(&mut keyed), expected);
                if shrink {
                    keyed.shrink(1000, 10);
                }
            }
        }
    }

    #[test]
    fn a_shrink_keeps_buffers_within_the_budget_and_a_build_after_it_works() {
        let lines: Vec<_> = (0..2000)
            .map(|i| (Some(format!("k{i}").into_bytes()), vec![b'x'; 90]))
            .collect();
        let (bytes, records) = write_of(&lines);
        let data = WriteBytes::new(&bytes);
        let key_number = |r: &PendingRecord| {
            let key = data.slice(r.line_start + 1, r.line_start + r.key_len as usize);
            std::str::from_utf8(key).unwrap().parse::<u32>().unwrap()
        };
        let mut keyed = KeyedBatches::default();
        let all = |_| true;
        let target = |_, r: &PendingRecord| key_number(r) % 1000;
        keyed.build(data, &records, 1000, target, all, NOW, 1 << 20);
        assert_eq!(keyed.parts().len(), 1000);
        keyed.shrink(64 << 10);
        let held: usize = keyed
            .parts
            .iter()
            .flat_map(|p| &p.batches)
            .map(|b| b.builder.capacity())
            .sum();
        assert!(held <= 64 << 10, "{held}");
        assert!(keyed.slot.iter().all(|&s| s == NO_PART));
        let target = |_, r: &PendingRecord| key_number(r) % 3;
        keyed.build(data, &records, 3, target, all, NOW, 1 << 20);
        let counts: u32 = keyed
            .parts()
            .iter_mut()
            .flat_map(|p| {
                p.batches()
                    .iter()
                    .map(|b| b.builder.record_count())
                    .collect::<Vec<_>>()
            })
            .sum();
        assert_eq!(counts, 2000);
    }
}
