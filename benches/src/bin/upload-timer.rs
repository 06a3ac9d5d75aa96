//! `upload-timer`: DoPut throughput from the Rust client. Usage: `upload-timer URI BYTES RUNS`.
//! Uploads a series of BYTES/8 closes RUNS times (after one untimed warm-up) and prints JSON
//! seconds per upload; the timer covers the put call only: the series is an Arrow batch built
//! beforehand, as a pyarrow caller holds a table (the client sends its buffers, no copy first).

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use arrow_array::{ArrayRef, Float64Array, RecordBatch};
use sweepflight_benches as _; // the global allocator the server uses (mimalloc)
use sweepflight_client::Client;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: upload-timer URI BYTES RUNS";
    let uri = args.get(1).context(usage)?;
    let bytes: usize = args.get(2).context(usage)?.parse()?;
    let runs: usize = args.get(3).context(usage)?.parse()?;
    let closes: Vec<f64> = (0..bytes / 8)
        .map(|i| 100.0 + (i % 1000) as f64 * 0.01)
        .collect();
    let batch =
        RecordBatch::try_from_iter([("close", Arc::new(Float64Array::from(closes)) as ArrayRef)])?;
    let rows = batch.num_rows();
    let mut client = Client::connect(uri).await?;
    let mut secs = Vec::with_capacity(runs);
    for run in 0..=runs {
        let t0 = Instant::now();
        let put = client.put("upload", vec![batch.clone()]).await?;
        let dt = t0.elapsed().as_secs_f64();
        anyhow::ensure!(put.rows as usize == rows, "stored {} rows", put.rows);
        if run > 0 {
            secs.push(dt);
        }
    }
    println!("{}", serde_json::json!({"bytes": bytes, "secs": secs}));
    Ok(())
}
