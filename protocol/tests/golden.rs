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
    ACTIONS, ExchangeCommand, PROTOCOL_VERSION, PutTarget, RowRange, SESSION_COMMAND, SweepRequest,
    result_schema,
};

/// A sweep request built from `args` (the same fields a client call takes), and its body.
fn sweep_case(name: &str, args: Value, request: SweepRequest) -> Value {
    let body: Value = serde_json::from_slice(&request.encode()).unwrap();
    // The body decodes back to the request it came from.
    assert_eq!(SweepRequest::decode(&request.encode()).unwrap(), request);
    json!({"name": name, "args": args, "body": body})
}

fn type_name(t: &DataType) -> &'static str {
    // pyarrow's spelling, so the Python test compares `str(field.type)` directly.
    match t {
        DataType::Int64 => "int64",
        DataType::Float64 => "double",
        DataType::Utf8 => "string",
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
    ];
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
    let schema = |keyed| {
        result_schema(keyed)
            .fields()
            .iter()
            .map(|f| json!([f.name(), type_name(f.data_type())]))
            .collect::<Vec<_>>()
    };
    let cmd = |c: &ExchangeCommand| serde_json::from_slice::<Value>(&c.encode()).unwrap();
    json!({
        "version": PROTOCOL_VERSION,
        "sweep_bodies": bodies,
        "put_targets": puts,
        "exchange_commands": {
            "echo": cmd(&ExchangeCommand::Echo),
            "session": serde_json::from_slice::<Value>(SESSION_COMMAND).unwrap(),
            "keyed_session": cmd(&ExchangeCommand::Session { keyed: true, strategy: sweepflight_protocol::Strategy::HmaSar }),
        },
        "result_schema": {"unkeyed": schema(false), "keyed": schema(true)},
        "actions": ACTIONS.iter().map(|(name, _)| name).collect::<Vec<_>>(),
    })
}

#[test]
fn golden_file_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/protocol.json");
    let text = serde_json::to_string_pretty(&golden()).unwrap() + "\n";
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
