//! The execution loop every strategy shares (strategies.md, "Execution" and "Execution,
//! v1.3"): from a strategy's signals to booked trades, with the side filter, stops (fixed,
//! trailing, on closes or on highs and lows), fills at the signal's close or the next bar's
//! open, slippage and the evaluated range.
//!
//! A strategy hands the loop its signals as *events*: the bars, in increasing order, where its
//! signal is not 0. Between events nothing can happen but a stop or a pending fill, so the loop
//! visits the bars between events only while a position is open and a stop is set. With the
//! v1.2 options (fills and stops on closes, no trail, no slippage) the loop is v1.2's, lazily
//! checking stops over the closes between events; with the defaults (both sides, no stops,
//! the whole range) it is the paper's stop-and-reverse, operation for operation. The other
//! options run the general loop (`Engine::advance`): each bar from the last event to the
//! next one gets its pending fill and its stop check in the spec's order. Where the sweep found
//! every trade's first stop beforehand (`exits`), or there are no stops, the general loop
//! takes shorter steps (`Engine::quick`): one comparison per event for the stops, and each
//! decision filled at once. Either way the trades and their arithmetic are those of
//! [`crate::oracle`]'s bar-by-bar loop, which is written from the spec on its own.
//!
//! Where the trades go is the [`Book`]'s business: the sweep's [`crate::Ledger`] folds them into
//! a [`crate::ComboResult`]; a trade list keeps them.

mod exits;
mod stops;

use exits::Exit;
pub use exits::{EXITS_MIN_COMBOS, exits_bytes};
pub(crate) use exits::{Exits, Fraction, table_bytes};
use stops::Extrema;
pub use stops::extrema_bytes;
use stops::{EXTREMA_BLOCK, Hit, StopBars, TradeStops};

use crate::lines::Bars;
use crate::{Error, Result};

/// What every combo of a sweep shares for its stop checks, built once per series: the first
/// stop of every (bar, side) where the stops are fixed and the combos many ([`Exits`]), else
/// the blocks a trade's walk passes over ([`Extrema`]); nothing with v1.2's options. Either
/// takes at most [`extrema_bytes`].
#[derive(Debug, Default)]
pub(crate) struct SharedStops {
    extrema: Option<Extrema>,
    exits: Option<Exits>,
}

/// Nothing shared: the loop walks every trade bar by bar.
pub(crate) static NO_SHARED_STOPS: SharedStops = SharedStops {
    extrema: None,
    exits: None,
};

impl SharedStops {
    /// What a sweep of `combos` combos over `bars` with `exec` shares (`formula_stops`: a stop
    /// is a formula).
    pub(crate) fn of(
        bars: &Bars<'_>,
        exec: &Execution,
        combos: usize,
        formula_stops: bool,
    ) -> Self {
        match Exits::of(bars, exec, combos, formula_stops) {
            Some(exits) => Self {
                extrema: None,
                exits: Some(exits),
            },
            None => Self {
                extrema: Extrema::of(bars, exec, formula_stops),
                exits: None,
            },
        }
    }
}

/// The option of `values` whose wire name (the same place in `names`) is `name`.
fn named<T: Copy, const N: usize>(names: &[&str; N], values: [T; N], name: &str) -> Option<T> {
    names.iter().position(|&n| n == name).map(|i| values[i])
}

/// Which positions a run may hold (body field `side`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Side {
    /// Long and short: stop-and-reverse.
    #[default]
    Both,
    /// Long only: a short signal closes a long position and opens nothing.
    Long,
    /// Short only: a long signal closes a short position and opens nothing.
    Short,
}

impl Side {
    /// The wire names, in the order of the variants.
    pub const NAMES: [&str; 3] = ["both", "long", "short"];

    /// The side of a wire name.
    pub fn from_name(name: &str) -> Option<Self> {
        named(&Self::NAMES, [Self::Both, Self::Long, Self::Short], name)
    }

    /// The wire name.
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// Where a decision on a bar's close is filled (body field `fill`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Fill {
    /// At that bar's close (v1.2).
    #[default]
    Close,
    /// At the next bar's open; decisions on the last bar are dropped.
    NextOpen,
}

impl Fill {
    /// The wire names, in the order of the variants.
    pub const NAMES: [&str; 2] = ["close", "next_open"];

    /// The fill of a wire name.
    pub fn from_name(name: &str) -> Option<Self> {
        named(&Self::NAMES, [Self::Close, Self::NextOpen], name)
    }

    /// The wire name.
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// What stops are checked against (body field `stops`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum StopsOn {
    /// Each bar's close, filled there (v1.2).
    #[default]
    Close,
    /// Each bar's high and low, filled at the stop price or at the open when the bar gaps
    /// through it; the stop-loss first when both are inside one bar.
    HighLow,
}

impl StopsOn {
    /// The wire names, in the order of the variants.
    pub const NAMES: [&str; 2] = ["close", "high_low"];

    /// The rule of a wire name.
    pub fn from_name(name: &str) -> Option<Self> {
        named(&Self::NAMES, [Self::Close, Self::HighLow], name)
    }

    /// The wire name.
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// Why a trade was closed (the trades reply's `exit_reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ExitReason {
    /// A signal of the other direction, or the side rule.
    #[default]
    Signal,
    /// An exit formula.
    Exit,
    /// The stop-loss.
    StopLoss,
    /// The trailing stop (when it was strictly the tighter stop).
    TrailingStop,
    /// The take-profit.
    TakeProfit,
    /// The final close of the range.
    End,
}

impl ExitReason {
    /// The wire names, in the order of the variants.
    pub const NAMES: [&str; 6] = [
        "signal",
        "exit",
        "stop_loss",
        "trailing_stop",
        "take_profit",
        "end",
    ];

    /// The wire name.
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// How signals become trades, the same for every combo of a sweep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Execution {
    /// Round-trip fee as a fraction (the paper's 0.0009 by default).
    pub fee: f64,
    /// Which positions may be held.
    pub side: Side,
    /// Close a position that has moved this fraction against its entry.
    pub stop_loss: Option<f64>,
    /// Close a position that has moved this fraction in its favour.
    pub take_profit: Option<f64>,
    /// Close a position that has fallen this fraction from its best price since entry.
    pub trailing_stop: Option<f64>,
    /// Where decisions fill.
    pub fill: Fill,
    /// What stops are checked against.
    pub stops: StopsOn,
    /// A buy fills at `p * (1 + slippage)`, a sell at `p * (1 - slippage)`; in `[0, 0.5)`.
    pub slippage: f64,
    /// The first evaluated bar of the closes a run is given: bars before it are the warm-up
    /// (indicators are computed over them, no signal is read). 0 = the whole series.
    pub start: usize,
}

impl Default for Execution {
    fn default() -> Self {
        Self::new(crate::DEFAULT_FEE)
    }
}

impl Execution {
    /// The paper's execution with `fee`: both sides, no stops, every bar evaluated.
    pub fn new(fee: f64) -> Self {
        Self {
            fee,
            side: Side::Both,
            stop_loss: None,
            take_profit: None,
            trailing_stop: None,
            fill: Fill::Close,
            stops: StopsOn::Close,
            slippage: 0.0,
            start: 0,
        }
    }

    /// Checks the fee, the stops and the slippage.
    ///
    /// # Errors
    /// [`Error::InvalidFee`] for a negative or non-finite fee; [`Error::InvalidOption`] for a
    /// stop that is not finite and > 0, or a slippage outside `[0, 0.5)`.
    pub fn validate(&self) -> Result<()> {
        if !self.fee.is_finite() || self.fee < 0.0 {
            return Err(Error::InvalidFee(self.fee));
        }
        for (name, stop) in [
            ("stop_loss", self.stop_loss),
            ("take_profit", self.take_profit),
            ("trailing_stop", self.trailing_stop),
        ] {
            if let Some(v) = stop
                && !(v.is_finite() && v > 0.0)
            {
                return Err(Error::InvalidOption {
                    name,
                    message: format!("must be a finite fraction > 0, got {v}"),
                });
            }
        }
        if !(self.slippage >= 0.0 && self.slippage < 0.5) {
            return Err(Error::InvalidOption {
                name: "slippage",
                message: format!("must be a number in [0, 0.5), got {}", self.slippage),
            });
        }
        Ok(())
    }

    /// The dataset columns the execution reads besides `close`, in the order open, high, low.
    pub fn columns(&self) -> &'static [&'static str] {
        match (self.fill, self.stops) {
            (_, StopsOn::HighLow) => &["open", "high", "low"],
            (Fill::NextOpen, StopsOn::Close) => &["open"],
            (Fill::Close, StopsOn::Close) => &[],
        }
    }

    /// Checks `bars` has the columns the execution reads.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] naming the option and the missing column.
    pub fn check_bars(&self, bars: &Bars<'_>) -> Result<()> {
        let missing = |name: &'static str, column: &str| Error::InvalidOption {
            name,
            message: format!("needs the dataset's `{column}` column, which it does not have"),
        };
        if self.fill == Fill::NextOpen && bars.open.is_none() {
            return Err(missing("fill", "open"));
        }
        if self.stops == StopsOn::HighLow {
            for (column, present) in [
                ("open", bars.open.is_some()),
                ("high", bars.high.is_some()),
                ("low", bars.low.is_some()),
            ] {
                if !present {
                    return Err(missing("stops", column));
                }
            }
        }
        Ok(())
    }

    /// True for the paper's loop: both sides, no stops, from the first bar, v1.2's fills.
    pub fn is_plain(&self) -> bool {
        self.side == Side::Both && !self.has_stops() && self.start == 0 && self.is_v12()
    }

    /// True for v1.2's fills and stops: at closes, no trail, no slippage.
    pub fn is_v12(&self) -> bool {
        self.fill == Fill::Close
            && self.stops == StopsOn::Close
            && self.trailing_stop.is_none()
            && self.slippage == 0.0
    }

    fn has_stops(&self) -> bool {
        self.stop_loss.is_some() || self.take_profit.is_some() || self.trailing_stop.is_some()
    }

    /// `p` filled as a buy.
    #[inline(always)]
    fn buy(&self, p: f64) -> f64 {
        p * (1.0 + self.slippage)
    }

    /// `p` filled as a sell.
    #[inline(always)]
    fn sell(&self, p: f64) -> f64 {
        p * (1.0 - self.slippage)
    }

    /// `p` filled for entering `pos`: a long's entry is a buy, a short's a sell.
    #[inline(always)]
    fn enter_at(&self, pos: f64, p: f64) -> f64 {
        if pos > 0.0 { self.buy(p) } else { self.sell(p) }
    }

    /// `p` filled for closing `pos`: a long's exit is a sell, a short's a buy.
    #[inline(always)]
    fn exit_at(&self, pos: f64, p: f64) -> f64 {
        if pos > 0.0 { self.sell(p) } else { self.buy(p) }
    }
}

/// Where booked trades go.
pub trait Book {
    /// A closed trade: `pos` is +1 (long) or -1 (short), entered at `entry` on bar
    /// `entry_row`, closed at `exit` on bar `exit_row` for `reason`.
    fn book(
        &mut self,
        pos: f64,
        entry: f64,
        entry_row: usize,
        exit: f64,
        exit_row: usize,
        reason: ExitReason,
    );
}

/// Most block boundaries a range between two events may cross for the general loop to test it
/// at once ([`Engine::scan`]).
const QUICK_BLOCKS: usize = 8;

/// The actions decided on a bar's close that fill at the next bar's open (`fill: next_open`):
/// a close of the held position, then an entry, in that order.
#[derive(Debug, Clone, Copy, Default)]
struct Pending {
    close: Option<ExitReason>,
    /// The side, and the trade's stop fractions as the deciding bar set them.
    enter: Option<(f64, Fractions)>,
}

/// A trade's stop-loss, take-profit and trailing-stop fractions (`None`: no such stop).
type Fractions = [Option<f64>; 3];

/// The loop's state: the open position and how far stops have been checked.
///
/// `PLAIN` is the paper's loop (both sides, no stops, every bar; [`Execution::is_plain`]),
/// compiled without the option checks: the paper sweep's hot path stays as it was.
pub(crate) struct Engine<'a, B: Book, const PLAIN: bool> {
    close: &'a [f64],
    bars: Bars<'a>,
    exec: Execution,
    stops: bool,
    /// The v1.3 options are on: the general loop runs ([`Engine::advance`]).
    general: bool,
    /// The general loop's options with every trade's first stop in the sweep's table, or no
    /// stops (and no stop formulas): [`Engine::quick`] runs instead ([`Engine::can_be_quick`]).
    quick: bool,
    /// The table was built for this run's stop formulas ([`Engine::with_table`]).
    table_of_formulas: bool,
    book: B,
    pos: f64,
    entry: f64,
    entry_row: usize,
    /// Bars below this have had their stop check (or need none).
    checked: usize,
    /// The open position's stops.
    trade: TradeStops,
    /// Which stops are formulas (`stop_loss`, `take_profit`, `trailing_stop`), and their
    /// values at the bar of the current event ([`Engine::stop_values`]).
    formulas: [bool; 3],
    values: [f64; 3],
    /// The general loop: the best price since entry (for the trail), the position the
    /// decisions of the current bar leave (the held one plus `pending`), and the next bar to
    /// advance through.
    peak: f64,
    /// The first bar whose price is not in `peak` yet: ranges that pass the test of
    /// [`Engine::scan`] move only `bound`, a bound of the best price (at least as far from the
    /// entry), and the exact best price is caught up only where a stop may hit.
    peak_at: usize,
    bound: f64,
    decided: f64,
    pending: Pending,
    next: usize,
    /// The series' blocks, when the sweep computed them ([`Extrema`]).
    extrema: Option<&'a Extrema>,
    /// Every entry's first stop, when the sweep computed them ([`Exits`]), and the open
    /// trade's ([`Exit::WALK`]: its bars are walked).
    exits: Option<&'a Exits>,
    exit: Exit,
    /// The prices stops are checked against.
    prices: StopBars<'a>,
    /// Where a decision on bar `i` fills: `fills[i + fill_lag]` (the closes and 0, or the
    /// opens and 1), read without matching on the fill for every trade.
    fills: &'a [f64],
    fill_lag: usize,
}

impl<'a, B: Book, const PLAIN: bool> Engine<'a, B, PLAIN> {
    /// An engine over `bars` (which hold what [`Execution::check_bars`] asks).
    pub(crate) fn new(bars: &Bars<'a>, exec: &Execution, book: B) -> Self {
        debug_assert!(!PLAIN || exec.is_plain());
        debug_assert!(exec.check_bars(bars).is_ok());
        let mut engine = Self {
            close: bars.close,
            bars: *bars,
            exec: *exec,
            stops: exec.has_stops(),
            general: !exec.is_v12(),
            quick: false,
            table_of_formulas: false,
            book,
            pos: 0.0,
            entry: 0.0,
            entry_row: 0,
            checked: exec.start,
            trade: TradeStops::new(true, f64::NAN, [None; 3]),
            formulas: [false; 3],
            values: [f64::NAN; 3],
            peak: 0.0,
            peak_at: 0,
            bound: 0.0,
            decided: 0.0,
            pending: Pending::default(),
            next: exec.start,
            extrema: None,
            exits: None,
            exit: Exit::WALK,
            prices: StopBars::of(bars, exec),
            fills: match exec.fill {
                Fill::Close => bars.close,
                Fill::NextOpen => bars.open.unwrap_or_default(),
            },
            fill_lag: usize::from(exec.fill == Fill::NextOpen),
        };
        engine.quick = engine.can_be_quick();
        engine
    }

    /// This engine reading what its sweep shares for the stops: the first stops of its
    /// entries, or the blocks of bars a walk passes over where no stop can hit.
    pub(crate) fn with_shared(mut self, shared: &'a SharedStops) -> Self {
        self.extrema = shared.extrema.as_ref();
        self.exits = shared.exits.as_ref();
        self.quick = self.can_be_quick();
        self
    }

    /// This engine with the stops whose fractions are formulas (docs/language.md's execution
    /// formulas): a trade's fraction is the formula's value at the bar whose close decided
    /// its entry, given by [`Engine::stop_values`] before each event.
    pub(crate) fn with_formula_stops(mut self, formulas: [bool; 3]) -> Self {
        if formulas.contains(&true) {
            self.formulas = formulas;
            self.stops = true;
            self.general = true;
        }
        self.quick = self.can_be_quick();
        self
    }

    /// This engine reading its trades' first stops from `table`, built for its stop formulas'
    /// values ([`Exits::with_fractions`]), if there is one.
    pub(crate) fn with_table(mut self, table: Option<&'a Exits>) -> Self {
        if let Some(x) = table {
            self.exits = Some(x);
            self.table_of_formulas = true;
            self.quick = self.can_be_quick();
        }
        self
    }

    /// Whether the table holds this run's trades: its fractions are the body's numbers, or
    /// it was built for the run's formulas.
    fn table_holds(&self) -> bool {
        self.table_of_formulas || !self.formulas.contains(&true)
    }

    /// Whether [`Engine::quick`]'s shorter steps serve: the general loop's options, and no
    /// stops or every trade's first stop in a table that holds them.
    fn can_be_quick(&self) -> bool {
        let table = self.exits.is_some_and(Exits::complete) && self.table_holds();
        !PLAIN && self.general && (!self.stops || table)
    }

    /// Whether the run reads its stop formulas' values at each event ([`Engine::stop_values`]):
    /// not when a table of first stops holds every trade of them.
    pub(crate) fn reads_stop_values(&self) -> bool {
        self.formulas.contains(&true) && !self.quick
    }

    /// The stop formulas' values at the bar of the next event (NaN, or a value <= 0: no such
    /// stop for a trade that bar decides).
    #[inline(always)]
    pub(crate) fn stop_values(&mut self, values: [f64; 3]) {
        self.values = values;
    }

    /// The stop fractions of a trade decided now: the formulas' values, else the numbers.
    fn fractions(&self) -> Fractions {
        let fixed = [
            self.exec.stop_loss,
            self.exec.take_profit,
            self.exec.trailing_stop,
        ];
        std::array::from_fn(|k| {
            if self.formulas[k] {
                let v = self.values[k];
                (v > 0.0).then_some(v)
            } else {
                fixed[k]
            }
        })
    }

    /// The signal `s` (+1 or -1) at bar `i`: events come in increasing bar order. Bars before
    /// the evaluated range are ignored.
    #[inline(always)]
    pub(crate) fn signal(&mut self, i: usize, s: f64) {
        let c = self.close[i];
        if PLAIN {
            if s != self.pos {
                if self.pos != 0.0 {
                    self.book.book(
                        self.pos,
                        self.entry,
                        self.entry_row,
                        c,
                        i,
                        ExitReason::Signal,
                    );
                }
                self.pos = s;
                self.entry = c;
                self.entry_row = i;
            }
            return;
        }
        if i < self.exec.start {
            return;
        }
        if self.quick {
            self.quick(i, s);
            return;
        }
        if self.general {
            self.advance(i);
            self.decide(i, s);
            return;
        }
        if self.stops {
            self.stops_through(i);
        }
        match self.exec.side {
            Side::Long if s < 0.0 => {
                if self.pos > 0.0 {
                    self.close_at(i, ExitReason::Signal);
                }
                return;
            }
            Side::Short if s > 0.0 => {
                if self.pos < 0.0 {
                    self.close_at(i, ExitReason::Signal);
                }
                return;
            }
            _ => {}
        }
        if s != self.pos {
            if self.pos != 0.0 {
                self.book.book(
                    self.pos,
                    self.entry,
                    self.entry_row,
                    c,
                    i,
                    ExitReason::Signal,
                );
            }
            self.open(s, c, i, self.fractions());
        }
    }

    /// The general loop's signal at bar `i` ([`Engine::can_be_quick`]), from what the table
    /// knows: the open trade's first stop, if at or before bar `i`, closes it; then the
    /// decisions of bar `i` fill at once, at its close or at the next bar's open. Filling a
    /// next-open order at the decision is the general loop's order of events: nothing happens
    /// between a decision and the next open (the fill is step 1 of that bar, and its stop
    /// checks start there), and an order on the last bar is dropped. Trades are booked in the
    /// same order with the same numbers, and the position is always the decided one.
    #[inline(always)]
    fn quick(&mut self, i: usize, s: f64) {
        if self.pos != 0.0 {
            self.table_stop(i);
        }
        let pos = self.pos;
        let (close, enter) = match self.exec.side {
            Side::Long if s < 0.0 => (pos > 0.0, false),
            Side::Short if s > 0.0 => (pos < 0.0, false),
            _ => (pos != 0.0 && s != pos, s != pos),
        };
        if !(close || enter) {
            return;
        }
        let Some((k, price)) = self.fill_of(i) else {
            return;
        };
        if close {
            let exit = self.exec.exit_at(pos, price);
            self.book
                .book(pos, self.entry, self.entry_row, exit, k, ExitReason::Signal);
            self.pos = 0.0;
        }
        if enter {
            self.pos = s;
            self.entry = self.exec.enter_at(s, price);
            self.entry_row = k;
            self.exit = match self.exits {
                Some(x) if self.stops => {
                    x.prefetch(s > 0.0, k);
                    Exit::UNREAD
                }
                _ => Exit::NEVER,
            };
        }
    }

    /// [`Engine::quick`]'s exit conditions at bar `i`: after the stops, the position closes at
    /// the decision's fill.
    #[inline(always)]
    fn quick_exit(&mut self, i: usize, long: bool, short: bool) {
        if self.pos != 0.0 {
            self.table_stop(i);
        }
        let pos = self.pos;
        if (long && pos > 0.0) || (short && pos < 0.0) {
            let Some((k, price)) = self.fill_of(i) else {
                return;
            };
            let exit = self.exec.exit_at(pos, price);
            self.book
                .book(pos, self.entry, self.entry_row, exit, k, ExitReason::Exit);
            self.pos = 0.0;
        }
    }

    /// Where a decision on bar `i` fills: the bar and the price before slippage (`None`: a
    /// next-open order on the last bar, dropped).
    #[inline(always)]
    fn fill_of(&self, i: usize) -> Option<(usize, f64)> {
        let k = i + self.fill_lag;
        self.fills.get(k).map(|&price| (k, price))
    }

    /// Books the open trade's first stop from the table if it hits at or before bar `to`
    /// (read from the table on the trade's first check).
    #[inline(always)]
    fn table_stop(&mut self, to: usize) {
        if self.exit.unread()
            && let Some(x) = self.exits
        {
            self.exit = x.get(self.pos > 0.0, self.entry_row);
        }
        if self.exit.by(to) {
            let x = self.exits.expect("a stop's bar comes from the table");
            self.book_stop(x.hit(self.pos > 0.0, self.entry_row));
        }
    }

    /// The open position (+1, -1 or 0) as of the last event, as its decisions leave it. With
    /// stops set it may be stale (stops are checked lazily, at the next event); without them
    /// it is exact.
    #[inline(always)]
    pub(crate) fn position(&self) -> f64 {
        if self.general && !self.quick {
            self.decided
        } else {
            self.pos
        }
    }

    /// Whether stops are checked (then [`Engine::position`] may lag).
    pub(crate) fn checks_stops(&self) -> bool {
        self.stops
    }

    /// The exit conditions at bar `i` (docs/language.md, "From conditions to trades"): after
    /// the stops, before the signal, a long position closes on `long`, a short one on
    /// `short`. Call it before [`Engine::signal`] for the same bar.
    #[inline]
    pub(crate) fn exit(&mut self, i: usize, long: bool, short: bool) {
        if i < self.exec.start {
            return;
        }
        if self.quick {
            self.quick_exit(i, long, short);
            return;
        }
        if self.general {
            self.advance(i);
            if (long && self.decided > 0.0) || (short && self.decided < 0.0) {
                self.decide_close(i, ExitReason::Exit);
            }
            return;
        }
        if self.stops {
            self.stops_through(i);
        }
        if (long && self.pos > 0.0) || (short && self.pos < 0.0) {
            self.close_at(i, ExitReason::Exit);
        }
    }

    /// Opens `pos` at `c` on bar `i` with the trade's stop fractions `fr`: its stop prices,
    /// computed once (the trail's moves with the peak).
    /// The first bar whose stops are checked is `i + 1` for a fill at the close, `i` for one at
    /// the open.
    fn open(&mut self, pos: f64, c: f64, i: usize, fr: Fractions) {
        self.pos = pos;
        self.entry = c;
        self.entry_row = i;
        self.peak = c;
        self.bound = c;
        self.peak_at = if self.exec.fill == Fill::NextOpen {
            i
        } else {
            i + 1
        };
        if self.stops {
            self.trade = TradeStops::new(pos > 0.0, c, fr);
            // The table holds the trades of the sweep's fixed fractions only.
            self.exit = match self.exits {
                Some(x) if self.table_holds() => {
                    x.prefetch(pos > 0.0, i);
                    Exit::UNREAD
                }
                _ => Exit::WALK,
            };
        }
    }

    fn close_at(&mut self, i: usize, reason: ExitReason) {
        self.book.book(
            self.pos,
            self.entry,
            self.entry_row,
            self.close[i],
            i,
            reason,
        );
        self.pos = 0.0;
    }

    /// Checks the stops at every bar up to and including `j` that has not been checked.
    fn stops_through(&mut self, j: usize) {
        let from = self.checked.max(self.entry_row + 1);
        self.checked = j + 1;
        if self.pos == 0.0 || from > j {
            return;
        }
        let t = self.trade;
        let loss = |c: f64| if t.long { c <= t.loss } else { c >= t.loss };
        // The stop-loss is tested before the take-profit at each bar; both on the close (NaN
        // prices, no such stop, never hit).
        let hit = self.close[from..=j]
            .iter()
            .position(|&c| loss(c) || if t.long { c >= t.profit } else { c <= t.profit });
        if let Some(k) = hit {
            let reason = if loss(self.close[from + k]) {
                ExitReason::StopLoss
            } else {
                ExitReason::TakeProfit
            };
            self.close_at(from + k, reason);
        }
    }

    /// The general loop's steps 1 and 2 (strategies.md, "Execution, v1.3") for every bar from
    /// the last one advanced through up to and including `i`: the pending fills at the first
    /// of them, then the stops of each while a position is open.
    fn advance(&mut self, i: usize) {
        let from = self.next;
        if from > i {
            return;
        }
        self.next = i + 1;
        if self.pending.close.is_some() || self.pending.enter.is_some() {
            self.fill_pending(from);
        }
        if self.stops && self.pos != 0.0 {
            self.scan(from, i);
        }
        self.decided = self.pos;
    }

    /// Step 2 over bars `from..=to` while the position is open: the whole range tested at once
    /// where it can be, else [`TradeStops::walk`] from the exact best price.
    fn scan(&mut self, from: usize, to: usize) {
        // The trade's first stop is known (bars before `from` were checked by earlier calls).
        if !self.exit.walks() {
            self.table_stop(to);
            return;
        }
        // Events are often a few bars apart and stops far from the price: one test over the
        // whole range usually settles it, with bounds of its prices (exact across blocks, the
        // rest of the first block's otherwise) and of the best price so far.
        // A long range is left to the blocks of the walk (where the test fails, reading its
        // blocks twice would cost more than it saves).
        let x = self.extrema;
        if let Some(x) = x {
            let blocks = to / EXTREMA_BLOCK - from / EXTREMA_BLOCK;
            if blocks <= QUICK_BLOCKS {
                let (lo, hi) = if blocks == 0 {
                    x.rest_of_block(from)
                } else {
                    x.across(from, to)
                };
                if let Some(bound) = self.trade.quiet_from(self.bound, lo, hi) {
                    self.bound = bound;
                    return;
                }
            }
            // A stop may hit: the exact best price up to `from`.
            if self.trade.trail.is_some() && self.peak_at < from {
                let (lo, hi) = x.exact(self.prices.lows, self.prices.highs, self.peak_at, from - 1);
                self.peak = if self.pos > 0.0 {
                    self.peak.max(hi)
                } else {
                    self.peak.min(lo)
                };
            }
        }
        match self
            .trade
            .walk(&self.prices, x, &self.exec, self.peak, (from, to))
        {
            Ok(peak) => {
                self.peak = peak;
                self.peak_at = to + 1;
                self.bound = peak;
            }
            Err(hit) => self.book_stop(hit),
        }
    }

    /// Books the open position's exit by a stop.
    fn book_stop(&mut self, hit: Hit) {
        self.book.book(
            self.pos,
            self.entry,
            self.entry_row,
            hit.price,
            hit.bar,
            hit.reason,
        );
        self.pos = 0.0;
    }

    /// Step 1 at bar `k`: the actions decided at `k - 1`, at `open[k]`.
    fn fill_pending(&mut self, k: usize) {
        let open = self
            .bars
            .open
            .expect("next_open fills are checked for `open`")[k];
        let Pending { close, enter } = std::mem::take(&mut self.pending);
        if let Some(reason) = close {
            let exit = self.exec.exit_at(self.pos, open);
            self.book
                .book(self.pos, self.entry, self.entry_row, exit, k, reason);
            self.pos = 0.0;
        }
        if let Some((d, fr)) = enter {
            self.open(d, self.exec.enter_at(d, open), k, fr);
        }
    }

    /// Step 3 at bar `i` for a signal `s`: the side rule, then a reversal or an entry.
    fn decide(&mut self, i: usize, s: f64) {
        match self.exec.side {
            Side::Long if s < 0.0 => {
                if self.decided > 0.0 {
                    self.decide_close(i, ExitReason::Signal);
                }
                return;
            }
            Side::Short if s > 0.0 => {
                if self.decided < 0.0 {
                    self.decide_close(i, ExitReason::Signal);
                }
                return;
            }
            _ => {}
        }
        if s != self.decided {
            if self.decided != 0.0 {
                self.decide_close(i, ExitReason::Signal);
            }
            self.decided = s;
            let fr = self.fractions();
            match self.exec.fill {
                Fill::Close => {
                    let c = self.close[i];
                    self.open(s, self.exec.enter_at(s, c), i, fr);
                }
                // An order decided on the last bar has no open to fill at: dropped.
                Fill::NextOpen => {
                    if let Some(x) = self.exits {
                        x.prefetch(s > 0.0, i + 1);
                    }
                    self.pending.enter = Some((s, fr));
                }
            }
        }
    }

    /// A decision at bar `i` to close the position the bar's decisions leave.
    fn decide_close(&mut self, i: usize, reason: ExitReason) {
        self.decided = 0.0;
        match self.exec.fill {
            Fill::Close => {
                let exit = self.exec.exit_at(self.pos, self.close[i]);
                self.book
                    .book(self.pos, self.entry, self.entry_row, exit, i, reason);
                self.pos = 0.0;
            }
            Fill::NextOpen => self.pending.close = Some(reason),
        }
    }

    /// Ends the run: stops through the last bar, then an open position is closed there.
    pub(crate) fn finish(mut self) -> B {
        let n = self.close.len();
        if n > self.exec.start {
            if self.general {
                // Stops through the last bar (the quick steps have no pending fills to make).
                if !self.quick {
                    self.advance(n - 1);
                } else if self.pos != 0.0 {
                    self.table_stop(n - 1);
                }
                if self.pos != 0.0 {
                    let exit = self.exec.exit_at(self.pos, self.close[n - 1]);
                    self.book.book(
                        self.pos,
                        self.entry,
                        self.entry_row,
                        exit,
                        n - 1,
                        ExitReason::End,
                    );
                }
                return self.book;
            }
            if self.stops {
                self.stops_through(n - 1);
            }
            if self.pos != 0.0 {
                self.close_at(n - 1, ExitReason::End);
            }
        }
        self.book
    }
}

/// Runs the loop over one signal byte per bar (+1, -1 or 0): the events are the non-zero
/// bytes, found eight at a time.
pub(crate) fn run_signals<'a, B: Book>(
    bars: &Bars<'a>,
    shared: &'a SharedStops,
    signals: &[i8],
    exec: &Execution,
    book: B,
) -> B {
    debug_assert_eq!(bars.len(), signals.len());
    let mut engine = Engine::<B, false>::new(bars, exec, book).with_shared(shared);
    let start = exec.start.min(signals.len());
    let mut i = start;
    let n = signals.len();
    while i + 8 <= n {
        let mut bytes = [0u8; 8];
        for (b, &s) in bytes.iter_mut().zip(&signals[i..i + 8]) {
            *b = s as u8;
        }
        let word = u64::from_le_bytes(bytes);
        let mut mask = word;
        while mask != 0 {
            let j = i + (mask.trailing_zeros() / 8) as usize;
            engine.signal(j, f64::from(signals[j]));
            mask &= !(0xffu64 << (8 * (j - i)));
        }
        i += 8;
    }
    for (j, &s) in signals.iter().enumerate().skip(i) {
        if s != 0 {
            engine.signal(j, f64::from(s));
        }
    }
    engine.finish()
}
