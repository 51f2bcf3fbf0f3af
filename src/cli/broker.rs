//! What `kpfs mount` and `kpfs serve` share: the data directory made ready, the broker
//! configuration read, the engine opened, and the Kafka listener started from the broker
//! config (`listeners` and the configs around it) with the data directory's cluster id.

use std::fs::DirBuilder;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::args::BrokerPlan;
use super::error::{io_error, CliError};
use super::rlimit;
use crate::engine::{BrokerConfig, Engine, EngineOptions, ListenerSettings, SystemClock};
use crate::kafka::{Listener, ListenerConfig, ListenerHandle};

/// Creates the data directory if missing (mode 0700) and returns its canonical path.
pub(super) fn prepare_data_dir(data_dir: &Path) -> Result<PathBuf, CliError> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(data_dir)
        .map_err(|e| io_error(format!("data directory {}", data_dir.display()), e))?;
    data_dir
        .canonicalize()
        .map_err(|e| io_error(data_dir.display(), e))
}

/// `--config FILE` then the `--override`s.
pub(super) fn load_broker_config(plan: &BrokerPlan) -> Result<BrokerConfig, CliError> {
    let properties = plan
        .config
        .as_ref()
        .map(|path| {
            std::fs::read_to_string(path)
                .map_err(|e| io_error(format!("--config {}", path.display()), e))
        })
        .transpose()?;
    BrokerConfig::load(properties.as_deref(), &plan.overrides).map_err(invalid_config)
}

pub(super) fn invalid_config(e: impl std::fmt::Display) -> CliError {
    CliError::new(format!("invalid broker configuration: {e}"))
}

/// Opens the engine with its background threads, the open-file limit raised first.
pub(super) fn open_engine(
    data_dir: &Path,
    broker: BrokerConfig,
    transaction_version: Option<i16>,
) -> Result<Arc<Engine>, CliError> {
    match rlimit::raise_open_file_limit() {
        Ok(open_files) => tracing::info!(open_files, "open-file limit"),
        Err(e) => tracing::warn!(error = %e, "could not raise the open-file limit"),
    }
    let engine = Engine::open(
        data_dir,
        broker,
        Arc::new(SystemClock),
        EngineOptions {
            background_threads: true,
            transaction_version,
        },
    )
    .map_err(|e| CliError::new(e.to_string()))?;
    Ok(Arc::new(engine))
}

/// Starts the Kafka listener when `listeners` is set; `None` when it is not (no socket).
pub(super) fn start_listener(engine: &Arc<Engine>) -> Result<Option<ListenerHandle>, CliError> {
    let Some(settings) = engine.listener_settings() else {
        return Ok(None);
    };
    let config = listener_config(&settings, engine.cluster_id())?;
    if !config.bind.ip().is_loopback() {
        tracing::warn!(
            "the Kafka listener on {} accepts PLAINTEXT connections from other machines: \
             no authentication and no encryption (SASL and TLS are not supported)",
            config.bind
        );
    }
    let bind = config.bind;
    Listener::start(engine.clone(), config)
        .map(Some)
        .map_err(|e| io_error(format!("cannot listen on {bind}"), e.into_io_error()))
}

/// The listener's configuration: the bind address resolved, the advertised host filled
/// in (an empty one is the machine's name, as Kafka advertises its canonical host name).
fn listener_config(
    settings: &ListenerSettings,
    cluster_id: &str,
) -> Result<ListenerConfig, CliError> {
    let port = settings.listener.port;
    let bind = match &settings.listener.host {
        // Kafka binds the wildcard address for an empty host.
        None => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port),
        Some(host) => (host.as_str(), port)
            .to_socket_addrs()
            .map_err(|e| io_error(format!("cannot resolve the listener host {host}"), e))?
            .next()
            .ok_or_else(|| CliError::new(format!("the listener host {host} has no address")))?,
    };
    let advertised_host = settings
        .advertised_host()
        .map_err(|e| io_error("gethostname", e))?;
    Ok(ListenerConfig {
        bind,
        advertised_host,
        advertised_port: settings.advertised.port,
        node_id: settings.node_id,
        cluster_id: cluster_id.to_string(),
        socket_request_max_bytes: settings.socket_request_max_bytes,
        max_connections: settings.max_connections,
        connections_max_idle_ms: settings.connections_max_idle_ms.unwrap_or(u64::MAX),
        auto_create_topics: settings.auto_create_topics,
        max_request_partition_size_limit: settings.max_request_partition_size_limit,
        delete_topic_enable: settings.delete_topic_enable,
    })
}
