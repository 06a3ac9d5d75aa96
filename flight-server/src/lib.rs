//! `sweepflight-server`: the Arrow Flight service of sweepflight.
//!
//! Researchers push a price series (or a keyed universe of them) once, then run parameter
//! sweeps on it with small JSON actions and get every combo's PnL back as Arrow. The wire
//! contract is defined once, in `sweepflight-protocol`; this crate implements it:
//!
//! - [`serve`] / [`Server`]: open the store, bind, serve until a shutdown future resolves, with a
//!   grace period; [`auth`] and [`metrics`] are tower layers in front of the [`service`];
//!   [`net`] caps and times out connections ([`conn`] is opt-in socket tuning, [`uds`] lets
//!   gRPC-core clients in over Unix sockets).
//! - [`service`]: one handler per Flight verb; [`results`] encodes sweep replies.
//! - [`dataset`]: what a dataset is (the `close` rules, universes); [`ingest`] turns uploads
//!   into datasets (a large column in memory from [`mapping`]); [`persist`] writes them
//!   durably; [`store`] holds the named versions.
//! - [`compute`] runs sweeps on the server's thread pool within the memory [`budget`], with
//!   the kernel [`cache`].

pub mod auth;
pub mod budget;
pub mod cache;
pub mod compute;
pub mod config;
pub mod conn;
pub mod dataset;
mod error;
#[cfg(feature = "testing")]
pub mod fuzzing;
pub mod ingest;
pub mod jobs;
pub mod mapping;
pub mod metrics;
pub mod net;
pub mod persist;
pub mod results;
mod serve;
pub mod service;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;
pub mod trim;
pub mod uds;

pub use config::{Listen, ServerConfig, TlsFiles};
pub use error::{Error, Result};
pub use serve::{Server, serve};
