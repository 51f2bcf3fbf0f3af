//! The text forms of configs: the command lines written to a `config` file, the persisted
//! overrides (`key=value`, values escaped) and a Kafka server.properties file.

use super::def::Def;
use super::error::ConfigError;
use super::value::{parse_setting, Setting};

/// One meaningful line of a command written to a `config` file.
pub(super) enum Op<'a> {
    Set { key: &'a str, raw: &'a str },
    Remove { key: &'a str },
}

impl Op<'_> {
    pub(super) fn key(&self) -> &str {
        match self {
            Op::Set { key, .. } | Op::Remove { key } => key,
        }
    }

    /// The setting the line gives `def`: parsed and checked to set it, `None` to remove
    /// its override.
    pub(super) fn setting(&self, def: &Def) -> Result<Option<Setting>, ConfigError> {
        match self {
            Op::Set { raw, .. } => parse_setting(def, raw).map(Some),
            Op::Remove { .. } => Ok(None),
        }
    }
}

/// Lines of one write: `\n`-separated, a trailing `\r` dropped (the only thing removed
/// from a literal value).
pub(super) fn lines(text: &str) -> impl Iterator<Item = &str> {
    text.split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
}

fn is_ignored(line: &str) -> bool {
    let head = line.trim_start();
    head.is_empty() || head.starts_with('#')
}

/// `key=value` sets, `-key` removes; the value is everything after the first `=`.
pub(super) fn parse_command_line(line: &str) -> Result<Option<Op<'_>>, ConfigError> {
    if is_ignored(line) {
        return Ok(None);
    }
    if let Some((key, raw)) = line.split_once('=') {
        return Ok(Some(Op::Set {
            key: key.trim(),
            raw,
        }));
    }
    match line.trim_start().strip_prefix('-') {
        Some(key) => Ok(Some(Op::Remove { key: key.trim() })),
        None => Err(ConfigError::CommandSyntax {
            line: line.to_string(),
        }),
    }
}

/// The persisted form escapes what a line cannot hold literally (a `\r` the reader would
/// take for a line ending, a TAB an editor might expand), so every value reads back exactly.
pub(super) fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out
}

fn unescape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

pub(super) fn write_persisted<'a, K: std::fmt::Display + 'a>(
    settings: impl Iterator<Item = (&'a K, &'a Setting)>,
) -> String {
    settings
        .map(|(key, setting)| format!("{key}={}\n", escape(&setting.text)))
        .collect()
}

/// `(key, value)` pairs of a persisted file, values unescaped.
pub(super) fn read_persisted(text: &str) -> Result<Vec<(String, String)>, ConfigError> {
    let mut pairs = Vec::new();
    for line in lines(text) {
        if is_ignored(line) {
            continue;
        }
        let (key, raw) = line
            .split_once('=')
            .ok_or_else(|| ConfigError::CommandSyntax {
                line: line.to_string(),
            })?;
        pairs.push((key.trim().to_string(), unescape(raw)));
    }
    Ok(pairs)
}

/// Java-properties lines: `key=value`, `key: value` or `key value`; `#`/`!` comments.
/// Line continuations and escapes are not supported (no Kafka broker config needs them).
pub(crate) fn parse_properties(text: &str) -> Result<Vec<(&str, &str)>, ConfigError> {
    let mut pairs = Vec::new();
    for line in text.lines() {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let Some(end) = line.find(['=', ':', ' ', '\t', '\u{0C}']) else {
            return Err(ConfigError::PropertiesSyntax {
                line: line.to_string(),
            });
        };
        let key = &line[..end];
        let rest = line[end..].trim_start_matches([' ', '\t', '\u{0C}']);
        let value = match rest.strip_prefix(['=', ':']) {
            Some(after) => after.trim_start_matches([' ', '\t', '\u{0C}']),
            None => rest,
        };
        pairs.push((key, value));
    }
    Ok(pairs)
}
