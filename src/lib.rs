//! kpfs: a FUSE filesystem over a Kafka-faithful, self-retaining local log store.
//!
//! Layers, with one direction of dependency: `cli` -> `fs` -> `engine`, and beside `fs`
//! the Kafka wire adapter: `cli` -> `kafka` -> `engine`. The engine knows
//! nothing of FUSE and is fully testable without a mount.
//!
//! The library's public API is what `main.rs` needs: `cli::Cli` and `cli::run`. Everything
//! else is crate-private (`pub(crate)`), so rustc's dead-code lint sees every unused item.
//! The integration tests under `tests/` and the benchmarks and crash helper under
//! `examples/` drive the engine directly; the `internals` feature (as raft-engine's)
//! makes `engine` public for them, and inside it `pub` marks exactly the items they use.
//! `scripts/test` builds them with the feature and lints the binary's build without it.

pub mod cli;
mod cluster;
mod deadline;
#[cfg(feature = "internals")]
pub mod engine;
#[cfg(not(feature = "internals"))]
mod engine;
mod fs;
#[cfg(feature = "internals")]
pub mod kafka;
#[cfg(not(feature = "internals"))]
mod kafka;
mod lines;
mod store;
