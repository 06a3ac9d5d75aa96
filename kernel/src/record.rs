//! What a sweep keeps per combo beyond its [`crate::ComboResult`] when asked
//! ([`crate::SweepControl::records`]): the booked trades (the `trades` and `equity` actions)
//! and the mark-to-market equity's change over each of `B` blocks of the evaluated rows
//! (`block_pnl`, strategies.md "Blocks"). Both are kept by the [`crate::Ledger`] as it books,
//! so they cost nothing when not asked and a few operations per trade when asked: a block's
//! value needs the equity only at its last row, and at most one trade is open there.

use std::sync::Mutex;

use crate::execution::ExitReason;
use crate::{Error, Result};

/// Most blocks a sweep may ask for (strategies.md).
pub const MAX_BLOCKS: usize = 64;

/// One booked trade, rows within the closes the sweep was given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trade {
    /// +1 long, -1 short.
    pub side: i8,
    /// Bar of entry.
    pub entry_row: usize,
    /// Bar of exit (the booking bar).
    pub exit_row: usize,
    /// The entry's fill price (the close, or the open with `fill: next_open`; slippage
    /// included).
    pub entry_price: f64,
    /// The exit's fill price.
    pub exit_price: f64,
    /// Net return in percentage points, as booked.
    pub net: f64,
    /// Why it was closed.
    pub reason: ExitReason,
}

/// What one combo's ledger kept.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Record {
    /// Every booked trade in booking order (empty unless trades were asked).
    pub trades: Vec<Trade>,
    /// The equity's change over each block, `Q(last row) - Q(row before)` (empty unless blocks
    /// were asked); they sum to the combo's pnl.
    pub block_pnl: Vec<f64>,
}

/// The records of one sweep over one series: what to keep, and one slot per combo.
#[derive(Debug)]
pub struct Records {
    trades: bool,
    /// The last row of each block, ascending (rows within the closes); empty: no blocks.
    ends: Vec<usize>,
    slots: Vec<Mutex<Record>>,
}

impl Records {
    /// Slots for `combos` combos over closes of `bars` bars evaluated from `start`: their
    /// trades if `trades`, and `blocks` blocks of the evaluated rows (0: none).
    ///
    /// # Errors
    /// [`Error::InvalidOption`] for `blocks` of 1, over [`MAX_BLOCKS`], or over the evaluated
    /// rows.
    pub fn new(
        combos: usize,
        bars: usize,
        start: usize,
        trades: bool,
        blocks: usize,
    ) -> Result<Self> {
        let n = bars.saturating_sub(start);
        if blocks == 1 || blocks > MAX_BLOCKS || blocks > n {
            return Err(Error::InvalidOption {
                name: "blocks",
                message: format!(
                    "must be 2 to {MAX_BLOCKS} and at most the {n} evaluated rows, got {blocks}"
                ),
            });
        }
        // Block b covers [S + floor(b n / B), S + floor((b + 1) n / B)): it ends the row
        // before the next one starts.
        let ends = (0..blocks)
            .map(|b| start + (b + 1) * n / blocks - 1)
            .collect();
        Ok(Self {
            trades,
            ends,
            slots: Vec::new(),
        }
        .like(combos))
    }

    /// Slots for `combos` combos, keeping what these keep.
    pub(crate) fn like(&self, combos: usize) -> Self {
        // A combo that never books (windows past the range) keeps these: no trades, and
        // a flat equity in every block.
        let empty = Record {
            trades: Vec::new(),
            block_pnl: vec![0.0; self.ends.len()],
        };
        Self {
            trades: self.trades,
            ends: self.ends.clone(),
            slots: (0..combos).map(|_| Mutex::new(empty.clone())).collect(),
        }
    }

    /// Combos it has slots for.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether it has no slots.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Whether the ledgers keep trades.
    pub(crate) fn keeps_trades(&self) -> bool {
        self.trades
    }

    /// The last row of each block.
    pub(crate) fn ends(&self) -> &[usize] {
        &self.ends
    }

    /// Stores combo `combo`'s record.
    pub(crate) fn put(&self, combo: usize, record: Record) {
        // A poisoned slot only means another combo's worker panicked; the sweep fails anyway.
        *self.slots[combo]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = record;
    }

    /// Every combo's record, in combo order.
    pub fn into_records(self) -> Vec<Record> {
        self.slots
            .into_iter()
            .map(|s| {
                s.into_inner()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
            })
            .collect()
    }
}

/// Block marks as a ledger keeps them: the equity at each block's last row, filled as the
/// trades are booked (in bar order).
#[derive(Debug, Clone)]
pub(crate) struct Marks<'a> {
    ends: &'a [usize],
    /// `Q` at `ends[..q.len()]`.
    q: Vec<f64>,
}

impl<'a> Marks<'a> {
    pub(crate) fn new(ends: &'a [usize]) -> Self {
        Self {
            ends,
            q: Vec::with_capacity(ends.len()),
        }
    }

    /// Before booking a trade of `pos` opened at `entry` on bar `entry_row` and closed on bar
    /// `exit_row`, with `booked` the sum of the nets booked so far: every block that ends
    /// before `exit_row` has its equity, the booked sum plus the mark of this trade if it was
    /// open after that row (nothing else can be: the trades before it closed by its entry).
    #[inline]
    pub(crate) fn before_booking(
        &mut self,
        close: &[f64],
        booked: f64,
        (pos, entry, entry_row): (f64, f64, usize),
        exit_row: usize,
    ) {
        while let Some(&end) = self.ends.get(self.q.len()) {
            if end >= exit_row {
                break;
            }
            let open = if end >= entry_row {
                pos * (close[end] / entry - 1.0) * 100.0
            } else {
                0.0
            };
            self.q.push(booked + open);
        }
    }

    /// The blocks' values once every trade is booked (`pnl` in all): the rest of the blocks
    /// end flat, and each value is the change of `Q` over its block.
    pub(crate) fn finish(mut self, pnl: f64) -> Vec<f64> {
        self.q.resize(self.ends.len(), pnl);
        let mut before = 0.0;
        self.q
            .iter()
            .map(|&q| {
                let d = q - before;
                before = q;
                d
            })
            .collect()
    }
}

/// The equity curve of `trades` (booked on `close`, in bar order) over the evaluated rows
/// `start..`: per bar, the position after it and `Q` (strategies.md).
pub fn equity(close: &[f64], start: usize, trades: &[Trade]) -> Vec<(i8, f64)> {
    let mut out = Vec::with_capacity(close.len().saturating_sub(start));
    let mut booked = 0.0;
    let mut next = 0;
    for (i, &c) in close.iter().enumerate().skip(start) {
        while let Some(t) = trades.get(next).filter(|t| t.exit_row <= i) {
            booked += t.net;
            next += 1;
        }
        // The trade still open after bar i, if any: entered at or before i, closed after it.
        let (pos, q) = match trades.get(next).filter(|t| t.entry_row <= i) {
            Some(t) => {
                let pos = f64::from(t.side);
                (t.side, booked + pos * (c / t.entry_price - 1.0) * 100.0)
            }
            None => (0, booked),
        };
        out.push((pos, q));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_split_the_evaluated_rows_as_strategies_md_says() {
        // n = 10 from row 3, B = 3: [3, 6), [6, 9), [9, 13).
        let r = Records::new(1, 13, 3, false, 3).unwrap();
        assert_eq!(r.ends(), [5, 8, 12]);
        for bad in [1, 11, MAX_BLOCKS + 1] {
            let err = Records::new(1, 13, 3, false, bad).unwrap_err();
            assert!(err.to_string().contains("blocks"), "{err}");
        }
        assert!(Records::new(1, 13, 3, false, 0).unwrap().ends().is_empty());
    }

    #[test]
    fn the_equity_marks_the_open_trade_and_books_the_closed_ones() {
        let close = [100.0, 110.0, 121.0, 110.0, 99.0];
        let trades = [
            Trade {
                side: 1,
                entry_row: 1,
                exit_row: 2,
                entry_price: 110.0,
                exit_price: 121.0,
                net: 10.0,
                reason: ExitReason::Signal,
            },
            Trade {
                side: -1,
                entry_row: 2,
                exit_row: 4,
                entry_price: 121.0,
                exit_price: 99.0,
                net: 5.0,
                reason: ExitReason::End,
            },
        ];
        let e = equity(&close, 1, &trades);
        assert_eq!(e.len(), 4);
        assert_eq!(e[0], (1, 0.0));
        assert_eq!(e[1], (-1, 10.0));
        assert_eq!(e[2].0, -1);
        assert!((e[2].1 - (10.0 - (110.0 / 121.0 - 1.0) * 100.0)).abs() < 1e-12);
        assert_eq!(e[3], (0, 15.0));
    }
}
