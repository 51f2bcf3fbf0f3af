//! The Rust half of `scripts/crash-harness`: appenders that keep a ledger of the writes
//! kpfs acknowledged, and the verifier that holds a `cat log` against those ledgers.
//!
//! ```text
//! crash_appender append LOG STATE_DIR ID [--keys N] [--max N] [--pause-us N]
//! crash_appender verify KIND CAT_FILE STATE_DIR IDS [--keys N] [--offsets START END]
//! ```
//!
//! Every line is a pure function of (appender id, sequence number, key count), so the
//! verifier can tell a torn or foreign line from a real one by rebuilding it exactly.
//! `append` writes one line per write(2) to LOG; after each write returned the full
//! length it adds the sequence number to `STATE_DIR/ID.acked`. The first failed write
//! (the daemon was killed under it) may or may not have reached the log, so its sequence
//! number goes to `ID.maybe` and the appender stops. A later run of the same id continues
//! after the highest number in either file, so sequence numbers are never reused.
//!
//! `verify` KINDs: `keep` (no retention: every acknowledged line exactly once, in
//! order), `delete` (retention may remove a prefix: from each appender's first visible
//! line on, every acknowledged line exactly once, in order) and `compact` (per key, the
//! last value in the log is the latest acknowledged one or a later maybe). In every kind
//! a visible line must be whole, must be acknowledged or maybe, and each appender's lines
//! must appear in increasing sequence order. It prints one summary line and exits 1
//! after listing the first violations.
#![allow(
    clippy::disallowed_methods,
    reason = "pauses between appends so a kill lands mid-stream"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

fn usage() -> ExitCode {
    eprintln!(
        "usage: crash_appender append LOG STATE_DIR ID [--keys N] [--max N] [--pause-us N]\n       \
         crash_appender verify keep|delete|compact CAT_FILE STATE_DIR ID,ID,... [--keys N] [--offsets START END]"
    );
    ExitCode::from(2)
}

/// A cheap, stable mix so padding and keys vary from line to line.
fn mix(id: u32, seq: u64) -> u64 {
    let mut x = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(id).wrapping_mul(0xBF58_476D);
    x ^= x >> 31;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 29)
}

fn key_of(id: u32, seq: u64, keys: u32) -> u32 {
    (mix(id, seq) % u64::from(keys.max(1))) as u32
}

/// The line (without newline) appender `id` writes as number `seq`. The padding length
/// varies so batches and segment boundaries fall at ever different byte positions.
fn line(id: u32, seq: u64, keys: Option<u32>) -> String {
    let h = mix(id, seq);
    let pad_len = (h % 48) as usize;
    let pad: String = (0..pad_len)
        .map(|i| char::from(b'a' + ((h >> (i % 60)) as u8 % 26)))
        .collect();
    let body = format!("a{id}-{seq:010}-{pad}");
    match keys {
        Some(k) => format!("a{id}k{:03}:{body}", key_of(id, seq, k)),
        None => body,
    }
}

/// Parses (id, seq) out of a line; the caller compares with [`line`] to reject anything
/// that merely looks similar.
fn parse(text: &str, keyed: bool) -> Option<(u32, u64)> {
    let body = if keyed { text.split_once(':')?.1 } else { text };
    let rest = body.strip_prefix('a')?;
    let (id, rest) = rest.split_once('-')?;
    let (seq, _) = rest.split_once('-')?;
    Some((id.parse().ok()?, seq.parse().ok()?))
}

fn read_seqs(path: &Path) -> Vec<u64> {
    let Ok(file) = File::open(path) else {
        return Vec::new();
    };
    BufReader::new(file)
        .lines()
        .map(|l| l.expect("read ledger"))
        .filter(|l| !l.is_empty())
        .map(|l| l.parse().expect("ledger lines are sequence numbers"))
        .collect()
}

struct Flags {
    keys: Option<u32>,
    max: u64,
    pause_us: u64,
    offsets: Option<(u64, u64)>,
}

fn flags(args: &[String]) -> Option<Flags> {
    let mut f = Flags {
        keys: None,
        max: u64::MAX,
        pause_us: 0,
        offsets: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--keys" => f.keys = Some(it.next()?.parse().ok()?),
            "--max" => f.max = it.next()?.parse().ok()?,
            "--pause-us" => f.pause_us = it.next()?.parse().ok()?,
            "--offsets" => f.offsets = Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?)),
            _ => return None,
        }
    }
    Some(f)
}

fn state_file(dir: &Path, id: u32, what: &str) -> PathBuf {
    dir.join(format!("{id}.{what}"))
}

fn append(log: &Path, state: &Path, id: u32, f: &Flags) -> ExitCode {
    let acked_path = state_file(state, id, "acked");
    let maybe_path = state_file(state, id, "maybe");
    let start = read_seqs(&acked_path)
        .into_iter()
        .chain(read_seqs(&maybe_path))
        .max()
        .map_or(0, |m| m + 1);
    let open_state = |p: &Path| {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .unwrap_or_else(|e| panic!("open {}: {e}", p.display()))
    };
    let mut acked = BufWriter::new(open_state(&acked_path));
    let mut out = match OpenOptions::new().append(true).open(log) {
        Ok(f) => f,
        Err(e) => {
            println!("appender {id}: open failed: {e}");
            return ExitCode::SUCCESS;
        }
    };
    let mut seq = start;
    let mut count = 0u64;
    let stopped = loop {
        if count == f.max {
            break "reached --max".to_string();
        }
        let mut text = line(id, seq, f.keys);
        text.push('\n');
        // One write(2) per line: a line is either acknowledged whole or not at all.
        match out.write(text.as_bytes()) {
            Ok(n) if n == text.len() => {
                writeln!(acked, "{seq}").expect("write ledger");
                count += 1;
                seq += 1;
            }
            result => {
                let why = match result {
                    Ok(n) => format!("short write of {n} of {} bytes", text.len()),
                    Err(e) => e.to_string(),
                };
                writeln!(open_state(&maybe_path), "{seq}").expect("write maybe file");
                break why;
            }
        }
        if f.pause_us > 0 {
            std::thread::sleep(Duration::from_micros(f.pause_us));
        }
    };
    acked.flush().expect("flush ledger");
    println!("appender {id}: {count} acked from {start}, stopped: {stopped}");
    ExitCode::SUCCESS
}

struct Appender {
    acked: BTreeSet<u64>,
    maybe: BTreeSet<u64>,
    /// Sequence numbers seen in the log, in log order.
    visible: Vec<u64>,
}

fn verify(kind: &str, cat: &Path, state: &Path, ids: &[u32], f: &Flags) -> ExitCode {
    let keyed = kind == "compact";
    let keys = if keyed {
        Some(f.keys.unwrap_or(1))
    } else {
        None
    };
    let mut apps: BTreeMap<u32, Appender> = ids
        .iter()
        .map(|&id| {
            let app = Appender {
                acked: read_seqs(&state_file(state, id, "acked"))
                    .into_iter()
                    .collect(),
                maybe: read_seqs(&state_file(state, id, "maybe"))
                    .into_iter()
                    .collect(),
                visible: Vec::new(),
            };
            (id, app)
        })
        .collect();
    let mut violations: Vec<String> = Vec::new();
    let mut violate = |v: String| {
        if violations.len() < 20 {
            violations.push(v);
        }
    };
    let bytes = std::fs::read(cat).unwrap_or_else(|e| panic!("read {}: {e}", cat.display()));
    if !bytes.is_empty() && !bytes.ends_with(b"\n") {
        violate("the log does not end with a newline (a torn last line)".to_string());
    }
    // Last visible (seq) per (id, key), for compaction.
    let mut last_of_key: BTreeMap<(u32, u32), u64> = BTreeMap::new();
    let mut lines = 0u64;
    let body = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
    let records = (!bytes.is_empty()).then(|| body.split(|&b| b == b'\n'));
    for (n, raw) in records.into_iter().flatten().enumerate() {
        lines += 1;
        let text = String::from_utf8_lossy(raw);
        let parsed = parse(&text, keyed).filter(|&(id, seq)| line(id, seq, keys) == text);
        let Some((id, seq)) = parsed else {
            violate(format!(
                "line {}: not a line any appender wrote: {text:?}",
                n + 1
            ));
            continue;
        };
        let Some(app) = apps.get_mut(&id) else {
            violate(format!("line {}: unknown appender {id}: {text:?}", n + 1));
            continue;
        };
        if let Some(&prev) = app.visible.last() {
            if seq <= prev {
                violate(format!(
                    "line {}: appender {id} seq {seq} after seq {prev} (duplicate or reordered)",
                    n + 1
                ));
            }
        }
        if !app.acked.contains(&seq) && !app.maybe.contains(&seq) {
            violate(format!(
                "line {}: appender {id} seq {seq} was never attempted or acknowledged",
                n + 1
            ));
        }
        app.visible.push(seq);
        if let Some(k) = keys {
            last_of_key.insert((id, key_of(id, seq, k)), seq);
        }
    }
    let mut acked_total = 0usize;
    let mut maybe_total = 0usize;
    let mut maybe_present = 0usize;
    let mut expected_present = 0usize;
    for (&id, app) in &apps {
        acked_total += app.acked.len();
        maybe_total += app.maybe.len();
        let visible: BTreeSet<u64> = app.visible.iter().copied().collect();
        maybe_present += app.maybe.intersection(&visible).count();
        match kind {
            "keep" | "delete" => {
                let from = match (kind, app.visible.first()) {
                    ("keep", _) => 0,
                    (_, Some(&first)) => first,
                    // Retention took every line of this appender: nothing to hold it to.
                    (_, None) => u64::MAX,
                };
                for &seq in app.acked.range(from..) {
                    expected_present += 1;
                    if !visible.contains(&seq) {
                        violate(format!(
                            "appender {id}: acknowledged seq {seq} ({:?}) is missing (first visible seq {from})",
                            line(id, seq, keys)
                        ));
                    }
                }
            }
            _ => {
                let k = keys.expect("compact is keyed");
                let mut latest: BTreeMap<u32, u64> = BTreeMap::new();
                for &seq in &app.acked {
                    latest.insert(key_of(id, seq, k), seq);
                }
                for (key, want) in latest {
                    expected_present += 1;
                    match last_of_key.get(&(id, key)) {
                        Some(&got) if got == want => {}
                        Some(&got) if got > want && app.maybe.contains(&got) => {}
                        Some(&got) => violate(format!(
                            "appender {id} key {key}: last value in the log is seq {got}, latest acknowledged is seq {want}"
                        )),
                        None => violate(format!(
                            "appender {id} key {key}: latest acknowledged seq {want} is gone (no value at all)"
                        )),
                    }
                }
            }
        }
    }
    if let Some((start, end)) = f.offsets {
        // Neither retention (whole segments) nor a crash may leave a hole in the offsets of
        // a log that is never compacted: offsets [start, end) are exactly the lines shown.
        if kind != "compact" && end.checked_sub(start) != Some(lines) {
            violate(format!(
                "status says offsets [{start}, {end}) but the log shows {lines} lines"
            ));
        }
        if kind == "compact" && end < lines {
            violate(format!(
                "status log_end_offset {end} is below the {lines} lines shown"
            ));
        }
    }
    println!(
        "{kind}: {lines} lines visible, {acked_total} acked in total, {expected_present} required present, maybe {maybe_present}/{maybe_total} present, {} violations",
        violations.len()
    );
    if violations.is_empty() {
        return ExitCode::SUCCESS;
    }
    for v in &violations {
        println!("VIOLATION {kind}: {v}");
    }
    ExitCode::FAILURE
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("append") if args.len() >= 4 => {
            let (Ok(id), Some(f)) = (args[3].parse::<u32>(), flags(&args[4..])) else {
                return usage();
            };
            append(Path::new(&args[1]), Path::new(&args[2]), id, &f)
        }
        Some("verify") if args.len() >= 5 => {
            let ids: Option<Vec<u32>> = args[4].split(',').map(|s| s.parse().ok()).collect();
            let (Some(ids), Some(f)) = (ids, flags(&args[5..])) else {
                return usage();
            };
            if !matches!(args[1].as_str(), "keep" | "delete" | "compact") {
                return usage();
            }
            verify(&args[1], Path::new(&args[2]), Path::new(&args[3]), &ids, &f)
        }
        _ => usage(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_back() {
        for seq in [0, 1, 99, 123_456_789] {
            for keys in [None, Some(20)] {
                let l = line(3, seq, keys);
                assert_eq!(parse(&l, keys.is_some()), Some((3, seq)), "{l}");
            }
        }
    }
}
