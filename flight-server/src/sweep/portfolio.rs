//! Portfolio strategies (protocol v1.4, docs/portfolios.md): the use case of every verb that
//! takes a sweep body whose strategy is a portfolio. A call becomes a [`Prepared`] book (the
//! call's series as whole-series inputs, their calendar, the calendar rows to run, each combo's
//! counts and decision rows), runs on the sweep pool within the memory budget through the
//! kernel's portfolio sweep (`sweepflight_kernel::portfolio::panel`), and answers one row per
//! combo (`sweep`), per fill (`trades`) or per calendar row (`equity`).
//!
//! What differs from a per-series sweep, and why: the formulas of a portfolio read every bar of
//! each series (its history before `rows` included: a live system has it), so inputs are always
//! whole series; the result is one per combo, so selection ranks combos, not series x combos.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use arrow_array::{
    ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray, UInt64Array,
    builder::{FixedSizeListBuilder, Float64Builder},
};
use sweepflight_kernel::portfolio::panel::{
    Panel, PortfolioCombo, PortfolioSweep, Universe, decision_rows, panel_arrays,
};
use sweepflight_kernel::portfolio::{
    Calendar, Keep, OnCalendar, PortfolioFill, PortfolioRun, Rules, day_key, every, month_key,
    period_starts, week_key,
};
use sweepflight_kernel::{ArrayCache, NoCache};
use sweepflight_protocol::{
    ExchangeSweep, Fill, Portfolio, Rebalance, SweepRequest, portfolio_equity_schema,
    portfolio_trades_schema, sweep_schema,
};

use crate::compute::{Input, Limits, Progress, Source, Spec, check_time_order};
use crate::datasets::{Dataset, NewDataset};
use crate::sweep::Detail;
use crate::sweep::engine::Engine;
use crate::sweep::results::select;
use crate::{Error, Result};

/// Seconds in a year of 365.25 days (`"periods_per_year": "auto"`).
const YEAR_SECONDS: f64 = 31_557_600.0;

/// One combo of a call: its position in the grid, values, rules and decision rows.
#[derive(Debug, Clone)]
struct Combo {
    position: usize,
    values: Vec<f64>,
    rules: Rules,
    decisions: Arc<[usize]>,
}

/// A portfolio call made ready to run: everything owned, so it can go to the sweep pool.
#[derive(Debug)]
pub(crate) struct Prepared {
    portfolio: Arc<Portfolio>,
    strategy: sweepflight_protocol::Strategy,
    /// The call's series (whole), in series order, and their keys on a keyed dataset.
    inputs: Vec<Input>,
    names: Option<Vec<String>>,
    calendar: Calendar,
    /// The time column's values at one stored row of each calendar row (the replies' `time`).
    times: Option<ArrayRef>,
    range: (usize, usize),
    periods_per_year: f64,
    blocks: Option<u8>,
    combos: Vec<Combo>,
}

impl Prepared {
    /// Calendar rows in the call.
    pub(crate) fn calendar_len(&self) -> usize {
        self.calendar.len()
    }

    /// The call's series.
    pub(crate) fn series(&self) -> usize {
        self.inputs.len()
    }
}

/// Reads a portfolio call: its series and calendar, rows, metrics' annualisation, and every
/// combo's counts and decisions, refusing what the contract refuses before anything runs.
///
/// # Errors
/// FAILED_PRECONDITION for bars out of time order; INVALID_ARGUMENT for a keyed dataset
/// without a usable time, `series` on an unkeyed one, `rows` past the calendar, `blocks`
/// past its rows, a word `rebalance` without a date time, a missing column, a combo past a
/// limit; NOT_FOUND for an unknown series.
pub(crate) fn prepare(spec: &Spec<'_>, source: &Source<'_>, limits: &Limits) -> Result<Prepared> {
    let portfolio = spec
        .strategy
        .portfolio()
        .ok_or_else(|| Error::Internal("a portfolio call without a portfolio".into()))?;
    let portfolio = Arc::new(portfolio.clone());
    let (what, label, bars, universe, schema, batches) = match source {
        Source::Stored(name, d) => (
            format!("dataset `{name}`"),
            *name,
            &d.data.bars,
            d.universe(),
            &d.data.schema,
            &d.data.batches,
        ),
        Source::Upload(u) => (
            "the upload".to_owned(),
            "the upload",
            &u.bars,
            u.universe.as_ref(),
            &u.schema,
            &u.batches,
        ),
    };
    check_time_order(bars, &what)?;
    let time = bars.time.as_ref();
    let (picked, names): (Vec<usize>, Option<Vec<String>>) = match universe {
        None => {
            if spec.series.is_some() {
                return Err(Error::invalid(format!(
                    "{what} is not keyed: `series` applies to datasets put with a key"
                )));
            }
            (vec![0], None)
        }
        Some(u) => {
            if time.is_none() {
                let why = bars.unusable.get("time").map_or_else(
                    || "it has none".to_owned(),
                    |r| format!("its `time` is unusable: {r}"),
                );
                return Err(Error::invalid(format!(
                    "a portfolio aligns its series by time; {what} has no usable time column \
                     ({why}): put the bars with a `time` column (a timestamp, a date or int64)"
                )));
            }
            let picked = u.select(label, spec.series)?;
            let names = picked.iter().map(|&i| u.names[i].clone()).collect();
            (picked, Some(names))
        }
    };
    let own: Arc<[Arc<[f64]>]> = if portfolio.program.inputs.is_empty() {
        Arc::new([])
    } else {
        crate::datasets::bars::input_columns(schema, batches, &portfolio.program.inputs, &what)?
            .into()
    };
    let days = crate::compute::period_days(&portfolio.program, bars, false)?;
    let inputs: Vec<Input> = picked
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            let name = names.as_ref().map(|n| n[k].as_str());
            Ok(source
                .input(i, name, None, 0)?
                .with_columns(Arc::clone(&own))
                .with_days(days.clone()))
        })
        .collect::<Result<_>>()?;
    let next_open = spec.execution.fill == Fill::NextOpen;
    let mut reads: Vec<&str> = if next_open { vec!["open"] } else { vec![] };
    reads.extend(portfolio.program.columns().into_iter().map(|c| c.name()));
    let needs = if next_open {
        "this portfolio (`fill: next_open`, its default, trades at the next open)"
    } else {
        "this portfolio"
    };
    for input in &inputs {
        input.require(&reads, needs)?;
    }
    // Each series' times (row numbers for an unkeyed dataset without a time), the calendar.
    let keys: Option<Vec<i64>> = time.map(|t| t.keys()).transpose()?;
    let series_keys: Vec<Vec<i64>> = inputs
        .iter()
        .map(|input| match (&keys, input.time()) {
            (Some(k), Some((_, whole))) => k[whole].to_vec(),
            _ => (0..input.closes().len() as i64).collect(),
        })
        .collect();
    let views: Vec<&[i64]> = series_keys.iter().map(Vec::as_slice).collect();
    let calendar = Calendar::of(&views);
    let t_n = calendar.len();
    let range = match spec.rows {
        None => (0, t_n),
        Some(r) => {
            let start = usize::try_from(r.start).unwrap_or(usize::MAX);
            if start >= t_n {
                return Err(Error::invalid(format!(
                    "`rows` starts at {start}, but the call's calendar has {t_n} rows (the union \
                     of its series' times)"
                )));
            }
            (start, usize::try_from(r.end).unwrap_or(usize::MAX).min(t_n))
        }
    };
    let n = range.1 - range.0;
    if let Some(b) = spec.execution.blocks
        && usize::from(b) > n
    {
        return Err(Error::invalid(format!(
            "`blocks` is {b}, but the portfolio runs only {n} calendar rows"
        )));
    }
    // The stored time of each calendar row: from the first series with a bar there.
    let times = match (time, &keys) {
        (Some(t), Some(_)) => {
            let mut rows = vec![0u64; t_n];
            let mut set = vec![false; t_n];
            for (input, row_of) in inputs.iter().zip(&calendar.row_of) {
                let whole = input.time().map_or(0..0, |(_, w)| w);
                for (c, &own) in row_of.iter().enumerate() {
                    if !set[c] && own != sweepflight_kernel::portfolio::NO_BAR {
                        rows[c] = (whole.start + own as usize) as u64;
                        set[c] = true;
                    }
                }
            }
            Some(
                arrow_select::take::take(t.array.as_ref(), &UInt64Array::from(rows), None)
                    .map_err(|e| Error::internal("read the time column", e))?,
            )
        }
        _ => None,
    };
    let periods_per_year = if spec.execution.periods_per_year_auto {
        let needs = "`\"periods_per_year\": \"auto\"` reads the calendar's time";
        let unit = time.and_then(|t| t.unit_seconds()).ok_or_else(|| {
            Error::invalid(format!(
                "{needs}: {what} has no time of a timestamp or date type; give \
                     `periods_per_year` as a number (252 for daily bars)"
            ))
        })?;
        let span = (calendar.times[t_n - 1] - calendar.times[0]) as f64 * unit;
        if t_n < 2 || span <= 0.0 {
            return Err(Error::invalid(format!(
                "{needs}: its first and last rows are at the same time, a span of 0"
            )));
        }
        (t_n - 1) as f64 / (span / YEAR_SECONDS)
    } else {
        spec.execution.periods_per_year.unwrap_or(1.0)
    };
    // The combos (those a constraint skips keep their positions), within the limits.
    let runs = limits.runs(
        (spec.selection, spec.strategy, spec.grid),
        1,
        0..spec.grid.len(),
    )?;
    limits.check(spec.selection, crate::compute::Keep::NOTHING, 1, runs)?;
    let word_days: Option<Vec<i64>> = match portfolio.rebalance {
        Rebalance::Every(_) => None,
        word => {
            let word = word.word().unwrap_or("a word");
            let days = time
                .map(|t| {
                    calendar
                        .times
                        .iter()
                        .map(|&k| t.day_of(k))
                        .collect::<Option<Vec<i64>>>()
                })
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "`rebalance: \"{word}\"` reads the calendar's dates, and {what} has no \
                         time: give `rebalance` as every K rows (an integer or a parameter)"
                    ))
                })?
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "`rebalance: \"{word}\"` reads dates, and {what}'s time is int64 (a \
                         number without a unit): send a timestamp or date time, or give \
                         `rebalance` as every K rows"
                    ))
                })?;
            Some(days)
        }
    };
    let words: Option<Arc<[usize]>> = word_days.map(|days| {
        let key: fn(i64) -> i64 = match portfolio.rebalance {
            Rebalance::Daily => day_key,
            Rebalance::Weekly => week_key,
            _ => month_key,
        };
        let keys: Vec<i64> = days.into_iter().map(key).collect();
        period_starts(range.0, range.1, &keys).into()
    });
    let mut every_k: HashMap<u32, Arc<[usize]>> = HashMap::new();
    let fill = if next_open {
        PortfolioFill::NextOpen
    } else {
        PortfolioFill::Close
    };
    let mut combos = Vec::with_capacity(runs);
    for position in 0..spec.grid.len() {
        let values = spec
            .grid
            .values(spec.strategy, position)?
            .unwrap_or_default();
        match spec.strategy.check_combo(&values) {
            Ok(()) => {}
            Err(("constraint", _)) => continue,
            Err((param, message)) => {
                return Err(Error::invalid(format!(
                    "combo {position}: parameter `{param}` {message}"
                )));
            }
        }
        let counts = portfolio.counts(&values);
        let decisions = match counts.every {
            Some(k) => Arc::clone(
                every_k
                    .entry(k)
                    .or_insert_with(|| every(range.0, range.1, k as usize).into()),
            ),
            None => Arc::clone(words.as_ref().expect("a word's decisions")),
        };
        combos.push(Combo {
            position,
            values,
            rules: Rules {
                longs: counts.longs as usize,
                shorts: counts.shorts as usize,
                keep: counts.keep.map(|k| k as usize),
                fill,
                fee: spec.fee,
                slippage: spec.execution.slippage,
            },
            decisions,
        });
    }
    Ok(Prepared {
        strategy: spec.strategy.clone(),
        portfolio,
        inputs,
        names,
        calendar,
        times,
        range,
        periods_per_year,
        blocks: spec.execution.blocks,
        combos,
    })
}

/// Runs the combos `pick` of `prepared` (indices into its combos) on the sweep pool, keeping
/// `keep`: one run each, in that order.
///
/// # Errors
/// RESOURCE_EXHAUSTED when one combo's arrays cannot fit the memory budget (before any work);
/// kernel errors; CANCELLED.
pub(crate) async fn execute(
    engine: &Engine,
    prepared: Arc<Prepared>,
    pick: Vec<usize>,
    keep: Keep,
    progress: Option<&Arc<Progress>>,
) -> Result<Vec<PortfolioRun>> {
    let series = prepared.inputs.len();
    let t_n = prepared.calendar.len();
    let budget = engine.compute.budget().total();
    // Memory: the universe's marks and rows, each combo's result (its equity while it runs,
    // and what it keeps), and the panel of the call's distinct arrays at its decision rows.
    let per_combo = (prepared.range.1 - prepared.range.0) * 8
        + if keep.rows {
            (prepared.range.1 - prepared.range.0) * 24
        } else {
            0
        }
        + size_of::<PortfolioRun>();
    let (numbers, conds, rows) = {
        let combos = kernel_combos(&prepared, &pick);
        let (numbers, conds) = panel_arrays(&prepared.portfolio.program, &combos);
        (numbers, conds, decision_rows(&combos).len())
    };
    let lag = usize::from(
        prepared
            .combos
            .first()
            .is_some_and(|c| c.rules.fill == PortfolioFill::NextOpen),
    );
    let fixed = Universe::bytes(series, t_n, rows) + series * t_n * 4;
    let results = pick.len() * per_combo;
    let one = fixed + Panel::bytes(2, 1, rows, series) + per_combo;
    if one as u64 > budget {
        return Err(Error::ResourceExhausted(format!(
            "one combo of this portfolio needs {one} bytes of sweep memory ({series} series x \
             {t_n} calendar rows); the server allows {budget} (--sweep-memory-bytes)"
        )));
    }
    let all = fixed + results + Panel::bytes(numbers, conds, rows, series);
    let need = (all as u64).min(budget);
    let panel_cap = usize::try_from(need)
        .unwrap_or(usize::MAX)
        .saturating_sub(fixed + results);
    // The cache: a series' formula arrays are kept from the second call on it (a researcher
    // iterating on one idea), not on the first (keeping a universe's arrays costs fresh pages:
    // 2.5 s against 1.5 s for a first call of 468 combos over 500 series).
    let cache = Arc::clone(engine.compute.cache());
    let metrics = Arc::clone(&engine.metrics);
    let node_bytes = (numbers + conds + 1) as u64
        * prepared
            .inputs
            .iter()
            .map(|i| (i.closes().len() * 8) as u64)
            .sum::<u64>();
    let offer = cache.worth_offering(node_bytes);
    let report = progress.cloned();
    let parallel = (pick.len() as u64).saturating_mul((t_n * series) as u64) >= 1 << 16;
    engine
        .compute
        .on_pool(need, progress, parallel, move |_, cancelled| {
            let on: Vec<OnCalendar<'_>> = prepared
                .calendar
                .row_of
                .iter()
                .zip(&prepared.inputs)
                .map(|(row_of, input)| {
                    let bars = input.bars();
                    OnCalendar {
                        row_of,
                        open: bars.open,
                        close: input.closes(),
                    }
                })
                .collect();
            let combos = kernel_combos(&prepared, &pick);
            // The rows the decisions fill at: their prices are read a row at a time.
            let fill_rows: Vec<usize> = decision_rows(&combos).iter().map(|&r| r + lag).collect();
            let universe = Universe::new(on, &fill_rows);
            let bars: Vec<_> = prepared.inputs.iter().map(Input::bars).collect();
            let cache_of = |s: usize| -> Box<dyn ArrayCache + '_> {
                match prepared.inputs[s].cache_key() {
                    Some(key) if cache.still_seen(key) => {
                        Box::new(cache.view_keeping(key, Some(&metrics), offer))
                    }
                    Some(key) => Box::new(cache.view(key, &metrics, false)),
                    None => Box::new(NoCache),
                }
            };
            let done = || {
                if let Some(p) = &report {
                    p.add_done(1);
                }
            };
            let call = PortfolioSweep {
                universe: &universe,
                bars: &bars,
                program: &prepared.portfolio.program,
                combos: &combos,
                range: prepared.range,
                periods_per_year: prepared.periods_per_year,
                blocks: prepared.blocks.map(usize::from),
                keep,
                cache: &cache_of,
                cancelled,
                progress: &done,
            };
            Ok(sweepflight_kernel::portfolio::panel::sweep(
                &call, parallel, panel_cap,
            )?)
        })
        .await
}

/// The kernel's view of combos `pick` of `prepared`.
fn kernel_combos<'a>(prepared: &'a Prepared, pick: &[usize]) -> Vec<PortfolioCombo<'a>> {
    pick.iter()
        .map(|&c| {
            let combo = &prepared.combos[c];
            PortfolioCombo {
                values: &combo.values,
                rules: combo.rules,
                decisions: &combo.decisions,
            }
        })
        .collect()
}

/// The `sweep` reply of a portfolio: one row per combo, selected.
///
/// # Errors
/// As [`prepare`] and [`execute`].
pub(crate) async fn sweep(
    engine: &Engine,
    request: &SweepRequest,
    dataset: Arc<Dataset>,
    progress: Option<&Arc<Progress>>,
) -> Result<RecordBatch> {
    let prepared = prepare(
        &Spec::of(request),
        &Source::Stored(&request.dataset, dataset),
        &crate::sweep::limits(engine),
    )?;
    table(engine, Arc::new(prepared), &request.selection, progress).await
}

/// The stateless exchange's portfolio sweep on the series streamed with it.
///
/// # Errors
/// As [`sweep`].
pub(crate) async fn transient(
    engine: &Engine,
    sweep: &ExchangeSweep,
    upload: &NewDataset,
) -> Result<RecordBatch> {
    let prepared = prepare(
        &Spec::of_exchange(sweep),
        &Source::Upload(upload),
        &crate::sweep::limits(engine),
    )?;
    table(engine, Arc::new(prepared), &sweep.selection, None).await
}

/// Every combo of `prepared` run, as the selected sweep table.
async fn table(
    engine: &Engine,
    prepared: Arc<Prepared>,
    selection: &sweepflight_protocol::Selection,
    progress: Option<&Arc<Progress>>,
) -> Result<RecordBatch> {
    let all: Vec<usize> = (0..prepared.combos.len()).collect();
    if let Some(p) = progress {
        p.add_total(all.len() as u64);
    }
    let keep = Keep::default();
    // With `top`, a grid larger than one step runs in steps, each step's rows selected and
    // merged with the best so far (as a per-series sweep's steps are): the memory of the
    // results stays one step's whatever the grid.
    let step = if selection.top.is_some() {
        engine.config.top_step_rows.max(1)
    } else {
        all.len().max(1)
    };
    let mut best: Option<RecordBatch> = None;
    for pick in all.chunks(step) {
        let runs = execute(engine, Arc::clone(&prepared), pick.to_vec(), keep, progress).await?;
        let part = select(sweep_batch(&prepared, pick, &runs)?, 1, selection)?;
        best = Some(crate::sweep::results::merge_selected(
            best, part, selection,
        )?);
    }
    match best {
        Some(b) => Ok(b),
        None => select(sweep_batch(&prepared, &[], &[])?, 1, selection),
    }
}

/// The sweep table of combos `pick` with their `runs`.
///
/// # Errors
/// Only if Arrow refuses the columns (a bug).
pub(crate) fn sweep_batch(
    prepared: &Prepared,
    pick: &[usize],
    runs: &[PortfolioRun],
) -> Result<RecordBatch> {
    let schema = sweep_schema(&prepared.strategy, false, prepared.blocks);
    let combos: Vec<&Combo> = pick.iter().map(|&c| &prepared.combos[c]).collect();
    let mut columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from_iter_values(
        combos.iter().map(|c| c.position as i64),
    ))];
    for (k, (_, kind)) in prepared.portfolio.params.iter().enumerate() {
        columns.push(match kind {
            sweepflight_protocol::ParamKind::Int => Arc::new(Int64Array::from_iter_values(
                combos.iter().map(|c| c.values[k] as i64),
            )),
            sweepflight_protocol::ParamKind::Number => Arc::new(Float64Array::from_iter_values(
                combos.iter().map(|c| c.values[k]),
            )),
        });
    }
    let m = |f: &dyn Fn(&sweepflight_kernel::portfolio::PortfolioMetrics) -> f64| -> ArrayRef {
        Arc::new(Float64Array::from_iter_values(
            runs.iter().map(|r| f(&r.metrics)),
        ))
    };
    let opt =
        |f: &dyn Fn(&sweepflight_kernel::portfolio::PortfolioMetrics) -> Option<f64>| -> ArrayRef {
            Arc::new(Float64Array::from_iter(runs.iter().map(|r| f(&r.metrics))))
        };
    columns.extend([
        m(&|x| x.total_return),
        opt(&|x| x.annual_return),
        opt(&|x| x.volatility),
        opt(&|x| x.sharpe),
        opt(&|x| x.sortino),
        m(&|x| x.max_drawdown),
        m(&|x| x.turnover),
        m(&|x| x.fees),
        Arc::new(Int64Array::from_iter_values(
            runs.iter().map(|r| r.metrics.rebalances as i64),
        )),
        m(&|x| x.avg_holdings),
    ]);
    if let Some(b) = prepared.blocks {
        let mut list =
            FixedSizeListBuilder::new(Float64Builder::new(), i32::from(b)).with_field(Arc::new(
                arrow_schema::Field::new("item", arrow_schema::DataType::Float64, false),
            ));
        for r in runs {
            for v in r.metrics.block_pnl.as_deref().unwrap_or(&[]) {
                list.values().append_value(*v);
            }
            list.append(true);
        }
        columns.push(Arc::new(list.finish()));
    }
    RecordBatch::try_new(schema, columns).map_err(|e| Error::internal("build the result table", e))
}

/// The `trades` or `equity` reply of a portfolio: the combos its selection chooses (all of
/// them without one, at most `--max-trade-combos`), in combo order, run again keeping their
/// trades or rows.
///
/// # Errors
/// As [`sweep`]; INVALID_ARGUMENT past `--max-trade-combos`.
pub(crate) async fn detail(
    engine: &Engine,
    request: &SweepRequest,
    dataset: Arc<Dataset>,
    detail: Detail,
    progress: Option<&Arc<Progress>>,
) -> Result<RecordBatch> {
    let prepared = Arc::new(prepare(
        &Spec::of(request),
        &Source::Stored(&request.dataset, dataset),
        &crate::sweep::limits(engine),
    )?);
    let max = engine.config.max_trade_combos;
    let verb = if detail == Detail::Trades {
        "trades"
    } else {
        "equity"
    };
    let too_many = |n: usize| {
        Error::invalid(format!(
            "{n} combos chosen; a {verb} call returns at most {max} (--max-trade-combos): choose fewer with `top` or `where`"
        ))
    };
    let mut pick: Vec<usize> = if request.selection.is_empty() {
        (0..prepared.combos.len()).collect()
    } else {
        let batch = table(engine, Arc::clone(&prepared), &request.selection, progress).await?;
        let chosen = batch
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| Error::Internal("combo is not int64".into()))?;
        let at: HashMap<usize, usize> = prepared
            .combos
            .iter()
            .enumerate()
            .map(|(k, c)| (c.position, k))
            .collect();
        chosen
            .values()
            .iter()
            .map(|&p| {
                at.get(&(p as usize))
                    .copied()
                    .ok_or_else(|| Error::Internal("an unknown combo".into()))
            })
            .collect::<Result<_>>()?
    };
    if pick.len() > max {
        return Err(too_many(pick.len()));
    }
    pick.sort_unstable();
    if detail == Detail::Equity {
        let rows = (pick.len() * (prepared.range.1 - prepared.range.0)) as u64;
        let bytes = rows.saturating_mul(8 * 5);
        let allowed = engine.compute.budget().total();
        if bytes > allowed {
            return Err(Error::ResourceExhausted(format!(
                "the equity of these combos is {rows} rows ({bytes} bytes); the server allows {allowed} (--sweep-memory-bytes): choose fewer combos or `rows`"
            )));
        }
    }
    if let Some(p) = progress {
        p.add_total(pick.len() as u64);
    }
    let keep = Keep {
        trades: detail == Detail::Trades,
        rows: detail == Detail::Equity,
    };
    let runs = execute(engine, Arc::clone(&prepared), pick.clone(), keep, progress).await?;
    tokio::task::spawn_blocking(move || match detail {
        Detail::Trades => trades_batch(&prepared, &pick, &runs),
        Detail::Equity => equity_batch(&prepared, &pick, &runs),
    })
    .await
    .map_err(|e| Error::internal("build the reply table", e))?
}

/// The `trades` reply: each chosen combo's trades in the order they happened.
fn trades_batch(prepared: &Prepared, pick: &[usize], runs: &[PortfolioRun]) -> Result<RecordBatch> {
    let time_type = prepared.times.as_ref().map(|t| t.data_type().clone());
    let schema = portfolio_trades_schema(prepared.names.is_some(), time_type.as_ref());
    let n: usize = runs.iter().map(|r| r.trades.len()).sum();
    let (mut combo, mut row) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut series, mut floats) = (
        Vec::with_capacity(n),
        [(); 4].map(|()| Vec::with_capacity(n)),
    );
    for (&c, run) in pick.iter().zip(runs) {
        for t in &run.trades {
            combo.push(prepared.combos[c].position as i64);
            row.push(t.row as i64);
            series.push(t.series);
            floats[0].push(t.shares);
            floats[1].push(t.price);
            floats[2].push(t.value);
            floats[3].push(t.fee);
        }
    }
    let rows_u64: Vec<u64> = row.iter().map(|&r| r as u64).collect();
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(combo)),
        Arc::new(Int64Array::from(row)),
    ];
    if let Some(times) = &prepared.times {
        columns.push(take(times, &rows_u64)?);
    }
    if let Some(names) = &prepared.names {
        columns.push(Arc::new(StringArray::from_iter_values(
            series.iter().map(|&s| names[s].as_str()),
        )));
    }
    for f in floats {
        columns.push(Arc::new(Float64Array::from(f)));
    }
    RecordBatch::try_new(schema, columns).map_err(|e| Error::internal("build the trades table", e))
}

/// The `equity` reply: each chosen combo's book after every calendar row of the range.
fn equity_batch(prepared: &Prepared, pick: &[usize], runs: &[PortfolioRun]) -> Result<RecordBatch> {
    let time_type = prepared.times.as_ref().map(|t| t.data_type().clone());
    let schema = portfolio_equity_schema(time_type.as_ref());
    let rows: Range<usize> = prepared.range.0..prepared.range.1;
    let n = pick.len() * rows.len();
    let (mut combo, mut row) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut equity, mut cash, mut holdings) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for (&c, run) in pick.iter().zip(runs) {
        for (t, book) in rows.clone().zip(&run.rows) {
            combo.push(prepared.combos[c].position as i64);
            row.push(t as i64);
            equity.push(book.equity);
            cash.push(book.cash);
            holdings.push(book.holdings as i64);
        }
    }
    let rows_u64: Vec<u64> = row.iter().map(|&r| r as u64).collect();
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(combo)),
        Arc::new(Int64Array::from(row)),
    ];
    if let Some(times) = &prepared.times {
        columns.push(take(times, &rows_u64)?);
    }
    columns.extend([
        Arc::new(Float64Array::from(equity)) as ArrayRef,
        Arc::new(Float64Array::from(cash)),
        Arc::new(Int64Array::from(holdings)),
    ]);
    RecordBatch::try_new(schema, columns).map_err(|e| Error::internal("build the equity table", e))
}

fn take(values: &ArrayRef, rows: &[u64]) -> Result<ArrayRef> {
    arrow_select::take::take(values.as_ref(), &UInt64Array::from(rows.to_vec()), None)
        .map_err(|e| Error::internal("read the calendar's times", e))
}
