//! Sweeps of stored datasets, as the `sweep` action and the `session` extension run them:
//! resolve the dataset and its series, check the limits, run, build the result table.

use arrow_array::RecordBatch;
use sweepflight_protocol::{SweepRequest, check_runs};

use super::State;
use crate::compute::{Input, Job, combos};
use crate::results::to_batch;
use crate::{Error, Result};

/// Runs `request` on its stored dataset; the result table (keyed if the dataset is). A
/// `session` says which kind of dataset it serves (`keyed`); the action takes both.
pub(super) async fn run(
    state: &State,
    request: &SweepRequest,
    keyed: Option<bool>,
) -> Result<RecordBatch> {
    let max = state.config.max_combos;
    request.check_combos(max)?;
    let dataset = state.store.get(&request.dataset)?;
    match (keyed, dataset.universe().is_some()) {
        (Some(false), true) => {
            return Err(Error::invalid(format!(
                "dataset `{}` is keyed; sweep it on a session opened with {{\"op\": \"session\", \"keyed\": true}}",
                request.dataset
            )));
        }
        (Some(true), false) => {
            return Err(Error::invalid(format!(
                "dataset `{}` is not keyed; this session was opened with \"keyed\": true",
                request.dataset
            )));
        }
        _ => {}
    }
    let combos = combos(&request.grid)?;
    let (inputs, names) = match dataset.universe() {
        None => {
            if request.series.is_some() {
                return Err(Error::invalid(format!(
                    "dataset `{}` is not keyed: `series` applies to datasets put with a key",
                    request.dataset
                )));
            }
            (vec![Input::stored(dataset, 0, request.rows)?], None)
        }
        Some(universe) => {
            let picked = universe.select(&request.dataset, request.series.as_deref())?;
            check_runs(picked.len(), combos.len(), max)?;
            let names: Vec<String> = picked.iter().map(|&i| universe.names[i].clone()).collect();
            let inputs = picked
                .iter()
                .map(|&i| Input::stored(std::sync::Arc::clone(&dataset), i, request.rows))
                .collect::<Result<Vec<_>>>()?;
            (inputs, Some(names))
        }
    };
    let job = Job {
        inputs,
        combos,
        fee: request.fee(),
    };
    let results = state.compute.run(job.clone()).await?;
    let names: Option<Vec<&str>> = names
        .as_ref()
        .map(|n| n.iter().map(String::as_str).collect());
    to_batch(names.as_deref(), &job.combos, &results)
}
