//! ListActions and DoAction: `sweep`, `echo`, `drop`, `stats`, `strategies`, `trades`,
//! `equity`.

use arrow_flight::{Action, ActionType};
use bytes::Bytes;
use sweepflight_protocol::{
    ACTIONS, DROP, ECHO, EQUITY, STATS, STRATEGIES, SWEEP, SweepRequest, TRADES, strategies_json,
    validate_name,
};

use super::State;
use super::sweep::Detail;
use crate::results::{MAX_RESULT_BODY, ipc_stream_bodies};
use crate::{Error, Result};

/// Every action type with its description.
pub(super) fn list() -> Vec<ActionType> {
    ACTIONS
        .iter()
        .map(|(t, d)| ActionType {
            r#type: (*t).into(),
            description: (*d).into(),
        })
        .collect()
}

/// Runs one action to completion and returns its Result messages.
pub(super) async fn run(state: &State, action: Action) -> Result<Vec<arrow_flight::Result>> {
    let bodies = match action.r#type.as_str() {
        SWEEP => sweep(state, &action.body).await?,
        ECHO => vec![action.body],
        DROP => vec![drop(state, &action.body).await?],
        STATS => vec![stats(state)],
        STRATEGIES => vec![Bytes::from(strategies_json().to_string())],
        TRADES => detail(state, &action.body, Detail::Trades).await?,
        EQUITY => detail(state, &action.body, Detail::Equity).await?,
        other => return Err(Error::UnknownAction(other.to_owned())),
    };
    Ok(bodies.into_iter().map(arrow_flight::Result::new).collect())
}

#[tracing::instrument(level = "debug", skip_all, fields(dataset, combos))]
async fn sweep(state: &State, body: &[u8]) -> Result<Vec<Bytes>> {
    let request = SweepRequest::decode(body)?;
    let span = tracing::Span::current();
    span.record("dataset", request.dataset.as_str());
    span.record("combos", request.len());
    let batch = super::sweep::run(state, &request, None).await?;
    ipc_stream_bodies(&batch, MAX_RESULT_BODY)
}

#[tracing::instrument(level = "debug", skip_all, fields(dataset, combos))]
async fn detail(state: &State, body: &[u8], detail: Detail) -> Result<Vec<Bytes>> {
    let request = SweepRequest::decode(body)?;
    let span = tracing::Span::current();
    span.record("dataset", request.dataset.as_str());
    span.record("combos", request.len());
    let batch = super::sweep::detail(state, &request, None, detail).await?;
    ipc_stream_bodies(&batch, MAX_RESULT_BODY)
}

async fn drop(state: &State, body: &[u8]) -> Result<Bytes> {
    let name = std::str::from_utf8(body)
        .map_err(|_| Error::invalid("drop body must be a UTF-8 dataset name"))?;
    validate_name(name)?;
    let old = state.store.remove(name).await?;
    tracing::info!(dataset = name, version = old.version, "dropped");
    Ok(serde_json::json!({"dataset": name, "version": old.version})
        .to_string()
        .into())
}

fn stats(state: &State) -> Bytes {
    let levels = state.levels();
    let m = &state.metrics;
    serde_json::json!({
        "datasets": levels.datasets,
        "dataset_bytes": levels.dataset_bytes,
        "persistent": state.config.data_dir.is_some(),
        "cache_bytes": levels.cache_bytes,
        "threads": state.compute.threads(),
        "max_combos": state.config.max_combos,
        "max_grid_combos": state.config.max_grid_combos,
        "max_trade_combos": state.config.max_trade_combos,
        "sweeps_running": levels.sweeps_running,
        "sweeps_queued": levels.sweeps_queued,
        "sweeps_completed": m.sweeps_completed.get(),
        "sweeps_cancelled": m.sweeps_cancelled.get(),
        "sweeps_refused": m.sweeps_refused.get(),
        "sweep_memory_bytes": state.compute.budget().total(),
        "sweep_reserved_bytes": levels.sweep_reserved_bytes,
        "connections": levels.connections,
        "connections_refused": m.connections_refused.get(),
        "connections_timed_out": m.connections_timed_out.get(),
    })
    .to_string()
    .into()
}
