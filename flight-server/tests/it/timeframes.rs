//! Higher timeframes (protocol v1.4, `daily(x)`, `weekly(x)`, `monthly(x)`) against a real
//! server: every verb's numbers equal to the kernel's plain interpreter on the same bars and
//! UTC dates; each time type read as the contract says (a timestamp in another zone by its UTC
//! date, date32 and date64 as they are); `rows` and `warmup` computing the period bars over the
//! computed range only; a portfolio's rank through a timeframe equal to the same values sent
//! as an input; and the mistakes users make, each refused with its code and a message naming
//! the fix.

use std::sync::Arc;

use arrow_array::{
    ArrayRef, Date32Array, Date64Array, Float64Array, Int64Array, RecordBatch, StringArray,
    TimestampNanosecondArray, TimestampSecondArray,
};
use serde_json::{Value, json};
use sweepflight_kernel::eval::oracle;
use sweepflight_kernel::expr::{Field, Program};
use sweepflight_kernel::lines::Bars;
use sweepflight_kernel::timeframe::days_from_civil;
use sweepflight_kernel::{Execution, Fill};
use tonic::Code;

use crate::common::*;

/// Weekday bars from Monday 2019-12-23 (ISO week 52 of 2019, week 1 of 2020 from 2019-12-30):
/// each bar's date (days since 1970) and its OHLCV, wavy with a drift.
struct Daily {
    days: Vec<i64>,
    open: Vec<f64>,
    high: Vec<f64>,
    low: Vec<f64>,
    close: Vec<f64>,
    volume: Vec<f64>,
}

fn daily(n: usize, phase: f64) -> Daily {
    let first = days_from_civil(2019, 12, 23);
    let days: Vec<i64> = (first..)
        .filter(|d| (d + 3).rem_euclid(7) < 5)
        .take(n)
        .collect();
    let close: Vec<f64> = (0..n)
        .map(|i| {
            let x = i as f64;
            100.0 + (x * 0.11 + phase).sin() * 8.0 + (x * 0.031).cos() * 5.0 + x * 0.01
        })
        .collect();
    let open: Vec<f64> = close.iter().map(|c| c * 0.998).collect();
    let high: Vec<f64> = close.iter().map(|c| c * 1.004).collect();
    let low: Vec<f64> = open.iter().map(|o| o * 0.995).collect();
    let volume: Vec<f64> = (0..n).map(|i| 1000.0 + (i % 7) as f64 * 10.0).collect();
    Daily {
        days,
        open,
        high,
        low,
        close,
        volume,
    }
}

impl Daily {
    fn bars(&self) -> Bars<'_> {
        Bars {
            open: Some(&self.open),
            high: Some(&self.high),
            low: Some(&self.low),
            close: &self.close,
            volume: Some(&self.volume),
            days: Some(&self.days),
            ..Bars::default()
        }
    }

    /// A batch of its bars with `time` (none for `None`).
    fn batch(&self, time: Option<ArrayRef>) -> RecordBatch {
        let f = |v: &[f64]| Arc::new(Float64Array::from(v.to_vec())) as ArrayRef;
        let mut cols: Vec<(&str, ArrayRef)> = Vec::new();
        if let Some(t) = time {
            cols.push(("time", t));
        }
        cols.extend([
            ("open", f(&self.open)),
            ("high", f(&self.high)),
            ("low", f(&self.low)),
            ("close", f(&self.close)),
            ("volume", f(&self.volume)),
        ]);
        RecordBatch::try_from_iter(cols).unwrap()
    }

    /// Its time at UTC midnight as timestamp[ns, UTC].
    fn utc(&self) -> ArrayRef {
        let ns = self.days.iter().map(|d| d * 86_400 * 1_000_000_000);
        Arc::new(TimestampNanosecondArray::from_iter_values(ns).with_timezone("UTC"))
    }
}

fn strategy() -> Value {
    json!({
        "long": "close > weekly(sma(close, n)) and close > monthly(ema(close, 2))",
        "short": "cross_below(close, weekly(sma(close, n)))",
        "exit_long": "close < daily(low)"
    })
}

fn program_of(strategy: &Value) -> Program {
    let fields: Vec<(Field, String)> = strategy
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let f = [Field::Long, Field::Short, Field::ExitLong, Field::ExitShort]
                .into_iter()
                .find(|f| f.name() == k)
                .unwrap();
            (f, v.as_str().unwrap().to_owned())
        })
        .collect();
    let texts: Vec<(Field, &str)> = fields.iter().map(|(f, t)| (*f, t.as_str())).collect();
    Program::new(&texts).unwrap()
}

#[tokio::test]
async fn every_verb_equals_the_interpreter_on_the_bars_and_their_utc_dates() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let d = daily(420, 0.0);
    put(&mut c, "d", vec![d.batch(Some(d.utc()))])
        .await
        .unwrap();
    let strategy = strategy();
    let program = program_of(&strategy);
    let ns = [2.0, 3.0, 5.0];
    let body = json!({"dataset": "d", "strategy": strategy, "grid": {"n": [2, 3, 5]}});
    let swept = sweep(&mut c, body.clone()).await.unwrap();
    let booked = table(&mut c, "trades", &body).await.unwrap();
    let curves = table(&mut c, "equity", &body).await.unwrap();
    let mut total = 0;
    for (i, &n) in ns.iter().enumerate() {
        let want = oracle::run(&d.bars(), &program, &[n], &Execution::default());
        total += want.len();
        assert_eq!(i64s(&swept, "trades")[i] as usize, want.len(), "n={n}");
        let sum: f64 = want.iter().map(|t| t.net).sum();
        assert!((f64s(&swept, "pnl")[i] - sum).abs() <= 1e-9, "n={n}");
        let rows: Vec<usize> = (0..booked.num_rows())
            .filter(|&r| i64s(&booked, "combo")[r] == i as i64)
            .collect();
        assert_eq!(rows.len(), want.len());
        for (r, t) in rows.iter().zip(&want) {
            assert_eq!(i64s(&booked, "entry_row")[*r] as usize, t.entry_row);
            assert_eq!(i64s(&booked, "exit_row")[*r] as usize, t.exit_row);
        }
        let curve = (0..curves.num_rows())
            .filter(|&r| i64s(&curves, "combo")[r] == i as i64)
            .count();
        assert_eq!(curve, d.close.len());
    }
    assert!(total > 20, "the strategy trades: {total}");

    // Next-open fills and `rows` with a warm-up: the period bars are those of the computed
    // range only (its first period partial), as the kernel computes them on that slice.
    let ranged = json!({"dataset": "d", "strategy": strategy, "grid": {"n": [2, 3, 5]},
                        "fill": "next_open", "rows": [150, 420], "warmup": 40});
    let got = sweep(&mut c, ranged).await.unwrap();
    let slice = d.bars().slice(110, 420);
    for (i, &n) in ns.iter().enumerate() {
        let exec = Execution {
            fill: Fill::NextOpen,
            start: 40,
            ..Execution::default()
        };
        let want = oracle::run(&slice, &program, &[n], &exec);
        assert_eq!(i64s(&got, "trades")[i] as usize, want.len(), "ranged n={n}");
        let sum: f64 = want.iter().map(|t| t.net).sum();
        assert!((f64s(&got, "pnl")[i] - sum).abs() <= 1e-9, "ranged n={n}");
    }

    // Explain: the call one node, the nodes inside nodes of their timeframe; lookback null.
    let plan: Value = serde_json::from_slice(
        &action(
            &mut c,
            "explain",
            json!({"dataset": "d", "strategy": {"long": "sma(close, 10) > weekly(sma(close, 10))"},
                   "params": [[]]})
            .to_string(),
        )
        .await
        .unwrap(),
    )
    .unwrap();
    assert_eq!(plan["arrays"], 3, "{plan}");
    assert_eq!(plan["lookback"], Value::Null, "{plan}");

    // A session and the stateless exchange (the bars streamed with the call) answer as the sweep.
    let replies = session(
        &mut c,
        &json!({"op": "session", "strategy": strategy}),
        std::slice::from_ref(&body),
    )
    .await
    .unwrap();
    assert_eq!(replies[0], swept);
    let cmd = json!({"op": "sweep", "strategy": strategy, "grid": {"n": [2, 3, 5]}});
    let streamed = exchange_sweep(&mut c, cmd, vec![d.batch(Some(d.utc()))]).await;
    let streamed = arrow_select::concat::concat_batches(&streamed[0].schema(), &streamed).unwrap();
    assert_eq!(streamed, swept);

    // A built-in's stop formula on a higher timeframe: the interpreter's trades.
    let stopped = json!({"dataset": "d", "strategy": "sma_cross", "params": [[5, 20]],
                         "stop_loss": "weekly(atr(2)) / close", "stops": "high_low"});
    let got = sweep(&mut c, stopped).await.unwrap();
    let with_stop = Program::new(&[
        (Field::Long, "cross_above(sma(close, 5), sma(close, 20))"),
        (Field::Short, "cross_below(sma(close, 5), sma(close, 20))"),
        (Field::StopLoss, "weekly(atr(2)) / close"),
    ])
    .unwrap();
    let exec = Execution {
        stops: sweepflight_kernel::StopsOn::HighLow,
        ..Execution::default()
    };
    let want = oracle::run(&d.bars(), &with_stop, &[], &exec);
    assert_eq!(i64s(&got, "trades")[0] as usize, want.len());
    let sum: f64 = want.iter().map(|t| t.net).sum();
    assert!((f64s(&got, "pnl")[0] - sum).abs() <= 1e-9);

    // The cache keeps a timeframe's arrays apart from the bars' own: `sma(close, 10)` on the
    // bars after its weekly twin was swept (and kept) answers as on a fresh dataset.
    let framed = json!({"dataset": "d", "strategy": {"long": "close > weekly(sma(close, 10))"}, "params": [[]]});
    let bare =
        json!({"dataset": "d", "strategy": {"long": "close > sma(close, 10)"}, "params": [[]]});
    for _ in 0..3 {
        sweep(&mut c, framed.clone()).await.unwrap();
    }
    let after = sweep(&mut c, bare.clone()).await.unwrap();
    put(&mut c, "fresh", vec![d.batch(Some(d.utc()))])
        .await
        .unwrap();
    let mut fresh = bare.clone();
    fresh["dataset"] = json!("fresh");
    assert_eq!(after, sweep(&mut c, fresh).await.unwrap());
    let again = sweep(&mut c, framed.clone()).await.unwrap();
    let mut framed_fresh = framed.clone();
    framed_fresh["dataset"] = json!("fresh");
    assert_eq!(again, sweep(&mut c, framed_fresh).await.unwrap());

    // Walk-forward and a job run the same arithmetic.
    let wf = table(
        &mut c,
        "walk_forward",
        &json!({"dataset": "d", "strategy": strategy, "grid": {"n": [2, 3, 5]},
                "folds": {"train": 200, "test": 100}, "warmup": 30}),
    )
    .await
    .unwrap();
    assert!(wf.num_rows() >= 2, "{wf:?}");
    let job: Value =
        serde_json::from_slice(&action(&mut c, "submit", body.to_string()).await.unwrap()).unwrap();
    let id = job["job"].as_str().unwrap();
    assert_eq!(
        crate::jobs::wait(&mut c, id).await.last().unwrap()["state"],
        "done"
    );
    assert_eq!(crate::jobs::fetch(&mut c, id).await.unwrap(), swept);
}

#[tokio::test]
async fn each_time_type_is_read_by_its_utc_date() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let d = daily(300, 1.3);
    let secs = |days: &[i64], shift: i64| -> Vec<i64> {
        days.iter().map(|day| day * 86_400 + shift).collect()
    };
    // UTC midnight as timestamp[ns, UTC], date32 and date64: the same dates.
    put(&mut c, "ns", vec![d.batch(Some(d.utc()))])
        .await
        .unwrap();
    let date32: ArrayRef = Arc::new(Date32Array::from_iter_values(
        d.days.iter().map(|&x| x as i32),
    ));
    put(&mut c, "d32", vec![d.batch(Some(date32))])
        .await
        .unwrap();
    let date64: ArrayRef = Arc::new(Date64Array::from_iter_values(
        d.days.iter().map(|&x| x * 86_400_000),
    ));
    put(&mut c, "d64", vec![d.batch(Some(date64))])
        .await
        .unwrap();
    // Local midnight in Tokyo (UTC+9): the UTC date is the day before, so a Monday's bar falls
    // in the week before; the same as dates one day earlier.
    let tokyo: ArrayRef =
        Arc::new(TimestampSecondArray::from(secs(&d.days, -9 * 3600)).with_timezone("Asia/Tokyo"));
    put(&mut c, "tokyo", vec![d.batch(Some(tokyo))])
        .await
        .unwrap();
    let earlier: ArrayRef = Arc::new(Date32Array::from_iter_values(
        d.days.iter().map(|&x| x as i32 - 1),
    ));
    put(&mut c, "earlier", vec![d.batch(Some(earlier))])
        .await
        .unwrap();
    let strategy =
        json!({"long": "close > weekly(sma(close, n))", "short": "close < monthly(close)"});
    let run = |name: &str| json!({"dataset": name, "strategy": strategy, "grid": {"n": [1, 2, 4]}});
    let of = |b: &RecordBatch| (f64s(b, "pnl"), i64s(b, "trades"));
    let ns = of(&sweep(&mut c, run("ns")).await.unwrap());
    assert_eq!(ns, of(&sweep(&mut c, run("d32")).await.unwrap()));
    assert_eq!(ns, of(&sweep(&mut c, run("d64")).await.unwrap()));
    let tokyo = of(&sweep(&mut c, run("tokyo")).await.unwrap());
    assert_eq!(tokyo, of(&sweep(&mut c, run("earlier")).await.unwrap()));
    assert_ne!(
        tokyo, ns,
        "a Monday bar stamped at Tokyo midnight is in the week before"
    );
    // And the numbers are the interpreter's on the UTC dates.
    let program = Program::new(&[
        (Field::Long, "close > weekly(sma(close, n))"),
        (Field::Short, "close < monthly(close)"),
    ])
    .unwrap();
    for (i, n) in [1.0, 2.0, 4.0].into_iter().enumerate() {
        let want = oracle::run(&d.bars(), &program, &[n], &Execution::default());
        assert_eq!(ns.1[i] as usize, want.len());
    }
}

#[tokio::test]
async fn a_portfolio_ranks_by_a_timeframe_as_by_the_same_values_sent_as_an_input() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let names = ["AAA", "BBB", "CCC", "DDD"];
    let series: Vec<Daily> = (0..4).map(|k| daily(260 - 20 * k, k as f64)).collect();
    // Each series' `weekly(roc(close, 3))` by the interpreter, over its own rows.
    let rank = Program::portfolio(&[(Field::Rank, "weekly(roc(close, 3))")], &[], &[]).unwrap();
    let (mut symbol, mut time, mut open, mut close, mut wk) =
        (vec![], vec![], vec![], vec![], vec![]);
    for (s, name) in series.iter().zip(names) {
        let (v, _) = oracle::evaluate(&s.bars(), rank.formula(Field::Rank).unwrap(), &[]);
        let oracle::Value::Series(v) = v else {
            panic!("a series")
        };
        symbol.extend(std::iter::repeat_n(name, v.len()));
        time.extend(s.days.iter().map(|d| d * 86_400 * 1_000_000_000));
        open.extend_from_slice(&s.open);
        close.extend_from_slice(&s.close);
        wk.extend(v);
    }
    let batch = RecordBatch::try_from_iter([
        ("symbol", Arc::new(StringArray::from(symbol)) as ArrayRef),
        (
            "time",
            Arc::new(TimestampNanosecondArray::from(time).with_timezone("UTC")),
        ),
        ("open", Arc::new(Float64Array::from(open))),
        ("close", Arc::new(Float64Array::from(close))),
        ("wk", Arc::new(Float64Array::from(wk))),
    ])
    .unwrap();
    put_with(
        &mut c,
        arrow_flight::FlightDescriptor::new_cmd(
            json!({"dataset": "u", "key": "symbol"}).to_string(),
        ),
        vec![batch],
    )
    .await
    .unwrap();
    let framed = json!({"dataset": "u", "strategy": {"rank": "weekly(roc(close, 3))", "longs": 2, "rebalance": "weekly"}, "params": [[]]});
    let sent = json!({"dataset": "u", "strategy": {"rank": "wk", "inputs": ["wk"], "longs": 2, "rebalance": "weekly"}, "params": [[]]});
    let a = sweep(&mut c, framed.clone()).await.unwrap();
    let b = sweep(&mut c, sent.clone()).await.unwrap();
    assert_eq!(f64s(&a, "total_return"), f64s(&b, "total_return"));
    assert!(f64s(&a, "total_return")[0] != 0.0);
    let ta = table(&mut c, "trades", &framed).await.unwrap();
    let tb = table(&mut c, "trades", &sent).await.unwrap();
    assert_eq!(ta, tb);
    assert!(ta.num_rows() > 10);
}

#[tokio::test]
async fn the_mistakes_users_make_are_refused_with_the_fix() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let d = daily(120, 0.5);
    put(&mut c, "d", vec![d.batch(Some(d.utc()))])
        .await
        .unwrap();
    put(&mut c, "bare", vec![d.batch(None)]).await.unwrap();
    let ints: ArrayRef = Arc::new(Int64Array::from_iter_values(0..120));
    put(&mut c, "ints", vec![d.batch(Some(ints))])
        .await
        .unwrap();
    let nulls: ArrayRef = Arc::new(TimestampNanosecondArray::from(
        (0..120)
            .map(|i| (i != 7).then_some(i64::from(i) * 86_400_000_000_000))
            .collect::<Vec<_>>(),
    ));
    put(&mut c, "nulls", vec![d.batch(Some(nulls))])
        .await
        .unwrap();
    let weekly = json!({"long": "close > weekly(sma(close, 3))"});
    let rows: Vec<(Value, Code, &str)> = vec![
        (
            json!({"dataset": "bare", "strategy": weekly, "params": [[]]}),
            Code::InvalidArgument,
            "`weekly(x)` (the bars gathered into ISO weeks by their time) needs a column `time`",
        ),
        (
            json!({"dataset": "ints", "strategy": weekly, "params": [[]]}),
            Code::InvalidArgument,
            "int64, a number without a unit",
        ),
        (
            json!({"dataset": "nulls", "strategy": weekly, "params": [[]]}),
            Code::InvalidArgument,
            "which is unusable: row 7",
        ),
        (
            json!({"dataset": "d", "strategy": weekly, "ignore_time": true, "params": [[]]}),
            Code::InvalidArgument,
            "`\"ignore_time\": true` reads as absent",
        ),
        (
            json!({"dataset": "d", "strategy": weekly, "warmup": "auto", "params": [[]]}),
            Code::InvalidArgument,
            "give `warmup` as a number of bars",
        ),
        (
            json!({"dataset": "d", "strategy": {"long": "close > weekly(daily(close))"}, "params": [[]]}),
            Code::InvalidArgument,
            "do not nest",
        ),
        (
            json!({"dataset": "d", "strategy": {"long": "close > monthly(sma(weekly(close), 2))"}, "params": [[]]}),
            Code::InvalidArgument,
            "do not nest",
        ),
        (
            json!({"dataset": "d", "strategy": {"long": "weekly(close > open)"}, "params": [[]]}),
            Code::InvalidArgument,
            "got a condition",
        ),
        (
            json!({"dataset": "d", "strategy": {"long": "weekly(close)"}, "params": [[]]}),
            Code::InvalidArgument,
            "must be a condition",
        ),
        (
            json!({"dataset": "d", "strategy": {"long": "close > weekly(close, 2)"}, "params": [[]]}),
            Code::InvalidArgument,
            "weekly takes weekly(x), got 2 arguments",
        ),
        (
            json!({"dataset": "d", "strategy": {"long": "close > weekly()"}, "params": [[]]}),
            Code::InvalidArgument,
            "weekly takes weekly(x), got 0 arguments",
        ),
        (
            json!({"dataset": "d", "strategy": {"long": "close > weeky(close)"}, "params": [[]]}),
            Code::InvalidArgument,
            "did you mean `weekly`?",
        ),
        (
            json!({"dataset": "d", "strategy": {"long": "close > weekly(sma(close, n))"}, "grid": {"n": [2.5]}}),
            Code::InvalidArgument,
            "n",
        ),
        (
            json!({"dataset": "d", "strategy": {"long": "close > a"}, "constraint": "weekly(a) > 1", "grid": {"a": [1]}}),
            Code::InvalidArgument,
            "no columns, no functions",
        ),
        (
            json!({"dataset": "d", "strategy": {"long": "close > weekly and close > k"}, "grid": {"k": [1]}}),
            Code::InvalidArgument,
            "`weekly` is a function, read here as a parameter's name: call it, e.g. `weekly(close)`",
        ),
        (
            json!({"dataset": "d", "strategy": {"long": "close > wk", "inputs": ["weekly"]}, "params": [[]]}),
            Code::InvalidArgument,
            "is a function's name",
        ),
        (
            json!({"dataset": "bare", "strategy": "sma_cross", "stop_loss": "weekly(atr(14)) / close", "params": [[5, 20]]}),
            Code::InvalidArgument,
            "`weekly(x)`",
        ),
        (
            json!({"dataset": "ints", "strategy": {"rank": "monthly(roc(close, 2))", "longs": 1, "rebalance": 5}, "params": [[]]}),
            Code::InvalidArgument,
            "`monthly(x)` (the bars gathered into months",
        ),
    ];
    assert!(rows.len() >= 15);
    for (body, want, says) in &rows {
        for verb in ["sweep", "trades", "explain"] {
            // Explain refuses what needs a dataset only where the dataset is read.
            let (code, message) = refused(action(&mut c, verb, body.to_string()).await);
            assert_eq!(code, *want, "{verb} {body}: {message}");
            assert!(message.contains(says), "{verb} {body}: {message}");
        }
    }
    // Bars out of order stay FAILED_PRECONDITION, whatever the formulas.
    let mut shuffled = d.batch(Some(d.utc()));
    shuffled = arrow_select::take::take_record_batch(
        &shuffled,
        &arrow_array::UInt32Array::from_iter_values((0..120u32).rev()),
    )
    .unwrap();
    put(&mut c, "shuffled", vec![shuffled]).await.unwrap();
    let (code, message) = refused(
        sweep(
            &mut c,
            json!({"dataset": "shuffled", "strategy": weekly, "params": [[]]}),
        )
        .await,
    );
    assert_eq!(code, Code::FailedPrecondition, "{message}");
}
