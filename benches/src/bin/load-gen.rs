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

fn main() -> anyhow::Result<()> {
    // Requests run on a one-worker runtime; the schedule runs on this thread with
    // `std::thread::sleep`, which wakes within tens of microseconds. tokio's timer has a
    // 1 ms resolution, which would add up to a millisecond of fake latency to every request.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    rt.block_on(run(rt.handle().clone()))
}

async fn run(handle: tokio::runtime::Handle) -> anyhow::Result<()> {
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

    // 1 us to 60 s at 3 significant digits; nothing is clamped below a minute.
    let hist = Arc::new(Mutex::new(Histogram::<u64>::new_with_bounds(
        1, 60_000_000, 3,
    )?));
    let errors = Arc::new(Mutex::new(0u64));
    let interval = Duration::from_secs_f64(1.0 / rate);
    let start = Instant::now() + Duration::from_millis(50);
    let shared = Shared {
        client,
        body,
        hist: Arc::clone(&hist),
        errors: Arc::clone(&errors),
    };
    let scheduler = std::thread::spawn(move || schedule(&handle, count, start, interval, &shared));
    let tasks = tokio::task::spawn_blocking(move || scheduler.join())
        .await?
        .map_err(|_| anyhow::anyhow!("scheduler panicked"))?;
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

/// What every request shares.
#[derive(Clone)]
struct Shared {
    client: FlightServiceClient<Channel>,
    body: String,
    hist: Arc<Mutex<Histogram<u64>>>,
    errors: Arc<Mutex<u64>>,
}

/// Sends request `i` at `start + i * interval`, each on its own task, and returns the tasks.
fn schedule(
    handle: &tokio::runtime::Handle,
    count: u64,
    start: Instant,
    interval: Duration,
    shared: &Shared,
) -> Vec<tokio::task::JoinHandle<Instant>> {
    let mut tasks = Vec::with_capacity(count as usize);
    for i in 0..count {
        let intended = start + interval.mul_f64(i as f64);
        if let Some(wait) = intended.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let Shared {
            mut client,
            body,
            hist,
            errors,
        } = shared.clone();
        let action = Action::new("sweep", body);
        tasks.push(handle.spawn(async move {
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
    tasks
}
