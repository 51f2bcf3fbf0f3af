//! The Kafka listener under load and abuse, measured in this process: a thousand idle
//! connections, clients that never read their responses, a storm of garbage. Memory is
//! the process's anonymous resident set (`RssAnon` in /proc/self/status), so these tests run one at a
//! time in their own binary (`#[serial]` would be a crate for one lock: a mutex does it).
//! Run with `--nocapture` to see the figures (docs/ARCHITECTURE.md quotes them).
#![expect(
    clippy::disallowed_methods,
    reason = "the listener's threads start and end in real time: polled against deadlines"
)]

mod common;

use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::kafka::{batch, capture_log, fetch, logged_about, produce, values_of, Broker, Client};
use common::PartitionZero;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiVersionsRequest, FetchRequest};

/// The figures are the whole process's: one test at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn proc_status(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The process's anonymous resident memory: heap and stacks. Not `VmRSS`, which also
/// counts the page cache of the segments the engine maps (reclaimable, and the same
/// however many clients there are).
fn rss_kib() -> u64 {
    proc_status("RssAnon")
}

fn threads() -> u64 {
    proc_status("Threads")
}

/// Polls until the process runs `want` threads (connection threads end as their
/// clients go).
fn wait_for_threads(want: u64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while threads() != want {
        assert!(
            Instant::now() < deadline,
            "{what}: {} threads, expected {want}",
            threads()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The listener's and the engine's work still gets done: a Produce and a Fetch over a
/// new connection, and an append through the mount's path.
fn others_are_served(broker: &Broker, topic: &str) {
    let mut client = broker.client();
    assert_eq!(client.send(3, &ApiVersionsRequest::default()).error_code, 0);
    let t = broker.engine.topic(topic).unwrap();
    let end = t.p0().log().log_end_offset();
    let (code, base) = produce(&mut client, 12, topic, batch(&[(None, "served")]));
    assert_eq!((code, base), (0, end as i64));
    t.append_lines(b"mount\n").unwrap();
    let (code, records) = fetch(&mut client, 12, topic, end as i64, 0);
    assert_eq!(code, 0);
    assert_eq!(values_of(records), ["served", "mount"]);
}

/// The allocator's per-thread arenas (glibc makes up to eight per core as threads
/// start) and the listener's first allocations are paid once, not per connection:
/// paid here, before a measurement, by 50 connections at once making a request each.
fn warm_up(broker: &Broker, topic: &str) {
    let clients: Vec<Client> = (0..50).map(|_| broker.client()).collect();
    for mut client in clients {
        assert_eq!(
            produce(&mut client, 12, topic, batch(&[(None, "warm")])).0,
            0
        );
    }
    others_are_served(broker, topic);
}

#[test]
fn a_thousand_idle_connections_cost_bounded_memory_and_leave_nothing_behind() {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    const CONNECTIONS: usize = 1000;
    let broker = Broker::start_with(|c| c.max_connections = 2 * CONNECTIONS);
    broker.engine.create_topic("t", 1).unwrap();
    let base_threads = threads();
    warm_up(&broker, "t");
    wait_for_threads(base_threads, "after the warm-up");

    let before = rss_kib();
    let mut clients: Vec<Client> = (0..CONNECTIONS).map(|_| broker.client()).collect();
    wait_for_threads(base_threads + CONNECTIONS as u64, "with the idle clients");
    let connected = rss_kib();
    // Each makes a Produce, the deepest common path (decoding, the engine's checks and
    // append, encoding): the thread's stack stays touched that deep while it waits.
    for client in &mut clients {
        assert_eq!(produce(client, 12, "t", batch(&[(None, "idle")])).0, 0);
    }
    let after_a_request = rss_kib();
    let per = |kib: u64| kib.saturating_sub(before) as f64 / CONNECTIONS as f64;
    eprintln!(
        "{CONNECTIONS} idle connections: anonymous RSS {before} KiB -> {connected} KiB connected ({:.1} KiB each) -> {after_a_request} KiB after one Produce each ({:.1} KiB each)",
        per(connected),
        per(after_a_request)
    );
    // A thread's touched stack (reserved: CONNECTION_STACK_BYTES, 256 KiB) and its share of
    // the allocator; kernel socket buffers are not in the process's RSS. The debug build's
    // frames are several times the release build's.
    assert!(
        per(after_a_request) < 96.0,
        "{:.1} KiB resident per idle connection",
        per(after_a_request)
    );
    others_are_served(&broker, "t");

    drop(clients);
    wait_for_threads(base_threads, "after the idle clients left");
    others_are_served(&broker, "t");
}

/// The most a socket's kernel buffers can hold, sender's and receiver's: an answer larger
/// than this cannot be taken by a client that never reads.
fn socket_buffers_max() -> u64 {
    ["tcp_rmem", "tcp_wmem"]
        .iter()
        .map(|name| {
            let text = std::fs::read_to_string(format!("/proc/sys/net/ipv4/{name}")).unwrap();
            text.split_whitespace()
                .nth(2)
                .unwrap()
                .parse::<u64>()
                .unwrap()
        })
        .sum()
}

/// Clients that send Fetches and never read the answers: each server thread blocks in
/// its answer's write (it reads none of the requests queued behind it meanwhile, so
/// nothing piles up in the process) until `connections.max.idle.ms`, then closes the
/// connection with a log line. Meanwhile every other client, and the mount's appends, are
/// served.
#[test]
fn clients_that_never_read_hold_bounded_memory_and_others_are_served() {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    capture_log();
    const STUCK: usize = 20;
    let idle = Duration::from_secs(4);
    let broker = Broker::start_with(|c| c.connections_max_idle_ms = idle.as_millis() as u64);
    broker.engine.create_topic("t", 1).unwrap();
    let topic = broker.engine.topic("t").unwrap();
    // More records than the socket buffers hold, so that no kernel absorbs a whole answer
    // (and a receive queue collapsed now and then cannot let it trickle through either).
    let answer_bytes = socket_buffers_max() + (4 << 20);
    let mut lines = Vec::new();
    for _ in 0..10 {
        lines.extend(std::iter::repeat_n(b'x', 100 << 10));
        lines.push(b'\n');
    }
    let mut appended = 0;
    while appended < answer_bytes {
        topic.append_lines(&lines).unwrap();
        appended += lines.len() as u64;
    }
    let base_threads = threads();
    warm_up(&broker, "t");
    wait_for_threads(base_threads, "after the warm-up");
    let before = rss_kib();

    let max_bytes = i32::try_from(2 * answer_bytes).unwrap();
    let mut partition = FetchPartition::default();
    partition.partition_max_bytes = max_bytes;
    let mut t = FetchTopic::default();
    t.topic = common::kafka::name("t");
    t.partitions = vec![partition];
    let mut request = FetchRequest::default();
    request.max_bytes = max_bytes;
    request.topics = vec![t];
    let mut stuck: Vec<Client> = (0..STUCK)
        .map(|_| {
            let mut client = broker.client();
            let fetch = client.frame(12, &request);
            client.stream.write_all(&fetch).unwrap();
            // More requests queued behind it, as a pipelining client would: they stay
            // in the kernel's buffers, unread.
            let queued = client.frame(12, &request).repeat(1000);
            client.stream.set_nonblocking(true).unwrap();
            let _ = client.stream.write(&queued);
            client
        })
        .collect();
    let all_sent = Instant::now();
    wait_for_threads(base_threads + STUCK as u64, "with the stuck clients");
    let during = rss_kib();
    let per_client = during.saturating_sub(before) as f64 / STUCK as f64;
    eprintln!(
        "{STUCK} clients that never read: anonymous RSS {before} KiB -> {during} KiB, {per_client:.1} KiB per client"
    );
    // Fetch answers go out with sendfile(2): a blocked one holds no copy of its records.
    assert!(
        per_client < 128.0,
        "{per_client:.1} KiB resident per client that never reads"
    );
    others_are_served(&broker, "t");

    // Each is closed once its answer has not been taken within connections.max.idle.ms.
    wait_for_threads(base_threads, "after connections.max.idle.ms");
    let closed_after = all_sent.elapsed();
    eprintln!("stuck clients closed {closed_after:?} after they were blocked (connections.max.idle.ms {idle:?})");
    assert!(
        closed_after <= idle + Duration::from_secs(2),
        "closed only after {closed_after:?}"
    );
    for client in &stuck {
        let peer = client.stream.local_addr().unwrap();
        assert!(
            logged_about(peer)
                .iter()
                .any(|l| l.contains("closing Kafka connection")
                    && l.contains("did not take the response within connections.max.idle.ms")),
            "{:?}",
            logged_about(peer)
        );
    }
    // The server's side is gone: the client's next writes fail.
    let mut client = stuck.pop().unwrap();
    client.stream.set_nonblocking(false).unwrap();
    let _ = client
        .stream
        .set_write_timeout(Some(Duration::from_secs(5)));
    let frame = client.frame(3, &ApiVersionsRequest::default());
    let closed = (0..100).any(|_| client.stream.write_all(&frame).is_err());
    assert!(closed, "a stuck client's connection is still open");
    others_are_served(&broker, "t");
}

/// Connections sending random bytes, some behind a plausible size prefix and API key:
/// every one is closed or answered, the process keeps no thread for any, and nothing is
/// appended.
#[test]
fn a_storm_of_garbage_connections_appends_nothing_and_leaves_nothing_behind() {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let broker = Broker::start_with(|c| c.connections_max_idle_ms = 2000);
    broker.engine.create_topic("t", 1).unwrap();
    let base_threads = threads();
    others_are_served(&broker, "t");
    wait_for_threads(base_threads, "after a client left");
    let end = broker
        .engine
        .topic("t")
        .unwrap()
        .p0()
        .log()
        .log_end_offset();
    // xorshift: reproducible garbage without a crate.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for i in 0..300 {
        let len = (next() % 600) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        match i % 3 {
            // A size prefix that matches what follows.
            1 => bytes
                .splice(0..0, (len as i32).to_be_bytes())
                .for_each(drop),
            // ... and a Produce (key 0) or Metadata (key 3) header at a served version.
            2 if len >= 8 => {
                let key: i16 = if next() % 2 == 0 { 0 } else { 3 };
                bytes[0..2].copy_from_slice(&key.to_be_bytes());
                bytes[2..4].copy_from_slice(&9i16.to_be_bytes());
                bytes
                    .splice(0..0, (len as i32).to_be_bytes())
                    .for_each(drop);
            }
            _ => {}
        }
        let mut client = broker.client();
        let _ = client.stream.write_all(&bytes);
        let _ = client.stream.shutdown(std::net::Shutdown::Write);
        // Closed, or answered and then closed at the end of the client's bytes.
        while client.read_response().is_some() {}
    }
    wait_for_threads(base_threads, "after the garbage");
    assert_eq!(
        broker
            .engine
            .topic("t")
            .unwrap()
            .p0()
            .log()
            .log_end_offset(),
        end,
        "garbage was appended"
    );
    others_are_served(&broker, "t");
}
