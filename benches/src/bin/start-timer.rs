//! `start-timer`: how long the server takes to start over a data directory holding GB
//! gibibytes of datasets. Usage: `start-timer SERVER_BIN DATA_DIR GB RUNS`.
//!
//! Fills DATA_DIR through the server (512 MiB datasets of closes) until it holds GB GiB, then
//! starts the server RUNS times, timing spawn -> the "listening" line (printed once every
//! dataset is loaded, checksummed and validated), checks that everything is served, and
//! prints JSON seconds per start.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::Context;
use sweepflight_client::Client;

const DATASET_BYTES: u64 = 512 << 20;

fn start(bin: &str, dir: &str) -> anyhow::Result<(Child, String, f64)> {
    let t0 = Instant::now();
    let mut child = Command::new(bin)
        .args(["--listen", "127.0.0.1:0", "--data-dir", dir])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("spawn {bin}"))?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().context("stdout")?).read_line(&mut line)?;
    let secs = t0.elapsed().as_secs_f64();
    let uri = line
        .split_whitespace()
        .last()
        .context("no address line")?
        .to_owned();
    Ok((child, uri, secs))
}

fn stop(child: &mut Child) -> anyhow::Result<()> {
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()?;
    child.wait()?;
    Ok(())
}

async fn stored_bytes(uri: &str) -> anyhow::Result<(usize, u64)> {
    let list = Client::connect(uri).await?.list().await?;
    Ok((list.len(), list.iter().map(|d| d.bytes as u64).sum()))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: start-timer SERVER_BIN DATA_DIR GB RUNS";
    let bin = args.get(1).context(usage)?;
    let dir = args.get(2).context(usage)?;
    let want = args.get(3).context(usage)?.parse::<u64>()? << 30;
    let runs: usize = args.get(4).context(usage)?.parse()?;

    let (mut child, uri, _) = start(bin, dir)?;
    let (mut count, mut bytes) = stored_bytes(&uri).await?;
    if bytes < want {
        let closes: Vec<f64> = (0..DATASET_BYTES / 8)
            .map(|i| 100.0 + (i % 1000) as f64 * 0.01)
            .collect();
        let mut client = Client::connect(&uri).await?;
        while bytes < want {
            client.put_closes(&format!("bulk-{count}"), &closes).await?;
            (count, bytes) = (count + 1, bytes + DATASET_BYTES);
        }
    }
    stop(&mut child)?;

    let mut secs = Vec::with_capacity(runs);
    for _ in 0..runs {
        let (mut child, uri, s) = start(bin, dir)?;
        let served = stored_bytes(&uri).await?;
        anyhow::ensure!(
            served == (count, bytes),
            "served {served:?}, stored {count} / {bytes}"
        );
        stop(&mut child)?;
        secs.push(s);
    }
    println!(
        "{}",
        serde_json::json!({"datasets": count, "bytes": bytes, "secs": secs})
    );
    Ok(())
}
