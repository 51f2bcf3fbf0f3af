//! A Kafka listener on an engine, for trying clients by hand before `kpfs serve` exists:
//! `cargo run --features internals --example kafka_listener -- DATA_DIR [127.0.0.1:9092]`,
//! then e.g. `kcat -b 127.0.0.1:9092 -L`. Stops at end of standard input.

use std::io::Read;
use std::net::SocketAddr;
use std::sync::Arc;

use kpfs::engine::{BrokerConfig, Engine, EngineOptions, SystemClock};
use kpfs::kafka::{Listener, ListenerConfig};

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let mut args = std::env::args().skip(1);
    let data_dir = args
        .next()
        .expect("usage: kafka_listener DATA_DIR [ADDRESS]");
    let bind: SocketAddr = args
        .next()
        .unwrap_or_else(|| "127.0.0.1:9092".into())
        .parse()
        .expect("an address such as 127.0.0.1:9092");
    let engine = Arc::new(
        Engine::open(
            data_dir.as_ref(),
            BrokerConfig::defaults(),
            Arc::new(SystemClock),
            EngineOptions::default(),
        )
        .expect("open the data directory"),
    );
    let listener = Listener::start(
        engine.clone(),
        ListenerConfig {
            bind,
            advertised_host: bind.ip().to_string(),
            advertised_port: bind.port(),
            node_id: 1,
            cluster_id: "kpfs-example".into(),
            socket_request_max_bytes: 100 * 1024 * 1024,
            max_connections: 1000,
            connections_max_idle_ms: 600_000,
            auto_create_topics: true,
            max_request_partition_size_limit: 2000,
            delete_topic_enable: true,
        },
    )
    .expect("start the listener");
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    listener.shutdown();
    engine.shutdown().expect("close the engine");
}
