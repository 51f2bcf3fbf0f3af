//! Proof from outside kpfs: the segment files the engine writes, read from disk and decoded
//! by the `kafka-protocol` crate's `RecordBatchDecoder` (a Kafka client's decoder nobody
//! here wrote), give back every record as appended: offsets, the clock's timestamps, keys,
//! values (tombstones as null), no headers, each batch in its topic's codec, the cleaner's
//! delete horizon where Kafka's cleaner puts it. The decoder checks each batch's CRC32C, so
//! a flipped byte is reported as corrupt.

mod common;

use std::path::PathBuf;

use common::*;
use kafka_protocol::records::{Compression, RecordBatchDecoder, TimestampType};
use kpfs::engine::Topic;

/// One record as the decoder reads it.
#[derive(Debug, PartialEq)]
struct Rec {
    offset: i64,
    timestamp: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
}

/// One batch as the decoder reads it: its header fields and its records.
#[derive(Debug)]
struct Batch {
    base_offset: i64,
    base_timestamp: i64,
    compression: Compression,
    delete_horizon: bool,
    records: Vec<Rec>,
}

fn rec(offset: i64, timestamp: i64, key: Option<&str>, value: Option<&str>) -> Rec {
    Rec {
        offset,
        timestamp,
        key: key.map(|k| k.as_bytes().to_vec()),
        value: value.map(|v| v.as_bytes().to_vec()),
    }
}

/// Every batch of a segment file's bytes, or the decoder's error.
fn decode(bytes: &[u8]) -> Result<Vec<Batch>, String> {
    let infos =
        RecordBatchDecoder::decode_batch_info(&mut &bytes[..]).map_err(|e| format!("{e:#}"))?;
    let sets = RecordBatchDecoder::decode_all(&mut &bytes[..]).map_err(|e| format!("{e:#}"))?;
    assert_eq!(infos.len(), sets.len());
    Ok(infos
        .into_iter()
        .zip(sets)
        .map(|(info, set)| {
            assert_eq!(info.version, 2, "magic");
            assert_eq!(info.record_count as usize, set.records.len());
            assert_eq!(
                (info.producer_id, info.producer_epoch, info.base_sequence),
                (-1, -1, -1),
                "no producer state"
            );
            assert_eq!(info.timestamp_type, TimestampType::Creation);
            assert!(!info.transactional && !info.control);
            let records = set
                .records
                .into_iter()
                .map(|r| {
                    assert!(r.headers.is_empty(), "headers of offset {}", r.offset);
                    Rec {
                        offset: r.offset,
                        timestamp: r.timestamp,
                        key: r.key.map(|k| k.to_vec()),
                        value: r.value.map(|v| v.to_vec()),
                    }
                })
                .collect();
            Batch {
                base_offset: info.min_offset,
                base_timestamp: info.min_timestamp,
                compression: set.compression,
                delete_horizon: info.delete_horizon,
                records,
            }
        })
        .collect())
}

fn segment_files(t: &Topic) -> Vec<PathBuf> {
    t.partition(0)
        .unwrap()
        .log()
        .snapshot()
        .segments
        .iter()
        .map(|s| s.log_path())
        .collect()
}

/// Every batch of every live segment of `t`, read from the files on disk.
fn decode_topic(t: &Topic) -> Vec<Batch> {
    segment_files(t)
        .iter()
        .flat_map(|p| {
            let bytes = std::fs::read(p).unwrap();
            decode(&bytes).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        })
        .collect()
}

fn records(batches: Vec<Batch>) -> Vec<Rec> {
    batches.into_iter().flat_map(|b| b.records).collect()
}

/// (base offset, record count) of each batch.
fn shapes(batches: &[Batch]) -> Vec<(i64, usize)> {
    batches
        .iter()
        .map(|b| (b.base_offset, b.records.len()))
        .collect()
}

#[test]
fn plain_topic_decodes_as_appended_one_batch_per_write() {
    let f = Fixture::new();
    let t = f.topic("plain");
    for i in 0..3 {
        t.append_lines(format!("line-{i}\n").as_bytes()).unwrap();
        f.advance(5);
    }
    t.append_lines(b"one\nwrite\nthree lines\n").unwrap();
    let batches = decode_topic(&t);
    assert_eq!(shapes(&batches), vec![(0, 1), (1, 1), (2, 1), (3, 3)]);
    assert!(batches.iter().all(|b| b.compression == Compression::None));
    assert_eq!(
        records(batches),
        vec![
            rec(0, T0, None, Some("line-0")),
            rec(1, T0 + 5, None, Some("line-1")),
            rec(2, T0 + 10, None, Some("line-2")),
            rec(3, T0 + 15, None, Some("one")),
            rec(4, T0 + 15, None, Some("write")),
            rec(5, T0 + 15, None, Some("three lines")),
        ]
    );
}

#[test]
fn keyed_topic_decodes_with_keys_and_null_tombstones() {
    let f = Fixture::new();
    let t = f.topic("keyed");
    set(&t, "parse.key=true\nkey.separator=:\nnull.marker=NULL");
    t.append_lines(b"k1:v1\n").unwrap();
    f.advance(1);
    t.append_lines(b"k1:NULL\n").unwrap();
    f.advance(1);
    t.append_lines(b"k2:v2\nk3:NULL\nk4:a value: with the separator\n")
        .unwrap();
    assert_eq!(
        records(decode_topic(&t)),
        vec![
            rec(0, T0, Some("k1"), Some("v1")),
            rec(1, T0 + 1, Some("k1"), None),
            rec(2, T0 + 2, Some("k2"), Some("v2")),
            rec(3, T0 + 2, Some("k3"), None),
            rec(4, T0 + 2, Some("k4"), Some("a value: with the separator")),
        ]
    );
}

#[test]
fn each_codec_topic_decodes_with_its_codec() {
    // 100 KB in one write: several snappy (32 KiB) and lz4 (64 KiB) blocks in one batch.
    let big: Vec<String> = (0..1000)
        .map(|i| format!("line {i:04} of a compressible payload: {i:060}"))
        .collect();
    let big_write = big.iter().map(|l| format!("{l}\n")).collect::<String>();
    for (name, codec) in [
        ("gzip", Compression::Gzip),
        ("snappy", Compression::Snappy),
        ("lz4", Compression::Lz4),
        ("zstd", Compression::Zstd),
    ] {
        let f = Fixture::new();
        let t = f.topic(name);
        set(&t, &format!("compression.type={name}"));
        t.append_lines(b"first\n").unwrap();
        f.advance(7);
        t.append_lines(big_write.as_bytes()).unwrap();
        let batches = decode_topic(&t);
        assert_eq!(shapes(&batches), vec![(0, 1), (1, 1000)], "{name}");
        assert!(
            batches.iter().all(|b| b.compression == codec),
            "{name}: {:?}",
            batches.iter().map(|b| b.compression).collect::<Vec<_>>()
        );
        let mut want = vec![rec(0, T0, None, Some("first"))];
        want.extend(
            big.iter()
                .enumerate()
                .map(|(i, l)| rec(i as i64 + 1, T0 + 7, None, Some(l))),
        );
        assert_eq!(records(batches), want, "{name}");
    }
}

#[test]
fn compacted_topic_decodes_after_a_cleaning_pass_with_the_tombstone_horizon() {
    let f = Fixture::new();
    let t = f.topic("compacted");
    // snappy: the cleaner rewrites compressed batches too.
    set(
        &t,
        "cleanup.policy=compact\nparse.key=true\nkey.separator=:\nnull.marker=NULL\n\
         min.cleanable.dirty.ratio=0.01\nsegment.ms=1000\ncompression.type=snappy",
    );
    for kv in ["a:1", "b:1", "a:2", "b:NULL", "c:1"] {
        t.append_lines(format!("{kv}\n").as_bytes()).unwrap();
        f.advance(1);
    }
    f.advance(2000);
    t.append_lines(b"d:1\n").unwrap(); // rolls segment 0: it becomes cleanable
    let cleaned_at = T0 + 5 + 2000;
    let (topic, _) = f.engine().run_cleaner_once().expect("a cleaning pass");
    assert_eq!(topic, "compacted-0", "the cleaner cleans a partition");
    let batches = decode_topic(&t);
    assert_eq!(shapes(&batches), vec![(2, 1), (3, 1), (4, 1), (5, 1)]);
    assert!(batches.iter().all(|b| b.compression == Compression::Snappy));
    // Kafka's cleaner marks the batch that keeps a tombstone with its delete horizon
    // (pass time + delete.retention.ms, a day by default) in baseTimestamp; its record
    // keeps its own timestamp through a negative delta.
    let horizons: Vec<_> = batches
        .iter()
        .map(|b| (b.delete_horizon, b.base_timestamp))
        .collect();
    assert_eq!(
        horizons,
        vec![
            (false, T0 + 2),
            (true, cleaned_at + 86_400_000),
            (false, T0 + 4),
            (false, cleaned_at)
        ]
    );
    assert_eq!(
        records(batches),
        vec![
            rec(2, T0 + 2, Some("a"), Some("2")),
            rec(3, T0 + 3, Some("b"), None),
            rec(4, T0 + 4, Some("c"), Some("1")),
            rec(5, cleaned_at, Some("d"), Some("1")),
        ]
    );
}

#[test]
fn a_flipped_byte_is_a_crc_failure_to_the_decoder() {
    let f = Fixture::new();
    let plain = f.topic("plain");
    plain.append_lines(b"first record\nsecond\n").unwrap();
    let zstd = f.topic("zstd");
    set(&zstd, "compression.type=zstd");
    zstd.append_lines(b"a\n").unwrap();
    zstd.append_lines(b"compressed record\nand another\n")
        .unwrap();
    for t in [&plain, &zstd] {
        let mut bytes = std::fs::read(&segment_files(t)[0]).unwrap();
        decode(&bytes).expect("the segment as written decodes");
        // A value byte of the first batch, and a byte of the last batch's compressed
        // records: both lie under the CRC32C (attributes to the end of the batch).
        for at in [70, bytes.len() - 3] {
            bytes[at] ^= 0x20;
            let err = decode(&bytes).expect_err("a flipped byte must not decode");
            assert!(
                err.contains("Cyclic redundancy check failed"),
                "byte {at}: {err}"
            );
            bytes[at] ^= 0x20;
        }
    }
}
