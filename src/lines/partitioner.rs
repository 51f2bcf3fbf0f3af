//! Which partition a record of `TOPIC/log` goes to, as Kafka's Java producer's default
//! partitioner picks it (`BuiltInPartitioner.partitionForKey`): a keyed record to
//! `toPositive(murmur2(key)) % partitions`, the partition every Kafka client with default
//! settings (Java, kafka-python, franz-go's `StickyKeyPartitioner`) picks for that key.
//! Keyless records stick to one partition per write and successive writes take the
//! partitions in turn, as the Java producer's sticky partitioner sticks to one per batch.

/// Kafka's `Utils.murmur2`: MurmurHash2, 32 bits, seed `0x9747b28c`, the tail bytes
/// folded in as Java does (sign-extended bytes, little-endian words).
pub(crate) fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h = SEED ^ data.len() as u32;
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        let mut k = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = words.remainder();
    // Java's `(data[i] & 0xff)`: each tail byte unsigned, xored in at its place.
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// `Utils.toPositive(Utils.murmur2(key)) % partitions`.
#[cfg(test)]
pub(crate) fn partition_for_key(key: &[u8], partitions: u32) -> u32 {
    KeyPartitioner::new(partitions).partition(key)
}

/// [`partition_for_key`] for the keys of one write: the remainder by a multiplication
/// (Lemire, Kaser and Kurz, "Faster Remainder by Direct Computation", 2019, exact for
/// every 32-bit dividend and divisor), since a division per record was the partitioner's
/// slowest step.
pub(crate) struct KeyPartitioner {
    partitions: u32,
    /// `2^64 / partitions`, rounded up (0 for one partition, whose remainder is 0).
    inverse: u64,
}

impl KeyPartitioner {
    pub(crate) fn new(partitions: u32) -> KeyPartitioner {
        assert!(partitions > 0, "a topic has at least one partition");
        KeyPartitioner {
            partitions,
            inverse: (u64::MAX / u64::from(partitions)).wrapping_add(1),
        }
    }

    pub(crate) fn partition(&self, key: &[u8]) -> u32 {
        self.remainder((murmur2(key) & 0x7fff_ffff) as u32)
    }

    fn remainder(&self, n: u32) -> u32 {
        let fraction = self.inverse.wrapping_mul(u64::from(n));
        ((u128::from(fraction) * u128::from(self.partitions)) >> 64) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kafka's own test vectors (`UtilsTest.testMurmur2`): tails of 0, 2 and 3 bytes.
    #[test]
    fn murmur2_matches_kafkas_test_vectors() {
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (data, expected) in cases {
            assert_eq!(
                murmur2(data),
                expected,
                "{:?}",
                String::from_utf8_lossy(data)
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn the_remainder_by_multiplication_is_the_remainder(
            n in proptest::prelude::any::<u32>(),
            partitions in 1u32..=u32::MAX,
        ) {
            proptest::prop_assert_eq!(KeyPartitioner::new(partitions).remainder(n), n % partitions);
        }
    }

    #[test]
    fn the_remainder_by_multiplication_holds_at_the_edges() {
        for partitions in [1, 2, 3, 7, 12, 10_000, u32::MAX - 1, u32::MAX] {
            let p = KeyPartitioner::new(partitions);
            for n in [0, 1, partitions - 1, partitions, 0x7fff_ffff, u32::MAX] {
                assert_eq!(p.remainder(n), n % partitions, "{n} % {partitions}");
            }
        }
    }

    #[test]
    fn keys_spread_over_the_partitions_and_stay_put() {
        let mut seen = [0u32; 12];
        for i in 0..1200 {
            let key = format!("key-{i}");
            let p = partition_for_key(key.as_bytes(), 12);
            assert_eq!(p, partition_for_key(key.as_bytes(), 12));
            seen[p as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 50), "{seen:?}");
        assert_eq!(partition_for_key(b"anything", 1), 0);
    }
}
