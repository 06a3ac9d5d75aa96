//! Certified lines (O(1) per output, exact fallback) against the exact rule: on every kind of
//! series the issue names (random walks, integer and half-cent prices, constant stretches,
//! repeated patterns, powers-of-two scalings, lines tied for long stretches, 1e-300 and 1e300
//! magnitudes), windows from a few hundred bars to 70,000 and longer than the series, for
//! `hma_sar` and `sma_cross`. Results must be equal, not close; the counts say which path ran.

use proptest::prelude::*;
use sweepflight_kernel::oracle;
use sweepflight_kernel::{
    CertifiedBars, Combo, ComboResult, Execution, Params, SweepControl, sweep_params, sweep_with,
};

/// A deterministic random walk from `start`.
fn walk(len: usize, start: f64, seed: u64) -> Vec<f64> {
    let mut s = seed;
    (0..len)
        .scan(start, |p, _| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
            *p *= 1.0 + r * 0.004;
            Some(*p)
        })
        .collect()
}

/// The series kinds, each `len` bars.
fn kinds(len: usize) -> Vec<(&'static str, Vec<f64>)> {
    let w = walk(len, 100.0, 1);
    vec![
        ("walk", w.clone()),
        ("integers", w.iter().map(|p| p.round()).collect()),
        (
            "half cents",
            w.iter().map(|p| (p * 200.0).round() / 200.0).collect(),
        ),
        (
            "constant stretches",
            w.iter()
                .enumerate()
                .map(|(i, p)| if (i / 3_000) % 2 == 0 { 100.0 } else { *p })
                .collect(),
        ),
        (
            "pattern",
            (0..len)
                .map(|i| [1.25, 1.5, 1.0, 1.5, 1.25][i % 5])
                .collect(),
        ),
        (
            "times 2^-40",
            w.iter().map(|p| p * 2f64.powi(-40)).collect(),
        ),
        ("times 2^50", w.iter().map(|p| p * 2f64.powi(50)).collect()),
    ]
}

/// One sweep, certified (the default) and counted, and the same under the exact rule.
fn both(close: &[f64], combos: &[Combo]) -> (Vec<ComboResult>, Vec<ComboResult>, CertifiedBars) {
    let counts = CertifiedBars::default();
    let certified = SweepControl {
        certified: Some(&counts),
        ..SweepControl::default()
    };
    let fast = sweep_with(close, combos, 0.0009, &certified).unwrap();
    let exact = SweepControl {
        exact_lines: true,
        ..SweepControl::default()
    };
    let slow = sweep_with(close, combos, 0.0009, &exact).unwrap();
    (fast, slow, counts)
}

fn combos(lengths: &[u32]) -> Vec<Combo> {
    let mut out: Vec<Combo> = lengths
        .iter()
        .map(|&l| Combo::from_length(l).unwrap())
        .collect();
    // Mixed: short first-level windows under a long second level, and the reverse.
    out.push(Combo::new([3, 2_000, 45, 300, 700, 1_400]).unwrap());
    out.push(Combo::new([900, 1_800, 300, 5, 8, 16]).unwrap());
    out
}

#[test]
fn long_windows_equal_the_exact_rule_on_every_kind_of_series() {
    let grid = combos(&[520, 1_000, 2_500, 6_000]);
    for (name, close) in kinds(24_000) {
        let (fast, slow, counts) = both(&close, &grid);
        assert_eq!(fast, slow, "{name}");
        assert!(
            counts.compared() > 0,
            "{name}: the certified path did not run"
        );
        assert!(
            fast.iter().any(|r| r.trades > 0),
            "{name}: no trades to compare"
        );
    }
}

#[test]
fn ties_are_decided_by_the_recomputed_reference() {
    // Constant stretches make every line equal to every other over thousands of bars: no
    // bound can decide those comparisons, so each is recomputed, and the answer is still the
    // exact rule's (and, on a short series, the oracle's).
    let close: Vec<f64> = walk(9_000, 50.0, 3)
        .iter()
        .enumerate()
        .map(|(i, p)| if (i / 2_000) % 2 == 1 { 50.0 } else { *p })
        .collect();
    let grid = combos(&[600, 1_100]);
    let (fast, slow, counts) = both(&close, &grid);
    assert_eq!(fast, slow);
    assert!(counts.recomputed() > 0, "no tie was recomputed");
    assert!(counts.recomputed() < counts.compared());
    assert_eq!(fast[0], oracle::run_combo(&close, &grid[0], 0.0009));
    // A flat series: every bar of every combo is a tie.
    let flat = vec![1.5; 3_000];
    let (fast, slow, counts) = both(&flat, &combos(&[700]));
    assert_eq!(fast, slow);
    assert_eq!(counts.recomputed(), counts.compared());
}

#[test]
fn extreme_magnitudes_take_the_exact_path() {
    for scale in [1e-300, 1e300] {
        let close: Vec<f64> = walk(4_000, 1.0, 5).iter().map(|p| p * scale).collect();
        let grid = combos(&[300, 900]);
        let (fast, slow, counts) = both(&close, &grid);
        assert_eq!(fast, slow, "{scale}");
        assert_eq!(
            counts.compared(),
            0,
            "{scale}: certified lines on an extreme series"
        );
        assert_eq!(fast[0], oracle::run_combo(&close, &grid[0], 0.0009));
    }
}

#[test]
fn windows_to_70000_and_longer_than_the_series() {
    let close = walk(90_000, 1.1, 9);
    let grid: Vec<Combo> = [70_000, 20_000, 95_000]
        .iter()
        .map(|&l| Combo::from_length(l).unwrap())
        .chain([Combo::new([100_000, 3, 3, 3, 3, 3]).unwrap()])
        .collect();
    let (fast, slow, counts) = both(&close, &grid);
    assert_eq!(fast, slow);
    assert!(counts.compared() > 0);
    assert!(fast[1].trades > 0, "the 20,000-bar combo should trade");
    assert_eq!(
        (fast[2].trades, fast[3].trades),
        (0, 0),
        "windows past the series"
    );
}

#[test]
fn long_sma_windows_equal_the_exact_rule_and_the_oracle() {
    let params: Vec<Params> = [(300, 2_000), (1_000, 257), (5, 4_000), (2_500, 2_600)]
        .iter()
        .map(|&(fast, slow)| Params::SmaCross { fast, slow })
        .collect();
    let exec = Execution::default();
    for (name, close) in kinds(12_000) {
        let counts = CertifiedBars::default();
        let certified = SweepControl {
            certified: Some(&counts),
            ..SweepControl::default()
        };
        let fast = sweep_params(&close, &params, &exec, &certified).unwrap();
        let exact = SweepControl {
            exact_lines: true,
            ..SweepControl::default()
        };
        assert_eq!(
            fast,
            sweep_params(&close, &params, &exec, &exact).unwrap(),
            "{name}"
        );
        assert!(counts.compared() > 0, "{name}");
        assert_eq!(
            fast[0],
            oracle::run(&close, 0..close.len(), 0, &params[0], &exec),
            "{name}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn random_long_grids_equal_the_exact_rule(
        seed in any::<u64>(),
        len in 2_000usize..8_000,
        ticks in prop_oneof![Just(0.0f64), Just(0.01), Just(1.0)],
        lengths in prop::collection::vec(256u32..6_000, 1..5),
        windows in prop::collection::vec([1u32..3_000, 1u32..3_000, 1u32..200, 1u32..3_000, 1u32..3_000, 1u32..3_000], 0..3),
    ) {
        let mut close = walk(len, 80.0, seed);
        if ticks > 0.0 {
            // Rounded to a tick: flat runs and exact ties between averages.
            close.iter_mut().for_each(|p| *p = (*p / ticks).round() * ticks);
        }
        let grid: Vec<Combo> = lengths
            .iter()
            .map(|&l| Combo::from_length(l).unwrap())
            .chain(windows.into_iter().map(|w| Combo::new(w).unwrap()))
            .collect();
        let (fast, slow, _) = both(&close, &grid);
        prop_assert_eq!(fast, slow);
    }
}
