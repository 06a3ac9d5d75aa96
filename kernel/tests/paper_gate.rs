//! The equivalence gate: the fast kernel on the paper series reproduces all 80 rows of the
//! independent numba reference (trades equal, |dPnL| <= 1e-6), pinned by the published combo 0.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow_array::{Array, Float64Array};
use sha2::{Digest, Sha256};
use sweepflight_kernel::{DEFAULT_FEE, SweepControl, oracle, paper, sweep, sweep_with};

/// sha256 of the 150,000 closes as little-endian f64 bytes (see make_paper_fixture.py).
const PAPER_SHA256: &str = "28970418bd3213da9f3456dec74f2c7d424b4b1b6e0729ba054a3da0718d6bfc";

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(name)
}

fn paper_close() -> Vec<f64> {
    let file = File::open(testdata("paper-close.arrow")).unwrap();
    let mut close = Vec::new();
    for batch in arrow_ipc::reader::FileReader::try_new(file, None).unwrap() {
        let batch = batch.unwrap();
        let col = batch.column_by_name("close").unwrap();
        let col = col.as_any().downcast_ref::<Float64Array>().unwrap();
        assert_eq!(col.null_count(), 0);
        close.extend_from_slice(col.values());
    }
    let bytes: Vec<u8> = close.iter().flat_map(|v| v.to_le_bytes()).collect();
    let digest: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(digest, PAPER_SHA256, "paper fixture changed");
    close
}

#[test]
fn all_80_paper_combos_match_numba() {
    let close = paper_close();
    assert_eq!(close.len(), 150_000);
    let got = sweep(&close, &paper::combos(), DEFAULT_FEE).unwrap();
    paper::check_gate(&got).unwrap();
    // The published fingerprint: -5165.58 percentage points on 57,029 trades.
    assert_eq!(got[0].trades, 57_029);
    assert_eq!(format!("{:.2}", got[0].pnl), "-5165.58");
    assert!((got[0].pnl - -5165.579954).abs() <= 1e-6);
    // Tiled (the default here) and untiled, on one thread and on the pool: one answer.
    for (tile_bars, parallel) in [(Some(0), true), (Some(0), false), (None, false)] {
        let control = SweepControl {
            tile_bars,
            parallel: Some(parallel),
            ..SweepControl::default()
        };
        let other = sweep_with(&close, &paper::combos(), DEFAULT_FEE, &control).unwrap();
        assert_eq!(other, got, "tile_bars {tile_bars:?}, parallel {parallel}");
    }
}

#[test]
fn oracle_agrees_bit_for_bit_on_paper_combos() {
    let close = paper_close();
    let combos = paper::combos();
    // The near-tie combo 0, a mid one and the longest; the oracle is slow by design.
    let picks = [combos[0], combos[40], combos[79]];
    assert_eq!(
        sweep(&close, &picks, DEFAULT_FEE).unwrap(),
        oracle::sweep(&close, &picks, DEFAULT_FEE)
    );
}

#[test]
fn committed_reference_equals_the_spec_copy() {
    // CI and developer checkouts have the spec beside the repository; the committed copy must
    // not drift from it.
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/spec/reference-80.csv");
    let committed = std::fs::read_to_string(testdata("reference-80.csv")).unwrap();
    match std::fs::read_to_string(&spec) {
        Ok(text) => assert_eq!(committed, text),
        Err(e) => eprintln!(
            "spec copy not found at {} ({e}); committed copy used",
            spec.display()
        ),
    }
}
