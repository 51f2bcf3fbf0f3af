//! One topic = one Kafka partition: its log, its configuration, the line protocol that
//! turns written bytes into records and records back into the `log` byte stream.

use crate::engine::Result;

/// A file in the partition directory, as `segments/` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackingFile {
    pub name: String,
    pub size: u64,
    pub mtime_ms: i64,
}

/// Where one open `log` handle is in the stream. Sequential reads continue from here;
/// a read at another position repositions by stream position.
#[derive(Clone, Debug, Default)]
pub struct LogCursor {
    _private: (),
}

pub struct Topic {
    _private: (),
}

impl Topic {
    pub fn name(&self) -> &str {
        todo!()
    }

    /// Appends records: every `\n` ends one record, and a non-empty remainder after the
    /// last `\n` is one more record. All or nothing: on error nothing is appended.
    /// Returns the number of records appended.
    pub fn append_lines(&self, _data: &[u8]) -> Result<u64> {
        todo!()
    }

    /// The size of `log`: the logical end of the rendered stream. Never decreases.
    pub fn stream_len(&self) -> u64 {
        todo!()
    }

    /// Wall-clock ms of the last append (mtime of `log`).
    pub fn modified_ms(&self) -> i64 {
        todo!()
    }

    /// Reads up to `len` bytes of the rendered stream at kernel offset `pos`. Never blocks;
    /// returns an empty vector at the end.
    pub fn read_log(&self, _cursor: &mut LogCursor, _pos: u64, _len: usize) -> Result<Vec<u8>> {
        todo!()
    }

    /// The `config` file: every effective topic config as `key=value`.
    pub fn config_text(&self) -> String {
        todo!()
    }

    /// A write to `config`: `key=value`, `-key`, blank and `#` lines; all or nothing.
    pub fn update_config(&self, _text: &[u8]) -> Result<()> {
        todo!()
    }

    /// The `status` file: `name: value` lines.
    pub fn status_text(&self) -> String {
        todo!()
    }

    /// Every file in the partition directory (segments, indexes, `.deleted`, ...).
    pub fn backing_files(&self) -> Result<Vec<BackingFile>> {
        todo!()
    }

    /// Opens a file of the partition directory for reading.
    pub fn open_backing_file(&self, _name: &str) -> Result<std::fs::File> {
        todo!()
    }

    /// Makes every record appended so far durable (fsync of the active segment).
    pub fn sync(&self) -> Result<()> {
        todo!()
    }
}
