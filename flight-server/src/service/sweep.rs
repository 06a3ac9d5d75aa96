//! Sweeps of stored datasets, as the `sweep` action and the `session` extension run them:
//! resolve the dataset and its series, check the limits, run, build the result table.

use arrow_array::RecordBatch;
use sweepflight_protocol::SweepRequest;

use super::State;
use crate::compute::Job;
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
    let job = Job::stored(request, dataset, max)?;
    let results = state.compute.run(job.clone()).await?;
    to_batch(&job, &results)
}
