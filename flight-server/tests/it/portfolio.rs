//! Portfolio strategies (protocol v1.4) against a real server: a rotation over a keyed universe
//! whose series start late, end early and miss days, on every verb (sweep, trades, equity,
//! explain, a job, a session, the stateless exchange), its numbers equal to the kernel's plain
//! run of the contract on the same calendar; and the bad input a user sends, each refused with
//! its code and a message that names the fix.

use std::sync::Arc;

use arrow_array::{
    ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use arrow_flight::FlightDescriptor;
use serde_json::{Value, json};
use sweepflight_kernel::expr::{Field, Program};
use sweepflight_kernel::lines::Bars;
use sweepflight_kernel::portfolio::{
    Calendar, ComboArrays, Keep, OnCalendar, PortfolioFill, Rules, SeriesValues, every, run,
};
use tonic::Code;

use crate::common::*;

const DAY_US: i64 = 86_400 * 1_000_000;
/// 2020-01-06, a Monday, in microseconds.
const START_US: i64 = 1_578_268_800 * 1_000_000;

/// One series of the universe: its days (from 2020-01-06), opens and closes.
struct Series {
    name: &'static str,
    days: Vec<i64>,
    open: Vec<f64>,
    close: Vec<f64>,
}

/// Five series over 160 days: one complete, one starting late, one ending early, two missing
/// days here and there; prices wavy, each its own.
fn universe() -> Vec<Series> {
    let shapes: [(&str, i64, i64, i64); 5] = [
        ("AAA", 0, 160, 0),
        ("BBB", 30, 160, 0),
        ("CCC", 0, 110, 0),
        ("DDD", 0, 160, 7),
        ("EEE", 5, 155, 11),
    ];
    shapes
        .iter()
        .enumerate()
        .map(|(k, &(name, from, to, gap))| {
            let days: Vec<i64> = (from..to).filter(|d| gap == 0 || d % gap != 3).collect();
            let close: Vec<f64> = days
                .iter()
                .map(|&d| {
                    let x = d as f64;
                    100.0
                        + (x * (0.07 + 0.013 * k as f64)).sin() * (6.0 + k as f64)
                        + x * 0.02 * (k as f64 - 2.0)
                })
                .collect();
            let open = close.iter().map(|c| c * 0.997).collect();
            Series {
                name,
                days,
                open,
                close,
            }
        })
        .collect()
}

/// The universe as one long batch (series after series), keyed by `symbol`.
fn long_batch(series: &[Series], time: bool, open: bool) -> RecordBatch {
    let mut cols: Vec<(&str, ArrayRef)> = vec![(
        "symbol",
        Arc::new(StringArray::from_iter_values(
            series.iter().flat_map(|s| s.days.iter().map(|_| s.name)),
        )),
    )];
    if time {
        cols.push((
            "time",
            Arc::new(TimestampMicrosecondArray::from_iter_values(
                series
                    .iter()
                    .flat_map(|s| s.days.iter().map(|d| START_US + d * DAY_US)),
            )),
        ));
    }
    if open {
        cols.push((
            "open",
            Arc::new(Float64Array::from_iter_values(
                series.iter().flat_map(|s| s.open.iter().copied()),
            )),
        ));
    }
    cols.push((
        "close",
        Arc::new(Float64Array::from_iter_values(
            series.iter().flat_map(|s| s.close.iter().copied()),
        )),
    ));
    RecordBatch::try_from_iter(cols).unwrap()
}

fn keyed(name: &str) -> FlightDescriptor {
    FlightDescriptor::new_cmd(json!({"dataset": name, "key": "symbol"}).to_string())
}

/// The kernel's plain run of one combo on the same universe (the contract written out): the
/// server's numbers must be these.
fn plain(
    series: &[Series],
    n: f64,
    m: f64,
    longs: usize,
    k: usize,
) -> sweepflight_kernel::portfolio::PortfolioRun {
    let views: Vec<Vec<i64>> = series.iter().map(|s| s.days.clone()).collect();
    let refs: Vec<&[i64]> = views.iter().map(Vec::as_slice).collect();
    let cal = Calendar::of(&refs);
    let on: Vec<OnCalendar<'_>> = cal
        .row_of
        .iter()
        .zip(series)
        .map(|(row_of, s)| OnCalendar {
            row_of,
            open: Some(&s.open),
            close: &s.close,
        })
        .collect();
    let program = Program::portfolio(
        &[
            (Field::Rank, "roc(close, n)"),
            (Field::Filter, "close > sma(close, m)"),
        ],
        &[],
        &[],
    )
    .unwrap();
    let values: Vec<SeriesValues> = series
        .iter()
        .map(|s| SeriesValues::of(&Bars::closes(&s.close), &program, &[n, m]))
        .collect();
    let arrays: Vec<ComboArrays<'_>> = values.iter().map(SeriesValues::arrays).collect();
    let rules = Rules {
        longs,
        shorts: 0,
        keep: None,
        fill: PortfolioFill::NextOpen,
        fee: 0.0009,
        slippage: 0.0,
    };
    run(
        &on,
        &arrays,
        &rules,
        &every(0, cal.len(), k),
        (0, cal.len()),
        1.0,
        None,
        Keep {
            trades: true,
            rows: true,
        },
    )
}

fn rotation() -> Value {
    json!({"rank": "roc(close, n)", "filter": "close > sma(close, m)", "longs": "k", "rebalance": 5})
}

#[tokio::test]
async fn a_rotation_over_a_gappy_universe_on_every_verb_equals_the_plain_run() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let u = universe();
    put_with(&mut c, keyed("u"), vec![long_batch(&u, true, true)])
        .await
        .unwrap();
    let body = json!({"dataset": "u", "strategy": rotation(),
        "grid": {"n": [5, 10], "m": [10], "k": [1, 2]}});
    let b = sweep(&mut c, body.clone()).await.unwrap();
    let names: Vec<String> = b
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(
        names,
        [
            "combo",
            "n",
            "m",
            "k",
            "total_return",
            "annual_return",
            "volatility",
            "sharpe",
            "sortino",
            "max_drawdown",
            "turnover",
            "fees",
            "rebalances",
            "avg_holdings"
        ]
    );
    assert_eq!(i64s(&b, "combo"), [0, 1, 2, 3]);
    let totals = f64s(&b, "total_return");
    let fees = f64s(&b, "fees");
    for (i, (n, k)) in [(5.0, 1), (5.0, 2), (10.0, 1), (10.0, 2)]
        .into_iter()
        .enumerate()
    {
        let want = plain(&u, n, 10.0, k, 5);
        assert_eq!(totals[i], want.metrics.total_return, "combo {i}");
        assert_eq!(fees[i], want.metrics.fees, "combo {i}");
        assert_eq!(i64s(&b, "rebalances")[i] as u64, want.metrics.rebalances);
        assert!(
            want.trades.len() > 10,
            "combo {i} trades: {}",
            want.trades.len()
        );
    }
    // Trades: each fill's series by key, the fees adding up to the metric.
    let t = table(
        &mut c,
        "trades",
        &json!({"dataset": "u", "strategy": rotation(),
        "params": [[10, 10, 2]]}),
    )
    .await
    .unwrap();
    let want = plain(&u, 10.0, 10.0, 2, 5);
    assert_eq!(t.num_rows(), want.trades.len());
    let series = t
        .column_by_name("series")
        .unwrap()
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap();
    for (k, tr) in want.trades.iter().enumerate() {
        assert_eq!(series.value(k), u[tr.series].name);
        assert_eq!(i64s(&t, "row")[k] as usize, tr.row);
        assert_eq!(f64s(&t, "shares")[k], tr.shares);
        assert_eq!(f64s(&t, "price")[k], tr.price);
    }
    assert!(t.column_by_name("time").is_some());
    // Equity: every calendar row, the last one the total return.
    let e = table(
        &mut c,
        "equity",
        &json!({"dataset": "u", "strategy": rotation(),
        "params": [[10, 10, 2]]}),
    )
    .await
    .unwrap();
    assert_eq!(e.num_rows(), 160);
    let eq = f64s(&e, "equity");
    assert_eq!((eq[159] - 1.0) * 100.0, want.metrics.total_return);
    assert_eq!(
        i64s(&e, "holdings"),
        want.rows
            .iter()
            .map(|r| r.holdings as i64)
            .collect::<Vec<_>>()
    );
    // Selection ranks combos, and trades / equity follow it.
    let best = sweep(
        &mut c,
        json!({"dataset": "u", "strategy": rotation(),
        "grid": {"n": [5, 10], "m": [10], "k": [1, 2]}, "order_by": "total_return", "top": 1}),
    )
    .await
    .unwrap();
    let top = totals.iter().copied().fold(f64::MIN, f64::max);
    assert_eq!(f64s(&best, "total_return"), [top]);
    let e1 = table(
        &mut c,
        "equity",
        &json!({"dataset": "u", "strategy": rotation(),
        "grid": {"n": [5, 10], "m": [10], "k": [1, 2]}, "order_by": "total_return", "top": 1}),
    )
    .await
    .unwrap();
    assert_eq!(i64s(&e1, "combo")[0], i64s(&best, "combo")[0]);
    // Explain: the call's series and calendar.
    let x: Value =
        serde_json::from_slice(&action(&mut c, "explain", body.to_string()).await.unwrap())
            .unwrap();
    assert_eq!(x["series"], 5);
    assert_eq!(x["calendar"], 160);
    assert_eq!(x["combos"], 4);
    assert_eq!(x["params"][2], json!({"name": "k", "kind": "int"}));
    // Two series only, in the order listed; and a session and the exchange give the same.
    let two = sweep(
        &mut c,
        json!({"dataset": "u", "strategy": rotation(), "series": ["CCC", "AAA"],
        "params": [[5, 10, 1]]}),
    )
    .await
    .unwrap();
    assert_eq!(two.num_rows(), 1);
    let via = session(&mut c, &json!({"op": "session", "keyed": true, "strategy": rotation()}),
        &[json!({"dataset": "u", "strategy": rotation(), "grid": {"n": [5, 10], "m": [10], "k": [1, 2]}})])
        .await
        .unwrap();
    let via = arrow_select::concat::concat_batches(&via[0].schema(), &via).unwrap();
    assert_eq!(f64s(&via, "total_return"), totals);
    let ex = exchange_sweep(
        &mut c,
        json!({"op": "sweep", "key": "symbol", "strategy": rotation(),
        "grid": {"n": [5, 10], "m": [10], "k": [1, 2]}}),
        vec![long_batch(&u, true, true)],
    )
    .await;
    let ex = arrow_select::concat::concat_batches(&ex[0].schema(), &ex).unwrap();
    assert_eq!(f64s(&ex, "total_return"), totals);
}

#[tokio::test]
async fn a_portfolio_job_reports_its_combos_and_answers_the_sweep() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let u = universe();
    put_with(&mut c, keyed("u"), vec![long_batch(&u, true, true)])
        .await
        .unwrap();
    let body = json!({"dataset": "u", "strategy": rotation(),
        "grid": {"n": [5, 10], "m": [10, 20], "k": [1, 2]}});
    for verb in ["sweep", "trades", "equity"] {
        let mut job_body = body.clone();
        if verb != "sweep" {
            job_body["action"] = json!(verb);
            job_body["order_by"] = json!("sharpe");
            job_body["top"] = json!(2);
        }
        let mut direct = job_body.clone();
        direct.as_object_mut().unwrap().remove("action");
        let want = table(&mut c, verb, &direct).await.unwrap();
        let job = crate::jobs::submit(&mut c, &job_body).await;
        let seen = crate::jobs::wait(&mut c, &job).await;
        let last = seen.last().unwrap();
        assert_eq!(last["state"], "done", "{verb}: {last}");
        assert_eq!(last["combos_done"], last["combos_total"], "{verb}: {last}");
        assert!(
            last["combos_total"].as_u64().unwrap() >= 8,
            "{verb}: {last}"
        );
        let got = crate::jobs::fetch(&mut c, &job).await.unwrap();
        assert_eq!(got, want, "{verb}");
    }
}

#[tokio::test]
async fn bad_portfolio_input_is_refused_with_its_code_and_the_fix() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let u = universe();
    put_with(&mut c, keyed("u"), vec![long_batch(&u, true, true)])
        .await
        .unwrap();
    put_with(&mut c, keyed("notime"), vec![long_batch(&u, false, true)])
        .await
        .unwrap();
    put_with(&mut c, keyed("noopen"), vec![long_batch(&u, true, false)])
        .await
        .unwrap();
    // An int64 time: it aligns the universe, but has no dates.
    let int_time = {
        let b = long_batch(&u, true, true);
        let t: Vec<i64> = u.iter().flat_map(|s| s.days.clone()).collect();
        RecordBatch::try_from_iter([
            ("symbol", Arc::clone(b.column(0))),
            ("time", Arc::new(Int64Array::from(t)) as ArrayRef),
            ("open", Arc::clone(b.column(2))),
            ("close", Arc::clone(b.column(3))),
        ])
        .unwrap()
    };
    put_with(&mut c, keyed("inttime"), vec![int_time])
        .await
        .unwrap();
    // A series whose bars were appended out of order.
    let shuffled = {
        let mut s = universe();
        s[1].days.swap(3, 4);
        long_batch(&s, true, true)
    };
    put_with(&mut c, keyed("shuffled"), vec![shuffled])
        .await
        .unwrap();
    let p = |extra: Value| {
        let mut s = json!({"rank": "roc(close, 5)", "longs": 2, "rebalance": 5});
        for (k, v) in extra.as_object().unwrap() {
            if v.is_null() {
                s.as_object_mut().unwrap().remove(k);
            } else {
                s[k] = v.clone();
            }
        }
        s
    };
    let with = |strategy: Value, extra: Value| {
        let mut b = json!({"dataset": "u", "strategy": strategy, "params": [[]]});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };
    let bad = Code::InvalidArgument;
    let cases: Vec<(Value, Code, &str)> = vec![
        (
            with(p(json!({"long": "close > 1"})), json!({})),
            bad,
            "`strategy.long` is a key of a long / short strategy",
        ),
        (
            with(json!({"long": "close > 1", "longs": 2}), json!({})),
            bad,
            "`strategy.longs` is a key of a portfolio strategy, which needs `rank`",
        ),
        (
            with(p(json!({"longs": 2.5})), json!({})),
            bad,
            "`strategy.longs` must be an integer in 0..=100000 or a parameter name, got 2.5",
        ),
        (
            with(p(json!({"longs": 3.0})), json!({})),
            bad,
            "`strategy.longs` must be an integer",
        ),
        (with(p(json!({"longs": -1})), json!({})), bad, "got -1"),
        (
            with(p(json!({"longs": 100_001})), json!({})),
            bad,
            "0..=100000",
        ),
        (
            with(p(json!({"shorts": "2"})), json!({})),
            bad,
            "`strategy.shorts` must be an integer",
        ),
        (
            with(p(json!({"keep": true})), json!({})),
            bad,
            "`strategy.keep` must be an integer",
        ),
        (
            with(p(json!({"keep": "close"})), json!({})),
            bad,
            "names the column \"close\"",
        ),
        (
            with(p(json!({"rebalance": "yearly!"})), json!({})),
            bad,
            "\"daily\", \"weekly\", \"monthly\" or a parameter name",
        ),
        (
            with(p(json!({"rebalance": 0})), json!({})),
            bad,
            "`strategy.rebalance` must be an integer in 1..=67108864",
        ),
        (
            with(p(json!({"rebalance": 2.5})), json!({})),
            bad,
            "`strategy.rebalance` must be",
        ),
        (
            with(p(json!({"rebalance": null})), json!({})),
            bad,
            "needs `rebalance`",
        ),
        (
            with(p(json!({"longs": null})), json!({})),
            bad,
            "needs `longs` or `shorts`",
        ),
        (
            with(p(json!({"rank": "close > 1"})), json!({})),
            bad,
            "`rank` must be a number or a series",
        ),
        (
            with(p(json!({"filter": "close"})), json!({})),
            bad,
            "`filter` must be a condition",
        ),
        (
            with(p(json!({"weight": "close > 1"})), json!({})),
            bad,
            "`weight` must be a number or a series",
        ),
        (
            with(p(json!({"rank": 5})), json!({})),
            bad,
            "`strategy.rank` must be a string",
        ),
        (
            with(json!({"rank": null, "longs": 1, "rebalance": 1}), json!({})),
            bad,
            "`strategy.rank` is null",
        ),
        (
            with(p(json!({"top": 3})), json!({})),
            bad,
            "unknown field \"top\"; a portfolio strategy takes",
        ),
        (
            with(
                p(json!({"rank": "roc(close, n)", "longs": "turnover"})),
                json!({"params": [[5, 1]]}),
            ),
            bad,
            "names a column of the reply",
        ),
        (
            with(
                p(json!({"rank": "roc(close, n)", "longs": "volume"})),
                json!({"params": [[5, 1]]}),
            ),
            bad,
            "names the column \"volume\"",
        ),
        (
            with(p(json!({})), json!({"side": "long"})),
            bad,
            "`side` does not apply to a portfolio strategy",
        ),
        (
            with(p(json!({})), json!({"stop_loss": 0.05})),
            bad,
            "`stop_loss` does not apply",
        ),
        (
            with(p(json!({})), json!({"take_profit": "0.1"})),
            bad,
            "`take_profit` does not apply",
        ),
        (
            with(p(json!({})), json!({"trailing_stop": 0.02})),
            bad,
            "`trailing_stop` does not apply",
        ),
        (
            with(p(json!({})), json!({"stops": "high_low"})),
            bad,
            "`stops` does not apply",
        ),
        (
            with(p(json!({})), json!({"warmup": 20})),
            bad,
            "`warmup` does not apply",
        ),
        (
            with(p(json!({})), json!({"ignore_time": false})),
            bad,
            "`ignore_time` does not apply",
        ),
        (
            json!({"dataset": "u", "strategy": p(json!({})), "lengths": [10]}),
            bad,
            "`lengths` does not apply",
        ),
        (
            with(p(json!({})), json!({"series": ["AAA", "ZZZ"]})),
            Code::NotFound,
            "ZZZ",
        ),
        (
            with(p(json!({})), json!({"series": ["AAA", "AAA"]})),
            bad,
            "series \"AAA\" is listed twice",
        ),
        (
            with(p(json!({})), json!({"series": []})),
            bad,
            "`series` must list at least one series",
        ),
        (
            with(p(json!({})), json!({"rows": [160, 200]})),
            bad,
            "`rows` starts at 160, but the call's calendar has 160 rows",
        ),
        (
            with(p(json!({})), json!({"rows": [150, 160], "blocks": 20})),
            bad,
            "`blocks` is 20, but the portfolio runs only 10 calendar rows",
        ),
        (
            with(
                p(json!({"rank": "roc(close, n)", "longs": "k"})),
                json!({"params": [[5, -1]]}),
            ),
            bad,
            "params[0][1] (k) must be an integer in 0..=100000, got -1",
        ),
        (
            with(
                p(json!({"rank": "roc(close, n)", "longs": "k"})),
                json!({"params": [[5, 1.5]]}),
            ),
            bad,
            "(k) must be an integer in 0..=100000, got 1.5",
        ),
        (
            with(
                p(json!({"rank": "roc(close, n)", "rebalance": "r"})),
                json!({"params": [[5, 0]]}),
            ),
            bad,
            "(r) must be an integer in 1..=67108864, got 0",
        ),
        (with(p(json!({"rank": "pred"})), json!({})), bad, "pred"),
        (
            with(p(json!({})), json!({"where": {"pnl": [0, null]}})),
            bad,
            "unknown result column \"pnl\"",
        ),
        (
            with(p(json!({})), json!({"order_by": "series"})),
            bad,
            "unknown result column \"series\"",
        ),
        (
            with(p(json!({})), json!({"fill": "tomorrow"})),
            bad,
            "`fill` must be \"close\" or \"next_open\"",
        ),
        (
            with(p(json!({})), json!({"slippage": 0.7})),
            bad,
            "`slippage` must be a fraction in [0, 0.5)",
        ),
        (
            with(p(json!({})), json!({"constraint": "z > 1"})),
            bad,
            "`constraint` names `z`",
        ),
        (
            with(
                p(json!({"rebalance": "weekly"})),
                json!({"dataset": "inttime"}),
            ),
            bad,
            "time is int64 (a number without a unit)",
        ),
        (
            with(
                p(json!({})),
                json!({"dataset": "inttime", "periods_per_year": "auto"}),
            ),
            bad,
            "has no time of a timestamp or date type",
        ),
        (
            with(p(json!({})), json!({"dataset": "notime"})),
            bad,
            "a portfolio aligns its series by time; dataset `notime` has no usable time column",
        ),
        (
            with(p(json!({})), json!({"dataset": "noopen"})),
            bad,
            "needs a column `open`",
        ),
        (
            with(p(json!({})), json!({"dataset": "shuffled"})),
            Code::FailedPrecondition,
            "out of time order",
        ),
        (
            with(p(json!({})), json!({"dataset": "nope"})),
            Code::NotFound,
            "nope",
        ),
    ];
    assert!(cases.len() >= 40);
    for (body, want, says) in &cases {
        for verb in ["sweep", "trades", "equity", "explain"] {
            let got = action(&mut c, verb, body.to_string()).await;
            // explain needs no dataset: a call that only the data refuses answers there.
            let data_only = says.contains("nope")
                || body["dataset"] != "u" && verb == "explain" && *want == Code::NotFound;
            if verb == "explain" && data_only {
                continue;
            }
            assert!(got.is_err(), "{verb} {body} must be refused");
            let (code, msg) = refused(got);
            assert_eq!(code, *want, "{verb} {body}: {msg}");
            assert!(msg.contains(says), "{verb} {body}: {msg}");
        }
    }
    // Nothing was stored or changed by the refusals: the good call still answers.
    let ok = sweep(&mut c, with(p(json!({})), json!({}))).await.unwrap();
    assert_eq!(ok.num_rows(), 1);
}

#[tokio::test]
async fn a_portfolio_walks_forward_over_its_calendar() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    put_with(
        &mut c,
        keyed("u"),
        vec![long_batch(&universe(), true, true)],
    )
    .await
    .unwrap();
    let grid = json!({"n": [5, 10], "m": [10], "k": [1, 2]});
    let w = table(
        &mut c,
        "walk_forward",
        &json!({"dataset": "u", "strategy": rotation(),
        "grid": grid, "folds": {"train": 60, "test": 30}}),
    )
    .await
    .unwrap();
    let names: Vec<String> = w
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(
        &names[..6],
        [
            "fold",
            "train_start",
            "train_end",
            "test_start",
            "test_end",
            "combo"
        ]
    );
    assert!(names.contains(&"turnover".to_owned()) && !names.contains(&"series".to_owned()));
    // Rolling folds over the 160 calendar rows: train 60, test 30, each test after its train.
    assert_eq!(i64s(&w, "train_start"), [0, 30, 60]);
    assert_eq!(i64s(&w, "test_end"), [90, 120, 150]);
    for f in 0..w.num_rows() {
        let (a, b) = (i64s(&w, "train_start")[f], i64s(&w, "train_end")[f]);
        let (x, y) = (i64s(&w, "test_start")[f], i64s(&w, "test_end")[f]);
        // The in-sample best by total_return (the default for a portfolio) ...
        let train = sweep(
            &mut c,
            json!({"dataset": "u", "strategy": rotation(), "grid": grid,
            "rows": [a, b], "order_by": "total_return", "top": 1}),
        )
        .await
        .unwrap();
        assert_eq!(i64s(&w, "combo")[f], i64s(&train, "combo")[0], "fold {f}");
        assert_eq!(f64s(&w, "train_score")[f], f64s(&train, "total_return")[0]);
        // ... then run alone on the test rows, from cash.
        let params = [
            i64s(&train, "n")[0],
            i64s(&train, "m")[0],
            i64s(&train, "k")[0],
        ];
        let test = sweep(
            &mut c,
            json!({"dataset": "u", "strategy": rotation(),
            "params": [params], "rows": [x, y]}),
        )
        .await
        .unwrap();
        assert_eq!(
            f64s(&w, "total_return")[f],
            f64s(&test, "total_return")[0],
            "fold {f}"
        );
    }
}

#[tokio::test]
async fn a_ranked_grid_larger_than_a_step_runs_in_steps_with_the_same_rows() {
    let stepped = TestServer::with(|c| c.top_step_rows = 3).await;
    let whole = TestServer::start().await;
    let grid = json!({"n": [5, 10, 15, 20], "m": [10, 20], "k": [1, 2]});
    let mut answers = Vec::new();
    for server in [&stepped, &whole] {
        let mut c = server.client().await;
        put_with(
            &mut c,
            keyed("u"),
            vec![long_batch(&universe(), true, true)],
        )
        .await
        .unwrap();
        answers.push(
            sweep(
                &mut c,
                json!({"dataset": "u", "strategy": rotation(), "grid": grid,
                "where": {"turnover": [0.5, null]}, "order_by": "sharpe", "top": 5}),
            )
            .await
            .unwrap(),
        );
    }
    assert_eq!(answers[0].num_rows(), 5);
    assert_eq!(answers[0], answers[1]);
}

#[tokio::test]
async fn a_portfolio_past_the_memory_budget_is_refused_before_any_work() {
    // The smallest budget the server keeps (one 64 KiB unit); 20 series x 800 days need more
    // for one combo (their rows on the calendar alone are 64,000 bytes).
    let server = TestServer::with(|c| c.sweep_memory_bytes = 1).await;
    let mut c = server.client().await;
    const NAMES: [&str; 20] = [
        "A0", "A1", "A2", "A3", "A4", "A5", "A6", "A7", "A8", "A9", "B0", "B1", "B2", "B3", "B4",
        "B5", "B6", "B7", "B8", "B9",
    ];
    let many: Vec<Series> = NAMES
        .iter()
        .enumerate()
        .map(|(k, &name)| {
            let close: Vec<f64> = (0..800)
                .map(|d| 100.0 + f64::from(d % (7 + k as i32)))
                .collect();
            Series {
                name,
                days: (0..800).collect(),
                open: close.clone(),
                close,
            }
        })
        .collect();
    put_with(&mut c, keyed("u"), vec![long_batch(&many, true, true)])
        .await
        .unwrap();
    let (code, msg) = refused(
        sweep(
            &mut c,
            json!({"dataset": "u", "strategy": rotation(), "params": [[5, 10, 1]]}),
        )
        .await,
    );
    assert_eq!(code, Code::ResourceExhausted, "{msg}");
    assert!(
        msg.contains("one combo of this portfolio needs") && msg.contains("--sweep-memory-bytes"),
        "{msg}"
    );
}
