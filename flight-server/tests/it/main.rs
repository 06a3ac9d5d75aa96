//! The server's integration tests, one binary (each test binary links the whole server, so one
//! is built instead of ten): real servers in-process on port 0 or the binary, real clients.
//!
//! - `protocol`, `universe`, `explain`, `formulas`, `bars`: the wire contract, end to end.
//! - `jobs`, `walk_forward`: v1.2 jobs and walk-forward against the calls they stand for.
//! - `bad_input`: every malformed request, its code, and nothing changed.
//! - `auth`, `connections`, `metrics`, `overload`: the operational layers.
//! - `durability`, `disk_full`, `fuzz_regressions`: persistence and hostile bytes.

mod common;

mod auth;
mod bad_input;
mod bars;
mod connections;
mod disk_full;
mod durability;
mod explain;
mod formulas;
mod fuzz_regressions;
mod jobs;
mod metrics;
mod overload;
mod portfolio;
mod protocol;
mod timeframes;
mod trust;
mod universe;
mod walk_forward;
