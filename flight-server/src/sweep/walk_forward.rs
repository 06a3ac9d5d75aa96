//! Walk-forward in one call (protocol v1.2): for each series and fold, every combo runs on the
//! train rows and the best by `select` (after `where`) is kept, then that combo runs on the
//! test rows. Both runs are ordinary sweeps of the use case in [`super::sweep`] (the in-sample
//! one a ranked sweep with `top: 1`, in steps for a large grid; the test one a sweep of one
//! combo), so they mean exactly what the same `sweep` calls would, under the same memory budget
//! and queue, cancelled the same way.
//!
//! Sharing across folds: each run's indicator lines start fresh at its own computed range
//! (strategies.md, "The range a strategy sees"). For arrays whose every value is computed
//! afresh from its own window (the functions the kernel's registry marks `fresh`: `sma`, `std`,
//! `wma`, `hma`, `highest`, ... of any column, and the paper kernel's state bytes) that is the
//! same array over the whole series, cut to the range with the range's own warm-up NaN, bit for
//! bit ([`sweepflight_kernel::ArrayKey::of_range`]: the warm-up is in the node's key). So
//! before a series' folds, a sweep of the few combos that between them have every such array of
//! the grid runs on the whole series and leaves them in the kernel cache; each fold's runs then
//! cut them instead of computing them (the cache view does the cutting). Recurrences (`ema`,
//! `rsi`) depend on where the range starts and are computed per fold.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::DataType;
use sweepflight_protocol::{
    Fold, Grid, ParamKind, RowRange, Selection, Strategy, SweepRequest, WalkForwardRequest,
    walk_forward_schema,
};

use super::{limits, run_on};
use crate::compute::{Job, Progress};
use crate::datasets::Dataset;
use crate::sweep::engine::Engine;
use crate::{Error, Result};

/// The series of a walk-forward (index in the dataset, key value on a keyed one) and their
/// folds.
type Plan = Vec<(usize, Option<String>, Vec<Fold>)>;

/// The dataset and plan of `request`, checked against the server's limits and the data (what
/// `submit` refuses at once).
///
/// # Errors
/// NOT_FOUND for an unknown dataset or series; INVALID_ARGUMENT for `series` on an unkeyed
/// dataset, no fold on any series, a train range shorter than the grid's longest window, more
/// combos x folds x series than `--max-grid-combos` or more rows than `--max-combos`.
pub(crate) fn check(engine: &Engine, request: &WalkForwardRequest) -> Result<(Arc<Dataset>, Plan)> {
    let sweep = &request.sweep;
    let dataset = engine.store.get(&sweep.dataset)?;
    if sweep.strategy.portfolio().is_some() {
        // A portfolio's folds are the calendar's: its call checks them (and a job's submit
        // reads the body as that call would).
        super::portfolio::prepare(
            &crate::compute::Spec::of(sweep),
            &crate::compute::Source::Stored(&sweep.dataset, Arc::clone(&dataset)),
            &limits(engine),
        )?;
        return Ok((dataset, Vec::new()));
    }
    let series: Vec<(usize, Option<String>)> = match dataset.universe() {
        None => {
            if sweep.series.is_some() {
                return Err(Error::invalid(format!(
                    "dataset `{}` is not keyed: `series` applies to datasets put with a key",
                    sweep.dataset
                )));
            }
            vec![(0, None)]
        }
        Some(u) => u
            .select(&sweep.dataset, sweep.series.as_deref())?
            .into_iter()
            .map(|i| (i, Some(u.names[i].clone())))
            .collect(),
    };
    let plan: Plan = series
        .into_iter()
        .map(|(i, name)| {
            let folds = request.folds.of_series(dataset.closes(i).len() as u64);
            (i, name, folds)
        })
        .collect();
    let folds: usize = plan.iter().map(|(_, _, f)| f.len()).sum();
    if folds == 0 {
        return Err(Error::invalid(format!(
            "no fold fits in dataset `{}`: every test range starts past the end of its series",
            sweep.dataset
        )));
    }
    let limits = limits(engine);
    let runs = (folds as u64).saturating_mul(sweep.len() as u64);
    if runs > limits.max_grid_combos as u64 {
        return Err(Error::invalid(format!(
            "{} combos x {folds} folds (all series) = {runs} in-sample runs; this server allows at most {} per call (--max-grid-combos)",
            sweep.len(),
            limits.max_grid_combos
        )));
    }
    if folds > limits.max_combos {
        return Err(Error::invalid(format!(
            "{folds} folds (all series) are {folds} result rows; this server allows at most {} per call (--max-combos)",
            limits.max_combos
        )));
    }
    let longest = longest_window(sweep)?;
    let warmup = sweep.execution.warmup;
    for (_, name, folds) in &plan {
        for f in folds {
            // The bars the in-sample indicators see: the train rows and their warm-up.
            let seen = f.train.1 - f.train.0.saturating_sub(warmup);
            if seen < longest {
                let which = name
                    .as_ref()
                    .map_or_else(String::new, |n| format!(" of series {n:?}"));
                return Err(Error::invalid(format!(
                    "fold {}{which} trains on rows [{}, {}) ({seen} bars with its warm-up), shorter than the grid's longest window ({longest}): no combo with that window could trade in-sample; lengthen `train` or `warmup`, or shorten the windows",
                    f.index, f.train.0, f.train.1
                )));
            }
        }
    }
    Ok((dataset, plan))
}

/// The longest window (integer parameter) of any combo of the request, without expanding it.
fn longest_window(request: &SweepRequest) -> Result<u64> {
    let windows: Vec<usize> = request
        .strategy
        .params()
        .iter()
        .enumerate()
        .filter(|(_, (_, kind))| *kind == ParamKind::Int)
        .map(|(k, _)| k)
        .collect();
    let max_of = |values: &[f64]| windows.iter().map(|&k| values[k] as u64).max().unwrap_or(0);
    Ok(match &request.grid {
        Grid::Lengths(l) => l
            .iter()
            .map(|&l| {
                sweepflight_kernel::Combo::from_length(l)
                    .map(|c| u64::from(c.full().max(c.p())))
                    .map_err(Error::from)
            })
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .max()
            .unwrap_or(0),
        Grid::Params(p) => p
            .iter()
            .map(|t| u64::from(*t.iter().max().unwrap_or(&0)))
            .max()
            .unwrap_or(0),
        Grid::Tuples(t) => t.iter().map(|v| max_of(v)).max().unwrap_or(0),
        Grid::Product(lists) => windows
            .iter()
            .map(|&k| lists[k].iter().fold(0.0f64, |m, &v| m.max(v)) as u64)
            .max()
            .unwrap_or(0),
        Grid::Sample(s) => windows
            .iter()
            .map(|&k| s.ranges[k].1 as u64)
            .max()
            .unwrap_or(0),
    })
}

/// Runs a walk-forward; its reply table ([`walk_forward_schema`]), rows by series then fold.
///
/// # Errors
/// As [`check`], and as the sweeps it runs.
pub(crate) async fn run(
    engine: &Engine,
    request: &WalkForwardRequest,
    keyed: Option<bool>,
    progress: Option<&Arc<Progress>>,
) -> Result<RecordBatch> {
    if request.sweep.strategy.portfolio().is_some() {
        return portfolio(engine, request, keyed, progress).await;
    }
    let (dataset, plan) = check(engine, request)?;
    if let Some(k) = keyed
        && k != dataset.universe().is_some()
    {
        return Err(Error::invalid(format!(
            "dataset `{}` is {}keyed, but this session was opened for {}keyed datasets",
            request.sweep.dataset,
            if k { "not " } else { "" },
            if k { "" } else { "un" }
        )));
    }
    let combos = request.sweep.len() as u64;
    if let Some(p) = progress {
        let folds: u64 = plan.iter().map(|(_, _, f)| f.len() as u64).sum();
        // Every combo in-sample, and the chosen one out of sample, per series and fold.
        p.add_total(folds.saturating_mul(combos + 1));
    }
    let keyed = dataset.universe().is_some();
    let schema = walk_forward_schema(&request.sweep.strategy, keyed);
    let covering = if engine.store.cache().capacity() > 0 {
        covering_combos(&request.sweep)?
    } else {
        Vec::new()
    };
    let mut rows = Rows::default();
    for (index, name, folds) in &plan {
        let len = dataset.closes(*index).len() as u64;
        if !covering.is_empty() && covered(folds, request.sweep.execution.warmup) * 2 >= len {
            let prime = SweepRequest {
                grid: grid_of(&request.sweep.strategy, covering.clone()),
                rows: None,
                series: name.clone().map(|n| vec![n]),
                selection: Selection::default(),
                compression: None,
                ..request.sweep.clone()
            };
            if let Some(p) = progress {
                p.add_total(covering.len() as u64);
            }
            // Its lines are wanted again at once: offered on this first sweep.
            let job = Job {
                progress: progress.cloned(),
                keep_lines: true,
                ..Job::stored(&prime, Arc::clone(&dataset), &limits(engine))?
            };
            engine.compute.run(job).await?;
        }
        for fold in folds {
            let on = |rows: (u64, u64), grid: Grid, selection: Selection| SweepRequest {
                grid,
                rows: Some(RowRange {
                    start: rows.0,
                    end: rows.1,
                }),
                series: name.clone().map(|n| vec![n]),
                selection,
                compression: None,
                ..request.sweep.clone()
            };
            let train = on(
                fold.train,
                request.sweep.grid.clone(),
                request.sweep.selection.clone(),
            );
            let best = run_on(engine, &train, Arc::clone(&dataset), progress).await?;
            let chosen = chosen(&best, request)?;
            let test = match &chosen {
                None => {
                    if let Some(p) = progress {
                        p.add_done(1);
                    }
                    None
                }
                Some((grid, _)) => {
                    let test = on(fold.test, grid.clone(), Selection::default());
                    Some(run_on(engine, &test, Arc::clone(&dataset), progress).await?)
                }
            };
            rows.push(name.as_deref(), fold, chosen.map(|(_, s)| (best, s)), test);
        }
    }
    rows.finish(&schema, &request.sweep.strategy)
}

/// A portfolio's walk-forward (protocol v1.4): folds over the calendar's rows (the v1.2 fold
/// rules with the calendar's length), each train and test run a portfolio sweep of its own
/// rows starting from cash; one row per fold, no `series`.
async fn portfolio(
    engine: &Engine,
    request: &WalkForwardRequest,
    keyed: Option<bool>,
    progress: Option<&Arc<Progress>>,
) -> Result<RecordBatch> {
    let sweep = &request.sweep;
    let dataset = engine.store.get(&sweep.dataset)?;
    if let Some(k) = keyed
        && k != dataset.universe().is_some()
    {
        return Err(Error::invalid(format!(
            "dataset `{}` is {}keyed, but this session was opened for {}keyed datasets",
            sweep.dataset,
            if k { "not " } else { "" },
            if k { "" } else { "un" }
        )));
    }
    let whole = super::portfolio::prepare(
        &crate::compute::Spec::of(sweep),
        &crate::compute::Source::Stored(&sweep.dataset, Arc::clone(&dataset)),
        &limits(engine),
    )?;
    let calendar = whole.calendar_len() as u64;
    let folds = request.folds.of_series(calendar);
    if folds.is_empty() {
        return Err(Error::invalid(format!(
            "no fold fits in the calendar of dataset `{}` ({calendar} rows): every test range starts past its end",
            sweep.dataset
        )));
    }
    let runs = (folds.len() as u64).saturating_mul(sweep.len() as u64);
    let max_grid = limits(engine).max_grid_combos as u64;
    if runs > max_grid {
        return Err(Error::invalid(format!(
            "{} combos x {} folds = {runs} in-sample runs; this server allows at most {max_grid} per call (--max-grid-combos)",
            sweep.len(),
            folds.len()
        )));
    }
    let schema = walk_forward_schema(&sweep.strategy, false);
    let mut rows = Rows::default();
    for fold in &folds {
        let on = |range: (u64, u64), grid: Grid, selection: Selection| SweepRequest {
            grid,
            rows: Some(RowRange {
                start: range.0,
                end: range.1,
            }),
            selection,
            compression: None,
            ..sweep.clone()
        };
        let train = on(fold.train, sweep.grid.clone(), sweep.selection.clone());
        let best = super::portfolio::sweep(engine, &train, Arc::clone(&dataset), progress).await?;
        let chosen = chosen(&best, request)?;
        let test = match &chosen {
            None => None,
            Some((grid, _)) => {
                let test = on(fold.test, grid.clone(), Selection::default());
                Some(super::portfolio::sweep(engine, &test, Arc::clone(&dataset), progress).await?)
            }
        };
        rows.push(None, fold, chosen.map(|(_, s)| (best, s)), test);
    }
    rows.finish(&schema, &sweep.strategy)
}

/// The first combos of the grid, in order, that between them have every line of the grid a
/// range can cut from the whole series ([`sweepflight_kernel::Combos::cuttable_lines`]): a
/// few per window, not the whole grid. Empty when a combo has no such line (its folds would
/// compute the rest anyway).
fn covering_combos(request: &SweepRequest) -> Result<Vec<Vec<f64>>> {
    let strategy = &request.strategy;
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    // In steps, so a grid of millions is never expanded whole.
    const STEP: usize = 100_000;
    for start in (0..request.len()).step_by(STEP) {
        let end = (start + STEP).min(request.len());
        let (combos, kept) = crate::compute::params_in(strategy, &request.grid, start..end)?;
        for i in 0..combos.len() {
            let lines = combos.cuttable_lines(i);
            if lines.is_empty() {
                return Ok(Vec::new());
            }
            let mut new = false;
            for key in lines {
                new |= seen.insert(key);
            }
            if new {
                let k = start + kept.as_ref().map_or(i, |kept| kept[i]);
                out.push(match request.grid.values(strategy, k)? {
                    Some(v) => v,
                    None => combos.combo(i).to_vec(),
                });
            }
        }
    }
    Ok(out)
}

/// Combos (values in parameter order) as a request grid.
fn grid_of(strategy: &Strategy, combos: Vec<Vec<f64>>) -> Grid {
    match strategy {
        s if s.is_hma_sar() => Grid::Params(
            combos
                .iter()
                .map(|v| std::array::from_fn(|k| v[k] as u32))
                .collect(),
        ),
        _ => Grid::Tuples(combos),
    }
}

/// Rows of a series the folds' runs compute lines on (their train and test rows with the
/// warm-up before each), counted once.
fn covered(folds: &[Fold], warmup: u64) -> u64 {
    let mut ranges: Vec<(u64, u64)> = folds
        .iter()
        .flat_map(|f| [f.train, f.test])
        .map(|(a, b)| (a.saturating_sub(warmup), b))
        .collect();
    ranges.sort_unstable();
    let (mut total, mut reach) = (0u64, 0u64);
    for (a, b) in ranges {
        let a = a.max(reach);
        if b > a {
            total += b - a;
            reach = b;
        }
    }
    total
}

/// The combo an in-sample run kept (its parameters as a one-combo grid) and its score: none if
/// no combo passed `where` or the best score is null (a null score is never chosen).
fn chosen(best: &RecordBatch, request: &WalkForwardRequest) -> Result<Option<(Grid, f64)>> {
    if best.num_rows() == 0 {
        return Ok(None);
    }
    let Some(score) = number(best, request.select_by())? else {
        return Ok(None);
    };
    let strategy = &request.sweep.strategy;
    let values = strategy
        .params()
        .iter()
        .map(|(name, _)| {
            number(best, name)?.ok_or_else(|| Error::Internal(format!("parameter {name} is null")))
        })
        .collect::<Result<Vec<f64>>>()?;
    let grid = grid_of(strategy, vec![values]);
    Ok(Some((grid, score)))
}

/// Row 0 of column `name` as a number (`None` if null).
fn number(batch: &RecordBatch, name: &str) -> Result<Option<f64>> {
    let col = batch
        .column_by_name(name)
        .ok_or_else(|| Error::Internal(format!("no result column {name}")))?;
    let as_f64 = arrow_cast::cast(col, &DataType::Float64)
        .map_err(|e| Error::internal("read a result column", e))?;
    let floats = as_f64
        .as_any()
        .downcast_ref::<Float64Array>()
        .ok_or_else(|| Error::Internal("a cast to float64 gave another type".into()))?;
    Ok(floats.is_valid(0).then(|| floats.value(0)))
}

/// The reply's rows as they are found: per row, the fold and the one-row tables of the chosen
/// combo's in-sample and test runs.
#[derive(Default)]
struct Rows {
    series: Vec<String>,
    folds: Vec<[i64; 5]>,
    /// Per row: the in-sample best (combo and parameters) and its score, and the test run.
    runs: Vec<Option<(RecordBatch, f64, RecordBatch)>>,
}

impl Rows {
    fn push(
        &mut self,
        series: Option<&str>,
        fold: &Fold,
        best: Option<(RecordBatch, f64)>,
        test: Option<RecordBatch>,
    ) {
        if let Some(s) = series {
            self.series.push(s.to_owned());
        }
        let i = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.folds.push([
            i(fold.index),
            i(fold.train.0),
            i(fold.train.1),
            i(fold.test.0),
            i(fold.test.1),
        ]);
        self.runs.push(
            best.zip(test)
                .map(|((best, score), test)| (best, score, test)),
        );
    }

    fn finish(self, schema: &arrow_schema::SchemaRef, strategy: &Strategy) -> Result<RecordBatch> {
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
        if !self.series.is_empty() {
            columns.push(Arc::new(StringArray::from_iter_values(&self.series)));
        }
        for k in 0..5 {
            columns.push(Arc::new(Int64Array::from_iter_values(
                self.folds.iter().map(|f| f[k]),
            )));
        }
        // Each remaining column: from the in-sample row (combo, parameters), the score, or the
        // test row (metrics); null where no combo was chosen.
        let params = 1 + strategy.params().len();
        let first = usize::from(!self.series.is_empty()) + 5;
        for (j, field) in schema.fields().iter().enumerate().skip(first) {
            let name = field.name().as_str();
            if name == "train_score" {
                columns.push(Arc::new(Float64Array::from_iter(
                    self.runs.iter().map(|r| r.as_ref().map(|(_, s, _)| *s)),
                )));
                continue;
            }
            let from_train = j - first < params;
            let parts: Vec<ArrayRef> = self
                .runs
                .iter()
                .map(|r| match r {
                    Some((best, _, test)) => {
                        let source = if from_train { best } else { test };
                        let col = source
                            .column_by_name(name)
                            .ok_or_else(|| Error::Internal(format!("no result column {name}")))?;
                        Ok(col.slice(0, 1))
                    }
                    None => Ok(arrow_array::new_null_array(field.data_type(), 1)),
                })
                .collect::<Result<_>>()?;
            let refs: Vec<&dyn Array> = parts.iter().map(AsRef::as_ref).collect();
            columns.push(if refs.is_empty() {
                arrow_array::new_empty_array(field.data_type())
            } else {
                arrow_select::concat::concat(&refs)
                    .map_err(|e| Error::internal("join the folds' rows", e))?
            });
        }
        RecordBatch::try_new(Arc::clone(schema), columns)
            .map_err(|e| Error::internal("build the walk-forward table", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sweepflight_protocol::Builtin;

    fn fold(train: (u64, u64), test: (u64, u64)) -> Fold {
        Fold {
            index: 0,
            train,
            test,
        }
    }

    #[test]
    fn covered_rows_count_each_row_once() {
        let folds = [fold((0, 100), (100, 120)), fold((20, 120), (120, 140))];
        assert_eq!(covered(&folds, 0), 140);
        // The warm-up before each range: from 0 (clipped) and from 90.
        assert_eq!(covered(&folds, 10), 140);
        let apart = [fold((0, 10), (50, 60)), fold((100, 110), (200, 210))];
        assert_eq!(covered(&apart, 0), 40);
        assert_eq!(covered(&apart, 5), 55);
    }

    #[test]
    fn a_few_combos_cover_every_cuttable_line_of_a_grid() {
        let sma = SweepRequest::strategy(
            "s",
            Strategy::Builtin(Builtin::SmaCross),
            Grid::Product(vec![
                (1..=10).map(f64::from).collect(),
                (20..=119).map(f64::from).collect(),
            ]),
        );
        let cover = covering_combos(&sma).unwrap();
        // Every fast and every slow window, in far fewer combos than the grid's 1,000.
        assert!(cover.len() <= 110, "{}", cover.len());
        for w in (1..=10).chain(20..=119) {
            let w = f64::from(w);
            assert!(cover.iter().any(|c| c.contains(&w)), "window {w}");
        }
        let ema = SweepRequest::strategy(
            "s",
            Strategy::Builtin(Builtin::EmaCross),
            Grid::Product(vec![vec![5.0], vec![20.0]]),
        );
        assert!(covering_combos(&ema).unwrap().is_empty());
        let hma = SweepRequest::lengths("s", [10, 20, 30]);
        assert_eq!(covering_combos(&hma).unwrap().len(), 3);
        // A channel breakout's parts are read from the channels' pass, never the cache.
        let donchian = SweepRequest::strategy(
            "s",
            Strategy::Builtin(Builtin::Donchian),
            Grid::Product(vec![vec![10.0, 20.0]]),
        );
        assert!(covering_combos(&donchian).unwrap().is_empty());
        // Formulas: any fresh call (here `sma` and `std` of the closes per n) is covered, one
        // combo per n whatever the other parameter.
        let bollinger = SweepRequest::decode(
            br#"{"dataset": "s", "strategy": {"long": "close < sma(close, n) - k * std(close, n)",
                 "short": "close > sma(close, n) + k * std(close, n)"},
                 "grid": {"n": [10, 20, 30], "k": [1.0, 2.0, 3.0]}}"#,
        )
        .unwrap();
        let cover = covering_combos(&bollinger).unwrap();
        assert_eq!(cover.len(), 3, "{cover:?}");
        for n in [10.0, 20.0, 30.0] {
            assert!(cover.iter().any(|c| c[0] == n), "n {n}: {cover:?}");
        }
    }
}
