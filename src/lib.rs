//! kpfs: a FUSE filesystem over a Kafka-faithful, self-retaining local log store.
//!
//! Layers, with one direction of dependency: `cli` -> `fs` -> `engine`. The engine knows
//! nothing of FUSE and is fully testable without a mount.

pub mod cli;
pub mod engine;
pub mod fs;
