//! `sweepflight-client`: a typed async client of the sweepflight Flight service.
//!
//! It owns the client side of the wire contract (`docs/protocol.md`; the request types are
//! `sweepflight-protocol`'s, re-exported here): connecting over TCP, TLS or a Unix socket with
//! an optional token ([`Client::connect`]), uploading series ([`Client::put`]) and keyed
//! universes ([`Client::put_keyed`]), typed sweep requests and results ([`SweepRequest`],
//! [`SweepResult`]) and the catalog calls. [`Client::session`] opens the `session` extension
//! for many small sweeps in a row, a message each instead of a gRPC call each. With the `polars` feature,
//! `Client::put_polars` uploads a Polars `DataFrame` without copying its columns. It sits on
//! `arrow_flight::FlightClient`; anything it does, a plain Flight client can do too.
//!
//! Large uploads: the Flight encoder and tonic put each message of a few MiB in new buffers.
//! With glibc's malloc every one is a fresh mapping the kernel must zero; a program that
//! uploads hundreds of MB should use a pooled allocator such as `mimalloc` (as the server and
//! the `sweepflight` CLI do): an 800 MB put took 1.0 s with glibc and 0.75 s with mimalloc.
//!
//! ```no_run
//! # async fn example() -> sweepflight_client::Result<()> {
//! use sweepflight_client::{Client, SweepRequest};
//!
//! let mut client = Client::connect("grpc://127.0.0.1:8815").await?;
//! let closes: Vec<f64> = (0..10_000).map(|i| 100.0 + (i as f64 * 0.01).sin()).collect();
//! client.put_closes("demo", &closes).await?;
//! let result = client.sweep(&SweepRequest::lengths("demo", [6, 10, 20])).await?;
//! for row in result.rows() {
//!     println!("L = {}: PnL {:.2} on {} trades", row.params[1], row.pnl, row.trades);
//! }
//! # Ok(())
//! # }
//! ```

mod client;
mod connect;
mod error;
pub mod formula;
#[cfg(feature = "polars")]
pub mod polars;
mod session;
mod types;

pub use client::Client;
pub use connect::ConnectOptions;
pub use error::{Error, Result};
pub use session::Session;
pub use sweepflight_protocol::{
    Builtin, Compression, Execution, Fill, Folds, Grid, JobBody, JobState, JobStatus, PutSummary,
    PutTarget, RowRange, Sample, SessionReply, Side, StopsOn, Strategy, SweepRequest,
    WalkForwardRequest,
};
pub use types::{ComboRow, DatasetInfo, SweepResult};
