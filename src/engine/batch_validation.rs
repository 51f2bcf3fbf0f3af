//! The rule for a valid batch in a `.log`, written once: recovery (`Segment`'s scan, the
//! cut of the recovery case table's rows 6 and 8) and `kpfs check`/`kpfs dump-log` walk
//! a segment with the same [`BatchWalker`], so `check` reports exactly the byte recovery
//! would cut at.
//!
//! A batch is valid when its header decodes (which bounds its offsets and stream range),
//! it fits in the bytes walked, its base offset is not below the lowest one allowed there
//! (the segment's base offset, then the previous batch's next offset), its last offset is
//! within the 32-bit relative range of the segment's indexes, its CRC matches and its
//! records decode.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use super::format::{
    decode_header, records_section, verify_batch, BatchHeader, DecodeError, RecordIter,
    BATCH_HEADER_BYTES,
};

/// Where a batch walk is.
#[derive(Clone, Debug)]
pub(crate) enum Step {
    Batch {
        pos: u64,
        header: BatchHeader,
    },
    /// Every byte up to the walk's end decoded.
    End,
    /// The bytes at `pos` do not decode; the walk stays here.
    Invalid {
        pos: u64,
        reason: String,
    },
}

/// Walks the batches of a `.log` front to back, stopping at the first invalid one.
#[derive(Debug)]
pub(crate) struct BatchWalker<'f> {
    file: &'f File,
    /// Bytes to walk: the file length, or the valid prefix an earlier walk found.
    end: u64,
    pos: u64,
    /// The segment's base offset: its indexes store offsets relative to it.
    segment_base: u64,
    /// Lowest base offset the next batch may have.
    floor: u64,
    after_batch: bool,
    /// Check CRCs and records; walks over a prefix already verified only read headers.
    verify: bool,
    buf: Vec<u8>,
    failed: Option<(u64, String)>,
}

impl<'f> BatchWalker<'f> {
    /// A walk of `file` up to `end` from its start, a segment whose base offset is
    /// `base_offset`.
    pub(crate) fn new(file: &'f File, end: u64, base_offset: u64, verify: bool) -> Self {
        Self::starting_at(file, (0, end), (base_offset, base_offset), verify)
    }

    /// A walk of the bytes `[start, end)` of `file`, a segment whose base offset is
    /// `segment_base`, whose first batch may not start below offset `floor`.
    pub(crate) fn starting_at(
        file: &'f File,
        (start, end): (u64, u64),
        (segment_base, floor): (u64, u64),
        verify: bool,
    ) -> Self {
        BatchWalker {
            file,
            end,
            pos: start,
            segment_base,
            floor,
            after_batch: false,
            verify,
            buf: Vec::new(),
            failed: None,
        }
    }

    /// Where the walk stops.
    pub(crate) fn end(&self) -> u64 {
        self.end
    }

    /// Where the next batch would start.
    pub(crate) fn position(&self) -> u64 {
        self.pos
    }

    pub(crate) fn next_step(&mut self) -> io::Result<Step> {
        if let Some((pos, reason)) = &self.failed {
            return Ok(Step::Invalid {
                pos: *pos,
                reason: reason.clone(),
            });
        }
        if self.pos >= self.end {
            return Ok(Step::End);
        }
        let pos = self.pos;
        match self.read_batch_at(pos)? {
            Ok(header) => {
                self.floor = header.next_offset();
                self.after_batch = true;
                self.pos += header.size as u64;
                Ok(Step::Batch { pos, header })
            }
            Err(reason) => {
                self.failed = Some((pos, reason.clone()));
                Ok(Step::Invalid { pos, reason })
            }
        }
    }

    /// The bytes of the batch last returned (only when verifying).
    pub(crate) fn batch_bytes(&self) -> &[u8] {
        &self.buf
    }

    fn read_batch_at(&mut self, pos: u64) -> io::Result<Result<BatchHeader, String>> {
        let left = self.end - pos;
        let mut head = [0u8; BATCH_HEADER_BYTES];
        let n = left.min(BATCH_HEADER_BYTES as u64) as usize;
        self.file.read_exact_at(&mut head[..n], pos)?;
        let header = match decode_header(&head[..n]) {
            Ok(h) => h,
            Err(e) => return Ok(Err(e.to_string())),
        };
        if header.size as u64 > left {
            let e = DecodeError::Truncated {
                needed: header.size,
                available: usize::try_from(left).unwrap_or(usize::MAX),
            };
            return Ok(Err(e.to_string()));
        }
        if header.base_offset < self.floor {
            let below = if self.after_batch {
                "the previous batch's next offset"
            } else {
                "the segment's base offset"
            };
            return Ok(Err(format!(
                "batch base offset {} is below {below} {}",
                header.base_offset, self.floor
            )));
        }
        // The CRC32C does not cover the base offset, so a damaged one can still increase;
        // past Kafka's relative range (LogSegment.ensureOffsetInRange: offset - baseOffset
        // within Int.MaxValue) no index of the segment could hold it.
        if header.last_offset() - self.segment_base > i32::MAX as u64 {
            return Ok(Err(format!(
                "batch last offset {} is out of range of the segment's base offset {}",
                header.last_offset(),
                self.segment_base
            )));
        }
        if self.verify {
            self.buf.clear();
            self.buf.resize(header.size, 0);
            self.file.read_exact_at(&mut self.buf, pos)?;
            if let Err(e) = verify_batch(&self.buf) {
                return Ok(Err(e.to_string()));
            }
            let mut scratch = Vec::new();
            let section = match records_section(&header, &self.buf, &mut scratch) {
                Ok(section) => section,
                Err(e) => return Ok(Err(e.to_string())),
            };
            if let Some(Err(e)) = RecordIter::new(&header, section).find(Result::is_err) {
                return Ok(Err(e.to_string()));
            }
        }
        Ok(Ok(header))
    }
}
