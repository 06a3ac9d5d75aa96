//! The execution loop every strategy shares (strategies.md, "Execution"): from a strategy's
//! signals to booked trades, with the side filter, stop-loss, take-profit and the evaluated
//! range.
//!
//! A strategy hands the loop its signals as *events*: the bars, in increasing order, where its
//! signal is not 0. Between events nothing can happen but a stop, so the loop checks stops only
//! while a position is open and only when stops are set, over the closes between one event and
//! the next. With the defaults (both sides, no stops, the whole range) the loop is the paper's
//! stop-and-reverse, operation for operation: the trades and their arithmetic are those of
//! [`crate::oracle`]'s bar-by-bar loop, which is written from the spec on its own.
//!
//! Where the trades go is the [`Book`]'s business: the sweep's [`crate::Ledger`] folds them into
//! a [`crate::ComboResult`]; a trade list keeps them.

use crate::{Error, Result};

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
        match name {
            "both" => Some(Self::Both),
            "long" => Some(Self::Long),
            "short" => Some(Self::Short),
            _ => None,
        }
    }

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
    /// Close a position whose close has moved this fraction against its entry.
    pub stop_loss: Option<f64>,
    /// Close a position whose close has moved this fraction in its favour.
    pub take_profit: Option<f64>,
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
            start: 0,
        }
    }

    /// Checks the fee and the stops.
    ///
    /// # Errors
    /// [`Error::InvalidFee`] for a negative or non-finite fee; [`Error::InvalidOption`] for a
    /// stop that is not finite and > 0.
    pub fn validate(&self) -> Result<()> {
        if !self.fee.is_finite() || self.fee < 0.0 {
            return Err(Error::InvalidFee(self.fee));
        }
        for (name, stop) in [
            ("stop_loss", self.stop_loss),
            ("take_profit", self.take_profit),
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
        Ok(())
    }

    /// True for the paper's loop: both sides, no stops, from the first bar.
    pub fn is_plain(&self) -> bool {
        self.side == Side::Both
            && self.stop_loss.is_none()
            && self.take_profit.is_none()
            && self.start == 0
    }

    fn has_stops(&self) -> bool {
        self.stop_loss.is_some() || self.take_profit.is_some()
    }
}

/// Where booked trades go.
pub trait Book {
    /// A closed trade: `pos` is +1 (long) or -1 (short), entered at `entry` on bar
    /// `entry_row`, closed at `exit` on bar `exit_row`.
    fn book(&mut self, pos: f64, entry: f64, entry_row: usize, exit: f64, exit_row: usize);
}

/// The loop's state: the open position and how far stops have been checked.
///
/// `PLAIN` is the paper's loop (both sides, no stops, every bar; [`Execution::is_plain`]),
/// compiled without the option checks: the paper sweep's hot path stays as it was.
pub(crate) struct Engine<'a, B: Book, const PLAIN: bool> {
    close: &'a [f64],
    exec: Execution,
    stops: bool,
    book: B,
    pos: f64,
    entry: f64,
    entry_row: usize,
    /// Bars below this have had their stop check (or need none).
    checked: usize,
    /// `entry * (1 - stop_loss)` and `entry * (1 + stop_loss)` for the open position, as the
    /// spec computes them at every bar (the same product each time).
    loss_below: f64,
    loss_above: f64,
    /// `entry * (1 + take_profit)` and `entry * (1 - take_profit)`.
    profit_above: f64,
    profit_below: f64,
}

impl<'a, B: Book, const PLAIN: bool> Engine<'a, B, PLAIN> {
    pub(crate) fn new(close: &'a [f64], exec: &Execution, book: B) -> Self {
        debug_assert!(!PLAIN || exec.is_plain());
        Self {
            close,
            exec: *exec,
            stops: exec.has_stops(),
            book,
            pos: 0.0,
            entry: 0.0,
            entry_row: 0,
            checked: exec.start,
            loss_below: 0.0,
            loss_above: 0.0,
            profit_above: 0.0,
            profit_below: 0.0,
        }
    }

    /// The signal `s` (+1 or -1) at bar `i`: events come in increasing bar order. Bars before
    /// the evaluated range are ignored.
    #[inline(always)]
    pub(crate) fn signal(&mut self, i: usize, s: f64) {
        let c = self.close[i];
        if PLAIN {
            if s != self.pos {
                if self.pos != 0.0 {
                    self.book.book(self.pos, self.entry, self.entry_row, c, i);
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
        if self.stops {
            self.stops_through(i);
        }
        match self.exec.side {
            Side::Long if s < 0.0 => {
                if self.pos > 0.0 {
                    self.close_at(i);
                }
                return;
            }
            Side::Short if s > 0.0 => {
                if self.pos < 0.0 {
                    self.close_at(i);
                }
                return;
            }
            _ => {}
        }
        if s != self.pos {
            if self.pos != 0.0 {
                self.book.book(self.pos, self.entry, self.entry_row, c, i);
            }
            self.open(s, c, i);
        }
    }

    /// The open position (+1, -1 or 0) as of the last event. With stops set it may be stale
    /// (stops are checked lazily, at the next event); without them it is exact.
    #[inline(always)]
    pub(crate) fn position(&self) -> f64 {
        self.pos
    }

    /// Whether stops are checked (then [`Engine::position`] may lag).
    pub(crate) fn checks_stops(&self) -> bool {
        self.stops
    }

    /// The exit conditions at bar `i` (expressions.md, "From conditions to trades"): after
    /// the stops, before the signal, a long position closes on `long`, a short one on
    /// `short`. Call it before [`Engine::signal`] for the same bar.
    #[inline]
    pub(crate) fn exit(&mut self, i: usize, long: bool, short: bool) {
        if i < self.exec.start {
            return;
        }
        if self.stops {
            self.stops_through(i);
        }
        if (long && self.pos > 0.0) || (short && self.pos < 0.0) {
            self.close_at(i);
        }
    }

    fn open(&mut self, pos: f64, c: f64, i: usize) {
        self.pos = pos;
        self.entry = c;
        self.entry_row = i;
        if self.stops {
            if let Some(sl) = self.exec.stop_loss {
                self.loss_below = c * (1.0 - sl);
                self.loss_above = c * (1.0 + sl);
            }
            if let Some(tp) = self.exec.take_profit {
                self.profit_above = c * (1.0 + tp);
                self.profit_below = c * (1.0 - tp);
            }
        }
    }

    fn close_at(&mut self, i: usize) {
        self.book
            .book(self.pos, self.entry, self.entry_row, self.close[i], i);
        self.pos = 0.0;
    }

    /// Checks the stops at every bar up to and including `j` that has not been checked.
    fn stops_through(&mut self, j: usize) {
        let from = self.checked.max(self.entry_row + 1);
        self.checked = j + 1;
        if self.pos == 0.0 || from > j {
            return;
        }
        let long = self.pos > 0.0;
        let (sl, tp) = (
            self.exec.stop_loss.is_some(),
            self.exec.take_profit.is_some(),
        );
        // The stop-loss is tested before the take-profit at each bar; both on the close.
        let hit = self.close[from..=j].iter().position(|&c| {
            let loss = sl
                && if long {
                    c <= self.loss_below
                } else {
                    c >= self.loss_above
                };
            let profit = tp
                && if long {
                    c >= self.profit_above
                } else {
                    c <= self.profit_below
                };
            loss || profit
        });
        if let Some(k) = hit {
            self.close_at(from + k);
        }
    }

    /// Ends the run: stops through the last bar, then an open position is closed there.
    pub(crate) fn finish(mut self) -> B {
        let n = self.close.len();
        if n > self.exec.start {
            if self.stops {
                self.stops_through(n - 1);
            }
            if self.pos != 0.0 {
                self.close_at(n - 1);
            }
        }
        self.book
    }
}

/// Runs the loop over one signal byte per bar (+1, -1 or 0): the events are the non-zero
/// bytes, found eight at a time.
pub(crate) fn run_signals<B: Book>(close: &[f64], signals: &[i8], exec: &Execution, book: B) -> B {
    debug_assert_eq!(close.len(), signals.len());
    let mut engine = Engine::<B, false>::new(close, exec, book);
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
