//! The paper's parameter grid: `numpy.linspace(6, 200, 80).astype(int64)`.
//!
//! The paper's price series is data, not code: `testdata/paper-close.arrow`, made once by
//! numpy's generator and pinned (numpy's `exp` differs by CPU in the last bits), is the test
//! fixture and the Python package's `sweepflight.paper.series()`. Its expected results
//! (`testdata/reference-80.csv`, from an independent numba implementation) are compiled in, so
//! every test and benchmark checks against the same rows.

use crate::{Combo, ComboResult};

/// The reference CSV: `combo,L,half,full,sqrt,p3,p2,p,pnl_pct_pts,trades`, 80 rows.
pub const REFERENCE_CSV: &str = include_str!("../testdata/reference-80.csv");

/// Largest |dPnL| the equivalence gate accepts (the CSV has 6 decimals).
pub const GATE_PNL_TOLERANCE: f64 = 1e-6;

/// One row of the reference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReferenceRow {
    /// The paper length `L`.
    pub length: u32,
    /// The combo derived from it.
    pub combo: Combo,
    /// Expected PnL in percentage points (6 decimals).
    pub pnl: f64,
    /// Expected number of trades.
    pub trades: u64,
}

/// The 80 reference rows, in grid order.
///
/// # Panics
/// Never for the compiled-in CSV (a unit test parses it).
pub fn reference() -> Vec<ReferenceRow> {
    REFERENCE_CSV
        .lines()
        .skip(1)
        .map(|line| {
            let c: Vec<&str> = line.split(',').collect();
            let int = |j: usize| c[j].parse::<u32>().expect("integer column");
            let windows = [int(2), int(3), int(4), int(5), int(6), int(7)];
            ReferenceRow {
                length: int(1),
                combo: Combo::new(windows).expect("valid windows"),
                pnl: c[8].parse().expect("pnl column"),
                trades: c[9].parse().expect("trades column"),
            }
        })
        .collect()
}

/// The equivalence gate: as many results as rows, trades equal and |dPnL| <= 1e-6 on each.
///
/// # Errors
/// A message naming the first combo that differs.
pub fn check_gate(got: &[ComboResult]) -> Result<(), String> {
    let want = reference();
    if got.len() != want.len() {
        return Err(format!("{} results, expected {}", got.len(), want.len()));
    }
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        if g.trades != w.trades || (g.pnl - w.pnl).abs() > GATE_PNL_TOLERANCE {
            return Err(format!(
                "combo {i} (L = {}): got {} / {} trades, expected {} / {}",
                w.length, g.pnl, g.trades, w.pnl, w.trades
            ));
        }
    }
    Ok(())
}

/// The 80 paper combos, in grid order.
pub fn combos() -> Vec<Combo> {
    lengths()
        .into_iter()
        .map(|l| Combo::from_length(l).expect("grid lengths are >= 6"))
        .collect()
}

/// The 80 lengths of the paper grid, `6, 8, 10, 13, ..., 197, 200`.
pub fn lengths() -> Vec<u32> {
    linspace_trunc(6.0, 200.0, 80)
}

/// `numpy.linspace(start, stop, num).astype(int64)` for `num >= 2`: `start + i * step`, with the
/// last value exactly `stop`, truncated towards zero.
fn linspace_trunc(start: f64, stop: f64, num: usize) -> Vec<u32> {
    let step = (stop - start) / (num - 1) as f64;
    (0..num)
        .map(|i| if i + 1 == num { stop } else { i as f64 * step + start } as u32)
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn grid_has_80_lengths_from_6_to_200() {
        let l = super::lengths();
        assert_eq!(l.len(), 80);
        assert_eq!(&l[..5], &[6, 8, 10, 13, 15]);
        assert_eq!(&l[78..], &[197, 200]);
    }

    #[test]
    fn reference_rows_agree_with_grid_and_combo_rule() {
        let rows = super::reference();
        assert_eq!(rows.len(), 80);
        for ((row, l), c) in rows.iter().zip(super::lengths()).zip(super::combos()) {
            assert_eq!(row.length, l);
            assert_eq!(row.combo, c, "L = {l}");
        }
        assert_eq!((rows[0].pnl, rows[0].trades), (-5165.579954, 57_029));
    }

    #[test]
    fn gate_rejects_a_wrong_answer() {
        let mut got: Vec<_> = super::reference()
            .iter()
            .map(|r| crate::ComboResult {
                pnl: r.pnl,
                trades: r.trades,
                ..Default::default()
            })
            .collect();
        assert!(super::check_gate(&got).is_ok());
        got[7].trades += 1;
        assert!(super::check_gate(&got).unwrap_err().contains("combo 7"));
        assert!(super::check_gate(&got[..3]).is_err());
    }
}
