//! Walk-forward in one call against the same folds run by hand through `sweep` (in-sample
//! with `rows`, `warmup`, `where`, `order_by` and `top: 1`, then the chosen combo on the test
//! rows): row for row, for rolling, anchored, stepped and explicit folds, on a universe whose
//! series have different lengths (so different fold counts), with folds where no combo passes
//! `where`, through a job and on a session.

use arrow_array::{Array, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_flight::FlightClient;
use serde_json::{Value, json};

use crate::common::*;

/// The walk-forward a client would run by hand: per series and fold, the sweep's best row,
/// then its combo on the test rows. One expected row per fold: (series, fold, train, test,
/// chosen combo with its in-sample score and test metrics).
type Expected = (Option<String>, Vec<i64>, Option<(i64, f64, RecordBatch)>);

/// A series to walk by hand: its key value (none if unkeyed), rows, and folds
/// `[train_start, train_end, test_start, test_end]`.
type Walked<'a> = (Option<&'a str>, usize, Vec<[u64; 4]>);

async fn by_hand(
    c: &mut FlightClient,
    base: &Value,
    series: &[Walked<'_>],
    by: &str,
) -> Vec<Expected> {
    let mut out = Vec::new();
    for (name, len, folds) in series {
        let (name, len) = (*name, *len);
        for (k, f) in folds.iter().enumerate() {
            let (tr, te) = ((f[0], f[1].min(len as u64)), (f[2], f[3].min(len as u64)));
            if tr.0 >= tr.1 || te.0 >= te.1 {
                continue;
            }
            let mut train = base.clone();
            train["rows"] = json!([tr.0, tr.1]);
            train["order_by"] = json!(by);
            train["top"] = json!(1);
            if let Some(n) = name {
                train["series"] = json!([n]);
            }
            let best = sweep(c, train).await.unwrap();
            let fold = vec![k as i64, tr.0 as i64, tr.1 as i64, te.0 as i64, te.1 as i64];
            let score = (best.num_rows() == 1)
                .then(|| f64s_nullable(&best, by))
                .flatten();
            let Some(score) = score else {
                out.push((name.map(str::to_owned), fold, None));
                continue;
            };
            let combo = i64s(&best, "combo")[0];
            let strategy = base["strategy"].as_str().unwrap_or("hma_sar");
            let names: Vec<&str> = match strategy {
                "hma_sar" => vec!["half", "full", "sqrt", "p3", "p2", "p"],
                "sma_cross" | "ema_cross" => vec!["fast", "slow"],
                "donchian" => vec!["n"],
                _ => vec!["n", "lower", "upper"],
            };
            let params: Vec<Value> = names
                .iter()
                .map(|n| {
                    let col = arrow_cast::cast(
                        best.column_by_name(n).unwrap(),
                        &arrow_schema::DataType::Float64,
                    )
                    .unwrap();
                    let v = col
                        .as_any()
                        .downcast_ref::<Float64Array>()
                        .unwrap()
                        .value(0);
                    if best.column_by_name(n).unwrap().data_type() == &arrow_schema::DataType::Int64
                    {
                        json!(v as i64)
                    } else {
                        json!(v)
                    }
                })
                .collect();
            let mut test = base.clone();
            let obj = test.as_object_mut().unwrap();
            for key in [
                "lengths",
                "grid",
                "params",
                "sample",
                "where",
                "order_by",
                "descending",
                "top",
            ] {
                obj.remove(key);
            }
            test["params"] = json!([params]);
            test["rows"] = json!([te.0, te.1]);
            if let Some(n) = name {
                test["series"] = json!([n]);
            }
            let run = sweep(c, test).await.unwrap();
            out.push((name.map(str::to_owned), fold, Some((combo, score, run))));
        }
    }
    out
}

fn f64s_nullable(b: &RecordBatch, name: &str) -> Option<f64> {
    let col = arrow_cast::cast(
        b.column_by_name(name).unwrap(),
        &arrow_schema::DataType::Float64,
    )
    .unwrap();
    let col = col.as_any().downcast_ref::<Float64Array>().unwrap();
    col.is_valid(0).then(|| col.value(0))
}

/// Holds the walk-forward reply to the expected rows, column by column.
fn check(got: &RecordBatch, want: &[Expected], what: &str) {
    assert_eq!(got.num_rows(), want.len(), "{what}: rows");
    let keyed = got.schema().field(0).name() == "series";
    let col = |n: &str| {
        got.column_by_name(n)
            .unwrap_or_else(|| panic!("{what}: no column {n}"))
    };
    for (r, (series, fold, chosen)) in want.iter().enumerate() {
        if keyed {
            let s = col("series")
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap();
            assert_eq!(Some(s.value(r)), series.as_deref(), "{what} row {r}");
        }
        for (k, name) in ["fold", "train_start", "train_end", "test_start", "test_end"]
            .iter()
            .enumerate()
        {
            let v = col(name)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .value(r);
            assert_eq!(v, fold[k], "{what} row {r} {name}");
        }
        let combo = col("combo").as_any().downcast_ref::<Int64Array>().unwrap();
        let score = col("train_score")
            .as_any()
            .downcast_ref::<Float64Array>()
            .unwrap();
        match chosen {
            None => {
                for f in got.schema().fields().iter().skip(usize::from(keyed) + 5) {
                    assert!(
                        col(f.name()).is_null(r),
                        "{what} row {r}: {} not null",
                        f.name()
                    );
                }
            }
            Some((c, s, run)) => {
                assert_eq!(combo.value(r), *c, "{what} row {r} combo");
                assert_eq!(
                    score.value(r).to_bits(),
                    s.to_bits(),
                    "{what} row {r} score"
                );
                // Every metric of the test run, exactly.
                for name in [
                    "pnl",
                    "trades",
                    "wins",
                    "win_rate",
                    "max_drawdown",
                    "avg_trade",
                    "best_trade",
                    "worst_trade",
                    "profit_factor",
                    "exposure",
                    "avg_bars",
                    "sharpe",
                    "sortino",
                    "sqn",
                ] {
                    let g = col(name).slice(r, 1);
                    let w = run.column_by_name(name).unwrap().slice(0, 1);
                    assert_eq!(g.to_data(), w.to_data(), "{what} row {r} {name}");
                }
            }
        }
    }
}

fn rolling(len: u64, train: u64, test: u64, step: u64, anchored: bool) -> Vec<[u64; 4]> {
    (0..)
        .map(|k| (k * step, k * step + train, k * step + train + test))
        .take_while(|&(_, _, e)| e <= len)
        .map(|(s, m, e)| [if anchored { 0 } else { s }, m, m, e])
        .collect()
}

async fn walk(c: &mut FlightClient, body: &Value) -> RecordBatch {
    table(c, "walk_forward", body).await.unwrap()
}

#[tokio::test]
async fn every_fold_shape_equals_the_folds_run_by_hand() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let n = 6_000;
    put(&mut c, "s", vec![close_batch(&series(n))])
        .await
        .unwrap();
    let base = json!({"dataset": "s", "strategy": "sma_cross",
        "grid": {"fast": [2, 5, 9], "slow": [20, 40, 90]}, "warmup": 60, "side": "long", "stop_loss": 0.01});
    let cases = [
        (
            json!({"train": 1500, "test": 500}),
            rolling(n as u64, 1500, 500, 500, false),
            "pnl",
        ),
        (
            json!({"train": 1000, "test": 700, "step": 1300}),
            rolling(n as u64, 1000, 700, 1300, false),
            "sharpe",
        ),
        (
            json!({"train": 2000, "test": 800, "anchored": true}),
            rolling(n as u64, 2000, 800, 800, true),
            "profit_factor",
        ),
        (
            json!([
                [0, 3000, 3000, 4000],
                [500, 2500, 5500, 7000],
                [100, 200, 9000, 9100]
            ]),
            vec![
                [0, 3000, 3000, 4000],
                [500, 2500, 5500, 7000],
                [100, 200, 9000, 9100],
            ],
            "sqn",
        ),
    ];
    for (folds, expect_folds, by) in cases {
        let mut body = base.clone();
        body["folds"] = folds.clone();
        body["select"] = json!({"by": by});
        let got = walk(&mut c, &body).await;
        let want = by_hand(&mut c, &base, &[(None, n, expect_folds)], by).await;
        check(&got, &want, &format!("{folds}"));
        assert!(
            want.iter().filter(|w| w.2.is_some()).count() >= 2,
            "{folds}: too few chosen"
        );
    }
    // Ascending selection (smallest drawdown first), on hma_sar lengths.
    let base = json!({"dataset": "s", "lengths": [10, 20, 40]});
    let mut body = base.clone();
    body["folds"] = json!({"train": 2500, "test": 1000});
    body["select"] = json!({"by": "max_drawdown", "descending": false});
    let got = walk(&mut c, &body).await;
    let mut by_hand_base = base.clone();
    by_hand_base["descending"] = json!(false);
    let want = by_hand(
        &mut c,
        &by_hand_base,
        &[(None, n, rolling(n as u64, 2500, 1000, 1000, false))],
        "max_drawdown",
    )
    .await;
    check(&got, &want, "ascending");
}

#[tokio::test]
async fn a_universe_of_different_lengths_where_no_combo_passes_and_a_job() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    // A: 5,000 rows, B: 3,200, C: 900 (too short for any fold).
    let mut syms: Vec<Option<&str>> = Vec::new();
    let mut closes = Vec::new();
    for (s, n) in [("A", 5_000), ("B", 3_200), ("C", 900)] {
        syms.extend(std::iter::repeat_n(Some(s), n));
        closes.extend(
            series(n)
                .iter()
                .map(|v| v * if s == "B" { 1.7 } else { 1.0 }),
        );
    }
    let batch = RecordBatch::try_from_iter([
        (
            "sym",
            std::sync::Arc::new(StringArray::from(syms)) as arrow_array::ArrayRef,
        ),
        (
            "close",
            std::sync::Arc::new(Float64Array::from(closes)) as arrow_array::ArrayRef,
        ),
    ])
    .unwrap();
    put_with(&mut c, cmd_keyed("u", "sym"), vec![batch])
        .await
        .unwrap();
    // No combo makes money in-sample in some folds: `where` leaves those with no combo.
    let base = json!({"dataset": "u", "strategy": "ema_cross", "grid": {"fast": [3, 8], "slow": [30, 120]},
        "where": {"pnl": [0.5, null]}, "warmup": 100});
    let mut body = base.clone();
    body["folds"] = json!({"train": 1000, "test": 400});
    body["select"] = json!({"by": "sortino"});
    let got = walk(&mut c, &body).await;
    let want = by_hand(
        &mut c,
        &base,
        &[("A", 5_000), ("B", 3_200), ("C", 900)]
            .map(|(s, n)| (Some(s), n, rolling(n as u64, 1000, 400, 400, false))),
        "sortino",
    )
    .await;
    check(&got, &want, "universe");
    // A has 10 folds, B 5, C none.
    let per = |s: &str| want.iter().filter(|w| w.0.as_deref() == Some(s)).count();
    assert_eq!((per("A"), per("B"), per("C")), (10, 5, 0));
    assert!(
        want.iter().any(|w| w.2.is_none()),
        "some fold should have no combo passing `where`"
    );
    assert!(want.iter().any(|w| w.2.is_some()));
    // The session form: each message answered as the action answers it, in order; a sweep
    // body (no folds) ends the session with INVALID_ARGUMENT.
    let open =
        json!({"op": "session", "keyed": true, "strategy": "ema_cross", "action": "walk_forward"});
    let replies = session(&mut c, &open, &[body.clone(), body.clone()])
        .await
        .unwrap();
    assert_eq!(replies.len(), 2);
    for reply in &replies {
        assert_eq!(reply, &got);
    }
    let refused = session(&mut c, &open, std::slice::from_ref(&base))
        .await
        .unwrap_err();
    assert_eq!(code(&refused), tonic::Code::InvalidArgument, "{refused}");
    // One series, by name; and the same body as a job.
    body["series"] = json!(["B"]);
    let only_b = walk(&mut c, &body).await;
    check(
        &only_b,
        &want
            .iter()
            .filter(|w| w.0.as_deref() == Some("B"))
            .cloned()
            .collect::<Vec<_>>(),
        "B",
    );
    let mut submit = body.clone();
    submit["action"] = json!("walk_forward");
    let reply: Value =
        serde_json::from_slice(&action(&mut c, "submit", submit.to_string()).await.unwrap())
            .unwrap();
    let job = reply["job"].as_str().unwrap().to_owned();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let s: Value = serde_json::from_slice(
            &action(&mut c, "status", json!({"job": job}).to_string())
                .await
                .unwrap(),
        )
        .unwrap();
        if s["state"] == "done" {
            // Every combo in-sample plus the chosen one, per fold of B.
            assert_eq!(s["combos_total"], 5 * (4 + 1), "{s}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{s}");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let ticket = arrow_flight::Ticket::new(json!({"job": job}).to_string());
    let batches: Vec<RecordBatch> =
        futures::TryStreamExt::try_collect(c.do_get(ticket).await.unwrap())
            .await
            .unwrap();
    assert_eq!(batches.concat_rows(), only_b);
}

fn cmd_keyed(name: &str, key: &str) -> arrow_flight::FlightDescriptor {
    arrow_flight::FlightDescriptor::new_cmd(json!({"dataset": name, "key": key}).to_string())
}

trait ConcatRows {
    fn concat_rows(&self) -> RecordBatch;
}

impl ConcatRows for Vec<RecordBatch> {
    fn concat_rows(&self) -> RecordBatch {
        arrow_select::concat::concat_batches(&self[0].schema(), self).unwrap()
    }
}
