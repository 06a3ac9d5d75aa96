//! `--metrics-listen`: Prometheus text at `/metrics`, counting what the server did.

use crate::common::*;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn scrape(addr: std::net::SocketAddr, path: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: sweepflight\r\nConnection: close\r\n\r\n");
    s.write_all(request.as_bytes()).await.unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).await.unwrap();
    text
}

/// A server with a metrics address, and a client that put dataset `s` (3,000 bars).
async fn with_metrics() -> (TestServer, std::net::SocketAddr, arrow_flight::FlightClient) {
    let server =
        TestServer::with(|c| c.metrics_listen = Some("127.0.0.1:0".parse().unwrap())).await;
    let addr = server.metrics_addr().expect("a metrics address");
    let mut c = server.client().await;
    put(&mut c, "s", vec![close_batch(&series(3_000))])
        .await
        .unwrap();
    (server, addr, c)
}

/// A counter's value on a metrics page.
fn counter(page: &str, name: &str) -> u64 {
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{page}"))
}

/// Waits until the server has kept `n` inputs' arrays at idle moments (the cache's fills).
async fn fills_reach(addr: std::net::SocketAddr, n: u64) {
    // A hang guard, not a timing bound: an idle server runs its fill at once.
    for _ in 0..3_000 {
        if counter(
            &scrape(addr, "/metrics").await,
            "sweepflight_cache_fills_total",
        ) >= n
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("no {n} cache fills in 30 s");
}

#[tokio::test]
async fn metrics_count_requests_errors_sweeps_and_levels() {
    let (_server, addr, mut c) = with_metrics().await;
    sweep(&mut c, json!({"dataset": "s", "lengths": [6, 10]}))
        .await
        .unwrap();
    sweep(&mut c, json!({"dataset": "s", "lengths": [6, 10]}))
        .await
        .unwrap();
    let err = sweep(&mut c, json!({"dataset": "nope", "lengths": [6]}))
        .await
        .unwrap_err();
    assert_eq!(code(&err), tonic::Code::NotFound);

    let page = scrape(addr, "/metrics").await;
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    // The second sweep read what the cache held (nothing yet: neither call kept anything on
    // its own time) and left a fill behind.
    assert_eq!(counter(&page, "sweepflight_cache_hits_total"), 0);
    for line in [
        "sweepflight_requests_total{method=\"DoAction\"} 3",
        "sweepflight_requests_total{method=\"DoPut\"} 1",
        "sweepflight_errors_total{code=\"NotFound\"} 1",
        "sweepflight_sweeps_completed_total 2",
        "sweepflight_datasets 1",
        "sweepflight_dataset_bytes 24000",
        "sweepflight_sweep_duration_seconds_count 2",
        "sweepflight_connections 1",
    ] {
        assert!(page.contains(line), "no {line:?} in\n{page}");
    }
    // Once the server was idle, the fill kept the input's arrays: the third sweep finds them.
    fills_reach(addr, 1).await;
    sweep(&mut c, json!({"dataset": "s", "lengths": [6, 10]}))
        .await
        .unwrap();
    let page = scrape(addr, "/metrics").await;
    assert!(counter(&page, "sweepflight_cache_hits_total") > 0, "{page}");
    assert!(scrape(addr, "/other").await.starts_with("HTTP/1.1 404"));

    // Long windows run on certified lines: their comparisons are counted, and the few the
    // bounds leave open (none on this walk) beside them.
    assert_eq!(
        counter(&page, "sweepflight_certified_compared_bars_total"),
        0
    );
    sweep(&mut c, json!({"dataset": "s", "lengths": [600]}))
        .await
        .unwrap();
    let page = scrape(addr, "/metrics").await;
    let compared = counter(&page, "sweepflight_certified_compared_bars_total");
    assert!(compared > 0, "{page}");
    assert!(counter(&page, "sweepflight_certified_recomputed_bars_total") <= compared);
}

#[tokio::test]
async fn a_formula_strategy_reads_its_function_series_back_from_the_cache() {
    let (_server, addr, mut c) = with_metrics().await;
    let hits = |page: &str| counter(page, "sweepflight_cache_hits_total");
    let body = |ks: &[f64]| {
        json!({"dataset": "s",
            "strategy": {"long": "close < sma(close, n) - k * std(close, n) and rsi(close, 14) < 35",
                         "short": "close > sma(close, n) + k * std(close, n)"},
            "grid": {"n": [10, 20], "k": ks}})
    };
    // The input's second sweep leaves a fill behind (the cache's admission), which keeps what
    // it computes; the third, with other k values, reads the five series (sma and std per n,
    // rsi) back.
    let first = sweep(&mut c, body(&[1.0, 2.0])).await.unwrap();
    sweep(&mut c, body(&[1.0, 2.0])).await.unwrap();
    fills_reach(addr, 1).await;
    let before = hits(&scrape(addr, "/metrics").await);
    let third = sweep(&mut c, body(&[1.0, 2.0, 3.0])).await.unwrap();
    let after = hits(&scrape(addr, "/metrics").await);
    assert!(after >= before + 5, "{before} -> {after}");
    // Read back, the results are those computed: the first call's rows of k = 1 and 2.
    let pnl = |b: &arrow_array::RecordBatch| {
        let col = b.column_by_name("pnl").unwrap();
        col.as_any()
            .downcast_ref::<arrow_array::Float64Array>()
            .unwrap()
            .values()
            .to_vec()
    };
    let (a, b) = (pnl(&first), pnl(&third));
    assert_eq!([a[0], a[1], a[2], a[3]], [b[0], b[1], b[3], b[4]]);
}

#[tokio::test]
async fn a_loop_of_calls_without_pause_keeps_its_arrays_by_its_third_call() {
    let (_server, addr, mut c) = with_metrics().await;
    let body = json!({"dataset": "s", "lengths": [6, 10, 14]});
    let want = sweep(&mut c, body.clone()).await.unwrap();
    // The second call leaves a fill behind; the third comes before the server is idle or
    // after (whichever it is), and either way the arrays are kept by the time it returns: by
    // the fill, or by the third call itself, which finds the fill still waiting.
    for _ in 0..2 {
        assert_eq!(sweep(&mut c, body.clone()).await.unwrap(), want);
    }
    let before = counter(
        &scrape(addr, "/metrics").await,
        "sweepflight_cache_hits_total",
    );
    assert_eq!(sweep(&mut c, body.clone()).await.unwrap(), want);
    let after = counter(
        &scrape(addr, "/metrics").await,
        "sweepflight_cache_hits_total",
    );
    assert!(
        after > before,
        "the fourth call read nothing from the cache"
    );
}

#[tokio::test]
async fn a_walk_forward_reads_its_folds_arrays_cut_from_the_whole_series() {
    let (_server, addr, mut c) = with_metrics().await;
    let hits = |page: &str| counter(page, "sweepflight_cache_hits_total");
    let before = hits(&scrape(addr, "/metrics").await);
    // 3,000 bars, folds of 1,000 + 500 bars: four. The prime sweeps the whole series once,
    // keeping each combo's sign bytes; every fold's sweeps (three combos in sample, the chosen
    // one on the test rows) read them cut to their rows instead of computing them.
    let body = json!({"dataset": "s", "lengths": [10, 20, 40],
        "folds": {"train": 1000, "test": 500}, "select": {"by": "pnl"}});
    let got = table(&mut c, "walk_forward", &body).await.unwrap();
    assert_eq!(got.num_rows(), 4);
    let after = hits(&scrape(addr, "/metrics").await);
    assert!(after >= before + 4 * (3 + 1), "{before} -> {after}");
}
