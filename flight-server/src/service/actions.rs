//! ListActions and DoAction: `sweep`, `echo`, `drop`, `stats`, `strategies`, `trades`,
//! `equity`, `walk_forward`, `explain`, and the job actions (`submit`, `status`, `cancel`,
//! `CancelFlightInfo`).

use std::sync::Arc;

use arrow_flight::{Action, ActionType};
use bytes::Bytes;
use sweepflight_protocol::{
    ACTIONS, CANCEL, CANCEL_FLIGHT_INFO, DROP, ECHO, EQUITY, EXPLAIN, STATS, STATUS, STRATEGIES,
    SUBMIT, SWEEP, SweepRequest, TRADES, WALK_FORWARD, WalkForwardRequest, strategies_json,
    validate_name,
};

use super::State;
use crate::sweep::Detail;
use crate::sweep::results::{MAX_RESULT_BODY, ipc_stream_bodies};
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

/// The `strategies` reply: the protocol's list, each built-in with its expression form
/// (protocol.md v1.3) from the kernel's table of built-ins.
fn strategies() -> serde_json::Value {
    let mut list = strategies_json();
    for entry in list.as_array_mut().into_iter().flatten() {
        let builtin = entry["name"]
            .as_str()
            .and_then(sweepflight_kernel::builtins::Builtin::named);
        if let Some(b) = builtin {
            entry["formulas"] = serde_json::json!({"long": b.long, "short": b.short});
        }
    }
    list
}

/// Runs one action to completion and returns its Result messages.
pub(super) async fn run(state: &Arc<State>, action: Action) -> Result<Vec<arrow_flight::Result>> {
    let body = &action.body;
    let bodies = match action.r#type.as_str() {
        SWEEP => sweep(state, body, None).await?,
        ECHO => vec![action.body],
        DROP => vec![drop(state, body).await?],
        STATS => vec![stats(state)],
        STRATEGIES => vec![Bytes::from(strategies().to_string())],
        TRADES => sweep(state, body, Some(Detail::Trades)).await?,
        EQUITY => sweep(state, body, Some(Detail::Equity)).await?,
        WALK_FORWARD => walk_forward(state, body).await?,
        SUBMIT => vec![super::jobs::submit(state, body)?.status().encode().into()],
        STATUS => vec![super::jobs::status(state, body)?],
        CANCEL => vec![super::jobs::cancel(state, body).await?],
        CANCEL_FLIGHT_INFO => vec![super::jobs::cancel_flight_info(state, body).await?],
        EXPLAIN => {
            let config = &state.engine.config;
            let (max_grid, memory) = (config.max_grid_combos, config.sweep_memory_bytes);
            let body = body.clone();
            let state = Arc::clone(state);
            // Binding a large grid takes seconds: off the async runtime, whose workers serve
            // every connection.
            let reply = tokio::task::spawn_blocking(move || {
                let dataset = |name: &str| state.engine.store.get(name).ok();
                crate::sweep::explain::explain(&body, max_grid, memory, &dataset)
            })
            .await
            .map_err(|e| Error::internal("explain", e))??;
            vec![Bytes::from(reply.to_string())]
        }
        other => return Err(Error::UnknownAction(other.to_owned())),
    };
    Ok(bodies.into_iter().map(arrow_flight::Result::new).collect())
}

/// `sweep`, or with `detail` the `trades` or `equity` action: one IPC stream over the bodies.
#[tracing::instrument(level = "debug", skip_all, fields(dataset, combos))]
async fn sweep(state: &State, body: &[u8], detail: Option<Detail>) -> Result<Vec<Bytes>> {
    let request = SweepRequest::decode(body).map_err(|e| state.hinted(e, body))?;
    let span = tracing::Span::current();
    span.record("dataset", request.dataset.as_str());
    span.record("combos", request.len());
    let batch = match detail {
        None => crate::sweep::run(&state.engine, &request, None, None).await?,
        Some(d) => crate::sweep::detail(&state.engine, &request, None, d, None).await?,
    };
    ipc_stream_bodies(&batch, MAX_RESULT_BODY, request.compression)
}

#[tracing::instrument(level = "debug", skip_all, fields(dataset, combos))]
async fn walk_forward(state: &State, body: &[u8]) -> Result<Vec<Bytes>> {
    let request = WalkForwardRequest::decode(body).map_err(|e| state.hinted(e, body))?;
    let span = tracing::Span::current();
    span.record("dataset", request.sweep.dataset.as_str());
    span.record("combos", request.sweep.len());
    let batch = crate::sweep::walk_forward::run(&state.engine, &request, None, None).await?;
    ipc_stream_bodies(&batch, MAX_RESULT_BODY, request.sweep.compression)
}

async fn drop(state: &State, body: &[u8]) -> Result<Bytes> {
    let name = std::str::from_utf8(body)
        .map_err(|_| Error::invalid("drop body must be a UTF-8 dataset name"))?;
    validate_name(name)?;
    let old = state.engine.store.remove(name).await?;
    tracing::info!(dataset = name, version = old.version, "dropped");
    Ok(serde_json::json!({"dataset": name, "version": old.version})
        .to_string()
        .into())
}

fn stats(state: &State) -> Bytes {
    let levels = state.levels();
    let m = &state.engine.metrics;
    let jobs: Vec<serde_json::Value> = state
        .engine
        .jobs
        .list()
        .iter()
        .map(|j| serde_json::to_value(j.status()).unwrap_or_default())
        .collect();
    serde_json::json!({
        "jobs": jobs,
        "jobs_queued": levels.jobs_queued,
        "jobs_running": levels.jobs_running,
        "jobs_done": levels.jobs_done,
        "job_result_bytes": levels.job_result_bytes,
        "max_jobs": state.engine.config.max_jobs,
        "datasets": levels.datasets,
        "dataset_bytes": levels.dataset_bytes,
        "persistent": state.engine.config.data_dir.is_some(),
        "cache_bytes": levels.cache_bytes,
        "threads": state.engine.compute.threads(),
        "max_combos": state.engine.config.max_combos,
        "max_grid_combos": state.engine.config.max_grid_combos,
        "max_trade_combos": state.engine.config.max_trade_combos,
        "sweeps_running": levels.sweeps_running,
        "sweeps_queued": levels.sweeps_queued,
        "sweeps_completed": m.sweeps_completed.get(),
        "sweeps_cancelled": m.sweeps_cancelled.get(),
        "sweeps_refused": m.sweeps_refused.get(),
        "sweep_memory_bytes": state.engine.compute.budget().total(),
        "sweep_reserved_bytes": levels.sweep_reserved_bytes,
        "cache_fill_reserved_bytes": levels.cache_fill_reserved_bytes,
        "connections": levels.connections,
        "connections_refused": m.connections_refused.get(),
        "connections_timed_out": m.connections_timed_out.get(),
    })
    .to_string()
    .into()
}
