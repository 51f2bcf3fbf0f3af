//! The foundation through the engine API, without a mount: appends become records, the
//! `log` stream renders them, segments roll as Kafka rolls them, and everything survives
//! a clean or unclean reopen.

mod common;

use common::*;
use kpfs::engine::format::{BatchBuilder, ClientBatch, Record, BATCH_HEADER_BYTES};
use kpfs::engine::{Topic, TopicCursor};
use proptest::prelude::*;

#[test]
fn lines_round_trip_with_and_without_keys() {
    let f = Fixture::new();
    let t = f.topic("plain");
    t.append_lines(b"hello\nworld\n").unwrap();
    t.append_lines(b"\n").unwrap();
    t.append_lines(b"no newline").unwrap();
    assert_eq!(cat_string(&t), "hello\nworld\n\nno newline\n");
    assert_eq!(t.stream_len(), cat(&t, 1 << 20).len() as u64);

    let k = f.topic("keyed");
    set(&k, "parse.key=true\nkey.separator=:\nnull.marker=NULL\n");
    k.append_lines(b"a:1\nb:2\na:NULL\n").unwrap();
    assert_eq!(cat_string(&k), "a:1\nb:2\na:NULL\n");
    let err = k.append_lines(b"c:3\nnoseparator\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "No key separator found on line number 2: 'noseparator'"
    );
    assert_eq!(
        k.p0().log().log_end_offset(),
        3,
        "a refused write appends nothing"
    );
}

#[test]
fn binary_and_odd_bytes_survive() {
    let f = Fixture::new();
    let t = f.topic("bin");
    let mut data = Vec::new();
    for b in 0u8..=255 {
        if b != b'\n' {
            data.push(b);
        }
    }
    data.push(b'\n');
    t.append_lines(&data).unwrap();
    assert_eq!(cat(&t, 7), data);
}

#[test]
fn small_reads_reassemble_the_stream() {
    let f = Fixture::new();
    let t = f.topic("chunks");
    let mut expected = Vec::new();
    for i in 0..500 {
        let line = format!("record-{i}-{}\n", "x".repeat(i % 37));
        t.append_lines(line.as_bytes()).unwrap();
        expected.extend_from_slice(line.as_bytes());
    }
    for chunk in [1, 3, 100, 4096, 1 << 20] {
        assert_eq!(cat(&t, chunk), expected, "chunk {chunk}");
    }
}

#[test]
fn random_access_reads_land_on_the_right_bytes() {
    let f = Fixture::new();
    let t = f.topic("seek");
    set(&t, "index.interval.bytes=64");
    let mut expected = Vec::new();
    for i in 0..2000 {
        let line = format!("line {i}\n");
        t.append_lines(line.as_bytes()).unwrap();
        expected.extend_from_slice(line.as_bytes());
    }
    for pos in [
        0usize,
        1,
        5,
        100,
        1234,
        9999,
        expected.len() - 3,
        expected.len(),
    ] {
        let mut cursor = kpfs::engine::TopicCursor::default();
        let got = t.read_log(&mut cursor, pos as u64, 50).unwrap();
        let end = (pos + 50).min(expected.len());
        assert_eq!(got, &expected[pos..end], "at {pos}");
    }
}

/// bash's `read` and `head` read a block and seek back; the bytes of that small read are
/// replayed. A read that starts inside them and asks for more still gets the full count.
#[test]
fn a_read_starting_in_the_replayed_bytes_gets_the_full_count() {
    let f = Fixture::new();
    let t = f.topic("replay");
    let mut expected = Vec::new();
    for i in 0..5000 {
        let line = format!("line {i}\n");
        expected.extend_from_slice(line.as_bytes());
    }
    t.append_lines(&expected).unwrap();
    let mut cursor = kpfs::engine::TopicCursor::default();
    assert_eq!(t.read_log(&mut cursor, 0, 100).unwrap(), &expected[..100]);
    assert_eq!(t.read_log(&mut cursor, 0, 1000).unwrap(), &expected[..1000]);
    assert_eq!(t.read_log(&mut cursor, 50, 20).unwrap(), &expected[50..70]);
    assert_eq!(
        t.read_log(&mut cursor, 900, 5000).unwrap(),
        &expected[900..5900]
    );
    // A sequential read goes on after the last read, wherever that started.
    assert_eq!(
        t.read_log(&mut cursor, 5900, 100).unwrap(),
        &expected[5900..6000]
    );
    let end = expected.len();
    assert_eq!(
        t.read_log(&mut cursor, end as u64 - 10, 100).unwrap(),
        &expected[end - 10..]
    );
    assert_eq!(
        t.read_log(&mut cursor, end as u64 - 40, 100).unwrap(),
        &expected[end - 40..]
    );
}

/// One read on a `log` handle: sequential at the handle's offset (read(2)), or at a
/// position of its own that leaves the offset alone (pread(2)).
#[derive(Clone, Debug)]
enum Read {
    Next(usize),
    /// At the last read's start plus a delta, so reads often land in the last one's
    /// bytes (the replay buffer).
    Near(i64, usize),
    At(f64, usize),
}

fn read_strategy() -> impl Strategy<Value = Read> {
    let len = prop_oneof![4 => 1usize..400, 2 => 400usize..70_000, 1 => 70_000usize..300_000];
    prop_oneof![
        (len.clone()).prop_map(Read::Next),
        (-500i64..500, len.clone()).prop_map(|(d, l)| Read::Near(d, l)),
        (0.0f64..=1.0, len).prop_map(|(p, l)| Read::At(p, l)),
    ]
}

/// Every read inside the file returns the full count asked for, or up to the end of the
/// stream, and the right bytes, whatever the handle read before.
#[test]
fn random_reads_and_preads_return_the_contents_they_cover() {
    let f = Fixture::new();
    let t = f.topic("pread");
    set(&t, "internal.segment.bytes=60000\nindex.interval.bytes=512");
    let mut expected = Vec::new();
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    while expected.len() < 600_000 {
        // Writes of 1-20 lines of 0-3000 bytes: batches of several records, segments
        // ending at any line.
        let mut write = Vec::new();
        for _ in 0..1 + next() % 20 {
            let n = (next() % 3001) as usize;
            let c = b'a' + (next() % 26) as u8;
            write.extend(std::iter::repeat_n(c, n));
            write.push(b'\n');
        }
        t.append_lines(&write).unwrap();
        expected.extend_from_slice(&write);
    }
    assert!(t.p0().log().snapshot().segments.len() > 5);
    let total = expected.len();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 256,
        rng_seed: proptest_seed(),
        ..ProptestConfig::default()
    });
    runner
        .run(&prop::collection::vec(read_strategy(), 1..40), |reads| {
            let mut cursor = kpfs::engine::TopicCursor::default();
            let mut offset = 0usize;
            let mut last = 0usize;
            for read in reads {
                let (pos, len) = match read {
                    Read::Next(len) => (offset, len),
                    Read::Near(delta, len) => {
                        ((last as i64 + delta).clamp(0, total as i64) as usize, len)
                    }
                    Read::At(p, len) => ((p * total as f64) as usize, len),
                };
                let got = t.read_log(&mut cursor, pos as u64, len).unwrap();
                let want = &expected[pos..(pos + len).min(total)];
                prop_assert_eq!(got.len(), want.len(), "read of {} at {}", len, pos);
                prop_assert!(got == want, "bytes of a read of {} at {}", len, pos);
                if matches!(read, Read::Next(_)) {
                    offset += got.len();
                }
                last = pos;
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn rolls_by_size_and_keeps_offsets() {
    let f = Fixture::new();
    let t = f.topic("roll");
    set(&t, "internal.segment.bytes=1000");
    for i in 0..100 {
        t.append_lines(format!("value-{i:04}\n").as_bytes())
            .unwrap();
    }
    let segs = t.p0().log().snapshot().segments.clone();
    assert!(segs.len() > 3, "{} segments", segs.len());
    for s in segs.iter() {
        assert!(s.size() <= 1000);
    }
    assert_eq!(t.p0().log().log_end_offset(), 100);
    let text = cat_string(&t);
    assert_eq!(text.lines().count(), 100);
    assert!(text.starts_with("value-0000\nvalue-0001\n"));
}

#[test]
fn rolls_by_time_measured_from_the_first_record() {
    let f = Fixture::new();
    let t = f.topic("timeroll");
    set(&t, "segment.ms=3000");
    for i in 0..5 {
        t.append_lines(format!("{i}\n").as_bytes()).unwrap();
    }
    f.advance(3001);
    for i in 5..10 {
        t.append_lines(format!("{i}\n").as_bytes()).unwrap();
    }
    let bases: Vec<u64> = t
        .p0()
        .log()
        .snapshot()
        .segments
        .iter()
        .map(|s| s.base_offset())
        .collect();
    assert_eq!(bases, vec![0, 5]);
}

/// Kafka's `max.message.bytes` limits a batch, header included
/// (`UnifiedLog.analyzeAndValidateRecords`, `testMessageSizeCheck`): a record whose batch
/// alone is over it is refused with that batch's size, and nothing of its write is
/// appended.
#[test]
fn a_record_whose_batch_alone_is_over_max_message_bytes_is_refused_whole() {
    let f = Fixture::new();
    let t = f.topic("big");
    set(&t, "max.message.bytes=100");
    // Kafka's batch of one keyless 32-byte record: the 61-byte header and 39 bytes of
    // record (7 bytes of fields and the value): 100 bytes.
    let fits = "x".repeat(32);
    assert_eq!(keyless_batch(fits.len()), 100);
    t.append_lines(format!("{fits}\n").as_bytes()).unwrap();
    let err = t
        .append_lines(format!("ok\n{fits}y\n").as_bytes())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "The record batch size in the append to big-0 is 101 bytes which exceeds the maximum configured value of 100."
    );
    // A 90-byte line was accepted when kpfs compared line lengths; its batch is 160
    // (the record's length and the value's length take two bytes each).
    let err = t.append_lines(&[b'z'; 90]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "The record batch size in the append to big-0 is 160 bytes which exceeds the maximum configured value of 100."
    );
    assert_eq!(cat_string(&t), format!("{fits}\n"));

    // With a key, the record also holds the key: header, record length, attributes,
    // two deltas, key length, key, value length, value, header count.
    let keyed = f.topic("keyed");
    set(
        &keyed,
        "parse.key=true\nkey.separator=:\nmax.message.bytes=100",
    );
    let value = "v".repeat(100 - BATCH_HEADER_BYTES - 8);
    keyed
        .append_lines(format!("k:{value}\n").as_bytes())
        .unwrap();
    let err = keyed
        .append_lines(format!("k:{value}w\n").as_bytes())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "The record batch size in the append to keyed-0 is 101 bytes which exceeds the maximum configured value of 100."
    );
    assert_eq!(keyed.p0().log().log_end_offset(), 1);
}

/// The largest line the default `max.message.bytes` (1 MiB + 12, Kafka's) admits: its
/// batch is exactly the limit (61-byte header, 3-byte record length, 8 bytes of record
/// fields with a 3-byte value length). One byte more is refused.
#[test]
fn the_longest_line_the_default_limit_admits_round_trips() {
    let f = Fixture::new();
    let t = f.topic("mib");
    let longest = 1_048_588 - 72;
    assert_eq!(keyless_batch(longest), 1_048_588);
    let mut line = vec![b'z'; longest];
    line.push(b'\n');
    t.append_lines(&line).unwrap();
    assert_eq!(cat(&t, 128 << 10), line);
    let err = t.append_lines(&[&b"z"[..], &line].concat()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "The record batch size in the append to mib-0 is 1048589 bytes which exceeds the maximum configured value of 1048588."
    );
}

/// A write's records go into batches that each fit `max.message.bytes`, as a producer
/// splits them: two lines whose one batch would be 140 bytes become two batches under
/// a limit of 139.
#[test]
fn a_write_is_split_into_batches_that_fit_max_message_bytes() {
    let f = Fixture::new();
    let t = f.topic("split");
    set(&t, "max.message.bytes=139");
    let write = format!("{}\n{}\n", "a".repeat(33), "b".repeat(32));
    assert_eq!(t.append_lines(write.as_bytes()).unwrap(), 2);
    let sizes: Vec<usize> = batches(&t).iter().map(|(h, _)| h.size).collect();
    assert_eq!(sizes, [101, 100]);
    // Under 140 the two records share one batch.
    let t = f.topic("together");
    set(&t, "max.message.bytes=140");
    t.append_lines(write.as_bytes()).unwrap();
    let sizes: Vec<usize> = batches(&t).iter().map(|(h, _)| h.size).collect();
    assert_eq!(sizes, [140]);
    assert_eq!(cat_string(&t), write);
}

/// Random writes under random limits, keyed or not: a write is refused exactly when one
/// of its records does not fit a batch of its own (with the first such batch's size in
/// the text), and an accepted write reads back whole from batches that all fit.
#[test]
fn every_batch_fits_max_message_bytes_and_only_records_that_cannot_are_refused() {
    use kpfs::engine::format::BatchBuilder;
    use proptest::prelude::*;
    let config = ProptestConfig {
        cases: 64,
        failure_persistence: None,
        rng_seed: proptest_seed(),
        ..ProptestConfig::default()
    };
    let lines = proptest::collection::vec(0usize..300, 1..40);
    proptest::proptest!(config, |(lens in lines, keyed in any::<bool>(), max in 60u64..600)| {
        let f = Fixture::new();
        let t = f.topic("p");
        let parse_key = if keyed { "parse.key=true\nkey.separator=:\n" } else { "" };
        set(&t, &format!("{parse_key}max.message.bytes={max}"));
        let mut write = Vec::new();
        let mut first_too_big = None;
        for (i, len) in lens.iter().enumerate() {
            // Keyed lines: a 1-byte key, the rest the value.
            let line: Vec<u8> = if keyed {
                [&b"k:"[..], &vec![b'a' + (i % 26) as u8; *len]].concat()
            } else {
                vec![b'a' + (i % 26) as u8; *len]
            };
            let single = if keyed {
                BatchBuilder::single_record_batch_size(1, *len as i64)
            } else {
                BatchBuilder::single_record_batch_size(-1, line.len() as i64)
            } as u64;
            if single > max && first_too_big.is_none() {
                first_too_big = Some(single);
            }
            write.extend_from_slice(&line);
            write.push(b'\n');
        }
        match (t.append_lines(&write), first_too_big) {
            (Ok(records), None) => {
                prop_assert_eq!(records, lens.len() as u64);
                for (h, _) in batches(&t) {
                    prop_assert!(h.size as u64 <= max, "a {}-byte batch under {}", h.size, max);
                }
                prop_assert_eq!(cat(&t, 4096), write);
            }
            (Err(e), Some(single)) => {
                prop_assert_eq!(
                    e.to_string(),
                    format!("The record batch size in the append to p-0 is {single} bytes which exceeds the maximum configured value of {max}.")
                );
                prop_assert_eq!(t.p0().log().log_end_offset(), 0);
            }
            (result, expected) => prop_assert!(false, "{:?} where the first oversized batch is {:?}", result, expected),
        }
    });
}

#[test]
fn records_offsets_and_configs_survive_reopen() {
    let mut f = Fixture::new();
    let t = f.topic("persist");
    set(
        &t,
        "internal.segment.bytes=500\nparse.key=true\nkey.separator=:",
    );
    for i in 0..50 {
        t.append_lines(format!("k{}:v{i}\n", i % 7).as_bytes())
            .unwrap();
    }
    let before = cat_string(&t);
    let segments = t.p0().log().snapshot().segments.len();
    drop(t);
    f.reopen();
    let t = f.topic("persist");
    assert_eq!(cat_string(&t), before);
    assert_eq!(t.p0().log().snapshot().segments.len(), segments);
    assert_eq!(t.p0().log().log_end_offset(), 50);
    t.append_lines(b"k1:after\n").unwrap();
    assert_eq!(t.p0().log().log_end_offset(), 51);
    assert!(t.config_text().contains("key.separator=:"));
    drop(t);
    f.crash_and_reopen();
    let t = f.topic("persist");
    assert!(cat_string(&t).ends_with("k1:after\n"));
    assert_eq!(t.p0().log().log_end_offset(), 51);
}

#[test]
fn torn_tail_is_truncated_after_a_crash() {
    let mut f = Fixture::new();
    let t = f.topic("torn");
    t.append_lines(b"one\ntwo\n").unwrap();
    t.append_lines(b"three\n").unwrap();
    let path = t.p0().dir().join("00000000000000000000.log");
    drop(t);
    let e = f.engine.take().unwrap();
    drop(e);
    let len = std::fs::metadata(&path).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(len - 3).unwrap();
    f.engine = Some(open(f.dir.path(), &f.clock));
    let t = f.topic("torn");
    assert_eq!(cat_string(&t), "one\ntwo\n");
    assert_eq!(t.p0().log().log_end_offset(), 2);
    t.append_lines(b"four\n").unwrap();
    assert_eq!(cat_string(&t), "one\ntwo\nfour\n");
}

#[test]
fn second_open_of_a_data_dir_is_refused() {
    let f = Fixture::new();
    let err = kpfs::engine::Engine::open(
        f.dir.path(),
        kpfs::engine::BrokerConfig::defaults(),
        f.clock.clone(),
        Default::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("in use by another kpfs"), "{err}");
}

/// A write that finishes an earlier write's line arrives as that line (`head`) and the
/// rest (`body`): the log gets the same bytes as from one buffer, all or nothing.
#[test]
fn a_write_in_two_pieces_appends_what_one_buffer_would() {
    let f = Fixture::new();
    let one = f.topic("one");
    let two = f.topic("two");
    let plain_one = f.topic("plain-one");
    let plain_two = f.topic("plain-two");
    for t in [&one, &two] {
        set(t, "parse.key=true\nkey.separator=:");
    }
    let bytes = |t: &kpfs::engine::Topic| {
        std::fs::read(t.p0().log().snapshot().active().log_path()).unwrap()
    };
    // Both layouts: batches with record metadata (keys) and plain batches (no keys).
    for (one, two) in [(&one, &two), (&plain_one, &plain_two)] {
        let (head, body) = (&b"k1:first\n"[..], &b"k2:second\nk3:third\n"[..]);
        assert_eq!(one.append_lines(&[head, body].concat()).unwrap(), 3);
        assert_eq!(two.append_lines_after(None, head, body).unwrap(), 3);
        assert_eq!(two.append_lines_after(None, b"", b"k4:x\n").unwrap(), 1);
        assert_eq!(one.append_lines(b"k4:x\n").unwrap(), 1);
        assert_eq!(two.append_lines_after(None, b"k5:y\n", b"k6:z").unwrap(), 2);
        assert_eq!(one.append_lines(b"k5:y\nk6:z").unwrap(), 2);
        assert_eq!(bytes(two), bytes(one), "same batches, byte for byte");
        assert_eq!(cat_string(two), cat_string(one));
    }
    assert_ne!(
        bytes(&one).len(),
        bytes(&plain_one).len(),
        "plain batches carry no record metadata"
    );
    // A bad line in the body refuses the head too.
    let err = two.append_lines_after(None, b"k5:ok\n", b"k6:ok\nno-separator\n");
    assert!(err.is_err());
    assert_eq!(
        two.p0().log().log_end_offset(),
        6,
        "nothing of the write was appended"
    );
    // So does a bad head.
    assert!(two
        .append_lines_after(None, b"no-separator\n", b"k7:ok\n")
        .is_err());
    assert_eq!(two.p0().log().log_end_offset(), 6);
}

/// Size of Kafka's batch holding one keyless record of `len` bytes.
fn keyless_batch(len: usize) -> usize {
    kpfs::engine::format::BatchBuilder::single_record_batch_size(-1, len as i64)
}

/// A keyless write becomes batches of whole lines, each at most 1 MiB unless one line
/// alone is bigger, with offsets and stream positions following on across batches and
/// writes, and an unterminated last line ending the last batch.
#[test]
fn keyless_writes_become_batches_of_whole_lines() {
    let f = Fixture::new();
    let t = f.topic("plain");
    let mut expected = Vec::new();
    let mut head = b"finished:".to_vec();
    head.extend_from_slice(b"by this write\n");
    let mut body = Vec::new();
    for i in 0..40_000u32 {
        // Lines of 0 to 150 bytes, so batch limits fall anywhere inside a line.
        body.extend(std::iter::repeat_n(
            b'a' + (i % 26) as u8,
            (i * 7 % 151) as usize,
        ));
        body.push(b'\n');
    }
    // One line over 1 MiB gets a batch of its own, over 1 MiB.
    set(&t, "max.message.bytes=2000000");
    let mut huge = vec![b'h'; (1 << 20) + 5];
    huge.push(b'\n');
    body.extend_from_slice(&huge);
    body.extend_from_slice(b"unterminated");
    let lines = 1 + 40_000 + 1 + 1;
    assert_eq!(t.append_lines_after(None, &head, &body).unwrap(), lines);
    expected.extend_from_slice(&head);
    expected.extend_from_slice(&body);
    expected.push(b'\n');
    t.append_lines(b"next\n").unwrap();
    expected.extend_from_slice(b"next\n");
    assert_eq!(cat(&t, 300 << 10), expected);

    let mut offset = 0;
    let all = batches(&t);
    assert!(all.len() > 3, "{} batches", all.len());
    let lines_read: Vec<&[u8]> = expected.split_inclusive(|&b| b == b'\n').collect();
    for (h, records) in &all {
        assert!(
            h.size <= 1 << 20 || records.len() == 1,
            "a {}-byte batch of {} records",
            h.size,
            records.len()
        );
        assert_eq!(h.base_offset, offset);
        for r in records {
            let line = lines_read[offset as usize];
            assert_eq!((r.offset, r.key.as_deref()), (offset, None));
            assert_eq!(r.value.as_deref(), Some(&line[..line.len() - 1]));
            offset += 1;
        }
    }
    assert_eq!(offset, lines + 1);
    let mut stream_pos = 0;
    for s in t.p0().log().snapshot().segments.iter() {
        for (offset, pos) in s.record_stream_positions().unwrap() {
            assert_eq!(pos, stream_pos, "record {offset}");
            stream_pos += lines_read[offset as usize].len() as u64;
        }
    }
    assert_eq!(stream_pos, t.stream_len());
}

/// Kafka refuses a record whose batch alone exceeds the segment size.
#[test]
fn a_keyless_line_too_big_for_any_segment_is_refused_whole() {
    let f = Fixture::new();
    let t = f.topic("small");
    set(&t, "internal.segment.bytes=200");
    let fits = vec![b'x'; 130];
    assert_eq!(keyless_batch(fits.len()), 200);
    t.append_lines(&[&fits[..], b"\n"].concat()).unwrap();
    let err = t
        .append_lines(&[&b"ok\n"[..], &fits, b"y\n"].concat())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Message batch size is 201 bytes in append to partition small-0, which exceeds the maximum configured segment size of 200."
    );
    assert_eq!(
        t.p0().log().log_end_offset(),
        1,
        "nothing of the write was appended"
    );

    // Below a batch header nothing fits, not even an empty line.
    let tiny = f.topic("tiny");
    set(&tiny, "internal.segment.bytes=50");
    let err = tiny.append_lines(b"\n\n\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "Message batch size is 68 bytes in append to partition tiny-0, which exceeds the maximum configured segment size of 50."
    );
    assert_eq!(tiny.p0().log().log_end_offset(), 0);

    // Kafka prints the configured value, even one no segment can hold.
    let negative = f.topic("negative");
    set(&negative, "internal.segment.bytes=-5");
    assert_eq!(
        negative.append_lines(b"x\n").unwrap_err().to_string(),
        "Message batch size is 69 bytes in append to partition negative-0, which exceeds the maximum configured segment size of -5."
    );
}

/// An unterminated last line is a record like the others: no batch outgrows the
/// segment size or 1 MiB by it.
#[test]
fn an_unterminated_last_line_never_pushes_a_batch_past_its_limit() {
    let f = Fixture::new();
    let small = f.topic("small");
    set(&small, "internal.segment.bytes=100");
    let write = [&b"a\n"[..], &[b'b'; 32]].concat();
    assert_eq!(small.append_lines(&write).unwrap(), 2);
    let sizes: Vec<usize> = batches(&small).iter().map(|(h, _)| h.size).collect();
    assert!(sizes.iter().all(|&s| s <= 100), "batch sizes {sizes:?}");

    let big = f.topic("big");
    let room = (1 << 20) - BATCH_HEADER_BYTES;
    let mut write = b"0123456789012345678\n".repeat(room / 20);
    write.extend(std::iter::repeat_n(b'x', room - write.len()));
    big.append_lines(&write).unwrap();
    for (h, records) in batches(&big) {
        assert!(
            h.size <= 1 << 20,
            "a {}-byte batch of {} records",
            h.size,
            records.len()
        );
    }
    let mut expected = write.clone();
    expected.push(b'\n');
    assert_eq!(cat(&big, 1 << 20), expected);
}

/// Without parse.key a line is the value, even when it reads like the null marker.
#[test]
fn a_keyless_line_that_reads_like_the_null_marker_is_a_value() {
    let f = Fixture::new();
    let t = f.topic("plain");
    set(&t, "null.marker=NULL");
    t.append_lines(b"NULL\nx\n").unwrap();
    let records: Vec<Record> = batches(&t).into_iter().flat_map(|(_, r)| r).collect();
    assert_eq!(records[0].value.as_deref(), Some(&b"NULL"[..]));
    assert_eq!(cat_string(&t), "NULL\nx\n");
}

/// A record without a key (a client's) renders its key as `null` when the topic has no
/// null.marker, as Kafka's console consumer prints it, so it differs from a record with an
/// empty key; with a null.marker, as the marker. Each under the marker of its append.
#[test]
fn a_keyless_record_reads_as_a_null_key_not_an_empty_one() {
    let f = Fixture::new();
    let t = f.topic("k");
    set(&t, "parse.key=true\nkey.separator=:");
    let keyless = |value: &[u8]| {
        let mut b = BatchBuilder::new(0);
        b.push(0, T0, None, Some(value));
        t.append_produced(0, &b.finish_client((-1, -1, -1), ClientBatch::PLAIN))
            .unwrap();
    };
    keyless(b"plain");
    t.append_lines(b":empty key\n").unwrap();
    assert_eq!(cat_string(&t), "null:plain\n:empty key\n");
    set(&t, "null.marker=NIL");
    keyless(b"marked");
    t.append_lines(b"k:NIL\n").unwrap();
    set(&t, "-null.marker");
    keyless(b"plain again");
    assert_stream(
        &t,
        b"null:plain\n:empty key\nNIL:marked\nk:NIL\nnull:plain again\n",
    );
}

/// Lines of 0 to 299 bytes, one of 300 KiB, and an unterminated last line: `count`
/// lines in all.
fn varied_lines(count: usize) -> Vec<u8> {
    let mut data = Vec::new();
    for i in 0..count - 2 {
        data.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, i * 13 % 300));
        data.push(b'\n');
        if i == count / 2 {
            data.extend(std::iter::repeat_n(b'L', 300 << 10));
            data.push(b'\n');
        }
    }
    data.extend_from_slice(b"unterminated");
    data
}

/// A write of several MiB becomes whole, valid batches in order, nothing is left past
/// the segment's end, and it all reads back, also after a reopen.
#[test]
fn a_large_write_is_whole_batches() {
    let mut f = Fixture::new();
    let t = f.topic("large");
    let data = varied_lines(40_000);
    let lines = 40_000;
    assert!(data.len() > 5 << 20, "several batches of 1 MiB");
    assert_eq!(t.append_lines(&data).unwrap(), lines as u64);
    t.append_lines(b"small\n").unwrap();
    let mut expected = data.clone();
    expected.extend_from_slice(b"\nsmall\n");
    assert_eq!(cat(&t, 1 << 20), expected);
    let all = batches(&t);
    assert!(all.len() > 5, "{} batches", all.len());
    let mut offset = 0;
    for (h, records) in &all {
        assert!(h.size <= 1_048_588, "a batch of {} bytes", h.size);
        assert_eq!(h.base_offset, offset);
        offset += records.len() as u64;
    }
    assert_eq!(offset, lines as u64 + 1);
    let path = t.p0().dir().join("00000000000000000000.log");
    let size = t.p0().log().snapshot().active().size();
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        size,
        "nothing past the end"
    );
    drop(t);
    f.reopen();
    assert_eq!(cat(&f.topic("large"), 1 << 20), expected);
}

/// `expected` is the whole `log` stream of `t`: read whole in reads of any size, at every
/// position (as `tail -c`, `less` and `pread` reach it), and as its size.
fn assert_stream(t: &Topic, expected: &[u8]) {
    for chunk in [1, 3, 7, 4096] {
        assert_eq!(cat(t, chunk), expected, "reads of {chunk} bytes");
    }
    assert_eq!(t.stream_len(), expected.len() as u64);
    for pos in 0..expected.len() {
        let got = t
            .read_log(&mut TopicCursor::default(), pos as u64, 5)
            .unwrap();
        assert_eq!(
            got,
            &expected[pos..(pos + 5).min(expected.len())],
            "at {pos}"
        );
    }
}

/// A record's line is fixed when it is appended: `parse.key`, `key.separator` and
/// `null.marker` apply to the records appended after a change, so no byte of `log`
/// changes, across reopens too. The renderings file gives the old bytes; without it the
/// lines keep their lengths.
#[test]
fn a_change_of_rendering_applies_to_later_records_only() {
    let mut f = Fixture::new();
    let t = f.topic("r");
    t.append_lines(b"a:1\nb:2\n").unwrap();
    set(&t, "parse.key=true\nkey.separator=:\n");
    t.append_lines(b"c:3\n").unwrap();
    // A separator of the same length, and a null marker.
    set(&t, "key.separator==\nnull.marker=NIL\n");
    t.append_lines(b"d=4\ne=NIL\n").unwrap();
    // Changes without an append between them.
    set(&t, "key.separator=::\n");
    set(&t, "key.separator= -> \n");
    t.append_lines(b"f -> 6\n").unwrap();
    set(&t, "parse.key=false\nnull.marker=null\n");
    t.append_lines(b"g:7\n").unwrap();
    let expected = b"a:1\nb:2\nc:3\nd=4\ne=NIL\nf -> 6\ng:7\n";
    assert_stream(&t, expected);
    drop(t);
    f.reopen();
    assert_stream(&f.topic("r"), expected);
    f.crash_and_reopen();
    let t = f.topic("r");
    assert_stream(&t, expected);
    // Records are as parsed when appended.
    let keys: Vec<Option<Vec<u8>>> = batches(&t)
        .into_iter()
        .flat_map(|(_, records)| records.into_iter().map(|r| r.key))
        .collect();
    let key = |k: &str| Some(k.as_bytes().to_vec());
    assert_eq!(
        keys,
        [None, None, key("c"), key("d"), key("e"), key("f"), None]
    );

    let renderings = f.dir.path().join("kpfs-topics/r-0/renderings");
    std::fs::remove_file(&renderings).unwrap();
    drop(t);
    f.reopen();
    let t = f.topic("r");
    let lines = cat(&t, 4096);
    assert_eq!(lines.len(), expected.len());
    let line_lengths = |bytes: &[u8]| {
        bytes
            .split(|&b| b == b'\n')
            .map(<[u8]>::len)
            .collect::<Vec<_>>()
    };
    assert_eq!(line_lengths(&lines), line_lengths(expected));
}

/// A plain topic shows the values of a client's keyed records; setting `parse.key` shows
/// keys from the next record on, as the console producer's `parse.key` applies to what
/// it reads next.
#[test]
fn records_produced_before_parse_key_read_as_they_did() {
    let f = Fixture::new();
    let t = f.topic("greetings");
    let mut b = BatchBuilder::new(0);
    b.push(0, T0, Some(b"k1"), Some(b"hello"));
    b.push(1, T0, Some(b"k2"), None);
    t.append_produced(0, &b.finish_client((-1, -1, -1), ClientBatch::PLAIN))
        .unwrap();
    assert_stream(&t, b"hello\nnull\n");
    set(&t, "parse.key=true\nnull.marker=-\n");
    t.append_lines(b"k3\tfrom the shell\nk4\t-\n").unwrap();
    assert_stream(&t, b"hello\nnull\nk3\tfrom the shell\nk4\t-\n");
}
