//! Group configs (Kafka's `GroupConfig`): each group's overrides, checked as Kafka's
//! `GroupConfig.validate` checks them against the broker's `group.*` configs, and their
//! persisted form. Kafka keeps them for any group name, whether or not the group exists,
//! and keeps them when the group is deleted; so does kpfs.

use std::collections::BTreeMap;

use super::broker::BrokerConfig;
use super::change::ConfigChange;
use super::def::{BrokerName, GroupName, GROUP_BOUNDS, GROUP_SESSION_OVER_HEARTBEAT};
use super::error::{ConfigError, GroupRule};
use super::properties::{escape, read_persisted, write_persisted};
use super::value::{builtin, parse_setting, Setting, Value};

/// The persisted line that starts a group's overrides (no group config is named so).
const GROUP_LINE_KEY: &str = "group";

/// One group's overrides.
pub(super) type GroupOverrides = BTreeMap<GroupName, Setting>;

/// Every group's overrides, by group id; a group without overrides is not kept.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct GroupConfigs {
    pub(super) groups: BTreeMap<String, GroupOverrides>,
}

impl GroupConfigs {
    /// The group configs after `change` (a group change) to `group`: all of it, checked
    /// across configs against the broker's bounds, or nothing.
    pub(crate) fn apply_change(
        &self,
        group: &str,
        change: &ConfigChange,
        broker: &BrokerConfig,
    ) -> Result<GroupConfigs, ConfigError> {
        let current = self.groups.get(group).cloned().unwrap_or_default();
        let overrides = change.applied_to_group(&current)?;
        check_rules(&overrides, broker)?;
        let mut next = self.clone();
        if overrides.is_empty() {
            next.groups.remove(group);
        } else {
            next.groups.insert(group.to_string(), overrides);
        }
        Ok(next)
    }

    /// The persisted form: per group a `group=ID` line, then its overrides; values (and
    /// ids) escaped.
    pub(crate) fn properties(&self) -> String {
        let mut text = String::new();
        for (group, overrides) in &self.groups {
            text.push_str(&format!("{GROUP_LINE_KEY}={}\n", escape(group)));
            text.push_str(&write_persisted(overrides.iter()));
        }
        text
    }

    /// Mount time: the persisted group configs. Names and values are checked as when
    /// they were set; the bounds are not, as Kafka checks them only when a config changes.
    pub(crate) fn from_properties(text: &str) -> Result<GroupConfigs, ConfigError> {
        let mut configs = GroupConfigs::default();
        let mut current: Option<&mut GroupOverrides> = None;
        for (key, raw) in read_persisted(text)? {
            if key == GROUP_LINE_KEY {
                current = Some(configs.groups.entry(raw).or_default());
                continue;
            }
            let Some(overrides) = current.as_deref_mut() else {
                return Err(ConfigError::CommandSyntax {
                    line: format!("{key}={raw}"),
                });
            };
            let name = GroupName::known(&key)?;
            overrides.insert(name, parse_setting(name.def(), &raw)?);
        }
        configs.groups.retain(|_, overrides| !overrides.is_empty());
        Ok(configs)
    }

    pub(super) fn overrides(&self, group: &str) -> Option<&GroupOverrides> {
        self.groups.get(group)
    }
}

/// The value a group config has for a group: its override, else its broker synonym's
/// value in force, else its default.
fn value_in_force(
    name: GroupName,
    overrides: &GroupOverrides,
    broker: &BrokerConfig,
) -> Option<Value> {
    match (overrides.get(&name), name.broker_synonym()) {
        (Some(setting), _) => Some(setting.value.clone()),
        (None, Some(synonym)) => broker.value_of(synonym),
        (None, None) => builtin(name.def()),
    }
}

/// `GroupConfig.validateValues`: the bounds the broker's configs set, then each session
/// timeout above its heartbeat interval, on the values the group would have.
fn check_rules(overrides: &GroupOverrides, broker: &BrokerConfig) -> Result<(), ConfigError> {
    let group_int = |name: &str| -> i64 {
        let name = GroupName::known(name).expect("a bounded group config is a group config");
        value_in_force(name, overrides, broker)
            .and_then(|v| v.as_i64())
            .expect("a bounded group config is an integer with a default")
    };
    let broker_int = |name: &str| -> i64 {
        let name = BrokerName::known(name).expect("a group bound is a broker config");
        broker
            .value_of(name)
            .and_then(|v| v.as_i64())
            .expect("a group bound is an integer broker config with a default")
    };
    for &(name, min, max) in GROUP_BOUNDS {
        let value = group_int(name);
        if let Some(min) = min.filter(|&min| value < broker_int(min)) {
            return Err(ConfigError::Group(GroupRule::BelowMin { name, min }));
        }
        if value > broker_int(max) {
            return Err(ConfigError::Group(GroupRule::AboveMax { name, max }));
        }
    }
    for &(session, heartbeat) in GROUP_SESSION_OVER_HEARTBEAT {
        if group_int(session) <= group_int(heartbeat) {
            return Err(ConfigError::Group(GroupRule::SessionNotAboveHeartbeat {
                session,
                heartbeat,
            }));
        }
    }
    Ok(())
}
