//! The Kafka wire adapter: a second adapter beside `fs`, depending only on the engine.
//! Kafka clients reach the same topics that shell tools read and write in the mount.
//!
//! Threads, not an event loop (docs/ARCHITECTURE.md, "Kafka listener"): one acceptor, and
//! one thread per connection that reads a whole request, handles it, writes the response
//! (records with sendfile(2)) and only then reads the next. Kafka's muting falls out of
//! that: a client that never reads its responses blocks its own thread's write until
//! `connections.max.idle.ms`, never anyone's memory.

mod api;
mod connection;
mod error_code;
#[cfg(feature = "internals")]
pub mod frame;
#[cfg(not(feature = "internals"))]
mod frame;
#[cfg(feature = "internals")]
pub mod response;
#[cfg(not(feature = "internals"))]
mod response;
mod versions;

/// The answers of examples/wire_floor.rs that must be the listener's: the same versions
/// (so clients send both the same requests) and FindCoordinator's shape (the floor has no
/// coordinator to name).
#[cfg(feature = "internals")]
pub use api::{api_versions, find_coordinator};

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::Mutex;

use crate::engine::Engine;

/// Everything the listener needs from Kafka's broker configs (`listeners`,
/// `advertised.listeners`, `node.id`, `meta.properties`'s `cluster.id`, ...).
#[derive(Clone, Debug)]
pub struct ListenerConfig {
    pub bind: SocketAddr,
    pub advertised_host: String,
    pub advertised_port: u16,
    pub node_id: i32,
    pub cluster_id: String,
    pub socket_request_max_bytes: usize,
    pub max_connections: usize,
    pub connections_max_idle_ms: u64,
    pub auto_create_topics: bool,
    /// The most partitions one DescribeTopicPartitions answer lists.
    pub max_request_partition_size_limit: i32,
    pub delete_topic_enable: bool,
}

/// Why the listener could not start.
#[derive(Debug)]
pub struct ListenerError {
    context: String,
    source: io::Error,
}

impl ListenerError {
    /// The system's error, for a caller that names the address itself.
    pub fn into_io_error(self) -> io::Error {
        self.source
    }
}

impl std::fmt::Display for ListenerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.context, self.source)
    }
}

impl std::error::Error for ListenerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// What the acceptor and every connection share.
pub(crate) struct Shared {
    pub(crate) engine: Arc<Engine>,
    pub(crate) config: ListenerConfig,
    pub(crate) stopping: AtomicBool,
    /// A second handle on each open connection's socket, so that shutdown can end its
    /// reads; the connection's thread removes it as it ends, so a closed connection
    /// keeps no descriptor.
    sockets: Mutex<HashMap<u64, TcpStream>>,
    /// Connection threads, joined at shutdown and forgotten once finished.
    threads: Mutex<Vec<JoinHandle<()>>>,
    open: AtomicUsize,
    next_id: AtomicU64,
    /// Fetch sessions (KIP-227), shared by every connection.
    fetch_sessions: api::FetchSessions,
}

/// The Kafka listener.
pub struct Listener;

/// A running listener; [`ListenerHandle::shutdown`] stops it.
pub struct ListenerHandle {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    acceptor: JoinHandle<()>,
}

/// A connection thread's stack: handlers keep no large buffers on the stack, and a
/// thousand connections then reserve 256 MiB of address space, little of it touched.
const CONNECTION_STACK_BYTES: usize = 256 * 1024;

impl Listener {
    /// Binds `config.bind` and serves Kafka clients on it until
    /// [`ListenerHandle::shutdown`].
    pub fn start(
        engine: Arc<Engine>,
        config: ListenerConfig,
    ) -> Result<ListenerHandle, ListenerError> {
        let socket = TcpListener::bind(config.bind).map_err(|source| ListenerError {
            context: format!("bind the Kafka listener to {}", config.bind),
            source,
        })?;
        let local_addr = socket.local_addr().map_err(|source| ListenerError {
            context: "read the Kafka listener's address".into(),
            source,
        })?;
        if !local_addr.ip().is_loopback() {
            tracing::warn!(address = %local_addr, "the Kafka listener is PLAINTEXT on a non-loopback address: anyone who can reach it can read and write every topic (no authentication, no TLS)");
        }
        let shared = Arc::new(Shared {
            engine,
            config,
            stopping: AtomicBool::new(false),
            sockets: Mutex::new(HashMap::new()),
            threads: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            next_id: AtomicU64::new(0),
            fetch_sessions: Default::default(),
        });
        let acceptor_shared = shared.clone();
        let acceptor = std::thread::Builder::new()
            .name("kpfs-kafka-accept".into())
            .spawn(move || accept_loop(&acceptor_shared, &socket))
            .map_err(|source| ListenerError {
                context: "start the Kafka listener's thread".into(),
                source,
            })?;
        tracing::info!(address = %local_addr, "Kafka listener started");
        Ok(ListenerHandle {
            shared,
            local_addr,
            acceptor,
        })
    }
}

impl ListenerHandle {
    /// The bound address (the port chosen for `:0`).
    #[cfg(any(test, feature = "internals"))]
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting, lets every connection finish the request it is handling (a parked
    /// Fetch answers with what it has), closes them and waits for their threads.
    pub fn shutdown(self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // accept(2) has no timeout: a connection of our own wakes it to see the flag.
        let wake = match self.local_addr {
            SocketAddr::V4(a) if a.ip().is_unspecified() => {
                SocketAddr::new(Ipv4Addr::LOCALHOST.into(), a.port())
            }
            SocketAddr::V6(a) if a.ip().is_unspecified() => {
                SocketAddr::new(Ipv6Addr::LOCALHOST.into(), a.port())
            }
            other => other,
        };
        if let Err(e) = TcpStream::connect_timeout(&wake, Duration::from_secs(5)) {
            tracing::warn!(error = %e, "waking the Kafka acceptor failed");
        }
        if self.acceptor.join().is_err() {
            tracing::error!("the Kafka acceptor thread panicked");
        }
        for socket in self.shared.sockets.lock().values() {
            // Ends the connection's next read; a response being written still goes out.
            let _ = socket.shutdown(std::net::Shutdown::Read);
        }
        let threads = std::mem::take(&mut *self.shared.threads.lock());
        for thread in threads {
            if thread.join().is_err() {
                tracing::error!("a Kafka connection thread panicked");
            }
        }
        tracing::info!(address = %self.local_addr, "Kafka listener stopped");
    }
}

#[allow(clippy::disallowed_methods)] // the back-off after a failed accept(2), in real time
fn accept_loop(shared: &Arc<Shared>, socket: &TcpListener) {
    loop {
        let accepted = socket.accept();
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // EMFILE and the like: the listener stays up; a pause lets descriptors
                // free instead of spinning on the same error.
                tracing::warn!(error = %e, "accepting a Kafka connection failed");
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        reap_finished(shared);
        if shared.open.load(Ordering::SeqCst) >= shared.config.max_connections {
            tracing::warn!(%peer, max = shared.config.max_connections, "closing a Kafka connection: max.connections reached");
            continue;
        }
        if let Err(e) = spawn_connection(shared, stream, peer) {
            tracing::warn!(%peer, error = %e, "closing a Kafka connection: no thread for it");
        }
    }
}

fn spawn_connection(shared: &Arc<Shared>, stream: TcpStream, peer: SocketAddr) -> io::Result<()> {
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    // Registered before the thread starts, so its removal at the end cannot come first.
    shared.sockets.lock().insert(id, stream.try_clone()?);
    shared.open.fetch_add(1, Ordering::SeqCst);
    let conn_shared = shared.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("kpfs-kafka-{id}"))
        .stack_size(CONNECTION_STACK_BYTES)
        .spawn(move || {
            connection::serve(&conn_shared, stream, peer);
            conn_shared.sockets.lock().remove(&id);
            conn_shared.open.fetch_sub(1, Ordering::SeqCst);
        });
    match spawned {
        Ok(thread) => {
            shared.threads.lock().push(thread);
            Ok(())
        }
        Err(e) => {
            shared.sockets.lock().remove(&id);
            shared.open.fetch_sub(1, Ordering::SeqCst);
            Err(e)
        }
    }
}

/// Forgets the threads of closed connections.
fn reap_finished(shared: &Shared) {
    shared.threads.lock().retain(|thread| !thread.is_finished());
}
