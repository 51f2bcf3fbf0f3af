//! The renderings a topic's `log` file was written under before its current one.
//!
//! A record's line in `log` is fixed when the record is appended: its position and its
//! length follow from the rendering then in force (`parse.key`, `key.separator`,
//! `null.marker`), and the stream index keeps that rendering's shape (whether keys show,
//! the lengths of the separator and of the null rendering) for every record. So a reader
//! renders each record under its own rendering, and a config change applies to the
//! records appended after it. The shape gives lengths, not bytes: the bytes come from the
//! topic's `renderings` file, a timeline of the renderings config changes replaced, each
//! with the offset up to which it was in force (the log end offset at the change, taken
//! while no append runs and made durable first).

use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use crate::engine::config::TopicConfig;
use crate::engine::error::Result;
use crate::engine::files::write_or_defer;
use crate::engine::format::{extend_by_blocks, kpfs_topic_dir, RecordRef, RENDERINGS_FILE};
use crate::engine::limits::PAST_RENDERINGS_KEPT;
use crate::engine::log_loader::remove_stale_temporary;
use crate::engine::segment::Segment;

/// The bytes a record's line is made of besides its key and value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LineRendering {
    pub(crate) separator: Vec<u8>,
    /// What a null key or value renders as.
    pub(crate) null: Vec<u8>,
}

impl LineRendering {
    pub(crate) fn of(config: &TopicConfig) -> LineRendering {
        LineRendering {
            separator: config.key_separator.clone(),
            null: config.null_rendering().to_vec(),
        }
    }
}

/// A rendering that was in force for the records below `until` (and at or above the
/// `until` of the one before it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PastRendering {
    pub(crate) until: u64,
    pub(crate) rendering: LineRendering,
}

/// The renderings a topic used before its current config, oldest first, and the file
/// that keeps them.
#[derive(Clone, Debug)]
pub(crate) struct PastRenderings {
    path: PathBuf,
    list: Vec<PastRendering>,
}

impl PastRenderings {
    /// Those of the topic stored in `dir` (its partition directory). A file that does
    /// not parse is ignored with a warning: it only gives the bytes of old lines, and
    /// `kpfs check` reports it.
    pub(crate) fn load(dir: &Path) -> PastRenderings {
        let path = kpfs_topic_dir(dir).join(RENDERINGS_FILE);
        remove_stale_temporary(&path);
        let list = match std::fs::read_to_string(&path) {
            Ok(text) => parse(&text).unwrap_or_else(|reason| {
                tracing::warn!(file = %path.display(), %reason, "ignoring the renderings file: lines appended under an earlier rendering keep their lengths, not always their separator and null marker");
                Vec::new()
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "cannot read the renderings file");
                Vec::new()
            }
        };
        PastRenderings { path, list }
    }

    pub(crate) fn list(&self) -> &[PastRendering] {
        &self.list
    }

    /// Records that `replaced` was in force up to `log_end` (exclusive); renderings of
    /// records all below `log_start` are forgotten. Nothing changes when `replaced`
    /// rendered no record (two changes without an append between). True when the
    /// timeline changed: the caller saves it ([`PastRenderings::save`]) before the change
    /// applies, so no line is ever without its bytes.
    pub(crate) fn remember(
        &mut self,
        replaced: LineRendering,
        log_start: u64,
        log_end: u64,
    ) -> bool {
        let mut list = self.list.clone();
        list.retain(|r| r.until > log_start);
        let from = list.last().map_or(log_start, |r| r.until);
        if log_end > from {
            list.push(PastRendering {
                until: log_end,
                rendering: replaced,
            });
        }
        let excess = list.len().saturating_sub(PAST_RENDERINGS_KEPT);
        list.drain(..excess);
        let changed = list != self.list;
        self.list = list;
        changed
    }

    /// Ends the timeline at `log_end`, when an open found the log shorter than it (a
    /// recovery cut the tail): the offsets past it belong to later appends, under the
    /// current config. True when the timeline changed.
    pub(crate) fn end_at(&mut self, log_end: u64) -> bool {
        let keep = self.list.partition_point(|r| r.until <= log_end);
        if keep == self.list.len() {
            return false;
        }
        let from = keep.checked_sub(1).map_or(0, |i| self.list[i].until);
        self.list.truncate(keep + 1);
        if log_end > from {
            self.list[keep].until = log_end;
        } else {
            self.list.truncate(keep);
        }
        true
    }

    /// Writes the timeline; out of space, keeps it in memory and says why in `unsaved`
    /// until a later call succeeds (see [`write_or_defer`]).
    pub(crate) fn save(&self, unsaved: &Mutex<Option<String>>) -> Result<()> {
        write_or_defer(&self.path, to_text(&self.list).as_bytes(), unsaved)
    }
}

/// Renders records under the renderings they were appended under: the bytes of the
/// timeline's rendering for their offset, checked against the lengths their stream index
/// shape gives; where those disagree (a renderings file lost or edited, data converted
/// from kpfs's own format), the current config's bytes or the latest past ones of the
/// right lengths, else `?`s: the bytes may then differ, the lengths never do.
#[derive(Clone, Copy)]
pub(crate) struct Renderer<'a> {
    pub(crate) current: &'a TopicConfig,
    pub(crate) past: &'a [PastRendering],
}

impl<'a> Renderer<'a> {
    /// The render of the record at `offset` of `seg`, and the offset from which later
    /// records may need another.
    pub(crate) fn render_at(&self, seg: &Segment, offset: u64) -> (Render<'a>, u64) {
        let (shape, shape_until) = seg.shape_run(offset);
        let at = self.past.partition_point(|r| r.until <= offset);
        let (separator, null, timeline_until) = match self.past.get(at) {
            Some(r) => (&r.rendering.separator[..], &r.rendering.null[..], r.until),
            None => (
                &self.current.key_separator[..],
                self.current.null_rendering(),
                u64::MAX,
            ),
        };
        let render = Render {
            separator: shape.separator_len.map(|len| {
                let current = &self.current.key_separator[..];
                self.bytes_of_len(len as usize, [separator, current], |r| &r.separator)
            }),
            null: self.bytes_of_len(
                shape.null_len as usize,
                [null, self.current.null_rendering()],
                |r| &r.null,
            ),
        };
        (render, shape_until.min(timeline_until))
    }

    /// `timeline` when it is `len` bytes long, else `current` or the latest past bytes
    /// that are; `?`s when none is.
    fn bytes_of_len(
        &self,
        len: usize,
        [timeline, current]: [&'a [u8]; 2],
        part: impl Fn(&'a LineRendering) -> &'a [u8],
    ) -> Cow<'a, [u8]> {
        let past = self.past.iter().rev().map(|r| part(&r.rendering));
        match [timeline, current]
            .into_iter()
            .chain(past)
            .find(|b| b.len() == len)
        {
            Some(bytes) => Cow::Borrowed(bytes),
            None => Cow::Owned(vec![b'?'; len]),
        }
    }
}

/// How records of one shape render into the `log` stream.
pub(crate) struct Render<'a> {
    /// `Some` when keys are rendered (`parse.key=true`): the separator after the key.
    pub(crate) separator: Option<Cow<'a, [u8]>>,
    /// The rendering of a null key or value.
    pub(crate) null: Cow<'a, [u8]>,
}

impl Render<'_> {
    #[inline(always)]
    pub(crate) fn size(&self, rec: &RecordRef<'_>) -> u64 {
        let field = |f: Option<&[u8]>| f.map_or_else(|| self.null.len(), <[u8]>::len);
        let key = self
            .separator
            .as_ref()
            .map_or(0, |sep| field(rec.key) + sep.len());
        (key + field(rec.value) + 1) as u64
    }

    /// Appends the rendering of `rec`, a record of the records section `section`.
    #[inline(always)]
    pub(crate) fn write(&self, rec: &RecordRef<'_>, section: &[u8], out: &mut Vec<u8>) {
        if let Some(separator) = &self.separator {
            self.write_field(rec.key, section, out);
            out.extend_from_slice(separator);
        }
        self.write_field(rec.value, section, out);
        out.push(b'\n');
    }

    #[inline(always)]
    fn write_field(&self, field: Option<&[u8]>, section: &[u8], out: &mut Vec<u8>) {
        match field {
            // The rest of the section follows the field, so it can be copied in blocks.
            Some(bytes) => extend_by_blocks(out, running_on(section, bytes), bytes.len()),
            None => out.extend_from_slice(&self.null),
        }
    }
}

/// `part`, a slice of `whole`, and every byte of `whole` after it.
#[inline(always)]
fn running_on<'a>(whole: &'a [u8], part: &[u8]) -> &'a [u8] {
    let start = part.as_ptr().addr() - whole.as_ptr().addr();
    debug_assert!(start + part.len() <= whole.len(), "part lies in whole");
    &whole[start..]
}

fn to_text(list: &[PastRendering]) -> String {
    let mut text = String::from(
        "# The renderings of this topic's log before its current config, oldest first: each \
         for the records below `until` (hex bytes; written by kpfs)\n",
    );
    for r in list {
        let LineRendering { separator, null } = &r.rendering;
        let _ = writeln!(
            text,
            "until={} separator={} null={}",
            r.until,
            hex(separator),
            hex(null)
        );
    }
    text
}

fn parse(text: &str) -> std::result::Result<Vec<PastRendering>, String> {
    let mut list: Vec<PastRendering> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = line.split(' ');
        let mut field = |name: &str| {
            fields
                .next()
                .and_then(|f| f.strip_prefix(name))
                .and_then(|f| f.strip_prefix('='))
        };
        let until = field("until").and_then(|u| u.parse::<u64>().ok());
        let separator = field("separator").and_then(unhex);
        let null = field("null").and_then(unhex);
        let (Some(until), Some(separator), Some(null), None) =
            (until, separator, null, fields.next())
        else {
            return Err(format!(
                "line {}: {line:?} is not `until=<offset> separator=<hex> null=<hex>`",
                i + 1
            ));
        };
        if list.last().is_some_and(|r| r.until >= until) {
            return Err(format!("line {}: until={until} does not increase", i + 1));
        }
        list.push(PastRendering {
            until,
            rendering: LineRendering { separator, null },
        });
    }
    Ok(list)
}

/// Checks the text of a `renderings` file for `kpfs check`.
pub(crate) fn validate_renderings(text: &str) -> std::result::Result<(), String> {
    parse(text).map(drop)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendering(separator: &[u8], null: &[u8]) -> LineRendering {
        LineRendering {
            separator: separator.to_vec(),
            null: null.to_vec(),
        }
    }

    fn past(until: u64, separator: &[u8], null: &[u8]) -> PastRendering {
        PastRendering {
            until,
            rendering: rendering(separator, null),
        }
    }

    #[test]
    fn the_file_round_trips_and_refuses_what_kpfs_did_not_write() {
        let list = vec![
            past(3, b"\t", b"null"),
            past(7, b" = ", b""),
            past(9, b":", b"NULL"),
        ];
        assert_eq!(parse(&to_text(&list)).unwrap(), list);
        for bad in [
            "until=1 separator=3 null=00",
            "until=1 separator=3a",
            "until=1 separator=3a null=00 extra",
            "separator=3a null=00",
            "until=x separator=3a null=00",
            "until=1 null=00 separator=3a",
            "until=5 separator=3a null=00\nuntil=5 separator=3d null=00",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_rendering_is_remembered_up_to_the_log_end_once_it_rendered_records() {
        let dir = tempfile::tempdir().unwrap();
        let topic_dir = dir.path().join("t-0");
        std::fs::create_dir_all(kpfs_topic_dir(&topic_dir)).unwrap();
        let unsaved = Mutex::new(None);
        let mut timeline = PastRenderings::load(&topic_dir);
        // Changes before any record, and changes without an append between, keep nothing.
        assert!(!timeline.remember(rendering(b"\t", b"null"), 0, 0));
        assert_eq!(timeline.list(), []);
        assert!(timeline.remember(rendering(b":", b"null"), 0, 5));
        assert!(!timeline.remember(rendering(b"=", b"null"), 0, 5));
        assert!(timeline.remember(rendering(b":", b"N"), 0, 8));
        assert_eq!(
            timeline.list(),
            [past(5, b":", b"null"), past(8, b":", b"N")]
        );
        timeline.save(&unsaved).unwrap();
        assert_eq!(PastRenderings::load(&topic_dir).list(), timeline.list());
        // Retention took every record of the first.
        assert!(timeline.remember(rendering(b"-", b"N"), 6, 9));
        assert_eq!(timeline.list(), [past(8, b":", b"N"), past(9, b"-", b"N")]);
        for end in 10..10 + PAST_RENDERINGS_KEPT as u64 {
            timeline.remember(rendering(b"+", b"N"), 6, end);
        }
        assert_eq!(timeline.list().len(), PAST_RENDERINGS_KEPT);
        assert_eq!(
            timeline.list().last().unwrap().until,
            9 + PAST_RENDERINGS_KEPT as u64
        );
    }

    #[test]
    fn a_recovered_log_end_ends_the_timeline() {
        let dir = tempfile::tempdir().unwrap();
        let mut timeline = PastRenderings::load(&dir.path().join("t-0"));
        timeline.list = vec![
            past(3, b":", b"N"),
            past(7, b"=", b"N"),
            past(9, b"-", b"N"),
        ];
        assert!(!timeline.end_at(9));
        assert!(!timeline.end_at(12));
        assert!(timeline.end_at(8));
        assert_eq!(
            timeline.list(),
            [
                past(3, b":", b"N"),
                past(7, b"=", b"N"),
                past(8, b"-", b"N")
            ]
        );
        assert!(timeline.end_at(7));
        assert_eq!(timeline.list(), [past(3, b":", b"N"), past(7, b"=", b"N")]);
        assert!(timeline.end_at(2));
        assert_eq!(timeline.list(), [past(2, b":", b"N")]);
        assert!(timeline.end_at(0));
        assert_eq!(timeline.list(), []);
    }
}
