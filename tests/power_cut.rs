//! Simulated power cuts, engine-level (no mount). A copy of the data directory taken with
//! std::fs reads the page cache, so it holds at least what stable storage holds; to model
//! a power cut, every segment `.log` of the copy is then cut at a random byte between
//! what an fsync covered ([`Segment::synced_size`]) and its end: the unsynced bytes are
//! lost (truncated), never written (zeros, as when the size reached the disk but the data
//! did not) or torn (garbage). Each copy is opened by a fresh engine without a clean
//! shutdown marker, and must show exactly a prefix of the appended lines that includes
//! every line appended before the last `Topic::sync`, and continue offsets from there.
//! Between cuts the engine sometimes runs its flush task, which flushes rolled segments
//! and checkpoints recovery points: recovery trusts what lies below the checkpointed
//! point, so a point that ran ahead of an fsync would show up here as lost or torn lines.
//!
//! [`Segment::synced_size`]: kpfs::engine::segment::Segment::synced_size

mod common;

use std::fs;
use std::path::Path;
use std::sync::Arc;

use common::*;
use kpfs::engine::inspect::check_data_dir;
use kpfs::engine::{ManualClock, Topic, RECOVERY_CHECKPOINT_FILE};

const TOPIC: &str = "p";

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*: reproducible from the seed printed on failure.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[derive(Clone, Copy, Debug)]
enum Loss {
    Truncate,
    Zeros,
    Garbage,
}

/// Copies the data directory and loses the unsynced bytes of every segment of the copy.
/// Returns the copy and how many segment files lost bytes.
fn power_cut(f: &Fixture, t: &Topic, rng: &mut Rng, loss: Loss) -> (tempfile::TempDir, usize) {
    let copy = tempfile::tempdir().unwrap();
    copy_dir(f.dir.path(), copy.path());
    let mut damaged = 0;
    for seg in t.p0().log().snapshot().segments.iter() {
        let (synced, size) = (seg.synced_size(), seg.size());
        assert!(synced <= size, "synced {synced} beyond size {size}");
        let cut = synced + rng.below(size - synced + 1);
        if cut == size {
            continue;
        }
        damaged += 1;
        let name = seg.log_path().file_name().unwrap().to_owned();
        let path = copy.path().join(format!("{TOPIC}-0")).join(name);
        let mut bytes = fs::read(&path).unwrap();
        assert_eq!(bytes.len() as u64, size, "{} in the copy", path.display());
        match loss {
            Loss::Truncate => bytes.truncate(cut as usize),
            Loss::Zeros => bytes[cut as usize..].fill(0),
            Loss::Garbage => {
                for b in &mut bytes[cut as usize..] {
                    *b = rng.next() as u8;
                }
            }
        }
        fs::write(&path, bytes).unwrap();
    }
    (copy, damaged)
}

/// Opens a power-cut copy and checks it shows a prefix of `appended` of at least
/// `durable` lines, then that the next append continues the offsets.
fn check_copy(copy: &Path, appended: &[String], durable: usize, fsck: bool, what: &str) -> usize {
    let checkpointed: u64 = fs::read_to_string(copy.join(RECOVERY_CHECKPOINT_FILE))
        .ok()
        .and_then(|text| {
            let line = text
                .lines()
                .find(|l| l.starts_with(&format!("{TOPIC} 0 ")))?;
            line.rsplit(' ').next()?.parse().ok()
        })
        .unwrap_or(0);
    let clock = Arc::new(ManualClock::new(T0 + 1_000_000));
    let engine = open(copy, &clock);
    let t = engine.topic(TOPIC).expect("topic survives");
    let text = cat_string(&t);
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "{what}: torn last line in {text:?}"
    );
    let lines: Vec<&str> = text.split_terminator('\n').collect();
    let n = lines.len();
    assert!(
        n >= durable,
        "{what}: only {n} lines after the cut, but {durable} were appended before the last sync"
    );
    assert!(n <= appended.len(), "{what}: {n} lines, more than appended");
    assert!(
        checkpointed <= n as u64,
        "{what}: the checkpointed recovery point {checkpointed} is past the {n} records that survived"
    );
    for (i, (got, want)) in lines.iter().zip(appended).enumerate() {
        assert_eq!(got, want, "{what}: line {i} differs");
    }
    let snap = t.p0().log().snapshot();
    if t.stream_len() != text.len() as u64 {
        for s in snap.segments.iter() {
            eprintln!("DEBUG {:?}", s.info());
        }
    }
    assert_eq!(
        snap.active().next_offset(),
        n as u64,
        "{what}: log end offset"
    );
    assert_eq!(t.stream_len(), text.len() as u64, "{what}: size of log");
    let info = t.append_lines_info(b"after-the-cut\n").unwrap();
    assert_eq!(
        info.first_offset, n as u64,
        "{what}: offset of the next append"
    );
    assert_eq!(
        cat_string(&t),
        format!("{text}after-the-cut\n"),
        "{what}: log after the next append"
    );
    if fsck {
        engine.shutdown().unwrap();
        drop(engine);
        let report = check_data_dir(copy);
        assert!(
            report.is_healthy(),
            "{what}: kpfs check: {:?}",
            report.problems
        );
    }
    n
}

fn random_line(rng: &mut Rng, i: usize) -> String {
    let pad = rng.below(70) as usize;
    let fill = char::from(b'a' + (i % 26) as u8);
    format!("rec-{i:05}-{}", fill.to_string().repeat(pad))
}

#[test]
fn power_cuts_lose_only_unsynced_whole_batches() {
    let seed = std::env::var("KPFS_POWER_CUT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_CAFE_u64);
    let mut rng = Rng(seed);
    let f = Fixture::new();
    let t = f.topic(TOPIC);
    // Small segments so cuts land in sealed segments that rolled since the last sync too.
    set(
        &t,
        "internal.segment.bytes=1024\nsegment.index.bytes=4096\nindex.interval.bytes=128",
    );
    let mut appended: Vec<String> = Vec::new();
    let mut durable = 0usize;
    let mut cuts = 0usize;
    let mut damaged_total = 0usize;
    let mut shorter = 0usize;
    for step in 0..260 {
        let lines = 1 + rng.below(4) as usize;
        let batch: Vec<String> = (0..lines)
            .map(|k| random_line(&mut rng, appended.len() + k))
            .collect();
        let mut text = batch.join("\n");
        text.push('\n');
        t.append_lines(text.as_bytes()).unwrap();
        appended.extend(batch);
        f.advance(1);
        if rng.below(4) == 0 {
            t.sync().unwrap();
            durable = appended.len();
            for seg in t.p0().log().snapshot().segments.iter() {
                assert_eq!(
                    seg.synced_size(),
                    seg.size(),
                    "after sync, segment {} is not covered by an fsync",
                    seg.base_offset()
                );
            }
        }
        if rng.below(5) == 0 {
            // The scheduler's flush of rolled segments and its recovery-point checkpoint:
            // the copy's recovery then trusts everything below the checkpointed point.
            f.engine().run_flush_once().unwrap();
        }
        let loss = [Loss::Truncate, Loss::Zeros, Loss::Garbage][rng.below(3) as usize];
        let (copy, damaged) = power_cut(&f, &t, &mut rng, loss);
        let what = format!("seed {seed} step {step} {loss:?} ({damaged} segments cut)");
        let n = check_copy(copy.path(), &appended, durable, step % 20 == 0, &what);
        cuts += 1;
        damaged_total += damaged;
        shorter += usize::from(n < appended.len());
    }
    assert!(
        t.p0().log().snapshot().segments.len() > 20,
        "segments rolled"
    );
    // The cuts must actually have bitten, or the test proved nothing.
    assert!(
        damaged_total > cuts / 2,
        "{damaged_total} damaged in {cuts} cuts"
    );
    assert!(
        shorter > cuts / 4,
        "only {shorter} of {cuts} cuts lost lines"
    );
    eprintln!(
        "{cuts} power cuts, {damaged_total} segment files cut, {shorter} lost unsynced lines"
    );
}

/// A sync after the recovery of a crash covers the recovered segments too: they held
/// bytes that only reached the page cache before the crash.
#[test]
fn sync_after_crash_recovery_covers_recovered_segments() {
    let mut f = Fixture::new();
    let t = f.topic(TOPIC);
    set(&t, "internal.segment.bytes=512\nsegment.index.bytes=4096");
    for i in 0..60 {
        t.append_lines(format!("line-{i:03}-xxxxxxxxxxxxxxxx\n").as_bytes())
            .unwrap();
    }
    drop(t);
    f.crash_and_reopen();
    let t = f.topic(TOPIC);
    let snap = t.p0().log().snapshot();
    assert!(snap.segments.len() > 3);
    assert!(
        snap.segments.iter().all(|s| s.synced_size() == 0),
        "nothing loaded after a crash is known to be synced"
    );
    t.sync().unwrap();
    for s in t.p0().log().snapshot().segments.iter() {
        assert_eq!(s.synced_size(), s.size(), "segment {}", s.base_offset());
    }
}
