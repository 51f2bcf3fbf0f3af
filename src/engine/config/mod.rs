//! Topic and broker configuration: names, types, defaults, validators, broker synonyms and
//! error texts as in Apache Kafka 4.x (`LogConfig`, `ServerLogConfigs`, `CleanerConfig`,
//! `KafkaConfig`, `DynamicBrokerConfig`), plus kpfs's console-producer-style topic configs
//! (`parse.key`, `key.separator`, `null.marker`).
//!
//! Every value is kept twice: the text the user wrote (so rendered and persisted configs
//! show what was set) and its parsed form (so lookups never parse again and cannot fail).

mod broker;
mod change;
mod def;
mod error;
mod properties;
mod render;
mod topic;
mod value;

pub use broker::BrokerConfig;
pub(crate) use broker::ConfigSource;
pub(crate) use change::{ConfigChange, ConfigScope};
pub(crate) use def::TopicKey;
pub(crate) use error::ConfigError;
pub(crate) use render::{DescribedConfig, DescribedSource};
#[cfg(test)]
pub(crate) use topic::TopicCompression;
pub(crate) use topic::TopicConfig;
pub use topic::TopicOverrides;

#[cfg(test)]
mod tests;
