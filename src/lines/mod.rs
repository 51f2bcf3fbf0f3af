//! The line protocol of a topic's `log` file, which every store shares so that the same
//! records show as the same bytes whether the local engine or a Kafka cluster holds them:
//! a line written to `log` becomes a record as Kafka's console producer reads a line
//! (`LineMessageReader`), a record reads back as a line as its console consumer prints
//! one (`DefaultMessageFormatter`), both under the topic's `parse.key`, `key.separator` and
//! `null.marker`; and a record's partition is the one Kafka's default partitioner picks.
//! Pure functions over bytes: no store, file or clock.

pub(crate) mod partitioner;

/// What a null key or value renders as when the topic has no `null.marker`: Kafka's
/// console consumer's `null.literal` default, so a keyless record (written before
/// `parse.key` was set) does not read like one with an empty key.
pub(crate) const NULL_LITERAL: &[u8] = b"null";

/// A topic's line protocol, borrowed from wherever its config lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LineFormat<'a> {
    /// `parse.key`: a line is `key<separator>value`, and a record reads back so.
    pub(crate) parse_key: bool,
    pub(crate) key_separator: &'a [u8],
    /// `None` when `null.marker` is empty: no field is ever read as null.
    pub(crate) null_marker: Option<&'a [u8]>,
}

/// A record's key and value (`None`: null).
pub(crate) type Fields<'l> = (Option<&'l [u8]>, Option<&'l [u8]>);

impl<'a> LineFormat<'a> {
    /// The record a line (without its newline) writes: with `parse.key`, split at the
    /// first separator, a field equal to the null marker null; else the whole line is the
    /// value of a keyless record. `None`: keys are parsed and the line has no separator
    /// (the console producer's "No key separator found").
    pub(crate) fn split<'l>(&self, line: &'l [u8]) -> Option<Fields<'l>> {
        if !self.parse_key {
            return Some((None, Some(line)));
        }
        let at = find(line, self.key_separator)?;
        let (key, value) = (&line[..at], &line[at + self.key_separator.len()..]);
        let field = |f: &'l [u8]| (Some(f) != self.null_marker).then_some(f);
        Some((field(key), field(value)))
    }

    /// What a null key or value renders as.
    pub(crate) fn null_rendering(&self) -> &'a [u8] {
        self.null_marker.unwrap_or(NULL_LITERAL)
    }

    /// The separator a rendered line has after its key: `None` when keys are not shown.
    pub(crate) fn shown_separator(&self) -> Option<&'a [u8]> {
        self.parse_key.then_some(self.key_separator)
    }

    /// The length of a record's line, newline included.
    pub(crate) fn line_len(&self, key: Option<&[u8]>, value: Option<&[u8]>) -> u64 {
        let field = |f: Option<&[u8]>| f.map_or(self.null_rendering().len(), <[u8]>::len);
        let key_part = self
            .shown_separator()
            .map_or(0, |sep| field(key) + sep.len());
        (key_part + field(value) + 1) as u64
    }

    /// Appends a record's line: `key<separator>value\n` with `parse.key`, else `value\n`;
    /// a null field as the null rendering.
    pub(crate) fn render(&self, key: Option<&[u8]>, value: Option<&[u8]>, out: &mut Vec<u8>) {
        let null = self.null_rendering();
        if let Some(separator) = self.shown_separator() {
            out.extend_from_slice(key.unwrap_or(null));
            out.extend_from_slice(separator);
        }
        out.extend_from_slice(value.unwrap_or(null));
        out.push(b'\n');
    }
}

/// Where `needle` first occurs in `haystack`; an empty needle occurs nowhere (an empty
/// `key.separator` splits no line).
pub(crate) fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    match needle {
        [] => None,
        [byte] => memchr::memchr(*byte, haystack),
        _ => memchr::memmem::find(haystack, needle),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYED: LineFormat<'static> = LineFormat {
        parse_key: true,
        key_separator: b":",
        null_marker: Some(b"NULL"),
    };

    #[test]
    fn a_line_splits_at_the_first_separator_and_the_marker_is_null() {
        assert_eq!(
            KEYED.split(b"k:v:w"),
            Some((Some(&b"k"[..]), Some(&b"v:w"[..])))
        );
        assert_eq!(KEYED.split(b"NULL:v"), Some((None, Some(&b"v"[..]))));
        assert_eq!(KEYED.split(b"k:NULL"), Some((Some(&b"k"[..]), None)));
        assert_eq!(KEYED.split(b"no separator"), None);
        let plain = LineFormat {
            parse_key: false,
            ..KEYED
        };
        assert_eq!(plain.split(b"k:v"), Some((None, Some(&b"k:v"[..]))));
    }

    #[test]
    fn a_rendered_line_is_as_long_as_line_len_says_and_splits_back() {
        for format in [
            KEYED,
            LineFormat {
                null_marker: None,
                ..KEYED
            },
            LineFormat {
                parse_key: false,
                ..KEYED
            },
        ] {
            for (key, value) in [
                (Some(&b"k"[..]), Some(&b"v"[..])),
                (None, Some(&b"v"[..])),
                (Some(&b"k"[..]), None),
                (None, None),
            ] {
                let mut line = Vec::new();
                format.render(key, value, &mut line);
                assert_eq!(line.len() as u64, format.line_len(key, value));
                if format.parse_key && format.null_marker.is_some() {
                    let text = &line[..line.len() - 1];
                    assert_eq!(format.split(text), Some((key, value)));
                }
            }
        }
    }
}
