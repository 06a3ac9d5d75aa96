//! `put_polars` (feature `polars`) against the real server: a multi-chunk frame with extra
//! columns is stored as sent, sweeps like the same closes pushed any other way, and a bad
//! close is refused with the server's row number.
#![cfg(feature = "polars")]

use arrow_array::{Float64Array, Int64Array, LargeStringArray};
use polars::prelude::{DataFrame, NamedFrom, Series};
use sweepflight_client::{Client, SweepRequest};
use sweepflight_kernel::{Combo, DEFAULT_FEE, sweep};
use sweepflight_server::testing::TestServer;
use tonic::Code;

fn frame(from: i64, closes: Vec<Option<f64>>) -> DataFrame {
    let n = closes.len() as i64;
    DataFrame::new(vec![
        Series::new("t".into(), (from..from + n).collect::<Vec<i64>>()).into(),
        Series::new("sym".into(), vec!["ES"; closes.len()]).into(),
        Series::new("close".into(), closes).into(),
    ])
    .unwrap()
}

fn closes(range: std::ops::Range<usize>) -> Vec<Option<f64>> {
    range
        .map(|i| Some(100.0 + (i as f64 * 0.05).sin() * 4.0))
        .collect()
}

#[tokio::test]
async fn a_polars_frame_is_stored_as_sent_and_sweeps_like_its_closes() {
    let server = TestServer::start_default().await;
    let mut c = Client::connect(server.uri()).await.unwrap();
    // Two chunks: vstack keeps each frame's chunk.
    let mut df = frame(0, closes(0..3_000));
    df.vstack_mut(&frame(3_000, closes(3_000..5_000))).unwrap();
    assert_eq!(df.first_col_n_chunks(), 2);

    let put = c.put_polars("pl", &df).await.unwrap();
    assert_eq!((put.rows, put.version), (5_000, 1));

    let back = c.get("pl").await.unwrap();
    let batch = arrow_select::concat::concat_batches(&back[0].schema(), &back).unwrap();
    let col = |name: &str| batch.column_by_name(name).unwrap().clone();
    let want: Vec<f64> = closes(0..5_000).into_iter().flatten().collect();
    let got = col("close");
    let got = got.as_any().downcast_ref::<Float64Array>().unwrap();
    assert_eq!(got.values().as_ref(), want.as_slice());
    let t = col("t");
    assert_eq!(
        t.as_any()
            .downcast_ref::<Int64Array>()
            .unwrap()
            .value(4_999),
        4_999
    );
    let sym = col("sym");
    assert_eq!(
        sym.as_any()
            .downcast_ref::<LargeStringArray>()
            .unwrap()
            .value(0),
        "ES"
    );

    let lengths = [6, 20, 60];
    let result = c
        .sweep(&SweepRequest::lengths("pl", lengths))
        .await
        .unwrap();
    let combos: Vec<Combo> = lengths
        .iter()
        .map(|&l| Combo::from_length(l).unwrap())
        .collect();
    assert_eq!(
        crate::support::results(&result),
        sweep(&want, &combos, DEFAULT_FEE).unwrap()
    );
}

#[tokio::test]
async fn a_null_close_in_a_polars_frame_is_refused_with_its_row() {
    let server = TestServer::start_default().await;
    let mut c = Client::connect(server.uri()).await.unwrap();
    let mut values = closes(0..100);
    values[42] = None;
    let e = c.put_polars("bad", &frame(0, values)).await.unwrap_err();
    assert_eq!(e.code(), Some(Code::InvalidArgument));
    assert!(e.to_string().contains("row 42: is null"), "{e}");
    assert!(c.list().await.unwrap().is_empty());
}
