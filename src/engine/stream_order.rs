//! The order of a topic's records in its `log` file, across its partitions.
//!
//! Each partition has its own `log` stream (`TOPIC/partitions/N/log`): every record a
//! position fixed at append, kept by the partition's stream index. The topic's `log`
//! shows the records of every partition in the order kpfs appended them, with positions
//! of its own. A topic of one partition needs nothing more: its stream is partition 0's.
//! A topic of several keeps the order as *runs*: an append to a partition other than the
//! last one appended to starts a run, which says where in the topic's stream that
//! partition's records from `first_offset` on go (`topic_pos`, the partition stream
//! position `partition_pos` there). A record of the run lies at
//! `topic_pos + (its partition position - partition_pos)`; the run ends where the next
//! one starts. So positions in the topic's stream are fixed at append as the partitions'
//! are, and gaps that retention and compaction leave in a partition are gaps here too.
//!
//! The runs are kept in `kpfs-topics/TOPIC-0/stream-order` (FORMAT.md): a run is written
//! before the records it places, so a run exists for every record kpfs acknowledged. A
//! torn tail (a power cut) loses runs, never records: an open gives the records that no
//! run places new runs at the end of the stream.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::error::{EngineError, Result};
use super::files::{io_at, write_atomically};
use super::format::{
    STREAM_ORDER_ENTRY_BYTES, STREAM_ORDER_HEADER_BYTES, STREAM_ORDER_MAGIC, STREAM_ORDER_VERSION,
};

/// Where a partition's records from `first_offset` on sit in the topic's stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Run {
    pub(crate) partition: u32,
    pub(crate) first_offset: u64,
    pub(crate) topic_pos: u64,
    pub(crate) partition_pos: u64,
    /// The offset the run's records end before: where its partition's log ended when the
    /// next run started; `u64::MAX` for the last run, which grows with each append.
    pub(crate) end_offset: u64,
}

/// What the order needs to know of a partition when it opens.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PartitionEnd {
    /// The end of the partition's own stream.
    pub(crate) stream_end: u64,
    pub(crate) log_end_offset: u64,
}

/// One of the appends of a write to several partitions, as the order places it before
/// it is made.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlannedAppend {
    pub(crate) partition: u32,
    /// Where the partition's stream and log end before the append.
    pub(crate) end: PartitionEnd,
    /// The stream bytes the append's records take.
    pub(crate) stream_len: u64,
}

pub(crate) struct StreamOrder {
    path: PathBuf,
    file: File,
    /// In stream order; never empty.
    runs: Vec<Run>,
    /// The end of the topic's stream.
    end: u64,
}

fn entry_bytes(run: &Run) -> [u8; STREAM_ORDER_ENTRY_BYTES] {
    let mut e = [0u8; STREAM_ORDER_ENTRY_BYTES];
    e[0..4].copy_from_slice(&run.partition.to_be_bytes());
    e[4..12].copy_from_slice(&run.first_offset.to_be_bytes());
    e[12..20].copy_from_slice(&run.topic_pos.to_be_bytes());
    e[20..28].copy_from_slice(&run.partition_pos.to_be_bytes());
    let crc = crc32c(&e[..28]);
    e[28..32].copy_from_slice(&crc.to_be_bytes());
    e
}

fn header_bytes() -> [u8; STREAM_ORDER_HEADER_BYTES] {
    let mut h = [0u8; STREAM_ORDER_HEADER_BYTES];
    h[0..4].copy_from_slice(STREAM_ORDER_MAGIC);
    h[4..8].copy_from_slice(&STREAM_ORDER_VERSION.to_be_bytes());
    let crc = crc32c(&h[..8]);
    h[8..12].copy_from_slice(&crc.to_be_bytes());
    h
}

fn crc32c(bytes: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(bytes)
}

fn be_u64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b.try_into().expect("8 bytes"))
}

/// The runs of a file's bytes, up to the first entry that is torn, fails its CRC or
/// does not follow the one before (a topic position going back, an unknown partition).
fn parse_runs(bytes: &[u8], partitions: u32) -> std::result::Result<Vec<Run>, String> {
    if bytes.len() < STREAM_ORDER_HEADER_BYTES
        || bytes[..STREAM_ORDER_HEADER_BYTES] != header_bytes()
    {
        return Err("not a stream-order file of this version".into());
    }
    let mut runs: Vec<Run> = Vec::new();
    for e in bytes[STREAM_ORDER_HEADER_BYTES..].chunks_exact(STREAM_ORDER_ENTRY_BYTES) {
        if crc32c(&e[..28]) != u32::from_be_bytes(e[28..32].try_into().expect("4 bytes")) {
            break;
        }
        let run = Run {
            partition: u32::from_be_bytes(e[0..4].try_into().expect("4 bytes")),
            first_offset: be_u64(&e[4..12]),
            topic_pos: be_u64(&e[12..20]),
            partition_pos: be_u64(&e[20..28]),
            end_offset: u64::MAX,
        };
        if run.partition >= partitions || runs.last().is_some_and(|l| run.topic_pos <= l.topic_pos)
        {
            break;
        }
        runs.push(run);
    }
    Ok(runs)
}

/// What `kpfs check` says of the `stream-order` file `bytes` of a topic of `partitions`
/// partitions: `Err` for a file the mount ignores (a bad header), `Ok(Some(note))` for
/// entries past the first the mount takes for a torn tail, `Ok(None)` when every entry
/// is read.
pub(crate) fn check_file(
    bytes: &[u8],
    partitions: u32,
) -> std::result::Result<Option<String>, String> {
    let runs = parse_runs(bytes, partitions)?;
    let read = STREAM_ORDER_HEADER_BYTES + runs.len() * STREAM_ORDER_ENTRY_BYTES;
    Ok((bytes.len() > read).then(|| {
        format!(
            "{} bytes after run {} are not runs of this topic (a torn tail, or damage): the \
             mount places the records they placed at the end of the topic's log",
            bytes.len() - read,
            runs.len()
        )
    }))
}

impl StreamOrder {
    /// Opens (creating) the order in `path` of a topic whose partitions are now as
    /// `ends` says, and places the records no run places (their runs lost to a power cut,
    /// or the partitions added since a topic of one partition kept no order) at the end
    /// of the stream; `offset_at(p, pos)` is the first offset of partition `p` whose
    /// record lies at or after its stream position `pos`.
    /// `synced`: the file was fsynced as it is (a clean shutdown closed it), so one that
    /// holds exactly its runs is kept as it is.
    pub(crate) fn open(
        path: &Path,
        ends: &[PartitionEnd],
        synced: bool,
        offset_at: impl Fn(u32, u64) -> Result<u64>,
    ) -> Result<StreamOrder> {
        let count = ends.len() as u32;
        let (mut runs, read) = match std::fs::read(path) {
            Ok(bytes) => {
                let runs = parse_runs(&bytes, count).unwrap_or_else(|reason| {
                    tracing::warn!(file = %path.display(), %reason, "ignoring the stream order: the partitions' records are placed anew");
                    Vec::new()
                });
                (runs, bytes.len())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Vec::new(), 0),
            Err(e) => return Err(io_at(path, "read")(e)),
        };
        // A file that is its runs and nothing else is what a rewrite would write: a mount
        // of a thousand topics need not write, fsync and rename a thousand files first.
        let whole = !runs.is_empty()
            && read == STREAM_ORDER_HEADER_BYTES + runs.len() * STREAM_ORDER_ENTRY_BYTES;
        let kept = if whole {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(path)
                .map_err(io_at(path, "open"))?;
            if !synced {
                // What a crashed process left in the page cache is made durable before
                // appends build on it, as the rewrite would.
                file.sync_data().map_err(io_at(path, "fsync"))?;
            }
            Some(file)
        } else {
            None
        };
        if runs.is_empty() {
            // The order of a topic that had one partition: its stream was partition 0's.
            runs.push(Run {
                partition: 0,
                first_offset: 0,
                topic_pos: 0,
                partition_pos: 0,
                end_offset: u64::MAX,
            });
        }
        let file = match kept {
            Some(file) => file,
            None => rewrite(path, &runs)?,
        };
        let mut order = StreamOrder {
            path: path.to_path_buf(),
            file,
            runs,
            end: 0,
        };
        order.close_runs(|p| ends[p as usize].log_end_offset);
        order.end = order.stream_end_of(ends);
        for p in 0..count {
            let covered = order.covered_end(p);
            let end = ends[p as usize];
            if end.stream_end > covered {
                let first_offset = offset_at(p, covered)?;
                if first_offset < end.log_end_offset {
                    order.push_run(p, first_offset, covered, |q| {
                        ends[q as usize].log_end_offset
                    })?;
                    order.end = order.stream_end_of(ends);
                }
            }
        }
        Ok(order)
    }

    /// Sets each run's end offset from the run of its partition after it, or, for the
    /// last run of a partition that is not the last run of all, from where that
    /// partition's log ends (nothing was appended to it since, or a run would follow).
    fn close_runs(&mut self, log_end: impl Fn(u32) -> u64) {
        let last = self.runs.len() - 1;
        let mut next_first: std::collections::HashMap<u32, u64> = Default::default();
        for i in (0..self.runs.len()).rev() {
            let run = &mut self.runs[i];
            run.end_offset = match next_first.get(&run.partition) {
                Some(&next) => next,
                None if i == last => u64::MAX,
                None => log_end(run.partition),
            };
            next_first.insert(run.partition, run.first_offset);
        }
    }

    /// The end of the topic's stream: the last run's partition's stream end, moved to
    /// the run's place.
    fn stream_end_of(&self, ends: &[PartitionEnd]) -> u64 {
        let last = self.runs.last().expect("never empty");
        last.topic_pos
            + ends[last.partition as usize]
                .stream_end
                .saturating_sub(last.partition_pos)
    }

    /// How far partition `p`'s stream is placed: to the end of its last run's span (all
    /// of it, if that run is the last of all).
    fn covered_end(&self, p: u32) -> u64 {
        let Some(i) = self.runs.iter().rposition(|r| r.partition == p) else {
            return 0;
        };
        match self.runs.get(i + 1) {
            None => u64::MAX,
            Some(next) => self.runs[i].partition_pos + (next.topic_pos - self.runs[i].topic_pos),
        }
    }

    /// Starts a run of `partition` at the end of the stream, written before its records
    /// are appended; see [`StreamOrder::push_runs`].
    fn push_run(
        &mut self,
        partition: u32,
        first_offset: u64,
        partition_pos: u64,
        log_end: impl Fn(u32) -> u64,
    ) -> Result<()> {
        let run = Run {
            partition,
            first_offset,
            topic_pos: self.end,
            partition_pos,
            end_offset: u64::MAX,
        };
        self.push_runs(&[run], log_end)
    }

    /// Adds `runs`, at increasing positions from the end of the stream on, with one
    /// write, before their records are appended; the run they follow ends where its
    /// partition's log ends now. A last run that placed nothing (its append was refused,
    /// or it is the first run of a topic whose first append went elsewhere) is replaced
    /// by a run at its position rather than followed, so no two runs start at one
    /// position and a position names one run.
    fn push_runs(&mut self, runs: &[Run], log_end: impl Fn(u32) -> u64) -> Result<()> {
        debug_assert!(
            runs.first().is_some_and(|r| r.topic_pos >= self.end)
                && runs.windows(2).all(|w| w[0].topic_pos < w[1].topic_pos),
            "new runs start at or after the stream's end, at increasing positions"
        );
        let last = *self.runs.last().expect("never empty");
        let slot = if last.topic_pos == runs[0].topic_pos {
            self.runs.len() - 1
        } else {
            self.runs.len()
        };
        let at = STREAM_ORDER_HEADER_BYTES as u64 + (slot as u64) * STREAM_ORDER_ENTRY_BYTES as u64;
        let bytes: Vec<u8> = runs.iter().flat_map(entry_bytes).collect();
        self.file
            .write_all_at(&bytes, at)
            .map_err(io_at(&self.path, "write"))?;
        if slot == self.runs.len() {
            self.runs.last_mut().expect("never empty").end_offset = log_end(last.partition);
        }
        self.runs.truncate(slot);
        // Only the junction is checked: the runs before it were checked as they came and
        // the new ones above; checking every run would make a busy topic's appends
        // quadratic in debug builds (franz-go's ETL suite spent half kpfs's CPU there).
        debug_assert!(
            self.runs
                .last()
                .is_none_or(|kept| kept.topic_pos < runs[0].topic_pos),
            "runs start at increasing positions"
        );
        self.runs.extend_from_slice(runs);
        Ok(())
    }

    /// Called under the topic's append lock before an append to `partition`, whose
    /// stream and log end where `end` says: starts a run unless the partition is the
    /// last one appended to. `log_end` gives the log end offset of any partition.
    pub(crate) fn before_append(
        &mut self,
        partition: u32,
        end: PartitionEnd,
        log_end: impl Fn(u32) -> u64,
    ) -> Result<()> {
        if self.runs.last().expect("never empty").partition == partition {
            return Ok(());
        }
        self.push_run(partition, end.log_end_offset, end.stream_end, log_end)
    }

    /// Called under the topic's append lock before the appends of one write to several
    /// partitions (`appends`, each to another partition than the one before), which the
    /// topic's stream shows in this order: the runs that place them, with one write,
    /// each where the stream bytes of the appends before it end, so the appends may
    /// then be made in any order, or at once. Returns the index of the run that places
    /// the first append, for [`StreamOrder::after_appends`].
    pub(crate) fn before_appends(
        &mut self,
        appends: &[PlannedAppend],
        log_end: impl Fn(u32) -> u64,
    ) -> Result<usize> {
        debug_assert!(
            appends.windows(2).all(|w| w[0].partition != w[1].partition),
            "each append of a write goes to another partition than the one before"
        );
        let last = *self.runs.last().expect("never empty");
        let mut pos = self.end;
        let mut runs = Vec::with_capacity(appends.len());
        for (i, append) in appends.iter().enumerate() {
            if i > 0 || append.partition != last.partition {
                runs.push(Run {
                    partition: append.partition,
                    first_offset: append.end.log_end_offset,
                    topic_pos: pos,
                    partition_pos: append.end.stream_end,
                    end_offset: u64::MAX,
                });
            }
            pos += append.stream_len;
        }
        if runs.is_empty() {
            return Ok(self.runs.len() - 1);
        }
        let continues = runs.len() < appends.len();
        self.push_runs(&runs, log_end)?;
        Ok(self.runs.len() - runs.len() - usize::from(continues))
    }

    /// Called after the appends [`StreamOrder::before_appends`] placed (`first` is what
    /// it returned), whatever became of them: each of their runs but the last ends where
    /// its partition's log ends now (an append that failed placed less, or nothing), and
    /// the stream ends where the last run's partition's stream (now at `stream_end`)
    /// takes it.
    pub(crate) fn after_appends(
        &mut self,
        first: usize,
        log_end: impl Fn(u32) -> u64,
        stream_end: u64,
    ) {
        let last = self.runs.len() - 1;
        for run in &mut self.runs[first..last] {
            run.end_offset = log_end(run.partition);
        }
        self.after_append(stream_end);
    }

    /// Called after an append to the last run's partition, whose stream now ends at
    /// `stream_end`.
    pub(crate) fn after_append(&mut self, stream_end: u64) {
        let last = self.runs.last().expect("never empty");
        self.end = last.topic_pos + stream_end.saturating_sub(last.partition_pos);
    }

    pub(crate) fn end(&self) -> u64 {
        self.end
    }

    /// The run that holds topic position `pos` (the first run for a position before
    /// it), and the run's index.
    pub(crate) fn locate(&self, pos: u64) -> (usize, Run) {
        let i = self
            .runs
            .partition_point(|r| r.topic_pos <= pos)
            .saturating_sub(1);
        (i, self.runs[i])
    }

    /// The run that starts at `topic_pos`, found again (its index may have moved).
    pub(crate) fn run_at(&self, topic_pos: u64) -> Option<(usize, Run)> {
        let i = self.runs.partition_point(|r| r.topic_pos < topic_pos);
        self.runs
            .get(i)
            .filter(|r| r.topic_pos == topic_pos)
            .map(|r| (i, *r))
    }

    pub(crate) fn run(&self, index: usize) -> Option<Run> {
        self.runs.get(index).copied()
    }

    /// The topic position of partition `partition`'s record at `offset`, which sits at
    /// `partition_pos` in the partition's stream; `None` when no run places it. Looked up
    /// from the last run back: it asks for the first record of an open transaction,
    /// which is recent.
    pub(crate) fn topic_pos_of(
        &self,
        partition: u32,
        offset: u64,
        partition_pos: u64,
    ) -> Option<u64> {
        self.runs
            .iter()
            .rev()
            .find(|r| r.partition == partition && r.first_offset <= offset && offset < r.end_offset)
            .map(|r| r.topic_pos + partition_pos.saturating_sub(r.partition_pos))
    }

    /// Makes the runs durable (with the partitions' flushes).
    pub(crate) fn sync(&self) -> Result<()> {
        self.file.sync_data().map_err(io_at(&self.path, "fsync"))
    }

    /// Forgets the runs before the first whose records are not all below their
    /// partition's log start (`log_start(p)`), rewriting the file when that drops at
    /// least half of them: deleted records need no place. Only a prefix goes, since a
    /// run's span ends where the next one starts.
    pub(crate) fn forget_deleted(&mut self, log_start: impl Fn(u32) -> u64) -> Result<()> {
        let dead = self
            .runs
            .iter()
            .take(self.runs.len() - 1)
            .take_while(|r| r.end_offset <= log_start(r.partition))
            .count();
        if dead == 0 || dead * 2 < self.runs.len() {
            return Ok(());
        }
        let kept = self.runs[dead..].to_vec();
        self.file = rewrite(&self.path, &kept)?;
        self.runs = kept;
        Ok(())
    }
}

/// Writes `runs` as the whole file (crash-safe) and opens it for appending runs.
fn rewrite(path: &Path, runs: &[Run]) -> Result<File> {
    let mut bytes = header_bytes().to_vec();
    for r in runs {
        bytes.extend_from_slice(&entry_bytes(r));
    }
    write_atomically(path, &bytes)?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(io_at(path, "open"))?;
    let mut check = Vec::new();
    (&file)
        .read_to_end(&mut check)
        .map_err(io_at(path, "read"))?;
    if check != bytes {
        return Err(EngineError::Corrupt {
            path: path.to_path_buf(),
            position: 0,
            reason: "the stream order read back differs from what was written".into(),
        });
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ends(list: &[(u64, u64)]) -> Vec<PartitionEnd> {
        list.iter()
            .map(|&(stream_end, log_end_offset)| PartitionEnd {
                stream_end,
                log_end_offset,
            })
            .collect()
    }

    /// Three appends of 10 bytes (one record each) to partitions 0, 1, 0: the runs place
    /// them one after the other, and a reopen reads the same runs back.
    #[test]
    fn runs_place_appends_in_order_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stream-order");
        let no_records = |_, _| -> Result<u64> { Ok(0) };
        let mut order =
            StreamOrder::open(&path, &ends(&[(0, 0), (0, 0)]), false, no_records).unwrap();
        let mut state = [(0u64, 0u64); 2];
        for p in [0u32, 1, 0] {
            let (stream_end, log_end) = state[p as usize];
            let snapshot = state;
            order
                .before_append(
                    p,
                    PartitionEnd {
                        stream_end,
                        log_end_offset: log_end,
                    },
                    |q| snapshot[q as usize].1,
                )
                .unwrap();
            state[p as usize] = (stream_end + 10, log_end + 1);
            order.after_append(stream_end + 10);
        }
        assert_eq!(order.end(), 30);
        let placed: Vec<(u32, u64, u64, u64, u64)> = order
            .runs
            .iter()
            .map(|r| {
                (
                    r.partition,
                    r.first_offset,
                    r.topic_pos,
                    r.partition_pos,
                    r.end_offset,
                )
            })
            .collect();
        assert_eq!(
            placed,
            [(0, 0, 0, 0, 1), (1, 0, 10, 0, 1), (0, 1, 20, 10, u64::MAX)]
        );
        let reopened =
            StreamOrder::open(&path, &ends(&[(20, 2), (10, 1)]), false, no_records).unwrap();
        assert_eq!(reopened.runs, order.runs);
        assert_eq!(reopened.end(), 30);
        assert_eq!(reopened.locate(15), (1, order.runs[1]));
        assert_eq!(reopened.locate(0).0, 0);
        // A file that is its runs is kept as it is; one with a torn tail is rewritten
        // without it.
        use std::os::unix::fs::MetadataExt;
        let inode = || std::fs::metadata(&path).unwrap().ino();
        let before = inode();
        let kept = StreamOrder::open(&path, &ends(&[(20, 2), (10, 1)]), true, no_records).unwrap();
        assert_eq!((kept.runs.clone(), inode()), (order.runs.clone(), before));
        drop(kept);
        let whole = std::fs::metadata(&path).unwrap().len();
        let mut torn = std::fs::read(&path).unwrap();
        torn.extend_from_slice(&[7; 5]);
        std::fs::write(&path, &torn).unwrap();
        let cut = StreamOrder::open(&path, &ends(&[(20, 2), (10, 1)]), true, no_records).unwrap();
        assert_eq!(cut.runs, order.runs);
        assert_ne!(inode(), before, "a torn tail is rewritten away");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), whole);
    }

    fn placed(order: &StreamOrder) -> Vec<(u32, u64, u64, u64, u64)> {
        order
            .runs
            .iter()
            .map(|r| {
                (
                    r.partition,
                    r.first_offset,
                    r.topic_pos,
                    r.partition_pos,
                    r.end_offset,
                )
            })
            .collect()
    }

    /// An order and its partitions' (stream end, log end offset), written to as
    /// `Topic::append_parts` does.
    struct TestLog {
        order: StreamOrder,
        state: Vec<(u64, u64)>,
    }

    impl TestLog {
        /// One write to several partitions: (partition, stream bytes, records, whether
        /// its append is made) each.
        fn write(&mut self, appends: &[(u32, u64, u64, bool)]) {
            let planned: Vec<PlannedAppend> = appends
                .iter()
                .map(|&(p, stream_len, _, _)| PlannedAppend {
                    partition: p,
                    end: PartitionEnd {
                        stream_end: self.state[p as usize].0,
                        log_end_offset: self.state[p as usize].1,
                    },
                    stream_len,
                })
                .collect();
            let before = self.state.clone();
            let first = self
                .order
                .before_appends(&planned, |q| before[q as usize].1)
                .unwrap();
            for &(p, stream_len, records, made) in appends {
                if made {
                    self.state[p as usize].0 += stream_len;
                    self.state[p as usize].1 += records;
                }
            }
            let last = appends.last().unwrap().0 as usize;
            let state = self.state.clone();
            self.order
                .after_appends(first, |q| state[q as usize].1, state[last].0);
        }

        fn reopened(&self) -> StreamOrder {
            // As after a clean shutdown: an intact file is kept, not rewritten.
            StreamOrder::open(
                &self.order.path,
                &ends(&self.state),
                true,
                |_, _| -> Result<u64> { panic!("every record has a run") },
            )
            .unwrap()
        }
    }

    fn test_log(dir: &Path, partitions: usize) -> TestLog {
        let path = dir.join("stream-order");
        let state = vec![(0, 0); partitions];
        let order = StreamOrder::open(&path, &ends(&state), false, |_, _| -> Result<u64> { Ok(0) })
            .unwrap();
        TestLog { order, state }
    }

    /// A write to partitions 0, 1 and 2 after one to partition 0: the first continues
    /// partition 0's run, the others get runs at the positions their bytes follow, all
    /// written at once; a reopen reads the same runs back.
    #[test]
    fn the_runs_of_a_write_to_several_partitions_place_its_appends_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = test_log(dir.path(), 3);
        log.write(&[(0, 10, 1, true)]);
        log.write(&[(0, 5, 1, true), (1, 7, 2, true), (2, 3, 1, true)]);
        assert_eq!(
            placed(&log.order),
            [(0, 0, 0, 0, 2), (1, 0, 15, 0, 2), (2, 0, 22, 0, u64::MAX)]
        );
        assert_eq!(log.order.end(), 25);
        log.write(&[(1, 4, 1, true), (0, 6, 1, true)]);
        assert_eq!(
            placed(&log.order)[2..],
            [(2, 0, 22, 0, 1), (1, 2, 25, 7, 3), (0, 2, 29, 15, u64::MAX)]
        );
        assert_eq!(log.order.end(), 35);
        let reopened = log.reopened();
        assert_eq!(reopened.runs, log.order.runs);
        assert_eq!(reopened.end(), 35);
    }

    /// An append of the write that failed (a disk error) placed nothing: its run spans
    /// no record, the later appends keep the positions their runs gave them, and the
    /// next append to its partition gets a run of its own.
    #[test]
    fn an_append_of_a_write_that_failed_leaves_a_gap_and_the_others_their_places() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = test_log(dir.path(), 3);
        log.write(&[(0, 10, 1, true), (1, 7, 1, false), (2, 3, 1, true)]);
        assert_eq!(
            placed(&log.order),
            [(0, 0, 0, 0, 1), (1, 0, 10, 0, 0), (2, 0, 17, 0, u64::MAX)]
        );
        assert_eq!(log.order.end(), 20);
        log.write(&[(1, 7, 1, true)]);
        assert_eq!(placed(&log.order)[3], (1, 0, 20, 0, u64::MAX));
        assert_eq!(log.order.locate(12).1.partition, 1);
        let reopened = log.reopened();
        assert_eq!(reopened.runs, log.order.runs);
        assert_eq!(reopened.end(), 27);
    }

    /// The last append of a write placed nothing: the next write's first run replaces
    /// its run, so no two runs start at one position.
    #[test]
    fn a_write_whose_last_append_failed_is_followed_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = test_log(dir.path(), 3);
        log.write(&[(1, 10, 1, true), (2, 3, 1, false)]);
        assert_eq!(log.order.end(), 10);
        log.write(&[(0, 4, 1, true), (2, 3, 1, true)]);
        assert_eq!(
            placed(&log.order),
            [(1, 0, 0, 0, 1), (0, 0, 10, 0, 1), (2, 0, 14, 0, u64::MAX)]
        );
        assert_eq!(log.reopened().runs, log.order.runs);
    }

    /// A power cut that kept records but not the run placing them: the open places them
    /// at the end of the stream, where no reader has seen anything.
    #[test]
    fn records_without_a_run_are_placed_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stream-order");
        let runs = [
            Run {
                partition: 0,
                first_offset: 0,
                topic_pos: 0,
                partition_pos: 0,
                end_offset: 0,
            },
            Run {
                partition: 1,
                first_offset: 0,
                topic_pos: 10,
                partition_pos: 0,
                end_offset: 0,
            },
        ];
        rewrite(&path, &runs).unwrap();
        // Partition 0 holds 30 bytes (offsets 0..3), of which the runs place 10.
        let offset_at = |p: u32, pos: u64| -> Result<u64> {
            assert_eq!((p, pos), (0, 10));
            Ok(1)
        };
        let order = StreamOrder::open(&path, &ends(&[(30, 3), (5, 1)]), false, offset_at).unwrap();
        assert_eq!(order.runs.len(), 3);
        assert_eq!(
            (
                order.runs[2].partition,
                order.runs[2].first_offset,
                order.runs[2].topic_pos,
                order.runs[2].partition_pos
            ),
            (0, 1, 15, 10)
        );
        assert_eq!(order.end(), 35);
        assert_eq!(
            order.runs[1].end_offset, 1,
            "partition 1's run ends at its log end"
        );
    }

    #[test]
    fn a_torn_entry_ends_the_runs() {
        let run = Run {
            partition: 0,
            first_offset: 0,
            topic_pos: 0,
            partition_pos: 0,
            end_offset: 0,
        };
        let mut bytes = header_bytes().to_vec();
        bytes.extend_from_slice(&entry_bytes(&run));
        bytes.extend_from_slice(&entry_bytes(&Run {
            partition: 1,
            topic_pos: 5,
            ..run
        }));
        let n = bytes.len();
        bytes[n - 1] ^= 1;
        assert_eq!(parse_runs(&bytes, 2).unwrap().len(), 1);
        assert_eq!(parse_runs(&bytes[..n - 3], 2).unwrap().len(), 1);
        assert!(parse_runs(b"KPSO", 2).is_err());
    }
}
