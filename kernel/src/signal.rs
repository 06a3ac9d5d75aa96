//! Crosses of two indicator lines: the lines reduced to one state byte per bar, and the bars
//! where one line crosses the other found from those bytes, eight bars at a time, as the
//! events of the [`crate::execution`] loop. [`run`] is the paper's plain loop over the lines.

use crate::certified::{self, CertifiedBars, Side};
use crate::execution::{Book, Engine, Execution};
use crate::ledger::{Books, ComboResult, Ledger};

pub(crate) use crate::lines::vector::{ABOVE, BELOW, UNDEFINED};

/// [`run`], faster and with the same result bit for bit: the lines reduced to sign bytes
/// (`signs` is scratch), those of certified lines settled where their bounds leave them open
/// ([`certified::settle`], counted into `counts`), then [`crosses`].
pub(crate) fn run_fast(
    books: Books<'_>,
    combo: usize,
    (a, b): (Side<'_>, Side<'_>),
    exec: &Execution,
    signs: &mut Vec<u8>,
    counts: Option<&CertifiedBars>,
) -> ComboResult {
    states(books.bars.close, (a, b), signs, counts);
    crosses(books, combo, std::iter::once(&signs[..]), exec)
}

/// The state bytes of lines `a` and `b` into `signs` (resized to the bars of `close`): from
/// the fast values, those of certified lines settled where their bounds leave them open
/// ([`certified::settle`], counted into `counts`), so they are the reference's.
pub(crate) fn states(
    close: &[f64],
    (a, b): (Side<'_>, Side<'_>),
    signs: &mut Vec<u8>,
    counts: Option<&CertifiedBars>,
) {
    debug_assert!(a.line.values.len() == close.len() && b.line.values.len() == close.len());
    signs.resize(close.len(), 0);
    crate::lines::vector::signs(a.line.values, b.line.values, signs);
    certified::settle(close, a, b, signs, counts);
}

/// Bit 0 of each byte set where the state `cur` is a cross after the state `prev` (bytes of
/// the two words pair up): `cur` is above or below, differs from `prev`, and `prev` is defined.
/// States are 0 to 3, so each test is a bit operation on bits 0 and 1 of every byte at once.
#[inline(always)]
fn cross_mask(prev: u64, cur: u64) -> u64 {
    const LOW: u64 = 0x0101_0101_0101_0101;
    // ABOVE (01) or BELOW (10): exactly one of the two bits.
    let directed = cur ^ (cur >> 1);
    // UNDEFINED (11): both bits.
    let undefined = prev & (prev >> 1);
    let changed = (cur ^ prev) | ((cur ^ prev) >> 1);
    directed & !undefined & changed & LOW
}

/// The trades of one combo from its sign bytes (one per bar, see [`ABOVE`]), given in
/// consecutive pieces that together cover `close`: the same result as [`run`] on the lines
/// the bytes were made from, bit for bit.
///
/// A cross at bar `i` is a state at `i` that is above or below, differs from the state at
/// `i - 1`, and follows a defined bar, which is exactly the reference's test (`b0 <= a0` on
/// defined values is "not above"). Neighbouring bytes are compared eight at a time: long
/// windows cross rarely, so most words of eight bars are skipped with one comparison. Trades
/// are booked in bar order with the reference's arithmetic.
pub(crate) fn crosses<'a>(
    books: Books<'_>,
    combo: usize,
    pieces: impl IntoIterator<Item = &'a [u8]>,
    exec: &Execution,
) -> ComboResult {
    let (close, ledger) = (books.bars.close, books.ledger(exec, combo));
    if exec.is_plain() {
        crosses_into(
            close,
            pieces,
            Engine::<_, true>::new(&books.bars, exec, ledger),
        )
        .done()
    } else {
        crosses_into(
            close,
            pieces,
            Engine::<_, false>::new(&books.bars, exec, ledger).with_shared(books.stops),
        )
        .done()
    }
}

/// [`crosses`] into an engine of either kind.
fn crosses_into<'a, B: Book, const PLAIN: bool>(
    close: &[f64],
    pieces: impl IntoIterator<Item = &'a [u8]>,
    mut engine: Engine<'_, B, PLAIN>,
) -> B {
    let mut visit = |i: usize, s0: u8, s1: u8| {
        if s1 != s0 && (s1 == ABOVE || s1 == BELOW) && s0 != UNDEFINED {
            engine.signal(i, if s1 == ABOVE { 1.0 } else { -1.0 });
        }
    };
    // The last state of the previous piece, and where this piece starts.
    let mut last: Option<u8> = None;
    let mut at = 0;
    for signs in pieces {
        let n = signs.len();
        let Some(&head) = signs.first() else {
            continue;
        };
        if let Some(s0) = last {
            visit(at, s0, head);
        }
        // Bars 1.. of the piece, eight at a time: a word of states and the word of their
        // predecessors give a byte mask of the crosses, and only those bars are visited.
        let mut i = 1;
        while i + 8 <= n {
            let word = |j: usize| u64::from_le_bytes(signs[j..j + 8].try_into().expect("8"));
            let mut mask = cross_mask(word(i - 1), word(i));
            while mask != 0 {
                let j = i + (mask.trailing_zeros() / 8) as usize;
                visit(at + j, signs[j - 1], signs[j]);
                mask &= mask - 1;
            }
            i += 8;
        }
        for j in i..n {
            visit(at + j, signs[j - 1], signs[j]);
        }
        last = Some(signs[n - 1]);
        at += n;
    }
    debug_assert_eq!(at, close.len());
    engine.finish()
}

/// Runs the strategy on `close` with indicator lines `a` (HMA) and `b` (HMA3).
///
/// Bar `i >= 1` is evaluated only where `a[i-1], a[i], b[i-1], b[i]` are all defined. `b`
/// crossing above `a` goes long, below goes short; a signal against the open position closes it
/// at `close[i]` and opens the new one there. An open position is closed at the last bar.
pub(crate) fn run(close: &[f64], a: &[f64], b: &[f64], fee: f64) -> ComboResult {
    debug_assert!(a.len() == close.len() && b.len() == close.len());
    let mut ledger = Ledger::new(fee);
    let mut pos = 0.0f64;
    let mut entry = 0.0f64;
    for i in 1..close.len() {
        let (a0, a1, b0, b1) = (a[i - 1], a[i], b[i - 1], b[i]);
        if a0.is_nan() || a1.is_nan() || b0.is_nan() || b1.is_nan() {
            continue;
        }
        let signal = if b1 > a1 && b0 <= a0 {
            1.0
        } else if b1 < a1 && b0 >= a0 {
            -1.0
        } else {
            continue;
        };
        if signal != pos {
            if pos != 0.0 {
                ledger.add(pos, entry, close[i]);
            }
            pos = signal;
            entry = close[i];
        }
    }
    if pos != 0.0 {
        let last = close[close.len() - 1];
        ledger.add(pos, entry, last);
    }
    ledger.result()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::Moves;

    fn exact(values: &[f64]) -> Side<'_> {
        Side {
            line: crate::certified::Bounded::exact(values),
            key: crate::lines::Line::Sma(1),
        }
    }

    fn books<'a>(close: &'a [f64], moves: &'a Moves) -> Books<'a> {
        Books {
            bars: crate::lines::Bars::closes(close),
            stops: &crate::execution::NO_SHARED_STOPS,
            moves: Some(moves),
            records: None,
        }
    }

    #[test]
    fn long_then_reverse_then_forced_close() {
        let close = [100.0, 100.0, 110.0, 121.0, 121.0];
        let nan = f64::NAN;
        // b crosses above a at bar 2, below at bar 3; open short is closed at the last bar.
        let a = [nan, 1.0, 1.0, 1.0, 1.0];
        let b = [nan, 0.0, 2.0, 0.0, 0.0];
        let r = run(&close, &a, &b, 0.0);
        assert_eq!(r.trades, 2);
        // Long 110 -> 121 = +10%, short 121 -> 121 = 0%.
        assert!((r.pnl - 10.0).abs() < 1e-12, "{r:?}");
        assert_eq!(r.wins, 1);
        assert_eq!(r.max_drawdown, 0.0);
    }

    #[test]
    fn fee_is_charged_per_round_trip_and_drawdown_tracks_the_curve() {
        let close = [100.0, 100.0, 90.0, 90.0];
        let a = [0.0, 0.0, 0.0, 0.0];
        let b = [0.0, 1.0, -1.0, -1.0];
        // Long at 100 (bar 1), reversed at 90 (bar 2): -10%; short 90 -> 90 forced: 0%.
        let r = run(&close, &a, &b, 0.001);
        assert_eq!(r.trades, 2);
        let first = ((1.0 - 0.1) * 0.999 - 1.0) * 100.0;
        let second = (1.0 * 0.999 - 1.0) * 100.0;
        assert_eq!(r.pnl, first + second);
        assert_eq!(r.wins, 0);
        assert_eq!(r.max_drawdown, -(first + second));
        assert_eq!(r.win_rate(), 0.0);
    }

    #[test]
    fn the_fast_loop_equals_the_reference_on_ties_nans_and_word_edges() {
        let nan = f64::NAN;
        let mut signs = Vec::new();
        // Ties (b == a), NaN gaps, crosses right at word boundaries, a repeat cross.
        let a: Vec<f64> = (0..40)
            .map(|i| if i % 9 == 4 { nan } else { 1.0 })
            .collect();
        let b: Vec<f64> = (0..40)
            .map(|i| match i % 7 {
                0 => 1.0,
                1 | 2 => 2.0,
                3 => 0.5,
                4 => nan,
                _ => 1.5,
            })
            .collect();
        let close: Vec<f64> = (0..40).map(|i| 100.0 + i as f64).collect();
        for fee in [0.0, 0.001] {
            assert_eq!(
                run_fast(
                    books(&close, &Moves::of(&close)),
                    0,
                    (exact(&a), exact(&b)),
                    &Execution::new(fee),
                    &mut signs,
                    None
                ),
                run(&close, &a, &b, fee)
            );
        }
        assert_eq!(
            run_fast(
                books(&[], &Moves::of(&[])),
                0,
                (exact(&[]), exact(&[])),
                &Execution::new(0.0),
                &mut signs,
                None
            ),
            ComboResult::default()
        );
        assert_eq!(
            run_fast(
                books(&[1.0], &Moves::of(&[1.0])),
                0,
                (exact(&[nan]), exact(&[nan])),
                &Execution::new(0.0),
                &mut signs,
                None
            ),
            ComboResult::default()
        );
    }

    #[test]
    fn the_cross_mask_is_the_scalar_test_in_every_byte() {
        for prev in 0..4u8 {
            for cur in 0..4u8 {
                let want = cur != prev && (cur == ABOVE || cur == BELOW) && prev != UNDEFINED;
                for byte in 0..8 {
                    // The pair in one byte, every other byte a non-cross (3 after 3).
                    let fill = 0x0303_0303_0303_0303u64;
                    let put = |v: u8| (fill & !(0xff << (8 * byte))) | (u64::from(v) << (8 * byte));
                    let mask = cross_mask(put(prev), put(cur));
                    assert_eq!(
                        mask,
                        u64::from(want) << (8 * byte),
                        "{prev} -> {cur} in byte {byte}"
                    );
                }
            }
        }
    }

    #[test]
    fn crosses_over_pieces_equal_the_reference_wherever_the_pieces_split() {
        // A series with crosses every few bars, ties and NaN gaps.
        let n = 300;
        let a: Vec<f64> = (0..n)
            .map(|i| {
                if i % 37 == 5 {
                    f64::NAN
                } else {
                    (i as f64 * 0.9).sin()
                }
            })
            .collect();
        let b: Vec<f64> = (0..n)
            .map(|i| {
                if i % 11 == 0 {
                    a[i]
                } else {
                    (i as f64 * 0.31).cos()
                }
            })
            .collect();
        let close: Vec<f64> = (0..n)
            .map(|i| 100.0 + (i as f64 * 0.05).sin() * 10.0)
            .collect();
        let want = run(&close, &a, &b, 0.0009);
        assert!(want.trades > 20, "{want:?}");
        let mut signs = vec![0; n];
        crate::lines::vector::signs(&a, &b, &mut signs);
        let moves = Moves::of(&close);
        for piece in [1, 2, 7, 8, 9, 64, 299, 300, 1000] {
            let got = crosses(
                books(&close, &moves),
                0,
                signs.chunks(piece),
                &Execution::new(0.0009),
            );
            assert_eq!(got, want, "pieces of {piece}");
        }
        // Empty pieces are skipped.
        let (head, tail) = signs.split_at(100);
        assert_eq!(
            crosses(
                books(&close, &moves),
                0,
                [head, &[], tail],
                &Execution::new(0.0009),
            ),
            want
        );
    }

    #[test]
    fn no_defined_bars_means_no_trades() {
        let nan = f64::NAN;
        let r = run(&[1.0, 2.0], &[nan, nan], &[nan, nan], 0.0009);
        assert_eq!(r, ComboResult::default());
        assert_eq!(run(&[], &[], &[], 0.0), ComboResult::default());
    }
}
