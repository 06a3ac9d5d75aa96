//! The `explain` action (protocol v1.3, docs/language.md "Explain"): the plan of a sweep body as
//! JSON, nothing run. The body is decoded as a sweep body (so every refusal is the sweep's);
//! every combo it would run (after the constraint) is bound into kernel plans a step at a time,
//! and the distinct series nodes of them all, counted by fingerprint, are the reply's `arrays`.

use std::collections::HashSet;

use serde_json::{Map, Value, json};
use sweepflight_kernel::expr::Column;
use sweepflight_kernel::plan::Plan;
use sweepflight_protocol::SweepRequest;

use std::sync::Arc;

use crate::compute::{check_time_order, params_in};
use crate::datasets::Dataset;
use crate::{Error, Result};

/// Combos bound per step, so a large grid is never expanded whole.
const STEP: usize = 65_536;

/// The `explain` reply of a sweep body.
///
/// # Errors
/// INVALID_ARGUMENT for a body, strategy, formula or combo the sweep would refuse, naming it;
/// RESOURCE_EXHAUSTED when the fingerprints of its distinct arrays pass `memory` bytes.
pub(crate) fn explain(
    body: &[u8],
    max_grid: usize,
    memory: u64,
    dataset: &dyn Fn(&str) -> Option<Arc<Dataset>>,
) -> Result<Value> {
    let request =
        SweepRequest::decode(body).map_err(|e| crate::sweep::hints::with_hint(e, body, dataset))?;
    // Nothing is run, and the dataset need not exist yet; where it does, a call the sweep
    // would refuse for its bars is refused here too.
    if let Some(d) = dataset(&request.dataset)
        && !request.execution.ignore_time
    {
        check_time_order(&d.data.bars, &format!("dataset `{}`", request.dataset))?;
    }
    let (program, _) = request.strategy.program();
    if let Some(d) = dataset(&request.dataset) {
        let what = format!("dataset `{}`", request.dataset);
        crate::datasets::bars::input_indices(d.schema(), &program.inputs, &what)?;
        crate::compute::check_period_time(&program, &d.data.bars, request.execution.ignore_time)?;
    }
    // Combos a constraint skips are not counted (docs/language.md, "Constraint").
    let runs = request
        .grid
        .runs(&request.strategy, 0..request.len(), max_grid, max_grid)?;
    if runs > max_grid {
        return Err(Error::invalid(format!(
            "{} combos is more than --max-grid-combos ({max_grid})",
            request.len()
        )));
    }
    let width = program.params.len();
    // Each step's combos are bound into a plan of their own; the call's distinct arrays are
    // counted by fingerprint (16 bytes each, not a node's definition), within the memory a
    // sweep may use.
    let mut arrays: HashSet<u128> = HashSet::new();
    let (mut combos, mut lookback) = (0usize, 0usize);
    let mut values = vec![0.0; width];
    for start in (0..request.len()).step_by(STEP) {
        let end = (start + STEP).min(request.len());
        let (step, _) = params_in(&request.strategy, &request.grid, start..end)?;
        let mut plan = Plan::new();
        for i in 0..step.len() {
            for (k, v) in values.iter_mut().enumerate() {
                *v = step.value(i, k);
            }
            lookback = lookback.max(if request.strategy.portfolio().is_some() {
                plan.bind_portfolio(&program, &values).2
            } else {
                plan.bind(&program, &values).lookback
            });
        }
        arrays.extend(plan.array_fingerprints());
        let held = arrays.capacity() as u64 * (size_of::<u128>() as u64 + 1);
        if held > memory {
            return Err(Error::ResourceExhausted(format!(
                "counting the distinct arrays of {} combos needs more than the {memory} bytes a sweep may use (--sweep-memory-bytes); explain a part of the grid",
                request.len()
            )));
        }
        combos += step.len();
    }
    // What the formulas read, the execution's columns, and `close` always.
    let mut columns = program.columns();
    let exec = request.execution.columns();
    columns.extend(
        Column::ALL
            .into_iter()
            .filter(|c| *c == Column::Close || exec.contains(&c.name())),
    );
    columns.sort();
    columns.dedup();
    let formulas: Map<String, Value> = program
        .canonical()
        .into_iter()
        .map(|(f, text)| (f.name().to_owned(), Value::String(text)))
        .collect();
    let mut reply = json!({
        "params": program.params.iter().map(|p| json!({"name": p.name, "kind": p.kind.name()})).collect::<Vec<_>>(),
        "formulas": formulas,
        "combos": combos,
        // A higher timeframe looks back in periods, not bars (expressions.md): null.
        "lookback": if program.timeframes().is_empty() { json!(lookback) } else { Value::Null },
        "arrays": arrays.len(),
        // The bar columns, then the inputs the formulas read (in `inputs` order).
        "columns": columns.iter().map(|c| c.name()).chain(program.inputs_read()).collect::<Vec<_>>(),
    });
    if request.strategy.portfolio().is_some() {
        // The call's series and calendar (protocol v1.4), where the dataset is there to read.
        let (series, calendar) = match dataset(&request.dataset) {
            Some(d) => {
                let limits = crate::compute::Limits {
                    max_combos: max_grid,
                    max_grid_combos: max_grid,
                    result_bytes: memory,
                };
                let prepared = crate::sweep::portfolio::prepare(
                    &crate::compute::Spec::of(&request),
                    &crate::compute::Source::Stored(&request.dataset, d),
                    &limits,
                )?;
                (json!(prepared.series()), json!(prepared.calendar_len()))
            }
            None => (Value::Null, Value::Null),
        };
        reply["series"] = series;
        reply["calendar"] = calendar;
    }
    Ok(reply)
}
