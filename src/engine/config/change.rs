//! `ConfigChange`: what one open-to-close of a config file writes, checked line by line
//! as it arrives and applied whole (or not at all) at close.

use std::collections::BTreeMap;

use super::def::{BrokerLevel, BrokerName, GroupName, TopicKey};
use super::error::ConfigError;
use super::properties::parse_command_line;
use super::value::Setting;
use crate::engine::limits::MAX_CONFIG_LINE_BYTES;

/// Which config file a change is written to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ConfigScope {
    /// A topic's `config`: topic config names.
    Topic,
    /// `.kpfs/config`: dynamic broker config names, at the cluster-wide default level
    /// until a [`THIS_BROKER_HEADER`] line (and again after an [`OVERRIDES_HEADER`] one).
    Broker,
    /// A group's configs (a group resource of the Kafka protocol): group config names.
    Group,
}

/// The line of `.kpfs/config` (and of its persisted file) after which overrides are this
/// broker's rather than the cluster-wide default's.
pub(crate) const THIS_BROKER_HEADER: &str = "# per-broker overrides";
/// The first line of a rendered config file, after which overrides are the cluster-wide
/// default's in `.kpfs/config`.
pub(crate) const OVERRIDES_HEADER: &str = "# overrides";

/// Configured broker values by config (one level's overrides, or the static values).
pub(super) type Settings = BTreeMap<BrokerName, Setting>;

/// The overrides one change sets (`Some`) or removes (`None`), by config.
pub(super) type BrokerEdits = BTreeMap<BrokerName, Option<Setting>>;

/// A topic config a change sets (`Some(value)`) or removes (`None`).
pub(crate) type TopicEdit<'a> = (TopicKey, Option<&'a str>);

/// A `.kpfs/config` change's edits by level ([`ConfigChange::broker_edits`]).
pub(crate) struct BrokerLevelEdits<'a> {
    pub(crate) replace: bool,
    pub(crate) cluster_default: Vec<(&'static str, Option<&'a str>)>,
    pub(crate) this_broker: Vec<(&'static str, Option<&'a str>)>,
}

/// Which overrides a change replaces rather than edits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Replace {
    /// None: the change edits the keys it names (`>>`, IncrementalAlterConfigs).
    Nothing,
    /// Every override of the file (`>`).
    All,
    /// One level of broker overrides (AlterConfigs of one broker resource).
    Level(BrokerLevel),
}

/// The edits of a change, keyed by the configs of its scope: `Some` sets, `None` removes
/// the override. A later line for a key replaces the earlier one, as applying them in
/// order would.
#[derive(Clone, Debug)]
pub(super) enum Edits {
    Topic(BTreeMap<TopicKey, Option<Setting>>),
    Group(BTreeMap<GroupName, Option<Setting>>),
    Broker {
        cluster_default: BrokerEdits,
        this_broker: BrokerEdits,
        /// The level the next line edits.
        level: BrokerLevel,
    },
}

impl Edits {
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        match self {
            Edits::Topic(edits) => edits.len(),
            Edits::Group(edits) => edits.len(),
            Edits::Broker {
                cluster_default,
                this_broker,
                ..
            } => cluster_default.len() + this_broker.len(),
        }
    }
}

/// The lines written to a config file between its open and its close, each checked as
/// it arrives. The change applies as a whole at close, or nothing of it does when any
/// line was refused (docs/SEMANTICS.md). Memory is bounded by the number of config
/// names: a later line for a key replaces the earlier one, as applying them in order
/// would.
#[derive(Clone, Debug)]
pub(crate) struct ConfigChange {
    pub(super) scope: ConfigScope,
    /// The file was emptied first (`>`, O_TRUNC): the lines are the whole set of
    /// overrides. Otherwise (`>>`) they change only the keys they name.
    replace: Replace,
    pub(super) edits: Edits,
    /// The start of a line whose `\n` has not arrived yet.
    pub(super) fragment: Vec<u8>,
    /// The line being written was refused as too long: its bytes are dropped up to its
    /// `\n`.
    overlong: bool,
    lines: usize,
    refused: usize,
    first_refused: Option<usize>,
}

impl ConfigChange {
    pub(crate) fn new(scope: ConfigScope) -> ConfigChange {
        ConfigChange {
            scope,
            replace: Replace::Nothing,
            edits: match scope {
                ConfigScope::Topic => Edits::Topic(BTreeMap::new()),
                ConfigScope::Group => Edits::Group(BTreeMap::new()),
                ConfigScope::Broker => Edits::Broker {
                    cluster_default: BTreeMap::new(),
                    this_broker: BTreeMap::new(),
                    level: BrokerLevel::ClusterDefault,
                },
            },
            fragment: Vec::new(),
            overlong: false,
            lines: 0,
            refused: 0,
            first_refused: None,
        }
    }

    /// A whole change given as one text that changes the keys it names (`>>`), e.g. the
    /// engine's one-shot updates; the first refused line's reason is the error.
    pub(crate) fn from_text(scope: ConfigScope, text: &str) -> Result<ConfigChange, ConfigError> {
        let mut change = ConfigChange::new(scope);
        let mut errors = change.write(text.as_bytes());
        errors.extend(change.end_lines());
        match merge_refusals(errors).into_iter().next() {
            Some(first) => Err(first),
            None => Ok(change),
        }
    }

    /// The file was truncated to zero bytes: what was written before is gone, and what
    /// follows is the whole set of overrides.
    pub(crate) fn truncate(&mut self) {
        *self = ConfigChange {
            replace: Replace::All,
            ..ConfigChange::new(self.scope)
        };
    }

    /// A change to one level of broker overrides (a broker resource of the Kafka
    /// protocol): its lines edit that level, and with `replace` are its whole set.
    pub(crate) fn broker_level(level: BrokerLevel, replace: bool) -> ConfigChange {
        let mut change = ConfigChange::new(ConfigScope::Broker);
        if let Edits::Broker { level: at, .. } = &mut change.edits {
            *at = level;
        }
        if replace {
            change.replace = Replace::Level(level);
        }
        change
    }

    /// Takes the bytes of one write(2) and checks every line it completes at once.
    /// Returns the reasons of the refused lines (none: every line was accepted); static
    /// broker configs named in one write are refused together, as Kafka refuses one
    /// `AlterConfigs` request.
    pub(crate) fn write(&mut self, bytes: &[u8]) -> Vec<ConfigError> {
        let mut errors = Vec::new();
        let mut rest = bytes;
        while let Some(nl) = memchr::memchr(b'\n', rest) {
            if self.overlong {
                self.overlong = false;
            } else if self.fragment.is_empty() {
                errors.extend(self.take_line(&rest[..nl]).err());
            } else {
                let mut line = std::mem::take(&mut self.fragment);
                line.extend_from_slice(&rest[..nl]);
                errors.extend(self.take_line(&line).err());
            }
            rest = &rest[nl + 1..];
        }
        if self.overlong {
            // The rest of a refused line: nothing to keep.
        } else if self.fragment.len() + rest.len() > MAX_CONFIG_LINE_BYTES {
            self.fragment.clear();
            self.overlong = true;
            self.lines += 1;
            errors.push(self.refuse_line(ConfigError::CommandSyntax {
                line: format!("({} bytes or more)", MAX_CONFIG_LINE_BYTES + 1),
            }));
        } else {
            self.fragment.extend_from_slice(rest);
        }
        merge_refusals(errors)
    }

    /// How many lines the change took so far (comments and refused lines included).
    pub(crate) fn lines(&self) -> usize {
        self.lines
    }

    /// Whether a line of the change was refused: then nothing of it applies.
    pub(crate) fn is_refused(&self) -> bool {
        self.first_refused.is_some()
    }

    /// Refuses the last line taken: every line was valid alone, but with it the lines so
    /// far make a config the checks across keys refuse (the caller ran them against the
    /// config in force), so nothing of the change applies.
    pub(crate) fn refuse_last_line(&mut self) {
        self.refused += 1;
        self.first_refused.get_or_insert(self.lines);
    }

    /// The writer closed: an unterminated last line is a line too.
    pub(crate) fn end_lines(&mut self) -> Vec<ConfigError> {
        if self.fragment.is_empty() {
            return Vec::new();
        }
        let line = std::mem::take(&mut self.fragment);
        self.take_line(&line).err().into_iter().collect()
    }

    fn take_line(&mut self, line: &[u8]) -> Result<(), ConfigError> {
        self.lines += 1;
        self.edit(line).map_err(|e| self.refuse_line(e))
    }

    /// Counts the line just taken as refused, for `e`.
    fn refuse_line(&mut self, e: ConfigError) -> ConfigError {
        self.refused += 1;
        self.first_refused.get_or_insert(self.lines);
        e
    }

    /// Takes the edit a line makes: a config of the change's scope and its new setting
    /// (`None` removes the override); a comment or blank line makes none.
    fn edit(&mut self, line: &[u8]) -> Result<(), ConfigError> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = std::str::from_utf8(line).map_err(|_| ConfigError::NotText)?;
        if let Edits::Broker { level, .. } = &mut self.edits {
            match line.trim_end() {
                THIS_BROKER_HEADER => *level = BrokerLevel::ThisBroker,
                OVERRIDES_HEADER => *level = BrokerLevel::ClusterDefault,
                _ => {}
            }
        }
        let Some(op) = parse_command_line(line)? else {
            return Ok(());
        };
        match &mut self.edits {
            Edits::Topic(edits) => {
                let key = TopicKey::known(op.key())?;
                edits.insert(key, op.setting(key.def())?);
            }
            Edits::Group(edits) => {
                let name = GroupName::known(op.key())?;
                edits.insert(name, op.setting(name.def())?);
            }
            Edits::Broker {
                cluster_default,
                this_broker,
                level,
            } => {
                let name = BrokerName::known(op.key())?;
                let refusal = name.refusal_at(*level, vec![name.name().to_string()]);
                // Kafka refuses static and listener-only configs before it looks at values,
                // and per-broker ones at the default level after.
                let per_broker_only = matches!(refusal, Some(ConfigError::PerBrokerOnly { .. }));
                if let Some(refusal) = refusal.clone().filter(|_| !per_broker_only) {
                    return Err(refusal);
                }
                let setting = op.setting(name.def())?;
                if let Some(refusal) = refusal {
                    return Err(refusal);
                }
                let edits = match level {
                    BrokerLevel::ClusterDefault => cluster_default,
                    BrokerLevel::ThisBroker => this_broker,
                };
                edits.insert(name, setting);
            }
        }
        Ok(())
    }

    /// Why none of the accepted edits may apply, if a line was refused.
    fn check_accepted(&self) -> Result<(), ConfigError> {
        match self.first_refused {
            None => Ok(()),
            Some(first_line) => Err(ConfigError::ChangeRefused {
                refused: self.refused,
                lines: self.lines,
                first_line,
            }),
        }
    }

    /// A topic's overrides with this topic change applied.
    pub(super) fn applied_to_topic(
        &self,
        values: &BTreeMap<TopicKey, Setting>,
    ) -> Result<BTreeMap<TopicKey, Setting>, ConfigError> {
        let Edits::Topic(edits) = &self.edits else {
            panic!("a topic config change, got a {:?} one", self.scope);
        };
        self.applied(edits, values, self.replace == Replace::All)
    }

    /// A topic change as edits by config name (`Some(value)` sets, `None` removes the
    /// override), and whether they replace every override (`>`) rather than edit the
    /// ones they name: what a store that keeps configs elsewhere (a Kafka cluster) applies.
    pub(crate) fn topic_edits(&self) -> Result<(bool, Vec<TopicEdit<'_>>), ConfigError> {
        let Edits::Topic(edits) = &self.edits else {
            panic!("a topic config change, got a {:?} one", self.scope);
        };
        self.check_accepted()?;
        let edits = edits
            .iter()
            .map(|(key, setting)| (*key, setting.as_ref().map(|s| s.text.as_str())))
            .collect();
        Ok((self.replace == Replace::All, edits))
    }

    /// A broker change from `.kpfs/config` as edits for another store to make: whether the
    /// named overrides replace all of both levels (`>`), then the cluster-wide level's and
    /// this broker's edits by Kafka's names, each set (`Some`) or removed (`None`).
    pub(crate) fn broker_edits(&self) -> Result<BrokerLevelEdits<'_>, ConfigError> {
        let (cluster_default, this_broker) = self.broker_levels();
        self.check_accepted()?;
        fn named(edits: &BrokerEdits) -> Vec<(&'static str, Option<&str>)> {
            edits
                .iter()
                .map(|(name, setting)| (name.name(), setting.as_ref().map(|s| s.text.as_str())))
                .collect()
        }
        Ok(BrokerLevelEdits {
            replace: self.replace == Replace::All,
            cluster_default: named(cluster_default),
            this_broker: named(this_broker),
        })
    }

    /// A broker change's edits: the cluster-wide level's, this broker's.
    fn broker_levels(&self) -> (&BrokerEdits, &BrokerEdits) {
        let Edits::Broker {
            cluster_default,
            this_broker,
            ..
        } = &self.edits
        else {
            panic!("a broker config change, got a {:?} one", self.scope);
        };
        (cluster_default, this_broker)
    }

    /// A group's overrides with this group change applied.
    pub(super) fn applied_to_group(
        &self,
        values: &BTreeMap<GroupName, Setting>,
    ) -> Result<BTreeMap<GroupName, Setting>, ConfigError> {
        let Edits::Group(edits) = &self.edits else {
            panic!("a group config change, got a {:?} one", self.scope);
        };
        self.applied(edits, values, self.replace == Replace::All)
    }

    /// The broker's dynamic overrides, cluster-wide and this broker's, with this broker
    /// change applied.
    /// Whether this is a rewrite of the whole `.kpfs/config` (`>`, a renamed draft) that
    /// does not name the cluster-wide `name`.
    pub(super) fn rewrite_leaves_out(&self, name: BrokerName) -> bool {
        let Edits::Broker {
            cluster_default, ..
        } = &self.edits
        else {
            return false;
        };
        matches!(self.replace, Replace::All) && !cluster_default.contains_key(&name)
    }

    pub(super) fn applied_to_broker(
        &self,
        cluster_values: &Settings,
        broker_values: &Settings,
    ) -> Result<(Settings, Settings), ConfigError> {
        let (cluster_default, this_broker) = self.broker_levels();
        let replaces =
            |level| matches!(self.replace, Replace::All) || self.replace == Replace::Level(level);
        Ok((
            self.applied(
                cluster_default,
                cluster_values,
                replaces(BrokerLevel::ClusterDefault),
            )?,
            self.applied(
                this_broker,
                broker_values,
                replaces(BrokerLevel::ThisBroker),
            )?,
        ))
    }

    fn applied<K: Ord + Copy>(
        &self,
        edits: &BTreeMap<K, Option<Setting>>,
        values: &BTreeMap<K, Setting>,
        replace: bool,
    ) -> Result<BTreeMap<K, Setting>, ConfigError> {
        self.check_accepted()?;
        let mut next = if replace {
            BTreeMap::new()
        } else {
            values.clone()
        };
        for (key, setting) in edits {
            match setting {
                Some(setting) => next.insert(*key, setting.clone()),
                None => next.remove(key),
            };
        }
        Ok(next)
    }
}

/// The refusals of one write as Kafka reports an `AlterConfigs` request's: the configs
/// refused by name in one error per kind (static ones first, then listener-only ones, in
/// the order written), then the other errors, then the per-broker-only configs (Kafka
/// checks the level after the values), at the place of the first of each kind.
pub(super) fn merge_refusals(errors: Vec<ConfigError>) -> Vec<ConfigError> {
    let names_of = |e: &ConfigError| match e {
        ConfigError::NotDynamic { .. } => Some(0),
        ConfigError::ListenerPrefixOnly { .. } => Some(1),
        ConfigError::PerBrokerOnly { .. } => Some(3),
        _ => None,
    };
    let mut merged: Vec<(u8, ConfigError)> = Vec::with_capacity(errors.len());
    for error in errors {
        let Some(kind) = names_of(&error) else {
            merged.push((2, error));
            continue;
        };
        match merged.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, into)) => {
                if let (
                    ConfigError::NotDynamic { names: all }
                    | ConfigError::ListenerPrefixOnly { names: all }
                    | ConfigError::PerBrokerOnly { names: all },
                    ConfigError::NotDynamic { names }
                    | ConfigError::ListenerPrefixOnly { names }
                    | ConfigError::PerBrokerOnly { names },
                ) = (into, error)
                {
                    for name in names {
                        if !all.contains(&name) {
                            all.push(name);
                        }
                    }
                }
            }
            None => merged.push((kind, error)),
        }
    }
    merged.sort_by_key(|(kind, _)| *kind);
    merged.into_iter().map(|(_, e)| e).collect()
}
