//! The newlines of a write, found a 64-byte block at a time: one bit per byte says where
//! the newlines are, and each line then costs a count of trailing zeros. Lines average
//! tens of bytes, so a search call per line (as `memchr` makes) costs more than its scan.

/// Bytes one mask covers.
const BLOCK_BYTES: usize = 64;

/// Positions of the newlines of `bytes`, in order.
pub(crate) struct Newlines<'a> {
    bytes: &'a [u8],
    /// Where the block `mask` describes starts.
    block_at: usize,
    /// The newlines of that block not yet returned, one bit per byte.
    mask: u64,
}

impl<'a> Newlines<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Newlines {
            bytes,
            block_at: 0,
            mask: block_mask(bytes),
        }
    }
}

impl Iterator for Newlines<'_> {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        while self.mask == 0 {
            self.block_at += BLOCK_BYTES;
            let rest = self.bytes.get(self.block_at..).filter(|r| !r.is_empty())?;
            self.mask = block_mask(rest);
        }
        let at = self.block_at + self.mask.trailing_zeros() as usize;
        self.mask &= self.mask - 1;
        Some(at)
    }
}

/// The newlines of the first 64 bytes of `bytes` (all of them if fewer).
#[inline(always)]
fn block_mask(bytes: &[u8]) -> u64 {
    match bytes.first_chunk::<BLOCK_BYTES>() {
        Some(block) => full_block_mask(block),
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
fn full_block_mask(block: &[u8; BLOCK_BYTES]) -> u64 {
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
fn full_block_mask(block: &[u8; BLOCK_BYTES]) -> u64 {
    bytewise_mask(block)
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
            proptest::prop_assert_eq!(Newlines::new(&bytes).collect::<Vec<_>>(), expected);
        }
    }
}
