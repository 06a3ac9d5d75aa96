//! `sweepflight-server`: the Arrow Flight service of sweepflight.
//!
//! Researchers push a price series (or a keyed universe of them) once, then run parameter
//! sweeps on it with small JSON actions and get every combo's PnL back as Arrow. The wire
//! contract is defined once, in `sweepflight-protocol`; this crate implements it. Its folders
//! are its layers, each using only the ones below it:
//!
//! - `service`: the Flight verbs, one thin handler each (decode, call a use case, encode).
//! - `sweep`: the use cases every verb shares (a sweep, with `top` in steps; `trades` and
//!   `equity`; walk-forward; background jobs) and the result tables.
//! - `compute`: running kernel sweeps on the server's thread pool within the memory budget,
//!   with the kernel cache and the idle trim.
//! - `datasets`: what a dataset is, uploads into datasets (`ingest`), their files
//!   (`persist`), the named versions (`store`).
//! - `transport` (connection caps and timeouts, socket tuning, Unix sockets) and `ops` (auth,
//!   metrics, the configuration) around it all.
//!
//! The public API is small: [`serve`] / [`Server`] run the service, [`Engine`] is the same
//! work without the network (for benchmarks and tools), [`ServerConfig`] configures both, and
//! [`ipc_stream_bodies`] / [`SessionEncoder`] encode result tables as the replies carry them.
//! The `testing` feature adds the fixtures the integration tests and benchmarks use.

mod compute;
mod datasets;
mod error;
#[cfg(feature = "testing")]
pub mod fuzzing;
mod ops;
mod serve;
mod service;
mod sweep;
#[cfg(feature = "testing")]
pub mod testing;
mod transport;

pub use error::{Error, Result};
pub use ops::config::{Listen, ServerConfig, TlsFiles, parse_bytes};
pub use serve::{Server, serve};
pub use sweep::engine::Engine;
pub use sweep::results::{MAX_RESULT_BODY, SessionEncoder, ipc_stream_bodies};
