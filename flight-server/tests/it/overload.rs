//! The sweep memory budget under concurrent load, against the real binary (whose peak resident
//! memory, VmHWM, is read from /proc): every completed sweep is correct, every refused one says
//! the server is busy, callers whose deadline passes or who hang up leave the queue, nothing
//! hangs, the server's peak memory stays within datasets + cache + budget + a fixed overhead,
//! and once it is quiet its resident memory falls back to datasets + cache + that overhead.

use std::time::Duration;

use crate::common::*;
use arrow_array::RecordBatch;
use serde_json::json;
use sweepflight_kernel::{Combo, sweep as kernel_sweep};
use tonic::Code;

const MIB: u64 = 1 << 20;
const BUDGET: u64 = 64 * MIB;
const CACHE: u64 = 16 * MIB;
/// The server's own memory besides data, cache and sweeps: binary, runtime, thread stacks,
/// allocator slack, request and reply buffers (the debug binary holds ~40 MB idle here).
const OVERHEAD: u64 = 100 * MIB;
/// What may stay resident after a burst besides the cache: the allocator's per-thread caches
/// and the runtime's buffers.
const SLACK: u64 = 16 * MIB;
const BARS: usize = 400_000;
const SERIES: usize = 6;

fn walk(seed: u64) -> Vec<f64> {
    let mut p = 100.0;
    (0..BARS)
        .map(|i| {
            let t = i as f64 + seed as f64 * 1_000.0;
            p *= 1.0 + 0.001 * ((t * 0.37).sin() + (t * 0.011 * (1.0 + seed as f64)).cos());
            p
        })
        .collect()
}

/// 20 long lengths: each sweep wants ~100 arrays of 3.2 MB, several times the budget, so it
/// runs in groups and the sweeps queue for memory.
fn lengths() -> Vec<u32> {
    (0..20).map(|i| 150 + 3 * i).collect()
}

fn server(max_queued: usize) -> BinaryServer {
    BinaryServer::start(&[
        "--sweep-memory-bytes",
        &BUDGET.to_string(),
        "--cache-bytes",
        &CACHE.to_string(),
        "--max-queued-sweeps",
        &max_queued.to_string(),
        "--threads",
        "2",
    ])
}

fn peak_rss(pid: u32) -> u64 {
    status_bytes(pid, "VmHWM:")
}

fn rss(pid: u32) -> u64 {
    status_bytes(pid, "VmRSS:")
}

/// A memory figure of /proc/PID/status, in bytes.
fn status_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    kb * 1024
}

async fn stats(c: &mut arrow_flight::FlightClient) -> serde_json::Value {
    serde_json::from_slice(&action(c, "stats", "").await.unwrap()).unwrap()
}

fn pnl_and_trades(b: &RecordBatch) -> Vec<(f64, i64)> {
    f64s(b, "pnl").into_iter().zip(i64s(b, "trades")).collect()
}

/// Waits until the server has no sweep running or queued.
async fn idle(c: &mut arrow_flight::FlightClient) -> serde_json::Value {
    for _ in 0..600 {
        let s = stats(c).await;
        if s["sweeps_running"] == 0 && s["sweeps_queued"] == 0 {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the server never went idle: {}", stats(c).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_budget_holds_overload_is_refused_and_leavers_leave_the_queue() {
    let mut srv = server(8);
    let mut c = srv.client().await;
    let closes: Vec<Vec<f64>> = (0..SERIES as u64).map(walk).collect();
    for (i, close) in closes.iter().enumerate() {
        put(&mut c, &format!("s{i}"), vec![close_batch(close)])
            .await
            .unwrap();
    }
    let combos: Vec<Combo> = lengths()
        .iter()
        .map(|&l| Combo::from_length(l).unwrap())
        .collect();
    // Resident memory with the datasets stored, before any sweep.
    let base = rss(srv.process().pid());

    // 1. Many sweeps on distinct large series at once: all queue for the budget, all correct.
    let tasks: Vec<_> = (0..SERIES)
        .map(|i| {
            let uri = srv.uri().to_owned();
            tokio::spawn(async move {
                let mut c = connect(&uri).await;
                sweep(
                    &mut c,
                    json!({"dataset": format!("s{i}"), "lengths": lengths()}),
                )
                .await
            })
        })
        .collect();
    for (i, t) in tasks.into_iter().enumerate() {
        let got = t.await.unwrap().expect("a queued sweep completes");
        let want = kernel_sweep(&closes[i], &combos, 0.0009).unwrap();
        let want: Vec<(f64, i64)> = want.iter().map(|r| (r.pnl, r.trades as i64)).collect();
        assert_eq!(pnl_and_trades(&got), want, "series {i}");
    }

    // 2. Many small sweeps from many clients: all answered, all correct.
    let small = kernel_sweep(&closes[0], &[Combo::from_length(6).unwrap()], 0.0009).unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let uri = srv.uri().to_owned();
            tokio::spawn(async move {
                let mut c = connect(&uri).await;
                let mut out = Vec::new();
                for _ in 0..10 {
                    out.push(sweep(&mut c, json!({"dataset": "s0", "lengths": [6]})).await);
                }
                out
            })
        })
        .collect();
    for t in tasks {
        for r in t.await.unwrap() {
            let b = r.expect("a small sweep");
            assert_eq!(i64s(&b, "trades"), [small[0].trades as i64]);
        }
    }

    // 3. Callers that time out while queued leave the queue at once.
    let blocker = {
        let uri = srv.uri().to_owned();
        // 120 windows ten times the usual ones: seconds of work (~50 G multiply-adds).
        let long: Vec<u32> = (0..120).map(|i| 2_000 + 4 * i).collect();
        tokio::spawn(async move {
            let mut c = connect(&uri).await;
            sweep(&mut c, json!({"dataset": "s1", "lengths": long})).await
        })
    };
    // Wait until the blocker holds the budget.
    for _ in 0..400 {
        if stats(&mut c).await["sweeps_running"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let hurried: Vec<_> = (0..3)
        .map(|i| {
            let uri = srv.uri().replace("grpc://", "http://");
            tokio::spawn(async move {
                let channel = tonic::transport::Channel::from_shared(uri)
                    .unwrap()
                    .timeout(Duration::from_millis(150))
                    .connect()
                    .await
                    .unwrap();
                let mut c = arrow_flight::FlightClient::new(channel);
                sweep(
                    &mut c,
                    json!({"dataset": format!("s{}", 2 + i), "lengths": lengths()}),
                )
                .await
            })
        })
        .collect();
    // And one that hangs up while queued.
    let leaver = {
        let uri = srv.uri().to_owned();
        tokio::spawn(async move {
            let mut c = connect(&uri).await;
            sweep(&mut c, json!({"dataset": "s5", "lengths": lengths()})).await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    leaver.abort();
    for h in hurried {
        let err = h.await.unwrap().unwrap_err();
        assert!(
            matches!(code(&err), Code::DeadlineExceeded | Code::Cancelled),
            "{err}"
        );
    }
    // The leavers are out of the queue (within the server's own deadline timers) long before
    // the blocker finishes.
    let mut s = stats(&mut c).await;
    for _ in 0..50 {
        if s["sweeps_queued"] == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        s = stats(&mut c).await;
    }
    assert_eq!(s["sweeps_queued"], 0, "{s}");
    assert!(
        !blocker.is_finished(),
        "the blocker ended first: the test proves nothing"
    );
    blocker.await.unwrap().expect("the blocker completes");
    idle(&mut c).await;

    let peak = peak_rss(srv.process().pid());
    let datasets = (SERIES * BARS * 8) as u64;
    let bound = datasets + CACHE + BUDGET + OVERHEAD;
    println!(
        "peak RSS {} MiB <= datasets {} + cache {} + budget {} + overhead {} = {} MiB",
        peak / MIB,
        datasets / MIB,
        CACHE / MIB,
        BUDGET / MIB,
        OVERHEAD / MIB,
        bound / MIB
    );
    assert!(peak <= bound, "peak RSS {peak} over the bound {bound}");

    // Once the server is quiet, the burst's memory goes back to the OS (crate::compute::trim): resident
    // memory falls back to what it was before the sweeps plus the cache they filled, with no
    // call to make it happen.
    let settled_bound = base + CACHE + SLACK;
    let quiet = std::time::Instant::now();
    let mut settled = rss(srv.process().pid());
    // The trim comes 2 s after the last call; without it, memory lingers far longer.
    for _ in 0..40 {
        if settled <= settled_bound {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        settled = rss(srv.process().pid());
    }
    println!(
        "resident {:.1} s after the burst: {} MiB <= before {} + cache {} + slack {} MiB",
        quiet.elapsed().as_secs_f64(),
        settled / MIB,
        base / MIB,
        CACHE / MIB,
        SLACK / MIB
    );
    assert!(
        settled <= settled_bound,
        "resident {settled} stays over {settled_bound} when idle"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_past_the_queue_is_refused_as_busy() {
    let srv = server(1);
    let mut c = srv.client().await;
    let close = walk(9);
    put(&mut c, "s", vec![close_batch(&close)]).await.unwrap();
    let tasks: Vec<_> = (0..6)
        .map(|_| {
            let uri = srv.uri().to_owned();
            tokio::spawn(async move {
                let mut c = connect(&uri).await;
                sweep(&mut c, json!({"dataset": "s", "lengths": lengths()})).await
            })
        })
        .collect();
    let want = kernel_sweep(
        &close,
        &lengths()
            .iter()
            .map(|&l| Combo::from_length(l).unwrap())
            .collect::<Vec<_>>(),
        0.0009,
    )
    .unwrap();
    let (mut done, mut refused) = (0, 0);
    for t in tasks {
        match t.await.unwrap() {
            Ok(b) => {
                assert_eq!(
                    i64s(&b, "trades"),
                    want.iter().map(|r| r.trades as i64).collect::<Vec<_>>()
                );
                done += 1;
            }
            Err(e) => {
                assert_eq!(code(&e), Code::ResourceExhausted, "{e}");
                assert!(e.to_string().contains("busy"), "{e}");
                refused += 1;
            }
        }
    }
    // One runs, one waits: of six at once, at least four are refused.
    assert!(done >= 2 && refused >= 1, "{done} done, {refused} refused");
    let s = idle(&mut c).await;
    assert_eq!(s["sweeps_refused"], refused, "{s}");
    // And the server still sweeps.
    assert_eq!(
        sweep(&mut c, json!({"dataset": "s", "lengths": [6]}))
            .await
            .unwrap()
            .num_rows(),
        1
    );
}
