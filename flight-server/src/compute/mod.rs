//! Running sweeps: within the memory budget, on the server's own thread pool, cancellable, with
//! the kernel cache.
//!
//! The kernel is CPU-bound for up to seconds, so a real sweep never runs on a tokio worker (it
//! would stall every other connection on that worker). It runs on a rayon pool owned by the
//! server (`--threads` workers), which the kernel also uses for its inner parallelism; the async
//! handler awaits a oneshot. If the handler's future is dropped (client cancelled, deadline
//! passed, connection lost), the `CancelOnDrop` guard raises a flag that the kernel polls
//! between combos, and a sweep still waiting for memory simply leaves the queue.
//!
//! A sweep below [`PARALLEL_MIN_WORK`] (under a millisecond of one core) runs inline instead:
//! for the params-only calls that dominate interactive use, two cross-thread hand-offs would
//! cost more than the computation.
//!
//! A sweep over several series (a universe) runs them one after another, each with the whole
//! pool: every series' work is balanced over the workers the same way a single series' is.

pub(crate) mod budget;
pub(crate) mod cache;
pub(crate) mod fill;
pub(crate) mod trim;

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use arrow_array::Float64Array;
use sweepflight_kernel::lines::Bars;
use sweepflight_kernel::{
    ArrayCache, CertifiedBars, Combo, ComboResult, Combos, Execution, NoCache, PARALLEL_MIN_WORK,
    Record, Records, Side, SweepControl, sweep_combos,
};
use sweepflight_protocol::{ExchangeSweep, Grid, RowRange, Selection, Strategy, SweepRequest};
use tokio::sync::oneshot;

use crate::compute::budget::{Reservation, SweepBudget};
use crate::compute::cache::{InputKey, KernelCache};
use crate::compute::fill::Filler;
use crate::datasets::bars::BarColumns;
use crate::datasets::{Dataset, NewDataset};
use crate::ops::metrics::Metrics;
use crate::{Error, Result};

/// The kernel's combos of `strategy` for a request grid (whose values were type- and
/// range-checked when the body was decoded), in request order.
///
/// # Errors
/// [`Error::InvalidArgument`] naming the combo's position and parameter for a combo the
/// kernel refuses (`lower >= upper` in a `grid`, say).
#[cfg(test)]
fn params(strategy: &Strategy, grid: &Grid) -> Result<Vec<Vec<f64>>> {
    let combos = params_in(strategy, grid, 0..grid.len())?.0;
    Ok((0..combos.len())
        .map(|i| combos.combo(i).to_vec())
        .collect())
}

/// [`params`] for the combos `range` of the grid only (errors name their position in the
/// whole grid), and, when a constraint skips some, the positions (from `range.start`) of
/// those kept: the result's `combo` column keeps each combo's position in the grid.
///
/// # Errors
/// As [`params`].
pub(crate) fn params_in(
    strategy: &Strategy,
    grid: &Grid,
    range: Range<usize>,
) -> Result<(Combos, Option<Vec<usize>>)> {
    let start = range.start;
    // Every strategy is a program of formulas (a built-in name its table's form), bound to
    // each kept combo's values; the kernel recognises a built-in's form and runs its tuned
    // path (`Combos::of_program`).
    let (program, _) = strategy.program();
    let width = program.params.len();
    let mut values: Vec<f64> = Vec::with_capacity(range.len() * width);
    let mut kept: Vec<usize> = Vec::new();
    for i in range.clone() {
        let v = match grid {
            Grid::Lengths(l) => Combo::from_length(l[i])?
                .windows()
                .iter()
                .map(|&w| f64::from(w))
                .collect(),
            _ => grid.values(strategy, i)?.unwrap_or_default(),
        };
        match strategy.check_combo(&v) {
            Ok(()) => {
                values.extend(v);
                kept.push(i - start);
            }
            // A grid's combos that break the constraint are skipped (docs/language.md): not run,
            // not returned; the others keep their positions.
            Err(("constraint", _)) => {}
            Err((param, message)) => {
                return Err(Error::invalid(format!(
                    "combo {i}: parameter `{param}` {message}"
                )));
            }
        }
    }
    let gaps = kept.len() < range.len();
    let count = kept.len();
    let combos = Combos::of_program(program, values, count);
    Ok((combos, gaps.then_some(kept)))
}

/// The combos at positions `at` of the grid, in that order (each one the constraint keeps).
///
/// # Errors
/// As [`params`].
pub(crate) fn combos_at(strategy: &Strategy, grid: &Grid, at: &[usize]) -> Result<Combos> {
    let parts = at
        .iter()
        .map(|&c| Ok(params_in(strategy, grid, c..c + 1)?.0))
        .collect::<Result<Vec<_>>>()?;
    Ok(Combos::concat(parts)
        .unwrap_or_else(|| Combos::of_program(strategy.program().0, Vec::new(), 0)))
}

/// The kernel's execution options for a request's (the evaluated range is each input's).
pub(crate) fn execution(fee: f64, e: &sweepflight_protocol::Execution) -> Execution {
    Execution {
        fee,
        side: match e.side {
            sweepflight_protocol::Side::Both => Side::Both,
            sweepflight_protocol::Side::Long => Side::Long,
            sweepflight_protocol::Side::Short => Side::Short,
        },
        stop_loss: e.stop_loss,
        take_profit: e.take_profit,
        trailing_stop: e.trailing_stop,
        fill: e.fill,
        stops: e.stops,
        slippage: e.slippage,
        start: 0,
    }
}

/// The closes one input is read from.
#[derive(Debug, Clone)]
enum Closes {
    /// Series `.1` of a stored dataset.
    Stored(Arc<Dataset>, usize),
    /// A series that exists only for this call (DoExchange): no cache.
    Transient(Arc<Float64Array>, Arc<BarColumns>),
}

/// One series to run the combos on: its closes, the rows the indicators are computed on (the
/// evaluated rows and their warm-up, strategies.md "The range a strategy sees"), where the
/// evaluated rows start within them, and its cache key.
#[derive(Debug, Clone)]
pub(crate) struct Input {
    closes: Closes,
    /// The whole series' rows among the dataset's (or the upload's) rows.
    whole: Range<usize>,
    rows: Range<usize>,
    start: usize,
    cache: Option<InputKey>,
    /// `"ignore_time": true`: the time column is read as absent for this call.
    ignore_time: bool,
    /// The strategy's `inputs` (v1.4) over every row of the dataset (or upload), in its order.
    columns: Arc<[Arc<[f64]>]>,
    /// Each row's UTC date over every row of the dataset (or upload), when the strategy calls
    /// a higher timeframe (v1.4; [`period_days`]).
    days: Option<Arc<[i64]>>,
}

/// The computed range of `rows` with `warmup` bars before it, and where `rows` starts in it.
fn computed(rows: Range<usize>, warmup: u64) -> (Range<usize>, usize) {
    let from = rows
        .start
        .saturating_sub(usize::try_from(warmup).unwrap_or(usize::MAX));
    (from..rows.end, rows.start - from)
}

impl Input {
    /// Series `series` of a stored dataset, all rows or `rows` (its end clipped to the series),
    /// with `warmup` bars before them for the indicators.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `rows` starts at or past the series' end.
    pub(crate) fn stored(
        dataset: Arc<Dataset>,
        series: usize,
        rows: Option<RowRange>,
        warmup: u64,
    ) -> Result<Self> {
        let len = dataset.closes(series).len();
        let name = dataset.universe().map(|u| u.names[series].as_str());
        let (rows, start) = computed(clip(rows, len, name)?, warmup);
        // The cache holds lines of the computed range: they depend on nothing else.
        let cache = Some(InputKey {
            dataset: dataset.id,
            series: series as u32,
            rows: (rows != (0..len)).then_some((rows.start as u64, rows.end as u64)),
        });
        Ok(Self {
            whole: dataset.data.range(series),
            closes: Closes::Stored(dataset, series),
            rows,
            start,
            cache,
            ignore_time: false,
            columns: Arc::new([]),
            days: None,
        })
    }

    /// A series uploaded for this call only.
    ///
    /// # Errors
    /// As [`Input::stored`].
    pub(crate) fn transient(
        close: Arc<Float64Array>,
        bars: Arc<BarColumns>,
        range: Range<usize>,
        name: Option<&str>,
        rows: Option<RowRange>,
        warmup: u64,
    ) -> Result<Self> {
        let (within, start) = computed(clip(rows, range.len(), name)?, warmup);
        Ok(Self {
            whole: range.clone(),
            closes: Closes::Transient(close, bars),
            rows: range.start + within.start..range.start + within.end,
            start,
            cache: None,
            ignore_time: false,
            columns: Arc::new([]),
            days: None,
        })
    }

    /// The same input reading the strategy's own columns `columns` (v1.4 `inputs`).
    pub(crate) fn with_columns(self, columns: Arc<[Arc<[f64]>]>) -> Self {
        Self { columns, ..self }
    }

    /// The same input with each row's UTC date (every row of the dataset or upload), for a
    /// strategy's higher timeframes.
    pub(crate) fn with_days(self, days: Option<Arc<[i64]>>) -> Self {
        Self { days, ..self }
    }

    /// Its key in the kernel cache (none for an upload's series).
    pub(crate) fn cache_key(&self) -> Option<InputKey> {
        self.cache
    }

    /// The row of the series (of the upload, for a transient input) that row `r` of the
    /// kernel's closes is.
    pub(crate) fn series_row(&self, r: usize) -> usize {
        self.rows.start + r
    }

    /// The row among the dataset's (or the upload's) stored rows that row `r` of the kernel's
    /// closes is (what the time column is indexed by).
    pub(crate) fn dataset_row(&self, r: usize) -> usize {
        match &self.closes {
            Closes::Stored(..) => self.whole.start + self.rows.start + r,
            Closes::Transient(..) => self.rows.start + r,
        }
    }

    /// Where the evaluated rows start within the kernel's closes.
    pub(crate) fn start(&self) -> usize {
        self.start
    }

    /// Rows evaluated (after the warm-up).
    pub(crate) fn evaluated(&self) -> usize {
        self.rows.len() - self.start
    }

    /// The kernel's closes: the computed range.
    pub(crate) fn closes(&self) -> &[f64] {
        let all = match &self.closes {
            Closes::Stored(d, series) => d.closes(*series),
            Closes::Transient(c, _) => c.values(),
        };
        &all[self.rows.clone()]
    }

    /// The dataset's bar columns and where the computed range is in them.
    fn bar_columns(&self) -> (&BarColumns, Range<usize>) {
        match &self.closes {
            Closes::Stored(d, series) => {
                let at = d.data.range(*series).start;
                (&d.data.bars, at + self.rows.start..at + self.rows.end)
            }
            Closes::Transient(_, b) => (b, self.rows.clone()),
        }
    }

    /// The kernel's bars: the computed range of every usable column.
    pub(crate) fn bars(&self) -> Bars<'_> {
        let (columns, range) = self.bar_columns();
        Bars {
            open: columns.slice("open", range.clone()),
            high: columns.slice("high", range.clone()),
            low: columns.slice("low", range.clone()),
            close: self.closes(),
            volume: columns.slice("volume", range.clone()),
            inputs: &self.columns,
            inputs_from: range.start,
            days: self.days.as_deref().map(|d| &d[range]),
        }
    }

    /// Checks the columns a call reads (besides `close`) are usable here.
    ///
    /// # Errors
    /// INVALID_ARGUMENT naming the column, with its unusable reason.
    pub(crate) fn require(&self, columns: &[&str], what: &str) -> Result<()> {
        if self.ignore_time && columns.contains(&"time") {
            return Err(Error::invalid(format!(
                "{what} needs the dataset's time, which `\"ignore_time\": true` reads as absent"
            )));
        }
        self.bar_columns().0.require(columns, what)
    }

    /// The series' time column, if usable (and not ignored), and the series' rows in it.
    pub(crate) fn time(&self) -> Option<(&crate::datasets::bars::TimeColumn, Range<usize>)> {
        if self.ignore_time {
            return None;
        }
        let time = self.bar_columns().0.time.as_ref()?;
        Some((time, self.whole.clone()))
    }
}

/// Refuses bars whose time is out of order (protocol v1.4: never swept silently).
///
/// # Errors
/// [`Error::FailedPrecondition`] naming the series and the first bad row, and the fixes.
pub(crate) fn check_time_order(bars: &BarColumns, what: &str) -> Result<()> {
    match &bars.out_of_order {
        None => Ok(()),
        Some(row) => Err(Error::FailedPrecondition(format!(
            "{what} has bars out of time order ({row}); sort the bars by time (or drop the time \
             column) and put them again, or send `\"ignore_time\": true` to sweep them in row \
             order with no time"
        ))),
    }
}

/// Each row's UTC date (days since 1970-01-01) over every row of `bars`' dataset or upload, for
/// the higher timeframes `program` calls (protocol v1.4, `daily` / `weekly` / `monthly`):
/// computed once per call; `None` when it calls none.
///
/// # Errors
/// As [`check_period_time`].
pub(crate) fn period_days(
    program: &sweepflight_kernel::expr::Program,
    bars: &BarColumns,
    ignore_time: bool,
) -> Result<Option<Arc<[i64]>>> {
    let Some(time) = check_period_time(program, bars, ignore_time)? else {
        return Ok(None);
    };
    let days = time
        .utc_days()
        .ok_or_else(|| Error::Internal("a time with a unit has UTC dates".into()))?;
    Ok(Some(days.into()))
}

/// The time column the higher timeframes of `program` read, checked (`None` when it calls
/// none): what a sweep refuses, `explain` refuses too, without reading the dates.
///
/// # Errors
/// INVALID_ARGUMENT naming the function and the reason when the time is read as absent
/// (`ignore_time`), absent, unusable, or int64 (a number without a unit has no date).
pub(crate) fn check_period_time<'a>(
    program: &sweepflight_kernel::expr::Program,
    bars: &'a BarColumns,
    ignore_time: bool,
) -> Result<Option<&'a crate::datasets::bars::TimeColumn>> {
    let Some(tf) = program.timeframes().first().copied() else {
        return Ok(None);
    };
    let what = format!(
        "`{}(x)` (the bars gathered into {} by their time)",
        tf.name(),
        tf.periods()
    );
    if ignore_time {
        return Err(Error::invalid(format!(
            "{what} needs the dataset's time, which `\"ignore_time\": true` reads as absent"
        )));
    }
    bars.require(&["time"], &what)?;
    let time = bars.time.as_ref().expect("required above");
    if time.unit_seconds().is_none() {
        return Err(Error::invalid(format!(
            "{what} reads each bar's UTC date, and the dataset's time is int64, a number \
             without a unit: put the time as a timestamp or a date column"
        )));
    }
    Ok(Some(time))
}

/// Seconds in a year of 365.25 days (protocol v1.3, `"periods_per_year": "auto"`).
const YEAR_SECONDS: f64 = 31_557_600.0;

/// `"periods_per_year": "auto"` for one input: its whole series' rows less one over the years
/// its time spans, whatever rows the call evaluates.
///
/// # Errors
/// INVALID_ARGUMENT without a usable time column of a timestamp or date type, or for a span
/// of 0.
fn auto_periods(input: &Input) -> Result<f64> {
    let needs = "`\"periods_per_year\": \"auto\"` reads the dataset's time column";
    input.require(&["time"], "`\"periods_per_year\": \"auto\"`")?;
    let (time, whole) = input.time().ok_or_else(|| Error::invalid(needs))?;
    let span = time
        .span_seconds(whole.start, whole.end - 1)
        .ok_or_else(|| {
            Error::invalid(format!(
                "{needs}, which is int64: a number without a unit gives no span in years; send a \
             timestamp or date column, or give `periods_per_year` as a number"
            ))
        })?;
    if span <= 0.0 {
        return Err(Error::invalid(format!(
            "{needs}: its first and last rows are at the same time, a span of 0"
        )));
    }
    Ok((whole.len() - 1) as f64 / (span / YEAR_SECONDS))
}

/// The rows of a series of `len` that `rows` asks for.
fn clip(rows: Option<RowRange>, len: usize, series: Option<&str>) -> Result<Range<usize>> {
    let Some(r) = rows else { return Ok(0..len) };
    let start = usize::try_from(r.start).unwrap_or(usize::MAX);
    if start >= len {
        let which = series.map_or_else(|| "the series".to_owned(), |s| format!("series {s:?}"));
        return Err(Error::invalid(format!(
            "`rows` starts at {start}, but {which} has {len} rows"
        )));
    }
    let end = usize::try_from(r.end).unwrap_or(usize::MAX).min(len);
    Ok(start..end)
}

/// The fields of a request a job is made of, whichever body carried them (a `sweep` body,
/// a session message, an exchange command).
pub(crate) struct Spec<'a> {
    pub strategy: &'a Strategy,
    pub grid: &'a Grid,
    pub execution: &'a sweepflight_protocol::Execution,
    pub fee: f64,
    pub series: Option<&'a [String]>,
    pub rows: Option<RowRange>,
    pub selection: &'a Selection,
}

impl<'a> Spec<'a> {
    pub(crate) fn of(request: &'a SweepRequest) -> Self {
        Self {
            strategy: &request.strategy,
            grid: &request.grid,
            execution: &request.execution,
            fee: request.fee(),
            series: request.series.as_deref(),
            rows: request.rows,
            selection: &request.selection,
        }
    }

    /// The fields of a stateless exchange sweep (its series come with it).
    pub(crate) fn of_exchange(sweep: &'a ExchangeSweep) -> Self {
        Self {
            strategy: &sweep.strategy,
            grid: &sweep.grid,
            execution: &sweep.execution,
            fee: sweep.fee(),
            series: sweep.series.as_deref(),
            rows: sweep.rows,
            selection: &sweep.selection,
        }
    }
}

/// Where a job's series come from.
pub(crate) enum Source<'a> {
    /// A stored dataset (its name, for messages).
    Stored(&'a str, Arc<Dataset>),
    /// Series streamed for this call only (DoExchange).
    Upload(&'a NewDataset),
}

impl Source<'_> {
    /// Series `i` (named `name` in a universe) as an input, `rows` of it with `warmup`.
    pub(crate) fn input(
        &self,
        i: usize,
        name: Option<&str>,
        rows: Option<RowRange>,
        warmup: u64,
    ) -> Result<Input> {
        match self {
            Self::Stored(_, d) => Input::stored(Arc::clone(d), i, rows, warmup),
            Self::Upload(u) => {
                let range = u
                    .universe
                    .as_ref()
                    .map_or(0..u.rows(), |u| u.offsets[i]..u.offsets[i + 1]);
                Input::transient(
                    Arc::new(u.close.clone()),
                    Arc::new(u.bars.clone()),
                    range,
                    name,
                    rows,
                    warmup,
                )
            }
        }
    }
}

/// What to run: the combos on every input, under one execution.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    /// The series, in result order.
    pub inputs: Vec<Input>,
    /// Their key values on a keyed dataset (the result's `series` column).
    pub names: Option<Vec<String>>,
    /// The strategy of the combos (the result's parameter columns).
    pub strategy: Strategy,
    /// The combos, in request order.
    pub combos: Combos,
    /// Each combo's position in the request grid from the job's first (`None`: the combos
    /// are the grid's, one after another; a constraint leaves gaps).
    pub positions: Option<Arc<Vec<usize>>>,
    /// Fee, side and stops (each input says where its evaluated rows start).
    pub exec: Execution,
    /// What the per-bar Sharpe and Sortino ratios are annualised with, per input (one value
    /// for all but with `"periods_per_year": "auto"`).
    pub periods_per_year: Vec<f64>,
    /// What each combo keeps besides its result.
    pub keep: Keep,
    /// A background job's progress and cancel flag (a job's runs report to it and stop when
    /// it is cancelled); `None` for a call whose caller waits.
    pub progress: Option<Arc<Progress>>,
    /// Offer the lines to the kernel cache even on the first sweep of an input (they will be
    /// asked for again: a walk-forward's folds cut theirs from them).
    pub keep_lines: bool,
}

/// The progress of a job's work, and its cancel flag: shared by the job's record (which
/// reads it for `status`), the use case that sets its total, and every kernel run the job
/// starts (which reports to it from the sweep workers and polls the flag).
///
/// Combos are counted in millionths so that a kernel's reports (combo-bars, from any worker)
/// become a share of each series' combos that never falls and is exact once the series ends.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    done_micros: AtomicU64,
    total: AtomicU64,
    started: AtomicBool,
    cancelled: AtomicBool,
    cancel: tokio::sync::Notify,
}

const MICROS: u128 = 1_000_000;

impl Progress {
    /// Adds `combos` (series x combos) to the work the job will do.
    pub(crate) fn add_total(&self, combos: u64) {
        self.total.fetch_add(combos, Ordering::Relaxed);
    }

    /// Counts `combos` as done whole (work the kernel does not report: a combo chosen in a
    /// step it skipped, say).
    pub(crate) fn add_done(&self, combos: u64) {
        self.done_micros
            .fetch_add(combos.saturating_mul(MICROS as u64), Ordering::Relaxed);
    }

    /// Combos done (whole ones) and combos in all.
    pub(crate) fn combos(&self) -> (u64, u64) {
        let total = self.total.load(Ordering::Relaxed);
        let done = self.done_micros.load(Ordering::Relaxed) / MICROS as u64;
        (done.min(total), total)
    }

    /// The share done, 0 to 1 (in millionths of a combo, so a long series moves it too).
    pub(crate) fn fraction(&self) -> f64 {
        let total = self.total.load(Ordering::Relaxed);
        if total == 0 {
            return 0.0;
        }
        let done = self.done_micros.load(Ordering::Relaxed) as f64;
        (done / (total as f64 * MICROS as f64)).min(1.0)
    }

    /// Records that a kernel run of the job has its memory.
    pub(crate) fn mark_started(&self) {
        self.started.store(true, Ordering::Relaxed);
    }

    /// True once a kernel run of the job has its memory (it is no longer queued).
    pub(crate) fn started(&self) -> bool {
        self.started.load(Ordering::Relaxed)
    }

    /// Asks the job to stop: kernel runs end at their next check, a run waiting for memory
    /// leaves the queue, and no new run starts.
    pub(crate) fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        self.cancel.notify_waiters();
    }

    /// True once [`Progress::cancel`] was called.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }

    /// Resolves once the job is cancelled.
    async fn cancelled(&self) {
        loop {
            // Registered before the flag is read: a cancel between the two still wakes it.
            let woken = self.cancel.notified();
            if self.cancelled.load(Ordering::SeqCst) {
                return;
            }
            woken.await;
        }
    }

    /// The kernel's report of `units` combo-bars of a series of `bars` bars, of which
    /// `series_units` had been reported before: the combos they complete, in millionths
    /// (the difference of two floors, so the reports of one series add up exactly).
    fn report(&self, series_units: &AtomicU64, units: u64, bars: usize) {
        let before = series_units.fetch_add(units, Ordering::Relaxed);
        let bars = bars.max(1) as u128;
        let micros = |u: u64| u128::from(u) * MICROS / bars;
        let delta = micros(before + units) - micros(before);
        self.done_micros
            .fetch_add(u64::try_from(delta).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

/// What a job keeps per combo besides its result ([`sweepflight_kernel::Records`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Keep {
    /// The booked trades (the `trades` and `equity` actions).
    pub trades: bool,
    /// The `block_pnl` column's blocks.
    pub blocks: Option<u8>,
}

impl Keep {
    /// Nothing beyond the results.
    pub(crate) const NOTHING: Self = Self {
        trades: false,
        blocks: None,
    };

    /// Bytes kept per combo besides its result, trades aside (they are bounded by
    /// `--max-trade-combos`, not known before the run).
    fn bytes_per_combo(self) -> usize {
        if self == Self::NOTHING {
            return 0;
        }
        size_of::<Record>() + 8 * usize::from(self.blocks.unwrap_or(0))
    }
}

/// A job's output, per input in job order: every combo's result, and what it kept (empty lists
/// when the job keeps nothing).
#[derive(Debug, Clone, Default)]
pub(crate) struct Runs {
    /// `results[i][c]`: input `i`, combo `c`.
    pub results: Vec<Vec<ComboResult>>,
    /// `records[i][c]`, if the job keeps anything; else empty.
    pub records: Vec<Vec<Record>>,
}

/// What one call may ask of the server.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// `--max-combos`: combos evaluated (rows returned with `top`), series x combos.
    pub max_combos: usize,
    /// `--max-grid-combos`: combos evaluated with `top`.
    pub max_grid_combos: usize,
    /// The sweep memory budget: every evaluated combo's result is held until the selection
    /// runs, so a grid whose results alone exceed it is refused before anything is expanded.
    pub result_bytes: u64,
}

impl Limits {
    /// The combos per series of `range` of `grid` that count against the limits: those a
    /// constraint skips do not ([`Grid::runs`]).
    ///
    /// # Errors
    /// A constrained grid with more positions than the server reads.
    pub(crate) fn runs(
        &self,
        (selection, strategy, grid): (&Selection, &Strategy, &Grid),
        series: usize,
        range: Range<usize>,
    ) -> Result<usize> {
        let cap = selection.evaluated_cap(self.max_combos, self.max_grid_combos);
        Ok(grid.runs(strategy, range, cap / series.max(1), self.max_grid_combos)?)
    }

    /// Checks `combos` per series over `series` series.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] past a flag; [`Error::ResourceExhausted`] for results that do
    /// not fit the memory budget.
    pub(crate) fn check(
        &self,
        selection: &Selection,
        keep: Keep,
        series: usize,
        combos: usize,
    ) -> Result<()> {
        selection.check_limits(series, combos, self.max_combos, self.max_grid_combos)?;
        let bytes = (series as u64)
            .saturating_mul(combos as u64)
            .saturating_mul((size_of::<ComboResult>() + keep.bytes_per_combo()) as u64);
        if bytes > self.result_bytes {
            return Err(Error::ResourceExhausted(format!(
                "{series} series x {combos} combos need {bytes} bytes of results; the server allows {} (--sweep-memory-bytes)",
                self.result_bytes
            )));
        }
        Ok(())
    }
}

impl Job {
    /// The job of a `sweep` body on its stored dataset: the combos, the series it names (all
    /// of a keyed dataset's by default), their rows and warm-up, the execution. This is the one
    /// place a request becomes work, for the action, the session and the benchmarks.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `series` on an unkeyed dataset, a combo the kernel refuses,
    /// rows past a series' end, more runs than `limits` allow; [`Error::SeriesNotFound`];
    /// [`Error::ResourceExhausted`] for results past the memory budget.
    pub(crate) fn stored(
        request: &SweepRequest,
        dataset: Arc<Dataset>,
        limits: &Limits,
    ) -> Result<Self> {
        Self::stored_range(request, dataset, limits, 0..request.len())
    }

    /// [`Job::stored`] for the combos `range` of the request only (a step of a sweep with
    /// `top`); `limits` apply to those.
    ///
    /// # Errors
    /// As [`Job::stored`].
    pub(crate) fn stored_range(
        request: &SweepRequest,
        dataset: Arc<Dataset>,
        limits: &Limits,
        range: Range<usize>,
    ) -> Result<Self> {
        Self::build(
            &Spec::of(request),
            Source::Stored(&request.dataset, dataset),
            limits,
            range,
        )
    }

    /// The job of the stateless exchange sweep `sweep` on the series streamed with it
    /// (`upload`, a universe if the command gave a `key`): the same rules as [`Job::stored`].
    ///
    /// # Errors
    /// As [`Job::stored`], naming "the upload" for an unknown series.
    pub(crate) fn uploaded(
        sweep: &ExchangeSweep,
        upload: &NewDataset,
        limits: &Limits,
    ) -> Result<Self> {
        Self::build(
            &Spec::of_exchange(sweep),
            Source::Upload(upload),
            limits,
            0..sweep.grid.len(),
        )
    }

    /// The one place a request becomes work: the limits (before the grid is expanded, so a
    /// grid past them costs nothing), the combos `range`, the series it names (all of a keyed
    /// dataset's by default) with their rows and warm-up, the execution.
    fn build(
        spec: &Spec<'_>,
        source: Source<'_>,
        limits: &Limits,
        range: Range<usize>,
    ) -> Result<Self> {
        let keep = Keep {
            trades: false,
            blocks: spec.execution.blocks,
        };
        let universe = match &source {
            Source::Stored(_, d) => d.universe(),
            Source::Upload(u) => u.universe.as_ref(),
        };
        let bars = match &source {
            Source::Stored(_, d) => &d.data.bars,
            Source::Upload(u) => &u.bars,
        };
        if !spec.execution.ignore_time {
            let what = match &source {
                Source::Stored(name, _) => format!("dataset `{name}`"),
                Source::Upload(_) => "the upload".to_owned(),
            };
            check_time_order(bars, &what)?;
        }
        let series = universe.map_or(1, |u| spec.series.map_or(u.names.len(), <[String]>::len));
        let runs = limits.runs(
            (spec.selection, spec.strategy, spec.grid),
            series,
            range.clone(),
        )?;
        limits.check(spec.selection, keep, series, runs)?;
        let (combos, positions) = params_in(spec.strategy, spec.grid, range)?;
        let warmup = spec.execution.warmup;
        let (mut inputs, names) = match universe {
            None => {
                if spec.series.is_some() {
                    let what = match &source {
                        Source::Stored(name, _) => format!("dataset `{name}` is not keyed"),
                        Source::Upload(_) => "the upload is not keyed".to_owned(),
                    };
                    return Err(Error::invalid(format!(
                        "{what}: `series` applies to datasets put with a key"
                    )));
                }
                (vec![source.input(0, None, spec.rows, warmup)?], None)
            }
            Some(u) => {
                let label = match &source {
                    Source::Stored(name, _) => *name,
                    Source::Upload(_) => "the upload",
                };
                let picked = u.select(label, spec.series)?;
                let names: Vec<String> = picked.iter().map(|&i| u.names[i].clone()).collect();
                let inputs = picked
                    .iter()
                    .map(|&i| source.input(i, Some(u.names[i].as_str()), spec.rows, warmup))
                    .collect::<Result<Vec<_>>>()?;
                (inputs, Some(names))
            }
        };
        // The strategy's own columns, read once for every series of the call.
        let own: Arc<[Arc<[f64]>]> = match spec.strategy {
            Strategy::Formulas(f) if !f.program.inputs.is_empty() => {
                let (schema, batches, what) = match &source {
                    Source::Stored(name, d) => {
                        (&d.data.schema, &d.data.batches, format!("dataset `{name}`"))
                    }
                    Source::Upload(u) => (&u.schema, &u.batches, "the upload".to_owned()),
                };
                crate::datasets::bars::input_columns(schema, batches, &f.program.inputs, &what)?
                    .into()
            }
            _ => Arc::new([]),
        };
        let (program, _) = spec.strategy.program();
        let days = period_days(&program, bars, spec.execution.ignore_time)?;
        for input in &mut inputs {
            input.ignore_time = spec.execution.ignore_time;
            input.columns = Arc::clone(&own);
            input.days = days.clone();
        }
        let exec = execution(spec.fee, spec.execution);
        let mut reads: Vec<&str> = exec.columns().to_vec();
        // The built-ins read closes only; formulas whatever they name.
        if let Strategy::Formulas(f) = spec.strategy {
            reads.extend(f.program.columns().into_iter().map(|c| c.name()));
        }
        for input in &inputs {
            input.require(&reads, "this call")?;
        }
        let periods_per_year = inputs
            .iter()
            .map(|input| match spec.execution.periods_per_year_auto {
                true => auto_periods(input),
                false => Ok(spec.execution.periods_per_year.unwrap_or(1.0)),
            })
            .collect::<Result<Vec<_>>>()?;
        let job = Self {
            inputs,
            names,
            strategy: spec.strategy.clone(),
            combos,
            positions: positions.map(Arc::new),
            exec,
            periods_per_year,
            keep,
            progress: None,
            keep_lines: false,
        };
        job.check_blocks()?;
        Ok(job)
    }

    /// The type of the inputs' usable time column (they share one dataset's), if any.
    pub(crate) fn time_type(&self) -> Option<arrow_schema::DataType> {
        let (time, _) = self.inputs.first()?.time()?;
        Some(time.array.data_type().clone())
    }

    /// The time column's values at `rows` (stored rows, from [`Input::dataset_row`]), in the
    /// stored type.
    ///
    /// # Errors
    /// Only for a server fault (no time column, or a take Arrow refuses).
    pub(crate) fn times(&self, rows: &[u64]) -> Result<arrow_array::ArrayRef> {
        let (time, _) = self
            .inputs
            .first()
            .and_then(Input::time)
            .ok_or_else(|| Error::Internal("times of a job without a time column".into()))?;
        let indices = arrow_array::UInt64Array::from(rows.to_vec());
        arrow_select::take::take(time.array.as_ref(), &indices, None)
            .map_err(|e| Error::internal("read the time column", e))
    }

    /// Combo `c`'s position in the request grid from the job's first.
    pub(crate) fn position(&self, c: usize) -> usize {
        self.positions.as_ref().map_or(c, |p| p[c])
    }

    /// Refuses blocks that some input has fewer evaluated rows than.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the series.
    pub(crate) fn check_blocks(&self) -> Result<()> {
        let Some(blocks) = self.keep.blocks else {
            return Ok(());
        };
        for (i, input) in self.inputs.iter().enumerate() {
            if input.evaluated() < usize::from(blocks) {
                let which = self
                    .names
                    .as_ref()
                    .map_or_else(|| "the series".to_owned(), |n| format!("series {:?}", n[i]));
                return Err(Error::invalid(format!(
                    "`blocks` is {blocks}, but {which} has only {} evaluated rows",
                    input.evaluated()
                )));
            }
        }
        Ok(())
    }
}

/// The server's sweep runner.
#[derive(Debug)]
pub(crate) struct Compute {
    pool: rayon::ThreadPool,
    budget: Arc<SweepBudget>,
    cache: Arc<KernelCache>,
    metrics: Arc<Metrics>,
    running: Arc<AtomicUsize>,
    /// Keeps inputs' arrays at idle moments ([`fill`]).
    filler: Filler,
}

impl Compute {
    /// A runner with `threads` workers (one per CPU when `None`), a budget of `memory_bytes`
    /// for all running sweeps with up to `max_queued` waiting, over `cache`.
    ///
    /// # Errors
    /// [`Error::Internal`] if the thread pool cannot be started.
    pub(crate) fn new(
        threads: Option<usize>,
        memory_bytes: u64,
        max_queued: usize,
        cache: Arc<KernelCache>,
        metrics: Arc<Metrics>,
    ) -> Result<Self> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.unwrap_or(0))
            .thread_name(|i| format!("sweep-{i}"))
            .build()
            .map_err(|e| Error::internal("start the sweep workers", e))?;
        let budget = Arc::new(SweepBudget::new(
            memory_bytes,
            max_queued,
            Arc::clone(&metrics),
        ));
        let running = Arc::default();
        let filler = Filler::start(fill::Server {
            cache: Arc::clone(&cache),
            metrics: Arc::clone(&metrics),
            budget: Arc::clone(&budget),
            running: Arc::clone(&running),
        })?;
        Ok(Self {
            pool,
            budget,
            cache,
            metrics,
            running,
            filler,
        })
    }

    /// The kernel cache.
    pub(crate) fn cache(&self) -> &Arc<KernelCache> {
        &self.cache
    }

    /// Worker threads.
    pub(crate) fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// The memory budget.
    pub(crate) fn budget(&self) -> &SweepBudget {
        &self.budget
    }

    /// Sweeps running now.
    pub(crate) fn running(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }

    /// Hands every worker's empty pages back to the allocator and purges its free memory
    /// ([`crate::compute::trim`]), and unmaps the pooled columns ([`crate::datasets::mapping`]). Blocks until each
    /// worker has done it: call it off the async runtime.
    pub(crate) fn release_free_memory(&self) {
        self.pool
            .broadcast(|_| crate::compute::trim::collect_here());
        crate::compute::trim::collect_here();
        // Columns kept for the next large upload go too (see `crate::datasets::mapping`).
        crate::datasets::mapping::release_pool();
    }

    /// Runs `job`: reserves its memory (waiting in line if need be), then runs every input in
    /// order; one result list per input.
    ///
    /// # Errors
    /// [`Error::ResourceExhausted`] if the queue is full or one series needs more memory than
    /// the whole budget; kernel errors; [`Error::Internal`] if a worker panicked.
    pub(crate) async fn run(self: &Arc<Self>, job: Job) -> Result<Runs> {
        let total_work: u64 = job
            .inputs
            .iter()
            .map(|i| job.combos.work(i.closes().len()))
            .fold(0, u64::saturating_add);
        let parallel = total_work >= PARALLEL_MIN_WORK;
        let workers = if parallel { self.threads() } else { 1 };
        let plan = Plan::new(&job, workers, self.budget.total())?;
        let progress = job.progress.clone();
        let this = Arc::clone(self);
        self.on_pool(
            plan.need,
            progress.as_ref(),
            parallel,
            move |reservation, cancelled| this.sweep(&job, &plan, reservation, parallel, cancelled),
        )
        .await
    }

    /// Runs `work` once `need` bytes of the memory budget are reserved (waiting in line if need
    /// be; a cancelled job leaves the line): on the sweep pool when `parallel`, else inline (a
    /// small call, where two hand-offs would cost more than the work). `work` polls the
    /// cancel flag it is given: the caller dropping the call or the job being cancelled.
    ///
    /// # Errors
    /// [`Error::ResourceExhausted`] if the queue is full or `need` is past the whole budget;
    /// `work`'s errors; [`Error::Internal`] if it panicked.
    pub(crate) async fn on_pool<T: Send + 'static>(
        self: &Arc<Self>,
        need: u64,
        progress: Option<&Arc<Progress>>,
        parallel: bool,
        work: impl FnOnce(&Reservation, &(dyn Fn() -> bool + Sync)) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let cancelled_job = || Err(Error::Kernel(sweepflight_kernel::Error::Cancelled));
        let reservation = match progress {
            None => self.budget.reserve(need).await?,
            Some(p) if p.is_cancelled() => return cancelled_job(),
            // A cancelled job leaves the queue at once (dropping the wait is leaving it).
            Some(p) => tokio::select! {
                r = self.budget.reserve(need) => r?,
                () = p.cancelled() => return cancelled_job(),
            },
        };
        if let Some(p) = progress {
            p.mark_started();
        }
        let running = Running::start(&self.running);
        let progress = progress.cloned();
        if !parallel {
            let job_cancelled = || progress.as_ref().is_some_and(|p| p.is_cancelled());
            let outcome = work(&reservation, &job_cancelled);
            self.count(&outcome);
            return outcome;
        }
        let cancelled = Arc::new(AtomicBool::new(false));
        let _guard = CancelOnDrop(Arc::clone(&cancelled));
        let (tx, rx) = oneshot::channel();
        let span = tracing::Span::current();
        let this = Arc::clone(self);
        self.pool.spawn(move || {
            let _enter = span.enter();
            // rayon aborts the process on a panic in a spawned job; turn one into an error.
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                work(&reservation, &|| {
                    cancelled.load(Ordering::Relaxed)
                        || progress.as_ref().is_some_and(|p| p.is_cancelled())
                })
            }))
            .unwrap_or_else(|_| Err(Error::Internal("sweep worker panicked".into())));
            this.count(&outcome);
            // Memory and the running count are returned before the caller hears back.
            drop((reservation, running));
            // The receiver is gone if the call was cancelled; nothing left to tell.
            let _ = tx.send(outcome);
        });
        rx.await
            .map_err(|_| Error::Internal("sweep worker vanished".into()))?
    }

    /// Runs every input of `job` on the calling thread (fanning out on the pool if `parallel`).
    fn sweep(
        &self,
        job: &Job,
        plan: &Plan,
        reservation: &Reservation,
        parallel: bool,
        cancelled: &(dyn Fn() -> bool + Sync),
    ) -> Result<Runs> {
        let started = Instant::now();
        // The lines every input's sweep computes, if the cache should have them all.
        let lines: u64 = job
            .inputs
            .iter()
            .map(|i| job.combos.line_bytes(i.closes().len()) as u64)
            .fold(0, u64::saturating_add);
        let offer = self.cache.worth_offering(lines);
        let certified = CertifiedBars::default();
        let out = job
            .inputs
            .iter()
            .enumerate()
            .map(|(at, input)| {
                let close = input.closes();
                let cap = plan.shared_cap(close.len(), &job.combos, reservation.bytes());
                let exec = Execution {
                    start: input.start,
                    ..job.exec
                };
                let records = (job.keep != Keep::NOTHING)
                    .then(|| {
                        Records::new(
                            job.combos.len(),
                            close.len(),
                            input.start,
                            job.keep.trades,
                            job.keep.blocks.map_or(0, usize::from),
                        )
                    })
                    .transpose()?;
                // A job's progress: this series' reports, in combo-bars of its bars.
                let reported = AtomicU64::new(0);
                let report = |units: u64| {
                    if let Some(p) = &job.progress {
                        p.report(&reported, units, close.len());
                    }
                };
                let run = |cache: &dyn ArrayCache| {
                    let control = SweepControl {
                        cache,
                        cancelled,
                        working_set_bytes: cap,
                        parallel: Some(parallel),
                        tile_bars: None,
                        bar_metrics: true,
                        records: records.as_ref(),
                        exact_lines: false,
                        certified: Some(&certified),
                        progress: job.progress.is_some().then_some(&report as _),
                    };
                    sweep_combos(&input.bars(), &job.combos, &exec, &control)
                };
                let results = match input.cache {
                    Some(key) if job.keep_lines => {
                        run(&self.cache.view_keeping(key, Some(&self.metrics), offer))
                    }
                    Some(key) => {
                        let view = self.cache.view(key, &self.metrics, offer);
                        let results = run(&view);
                        // Its arrays are kept later, off this call's time (`fill`).
                        if results.is_ok() && view.wants_fill() {
                            self.filler.queue(job, at);
                        }
                        results
                    }
                    None => run(&NoCache),
                }?;
                Ok((results, records.map(Records::into_records)))
            })
            .collect::<Result<Vec<_>>>()
            .map(|all| {
                let (results, records): (Vec<_>, Vec<_>) = all.into_iter().unzip();
                Runs {
                    results,
                    records: records.into_iter().flatten().collect(),
                }
            });
        let elapsed = started.elapsed();
        self.metrics.certified_compared.inc_by(certified.compared());
        self.metrics
            .certified_recomputed
            .inc_by(certified.recomputed());
        self.metrics.sweep_seconds.observe(elapsed.as_secs_f64());
        tracing::debug!(
            series = job.inputs.len(),
            strategy = job.strategy.name(),
            combos = job.combos.len(),
            elapsed_us = elapsed.as_micros() as u64,
            ok = out.is_ok(),
            "kernel done"
        );
        out
    }

    fn count<T>(&self, outcome: &Result<T>) {
        match outcome {
            Ok(_) => self.metrics.sweeps_completed.inc(),
            Err(Error::Kernel(sweepflight_kernel::Error::Cancelled)) => {
                self.metrics.sweeps_cancelled.inc()
            }
            Err(_) => 0,
        };
    }
}

/// A sweep's memory: what it needs at most, and how its reservation is split.
#[derive(Debug, Clone, Copy)]
struct Plan {
    /// Bytes to reserve: the largest input's working set plus every input's results.
    need: u64,
    workers: usize,
    results: usize,
}

impl Plan {
    fn new(job: &Job, workers: usize, budget: u64) -> Result<Self> {
        let results = job.inputs.len()
            * job.combos.len()
            * (size_of::<ComboResult>() + job.keep.bytes_per_combo());
        let longest = job
            .inputs
            .iter()
            .map(|i| i.closes().len())
            .max()
            .unwrap_or(0);
        // Inputs run one after another, so only the longest one's arrays count.
        let most = job.combos.memory_bytes(longest, workers, usize::MAX);
        let least = job.combos.memory_bytes(longest, workers, 0);
        let combo_results = job.combos.len() * size_of::<ComboResult>();
        // The v1.3 loop's stop blocks, one set per input as it runs.
        let blocks = sweepflight_kernel::execution::extrema_bytes(
            longest,
            &job.exec,
            job.combos.formula_stops(),
        );
        let (most, least) = (
            most - combo_results + results + blocks,
            least - combo_results + results + blocks,
        );
        if least as u64 > budget {
            return Err(Error::ResourceExhausted(format!(
                "this sweep needs at least {least} bytes of sweep memory ({longest} bars, {} \
                 combos on {} series, {workers} workers); the server allows {budget} \
                 (--sweep-memory-bytes)",
                job.combos.len(),
                job.inputs.len(),
            )));
        }
        Ok(Self {
            need: most as u64,
            workers,
            results,
        })
    }

    /// The kernel's cap on shared arrays for an input of `bars` within `reserved` bytes.
    fn shared_cap(&self, bars: usize, combos: &Combos, reserved: u64) -> usize {
        let scratch = self.workers * combos.scratch_bytes(bars, self.workers);
        usize::try_from(reserved)
            .unwrap_or(usize::MAX)
            .saturating_sub(scratch + self.results)
    }
}

/// Raises the flag when dropped: dropping the awaiting future cancels the sweep.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Counts a sweep as running until dropped (by the worker, so a cancelled sweep counts until
/// its kernel has stopped).
pub(crate) struct Running(Arc<AtomicUsize>);

impl Running {
    pub(crate) fn start(counter: &Arc<AtomicUsize>) -> Self {
        counter.fetch_add(1, Ordering::SeqCst);
        Self(Arc::clone(counter))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sweepflight_protocol::Builtin;

    #[test]
    fn grids_become_combos_in_request_order_and_bad_ones_name_their_position() {
        let grid = Grid::Product(vec![vec![14.0], vec![20.0, 40.0], vec![30.0, 60.0]]);
        let e = params(&Strategy::Builtin(Builtin::RsiRevert), &grid)
            .unwrap_err()
            .to_string();
        // (20, 30), (20, 60), (40, 30): the third combo breaks lower < upper.
        assert!(
            e.contains("combo 2: parameter `lower` must be below upper"),
            "{e}"
        );
        let ok = Grid::Product(vec![vec![5.0, 6.0], vec![20.0]]);
        assert_eq!(
            params(&Strategy::Builtin(Builtin::SmaCross), &ok).unwrap(),
            [[5.0, 20.0], [6.0, 20.0]]
        );
    }

    #[test]
    fn warmup_extends_the_computed_range_back_to_the_first_row() {
        assert_eq!(computed(10..20, 0), (10..20, 0));
        assert_eq!(computed(10..20, 4), (6..20, 4));
        assert_eq!(computed(10..20, 400), (0..20, 10));
        assert_eq!(computed(10..20, u64::MAX), (0..20, 10));
    }

    #[test]
    fn row_ranges_clip_the_end_and_refuse_a_late_start() {
        let r = |s, e| Some(RowRange::new(s, e).unwrap());
        assert_eq!(clip(None, 10, None).unwrap(), 0..10);
        assert_eq!(clip(r(2, 5), 10, None).unwrap(), 2..5);
        assert_eq!(clip(r(2, 50), 10, None).unwrap(), 2..10);
        let e = clip(r(10, 50), 10, Some("AAPL")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`rows` starts at 10, but series \"AAPL\" has 10 rows"
        );
    }
}
