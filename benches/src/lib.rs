//! Shared helpers of the benchmark tools: loading the paper series fixture and checking a
//! sweep against the reference before any timing counts.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail, ensure};
use arrow_array::{Array, Float64Array};
use sweepflight_kernel::ComboResult;

/// The committed paper series fixture (`kernel/testdata/paper-close.arrow`).
pub fn paper_fixture_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernel/testdata/paper-close.arrow")
}

/// The committed expected results (`kernel/testdata/reference-80.csv`).
pub fn reference_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernel/testdata/reference-80.csv")
}

/// Reads the `close` column of an Arrow IPC file.
///
/// # Errors
/// If the file cannot be read or has no float64 `close` column.
pub fn read_close(path: &Path) -> anyhow::Result<Vec<f64>> {
    let file = File::open(path).with_context(|| format!("open {}", path.display()))?;
    let reader = arrow_ipc::reader::FileReader::try_new(file, None)?;
    let mut close = Vec::new();
    for batch in reader {
        let batch = batch?;
        let col = batch.column_by_name("close").context("no `close` column")?;
        let col = col
            .as_any()
            .downcast_ref::<Float64Array>()
            .context("`close` is not float64")?;
        ensure!(col.null_count() == 0, "`close` has nulls");
        close.extend_from_slice(col.values());
    }
    Ok(close)
}

/// Expected `(pnl, trades)` per combo, from the reference CSV.
///
/// # Errors
/// If the file cannot be read or parsed.
pub fn read_reference(path: &Path) -> anyhow::Result<Vec<(f64, u64)>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    text.lines()
        .skip(1)
        .map(|line| {
            let cols: Vec<&str> = line.split(',').collect();
            ensure!(cols.len() == 10, "bad reference row: {line}");
            Ok((cols[8].parse()?, cols[9].parse()?))
        })
        .collect()
}

/// The equivalence gate: trades equal and |dPnL| <= 1e-6 on every combo.
///
/// # Errors
/// Naming the first combo that differs.
pub fn check_gate(got: &[ComboResult], want: &[(f64, u64)]) -> anyhow::Result<()> {
    ensure!(
        got.len() == want.len(),
        "{} results, expected {}",
        got.len(),
        want.len()
    );
    for (i, (g, &(pnl, trades))) in got.iter().zip(want).enumerate() {
        if g.trades != trades || (g.pnl - pnl).abs() > 1e-6 {
            bail!(
                "combo {i}: got {} / {}, expected {pnl} / {trades}",
                g.pnl,
                g.trades
            );
        }
    }
    Ok(())
}
