//! `sweepflight-kernel`: the backtest kernel of sweepflight, pure compute with no I/O and no
//! async.
//!
//! It owns the definition of a strategy run (docs/kernel.md): the strategy language
//! ([`expr`], [`eval`]) and the built-ins as its formula rows ([`Strategy`], their combos
//! [`Params`]; the paper's HMA vs HMA3 stop-and-reverse with its windows [`Combo`]), the
//! [`execution`] loop every strategy shares (sides, stops, warm-up), the [`Ledger`], and the
//! sweeps ([`sweep_combos`] for any strategy, [`sweep`] for the paper kernel's):
//! every combo's result over one close series, computed in parallel and bit-exact with the
//! numba reference.
//!
//! Bit-exactness is the crate's first promise. Every weighted moving average is summed in the
//! reference order (a fresh sum per output, weights ascending, one division at the end), so the
//! fast paths here restructure *loops* (blocked across outputs, vectorised, shared between
//! combos, spread over threads) but never the arithmetic of one output. [`oracle`] keeps the
//! plain textbook implementation that the tests compare against. Long windows (256 bars and
//! more, where that costs less than the shared pass) are running sums instead, each with a
//! proven bound on its distance to the reference's value (`certified`): comparisons the bounds
//! cannot decide are decided from recomputed reference values, so the trades are still the
//! reference's, at a few operations a bar whatever the window ([`CertifiedBars`] counts them).
//!
//! ```
//! use sweepflight_kernel::{sweep, Combo, DEFAULT_FEE};
//!
//! let close: Vec<f64> = (0..500).map(|i| 100.0 + (i as f64 * 0.1).sin()).collect();
//! let combos: Vec<Combo> = [6, 10, 20].iter().map(|&l| Combo::from_length(l).unwrap()).collect();
//! let results = sweep(&close, &combos, DEFAULT_FEE).unwrap();
//! assert_eq!(results.len(), 3);
//! ```

pub mod builtins;
mod certified;
mod combo;
pub mod combos;
mod error;
pub mod eval;
pub mod execution;
pub mod expr;
mod keys;
mod ledger;
pub mod lines;
pub mod oracle;
pub mod paper;
mod par;
pub mod plan;
pub mod portfolio;
pub mod record;
mod signal;
mod sweep;
pub mod timeframe;

pub use builtins::{Params, Strategy, sweep_params, sweep_params_on};
pub use certified::CertifiedBars;
pub use combo::Combo;
pub use combos::{Combos, sweep_combos};
pub use error::{Error, Result};
pub use execution::{Execution, ExitReason, Fill, Side, StopsOn};
pub use keys::NodeKey;
pub use ledger::{ComboResult, Ledger, Metrics, Moves, TradeStats};
pub use lines::wma;
pub use record::{Record, Records, Trade, equity};
pub use sweep::{
    ArrayCache, ArrayKey, NoCache, PARALLEL_MIN_WORK, SweepControl, line_bytes, memory_bytes,
    multiply_adds, scratch_bytes, sweep, sweep_executed, sweep_executed_on, sweep_with, work,
};

/// The paper's fee: 0.09% per round trip, as a fraction.
pub const DEFAULT_FEE: f64 = 0.0009;
