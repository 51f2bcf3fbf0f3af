use super::def::{
    BrokerKey, BrokerLevel, BrokerName, TopicKey, Update, BROKER_DEFS, MS_PER_HOUR, MS_PER_MINUTE,
    TOPIC_DEFS,
};
use super::kafka_broker_configs::KAFKA_BROKER_DEFS;
use super::listeners::Endpoint;
use super::topic::CleanupPolicy;
use super::value::{java_double_string, parse_java_double, parse_setting};
use super::*;
use crate::engine::codec::{Compression, CompressionCodec};

fn broker() -> BrokerConfig {
    BrokerConfig::defaults()
}

fn apply(text: &str) -> Result<TopicOverrides, ConfigError> {
    TopicOverrides::default().apply_command(text, &broker())
}

fn error(text: &str) -> String {
    apply(text).unwrap_err().to_string()
}

fn broker_error(text: &str) -> String {
    broker().apply_dynamic(text).unwrap_err().to_string()
}

fn load(pairs: &[(&str, &str)]) -> Result<BrokerConfig, ConfigError> {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    BrokerConfig::load(None, &pairs)
}

#[test]
fn only_the_cleaners_reconfigurable_configs_restart_it() {
    let base = broker();
    let changed = |text: &str| {
        base.apply_dynamic(text)
            .unwrap()
            .cleaner_reconfigured_since(&base)
    };
    for text in [
        "log.cleaner.threads=2",
        "log.cleaner.dedupe.buffer.size=1048577",
        "log.cleaner.io.buffer.load.factor=0.5",
        "log.cleaner.io.buffer.size=1000",
        "message.max.bytes=1000",
        "log.cleaner.io.max.bytes.per.second=1000",
        "log.cleaner.backoff.ms=1",
    ] {
        assert!(changed(text), "{text}");
    }
    assert!(!changed("log.cleaner.backoff.ms=15000"), "the same value");
    assert!(!changed("log.retention.ms=1000"));
    assert!(!changed("log.cleaner.min.cleanable.ratio=0.1"));
}

#[test]
fn every_builtin_default_parses_and_passes_its_validator() {
    for topic in TOPIC_DEFS {
        if let Some(text) = topic.def.default {
            parse_setting(&topic.def, text).unwrap();
        }
    }
    for broker in BROKER_DEFS {
        if let Some(text) = broker.def.default {
            parse_setting(&broker.def, text).unwrap();
        }
    }
}

#[test]
fn synonyms_are_broker_configs_and_only_the_first_is_dynamic() {
    for topic in TOPIC_DEFS {
        for (i, synonym) in topic.synonyms.iter().enumerate() {
            // Resolving panics on a name the generated table lacks.
            let name = synonym.broker();
            let broker = name.row();
            assert_eq!(broker.update == Update::ClusterWide, i == 0, "{name}");
            if synonym.ms_per_unit == 1 {
                assert_eq!(broker.def.kind, topic.def.kind, "{name}");
            }
        }
    }
}

#[test]
fn defaults_match_kafka_4() {
    let t = broker().topic_defaults();
    assert_eq!(
        t.cleanup_policy,
        CleanupPolicy {
            compact: false,
            delete: true
        }
    );
    assert_eq!(t.retention_ms, 604_800_000);
    assert_eq!(t.retention_bytes, -1);
    assert_eq!(t.segment_bytes, 1_073_741_824);
    assert_eq!(t.internal_segment_bytes, None);
    assert_eq!(t.segment_size(), 1_073_741_824);
    assert_eq!(t.segment_ms, 604_800_000);
    assert_eq!(t.segment_jitter_ms, 0);
    assert_eq!(t.segment_index_bytes, 10_485_760);
    assert_eq!(t.index_interval_bytes, 4096);
    assert_eq!(t.min_cleanable_dirty_ratio, 0.5);
    assert_eq!(t.delete_retention_ms, 86_400_000);
    assert_eq!(t.min_compaction_lag_ms, 0);
    assert_eq!(t.max_compaction_lag_ms, i64::MAX);
    assert_eq!(t.file_delete_delay_ms, 60_000);
    assert_eq!(t.max_message_bytes, 1_048_588);
    assert_eq!(t.flush_messages, i64::MAX);
    assert_eq!(t.flush_ms, i64::MAX);
    assert!(!t.parse_key);
    assert_eq!(t.key_separator, b"\t");
    assert_eq!(t.null_marker, None);
}

#[test]
fn broker_getter_defaults() {
    let b = broker();
    assert_eq!(b.retention_check_interval_ms(), 300_000);
    assert!(b.cleaner_enable());
    assert_eq!(b.cleaner_threads(), 1);
    assert_eq!(b.cleaner_backoff_ms(), 15_000);
    assert_eq!(b.cleaner_dedupe_buffer_size(), 134_217_728);
    assert_eq!(b.cleaner_io_buffer_size(), 524_288);
    assert_eq!(b.cleaner_io_buffer_load_factor(), 0.9);
    assert_eq!(b.cleaner_io_max_bytes_per_second(), f64::MAX);
    assert_eq!(b.flush_scheduler_interval_ms(), i64::MAX);
    assert_eq!(b.flush_offset_checkpoint_interval_ms(), 60_000);
}

#[test]
fn range_validators_use_kafka_texts() {
    let cases = [
        (
            "segment.bytes=400",
            "Invalid value 400 for configuration segment.bytes: Value must be at least 1048576",
        ),
        (
            "retention.ms=-2",
            "Invalid value -2 for configuration retention.ms: Value must be at least -1",
        ),
        (
            "segment.ms=0",
            "Invalid value 0 for configuration segment.ms: Value must be at least 1",
        ),
        (
            "segment.jitter.ms=-1",
            "Invalid value -1 for configuration segment.jitter.ms: Value must be at least 0",
        ),
        (
            "segment.index.bytes=3",
            "Invalid value 3 for configuration segment.index.bytes: Value must be at least 4",
        ),
        (
            "index.interval.bytes=-1",
            "Invalid value -1 for configuration index.interval.bytes: Value must be at least 0",
        ),
        (
            "min.cleanable.dirty.ratio=1.2",
            "Invalid value 1.2 for configuration min.cleanable.dirty.ratio: Value must be no more than 1",
        ),
        (
            "min.cleanable.dirty.ratio=-0.1",
            "Invalid value -0.1 for configuration min.cleanable.dirty.ratio: Value must be at least 0",
        ),
        (
            "min.cleanable.dirty.ratio=2",
            "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1",
        ),
        (
            "delete.retention.ms=-1",
            "Invalid value -1 for configuration delete.retention.ms: Value must be at least 0",
        ),
        (
            "min.compaction.lag.ms=-1",
            "Invalid value -1 for configuration min.compaction.lag.ms: Value must be at least 0",
        ),
        (
            "max.compaction.lag.ms=0",
            "Invalid value 0 for configuration max.compaction.lag.ms: Value must be at least 1",
        ),
        (
            "file.delete.delay.ms=-1",
            "Invalid value -1 for configuration file.delete.delay.ms: Value must be at least 0",
        ),
        (
            "max.message.bytes=-1",
            "Invalid value -1 for configuration max.message.bytes: Value must be at least 0",
        ),
        (
            "flush.messages=0",
            "Invalid value 0 for configuration flush.messages: Value must be at least 1",
        ),
        (
            "flush.ms=-1",
            "Invalid value -1 for configuration flush.ms: Value must be at least 0",
        ),
    ];
    for (command, expected) in cases {
        assert_eq!(error(command), expected, "{command}");
    }
}

#[test]
fn bounds_themselves_are_accepted() {
    let o = apply(
        "segment.bytes=1048576\nretention.ms=-1\nsegment.ms=1\nsegment.index.bytes=12\n\
         index.interval.bytes=0\nmin.cleanable.dirty.ratio=0\nmax.compaction.lag.ms=1\n\
         flush.messages=1\nflush.ms=0\nretention.bytes=-5\ninternal.segment.bytes=100",
    )
    .unwrap();
    let t = broker().resolve_topic(&o);
    assert_eq!(t.segment_bytes, 1_048_576);
    assert_eq!(t.retention_ms, -1);
    assert_eq!(t.retention_bytes, -5);
    assert_eq!(t.segment_size(), 100);
    assert_eq!(t.min_cleanable_dirty_ratio, 0.0);
    assert!(apply("min.cleanable.dirty.ratio=1").is_ok());
    assert!(apply("retention.ms=0").is_ok(), "topic-level 0 is allowed");
}

#[test]
fn index_sizes_below_one_entry_fail_as_kafka_fails_creating_the_index() {
    // Kafka's validator is atLeast(4); `AbstractIndex` then refuses a size below its
    // entry size (8 for .index, 12 for .timeindex) when it creates the file.
    assert_eq!(
        error("segment.index.bytes=3"),
        "Invalid value 3 for configuration segment.index.bytes: Value must be at least 4"
    );
    for size in 4..12 {
        assert_eq!(
            error(&format!("segment.index.bytes={size}")),
            format!("Invalid max index size: {size}")
        );
        assert_eq!(
            broker_error(&format!("log.index.size.max.bytes={size}")),
            format!("Invalid max index size: {size}")
        );
        assert_eq!(
            load(&[("log.index.size.max.bytes", &size.to_string())])
                .unwrap_err()
                .to_string(),
            format!("Invalid max index size: {size}")
        );
    }
    let smallest = apply("segment.index.bytes=12").unwrap();
    assert_eq!(broker().resolve_topic(&smallest).segment_index_bytes, 12);
}

#[test]
fn preallocate_is_a_topic_config_with_a_dynamic_broker_synonym() {
    assert!(!broker().topic_defaults().preallocate);
    let o = apply("preallocate=true").unwrap();
    assert!(broker().resolve_topic(&o).preallocate);
    let b = broker().apply_dynamic("log.preallocate=true").unwrap();
    assert!(b.topic_defaults().preallocate);
    assert_eq!(
        error("preallocate=yes"),
        "Invalid value yes for configuration preallocate: Expected value to be either true or false"
    );
}

#[test]
fn parse_errors_print_the_untrimmed_value() {
    assert_eq!(
        error("retention.ms=abc"),
        "Invalid value abc for configuration retention.ms: Not a number of type LONG"
    );
    assert_eq!(
        error("segment.bytes=3000000000"),
        "Invalid value 3000000000 for configuration segment.bytes: Not a number of type INT"
    );
    assert_eq!(
        error("min.cleanable.dirty.ratio=half"),
        "Invalid value half for configuration min.cleanable.dirty.ratio: Not a number of type DOUBLE"
    );
    assert_eq!(
        error("parse.key=maybe"),
        "Invalid value maybe for configuration parse.key: Expected value to be either true or false"
    );
    assert_eq!(
        error("retention.ms= 12x "),
        "Invalid value  12x  for configuration retention.ms: Not a number of type LONG"
    );
    assert_eq!(
        error("retention.ms="),
        "Invalid value  for configuration retention.ms: Not a number of type LONG"
    );
}

#[test]
fn numbers_and_booleans_are_trimmed_before_parsing() {
    let o =
        apply("retention.ms =  1000 \nparse.key= TRUE\r\nmin.cleanable.dirty.ratio=.25").unwrap();
    let t = broker().resolve_topic(&o);
    assert_eq!(t.retention_ms, 1000);
    assert!(t.parse_key);
    assert_eq!(t.min_cleanable_dirty_ratio, 0.25);
    assert_eq!(o.get(TopicKey::RetentionMs), Some("1000"));
}

#[test]
fn java_double_syntax() {
    assert_eq!(parse_java_double("1e-1"), Some(0.1));
    assert_eq!(parse_java_double("0.5d"), Some(0.5));
    assert_eq!(parse_java_double("Infinity"), Some(f64::INFINITY));
    assert!(parse_java_double("NaN").unwrap().is_nan());
    assert_eq!(parse_java_double("inf"), None);
    assert_eq!(parse_java_double("nan"), None);
    assert_eq!(parse_java_double(""), None);
    assert_eq!(java_double_string(2.0), "2.0");
    assert_eq!(java_double_string(0.9), "0.9");
    assert_eq!(java_double_string(f64::MAX), "1.7976931348623157E308");
    assert_eq!(java_double_string(1e-5), "1.0E-5");
}

#[test]
fn cleanup_policy_list() {
    assert_eq!(
        error("cleanup.policy=foobar"),
        "Invalid value foobar for configuration cleanup.policy: String must be one of: compact, delete"
    );
    assert_eq!(
        error("cleanup.policy=Compact"),
        "Invalid value Compact for configuration cleanup.policy: String must be one of: compact, delete"
    );
    assert_eq!(
        error("cleanup.policy=compact,foobar"),
        "Invalid value foobar for configuration cleanup.policy: String must be one of: compact, delete"
    );
    assert_eq!(
        error("cleanup.policy=compact, compact"),
        "Configuration 'cleanup.policy' values must not be duplicated."
    );
    let both = apply("cleanup.policy= compact , delete ").unwrap();
    let policy = broker().resolve_topic(&both).cleanup_policy;
    assert!(policy.compact && policy.delete);
    let none = apply("cleanup.policy=").unwrap();
    assert_eq!(
        broker().resolve_topic(&none).cleanup_policy,
        CleanupPolicy::default()
    );
}

#[test]
fn separators_are_literal() {
    let o = apply("key.separator=\t\nnull.marker= ").unwrap();
    let t = broker().resolve_topic(&o);
    assert_eq!(t.key_separator, b"\t");
    assert_eq!(t.null_marker, Some(b" ".to_vec()));
    let o = apply("key.separator= :: \r\nnull.marker=").unwrap();
    let t = broker().resolve_topic(&o);
    assert_eq!(t.key_separator, b" :: ");
    assert_eq!(t.null_marker, None);
    assert_eq!(
        error("key.separator="),
        "Invalid value  for configuration key.separator: String must be non-empty"
    );
}

#[test]
fn unknown_names_and_syntax() {
    assert_eq!(error("foo=1"), "Unknown topic config name: foo");
    assert_eq!(error("-foo"), "Unknown topic config name: foo");
    assert_eq!(
        error("log.retention.ms=1"),
        "Unknown topic config name: log.retention.ms"
    );
    assert_eq!(
        error("retention.ms"),
        "Invalid config line 'retention.ms': expected key=value to set, -key to remove, or a # comment"
    );
}

#[test]
fn comments_blank_lines_and_last_line_wins() {
    let o = apply("# a comment\n\n  \nretention.ms=1\r\n  # indented\nretention.ms=2\n").unwrap();
    assert_eq!(o.get(TopicKey::RetentionMs), Some("2"));
    assert_eq!(apply("").unwrap(), TopicOverrides::default());
}

#[test]
fn remove_falls_back_to_the_broker_value() {
    let b = broker().apply_dynamic("log.retention.ms=5000").unwrap();
    let o = TopicOverrides::default()
        .apply_command("retention.ms=1000\nsegment.ms=99", &b)
        .unwrap();
    assert_eq!(b.resolve_topic(&o).retention_ms, 1000);
    let o = o.apply_command("-retention.ms\n - segment.ms", &b).unwrap();
    assert!(o.is_empty());
    assert_eq!(b.resolve_topic(&o).retention_ms, 5000);
    assert_eq!(b.resolve_topic(&o).segment_ms, 604_800_000);
    let o = o.apply_command("-flush.ms", &b).unwrap();
    assert!(o.is_empty());
}

#[test]
fn a_bad_line_refuses_the_whole_command() {
    let before = apply("retention.ms=1000").unwrap();
    let result = before.apply_command("retention.ms=2000\nsegment.bytes=1\nflush.ms=5", &broker());
    assert_eq!(
        result.unwrap_err().to_string(),
        "Invalid value 1 for configuration segment.bytes: Value must be at least 1048576"
    );
    assert_eq!(before.get(TopicKey::RetentionMs), Some("1000"));
    assert_eq!(before.get(TopicKey::FlushMs), None);
    // The first bad line is reported even when a later one is malformed too.
    assert_eq!(
        before
            .apply_command("bogus=1\nnot a line", &broker())
            .unwrap_err()
            .to_string(),
        "Unknown topic config name: bogus"
    );
}

#[test]
fn compaction_lag_conflict_uses_effective_values() {
    assert_eq!(
        error("min.compaction.lag.ms=100\nmax.compaction.lag.ms=50"),
        "conflict topic config setting min.compaction.lag.ms (100) > max.compaction.lag.ms (50)"
    );
    let b = broker()
        .apply_dynamic("log.cleaner.max.compaction.lag.ms=1000")
        .unwrap();
    let err = TopicOverrides::default()
        .apply_command("min.compaction.lag.ms=2000", &b)
        .unwrap_err();
    assert_eq!(
        err,
        ConfigError::CompactionLagConflict {
            min_ms: 2000,
            max_ms: 1000
        }
    );
    assert!(apply("min.compaction.lag.ms=50\nmax.compaction.lag.ms=50").is_ok());
}

#[test]
fn topic_properties_round_trip() {
    let o = apply(
        "key.separator=\t\nnull.marker=\\N \ncleanup.policy=compact, delete\nretention.ms= 7\n\
         key.separator=\r\r",
    )
    .unwrap();
    assert_eq!(o.get(TopicKey::KeySeparator), Some("\r"));
    let text = o.to_properties();
    assert!(!text.contains('\r'));
    let back = TopicOverrides::from_properties(&text).unwrap();
    assert_eq!(back, o);
    assert_eq!(back.get(TopicKey::NullMarker), Some("\\N "));
    assert_eq!(back.get(TopicKey::RetentionMs), Some("7"));
    assert_eq!(TopicOverrides::default().to_properties(), "");
    assert!(TopicOverrides::from_properties("").unwrap().is_empty());
    assert_eq!(
        TopicOverrides::from_properties("foo=1")
            .unwrap_err()
            .to_string(),
        "Unknown topic config name: foo"
    );
    let tab = apply("key.separator=\t").unwrap();
    assert_eq!(tab.to_properties(), "key.separator=\\t\n");
}

/// What `config` shows, written back with `>`.
fn write_back(shown: &str, scope: ConfigScope) -> ConfigChange {
    let mut change = ConfigChange::new(scope);
    change.truncate();
    assert!(change.write(shown.as_bytes()).is_empty(), "{shown}");
    assert!(change.end_lines().is_empty());
    change
}

#[test]
fn rendered_config_round_trips() {
    let b = broker()
        .apply_dynamic("log.cleanup.policy=\nlog.retention.ms=12345")
        .unwrap();
    for command in [
        "",
        "retention.ms=1000\ncleanup.policy=compact",
        "key.separator=\t\nnull.marker=",
        "key.separator= | \nnull.marker=NULL\nparse.key=true",
        "internal.segment.bytes=512\nmin.cleanable.dirty.ratio=0.01",
        "null.marker=# not a comment",
    ] {
        let o = TopicOverrides::default()
            .apply_command(command, &b)
            .unwrap();
        let shown = o.render_effective(&b);
        // Written back over any overrides, it sets exactly the ones shown.
        let other = TopicOverrides::default()
            .apply_command("segment.ms=5\nflush.ms=6", &b)
            .unwrap();
        for base in [TopicOverrides::default(), o.clone(), other] {
            let again = base
                .apply_change(&write_back(&shown, ConfigScope::Topic), &b)
                .unwrap();
            assert_eq!(again, o, "{shown}");
        }
    }
}

#[test]
fn a_restored_config_keeps_following_the_broker() {
    let b = broker();
    let o = TopicOverrides::default()
        .apply_command("retention.ms=1000", &b)
        .unwrap();
    let saved = o.render_effective(&b);
    let restored = TopicOverrides::default()
        .apply_change(&write_back(&saved, ConfigScope::Topic), &b)
        .unwrap();
    let b = b.apply_dynamic("log.segment.delete.delay.ms=5").unwrap();
    assert_eq!(b.resolve_topic(&restored).file_delete_delay_ms, 5);
    assert_eq!(b.resolve_topic(&restored).retention_ms, 1000);
}

#[test]
fn rendered_config_layout() {
    let b = load(&[("log.retention.hours", "2")])
        .unwrap()
        .apply_dynamic("log.segment.bytes=2097152")
        .unwrap();
    let o = apply("retention.bytes=1000").unwrap();
    let text = o.render_effective(&b);
    assert!(
        text.starts_with("# overrides\nretention.bytes=1000\n# defaults\n# "),
        "{text}"
    );
    for expected in [
        "\n# key.separator=\t (DEFAULT_CONFIG)\n",
        "\n# null.marker= (DEFAULT_CONFIG)\n",
        "\n# internal.segment.bytes is unset\n",
        "\n# cleanup.policy=delete (DEFAULT_CONFIG:log.cleanup.policy=delete)\n",
        "\n# retention.ms=7200000 (STATIC_BROKER_CONFIG:log.retention.hours=2)\n",
        "\n# segment.bytes=2097152 (DYNAMIC_DEFAULT_BROKER_CONFIG:log.segment.bytes=2097152)\n",
        "\n# segment.ms=604800000 (DEFAULT_CONFIG:log.roll.hours=168)\n",
        "\n# max.compaction.lag.ms=9223372036854775807 (DEFAULT_CONFIG:log.cleaner.max.compaction.lag.ms=9223372036854775807)\n",
        "\n# min.cleanable.dirty.ratio=0.5 (DEFAULT_CONFIG:log.cleaner.min.cleanable.ratio=0.5)\n",
        "\n# preallocate=false (DEFAULT_CONFIG:log.preallocate=false)\n",
    ] {
        assert!(text.contains(expected), "{expected:?} in\n{text}");
    }
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), TOPIC_DEFS.len() + 2);
    for topic in TOPIC_DEFS {
        assert_eq!(
            lines
                .iter()
                .filter(|l| l
                    .trim_start_matches("# ")
                    .starts_with(&format!("{} ", topic.def.name))
                    || l.trim_start_matches("# ")
                        .starts_with(&format!("{}=", topic.def.name)))
                .count(),
            1,
            "{}",
            topic.def.name
        );
    }
}

#[test]
fn a_change_checks_each_line_as_it_arrives_and_applies_whole() {
    let b = broker();
    let before = apply("retention.ms=1000\nflush.ms=5").unwrap();
    let mut change = ConfigChange::new(ConfigScope::Topic);
    // bash's printf: one write per line; the bad one is refused at once.
    assert!(change.write(b"retention.ms=600000\n").is_empty());
    assert!(change.write(b"retention.bytes=300\n").is_empty());
    let refused = change.write(b"segment.bytes=400\n");
    assert_eq!(
        refused.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
        ["Invalid value 400 for configuration segment.bytes: Value must be at least 1048576"]
    );
    assert!(change.write(b"segment.ms=3000\n").is_empty());
    assert_eq!(
        before.apply_change(&change, &b).unwrap_err().to_string(),
        "nothing of this change applied: line 3 of 4 was refused"
    );
    change.write(b"bogus\n");
    assert_eq!(
        before.apply_change(&change, &b).unwrap_err().to_string(),
        "nothing of this change applied: 2 of its 5 lines were refused, the first line 3"
    );
    // Without the bad line, `>>` changes the keys named and keeps the others.
    let mut change = ConfigChange::new(ConfigScope::Topic);
    change.write(b"retention.ms=600000\nretention.bytes=300\n");
    let after = before.apply_change(&change, &b).unwrap();
    assert_eq!(after.get(TopicKey::RetentionMs), Some("600000"));
    assert_eq!(after.get(TopicKey::RetentionBytes), Some("300"));
    assert_eq!(after.get(TopicKey::FlushMs), Some("5"));
    // `>` makes them the whole set of overrides.
    change.truncate();
    change.write(b"segment.ms=3000\n-retention.ms\n");
    let replaced = before.apply_change(&change, &b).unwrap();
    assert_eq!(replaced.to_properties(), "segment.ms=3000\n");
    // An empty `>` removes every override.
    let mut empty = ConfigChange::new(ConfigScope::Topic);
    empty.truncate();
    assert!(before.apply_change(&empty, &b).unwrap().is_empty());
}

#[test]
fn cross_key_checks_run_on_the_whole_change() {
    let b = broker();
    let mut change = ConfigChange::new(ConfigScope::Topic);
    assert!(change.write(b"min.compaction.lag.ms=5000\n").is_empty());
    assert!(change.write(b"max.compaction.lag.ms=1000\n").is_empty());
    assert_eq!(
        TopicOverrides::default()
            .apply_change(&change, &b)
            .unwrap_err()
            .to_string(),
        "conflict topic config setting min.compaction.lag.ms (5000) > max.compaction.lag.ms (1000)"
    );
    // A prefix that conflicts is fine when the whole change does not.
    let current = apply("min.compaction.lag.ms=5000").unwrap();
    let mut change = ConfigChange::new(ConfigScope::Topic);
    change.write(b"max.compaction.lag.ms=1000\nmin.compaction.lag.ms=500\n");
    let after = current.apply_change(&change, &b).unwrap();
    assert_eq!(b.resolve_topic(&after).min_compaction_lag_ms, 500);
}

#[test]
fn a_line_may_arrive_in_pieces() {
    let value = "x".repeat(20_000);
    let line = format!("null.marker={value}\nparse.key=true");
    let mut change = ConfigChange::new(ConfigScope::Topic);
    for piece in line.as_bytes().chunks(8192) {
        assert!(change.write(piece).is_empty());
    }
    assert!(change.end_lines().is_empty(), "the unterminated last line");
    let o = TopicOverrides::default()
        .apply_change(&change, &broker())
        .unwrap();
    assert_eq!(o.get(TopicKey::NullMarker), Some(value.as_str()));
    assert_eq!(o.get(TopicKey::ParseKey), Some("true"));
    // A multi-byte character split between two writes is still one character.
    let mut change = ConfigChange::new(ConfigScope::Topic);
    let text = "null.marker=\u{00e9}\n".as_bytes();
    assert!(change.write(&text[..13]).is_empty());
    assert!(change.write(&text[13..]).is_empty());
    let o = TopicOverrides::default()
        .apply_change(&change, &broker())
        .unwrap();
    assert_eq!(o.get(TopicKey::NullMarker), Some("\u{00e9}"));
    // A line never ending is refused rather than buffered without bound.
    let mut change = ConfigChange::new(ConfigScope::Topic);
    let chunk = vec![b'x'; 1 << 19];
    assert!(change.write(&chunk).is_empty());
    assert!(change.write(&chunk).is_empty());
    assert_eq!(change.write(b"x").len(), 1);
    assert!(change.fragment.is_empty());
    // The rest of it is dropped up to its newline; the next line counts again.
    assert!(change.write(&chunk).is_empty());
    assert!(change.write(b"xx\nretention.ms=1\n").is_empty());
    assert!(change.fragment.is_empty());
    assert_eq!(change.edits.len(), 1);
}

#[test]
fn invalid_utf8_is_refused() {
    let mut change = ConfigChange::new(ConfigScope::Topic);
    let errors = change.write(b"null.marker=\xff\n");
    assert_eq!(errors[0].to_string(), "config lines must be UTF-8 text");
}

#[test]
fn static_broker_configs_are_refused_dynamically() {
    assert_eq!(
        broker_error("log.retention.check.interval.ms=1000"),
        "Cannot update these configs dynamically: [log.retention.check.interval.ms]"
    );
    assert_eq!(
        broker_error(
            "log.retention.ms=1\nlog.roll.hours=1\nlog.cleaner.enable=false\nlog.roll.hours=2"
        ),
        "Cannot update these configs dynamically: [log.roll.hours, log.cleaner.enable]"
    );
    assert_eq!(
        broker_error("-log.retention.hours"),
        "Cannot update these configs dynamically: [log.retention.hours]"
    );
    // Refused before values are looked at, as Kafka does.
    assert_eq!(
        broker_error("log.flush.scheduler.interval.ms=abc"),
        "Cannot update these configs dynamically: [log.flush.scheduler.interval.ms]"
    );
    assert_eq!(broker_error("foo=1"), "Unknown broker config name: foo");
    assert_eq!(
        broker_error("retention.ms=1"),
        "Unknown broker config name: retention.ms"
    );
    assert_eq!(
        broker_error("log.retention.ms"),
        "Invalid config line 'log.retention.ms': expected key=value to set, -key to remove, or a # comment"
    );
}

#[test]
fn every_dynamic_config_is_accepted() {
    for def in BROKER_DEFS
        .iter()
        .filter(|b| b.update == Update::ClusterWide)
    {
        let value = def.def.default.unwrap_or("1000");
        let b = broker()
            .apply_dynamic(&format!("{}={value}", def.def.name))
            .unwrap();
        assert!(b.dynamic_properties().starts_with(def.def.name));
    }
}

#[test]
fn dynamic_values_are_inherited_by_topics() {
    let b = broker()
        .apply_dynamic(
            "log.retention.ms=1000\nlog.cleanup.policy=compact\nlog.segment.bytes=2097152\n\
             log.roll.ms=77\nlog.roll.jitter.ms=5\nmessage.max.bytes=10\n\
             log.segment.delete.delay.ms=0\nlog.flush.interval.ms=9\n\
             log.cleaner.min.cleanable.ratio=0.1\nlog.cleaner.backoff.ms=1",
        )
        .unwrap();
    let t = b.topic_defaults();
    assert_eq!(t.retention_ms, 1000);
    assert!(t.cleanup_policy.compact && !t.cleanup_policy.delete);
    assert_eq!(t.segment_bytes, 2_097_152);
    assert_eq!(t.segment_ms, 77);
    assert_eq!(t.segment_jitter_ms, 5);
    assert_eq!(t.max_message_bytes, 10);
    assert_eq!(t.file_delete_delay_ms, 0);
    assert_eq!(t.flush_ms, 9);
    assert_eq!(t.min_cleanable_dirty_ratio, 0.1);
    assert_eq!(b.cleaner_backoff_ms(), 1);
    // A topic override still wins over the dynamic default.
    let o = TopicOverrides::default()
        .apply_command("retention.ms=5", &b)
        .unwrap();
    assert_eq!(b.resolve_topic(&o).retention_ms, 5);
    // Removing the dynamic value falls back to the static one, then the default.
    let static_b = load(&[("log.retention.ms", "3000")]).unwrap();
    let dyn_b = static_b.apply_dynamic("log.retention.ms=1000").unwrap();
    assert_eq!(dyn_b.topic_defaults().retention_ms, 1000);
    let back = dyn_b.apply_dynamic("-log.retention.ms").unwrap();
    assert_eq!(back.topic_defaults().retention_ms, 3000);
    assert_eq!(
        broker()
            .apply_dynamic("-log.retention.ms")
            .unwrap()
            .topic_defaults()
            .retention_ms,
        604_800_000
    );
}

#[test]
fn dynamic_updates_are_all_or_nothing() {
    let b = broker().apply_dynamic("log.retention.ms=1000").unwrap();
    assert_eq!(
        b.apply_dynamic("log.retention.ms=2000\nlog.segment.bytes=5")
            .unwrap_err()
            .to_string(),
        "Invalid value 5 for configuration log.segment.bytes: Value must be at least 1048576"
    );
    assert_eq!(b.topic_defaults().retention_ms, 1000);
}

#[test]
fn broker_rules() {
    assert_eq!(
        broker_error("log.retention.ms=0"),
        "log.retention.ms must be unlimited (-1) or, greater than or equal to 1"
    );
    assert_eq!(
        load(&[("log.retention.minutes", "0")])
            .unwrap_err()
            .to_string(),
        "log.retention.ms must be unlimited (-1) or, greater than or equal to 1"
    );
    assert_eq!(
        broker_error("log.roll.ms=0"),
        "log.roll.ms must be greater than or equal to 1"
    );
    assert_eq!(
        broker_error("log.roll.jitter.ms=-1"),
        "log.roll.jitter.ms must be greater than or equal to 0"
    );
    assert_eq!(
        broker_error("log.cleaner.threads=0"),
        "Log cleaner threads should be at least 1"
    );
    assert_eq!(
        broker_error("log.cleaner.threads=-1"),
        "Invalid value -1 for configuration log.cleaner.threads: Value must be at least 0"
    );
    assert_eq!(
        broker_error("log.cleaner.dedupe.buffer.size=1048576"),
        "log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread."
    );
    assert_eq!(
        broker_error("log.cleaner.threads=2\nlog.cleaner.dedupe.buffer.size=2097152"),
        "log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread."
    );
    assert!(broker()
        .apply_dynamic("log.cleaner.dedupe.buffer.size=1048577")
        .is_ok());
    assert_eq!(
        broker_error("log.cleaner.threads=3"),
        "Log cleaner threads cannot be increased to more than double the current value 1"
    );
    let four = load(&[("log.cleaner.threads", "4")]).unwrap();
    assert_eq!(
        four.apply_dynamic("log.cleaner.threads=1")
            .unwrap_err()
            .to_string(),
        "Log cleaner threads cannot be reduced to less than half the current value 4"
    );
    assert_eq!(
        four.apply_dynamic("log.cleaner.threads=2")
            .unwrap()
            .cleaner_threads(),
        2
    );
    assert!(load(&[("log.cleaner.threads", "0")]).is_err());
}

#[test]
fn retention_synonym_precedence() {
    let hours = load(&[("log.retention.hours", "2")]).unwrap();
    assert_eq!(hours.topic_defaults().retention_ms, 2 * MS_PER_HOUR);
    let minutes = load(&[("log.retention.hours", "2"), ("log.retention.minutes", "3")]).unwrap();
    assert_eq!(minutes.topic_defaults().retention_ms, 3 * MS_PER_MINUTE);
    let ms = load(&[
        ("log.retention.ms", "42"),
        ("log.retention.hours", "2"),
        ("log.retention.minutes", "3"),
    ])
    .unwrap();
    assert_eq!(ms.topic_defaults().retention_ms, 42);
    let negative = load(&[("log.retention.hours", "-5")]).unwrap();
    assert_eq!(negative.topic_defaults().retention_ms, -1);
    let negative_ms = load(&[("log.retention.ms", "-7")]).unwrap();
    assert_eq!(negative_ms.topic_defaults().retention_ms, -1);
    // The dynamic log.retention.ms beats a static log.retention.minutes.
    let dynamic = minutes.apply_dynamic("log.retention.ms=9").unwrap();
    assert_eq!(dynamic.topic_defaults().retention_ms, 9);
}

#[test]
fn roll_and_flush_synonym_precedence() {
    let b = load(&[("log.roll.hours", "1"), ("log.roll.jitter.hours", "2")]).unwrap();
    let t = b.topic_defaults();
    assert_eq!(t.segment_ms, MS_PER_HOUR);
    assert_eq!(t.segment_jitter_ms, 2 * MS_PER_HOUR);
    let b = load(&[
        ("log.roll.hours", "1"),
        ("log.roll.ms", "500"),
        ("log.roll.jitter.hours", "2"),
        ("log.roll.jitter.ms", "50"),
    ])
    .unwrap();
    assert_eq!(b.topic_defaults().segment_ms, 500);
    assert_eq!(b.topic_defaults().segment_jitter_ms, 50);
    let b = load(&[("log.flush.scheduler.interval.ms", "3000")]).unwrap();
    assert_eq!(b.topic_defaults().flush_ms, 3000);
    assert_eq!(b.flush_scheduler_interval_ms(), 3000);
    let b = b.apply_dynamic("log.flush.interval.ms=10").unwrap();
    assert_eq!(b.topic_defaults().flush_ms, 10);
    assert_eq!(b.flush_scheduler_interval_ms(), 3000);
}

#[test]
fn load_parses_server_properties() {
    let text = "# Kafka server.properties\n! another comment\n\n\
                log.retention.check.interval.ms=1000\n\
                log.cleaner.enable : false\r\n\
                log.segment.bytes   2097152\n\
                log.cleaner.backoff.ms=  250  \n\
                log.retention.hours=1\n";
    let overrides = vec![
        ("log.retention.hours".to_string(), "3".to_string()),
        ("log.cleaner.threads".to_string(), "2".to_string()),
    ];
    let b = BrokerConfig::load(Some(text), &overrides).unwrap();
    assert_eq!(b.retention_check_interval_ms(), 1000);
    assert!(!b.cleaner_enable());
    assert_eq!(b.cleaner_backoff_ms(), 250);
    assert_eq!(b.cleaner_threads(), 2);
    assert_eq!(b.topic_defaults().segment_bytes, 2_097_152);
    assert_eq!(b.topic_defaults().retention_ms, 3 * MS_PER_HOUR);
    assert_eq!(
        BrokerConfig::load(Some("broker.idd=1"), &[])
            .unwrap_err()
            .to_string(),
        "Unknown broker config name: broker.idd"
    );
    assert_eq!(
        BrokerConfig::load(Some("log.cleaner.enable"), &[])
            .unwrap_err()
            .to_string(),
        "Invalid properties line 'log.cleaner.enable': expected key=value or key: value"
    );
    assert_eq!(
        load(&[("log.segment.bytes", "400")])
            .unwrap_err()
            .to_string(),
        "Invalid value 400 for configuration log.segment.bytes: Value must be at least 1048576"
    );
    assert_eq!(
        load(&[("log.retention.check.interval.ms", "x")])
            .unwrap_err()
            .to_string(),
        "Invalid value x for configuration log.retention.check.interval.ms: Not a number of type LONG"
    );
    assert_eq!(
        load(&[("log.cleaner.enable", "yes")]).unwrap_err().to_string(),
        "Invalid value yes for configuration log.cleaner.enable: Expected value to be either true or false"
    );
    assert_eq!(
        load(&[("log.cleanup.policy", "compact,compact")])
            .unwrap_err()
            .to_string(),
        "Configuration 'log.cleanup.policy' values must not be duplicated."
    );
    assert_eq!(
        load(&[("log.cleaner.io.buffer.load.factor", "x")])
            .unwrap_err()
            .to_string(),
        "Invalid value x for configuration log.cleaner.io.buffer.load.factor: Not a number of type DOUBLE"
    );
}

#[test]
fn dynamic_properties_round_trip() {
    let b = load(&[("log.retention.check.interval.ms", "1000")]).unwrap();
    assert_eq!(b.dynamic_properties(), "");
    let changed = b
        .apply_dynamic("log.retention.ms=1000\nlog.cleanup.policy=compact, delete\nlog.cleaner.io.max.bytes.per.second=1e6")
        .unwrap();
    let text = changed.dynamic_properties();
    assert_eq!(
        text,
        "log.cleaner.io.max.bytes.per.second=1e6\nlog.cleanup.policy=compact, delete\nlog.retention.ms=1000\n"
    );
    let remounted = b.with_dynamic_properties(&text).unwrap();
    assert_eq!(remounted, changed);
    assert_eq!(remounted.cleaner_io_max_bytes_per_second(), 1e6);
    assert_eq!(remounted.retention_check_interval_ms(), 1000);
    assert_eq!(
        b.with_dynamic_properties("log.cleaner.enable=false")
            .unwrap_err()
            .to_string(),
        "Cannot update these configs dynamically: [log.cleaner.enable]"
    );
    assert_eq!(
        b.with_dynamic_properties("nope=1").unwrap_err().to_string(),
        "Unknown broker config name: nope"
    );
}

#[test]
fn broker_render_lists_every_config_sorted() {
    let b = load(&[
        ("log.retention.hours", "2"),
        ("log.cleaner.enable", "false"),
    ])
    .unwrap()
    .apply_dynamic("log.segment.delete.delay.ms=5\nlog.cleanup.policy=compact")
    .unwrap();
    let text = b.render();
    let lines: Vec<&str> = text.lines().collect();
    let listed = KAFKA_BROKER_DEFS.iter().filter(|d| d.listed_unset).count();
    assert_eq!(lines.len(), listed + 3);
    assert_eq!(
        lines[..5],
        [
            "# overrides",
            "log.cleanup.policy=compact",
            "log.segment.delete.delay.ms=5",
            "# per-broker overrides",
            "# defaults"
        ]
    );
    let names: Vec<&str> = lines[5..]
        .iter()
        .map(|l| l[2..].split(['=', ' ']).next().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    for expected in [
        "# log.retention.check.interval.ms=300000 (DEFAULT_CONFIG, read-only)",
        "# log.retention.hours=2 (STATIC_BROKER_CONFIG, read-only)",
        "# log.cleaner.enable=false (STATIC_BROKER_CONFIG, read-only)",
        "# log.retention.ms=7200000 (STATIC_BROKER_CONFIG:log.retention.hours=2)",
        "# log.retention.minutes is unset (read-only)",
        "# log.roll.ms=604800000 (DEFAULT_CONFIG:log.roll.hours=168)",
        "# log.roll.jitter.ms=0 (DEFAULT_CONFIG:log.roll.jitter.hours=0)",
        "# log.flush.interval.ms=9223372036854775807 (DEFAULT_CONFIG:log.flush.scheduler.interval.ms=9223372036854775807)",
        "# log.cleaner.io.max.bytes.per.second=1.7976931348623157E308 (DEFAULT_CONFIG)",
        "# log.cleaner.io.buffer.load.factor=0.9 (DEFAULT_CONFIG)",
        "# log.preallocate=false (DEFAULT_CONFIG)",
        "# background.threads=10 (DEFAULT_CONFIG, no effect in kpfs)",
        "# process.roles is unset (read-only, no effect in kpfs)",
        "# ssl.keystore.password is unset (no effect in kpfs)",
    ] {
        assert!(lines.contains(&expected), "{expected} in\n{text}");
    }
    // Written back with `>`, it sets exactly the dynamic overrides it showed.
    let other = b
        .apply_dynamic("-log.cleanup.policy\nlog.retention.ms=9")
        .unwrap();
    let again = other
        .apply_change(&write_back(&text, ConfigScope::Broker))
        .unwrap();
    assert_eq!(again, b);
}

#[test]
fn static_broker_configs_in_one_write_are_refused_together() {
    let mut change = ConfigChange::new(ConfigScope::Broker);
    let errors = change.write(b"log.roll.hours=1\nlog.retention.ms=5\nlog.cleaner.enable=false\n");
    assert_eq!(
        errors.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
        ["Cannot update these configs dynamically: [log.roll.hours, log.cleaner.enable]"]
    );
    let errors = change.write(b"log.retention.hours=1\n");
    assert_eq!(
        errors[0].to_string(),
        "Cannot update these configs dynamically: [log.retention.hours]"
    );
    assert!(broker().apply_change(&change).is_err());
}

#[test]
fn compression_type_is_a_topic_config_with_a_dynamic_broker_synonym() {
    assert_eq!(
        broker().topic_defaults().compression,
        TopicCompression::Producer
    );
    let resolved = |text: &str| broker().resolve_topic(&apply(text).unwrap()).compression;
    assert_eq!(
        resolved("compression.type=uncompressed"),
        TopicCompression::Fixed(Compression::NONE)
    );
    // Trimmed as Kafka's STRING; each codec at its default level unless its level is set.
    assert_eq!(
        resolved(" compression.type = zstd "),
        TopicCompression::Fixed(Compression::default_level(CompressionCodec::Zstd))
    );
    assert_eq!(
        resolved("compression.type=gzip\ncompression.gzip.level=9\ncompression.zstd.level=7"),
        TopicCompression::Fixed(Compression::with_level(CompressionCodec::Gzip, 9).unwrap())
    );
    assert_eq!(
        resolved("compression.type=snappy"),
        TopicCompression::Fixed(Compression::default_level(CompressionCodec::Snappy))
    );
    let b = broker()
        .apply_dynamic("compression.type=lz4\ncompression.lz4.level=12")
        .unwrap();
    assert_eq!(
        b.topic_defaults().compression,
        TopicCompression::Fixed(Compression::with_level(CompressionCodec::Lz4, 12).unwrap())
    );
    let overridden = b.resolve_topic(&apply("compression.type=producer").unwrap());
    assert_eq!(overridden.compression, TopicCompression::Producer);
}

#[test]
fn compression_configs_are_refused_in_kafkas_words() {
    for (line, text) in [
        (
            "compression.type=GZIP",
            "Invalid value GZIP for configuration compression.type: String must be one of: \
             uncompressed, zstd, lz4, snappy, gzip, producer",
        ),
        (
            "compression.type=none",
            "Invalid value none for configuration compression.type: String must be one of: \
             uncompressed, zstd, lz4, snappy, gzip, producer",
        ),
        (
            "compression.gzip.level=0",
            "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 \
             and 9 or equal to -1",
        ),
        (
            "compression.gzip.level=10",
            "Invalid value 10 for configuration compression.gzip.level: Value must be between 1 \
             and 9 or equal to -1",
        ),
        (
            "compression.lz4.level=18",
            "Invalid value 18 for configuration compression.lz4.level: Value must be no more \
             than 17",
        ),
        (
            "compression.lz4.level=0",
            "Invalid value 0 for configuration compression.lz4.level: Value must be at least 1",
        ),
        (
            "compression.zstd.level=23",
            "Invalid value 23 for configuration compression.zstd.level: Value must be no more \
             than 22",
        ),
        (
            "compression.zstd.level=-131073",
            "Invalid value -131073 for configuration compression.zstd.level: Value must be at \
             least -131072",
        ),
    ] {
        assert_eq!(error(line), text, "{line}");
        assert_eq!(broker_error(line), text, "broker {line}");
    }
    apply("compression.gzip.level=-1\ncompression.zstd.level=-131072").unwrap();
}

#[test]
fn compression_level_defaults_are_the_codecs() {
    let t = broker().topic_defaults();
    assert_eq!(t.compression.for_fuse_append(), Compression::NONE);
    for (key, codec) in [
        (TopicKey::CompressionGzipLevel, CompressionCodec::Gzip),
        (TopicKey::CompressionLz4Level, CompressionCodec::Lz4),
        (TopicKey::CompressionZstdLevel, CompressionCodec::Zstd),
    ] {
        let default = key.def().default.unwrap();
        assert_eq!(
            default.parse::<i32>().unwrap(),
            codec.levels().unwrap().default,
            "{key}"
        );
    }
}

#[test]
fn fuse_appends_are_written_as_uncompressed_producer_data() {
    let fuse = |text: &str| {
        broker()
            .resolve_topic(&apply(text).unwrap())
            .compression
            .for_fuse_append()
    };
    assert_eq!(fuse("compression.type=producer"), Compression::NONE);
    assert_eq!(fuse("compression.type=uncompressed"), Compression::NONE);
    assert_eq!(
        fuse("compression.type=zstd\ncompression.zstd.level=-5"),
        Compression::with_level(CompressionCodec::Zstd, -5).unwrap()
    );
    // A producer's compressed batch keeps its codec under `producer`, at its default level.
    assert_eq!(
        TopicCompression::Producer.target(CompressionCodec::Gzip),
        Compression::default_level(CompressionCodec::Gzip)
    );
}

#[test]
fn timestamp_configs_have_kafkas_defaults_synonyms_and_texts() {
    let defaults = broker().topic_defaults();
    assert_eq!(defaults.message_timestamp_type, TimestampType::CreateTime);
    assert_eq!(defaults.message_timestamp_before_max_ms, i64::MAX);
    assert_eq!(
        defaults.message_timestamp_after_max_ms, 3_600_000,
        "Kafka 4.0's default"
    );
    assert_eq!(
        error("message.timestamp.type=Foo"),
        "Invalid value Foo for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime"
    );
    assert_eq!(
        error("message.timestamp.after.max.ms=-1"),
        "Invalid value -1 for configuration message.timestamp.after.max.ms: Value must be at least 0"
    );
    let b = broker()
        .apply_dynamic(
            "log.message.timestamp.type=LogAppendTime\nlog.message.timestamp.before.max.ms=5",
        )
        .unwrap();
    assert_eq!(
        b.topic_defaults().message_timestamp_type,
        TimestampType::LogAppendTime
    );
    assert_eq!(b.topic_defaults().message_timestamp_before_max_ms, 5);
    let overridden = b.resolve_topic(&apply("message.timestamp.type=CreateTime").unwrap());
    assert_eq!(overridden.message_timestamp_type, TimestampType::CreateTime);
}

#[test]
fn producer_id_expiration_is_a_dynamic_broker_config_of_at_least_one_ms() {
    assert_eq!(broker().producer_id_expiration_ms(), 86_400_000);
    let b = broker()
        .apply_dynamic("producer.id.expiration.ms=1000")
        .unwrap();
    assert_eq!(b.topic_defaults().producer_id_expiration_ms, 1000);
    assert_eq!(
        broker_error("producer.id.expiration.ms=0"),
        "Invalid value 0 for configuration producer.id.expiration.ms: Value must be at least 1"
    );
}

fn plaintext(host: Option<&str>, port: u16) -> Endpoint {
    Endpoint {
        listener_name: "PLAINTEXT".into(),
        host: host.map(str::to_string),
        port,
    }
}

#[test]
fn listener_configs_default_as_kafka_except_listeners() {
    let b = broker();
    // Unset `listeners` is kpfs's "no socket" (Kafka's default is PLAINTEXT://:9092).
    assert_eq!(b.listener_settings(), None);
    assert_eq!(b.node_id(), 1);
    let b = load(&[("listeners", "PLAINTEXT://127.0.0.1:9092")]).unwrap();
    assert_eq!(
        b.listener_settings(),
        Some(ListenerSettings {
            listener: plaintext(Some("127.0.0.1"), 9092),
            advertised: plaintext(Some("127.0.0.1"), 9092),
            node_id: 1,
            socket_request_max_bytes: 104_857_600,
            max_connections: 2_147_483_647,
            connections_max_idle_ms: Some(600_000),
            auto_create_topics: true,
            max_request_partition_size_limit: 2000,
            delete_topic_enable: true,
        })
    );
    let text = b.render();
    for expected in [
        "# listeners=PLAINTEXT://127.0.0.1:9092 (STATIC_BROKER_CONFIG, read-only)",
        "# advertised.listeners is unset (read-only)",
        "# node.id=1 (DEFAULT_CONFIG, read-only)",
        "# auto.create.topics.enable=true (DEFAULT_CONFIG, read-only)",
        "# num.partitions=1 (DEFAULT_CONFIG, read-only)",
        "# socket.request.max.bytes=104857600 (DEFAULT_CONFIG, read-only)",
        "# max.connections=2147483647 (DEFAULT_CONFIG)",
        "# connections.max.idle.ms=600000 (DEFAULT_CONFIG, read-only)",
        "# delete.topic.enable=true (DEFAULT_CONFIG, read-only)",
    ] {
        assert!(text.lines().any(|l| l == expected), "{expected} in\n{text}");
    }
    // kpfs binds its listener at start: read-only, though Kafka's is per-broker dynamic.
    assert!(broker()
        .render()
        .contains("# listeners is unset (read-only)\n"));
}

#[test]
fn listener_settings_follow_the_configs() {
    let b = load(&[
        ("listeners", " plaintext://:19092 "),
        ("advertised.listeners", "PLAINTEXT://kpfs.example:29092"),
        ("node.id", "7"),
        ("auto.create.topics.enable", "false"),
        ("socket.request.max.bytes", "1000"),
        ("max.connections", "0"),
        ("connections.max.idle.ms", "-1"),
        ("delete.topic.enable", "false"),
    ])
    .unwrap();
    let s = b.listener_settings().unwrap();
    assert_eq!(s.listener, plaintext(None, 19092));
    assert_eq!(s.advertised, plaintext(Some("kpfs.example"), 29092));
    assert_eq!(s.node_id, 7);
    assert!(!s.auto_create_topics);
    assert_eq!(s.socket_request_max_bytes, 1000);
    assert_eq!(s.max_connections, 0);
    assert_eq!(s.connections_max_idle_ms, None, "negative: never");
    assert!(!s.delete_topic_enable);
    // IPv6 in brackets.
    let v6 = load(&[("listeners", "PLAINTEXT://[::1]:9092")]).unwrap();
    assert_eq!(
        v6.listener_settings().unwrap().listener,
        plaintext(Some("::1"), 9092)
    );
    // `max.connections` is dynamic (cluster-wide): the settings read after follow it.
    let updated = b.apply_dynamic("max.connections=5").unwrap();
    assert_eq!(updated.listener_settings().unwrap().max_connections, 5);
}

#[test]
fn serve_sets_its_listener_unless_one_is_configured() {
    let served = broker()
        .with_default_listeners("PLAINTEXT://127.0.0.1:9092")
        .unwrap();
    assert_eq!(
        served.listener_settings().unwrap().listener,
        plaintext(Some("127.0.0.1"), 9092)
    );
    let own = load(&[("listeners", "PLAINTEXT://127.0.0.1:1234")])
        .unwrap()
        .with_default_listeners("PLAINTEXT://127.0.0.1:9092")
        .unwrap();
    assert_eq!(own.listener_settings().unwrap().listener.port, 1234);
    // The default still meets the rules across configs.
    assert_eq!(
        load(&[("advertised.listeners", "PLAINTEXT://0.0.0.0:1")])
            .unwrap_err()
            .to_string(),
        "advertised.listeners listener names must be equal to or a subset of the ones defined \
         in listeners. Found PLAINTEXT. The valid options based on the current configuration are "
    );
}

#[test]
fn listener_lists_are_refused_in_kafkas_words() {
    let refusal = |listeners: &str| load(&[("listeners", listeners)]).unwrap_err().to_string();
    assert_eq!(
        refusal("localhost:9092"),
        "Error creating broker listeners from 'localhost:9092': Unable to parse localhost:9092 to a broker endpoint"
    );
    assert_eq!(
        refusal("PLAINTEXT://host:port"),
        "Error creating broker listeners from 'PLAINTEXT://host:port': Unable to parse PLAINTEXT://host:port to a broker endpoint"
    );
    assert_eq!(
        refusal("PLAINTEXT://h*st:1"),
        "Error creating broker listeners from 'PLAINTEXT://h*st:1': Unable to parse PLAINTEXT://h*st:1 to a broker endpoint"
    );
    assert_eq!(
        refusal("PLAINTEXT://:99999999999"),
        "Error creating broker listeners from 'PLAINTEXT://:99999999999': For input string: \"99999999999\""
    );
    assert_eq!(
        refusal("PLAINTEXT://:70000"),
        "Error creating broker listeners from 'PLAINTEXT://:70000': port out of range:70000"
    );
    assert_eq!(
        refusal("CLIENT://:9092"),
        "Error creating broker listeners from 'CLIENT://:9092': No security protocol defined for listener CLIENT"
    );
    assert_eq!(
        refusal("PLAINTEXT://:9092,PLAINTEXT://:9093"),
        "Each listener must have a different name, listeners: PLAINTEXT://:9092,PLAINTEXT://:9093"
    );
    assert_eq!(
        refusal(""),
        "There must be at least one broker advertised listener."
    );
    // What kpfs does not serve, said plainly.
    for protocol in ["SSL", "SASL_PLAINTEXT", "sasl_ssl"] {
        let listeners = format!("{protocol}://:9093");
        assert_eq!(
            refusal(&listeners),
            format!(
                "Error creating broker listeners from '{listeners}': kpfs serves PLAINTEXT \
                 listeners only, not {}: TLS and SASL authentication are out of scope for now",
                protocol.to_uppercase()
            )
        );
    }
    assert_eq!(
        refusal("PLAINTEXT://127.0.0.1:0"),
        "Error creating broker listeners from 'PLAINTEXT://127.0.0.1:0': port 0 (any free port) \
         is not supported: kpfs advertises the configured port, so clients would be told port 0"
    );
    // Advertised listeners: Kafka's rules across the two lists.
    let both = |advertised: &str| {
        load(&[
            ("listeners", "PLAINTEXT://0.0.0.0:9092"),
            ("advertised.listeners", advertised),
        ])
    };
    assert_eq!(
        both("PLAINTEXT://0.0.0.0:9092").unwrap_err().to_string(),
        "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address."
    );
    assert_eq!(
        load(&[("listeners", "PLAINTEXT://0.0.0.0:9092")])
            .unwrap_err()
            .to_string(),
        "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address.",
        "advertised defaults to the listeners"
    );
    assert_eq!(
        both("").unwrap_err().to_string(),
        "There must be at least one broker advertised listener."
    );
    assert!(both("PLAINTEXT://kpfs.example:9092").is_ok());
    // Different ports may be advertised (a proxy in front).
    assert_eq!(
        both("PLAINTEXT://kpfs.example:1")
            .unwrap()
            .listener_settings()
            .unwrap()
            .advertised
            .port,
        1
    );
}

#[test]
fn broker_wide_listener_configs_use_kafkas_validators() {
    let refusal = |key: &str, value: &str| load(&[(key, value)]).unwrap_err().to_string();
    assert_eq!(
        refusal("socket.request.max.bytes", "0"),
        "Invalid value 0 for configuration socket.request.max.bytes: Value must be at least 1"
    );
    assert_eq!(
        refusal("max.connections", "-1"),
        "Invalid value -1 for configuration max.connections: Value must be at least 0"
    );
    assert_eq!(
        refusal("num.partitions", "0"),
        "Invalid value 0 for configuration num.partitions: Value must be at least 1"
    );
    assert_eq!(
        refusal("num.partitions", "10001"),
        "num.partitions must be at most 10000: a kpfs topic has at most 10000 partitions"
    );
    assert!(load(&[("num.partitions", "10000")]).is_ok());
    assert_eq!(
        refusal("node.id", "-1"),
        "Missing configuration `node.id` which is required when `process.roles` is defined \
         (i.e. when running in KRaft mode)."
    );
    assert_eq!(
        refusal("node.id", "one"),
        "Invalid value one for configuration node.id: Not a number of type INT"
    );
    assert_eq!(
        refusal("auto.create.topics.enable", "yes"),
        "Invalid value yes for configuration auto.create.topics.enable: Expected value to be either true or false"
    );
    assert_eq!(
        refusal("connections.max.idle.ms", "1.5"),
        "Invalid value 1.5 for configuration connections.max.idle.ms: Not a number of type LONG"
    );
    assert!(load(&[("node.id", "0"), ("connections.max.idle.ms", "0")]).is_ok());
}

#[test]
fn listener_configs_static_dynamic_and_per_broker() {
    // Kafka's `DynamicListenerConfig`: the listener lists change only per broker (and
    // not at all under KRaft), never at the cluster-wide default level `.kpfs/config` is.
    assert_eq!(
        broker_error("listeners=PLAINTEXT://127.0.0.1:9092"),
        "Cannot update these configs at default cluster level, broker id must be specified: [listeners]"
    );
    // Read-only since Kafka 4.3.
    assert_eq!(
        broker_error("-advertised.listeners"),
        "Cannot update these configs dynamically: [advertised.listeners]"
    );
    assert_eq!(
        broker_error("# per-broker overrides\nlisteners=PLAINTEXT://127.0.0.1:9093"),
        "kpfs binds its listener at start and does not change it while it runs: set listeners with --override or --config and remount"
    );
    for key in [
        "node.id",
        "auto.create.topics.enable",
        "num.partitions",
        "socket.request.max.bytes",
        "connections.max.idle.ms",
        "delete.topic.enable",
    ] {
        assert_eq!(
            broker_error(&format!("{key}=1")),
            format!("Cannot update these configs dynamically: [{key}]")
        );
    }
    // `max.connections` is a cluster-level listener config: dynamic.
    let b = broker().apply_dynamic("max.connections=100").unwrap();
    assert_eq!(b.dynamic_properties(), "max.connections=100\n");
    // A persisted file naming them (edited by hand) is refused at open.
    assert_eq!(
        broker()
            .with_dynamic_properties(
                "listeners=PLAINTEXT://:1\nadvertised.listeners=PLAINTEXT://h:1\nnode.id=2\n"
            )
            .unwrap_err()
            .to_string(),
        "Cannot update these configs dynamically: [advertised.listeners, node.id]"
    );
}

/// The generated table is Kafka's own list; kpfs's definitions of the configs it acts on
/// agree with it, except where kpfs says why (a misspelt or drifted definition fails here).
#[test]
fn kpfs_broker_configs_are_kafkas() {
    assert!(KAFKA_BROKER_DEFS
        .windows(2)
        .all(|w| w[0].def.name < w[1].def.name));
    let deliberate = [
        // Kafka's `PLAINTEXT://:9092`: a mount opens no port unless asked.
        ("listeners", "default"),
        // A list in Kafka 4.3; kpfs parses it whole as `KafkaConfig` once did.
        ("listeners", "kind"),
        ("advertised.listeners", "kind"),
        // Kafka's -1, which KRaft refuses.
        ("node.id", "default"),
    ];
    for &key in BrokerKey::ALL {
        let kafka = KAFKA_BROKER_DEFS
            .iter()
            .find(|d| d.def.name == key.name())
            .unwrap_or_else(|| panic!("{key} is not a Kafka broker config"));
        let own = key.row();
        if !deliberate.contains(&(key.name(), "kind")) {
            assert_eq!(own.def.kind, kafka.def.kind, "{key}");
        }
        if !deliberate.contains(&(key.name(), "default")) {
            assert_eq!(own.def.default, kafka.def.default, "{key}");
        }
        assert_eq!(own.update, kafka.update, "{key}");
        assert!(kafka.listed_unset, "{key}");
    }
}

#[test]
fn the_broker_describes_every_config_kafka_lists() {
    let described: Vec<&str> = broker()
        .describe(BrokerLevel::ThisBroker)
        .iter()
        .map(|c| c.name)
        .collect();
    let kafka: Vec<&str> = KAFKA_BROKER_DEFS
        .iter()
        .filter(|d| d.listed_unset)
        .map(|d| d.def.name)
        .collect();
    assert_eq!(described, kafka);
    assert_eq!(described.len(), 340);
    // A quota config only `DynamicConfig.Broker` defines is listed once set, as Kafka.
    let b = broker()
        .apply_dynamic("leader.replication.throttled.rate=10")
        .unwrap();
    assert!(b
        .describe(BrokerLevel::ThisBroker)
        .iter()
        .any(|c| c.name == "leader.replication.throttled.rate"));
}

/// `sasl.kerberos.min.time.before.relogin`, as Kafka 4.3.1's `DynamicBrokerConfig.validate`
/// answers it: per-broker only, its value checked first.
#[test]
fn kafka_configs_kpfs_does_not_act_on_are_kept_at_kafkas_levels() {
    let relogin = "sasl.kerberos.min.time.before.relogin";
    assert_eq!(
        broker_error(&format!("{relogin}=5")),
        format!("Cannot update these configs at default cluster level, broker id must be specified: [{relogin}]")
    );
    assert_eq!(
        broker_error(&format!("{relogin}=abc")),
        format!("Invalid value abc for configuration {relogin}: Not a number of type LONG")
    );
    let at_broker = |text: &str| {
        let change = ConfigChange::broker_level(BrokerLevel::ThisBroker, false);
        let mut change = change;
        let errors = change.write(format!("{text}\n").as_bytes());
        match errors.into_iter().next() {
            Some(e) => Err(e),
            None => broker().apply_change(&change),
        }
    };
    let b = at_broker(&format!("{relogin}=5")).unwrap();
    // Static and listener-only configs are refused at either level, before the values.
    assert_eq!(
        at_broker("num.io.threads=16\nnode.id=x\nssl.keystore.location=/k")
            .unwrap_err()
            .to_string(),
        "Cannot update these configs dynamically: [node.id]"
    );
    assert_eq!(
        at_broker("ssl.keystore.location=/k").unwrap_err().to_string(),
        "These security configs can be dynamically updated only per-listener using the listener prefix: [ssl.keystore.location]"
    );
    // Kafka's validators: SHORT, case-insensitive strings, lists.
    assert_eq!(
        at_broker("sasl.login.refresh.buffer.seconds=99999")
            .unwrap_err()
            .to_string(),
        "Invalid value 99999 for configuration sasl.login.refresh.buffer.seconds: Not a number of type SHORT"
    );
    assert_eq!(
        broker_error("metric.reporters=a,,b"),
        "Configuration 'metric.reporters' values must not be empty."
    );
    assert_eq!(
        broker_error("num.io.threads=0"),
        "Invalid value 0 for configuration num.io.threads: Value must be at least 1"
    );
    assert_eq!(
        load(&[("process.roles", "")]).unwrap_err().to_string(),
        "Configuration 'process.roles' must not be empty. Valid values include: [broker, controller]"
    );
    assert_eq!(
        load(&[("group.consumer.migration.policy", "x")]).unwrap_err().to_string(),
        "Invalid value x for configuration group.consumer.migration.policy: String must be one of (case insensitive): DISABLED, DOWNGRADE, UPGRADE, BIDIRECTIONAL"
    );
    assert!(load(&[("group.consumer.migration.policy", "upgrade")]).is_ok());
    // The order of Kafka's checks over one request: static names, then values, then levels.
    assert_eq!(
        broker_error(&format!(
            "num.partitions=2\n{relogin}=5\nlog.retention.check.interval.ms=1"
        )),
        "Cannot update these configs dynamically: [num.partitions, log.retention.check.interval.ms]"
    );

    // This broker's level wins over the cluster-wide default, and both persist.
    let b = b
        .apply_dynamic("background.threads=12\n# per-broker overrides\nbackground.threads=13")
        .unwrap();
    let entry = |b: &BrokerConfig, name: &str| {
        b.describe(BrokerLevel::ThisBroker)
            .into_iter()
            .find(|c| c.name == name)
            .unwrap()
    };
    let threads = entry(&b, "background.threads");
    assert_eq!(threads.value.as_deref(), Some("13"));
    assert_eq!(
        threads.source,
        DescribedSource::Broker(ConfigSource::DynamicBroker)
    );
    assert_eq!(
        threads
            .synonyms
            .iter()
            .map(|s| (s.value.as_deref().unwrap(), s.source))
            .collect::<Vec<_>>(),
        [
            ("13", DescribedSource::Broker(ConfigSource::DynamicBroker)),
            (
                "12",
                DescribedSource::Broker(ConfigSource::DynamicDefaultBroker)
            ),
            ("10", DescribedSource::Broker(ConfigSource::Default)),
        ]
    );
    assert!(threads.no_effect && !threads.read_only);
    let text = b.dynamic_properties();
    assert_eq!(
        text,
        format!(
            "background.threads=12\n# per-broker overrides\nbackground.threads=13\n{relogin}=5\n"
        )
    );
    assert_eq!(broker().with_dynamic_properties(&text).unwrap(), b);
    assert_eq!(
        broker()
            .with_dynamic_properties(&format!("{relogin}=5\n"))
            .unwrap_err()
            .to_string(),
        format!("Cannot update these configs at default cluster level, broker id must be specified: [{relogin}]")
    );
    // The cluster-wide resource lists what is set there, as Kafka's.
    let default_level = b.describe(BrokerLevel::ClusterDefault);
    assert_eq!(default_level.len(), 1);
    assert_eq!(default_level[0].value.as_deref(), Some("12"));

    // `.kpfs/config` shows both levels, says which configs do nothing, and round-trips.
    let rendered = b.render();
    assert!(
        rendered.starts_with(&format!(
            "# overrides\nbackground.threads=12\n# background.threads has no effect in kpfs\n\
             # per-broker overrides\nbackground.threads=13\n# background.threads has no effect in kpfs\n\
             {relogin}=5\n# {relogin} has no effect in kpfs\n# defaults\n"
        )),
        "{rendered}"
    );
    assert!(rendered.contains("\n# num.io.threads=8 (DEFAULT_CONFIG, no effect in kpfs)\n"));
    let again = broker()
        .apply_change(&write_back(&rendered, ConfigScope::Broker))
        .unwrap();
    assert_eq!(again, b);
}

#[test]
fn a_password_is_never_shown() {
    let b = load(&[("delegation.token.secret.key", "s3cret")]).unwrap();
    let key = b
        .describe(BrokerLevel::ThisBroker)
        .into_iter()
        .find(|c| c.name == "delegation.token.secret.key")
        .unwrap();
    assert!(key.sensitive);
    assert_eq!(key.value, None);
    assert!(key.synonyms.iter().all(|s| s.value.is_none()));
    let text = b.render();
    assert!(!text.contains("s3cret"), "{text}");
    assert!(text.contains(
        "# delegation.token.secret.key is set, not shown (STATIC_BROKER_CONFIG, read-only, no effect in kpfs)\n"
    ));
    assert_eq!(
        BrokerName::known("delegation.token.secret.key").map(|n| n.has_effect()),
        Ok(false)
    );
}

/// Every name the hand-written group bounds use is a group config (an integer one) or a
/// broker config of the generated tables, and every group config's broker synonym is one
/// of Kafka's broker configs of the same type: a misspelt name would refuse every change.
#[test]
fn group_bounds_and_synonyms_name_known_configs() {
    use super::def::{GroupName, Kind, GROUP_BOUNDS, GROUP_SESSION_OVER_HEARTBEAT};
    let group_int = |name: &str| {
        let name = GroupName::known(name).unwrap();
        assert_eq!(name.def().kind, Kind::Int, "{name}");
    };
    for &(name, min, max) in GROUP_BOUNDS {
        group_int(name);
        for bound in min.into_iter().chain([max]) {
            assert_eq!(
                BrokerName::known(bound).unwrap().def().kind,
                Kind::Int,
                "{bound}"
            );
        }
    }
    for &(session, heartbeat) in GROUP_SESSION_OVER_HEARTBEAT {
        group_int(session);
        group_int(heartbeat);
    }
    for name in GroupName::all() {
        if let Some(synonym) = name.broker_synonym() {
            assert_eq!(synonym.def().kind, name.def().kind, "{name}");
        }
    }
}

/// The persisted group configs read back as they were, ids with line breaks included.
#[test]
fn group_configs_persist_and_read_back() {
    let broker = BrokerConfig::defaults();
    let change = |text: &str| ConfigChange::from_text(ConfigScope::Group, text).unwrap();
    let configs = GroupConfigs::default()
        .apply_change(
            "a\nb",
            &change("consumer.session.timeout.ms=50000\n"),
            &broker,
        )
        .unwrap()
        .apply_change(
            "group",
            &change("share.isolation.level=read_committed\n"),
            &broker,
        )
        .unwrap();
    let text = configs.properties();
    assert_eq!(GroupConfigs::from_properties(&text).unwrap(), configs);
    // Removing a group's last override forgets the group.
    let emptied = configs
        .apply_change("group", &change("-share.isolation.level\n"), &broker)
        .unwrap();
    assert_eq!(emptied.groups.len(), 1);
}

/// A described config's synonyms as `kafka-configs.sh` prints them: `SOURCE:name=value`.
fn synonyms_of(configs: &[DescribedConfig], name: &str) -> Vec<String> {
    let config = configs
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("{name} is not described"));
    config
        .synonyms
        .iter()
        .map(|s| {
            let source = match s.source {
                DescribedSource::Topic => "DYNAMIC_TOPIC_CONFIG".to_string(),
                DescribedSource::Group => "GROUP_CONFIG".to_string(),
                DescribedSource::Broker(source) => source.to_string(),
            };
            format!(
                "{source}:{}={}",
                s.name,
                s.value.as_deref().unwrap_or("null")
            )
        })
        .collect()
}

/// Kafka 4.3.1's `ConfigHelper.createTopicConfigEntry`, as its broker answers
/// `kafka-configs.sh --describe --all` on a topic: the override, then the first broker
/// synonym's values level by level from its own first one on; no self-synonym, none twice.
#[test]
fn topic_synonyms_are_kafkas() {
    let b = load(&[("log.roll.hours", "2")]).unwrap();
    let t = TopicOverrides::default()
        .apply_command("cleanup.policy=delete\nretention.ms=60000", &b)
        .unwrap();
    let described = t.describe(&b);
    assert_eq!(
        synonyms_of(&described, "cleanup.policy"),
        [
            "DYNAMIC_TOPIC_CONFIG:cleanup.policy=delete",
            "DEFAULT_CONFIG:log.cleanup.policy=delete"
        ]
    );
    // log.retention.ms is null, so the hours that supply the value are no synonym.
    assert_eq!(
        synonyms_of(&described, "retention.ms"),
        ["DYNAMIC_TOPIC_CONFIG:retention.ms=60000"]
    );
    assert_eq!(
        synonyms_of(&described, "compression.gzip.level"),
        ["DEFAULT_CONFIG:compression.gzip.level=-1"]
    );
    assert_eq!(
        synonyms_of(&described, "delete.retention.ms"),
        ["DEFAULT_CONFIG:log.cleaner.delete.retention.ms=86400000"]
    );
    // Neither log.flush.scheduler.interval.ms nor log.roll.hours while the first synonym
    // is unset; the value is still the one they give, its source Kafka's DEFAULT_CONFIG.
    assert!(synonyms_of(&described, "flush.ms").is_empty());
    let segment_ms = described.iter().find(|c| c.name == "segment.ms").unwrap();
    assert!(segment_ms.synonyms.is_empty());
    assert_eq!(segment_ms.value.as_deref(), Some("7200000"));
    assert_eq!(
        segment_ms.source,
        DescribedSource::Broker(ConfigSource::StaticBroker)
    );
    assert_eq!(
        segment_ms.kafka_source(),
        DescribedSource::Broker(ConfigSource::Default)
    );
    // Configs without a broker synonym have none at all.
    for name in [
        "follower.replication.throttled.replicas",
        "leader.replication.throttled.replicas",
        "remote.storage.enable",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
    ] {
        assert!(synonyms_of(&described, name).is_empty(), "{name}");
    }
    assert_eq!(
        synonyms_of(&described, "local.retention.ms"),
        ["DEFAULT_CONFIG:log.local.retention.ms=-2"]
    );
    // Once the first synonym is set, the ones it stands for follow it.
    let b = load(&[("log.roll.ms", "3600000"), ("log.roll.hours", "2")]).unwrap();
    assert_eq!(
        synonyms_of(&TopicOverrides::default().describe(&b), "segment.ms"),
        [
            "STATIC_BROKER_CONFIG:log.roll.ms=3600000",
            "STATIC_BROKER_CONFIG:log.roll.hours=2",
            "DEFAULT_CONFIG:log.roll.hours=168"
        ]
    );
}

/// Kafka's topic configs kpfs has nothing to apply to are listed with Kafka's defaults
/// (RF=1: one replica, no tiered storage), validated as Kafka does, and marked.
#[test]
fn kafkas_replication_and_tiered_storage_topic_configs_have_no_effect() {
    let described = TopicOverrides::default().describe(&broker());
    let value = |name: &str| {
        let c = described.iter().find(|c| c.name == name).unwrap();
        assert!(c.no_effect, "{name}");
        c.value.clone().unwrap()
    };
    assert_eq!(value("min.insync.replicas"), "1");
    assert_eq!(value("local.retention.bytes"), "-2");
    assert_eq!(value("leader.replication.throttled.replicas"), "");
    assert_eq!(value("unclean.leader.election.enable"), "false");
    assert!(apply("leader.replication.throttled.replicas=*").is_ok());
    assert!(apply("follower.replication.throttled.replicas=0:1, 0:2,").is_ok());
    assert_eq!(
        error("follower.replication.throttled.replicas=0:1, x,"),
        "Invalid value [0:1, x, ] for configuration follower.replication.throttled.replicas: \
         follower.replication.throttled.replicas must be the literal '*' or a list of replicas \
         in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
    );
    assert_eq!(
        error("leader.replication.throttled.replicas=*,0:1"),
        "Invalid value [*, 0:1] for configuration leader.replication.throttled.replicas: \
         leader.replication.throttled.replicas must be the literal '*' or a list of replicas \
         in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
    );
    assert_eq!(
        error("min.insync.replicas=0"),
        "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"
    );
    assert!(apply("min.insync.replicas=2\nremote.storage.enable=false").is_ok());
    assert_eq!(
        error("remote.storage.enable=true"),
        "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."
    );
}

/// kpfs's own topic configs are marked, so DescribeConfigs lists them only when named.
#[test]
fn kpfs_own_topic_configs_are_marked() {
    let own: Vec<&str> = TopicOverrides::default()
        .describe(&broker())
        .into_iter()
        .filter(|c| c.kpfs_own)
        .map(|c| c.name)
        .collect();
    assert_eq!(
        own,
        [
            "internal.segment.bytes",
            "key.separator",
            "null.marker",
            "parse.key"
        ]
    );
}

/// Kafka 4.x's controller with ELR on: a cluster-wide min.insync.replicas (the static
/// value or 1) that cannot be removed, and none per broker.
#[test]
fn the_cluster_keeps_a_min_insync_replicas_as_kafka_with_elr() {
    let mut b = broker();
    assert!(b.ensure_cluster_min_insync_replicas());
    assert!(!b.ensure_cluster_min_insync_replicas());
    assert_eq!(b.dynamic_properties(), "min.insync.replicas=1\n");
    let mut two = load(&[("min.insync.replicas", "2")]).unwrap();
    assert!(two.ensure_cluster_min_insync_replicas());
    assert_eq!(two.dynamic_properties(), "min.insync.replicas=2\n");
    let default_level = b.describe(BrokerLevel::ClusterDefault);
    assert_eq!(
        synonyms_of(&default_level, "min.insync.replicas"),
        ["DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=1"]
    );
    assert_eq!(
        synonyms_of(
            &TopicOverrides::default().describe(&b),
            "min.insync.replicas"
        ),
        [
            "DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=1",
            "DEFAULT_CONFIG:min.insync.replicas=1"
        ]
    );
    let refused = |text: &str| b.apply_dynamic(text).unwrap_err().to_string();
    assert_eq!(
        refused("-min.insync.replicas"),
        "Cluster-level min.insync.replicas cannot be removed while ELR is enabled."
    );
    assert_eq!(
        refused("# per-broker overrides\nmin.insync.replicas=2"),
        "Broker-level min.insync.replicas cannot be altered while ELR is enabled."
    );
    assert!(b.apply_dynamic("min.insync.replicas=2").is_ok());
    // `>` to `.kpfs/config` replaces what may go and keeps it unless it names it; the
    // wire's AlterConfigs of the level, which replaces the level, does not.
    let rewritten = b
        .apply_change(&write_back(
            "log.cleaner.backoff.ms=999\n",
            ConfigScope::Broker,
        ))
        .unwrap();
    assert_eq!(
        rewritten.dynamic_properties(),
        "log.cleaner.backoff.ms=999\nmin.insync.replicas=1\n"
    );
    let rewritten = b
        .apply_change(&write_back("min.insync.replicas=3\n", ConfigScope::Broker))
        .unwrap();
    assert_eq!(rewritten.dynamic_properties(), "min.insync.replicas=3\n");
    let mut level = ConfigChange::broker_level(BrokerLevel::ClusterDefault, true);
    level.write(b"log.cleaner.backoff.ms=999\n");
    assert_eq!(
        b.apply_change(&level).unwrap_err().to_string(),
        "Cluster-level min.insync.replicas cannot be removed while ELR is enabled."
    );
}

/// The cluster-wide resource's synonyms are its own level's only, and a null broker
/// default is null on the wire (`.kpfs/config` still says what it means).
#[test]
fn broker_entries_are_kafkas() {
    let b = broker()
        .apply_dynamic("log.cleaner.backoff.ms=20000")
        .unwrap();
    assert_eq!(
        synonyms_of(
            &b.describe(BrokerLevel::ClusterDefault),
            "log.cleaner.backoff.ms"
        ),
        ["DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.backoff.ms=20000"]
    );
    let this_broker = b.describe(BrokerLevel::ThisBroker);
    let retention = this_broker
        .iter()
        .find(|c| c.name == "log.retention.ms")
        .unwrap();
    assert_eq!(retention.value, None);
    assert!(retention.synonyms.is_empty());
    assert!(b
        .render()
        .contains("\n# log.retention.ms=604800000 (DEFAULT_CONFIG:log.retention.hours=168)\n"));
}
