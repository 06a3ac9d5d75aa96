//! The typed client against a real server (in-process): every method, TCP and Unix socket,
//! chunked sweeps, sessions, errors with their codes.

use std::sync::Arc;
use std::time::Duration;

use crate::support::params_of;
use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch};
use sweepflight_client::{Client, Error, SweepRequest};
use sweepflight_kernel::{Combo, paper, sweep};
use sweepflight_server::testing::TestServer;
use sweepflight_server::{Listen, ServerConfig};
use tonic::Code;

fn series(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| 100.0 + (i as f64 * 0.21).sin() * 3.0 + (i as f64 * 0.013).cos() * 4.0)
        .collect()
}

async fn server(configure: impl FnOnce(&mut ServerConfig)) -> TestServer {
    TestServer::start(configure).await
}

async fn unix_server(dir: &std::path::Path) -> TestServer {
    let path = dir.join("sf.sock");
    TestServer::start(|c| c.listen = Listen::Unix(path)).await
}

#[tokio::test]
async fn put_sweep_and_catalog() {
    let s = server(|_| {}).await;
    let mut c = Client::connect(s.uri()).await.unwrap();
    let close = series(5_000);
    let put = c.put_closes("s", &close).await.unwrap();
    assert_eq!(
        (put.dataset.as_str(), put.rows, put.version),
        ("s", 5_000, 1)
    );

    let lengths: Vec<u32> = (2..90).step_by(3).collect();
    let result = c
        .sweep(&SweepRequest::lengths("s", lengths.clone()).with_fee(0.001))
        .await
        .unwrap();
    let combos: Vec<Combo> = lengths
        .iter()
        .map(|&l| Combo::from_length(l).unwrap())
        .collect();
    assert_eq!(
        crate::support::results(&result),
        sweep(&close, &combos, 0.001).unwrap()
    );
    let rows = result.rows();
    assert_eq!(rows[0].params, [1.0, 2.0, 1.0, 1.0, 1.0, 1.0]);
    assert_eq!(rows.last().unwrap().combo as usize, lengths.len() - 1);

    let explicit = c
        .sweep(&SweepRequest::params("s", params_of(&combos)).with_fee(0.001))
        .await
        .unwrap();
    assert_eq!(explicit, result);

    let info = c.info("s").await.unwrap();
    assert_eq!((info.rows, info.version), (5_000, Some(1)));
    assert_eq!(c.list().await.unwrap().len(), 1);
    let got = c.get("s").await.unwrap();
    let values: Vec<f64> = got
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_any()
                .downcast_ref::<Float64Array>()
                .unwrap()
                .values()
                .to_vec()
        })
        .collect();
    assert_eq!(values, close);
    assert_eq!(c.echo("hi").await.unwrap(), "hi");
    assert_eq!(c.drop("s").await.unwrap(), Some(1));
    assert!(c.list().await.unwrap().is_empty());
}

#[tokio::test]
async fn paper_gate_over_a_unix_socket() {
    let dir = tempfile::tempdir().unwrap();
    let s = unix_server(dir.path()).await;
    assert!(s.uri().starts_with("grpc+unix://"));
    let mut c = Client::connect(s.uri()).await.unwrap();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../kernel/testdata/paper-close.arrow");
    let batches: Vec<RecordBatch> =
        arrow_ipc::reader::FileReader::try_new(std::fs::File::open(path).unwrap(), None)
            .unwrap()
            .map(Result::unwrap)
            .collect();
    assert_eq!(c.put("paper", batches).await.unwrap().rows, 150_000);
    let result = c
        .sweep(&SweepRequest::lengths("paper", paper::lengths()))
        .await
        .unwrap();
    paper::check_gate(&crate::support::results(&result)).unwrap();
}

#[tokio::test]
async fn chunked_sweep_equals_one_call() {
    let s = server(|c| c.max_combos = 500).await;
    let mut c = Client::connect(s.uri()).await.unwrap();
    c.put_closes("s", &series(600)).await.unwrap();
    let lengths: Vec<u32> = (0..2_000).map(|i| 1 + i % 97).collect();
    let request = SweepRequest::lengths("s", lengths);
    let err = c.sweep(&request).await.unwrap_err();
    assert_eq!(err.code(), Some(Code::InvalidArgument), "{err}");
    let mut seen = Vec::new();
    let chunked = c
        .sweep_chunked(&request, 500, |done| seen.push(done))
        .await
        .unwrap();
    assert_eq!(seen, [500, 1_000, 1_500, 2_000]);
    let combo = chunked
        .batch
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
    assert_eq!(combo.values().to_vec(), (0..2_000).collect::<Vec<i64>>());
    let unlimited = server(|_| {}).await;
    let mut whole = Client::connect(unlimited.uri()).await.unwrap();
    whole.put_closes("s", &series(600)).await.unwrap();
    assert_eq!(whole.sweep(&request).await.unwrap(), chunked);
}

#[tokio::test]
async fn errors_carry_codes_and_messages() {
    let s = server(|c| c.max_dataset_bytes = 4000).await;
    let mut c = Client::connect(s.uri()).await.unwrap();
    let err = c
        .sweep(&SweepRequest::lengths("nope", [6]))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(Code::NotFound));
    assert!(err.to_string().contains("`nope` not found"), "{err}");
    let bad = RecordBatch::try_from_iter([(
        "close",
        Arc::new(Float64Array::from(vec![1.0, f64::NAN])) as ArrayRef,
    )])
    .unwrap();
    let err = c.put("bad", vec![bad]).await.unwrap_err();
    assert_eq!(err.code(), Some(Code::InvalidArgument));
    assert!(err.to_string().contains("row 1: is NaN"), "{err}");
    let err = c.put_closes("big", &series(1_000)).await.unwrap_err();
    assert_eq!(err.code(), Some(Code::ResourceExhausted), "{err}");
    assert!(matches!(
        Client::connect("grpc+unix:///nonexistent/sf.sock").await,
        Err(Error::Connect { .. })
    ));
    assert!(matches!(
        Client::connect("http://x").await,
        Err(Error::BadUri { .. })
    ));
}

#[tokio::test]
async fn action_sessions_answer_as_their_actions() {
    use sweepflight_client::{Folds, SessionReply, Strategy, WalkForwardRequest};
    let s = server(|_| {}).await;
    let mut c = Client::connect(s.uri()).await.unwrap();
    c.put_closes("s", &series(3_000)).await.unwrap();
    let request = SweepRequest::lengths("s", [6, 20, 40]);
    let mut trades = c
        .action_session(SessionReply::Trades, Strategy::default(), false)
        .await
        .unwrap();
    for _ in 0..2 {
        let got = trades.trades(&request).await.unwrap();
        assert!(got.num_rows() > 0);
        assert_eq!(got, c.trades(&request).await.unwrap());
    }
    // A call the session does not answer is refused before anything is sent.
    let wrong = trades.sweep(&request).await.unwrap_err();
    assert!(matches!(wrong, Error::InvalidRequest(_)), "{wrong:?}");
    assert_eq!(
        trades.trades(&request).await.unwrap(),
        c.trades(&request).await.unwrap()
    );
    trades.close().await.unwrap();
    let folds = Folds::Rolling {
        train: 1_000,
        test: 500,
        step: 500,
        anchored: false,
    };
    let walk = WalkForwardRequest::new(request.clone(), folds, "pnl", true).unwrap();
    let mut session = c
        .action_session(SessionReply::WalkForward, Strategy::default(), false)
        .await
        .unwrap();
    let got = session.walk_forward(&walk).await.unwrap();
    assert_eq!(got.num_rows(), 4);
    assert_eq!(got, c.walk_forward(&walk).await.unwrap());
    session.close().await.unwrap();
}

#[tokio::test]
async fn session_sweeps_equal_action_sweeps_until_an_error_ends_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = unix_server(dir.path()).await;
    let mut c = Client::connect(s.uri()).await.unwrap();
    c.put_closes("s", &series(3_000)).await.unwrap();
    let mut session = c.session().await.unwrap();
    for lengths in [vec![6], vec![6, 50, 120], (2..40).collect()] {
        let request = SweepRequest::lengths("s", lengths).with_fee(0.002);
        let on_session = session.sweep(&request).await.unwrap();
        assert_eq!(on_session, c.sweep(&request).await.unwrap());
    }
    // A sweep given up after it was sent (polled once, then dropped) leaves its reply behind;
    // the next sweep gets its own.
    let dropped = SweepRequest::lengths("s", [30]);
    let _ = tokio::time::timeout(Duration::ZERO, session.sweep(&dropped)).await;
    let next = SweepRequest::lengths("s", [8]);
    assert_eq!(
        session.sweep(&next).await.unwrap(),
        c.sweep(&next).await.unwrap()
    );
    session.close().await.unwrap();

    let mut session = c.session().await.unwrap();
    let err = session
        .sweep(&SweepRequest::lengths("nope", [6]))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(Code::NotFound), "{err}");
    let after = session.sweep(&SweepRequest::lengths("s", [6])).await;
    assert!(matches!(after, Err(Error::SessionEnded)), "{after:?}");

    // Shutdown ends an open session (after its current request) instead of waiting on it.
    let mut session = c.session().await.unwrap();
    session
        .sweep(&SweepRequest::lengths("s", [6]))
        .await
        .unwrap();
    s.trigger_shutdown();
    tokio::time::timeout(Duration::from_secs(20), s.finished())
        .await
        .expect("the server returns although a session is open")
        .unwrap();
    let after = session.sweep(&SweepRequest::lengths("s", [6])).await;
    assert!(matches!(after, Err(Error::SessionEnded)), "{after:?}");
}

#[tokio::test]
async fn keyed_universes_by_series_and_rows_and_chunks() {
    let s = server(|_| {}).await;
    let mut c = Client::connect(s.uri()).await.unwrap();
    let symbols = ["X", "Y", "Z"];
    let closes: Vec<Vec<f64>> = (0..3).map(|k| series(1_500 + 100 * k)).collect();
    let mut sym_col = Vec::new();
    let mut close_col = Vec::new();
    for (sym, values) in symbols.iter().zip(&closes) {
        sym_col.extend(std::iter::repeat_n(*sym, values.len()));
        close_col.extend_from_slice(values);
    }
    let batch = RecordBatch::try_from_iter([
        (
            "symbol",
            Arc::new(arrow_array::StringArray::from(sym_col)) as ArrayRef,
        ),
        ("close", Arc::new(Float64Array::from(close_col)) as ArrayRef),
    ])
    .unwrap();
    let put = c.put_keyed("u", "symbol", vec![batch]).await.unwrap();
    assert_eq!(put.series, Some(3));
    let info = c.info("u").await.unwrap();
    assert_eq!(
        (info.key.as_deref(), info.series),
        (Some("symbol"), Some(3))
    );

    let lengths: Vec<u32> = (2..60).step_by(4).collect();
    let rows = sweepflight_client::RowRange::new(100, 1_200).unwrap();
    let request = SweepRequest::lengths("u", lengths.clone())
        .with_series(["Z", "X"])
        .with_rows(rows);
    let one = c.sweep(&request).await.unwrap();
    assert!(one.is_keyed());
    let got = one.rows();
    let combos: Vec<Combo> = lengths
        .iter()
        .map(|&l| Combo::from_length(l).unwrap())
        .collect();
    for (i, (sym, values)) in [("Z", &closes[2]), ("X", &closes[0])].iter().enumerate() {
        let want = sweep(&values[100..1_200], &combos, 0.0009).unwrap();
        let part = &got[i * combos.len()..(i + 1) * combos.len()];
        assert!(part.iter().all(|r| r.series.as_deref() == Some(*sym)));
        let results: Vec<_> = part.iter().map(|r| (r.pnl, r.trades as u64)).collect();
        let want: Vec<_> = want.iter().map(|r| (r.pnl, r.trades)).collect();
        assert_eq!(results, want, "{sym}");
    }
    // Chunked, the keyed result is the same table (series-major across the chunks).
    let chunked = c.sweep_chunked(&request, 4, |_| {}).await.unwrap();
    assert_eq!(chunked, one);
    // A keyed session gives the same answer.
    let mut session = c.keyed_session().await.unwrap();
    assert_eq!(session.sweep(&request).await.unwrap(), one);
}
