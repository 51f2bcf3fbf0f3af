//! Kafka's `SkimpyOffsetMap`, the cleaner's table of key hash -> latest offset over a
//! pass's dirty range (`log.cleaner.dedupe.buffer.size` split over the cleaner threads).

use std::hash::Hasher;

/// Bytes per offset-map slot: a 128-bit key hash and an 8-byte offset (Kafka's MD5 + long).
pub const OFFSET_MAP_ENTRY_BYTES: usize = 24;

/// Kafka's `SkimpyOffsetMap`: an open-addressing table of key hash -> latest offset in
/// a fixed buffer. Keys themselves are never stored; two keys with the same 128-bit hash
/// count as one (an accepted risk, as in Kafka).
///
/// The buffer is an anonymous mapping advised to use huge pages: lookups land on random
/// slots, and with 4 KiB pages nearly every one of them was a TLB miss. A pass uses only
/// as many slots as its dirty range has records (never more than the buffer), so small
/// passes touch, and clear, a small table.
pub struct OffsetMap {
    buffer: memmap2::MmapMut,
    total_slots: usize,
    load_factor: f64,
    /// Slots in use for the current pass.
    slots: usize,
    capacity: usize,
    entries: usize,
    /// Offset up to which the map has seen the dirty range.
    pub(crate) latest_offset: Option<u64>,
}

impl OffsetMap {
    /// A map in `memory_bytes`, filled to at most `load_factor` of its slots.
    pub fn new(memory_bytes: usize, load_factor: f64) -> OffsetMap {
        let total_slots = (memory_bytes / OFFSET_MAP_ENTRY_BYTES).max(2);
        let buffer = memmap2::MmapMut::map_anon(total_slots * OFFSET_MAP_ENTRY_BYTES)
            .expect("anonymous mapping for the cleaner's offset map");
        // Only advice: without huge pages the map works, just slower.
        let _ = buffer.advise(memmap2::Advice::HugePage);
        // A fresh anonymous mapping is already zero: no clearing, no pages touched.
        OffsetMap {
            buffer,
            total_slots,
            load_factor,
            slots: total_slots,
            capacity: ((total_slots as f64 * load_factor) as usize).clamp(1, total_slots - 1),
            entries: 0,
            latest_offset: None,
        }
    }

    /// Clears the map for a pass over at most `records` records.
    pub(crate) fn prepare(&mut self, records: usize) {
        let wanted = ((records as f64 / self.load_factor) as usize).saturating_add(2);
        self.slots = wanted.clamp(2, self.total_slots);
        self.capacity = ((self.slots as f64 * self.load_factor) as usize).clamp(1, self.slots - 1);
        let used = self.slots * OFFSET_MAP_ENTRY_BYTES;
        self.buffer[..used].fill(0);
        self.entries = 0;
        self.latest_offset = None;
    }

    fn table(&self) -> &[[u64; 3]] {
        // SAFETY: the mapping is page-aligned (so aligned for u64), at least
        // `slots * 24` bytes long, owned by `self` and only accessed through these two
        // methods, whose borrows follow `self`'s.
        unsafe { std::slice::from_raw_parts(self.buffer.as_ptr().cast::<[u64; 3]>(), self.slots) }
    }

    fn table_mut(&mut self) -> &mut [[u64; 3]] {
        // SAFETY: as in `table`, with exclusive access through `&mut self`.
        unsafe {
            std::slice::from_raw_parts_mut(self.buffer.as_mut_ptr().cast::<[u64; 3]>(), self.slots)
        }
    }

    /// The 128-bit key hash: SipHash (spreads keys over slots) and FNV-1a (independent
    /// bits against collisions), so each key is hashed once per lookup.
    pub(crate) fn hash(key: &[u8]) -> [u64; 2] {
        let mut sip = std::hash::DefaultHasher::new();
        sip.write(key);
        let mut fnv: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in key {
            fnv = (fnv ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        let h = [sip.finish(), fnv];
        // An all-zero slot means empty; nudge the (astronomically unlikely) zero hash.
        if h == [0, 0] {
            [1, 0]
        } else {
            h
        }
    }

    /// Starts loading the slot a hash probes first, so a batch's lookups overlap their
    /// cache misses instead of paying them one after another.
    pub(crate) fn prefetch(&self, h: [u64; 2]) {
        let table = self.table();
        let slot = &table[(h[0] % table.len() as u64) as usize];
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch is a hint that never faults; the pointer is in bounds anyway.
        unsafe {
            std::arch::x86_64::_mm_prefetch(
                slot.as_ptr().cast::<i8>(),
                std::arch::x86_64::_MM_HINT_T0,
            );
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = slot;
    }

    fn slot_of(&self, h: [u64; 2]) -> usize {
        let table = self.table();
        let n = table.len();
        let mut i = (h[0] % n as u64) as usize;
        loop {
            let s = &table[i];
            if (s[0] == 0 && s[1] == 0) || (s[0] == h[0] && s[1] == h[1]) {
                return i;
            }
            i = (i + 1) % n;
        }
    }

    #[cfg(test)]
    pub(crate) fn is_full(&self) -> bool {
        self.entries >= self.capacity
    }

    /// Records `offset` as the latest for `key`. False (and nothing stored) when the key
    /// is new and the map is full.
    #[cfg(test)]
    pub(crate) fn put(&mut self, key: &[u8], offset: u64) -> bool {
        self.put_hashed(Self::hash(key), offset)
    }

    /// [`OffsetMap::put`] with the key already hashed.
    pub(crate) fn put_hashed(&mut self, h: [u64; 2], offset: u64) -> bool {
        let i = self.slot_of(h);
        let is_new = {
            let s = &self.table()[i];
            s[0] == 0 && s[1] == 0
        };
        if is_new {
            if self.entries >= self.capacity {
                return false;
            }
            self.entries += 1;
        }
        self.table_mut()[i] = [h[0], h[1], offset];
        true
    }

    #[cfg(test)]
    pub(crate) fn get(&self, key: &[u8]) -> Option<u64> {
        self.get_hashed(Self::hash(key))
    }

    /// [`OffsetMap::get`] with the key already hashed.
    pub(crate) fn get_hashed(&self, h: [u64; 2]) -> Option<u64> {
        let s = &self.table()[self.slot_of(h)];
        (s[0] == h[0] && s[1] == h[1]).then_some(s[2])
    }

    #[cfg(test)]
    pub(crate) fn clear(&mut self) {
        self.prepare(usize::MAX);
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries
    }

    /// Share of the whole buffer's slots in use (Kafka's `utilization`).
    pub(crate) fn utilization(&self) -> f64 {
        self.entries as f64 / self.total_slots as f64
    }

    #[cfg(test)]
    pub(crate) fn memory_bytes(&self) -> usize {
        self.total_slots * OFFSET_MAP_ENTRY_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_map_keeps_latest_and_respects_capacity() {
        let mut m = OffsetMap::new(24 * 10, 0.5);
        assert!(m.put(b"a", 1));
        assert!(m.put(b"a", 5));
        assert_eq!(m.get(b"a"), Some(5));
        for k in 0..4u8 {
            assert!(m.put(&[b'k', k], u64::from(k)));
        }
        assert!(m.is_full());
        assert!(!m.put(b"new", 9), "a new key does not fit a full map");
        assert!(m.put(b"a", 7), "an existing key still updates");
        assert_eq!(m.get(b"a"), Some(7));
        assert_eq!(m.get(b"missing"), None);
        m.clear();
        assert_eq!(m.get(b"a"), None);
        assert_eq!(m.len(), 0);
    }

    #[test]
    fn memory_per_entry_is_24_bytes() {
        let m = OffsetMap::new(24 * 1000, 0.9);
        assert_eq!(m.memory_bytes(), 24_000);
        assert_eq!(std::mem::size_of::<[u64; 3]>(), OFFSET_MAP_ENTRY_BYTES);
    }
}
