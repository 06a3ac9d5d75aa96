//! `kernel-timer`: times the in-process Rust paper sweep and prints JSON, for the side-by-side
//! scripts (`benches/kernel_vs_numba.py`).
//!
//! Usage: `kernel-timer [--runs N] [--threads T]...` (T = 0 means all cores). The sweep result
//! is checked against the reference before timing; a mismatch exits non-zero. Each run sweeps
//! from scratch (no WMA cache), timed with a monotonic clock around the sweep call only.

use std::time::Instant;

use anyhow::Context;
use sweepflight_benches::{paper_fixture_path, read_close};
use sweepflight_kernel::{DEFAULT_FEE, paper, sweep};

fn main() -> anyhow::Result<()> {
    let mut runs = 5usize;
    let mut threads = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args.next().context("flag needs a value")?;
        match a.as_str() {
            "--runs" => runs = v.parse()?,
            "--threads" => threads.push(v.parse::<usize>()?),
            _ => anyhow::bail!("unknown flag {a}"),
        }
    }
    if threads.is_empty() {
        threads = vec![1, 0];
    }
    let close = read_close(&paper_fixture_path())?;
    let combos = paper::combos();

    let mut out = serde_json::Map::new();
    for t in threads {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(t).build()?;
        let label = format!("threads={}", pool.current_num_threads());
        let got = pool.install(|| sweep(&close, &combos, DEFAULT_FEE))?;
        paper::check_gate(&got)
            .map_err(anyhow::Error::msg)
            .context("equivalence gate")?;
        let secs: Vec<f64> = (0..runs)
            .map(|_| {
                let t0 = Instant::now();
                let r = pool.install(|| sweep(&close, &combos, DEFAULT_FEE));
                let dt = t0.elapsed().as_secs_f64();
                assert!(r.is_ok_and(|r| r.len() == combos.len()));
                dt
            })
            .collect();
        out.insert(label, serde_json::json!(secs));
    }
    println!("{}", serde_json::Value::Object(out));
    Ok(())
}
