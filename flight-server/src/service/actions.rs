//! ListActions and DoAction: `sweep`, `echo`, `drop`.

use arrow_flight::{Action, ActionType};
use bytes::Bytes;

use super::State;
use crate::compute::{self, Series};
use crate::request::sweep_request;
use crate::results::{MAX_RESULT_BODY, ipc_stream_bodies, to_batch};
use crate::store::validate_name;
use crate::{Error, Result};

const ACTIONS: [(&str, &str); 4] = [
    (
        "sweep",
        "Run a parameter sweep on a stored dataset. Body: JSON {\"dataset\", \"lengths\" | \"params\", \"fee\"?}; reply: one Arrow IPC stream split over the Result bodies.",
    ),
    (
        "echo",
        "Reply with one Result whose body is the request body, unchanged.",
    ),
    ("drop", "Remove a dataset. Body: the dataset name."),
    (
        "stats",
        "Server state as JSON: datasets, bytes, WMA cache bytes, sweeps running / completed / cancelled.",
    ),
];

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
        "sweep" => sweep(state, &action.body).await?,
        "echo" => vec![action.body],
        "drop" => vec![drop(state, &action.body).await?],
        "stats" => vec![stats(state)],
        other => return Err(Error::UnknownAction(other.to_owned())),
    };
    Ok(bodies.into_iter().map(arrow_flight::Result::new).collect())
}

#[tracing::instrument(level = "debug", skip_all, fields(dataset, combos))]
async fn sweep(state: &State, body: &[u8]) -> Result<Vec<Bytes>> {
    let req = sweep_request(body, state.config.max_combos)?;
    let span = tracing::Span::current();
    span.record("dataset", req.dataset.as_str());
    span.record("combos", req.spec.combos.len());
    let dataset = state.store.get(&req.dataset)?;
    let results = compute::run(
        &state.sweeps,
        Series::Stored(state.store.clone(), dataset),
        &req.spec,
    )
    .await?;
    ipc_stream_bodies(&to_batch(&req.spec.combos, &results)?, MAX_RESULT_BODY)
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
    let datasets = state.store.list();
    serde_json::json!({
        "datasets": datasets.len(),
        "dataset_bytes": state.store.total_bytes(),
        "persistent": state.config.data_dir.is_some(),
        "cache_bytes": state.store.cache_bytes(),
        "sweeps_running": state.sweeps.running(),
        "sweeps_completed": state.sweeps.completed(),
        "sweeps_cancelled": state.sweeps.cancelled(),
    })
    .to_string()
    .into()
}
