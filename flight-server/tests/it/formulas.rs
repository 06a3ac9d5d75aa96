//! Strategies of the client's own (protocol v1.3) through every verb, from outside: `sweep`
//! rows equal to the plain interpreter's trades, a built-in's formula form equal to the
//! built-in, a constraint's gaps in `combo`, `trades` and `equity` of chosen combos, a
//! walk-forward, a session, a job; and a formula reading a column the dataset lacks.

use serde_json::{Value, json};
use sweepflight_kernel::Execution;
use sweepflight_kernel::eval::oracle;
use sweepflight_kernel::expr::{Field, Program};
use sweepflight_kernel::lines::Bars;

use crate::common::{
    TestServer, action, close_batch, code, exchange_sweep, f64s, i64s, put, session, sweep, table,
};

fn bollinger() -> Value {
    json!({
        "long": "close < sma(close, n) - k * std(close, n) and rsi(close, 14) < 35",
        "short": "close > sma(close, n) + k * std(close, n) and rsi(close, 14) > 65",
        "exit_long": "close > sma(close, n)",
        "exit_short": "close < sma(close, n)"
    })
}

fn program(strategy: &Value) -> Program {
    let fields: Vec<(Field, &str)> = Field::STRATEGY
        .into_iter()
        .filter_map(|f| strategy[f.name()].as_str().map(|t| (f, t)))
        .collect();
    Program::new(&fields).unwrap()
}

#[tokio::test]
async fn formula_strategies_on_every_verb() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    // A noisy walk: the bands are crossed often.
    let mut p = 100.0;
    let close: Vec<f64> = (0..3_000u32)
        .map(|i| {
            p *= 1.0 + (f64::from(i.wrapping_mul(2_654_435_761) % 1000) - 500.0) * 2e-5;
            p
        })
        .collect();
    put(&mut c, "s", vec![close_batch(&close)]).await.unwrap();
    let strategy = bollinger();
    let body = json!({"dataset": "s", "strategy": strategy, "grid": {"n": [10, 20, 30], "k": [1.0, 1.5, 2.0]}});
    let batch = sweep(&mut c, body.clone()).await.unwrap();
    assert_eq!(batch.num_rows(), 9);
    assert_eq!(i64s(&batch, "n"), [10, 10, 10, 20, 20, 20, 30, 30, 30]);
    assert_eq!(f64s(&batch, "k")[..3], [1.0, 1.5, 2.0]);
    // Every row is the interpreter's run of that combo.
    let prog = program(&strategy);
    let (pnl, trades) = (f64s(&batch, "pnl"), i64s(&batch, "trades"));
    assert!(trades.iter().any(|&t| t > 10), "{trades:?}");
    for (i, (n, k)) in [10.0, 20.0, 30.0]
        .into_iter()
        .flat_map(|n| [1.0, 1.5, 2.0].map(|k| (n, k)))
        .enumerate()
    {
        let want = oracle::run(&Bars::closes(&close), &prog, &[n, k], &Execution::default());
        let sum: f64 = want.iter().map(|t| t.net).sum();
        assert_eq!(trades[i] as usize, want.len(), "combo {i}");
        assert!(
            (pnl[i] - sum).abs() <= 1e-9,
            "combo {i}: {} vs {sum}",
            pnl[i]
        );
        // total_return, last: compounded in booking order (strategies.md v1.3).
        let p = want.iter().fold(1.0, |p, t| p * (1.0 + t.net / 100.0));
        let compounded = (p - 1.0) * 100.0;
        assert!(
            (f64s(&batch, "total_return")[i] - compounded).abs() <= 1e-6,
            "combo {i}"
        );
    }
    assert_eq!(
        batch.schema().fields().last().unwrap().name(),
        "total_return"
    );

    // A built-in written as formulas is the built-in, column for column.
    let forms = json!({"long": "cross_above(sma(close, fast), sma(close, slow))",
                       "short": "cross_below(sma(close, fast), sma(close, slow))"});
    let grid = json!({"fast": [3, 5, 8], "slow": [10, 21]});
    let builtin = sweep(
        &mut c,
        json!({"dataset": "s", "strategy": "sma_cross", "grid": grid}),
    )
    .await
    .unwrap();
    let formula = sweep(
        &mut c,
        json!({"dataset": "s", "strategy": forms, "grid": grid}),
    )
    .await
    .unwrap();
    assert_eq!(builtin, formula);

    // hma_sar's form with a condition added reads the paper kernel's state bytes (the shape,
    // not the name; from the server's cache once the built-in kept them): its results are the
    // built-in's, over the whole series and over a row range with a warm-up.
    let windows = json!([
        [3, 6, 2, 1, 2, 3],
        [10, 20, 4, 3, 5, 10],
        [20, 40, 6, 7, 10, 20]
    ]);
    let hma = |extra: &str| {
        json!({"long": format!("cross_below(hma(close, half, full, sqrt), hma3(close, p3, p2, p)){extra}"),
               "short": format!("cross_above(hma(close, half, full, sqrt), hma3(close, p3, p2, p)){extra}")})
    };
    for range in [json!({}), json!({"rows": [500, 2800], "warmup": 100})] {
        let with = |body: Value| {
            let mut body = body;
            body.as_object_mut()
                .unwrap()
                .extend(range.as_object().unwrap().clone());
            body
        };
        let builtin = sweep(
            &mut c,
            with(json!({"dataset": "s", "strategy": "hma_sar", "params": windows})),
        )
        .await
        .unwrap();
        for _ in 0..2 {
            let formula = sweep(
                &mut c,
                with(json!({"dataset": "s", "strategy": hma(" and close > 0"), "params": windows})),
            )
            .await
            .unwrap();
            assert_eq!(
                i64s(&formula, "trades"),
                i64s(&builtin, "trades"),
                "{range}"
            );
            assert_eq!(f64s(&formula, "pnl"), f64s(&builtin, "pnl"), "{range}");
        }
        assert!(i64s(&builtin, "trades").iter().all(|&t| t > 0), "{range}");
    }

    // A constraint skips grid combos; the others keep their positions.
    let constrained = sweep(
        &mut c,
        json!({"dataset": "s", "strategy": "sma_cross", "grid": {"fast": [5, 10, 20], "slow": [10, 20]}, "constraint": "fast < slow"}),
    )
    .await
    .unwrap();
    assert_eq!(i64s(&constrained, "combo"), [0, 1, 3]);
    // The paper's lengths take a constraint on the windows they derive.
    let paper = sweep(
        &mut c,
        json!({"dataset": "s", "lengths": [6, 100, 8], "constraint": "full < 50"}),
    )
    .await
    .unwrap();
    assert_eq!(i64s(&paper, "combo"), [0, 2]);
    assert_eq!(i64s(&paper, "full"), [6, 8]);
    assert_eq!(i64s(&constrained, "fast"), [5, 5, 10]);
    // Ranked on the server, and the chosen combos' trades and equity.
    let chosen = json!({"dataset": "s", "strategy": strategy, "grid": {"n": [10, 20, 30], "k": [1.0, 1.5, 2.0]},
                        "order_by": "pnl", "descending": true, "top": 2});
    let top = sweep(&mut c, chosen.clone()).await.unwrap();
    assert_eq!(top.num_rows(), 2);
    let booked = table(&mut c, "trades", &chosen).await.unwrap();
    let best = i64s(&top, "combo")[0] as usize;
    let (n, k) = ([10.0, 20.0, 30.0][best / 3], [1.0, 1.5, 2.0][best % 3]);
    let want = oracle::run(&Bars::closes(&close), &prog, &[n, k], &Execution::default());
    let rows: Vec<usize> = (0..booked.num_rows())
        .filter(|&r| i64s(&booked, "combo")[r] as usize == best)
        .collect();
    assert_eq!(rows.len(), want.len());
    for (r, t) in rows.iter().zip(&want) {
        assert_eq!(i64s(&booked, "entry_row")[*r] as usize, t.entry_row);
        assert_eq!(i64s(&booked, "exit_row")[*r] as usize, t.exit_row);
    }
    let curves = table(&mut c, "equity", &chosen).await.unwrap();
    assert_eq!(curves.num_rows(), 2 * close.len());

    // Walk-forward, a session and a job take the same strategy.
    let walk = json!({"dataset": "s", "strategy": strategy, "grid": {"n": [10, 20], "k": [1.0, 2.0]},
                      "folds": {"train": 1000, "test": 500}});
    let folds = table(&mut c, "walk_forward", &walk).await.unwrap();
    assert_eq!(folds.num_rows(), 4);
    assert!(folds.schema().field_with_name("k").is_ok());
    let replies = session(
        &mut c,
        &json!({"op": "session", "strategy": strategy}),
        &[body.clone(), body.clone()],
    )
    .await
    .unwrap();
    assert_eq!(replies.len(), 2);
    assert_eq!(replies[0], batch);
    let mut submit = body.clone();
    submit["action"] = json!("sweep");
    let job: Value =
        serde_json::from_slice(&action(&mut c, "submit", submit.to_string()).await.unwrap())
            .unwrap();
    assert!(job["job"].is_string(), "{job}");

    // `"warmup": "auto"` is the strategy's largest lookback over the grid: here sma(30) and
    // std(30) (29 bars), rsi(14) (14): 29.
    let ranged = |warmup: Value| json!({"dataset": "s", "strategy": bollinger(), "grid": {"n": [10, 30], "k": [1.0]}, "rows": [1000, 3000], "warmup": warmup});
    let auto = sweep(&mut c, ranged(json!("auto"))).await.unwrap();
    assert_eq!(auto, sweep(&mut c, ranged(json!(29))).await.unwrap());
    assert_ne!(auto, sweep(&mut c, ranged(json!(0))).await.unwrap());

    // The stateless exchange: the series streamed with the call, a formula strategy.
    let cmd = json!({"op": "sweep", "strategy": strategy, "grid": {"n": [10, 20, 30], "k": [1.0, 1.5, 2.0]}});
    let streamed = exchange_sweep(&mut c, cmd, vec![close_batch(&close)]).await;
    let streamed = arrow_select::concat::concat_batches(&streamed[0].schema(), &streamed).unwrap();
    assert_eq!(streamed, batch);

    // A column the dataset lacks is named.
    let e = sweep(
        &mut c,
        json!({"dataset": "s", "strategy": {"long": "close > highest(high, n)"}, "params": [[5]]}),
    )
    .await
    .unwrap_err();
    assert_eq!(code(&e), tonic::Code::InvalidArgument);
    assert!(e.to_string().contains("`high`"), "{e}");
    // A formula error names the field and the offset.
    let e = sweep(
        &mut c,
        json!({"dataset": "s", "strategy": {"long": "close >"}, "params": [[]]}),
    )
    .await
    .unwrap_err();
    assert_eq!(code(&e), tonic::Code::InvalidArgument);
    assert!(
        e.to_string().contains("long: expected a number") && e.to_string().contains("byte 7"),
        "{e}"
    );
}
