//! The golden file `protocol/golden/protocol.json`: request bodies, descriptors, commands and the
//! result schema as this crate writes them, for clients in other languages to test against
//! (`client-py/tests/test_protocol_golden.py`).
//!
//! Regenerate with `SWEEPFLIGHT_BLESS=1 cargo test -p sweepflight-protocol --test golden`; without
//! it the test fails if the committed file drifted from the crate.

use std::path::Path;

use arrow_schema::DataType;
use serde_json::{Value, json};
use sweepflight_protocol::{
    ACTIONS, Builtin, Compression, ExchangeCommand, Execution, Fill, Folds, Grid, JobBody, JobRef,
    PROTOCOL_VERSION, PutTarget, RowRange, SESSION_COMMAND, Sample, Selection, SessionReply, Side,
    StopsOn, Strategy, SweepRequest, Ticket, WalkForwardRequest, equity_schema, result_schema,
    strategies_json, strategy_schema, sweep_schema, trades_schema, walk_forward_schema,
};

/// A sweep request built from `args` (the same fields a client call takes), and its body.
fn sweep_case(name: &str, args: Value, request: SweepRequest) -> Value {
    let body: Value = serde_json::from_slice(&request.encode()).unwrap();
    // The body decodes back to the request it came from.
    assert_eq!(SweepRequest::decode(&request.encode()).unwrap(), request);
    json!({"name": name, "args": args, "body": body})
}

/// A walk-forward request built from `args`, and its body.
fn walk_forward_case(name: &str, args: Value, request: WalkForwardRequest) -> Value {
    let body: Value = serde_json::from_slice(&request.encode()).unwrap();
    assert_eq!(
        WalkForwardRequest::decode(&request.encode()).unwrap(),
        request
    );
    json!({"name": name, "args": args, "body": body})
}

fn walk_forward_request() -> WalkForwardRequest {
    WalkForwardRequest::new(
        SweepRequest::lengths("paper", [20, 40]),
        Folds::Rolling {
            train: 50_000,
            test: 25_000,
            step: 25_000,
            anchored: false,
        },
        "pnl",
        true,
    )
    .unwrap()
}

fn type_name(t: &DataType) -> String {
    // pyarrow's spelling, so the Python test compares `str(field.type)` directly.
    match t {
        DataType::Int8 => "int8".into(),
        DataType::Int64 => "int64".into(),
        DataType::Float64 => "double".into(),
        DataType::Utf8 => "string".into(),
        DataType::FixedSizeList(item, n) if !item.is_nullable() => format!(
            "fixed_size_list<{}: {} not null>[{n}]",
            item.name(),
            type_name(item.data_type())
        ),
        other => panic!("no golden spelling for {other}"),
    }
}

fn golden() -> Value {
    let rows = RowRange::new(0, 100_000).unwrap();
    let bodies = vec![
        sweep_case(
            "lengths",
            json!({"dataset": "paper", "lengths": [6, 8, 10]}),
            SweepRequest::lengths("paper", [6, 8, 10]),
        ),
        sweep_case(
            "params_with_fee",
            json!({"dataset": "p", "params": [[3, 6, 2, 1, 2, 3], [4, 8, 3, 1, 2, 4]], "fee": 0.001}),
            SweepRequest::params("p", [[3, 6, 2, 1, 2, 3], [4, 8, 3, 1, 2, 4]]).with_fee(0.001),
        ),
        sweep_case(
            "zero_fee",
            json!({"dataset": "x", "lengths": [6], "fee": 0.0}),
            SweepRequest::lengths("x", [6]).with_fee(0.0),
        ),
        sweep_case(
            "series_and_rows",
            json!({"dataset": "universe", "lengths": [20, 40], "series": ["AAPL", "MSFT"], "rows": [0, 100_000]}),
            SweepRequest::lengths("universe", [20, 40])
                .with_series(["AAPL", "MSFT"])
                .with_rows(rows),
        ),
        sweep_case(
            "unusual_series_names",
            json!({"dataset": "u", "lengths": [6], "series": ["a\"b", "é", "7"]}),
            SweepRequest::lengths("u", [6]).with_series(["a\"b", "é", "7"]),
        ),
        sweep_case(
            "sma_cross_grid_long_with_stops",
            json!({"dataset": "eurusd", "strategy": "sma_cross", "grid": {"fast": [5, 10], "slow": [20, 50, 100]},
                   "side": "long", "stop_loss": 0.02, "take_profit": 0.05, "periods_per_year": 252.0, "blocks": 8}),
            SweepRequest::strategy(
                "eurusd",
                Strategy::Builtin(Builtin::SmaCross),
                Grid::Product(vec![vec![5.0, 10.0], vec![20.0, 50.0, 100.0]]),
            )
            .with_execution(Execution {
                side: Side::Long,
                stop_loss: Some(0.02),
                take_profit: Some(0.05),
                periods_per_year: Some(252.0),
                blocks: Some(8),
                ..Execution::default()
            }),
        ),
        sweep_case(
            "sma_cross_with_a_stop_formula",
            json!({"dataset": "goog", "strategy": "sma_cross", "grid": {"fast": [10], "slow": [20], "m": [1, 2.5]},
                   "stop_loss": "m * atr(14) / close"}),
            SweepRequest::strategy(
                "goog",
                Strategy::decode_with_stops(
                    Some(&json!("sma_cross")),
                    None,
                    &[(
                        sweepflight_kernel::expr::Field::StopLoss,
                        "m * atr(14) / close".to_owned(),
                    )],
                )
                .unwrap(),
                Grid::Product(vec![vec![10.0], vec![20.0], vec![1.0, 2.5]]),
            ),
        ),
        sweep_case(
            "sma_cross_next_open_high_low_trailing_slippage",
            json!({"dataset": "goog", "strategy": "sma_cross", "params": [[10, 20]],
                   "stop_loss": 0.05, "trailing_stop": 0.03, "fill": "next_open", "stops": "high_low",
                   "slippage": 0.001, "periods_per_year": "auto"}),
            SweepRequest::strategy(
                "goog",
                Strategy::Builtin(Builtin::SmaCross),
                Grid::Tuples(vec![vec![10.0, 20.0]]),
            )
            .with_execution(Execution {
                stop_loss: Some(0.05),
                trailing_stop: Some(0.03),
                fill: Fill::NextOpen,
                stops: StopsOn::HighLow,
                slippage: 0.001,
                periods_per_year_auto: true,
                ..Execution::default()
            }),
        ),
        sweep_case(
            "rsi_revert_params_warmup_rows",
            json!({"dataset": "u", "strategy": "rsi_revert", "params": [[14, 30, 70.5]], "warmup": 100, "rows": [500, 900]}),
            SweepRequest::strategy(
                "u",
                Strategy::Builtin(Builtin::RsiRevert),
                Grid::Tuples(vec![vec![14.0, 30.0, 70.5]]),
            )
            .with_execution(Execution {
                warmup: 100,
                ..Execution::default()
            })
            .with_rows(RowRange::new(500, 900).unwrap()),
        ),
        sweep_case(
            "sma_cross_selection",
            json!({"dataset": "p", "strategy": "sma_cross", "grid": {"fast": [5], "slow": [20, 40]},
                   "where": {"trades": [30, null]}, "order_by": "sharpe", "descending": true, "top": 1}),
            SweepRequest::strategy(
                "p",
                Strategy::Builtin(Builtin::SmaCross),
                Grid::Product(vec![vec![5.0], vec![20.0, 40.0]]),
            )
            .with_selection(Selection {
                filters: vec![("trades".into(), Some(30.0), None)],
                order_by: Some("sharpe".into()),
                descending: true,
                top: Some(1),
            }),
        ),
        sweep_case(
            "donchian_sample_short",
            json!({"dataset": "p", "strategy": "donchian", "sample": {"n": 20, "seed": 7, "ranges": {"n": [5, 60]}}, "side": "short"}),
            SweepRequest::strategy(
                "p",
                Strategy::Builtin(Builtin::Donchian),
                Grid::Sample(Sample {
                    n: 20,
                    seed: 7,
                    ranges: vec![(5.0, 60.0)],
                }),
            )
            .with_execution(Execution {
                side: Side::Short,
                ..Execution::default()
            }),
        ),
    ];
    let sma = |grid| SweepRequest::strategy("eurusd", Strategy::Builtin(Builtin::SmaCross), grid);
    let walk_forward = vec![
        walk_forward_case(
            "rolling_by_sharpe",
            json!({"dataset": "eurusd", "strategy": "sma_cross", "grid": {"fast": [5, 10], "slow": [20, 50]},
                   "folds": {"train": 5000, "test": 1000}, "select": "sharpe", "warmup": 200,
                   "where": {"trades": [10, null]}}),
            WalkForwardRequest::new(
                sma(Grid::Product(vec![vec![5.0, 10.0], vec![20.0, 50.0]]))
                    .with_execution(Execution {
                        warmup: 200,
                        ..Execution::default()
                    })
                    .with_selection(Selection {
                        filters: vec![("trades".into(), Some(10.0), None)],
                        ..Selection::default()
                    }),
                Folds::Rolling {
                    train: 5000,
                    test: 1000,
                    step: 1000,
                    anchored: false,
                },
                "sharpe",
                true,
            )
            .unwrap(),
        ),
        walk_forward_case(
            "anchored_step_ascending",
            json!({"dataset": "paper", "lengths": [20, 40], "folds": {"train": 50000, "test": 20000, "step": 10000, "anchored": true},
                   "select": {"by": "max_drawdown", "descending": false}}),
            WalkForwardRequest::new(
                SweepRequest::lengths("paper", [20, 40]),
                Folds::Rolling {
                    train: 50_000,
                    test: 20_000,
                    step: 10_000,
                    anchored: true,
                },
                "max_drawdown",
                false,
            )
            .unwrap(),
        ),
        walk_forward_case(
            "explicit_folds",
            json!({"dataset": "paper", "lengths": [20], "folds": [[0, 100000, 100000, 150000]]}),
            WalkForwardRequest::new(
                SweepRequest::lengths("paper", [20]),
                Folds::Explicit(vec![[0, 100_000, 100_000, 150_000]]),
                "pnl",
                true,
            )
            .unwrap(),
        ),
    ];
    let submit = |b: JobBody| serde_json::from_slice::<Value>(&b.encode()).unwrap();
    let jobs = json!({
        "submit_sweep": submit(JobBody::Sweep(SweepRequest::lengths("paper", [6, 8]).with_compression(Compression::Zstd))),
        "submit_trades": submit(JobBody::Trades(sma(Grid::Product(vec![vec![5.0], vec![20.0]])))),
        "submit_walk_forward": submit(JobBody::WalkForward(walk_forward_request())),
        "job": serde_json::from_slice::<Value>(&JobRef::new("0123abcd").encode()).unwrap(),
        "ticket": serde_json::from_slice::<Value>(&Ticket::job("0123abcd").encode()).unwrap(),
        "states": ["queued", "running", "done", "failed", "cancelled"],
    });
    let descriptor = |t: &PutTarget| {
        let d = t.to_descriptor();
        if d.path.is_empty() {
            json!({"cmd": serde_json::from_slice::<Value>(&d.cmd).unwrap()})
        } else {
            json!({"path": d.path})
        }
    };
    let puts = [
        PutTarget::dataset("paper"),
        PutTarget::keyed("universe", "symbol"),
    ]
    .iter()
    .map(|t| json!({"dataset": t.dataset, "key": t.key, "descriptor": descriptor(t)}))
    .collect::<Vec<_>>();
    // [name, type], and `true` third for a nullable column.
    let field = |f: &arrow_schema::Field| {
        if f.is_nullable() {
            json!([f.name(), type_name(f.data_type()), true])
        } else {
            json!([f.name(), type_name(f.data_type())])
        }
    };
    let fields =
        |s: arrow_schema::SchemaRef| s.fields().iter().map(|f| field(f)).collect::<Vec<_>>();
    let schema = |keyed| fields(result_schema(keyed));
    let cmd = |c: &ExchangeCommand| serde_json::from_slice::<Value>(&c.encode()).unwrap();
    json!({
        "version": PROTOCOL_VERSION,
        "sweep_bodies": bodies,
        "compressed_sweep_body": serde_json::from_slice::<Value>(&SweepRequest::lengths("paper", [6]).with_compression(Compression::Lz4).encode()).unwrap(),
        "walk_forward_bodies": walk_forward,
        "jobs": jobs,
        "put_targets": puts,
        "exchange_commands": {
            "echo": cmd(&ExchangeCommand::Echo),
            "session": serde_json::from_slice::<Value>(SESSION_COMMAND).unwrap(),
            "keyed_session": cmd(&ExchangeCommand::Session { keyed: true, strategy: Strategy::Builtin(Builtin::HmaSar), reply: SessionReply::Sweep }),
            "keyed_rsi_revert_session": cmd(&ExchangeCommand::Session { keyed: true, strategy: Strategy::Builtin(Builtin::RsiRevert), reply: SessionReply::Sweep }),
            "sma_cross_trades_session": cmd(&ExchangeCommand::Session { keyed: false, strategy: Strategy::Builtin(Builtin::SmaCross), reply: SessionReply::Trades }),
        },
        "result_schema": {"unkeyed": schema(false), "keyed": schema(true)},
        "strategy_schemas": Strategy::builtins()
            .map(|s| {
                let fields = strategy_schema(&s, false)
                    .fields()
                    .iter()
                    .map(|f| field(f))
                    .collect::<Vec<_>>();
                (s.name().to_owned(), Value::Array(fields))
            })
            .collect::<serde_json::Map<_, _>>(),
        "block_pnl_schema": fields(sweep_schema(&Strategy::Builtin(Builtin::Donchian), true, Some(8))),
        "trades_schema": {"unkeyed": fields(trades_schema(false)), "keyed": fields(trades_schema(true))},
        "equity_schema": {"unkeyed": fields(equity_schema(false)), "keyed": fields(equity_schema(true))},
        "walk_forward_schemas": Strategy::builtins()
            .map(|s| (s.name().to_owned(), Value::Array(fields(walk_forward_schema(&s, false)))))
            .collect::<serde_json::Map<_, _>>(),
        "walk_forward_keyed_schema": fields(walk_forward_schema(&Strategy::Builtin(Builtin::SmaCross), true)),
        "actions": ACTIONS.iter().map(|(name, _)| name).collect::<Vec<_>>(),
        "strategies": strategies_json(),
    })
}

/// `v` with every object's keys in sorted order: the file's order does not follow the order
/// the values were built in.
fn sorted(v: serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<(String, serde_json::Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            serde_json::Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.into_iter().map(sorted).collect())
        }
        other => other,
    }
}

#[test]
fn golden_file_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/protocol.json");
    let text = serde_json::to_string_pretty(&sorted(golden())).unwrap() + "\n";
    if std::env::var_os("SWEEPFLIGHT_BLESS").is_some() {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == text,
        "{} is stale: run `SWEEPFLIGHT_BLESS=1 cargo test -p sweepflight-protocol --test golden`",
        path.display()
    );
}
