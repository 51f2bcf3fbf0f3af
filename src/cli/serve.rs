//! `kpfs serve`: the engine and the Kafka listener without a mount, for machines
//! without `/dev/fuse` (containers, CI runners). In the foreground, logging to stderr (and
//! `DATA_DIR/kpfs.log`), until a shutdown signal; then the listener closes and the engine
//! shuts down cleanly (its clean-shutdown marker written).

use super::args::{BrokerPlan, ServeArgs};
use super::broker::{
    invalid_config, load_broker_config, open_engine, prepare_data_dir, start_listener,
};
use super::error::CliError;
use super::logging::{init_logging, FATAL_TARGET};
use super::signals::{block_shutdown_signals, spawn_signal_thread};

/// Where `kpfs serve` listens unless `listeners` is configured: Kafka's port, on the
/// loopback interface only, since PLAINTEXT has no authentication.
const SERVE_LISTENERS: &str = "PLAINTEXT://127.0.0.1:9092";

pub(super) fn serve(args: ServeArgs) -> Result<(), CliError> {
    block_shutdown_signals()?;
    let plan = BrokerPlan::new(args.broker)?;
    let data_dir = prepare_data_dir(&plan.data_dir)?;
    init_logging(&data_dir, true)?;
    let served = start_serving(&plan, &data_dir);
    if let Err(e) = &served {
        tracing::error!(target: FATAL_TARGET, "{e}");
    }
    served
}

fn start_serving(plan: &BrokerPlan, data_dir: &std::path::Path) -> Result<(), CliError> {
    let broker = load_broker_config(plan)?
        .with_default_listeners(SERVE_LISTENERS)
        .map_err(invalid_config)?;
    let engine = open_engine(data_dir, broker, plan.transaction_version)?;
    let listener = match start_listener(&engine) {
        Ok(listener) => listener.expect("serve always has a listener"),
        Err(e) => {
            if let Err(shutdown) = engine.shutdown() {
                tracing::error!("engine shutdown after a failed listener start: {shutdown}");
            }
            return Err(e);
        }
    };
    let (sender, signals) = crossbeam_channel::unbounded();
    spawn_signal_thread(sender, std::convert::identity)?;
    tracing::info!(
        "serving {} to Kafka clients (pid {}); stop with SIGTERM or Ctrl-C",
        data_dir.display(),
        std::process::id()
    );
    // The signal thread never ends first: it holds the sender for the process's life.
    let signal = signals.recv().unwrap_or(libc::SIGTERM);
    tracing::info!("signal {signal}: stopping");
    listener.shutdown();
    engine
        .shutdown()
        .map_err(|e| CliError::new(format!("engine shutdown failed: {e}")))?;
    tracing::info!("clean shutdown");
    Ok(())
}
