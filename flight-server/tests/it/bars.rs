//! Real bars from outside (protocol v1.3, "Datasets: OHLCV bars and time" and "Execution
//! options"): a yfinance-shaped put (capitalised names, a date column) is recognised and read
//! back as sent; the execution options on every verb equal the plain v1.3 loop's trades; exit
//! reasons, entry and exit times, equity times; `periods_per_year: "auto"`; and a table of bad
//! bars and bad options, each either stored with its column reported unusable (and the sweep
//! that needs it refused with the reason) or refused as the contract says.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Date32Type;
use arrow_array::{
    ArrayRef, Date32Array, Float32Array, Float64Array, Int64Array, RecordBatch, StringArray,
    TimestampSecondArray,
};
use arrow_flight::FlightDescriptor;
use serde_json::{Value, json};
use sweepflight_kernel::lines::Bars;
use sweepflight_kernel::{Execution, Fill, Params, StopsOn, Strategy, oracle};
use tonic::Code;

use crate::common::{
    TestServer, code, exchange_sweep, f64s, i64s, infos, put, put_with, rows, session, sweep, table,
};

/// Bars of a noisy walk: gaps at the open now and then, highs and lows beyond both.
struct Ohlc {
    open: Vec<f64>,
    high: Vec<f64>,
    low: Vec<f64>,
    close: Vec<f64>,
    volume: Vec<f64>,
}

fn ohlc(n: usize, seed: u64) -> Ohlc {
    let mut s = seed | 1;
    let mut unit = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut o = Ohlc {
        open: vec![],
        high: vec![],
        low: vec![],
        close: vec![],
        volume: vec![],
    };
    let mut c = 100.0f64;
    for i in 0..n {
        let gap = if i % 9 == 0 {
            (unit() - 0.5) * 4.0
        } else {
            0.0
        };
        let open = ((c + gap) * 4.0).round() / 4.0;
        c = ((open + (unit() - 0.5) * 2.5) * 4.0).round() / 4.0;
        o.open.push(open);
        o.high.push(open.max(c) + (unit() * 4.0).floor() * 0.25);
        o.low.push(open.min(c) - (unit() * 4.0).floor() * 0.25);
        o.close.push(c);
        o.volume.push((unit() * 1e6).round());
    }
    o
}

/// A yfinance-shaped batch: Date (date32), Open, High, Low, Close, Adj Close, Volume (int64).
fn yfinance(o: &Ohlc) -> RecordBatch {
    let days = Date32Array::from_iter_values((0..o.close.len() as i32).map(|i| 19_000 + i));
    RecordBatch::try_from_iter([
        ("Date", Arc::new(days) as ArrayRef),
        (
            "Open",
            Arc::new(Float64Array::from(o.open.clone())) as ArrayRef,
        ),
        (
            "High",
            Arc::new(Float64Array::from(o.high.clone())) as ArrayRef,
        ),
        (
            "Low",
            Arc::new(Float64Array::from(o.low.clone())) as ArrayRef,
        ),
        (
            "Close",
            Arc::new(Float64Array::from(o.close.clone())) as ArrayRef,
        ),
        (
            "Adj Close",
            Arc::new(Float64Array::from(o.close.clone())) as ArrayRef,
        ),
        (
            "Volume",
            Arc::new(Int64Array::from_iter_values(
                o.volume.iter().map(|&v| v as i64),
            )) as ArrayRef,
        ),
    ])
    .unwrap()
}

fn bars(o: &Ohlc) -> Bars<'_> {
    Bars {
        open: Some(&o.open),
        high: Some(&o.high),
        low: Some(&o.low),
        close: &o.close,
        volume: Some(&o.volume),
        ..Bars::default()
    }
}

/// The options a body gives, as the kernel's execution (fee 0.0009).
fn exec_of(body: &Value) -> Execution {
    Execution {
        side: match body["side"].as_str() {
            Some("long") => sweepflight_kernel::Side::Long,
            Some("short") => sweepflight_kernel::Side::Short,
            _ => sweepflight_kernel::Side::Both,
        },
        stop_loss: body["stop_loss"].as_f64(),
        take_profit: body["take_profit"].as_f64(),
        trailing_stop: body["trailing_stop"].as_f64(),
        fill: Fill::from_name(body["fill"].as_str().unwrap_or("close")).unwrap(),
        stops: StopsOn::from_name(body["stops"].as_str().unwrap_or("close")).unwrap(),
        slippage: body["slippage"].as_f64().unwrap_or(0.0),
        ..Execution::new(0.0009)
    }
}

#[tokio::test]
async fn yfinance_bars_are_recognised_and_read_back_as_sent() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let o = ohlc(500, 3);
    let stored = put(&mut c, "goog", vec![yfinance(&o)]).await.unwrap();
    assert_eq!(
        stored["columns"],
        json!(["open", "high", "low", "close", "volume", "time"])
    );
    assert_eq!(stored["unusable"], json!({}));
    let info = infos(&mut c).await.remove(0);
    let meta: Value = serde_json::from_slice(&info.app_metadata).unwrap();
    assert_eq!(meta["columns"], stored["columns"]);
    // DoGet: the table as sent, names and types (Volume stays int64, Date date32).
    let back = rows(&mut c, &info).await;
    let names: Vec<&str> = back
        .schema_ref()
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    assert_eq!(
        names,
        [
            "Date",
            "Open",
            "High",
            "Low",
            "Close",
            "Adj Close",
            "Volume"
        ]
    );
    assert_eq!(back.column(0).data_type(), &arrow_schema::DataType::Date32);
    assert_eq!(back.column(6).data_type(), &arrow_schema::DataType::Int64);
    assert_eq!(f64s(&back, "High"), o.high);
}

#[tokio::test]
async fn every_option_on_the_wire_trades_as_the_v1_3_loop() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let o = ohlc(3_000, 11);
    put(&mut c, "b", vec![yfinance(&o)]).await.unwrap();
    let grid = [(5u32, 20u32), (10, 30), (3, 9)];
    let options = [
        json!({}),
        json!({"fill": "next_open"}),
        json!({"stops": "high_low", "stop_loss": 0.01, "take_profit": 0.02}),
        json!({"fill": "next_open", "stops": "high_low", "trailing_stop": 0.015}),
        json!({"fill": "next_open", "stops": "high_low", "stop_loss": 0.02, "trailing_stop": 0.01, "slippage": 0.001, "side": "long"}),
        json!({"slippage": 0.002, "trailing_stop": 0.01, "side": "short"}),
    ];
    for opts in &options {
        let mut body = json!({"dataset": "b", "strategy": "sma_cross",
                              "params": grid.iter().map(|&(f, s)| json!([f, s])).collect::<Vec<_>>()});
        for (k, v) in opts.as_object().unwrap() {
            body[k] = v.clone();
        }
        let exec = exec_of(&body);
        let wants: Vec<Vec<oracle::Trade>> = grid
            .iter()
            .map(|&(f, s)| {
                let p = Params::new(Strategy::SmaCross, &[f64::from(f), f64::from(s)]).unwrap();
                oracle::execute_with_exits(
                    &bars(&o),
                    &oracle::signals(&o.close, &p),
                    (&[], &[]),
                    &exec,
                )
            })
            .collect();
        let got = sweep(&mut c, body.clone()).await.unwrap();
        let pnl = f64s(&got, "pnl");
        let trades = i64s(&got, "trades");
        for (k, want) in wants.iter().enumerate() {
            assert_eq!(trades[k] as usize, want.len(), "{opts}");
            let sum: f64 = want.iter().map(|t| t.net).sum();
            assert!((pnl[k] - sum).abs() <= 1e-6, "{opts}");
        }
        // The trades reply: every trade, its reason and its times.
        let t = table(&mut c, "trades", &body).await.unwrap();
        let reasons: Vec<&str> = t
            .column_by_name("exit_reason")
            .unwrap()
            .as_string::<i32>()
            .iter()
            .map(Option::unwrap)
            .collect();
        let want: Vec<oracle::Trade> = wants.concat();
        assert_eq!(reasons.len(), want.len(), "{opts}");
        for (k, w) in want.iter().enumerate() {
            assert_eq!(reasons[k], w.reason.name(), "{opts} trade {k}");
        }
        assert_eq!(
            i64s(&t, "entry_row"),
            want.iter().map(|w| w.entry_row as i64).collect::<Vec<_>>()
        );
        assert_eq!(
            f64s(&t, "entry_price"),
            want.iter().map(|w| w.entry_price).collect::<Vec<_>>()
        );
        assert_eq!(
            f64s(&t, "exit_price"),
            want.iter().map(|w| w.exit_price).collect::<Vec<_>>()
        );
        let entry_time = t
            .column_by_name("entry_time")
            .unwrap()
            .as_primitive::<Date32Type>();
        for (k, w) in want.iter().enumerate() {
            assert_eq!(entry_time.value(k), 19_000 + w.entry_row as i32);
        }
        assert!(t.column_by_name("exit_time").is_some());
    }
}

#[tokio::test]
async fn equity_times_periods_per_year_auto_and_every_verb() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let o = ohlc(1_000, 5);
    put(&mut c, "d", vec![yfinance(&o)]).await.unwrap();
    let body = json!({"dataset": "d", "strategy": "sma_cross", "params": [[5, 20]],
                      "fill": "next_open", "stops": "high_low", "trailing_stop": 0.02,
                      "periods_per_year": "auto"});
    // Daily bars one day apart: (n - 1) / (span in years) = 365.25.
    let auto = sweep(&mut c, body.clone()).await.unwrap();
    let mut given = body.clone();
    given["periods_per_year"] = json!(365.25);
    let fixed = sweep(&mut c, given).await.unwrap();
    let (a, f) = (f64s(&auto, "sharpe")[0], f64s(&fixed, "sharpe")[0]);
    assert!((a - f).abs() <= 1e-9 * f.abs(), "{a} vs {f}");
    // The equity reply carries each bar's time.
    let e = table(&mut c, "equity", &body).await.unwrap();
    let times = e
        .column_by_name("time")
        .unwrap()
        .as_primitive::<Date32Type>();
    assert_eq!(times.len(), 1_000);
    assert_eq!(times.value(10), 19_010);
    // Walk-forward, a session and the exchange take the options too.
    let wf = json!({"dataset": "d", "strategy": "sma_cross", "grid": {"fast": [5, 10], "slow": [20, 40]},
                    "fill": "next_open", "stops": "high_low", "trailing_stop": 0.02,
                    "folds": {"train": 400, "test": 200}});
    let w = table(&mut c, "walk_forward", &wf).await.unwrap();
    assert!(w.num_rows() >= 2);
    let s = session(
        &mut c,
        &json!({"op": "session", "strategy": "sma_cross"}),
        &[
            json!({"dataset": "d", "strategy": "sma_cross", "params": [[5, 20]],
                   "fill": "next_open", "stops": "high_low", "trailing_stop": 0.02}),
        ],
    )
    .await
    .unwrap();
    assert_eq!(f64s(&s[0], "pnl"), f64s(&fixed, "pnl"));
    let x = exchange_sweep(
        &mut c,
        json!({"op": "sweep", "strategy": "sma_cross", "params": [[5, 20]], "fill": "next_open",
               "stops": "high_low", "trailing_stop": 0.02}),
        vec![yfinance(&o)],
    )
    .await;
    assert_eq!(f64s(&x[0], "pnl"), f64s(&fixed, "pnl"));
    // A job runs the same request (its body travels whole) and answers the same rows.
    let mut job_body = body.clone();
    job_body["action"] = json!("sweep");
    let job = crate::jobs::submit(&mut c, &job_body).await;
    let ended = crate::jobs::wait(&mut c, &job).await;
    assert_eq!(ended.last().unwrap()["state"], "done", "{ended:?}");
    assert_eq!(crate::jobs::fetch(&mut c, &job).await.unwrap(), auto);
    // Bars put with compressed bodies (LZ4 and zstd) are the same bars: read back as sent,
    // swept to the same rows.
    for codec in [
        arrow_ipc::CompressionType::LZ4_FRAME,
        arrow_ipc::CompressionType::ZSTD,
    ] {
        let options = arrow_ipc::writer::IpcWriteOptions::default()
            .try_with_compression(Some(codec))
            .unwrap();
        let batch = yfinance(&o);
        let parts: Vec<RecordBatch> = (0..4).map(|k| batch.slice(k * 250, 250)).collect();
        let stream = arrow_flight::encode::FlightDataEncoderBuilder::new()
            .with_options(options)
            .with_flight_descriptor(Some(FlightDescriptor::new_path(vec!["z".into()])))
            .build(futures::stream::iter(parts.into_iter().map(Ok)));
        let _: Vec<_> = futures::TryStreamExt::try_collect(c.do_put(stream).await.unwrap())
            .await
            .unwrap();
        let info = infos(&mut c)
            .await
            .into_iter()
            .find(|i| {
                i.flight_descriptor
                    .as_ref()
                    .is_some_and(|d| d.path == ["z"])
            })
            .unwrap();
        assert_eq!(rows(&mut c, &info).await, batch, "{codec:?}");
        let mut on_z = body.clone();
        on_z["dataset"] = json!("z");
        assert_eq!(sweep(&mut c, on_z).await.unwrap(), auto, "{codec:?}");
    }
}

/// What a bad-bars row expects.
enum Expect {
    /// Stored; `column` unusable with a reason containing the text; a sweep that needs the
    /// column is refused with it.
    Unusable(&'static str, &'static str),
    /// The call refused with this code and text.
    Refused(Code, &'static str),
    /// Stored with `time` unusable for a row out of order (the reason contains the text);
    /// every sweep refused with FAILED_PRECONDITION naming it (protocol v1.4).
    OutOfOrder(&'static str),
}

/// One row of the table: what it is, the columns besides `close`, the sweep's options, and
/// what should happen.
type Row = (&'static str, Vec<(&'static str, ArrayRef)>, Value, Expect);

/// A batch of `close` (10 rows) and extra columns.
fn with(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
    let close: ArrayRef = Arc::new(Float64Array::from_iter_values(
        (0..10).map(|i| 100.0 + f64::from(i)),
    ));
    RecordBatch::try_from_iter(std::iter::once(("close", close)).chain(cols)).unwrap()
}

fn f(v: &[f64]) -> ArrayRef {
    Arc::new(Float64Array::from(v.to_vec()))
}

/// Prices around the close of [`with`] (100..109): open = close, high = close + 1, low =
/// close - 1, with `change` applied.
fn prices(change: impl Fn(&str, usize, f64) -> f64) -> Vec<(&'static str, ArrayRef)> {
    ["open", "high", "low"]
        .into_iter()
        .map(|n| {
            let base = |i: usize| {
                let c = 100.0 + i as f64;
                match n {
                    "high" => c + 1.0,
                    "low" => c - 1.0,
                    _ => c,
                }
            };
            (
                n,
                f(&(0..10).map(|i| change(n, i, base(i))).collect::<Vec<_>>()),
            )
        })
        .collect()
}

#[tokio::test]
async fn bad_bars_are_stored_unusable_and_bad_options_refused() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let ok = prices(|_, _, v| v);
    let set = |name: &'static str, row: usize, value: f64| {
        prices(move |n, i, v| if n == name && i == row { value } else { v })
    };
    let mut rows: Vec<Row> = vec![
        (
            "high below close",
            set("high", 7, 106.5),
            json!({"stops": "high_low", "stop_loss": 0.01}),
            Expect::Unusable("high", "row 7: high 106.5 < close 107"),
        ),
        (
            "low above close",
            set("low", 2, 102.5),
            json!({"stops": "high_low", "stop_loss": 0.01}),
            Expect::Unusable("low", "row 2: low 102.5 > close 102"),
        ),
        (
            "open above high",
            set("open", 4, 106.0),
            json!({"fill": "next_open"}),
            Expect::Unusable("open", "row 4: open 106 > high 105"),
        ),
        (
            "open below low",
            set("open", 5, 103.0),
            json!({"fill": "next_open"}),
            Expect::Unusable("open", "row 5: open 103 < low 104"),
        ),
        (
            "NaN open",
            set("open", 1, f64::NAN),
            json!({"fill": "next_open"}),
            Expect::Unusable("open", "row 1: open NaN"),
        ),
        (
            "negative low",
            set("low", 3, -1.0),
            json!({"stops": "high_low"}),
            Expect::Unusable("low", "row 3: low -1"),
        ),
        (
            "zero open",
            set("open", 0, 0.0),
            json!({"fill": "next_open"}),
            Expect::Unusable("open", "row 0: open 0"),
        ),
        (
            "infinite high",
            set("high", 9, f64::INFINITY),
            json!({"stops": "high_low"}),
            Expect::Unusable("high", "row 9: high inf"),
        ),
        (
            "open as text",
            vec![(
                "open",
                Arc::new(StringArray::from_iter_values(
                    (0..10).map(|i| i.to_string()),
                )) as ArrayRef,
            )],
            json!({"fill": "next_open"}),
            Expect::Unusable("open", "type Utf8 is not a number"),
        ),
        (
            "null high",
            vec![
                ok[0].clone(),
                (
                    "high",
                    Arc::new(Float64Array::from_iter(
                        (0..10).map(|i| (i != 6).then_some(200.0)),
                    )) as ArrayRef,
                ),
                ok[2].clone(),
            ],
            json!({"stops": "high_low"}),
            Expect::Unusable("high", "row 6: null"),
        ),
        (
            "negative volume",
            vec![(
                "volume",
                Arc::new(Int64Array::from_iter_values(
                    (0..10).map(|i| if i == 8 { -5 } else { 1 }),
                )) as ArrayRef,
            )],
            json!({"strategy": {"long": "volume > 0"}, "params": [[]]}),
            Expect::Unusable("volume", "row 8: volume -5"),
        ),
        (
            "time not increasing",
            vec![(
                "time",
                Arc::new(TimestampSecondArray::from_iter_values(
                    (0..10).map(|i| if i == 4 { 0 } else { i * 60 }),
                )) as ArrayRef,
            )],
            json!({"periods_per_year": "auto"}),
            Expect::OutOfOrder("row 4: time 1970-01-01T00:00:00 is not after"),
        ),
        (
            "time of text",
            vec![(
                "Date",
                Arc::new(StringArray::from_iter_values(
                    (0..10).map(|i| format!("2024-01-{i:02}")),
                )) as ArrayRef,
            )],
            json!({"periods_per_year": "auto"}),
            Expect::Unusable("time", "type Utf8 is not a time"),
        ),
        (
            "next_open on closes only",
            vec![],
            json!({"fill": "next_open"}),
            Expect::Refused(Code::InvalidArgument, "needs a column `open`"),
        ),
        (
            "high_low without high",
            vec![ok[0].clone(), ok[2].clone()],
            json!({"stops": "high_low"}),
            Expect::Refused(Code::InvalidArgument, "needs a column `high`"),
        ),
        (
            "auto without time",
            ok.clone(),
            json!({"periods_per_year": "auto"}),
            Expect::Refused(Code::InvalidArgument, "needs a column `time`"),
        ),
        (
            "auto on an int64 time",
            vec![(
                "time",
                Arc::new(Int64Array::from_iter_values(0..10)) as ArrayRef,
            )],
            json!({"periods_per_year": "auto"}),
            Expect::Refused(Code::InvalidArgument, "int64"),
        ),
        (
            "a formula reading an absent high",
            vec![],
            json!({"strategy": {"long": "close > high"}, "params": [[]]}),
            Expect::Refused(Code::InvalidArgument, "needs a column `high`"),
        ),
        (
            "slippage of 0.5",
            ok.clone(),
            json!({"slippage": 0.5}),
            Expect::Refused(
                Code::InvalidArgument,
                "`slippage` must be a fraction in [0, 0.5)",
            ),
        ),
        (
            "negative slippage",
            ok.clone(),
            json!({"slippage": -0.001}),
            Expect::Refused(Code::InvalidArgument, "`slippage`"),
        ),
        (
            "slippage as text",
            ok.clone(),
            json!({"slippage": "1%"}),
            Expect::Refused(Code::InvalidArgument, "`slippage` must be a fraction"),
        ),
        (
            "unknown fill",
            ok.clone(),
            json!({"fill": "open"}),
            Expect::Refused(Code::InvalidArgument, "`fill` must be"),
        ),
        (
            "unknown stops",
            ok.clone(),
            json!({"stops": "intrabar"}),
            Expect::Refused(Code::InvalidArgument, "`stops` must be"),
        ),
        (
            "zero trailing stop",
            ok.clone(),
            json!({"trailing_stop": 0}),
            Expect::Refused(
                Code::InvalidArgument,
                "`trailing_stop` must be a finite fraction > 0",
            ),
        ),
        (
            "negative trailing stop",
            ok.clone(),
            json!({"trailing_stop": -0.02}),
            Expect::Refused(Code::InvalidArgument, "`trailing_stop`"),
        ),
        (
            "periods_per_year of text",
            ok.clone(),
            json!({"periods_per_year": "daily"}),
            Expect::Refused(Code::InvalidArgument, "time column), got"),
        ),
        (
            "periods_per_year of 0",
            ok.clone(),
            json!({"periods_per_year": 0}),
            Expect::Refused(
                Code::InvalidArgument,
                "`periods_per_year` must be a finite number > 0",
            ),
        ),
        (
            "volume as text",
            vec![(
                "Volume",
                Arc::new(StringArray::from_iter_values(
                    (0..10).map(|i| i.to_string()),
                )) as ArrayRef,
            )],
            json!({"strategy": {"long": "volume > 0"}, "params": [[]]}),
            Expect::Unusable("volume", "type Utf8 is not a number"),
        ),
        (
            "a null time",
            vec![(
                "timestamp",
                Arc::new(TimestampSecondArray::from_iter(
                    (0..10).map(|i| (i != 2).then_some(i * 60)),
                )) as ArrayRef,
            )],
            json!({"periods_per_year": "auto"}),
            Expect::Unusable("time", "row 2: time is null"),
        ),
    ];
    // A keyed put whose second series has a bad high: the whole column is unusable, the reason
    // names the series and its own row.
    let sym =
        |s: &str| Arc::new(StringArray::from_iter_values(std::iter::repeat_n(s, 10))) as ArrayRef;
    let mut keyed: Vec<RecordBatch> = Vec::new();
    for (name, bad) in [("AAA", None), ("BBB", Some(3usize))] {
        let mut cols = vec![("symbol", sym(name))];
        cols.extend(set("high", bad.unwrap_or(99), 50.0));
        keyed.push(with(cols));
    }
    let stored = put_with(
        &mut c,
        FlightDescriptor::new_cmd(json!({"dataset": "k", "key": "symbol"}).to_string()),
        keyed,
    )
    .await
    .unwrap();
    assert_eq!(
        stored["unusable"]["high"],
        json!("series BBB row 3: high 50 < close 103")
    );
    let e = sweep(
        &mut c,
        json!({"dataset": "k", "strategy": "sma_cross", "params": [[2, 3]],
                               "stops": "high_low"}),
    )
    .await
    .unwrap_err();
    assert_eq!(code(&e), Code::InvalidArgument);
    assert!(e.to_string().contains("series BBB row 3"), "{e}");
    // Every row, each on a dataset of its own.
    rows.push((
        "float32 prices are widened and usable",
        vec![(
            "open",
            Arc::new(Float32Array::from_iter_values(
                (0..10).map(|i| 100.0 + i as f32),
            )) as ArrayRef,
        )],
        json!({"fill": "next_open"}),
        Expect::Refused(Code::Ok, ""),
    ));
    let count = rows.len();
    for (k, (what, cols, options, expect)) in rows.into_iter().enumerate() {
        let name = format!("bad{k}");
        let stored = put(&mut c, &name, vec![with(cols)]).await.unwrap();
        let mut body = json!({"dataset": name, "strategy": "sma_cross", "params": [[2, 3]]});
        for (key, v) in options.as_object().unwrap() {
            body[key] = v.clone();
        }
        let result = sweep(&mut c, body).await;
        match expect {
            Expect::Unusable(column, reason) => {
                let said = stored["unusable"][column].as_str().unwrap_or_default();
                assert!(said.contains(reason), "{what}: {stored}");
                assert!(
                    !stored["columns"]
                        .as_array()
                        .unwrap()
                        .contains(&json!(column)),
                    "{what}"
                );
                let e = result.unwrap_err();
                assert_eq!(code(&e), Code::InvalidArgument, "{what}: {e}");
                assert!(e.to_string().contains(reason), "{what}: {e}");
                assert!(e.to_string().contains("unusable"), "{what}: {e}");
            }
            Expect::OutOfOrder(reason) => {
                let said = stored["unusable"]["time"].as_str().unwrap_or_default();
                assert!(said.contains(reason), "{what}: {stored}");
                let e = result.unwrap_err();
                assert_eq!(code(&e), Code::FailedPrecondition, "{what}: {e}");
                assert!(e.to_string().contains(reason), "{what}: {e}");
            }
            Expect::Refused(Code::Ok, _) => {
                assert!(result.is_ok(), "{what}: {result:?}");
            }
            Expect::Refused(want, text) => {
                let e = result.unwrap_err();
                assert_eq!(code(&e), want, "{what}: {e}");
                assert!(e.to_string().contains(text), "{what}: {e}");
            }
        }
    }
    // The keyed put above is one more row.
    assert!(count + 1 >= 30, "{count} rows");
    // Everything was stored: one dataset a row, and the keyed one.
    assert_eq!(infos(&mut c).await.len(), count + 1);
}

/// A data directory written by the server before v1.3 (`tests/fixtures/datadir-v1.2`: a daily
/// dataset with yfinance's capitalised Open, High, Low, Volume and a Date column, row 17's
/// high below its close; a keyed universe with a timestamp `time`) loads, and its bars are
/// recognised: what v1.2 stored becomes usable by v1.3 without a new put.
#[tokio::test]
async fn a_data_dir_written_before_bars_loads_with_its_bars() {
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/datadir-v1.2");
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("datasets")).unwrap();
    for f in std::fs::read_dir(fixture.join("datasets")).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), dir.path().join("datasets").join(f.file_name())).unwrap();
    }
    let root = dir.path().to_path_buf();
    let server = TestServer::with(move |c| c.data_dir = Some(root)).await;
    let mut c = server.client().await;
    let mut metas: Vec<(String, Value)> = Vec::new();
    for info in infos(&mut c).await {
        let name = info.flight_descriptor.as_ref().unwrap().path[0].clone();
        metas.push((name, serde_json::from_slice(&info.app_metadata).unwrap()));
    }
    metas.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(metas[0].0, "fx");
    assert_eq!(
        metas[0].1["columns"],
        json!(["open", "high", "low", "close", "time"])
    );
    assert_eq!(
        metas[1].1["columns"],
        json!(["open", "low", "close", "volume", "time"])
    );
    assert_eq!(
        metas[1].1["unusable"],
        json!({"high": "row 17 (2020-01-18): high 99 < close 99.5"})
    );
    // The universe sweeps on highs and lows, annualised from its hourly times.
    let fx = sweep(
        &mut c,
        json!({"dataset": "fx", "strategy": "sma_cross", "params": [[3, 8]], "fill": "next_open",
               "stops": "high_low", "stop_loss": 0.005, "periods_per_year": "auto"}),
    )
    .await
    .unwrap();
    assert_eq!(fx.num_rows(), 2);
    assert!(i64s(&fx, "trades").iter().all(|&t| t > 0));
    // The daily one fills at the next open, and refuses stops on its unusable high.
    let goog = json!({"dataset": "goog", "strategy": "sma_cross", "params": [[3, 8]], "fill": "next_open"});
    assert!(sweep(&mut c, goog).await.is_ok());
    let e = sweep(
        &mut c,
        json!({"dataset": "goog", "strategy": "sma_cross", "params": [[3, 8]], "stops": "high_low"}),
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("row 17 (2020-01-18): high"), "{e}");
}

/// A stop formula on the wire: a built-in name with `"stop_loss": "m * atr(14) / close"`
/// sweeps `m` like its own parameters (a column after them), each trade's stop read at the bar
/// that decided it, equal to the interpreter; explain counts one ATR for every `m`; a stop
/// formula that is a condition is refused.
#[tokio::test]
async fn stop_formulas_sweep_their_parameters() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let o = ohlc(2_000, 21);
    put(&mut c, "b", vec![yfinance(&o)]).await.unwrap();
    let body = json!({"dataset": "b", "strategy": "sma_cross",
                      "grid": {"fast": [5, 10], "slow": [30], "m": [1, 1.5, 2, 3]},
                      "stop_loss": "m * atr(14) / close", "fill": "next_open", "stops": "high_low"});
    let got = sweep(&mut c, body.clone()).await.unwrap();
    let names: Vec<String> = got
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names[..5], ["combo", "fast", "slow", "m", "pnl"]);
    let program = sweepflight_kernel::expr::Program::new(&[
        (
            sweepflight_kernel::expr::Field::Long,
            "cross_above(sma(close, fast), sma(close, slow))",
        ),
        (
            sweepflight_kernel::expr::Field::Short,
            "cross_below(sma(close, fast), sma(close, slow))",
        ),
        (
            sweepflight_kernel::expr::Field::StopLoss,
            "m * atr(14) / close",
        ),
    ])
    .unwrap();
    let exec = exec_of(&body);
    let (fast, m) = (i64s(&got, "fast"), f64s(&got, "m"));
    let (pnl, trades) = (f64s(&got, "pnl"), i64s(&got, "trades"));
    let mut stopped = 0;
    for k in 0..got.num_rows() {
        let want = sweepflight_kernel::eval::oracle::run(
            &bars(&o),
            &program,
            &[fast[k] as f64, 30.0, m[k]],
            &exec,
        );
        assert_eq!(trades[k] as usize, want.len());
        let sum: f64 = want.iter().map(|t| t.net).sum();
        assert!((pnl[k] - sum).abs() <= 1e-6);
        stopped += want
            .iter()
            .filter(|t| t.reason == sweepflight_kernel::ExitReason::StopLoss)
            .count();
    }
    assert!(stopped > 0);
    let plan: Value = serde_json::from_slice(
        &crate::common::action(&mut c, "explain", body.to_string())
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(plan["formulas"]["stop_loss"], json!("m * atr(14) / close"));
    assert_eq!(plan["columns"], json!(["open", "high", "low", "close"]));
    // sma 5, 10, 30 and one atr(14); the products m * atr / close per m are arrays too.
    assert_eq!(plan["combos"], json!(8));
    let bad = sweep(
        &mut c,
        json!({"dataset": "b", "strategy": "sma_cross", "params": [[5, 30]], "stop_loss": "close > 2"}),
    )
    .await
    .unwrap_err();
    assert_eq!(code(&bad), Code::InvalidArgument);
    assert!(bad.to_string().contains("stop_loss"), "{bad}");
}

/// A put of many messages: float64 bar columns are gathered into one column each as they
/// arrive (the messages' memory freed), and DoGet still returns every batch as sent, a null in
/// a later message included (that column is then unusable, the others not).
#[tokio::test]
async fn bars_put_in_many_messages_read_back_as_sent() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let o = ohlc(3_000, 9);
    let batch = yfinance(&o);
    // Nullable fields, as pyarrow and Polars send them.
    let schema = Arc::new(arrow_schema::Schema::new(
        batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect::<Vec<_>>(),
    ));
    let batch = RecordBatch::try_new(Arc::clone(&schema), batch.columns().to_vec()).unwrap();
    let mut parts: Vec<RecordBatch> = (0..3).map(|k| batch.slice(k * 1_000, 1_000)).collect();
    // A null high in the second message.
    let mut high: Vec<Option<f64>> = o.high[1_000..2_000].iter().copied().map(Some).collect();
    high[10] = None;
    let mut columns = parts[1].columns().to_vec();
    columns[2] = Arc::new(Float64Array::from(high));
    parts[1] = RecordBatch::try_new(parts[1].schema(), columns).unwrap();
    let stored = put(&mut c, "many", parts.clone()).await.unwrap();
    assert_eq!(
        stored["unusable"]["high"],
        json!("row 1010 (2024-10-14): null")
    );
    assert_eq!(
        stored["columns"],
        json!(["open", "low", "close", "volume", "time"])
    );
    let info = infos(&mut c).await.remove(0);
    let back = rows(&mut c, &info).await;
    let sent = arrow_select::concat::concat_batches(&parts[0].schema(), &parts).unwrap();
    assert_eq!(back, sent);
    // The usable columns sweep: next-open fills read the gathered opens.
    let e = sweep(
        &mut c,
        json!({"dataset": "many", "strategy": "sma_cross", "params": [[5, 20]], "fill": "next_open"}),
    )
    .await
    .unwrap();
    let exec = Execution {
        fill: Fill::NextOpen,
        ..Execution::new(0.0009)
    };
    let p = Params::new(Strategy::SmaCross, &[5.0, 20.0]).unwrap();
    let want =
        oracle::execute_with_exits(&bars(&o), &oracle::signals(&o.close, &p), (&[], &[]), &exec);
    assert_eq!(i64s(&e, "trades")[0] as usize, want.len());
}
