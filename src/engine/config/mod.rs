//! Topic and broker configuration: names, types, defaults, validators, broker synonyms and
//! error texts as in Apache Kafka 4.x (`LogConfig`, `ServerLogConfigs`, `CleanerConfig`,
//! `KafkaConfig`, `DynamicBrokerConfig`) and group configuration (`GroupConfig`), plus kpfs's console-producer-style topic configs
//! (`parse.key`, `key.separator`, `null.marker`).
//!
//! Every value is kept twice: the text the user wrote (so rendered and persisted configs
//! show what was set) and its parsed form (so lookups never parse again and cannot fail).

mod broker;
mod change;
mod def;
mod error;
mod group;
mod kafka_broker_configs;
mod kafka_group_configs;
mod listeners;
mod properties;
mod render;
mod topic;
mod value;

pub(crate) use broker::ConfigSource;
pub use broker::{BrokerConfig, GroupSettings, ListenerSettings, TransactionSettings};
pub(crate) use change::{ConfigChange, ConfigScope, OVERRIDES_HEADER, THIS_BROKER_HEADER};
pub(crate) use def::BrokerLevel;
pub(crate) use def::{is_list_config, TopicKey};
pub(crate) use error::ConfigError;
pub(crate) use group::GroupConfigs;
pub(crate) use properties::parse_properties;
pub(crate) use render::{DescribedConfig, DescribedSource, DescribedType};
#[cfg(test)]
pub(crate) use topic::TopicCompression;
pub use topic::TopicOverrides;
pub(crate) use topic::{TimestampType, TopicConfig};

#[cfg(test)]
mod tests;
