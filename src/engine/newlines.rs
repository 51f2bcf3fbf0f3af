//! The newlines of a write, found a 64-byte block at a time: one bit per byte says where
//! the newlines are, and each line then costs a count of trailing zeros. Lines average
//! tens of bytes, so a search call per line (as `memchr` makes) costs more than its scan.
//! The block's compares are SSE2 (every x86_64 CPU) or, where the CPU has them, AVX2 or
//! AVX-512BW.

/// Bytes one mask covers.
const BLOCK_BYTES: usize = 64;

/// How a 64-byte block's newline mask is computed: with the instructions every CPU of
/// the architecture has ([`Baseline`]), or with wider ones this CPU was found to have
/// ([`Avx2`]). A hot loop is compiled once per scanner, with the scanner's instructions
/// enabled for the whole loop (so its copies widen too): see
/// `BatchBuilder::push_keyless_lines`.
pub(crate) trait BlockScan: Copy {
    fn full_block_mask(self, block: &[u8; BLOCK_BYTES]) -> u64;
}

/// SSE2 on x86_64 (part of every x86_64 CPU), a byte loop elsewhere.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Baseline;

impl BlockScan for Baseline {
    #[inline(always)]
    fn full_block_mask(self, block: &[u8; BLOCK_BYTES]) -> u64 {
        baseline_block_mask(block)
    }
}

/// AVX2: two 32-byte compares per block. A value exists only on a CPU that has AVX2.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx2(());

#[cfg(target_arch = "x86_64")]
impl Avx2 {
    /// Whether this CPU has AVX2 (std caches the answer).
    pub(crate) fn detect() -> Option<Avx2> {
        std::arch::is_x86_feature_detected!("avx2").then_some(Avx2(()))
    }
}

#[cfg(target_arch = "x86_64")]
impl BlockScan for Avx2 {
    #[inline(always)]
    fn full_block_mask(self, block: &[u8; BLOCK_BYTES]) -> u64 {
        // SAFETY: an `Avx2` exists only where `detect` found AVX2.
        unsafe { avx2_block_mask(block) }
    }
}

/// AVX-512BW: one 64-byte compare per block, straight into a mask register. A value
/// exists only on a CPU that has AVX-512BW.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx512(());

#[cfg(target_arch = "x86_64")]
impl Avx512 {
    /// Whether this CPU has AVX-512BW (std caches the answer).
    pub(crate) fn detect() -> Option<Avx512> {
        std::arch::is_x86_feature_detected!("avx512bw").then_some(Avx512(()))
    }
}

#[cfg(target_arch = "x86_64")]
impl BlockScan for Avx512 {
    #[inline(always)]
    fn full_block_mask(self, block: &[u8; BLOCK_BYTES]) -> u64 {
        // SAFETY: an `Avx512` exists only where `detect` found AVX-512BW.
        unsafe { avx512_block_mask(block) }
    }
}

/// Positions of the newlines of `bytes`, in order.
pub(crate) struct Newlines<'a, S: BlockScan> {
    bytes: &'a [u8],
    scan: S,
    /// Where the block `mask` describes starts.
    block_at: usize,
    /// The newlines of that block not yet returned, one bit per byte.
    mask: u64,
}

impl<'a, S: BlockScan> Newlines<'a, S> {
    #[inline(always)]
    pub(crate) fn new(bytes: &'a [u8], scan: S) -> Self {
        Newlines {
            bytes,
            scan,
            block_at: 0,
            mask: block_mask(scan, bytes),
        }
    }
}

impl<S: BlockScan> Iterator for Newlines<'_, S> {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        while self.mask == 0 {
            self.block_at += BLOCK_BYTES;
            let rest = self.bytes.get(self.block_at..).filter(|r| !r.is_empty())?;
            self.mask = block_mask(self.scan, rest);
        }
        let at = self.block_at + self.mask.trailing_zeros() as usize;
        self.mask &= self.mask - 1;
        Some(at)
    }
}

/// The newlines of the first 64 bytes of `bytes` (all of them if fewer).
#[inline(always)]
fn block_mask<S: BlockScan>(scan: S, bytes: &[u8]) -> u64 {
    match bytes.first_chunk::<BLOCK_BYTES>() {
        Some(block) => scan.full_block_mask(block),
        None => bytewise_mask(bytes),
    }
}

/// The newlines of `bytes` (at most 64), looked at one by one.
fn bytewise_mask(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .enumerate()
        .fold(0, |mask, (i, &b)| mask | u64::from(b == b'\n') << i)
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn baseline_block_mask(block: &[u8; BLOCK_BYTES]) -> u64 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8,
    };
    let mut mask = 0;
    for (i, chunk) in block.chunks_exact(16).enumerate() {
        // SAFETY: SSE2 is part of every x86_64 CPU; `chunk` holds the 16 bytes the load
        // reads, and `_mm_loadu_si128` needs no alignment.
        let hits = unsafe {
            let bytes = _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>());
            _mm_movemask_epi8(_mm_cmpeq_epi8(bytes, _mm_set1_epi8(b'\n' as i8)))
        };
        mask |= u64::from(hits as u16) << (16 * i);
    }
    mask
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn baseline_block_mask(block: &[u8; BLOCK_BYTES]) -> u64 {
    bytewise_mask(block)
}

/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn avx2_block_mask(block: &[u8; BLOCK_BYTES]) -> u64 {
    use std::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_set1_epi8,
    };
    let mut mask = 0;
    for (i, chunk) in block.chunks_exact(32).enumerate() {
        // SAFETY: `chunk` holds the 32 bytes the load reads, and `_mm256_loadu_si256`
        // needs no alignment; AVX2 is the caller's to ensure.
        let hits = unsafe {
            let bytes = _mm256_loadu_si256(chunk.as_ptr().cast::<__m256i>());
            _mm256_movemask_epi8(_mm256_cmpeq_epi8(bytes, _mm256_set1_epi8(b'\n' as i8)))
        };
        mask |= u64::from(hits as u32) << (32 * i);
    }
    mask
}

/// # Safety
/// The CPU must have AVX-512BW.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw")]
#[inline]
unsafe fn avx512_block_mask(block: &[u8; BLOCK_BYTES]) -> u64 {
    use std::arch::x86_64::{_mm512_cmpeq_epi8_mask, _mm512_loadu_si512, _mm512_set1_epi8};
    // SAFETY: `block` holds the 64 bytes the load reads, and `_mm512_loadu_si512` needs
    // no alignment; AVX-512BW is the caller's to ensure.
    unsafe {
        let bytes = _mm512_loadu_si512(block.as_ptr().cast());
        _mm512_cmpeq_epi8_mask(bytes, _mm512_set1_epi8(b'\n' as i8))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The block search finds every newline a byte-by-byte search finds, across block
        /// boundaries and in a short last block.
        #[test]
        fn finds_the_newlines_a_byte_by_byte_search_finds(
            bytes in proptest::collection::vec(
                proptest::prop_oneof![9 => proptest::num::u8::ANY, 1 => proptest::strategy::Just(b'\n')],
                0..300,
            ),
        ) {
            let expected: Vec<usize> = bytes
                .iter()
                .enumerate()
                .filter(|(_, &b)| b == b'\n')
                .map(|(i, _)| i)
                .collect();
            proptest::prop_assert_eq!(Newlines::new(&bytes, Baseline).collect::<Vec<_>>(), expected.clone());
            #[cfg(target_arch = "x86_64")]
            if let Some(avx2) = Avx2::detect() {
                proptest::prop_assert_eq!(Newlines::new(&bytes, avx2).collect::<Vec<_>>(), expected.clone());
            }
            #[cfg(target_arch = "x86_64")]
            if let Some(avx512) = Avx512::detect() {
                proptest::prop_assert_eq!(Newlines::new(&bytes, avx512).collect::<Vec<_>>(), expected);
            }
        }
    }
}
