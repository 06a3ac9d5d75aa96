//! Universes (protocol v1.1): keyed puts, sweeps over all or some series, row ranges, in every
//! sweep form (action, session, exchange), persisted across a restart; v1 unchanged.

use std::sync::Arc;

use crate::common::*;
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_flight::{FlightData, FlightDescriptor};
use futures::TryStreamExt;
use serde_json::json;
use sweepflight_kernel::{Combo, ComboResult, sweep as kernel_sweep};
use tonic::Code;

/// A positive walk per symbol, different for each.
fn walk(seed: u64, n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let t = i as f64;
            100.0 + seed as f64 + (t * (0.1 + seed as f64 * 0.03)).sin() * 3.0 + (t * 0.011).cos()
        })
        .collect()
}

/// Three symbols of different lengths, interleaved row by row as a `ts`-sorted frame would be,
/// in two batches.
fn universe() -> (Vec<RecordBatch>, Vec<(&'static str, Vec<f64>)>) {
    let series = vec![
        ("MSFT", walk(1, 1_200)),
        ("AAPL", walk(2, 1_000)),
        ("GOOG", walk(3, 700)),
    ];
    let (mut syms, mut ts, mut close) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..1_200 {
        for (sym, values) in &series {
            if let Some(&v) = values.get(i) {
                syms.push(*sym);
                ts.push(i as i64);
                close.push(v);
            }
        }
    }
    let batch = RecordBatch::try_from_iter([
        ("symbol", Arc::new(StringArray::from(syms)) as ArrayRef),
        ("ts", Arc::new(Int64Array::from(ts)) as ArrayRef),
        ("close", Arc::new(Float64Array::from(close)) as ArrayRef),
    ])
    .unwrap();
    let half = batch.num_rows() / 2;
    (
        vec![
            batch.slice(0, half),
            batch.slice(half, batch.num_rows() - half),
        ],
        series,
    )
}

fn keyed(name: &str, key: &str) -> FlightDescriptor {
    FlightDescriptor::new_cmd(json!({"dataset": name, "key": key}).to_string())
}

fn combos(lengths: &[u32]) -> Vec<Combo> {
    lengths
        .iter()
        .map(|&l| Combo::from_length(l).unwrap())
        .collect()
}

/// The `series` column and the pnl/trades of a keyed result.
fn keyed_rows(b: &RecordBatch) -> (Vec<String>, Vec<i64>, Vec<ComboResult>) {
    let series = b
        .column(0)
        .as_string::<i32>()
        .iter()
        .map(|s| s.unwrap().to_owned())
        .collect();
    let combo = i64s(b, "combo");
    let results = f64s(b, "pnl")
        .into_iter()
        .zip(i64s(b, "trades"))
        .zip(i64s(b, "wins"))
        .zip(f64s(b, "max_drawdown"))
        .map(|(((pnl, trades), wins), max_drawdown)| ComboResult {
            pnl,
            trades: trades as u64,
            wins: wins as u64,
            max_drawdown,
            ..Default::default()
        })
        .collect();
    (series, combo, results)
}

#[tokio::test]
async fn keyed_put_sweep_subsets_and_row_ranges() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let (batches, series) = universe();
    let stored = put_with(&mut c, keyed("u", "symbol"), batches)
        .await
        .unwrap();
    assert_eq!(
        stored,
        json!({"dataset": "u", "rows": 2_900, "bytes": stored["bytes"], "version": 1, "series": 3,
               "columns": ["close"], "unusable": {}})
    );

    // FlightInfo says what the key is; DoGet returns the rows series after series, each in
    // arrival order.
    let info = c
        .get_flight_info(FlightDescriptor::new_path(vec!["u".into()]))
        .await
        .unwrap();
    let meta: serde_json::Value = serde_json::from_slice(&info.app_metadata).unwrap();
    assert_eq!(
        meta,
        json!({"version": 1, "key": "symbol", "series": 3, "columns": ["close"], "unusable": {}})
    );
    let all = rows(&mut c, &info).await;
    let want_close: Vec<f64> = series.iter().flat_map(|(_, v)| v.clone()).collect();
    assert_eq!(f64s(&all, "close"), want_close);
    let ts = all.column(1).as_primitive::<Int64Type>();
    assert_eq!(ts.value(1_199), 1_199);
    assert_eq!(ts.value(1_200), 0, "AAPL starts after MSFT's last row");

    // All series: series in first-appearance order, then combos; each equals the kernel alone.
    let lengths = [6u32, 10, 30];
    let b = sweep(&mut c, json!({"dataset": "u", "lengths": lengths}))
        .await
        .unwrap();
    let (names, combo, results) = keyed_rows(&b);
    assert_eq!(b.schema().field(0).name(), "series");
    assert_eq!(&names[..3], ["MSFT"; 3]);
    assert_eq!(&names[3..6], ["AAPL"; 3]);
    assert_eq!(combo, [0, 1, 2, 0, 1, 2, 0, 1, 2]);
    for (i, (_, values)) in series.iter().enumerate() {
        let want = kernel_sweep(values, &combos(&lengths), 0.0009).unwrap();
        assert_eq!(&results[i * 3..i * 3 + 3], want.as_slice());
    }

    // A subset, in the order listed, on a row range (in-sample / out-of-sample).
    for (rows_, slice) in [([0u64, 500u64], 0..500), ([500, 100_000], 500..usize::MAX)] {
        let b = sweep(
            &mut c,
            json!({"dataset": "u", "lengths": lengths, "series": ["GOOG", "MSFT"], "rows": rows_}),
        )
        .await
        .unwrap();
        let (names, _, results) = keyed_rows(&b);
        assert_eq!(names, ["GOOG", "GOOG", "GOOG", "MSFT", "MSFT", "MSFT"]);
        for (i, sym) in ["GOOG", "MSFT"].iter().enumerate() {
            let values = &series.iter().find(|s| s.0 == *sym).unwrap().1;
            let part = &values[slice.start..slice.end.min(values.len())];
            let want = kernel_sweep(part, &combos(&lengths), 0.0009).unwrap();
            assert_eq!(
                &results[i * 3..i * 3 + 3],
                want.as_slice(),
                "{sym} {rows_:?}"
            );
        }
    }

    // The unkeyed contract is unchanged beside it, and `rows` works there too.
    put(&mut c, "plain", vec![close_batch(&series[0].1)])
        .await
        .unwrap();
    let b = sweep(
        &mut c,
        json!({"dataset": "plain", "lengths": lengths, "rows": [100, 900]}),
    )
    .await
    .unwrap();
    assert_eq!(b.schema().field(0).name(), "combo");
    let want = kernel_sweep(&series[0].1[100..900], &combos(&lengths), 0.0009).unwrap();
    assert_eq!(
        f64s(&b, "pnl"),
        want.iter().map(|r| r.pnl).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn keyed_sessions_and_exchanges_take_the_same_fields() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let (batches, _) = universe();
    put_with(&mut c, keyed("u", "symbol"), batches.clone())
        .await
        .unwrap();
    let body = json!({"dataset": "u", "lengths": [6, 20], "series": ["AAPL"], "rows": [10, 600]});
    let want = sweep(&mut c, body.clone()).await.unwrap();

    // A keyed session answers with the keyed schema.
    let open = FlightData::new().with_descriptor(FlightDescriptor::new_cmd(
        r#"{"op": "session", "keyed": true}"#,
    ));
    let msg = FlightData::new().with_app_metadata(body.to_string());
    let replies: Vec<RecordBatch> = c
        .do_exchange(futures::stream::iter([Ok(open), Ok(msg)]))
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(replies, std::slice::from_ref(&want));

    // A plain session refuses a keyed dataset with a clear message.
    let open = FlightData::new().with_descriptor(FlightDescriptor::new_cmd(r#"{"op": "session"}"#));
    let msg = FlightData::new().with_app_metadata(body.to_string());
    let err = c
        .do_exchange(futures::stream::iter([Ok(open), Ok(msg)]))
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap_err();
    assert_eq!(code(&err), Code::InvalidArgument);
    assert!(err.to_string().contains("keyed"), "{err}");

    // The stateless exchange groups the streamed rows by `key` the same way.
    let cmd = json!({"op": "sweep", "lengths": [6, 20], "key": "symbol", "series": ["AAPL"], "rows": [10, 600]});
    assert_eq!(exchange_sweep(&mut c, cmd, batches).await, [want]);
}

#[tokio::test]
async fn max_combos_counts_series_times_combos() {
    let server = TestServer::with(|c| c.max_combos = 8).await;
    let mut c = server.client().await;
    let (batches, _) = universe();
    put_with(&mut c, keyed("u", "symbol"), batches)
        .await
        .unwrap();
    let err = sweep(&mut c, json!({"dataset": "u", "lengths": [6, 8, 10]}))
        .await
        .unwrap_err();
    assert_eq!(code(&err), Code::InvalidArgument);
    assert!(err.to_string().contains("3 series x 3 combos = 9"), "{err}");
    let two = json!({"dataset": "u", "lengths": [6, 8, 10], "series": ["AAPL", "GOOG"]});
    assert_eq!(sweep(&mut c, two).await.unwrap().num_rows(), 6);
}

#[tokio::test]
async fn a_universe_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_owned();
    let (batches, _) = universe();
    let body = json!({"dataset": "u", "lengths": [6, 30], "series": ["GOOG", "AAPL"]});
    let before = {
        let server = TestServer::with(|c| c.data_dir = Some(data.clone())).await;
        let mut c = server.client().await;
        put_with(&mut c, keyed("u", "symbol"), batches)
            .await
            .unwrap();
        let b = sweep(&mut c, body.clone()).await.unwrap();
        server.inner().stop().await.unwrap();
        b
    };
    let server = TestServer::with(|c| c.data_dir = Some(data)).await;
    let mut c = server.client().await;
    assert_eq!(sweep(&mut c, body).await.unwrap(), before);
    let info = c
        .get_flight_info(FlightDescriptor::new_path(vec!["u".into()]))
        .await
        .unwrap();
    let meta: serde_json::Value = serde_json::from_slice(&info.app_metadata).unwrap();
    assert_eq!(
        (meta["key"].as_str(), meta["series"].as_u64()),
        (Some("symbol"), Some(3))
    );
    // The file's key metadata is the server's, not part of the dataset's schema.
    assert!(info.try_decode_schema().unwrap().metadata().is_empty());
}
