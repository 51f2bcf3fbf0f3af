//! The recovery case table of docs/ARCHITECTURE.md, tests named `rowNN_` after its rows
//! (several for the rows with several cases): each builds a crash image with the real
//! engine (then stops it cleanly or just drops it), damages or rearranges the partition
//! directory with std::fs as a crash or a person would, reopens and checks the outcome.
//! Swap images (rows 2, 3 and 4) come from a real cleaner pass: the data directory is
//! copied before the pass, and the cleaned segment files of the pass are planted into the
//! copy under the `.swap`/`.cleaned` names a crash at that step would leave behind.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use kpfs::engine::format::TOPIC_CONFIG_FILE;
use kpfs::engine::format::{decode_header, segment_file_name};
use kpfs::engine::log::{Durability, Log};
use kpfs::engine::offset_map::OffsetMap;
use kpfs::engine::segment::RollReason;
use kpfs::engine::{
    BrokerConfig, Clock, Engine, EngineOptions, Topic, TopicCursor, TopicOverrides, TopicPartition,
    CLEANER_CHECKPOINT_FILE, CLEAN_SHUTDOWN_FILE, DYNAMIC_BROKER_CONFIG_FILE,
    RECOVERY_CHECKPOINT_FILE,
};

const LOG: &str = ".log";
const INDEX: &str = ".index";
const TIME_INDEX: &str = ".timeindex";

/// Stops the engine without a clean shutdown (kill -9).
fn crash(f: &mut Fixture) {
    drop(f.engine.take());
}

fn stop_cleanly(f: &mut Fixture) {
    let e = f.engine.take().unwrap();
    e.shutdown().unwrap();
}

fn start(f: &mut Fixture) {
    f.engine = Some(open(f.dir.path(), &f.clock));
}

fn topic_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("r-0")
}

/// The topic's kpfs folder (its config and stream indexes).
fn kpfs_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("kpfs-topics").join("r-0")
}

fn seg(dir: &Path, base: u64, suffix: &str) -> PathBuf {
    dir.join(segment_file_name(base, suffix))
}

/// Names of the files in a partition directory, minus kpfs's own properties files.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.starts_with("kpfs-"))
        .collect();
    v.sort();
    v
}

/// Base offsets of the `.log` files on disk.
fn log_bases(dir: &Path) -> Vec<u64> {
    names(dir)
        .iter()
        .filter_map(|n| n.strip_suffix(LOG))
        .filter_map(|n| n.parse().ok())
        .collect()
}

/// (file position, size, base offset) of every batch of a `.log`.
fn batches(path: &Path) -> Vec<(u64, usize, u64)> {
    let bytes = fs::read(path).unwrap();
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let h = decode_header(&bytes[at..]).unwrap();
        out.push((at as u64, h.size, h.base_offset));
        at += h.size;
    }
    out
}

fn flip_byte(path: &Path, at: u64) {
    let mut bytes = fs::read(path).unwrap();
    bytes[at as usize] ^= 0x5A;
    fs::write(path, bytes).unwrap();
}

/// A plain topic of several small segments, one batch per line, with a clock step
/// between appends so every batch has its own timestamp.
fn plain_topic(f: &Fixture, lines: usize) -> (Arc<Topic>, String) {
    let t = f.topic("r");
    set(&t, "internal.segment.bytes=400\nindex.interval.bytes=100");
    let mut text = String::new();
    for i in 0..lines {
        let line = format!("record-{i:04}-{}\n", "x".repeat(i % 9));
        t.append_lines(line.as_bytes()).unwrap();
        text.push_str(&line);
        f.advance(10);
    }
    assert!(t.p0().log().snapshot().segments.len() >= 4);
    (t, text)
}

/// Every read of 37 bytes at a spread of positions returns the expected slice.
fn assert_random_reads(t: &Topic, text: &str) {
    let bytes = text.as_bytes();
    for pos in (0..=bytes.len()).step_by(13) {
        let mut cursor = TopicCursor::default();
        let got = t.read_log(&mut cursor, pos as u64, 37).unwrap();
        let end = (pos + 37).min(bytes.len());
        assert_eq!(got, &bytes[pos..end], "read at {pos}");
    }
}

#[test]
fn row06_torn_last_batch_is_cut_and_appends_continue_at_the_next_offset() {
    let mut f = Fixture::new();
    let (t, text) = plain_topic(&f, 40);
    let dir = t.p0().dir().to_path_buf();
    let active = t.p0().log().snapshot().active().base_offset();
    drop(t);
    crash(&mut f);
    let path = seg(&dir, active, LOG);
    let len = fs::metadata(&path).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 5)
        .unwrap();
    start(&mut f);
    let t = f.topic("r");
    let last_line = text.lines().last().unwrap().len() + 1;
    let kept = &text[..text.len() - last_line];
    assert_eq!(cat_string(&t), kept);
    assert_eq!(t.p0().log().log_end_offset(), 39);
    assert_eq!(t.stream_len(), kept.len() as u64);
    t.append_lines(b"after\n").unwrap();
    assert_eq!(t.p0().log().log_end_offset(), 40);
    let expected = format!("{kept}after\n");
    assert_eq!(cat_string(&t), expected);
    assert_eq!(t.stream_len(), expected.len() as u64);
    drop(t);
    crash(&mut f);
    start(&mut f);
    assert_eq!(cat_string(&f.topic("r")), expected);
}

#[test]
fn row06_corrupt_batch_in_a_sealed_segment_cuts_it_and_drops_later_segments() {
    // Inside the record's value bytes: only the CRC can notice.
    cut_at_a_damaged_batch_of_a_sealed_segment(|path, pos, size| {
        flip_byte(path, pos + size as u64 - 3)
    });
}

#[test]
fn row06_a_base_offset_beyond_the_segments_relative_range_is_cut() {
    // The CRC32C does not cover the base offset: a flipped bit 32 makes an increasing
    // offset that a segment's 32-bit relative offsets cannot hold (Kafka's
    // LogSegment.ensureOffsetInRange). Kept, it made a later roll's time index entry panic.
    cut_at_a_damaged_batch_of_a_sealed_segment(|path, pos, _| {
        let mut bytes = fs::read(path).unwrap();
        bytes[pos as usize + 3] ^= 0x01;
        fs::write(path, bytes).unwrap();
    });
}

/// Damages the middle batch of the second segment of a crashed topic: recovery cuts the
/// segment there and drops the later ones; appends go on from that batch's offset.
fn cut_at_a_damaged_batch_of_a_sealed_segment(damage: fn(&Path, u64, usize)) {
    let mut f = Fixture::new();
    let (t, text) = plain_topic(&f, 60);
    let dir = t.p0().dir().to_path_buf();
    drop(t);
    crash(&mut f);
    let bases = log_bases(&dir);
    let victim = bases[1];
    let path = seg(&dir, victim, LOG);
    let bs = batches(&path);
    let (pos, size, bad_offset) = bs[bs.len() / 2];
    damage(&path, pos, size);
    start(&mut f);
    let t = f.topic("r");
    assert_eq!(log_bases(&dir), bases[..2].to_vec(), "{:?}", names(&dir));
    assert_eq!(fs::metadata(&path).unwrap().len(), pos);
    assert_eq!(t.p0().log().log_end_offset(), bad_offset);
    let kept: String = text
        .lines()
        .take(bad_offset as usize)
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(cat_string(&t), kept);
    t.append_lines(b"after\n").unwrap();
    assert_eq!(t.p0().log().log_end_offset(), bad_offset + 1);
    assert_eq!(cat_string(&t), format!("{kept}after\n"));
}

#[test]
fn row01_leftover_deleted_files_are_removed_at_open() {
    let mut f = Fixture::new();
    let (t, text) = plain_topic(&f, 40);
    let dir = t.p0().dir().to_path_buf();
    set(&t, "retention.bytes=900");
    assert!(f.engine().run_retention_once() > 0);
    assert!(names(&dir).iter().any(|n| n.ends_with(".deleted")));
    let lso = t.p0().log().log_start_offset();
    let kept = cat_string(&t);
    assert!(text.ends_with(&kept) && kept.len() < text.len());
    drop(t);
    crash(&mut f);
    start(&mut f);
    let t = f.topic("r");
    assert!(
        !names(&dir).iter().any(|n| n.ends_with(".deleted")),
        "{:?}",
        names(&dir)
    );
    assert_eq!(t.p0().log().log_start_offset(), lso);
    assert_eq!(cat_string(&t), kept);
    assert_eq!(t.p0().log().log_end_offset(), 40);
}

#[test]
fn row02_cleaned_files_are_removed_at_open() {
    let mut f = Fixture::new();
    let (t, text) = plain_topic(&f, 40);
    let dir = t.p0().dir().to_path_buf();
    drop(t);
    crash(&mut f);
    let before = names(&dir);
    let bases = log_bases(&dir);
    for suffix in [LOG, INDEX, TIME_INDEX] {
        let name = segment_file_name(bases[0], suffix);
        fs::copy(dir.join(&name), dir.join(format!("{name}.cleaned"))).unwrap();
    }
    fs::write(seg(&dir, bases[2], ".log.cleaned"), b"half-written").unwrap();
    start(&mut f);
    // Only the producer snapshot at the log end that every open after a crash writes
    // (Kafka's `rebuildProducerState`) is new.
    let mut expected = before;
    expected.push(segment_file_name(40, ".snapshot"));
    expected.sort();
    assert_eq!(names(&dir), expected);
    assert_eq!(cat_string(&f.topic("r")), text);
}

/// A compacted topic after an unclean stop, copied aside, then cleaned in place.
struct SwapImages {
    f: Fixture,
    /// The data directory as it was before the pass (an unclean image).
    before_dir: tempfile::TempDir,
    before_text: String,
    before_bases: Vec<u64>,
    after_text: String,
    after_bases: Vec<u64>,
    /// Base offsets of the segments the pass wrote.
    cleaned: Vec<u64>,
    /// The recovery-point checkpoint as the pass left it: the cleaner writes it before
    /// the swaps that leave offset gaps, so every crash during them finds it.
    checkpoint_of_the_pass: Vec<u8>,
}

fn swap_images() -> SwapImages {
    let mut f = Fixture::new();
    let t = f.topic("r");
    set(
        &t,
        "cleanup.policy=compact\nparse.key=true\nkey.separator=:\ninternal.segment.bytes=400\n\
         index.interval.bytes=100\nmin.cleanable.dirty.ratio=0.01",
    );
    let mut before_text = String::new();
    for i in 0..60 {
        let line = format!("k{}:value-{i:03}\n", i % 5);
        t.append_lines(line.as_bytes()).unwrap();
        before_text.push_str(&line);
    }
    let dir = t.p0().dir().to_path_buf();
    drop(t);
    crash(&mut f);
    let before_dir = tempfile::tempdir().unwrap();
    copy_dir(f.dir.path(), before_dir.path());
    let before_bases = log_bases(&dir);
    start(&mut f);
    let mut map = OffsetMap::new(1 << 20, 0.9);
    f.engine().run_cleaner_once_with(&mut map).unwrap();
    let checkpoint_of_the_pass = fs::read(f.dir.path().join(RECOVERY_CHECKPOINT_FILE)).unwrap();
    let t = f.topic("r");
    let after_text = cat_string(&t);
    assert_ne!(after_text, before_text);
    let active = t.p0().log().snapshot().active().base_offset();
    drop(t);
    stop_cleanly(&mut f);
    let after_bases = log_bases(&dir);
    let cleaned: Vec<u64> = after_bases
        .iter()
        .copied()
        .filter(|&b| b < active)
        .collect();
    assert!(cleaned.len() >= 2, "want several groups: {cleaned:?}");
    SwapImages {
        f,
        before_dir,
        before_text,
        before_bases,
        after_text,
        after_bases,
        cleaned,
        checkpoint_of_the_pass,
    }
}

impl SwapImages {
    /// A fresh copy of the pre-pass directory, with the checkpoint the pass wrote
    /// before its first swap.
    fn image(&self) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        copy_dir(self.before_dir.path(), d.path());
        fs::write(
            d.path().join(RECOVERY_CHECKPOINT_FILE),
            &self.checkpoint_of_the_pass,
        )
        .unwrap();
        d
    }

    /// Plants the pass's output segment `base` into `image` with `suffix` per file kind.
    fn plant(&self, image: &Path, base: u64, suffixes: [&str; 3]) {
        let from = topic_dir(self.f.dir.path());
        let to = topic_dir(image);
        for (kind, suffix) in [LOG, INDEX, TIME_INDEX].into_iter().zip(suffixes) {
            let name = segment_file_name(base, kind);
            fs::copy(from.join(&name), to.join(format!("{name}{suffix}"))).unwrap();
        }
    }

    fn open(&self, image: &Path) -> (kpfs::engine::Engine, Arc<Topic>) {
        let e = open(image, &self.f.clock);
        let t = e.topic("r").unwrap();
        (e, t)
    }
}

#[test]
fn row03_complete_swap_is_finished_at_open() {
    let s = swap_images();
    const SWAP: [&str; 3] = [".swap"; 3];
    // Crash after every `.cleaned -> .swap` rename, before any original became `.deleted`.
    let img = s.image();
    for &b in &s.cleaned {
        s.plant(img.path(), b, SWAP);
    }
    let (e, t) = s.open(img.path());
    assert_eq!(cat_string(&t), s.after_text);
    assert_eq!(log_bases(&topic_dir(img.path())), s.after_bases);
    assert!(!names(&topic_dir(img.path()))
        .iter()
        .any(|n| n.contains(".swap") || n.contains(".cleaned") || n.contains(".deleted")));
    assert_eq!(t.p0().log().log_end_offset(), 60);
    drop((t, e));

    // Crash in the middle of renaming the originals `.deleted`.
    let img = s.image();
    let dir = topic_dir(img.path());
    for &b in &s.cleaned {
        s.plant(img.path(), b, SWAP);
    }
    let first_original = s.before_bases[1];
    for kind in [LOG, INDEX, TIME_INDEX] {
        let p = seg(&dir, first_original, kind);
        fs::rename(&p, format!("{}.deleted", p.display())).unwrap();
    }
    let (_e, t) = s.open(img.path());
    assert_eq!(cat_string(&t), s.after_text);
    assert_eq!(log_bases(&dir), s.after_bases);
}

#[test]
fn row02_incomplete_swap_is_rolled_back() {
    let s = swap_images();
    let last = *s.cleaned.last().unwrap();
    // Crash inside one segment's rename: its `.log` is `.swap`, its indexes still `.cleaned`.
    let img = s.image();
    s.plant(img.path(), last, [".swap", ".cleaned", ".cleaned"]);
    let (e, t) = s.open(img.path());
    assert_eq!(cat_string(&t), s.before_text);
    assert_eq!(log_bases(&topic_dir(img.path())), s.before_bases);
    assert!(!names(&topic_dir(img.path()))
        .iter()
        .any(|n| n.contains(".swap") || n.contains(".cleaned")));
    drop((t, e));

    // Kafka's shape of the same crash: a later segment already `.swap`, an earlier one
    // still `.cleaned`.
    let img = s.image();
    s.plant(img.path(), s.cleaned[0], [".cleaned"; 3]);
    s.plant(img.path(), last, [".swap"; 3]);
    let (_e, t) = s.open(img.path());
    assert_eq!(cat_string(&t), s.before_text);
    assert_eq!(log_bases(&topic_dir(img.path())), s.before_bases);
}

#[test]
fn row05_orphan_indexes_are_removed() {
    let mut f = Fixture::new();
    let (t, text) = plain_topic(&f, 30);
    let dir = t.p0().dir().to_path_buf();
    drop(t);
    stop_cleanly(&mut f);
    let before = names(&dir);
    fs::write(seg(&dir, 99_999, INDEX), [7u8; 16]).unwrap();
    fs::write(seg(&dir, 99_999, TIME_INDEX), [7u8; 24]).unwrap();
    fs::write(seg(&dir, 123_456, INDEX), []).unwrap();
    start(&mut f);
    assert_eq!(names(&dir), before);
    assert_eq!(cat_string(&f.topic("r")), text);
}

#[test]
fn row07_missing_indexes_are_rebuilt_after_clean_and_unclean_stops() {
    for clean in [true, false] {
        let mut f = Fixture::new();
        let (t, text) = plain_topic(&f, 60);
        let dir = t.p0().dir().to_path_buf();
        let snap = t.p0().log().snapshot();
        let before: Vec<_> = snap
            .segments
            .iter()
            .map(|s| {
                (
                    s.index_entries().unwrap(),
                    s.time_index_entries().unwrap(),
                    s.info().max_timestamp,
                )
            })
            .collect();
        let bases: Vec<u64> = snap.segments.iter().map(|s| s.base_offset()).collect();
        drop((t, snap));
        if clean {
            stop_cleanly(&mut f);
        } else {
            crash(&mut f);
        }
        fs::remove_file(seg(&dir, bases[1], INDEX)).unwrap();
        fs::remove_file(seg(&dir, bases[2], TIME_INDEX)).unwrap();
        fs::remove_file(seg(&dir, *bases.last().unwrap(), INDEX)).unwrap();
        start(&mut f);
        let t = f.topic("r");
        assert_eq!(cat_string(&t), text, "clean={clean}");
        assert_random_reads(&t, &text);
        for b in &bases {
            assert!(seg(&dir, *b, INDEX).exists() && seg(&dir, *b, TIME_INDEX).exists());
        }
        let snap = t.p0().log().snapshot();
        for (i, s) in snap.segments.iter().enumerate() {
            assert_eq!(
                s.index_entries().unwrap(),
                before[i].0,
                "clean={clean} segment {i}"
            );
            assert_eq!(
                s.info().max_timestamp,
                before[i].2,
                "clean={clean} segment {i}"
            );
            if clean && i == 2 {
                // A clean stop means no scan (as in Kafka), so the lost `.timeindex` is
                // not rebuilt; sealing it at open leaves just its final entry, the
                // segment's largest timestamp, which is all time retention needs.
                assert_eq!(
                    s.time_index_entries().unwrap(),
                    before[i].1[before[i].1.len() - 1..]
                );
            } else {
                assert_eq!(
                    s.time_index_entries().unwrap(),
                    before[i].1,
                    "clean={clean} {i}"
                );
            }
        }
        t.append_lines(b"after\n").unwrap();
        assert_eq!(cat_string(&t), format!("{text}after\n"));
    }
}

#[test]
fn row06_random_bytes_in_an_index_are_replaced_after_an_unclean_stop() {
    let mut f = Fixture::new();
    let (t, text) = plain_topic(&f, 60);
    let dir = t.p0().dir().to_path_buf();
    let snap = t.p0().log().snapshot();
    let before: Vec<_> = snap
        .segments
        .iter()
        .map(|s| s.index_entries().unwrap())
        .collect();
    let bases: Vec<u64> = snap.segments.iter().map(|s| s.base_offset()).collect();
    drop((t, snap));
    crash(&mut f);
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let junk: Vec<u8> = (0..64)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    fs::write(seg(&dir, bases[1], INDEX), &junk).unwrap();
    fs::write(seg(&dir, bases[2], TIME_INDEX), &junk[..48]).unwrap();
    start(&mut f);
    let t = f.topic("r");
    assert_eq!(cat_string(&t), text);
    assert_random_reads(&t, &text);
    let after: Vec<_> = t
        .p0()
        .log()
        .snapshot()
        .segments
        .iter()
        .map(|s| s.index_entries().unwrap())
        .collect();
    assert_eq!(after, before);
}

#[test]
fn row08_clean_shutdown_marker_skips_the_scan_and_keeps_the_data() {
    let mut f = Fixture::new();
    let (t, text) = plain_topic(&f, 40);
    let dir = t.p0().dir().to_path_buf();
    let segments = t.p0().log().snapshot().segments.len();
    drop(t);
    stop_cleanly(&mut f);
    assert!(f.dir.path().join(CLEAN_SHUTDOWN_FILE).exists());
    let config = BrokerConfig::defaults().resolve_topic(&TopicOverrides::default());
    let clock: Arc<dyn Clock> = f.clock.clone();
    // The log layer tells whether it scanned: with the marker it does not...
    let (log, report) = Log::open(
        &dir,
        &TopicPartition::new("r", 0),
        &config,
        clock.clone(),
        Durability::CleanShutdown,
    )
    .unwrap();
    assert_eq!(report, Default::default());
    drop(log);
    // ...without it (and without a recovery point) every segment is recovered, and
    // nothing is cut from intact data.
    let (log, report) = Log::open(
        &dir,
        &TopicPartition::new("r", 0),
        &config,
        clock,
        Durability::RecoveryPoint(0),
    )
    .unwrap();
    assert_eq!(report.recovered_segments, segments);
    assert!(report.truncated.is_empty() && report.removed_files.is_empty());
    drop(log);
    start(&mut f);
    // The marker goes at open, so a crash while running counts as unclean.
    assert!(!f.dir.path().join(CLEAN_SHUTDOWN_FILE).exists());
    let t = f.topic("r");
    assert_eq!(cat_string(&t), text);
    assert_random_reads(&t, &text);
    assert_eq!(t.p0().log().log_end_offset(), 40);
}

#[test]
fn row08_hand_edited_sealed_segment_never_reads_as_wrong_bytes() {
    let mut f = Fixture::new();
    let (t, text) = plain_topic(&f, 60);
    let dir = t.p0().dir().to_path_buf();
    drop(t);
    stop_cleanly(&mut f);
    let bases = log_bases(&dir);
    let path = seg(&dir, bases[1], LOG);
    let len = fs::metadata(&path).unwrap().len();
    let bs = batches(&path);
    let (pos, size, bad_offset) = bs[bs.len() / 2];
    flip_byte(&path, pos + size as u64 - 3);
    start(&mut f);
    let t = f.topic("r");
    // What kpfs does: the clean marker means no scan, so the segment stays as it is and
    // the damaged batch fails its CRC when read; the read reports an error instead of
    // returning the edited bytes.
    assert_eq!(fs::metadata(&path).unwrap().len(), len, "not truncated");
    let good: String = text
        .lines()
        .take(bad_offset as usize)
        .map(|l| format!("{l}\n"))
        .collect();
    let mut cursor = TopicCursor::default();
    let mut got = Vec::new();
    let err = loop {
        match t.read_log(&mut cursor, got.len() as u64, 64) {
            Ok(b) if b.is_empty() => panic!("read the whole damaged log without an error"),
            Ok(b) => got.extend_from_slice(&b),
            Err(e) => break e,
        }
    };
    assert!(
        good.as_bytes().starts_with(&got),
        "wrong bytes before the damage"
    );
    assert!(
        err.to_string().contains(&segment_file_name(bases[1], LOG)),
        "{err}"
    );
    // Reads that start past the damage still work.
    let tail_from = text.len() - 30;
    let mut cursor = TopicCursor::default();
    let tail = t.read_log(&mut cursor, tail_from as u64, 30).unwrap();
    assert_eq!(tail, &text.as_bytes()[tail_from..]);
    // An unclean restart trusts what lies below the recovery point (the clean shutdown
    // checkpointed the log end), as Kafka does: the damage stays a read error.
    drop(t);
    crash(&mut f);
    start(&mut f);
    assert_eq!(fs::metadata(&path).unwrap().len(), len, "not scanned");
    // Without a recovery point it scans and cuts the log at the damage instead.
    crash(&mut f);
    fs::remove_file(f.dir.path().join(RECOVERY_CHECKPOINT_FILE)).unwrap();
    start(&mut f);
    let t = f.topic("r");
    assert_eq!(t.p0().log().log_end_offset(), bad_offset);
    assert_eq!(cat_string(&t), good);
}

#[test]
fn row04_swap_interrupted_in_its_last_rename_leaves_no_swap_files() {
    let s = swap_images();
    // Crash while renaming `.swap -> final`: the `.log` made it, its indexes did not, and
    // the originals are already gone.
    let img = s.image();
    let dir = topic_dir(img.path());
    for &b in &s.before_bases {
        if b < *s.cleaned.last().unwrap() + 1 && !s.after_bases.contains(&b) {
            for kind in [LOG, INDEX, TIME_INDEX] {
                fs::remove_file(seg(&dir, b, kind)).unwrap();
            }
        }
    }
    for &b in &s.cleaned {
        for kind in [LOG, INDEX, TIME_INDEX] {
            fs::remove_file(seg(&dir, b, kind)).unwrap();
        }
        s.plant(img.path(), b, ["", ".swap", ".swap"]);
    }
    let (_e, t) = s.open(img.path());
    assert_eq!(cat_string(&t), s.after_text);
    assert_eq!(log_bases(&dir), s.after_bases);
    let left: Vec<String> = names(&dir)
        .into_iter()
        .filter(|n| n.ends_with(".swap"))
        .collect();
    assert!(left.is_empty(), "stale swap files left behind: {left:?}");
}

#[test]
fn row08_random_bytes_in_an_index_after_a_clean_stop_never_hide_records() {
    let mut f = Fixture::new();
    let (t, text) = plain_topic(&f, 60);
    let dir = t.p0().dir().to_path_buf();
    let bases: Vec<u64> = t
        .p0()
        .log()
        .snapshot()
        .segments
        .iter()
        .map(|s| s.base_offset())
        .collect();
    drop(t);
    stop_cleanly(&mut f);
    // One plausible-looking entry (increasing, non-zero position) that points past the
    // end of the `.log`: what a hand edit or a stray write could leave.
    let mut junk = Vec::new();
    junk.extend_from_slice(&3u32.to_be_bytes());
    junk.extend_from_slice(&0x00F0_0000u32.to_be_bytes());
    fs::write(seg(&dir, bases[1], INDEX), &junk).unwrap();
    start(&mut f);
    let t = f.topic("r");
    assert_eq!(cat_string(&t), text);
    assert_random_reads(&t, &text);
}

#[test]
fn row10_stream_size_survives_reopen_after_retention_emptied_the_log() {
    for clean in [true, false] {
        let mut f = Fixture::new();
        let (t, text) = plain_topic(&f, 20);
        set(&t, "retention.ms=1000");
        f.advance(1001);
        assert!(f.engine().run_retention_once() > 0);
        assert_eq!(t.p0().log().log_start_offset(), 20);
        assert_eq!(t.stream_len(), text.len() as u64);
        drop(t);
        if clean {
            stop_cleanly(&mut f);
        } else {
            crash(&mut f);
        }
        start(&mut f);
        let t = f.topic("r");
        assert_eq!(t.p0().log().log_start_offset(), 20);
        // The size of `log` never decreases: readers hold kernel offsets into it.
        assert_eq!(t.stream_len(), text.len() as u64, "clean={clean}");
        t.append_lines(b"after\n").unwrap();
        let mut cursor = TopicCursor::default();
        let got = t.read_log(&mut cursor, text.len() as u64, 100).unwrap();
        assert_eq!(got, b"after\n", "clean={clean}");
    }
}

#[test]
fn row06b_sealed_segment_that_lost_its_tail_cuts_the_log_there() {
    // A power cut can lose the unsynced tail of a segment that rolled, while the next
    // segment's bytes reached the disk. The cut sits exactly on a batch boundary, so no
    // CRC notices; the offset gap to the next segment does.
    let mut f = Fixture::new();
    let (t, text) = plain_topic(&f, 60);
    let dir = t.p0().dir().to_path_buf();
    drop(t);
    crash(&mut f);
    let bases = log_bases(&dir);
    let path = seg(&dir, bases[1], LOG);
    let bs = batches(&path);
    let (pos, _, lost_from) = bs[bs.len() - 1];
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(pos)
        .unwrap();
    start(&mut f);
    let t = f.topic("r");
    assert_eq!(log_bases(&dir), bases[..2].to_vec(), "{:?}", names(&dir));
    assert_eq!(t.p0().log().log_end_offset(), lost_from);
    let kept: String = text
        .lines()
        .take(lost_from as usize)
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(cat_string(&t), kept);
    t.append_lines(b"after\n").unwrap();
    assert_eq!(cat_string(&t), format!("{kept}after\n"));
}

/// Writes `bytes` into `path` at `at`, leaving its length unless they reach past it.
fn write_at(path: &Path, at: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let file = fs::OpenOptions::new().write(true).open(path).unwrap();
    file.write_all_at(bytes, at).unwrap();
}

/// Bytes of `path` from `at` on that are not zero.
fn nonzero_from(path: &Path, at: u64) -> usize {
    fs::read(path).unwrap()[at as usize..]
        .iter()
        .filter(|&&b| b != 0)
        .count()
}

/// Issue 24's image: after a kill -9, two offset-index entries past the valid ones (out
/// of order, one past the data) and 104 bytes of garbage after the last batch; the time
/// index and the stream index get garbage tails too. Recovery cuts the log back to its
/// records and rebuilds the indexes, and the open cuts what followed the loaded entries
/// (Kafka's `trimToValidSize`): nothing of the garbage stays behind them, the active
/// segment's preallocated rest is zeroes, a sealed one's index ends with its entries,
/// and `kpfs check` finds nothing then, where it named every entry before. The cut is in
/// the topic's `events` and `status`.
#[test]
fn row06c_garbage_past_the_valid_index_entries_goes_at_open() {
    let mut f = Fixture::new();
    let t = f.topic("r");
    set(&t, "index.interval.bytes=77");
    let mut text = String::new();
    // Two segments of the issue's 80 records each, the first sealed.
    for i in 1..=160 {
        let line = format!("rec-{i:06}\n");
        t.append_lines(line.as_bytes()).unwrap();
        text.push_str(&line);
        f.advance(10);
        if i == 80 {
            t.p0().log().roll(&t.config(), RollReason::Size).unwrap();
        }
    }
    let snap = t.p0().log().snapshot();
    assert_eq!(snap.segments.len(), 2);
    let (sealed, active) = (snap.segments[0].clone(), snap.active().clone());
    let entries = |s: &kpfs::engine::segment::Segment| {
        (
            s.index_entries().unwrap().len(),
            s.time_index_entries().unwrap().len(),
        )
    };
    let (sealed_entries, _) = entries(&sealed);
    let (active_entries, active_time_entries) = entries(&active);
    assert!(sealed_entries > 10 && active_entries > 10 && active_time_entries > 10);
    let dir = t.p0().dir().to_path_buf();
    let log_size = active.size();
    drop((t, snap));
    crash(&mut f);

    let garbage_index = b"\x7f\xff\xff\xf0\x00\x00\x10\x00\x7f\xff\xff\xf1\x00\x00\x20\x00";
    let index = seg(&dir, active.base_offset(), INDEX);
    let index_end = 8 * active_entries as u64;
    write_at(&index, index_end, garbage_index);
    let time_index = seg(&dir, active.base_offset(), TIME_INDEX);
    let time_index_end = 12 * active_time_entries as u64;
    // A timestamp below the last entry's: loading stops before it, as at the index.
    write_at(
        &time_index,
        time_index_end,
        &[0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 0, 0, 0],
    );
    let sealed_index = seg(&dir, sealed.base_offset(), INDEX);
    let sealed_index_len = fs::metadata(&sealed_index).unwrap().len();
    write_at(&sealed_index, sealed_index_len, garbage_index);
    let log = seg(&dir, active.base_offset(), LOG);
    write_at(&log, log_size, &[0xA5; 104]);
    let stream = seg(&kpfs_dir(f.dir.path()), active.base_offset(), ".stream");
    let stream_len = fs::metadata(&stream).unwrap().len();
    write_at(&stream, stream_len, &[0x5A; 40]);
    let before = kpfs::engine::inspect::check_data_dir(f.dir.path());
    for (path, what) in [
        (&index, "not after the previous entry's position"),
        (&index, "at or past the first invalid batch"),
        (&time_index, "does not increase"),
        (&sealed_index, "not after the previous entry's position"),
        (&sealed_index, "past the end of the log data"),
        (&stream, "fails its CRC32C"),
    ] {
        let about: Vec<_> = before
            .problems
            .iter()
            .filter(|p| p.contains(&*path.display().to_string()))
            .collect();
        assert!(about.iter().any(|p| p.contains(what)), "{what}: {about:#?}");
    }

    start(&mut f);
    let t = f.topic("r");
    assert_eq!(t.p0().log().log_end_offset(), 160);
    assert_eq!(fs::metadata(&log).unwrap().len(), log_size);
    assert_eq!(cat_string(&t), text);
    let snap = t.p0().log().snapshot();
    assert_eq!(entries(&snap.segments[0]).0, sealed_entries);
    assert_eq!(
        entries(snap.active()),
        (active_entries, active_time_entries)
    );
    assert_eq!(
        nonzero_from(&index, index_end),
        0,
        "the offset index's garbage stays"
    );
    assert_eq!(
        nonzero_from(&time_index, time_index_end),
        0,
        "the time index's garbage stays"
    );
    assert_eq!(fs::metadata(&sealed_index).unwrap().len(), sealed_index_len);
    assert_eq!(fs::metadata(&stream).unwrap().len(), stream_len);
    let after = kpfs::engine::inspect::check_data_dir(f.dir.path());
    assert!(after.is_healthy(), "{:#?}", after.problems);
    let cut = format!(
        "{} cut at position {log_size} (104 bytes cut: ",
        log.file_name().unwrap().to_string_lossy()
    );
    assert!(
        t.events_text().contains(&format!(" recovery {cut}")),
        "{}",
        t.events_text()
    );
    let status = t.p0().status_text();
    assert!(status.contains("\nlast_recovery: at "), "{status}");
    assert!(
        status.contains(&cut)
            && status.contains("the log now ends at offset 160, 0 later segment(s) deleted"),
        "{status}"
    );
    drop((t, snap));
    stop_cleanly(&mut f);
    assert_eq!(fs::metadata(&index).unwrap().len(), index_end);
    assert_eq!(fs::metadata(&time_index).unwrap().len(), time_index_end);
    assert!(kpfs::engine::inspect::check_data_dir(f.dir.path()).is_healthy());
}

#[test]
fn row08_sealed_log_emptied_behind_a_clean_marker_is_recovered() {
    // Found by tests/fuzz.rs: a sealed `.log` cut to 0 bytes while its index kept entries
    // and the clean-shutdown marker stayed. The index must not be trusted.
    let mut f = Fixture::new();
    let (t, _) = plain_topic(&f, 60);
    let dir = t.p0().dir().to_path_buf();
    drop(t);
    stop_cleanly(&mut f);
    let bases = log_bases(&dir);
    assert!(
        fs::metadata(seg(&dir, bases[0], INDEX)).unwrap().len() > 0,
        "needs index entries"
    );
    fs::OpenOptions::new()
        .write(true)
        .open(seg(&dir, bases[0], LOG))
        .unwrap()
        .set_len(0)
        .unwrap();
    start(&mut f);
    let t = f.topic("r");
    // Nothing readable remains before the gap; what is shown is whole lines in order.
    let text = cat_string(&t);
    assert!(text.is_empty() || text.ends_with('\n'));
    t.append_lines(b"after\n").unwrap();
    assert!(cat_string(&t).ends_with("after\n"));
}

/// Recovery after a crash starts at the recovery point: segments below it are trusted,
/// the one holding it is validated from its last index entry below it, so the work
/// follows the unsynced tail. The result is what a full scan of the same image gives.
#[test]
fn row06_crash_recovery_validates_only_what_follows_the_recovery_point() {
    let mut f = Fixture::new();
    let t = f.topic("r");
    set(
        &t,
        "internal.segment.bytes=8192\nindex.interval.bytes=256\nsegment.index.bytes=4096",
    );
    let mut text = String::new();
    let mut append = |t: &Topic, from: usize, to: usize| {
        for i in from..to {
            let line = format!("record-{i:05}-{}\n", "y".repeat(i % 23));
            t.append_lines(line.as_bytes()).unwrap();
            text.push_str(&line);
            f.advance(3);
        }
    };
    append(&t, 0, 600);
    t.sync().unwrap();
    f.engine().run_flush_once().unwrap();
    let durable_end = t.p0().log().log_end_offset();
    let durable_bytes = t.p0().log().size_bytes();
    assert!(
        t.p0().log().snapshot().segments.len() > 3,
        "several segments"
    );
    // The unsynced tail: appended after the checkpoint, then a torn write after it.
    append(&t, 600, 640);
    let tail_bytes = t.p0().log().size_bytes() - durable_bytes;
    let snap = t.p0().log().snapshot();
    let tail_segments = snap
        .segments
        .iter()
        .filter(|s| s.next_offset() > durable_end)
        .count();
    assert!(
        tail_segments < snap.segments.len(),
        "some segments below the point"
    );
    drop(snap);
    let active = t.p0().log().snapshot().active().log_path();
    drop(t);
    crash(&mut f);
    let mut torn = fs::OpenOptions::new().append(true).open(&active).unwrap();
    std::io::Write::write_all(&mut torn, &[0x42; 37]).unwrap();
    drop(torn);
    let checkpoint = fs::read_to_string(f.dir.path().join(RECOVERY_CHECKPOINT_FILE)).unwrap();
    assert_eq!(
        checkpoint,
        format!("0\n1\nr 0 {durable_end}\n"),
        "Kafka's format"
    );
    let full = tempfile::tempdir().unwrap();
    copy_dir(f.dir.path(), full.path());

    let properties = fs::read_to_string(kpfs_dir(f.dir.path()).join(TOPIC_CONFIG_FILE)).unwrap();
    let overrides = TopicOverrides::from_properties(&properties).unwrap();
    let config = BrokerConfig::defaults().resolve_topic(&overrides);
    let clock: Arc<dyn Clock> = f.clock.clone();
    let (log, report) = Log::open(
        &topic_dir(f.dir.path()),
        &TopicPartition::new("r", 0),
        &config,
        clock.clone(),
        Durability::RecoveryPoint(durable_end),
    )
    .unwrap();
    let (full_log, full_report) = Log::open(
        &topic_dir(full.path()),
        &TopicPartition::new("r", 0),
        &config,
        clock,
        Durability::RecoveryPoint(0),
    )
    .unwrap();
    assert_eq!(
        report.recovered_segments, tail_segments,
        "only the segments holding the point and after it"
    );
    assert!(
        report.recovered_bytes >= tail_bytes && report.recovered_bytes <= tail_bytes + 256 + 512,
        "validated {} bytes for a tail of {tail_bytes}",
        report.recovered_bytes
    );
    assert_eq!(full_report.recovered_bytes, durable_bytes + tail_bytes);
    assert_eq!(report.truncated.len(), 1, "the torn write is cut");
    assert_eq!(log.recovery_point(), durable_end);
    let shape = |l: &Log| -> Vec<_> {
        l.snapshot()
            .segments
            .iter()
            .map(|s| {
                let i = s.info();
                (
                    (i.base_offset, i.size, i.next_offset, i.max_timestamp),
                    (i.stream_start, i.stream_end, i.first_batch_timestamp),
                    (s.index_entries().unwrap(), s.time_index_entries().unwrap()),
                )
            })
            .collect()
    };
    assert_eq!(shape(&log), shape(&full_log), "same state as a full scan");
    drop((log, full_log));
    start(&mut f);
    let t = f.topic("r");
    assert_eq!(cat_string(&t), text);
    assert_random_reads(&t, &text);
}

/// A topic deleted and created again under the same name must not inherit the old
/// topic's recovery point: it would vouch for records nobody synced.
#[test]
fn row06_a_recreated_topic_does_not_inherit_a_recovery_point() {
    let f = Fixture::new();
    let t = f.topic("r");
    for i in 0..50 {
        t.append_lines(format!("old-{i}\n").as_bytes()).unwrap();
    }
    t.sync().unwrap();
    drop(t);
    f.engine().run_flush_once().unwrap();
    let path = f.dir.path().join(RECOVERY_CHECKPOINT_FILE);
    assert_eq!(fs::read_to_string(&path).unwrap(), "0\n1\nr 0 50\n");
    assert!(
        f.topic("r")
            .p0()
            .status_text()
            .contains("\nrecovery_point: 50\n"),
        "status shows the point"
    );
    f.engine().delete_topic("r").unwrap();
    let t = f.engine().create_topic("r", 1).unwrap();
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        "0\n0\n",
        "the old point is gone"
    );
    assert_eq!(t.p0().recovery_point(), 0);
}

/// The batch recovery would resume at (the last index entry below the point) no longer
/// passes its CRC (bit rot below the point): the segment is scanned whole, so the cut
/// takes the batch's index entry with it and offsets go on from what survived.
#[test]
fn row06_a_damaged_batch_at_the_resume_point_is_cut_with_its_index_entry() {
    let mut f = Fixture::new();
    let t = f.topic("r");
    set(
        &t,
        "internal.segment.bytes=1000000\nindex.interval.bytes=100",
    );
    for i in 0..5 {
        t.append_lines(format!("first-{i}-{}\n", "p".repeat(40)).as_bytes())
            .unwrap();
    }
    // One batch of 50 records: it gets the last index entry below the point.
    let mut many = String::new();
    for i in 0..50 {
        many.push_str(&format!("many-{i}\n"));
    }
    t.append_lines(many.as_bytes()).unwrap();
    t.sync().unwrap();
    f.engine().run_flush_once().unwrap();
    let point = t.p0().log().log_end_offset();
    assert_eq!(point, 55);
    let entries = t.p0().log().snapshot().active().index_entries().unwrap();
    let (off, pos) = *entries.last().unwrap();
    assert_eq!(
        off, 54,
        "the 50-record batch has the last entry: {entries:?}"
    );
    // Unsynced tail.
    t.append_lines(b"tail-1\ntail-2\n").unwrap();
    drop(t);
    crash(&mut f);
    let dir = f.dir.path().join("r-0");
    let log_path = dir.join(segment_file_name(0, ".log"));
    let mut bytes = fs::read(&log_path).unwrap();
    let at = pos as usize + 80; // inside the resume batch's lines
    bytes[at] ^= 0x5A;
    fs::write(&log_path, bytes).unwrap();

    let properties = fs::read_to_string(kpfs_dir(f.dir.path()).join(TOPIC_CONFIG_FILE)).unwrap();
    let overrides = TopicOverrides::from_properties(&properties).unwrap();
    let config = BrokerConfig::defaults().resolve_topic(&overrides);
    let clock: Arc<dyn Clock> = f.clock.clone();
    let (log, _report) = Log::open(
        &dir,
        &TopicPartition::new("r", 0),
        &config,
        clock,
        Durability::RecoveryPoint(point),
    )
    .unwrap();
    let active = log.snapshot().active().clone();
    let info = active.info();
    assert!(
        active
            .last_index_entry()
            .is_none_or(|(_, p)| u64::from(p) < info.size),
        "index entry {:?} at or past the data ({} bytes)",
        active.last_index_entry(),
        info.size
    );
    assert_eq!(
        log.log_end_offset(),
        5,
        "cut before the damaged 50-record batch"
    );
    drop(log);
    start(&mut f);
    let t = f.topic("r");
    assert_eq!(t.append_lines_info(b"next\n").unwrap().first_offset, 5);
}

/// Kafka's `preallocate`: a new active segment's `.log` is grown to the segment size, the
/// data stays what it is (reads, offsets, sizes), a roll and a clean close trim the file
/// to its data, and after a crash recovery cuts the zeros and keeps every record.
#[test]
fn row06_preallocated_active_segments_are_trimmed_at_roll_and_close_and_recovered_after_a_crash() {
    let mut f = Fixture::new();
    let t = f.topic("r");
    set(&t, "preallocate=true\ninternal.segment.bytes=4000");
    let dir = topic_dir(f.dir.path());
    let mut text = String::new();
    let append = |t: &Topic, text: &mut String, i: usize| {
        let line = format!("record-{i:04}\n");
        t.append_lines(line.as_bytes()).unwrap();
        text.push_str(&line);
    };
    // The first segment predates the config; the next one is preallocated.
    append(&t, &mut text, 0);
    t.p0().log().roll(&t.config(), RollReason::Size).unwrap();
    for i in 1..4 {
        append(&t, &mut text, i);
    }
    let active = t.p0().log().snapshot().active().base_offset();
    let active_path = seg(&dir, active, LOG);
    assert_eq!(fs::metadata(&active_path).unwrap().len(), 4000);
    // Three of Kafka's batches of one 11-byte record: 61 + 7 + 11 bytes each.
    assert_eq!(t.p0().log().snapshot().active().size(), 3 * (61 + 7 + 11));
    assert_eq!(cat(&t, 7), text.as_bytes());
    assert_eq!(t.stream_len(), text.len() as u64);
    // Enough to roll by size: the sealed segment is trimmed, the new one preallocated.
    while t.p0().log().snapshot().segments.len() < 3 {
        let i = text.lines().count();
        append(&t, &mut text, i);
    }
    let snap = t.p0().log().snapshot();
    for s in &snap.segments[1..snap.segments.len() - 1] {
        assert_eq!(fs::metadata(s.log_path()).unwrap().len(), s.size());
    }
    let last = snap.active().clone();
    assert_eq!(fs::metadata(last.log_path()).unwrap().len(), 4000);
    assert_random_reads(&t, &text);
    let report = kpfs::engine::inspect::check_data_dir(f.dir.path());
    assert!(report.is_healthy(), "{:#?}", report.problems);

    // Crash: the zeros stay, `kpfs check` calls them preallocated space, recovery cuts them.
    crash(&mut f);
    assert_eq!(fs::metadata(last.log_path()).unwrap().len(), 4000);
    let report = kpfs::engine::inspect::check_data_dir(f.dir.path());
    assert!(report.is_healthy(), "{:#?}", report.problems);
    assert!(
        report.notes.iter().any(|n| n.contains("preallocated")),
        "{:#?}",
        report.notes
    );
    let mut dump = Vec::new();
    kpfs::engine::inspect::dump_file(
        &last.log_path(),
        &Default::default(),
        &mut dump,
        &mut Default::default(),
    )
    .unwrap();
    let dump = String::from_utf8(dump).unwrap();
    assert!(dump.contains(" zero bytes at position "), "{dump}");
    start(&mut f);
    let t = f.topic("r");
    assert_eq!(cat(&t, 7), text.as_bytes());
    assert_eq!(
        fs::metadata(last.log_path()).unwrap().len(),
        t.p0().log().snapshot().active().size()
    );
    append(&t, &mut text, 1000);
    assert_eq!(cat(&t, 4096), text.as_bytes());

    // A clean close trims the active segment: nothing is left to recover.
    t.p0().log().roll(&t.config(), RollReason::Size).unwrap();
    append(&t, &mut text, 1001);
    let active_path = t.p0().log().snapshot().active().log_path();
    assert_eq!(fs::metadata(&active_path).unwrap().len(), 4000);
    stop_cleanly(&mut f);
    assert_eq!(fs::metadata(&active_path).unwrap().len(), 61 + 7 + 11);
    let report = kpfs::engine::inspect::check_data_dir(f.dir.path());
    assert!(report.is_healthy() && !report.notes.iter().any(|n| n.contains("preallocated")));
    start(&mut f);
    assert_eq!(cat(&f.topic("r"), 4096), text.as_bytes());
}

/// Two segments that claim the same offsets cannot be put in order: the open is refused
/// and names the file, rather than a guess at which records are the real ones.
#[test]
fn row09_overlapping_segments_refuse_to_open() {
    let mut f = Fixture::new();
    let (t, _) = plain_topic(&f, 60);
    let dir = t.p0().dir().to_path_buf();
    drop(t);
    stop_cleanly(&mut f);
    let bases = log_bases(&dir);
    // The third segment renamed to start one offset after the second one's base: its
    // batches are still above its new base, but below where the second segment ends.
    let moved = bases[1] + 1;
    assert!(moved < bases[2]);
    for kind in [LOG, INDEX, TIME_INDEX] {
        fs::rename(seg(&dir, bases[2], kind), seg(&dir, moved, kind)).unwrap();
    }
    let opened = Engine::open(
        f.dir.path(),
        BrokerConfig::defaults(),
        f.clock.clone(),
        EngineOptions::default(),
    );
    let Err(err) = opened else {
        panic!("overlapping segments must not open");
    };
    let text = err.to_string();
    assert!(
        text.contains(&segment_file_name(moved, LOG)) && text.contains("overlaps"),
        "{text}"
    );
    // Nothing was repaired by guessing: both segments are still there.
    assert_eq!(log_bases(&dir)[..3], [bases[0], bases[1], moved]);
}

/// A crash in the middle of `write_atomically` leaves `NAME.tmp` beside the file it was
/// replacing; the next open removes it and keeps the file as it was.
#[test]
fn row11_temporary_files_beside_configs_and_checkpoints_are_removed() {
    let mut f = Fixture::new();
    let (t, text) = plain_topic(&f, 20);
    t.sync().unwrap();
    drop(t);
    f.engine().run_flush_once().unwrap();
    f.engine()
        .update_broker_config(b"log.retention.bytes=123456789\n")
        .unwrap();
    crash(&mut f);
    let files = [
        kpfs_dir(f.dir.path()).join(TOPIC_CONFIG_FILE),
        f.dir.path().join(RECOVERY_CHECKPOINT_FILE),
        f.dir.path().join(CLEANER_CHECKPOINT_FILE),
        f.dir.path().join(DYNAMIC_BROKER_CONFIG_FILE),
    ];
    let before: Vec<Option<Vec<u8>>> = files.iter().map(|p| fs::read(p).ok()).collect();
    let tmp = |p: &PathBuf| PathBuf::from(format!("{}.tmp", p.display()));
    for p in &files {
        fs::write(tmp(p), b"half-written=").unwrap();
    }
    start(&mut f);
    for (p, was) in files.iter().zip(&before) {
        assert!(!tmp(p).exists(), "{} stays behind", tmp(p).display());
        assert_eq!(&fs::read(p).ok(), was, "{} changed", p.display());
    }
    let t = f.topic("r");
    assert!(t.config_text().contains("internal.segment.bytes=400"));
    assert_eq!(cat_string(&t), text);
}

/// A topic whose deletion was interrupted after its directory was renamed `-delete` is
/// gone after the next open, and nothing of it is loaded as a topic.
#[test]
fn row12_a_topic_directory_being_deleted_is_removed_at_open() {
    let mut f = Fixture::new();
    let (t, _) = plain_topic(&f, 20);
    let dir = t.p0().dir().to_path_buf();
    drop(t);
    crash(&mut f);
    // What `delete_topic` leaves when the crash comes between its rename and its removal.
    let deleting = f.dir.path().join("r-0.1764430000123-delete");
    fs::rename(&dir, &deleting).unwrap();
    start(&mut f);
    assert!(!deleting.exists(), "the -delete directory stays");
    assert!(
        f.engine().topic_names().is_empty(),
        "{:?}",
        f.engine().topic_names()
    );
}
