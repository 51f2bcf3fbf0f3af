//! Kafka's schema types (`Type` in its `protocol.types`) as the coordinators' records use
//! them: big-endian integers, strings and bytes with int16/int32 lengths, and the
//! flexible versions' compact forms, varints and tagged fields.

/// Why a coordinator record (of `__consumer_offsets` or `__transaction_state`) could not
/// be read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct UnreadableRecord(pub(crate) String);

/// Big-endian writer of Kafka's types, with the flexible versions' varints and compact
/// strings.
#[derive(Default)]
pub(crate) struct Writer(pub(crate) Vec<u8>);

impl Writer {
    pub(crate) fn i16(&mut self, v: i16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn string(&mut self, s: &str) {
        // Kafka's strings are at most i16::MAX bytes; ids and metadata are bounded
        // far below that before they get here (offset.metadata.max.bytes).
        let len = s.len().min(i16::MAX as usize);
        self.i16(len as i16);
        self.0.extend_from_slice(&s.as_bytes()[..len]);
    }
    pub(crate) fn nullable_string(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.string(s),
            None => self.i16(-1),
        }
    }
    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.i32(b.len() as i32);
        self.0.extend_from_slice(b);
    }
    pub(crate) fn uvarint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    pub(crate) fn compact_string(&mut self, s: &str) {
        self.uvarint(s.len() as u64 + 1);
        self.0.extend_from_slice(s.as_bytes());
    }
}

/// Reader of Kafka's types, flexible (compact) ones included.
pub(crate) struct Reader<'a>(pub(crate) &'a [u8]);

impl Reader<'_> {
    pub(crate) fn take(&mut self, n: usize) -> Result<&[u8], UnreadableRecord> {
        if self.0.len() < n {
            return Err(UnreadableRecord(format!(
                "{n} bytes needed, {} left",
                self.0.len()
            )));
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }
    pub(crate) fn i16(&mut self) -> Result<i16, UnreadableRecord> {
        Ok(i16::from_be_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    pub(crate) fn i32(&mut self) -> Result<i32, UnreadableRecord> {
        Ok(i32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    pub(crate) fn i64(&mut self) -> Result<i64, UnreadableRecord> {
        Ok(i64::from_be_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    pub(crate) fn uvarint(&mut self) -> Result<u64, UnreadableRecord> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.take(1)?[0];
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(UnreadableRecord("a varint longer than 10 bytes".into()))
    }
    fn utf8(&mut self, len: usize) -> Result<String, UnreadableRecord> {
        String::from_utf8(self.take(len)?.to_vec())
            .map_err(|_| UnreadableRecord("a string that is not UTF-8".into()))
    }
    pub(crate) fn nullable_string(&mut self) -> Result<Option<String>, UnreadableRecord> {
        match self.i16()? {
            -1 => Ok(None),
            len if len < 0 => Err(UnreadableRecord(format!("string length {len}"))),
            len => self.utf8(len as usize).map(Some),
        }
    }
    pub(crate) fn string(&mut self) -> Result<String, UnreadableRecord> {
        self.nullable_string()?
            .ok_or_else(|| UnreadableRecord("a null non-nullable string".into()))
    }
    pub(crate) fn compact_nullable_string(&mut self) -> Result<Option<String>, UnreadableRecord> {
        match self.uvarint()? {
            0 => Ok(None),
            n => self.utf8((n - 1) as usize).map(Some),
        }
    }
    pub(crate) fn compact_string(&mut self) -> Result<String, UnreadableRecord> {
        self.compact_nullable_string()?
            .ok_or_else(|| UnreadableRecord("a null non-nullable string".into()))
    }
    pub(crate) fn bytes(&mut self) -> Result<Vec<u8>, UnreadableRecord> {
        match self.i32()? {
            -1 => Ok(Vec::new()),
            len if len < 0 => Err(UnreadableRecord(format!("bytes length {len}"))),
            len => Ok(self.take(len as usize)?.to_vec()),
        }
    }
    pub(crate) fn compact_bytes(&mut self) -> Result<Vec<u8>, UnreadableRecord> {
        match self.uvarint()? {
            0 => Ok(Vec::new()),
            n => Ok(self.take((n - 1) as usize)?.to_vec()),
        }
    }
    pub(crate) fn skip_tagged_fields(&mut self) -> Result<(), UnreadableRecord> {
        for _ in 0..self.uvarint()? {
            self.uvarint()?;
            let len = self.uvarint()? as usize;
            self.take(len)?;
        }
        Ok(())
    }
}
