//! `sweepflight-server`: the Arrow Flight service of sweepflight.
//!
//! Researchers push a price series once (DoPut), then run parameter sweeps on it with small
//! JSON actions and get every combo's PnL back as Arrow. This crate owns the wire contract v1
//! (`docs/protocol.md`): the [`service`] that implements it, the [`store`] of datasets and its
//! WMA cache (written through to the data directory by [`persist`]), upload validation ([`ingest`]), request decoding ([`request`]), running the
//! kernel off the async runtime ([`compute`]), the result table ([`results`]) and [`serve`],
//! which runs it all on a listener until a shutdown future resolves ([`conn`] keeps idle
//! connections from waking the server, [`uds`] lets gRPC-core clients in over Unix sockets).

pub mod auth;
pub mod compute;
pub mod config;
pub mod conn;
mod error;
#[cfg(feature = "testing")]
pub mod fuzzing;
pub mod ingest;
pub mod persist;
pub mod request;
pub mod results;
mod serve;
pub mod service;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;
pub mod uds;

pub use config::{ServerConfig, TlsFiles};
pub use error::{Error, Result};
pub use serve::{Listener, serve};
