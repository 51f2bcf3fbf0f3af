//! Values: parsing as `ConfigDef.parseType`, validation as Kafka's validators, with their
//! texts.

use super::def::{Check, Def, Kind};
use super::error::ConfigError;
use super::listeners::parse_listeners;
use crate::engine::limits::MIN_INDEX_BYTES;

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Value {
    Int(i32),
    Long(i64),
    Double(f64),
    Boolean(bool),
    List(Vec<String>),
    Text(String),
}

impl Value {
    pub(super) fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(n) => Some(i64::from(*n)),
            Value::Long(n) => Some(*n),
            _ => None,
        }
    }

    /// Text that parses back to the same value.
    pub(super) fn render(&self) -> String {
        match self {
            Value::Int(n) => n.to_string(),
            Value::Long(n) => n.to_string(),
            Value::Double(x) => java_double_string(*x),
            Value::Boolean(b) => b.to_string(),
            Value::List(items) => items.join(","),
            Value::Text(s) => s.clone(),
        }
    }
}

/// The Rust type a read of a config gets, one per kind (`i32` for INT, `i64` for INT and
/// LONG, ...).
pub(super) trait ConfigType: Sized {
    fn from_value(value: Value) -> Option<Self>;
}

impl ConfigType for i32 {
    fn from_value(value: Value) -> Option<i32> {
        match value {
            Value::Int(n) => Some(n),
            _ => None,
        }
    }
}

impl ConfigType for i64 {
    fn from_value(value: Value) -> Option<i64> {
        value.as_i64()
    }
}

impl ConfigType for f64 {
    fn from_value(value: Value) -> Option<f64> {
        match value {
            Value::Double(x) => Some(x),
            _ => None,
        }
    }
}

impl ConfigType for bool {
    fn from_value(value: Value) -> Option<bool> {
        match value {
            Value::Boolean(b) => Some(b),
            _ => None,
        }
    }
}

impl ConfigType for Vec<String> {
    fn from_value(value: Value) -> Option<Vec<String>> {
        match value {
            Value::List(items) => Some(items),
            _ => None,
        }
    }
}

impl ConfigType for String {
    fn from_value(value: Value) -> Option<String> {
        match value {
            Value::Text(s) => Some(s),
            _ => None,
        }
    }
}

/// The value of `key`, a config with a value (a built-in default, or an inherited one).
/// Every value has its key's kind ([`parse_setting`] makes it from the key's definition),
/// so the one way to get here without a `T` is a read of the wrong type: a bug, named.
pub(super) fn read<T: ConfigType>(key: impl std::fmt::Display, value: Option<Value>) -> T {
    match value.clone().and_then(T::from_value) {
        Some(v) => v,
        None => panic!(
            "{key} read as {}, got {value:?}",
            std::any::type_name::<T>()
        ),
    }
}

/// A configured value: the text as stored and shown, and what it parsed to.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Setting {
    pub(super) text: String,
    pub(super) value: Value,
}

/// Java's `String.trim()`: strips every char up to and including U+0020.
fn java_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c <= ' ')
}

/// The characters of Java's regex `\s`, which `ConfigDef` uses to split lists.
fn is_java_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r')
}

/// `Double.parseDouble` on trimmed text: decimal and exponent forms, `NaN`, `Infinity`, an
/// optional `f`/`d` suffix. Rust's own parser also takes `inf` and `nan` in any case,
/// which Java refuses, so those are filtered out first. Hex floats are not supported.
pub(super) fn parse_java_double(text: &str) -> Option<f64> {
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    if unsigned == "NaN" || unsigned == "Infinity" {
        return text.parse().ok();
    }
    let number = text.strip_suffix(['f', 'F', 'd', 'D']).unwrap_or(text);
    let plain = number
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'));
    if plain {
        number.parse().ok()
    } else {
        None
    }
}

/// Java's `Double.toString`, so error texts and rendered defaults read like Kafka's
/// (`2.0`, `1.7976931348623157E308`).
pub(super) fn java_double_string(x: f64) -> String {
    if x.is_nan() {
        return "NaN".to_string();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    let magnitude = x.abs();
    if magnitude == 0.0 || (1e-3..1e7).contains(&magnitude) {
        let s = format!("{x}");
        if s.contains('.') {
            s
        } else {
            format!("{s}.0")
        }
    } else {
        let s = format!("{x:e}");
        let (mantissa, exponent) = s.split_once('e').unwrap_or((&s, "0"));
        if mantissa.contains('.') {
            format!("{mantissa}E{exponent}")
        } else {
            format!("{mantissa}.0E{exponent}")
        }
    }
}

fn invalid(name: &str, value: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::InvalidValue {
        name: name.to_string(),
        value: value.into(),
        message: message.into(),
    }
}

/// Parses and validates `raw` as `def`, returning what to store. Numbers, booleans and
/// lists are trimmed before parsing (Kafka does) but errors print the untrimmed text;
/// `Text` values are taken literally so a space or TAB separator survives.
pub(super) fn parse_setting(def: &Def, raw: &str) -> Result<Setting, ConfigError> {
    let trimmed = java_trim(raw);
    let not_a_number =
        |type_name: &str| invalid(def.name, raw, format!("Not a number of type {type_name}"));
    let value = match def.kind {
        Kind::Int => Value::Int(trimmed.parse().map_err(|_| not_a_number("INT"))?),
        Kind::Short => Value::Int(i32::from(
            trimmed.parse::<i16>().map_err(|_| not_a_number("SHORT"))?,
        )),
        Kind::Long => Value::Long(trimmed.parse().map_err(|_| not_a_number("LONG"))?),
        Kind::Double => {
            Value::Double(parse_java_double(trimmed).ok_or_else(|| not_a_number("DOUBLE"))?)
        }
        Kind::Boolean => {
            if trimmed.eq_ignore_ascii_case("true") {
                Value::Boolean(true)
            } else if trimmed.eq_ignore_ascii_case("false") {
                Value::Boolean(false)
            } else {
                return Err(invalid(
                    def.name,
                    raw,
                    "Expected value to be either true or false",
                ));
            }
        }
        Kind::List if trimmed.is_empty() => Value::List(Vec::new()),
        Kind::List => Value::List(
            trimmed
                .split(',')
                .map(|item| item.trim_matches(is_java_space).to_string())
                .collect(),
        ),
        Kind::String | Kind::Class | Kind::Password => Value::Text(trimmed.to_string()),
        Kind::Text => Value::Text(raw.to_string()),
    };
    check(def, &value, raw)?;
    let text = match def.kind {
        Kind::Text => raw.to_string(),
        _ => trimmed.to_string(),
    };
    Ok(Setting { text, value })
}

pub(super) fn check(def: &Def, value: &Value, raw: &str) -> Result<(), ConfigError> {
    let (min, max) = match def.check {
        Check::None => return Ok(()),
        Check::AtLeast(min) => (min, None),
        Check::IndexSize => {
            check(
                &Def {
                    check: Check::AtLeast(4),
                    ..*def
                },
                value,
                raw,
            )?;
            return match value.as_i64() {
                Some(size) if size < MIN_INDEX_BYTES => {
                    Err(ConfigError::InvalidMaxIndexSize { size })
                }
                _ => Ok(()),
            };
        }
        Check::Between(min, max) => (min, Some(max)),
        Check::BetweenOrEqual { min, max, or } => {
            return match value.as_i64() {
                Some(n) if n != or && !(min..=max).contains(&n) => Err(invalid(
                    def.name,
                    value.render(),
                    format!("Value must be between {min} and {max} or equal to {or}"),
                )),
                _ => Ok(()),
            };
        }
        Check::OneOf(allowed) => {
            return match value {
                Value::Text(s) if !allowed.contains(&s.as_str()) => Err(invalid(
                    def.name,
                    s.as_str(),
                    format!("String must be one of: {}", allowed.join(", ")),
                )),
                _ => Ok(()),
            };
        }
        Check::NonEmpty => {
            return match value {
                Value::Text(s) if s.is_empty() => {
                    Err(invalid(def.name, raw, "String must be non-empty"))
                }
                _ => Ok(()),
            };
        }
        Check::Listeners => {
            return match value {
                Value::Text(s) => parse_listeners(s).map(|_| ()),
                _ => Ok(()),
            };
        }
        Check::OneOfIgnoreCase(allowed) => {
            return match value {
                Value::Text(s) if !allowed.iter().any(|a| a.eq_ignore_ascii_case(s)) => {
                    Err(invalid(
                        def.name,
                        s.as_str(),
                        format!(
                            "String must be one of (case insensitive): {}",
                            allowed.join(", ")
                        ),
                    ))
                }
                _ => Ok(()),
            };
        }
        Check::List { allowed, empty } => {
            let Value::List(items) = value else {
                return Ok(());
            };
            return check_list(def.name, items, allowed, empty);
        }
        Check::ThrottledReplicas => {
            let Value::List(items) = value else {
                return Ok(());
            };
            return check_throttled_replicas(def.name, items);
        }
    };
    // Java compares as doubles; NaN passes both bounds there, and here too.
    let (below, above) = match value {
        Value::Double(x) => (*x < min as f64, max.is_some_and(|m| *x > m as f64)),
        other => match other.as_i64() {
            Some(n) => (n < min, max.is_some_and(|m| n > m)),
            None => (false, false),
        },
    };
    if below {
        Err(invalid(
            def.name,
            value.render(),
            format!("Value must be at least {min}"),
        ))
    } else if let (true, Some(max)) = (above, max) {
        Err(invalid(
            def.name,
            value.render(),
            format!("Value must be no more than {max}"),
        ))
    } else {
        Ok(())
    }
}

/// `ConfigDef.ValidList.ensureValid`, its checks in its order.
fn check_list(
    name: &str,
    items: &[String],
    allowed: &[&str],
    empty: bool,
) -> Result<(), ConfigError> {
    if items.is_empty() && !empty {
        return Err(ConfigError::EmptyList {
            name: name.to_string(),
            allowed: allowed.iter().map(|s| s.to_string()).collect(),
        });
    }
    for (i, item) in items.iter().enumerate() {
        if items[..i].contains(item) {
            return Err(ConfigError::DuplicateListValues {
                name: name.to_string(),
            });
        }
    }
    for item in items {
        if item.is_empty() {
            return Err(ConfigError::EmptyListValue {
                name: name.to_string(),
            });
        }
        if !allowed.is_empty() && !allowed.contains(&item.as_str()) {
            return Err(invalid(
                name,
                item.as_str(),
                format!("String must be one of: {}", allowed.join(", ")),
            ));
        }
    }
    Ok(())
}

/// `ThrottledReplicaListValidator`: every item `PARTITION:BROKER` (digits) or empty, or
/// the items together exactly `*`; refused with the list as Java prints it.
fn check_throttled_replicas(name: &str, items: &[String]) -> Result<(), ConfigError> {
    let replica = |item: &str| {
        item.is_empty()
            || item.split_once(':').is_some_and(|(partition, broker)| {
                [partition, broker]
                    .iter()
                    .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            })
    };
    if items.iter().all(|item| replica(item)) || items.concat() == "*" {
        return Ok(());
    }
    Err(invalid(
        name,
        format!("[{}]", items.join(", ")),
        format!(
            "{name} must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
        ),
    ))
}

/// A built-in default; the tests check every one parses and passes its own validator.
pub(super) fn builtin(def: &Def) -> Option<Value> {
    let text = def.default?;
    match parse_setting(def, text) {
        Ok(setting) => Some(setting.value),
        Err(e) => panic!("built-in default of {} is invalid: {e}", def.name),
    }
}
