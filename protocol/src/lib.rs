//! `sweepflight-protocol`: the one definition of sweepflight's wire contract
//! (`docs/protocol.md`, v1 and the v1.1 additions), shared by the server and the Rust client.
//!
//! Everything a client sends as opaque bytes has one typed value here and one decoding
//! function: the `sweep` action body ([`SweepRequest`]), DoExchange commands
//! ([`ExchangeCommand`]), DoPut descriptors ([`PutTarget`]), DoGet tickets ([`Ticket`]) and
//! dataset names ([`validate_name`]). What the server answers is defined here too: the result
//! schema ([`result_schema`]), PutResult and FlightInfo metadata ([`PutSummary`],
//! [`DatasetMeta`]) and the action list ([`ACTIONS`]). Other languages are held to the same
//! definitions by golden files under `protocol/golden/` (regenerated and drift-checked by this
//! crate's tests).
//!
//! Decoding never panics and every refusal is an [`Error`] whose text names what is wrong: all of
//! them are the caller's fault (INVALID_ARGUMENT on the wire).

mod actions;
mod columns;
mod error;
mod job;
mod name;
mod portfolio;
mod put;
mod schema;
mod selection;
mod strategy;
mod sweep;
mod ticket;
mod walk_forward;

pub use actions::{
    ACTIONS, CANCEL, CANCEL_FLIGHT_INFO, DROP, ECHO, EQUITY, EXPLAIN, STATS, STATUS, STRATEGIES,
    SUBMIT, SWEEP, TRADES, WALK_FORWARD,
};
pub use columns::{BAR_NAMES, PANDAS_INDEX, column_hint, recognise, time_index};
pub use error::{Error, Result};
pub use job::{JobBody, JobRef, JobState, JobStatus, MAX_JOB_ID_LEN};
pub use name::{MAX_NAME_LEN, validate_name};
pub use portfolio::{
    Count, Counts, MAX_COUNT, MAX_REBALANCE, PORTFOLIO_KEYS, Portfolio, Rebalance,
};
pub use put::{DatasetMeta, PutSummary, PutTarget, dataset_path};
pub use schema::{
    BLOCK_PNL_COLUMN, COMBO_COLUMNS, EXIT_REASON_COLUMN, PORTFOLIO_METRIC_COLUMNS, SERIES_COLUMN,
    TOTAL_RETURN_COLUMN, V12_METRIC_COLUMNS, WINDOW_COLUMNS, check_result_schema, equity_schema,
    equity_schema_timed, param_type, portfolio_equity_schema, portfolio_trades_schema,
    result_schema, strategy_schema, sweep_schema, trades_schema, trades_schema_timed,
    walk_forward_schema,
};
pub use selection::{DEFAULT_MAX_GRID_COMBOS, DEFAULT_MAX_TRADE_COMBOS, Selection};
pub use strategy::{
    Builtin, Execution, Fill, MAX_BLOCKS, ParamKind, Sample, Side, StopsOn, Strategy,
    strategies_json,
};
pub use sweep::{
    Compression, DEFAULT_FEE, ExchangeCommand, ExchangeSweep, Grid, MAX_POSITIONS, MAX_WINDOW,
    RowRange, SESSION_COMMAND, SessionReply, SweepRequest, check_runs,
};
pub use ticket::Ticket;
pub use walk_forward::{Fold, Folds, WalkForwardRequest};

/// The contract version this crate implements: v1, the v1.1 additions (universes, row ranges,
/// compute threads and the sweep memory budget) and the v1.2 additions (strategies and
/// execution options, metrics, selection, trades and equity, walk-forward, jobs, compression).
pub const PROTOCOL_VERSION: &str = "1.2";
