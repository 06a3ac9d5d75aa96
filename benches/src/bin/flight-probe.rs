//! `flight-probe`: one-in-flight latency of small Flight calls from a Rust client, to separate
//! server cost from client cost in the params-only floor.
//!
//! Usage: `flight-probe URI [N]` (URI: grpc://HOST:PORT). Needs a dataset `tiny` on the server.
//! Prints JSON: p50/p99 (microseconds) and n for DoAction echo (8 bytes) and a 1-combo sweep.

use std::time::Instant;

use arrow_flight::{Action, FlightClient};
use futures::TryStreamExt;
use tonic::transport::Channel;

fn pct(xs: &mut [u128], q: f64) -> f64 {
    xs.sort_unstable();
    xs[((xs.len() - 1) as f64 * q).round() as usize] as f64 / 1e3
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let uri = args
        .get(1)
        .ok_or_else(|| anyhow::anyhow!("usage: flight-probe URI [N]"))?
        .replace("grpc://", "http://");
    let n: usize = args.get(2).map_or(Ok(5000), |s| s.parse())?;
    let channel = Channel::from_shared(uri)?.connect().await?;
    let mut client = FlightClient::new(channel);
    let calls = [
        ("echo-8B", Action::new("echo", "xxxxxxxx")),
        (
            "sweep-1combo",
            Action::new("sweep", r#"{"dataset": "tiny", "lengths": [6]}"#),
        ),
    ];
    let mut out = serde_json::Map::new();
    for (name, action) in calls {
        let mut lat = Vec::with_capacity(n);
        for i in 0..n + 200 {
            let t0 = Instant::now();
            let r: Vec<_> = client
                .do_action(action.clone())
                .await?
                .try_collect()
                .await?;
            assert!(!r.is_empty());
            if i >= 200 {
                lat.push(t0.elapsed().as_nanos());
            }
        }
        let (p50, p99) = (pct(&mut lat, 0.5), pct(&mut lat, 0.99));
        out.insert(
            name.into(),
            serde_json::json!({"n": n, "p50_us": p50, "p99_us": p99}),
        );
    }
    println!("{}", serde_json::Value::Object(out));
    Ok(())
}
