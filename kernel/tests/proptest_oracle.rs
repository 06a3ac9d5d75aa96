//! Property tests: on random series and random combos the fast sweep equals the scalar oracle,
//! and the answer does not depend on the number of threads.

use proptest::prelude::*;
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
        let run = |threads: usize, parallel: bool| {
            let control = SweepControl { parallel: Some(parallel), ..SweepControl::default() };
            pool(threads).install(|| sweep_with(&close, &combos, 0.0009, &control)).unwrap()
        };
        let serial = run(1, false);
        prop_assert_eq!(&serial, &run(1, true));
        prop_assert_eq!(&serial, &run(3, true));
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
