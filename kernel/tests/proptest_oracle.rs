//! Property tests: on random series and random combos the fast sweep equals the scalar oracle,
//! and the answer does not depend on the number of threads.

use proptest::prelude::*;
use sweepflight_kernel::wma::wma_multi;
use sweepflight_kernel::{Combo, SweepControl, oracle, sweep, sweep_with};

/// A positive random walk, like a price series.
fn series(max_len: usize) -> impl Strategy<Value = Vec<f64>> {
    (
        1.0f64..1000.0,
        prop::collection::vec(-0.02f64..0.02, 0..max_len),
    )
        .prop_map(|(start, steps)| {
            steps
                .iter()
                .scan(start, |p, r| {
                    *p *= 1.0 + r;
                    Some(*p)
                })
                .collect()
        })
}

/// Windows mostly short (where the trades are), sometimes up to 5,000 (often > the series).
fn window() -> impl Strategy<Value = u32> {
    prop_oneof![4 => 1u32..40, 1 => 1u32..=5_000]
}

fn combo() -> impl Strategy<Value = Combo> {
    prop_oneof![
        (1u32..=5_000).prop_map(|l| Combo::from_length(l).unwrap()),
        [window(), window(), window(), window(), window(), window()]
            .prop_map(|w| Combo::new(w).unwrap()),
    ]
}

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn fast_equals_oracle(close in series(3_000), combos in prop::collection::vec(combo(), 1..12), fee in 0.0f64..0.01) {
        let fast = sweep(&close, &combos, fee).unwrap();
        let slow = oracle::sweep(&close, &combos, fee);
        for (f, s) in fast.iter().zip(&slow) {
            prop_assert_eq!(f.trades, s.trades);
            prop_assert!((f.pnl - s.pnl).abs() <= 1e-9, "{} vs {}", f.pnl, s.pnl);
            prop_assert_eq!(f, s);
        }
    }

    #[test]
    fn any_thread_count_gives_the_same_answer(close in series(20_000), combos in prop::collection::vec(combo(), 1..24)) {
        let run = |threads: usize, parallel: bool, tile_bars: Option<usize>| {
            let control = SweepControl { parallel: Some(parallel), tile_bars, ..SweepControl::default() };
            pool(threads).install(|| sweep_with(&close, &combos, 0.0009, &control)).unwrap()
        };
        let serial = run(1, false, Some(0));
        prop_assert_eq!(&serial, &run(1, true, Some(0)));
        prop_assert_eq!(&serial, &run(3, true, Some(0)));
        // Tiled, untiled, automatic: one answer.
        prop_assert_eq!(&serial, &run(1, false, Some(2_048)));
        prop_assert_eq!(&serial, &run(3, true, Some(2_048)));
        prop_assert_eq!(&serial, &run(3, true, None));
    }

    #[test]
    fn one_pass_over_many_windows_equals_the_oracle_for_each(
        x in series(3_000),
        windows in prop::collection::btree_set(prop_oneof![4 => 1usize..80, 1 => 1usize..4_000], 1..24),
        parallel in any::<bool>(),
    ) {
        let windows: Vec<usize> = windows.into_iter().collect();
        let mut outs: Vec<Vec<f64>> = windows.iter().map(|_| vec![0.0; x.len()]).collect();
        let mut views: Vec<&mut [f64]> = outs.iter_mut().map(Vec::as_mut_slice).collect();
        wma_multi(&x, &windows, &mut views, parallel);
        for (n, got) in windows.iter().zip(&outs) {
            let want = oracle::wma(&x, *n);
            let bits = |v: &[f64]| v.iter().map(|f| if f.is_nan() { u64::MAX } else { f.to_bits() }).collect::<Vec<_>>();
            prop_assert_eq!(bits(got), bits(&want), "n = {}", n);
        }
    }

    #[test]
    fn combos_that_share_lines_equal_the_oracle(
        close in series(2_000),
        picks in prop::collection::vec((0usize..4, 0usize..4), 1..16),
        hma in prop::collection::vec([window(), window(), window()], 4),
        hma3 in prop::collection::vec([window(), window(), window()], 4),
    ) {
        // Few distinct HMA and HMA3 lines, combined many ways: the sweep computes each line
        // once and shares it.
        let combos: Vec<Combo> = picks
            .iter()
            .map(|&(i, j)| {
                let [h, f, s] = hma[i];
                let [p3, p2, p] = hma3[j];
                Combo::new([h, f, s, p3, p2, p]).unwrap()
            })
            .collect();
        prop_assert_eq!(sweep(&close, &combos, 0.0009).unwrap(), oracle::sweep(&close, &combos, 0.0009));
    }

    #[test]
    fn tiles_of_any_length_equal_the_oracle(
        close in series(3_000),
        combos in prop::collection::vec(combo(), 1..12),
        tile in prop_oneof![1usize..64, 64usize..4_000],
        threads in 1usize..4,
        working_set in prop_oneof![Just(1usize), Just(usize::MAX)],
    ) {
        // Tiles shorter and longer than the windows, one or many groups, any thread count:
        // always the oracle's answer.
        let control = SweepControl {
            tile_bars: Some(tile),
            parallel: Some(threads > 1),
            working_set_bytes: working_set,
            ..SweepControl::default()
        };
        let tiled = pool(threads).install(|| sweep_with(&close, &combos, 0.0009, &control)).unwrap();
        prop_assert_eq!(tiled, oracle::sweep(&close, &combos, 0.0009));
    }

    #[test]
    fn length_one_and_longer_than_series(close in series(200)) {
        let n = close.len() as u32;
        let combos = [Combo::from_length(1).unwrap(), Combo::from_length(n + 1).unwrap(), Combo::new([n + 1; 6]).unwrap()];
        let fast = sweep(&close, &combos, 0.0009).unwrap();
        prop_assert_eq!(&fast, &oracle::sweep(&close, &combos, 0.0009));
        prop_assert_eq!(fast[1].trades, 0);
        prop_assert_eq!(fast[2].trades, 0);
    }
}
