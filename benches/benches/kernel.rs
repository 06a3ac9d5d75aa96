//! Criterion benches of the kernel on the paper series (150,000 bars).
//!
//! - `wma/n`: one `WMA(close, n)`; throughput in bars. Inside the timer: the WMA only (output
//!   buffer allocated once, outside).
//! - `sweep/paper-80/threads=T`: the whole 80-combo paper sweep on a T-thread rayon pool;
//!   throughput in combo-bars (80 x 150,000). Inside the timer: the sweep, including its shared
//!   WMAs (no cache across iterations). The result is checked against the reference once, before
//!   timing, so a fast wrong build fails.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use sweepflight_benches::{paper_fixture_path, read_close};
use sweepflight_kernel::{Combo, DEFAULT_FEE, paper, sweep, wma};

fn load() -> (Vec<f64>, Vec<Combo>) {
    let close = read_close(&paper_fixture_path()).expect("paper fixture");
    (close, paper::combos())
}

fn bench_wma(c: &mut Criterion) {
    let (close, _) = load();
    let mut group = c.benchmark_group("wma");
    group.throughput(Throughput::Elements(close.len() as u64));
    let mut out = vec![0.0; close.len()];
    for n in [3usize, 14, 100, 200] {
        group.bench_function(format!("n={n}"), |b| {
            b.iter(|| wma::wma_into(black_box(&close), n, &mut out));
        });
    }
    group.finish();
}

fn bench_sweep(c: &mut Criterion) {
    let (close, combos) = load();
    let got = sweep(&close, &combos, DEFAULT_FEE).expect("sweep");
    paper::check_gate(&got).expect("equivalence gate");

    let mut group = c.benchmark_group("sweep");
    group.sample_size(10);
    group.throughput(Throughput::Elements((close.len() * combos.len()) as u64));
    let all = std::thread::available_parallelism().map_or(1, |n| n.get());
    for threads in [1, all] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("rayon pool");
        group.bench_function(format!("paper-80/threads={threads}"), |b| {
            b.iter(|| pool.install(|| sweep(black_box(&close), &combos, DEFAULT_FEE)));
        });
    }
    group.finish();
}

criterion_group!(benches, bench_wma, bench_sweep);
criterion_main!(benches);
