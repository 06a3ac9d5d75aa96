//! Every verb of the wire contract, happy paths, against a real server (in-process; the
//! signal tests run the binary).

use std::sync::Arc;

use crate::common::*;
use arrow_array::{ArrayRef, Float32Array, Int64Array, RecordBatch, StringArray};
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::{FlightData, FlightDescriptor, Ticket};
use arrow_schema::DataType;
use futures::TryStreamExt;
use serde_json::json;
use sweepflight_kernel::{Combo, paper, sweep as kernel_sweep};
use tonic::Code;

#[tokio::test]
async fn paper_sweep_over_flight_passes_the_equivalence_gate() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let put = put(&mut c, "paper", paper_batches()).await.unwrap();
    assert_eq!(put["dataset"], "paper");
    assert_eq!(put["rows"], 150_000);
    assert_eq!(put["version"], 1);
    assert!(put["bytes"].as_u64().unwrap() >= 1_200_000);

    let lengths = paper::lengths();
    let b = sweep(&mut c, json!({"dataset": "paper", "lengths": lengths}))
        .await
        .unwrap();
    let names: Vec<_> = b
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(
        &names[..9],
        &[
            "combo", "half", "full", "sqrt", "p3", "p2", "p", "pnl", "trades"
        ]
    );
    assert_eq!(i64s(&b, "combo"), (0..80).collect::<Vec<_>>());
    let results: Vec<_> = f64s(&b, "pnl")
        .into_iter()
        .zip(i64s(&b, "trades"))
        .map(|(pnl, t)| sweepflight_kernel::ComboResult {
            pnl,
            trades: t as u64,
            ..Default::default()
        })
        .collect();
    paper::check_gate(&results).unwrap();
    assert_eq!(i64s(&b, "trades")[0], 57_029);

    // The same combos as explicit tuples give the same table.
    let params: Vec<[u32; 6]> = paper::combos().iter().map(Combo::windows).collect();
    let p = sweep(&mut c, json!({"dataset": "paper", "params": params}))
        .await
        .unwrap();
    assert_eq!(p, b);
}

#[tokio::test]
async fn results_match_the_kernel_with_and_without_the_cache() {
    let cached = TestServer::start().await;
    let uncached = TestServer::with(|c| c.cache_bytes = 0).await;
    let close = series(5_000);
    let lengths: Vec<u32> = (1..120).step_by(7).collect();
    let combos: Vec<Combo> = lengths
        .iter()
        .map(|&l| Combo::from_length(l).unwrap())
        .collect();
    let want = kernel_sweep(&close, &combos, 0.001).unwrap();
    let body = json!({"dataset": "s", "lengths": lengths, "fee": 0.001});
    let mut tables = Vec::new();
    for server in [&cached, &uncached] {
        let mut c = server.client().await;
        put(&mut c, "s", vec![close_batch(&close)]).await.unwrap();
        // Three times each: on `cached`, the second call leaves a fill behind and the third
        // reads whatever it kept by then (all, some or none: the results are the same).
        for _ in 0..3 {
            let b = sweep(&mut c, body.clone()).await.unwrap();
            assert_eq!(
                f64s(&b, "pnl"),
                want.iter().map(|r| r.pnl).collect::<Vec<_>>()
            );
            assert_eq!(
                i64s(&b, "wins"),
                want.iter().map(|r| r.wins as i64).collect::<Vec<_>>()
            );
            assert_eq!(
                f64s(&b, "max_drawdown"),
                want.iter().map(|r| r.max_drawdown).collect::<Vec<_>>()
            );
            tables.push(b);
        }
    }
    assert!(tables.windows(2).all(|w| w[0] == w[1]));
}

#[tokio::test]
async fn catalog_verbs_describe_and_return_the_stored_rows() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    // Extra columns are kept; a float32 close is widened to float64.
    let batch = RecordBatch::try_from_iter([
        (
            "ts",
            Arc::new(Int64Array::from(vec![10, 20, 30])) as ArrayRef,
        ),
        (
            "close",
            Arc::new(Float32Array::from(vec![1.5, 2.0, 2.5])) as ArrayRef,
        ),
        (
            "venue",
            Arc::new(StringArray::from(vec!["x", "y", "z"])) as ArrayRef,
        ),
    ])
    .unwrap();
    put(&mut c, "ohlc", vec![batch.slice(0, 2), batch.slice(2, 1)])
        .await
        .unwrap();
    put(&mut c, "b", vec![close_batch(&[1.0])]).await.unwrap();
    assert_eq!(names(&mut c).await, ["b", "ohlc"]);

    let desc = FlightDescriptor::new_path(vec!["ohlc".into()]);
    let info = c.get_flight_info(desc.clone()).await.unwrap();
    assert_eq!(info.total_records, 3);
    assert_eq!(info.flight_descriptor.as_ref(), Some(&desc));
    let schema = c.get_schema(desc).await.unwrap();
    assert_eq!(
        schema.field_with_name("close").unwrap().data_type(),
        &DataType::Float64
    );
    assert_eq!(info.clone().try_decode_schema().unwrap(), schema);

    let ticket: Ticket = info.endpoint[0].ticket.clone().unwrap();
    let rows: Vec<RecordBatch> = c.do_get(ticket).await.unwrap().try_collect().await.unwrap();
    let all = arrow_select::concat::concat_batches(&rows[0].schema(), &rows).unwrap();
    assert_eq!(all.num_rows(), 3);
    assert_eq!(all.schema().as_ref(), &schema);
    assert_eq!(f64s(&all, "close"), [1.5, 2.0, 2.5]);
    assert_eq!(
        all.column_by_name("venue").unwrap(),
        batch.column_by_name("venue").unwrap()
    );
}

#[tokio::test]
async fn replace_bumps_the_version_and_drop_removes() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    assert_eq!(
        put(&mut c, "x", vec![close_batch(&series(100))])
            .await
            .unwrap()["version"],
        1
    );
    let v2 = put(&mut c, "x", vec![close_batch(&series(50))])
        .await
        .unwrap();
    assert_eq!(
        (v2["version"].as_u64(), v2["rows"].as_u64()),
        (Some(2), Some(50))
    );
    let info = c
        .get_flight_info(FlightDescriptor::new_path(vec!["x".into()]))
        .await
        .unwrap();
    assert_eq!(info.total_records, 50);

    let dropped: serde_json::Value =
        serde_json::from_slice(&action(&mut c, "drop", "x").await.unwrap()).unwrap();
    assert_eq!(dropped, json!({"dataset": "x", "version": 2}));
    assert!(names(&mut c).await.is_empty());
}

#[tokio::test]
async fn echo_action_list_actions_and_handshake() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let body: Vec<u8> = (0..=255).collect();
    assert_eq!(action(&mut c, "echo", body.clone()).await.unwrap(), body);
    let types: Vec<_> = c.list_actions().await.unwrap().try_collect().await.unwrap();
    let names: Vec<_> = types.iter().map(|t| t.r#type.as_str()).collect();
    assert_eq!(
        names,
        [
            "sweep",
            "echo",
            "drop",
            "stats",
            "strategies",
            "trades",
            "equity",
            "walk_forward",
            "submit",
            "status",
            "cancel",
            "CancelFlightInfo",
            "explain"
        ]
    );
    assert!(types.iter().all(|t| !t.description.is_empty()));
    assert_eq!(c.handshake("hello").await.unwrap(), "hello");
}

#[tokio::test]
async fn empty_lengths_give_an_empty_table_with_the_schema() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    put(&mut c, "x", vec![close_batch(&series(10))])
        .await
        .unwrap();
    let b = sweep(&mut c, json!({"dataset": "x", "lengths": []}))
        .await
        .unwrap();
    assert_eq!(b.num_rows(), 0);
    assert_eq!(b.schema().field(7).name(), "pnl");
}

#[tokio::test]
async fn large_results_span_several_result_messages() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    put(&mut c, "x", vec![close_batch(&series(300))])
        .await
        .unwrap();
    let lengths: Vec<u32> = (0..60_000).map(|i| 1 + i % 50).collect();
    let bodies: Vec<_> = c
        .do_action(arrow_flight::Action::new(
            "sweep",
            json!({"dataset": "x", "lengths": lengths}).to_string(),
        ))
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    // 60k rows x 12 columns x 8 bytes is ~5.8 MB: more than one 4 MiB body.
    assert!(bodies.len() >= 2, "{} bodies", bodies.len());
    assert!(bodies.iter().all(|b| b.len() <= 4 << 20));
    let joined = bodies.concat();
    let rows: usize = arrow_ipc::reader::StreamReader::try_new(joined.as_slice(), None)
        .unwrap()
        .map(|b| b.unwrap().num_rows())
        .sum();
    assert_eq!(rows, 60_000);
}

#[tokio::test]
async fn exchange_echo_and_stateless_sweep() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let batches = vec![close_batch(&series(1000)), close_batch(&series(500))];

    let echo = FlightDataEncoderBuilder::new()
        .with_flight_descriptor(Some(FlightDescriptor::new_cmd(r#"{"op": "echo"}"#)))
        .build(futures::stream::iter(batches.clone().into_iter().map(Ok)));
    let back: Vec<RecordBatch> = c
        .do_exchange(echo)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(back, batches);

    let close: Vec<f64> = series(1000).into_iter().chain(series(500)).collect();
    let combos: Vec<Combo> = [6, 10, 30]
        .iter()
        .map(|&l| Combo::from_length(l).unwrap())
        .collect();
    let want = kernel_sweep(&close, &combos, 0.0009).unwrap();
    let cmd = json!({"op": "sweep", "lengths": [6, 10, 30]});
    let out = exchange_sweep(&mut c, cmd, batches).await;
    assert_eq!(out.len(), 1);
    assert_eq!(
        f64s(&out[0], "pnl"),
        want.iter().map(|r| r.pnl).collect::<Vec<_>>()
    );
    // Nothing was stored.
    assert!(names(&mut c).await.is_empty());
}

async fn stats(c: &mut arrow_flight::FlightClient) -> serde_json::Value {
    serde_json::from_slice(&action(c, "stats", "").await.unwrap()).unwrap()
}

/// Polls `stats` until a sweep is running; panics if none starts within 10 s.
async fn wait_until_running(c: &mut arrow_flight::FlightClient) {
    for _ in 0..500 {
        if stats(c).await["sweeps_running"] == 1 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("the sweep never started");
}

/// Polls `stats` until no sweep is running (or gives up); the last stats.
async fn settled(c: &mut arrow_flight::FlightClient) -> serde_json::Value {
    let mut s = stats(c).await;
    for _ in 0..400 {
        if s["sweeps_running"] == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        s = stats(c).await;
    }
    s
}

/// A server holding the paper series, and a sweep body of ~200,000 long combos: minutes of
/// work if it ran to the end.
async fn server_with_a_long_sweep() -> (TestServer, arrow_flight::FlightClient, String) {
    let server = TestServer::with(|c| c.cache_bytes = 0).await;
    let mut c = server.client().await;
    put(&mut c, "paper", paper_batches()).await.unwrap();
    let lengths: Vec<u32> = (0..200_000).map(|i| 150 + i % 50).collect();
    let body = json!({"dataset": "paper", "lengths": lengths}).to_string();
    (server, c, body)
}

#[tokio::test]
async fn a_sweep_past_its_deadline_stops_computing() {
    let (server, mut c, body) = server_with_a_long_sweep().await;
    // The channel sends `grpc-timeout: 300m` with each call.
    let uri = server.uri().replace("grpc://", "http://");
    let channel = tonic::transport::Channel::from_shared(uri)
        .unwrap()
        .timeout(std::time::Duration::from_millis(300))
        .connect()
        .await
        .unwrap();
    let mut hurried = arrow_flight::FlightClient::new(channel);
    let err = action(&mut hurried, "sweep", body).await.unwrap_err();
    assert!(
        matches!(code(&err), Code::DeadlineExceeded | Code::Cancelled),
        "{err}"
    );
    let s = settled(&mut c).await;
    assert_eq!(s["sweeps_running"], 0, "{s}");
    assert_eq!(s["sweeps_cancelled"], 1, "{s}");
    assert_eq!(s["sweeps_completed"], 0, "{s}");
}

#[tokio::test]
async fn a_sweep_whose_caller_goes_away_stops_computing() {
    let (server, mut c, body) = server_with_a_long_sweep().await;
    let mut caller = server.client().await;
    let call = tokio::spawn(async move {
        let stream = caller
            .do_action(arrow_flight::Action::new("sweep", body))
            .await;
        stream.map(|_| ()).map_err(|e| e.to_string())
    });
    // Wait until the kernel is running, then hang up.
    wait_until_running(&mut c).await;
    call.abort();
    let _ = call.await;
    // The kernel notices between combos and the pool is free again.
    let s = settled(&mut c).await;
    assert_eq!(s["sweeps_running"], 0, "{s}");
    assert_eq!(s["sweeps_cancelled"], 1, "{s}");
    assert_eq!(s["sweeps_completed"], 0, "{s}");
    // And the server still sweeps.
    let b = sweep(&mut c, json!({"dataset": "paper", "lengths": [6]}))
        .await
        .unwrap();
    assert_eq!(i64s(&b, "trades"), [57_029]);
}

#[tokio::test]
async fn session_exchange_answers_each_request_in_order() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let close = series(2_000);
    put(&mut c, "s", vec![close_batch(&close)]).await.unwrap();
    let bodies = [
        json!({"dataset": "s", "lengths": [6]}),
        json!({"dataset": "s", "lengths": [10, 20], "fee": 0.0}),
    ];
    let replies = session(&mut c, &json!({"op": "session"}), &bodies)
        .await
        .unwrap();
    assert_eq!(replies.len(), 2);
    let want: Vec<f64> = [(6u32, 0.0009), (10, 0.0), (20, 0.0)]
        .iter()
        .map(|&(l, fee)| {
            kernel_sweep(&close, &[Combo::from_length(l).unwrap()], fee).unwrap()[0].pnl
        })
        .collect();
    let got: Vec<f64> = replies.iter().flat_map(|b| f64s(b, "pnl")).collect();
    assert_eq!(got, want);

    // A bad request ends the session with its code.
    let first = arrow_flight::FlightData::new()
        .with_descriptor(FlightDescriptor::new_cmd(r#"{"op": "session"}"#));
    let bad = arrow_flight::FlightData::new()
        .with_app_metadata(json!({"dataset": "nope", "lengths": [6]}).to_string());
    let stream = c
        .do_exchange(futures::stream::iter([Ok(first), Ok(bad)]))
        .await
        .unwrap();
    let err = stream.try_collect::<Vec<_>>().await.unwrap_err();
    assert_eq!(code(&err), tonic::Code::NotFound);
}

// Multi-threaded: the sweep's client keeps running while a blocking thread waits for the exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_a_running_sweep_finish_and_refuses_new_calls() {
    // The binary: its signal handling is what is tested.
    let server = BinaryServer::start(&["--cache-bytes", "0"]);
    let mut c = server.client().await;
    put(&mut c, "paper", paper_batches()).await.unwrap();
    // 2,000 long combos: seconds of work, so SIGTERM lands while it runs.
    let lengths: Vec<u32> = (0..2_000).map(|i| 150 + i % 50).collect();
    let body = json!({"dataset": "paper", "lengths": lengths});
    let mut caller = server.client().await;
    let call = tokio::spawn(async move { sweep(&mut caller, body).await });
    wait_until_running(&mut c).await;
    drop(c);
    let uri = server.uri().replace("grpc://", "http://");
    let exited = server.terminate_in_background(std::time::Duration::from_secs(60));
    // The call in flight completes, whole.
    let result = call.await.unwrap().expect("the running sweep finishes");
    assert_eq!(result.num_rows(), 2_000);
    let status = exited.await.unwrap().expect("the server exits");
    assert!(status.success(), "{status:?}");
    // And nothing listens any more.
    let refused = tonic::transport::Channel::from_shared(uri)
        .unwrap()
        .connect()
        .await;
    assert!(refused.is_err());
}

#[tokio::test]
async fn shutdown_ends_open_sessions_and_the_server_returns() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    put(&mut c, "s", vec![close_batch(&series(100))])
        .await
        .unwrap();
    // The client keeps its side of the session open: requests come from a channel.
    let (tx, rx) = futures::channel::mpsc::unbounded();
    tx.unbounded_send(Ok(arrow_flight::FlightData::new()
        .with_descriptor(FlightDescriptor::new_cmd(r#"{"op": "session"}"#))))
        .unwrap();
    tx.unbounded_send(Ok(arrow_flight::FlightData::new()
        .with_app_metadata(json!({"dataset": "s", "lengths": [6]}).to_string())))
        .unwrap();
    let mut replies = c.do_exchange(rx).await.unwrap();
    let first = futures::StreamExt::next(&mut replies)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.num_rows(), 1);

    let mut server = server.inner();
    server.trigger_shutdown();
    tokio::time::timeout(std::time::Duration::from_secs(20), server.finished())
        .await
        .expect("the server returns although a session is open")
        .expect("and returns Ok");
    // The session ended cleanly from the client's side too.
    assert!(
        futures::StreamExt::next(&mut replies)
            .await
            .is_none_or(|r| r.is_err())
    );
    drop(tx);
}

/// The v1.2 strategies through the `sweep` action: every row equals the oracle's run of that
/// combo (strategies.md, written plainly in `oracle`), for every strategy, with sides, stops,
/// rows and warm-up; parameter columns typed as the strategy says.
#[tokio::test]
async fn every_strategy_and_option_sweeps_as_the_oracle_runs_it() {
    use sweepflight_kernel::{Execution, Params, Side, Strategy as K, oracle};
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let close = series(4_000);
    put(&mut c, "s", vec![close_batch(&close)]).await.unwrap();
    let cases = [
        (
            json!({"strategy": "sma_cross", "grid": {"fast": [3, 5, 10], "slow": [20, 50]}}),
            K::SmaCross,
        ),
        (
            json!({"strategy": "ema_cross", "params": [[4, 30], [12, 26], [30, 4]]}),
            K::EmaCross,
        ),
        (
            json!({"strategy": "donchian", "grid": {"n": [5, 20, 55, 5000]}}),
            K::Donchian,
        ),
        (
            json!({"strategy": "rsi_revert", "grid": {"n": [2, 14], "lower": [20, 30.5], "upper": [70, 80]}}),
            K::RsiRevert,
        ),
        (json!({"lengths": [6, 20, 50]}), K::HmaSar),
    ];
    let options = [
        json!({}),
        json!({"side": "long", "stop_loss": 0.01}),
        json!({"side": "short", "take_profit": 0.015, "fee": 0.0}),
        json!({"rows": [1000, 3500], "warmup": 300, "stop_loss": 0.02, "take_profit": 0.02, "periods_per_year": 252}),
    ];
    for (combos, kind) in &cases {
        for opts in &options {
            let mut body = json!({"dataset": "s"});
            for part in [combos, opts] {
                body.as_object_mut()
                    .unwrap()
                    .extend(part.as_object().unwrap().clone());
            }
            let b = sweep(&mut c, body.clone()).await.unwrap();
            let names: Vec<&str> = kind.params().iter().map(|p| p.0).collect();
            let fields: Vec<String> = b
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            assert_eq!(&fields[1..1 + names.len()], names.as_slice(), "{body}");
            let side = match opts["side"].as_str() {
                Some("long") => Side::Long,
                Some("short") => Side::Short,
                _ => Side::Both,
            };
            let exec = Execution {
                side,
                stop_loss: opts["stop_loss"].as_f64(),
                take_profit: opts["take_profit"].as_f64(),
                ..Execution::new(opts["fee"].as_f64().unwrap_or(0.0009))
            };
            let rows = opts["rows"].as_array().map_or(0..close.len(), |r| {
                r[0].as_u64().unwrap() as usize..r[1].as_u64().unwrap() as usize
            });
            let warmup = opts["warmup"].as_u64().unwrap_or(0) as usize;
            let (pnl, trades) = (f64s(&b, "pnl"), i64s(&b, "trades"));
            assert!(trades.iter().any(|&t| t > 0), "{body}: no trades at all");
            for row in 0..b.num_rows() {
                let values: Vec<f64> = names
                    .iter()
                    .map(|n| {
                        let col = b.column_by_name(n).unwrap();
                        match col.data_type() {
                            DataType::Int64 => i64s(&b, n)[row] as f64,
                            _ => f64s(&b, n)[row],
                        }
                    })
                    .collect();
                let p = Params::new(*kind, &values).unwrap();
                let booked = oracle::run_trades(&close, rows.clone(), warmup, &p, &exec);
                let want = oracle::summarise(&booked);
                assert_eq!(trades[row] as u64, want.trades, "{body} row {row}");
                assert!((pnl[row] - want.pnl).abs() <= 1e-9, "{body} row {row}");
                // The v1.2 metric columns, nulls included, against the per-bar oracle.
                let ppy = opts["periods_per_year"].as_f64().unwrap_or(1.0);
                let m = oracle::metrics(&close, rows.clone(), &booked, ppy);
                let got = sweepflight_kernel::Metrics {
                    avg_trade: nullable(&b, "avg_trade", row),
                    best_trade: nullable(&b, "best_trade", row),
                    worst_trade: nullable(&b, "worst_trade", row),
                    profit_factor: nullable(&b, "profit_factor", row),
                    exposure: nullable(&b, "exposure", row),
                    avg_bars: nullable(&b, "avg_bars", row),
                    sharpe: nullable(&b, "sharpe", row),
                    sortino: nullable(&b, "sortino", row),
                    sqn: nullable(&b, "sqn", row),
                };
                assert!(got.close_to(&m), "{body} row {row}: {got:?} vs {m:?}");
            }
        }
    }
    // rsi_revert's bands are float64 columns, its window int64.
    let b = sweep(
        &mut c,
        json!({"dataset": "s", "strategy": "rsi_revert", "params": [[14, 30, 70]]}),
    )
    .await
    .unwrap();
    let schema = b.schema();
    assert_eq!(
        schema.field_with_name("n").unwrap().data_type(),
        &DataType::Int64
    );
    assert_eq!(
        schema.field_with_name("upper").unwrap().data_type(),
        &DataType::Float64
    );
}

/// A nullable float64 result column's value.
fn nullable(b: &RecordBatch, name: &str, row: usize) -> Option<f64> {
    let col = b
        .column_by_name(name)
        .unwrap()
        .as_any()
        .downcast_ref::<arrow_array::Float64Array>()
        .unwrap();
    arrow_array::Array::is_valid(col, row).then(|| col.value(row))
}

/// A `sample` is the same combos on every call, all valid; the `strategies` action lists what
/// a client may send; a session serves one strategy and refuses another.
#[tokio::test]
async fn samples_the_strategy_list_and_strategy_sessions() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    put(&mut c, "s", vec![close_batch(&series(2_000))])
        .await
        .unwrap();
    let body = json!({"dataset": "s", "strategy": "rsi_revert",
        "sample": {"n": 40, "seed": 11, "ranges": {"n": [2, 30], "lower": [10, 45], "upper": [40, 90]}}});
    let a = sweep(&mut c, body.clone()).await.unwrap();
    let b = sweep(&mut c, body).await.unwrap();
    assert_eq!(a, b);
    assert_eq!(a.num_rows(), 40);
    let (lower, upper) = (f64s(&a, "lower"), f64s(&a, "upper"));
    assert!(lower.iter().zip(&upper).all(|(l, u)| l < u));
    assert!(i64s(&a, "n").iter().all(|n| (2..=30).contains(n)));

    let list: serde_json::Value =
        serde_json::from_slice(&action(&mut c, "strategies", "").await.unwrap()).unwrap();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "hma_sar",
            "sma_cross",
            "ema_cross",
            "donchian",
            "rsi_revert"
        ]
    );
    assert_eq!(
        list[4]["params"][1],
        json!({"name": "lower", "type": "number"})
    );
    // v1.3: each built-in with its expression form (docs/language.md's table).
    assert_eq!(
        list[1]["formulas"],
        json!({"long": "cross_above(sma(close, fast), sma(close, slow))",
               "short": "cross_below(sma(close, fast), sma(close, slow))"})
    );
    assert_eq!(
        list[3]["formulas"]["long"],
        json!("close > lag(highest(close, n), 1)")
    );

    // A session for sma_cross: its schema first, then one reply per request.
    let open = FlightData::new().with_descriptor(FlightDescriptor::new_cmd(
        json!({"op": "session", "strategy": "sma_cross"}).to_string(),
    ));
    let ask = |body: serde_json::Value| FlightData::new().with_app_metadata(body.to_string());
    let msgs = vec![
        open,
        ask(json!({"dataset": "s", "strategy": "sma_cross", "params": [[5, 20]]})),
        ask(json!({"dataset": "s", "lengths": [6]})),
    ];
    let mut replies = c
        .do_exchange(futures::stream::iter(msgs.into_iter().map(Ok)))
        .await
        .unwrap();
    let mut got = Vec::new();
    let err = loop {
        match replies.try_next().await {
            Ok(Some(m)) => got.push(m),
            Ok(None) => panic!("the hma_sar request should end the session"),
            Err(e) => break e,
        }
    };
    assert_eq!(got.len(), 1, "one reply");
    assert_eq!(i64s(&got[0], "fast"), [5]);
    assert_eq!(code(&err), Code::InvalidArgument);
    assert!(err.to_string().contains("opened for sma_cross"), "{err}");
}

/// The stateless exchange sweep and a keyed universe take the same strategy fields.
#[tokio::test]
async fn strategies_on_exchanges_and_universes() {
    use sweepflight_kernel::{Execution, Params, oracle};
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let close = series(3_000);
    let cmd = json!({"op": "sweep", "strategy": "donchian", "params": [[20], [50]], "side": "long", "rows": [500, 3000], "warmup": 100});
    let b = exchange_sweep(&mut c, cmd, vec![close_batch(&close)]).await;
    let b = arrow_select::concat::concat_batches(&b[0].schema(), &b).unwrap();
    let exec = Execution {
        side: sweepflight_kernel::Side::Long,
        ..Execution::default()
    };
    for (row, n) in [20u32, 50].into_iter().enumerate() {
        let want = oracle::run(&close, 500..3000, 100, &Params::Donchian { n }, &exec);
        assert_eq!(i64s(&b, "trades")[row] as u64, want.trades);
        assert!((f64s(&b, "pnl")[row] - want.pnl).abs() <= 1e-9);
    }
    // A universe of two series of different lengths: series x combos, each its own run.
    let (a, z) = put_universe(&mut c, 1_500, 2_500).await;
    let b = sweep(
        &mut c,
        json!({"dataset": "u", "strategy": "ema_cross", "grid": {"fast": [5, 9], "slow": [21]}, "warmup": 50, "rows": [100, 2000]}),
    )
    .await
    .unwrap();
    assert_eq!(b.num_rows(), 4);
    let series_of = b.column(0).as_any().downcast_ref::<StringArray>().unwrap();
    for row in 0..4 {
        let close = if series_of.value(row) == "A" { &a } else { &z };
        let p = Params::EmaCross {
            fast: [5, 9][row % 2],
            slow: 21,
        };
        let want = oracle::run(
            close,
            100..2000.min(close.len()),
            50,
            &p,
            &Execution::default(),
        );
        assert_eq!(i64s(&b, "trades")[row] as u64, want.trades, "row {row}");
    }
}

/// LZ4_FRAME and ZSTD bodies (as pyarrow sends them with `IpcWriteOptions(compression=...)`)
/// store exactly the uncompressed data, for every close type, keyed puts and exchanges too.
#[tokio::test]
async fn compressed_uploads_store_exactly_the_uncompressed_data() {
    use arrow_ipc::CompressionType;
    use arrow_ipc::writer::IpcWriteOptions;
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let close = series(60_000);
    let int_close: Vec<i64> = (0..60_000).map(|i| 1_000 + (i % 97)).collect();
    let f32_close: Vec<f32> = close.iter().map(|&v| v as f32).collect();
    let columns: [(&str, ArrayRef); 3] = [
        (
            "f64",
            Arc::new(arrow_array::Float64Array::from(close.clone())),
        ),
        ("i64", Arc::new(Int64Array::from(int_close))),
        ("f32", Arc::new(Float32Array::from(f32_close))),
    ];
    for (kind, values) in columns {
        let sym: ArrayRef = Arc::new(StringArray::from_iter_values(
            (0..60_000).map(|i| if i % 3 == 0 { "A" } else { "B" }),
        ));
        let batch = RecordBatch::try_from_iter([("sym", sym), ("close", values)]).unwrap();
        put(&mut c, "plain", vec![batch.clone()]).await.unwrap();
        let plain = sweep(&mut c, json!({"dataset": "plain", "lengths": [6, 30]}))
            .await
            .unwrap();
        for codec in [CompressionType::LZ4_FRAME, CompressionType::ZSTD] {
            let options = IpcWriteOptions::default()
                .try_with_compression(Some(codec))
                .unwrap();
            let encode = |d: FlightDescriptor, b: RecordBatch| {
                FlightDataEncoderBuilder::new()
                    .with_options(options.clone())
                    .with_flight_descriptor(Some(d))
                    .build(futures::stream::iter([Ok(b)]))
            };
            let stream = encode(FlightDescriptor::new_path(vec!["z".into()]), batch.clone());
            let meta: Vec<_> = c.do_put(stream).await.unwrap().try_collect().await.unwrap();
            assert_eq!(meta.len(), 1, "{kind} {codec:?}");
            let got = sweep(&mut c, json!({"dataset": "z", "lengths": [6, 30]}))
                .await
                .unwrap();
            assert_eq!(got, plain, "{kind} {codec:?}");
            // What DoGet returns is the uploaded table, uncompressed.
            let info = infos(&mut c)
                .await
                .into_iter()
                .find(|i| i.flight_descriptor.as_ref().unwrap().path == ["z"])
                .unwrap();
            let back = rows(&mut c, &info).await;
            assert_eq!(
                back.column_by_name("sym").unwrap(),
                batch.column_by_name("sym").unwrap()
            );
            // Keyed, and through the stateless exchange.
            let keyed = sweepflight_protocol::PutTarget::keyed("zk", "sym").to_descriptor();
            let meta: Vec<_> = c
                .do_put(encode(keyed, batch.clone()))
                .await
                .unwrap()
                .try_collect()
                .await
                .unwrap();
            let summary: serde_json::Value = serde_json::from_slice(&meta[0].app_metadata).unwrap();
            assert_eq!(summary["series"], 2, "{kind} {codec:?}");
            let cmd = json!({"op": "sweep", "lengths": [6, 30]}).to_string();
            let req = encode(FlightDescriptor::new_cmd(cmd), batch.clone());
            let out: Vec<RecordBatch> = c
                .do_exchange(req)
                .await
                .unwrap()
                .try_collect()
                .await
                .unwrap();
            assert_eq!(out[0], plain, "exchange {kind} {codec:?}");
        }
    }
    // Many messages (the column grows in its mapping): prices to a tick, which compress, and
    // noise, which arrow-rs sends uncompressed inside a compressed body; stored exactly.
    let ticks: Vec<f64> = (0..300_000)
        .map(|i| ((1.1 + (f64::from(i) * 0.001).sin() * 0.01) * 1e5).round() / 1e5)
        .collect();
    let noise: Vec<f64> = (0..300_000u64)
        .map(|i| 1.0 + (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 11) as f64 / (1u64 << 53) as f64)
        .collect();
    for (what, values) in [("ticks", ticks), ("noise", noise)] {
        let batches: Vec<RecordBatch> = values.chunks(70_000).map(close_batch).collect();
        for codec in [CompressionType::LZ4_FRAME, CompressionType::ZSTD] {
            let options = IpcWriteOptions::default()
                .try_with_compression(Some(codec))
                .unwrap();
            let stream = FlightDataEncoderBuilder::new()
                .with_options(options)
                .with_flight_descriptor(Some(FlightDescriptor::new_path(vec!["m".into()])))
                .build(futures::stream::iter(batches.clone().into_iter().map(Ok)));
            let _: Vec<_> = c.do_put(stream).await.unwrap().try_collect().await.unwrap();
            let info = infos(&mut c)
                .await
                .into_iter()
                .find(|i| i.flight_descriptor.as_ref().unwrap().path == ["m"])
                .unwrap();
            assert_eq!(info.total_records, 300_000);
            let back = rows(&mut c, &info).await;
            assert_eq!(f64s(&back, "close"), values, "{what} {codec:?}");
        }
    }
}

/// `where`, `order_by`, `descending` and `top` on the server are the full result filtered,
/// sorted (ties by combo, nulls last) and cut, per series on a universe; `top` lets a grid past
/// `--max-combos` through up to `--max-grid-combos`.
#[tokio::test]
async fn selection_on_the_server_is_the_full_result_filtered_sorted_and_cut() {
    // Steps of 7 rows: every sweep with `top` below runs in steps, merged as it goes.
    let server = TestServer::with(|c| {
        c.max_combos = 200;
        c.max_grid_combos = 2_000;
        c.top_step_rows = 7;
    })
    .await;
    let mut c = server.client().await;
    put(&mut c, "s", vec![close_batch(&series(3_000))])
        .await
        .unwrap();
    // Repeated windows make exact ties; a long window makes null metrics.
    let params: Vec<[u32; 2]> = (0..180)
        .map(|i| [2 + i % 9, [20, 20, 3_000][i as usize % 3]])
        .collect();
    let body = json!({"dataset": "s", "strategy": "sma_cross", "params": params});
    let full = sweep(&mut c, body.clone()).await.unwrap();
    let combo = i64s(&full, "combo");
    let cases = [
        json!({"order_by": "sharpe", "top": 25}),
        json!({"order_by": "pnl", "descending": false}),
        json!({"where": {"trades": [5, null], "fast": [null, 6]}, "order_by": "trades", "top": 40}),
        json!({"where": {"sqn": [null, null]}, "top": 7}),
        json!({"where": {"sqn": [-1e9, 1e9]}}),
    ];
    for extra in cases {
        let mut b = body.clone();
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let got = sweep(&mut c, b).await.unwrap();
        // The same selection by hand on the full table.
        let value = |name: &str, r: usize| -> Option<f64> {
            let col = full.column_by_name(name).unwrap();
            let cast = arrow_cast::cast(col, &DataType::Float64).unwrap();
            let f = cast
                .as_any()
                .downcast_ref::<arrow_array::Float64Array>()
                .unwrap();
            arrow_array::Array::is_valid(f, r).then(|| f.value(r))
        };
        let mut rows: Vec<usize> = (0..full.num_rows())
            .filter(|&r| {
                extra["where"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .all(|(name, b)| {
                        let (lo, hi) = (b[0].as_f64(), b[1].as_f64());
                        match value(name, r) {
                            None => lo.is_none() && hi.is_none(),
                            Some(x) => lo.is_none_or(|l| x >= l) && hi.is_none_or(|h| x <= h),
                        }
                    })
            })
            .collect();
        if let Some(key) = extra["order_by"].as_str() {
            let desc = extra["descending"].as_bool().unwrap_or(true);
            rows.sort_by(|&a, &b| {
                let o = match (value(key, a), value(key, b)) {
                    (Some(x), Some(y)) => {
                        if desc {
                            y.total_cmp(&x)
                        } else {
                            x.total_cmp(&y)
                        }
                    }
                    (Some(_), None) => std::cmp::Ordering::Less,
                    (None, Some(_)) => std::cmp::Ordering::Greater,
                    (None, None) => std::cmp::Ordering::Equal,
                };
                o.then(combo[a].cmp(&combo[b]))
            });
        }
        if let Some(top) = extra["top"].as_u64() {
            rows.truncate(top as usize);
        }
        let want: Vec<i64> = rows.iter().map(|&r| combo[r]).collect();
        assert_eq!(i64s(&got, "combo"), want, "{extra}");
        assert_eq!(got.schema(), full.schema());
    }
    // 1,800 combos: past --max-combos without top, within --max-grid-combos with it.
    let big: Vec<[u32; 2]> = (0..1_800).map(|i| [1 + i % 40, 10 + i / 40]).collect();
    let wide = json!({"dataset": "s", "strategy": "sma_cross", "params": big});
    let e = sweep(&mut c, wide.clone()).await.unwrap_err();
    assert!(e.to_string().contains("--max-combos"), "{e}");
    let mut ranked = wide.clone();
    ranked["top"] = json!(10);
    ranked["order_by"] = json!("sqn");
    assert_eq!(sweep(&mut c, ranked).await.unwrap().num_rows(), 10);
    let mut too_many = wide;
    too_many["top"] = json!(201);
    let e = sweep(&mut c, too_many).await.unwrap_err();
    assert!(
        e.to_string().contains("201 rows") && e.to_string().contains("--max-combos"),
        "{e}"
    );

    // Combos a constraint skips are not counted (docs/language.md, "Constraint"): 20 x 20 =
    // 400 positions, 190 with fast < slow, within --max-combos (200); 21 x 21 keeps 210.
    let constrained = |n: u32| {
        let windows: Vec<u32> = (2..2 + n).collect();
        json!({"dataset": "s", "strategy": "sma_cross", "grid": {"fast": windows, "slow": windows},
               "constraint": "fast < slow"})
    };
    let kept = sweep(&mut c, constrained(20)).await.unwrap();
    assert_eq!(kept.num_rows(), 190);
    assert_eq!(*i64s(&kept, "combo").last().unwrap(), 18 * 20 + 19);
    let e = sweep(&mut c, constrained(21)).await.unwrap_err();
    assert_eq!(code(&e), tonic::Code::InvalidArgument);
    assert!(e.to_string().contains("--max-combos"), "{e}");
    let explained = action(&mut c, "explain", constrained(20).to_string())
        .await
        .unwrap();
    let explained: serde_json::Value = serde_json::from_slice(&explained).unwrap();
    assert_eq!(explained["combos"], 190);
    // With top: 60 x 60 = 3,600 positions past --max-grid-combos (2,000), 1,770 kept within
    // it, run in steps; past 16 x --max-grid-combos positions, refused without reading them.
    let mut ranked = constrained(60);
    ranked["top"] = json!(3);
    ranked["order_by"] = json!("pnl");
    let best = sweep(&mut c, ranked.clone()).await.unwrap();
    let all = sweep(&mut c, {
        let mut b = ranked.clone();
        b["top"] = json!(200);
        b
    })
    .await
    .unwrap();
    assert_eq!(i64s(&best, "combo"), i64s(&all, "combo")[..3]);
    let mut huge = ranked;
    huge["grid"]["fast"] = json!((1..=200).collect::<Vec<u32>>());
    huge["grid"]["slow"] = json!((1..=200).collect::<Vec<u32>>());
    let e = sweep(&mut c, huge).await.unwrap_err();
    assert_eq!(code(&e), tonic::Code::InvalidArgument);
    assert!(e.to_string().contains("40000 positions"), "{e}");
}

/// Puts the keyed universe `u` (key `sym`) of two series of different lengths: "A", a walk of
/// `a` rows, and "Z", the last 1,800 rows of a walk of `z_walk` rows; returns their closes.
async fn put_universe(
    c: &mut arrow_flight::FlightClient,
    a: usize,
    z_walk: usize,
) -> (Vec<f64>, Vec<f64>) {
    let (a, z) = (series(a), series(z_walk)[z_walk - 1_800..].to_vec());
    let keys: Vec<&str> = std::iter::repeat_n("A", a.len())
        .chain(std::iter::repeat_n("Z", z.len()))
        .collect();
    let closes: Vec<f64> = a.iter().chain(&z).copied().collect();
    let batch = RecordBatch::try_from_iter([
        ("sym", Arc::new(StringArray::from(keys)) as ArrayRef),
        (
            "close",
            Arc::new(arrow_array::Float64Array::from(closes)) as ArrayRef,
        ),
    ])
    .unwrap();
    let target = sweepflight_protocol::PutTarget::keyed("u", "sym");
    put_with(c, target.to_descriptor(), vec![batch])
        .await
        .unwrap();
    (a, z)
}

fn int8s(b: &RecordBatch, name: &str) -> Vec<i8> {
    b.column_by_name(name)
        .unwrap()
        .as_any()
        .downcast_ref::<arrow_array::Int8Array>()
        .unwrap()
        .values()
        .to_vec()
}

/// `trades`, `equity` and `block_pnl` on a universe of series of different lengths, with rows,
/// warm-up, a side and a stop: the oracle's trades exactly, its equity and blocks within 1e-6;
/// the selection chooses the combos as `sweep` would; `--max-trade-combos` bounds the reply.
#[tokio::test]
async fn trades_equity_and_blocks_are_the_oracle_over_flight() {
    use sweepflight_kernel::{Execution, Params, Side, oracle};
    // Steps of one combo a series: the chosen combos are merged across steps and series.
    let server = TestServer::with(|c| {
        c.max_trade_combos = 4;
        c.top_step_rows = 3;
    })
    .await;
    let mut c = server.client().await;
    let (a, z) = put_universe(&mut c, 1_500, 2_600).await;
    let pairs = [[5u32, 20], [9, 30], [3, 50]];
    let body = json!({"dataset": "u", "strategy": "sma_cross", "params": pairs, "side": "long",
                      "stop_loss": 0.01, "rows": [100, 1_700], "warmup": 50});
    let exec = Execution {
        side: Side::Long,
        stop_loss: Some(0.01),
        ..Execution::default()
    };
    let close_of = |s: &str| if s == "A" { &a } else { &z };
    let rows_of = |s: &str| 100..1_700.min(close_of(s).len());
    let oracle_trades = |s: &str, k: usize| {
        let p = Params::SmaCross {
            fast: pairs[k][0],
            slow: pairs[k][1],
        };
        oracle::run_trades(close_of(s), rows_of(s), 50, &p, &exec)
    };

    // Too many combos x series for --max-trade-combos: 3 x 2 > 4.
    let err = action(&mut c, "trades", body.to_string())
        .await
        .unwrap_err();
    assert_eq!(code(&err), Code::InvalidArgument, "{err}");
    assert!(err.to_string().contains("--max-trade-combos"), "{err}");

    // The best two by pnl per series: the rows `sweep` would return, then their trades.
    let mut chosen = body.clone();
    chosen["order_by"] = json!("pnl");
    chosen["top"] = json!(2);
    let best = sweep(&mut c, chosen.clone()).await.unwrap();
    let names = best
        .column(0)
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap();
    let mut want: Vec<(String, i64)> = (0..best.num_rows())
        .map(|r| (names.value(r).to_owned(), i64s(&best, "combo")[r]))
        .collect();
    // The best two of each series by the full table.
    let full = sweep(&mut c, body.clone()).await.unwrap();
    let full_names = full
        .column(0)
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap();
    let mut by_hand = Vec::new();
    for s in ["A", "Z"] {
        let mut rows: Vec<usize> = (0..full.num_rows())
            .filter(|&r| full_names.value(r) == s)
            .collect();
        rows.sort_by(|&x, &y| f64s(&full, "pnl")[y].total_cmp(&f64s(&full, "pnl")[x]));
        by_hand.extend(
            rows[..2]
                .iter()
                .map(|&r| (s.to_owned(), i64s(&full, "combo")[r])),
        );
    }
    assert_eq!(want, by_hand, "top 2 per series, in order");
    want.sort();
    let t = table(&mut c, "trades", &chosen).await.unwrap();
    assert_eq!(t.schema(), sweepflight_protocol::trades_schema(true));
    let t_names = t.column(0).as_any().downcast_ref::<StringArray>().unwrap();
    let (combo, trade, side) = (i64s(&t, "combo"), i64s(&t, "trade"), int8s(&t, "side"));
    let (entry, exit) = (i64s(&t, "entry_row"), i64s(&t, "exit_row"));
    let (entry_price, exit_price, pnl) = (
        f64s(&t, "entry_price"),
        f64s(&t, "exit_price"),
        f64s(&t, "pnl"),
    );
    let mut row = 0;
    for (s, k) in &want {
        let trades = oracle_trades(s, *k as usize);
        assert!(!trades.is_empty(), "{s} combo {k} trades");
        for (n, o) in trades.iter().enumerate() {
            assert_eq!(
                (t_names.value(row), combo[row], trade[row]),
                (s.as_str(), *k, n as i64)
            );
            assert_eq!(side[row], o.side);
            assert_eq!(
                (entry[row] as usize, exit[row] as usize),
                (o.entry_row, o.exit_row)
            );
            assert_eq!(
                (entry_price[row], exit_price[row]),
                (o.entry_price, o.exit_price)
            );
            assert!((pnl[row] - o.net).abs() <= 1e-6);
            row += 1;
        }
    }
    assert_eq!(row, t.num_rows(), "no other rows");

    // Their equity: one row per evaluated bar per combo.
    let e = table(&mut c, "equity", &chosen).await.unwrap();
    assert_eq!(e.schema(), sweepflight_protocol::equity_schema(true));
    let (e_row, position, equity) = (i64s(&e, "row"), int8s(&e, "position"), f64s(&e, "equity"));
    let mut at = 0;
    for (s, k) in &want {
        let curve = oracle::equity(close_of(s), rows_of(s), &oracle_trades(s, *k as usize));
        for (i, (p, q)) in rows_of(s).zip(curve) {
            assert_eq!((e_row[at] as usize, position[at]), (i, p), "{s} {k}");
            assert!((equity[at] - q).abs() <= 1e-6, "{s} {k} row {i}");
            at += 1;
        }
    }
    assert_eq!(at, e.num_rows());

    // Blocks: the equity's change over each block, summing to pnl.
    let mut blocked = body.clone();
    blocked["blocks"] = json!(7);
    let b = sweep(&mut c, blocked.clone()).await.unwrap();
    let list = b
        .column_by_name("block_pnl")
        .unwrap()
        .as_any()
        .downcast_ref::<arrow_array::FixedSizeListArray>()
        .unwrap();
    assert_eq!(list.value_length(), 7);
    let b_names = b.column(0).as_any().downcast_ref::<StringArray>().unwrap();
    for r in 0..b.num_rows() {
        let s = b_names.value(r);
        let k = i64s(&b, "combo")[r] as usize;
        let want = oracle::block_pnl(close_of(s), rows_of(s), &oracle_trades(s, k), 7);
        let got = list.value(r);
        let got = got
            .as_any()
            .downcast_ref::<arrow_array::Float64Array>()
            .unwrap();
        for (x, y) in got.values().iter().zip(&want) {
            assert!((x - y).abs() <= 1e-6, "{s} combo {k}: {got:?} vs {want:?}");
        }
        assert!((got.values().iter().sum::<f64>() - f64s(&b, "pnl")[r]).abs() <= 1e-6);
    }
    // The same through sessions opened for trades and for equity: one reply per message, the
    // action's table.
    for (action, want) in [("trades", &t), ("equity", &e)] {
        let cmd =
            json!({"op": "session", "keyed": true, "strategy": "sma_cross", "action": action});
        let replies = session(&mut c, &cmd, &[chosen.clone(), chosen.clone()])
            .await
            .unwrap();
        assert_eq!(replies.len(), 2, "{action}");
        for r in &replies {
            assert_eq!(r, want, "{action}");
        }
    }
    // A sweep session refuses blocks: its replies share one schema.
    let cmd = json!({"op": "session", "keyed": true, "strategy": "sma_cross"});
    let err = session(&mut c, &cmd, std::slice::from_ref(&blocked))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("`blocks` adds a column"), "{err}");

    // More blocks than a series has evaluated rows: refused, naming it.
    blocked["blocks"] = json!(64);
    blocked["rows"] = json!([0, 60]);
    let err = sweep(&mut c, blocked).await.unwrap_err();
    assert_eq!(code(&err), Code::InvalidArgument, "{err}");
    let message = err.to_string();
    assert!(
        message.contains("A") && message.contains("has only 60 evaluated rows"),
        "{err}"
    );
}
