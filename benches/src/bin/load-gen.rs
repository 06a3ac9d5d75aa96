//! `load-gen`: open-loop, fixed-rate load of params-only sweep calls, with latency measured
//! from each request's *intended* send time (so a stalled server cannot hide its queueing:
//! no coordinated omission), recorded in an HdrHistogram.
//!
//! Usage: `load-gen URI RATE COUNT [DATASET]`. Sends COUNT `sweep` actions (one 1-combo sweep
//! on DATASET, default `tiny`) at RATE per second over one HTTP/2 connection, each on its own
//! task, and prints JSON: offered and achieved rates, errors, p50/p90/p99/p99.9/max (us), n.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use arrow_flight::Action;
use arrow_flight::flight_service_client::FlightServiceClient;
use futures::StreamExt;
use hdrhistogram::Histogram;
use tonic::transport::Channel;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: load-gen URI RATE COUNT [DATASET]";
    let uri = args.get(1).context(usage)?.replace("grpc://", "http://");
    let rate: f64 = args.get(2).context(usage)?.parse()?;
    let count: u64 = args.get(3).context(usage)?.parse()?;
    let dataset = args.get(4).cloned().unwrap_or_else(|| "tiny".into());
    let channel = Channel::from_shared(uri)?
        .tcp_nodelay(true)
        .connect()
        .await?;
    let client = FlightServiceClient::new(channel);
    let body = serde_json::json!({"dataset": dataset, "lengths": [6]}).to_string();

    let hist = Arc::new(Mutex::new(Histogram::<u64>::new(3)?));
    let errors = Arc::new(Mutex::new(0u64));
    let interval = Duration::from_secs_f64(1.0 / rate);
    let start = Instant::now() + Duration::from_millis(50);
    let mut tasks = Vec::with_capacity(count as usize);
    for i in 0..count {
        let intended = start + interval.mul_f64(i as f64);
        tokio::time::sleep_until(intended.into()).await;
        let (mut client, hist, errors) = (client.clone(), Arc::clone(&hist), Arc::clone(&errors));
        let action = Action::new("sweep", body.clone());
        tasks.push(tokio::spawn(async move {
            let ok = match client.do_action(action).await {
                Ok(resp) => {
                    let mut stream = resp.into_inner();
                    let mut ok = true;
                    while let Some(r) = stream.next().await {
                        ok &= r.is_ok();
                    }
                    ok
                }
                Err(_) => false,
            };
            let done = Instant::now();
            let us = done.duration_since(intended).as_micros() as u64;
            if ok {
                hist.lock().expect("histogram").saturating_record(us.max(1));
            } else {
                *errors.lock().expect("errors") += 1;
            }
            done
        }));
    }
    let mut last = start;
    for t in tasks {
        last = last.max(t.await?);
    }
    let h = hist.lock().expect("histogram");
    let q = |p: f64| h.value_at_quantile(p);
    let out = serde_json::json!({
        "offered_rate": rate,
        "achieved_rate": h.len() as f64 / last.duration_since(start).as_secs_f64(),
        "n": h.len(),
        "errors": *errors.lock().expect("errors"),
        "p50_us": q(0.5), "p90_us": q(0.9), "p99_us": q(0.99), "p999_us": q(0.999), "max_us": h.max(),
    });
    println!("{out}");
    Ok(())
}
