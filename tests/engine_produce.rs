//! Kafka's produce path through the engine API, without a listener: a client's batch is
//! validated as Kafka's `LogValidator` validates it, gets its offsets at the log end,
//! takes its place in the `log` stream beside what `echo >>` appended, and idempotent
//! producers' retries are answered with the original offsets, across reopens and crashes.

mod common;

use common::*;
use kpfs::engine::codec::{Compression, CompressionCodec};
use kpfs::engine::format::{BatchBuilder, ClientBatch};
use kpfs::engine::producer_state::decode_snapshot;
use kpfs::engine::{EngineError, Topic};
use proptest::prelude::*;

type Record<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// A client's batch of `records` (each with one header), all at `timestamp`.
fn batch_of(
    records: &[Record<'_>],
    timestamp: i64,
    producer: (i64, i16, i32),
    client: ClientBatch,
) -> Vec<u8> {
    let mut b = BatchBuilder::new(0);
    for (i, (key, value)) in records.iter().enumerate() {
        b.push_with_header_pairs(
            i as u64,
            timestamp,
            *key,
            *value,
            &[(b"trace", Some(b"t1"))],
        );
    }
    b.finish_client(producer, client)
}

fn values(n: usize, tag: &str) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("{tag}-{i}").into_bytes()).collect()
}

/// A keyless batch of `values`, uncompressed.
fn plain(values: &[Vec<u8>], producer: (i64, i16, i32)) -> Vec<u8> {
    let records: Vec<Record<'_>> = values.iter().map(|v| (None, Some(v.as_slice()))).collect();
    batch_of(&records, T0, producer, ClientBatch::PLAIN)
}

const NO_PRODUCER: (i64, i16, i32) = (-1, -1, -1);

/// Rewrites a field of a batch and its CRC, as a buggy client might send it.
fn patched(mut batch: Vec<u8>, at: usize, bytes: &[u8]) -> Vec<u8> {
    batch[at..at + bytes.len()].copy_from_slice(bytes);
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch
}

#[test]
fn produced_records_take_offsets_at_the_log_end_and_show_in_cat() {
    let f = Fixture::new();
    let t = f.topic("mixed");
    t.append_lines(b"from echo\nsecond line\n").unwrap();
    let binary: Vec<u8> = (0u8..=255).filter(|&b| b != b'\n').collect();
    let batch = batch_of(
        &[
            (Some(b"k1"), Some(b"v1")),
            (Some(b"k2"), None),
            (None, Some(&binary)),
        ],
        T0 - 5,
        NO_PRODUCER,
        ClientBatch::PLAIN,
    );
    let outcome = t.append_produced(0, &batch).unwrap();
    assert_eq!(outcome.base_offset, 2);
    assert_eq!(outcome.log_append_time_ms, -1, "CreateTime");
    assert_eq!(outcome.log_start_offset, 0);
    t.append_lines(b"after\n").unwrap();
    assert_eq!(t.p0().log().log_end_offset(), 6);

    let mut expected = b"from echo\nsecond line\nv1\nnull\n".to_vec();
    expected.extend_from_slice(&binary);
    expected.extend_from_slice(b"\nafter\n");
    assert_eq!(cat(&t, 7), expected);
    assert_eq!(t.stream_len(), expected.len() as u64);

    let batches = batches(&t);
    let (h, records) = &batches[1];
    assert_eq!((h.base_offset, h.record_count), (2, 3));
    assert_eq!(records[0].key.as_deref(), Some(&b"k1"[..]));
    assert_eq!(records[1].value, None, "a tombstone stays a tombstone");
    assert_eq!(records[2].value.as_deref(), Some(&binary[..]));
    assert_eq!(
        records[0].headers,
        vec![(b"trace".to_vec(), Some(b"t1".to_vec()))],
        "headers are kept"
    );
    assert_eq!(records[2].offset, 4);

    // Under a rendering with keys, a produced batch takes its stream bytes under it, as
    // a FUSE append would (earlier records keep the positions they were given).
    set(&t, "parse.key=true\nkey.separator=:\nnull.marker=NIL\n");
    let before = t.stream_len();
    let keyed = batch_of(
        &[(Some(b"a"), Some(b"1")), (None, None)],
        T0,
        NO_PRODUCER,
        ClientBatch::PLAIN,
    );
    assert_eq!(t.append_produced(0, &keyed).unwrap().base_offset, 6);
    let text = cat(&t, 1 << 20);
    assert!(
        text.ends_with(b"a:1\nNIL:NIL\n"),
        "{}",
        String::from_utf8_lossy(&text)
    );
    assert_eq!(t.stream_len() - before, "a:1\nNIL:NIL\n".len() as u64);
}

#[test]
fn refusals_use_kafkas_errors_and_texts_and_append_nothing() {
    let f = Fixture::new();
    let t = f.topic("strict");
    let p = "strict-0";
    let good = plain(&values(3, "v"), NO_PRODUCER);
    let refuse = |bytes: &[u8]| {
        let err = t.append_produced(0, bytes).unwrap_err();
        assert_eq!(t.p0().log().log_end_offset(), 0, "{err}: nothing appended");
        err
    };

    let err = refuse(&patched(good.clone(), 0, &7u64.to_be_bytes()));
    assert!(matches!(err, EngineError::InvalidProducedBatch { .. }));
    assert_eq!(
        err.to_string(),
        format!("The baseOffset of the record batch in the append to {p} should be 0, but it is 7")
    );

    let mut flipped = good.clone();
    *flipped.last_mut().unwrap() ^= 1;
    let stored_crc = u32::from_be_bytes(flipped[17..21].try_into().unwrap());
    let err = refuse(&flipped);
    assert!(matches!(err, EngineError::CorruptMessage { .. }));
    assert_eq!(
        err.to_string(),
        format!("Record is corrupt (stored crc = {stored_crc}) in topic partition {p}.")
    );

    // Three records whose header claims offsets 0..=1.
    let err = refuse(&patched(good.clone(), 23, &1u32.to_be_bytes()));
    assert_eq!(
        err.to_string(),
        format!(
            "Inconsistent batch offset range [0, 1] and count of records 3 in topic partition {p}"
        )
    );

    let err = refuse(&[good.clone(), good.clone()].concat());
    assert_eq!(
        err.to_string(),
        "Produce requests are only allowed to contain exactly one record batch per partition"
    );
    let err = refuse(&good[..good.len() - 1]);
    assert_eq!(
        err.to_string(),
        "Produce requests must have at least one record batch per partition"
    );
    let mut old_magic = good.clone();
    old_magic[16] = 1;
    let err = refuse(&old_magic);
    assert_eq!(
        err.to_string(),
        "Produce requests are only allowed to contain record batches with magic version 2"
    );

    let control = batch_of(
        &[(Some(b"k"), Some(b"v"))],
        T0,
        (5, 0, 0),
        ClientBatch {
            control: true,
            ..ClientBatch::PLAIN
        },
    );
    let err = refuse(&control);
    assert_eq!(
        err.to_string(),
        format!("Clients are not allowed to write control records in topic partition {p}")
    );
    let txn = batch_of(
        &[(Some(b"k"), Some(b"v"))],
        T0,
        (5, 0, 0),
        ClientBatch {
            transactional: true,
            ..ClientBatch::PLAIN
        },
    );
    let err = refuse(&txn);
    assert!(
        matches!(err, EngineError::InvalidTxnState { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "Record was not part of an ongoing transaction"
    );
    let err = refuse(&plain(&values(1, "v"), (5, 0, -1)));
    assert_eq!(
        err.to_string(),
        format!(
            "Invalid sequence number -1 in record batch with producerId 5 in topic partition {p}"
        )
    );

    set(&t, "max.message.bytes=100");
    let err = refuse(&good);
    assert!(matches!(err, EngineError::RecordTooLarge { .. }));
    assert_eq!(
        err.to_string(),
        format!(
            "The record batch size in the append to {p} is {} bytes which exceeds the maximum configured value of 100.",
            good.len()
        )
    );
    set(&t, "-max.message.bytes");

    // Timestamps: message.timestamp.after.max.ms is an hour by default (Kafka 4.0).
    let future = T0 + 2 * 3_600_000;
    let late = batch_of(
        &[(None, Some(b"a")), (None, Some(b"b"))],
        future,
        NO_PRODUCER,
        ClientBatch::PLAIN,
    );
    let err = refuse(&late);
    let EngineError::RecordsRejected {
        invalid_timestamp: true,
        errors,
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(
        err.to_string(),
        "One or more records have been rejected due to invalid timestamp"
    );
    assert_eq!(errors.len(), 2);
    assert_eq!(errors[1].batch_index, 1);
    assert_eq!(
        errors[1].message,
        format!(
            "Timestamp {future} of message with offset 1 is out of range. The timestamp should be within [{}, {}]",
            T0.wrapping_sub(i64::MAX),
            T0 + 3_600_000
        )
    );
    set(&t, "message.timestamp.before.max.ms=1000");
    let err = refuse(&batch_of(
        &[(None, Some(b"a"))],
        T0 - 5_000,
        NO_PRODUCER,
        ClientBatch::PLAIN,
    ));
    assert!(matches!(
        err,
        EngineError::RecordsRejected {
            invalid_timestamp: true,
            ..
        }
    ));
    // A timestamp of -1 is exempt.
    t.append_produced(
        0,
        &batch_of(&[(None, Some(b"a"))], -1, NO_PRODUCER, ClientBatch::PLAIN),
    )
    .unwrap();

    // Keyless records on a compacted topic: every one is listed.
    let c = f.topic("compacted");
    set(&c, "cleanup.policy=compact");
    let mixed = batch_of(
        &[
            (None, Some(b"a")),
            (Some(b"k"), Some(b"b")),
            (None, Some(b"c")),
        ],
        T0,
        NO_PRODUCER,
        ClientBatch::PLAIN,
    );
    let err = c.append_produced(0, &mixed).unwrap_err();
    let message =
        "Compacted topic cannot accept message without key in topic partition compacted-0";
    assert_eq!(
        err.to_string(),
        format!(
            "One or more records have been rejected due to 2 record errors in total, and only showing the first three errors at most: [RecordError(batchIndex=0, message='{message}'), RecordError(batchIndex=2, message='{message}')]"
        )
    );
    let EngineError::RecordsRejected {
        invalid_timestamp: false,
        errors,
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(
        errors.iter().map(|e| e.batch_index).collect::<Vec<_>>(),
        [0, 2]
    );
    assert_eq!(c.p0().log().log_end_offset(), 0);
}

#[test]
fn a_batch_over_the_segment_size_is_refused_with_kafkas_text() {
    let f = Fixture::new();
    let t = f.topic("small");
    set(&t, "internal.segment.bytes=200\nmax.message.bytes=100000");
    let big = plain(&[vec![b'x'; 300]], NO_PRODUCER);
    let err = t.append_produced(0, &big).unwrap_err();
    assert!(matches!(err, EngineError::BatchOverSegmentSize { .. }));
    assert_eq!(
        err.to_string(),
        format!(
            "Message batch size is {} bytes in append to partition small-0, which exceeds the maximum configured segment size of 200.",
            big.len()
        )
    );
    // Batches that fit roll the segment as Kafka rolls it.
    for i in 0..5 {
        t.append_produced(0, &plain(&values(2, &format!("b{i}")), NO_PRODUCER))
            .unwrap();
    }
    assert!(t.p0().log().snapshot().segments.len() > 1);
    assert_eq!(t.p0().log().log_end_offset(), 10);
}

#[test]
fn log_append_time_stamps_the_batch_with_the_append_time() {
    let mut f = Fixture::new();
    let t = f.topic("lat");
    set(&t, "message.timestamp.type=LogAppendTime");
    let old = T0 - 30 * 24 * 3_600_000;
    let outcome = t
        .append_produced(
            0,
            &batch_of(
                &[(None, Some(b"a")), (None, Some(b"b"))],
                old,
                NO_PRODUCER,
                ClientBatch::PLAIN,
            ),
        )
        .unwrap();
    assert_eq!(
        outcome.log_append_time_ms, T0,
        "a month-old timestamp is not checked"
    );
    let (h, records) = &batches(&t)[0];
    assert!(h.is_log_append_time());
    assert_eq!(h.max_timestamp, T0);
    assert!(records.iter().all(|r| r.timestamp == T0));
    // Lines appended through the mount are stamped the same way.
    f.advance(7);
    t.append_lines(b"echo\n").unwrap();
    let (h, _) = &batches(&t)[1];
    assert!(h.is_log_append_time());
    assert_eq!(h.max_timestamp, T0 + 7);
    assert_eq!(h.codec().unwrap(), CompressionCodec::None);
    // A producer may not choose LogAppendTime itself.
    let err = t
        .append_produced(
            0,
            &batch_of(
                &[(None, Some(b"a"))],
                T0,
                NO_PRODUCER,
                ClientBatch {
                    log_append_time_ms: Some(T0),
                    ..ClientBatch::PLAIN
                },
            ),
        )
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("rejected due to invalid timestamp"),
        "{err}"
    );
    let EngineError::RecordsRejected { errors, .. } = err else {
        panic!()
    };
    assert_eq!(
        errors[0].message,
        format!("Invalid timestamp type in message DefaultRecord(offset=0, timestamp={T0}, key=0 bytes, value=1 bytes). Producer should not set timestamp type to LogAppendTime.")
    );
    // The rewritten header's CRC holds: recovery after a crash, which checks every
    // batch past the recovery point, keeps both batches.
    drop(t);
    f.crash_and_reopen();
    assert_eq!(f.topic("lat").p0().log().log_end_offset(), 3);
}

#[test]
fn every_codec_is_kept_under_producer_and_recompressed_under_a_fixed_type() {
    let codecs = [
        CompressionCodec::None,
        CompressionCodec::Gzip,
        CompressionCodec::Snappy,
        CompressionCodec::Lz4,
        CompressionCodec::Zstd,
    ];
    let f = Fixture::new();
    for (i, &target) in codecs.iter().enumerate() {
        let fixed = f.topic(&format!("fixed-{i}"));
        let name = if target == CompressionCodec::None {
            "uncompressed"
        } else {
            target.name()
        };
        set(&fixed, &format!("compression.type={name}"));
        let kept = f.topic(&format!("producer-{i}"));
        let mut expected = Vec::new();
        for &sent in &codecs {
            let vals = values(20, &format!("{sent}-{target}"));
            let records: Vec<Record<'_>> = vals
                .iter()
                .map(|v| (Some(&b"key"[..]), Some(v.as_slice())))
                .collect();
            let client = ClientBatch {
                compression: Compression::default_level(sent),
                ..ClientBatch::PLAIN
            };
            let batch = batch_of(&records, T0, NO_PRODUCER, client);
            let base = fixed.p0().log().log_end_offset();
            assert_eq!(fixed.append_produced(0, &batch).unwrap().base_offset, base);
            assert_eq!(kept.append_produced(0, &batch).unwrap().base_offset, base);
            for v in &vals {
                expected.extend_from_slice(v);
                expected.push(b'\n');
            }
        }
        for (topic, want) in [(&fixed, Some(target)), (&kept, None)] {
            let batches = batches(topic);
            for ((h, records), &sent) in batches.iter().zip(&codecs) {
                assert_eq!(
                    h.codec().unwrap(),
                    want.unwrap_or(sent),
                    "sent {sent}, topic {target}"
                );
                assert_eq!(records.len(), 20);
                assert_eq!(records[19].offset, h.base_offset + 19);
            }
            assert_eq!(cat(topic, 1000), expected);
            assert_eq!(topic.stream_len(), expected.len() as u64);
        }
    }
}

#[test]
fn idempotent_retries_are_answered_with_the_original_offsets_and_gaps_are_refused() {
    let f = Fixture::new();
    let t = f.topic("idem");
    let (pid, epoch) = f.engine().init_producer_id().unwrap();
    assert_eq!(epoch, 0);
    let first = plain(&values(3, "a"), (pid, epoch, 0));
    assert_eq!(t.append_produced(0, &first).unwrap().base_offset, 0);
    t.append_lines(b"echo between\n").unwrap();
    assert_eq!(
        t.append_produced(0, &first).unwrap().base_offset,
        0,
        "a retry"
    );
    assert_eq!(t.p0().log().log_end_offset(), 4, "not appended twice");
    let second = plain(&values(2, "b"), (pid, epoch, 3));
    assert_eq!(t.append_produced(0, &second).unwrap().base_offset, 4);

    let gap = plain(&values(1, "c"), (pid, epoch, 7));
    let err = t.append_produced(0, &gap).unwrap_err();
    assert!(matches!(err, EngineError::OutOfOrderSequence { .. }));
    assert_eq!(
        err.to_string(),
        format!("Out of order sequence number for producer {pid} at offset 6 in partition idem-0: 7 (incoming seq. number), 4 (current end sequence number)")
    );

    // Five batches back are remembered, the sixth is not.
    for i in 0..5 {
        let b = plain(&values(1, &format!("d{i}")), (pid, epoch, 5 + i));
        assert_eq!(t.append_produced(0, &b).unwrap().base_offset, 6 + i as u64);
    }
    let fifth_back = plain(&values(1, "d0"), (pid, epoch, 5));
    assert_eq!(t.append_produced(0, &fifth_back).unwrap().base_offset, 6);
    let err = t.append_produced(0, &second).unwrap_err();
    assert!(
        matches!(err, EngineError::OutOfOrderSequence { .. }),
        "{err}"
    );

    // A new epoch starts at sequence 0; the old epoch is fenced.
    let err = t
        .append_produced(0, &plain(&values(1, "e"), (pid, 1, 3)))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("Invalid sequence number for new epoch of producer {pid}at offset 11 in partition idem-0: 1 (request epoch), 3 (seq. number), 0 (current producer epoch)")
    );
    t.append_produced(0, &plain(&values(1, "e"), (pid, 1, 0)))
        .unwrap();
    let err = t
        .append_produced(0, &plain(&values(1, "f"), (pid, 0, 10)))
        .unwrap_err();
    assert!(matches!(err, EngineError::InvalidProducerEpoch { .. }));
    assert_eq!(
        err.to_string(),
        format!("Epoch of producer {pid} at offset 12 in idem-0 is 0, which is < the last seen epoch 1 (TV-1)")
    );
    // Another producer has its own sequences.
    let (other, _) = f.engine().init_producer_id().unwrap();
    assert_ne!(other, pid);
    assert_eq!(
        t.append_produced(0, &plain(&values(1, "g"), (other, 0, 0)))
            .unwrap()
            .base_offset,
        12
    );
}

#[test]
fn producer_ids_are_never_reused_after_a_restart() {
    let mut f = Fixture::new();
    let a = f.engine().init_producer_id().unwrap().0;
    let b = f.engine().init_producer_id().unwrap().0;
    assert_eq!(b, a + 1);
    f.crash_and_reopen();
    let c = f.engine().init_producer_id().unwrap().0;
    assert!(c > b, "{c} after {b}");
    f.reopen();
    assert!(f.engine().init_producer_id().unwrap().0 > c);
}

/// Appends `n` batches of one record for `pid` from sequence `from`; returns their bases.
fn produce_run(t: &Topic, pid: i64, from: i32, n: i32) -> Vec<u64> {
    (from..from + n)
        .map(|seq| {
            let b = plain(&values(1, &format!("s{seq}")), (pid, 0, seq));
            t.append_produced(0, &b).unwrap().base_offset
        })
        .collect()
}

#[test]
fn producer_state_survives_a_clean_reopen_in_its_snapshot() {
    let mut f = Fixture::new();
    let t = f.topic("durable");
    let pid = f.engine().init_producer_id().unwrap().0;
    let bases = produce_run(&t, pid, 0, 3);
    drop(t);
    f.reopen();
    let t = f.topic("durable");
    // The clean close's snapshot at the log end holds the producer.
    let snapshot = f.dir.path().join("durable-0/00000000000000000003.snapshot");
    let entries = decode_snapshot(&std::fs::read(snapshot).unwrap()).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(
        (
            entries[0].producer_id,
            entries[0].last_sequence,
            entries[0].last_offset
        ),
        (pid, 2, 2)
    );
    // The last batch is known (a snapshot keeps one), the sequence goes on.
    let retry = plain(&values(1, "s2"), (pid, 0, 2));
    assert_eq!(t.append_produced(0, &retry).unwrap().base_offset, bases[2]);
    let err = t
        .append_produced(0, &plain(&values(1, "x"), (pid, 0, 9)))
        .unwrap_err();
    assert!(matches!(err, EngineError::OutOfOrderSequence { .. }));
    assert_eq!(produce_run(&t, pid, 3, 1), [3]);
}

#[test]
fn producer_state_is_rebuilt_from_the_log_after_a_crash() {
    let mut f = Fixture::new();
    let t = f.topic("crashy");
    set(&t, "internal.segment.bytes=400");
    let pid = f.engine().init_producer_id().unwrap().0;
    let bases = produce_run(&t, pid, 0, 12);
    assert!(
        t.p0().log().snapshot().segments.len() > 2,
        "rolled, with snapshots at the rolls"
    );
    drop(t);
    f.crash_and_reopen();
    let t = f.topic("crashy");
    // The batches after the last roll's snapshot were replayed: the last five are known.
    for seq in 7..12 {
        let retry = plain(&values(1, &format!("s{seq}")), (pid, 0, seq));
        assert_eq!(
            t.append_produced(0, &retry).unwrap().base_offset,
            bases[seq as usize]
        );
    }
    assert_eq!(t.p0().log().log_end_offset(), 12);
    assert_eq!(produce_run(&t, pid, 12, 1), [12]);
    let err = t
        .append_produced(0, &plain(&values(1, "x"), (pid, 0, 20)))
        .unwrap_err();
    assert!(matches!(err, EngineError::OutOfOrderSequence { .. }));
}

#[test]
fn idle_producers_expire_after_producer_id_expiration_ms() {
    let mut f = Fixture::new();
    let t = f.topic("expiry");
    let pid = f.engine().init_producer_id().unwrap().0;
    produce_run(&t, pid, 0, 2);
    drop(t);
    f.reopen();
    f.advance(86_400_000);
    f.reopen();
    let t = f.topic("expiry");
    // Forgotten: its retry is new data, and any sequence is taken (Kafka since KIP-360).
    let retry = plain(&values(1, "s1"), (pid, 0, 1));
    assert_eq!(t.append_produced(0, &retry).unwrap().base_offset, 2);
    let err = t
        .append_produced(0, &plain(&values(1, "z"), (pid, 0, 40)))
        .unwrap_err();
    assert!(
        matches!(err, EngineError::OutOfOrderSequence { .. }),
        "{err}"
    );
}

#[derive(Clone, Debug)]
enum Op {
    Echo(Vec<String>),
    Produce {
        values: Vec<Option<String>>,
        codec: usize,
    },
    Retry,
}

fn op() -> impl Strategy<Value = Op> {
    let text = "[a-z0-9 ]{0,12}";
    prop_oneof![
        proptest::collection::vec(text, 1..4).prop_map(Op::Echo),
        (
            proptest::collection::vec(proptest::option::weighted(0.8, text), 1..5),
            0usize..5
        )
            .prop_map(|(values, codec)| Op::Produce { values, codec }),
        Just(Op::Retry),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, rng_seed: proptest_seed(), ..ProptestConfig::default() })]

    /// FUSE appends and produced batches (each codec, retries included) interleave: every
    /// record has the next offset, `cat` shows them in offset order, the stream's size is
    /// what `cat` reads, and all of it survives a crash.
    #[test]
    fn echo_and_produce_interleave_with_consistent_offsets_and_stream_positions(
        ops in proptest::collection::vec(op(), 1..25),
        segment in 300i32..3000,
    ) {
        let mut f = Fixture::new();
        let t = f.topic("model");
        set(&t, &format!("internal.segment.bytes={segment}"));
        let pid = f.engine().init_producer_id().unwrap().0;
        let codecs = [CompressionCodec::None, CompressionCodec::Gzip, CompressionCodec::Snappy, CompressionCodec::Lz4, CompressionCodec::Zstd];
        let mut model: Vec<String> = Vec::new();
        let mut seq = 0;
        let mut last: Option<(Vec<u8>, u64)> = None;
        for op in ops {
            match op {
                Op::Echo(lines) => {
                    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
                    t.append_lines(text.as_bytes()).unwrap();
                    model.extend(lines);
                }
                Op::Produce { values, codec } => {
                    let records: Vec<Record<'_>> = values.iter().map(|v| (None, v.as_deref().map(str::as_bytes))).collect();
                    let client = ClientBatch { compression: Compression::default_level(codecs[codec]), ..ClientBatch::PLAIN };
                    let batch = batch_of(&records, T0, (pid, 0, seq), client);
                    seq += values.len() as i32;
                    let base = t.append_produced(0, &batch).unwrap().base_offset;
                    prop_assert_eq!(base, model.len() as u64);
                    model.extend(values.iter().map(|v| v.clone().unwrap_or_else(|| "null".into())));
                    last = Some((batch, base));
                }
                Op::Retry => {
                    if let Some((batch, base)) = &last {
                        prop_assert_eq!(t.append_produced(0, batch).unwrap().base_offset, *base);
                    }
                }
            }
            prop_assert_eq!(t.p0().log().log_end_offset(), model.len() as u64);
        }
        let expected: String = model.iter().map(|l| format!("{l}\n")).collect();
        prop_assert_eq!(cat_string(&t), expected.clone());
        prop_assert_eq!(t.stream_len(), expected.len() as u64);
        drop(t);
        f.crash_and_reopen();
        let t = f.topic("model");
        prop_assert_eq!(cat_string(&t), expected.clone());
        prop_assert_eq!(t.stream_len(), expected.len() as u64);
        if let Some((batch, base)) = &last {
            prop_assert_eq!(t.append_produced(0, batch).unwrap().base_offset, *base);
        }
    }
}
