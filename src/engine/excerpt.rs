//! How an error message shows a user's value: an excerpt, so that a megabyte-long line or
//! config value does not become a megabyte-long error. Its own module because both the
//! engine's errors and the config layer's use it, and the engine's errors depend on the
//! config layer's (`EngineError::Config`).

use std::fmt;

use super::limits::EXCERPT_BYTES;

/// A user's value as an error message shows it: whole when short, else its first
/// [`EXCERPT_BYTES`] bytes, `...` and its full length. Kafka's texts quote some values
/// (`'...'`) and not others; `quoted` says which.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Excerpt<'a> {
    value: &'a [u8],
    quoted: bool,
}

impl<'a> Excerpt<'a> {
    pub(crate) fn plain(value: &'a [u8]) -> Self {
        Excerpt {
            value,
            quoted: false,
        }
    }

    pub(crate) fn quoted(value: &'a [u8]) -> Self {
        Excerpt {
            value,
            quoted: true,
        }
    }
}

impl fmt::Display for Excerpt<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let quote = if self.quoted { "'" } else { "" };
        if self.value.len() <= EXCERPT_BYTES {
            let text = String::from_utf8_lossy(self.value);
            return write!(f, "{quote}{text}{quote}");
        }
        let mut head = &self.value[..EXCERPT_BYTES];
        // Not a character cut in two: that would print as a replacement character.
        if let Err(e) = std::str::from_utf8(head) {
            if e.error_len().is_none() {
                head = &head[..e.valid_up_to()];
            }
        }
        let text = String::from_utf8_lossy(head);
        write!(f, "{quote}{text}...{quote} ({} bytes)", self.value.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_values_are_cut_to_an_excerpt_with_their_length() {
        assert_eq!(Excerpt::quoted(b"short").to_string(), "'short'");
        assert_eq!(Excerpt::plain(b"short").to_string(), "short");
        let long = vec![b'x'; 100_000];
        let shown = Excerpt::quoted(&long).to_string();
        assert_eq!(
            shown,
            format!("'{}...' (100000 bytes)", "x".repeat(EXCERPT_BYTES))
        );
        let exact = vec![b'y'; EXCERPT_BYTES];
        assert_eq!(
            Excerpt::plain(&exact).to_string(),
            "y".repeat(EXCERPT_BYTES)
        );
        // A cut inside a character drops the character rather than mangling it.
        let mut accented = vec![b'a'; EXCERPT_BYTES - 1];
        accented.extend_from_slice("éééé".as_bytes());
        assert_eq!(
            Excerpt::plain(&accented).to_string(),
            format!(
                "{}... ({} bytes)",
                "a".repeat(EXCERPT_BYTES - 1),
                EXCERPT_BYTES + 7
            )
        );
    }
}
