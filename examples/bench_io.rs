//! I/O drivers for `scripts/bench`, for the steps that shell tools cannot time or check
//! precisely. Each prints one `key: value` line per figure.
//!
//! ```text
//! bench_io lines OUT BYTES [LINE_BYTES]  # BYTES/LINE_BYTES numbered lines (default 100 bytes)
//! bench_io keyed OUT BYTES KEYS          # 100-byte `kNNNNN:...` lines, KEYS keys in a scattered order
//! bench_io small PATH COUNT              # COUNT write(2)s of one line each, O_APPEND
//! bench_io follow PATH COUNT INTERVAL_MS # append-to-visible delay through `tail -f`
//! ```
//!
//! `small` times every write(2) on its own, so the percentiles show the per-call cost
//! (one FUSE round trip each on kpfs and on the floor) rather than an average.
//! `follow` runs `tail -f -s 0.1 PATH` as a reader, appends one line every INTERVAL_MS and
//! measures, per line, from just before its write(2) to the moment tail's output shows
//! it: what a `tail -f` user waits for.
#![allow(
    clippy::disallowed_methods,
    reason = "a benchmark measures real time and paces its writes in it"
)]

use std::fs::OpenOptions;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Lines of `small` and `follow`, and of `lines` unless told otherwise.
const LINE_BYTES: usize = 100;
/// A line of `lines` holds at least one digit and its newline.
const LINE_BYTES_RANGE: std::ops::RangeInclusive<usize> = 2..=1 << 20;
/// How long `follow` waits for tail to start, and for the last line after the writes.
const FOLLOW_DEADLINE: Duration = Duration::from_secs(10);

fn usage() -> ExitCode {
    eprintln!(
        "usage: bench_io lines OUT BYTES [LINE_BYTES] | keyed OUT BYTES KEYS | small PATH COUNT | follow PATH COUNT INTERVAL_MS"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize| args.get(i).and_then(|v| v.parse::<u64>().ok());
    let result = match (args.first().map(String::as_str), args.len()) {
        (Some("lines"), 3 | 4) => {
            let line_bytes = match args.get(3) {
                None => Some(LINE_BYTES),
                Some(_) => num(3).map(|n| n as usize),
            };
            match (num(2), line_bytes.filter(|n| LINE_BYTES_RANGE.contains(n))) {
                (Some(bytes), Some(line_bytes)) => lines(&args[1], bytes, line_bytes),
                _ => return usage(),
            }
        }
        (Some("keyed"), 4) => match (num(2), num(3)) {
            (Some(bytes), Some(keys)) if keys > 0 => keyed(&args[1], bytes, keys),
            _ => return usage(),
        },
        (Some("small"), 3) => match num(2) {
            Some(count) => small(&args[1], count),
            None => return usage(),
        },
        (Some("follow"), 4) => match (num(2), num(3)) {
            (Some(count), Some(interval)) => follow(&args[1], count, interval),
            _ => return usage(),
        },
        _ => return usage(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench_io: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Line `n`: its number, zero-padded to the line's length, and a newline (the number's
/// last digits, if the line is too short for all of them).
fn fill_line(line: &mut [u8], mut n: u64) {
    let end = line.len() - 1;
    line[..end].fill(b'0');
    line[end] = b'\n';
    let mut i = end;
    while n > 0 && i > 0 {
        i -= 1;
        line[i] = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

fn lines(out: &str, bytes: u64, line_bytes: usize) -> io::Result<()> {
    let file = std::fs::File::create(out)?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut line = vec![0u8; line_bytes];
    let count = bytes / line_bytes as u64;
    for n in 0..count {
        fill_line(&mut line, n);
        out.write_all(&line)?;
    }
    out.flush()?;
    println!("lines: {count}");
    Ok(())
}

/// Lines `kKKKKK:NNN...\n` of `LINE_BYTES`: line `n` has key `n * 2654435761 % keys` (a
/// multiplicative hash, so consecutive lines' keys scatter over the partitions as real
/// keys do) and its number in the rest.
fn keyed(out: &str, bytes: u64, keys: u64) -> io::Result<()> {
    const KEY_BYTES: usize = 7;
    let file = std::fs::File::create(out)?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut line = vec![0u8; LINE_BYTES];
    let count = bytes / LINE_BYTES as u64;
    for n in 0..count {
        let key = n.wrapping_mul(2_654_435_761) % keys;
        line[..KEY_BYTES].copy_from_slice(format!("k{:05}:", key % 100_000).as_bytes());
        fill_line(&mut line[KEY_BYTES..], n);
        out.write_all(&line)?;
    }
    out.flush()?;
    println!("lines: {count}");
    Ok(())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn append_fd(path: &str) -> io::Result<std::fs::File> {
    OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))
}

/// One write(2) of the whole buffer; a short write would make the next line a fragment.
fn write_once(file: &std::fs::File, buf: &[u8]) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: `buf` is valid for reads of `buf.len()` bytes for the whole call.
    let n = unsafe { libc::write(file.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
    match usize::try_from(n) {
        Ok(n) if n == buf.len() => Ok(()),
        Ok(n) => Err(io::Error::other(format!(
            "short write: {n} of {}",
            buf.len()
        ))),
        Err(_) => Err(io::Error::last_os_error()),
    }
}

fn small(path: &str, count: u64) -> io::Result<()> {
    let file = append_fd(path)?;
    let mut line = [0u8; LINE_BYTES];
    let mut micros = Vec::with_capacity(count as usize);
    let started = Instant::now();
    for n in 0..count {
        fill_line(&mut line, n);
        let t0 = Instant::now();
        write_once(&file, &line)?;
        micros.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    let secs = started.elapsed().as_secs_f64();
    drop(file);
    micros.sort_by(f64::total_cmp);
    println!("writes: {count}");
    println!("secs: {secs:.6}");
    println!("writes_per_s: {:.0}", count as f64 / secs);
    println!("p50_us: {:.1}", percentile(&micros, 50.0));
    println!("p99_us: {:.1}", percentile(&micros, 99.0));
    println!("p999_us: {:.1}", percentile(&micros, 99.9));
    Ok(())
}

/// Lines tail printed, with the moment each was read, parsed as `follow SEQ ...`.
fn spawn_tail_reader(
    path: &str,
) -> io::Result<(std::process::Child, mpsc::Receiver<(i64, Instant)>)> {
    // `-n 0`: nothing from before the start; `-s 0.1`: tail polls every 100 ms on
    // filesystems it cannot watch with inotify (FUSE), as a user would run it.
    let mut child = Command::new("tail")
        .args(["-f", "-n", "0", "-s", "0.1", path])
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()?;
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            let seen = Instant::now();
            let seq = line
                .strip_prefix("follow ")
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|s| s.parse::<i64>().ok());
            if let Some(seq) = seq {
                if tx.send((seq, seen)).is_err() {
                    return;
                }
            }
        }
    });
    Ok((child, rx))
}

fn follow(path: &str, count: u64, interval_ms: u64) -> io::Result<()> {
    let file = append_fd(path)?;
    let (mut child, seen) = spawn_tail_reader(path)?;
    let result = follow_with(&file, &seen, count, interval_ms);
    let _ = child.kill();
    let _ = child.wait();
    result
}

fn follow_line(seq: i64) -> Vec<u8> {
    let mut line = format!("follow {seq} ").into_bytes();
    line.resize(LINE_BYTES - 1, b'.');
    line.push(b'\n');
    line
}

fn follow_with(
    file: &std::fs::File,
    seen: &mpsc::Receiver<(i64, Instant)>,
    count: u64,
    interval_ms: u64,
) -> io::Result<()> {
    // tail gives no sign that it is following: warm-up lines (negative numbers) until one
    // comes back, so the timed lines never wait for tail's own start.
    let deadline = Instant::now() + FOLLOW_DEADLINE;
    let mut warmup = -1;
    'ready: loop {
        write_once(file, &follow_line(warmup))?;
        warmup -= 1;
        let retry = Instant::now() + Duration::from_millis(200);
        while let Ok((seq, _)) = seen.recv_timeout(retry.saturating_duration_since(Instant::now()))
        {
            if seq < 0 {
                break 'ready;
            }
        }
        if Instant::now() > deadline {
            return Err(io::Error::other("tail -f showed no line within 10 s"));
        }
    }
    let interval = Duration::from_millis(interval_ms);
    let mut sent = Vec::with_capacity(count as usize);
    let start = Instant::now();
    for seq in 0..count {
        // An absolute schedule, so a slow write does not stretch the run.
        let due = start + interval * seq as u32;
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let line = follow_line(seq as i64);
        sent.push(Instant::now());
        write_once(file, &line)?;
    }
    let mut delays = vec![None; count as usize];
    let mut missing = count;
    let deadline = Instant::now() + FOLLOW_DEADLINE;
    while missing > 0 {
        let Ok((seq, at)) = seen.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        else {
            break;
        };
        let Some(slot) = usize::try_from(seq).ok().and_then(|i| delays.get_mut(i)) else {
            continue;
        };
        if slot.is_none() {
            *slot = Some(at.duration_since(sent[seq as usize]).as_secs_f64() * 1e3);
            missing -= 1;
        }
    }
    let mut ms: Vec<f64> = delays.iter().flatten().copied().collect();
    ms.sort_by(f64::total_cmp);
    println!("lines_sent: {count}");
    println!("lines_seen: {}", ms.len());
    println!("p50_ms: {:.1}", percentile(&ms, 50.0));
    println!("p99_ms: {:.1}", percentile(&ms, 99.0));
    println!("max_ms: {:.1}", ms.last().copied().unwrap_or(f64::NAN));
    if missing > 0 {
        return Err(io::Error::other(format!(
            "{missing} of {count} lines never showed up in tail -f"
        )));
    }
    Ok(())
}
