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
    // The second sweep found what the first computed.
    let hits = page
        .lines()
        .find_map(|l| l.strip_prefix("sweepflight_cache_hits_total "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap();
    assert!(hits > 0, "{page}");
    assert!(scrape(addr, "/other").await.starts_with("HTTP/1.1 404"));

    // Long windows run on certified lines: their comparisons are counted, and the few the
    // bounds leave open (none on this walk) beside them.
    let counter = |page: &str, name: &str| {
        page.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no {name} in\n{page}"))
    };
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
    let hits = |page: &str| {
        page.lines()
            .find_map(|l| l.strip_prefix("sweepflight_cache_hits_total "))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no hits in\n{page}"))
    };
    let body = |ks: &[f64]| {
        json!({"dataset": "s",
            "strategy": {"long": "close < sma(close, n) - k * std(close, n) and rsi(close, 14) < 35",
                         "short": "close > sma(close, n) + k * std(close, n)"},
            "grid": {"n": [10, 20], "k": ks}})
    };
    // The input's second sweep offers what it computes (the cache's admission); the third,
    // with other k values, reads the five series (sma and std per n, rsi) back.
    let first = sweep(&mut c, body(&[1.0, 2.0])).await.unwrap();
    sweep(&mut c, body(&[1.0, 2.0])).await.unwrap();
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
