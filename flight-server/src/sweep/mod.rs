//! The sweep use case, the one path from a request to a result table whichever verb asked
//! (the `sweep`, `trades` and `equity` actions, a `session` message, the stateless exchange, a
//! job, the benchmarks through [`crate::Engine`]): resolve the dataset and its series (or take
//! the streamed upload), check the limits, run on [`crate::compute`], select, build the table
//! ([`results`]). [`walk_forward`] runs its folds through it; [`jobs`] keeps what runs in the
//! background.

pub(crate) mod engine;
pub(crate) mod explain;
pub(crate) mod hints;
pub(crate) mod jobs;
pub(crate) mod portfolio;
pub(crate) mod results;
pub(crate) mod walk_forward;

use std::sync::Arc;

use std::collections::HashMap;

use arrow_array::{Array, Int64Array, RecordBatch, StringArray};
use sweepflight_protocol::{ExchangeSweep, SERIES_COLUMN, SweepRequest};

use crate::compute::{Job, Keep, Limits, Progress, Runs, combos_at};
use crate::datasets::{Dataset, NewDataset};
use crate::sweep::engine::Engine;
use crate::sweep::results::{
    EQUITY_ROW_BYTES, equity_batch, merge_selected, offset_combo, select_results, to_batch_rows,
    trades_batch,
};
use crate::{Error, Result};

/// The server's limits on one call.
pub(crate) fn limits(engine: &Engine) -> Limits {
    Limits {
        max_combos: engine.config.max_combos,
        max_grid_combos: engine.config.max_grid_combos,
        result_bytes: engine.compute.budget().total(),
    }
}

/// Runs `request` on its stored dataset; the result table (keyed if the dataset is). A
/// `session` says which kind of dataset it serves (`keyed`); the action takes both. A
/// background job passes its `progress`.
pub(crate) async fn run(
    engine: &Engine,
    request: &SweepRequest,
    keyed: Option<bool>,
    progress: Option<&Arc<Progress>>,
) -> Result<RecordBatch> {
    if request.strategy.portfolio().is_some() {
        // One result per combo over the whole universe (docs/portfolios.md).
        let dataset = dataset(engine, request, keyed)?;
        return portfolio::sweep(engine, request, dataset, progress).await;
    }
    let dataset = check(engine, request, keyed)?;
    if let Some(p) = progress {
        p.add_total(runs_of(request, &dataset));
    }
    run_on(engine, request, dataset, progress).await
}

/// The dataset of `request` once the request is checked against the server's limits and the
/// dataset (its series, rows and blocks): what a job's `submit` refuses at once.
///
/// # Errors
/// As the `sweep` action, before anything runs.
pub(crate) fn check(
    engine: &Engine,
    request: &SweepRequest,
    keyed: Option<bool>,
) -> Result<Arc<Dataset>> {
    let limits = limits(engine);
    request.check_limits(limits.max_combos, limits.max_grid_combos)?;
    let dataset = dataset(engine, request, keyed)?;
    if request.strategy.portfolio().is_some() {
        portfolio::prepare(
            &crate::compute::Spec::of(request),
            &crate::compute::Source::Stored(&request.dataset, Arc::clone(&dataset)),
            &limits,
        )?;
        return Ok(dataset);
    }
    Job::stored_range(request, Arc::clone(&dataset), &limits, 0..0)?;
    Ok(dataset)
}

/// Series a request runs on.
fn series_of(request: &SweepRequest, dataset: &Dataset) -> usize {
    dataset.universe().map_or(1, |u| {
        request.series.as_ref().map_or(u.names.len(), Vec::len)
    })
}

/// Series x combos of a request: the combos a job's progress counts for it.
fn runs_of(request: &SweepRequest, dataset: &Dataset) -> u64 {
    (series_of(request, dataset) as u64).saturating_mul(request.len() as u64)
}

/// [`run`] on the dataset already resolved (the caller has counted its combos in
/// `progress`).
pub(crate) async fn run_on(
    engine: &Engine,
    request: &SweepRequest,
    dataset: Arc<Dataset>,
    progress: Option<&Arc<Progress>>,
) -> Result<RecordBatch> {
    let limits = limits(engine);
    let series = series_of(request, &dataset);
    let step = (engine.config.top_step_rows / series).max(1);
    if request.selection.top.is_some() && request.len() > step {
        return run_in_steps(engine, request, dataset, (series, step), progress).await;
    }
    let job = Job {
        progress: progress.cloned(),
        ..Job::stored(request, dataset, &limits)?
    };
    let runs = engine.compute.run(job.clone()).await?;
    let rows = select_results(&job, &runs, &request.selection)?;
    to_batch_rows(&job, &runs, &rows)
}

/// Refuses an exchange sweep past the server's limits, before its series is read.
///
/// # Errors
/// As [`crate::compute::Limits::check`] for one series.
pub(crate) fn check_exchange(engine: &Engine, sweep: &ExchangeSweep) -> Result<()> {
    let keep = Keep {
        trades: false,
        blocks: sweep.execution.blocks,
    };
    let limits = limits(engine);
    let runs = limits.runs(
        (&sweep.selection, &sweep.strategy, &sweep.grid),
        1,
        0..sweep.grid.len(),
    )?;
    limits.check(&sweep.selection, keep, 1, runs)
}

/// The stateless exchange sweep on the series streamed with it: the same job, run and
/// selection as a stored dataset's (without steps: the upload is held whole anyway).
///
/// # Errors
/// As [`run`].
pub(crate) async fn transient(
    engine: &Engine,
    sweep: &ExchangeSweep,
    upload: &NewDataset,
) -> Result<RecordBatch> {
    if sweep.strategy.portfolio().is_some() {
        return portfolio::transient(engine, sweep, upload).await;
    }
    let job = Job::uploaded(sweep, upload, &limits(engine))?;
    let runs = engine.compute.run(job.clone()).await?;
    let rows = select_results(&job, &runs, &sweep.selection)?;
    to_batch_rows(&job, &runs, &rows)
}

/// A sweep with `top` over a grid larger than one step of `step` combos on each of `series`
/// series ([`crate::ServerConfig::top_step_rows`]): the same rows one call would select, its
/// memory not growing with the grid.
async fn run_in_steps(
    engine: &Engine,
    request: &SweepRequest,
    dataset: Arc<Dataset>,
    (series, step): (usize, usize),
    progress: Option<&Arc<Progress>>,
) -> Result<RecordBatch> {
    let limits = limits(engine);
    let selection = &request.selection;
    // The whole grid against the flags; each step against the memory budget.
    request.check_limits_on(series, limits.max_combos, limits.max_grid_combos)?;
    let mut best: Vec<Option<RecordBatch>> = vec![None; series];
    for start in (0..request.len()).step_by(step) {
        let end = (start + step).min(request.len());
        let job = Job {
            progress: progress.cloned(),
            ..Job::stored_range(request, Arc::clone(&dataset), &limits, start..end)?
        };
        let runs = engine.compute.run(job.clone()).await?;
        // Only the rows the step keeps become a table (series-major: blocks of `end - start`).
        let rows = select_results(&job, &runs, selection)?;
        let per = end - start;
        for (s, kept) in best.iter_mut().enumerate() {
            let mine: Vec<u32> = rows
                .iter()
                .copied()
                .filter(|&r| r as usize / per == s)
                .collect();
            let part = offset_combo(to_batch_rows(&job, &runs, &mine)?, start)?;
            *kept = Some(merge_selected(kept.take(), part, selection)?);
        }
    }
    let parts: Vec<RecordBatch> = best.into_iter().flatten().collect();
    let schema = parts
        .first()
        .map(RecordBatch::schema)
        .ok_or_else(|| Error::Internal("a stepped sweep ran no step".into()))?;
    arrow_select::concat::concat_batches(&schema, &parts)
        .map_err(|e| Error::internal("join the series' rows", e))
}

/// What a `trades` or `equity` call answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Detail {
    /// The booked trades.
    Trades,
    /// The mark-to-market equity, bar by bar.
    Equity,
}

/// The trades or equity curves of the combos `request` chooses: all of them, or those its
/// selection keeps (after a sweep, exactly as `sweep` would choose them), at most
/// `--max-trade-combos` x series; the chosen combos then run again keeping their trades.
pub(crate) async fn detail(
    engine: &Engine,
    request: &SweepRequest,
    keyed: Option<bool>,
    detail: Detail,
    progress: Option<&Arc<Progress>>,
) -> Result<RecordBatch> {
    if request.strategy.portfolio().is_some() {
        let dataset = dataset(engine, request, keyed)?;
        return portfolio::detail(engine, request, dataset, detail, progress).await;
    }
    let limits = limits(engine);
    let dataset = check(engine, request, keyed)?;
    let job = Job {
        progress: progress.cloned(),
        ..Job::stored_range(request, Arc::clone(&dataset), &limits, 0..0)?
    };
    let series = job.inputs.len();
    let max = engine.config.max_trade_combos;
    let too_many = |n: usize| {
        Error::invalid(format!(
            "{n} combos x series chosen; a {} call returns at most {max} (--max-trade-combos): choose fewer with `top` or `where`",
            if detail == Detail::Trades {
                "trades"
            } else {
                "equity"
            }
        ))
    };
    let chosen: Vec<Vec<usize>> = if request.selection.is_empty() {
        let n = series.saturating_mul(request.len());
        if n > max {
            return Err(too_many(n));
        }
        vec![(0..request.len()).collect(); series]
    } else {
        // Exactly the rows `sweep` returns (in steps for a large ranked grid).
        if let Some(p) = progress {
            p.add_total(runs_of(request, &dataset));
        }
        let batch = run_on(engine, request, dataset, progress).await?;
        if batch.num_rows() > max {
            return Err(too_many(batch.num_rows()));
        }
        chosen_combos(&job, &batch)?
    };
    // The job of just the chosen combos (`index`: their positions in the request, ascending).
    let mut index: Vec<usize> = chosen.iter().flatten().copied().collect();
    index.sort_unstable();
    index.dedup();
    let job = Job {
        combos: combos_at(&request.strategy, &request.grid, &index)?,
        positions: None,
        ..job
    };
    if detail == Detail::Equity {
        let rows: u64 = job
            .inputs
            .iter()
            .zip(&chosen)
            .map(|(input, c)| (input.evaluated() * c.len()) as u64)
            .sum();
        let bytes = rows.saturating_mul(EQUITY_ROW_BYTES);
        if bytes > limits.result_bytes {
            return Err(Error::ResourceExhausted(format!(
                "the equity of these combos is {rows} rows ({bytes} bytes); the server allows {} (--sweep-memory-bytes): choose fewer combos or `rows`",
                limits.result_bytes
            )));
        }
    }
    if let Some(p) = progress {
        p.add_total(chosen.iter().map(|c| c.len() as u64).sum());
    }
    let runs = rerun(engine, &job, &index, &chosen).await?;
    // Millions of rows: built off the async runtime, whose workers serve every connection.
    tokio::task::spawn_blocking(move || match detail {
        Detail::Trades => trades_batch(&job, &chosen, &runs),
        Detail::Equity => equity_batch(&job, &chosen, &runs),
    })
    .await
    .map_err(|e| Error::internal("build the reply table", e))?
}

/// Runs `chosen[i]`'s combos (positions in the request; `job.combos`' combo `k` is `index[k]`)
/// on input `i` keeping their trades: in one job when every input has the same combos, else one
/// job per input.
async fn rerun(engine: &Engine, job: &Job, index: &[usize], chosen: &[Vec<usize>]) -> Result<Runs> {
    let keep = Keep {
        trades: true,
        blocks: None,
    };
    let slot = |c: usize| {
        index
            .binary_search(&c)
            .map_err(|_| Error::Internal(format!("combo {c} was not chosen")))
    };
    let sub = |inputs, combos: &[usize]| -> Result<Job> {
        let slots = combos
            .iter()
            .map(|&c| slot(c))
            .collect::<Result<Vec<_>>>()?;
        Ok(Job {
            inputs,
            combos: job.combos.pick(&slots),
            keep,
            ..job.clone()
        })
    };
    if chosen.windows(2).all(|w| w[0] == w[1]) {
        let combos = chosen.first().map_or(&[][..], Vec::as_slice);
        if combos.is_empty() {
            return Ok(empty(job.inputs.len()));
        }
        return engine.compute.run(sub(job.inputs.clone(), combos)?).await;
    }
    let mut all = empty(0);
    for (input, combos) in job.inputs.iter().zip(chosen) {
        let one = if combos.is_empty() {
            empty(1)
        } else {
            engine
                .compute
                .run(sub(vec![input.clone()], combos)?)
                .await?
        };
        all.results.extend(one.results);
        all.records.extend(one.records);
    }
    Ok(all)
}

/// The combos each series of `job` kept in `batch` (a sweep's selected rows: `combo`, and
/// `series` on a keyed dataset), ascending: the reply is ordered by combo.
fn chosen_combos(job: &Job, batch: &RecordBatch) -> Result<Vec<Vec<usize>>> {
    let column = |name: &str| {
        batch
            .column_by_name(name)
            .ok_or_else(|| Error::Internal(format!("the sweep's rows have no {name} column")))
    };
    let combos = column("combo")?
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| Error::Internal("combo is not int64".into()))?;
    let mut chosen = vec![Vec::new(); job.inputs.len()];
    match &job.names {
        None => chosen[0].extend(combos.values().iter().map(|&c| c as usize)),
        Some(names) => {
            let at: HashMap<&str, usize> = names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.as_str(), i))
                .collect();
            let series = column(SERIES_COLUMN)?
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or_else(|| Error::Internal("series is not utf8".into()))?;
            for (name, &c) in series.iter().zip(combos.values()) {
                let s = name.and_then(|n| at.get(n)).ok_or_else(|| {
                    Error::Internal(format!("the sweep answered for series {name:?}"))
                })?;
                chosen[*s].push(c as usize);
            }
        }
    }
    for c in &mut chosen {
        c.sort_unstable();
    }
    Ok(chosen)
}

/// The runs of `inputs` inputs with no combos.
fn empty(inputs: usize) -> Runs {
    Runs {
        results: vec![Vec::new(); inputs],
        records: vec![Vec::new(); inputs],
    }
}

/// The stored dataset of `request`, of the kind a session serves (`keyed`) if any.
fn dataset(engine: &Engine, request: &SweepRequest, keyed: Option<bool>) -> Result<Arc<Dataset>> {
    let dataset = engine.store.get(&request.dataset)?;
    match (keyed, dataset.universe().is_some()) {
        (Some(false), true) => Err(Error::invalid(format!(
            "dataset `{}` is keyed; sweep it on a session opened with {{\"op\": \"session\", \"keyed\": true}}",
            request.dataset
        ))),
        (Some(true), false) => Err(Error::invalid(format!(
            "dataset `{}` is not keyed; this session was opened with \"keyed\": true",
            request.dataset
        ))),
        _ => Ok(dataset),
    }
}
