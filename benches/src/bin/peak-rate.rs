//! `peak-rate`: the highest multiply-then-add rate one core reaches here, in the loop shape of
//! the kernel's WMA pass (blocks of lanes whose partial sums stay in registers, one unaligned
//! load per vector per step, a separate multiply and add: no FMA, as exactness requires), on
//! L1-resident data. The kernel's share of this rate is what docs/benchmarks.md reports as "% of
//! peak".
//!
//! Prints JSON: multiply-adds per second for each instruction set the CPU has, best of `--runs`
//! (default 7) runs of ~0.2 s each. The sums are checked against a scalar loop before timing.
//! With `--divisions`, divisions per second instead, in the shape that finishes each window
//! (a block of lanes divided by one denominator): the other cost the WMA pass cannot avoid.

use std::hint::black_box;
use std::time::Instant;

/// Steps per block: a 200-bar window, as the paper's longest.
const STEPS: usize = 200;

/// Blocks of `B` lanes over `STEPS` steps: `acc += x * w` per lane and step, or with
/// `DIVIDE`, `acc += x / w` (the division that finishes each window, in the same shape).
#[inline(always)]
fn blocks_of<const B: usize, const DIVIDE: bool>(x: &[f64], weights: &[f64], reps: usize) -> f64 {
    let mut total = 0.0;
    for r in 0..reps {
        let mut acc = [0.0f64; B];
        let base = r % 8;
        for (k, &w) in weights.iter().enumerate() {
            let xs: &[f64; B] = x[base + k..base + k + B].try_into().expect("B values");
            for j in 0..B {
                acc[j] += if DIVIDE { xs[j] / w } else { xs[j] * w };
            }
        }
        total += acc.iter().sum::<f64>();
    }
    total
}

#[inline(always)]
fn blocks<const B: usize>(x: &[f64], weights: &[f64], reps: usize) -> f64 {
    blocks_of::<B, false>(x, weights, reps)
}

#[inline(always)]
fn divisions<const B: usize>(x: &[f64], weights: &[f64], reps: usize) -> f64 {
    blocks_of::<B, true>(x, weights, reps)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn divisions_avx2(x: &[f64], weights: &[f64], reps: usize) -> f64 {
    divisions::<32>(x, weights, reps)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn blocks_avx2(x: &[f64], weights: &[f64], reps: usize) -> f64 {
    blocks::<32>(x, weights, reps)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn blocks_avx512(x: &[f64], weights: &[f64], reps: usize) -> f64 {
    blocks::<64>(x, weights, reps)
}

fn rate(
    name: &str,
    lanes: usize,
    runs: usize,
    f: &dyn Fn(usize) -> f64,
    want: &dyn Fn(usize) -> f64,
) -> (String, f64) {
    assert_eq!(f(3).to_bits(), want(3).to_bits(), "{name}: wrong sums");
    // Calibrate to ~0.2 s per run.
    let mut reps = 1_000;
    loop {
        let t = Instant::now();
        black_box(f(reps));
        if t.elapsed().as_secs_f64() > 0.05 {
            break;
        }
        reps *= 2;
    }
    reps *= 4;
    let best = (0..runs)
        .map(|_| {
            let t = Instant::now();
            black_box(f(black_box(reps)));
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min);
    (name.to_owned(), (reps * STEPS * lanes) as f64 / best)
}

fn main() {
    let runs = std::env::args()
        .skip_while(|a| a != "--runs")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let x: Vec<f64> = (0..STEPS + 64 + 8)
        .map(|i| 1.0 + (i as f64 * 0.1).sin())
        .collect();
    let weights: Vec<f64> = (1..=STEPS).map(|k| k as f64).collect();
    let mut out = serde_json::Map::new();
    if std::env::args().any(|a| a == "--divisions") {
        let baseline = |reps| divisions::<32>(&x, &weights, reps);
        let (name, r) = rate("baseline", 32, runs, &baseline, &baseline);
        out.insert(name, r.into());
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            let f = |reps| unsafe { divisions_avx2(&x, &weights, reps) };
            let (name, r) = rate("avx2", 32, runs, &f, &baseline);
            out.insert(name, r.into());
        }
        println!("{}", serde_json::Value::Object(out));
        return;
    }
    let baseline = |reps| blocks::<16>(&x, &weights, reps);
    let (name, r) = rate("baseline", 16, runs, &baseline, &baseline);
    out.insert(name, r.into());
    #[cfg(target_arch = "x86_64")]
    {
        let scalar32 = |reps| blocks::<32>(&x, &weights, reps);
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            let f = |reps| unsafe { blocks_avx2(&x, &weights, reps) };
            let (name, r) = rate("avx2", 32, runs, &f, &scalar32);
            out.insert(name, r.into());
        }
        if std::arch::is_x86_feature_detected!("avx512f") {
            let scalar64 = |reps| blocks::<64>(&x, &weights, reps);
            // SAFETY: the CPU supports AVX-512F, checked just above.
            let f = |reps| unsafe { blocks_avx512(&x, &weights, reps) };
            let (name, r) = rate("avx512", 64, runs, &f, &scalar64);
            out.insert(name, r.into());
        }
    }
    println!("{}", serde_json::Value::Object(out));
}
