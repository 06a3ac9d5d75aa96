//! Protocol v1.4's trust rules against a real server: no wrong result without an error. Bars
//! out of time order are refused on every verb that takes a sweep body (FAILED_PRECONDITION,
//! naming the series and the first bad row as a date) unless the body says `ignore_time`; an
//! unnamed pandas index keeps its dates; a strategy's own columns are read through `inputs`;
//! a parameter that looks like a mistyped column says which column; a window that is not a
//! whole number is refused, never cut.

use std::sync::Arc;

use arrow_array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use arrow_flight::FlightDescriptor;
use serde_json::{Value, json};
use tonic::Code;

use crate::common::*;

/// Microseconds of day `d` after 2020-01-01 (UTC midnight).
fn day(d: i64) -> i64 {
    (1_577_836_800 + d * 86_400) * 1_000_000
}

/// `n` daily bars of a wavy close, with a time column named `time_name` whose row `i` is day
/// `days[i]`.
fn daily(time_name: &str, days: &[i64]) -> RecordBatch {
    let close: Vec<f64> = days
        .iter()
        .map(|&d| 100.0 + (d as f64 * 0.3).sin() * 5.0 + d as f64 * 0.01)
        .collect();
    RecordBatch::try_from_iter([
        ("close", Arc::new(Float64Array::from(close)) as ArrayRef),
        (
            time_name,
            Arc::new(TimestampMicrosecondArray::from(
                days.iter().map(|&d| day(d)).collect::<Vec<_>>(),
            )) as ArrayRef,
        ),
    ])
    .unwrap()
}

/// The same bars without their time column.
fn closes_only(b: &RecordBatch) -> RecordBatch {
    RecordBatch::try_from_iter([("close", Arc::clone(b.column(0)))]).unwrap()
}

#[tokio::test]
async fn bars_out_of_time_order_are_refused_on_every_verb_unless_ignore_time() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    // 300 days with rows 120 and 121 swapped: row 121 is the first whose time is not after
    // the row before it.
    let mut days: Vec<i64> = (0..300).collect();
    days.swap(120, 121);
    let shuffled = daily("Date", &days);
    let stored = put(&mut c, "shuffled", vec![shuffled.clone()])
        .await
        .unwrap();
    let said = stored["unusable"]["time"].as_str().unwrap();
    assert!(
        said.contains(
            "row 121: time 2020-04-30T00:00:00 is not after the previous row's 2020-05-01T00:00:00"
        ),
        "{said}"
    );
    assert!(said.contains("every sweep refuses them"), "{said}");
    let body = json!({"dataset": "shuffled", "strategy": "sma_cross", "params": [[5, 20]]});
    let check = |(code, msg): (Code, String), what: &str| {
        assert_eq!(code, Code::FailedPrecondition, "{what}: {msg}");
        assert!(msg.contains("row 121"), "{what}: {msg}");
        assert!(msg.contains("sort the bars by time"), "{what}: {msg}");
        assert!(msg.contains("\"ignore_time\": true"), "{what}: {msg}");
    };
    check(refused(sweep(&mut c, body.clone()).await), "sweep");
    check(refused(table(&mut c, "trades", &body).await), "trades");
    check(refused(table(&mut c, "equity", &body).await), "equity");
    check(
        refused(action(&mut c, "explain", body.to_string()).await),
        "explain",
    );
    let mut walk = body.clone();
    walk["folds"] = json!({"train": 100, "test": 50});
    walk["select"] = json!({"by": "pnl"});
    check(
        refused(table(&mut c, "walk_forward", &walk).await),
        "walk_forward",
    );
    let mut job = body.clone();
    job["action"] = json!("sweep");
    check(
        refused(action(&mut c, "submit", job.to_string()).await),
        "submit",
    );
    check(
        refused(
            session(
                &mut c,
                &json!({"op": "session", "strategy": "sma_cross"}),
                std::slice::from_ref(&body),
            )
            .await,
        ),
        "session",
    );
    // The stateless exchange checks the bars it is sent.
    let req = arrow_flight::encode::FlightDataEncoderBuilder::new()
        .with_flight_descriptor(Some(FlightDescriptor::new_cmd(
            json!({"op": "sweep", "strategy": "sma_cross", "params": [[5, 20]]}).to_string(),
        )))
        .build(futures::stream::iter([Ok(shuffled.clone())]));
    let stream = c.do_exchange(req).await;
    let result = match stream {
        Ok(s) => futures::TryStreamExt::try_collect::<Vec<_>>(s).await,
        Err(e) => Err(e),
    };
    check(refused(result), "exchange");

    // `ignore_time: true` runs in row order as v1.3 did: the same rows as the closes alone,
    // with no time in the replies; anything but a boolean is refused.
    put(&mut c, "rows", vec![closes_only(&shuffled)])
        .await
        .unwrap();
    let mut ignoring = body.clone();
    ignoring["ignore_time"] = json!(true);
    let mut plain = body.clone();
    plain["dataset"] = json!("rows");
    assert_eq!(
        sweep(&mut c, ignoring.clone()).await.unwrap(),
        sweep(&mut c, plain.clone()).await.unwrap()
    );
    let trades = table(&mut c, "trades", &ignoring).await.unwrap();
    assert!(trades.num_rows() > 3);
    assert!(trades.schema().index_of("entry_time").is_err());
    assert_eq!(trades, table(&mut c, "trades", &plain).await.unwrap());
    assert!(
        action(&mut c, "explain", ignoring.to_string())
            .await
            .is_ok()
    );
    let mut auto = ignoring.clone();
    auto["periods_per_year"] = json!("auto");
    let (code, msg) = refused(sweep(&mut c, auto).await);
    assert_eq!(code, Code::InvalidArgument, "{msg}");
    assert!(msg.contains("ignore_time"), "{msg}");
    for v in [json!(1), json!("true"), json!([true])] {
        let mut bad = body.clone();
        bad["ignore_time"] = v;
        let (code, msg) = refused(sweep(&mut c, bad).await);
        assert_eq!(code, Code::InvalidArgument, "{msg}");
        assert!(msg.contains("`ignore_time` must be true or false"), "{msg}");
    }
    // A dataset whose time is usable runs as before, ignore_time or not.
    put(
        &mut c,
        "sorted",
        vec![daily("time", &(0..300).collect::<Vec<_>>())],
    )
    .await
    .unwrap();
    let mut sorted = body.clone();
    sorted["dataset"] = json!("sorted");
    assert!(sweep(&mut c, sorted).await.is_ok());

    // Dates appended twice: the first repeated row is named.
    let twice: Vec<i64> = (0..100).chain(50..100).collect();
    put(&mut c, "twice", vec![daily("date", &twice)])
        .await
        .unwrap();
    let mut b = body.clone();
    b["dataset"] = json!("twice");
    let (code, msg) = refused(sweep(&mut c, b).await);
    assert_eq!(code, Code::FailedPrecondition, "{msg}");
    assert!(
        msg.contains("row 100: time 2020-02-20T00:00:00 is not after"),
        "{msg}"
    );

    // A universe: the series and its own row are named.
    let sym = |s: &str, n: usize| Arc::new(StringArray::from(vec![s; n])) as ArrayRef;
    let mut bad_days: Vec<i64> = (0..80).collect();
    bad_days.swap(40, 41);
    let keyed: Vec<RecordBatch> = [("AAA", (0..80).collect::<Vec<_>>()), ("BBB", bad_days)]
        .into_iter()
        .map(|(s, d)| {
            let b = daily("time", &d);
            RecordBatch::try_from_iter([
                ("symbol", sym(s, d.len())),
                ("close", Arc::clone(b.column(0))),
                ("time", Arc::clone(b.column(1))),
            ])
            .unwrap()
        })
        .collect();
    put_with(
        &mut c,
        FlightDescriptor::new_cmd(json!({"dataset": "u", "key": "symbol"}).to_string()),
        keyed,
    )
    .await
    .unwrap();
    let (code, msg) = refused(
        sweep(&mut c, json!({"dataset": "u", "strategy": "sma_cross", "params": [[5, 20]], "series": ["AAA"]})).await,
    );
    assert_eq!(code, Code::FailedPrecondition, "{msg}");
    assert!(msg.contains("series BBB row 41"), "{msg}");

    // A time of strings is unusable but refuses nothing.
    let text = RecordBatch::try_from_iter([
        ("close", Arc::clone(shuffled.column(0))),
        (
            "Date",
            Arc::new(StringArray::from_iter_values(
                (0..300).map(|i| format!("d{i}")),
            )) as ArrayRef,
        ),
    ])
    .unwrap();
    put(&mut c, "text", vec![text]).await.unwrap();
    assert!(
        sweep(
            &mut c,
            json!({"dataset": "text", "strategy": "sma_cross", "params": [[5, 20]]})
        )
        .await
        .is_ok()
    );
}

#[tokio::test]
async fn an_unnamed_pandas_index_keeps_its_dates() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let days: Vec<i64> = (0..400).collect();
    let stored = put(&mut c, "bt", vec![daily("__index_level_0__", &days)])
        .await
        .unwrap();
    assert!(
        stored["columns"]
            .as_array()
            .unwrap()
            .contains(&json!("time")),
        "{stored}"
    );
    let body = json!({"dataset": "bt", "strategy": "sma_cross", "params": [[5, 20]],
                      "periods_per_year": "auto"});
    let trades = table(&mut c, "trades", &body).await.unwrap();
    assert!(trades.schema().index_of("entry_time").is_ok());
    assert!(sweep(&mut c, body).await.is_ok());
    // An index of integers (a RangeIndex) is not a time.
    let ints = RecordBatch::try_from_iter([
        (
            "close",
            Arc::new(Float64Array::from(vec![1.0; 50])) as ArrayRef,
        ),
        (
            "__index_level_0__",
            Arc::new(Int64Array::from_iter_values(0..50)) as ArrayRef,
        ),
    ])
    .unwrap();
    let stored = put(&mut c, "ints", vec![ints]).await.unwrap();
    assert!(
        !stored["columns"]
            .as_array()
            .unwrap()
            .contains(&json!("time")),
        "{stored}"
    );
}

/// A dataset with a model's columns beside its bars.
fn with_columns() -> RecordBatch {
    let n = 600;
    let close: Vec<f64> = (0..n)
        .map(|i| 100.0 + (i as f64 * 0.05).sin() * 8.0)
        .collect();
    // A "prediction" that leads the close by a few bars, as an integer column with nulls.
    let pred: Vec<Option<i64>> = (0..n)
        .map(|i| (i % 97 != 5).then(|| ((((i + 7) as f64) * 0.05).sin() * 100.0) as i64))
        .collect();
    let pred_f: Vec<f64> = pred
        .iter()
        .map(|p| p.map_or(f64::NAN, |v| v as f64))
        .collect();
    RecordBatch::try_from_iter([
        ("close", Arc::new(Float64Array::from(close)) as ArrayRef),
        ("pred", Arc::new(Int64Array::from(pred)) as ArrayRef),
        (
            "pred_as_volume",
            Arc::new(Float64Array::from(pred_f)) as ArrayRef,
        ),
        (
            "flag",
            Arc::new(BooleanArray::from(vec![true; n])) as ArrayRef,
        ),
        (
            "name",
            Arc::new(StringArray::from(vec!["x"; n])) as ArrayRef,
        ),
    ])
    .unwrap()
}

#[tokio::test]
async fn a_strategys_own_columns_are_read_through_inputs_and_typos_get_hints() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let data = with_columns();
    put(&mut c, "m", vec![data.clone()]).await.unwrap();
    // The same values as a `volume` column (the nulls as NaN, which a volume rule would refuse,
    // so the comparison dataset holds only the rows' values the formulas compare).
    let strategy = json!({"long": "pred > k", "short": "pred < 0 - k", "inputs": ["pred"]});
    let body = json!({"dataset": "m", "strategy": strategy, "grid": {"k": [0, 20, 50]}});
    let got = sweep(&mut c, body.clone()).await.unwrap();
    assert_eq!(i64s(&got, "combo"), [0, 1, 2]);
    assert!(
        i64s(&got, "trades").iter().all(|&t| t > 2),
        "{:?}",
        i64s(&got, "trades")
    );
    // The same through a second input name listed first, and the same values as float64.
    let other = json!({"dataset": "m", "strategy": {"long": "pred_as_volume > k", "short": "pred_as_volume < 0 - k",
                       "inputs": ["pred", "pred_as_volume"]}, "grid": {"k": [0, 20, 50]}});
    let also = sweep(&mut c, other).await.unwrap();
    assert_eq!(f64s(&also, "pnl"), f64s(&got, "pnl"));
    assert_eq!(i64s(&also, "trades"), i64s(&got, "trades"));
    // Explain lists the input after the bar columns.
    let plan: Value =
        serde_json::from_slice(&action(&mut c, "explain", body.to_string()).await.unwrap())
            .unwrap();
    assert_eq!(plan["columns"], json!(["close", "pred"]));
    assert_eq!(plan["params"], json!([{"name": "k", "kind": "number"}]));
    // Refusals name the column and what to do.
    for (inputs, formula, needle) in [
        (
            json!(["vwap"]),
            "vwap > 1",
            "`inputs` names `vwap`, which dataset `m` does not have (its columns: close, pred",
        ),
        (
            json!(["flag"]),
            "flag > 0",
            "`inputs` names `flag`, a column of type Boolean",
        ),
        (json!(["name"]), "name > 0", "a column of type Utf8"),
    ] {
        let b = json!({"dataset": "m", "strategy": {"long": formula, "inputs": inputs}, "params": [[]]});
        for verb in ["sweep", "explain"] {
            let (code, msg) = refused(action(&mut c, verb, b.to_string()).await);
            assert_eq!(code, Code::InvalidArgument, "{verb}: {msg}");
            assert!(msg.contains(needle), "{verb}: {msg}");
        }
    }
    // Typos: a name close to a column asks whether that column was meant, on every verb that
    // takes a sweep body.
    let hint = |formula: &str, grid: Value| json!({"dataset": "m", "strategy": {"long": formula}, "grid": grid});
    for (body, needle) in [
        (
            hint("clsoe > 1", json!({})),
            "did you mean the column close?",
        ),
        (
            hint("close > pred", json!({})),
            "`pred` is a column of the dataset: list it in the strategy's \"inputs\"",
        ),
        (
            hint("close > perd", json!({})),
            "did you mean the column pred? list it in the strategy's \"inputs\"",
        ),
        (
            json!({"dataset": "m", "strategy": {"long": "close > sma(close, n) + perd"}, "params": [[5]]}),
            "did you mean the column pred?",
        ),
    ] {
        for verb in ["sweep", "trades", "explain"] {
            let (code, msg) = refused(action(&mut c, verb, body.to_string()).await);
            assert_eq!(code, Code::InvalidArgument, "{verb}: {msg}");
            assert!(msg.contains(needle), "{verb}: {msg}");
        }
    }
    let mut job = hint("clsoe > 1", json!({}));
    job["action"] = json!("sweep");
    let (_, msg) = refused(action(&mut c, "submit", job.to_string()).await);
    assert!(msg.contains("did you mean the column close?"), "{msg}");
    // Far from every column: no hint; a given grid runs it as a parameter.
    let (_, msg) = refused(
        action(
            &mut c,
            "sweep",
            hint("close > level", json!({})).to_string(),
        )
        .await,
    );
    assert!(!msg.contains("did you mean"), "{msg}");
    assert!(
        sweep(&mut c, hint("close > level", json!({"level": [100]})))
            .await
            .is_ok()
    );
    // A window that is not a whole number is refused with the value sent, never cut.
    for (v, said) in [
        (json!(5.9), "got 5.9"),
        (json!(-3), "got -3"),
        (json!(5.0), "got 5.0"),
    ] {
        let b = json!({"dataset": "m", "strategy": {"long": "close > sma(close, n)"}, "grid": {"n": [v]}});
        let (code, msg) = refused(sweep(&mut c, b).await);
        assert_eq!(code, Code::InvalidArgument, "{msg}");
        assert!(msg.contains(said), "{msg}");
    }
}
