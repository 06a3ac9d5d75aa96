//! Shared helpers of the benchmark tools: loading the paper series fixture, and the in-process
//! engine the criterion benches time. (The equivalence gate every timing must pass first is
//! `sweepflight_kernel::paper::check_gate`.)

// The server binary's allocator, so in-process timings allocate as the service does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::fs::File;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use anyhow::{Context, ensure};
use arrow_array::{Array, Float64Array, RecordBatch};
use arrow_schema::{ArrowError, DataType, Field, Schema};
use sweepflight_server::{Engine, ServerConfig};

/// The seconds of each of `runs` calls of `f` (its result kept from the optimiser).
pub fn time_runs<T>(runs: usize, mut f: impl FnMut() -> T) -> Vec<f64> {
    (0..runs)
        .map(|_| {
            let t = std::time::Instant::now();
            std::hint::black_box(f());
            t.elapsed().as_secs_f64()
        })
        .collect()
}

/// The committed paper series fixture (`kernel/testdata/paper-close.arrow`).
pub fn paper_fixture_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernel/testdata/paper-close.arrow")
}

/// Reads the `close` column of an Arrow IPC file.
///
/// # Errors
/// If the file cannot be read or has no float64 `close` column.
pub fn read_close(path: &Path) -> anyhow::Result<Vec<f64>> {
    let file = File::open(path).with_context(|| format!("open {}", path.display()))?;
    closes(arrow_ipc::reader::FileReader::try_new(file, None)?)
}

/// The `close` column of a sequence of record batches, concatenated.
///
/// # Errors
/// If a batch fails to read or has no non-null float64 `close` column.
pub fn closes(
    batches: impl IntoIterator<Item = Result<RecordBatch, ArrowError>>,
) -> anyhow::Result<Vec<f64>> {
    let mut close = Vec::new();
    for batch in batches {
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

/// An in-memory engine (the server's defaults) holding `tiny`, a 64-bar series: the stored
/// dataset of the params-only floor.
///
/// # Panics
/// If the engine cannot be made or refuses the series (neither happens with the defaults).
pub fn tiny_engine(rt: &tokio::runtime::Runtime) -> Engine {
    let close: Float64Array = (0..64).map(|i| 100.0 + f64::from(i).sin()).collect();
    let schema = Arc::new(Schema::new(vec![Field::new(
        "close",
        DataType::Float64,
        false,
    )]));
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(close)]).expect("batch");
    let engine = Engine::in_memory(ServerConfig::default()).expect("an engine");
    rt.block_on(engine.put("tiny", &schema, vec![batch], None))
        .expect("stored");
    engine
}

/// The value after `--name` on a tool's command line (`args` as `std::env::args` gives them).
pub fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// Checks the formula sweep of `program` over `grid` (each combo's values) on `bars` books,
/// for the combos at positions `which`, exactly the plain interpreter's trades (entry and exit
/// bars, the net's bits): the check a timing tool makes before it times.
///
/// # Errors
/// Naming `label` and the first combo that differs.
pub fn check_interpreter(
    label: &str,
    bars: &sweepflight_kernel::lines::Bars<'_>,
    program: &sweepflight_kernel::expr::Program,
    grid: &[Vec<f64>],
    exec: &sweepflight_kernel::Execution,
    which: &[usize],
) -> anyhow::Result<()> {
    use sweepflight_kernel::eval::{oracle, sweep_program};
    use sweepflight_kernel::{Records, SweepControl};
    let records = Records::new(grid.len(), bars.len(), exec.start, true, 0)?;
    let checked = SweepControl {
        records: Some(&records),
        ..SweepControl::default()
    };
    sweep_program(bars, program, &grid.concat(), grid.len(), exec, &checked)?;
    let kept = records.into_records();
    for &i in which {
        let want = oracle::run(bars, program, &grid[i], exec);
        let same = want.len() == kept[i].trades.len()
            && want.iter().zip(&kept[i].trades).all(|(w, g)| {
                (w.entry_row, w.exit_row, w.net.to_bits())
                    == (g.entry_row, g.exit_row, g.net.to_bits())
            });
        ensure!(same, "{label}: combo {i} differs from the interpreter");
    }
    Ok(())
}

/// vectorbt's canonical sma_cross grid: windows 10..=39 taken in pairs, fast < slow (435 pairs).
pub fn vbt_pairs() -> Vec<(u32, u32)> {
    (10..=39)
        .flat_map(|f| (f + 1..=39).map(move |s| (f, s)))
        .collect()
}
