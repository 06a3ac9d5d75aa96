//! Sweeps of stored datasets, as the `sweep` action and the `session` extension run them:
//! resolve the dataset and its series, check the limits, run, build the result table.

use arrow_array::RecordBatch;
use sweepflight_protocol::SweepRequest;

use super::State;
use crate::compute::{Job, Limits};
use crate::results::{select, to_batch};
use crate::{Error, Result};

/// The server's limits on one call.
pub(super) fn limits(state: &State) -> Limits {
    Limits {
        max_combos: state.config.max_combos,
        max_grid_combos: state.config.max_grid_combos,
        result_bytes: state.compute.budget().total(),
    }
}

/// Runs `request` on its stored dataset; the result table (keyed if the dataset is). A
/// `session` says which kind of dataset it serves (`keyed`); the action takes both.
pub(super) async fn run(
    state: &State,
    request: &SweepRequest,
    keyed: Option<bool>,
) -> Result<RecordBatch> {
    let limits = limits(state);
    request.check_limits(limits.max_combos, limits.max_grid_combos)?;
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
    let job = Job::stored(request, dataset, &limits)?;
    let results = state.compute.run(job.clone()).await?;
    select(
        to_batch(&job, &results)?,
        job.inputs.len(),
        &request.selection,
    )
}
