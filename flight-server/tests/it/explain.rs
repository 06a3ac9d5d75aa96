//! The `explain` action (protocol v1.3): a sweep body's plan from outside, nothing run: the
//! parameters with their kinds, canonical formulas, combos after the constraint, the lookback,
//! the distinct arrays (the minimum the sharing rule allows) and the columns; and the bad
//! formulas and bodies it refuses, each with its code and a message naming what is wrong.

use serde_json::{Value, json};
use tonic::Code;

use crate::common::{TestServer, action, code};

async fn explain(c: &mut arrow_flight::FlightClient, body: Value) -> Result<Value, (Code, String)> {
    match action(c, "explain", body.to_string()).await {
        Ok(bytes) => Ok(serde_json::from_slice(&bytes).unwrap()),
        Err(e) => {
            let message = match &e {
                arrow_flight::error::FlightError::Tonic(s) => s.message().to_owned(),
                other => format!("{other}"),
            };
            Err((code(&e), message))
        }
    }
}

#[tokio::test]
async fn explain_plans_formulas_and_builtins_without_running_them() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let ks: Vec<f64> = (0..10).map(|j| 1.0 + f64::from(j) * 0.25).collect();
    let bollinger = json!({
        "long": "close < sma(close, n) - k * std(close, n) and rsi(close, 14) < 35",
        "short": "close > sma(close, n) + k * std(close, n) and rsi(close, 14) > 65",
        "exit_long": "close > sma(close, n)",
        "exit_short": "close<sma(close,n)"
    });
    let plan = explain(
        &mut c,
        json!({"dataset": "any", "strategy": bollinger, "grid": {"n": (10..50).collect::<Vec<_>>(), "k": ks}}),
    )
    .await
    .unwrap();
    assert_eq!(
        plan["params"],
        json!([{"name": "n", "kind": "int"}, {"name": "k", "kind": "number"}])
    );
    assert_eq!(plan["combos"], 400);
    // Per n: sma and std; per (n, k): k * std, sma - k * std, sma + k * std; rsi once.
    assert_eq!(plan["arrays"], 40 * 2 + 400 * 3 + 1);
    assert_eq!(plan["lookback"], 48);
    assert_eq!(plan["columns"], json!(["close"]));
    assert_eq!(plan["formulas"]["exit_short"], "close < sma(close, n)");

    // A built-in by name, with a constraint: fast < slow over 2..=30 is vectorbt's 406 pairs.
    let grid: Vec<u32> = (2..=30).collect();
    let plan = explain(
        &mut c,
        json!({"dataset": "any", "strategy": "sma_cross", "grid": {"fast": grid, "slow": grid}, "constraint": "fast < slow"}),
    )
    .await
    .unwrap();
    assert_eq!(plan["combos"], 406);
    assert_eq!(plan["arrays"], 29);
    assert_eq!(plan["lookback"], 30);
    assert_eq!(
        plan["formulas"]["long"],
        "cross_above(sma(close, fast), sma(close, slow))"
    );
    assert_eq!(plan["formulas"]["constraint"], "fast < slow");
    // The paper grid: 80 HMA and 80 HMA3 lines.
    let lengths: Vec<u32> = vec![6, 8, 10, 13, 200];
    let plan = explain(&mut c, json!({"dataset": "any", "lengths": lengths}))
        .await
        .unwrap();
    assert_eq!(
        (plan["combos"].as_u64(), plan["arrays"].as_u64()),
        (Some(5), Some(10))
    );
    // Columns the formulas read, in the contract's order.
    let plan = explain(
        &mut c,
        json!({"dataset": "any", "strategy": {"long": "volume > sma(volume, 5) and atr(14) > 0"}, "params": [[]]}),
    )
    .await
    .unwrap();
    assert_eq!(plan["columns"], json!(["high", "low", "close", "volume"]));
    assert_eq!(plan["params"], json!([]));
}

/// A grid bound in several steps counts each array once across them; one whose distinct
/// arrays cannot be counted within the sweep memory is refused as RESOURCE_EXHAUSTED, and the
/// server goes on serving.
#[tokio::test]
async fn explain_counts_across_steps_within_the_sweep_memory() {
    let server = TestServer::with(|c| c.sweep_memory_bytes = 16 << 20).await;
    let mut c = server.client().await;
    // 100 x 1,000 = 100,000 combos (two steps of binding), 300,200 arrays: within 16 MiB.
    let ks: Vec<f64> = (0..1_000).map(|j| 1.0 + f64::from(j) / 1_000.0).collect();
    let body = |ks: &[f64]| {
        json!({"dataset": "any", "strategy": {"long": "close < sma(close, n) - k * std(close, n)",
               "short": "close > sma(close, n) + k * std(close, n)"},
               "grid": {"n": (10..110).collect::<Vec<_>>(), "k": ks}})
    };
    let plan = explain(&mut c, body(&ks)).await.unwrap();
    assert_eq!(plan["combos"], 100_000);
    assert_eq!(plan["arrays"], 100 * 2 + 100_000 * 3);
    // Ten times the values of k: 3 million fingerprints do not fit.
    let more: Vec<f64> = (0..10_000).map(|j| 1.0 + f64::from(j) / 10_000.0).collect();
    let (code, message) = explain(&mut c, body(&more)).await.unwrap_err();
    assert_eq!(code, Code::ResourceExhausted, "{message}");
    assert!(message.contains("--sweep-memory-bytes"), "{message}");
    assert_eq!(explain(&mut c, body(&ks)).await.unwrap()["arrays"], 300_200);
}

#[tokio::test]
async fn explain_refuses_bad_formulas_and_bodies_with_their_reason() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let f = |long: &str| json!({"dataset": "d", "strategy": {"long": long}, "params": [[5]]});
    let rows: Vec<(Value, Code, &str)> = vec![
        (
            f("close > sma(close, n"),
            Code::InvalidArgument,
            "long: expected `,` or `)`",
        ),
        (
            f("close > smaa(close, n)"),
            Code::InvalidArgument,
            "did you mean `sma`",
        ),
        (
            f("sma(close, n)"),
            Code::InvalidArgument,
            "must be a condition",
        ),
        (
            f("close > sma(close, n) > 1"),
            Code::InvalidArgument,
            "comparisons do not chain",
        ),
        (
            f("close > sma(close, n + 1)"),
            Code::InvalidArgument,
            "no arithmetic in a window",
        ),
        (
            f("close > sma(close, n) and 1"),
            Code::InvalidArgument,
            "takes a condition here",
        ),
        (
            f("close > pnl + n"),
            Code::InvalidArgument,
            "names a column of the reply",
        ),
        (
            f(&format!("{}close > n{}", "(".repeat(70), ")".repeat(70))),
            Code::InvalidArgument,
            "nested parentheses",
        ),
        (
            f(&format!("{}x{}", "(".repeat(100_000), ")".repeat(100_000))),
            Code::InvalidArgument,
            "at most 4096 bytes",
        ),
        (
            json!({"dataset": "d", "strategy": {"short": "close > n", "entry": "x > 1"}, "params": [[5]]}),
            Code::InvalidArgument,
            "unknown field \"entry\"",
        ),
        (
            json!({"dataset": "d", "strategy": {"exit_long": "close > n"}, "params": [[5]]}),
            Code::InvalidArgument,
            "needs `long` or `short`",
        ),
        (
            json!({"dataset": "d", "strategy": {"long": 5}, "params": [[5]]}),
            Code::InvalidArgument,
            "must be a string",
        ),
        (
            json!({"dataset": "d", "strategy": "macd", "params": [[5]]}),
            Code::InvalidArgument,
            "unknown strategy \"macd\"",
        ),
        (
            json!({"dataset": "d", "strategy": {"long": "close > sma(close, n)"}, "params": [[0]]}),
            Code::InvalidArgument,
            "params[0][0] (n) must be an integer in 1..=67108864, got 0",
        ),
        (
            json!({"dataset": "d", "strategy": {"long": "close > sma(close, n)"}, "params": [[2.5]]}),
            Code::InvalidArgument,
            "(n) must be an integer in 1..=67108864, got 2.5",
        ),
        (
            json!({"dataset": "d", "strategy": {"long": "close > k"}, "params": [["x"]]}),
            Code::InvalidArgument,
            "params[0][0] (k) must be a number, got \"x\"",
        ),
        (
            json!({"dataset": "d", "strategy": {"long": "close > sma(close, n)"}, "params": [[5, 6]]}),
            Code::InvalidArgument,
            "params[0] has 2 values",
        ),
        (
            json!({"dataset": "d", "strategy": {"long": "close > sma(close, n)"}, "grid": {"m": [5]}}),
            Code::InvalidArgument,
            "unknown parameter \"m\"",
        ),
        (
            json!({"dataset": "d", "strategy": {"long": "close > sma(close, n) + k"}, "grid": {"n": [5]}}),
            Code::InvalidArgument,
            "`grid` needs a list for `k`",
        ),
        (
            json!({"dataset": "d", "strategy": "sma_cross", "params": [[5, 20]], "constraint": "fast > slow"}),
            Code::InvalidArgument,
            "params[0] (constraint) breaks the constraint",
        ),
        (
            json!({"dataset": "d", "strategy": "sma_cross", "params": [[5, 20]], "constraint": "close > 1"}),
            Code::InvalidArgument,
            "only parameters and numbers",
        ),
        (
            json!({"dataset": "d", "strategy": "rsi_revert", "params": [[14, 70, 30]]}),
            Code::InvalidArgument,
            "below upper",
        ),
        (
            json!({"dataset": "d", "strategy": "sma_cross", "lengths": [6]}),
            Code::InvalidArgument,
            "`lengths` derives hma_sar windows",
        ),
        (
            json!({"dataset": "d", "strategy": "sma_cross"}),
            Code::InvalidArgument,
            "give exactly one of",
        ),
        (
            json!({"dataset": "d", "strategy": {"long": "close > a + b + c + d"}, "grid": {"a": (0..1000).collect::<Vec<_>>(), "b": (0..1000).collect::<Vec<_>>(), "c": (0..1000).collect::<Vec<_>>(), "d": (0..1000).collect::<Vec<_>>()}}),
            Code::InvalidArgument,
            "--max-grid-combos",
        ),
        (
            json!([1, 2]),
            Code::InvalidArgument,
            "must be a JSON object",
        ),
    ];
    // Formulas the language refuses, each through the wire with its reason and offset.
    let formulas: [(&str, &str); 36] = [
        ("close >", "long: expected a number, a name, a call or `(`"),
        ("sma(close) > 1", "sma takes sma(x, n), got 1 argument"),
        (
            "hma(close, 1, 2) > 1",
            "hma(x, half, full, sqrt) or hma(x, n)",
        ),
        ("010 > close", "may not start with 0"),
        ("close > 1.", "expected digits after `.`"),
        ("close > 1e", "exponent"),
        ("close > 1e999", "not a finite float64"),
        ("Close > 1", "names are lower case"),
        ("close & n", "write `and`"),
        ("close | n", "write `or`"),
        ("~(close > n)", "write `not`"),
        ("if > 1", "Python keyword"),
        ("lambda > 1", "Python keyword"),
        ("close = n", "compare with `==`"),
        ("!close", "`!` is not an operator"),
        ("sma(close, 5,) > n", "no trailing commas"),
        ("close > 2x", "must be followed by"),
        ("close > n $", "unexpected character"),
        ("(close > n", "expected `)`"),
        ("close > n)", "expected an operator or the end"),
        ("", "empty"),
        ("close ** 2 > n", "no powers"),
        ("sma(close, n,", "expected a number, a name"),
        ("sma(close n) > 1", "expected `,` or `)`"),
        ("close > sma(close, 0)", "integer in 1..=67108864"),
        ("close > sma(close, 67108865)", "integer in 1..=67108864"),
        ("close > sma(close, -n)", "no arithmetic in a window"),
        ("close > sma(close, (n))", "names a column"),
        ("close + n", "must be a condition"),
        ("n > 1 and close", "takes a condition here, got a series"),
        ("not close", "takes a condition here, got a series"),
        (
            "-(close > n)",
            "takes a number or a series here, got a condition",
        ),
        ("where(close, n, 1) > 0", "takes a condition here"),
        (
            "cross_above(close > n, n)",
            "takes a number or a series here",
        ),
        ("close > series", "names a column of the reply"),
        (
            "close > sma(close, n) and sharpe > 1",
            "names a column of the reply",
        ),
    ];
    let mut rows = rows;
    for (text, needle) in formulas {
        // `(n)` in a window is a parameter named n: a fine formula; rename it to test a clash.
        let text = text.replace("(n))", "(total_return))");
        let needle = if needle == "names a column" {
            "names a column of the reply"
        } else {
            needle
        };
        rows.push((f(&text), Code::InvalidArgument, needle));
    }
    let too_deep = format!("{} > 1", vec!["close"; 70].join(" + "));
    rows.push((f(&too_deep), Code::InvalidArgument, "deep; the limit is 64"));
    let too_many = format!("{} > 1", vec!["close"; 130].join(" + "));
    rows.push((f(&too_many), Code::InvalidArgument, "at most 256 nodes"));
    let params: String = (0..33)
        .map(|i| format!("p{i}"))
        .collect::<Vec<_>>()
        .join(" + ");
    rows.push((
        f(&format!("close > {params}")),
        Code::InvalidArgument,
        "at most 32 parameters",
    ));
    rows.push((
        json!({"dataset": "d", "strategy": "sma_cross", "params": [[5, 20]], "constraint": 5}),
        Code::InvalidArgument,
        "bad sweep body",
    ));
    rows.push((
        json!({"dataset": "d", "strategy": "sma_cross", "params": [[5, 20]], "constraint": "fast < z"}),
        Code::InvalidArgument,
        "`constraint` names `z`",
    ));
    rows.push((
        json!({"dataset": "d", "strategy": ["long"], "params": [[5]]}),
        Code::InvalidArgument,
        "a built-in name or an object of formulas",
    ));
    rows.push((
        json!({"dataset": "d", "strategy": "sma_cross", "params": [[5, 20]], "warmup": "later"}),
        Code::InvalidArgument,
        "or \"auto\"",
    ));
    assert!(rows.len() >= 60, "{} rows", rows.len());
    let mut wrong = Vec::new();
    for (body, want, needle) in rows {
        match explain(&mut c, body.clone()).await {
            Err((got, message)) if got == want && message.contains(needle) => {}
            other => wrong.push(format!("{body}: {other:?}, want {want:?} {needle:?}")),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // A sample is drawn as the sweep would draw it, redrawn where the constraint breaks.
    let sampled = explain(
        &mut c,
        json!({"dataset": "d", "strategy": {"long": "close > sma(close, n)", "short": "close < sma(close, m)"},
               "constraint": "n < m", "sample": {"n": 50, "seed": 1, "ranges": {"n": [1, 20], "m": [2, 30]}}}),
    )
    .await
    .unwrap();
    assert_eq!(sampled["combos"], 50);
    // The server keeps serving.
    let ok = explain(&mut c, f("close > n")).await.unwrap();
    assert_eq!(ok["combos"], 1);
}
