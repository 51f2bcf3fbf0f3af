//! PLACEHOLDER for the Kafka wire adapter (issue 15, part C), which replaces this file
//! at merge. It has the agreed interface — `Listener::start` and
//! `ListenerHandle::shutdown` over a `ListenerConfig` — so `kpfs serve` and `kpfs mount`
//! can be built and tested for what they own (the port opens on the configured address,
//! closes at shutdown, and a plain mount opens none): it binds the socket and accepts
//! and closes every connection, speaking no protocol.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::engine::Engine;

/// What the listener runs with, built by the CLI from the broker config
/// (`BrokerConfig::listener_settings`) and the data directory's cluster id.
#[derive(Clone, Debug)]
pub(crate) struct ListenerConfig {
    pub(crate) bind: SocketAddr,
    pub(crate) advertised_host: String,
    pub(crate) advertised_port: u16,
    pub(crate) node_id: i32,
    pub(crate) cluster_id: String,
    pub(crate) socket_request_max_bytes: usize,
    pub(crate) max_connections: usize,
    /// `u64::MAX`: never close an idle connection.
    pub(crate) connections_max_idle_ms: u64,
    pub(crate) auto_create_topics: bool,
    pub(crate) num_partitions: i32,
    pub(crate) delete_topic_enable: bool,
}

pub(crate) struct Listener;

/// A running listener; [`ListenerHandle::shutdown`] closes its socket.
pub(crate) struct ListenerHandle {
    local_addr: SocketAddr,
    stopping: Arc<AtomicBool>,
    acceptor: JoinHandle<()>,
}

impl Listener {
    /// Binds `config.bind` and accepts connections until shutdown.
    pub(crate) fn start(
        _engine: Arc<Engine>,
        config: ListenerConfig,
    ) -> io::Result<ListenerHandle> {
        let socket = TcpListener::bind(config.bind)?;
        let local_addr = socket.local_addr()?;
        tracing::info!(
            bind = %local_addr,
            advertised = %format_args!("{}:{}", config.advertised_host, config.advertised_port),
            node_id = config.node_id,
            cluster_id = %config.cluster_id,
            socket_request_max_bytes = config.socket_request_max_bytes,
            max_connections = config.max_connections,
            connections_max_idle_ms = config.connections_max_idle_ms,
            auto_create_topics = config.auto_create_topics,
            num_partitions = config.num_partitions,
            delete_topic_enable = config.delete_topic_enable,
            "Kafka listener started (placeholder: connections are closed at once)"
        );
        let stopping = Arc::new(AtomicBool::new(false));
        let stop = stopping.clone();
        let acceptor = std::thread::Builder::new()
            .name("kpfs-kafka-acceptor".into())
            .spawn(move || {
                for connection in socket.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    drop(connection);
                }
            })?;
        Ok(ListenerHandle {
            local_addr,
            stopping,
            acceptor,
        })
    }
}

impl ListenerHandle {
    /// Stops accepting and closes the socket; returns once the port is free.
    pub(crate) fn shutdown(self) {
        self.stopping.store(true, Ordering::SeqCst);
        // accept(2) has no timeout: a connection of our own wakes it to see the flag.
        let _ = TcpStream::connect(self.local_addr);
        let _ = self.acceptor.join();
        tracing::info!(bind = %self.local_addr, "Kafka listener stopped");
    }
}
