//! The `sweep` action body, the DoExchange commands and the `session` messages.
//!
//! All three share one JSON vocabulary (`lengths` | `params`, `fee`, `series`, `rows`), decoded
//! by one function ([`decode_fields`]) into typed values; each form then says which fields it
//! needs and which it refuses.

use serde::{Deserialize, Serialize};
use serde_json::Number;

use crate::selection::{DEFAULT_MAX_GRID_COMBOS, Selection};
use crate::strategy::{
    Builtin, Execution, Fill, MAX_BLOCKS, ParamKind, Sample, Side, StopsOn, Strategy,
};
use crate::{Error, Result, validate_name};
use sweepflight_kernel::expr::Field;

/// Largest window or length the contract accepts (`i32::MAX`).
pub const MAX_WINDOW: u32 = 2_147_483_647;

/// The fee a request without `"fee"` gets: 0.09% per round trip, as a fraction.
pub const DEFAULT_FEE: f64 = 0.0009;

/// The DoExchange command that opens a `session`.
pub const SESSION_COMMAND: &[u8] = br#"{"op": "session"}"#;

/// Body versions this crate decodes (`"v"`, optional, absent means 1).
const BODY_VERSION: u64 = 1;

/// A compression of IPC bodies (the `compression` body field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    /// ZSTD (arrow's `CompressionType::ZSTD`).
    Zstd,
    /// LZ4 frames (arrow's `CompressionType::LZ4_FRAME`).
    Lz4,
}

impl Compression {
    /// The wire name: `"zstd"` or `"lz4"`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Zstd => "zstd",
            Self::Lz4 => "lz4",
        }
    }

    /// The compression of a wire name.
    ///
    /// # Errors
    /// [`Error`] naming the known ones.
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "zstd" => Ok(Self::Zstd),
            "lz4" => Ok(Self::Lz4),
            other => Err(Error::new(format!(
                "`compression` is \"zstd\" or \"lz4\", got {other:?}"
            ))),
        }
    }
}

/// How many positions of a constrained grid a call may read per combo `--max-grid-combos`
/// allows ([`Grid::runs`]): skipped combos are not counted against the limits, but each is read.
pub const MAX_POSITIONS: usize = 16;

/// The combos of a request, in request order.
#[derive(Debug, Clone, PartialEq)]
pub enum Grid {
    /// Lengths `L` (hma_sar); each expands to six windows by the paper rule (docs/kernel.md).
    Lengths(Vec<u32>),
    /// Explicit hma_sar `[half, full, sqrt, p3, p2, p]` tuples.
    Params(Vec<[u32; 6]>),
    /// Explicit tuples of another strategy, values in its parameter order (each checked by
    /// [`Strategy::check_value`]).
    Tuples(Vec<Vec<f64>>),
    /// `grid`: one non-empty list per parameter, in parameter order; the combos are their
    /// product, the first parameter outermost. Never expanded in memory as a whole.
    Product(Vec<Vec<f64>>),
    /// `sample`: combos drawn from ranges.
    Sample(Sample),
}

impl Grid {
    /// Number of combos (saturating: a product larger than `usize` reads as `usize::MAX`).
    pub fn len(&self) -> usize {
        match self {
            Self::Lengths(l) => l.len(),
            Self::Params(p) => p.len(),
            Self::Tuples(t) => t.len(),
            Self::Product(lists) => lists.iter().fold(1usize, |n, l| n.saturating_mul(l.len())),
            Self::Sample(s) => usize::try_from(s.n).unwrap_or(usize::MAX),
        }
    }

    /// True if there is no combo.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Combo `i`'s values in parameter order (`None` for `lengths`, which the kernel's paper
    /// rule expands).
    ///
    /// # Errors
    /// A `sample` whose draws all break the strategy's constraints.
    pub fn values(&self, strategy: &Strategy, i: usize) -> Result<Option<Vec<f64>>> {
        Ok(Some(match self {
            Self::Lengths(_) => return Ok(None),
            Self::Params(p) => p[i].iter().map(|&w| f64::from(w)).collect(),
            Self::Tuples(t) => t[i].clone(),
            Self::Product(lists) => {
                // Mixed radix, the last parameter fastest.
                let mut rest = i;
                let mut out = vec![0.0; lists.len()];
                for (slot, list) in out.iter_mut().zip(lists).rev() {
                    *slot = list[rest % list.len()];
                    rest /= list.len();
                }
                out
            }
            Self::Sample(s) => s.draw(i as u64, strategy)?,
        }))
    }

    /// How many combos of `range` a call runs, for the server's limits: a grid's combos that
    /// break the strategy's `constraint` are skipped and not counted (docs/language.md,
    /// "Constraint"). Counted only where it matters, a product with a constraint of more than
    /// `cap` combos, and only until the count passes `cap` (it then reads `cap + 1`). Every
    /// position is read to count, so a constrained product of more than [`MAX_POSITIONS`]
    /// times `max_grid` positions is refused outright.
    ///
    /// # Errors
    /// [`Error`] for such a product, naming its positions and the flag.
    pub fn runs(
        &self,
        strategy: &Strategy,
        range: std::ops::Range<usize>,
        cap: usize,
        max_grid: usize,
    ) -> Result<usize> {
        let n = range.len();
        let Self::Product(lists) = self else {
            return Ok(n);
        };
        if n <= cap || strategy.constraint().is_none() {
            return Ok(n);
        }
        let most = max_grid.saturating_mul(MAX_POSITIONS);
        if n > most {
            return Err(Error::new(format!(
                "a constrained grid of {n} positions: this server reads at most {most} per call \
                 ({MAX_POSITIONS} x --max-grid-combos), skipped ones included"
            )));
        }
        let mut kept = 0;
        walk(lists, range, false, |values| {
            // A combo refused for another reason counts: its call is refused naming it.
            if !matches!(strategy.check_combo(values), Err(("constraint", _))) {
                kept += 1;
            }
            kept <= cap
        });
        Ok(kept)
    }

    /// The combos `start..end` (clipped to the grid); a product or sample becomes the explicit
    /// tuples of that slice.
    ///
    /// # Errors
    /// As [`Grid::values`].
    pub fn slice(&self, strategy: &Strategy, start: usize, end: usize) -> Result<Self> {
        let len = self.len();
        let range = start.min(len)..end.min(len);
        Ok(match self {
            Self::Lengths(l) => Self::Lengths(l[range].to_vec()),
            Self::Params(p) => Self::Params(p[range].to_vec()),
            Self::Tuples(t) => Self::Tuples(t[range].to_vec()),
            Self::Product(_) | Self::Sample(_) => Self::Tuples(
                range
                    .map(|i| Ok(self.values(strategy, i)?.unwrap_or_default()))
                    .collect::<Result<_>>()?,
            ),
        })
    }
}

/// Calls `f` with the values of each combo of the product of `lists` at positions `range`,
/// in order or in `reverse`, until it returns false: an odometer (the last parameter fastest),
/// no division or allocation per combo.
fn walk(
    lists: &[Vec<f64>],
    range: std::ops::Range<usize>,
    reverse: bool,
    mut f: impl FnMut(&[f64]) -> bool,
) {
    let Some(first) = (if reverse {
        range.clone().last()
    } else {
        range.clone().next()
    }) else {
        return;
    };
    let mut at: Vec<usize> = Vec::with_capacity(lists.len());
    let mut rest = first;
    for list in lists.iter().rev() {
        at.push(rest % list.len());
        rest /= list.len();
    }
    at.reverse();
    let mut values: Vec<f64> = at.iter().zip(lists).map(|(&k, l)| l[k]).collect();
    for _ in range {
        if !f(&values) {
            return;
        }
        for (j, list) in lists.iter().enumerate().rev() {
            let (next, wrapped) = match (reverse, at[j]) {
                (false, k) if k + 1 < list.len() => (k + 1, false),
                (false, _) => (0, true),
                (true, 0) => (list.len() - 1, true),
                (true, k) => (k - 1, false),
            };
            at[j] = next;
            values[j] = list[next];
            if !wrapped {
                break;
            }
        }
    }
}

/// Rows `start..end` of each series (0-based, half-open); `end` past a series' length is
/// clipped by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RowRange {
    /// First row.
    pub start: u64,
    /// One past the last row.
    pub end: u64,
}

impl RowRange {
    /// `start..end`.
    ///
    /// # Errors
    /// Unless `start < end`.
    pub fn new(start: u64, end: u64) -> Result<Self> {
        if start >= end {
            return Err(Error::new(format!(
                "`rows` must be [start, end] with 0 <= start < end, got [{start}, {end}]"
            )));
        }
        Ok(Self { start, end })
    }
}

/// A `sweep` action body (and a `session` message): a stored dataset and what to run on it.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepRequest {
    /// The dataset.
    pub dataset: String,
    /// The strategy the combos are of.
    pub strategy: Strategy,
    /// The combos.
    pub grid: Grid,
    /// Side, stops and warm-up.
    pub execution: Execution,
    /// Round-trip fee as a fraction; [`DEFAULT_FEE`] when `None`.
    pub fee: Option<f64>,
    /// On a keyed dataset, the series to run on, in this order (all of them when `None`).
    pub series: Option<Vec<String>>,
    /// Only these rows of each series.
    pub rows: Option<RowRange>,
    /// Which rows come back, in which order.
    pub selection: Selection,
    /// How the reply's IPC bodies are compressed (none when `None`).
    pub compression: Option<Compression>,
}

impl SweepRequest {
    /// Combos derived from lengths by the paper rule.
    pub fn lengths(dataset: impl Into<String>, lengths: impl IntoIterator<Item = u32>) -> Self {
        Self::new(dataset, Grid::Lengths(lengths.into_iter().collect()))
    }

    /// Explicit `[half, full, sqrt, p3, p2, p]` combos.
    pub fn params(dataset: impl Into<String>, params: impl IntoIterator<Item = [u32; 6]>) -> Self {
        Self::new(dataset, Grid::Params(params.into_iter().collect()))
    }

    /// A request for `grid` on `dataset`, every option at its default.
    pub fn new(dataset: impl Into<String>, grid: Grid) -> Self {
        Self {
            dataset: dataset.into(),
            strategy: Strategy::Builtin(Builtin::HmaSar),
            grid,
            execution: Execution::default(),
            fee: None,
            series: None,
            rows: None,
            selection: Selection::default(),
            compression: None,
        }
    }

    /// A request for combos of `strategy` on `dataset`, every option at its default.
    pub fn strategy(dataset: impl Into<String>, strategy: Strategy, grid: Grid) -> Self {
        // A portfolio trades at the next open unless told (docs/portfolios.md).
        let execution = Execution {
            fill: if strategy.portfolio().is_some() {
                Fill::NextOpen
            } else {
                Fill::Close
            },
            ..Execution::default()
        };
        Self {
            strategy,
            execution,
            ..Self::new(dataset, grid)
        }
    }

    /// The same request keeping only the rows `selection` picks.
    #[must_use]
    pub fn with_selection(mut self, selection: Selection) -> Self {
        self.selection = selection;
        self
    }

    /// The same request with these execution options.
    #[must_use]
    pub fn with_execution(mut self, execution: Execution) -> Self {
        self.execution = execution;
        self
    }

    /// The same request with a fee.
    #[must_use]
    pub fn with_fee(mut self, fee: f64) -> Self {
        self.fee = Some(fee);
        self
    }

    /// The same request on these series of a keyed dataset only.
    #[must_use]
    pub fn with_series<S: Into<String>>(mut self, series: impl IntoIterator<Item = S>) -> Self {
        self.series = Some(series.into_iter().map(Into::into).collect());
        self
    }

    /// The same request on rows `range` of each series.
    #[must_use]
    pub fn with_rows(mut self, range: RowRange) -> Self {
        self.rows = Some(range);
        self
    }

    /// The same request with its reply compressed.
    #[must_use]
    pub fn with_compression(mut self, compression: Compression) -> Self {
        self.compression = Some(compression);
        self
    }

    /// The fee, or [`DEFAULT_FEE`].
    pub fn fee(&self) -> f64 {
        self.fee.unwrap_or(DEFAULT_FEE)
    }

    /// Number of combos asked for (per series).
    pub fn len(&self) -> usize {
        self.grid.len()
    }

    /// True if no combo is asked for.
    pub fn is_empty(&self) -> bool {
        self.grid.is_empty()
    }

    /// Splits into requests of at most `max` combos each, in order (never fewer than one); a
    /// product or sample is sent as the explicit tuples of each chunk.
    ///
    /// # Errors
    /// As [`Grid::values`].
    pub fn chunks(&self, max: usize) -> Result<Vec<Self>> {
        let max = max.max(1);
        let len = self.len();
        // A constraint's gaps keep grid positions, which explicit tuples would lose: such a
        // grid goes whole (the server runs a large one in steps itself).
        let whole = self.strategy.constraint().is_some() && matches!(self.grid, Grid::Product(_));
        if len <= max || whole {
            return Ok(vec![self.clone()]);
        }
        (0..len)
            .step_by(max)
            .map(|start| {
                Ok(Self {
                    grid: self.grid.slice(&self.strategy, start, start + max)?,
                    ..self.clone()
                })
            })
            .collect()
    }

    /// The JSON body.
    pub fn encode(&self) -> Vec<u8> {
        let wire = Wire {
            dataset: Some(self.dataset.clone()),
            compression: self.compression.map(|c| c.name().to_owned()),
            ..Wire::from_fields(
                &self.strategy,
                &self.grid,
                &self.execution,
                self.fee,
                self.series.as_deref(),
                self.rows,
                &self.selection,
            )
        };
        serde_json::to_vec(&wire).expect("a sweep body serialises")
    }

    /// Decodes a `sweep` action body or `session` message.
    ///
    /// # Errors
    /// [`Error`] for anything the contract refuses: not UTF-8, not a JSON object, unknown
    /// fields, `op`, a missing or bad `dataset`, both or neither of `lengths` / `params`, a
    /// length or window outside `1..=2147483647`, a bad fee, `series` or `rows`.
    pub fn decode(body: &[u8]) -> Result<Self> {
        let wire = parse(body)?;
        if wire.op.is_some() {
            return Err(Error::new(
                "`op` belongs to DoExchange commands, not to the sweep action",
            ));
        }
        if wire.key.is_some() {
            return Err(Error::new(
                "`key` belongs to keyed puts and exchange commands; a stored dataset keeps its own",
            ));
        }
        if wire.keyed.is_some() {
            return Err(Error::new("`keyed` belongs to `session` commands"));
        }
        if wire.action.is_some() {
            return Err(Error::new(
                "`action` belongs to `session` commands; the action is the DoAction type",
            ));
        }
        let dataset = wire
            .dataset
            .clone()
            .ok_or_else(|| Error::new("sweep body needs `dataset`, a string"))?;
        validate_name(&dataset)?;
        let fields = decode_fields(wire)?;
        Ok(Self {
            dataset,
            strategy: fields.strategy,
            grid: fields.grid,
            execution: fields.execution,
            fee: fields.fee,
            series: fields.series,
            rows: fields.rows,
            selection: fields.selection,
            compression: fields.compression,
        })
    }

    /// Refuses more than `max` combos per series (with `top`: more than `max` rows returned
    /// or [`DEFAULT_MAX_GRID_COMBOS`] evaluated).
    ///
    /// # Errors
    /// [`Error`] naming the count and the limit (`--max-combos`).
    pub fn check_combos(&self, max: usize) -> Result<()> {
        self.check_limits(max, DEFAULT_MAX_GRID_COMBOS)
    }

    /// Refuses a request over the server's limits per series: `max_combos` (evaluated, or
    /// returned with `top`) and `max_grid` (evaluated with `top`).
    ///
    /// # Errors
    /// [`Error`] naming the count and the flag.
    pub fn check_limits(&self, max_combos: usize, max_grid: usize) -> Result<()> {
        self.check_limits_on(1, max_combos, max_grid)
    }

    /// [`SweepRequest::check_limits`] for a call over `series` series, the combos a
    /// constraint skips not counted ([`Grid::runs`]).
    ///
    /// # Errors
    /// [`Error`] naming the count and the flag.
    pub fn check_limits_on(&self, series: usize, max_combos: usize, max_grid: usize) -> Result<()> {
        let cap = self.selection.evaluated_cap(max_combos, max_grid);
        let combos =
            self.grid
                .runs(&self.strategy, 0..self.len(), cap / series.max(1), max_grid)?;
        self.selection
            .check_limits(series, combos, max_combos, max_grid)
    }
}

/// A DoExchange command (the CMD of the first message's descriptor).
#[derive(Debug, Clone, PartialEq)]
pub enum ExchangeCommand {
    /// `{"op": "echo"}`: every batch sent comes back unchanged.
    Echo,
    /// `{"op": "sweep", ...}`: sweep the series streamed in this exchange; nothing is stored.
    /// Boxed: a sweep's fields dwarf the other commands.
    Sweep(Box<ExchangeSweep>),
    /// `{"op": "session"}` (extension): a long-lived stream of params-only sweeps of stored
    /// datasets, one [`SweepRequest`] per inbound message (its app_metadata), one result batch
    /// back each. A stream has one schema, so a session is for unkeyed datasets, or, opened
    /// with `"keyed": true`, for keyed ones (replies start with the `series` column), and for
    /// one strategy (`"strategy"`, default hma_sar).
    Session {
        /// Replies carry the keyed result schema.
        keyed: bool,
        /// The strategy of every sweep on the session (its replies' schema); hma_sar unless the
        /// command says `"strategy"`.
        strategy: Strategy,
        /// What each message answers with (`"action"`, default `sweep`): one kind per session,
        /// as its replies share one schema.
        reply: SessionReply,
    },
}

/// What a session's messages answer with: the action of the same name run on each message's
/// sweep body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SessionReply {
    /// The sweep's result rows.
    #[default]
    Sweep,
    /// The chosen combos' trades (the `trades` action).
    Trades,
    /// The chosen combos' equity curves (the `equity` action).
    Equity,
    /// Each message a `walk_forward` body, answered with its folds' rows.
    WalkForward,
}

impl SessionReply {
    /// The wire name (the action's).
    pub fn name(self) -> &'static str {
        match self {
            Self::Sweep => "sweep",
            Self::Trades => "trades",
            Self::Equity => "equity",
            Self::WalkForward => "walk_forward",
        }
    }

    fn from_name(name: &str) -> Result<Self> {
        match name {
            "sweep" => Ok(Self::Sweep),
            "trades" => Ok(Self::Trades),
            "equity" => Ok(Self::Equity),
            "walk_forward" => Ok(Self::WalkForward),
            other => Err(Error::new(format!(
                "a session's `action` is \"sweep\", \"trades\", \"equity\" or \"walk_forward\", got {other:?}"
            ))),
        }
    }
}

/// The stateless sweep of a DoExchange: the grid and options; the series travels in the stream.
#[derive(Debug, Clone, PartialEq)]
pub struct ExchangeSweep {
    /// The strategy the combos are of.
    pub strategy: Strategy,
    /// The combos.
    pub grid: Grid,
    /// Side, stops and warm-up.
    pub execution: Execution,
    /// Round-trip fee; [`DEFAULT_FEE`] when `None`.
    pub fee: Option<f64>,
    /// Group the streamed rows into series by this column (as a keyed put does).
    pub key: Option<String>,
    /// With `key`: only these series, in this order.
    pub series: Option<Vec<String>>,
    /// Only these rows of each series.
    pub rows: Option<RowRange>,
    /// Which rows come back, in which order.
    pub selection: Selection,
    /// How the reply's IPC bodies are compressed (none when `None`).
    pub compression: Option<Compression>,
}

impl ExchangeSweep {
    /// The fee, or [`DEFAULT_FEE`].
    pub fn fee(&self) -> f64 {
        self.fee.unwrap_or(DEFAULT_FEE)
    }

    /// Refuses more than `max` combos per series, as [`SweepRequest::check_combos`].
    ///
    /// # Errors
    /// [`Error`] naming the count and the limit (`--max-combos`).
    pub fn check_combos(&self, max: usize) -> Result<()> {
        self.selection
            .check_limits(1, self.grid.len(), max, DEFAULT_MAX_GRID_COMBOS)
    }
}

impl ExchangeCommand {
    /// Decodes a DoExchange CMD.
    ///
    /// # Errors
    /// [`Error`] for a body that is not a JSON object, an unknown or missing `op`, `dataset`
    /// (the series travels in the stream), or fields the `op` does not take.
    pub fn decode(cmd: &[u8]) -> Result<Self> {
        let wire = parse(cmd)?;
        if wire.dataset.is_some() {
            return Err(Error::new(
                "a DoExchange command carries its series; `dataset` is not allowed",
            ));
        }
        let bare_but_strategy = wire.lengths.is_none()
            && wire.params.is_none()
            && wire.grid.is_none()
            && wire.sample.is_none()
            && wire.side.is_none()
            && wire.stop_loss.is_none()
            && wire.take_profit.is_none()
            && wire.trailing_stop.is_none()
            && wire.fill.is_none()
            && wire.stops.is_none()
            && wire.slippage.is_none()
            && wire.warmup.is_none()
            && wire.periods_per_year.is_none()
            && wire.blocks.is_none()
            && wire.ignore_time.is_none()
            && wire.filters.is_none()
            && wire.order_by.is_none()
            && wire.descending.is_none()
            && wire.top.is_none()
            && wire.fee.is_none()
            && wire.series.is_none()
            && wire.rows.is_none()
            && wire.compression.is_none()
            && wire.key.is_none();
        let bare = bare_but_strategy && wire.strategy.is_none() && wire.action.is_none();
        match wire.op.as_deref() {
            Some("echo") if bare && wire.keyed.is_none() => Ok(Self::Echo),
            Some("echo") => Err(Error::new("`echo` takes no other fields")),
            Some("session") if bare_but_strategy => Ok(Self::Session {
                keyed: wire.keyed.unwrap_or(false),
                strategy: Strategy::decode(wire.strategy.as_ref(), wire.constraint.as_deref())?,
                reply: wire
                    .action
                    .as_deref()
                    .map_or(Ok(SessionReply::Sweep), SessionReply::from_name)?,
            }),
            Some("session") => Err(Error::new(
                "`session` takes only `keyed`, `strategy` and `action`; each message's app_metadata is a sweep body",
            )),
            Some(_) if wire.action.is_some() => {
                Err(Error::new("`action` belongs to `session` commands"))
            }
            Some(_) if wire.keyed.is_some() => {
                Err(Error::new("`keyed` belongs to `session` commands"))
            }
            Some("sweep") => {
                let key = wire.key.clone();
                if key.as_deref() == Some("") {
                    return Err(Error::new("`key` must name a column"));
                }
                let fields = decode_fields(wire)?;
                if fields.series.is_some() && key.is_none() {
                    return Err(Error::new(
                        "`series` needs `key`: an unkeyed upload is one series",
                    ));
                }
                Ok(Self::Sweep(Box::new(ExchangeSweep {
                    strategy: fields.strategy,
                    grid: fields.grid,
                    execution: fields.execution,
                    fee: fields.fee,
                    key,
                    series: fields.series,
                    rows: fields.rows,
                    selection: fields.selection,
                    compression: fields.compression,
                })))
            }
            Some(other) => Err(Error::new(format!(
                "unknown op {other:?}; expected \"echo\", \"sweep\" or \"session\""
            ))),
            None => Err(Error::new(
                "DoExchange command needs `op`: \"echo\", \"sweep\" or \"session\"",
            )),
        }
    }

    /// The JSON command.
    pub fn encode(&self) -> Vec<u8> {
        let wire = match self {
            Self::Echo => Wire {
                op: Some("echo".into()),
                ..Wire::default()
            },
            Self::Session {
                keyed: false,
                strategy: Strategy::Builtin(Builtin::HmaSar),
                reply: SessionReply::Sweep,
            } => return SESSION_COMMAND.to_vec(),
            Self::Session {
                keyed,
                strategy,
                reply,
            } => Wire {
                op: Some("session".into()),
                keyed: keyed.then_some(true),
                strategy: (!strategy.is_hma_sar()).then(|| strategy.wire()),
                constraint: strategy.constraint().map(str::to_owned),
                action: (*reply != SessionReply::Sweep).then(|| reply.name().to_owned()),
                ..Wire::default()
            },
            Self::Sweep(s) => Wire {
                op: Some("sweep".into()),
                key: s.key.clone(),
                compression: s.compression.map(|c| c.name().to_owned()),
                ..Wire::from_fields(
                    &s.strategy,
                    &s.grid,
                    &s.execution,
                    s.fee,
                    s.series.as_deref(),
                    s.rows,
                    &s.selection,
                )
            },
        };
        serde_json::to_vec(&wire).expect("an exchange command serialises")
    }
}

/// The JSON shape shared by every form, as it travels.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    v: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    op: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dataset: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lengths: Option<Vec<Number>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // Values, not numbers: a value a client cannot write as a JSON number (a NaN) travels as
    // `null` and is refused by name, never replaced.
    params: Option<Vec<Vec<serde_json::Value>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    strategy: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    constraint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    grid: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sample: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fee: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    side: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stop_loss: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    take_profit: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    trailing_stop: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fill: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stops: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    slippage: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    warmup: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    periods_per_year: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    blocks: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ignore_time: Option<serde_json::Value>,
    #[serde(default, rename = "where", skip_serializing_if = "Option::is_none")]
    filters: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    order_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    descending: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    top: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    series: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rows: Option<Vec<Number>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keyed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    action: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    compression: Option<String>,
}

impl Wire {
    fn from_fields(
        strategy: &Strategy,
        grid: &Grid,
        execution: &Execution,
        fee: Option<f64>,
        series: Option<&[String]>,
        rows: Option<RowRange>,
        selection: &Selection,
    ) -> Self {
        let (filters, order_by, descending, top) = selection.encode();
        let numbers = |v: &[u32]| v.iter().map(|&x| Number::from(x)).collect::<Vec<_>>();
        // Integers as JSON integers, numbers as JSON numbers, per the strategy's parameters. A
        // value of an int parameter that is not a whole number (5.9, or -3 within i64) goes as
        // it is, so the server refuses it by name: a cast here would truncate it silently.
        let value = |k: usize, v: f64| match strategy.params()[k].1 {
            ParamKind::Int if v.fract() == 0.0 && v.abs() < 9.0e15 => {
                serde_json::Value::from(v as i64)
            }
            _ => Number::from_f64(v).map_or(serde_json::Value::Null, serde_json::Value::Number),
        };
        let tuple = |t: &[f64]| t.iter().enumerate().map(|(k, &v)| value(k, v)).collect();
        let mut wire = Self {
            strategy: (!strategy.is_hma_sar()).then(|| strategy.wire()),
            constraint: strategy.constraint().map(str::to_owned),
            fee,
            series: series.map(<[String]>::to_vec),
            rows: rows.map(|r| vec![Number::from(r.start), Number::from(r.end)]),
            side: (execution.side != Side::Both).then(|| execution.side.name().to_owned()),
            stop_loss: stop_value(execution.stop_loss, strategy, Field::StopLoss),
            take_profit: stop_value(execution.take_profit, strategy, Field::TakeProfit),
            trailing_stop: stop_value(execution.trailing_stop, strategy, Field::TrailingStop),
            // A portfolio's default is the next open: its fill always travels.
            fill: (execution.fill != Fill::Close || strategy.portfolio().is_some())
                .then(|| execution.fill.name().to_owned()),
            stops: (execution.stops != StopsOn::Close).then(|| execution.stops.name().to_owned()),
            slippage: (execution.slippage != 0.0)
                .then(|| serde_json::Value::from(execution.slippage)),
            warmup: if execution.warmup_auto {
                Some(serde_json::Value::String("auto".into()))
            } else {
                (execution.warmup != 0).then(|| serde_json::Value::from(execution.warmup))
            },
            periods_per_year: if execution.periods_per_year_auto {
                Some(serde_json::Value::String("auto".into()))
            } else {
                execution.periods_per_year.map(serde_json::Value::from)
            },
            blocks: execution.blocks.map(Number::from),
            ignore_time: execution
                .ignore_time
                .then_some(serde_json::Value::Bool(true)),
            filters,
            order_by,
            descending,
            top,
            ..Self::default()
        };
        match grid {
            Grid::Lengths(l) => wire.lengths = Some(numbers(l)),
            Grid::Params(p) => {
                wire.params = Some(
                    p.iter()
                        .map(|t| t.iter().map(|&x| serde_json::Value::from(x)).collect())
                        .collect(),
                );
            }
            Grid::Tuples(t) => wire.params = Some(t.iter().map(|t| tuple(t)).collect()),
            Grid::Product(lists) => {
                wire.grid = Some(
                    lists
                        .iter()
                        .enumerate()
                        .map(|(k, list)| {
                            let values = list.iter().map(|&v| value(k, v)).collect();
                            (
                                strategy.params()[k].0.to_owned(),
                                serde_json::Value::Array(values),
                            )
                        })
                        .collect(),
                );
            }
            Grid::Sample(s) => {
                let ranges: serde_json::Map<String, serde_json::Value> = s
                    .ranges
                    .iter()
                    .enumerate()
                    .map(|(k, &(lo, hi))| {
                        let pair = vec![value(k, lo), value(k, hi)];
                        (
                            strategy.params()[k].0.to_owned(),
                            serde_json::Value::Array(pair),
                        )
                    })
                    .collect();
                wire.sample = Some(serde_json::json!({"n": s.n, "seed": s.seed, "ranges": ranges}));
            }
        }
        wire
    }
}

/// The fields every sweep form shares, decoded and checked.
struct Fields {
    strategy: Strategy,
    grid: Grid,
    execution: Execution,
    fee: Option<f64>,
    series: Option<Vec<String>>,
    rows: Option<RowRange>,
    selection: Selection,
    compression: Option<Compression>,
}

fn parse(body: &[u8]) -> Result<Wire> {
    let text =
        std::str::from_utf8(body).map_err(|e| Error::new(format!("body is not UTF-8: {e}")))?;
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| Error::new(format!("body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(Error::new("body must be a JSON object"));
    }
    let wire: Wire =
        serde_json::from_value(value).map_err(|e| Error::new(format!("bad sweep body: {e}")))?;
    match &wire.v {
        None => {}
        Some(v) if v.as_u64() == Some(BODY_VERSION) => {}
        Some(v) => {
            return Err(Error::new(format!(
                "unsupported body version {v}; this server speaks \"v\": {BODY_VERSION}"
            )));
        }
    }
    Ok(wire)
}

fn decode_fields(wire: Wire) -> Result<Fields> {
    if let Some(fee) = wire.fee
        && (!fee.is_finite() || fee < 0.0)
    {
        return Err(Error::new(format!(
            "`fee` must be a finite number >= 0, got {fee}"
        )));
    }
    let portfolio = matches!(&wire.strategy, Some(serde_json::Value::Object(m)) if crate::portfolio::is_portfolio(m));
    if portfolio {
        refuse_for_portfolio(&wire)?;
    }
    // Stops given as text are formulas of the strategy's program (docs/language.md).
    let stops: Vec<(Field, String)> = Field::STOPS
        .into_iter()
        .zip([&wire.stop_loss, &wire.take_profit, &wire.trailing_stop])
        .filter_map(|(f, v)| match v {
            Some(serde_json::Value::String(t)) => Some((f, t.clone())),
            _ => None,
        })
        .collect();
    let strategy =
        Strategy::decode_with_stops(wire.strategy.as_ref(), wire.constraint.as_deref(), &stops)?;
    let mut execution = execution(&wire)?;
    if portfolio && wire.fill.is_none() {
        // A portfolio decides on a close and trades at the next open by default.
        execution.fill = Fill::NextOpen;
    }
    let given = [
        wire.lengths.is_some(),
        wire.params.is_some(),
        wire.grid.is_some(),
        wire.sample.is_some(),
    ];
    // hma_sar by name, with or without a constraint, takes `lengths` too.
    let paper = strategy.name() == Strategy::Builtin(Builtin::HmaSar).name();
    let forms = if paper {
        "`lengths`, `params`, `grid` and `sample`"
    } else {
        "`params`, `grid` and `sample`"
    };
    match given.iter().filter(|&&g| g).count() {
        0 => return Err(Error::new(format!("give exactly one of {forms}"))),
        1 => {}
        _ if wire.lengths.is_some() && wire.params.is_some() && !given[2] && !given[3] => {
            return Err(Error::new(
                "give exactly one of `lengths` and `params`, not both",
            ));
        }
        _ => {
            return Err(Error::new(format!(
                "give exactly one of {forms}, not several"
            )));
        }
    }
    let grid = if let Some(lengths) = wire.lengths {
        if !paper {
            return Err(Error::new(format!(
                "`lengths` derives hma_sar windows; give {strategy} combos as {forms}"
            )));
        }
        Grid::Lengths(
            lengths
                .iter()
                .enumerate()
                .map(|(i, l)| window(l, || format!("lengths[{i}]")))
                .collect::<Result<_>>()?,
        )
    } else if let Some(params) = wire.params {
        if strategy == Strategy::Builtin(Builtin::HmaSar) {
            Grid::Params(
                params
                    .iter()
                    .enumerate()
                    .map(|(i, t)| tuple(i, t))
                    .collect::<Result<_>>()?,
            )
        } else {
            Grid::Tuples(
                params
                    .iter()
                    .enumerate()
                    .map(|(i, t)| strategy_tuple(&strategy, i, t))
                    .collect::<Result<_>>()?,
            )
        }
    } else if let Some(grid) = wire.grid {
        product(&strategy, &grid)?
    } else {
        sample(&strategy, wire.sample.as_ref().expect("one form is given"))?
    };
    let selection = Selection::decode(
        &strategy,
        wire.filters.as_ref(),
        wire.order_by.clone(),
        wire.descending,
        wire.top.as_ref(),
    )?;
    if execution.warmup_auto {
        execution.warmup = auto_warmup(&strategy, &grid)?;
        execution.warmup_auto = false;
    }
    match &wire.periods_per_year {
        None => {}
        Some(serde_json::Value::String(a)) if a == "auto" => execution.periods_per_year_auto = true,
        Some(p) => {
            let p = p
                .as_f64()
                .filter(|p| p.is_finite() && *p > 0.0)
                .ok_or_else(|| {
                    Error::new(format!(
                        "`periods_per_year` must be a finite number > 0 (252 for daily bars) or \
                     \"auto\" (from the dataset's time column), got {p}"
                    ))
                })?;
            execution.periods_per_year = Some(p);
        }
    }
    if let Some(b) = &wire.blocks {
        execution.blocks = Some(
            b.as_u64()
                .filter(|b| (2..=u64::from(MAX_BLOCKS)).contains(b))
                .and_then(|b| u8::try_from(b).ok())
                .ok_or_else(|| {
                    Error::new(format!(
                        "`blocks` must be an integer from 2 to {MAX_BLOCKS}, got {b}"
                    ))
                })?,
        );
    }
    let series = wire.series.map(check_series).transpose()?;
    let rows = wire
        .rows
        .map(|r| {
            let bad = || {
                Error::new(format!(
                    "`rows` must be [start, end], two integers with 0 <= start < end, got {}",
                    serde_json::to_string(&r).unwrap_or_default()
                ))
            };
            match r.as_slice() {
                [s, e] => RowRange::new(s.as_u64().ok_or_else(bad)?, e.as_u64().ok_or_else(bad)?),
                _ => Err(bad()),
            }
        })
        .transpose()?;
    Ok(Fields {
        strategy,
        grid,
        execution,
        selection,
        fee: wire.fee,
        series,
        rows,
        compression: wire
            .compression
            .as_deref()
            .map(Compression::from_name)
            .transpose()?,
    })
}

/// Refuses the body fields that do not apply to a portfolio strategy, present at all.
fn refuse_for_portfolio(wire: &Wire) -> Result<()> {
    let present = [
        ("side", wire.side.is_some()),
        ("stop_loss", wire.stop_loss.is_some()),
        ("take_profit", wire.take_profit.is_some()),
        ("trailing_stop", wire.trailing_stop.is_some()),
        ("stops", wire.stops.is_some()),
        ("warmup", wire.warmup.is_some()),
        ("lengths", wire.lengths.is_some()),
        ("ignore_time", wire.ignore_time.is_some()),
    ];
    if let Some((name, _)) = present.iter().find(|(_, given)| *given) {
        let why = match *name {
            "ignore_time" => {
                " (a portfolio aligns its series by time: sort the bars by time before the put)"
            }
            "warmup" => " (formulas read every bar of each series before `rows` as history)",
            "lengths" => " (give combos as `params`, `grid` or `sample`)",
            _ => " (a portfolio holds target weights, rebalanced at its decision rows)",
        };
        return Err(Error::new(format!(
            "`{name}` does not apply to a portfolio strategy{why}; leave it out"
        )));
    }
    Ok(())
}

fn check_series(series: Vec<String>) -> Result<Vec<String>> {
    if series.is_empty() {
        return Err(Error::new(
            "`series` must list at least one series (leave it out for all of them)",
        ));
    }
    let mut seen = std::collections::HashSet::with_capacity(series.len());
    if let Some(dup) = series.iter().find(|s| !seen.insert(s.as_str())) {
        return Err(Error::new(format!("series {dup:?} is listed twice")));
    }
    Ok(series)
}

fn tuple(i: usize, t: &[serde_json::Value]) -> Result<[u32; 6]> {
    if t.len() != 6 {
        return Err(Error::new(format!(
            "params[{i}] has {} values; each tuple is [half, full, sqrt, p3, p2, p]",
            t.len()
        )));
    }
    const FIELDS: [&str; 6] = ["half", "full", "sqrt", "p3", "p2", "p"];
    let mut out = [0u32; 6];
    for (j, w) in t.iter().enumerate() {
        let what = || format!("params[{i}][{j}] ({})", FIELDS[j]);
        out[j] = match w {
            serde_json::Value::Number(n) => window(n, what)?,
            other => {
                return Err(Error::new(format!(
                    "{} must be an integer in 1..={MAX_WINDOW}, got {other}",
                    what()
                )));
            }
        };
    }
    Ok(out)
}

/// The execution options of a body.
/// `"warmup": "auto"` (docs/language.md): the largest lookback of the strategy's formulas over
/// the call's combos, each computed with the combo's values. A product of windows takes each
/// window's largest value (a lookback only grows with its windows, and does not depend on the
/// number parameters); the other forms are read combo by combo. Resolved once, when the body
/// is decoded, so every step, fold and chunk of the call shares one warm-up.
fn auto_warmup(strategy: &Strategy, grid: &Grid) -> Result<u64> {
    let (program, _) = strategy.program();
    // A higher timeframe's lookback is in periods, not bars (expressions.md).
    if let Some(tf) = program.timeframes().first() {
        return Err(Error::new(format!(
            "`\"warmup\": \"auto\"` counts lookbacks in bars, and `{}(x)` looks back in {}, \
             not bars: give `warmup` as a number of bars (e.g. 5 ISO weeks of daily bars: 25)",
            tf.name(),
            tf.periods()
        )));
    }
    let width = program.params.len();
    let lookback = |values: &[f64]| sweepflight_kernel::plan::lookback(&program, values) as u64;
    Ok(match grid {
        Grid::Product(lists) => {
            let values: Vec<f64> = lists
                .iter()
                .map(|l| l.iter().copied().fold(f64::NEG_INFINITY, f64::max))
                .collect();
            let most = lookback(&values);
            // A product larger than a call may read is refused later; its bound stands.
            let readable = grid.len() <= DEFAULT_MAX_GRID_COMBOS.saturating_mul(MAX_POSITIONS);
            if strategy.constraint().is_none() || !readable {
                return Ok(most);
            }
            // Only the combos the constraint keeps count: read from the last (where windows
            // are usually largest) until one reaches the product's bound.
            let mut kept = 0;
            walk(lists, 0..grid.len(), true, |v| {
                if strategy.check_combo(v).is_ok() {
                    kept = kept.max(lookback(v));
                }
                kept < most
            });
            kept
        }
        Grid::Lengths(l) => l
            .iter()
            .filter_map(|&l| sweepflight_kernel::Combo::from_length(l).ok())
            .map(|c| lookback(&c.windows().map(f64::from)))
            .max()
            .unwrap_or(0),
        grid => {
            let mut most = 0;
            for i in 0..grid.len() {
                let v = grid.values(strategy, i)?.unwrap_or_default();
                if v.len() == width {
                    most = most.max(lookback(&v));
                }
            }
            most
        }
    })
}

/// A stop as it travels: its number, or the strategy's formula for it.
fn stop_value(number: Option<f64>, strategy: &Strategy, field: Field) -> Option<serde_json::Value> {
    number.map(serde_json::Value::from).or_else(|| {
        strategy
            .stop_formula(field)
            .map(|t| serde_json::Value::String(t.to_owned()))
    })
}

fn execution(wire: &Wire) -> Result<Execution> {
    let side = wire
        .side
        .as_deref()
        .map_or(Ok(Side::Both), Side::from_name)?;
    let stop = |name: &str, v: &Option<serde_json::Value>| -> Result<Option<f64>> {
        let Some(v) = v else { return Ok(None) };
        if v.is_string() {
            // A formula: the strategy's program holds it.
            return Ok(None);
        }
        v.as_f64()
            .filter(|v| v.is_finite() && *v > 0.0)
            .map(Some)
            .ok_or_else(|| {
                Error::new(format!(
                    "`{name}` must be a finite fraction > 0 (0.02 is 2%) or a formula giving \
                     one per trade (\"2 * atr(14) / close\"), got {v}"
                ))
            })
    };
    let stop_loss = stop("stop_loss", &wire.stop_loss)?;
    let take_profit = stop("take_profit", &wire.take_profit)?;
    let trailing_stop = stop("trailing_stop", &wire.trailing_stop)?;
    let fill = match wire.fill.as_deref() {
        None => Fill::Close,
        Some(f) => Fill::from_name(f).ok_or_else(|| {
            Error::new(format!(
                "`fill` must be \"close\" or \"next_open\", got {f:?}"
            ))
        })?,
    };
    let stops = match wire.stops.as_deref() {
        None => StopsOn::Close,
        Some(f) => StopsOn::from_name(f).ok_or_else(|| {
            Error::new(format!(
                "`stops` must be \"close\" or \"high_low\", got {f:?}"
            ))
        })?,
    };
    let slippage = match &wire.slippage {
        None => 0.0,
        Some(v) => v.as_f64().filter(|s| (0.0..0.5).contains(s)).ok_or_else(|| {
            Error::new(format!(
                "`slippage` must be a fraction in [0, 0.5) (0.001 is 0.1% of each fill), got {v}"
            ))
        })?,
    };
    let (warmup, warmup_auto) = match &wire.warmup {
        None => (0, false),
        Some(serde_json::Value::String(a)) if a == "auto" => (0, true),
        Some(w) => (
            w.as_u64().ok_or_else(|| {
                Error::new(format!(
                    "`warmup` must be an integer >= 0 or \"auto\", got {w}"
                ))
            })?,
            false,
        ),
    };
    let ignore_time = match &wire.ignore_time {
        None => false,
        Some(serde_json::Value::Bool(b)) => *b,
        Some(v) => {
            return Err(Error::new(format!(
                "`ignore_time` must be true or false (true sweeps bars out of time order in row \
                 order, the time read as absent), got {v}"
            )));
        }
    };
    Ok(Execution {
        side,
        stop_loss,
        take_profit,
        trailing_stop,
        fill,
        stops,
        slippage,
        warmup,
        warmup_auto,
        periods_per_year: None,
        periods_per_year_auto: false,
        blocks: None,
        ignore_time,
    })
}

/// A JSON value that must be a number valid for parameter `k` of `strategy`: a JSON integer
/// where it is an integer (no fraction, no exponent), any number where it is a number.
fn param_value(
    strategy: &Strategy,
    k: usize,
    v: &serde_json::Value,
    what: &dyn Fn() -> String,
) -> Result<f64> {
    let (name, kind) = strategy.params()[k];
    let n = match v {
        serde_json::Value::Number(n) => n,
        other => {
            return Err(Error::new(format!(
                "{} ({name}) must be a number, got {other}",
                what()
            )));
        }
    };
    let x = match kind {
        ParamKind::Int => n
            .as_u64()
            .map(|u| u as f64)
            .or_else(|| n.as_i64().map(|i| i as f64)),
        ParamKind::Number => n.as_f64(),
    };
    let x = x.ok_or_else(|| {
        // The parameter's own range (a portfolio's counts start at 0).
        let why = n
            .as_f64()
            .and_then(|f| strategy.check_value(k, f).err())
            .unwrap_or_else(|| {
                format!(
                    "must be an integer in 1..={}, got {n}",
                    strategy.max_window()
                )
            });
        Error::new(format!("{} ({name}) {why}", what()))
    })?;
    strategy
        .check_value(k, x)
        .map_err(|e| Error::new(format!("{} ({name}) {e}", what())))?;
    Ok(x)
}

/// An explicit tuple of a v1.2 strategy.
fn strategy_tuple(strategy: &Strategy, i: usize, t: &[serde_json::Value]) -> Result<Vec<f64>> {
    let names: Vec<&str> = strategy.params().iter().map(|p| p.0).collect();
    if t.len() != names.len() {
        let msg = format!(
            "params[{i}] has {} values; each {strategy} tuple is [{}]",
            t.len(),
            names.join(", ")
        );
        // A tuple too short leaves its next parameter without a value.
        return Err(match names.get(t.len()) {
            Some(name) => Error::unvalued(msg, name),
            None => Error::new(msg),
        });
    }
    let values = t
        .iter()
        .enumerate()
        .map(|(k, v)| param_value(strategy, k, v, &|| format!("params[{i}][{k}]")))
        .collect::<Result<Vec<_>>>()?;
    strategy
        .check_combo(&values)
        .map_err(|(p, e)| Error::new(format!("params[{i}] ({p}) {e}")))?;
    Ok(values)
}

/// `"grid"`: one non-empty list per parameter name.
fn product(strategy: &Strategy, grid: &serde_json::Map<String, serde_json::Value>) -> Result<Grid> {
    let params = strategy.params();
    if let Some(unknown) = grid
        .keys()
        .find(|k| !params.iter().any(|p| p.0 == k.as_str()))
    {
        return Err(Error::new(format!(
            "`grid` has unknown parameter {unknown:?}; {strategy} takes {}",
            params.iter().map(|p| p.0).collect::<Vec<_>>().join(", ")
        )));
    }
    let lists = params
        .iter()
        .enumerate()
        .map(|(k, (name, _))| {
            let list = grid.get(*name).ok_or_else(|| {
                Error::unvalued(format!("`grid` needs a list for `{name}`"), name)
            })?;
            let items = list
                .as_array()
                .filter(|a| !a.is_empty())
                .ok_or_else(|| Error::new(format!("`grid.{name}` must be a non-empty list")))?;
            items
                .iter()
                .enumerate()
                .map(|(j, v)| param_value(strategy, k, v, &|| format!("grid.{name}[{j}]")))
                .collect::<Result<Vec<f64>>>()
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Grid::Product(lists))
}

/// `"sample"`: `{"n", "seed", "ranges": {name: [lo, hi]}}`.
fn sample(strategy: &Strategy, v: &serde_json::Value) -> Result<Grid> {
    let bad = |what: &str| Error::new(format!("`sample` {what}"));
    let obj = v
        .as_object()
        .ok_or_else(|| bad("must be an object {\"n\", \"seed\", \"ranges\"}"))?;
    if let Some(k) = obj
        .keys()
        .find(|k| !["n", "seed", "ranges"].contains(&k.as_str()))
    {
        return Err(bad(&format!("has unknown field {k:?}")));
    }
    let n = obj
        .get("n")
        .and_then(serde_json::Value::as_u64)
        .filter(|&n| n >= 1)
        .ok_or_else(|| bad("needs `n`, an integer >= 1"))?;
    let seed = obj
        .get("seed")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| bad("needs `seed`, an integer >= 0"))?;
    let ranges = obj
        .get("ranges")
        .and_then(serde_json::Value::as_object)
        .ok_or_else(|| bad("needs `ranges`, an object of [lo, hi] per parameter"))?;
    let params = strategy.params();
    if let Some(unknown) = ranges
        .keys()
        .find(|k| !params.iter().any(|p| p.0 == k.as_str()))
    {
        return Err(bad(&format!(
            "has a range for unknown parameter {unknown:?}; {strategy} takes {}",
            params.iter().map(|p| p.0).collect::<Vec<_>>().join(", ")
        )));
    }
    let ranges = params
        .iter()
        .enumerate()
        .map(|(k, (name, _))| {
            let pair = ranges
                .get(*name)
                .and_then(serde_json::Value::as_array)
                .filter(|a| a.len() == 2)
                .ok_or_else(|| {
                    Error::unvalued(
                        format!("`sample` needs a range [lo, hi] for `{name}`"),
                        name,
                    )
                })?;
            let what = |end: &'static str| move || format!("sample.ranges.{name} {end}");
            let lo = param_value(strategy, k, &pair[0], &what("lo"))?;
            let hi = param_value(strategy, k, &pair[1], &what("hi"))?;
            if lo > hi {
                return Err(bad(&format!("range of `{name}` has lo {lo} > hi {hi}")));
            }
            Ok((lo, hi))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Grid::Sample(Sample { n, seed, ranges }))
}

/// A JSON number that must be an integer in `1..=MAX_WINDOW`.
fn window(n: &Number, what: impl Fn() -> String) -> Result<u32> {
    match n.as_u64() {
        Some(v) if (1..=u64::from(MAX_WINDOW)).contains(&v) => Ok(v as u32),
        _ => Err(Error::new(format!(
            "{} must be an integer in 1..={MAX_WINDOW}, got {n}",
            what()
        ))),
    }
}

/// Checks the runs of a request on a keyed dataset (`series` x `combos`) against `max`
/// (`--max-combos` counts series x combos).
///
/// # Errors
/// [`Error`] naming the count and the limit.
pub fn check_runs(series: usize, combos: usize, max: usize) -> Result<()> {
    let total = series.saturating_mul(combos);
    if total > max {
        return Err(Error::new(format!(
            "{series} series x {combos} combos = {total} runs requested; this server allows at most {max} per call (--max-combos)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(body: &str) -> String {
        SweepRequest::decode(body.as_bytes())
            .and_then(|r| r.check_combos(10).map(|()| r))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn lengths_params_and_options() {
        let r = SweepRequest::decode(br#"{"dataset": "paper", "lengths": [6, 8]}"#).unwrap();
        assert_eq!(r, SweepRequest::lengths("paper", [6, 8]));
        assert_eq!(r.fee(), DEFAULT_FEE);
        let r = SweepRequest::decode(
            br#"{"dataset": "p", "params": [[1,2,3,4,5,6]], "fee": 0, "series": ["A", "B"], "rows": [10, 20], "v": 1}"#,
        )
        .unwrap();
        assert_eq!(r.grid, Grid::Params(vec![[1, 2, 3, 4, 5, 6]]));
        assert_eq!(r.fee, Some(0.0));
        assert_eq!(
            r.series.as_deref(),
            Some(&["A".to_owned(), "B".to_owned()][..])
        );
        assert_eq!(r.rows, Some(RowRange { start: 10, end: 20 }));
        let r = SweepRequest::decode(br#"{"dataset": "p", "lengths": [2147483647]}"#).unwrap();
        assert_eq!(r.grid, Grid::Lengths(vec![MAX_WINDOW]));
    }

    #[test]
    fn encode_decode_round_trip() {
        let cases = [
            SweepRequest::lengths("p", [6, 8, 10]).with_fee(0.001),
            SweepRequest::params("x.y", [[3, 6, 2, 1, 2, 3]])
                .with_series(["AAPL", "MSFT"])
                .with_rows(RowRange::new(0, 100_000).unwrap()),
        ];
        for r in cases {
            assert_eq!(SweepRequest::decode(&r.encode()).unwrap(), r);
        }
        assert_eq!(
            String::from_utf8(SweepRequest::lengths("p", [6]).encode()).unwrap(),
            r#"{"dataset":"p","lengths":[6]}"#
        );
    }

    #[test]
    fn refusals() {
        assert!(
            SweepRequest::decode(b"\xff")
                .unwrap_err()
                .to_string()
                .contains("UTF-8")
        );
        assert!(err("{").contains("not valid JSON"));
        assert!(err("[1]").contains("JSON object"));
        assert!(err(r#"{"dataset": "p"}"#).contains("exactly one"));
        assert!(err(r#"{"dataset": "p", "lengths": [6], "params": []}"#).contains("not both"));
        assert!(err(r#"{"dataset": 5, "lengths": [6]}"#).contains("bad sweep body"));
        assert!(err(r#"{"lengths": [6]}"#).contains("needs `dataset`"));
        assert!(err(r#"{"dataset": "p", "lengths": [0]}"#).contains("lengths[0]"));
        assert!(err(r#"{"dataset": "p", "lengths": [6.5]}"#).contains("lengths[0]"));
        assert!(err(r#"{"dataset": "p", "lengths": [2147483648]}"#).contains("1..=2147483647"));
        assert!(err(r#"{"dataset": "p", "lengths": ["6"]}"#).contains("bad sweep body"));
        assert!(err(r#"{"dataset": "p", "params": [[1,2,3]]}"#).contains("has 3 values"));
        assert!(
            err(r#"{"dataset": "p", "params": [[1,2,3,4,5,-6]]}"#).contains("params[0][5] (p)")
        );
        assert!(err(r#"{"dataset": "p", "lengths": [6], "fee": -0.1}"#).contains("fee"));
        assert!(
            err(r#"{"dataset": "p", "lengths": [6,6,6,6,6,6,6,6,6,6,6]}"#).contains("at most 10")
        );
        assert!(err(r#"{"dataset": "p", "lengths": [6], "fees": 1}"#).contains("unknown field"));
        assert!(err(r#"{"dataset": "a b", "lengths": [6]}"#).contains("character"));
        assert!(err(r#"{"dataset": "p", "lengths": [6], "op": "sweep"}"#).contains("`op`"));
        assert!(err(r#"{"dataset": "p", "lengths": [6], "v": 2}"#).contains("version"));
        assert!(err(r#"{"dataset": "p", "lengths": [6], "key": "s"}"#).contains("`key`"));
        assert!(err(r#"{"dataset": "p", "lengths": [6], "series": []}"#).contains("at least one"));
        assert!(err(r#"{"dataset": "p", "lengths": [6], "series": ["A", "A"]}"#).contains("twice"));
        assert!(err(r#"{"dataset": "p", "lengths": [6], "series": [1]}"#).contains("bad sweep"));
        for rows in [
            "[5, 5]",
            "[6, 5]",
            "[-1, 5]",
            "[1]",
            "[1, 2, 3]",
            "[0.5, 2]",
            "\"0:5\"",
        ] {
            let e = err(&format!(
                r#"{{"dataset": "p", "lengths": [6], "rows": {rows}}}"#
            ));
            assert!(e.contains("rows") || e.contains("bad sweep"), "{rows}: {e}");
        }
    }

    #[test]
    fn constrained_products_count_the_combos_they_keep_in_either_direction() {
        let lists = vec![vec![1.0, 2.0, 3.0], vec![10.0, 20.0], vec![7.0, 8.0]];
        let mut seen = Vec::new();
        walk(&lists, 3..9, false, |v| {
            seen.push(v.to_vec());
            true
        });
        let mut back = Vec::new();
        walk(&lists, 3..9, true, |v| {
            back.push(v.to_vec());
            true
        });
        back.reverse();
        assert_eq!(seen, back);
        let product = Grid::Product(lists.clone());
        let want: Vec<Vec<f64>> = (3..9)
            .map(|i| {
                product
                    .values(&Strategy::Builtin(Builtin::HmaSar), i)
                    .unwrap()
                    .unwrap()
            })
            .collect();
        assert_eq!(seen, want);
        // fast < slow keeps 3 of 2..=4 x 2..=4: not read within a cap of 9 (all 9 count),
        // read past it, counting until past the cap.
        let request = SweepRequest::decode(
            br#"{"dataset": "p", "strategy": "sma_cross", "grid": {"fast": [2, 3, 4], "slow": [2, 3, 4]},
                 "constraint": "fast < slow"}"#,
        )
        .unwrap();
        let runs = |cap| {
            request
                .grid
                .runs(&request.strategy, 0..9, cap, 100)
                .unwrap()
        };
        assert_eq!(
            (runs(9), runs(8), runs(2), runs(1), runs(0)),
            (9, 3, 3, 2, 1)
        );
        assert!(request.check_limits(3, 100).is_ok());
        assert!(request.check_limits(2, 100).is_err());
        // More positions than the server reads: refused, nothing read.
        let e = request
            .grid
            .runs(&request.strategy, 0..9, 1, 0)
            .unwrap_err();
        assert!(e.to_string().contains("9 positions"), "{e}");
    }

    #[test]
    fn warmup_auto_is_the_largest_lookback_of_the_call() {
        let decode = |body: &str| {
            SweepRequest::decode(body.as_bytes())
                .unwrap()
                .execution
                .warmup
        };
        // cross_above(sma(fast), sma(slow)): max(fast - 1, slow - 1) + 1.
        let grid = r#""strategy": "sma_cross", "grid": {"fast": [5, 10], "slow": [20, 50]}"#;
        assert_eq!(
            decode(&format!(r#"{{"dataset": "p", {grid}, "warmup": "auto"}}"#)),
            50
        );
        // With a constraint, only the combos it keeps: slow 50 only with fast > 20, none.
        let kept = r#""strategy": "sma_cross", "grid": {"fast": [5, 10, 60], "slow": [20, 50]},
                      "constraint": "fast < slow and (slow < 30 or fast > 20)""#;
        assert_eq!(
            decode(&format!(r#"{{"dataset": "p", {kept}, "warmup": "auto"}}"#)),
            20
        );
        let tuples =
            r#""strategy": {"long": "rsi(sma(close, n), 14) > 50"}, "params": [[10], [3]]"#;
        assert_eq!(
            decode(&format!(
                r#"{{"dataset": "p", {tuples}, "warmup": "auto"}}"#
            )),
            9 + 14
        );
        let r =
            SweepRequest::decode(br#"{"dataset": "p", "lengths": [6], "warmup": "auto"}"#).unwrap();
        // hma(3, 6, 2) vs hma3(1, 2, 3): max(5 + 1, 2 + 2) + 1.
        assert_eq!(r.execution.warmup, 7);
        assert!(!r.execution.warmup_auto);
        assert!(
            SweepRequest::decode(br#"{"dataset": "p", "lengths": [6], "warmup": "some"}"#)
                .unwrap_err()
                .to_string()
                .contains("or \"auto\"")
        );
    }

    #[test]
    fn strategies_grids_samples_and_execution() {
        let r = SweepRequest::decode(
            br#"{"dataset": "p", "strategy": "sma_cross", "grid": {"slow": [20, 30, 40], "fast": [5, 10]},
                "side": "long", "stop_loss": 0.02, "take_profit": 0.05, "warmup": 200, "rows": [1000, 5000]}"#,
        )
        .unwrap();
        assert_eq!(r.strategy, Strategy::Builtin(Builtin::SmaCross));
        assert_eq!(r.len(), 6);
        // The first parameter outermost.
        let combos: Vec<Vec<f64>> = (0..6)
            .map(|i| r.grid.values(&r.strategy, i).unwrap().unwrap())
            .collect();
        assert_eq!(combos[0], [5.0, 20.0]);
        assert_eq!(combos[1], [5.0, 30.0]);
        assert_eq!(combos[3], [10.0, 20.0]);
        assert_eq!(
            r.execution,
            Execution {
                side: Side::Long,
                stop_loss: Some(0.02),
                take_profit: Some(0.05),
                warmup: 200,
                ..Execution::default()
            }
        );
        assert_eq!(SweepRequest::decode(&r.encode()).unwrap(), r);
        // Explicit tuples: integers where int, any number where number.
        let r = SweepRequest::decode(
            br#"{"dataset": "p", "strategy": "rsi_revert", "params": [[14, 30, 70.5], [2, 0, 100]]}"#,
        )
        .unwrap();
        assert_eq!(
            r.grid,
            Grid::Tuples(vec![vec![14.0, 30.0, 70.5], vec![2.0, 0.0, 100.0]])
        );
        assert_eq!(SweepRequest::decode(&r.encode()).unwrap(), r);
        // A sample, reproducible, its chunks the same combos as the whole.
        let body = br#"{"dataset": "p", "strategy": "rsi_revert", "sample": {"n": 50, "seed": 3, "ranges": {"n": [2, 30], "lower": [10, 40], "upper": [35, 90]}}}"#;
        let r = SweepRequest::decode(body).unwrap();
        assert_eq!(r.len(), 50);
        assert_eq!(SweepRequest::decode(&r.encode()).unwrap(), r);
        let all: Vec<Vec<f64>> = (0..50)
            .map(|i| r.grid.values(&r.strategy, i).unwrap().unwrap())
            .collect();
        let chunked: Vec<Vec<f64>> = r
            .chunks(7)
            .unwrap()
            .iter()
            .flat_map(|c| match &c.grid {
                Grid::Tuples(t) => t.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(all, chunked);
        assert!(all.iter().all(|v| v[1] < v[2]));
        // hma_sar takes grids too.
        let r = SweepRequest::decode(
            br#"{"dataset": "p", "grid": {"half": [3], "full": [6, 8], "sqrt": [2], "p3": [1], "p2": [2], "p": [3]}}"#,
        )
        .unwrap();
        assert_eq!(r.strategy, Strategy::Builtin(Builtin::HmaSar));
        assert_eq!(
            r.grid.values(&r.strategy, 1).unwrap().unwrap(),
            [3.0, 8.0, 2.0, 1.0, 2.0, 3.0]
        );
        // A v1 body is encoded as it was: no new field appears.
        assert_eq!(
            String::from_utf8(SweepRequest::lengths("p", [6]).encode()).unwrap(),
            r#"{"dataset":"p","lengths":[6]}"#
        );
        // The product's size is counted, not expanded.
        let big = format!(
            r#"{{"dataset": "p", "strategy": "sma_cross", "grid": {{"fast": {a}, "slow": {a}}}}}"#,
            a = serde_json::to_string(&(1..=5000).collect::<Vec<u32>>()).unwrap()
        );
        let e = err(&big);
        assert!(
            e.contains("25000000 combos") && e.contains("--max-combos"),
            "{e}"
        );
    }

    #[test]
    fn strategy_refusals_name_the_field() {
        for (body, want) in [
            (
                r#"{"dataset": "p", "strategy": "macd", "params": [[1, 2]]}"#,
                "unknown strategy \"macd\"; known: hma_sar",
            ),
            (
                r#"{"dataset": "p", "strategy": "sma_cross", "lengths": [6]}"#,
                "`lengths` derives hma_sar",
            ),
            (
                r#"{"dataset": "p", "strategy": "sma_cross", "params": [[5]]}"#,
                "params[0] has 1 values; each sma_cross tuple is [fast, slow]",
            ),
            (
                r#"{"dataset": "p", "strategy": "sma_cross", "params": [[5, 0]]}"#,
                "params[0][1] (slow) must be an integer",
            ),
            (
                r#"{"dataset": "p", "strategy": "sma_cross", "params": [[5, 2.5]]}"#,
                "params[0][1] (slow)",
            ),
            (
                r#"{"dataset": "p", "strategy": "sma_cross", "params": [[5, 1e2]]}"#,
                "params[0][1] (slow)",
            ),
            (
                r#"{"dataset": "p", "strategy": "donchian", "params": [["5"]]}"#,
                "params[0][0] (n) must be a number, got \"5\"",
            ),
            (
                r#"{"dataset": "p", "strategy": "rsi_revert", "params": [[14, 70, 30]]}"#,
                "params[0] (lower) must be below upper",
            ),
            (
                r#"{"dataset": "p", "strategy": "rsi_revert", "params": [[14, 30, 101]]}"#,
                "params[0][2] (upper) must be a number in 0..=100",
            ),
            (
                r#"{"dataset": "p", "strategy": "sma_cross", "grid": {"fast": [5]}}"#,
                "`grid` needs a list for `slow`",
            ),
            (
                r#"{"dataset": "p", "strategy": "sma_cross", "grid": {"fast": [5], "slow": []}}"#,
                "`grid.slow` must be a non-empty list",
            ),
            (
                r#"{"dataset": "p", "strategy": "sma_cross", "grid": {"fast": [5], "slow": [9], "mid": [1]}}"#,
                "unknown parameter \"mid\"",
            ),
            (
                r#"{"dataset": "p", "strategy": "sma_cross", "grid": {"fast": [5], "slow": [0]}}"#,
                "grid.slow[0] (slow)",
            ),
            (
                r#"{"dataset": "p", "strategy": "sma_cross", "params": [[5, 9]], "grid": {"fast": [5], "slow": [9]}}"#,
                "exactly one of `params`, `grid` and `sample`, not several",
            ),
            (
                r#"{"dataset": "p", "strategy": "donchian", "sample": {"n": 5, "seed": 1}}"#,
                "needs `ranges`",
            ),
            (
                r#"{"dataset": "p", "strategy": "donchian", "sample": {"n": 0, "seed": 1, "ranges": {"n": [1, 5]}}}"#,
                "needs `n`, an integer >= 1",
            ),
            (
                r#"{"dataset": "p", "strategy": "donchian", "sample": {"n": 5, "seed": -1, "ranges": {"n": [1, 5]}}}"#,
                "needs `seed`",
            ),
            (
                r#"{"dataset": "p", "strategy": "donchian", "sample": {"n": 5, "seed": 1, "ranges": {"n": [9, 5]}}}"#,
                "lo 9 > hi 5",
            ),
            (
                r#"{"dataset": "p", "strategy": "donchian", "sample": {"n": 5, "seed": 1, "ranges": {}}}"#,
                "needs a range [lo, hi] for `n`",
            ),
            (
                r#"{"dataset": "p", "strategy": "donchian", "sample": {"n": 5, "seed": 1, "ranges": {"n": [0, 5]}}}"#,
                "sample.ranges.n lo (n)",
            ),
            (
                r#"{"dataset": "p", "strategy": "donchian", "params": [[5]], "side": "up"}"#,
                "`side` must be",
            ),
            (
                r#"{"dataset": "p", "strategy": "donchian", "params": [[5]], "stop_loss": 0}"#,
                "`stop_loss` must be a finite fraction > 0",
            ),
            (
                r#"{"dataset": "p", "strategy": "donchian", "params": [[5]], "take_profit": -0.1}"#,
                "`take_profit`",
            ),
            (
                r#"{"dataset": "p", "strategy": "donchian", "params": [[5]], "warmup": -3}"#,
                "`warmup` must be an integer >= 0",
            ),
            (
                r#"{"dataset": "p", "strategy": "donchian", "params": [[5]], "warmup": 1.5}"#,
                "`warmup`",
            ),
            (
                r#"{"dataset": "p", "strategy": "donchian", "params": [[5]], "blocks": 1}"#,
                "`blocks` must be an integer from 2 to 64, got 1",
            ),
            (
                r#"{"dataset": "p", "strategy": "donchian", "params": [[5]], "blocks": 65}"#,
                "`blocks` must be an integer from 2 to 64",
            ),
            (
                r#"{"dataset": "p", "strategy": "donchian", "params": [[5]], "blocks": 4.5}"#,
                "`blocks` must be an integer",
            ),
            (
                r#"{"dataset": "p", "strategy": "donchian", "params": [[5]], "top": 0}"#,
                "`top` must be an integer >= 1",
            ),
        ] {
            let e = err(body);
            assert!(e.contains(want), "{body}: {e}");
        }
    }

    #[test]
    fn series_times_combos_limit() {
        assert!(check_runs(3, 3, 9).is_ok());
        let e = check_runs(3, 4, 9).unwrap_err().to_string();
        assert!(e.contains("3 series x 4 combos = 12"), "{e}");
    }

    #[test]
    fn chunks_keep_options() {
        let r = SweepRequest::lengths("p", [6, 8, 10])
            .with_fee(0.001)
            .with_rows(RowRange::new(1, 9).unwrap());
        let parts = r.chunks(2).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[1].grid, Grid::Lengths(vec![10]));
        assert_eq!((parts[1].fee, parts[1].rows), (r.fee, r.rows));
        assert_eq!(r.chunks(5).unwrap(), vec![r.clone()]);
    }

    #[test]
    fn exchange_commands() {
        let cmd = |s: &str| ExchangeCommand::decode(s.as_bytes());
        assert_eq!(cmd(r#"{"op": "echo"}"#).unwrap(), ExchangeCommand::Echo);
        let plain = ExchangeCommand::Session {
            keyed: false,
            strategy: Strategy::Builtin(Builtin::HmaSar),
            reply: SessionReply::Sweep,
        };
        let keyed = ExchangeCommand::Session {
            keyed: true,
            strategy: Strategy::Builtin(Builtin::HmaSar),
            reply: SessionReply::Sweep,
        };
        let sma = ExchangeCommand::Session {
            keyed: false,
            strategy: Strategy::Builtin(Builtin::SmaCross),
            reply: SessionReply::Sweep,
        };
        let trades = ExchangeCommand::Session {
            keyed: true,
            strategy: Strategy::Builtin(Builtin::Donchian),
            reply: SessionReply::Trades,
        };
        assert_eq!(
            cmd(r#"{"op": "session", "keyed": true, "strategy": "donchian", "action": "trades"}"#)
                .unwrap(),
            trades
        );
        assert_eq!(ExchangeCommand::decode(&trades.encode()).unwrap(), trades);
        let walk = ExchangeCommand::Session {
            keyed: false,
            strategy: Strategy::Builtin(Builtin::SmaCross),
            reply: SessionReply::WalkForward,
        };
        assert_eq!(
            cmd(r#"{"op": "session", "strategy": "sma_cross", "action": "walk_forward"}"#).unwrap(),
            walk
        );
        assert_eq!(ExchangeCommand::decode(&walk.encode()).unwrap(), walk);
        for bad in [
            r#"{"op": "session", "action": "walk"}"#,
            r#"{"op": "sweep", "action": "trades", "lengths": [6]}"#,
        ] {
            assert!(
                cmd(bad).unwrap_err().to_string().contains("action"),
                "{bad}"
            );
        }
        assert!(
            SweepRequest::decode(br#"{"dataset": "p", "lengths": [6], "action": "trades"}"#)
                .unwrap_err()
                .to_string()
                .contains("`action` belongs to `session` commands")
        );
        assert_eq!(
            cmd(r#"{"op": "session", "strategy": "sma_cross"}"#).unwrap(),
            sma
        );
        assert_eq!(ExchangeCommand::decode(&sma.encode()).unwrap(), sma);
        assert!(cmd(r#"{"op": "session", "strategy": "macd"}"#).is_err());
        assert_eq!(cmd(r#"{"op": "session"}"#).unwrap(), plain);
        assert_eq!(ExchangeCommand::decode(SESSION_COMMAND).unwrap(), plain);
        assert_eq!(cmd(r#"{"op": "session", "keyed": true}"#).unwrap(), keyed);
        assert_eq!(ExchangeCommand::decode(&keyed.encode()).unwrap(), keyed);
        match cmd(
            r#"{"op": "sweep", "lengths": [6], "key": "sym", "series": ["A"], "rows": [0, 9]}"#,
        )
        .unwrap()
        {
            ExchangeCommand::Sweep(s) => {
                assert_eq!(s.grid.len(), 1);
                assert_eq!(s.key.as_deref(), Some("sym"));
                assert_eq!(s.rows, Some(RowRange { start: 0, end: 9 }));
                let again = ExchangeCommand::Sweep(s.clone()).encode();
                assert_eq!(
                    ExchangeCommand::decode(&again).unwrap(),
                    ExchangeCommand::Sweep(s)
                );
            }
            other => panic!("{other:?}"),
        }
        for bad in [
            r#"{"op": "dance"}"#,
            r#"{"lengths": [6]}"#,
            r#"{"op": "echo", "fee": 0}"#,
            r#"{"op": "session", "lengths": [6]}"#,
            r#"{"op": "sweep", "dataset": "p", "lengths": [6]}"#,
            r#"{"op": "sweep", "lengths": [6], "series": ["A"]}"#,
            r#"{"op": "sweep", "lengths": [6], "key": ""}"#,
            r#"{"op": "echo", "keyed": true}"#,
            r#"{"op": "sweep", "lengths": [6], "keyed": true}"#,
        ] {
            assert!(cmd(bad).is_err(), "{bad}");
        }
    }

    /// v1.4's trust rules at the wire: a window that is not a whole number is sent as it is
    /// and refused by name (never cut to an integer); `ignore_time` is a boolean; `inputs` are
    /// columns, never parameters; a parameter without values is named for the server's hint.
    #[test]
    fn values_travel_as_given_and_v14_fields_decode() {
        let strategy = |text: &str| {
            Strategy::decode(Some(&serde_json::from_str(text).unwrap()), None).unwrap()
        };
        let sma = strategy(r#"{"long": "close > sma(close, n)"}"#);
        for (v, said) in [(5.9, "got 5.9"), (-3.0, "got -3"), (0.0, "got 0")] {
            let r = SweepRequest::strategy("p", sma.clone(), Grid::Product(vec![vec![v]]));
            let body = String::from_utf8(r.encode()).unwrap();
            let e = SweepRequest::decode(body.as_bytes()).unwrap_err();
            assert!(
                e.0.contains("(n) must be an integer") && e.0.contains(said),
                "{body}: {e}"
            );
        }
        // A NaN is not a JSON number: it travels as null and is refused, never replaced.
        let k = strategy(r#"{"long": "close > k"}"#);
        for grid in [
            Grid::Product(vec![vec![f64::NAN]]),
            Grid::Tuples(vec![vec![f64::INFINITY]]),
        ] {
            let body = SweepRequest::strategy("p", k.clone(), grid).encode();
            let e = SweepRequest::decode(&body).unwrap_err();
            assert!(e.0.contains("must be a number, got null"), "{e}");
        }
        // Whole numbers go as integers and come back equal.
        let r = SweepRequest::strategy("p", sma, Grid::Product(vec![vec![5.0, 20.0]]));
        assert_eq!(SweepRequest::decode(&r.encode()).unwrap(), r);

        // ignore_time: a boolean, kept through encode.
        let with = |extra: &str| {
            SweepRequest::decode(format!(r#"{{"dataset": "p", "lengths": [6]{extra}}}"#).as_bytes())
        };
        let r = with(r#", "ignore_time": true"#).unwrap();
        assert!(r.execution.ignore_time);
        assert_eq!(SweepRequest::decode(&r.encode()).unwrap(), r);
        assert!(
            !with(r#", "ignore_time": false"#)
                .unwrap()
                .execution
                .ignore_time
        );
        for bad in [
            r#", "ignore_time": 1"#,
            r#", "ignore_time": "yes""#,
            r#", "ignore_time": [true]"#,
        ] {
            let e = with(bad).unwrap_err();
            assert!(
                e.0.contains("`ignore_time` must be true or false"),
                "{bad}: {e}"
            );
        }

        // inputs: columns of the formulas, not parameters; kept through encode.
        let body = r#"{"dataset": "p", "strategy": {"long": "pred > k and close > vwap", "inputs": ["pred", "vwap"]}, "grid": {"k": [0.5]}}"#;
        let r = SweepRequest::decode(body.as_bytes()).unwrap();
        assert_eq!(r.strategy.params(), [("k", ParamKind::Number)]);
        let (program, _) = r.strategy.program();
        assert_eq!(program.inputs_read(), ["pred", "vwap"]);
        assert_eq!(SweepRequest::decode(&r.encode()).unwrap(), r);
        for (inputs, said) in [
            (r#""pred""#, "must be a list of column names"),
            (r#"[1]"#, "must be a list of column names"),
            (r#"["close"]"#, "is a bar column already"),
            (r#"["sma"]"#, "is a function's name"),
            (r#"["pred", "pred"]"#, "is listed twice"),
            (r#"["Pred"]"#, "is not a name a formula can use"),
            (r#"["2x"]"#, "is not a name a formula can use"),
            (r#"["class"]"#, "is not a name a formula can use"),
        ] {
            let body = format!(
                r#"{{"dataset": "p", "strategy": {{"long": "close > 1", "inputs": {inputs}}}, "params": [[]]}}"#
            );
            let e = SweepRequest::decode(body.as_bytes()).unwrap_err();
            assert!(e.0.contains(said), "{inputs}: {e}");
        }
        // An input is a series: not a window, not in a constraint.
        let e = SweepRequest::decode(br#"{"dataset": "p", "strategy": {"long": "close > sma(close, pred)", "inputs": ["pred"]}, "params": [[]]}"#).unwrap_err();
        assert!(e.0.contains("window"), "{e}");

        // A parameter without values is named, for the server's hint.
        let e = SweepRequest::decode(
            br#"{"dataset": "p", "strategy": {"long": "clsoe > 1"}, "grid": {}}"#,
        )
        .unwrap_err();
        assert_eq!(e.unvalued_param(), Some("clsoe"));
        let e = SweepRequest::decode(br#"{"dataset": "p", "strategy": {"long": "close > sma(close, n) + vwap"}, "params": [[5]]}"#).unwrap_err();
        assert_eq!(e.unvalued_param(), Some("vwap"));
        let e = SweepRequest::decode(br#"{"dataset": "p", "strategy": {"long": "close > vwap"}, "sample": {"n": 2, "seed": 1, "ranges": {}}}"#).unwrap_err();
        assert_eq!(e.unvalued_param(), Some("vwap"));
    }
}
