//! Bad input across every RPC, as one table: each malformed request gets its exact gRPC code
//! and a message saying what is wrong, and afterwards the server still serves and the stored
//! datasets, in memory and on disk, are exactly what they were.

use std::path::Path;
use std::sync::Arc;

use crate::common::*;
use arrow_array::types::Int32Type;
use arrow_array::{
    ArrayRef, DictionaryArray, Float32Array, Float64Array, Int64Array, RecordBatch, StringArray,
};
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::utils::batches_to_flight_data;
use arrow_flight::{FlightClient, FlightData, FlightDescriptor, Ticket};
use futures::TryStreamExt;
use serde_json::json;
use tonic::Code;

/// One request, as the client sends it.
enum Call {
    /// DoPut of batches, encoded by arrow-rs.
    Put(FlightDescriptor, Vec<RecordBatch>),
    /// DoPut of hand-made messages (truncated or garbled IPC).
    PutRaw(Vec<FlightData>),
    /// DoAction.
    Action(&'static str, Vec<u8>),
    /// DoExchange of batches under a descriptor.
    Exchange(FlightDescriptor, Vec<RecordBatch>),
    /// A `session` exchange whose messages carry these bodies.
    Session(Vec<serde_json::Value>),
    /// DoGet.
    Get(Vec<u8>),
    /// GetFlightInfo.
    Info(FlightDescriptor),
    /// GetSchema.
    Schema(FlightDescriptor),
    /// PollFlightInfo.
    Poll(FlightDescriptor),
}

struct Case {
    what: &'static str,
    call: Call,
    code: Code,
    /// A fragment the status message must contain.
    says: &'static str,
}

fn case(what: &'static str, call: Call, code: Code, says: &'static str) -> Case {
    Case {
        what,
        call,
        code,
        says,
    }
}

fn path(name: &str) -> FlightDescriptor {
    FlightDescriptor::new_path(vec![name.into()])
}

fn cmd(json: &str) -> FlightDescriptor {
    FlightDescriptor::new_cmd(json.to_owned())
}

fn column(name: &str, array: ArrayRef) -> RecordBatch {
    RecordBatch::try_from_iter([(name, array)]).unwrap()
}

/// A nullable `close` column (every chunk of one upload must share the schema).
fn closes(values: Vec<Option<f64>>) -> RecordBatch {
    let array = Arc::new(Float64Array::from(values)) as ArrayRef;
    RecordBatch::try_from_iter_with_nullable([("close", array, true)]).unwrap()
}

/// A valid upload of `rows` bars as raw Flight messages: [schema (with descriptor), batch].
fn raw_put(rows: usize) -> Vec<FlightData> {
    let batch = close_batch(&series(rows));
    let mut msgs = batches_to_flight_data(&batch.schema(), [&batch]).unwrap();
    msgs[0].flight_descriptor = Some(path("keep"));
    msgs
}

fn sweep(body: serde_json::Value) -> Call {
    Call::Action("sweep", body.to_string().into_bytes())
}

fn raw_sweep(body: &[u8]) -> Call {
    Call::Action("sweep", body.to_vec())
}

fn cases() -> Vec<Case> {
    use Call::*;
    use Code::{
        InvalidArgument as Invalid, NotFound, OutOfRange, ResourceExhausted, Unimplemented,
    };
    let ten = close_batch(&series(10));
    let nullable_ten = closes(series(10).into_iter().map(Some).collect());
    let truncated = {
        let mut m = raw_put(1_000);
        let body = m[1].data_body.slice(0..m[1].data_body.len() / 2);
        m[1].data_body = body;
        m
    };
    let garbled_header = {
        let mut m = raw_put(10);
        m[1].data_header = bytes::Bytes::from_static(b"not a flatbuffer message");
        m
    };
    let batch_before_schema = {
        let mut m = raw_put(10);
        let mut batch = m.remove(1);
        batch.flight_descriptor = Some(path("keep"));
        vec![batch]
    };
    let schema_only = raw_put(10)[..1].to_vec();
    // An LZ4-compressed upload whose compressed bytes are noise.
    let bad_lz4 = {
        let options = arrow_ipc::writer::IpcWriteOptions::default()
            .try_with_compression(Some(arrow_ipc::CompressionType::LZ4_FRAME))
            .unwrap();
        let batch = close_batch(&series(1_000));
        let stream = FlightDataEncoderBuilder::new()
            .with_options(options)
            .with_flight_descriptor(Some(path("keep")))
            .build(futures::stream::iter([Ok(batch)]));
        let mut m: Vec<FlightData> = futures::executor::block_on(stream.try_collect()).unwrap();
        let mut body = m[1].data_body.to_vec();
        // Each buffer starts with its 8-byte uncompressed length; the frame after it is noise.
        for b in body.iter_mut().skip(8) {
            *b = 0xa5;
        }
        m[1].data_body = body.into();
        m
    };
    let no_descriptor = {
        let mut m = raw_put(10);
        m[0].flight_descriptor = None;
        m
    };
    let dictionary: DictionaryArray<Int32Type> = vec!["1.0", "2.0"].into_iter().collect();
    vec![
        // --- DoPut: descriptors and names
        case(
            "put: CMD descriptor that is not JSON",
            Put(cmd("keep"), vec![ten.clone()]),
            Invalid,
            "PATH",
        ),
        case(
            "put: two-part path",
            Put(
                FlightDescriptor::new_path(vec!["a".into(), "b".into()]),
                vec![ten.clone()],
            ),
            Invalid,
            "exactly one",
        ),
        case(
            "put: empty name",
            Put(path(""), vec![ten.clone()]),
            Invalid,
            "1-128",
        ),
        case(
            "put: slash in name",
            Put(path("a/b"), vec![ten.clone()]),
            Invalid,
            "character",
        ),
        case(
            "put: dot-dot path",
            Put(path("../etc"), vec![ten.clone()]),
            Invalid,
            "character",
        ),
        case(
            "put: non-ASCII name",
            Put(path("prix-é"), vec![ten.clone()]),
            Invalid,
            "character",
        ),
        case(
            "put: 129-char name",
            Put(path(&"x".repeat(129)), vec![ten.clone()]),
            Invalid,
            "1-128",
        ),
        case(
            "put: no descriptor",
            PutRaw(no_descriptor),
            Invalid,
            "PATH descriptor",
        ),
        // --- DoPut: schemas
        case(
            "put: no close column",
            Put(
                path("keep"),
                vec![column("price", Arc::new(Float64Array::from(vec![1.0])))],
            ),
            Invalid,
            "no column `close`",
        ),
        case(
            "put: close is a string",
            Put(
                path("keep"),
                vec![column("close", Arc::new(StringArray::from(vec!["1"])))],
            ),
            Invalid,
            "type Utf8",
        ),
        case(
            "put: close is a dictionary",
            Put(path("keep"), vec![column("close", Arc::new(dictionary))]),
            Invalid,
            // arrow-rs sends dictionaries hydrated: the server sees the strings.
            "expected float64",
        ),
        // --- DoPut: values, in the first or a later chunk
        case(
            "put: zero rows",
            Put(path("keep"), vec![ten.slice(0, 0)]),
            Invalid,
            "at least 1 row",
        ),
        case(
            "put: a compressed body that does not decompress",
            PutRaw(bad_lz4),
            Invalid,
            // Noise either fails to decompress or decompresses to values the close rules refuse.
            "close",
        ),
        case(
            "put: schema, no batches",
            PutRaw(schema_only),
            Invalid,
            "at least 1 row",
        ),
        case(
            "put: null",
            Put(path("keep"), vec![closes(vec![Some(1.0), None])]),
            Invalid,
            "row 1: is null",
        ),
        case(
            "put: null in 3rd chunk",
            Put(
                path("keep"),
                vec![
                    nullable_ten.clone(),
                    nullable_ten.clone(),
                    closes(vec![None]),
                ],
            ),
            Invalid,
            "row 20: is null",
        ),
        case(
            "put: NaN in 2nd chunk",
            Put(
                path("keep"),
                vec![
                    nullable_ten.clone(),
                    closes(vec![Some(1.0), Some(f64::NAN)]),
                ],
            ),
            Invalid,
            "row 11: is NaN",
        ),
        case(
            "put: +inf",
            Put(path("keep"), vec![closes(vec![Some(f64::INFINITY)])]),
            Invalid,
            "row 0: is infinite",
        ),
        case(
            "put: -inf in 2nd chunk",
            Put(
                path("keep"),
                vec![nullable_ten.clone(), closes(vec![Some(f64::NEG_INFINITY)])],
            ),
            Invalid,
            "row 10: is infinite",
        ),
        case(
            "put: zero",
            Put(path("keep"), vec![closes(vec![Some(0.0)])]),
            Invalid,
            "row 0: is <= 0",
        ),
        case(
            "put: negative",
            Put(
                path("keep"),
                vec![closes(vec![Some(2.0), Some(3.0), Some(-1.0)])],
            ),
            Invalid,
            "row 2: is <= 0",
        ),
        case(
            "put: float32 NaN",
            Put(
                path("keep"),
                vec![column(
                    "close",
                    Arc::new(Float32Array::from(vec![1.0, f32::NAN])),
                )],
            ),
            Invalid,
            "row 1: is NaN",
        ),
        case(
            "put: integer zero",
            Put(
                path("keep"),
                vec![column("close", Arc::new(Int64Array::from(vec![5, 0])))],
            ),
            Invalid,
            "row 1: is <= 0",
        ),
        // --- DoPut: broken IPC
        case("put: truncated IPC body", PutRaw(truncated), Invalid, ""),
        case(
            "put: garbled IPC header",
            PutRaw(garbled_header),
            Invalid,
            "",
        ),
        case(
            "put: batch before schema",
            PutRaw(batch_before_schema),
            Invalid,
            "",
        ),
        // --- DoPut: limits
        case(
            "put: over --max-dataset-bytes",
            Put(path("keep"), vec![close_batch(&series(20_000))]),
            ResourceExhausted,
            "--max-dataset-bytes",
        ),
        case(
            "put: over --max-total-bytes",
            Put(path("other"), vec![close_batch(&series(10_000))]),
            ResourceExhausted,
            "--max-total-bytes",
        ),
        case(
            "put: one message over --max-message-bytes",
            PutRaw(raw_put(300_000)),
            ResourceExhausted,
            "",
        ),
        // --- DoAction sweep: JSON bodies, tuples, fees, limits
        case(
            "sweep: unknown dataset",
            sweep(json!({"dataset": "nope", "lengths": [6]})),
            NotFound,
            "`nope` not found",
        ),
        case(
            "sweep: not UTF-8",
            raw_sweep(&[0xff, 0xfe]),
            Invalid,
            "UTF-8",
        ),
        case("sweep: not JSON", raw_sweep(b"{dataset"), Invalid, ""),
        case("sweep: empty body", raw_sweep(b""), Invalid, ""),
        case("sweep: a JSON array", raw_sweep(b"[6, 8]"), Invalid, ""),
        case(
            "sweep: dataset not a string",
            raw_sweep(br#"{"dataset": 1, "lengths": [6]}"#),
            Invalid,
            "",
        ),
        case(
            "sweep: bad dataset name",
            sweep(json!({"dataset": "a b", "lengths": [6]})),
            Invalid,
            "character",
        ),
        case(
            "sweep: neither lengths nor params",
            raw_sweep(br#"{"dataset": "keep"}"#),
            Invalid,
            "",
        ),
        case(
            "sweep: both lengths and params",
            raw_sweep(br#"{"dataset": "keep", "lengths": [6], "params": [[1,1,1,1,1,1]]}"#),
            Invalid,
            "",
        ),
        case(
            "sweep: 5-tuple",
            raw_sweep(br#"{"dataset": "keep", "params": [[1,2,3,4,5]]}"#),
            Invalid,
            "has 5 values",
        ),
        case(
            "sweep: tuple with a string",
            raw_sweep(br#"{"dataset": "keep", "params": [[1,2,3,4,5,"6"]]}"#),
            Invalid,
            "",
        ),
        case(
            "sweep: zero window",
            raw_sweep(br#"{"dataset": "keep", "params": [[1,2,3,4,5,0]]}"#),
            Invalid,
            "params[0][5]",
        ),
        case(
            "sweep: negative window",
            raw_sweep(br#"{"dataset": "keep", "params": [[-1,2,3,4,5,6]]}"#),
            Invalid,
            "params[0][0]",
        ),
        case(
            "sweep: length 0",
            raw_sweep(br#"{"dataset": "keep", "lengths": [0]}"#),
            Invalid,
            "",
        ),
        case(
            "sweep: fractional length",
            raw_sweep(br#"{"dataset": "keep", "lengths": [6.5]}"#),
            Invalid,
            "",
        ),
        case(
            "sweep: length past i32",
            raw_sweep(br#"{"dataset": "keep", "lengths": [2147483648]}"#),
            Invalid,
            "",
        ),
        case(
            "sweep: lengths not a list",
            raw_sweep(br#"{"dataset": "keep", "lengths": 6}"#),
            Invalid,
            "",
        ),
        case(
            "sweep: negative fee",
            raw_sweep(br#"{"dataset": "keep", "lengths": [6], "fee": -0.001}"#),
            Invalid,
            "fee",
        ),
        case(
            "sweep: fee a string",
            raw_sweep(br#"{"dataset": "keep", "lengths": [6], "fee": "low"}"#),
            Invalid,
            "",
        ),
        case(
            "sweep: over --max-combos",
            sweep(json!({"dataset": "keep", "lengths": vec![6; 101]})),
            Invalid,
            "101",
        ),
        case(
            "sweep: unknown strategy",
            sweep(json!({"dataset": "keep", "strategy": "macd", "params": [[5, 20]]})),
            Invalid,
            "; known: hma_sar, sma_cross, ema_cross, donchian, rsi_revert",
        ),
        case(
            "sweep: a tuple of the wrong arity",
            sweep(json!({"dataset": "keep", "strategy": "sma_cross", "params": [[5, 20], [5]]})),
            Invalid,
            "params[1] has 1 values; each sma_cross tuple is [fast, slow]",
        ),
        case(
            "sweep: a window of 0",
            sweep(json!({"dataset": "keep", "strategy": "donchian", "params": [[0]]})),
            Invalid,
            "params[0][0] (n) must be an integer in 1..=2147483647",
        ),
        case(
            "sweep: a fractional window",
            sweep(
                json!({"dataset": "keep", "strategy": "ema_cross", "grid": {"fast": [2.5], "slow": [9]}}),
            ),
            Invalid,
            "grid.fast[0] (fast)",
        ),
        case(
            "sweep: lower >= upper",
            sweep(
                json!({"dataset": "keep", "strategy": "rsi_revert", "params": [[14, 30, 70], [14, 70, 30]]}),
            ),
            Invalid,
            "params[1] (lower) must be below upper",
        ),
        case(
            "sweep: a grid combo with lower >= upper names its position",
            sweep(
                json!({"dataset": "keep", "strategy": "rsi_revert", "grid": {"n": [14], "lower": [20, 40], "upper": [30, 60]}}),
            ),
            Invalid,
            "combo 2: parameter `lower` must be below upper",
        ),
        case(
            "sweep: a band past 100",
            sweep(json!({"dataset": "keep", "strategy": "rsi_revert", "params": [[14, 30, 170]]})),
            Invalid,
            "(upper) must be a number in 0..=100",
        ),
        case(
            "sweep: lengths for another strategy",
            sweep(json!({"dataset": "keep", "strategy": "sma_cross", "lengths": [6]})),
            Invalid,
            "`lengths` derives hma_sar windows",
        ),
        case(
            "sweep: an empty grid list",
            sweep(
                json!({"dataset": "keep", "strategy": "sma_cross", "grid": {"fast": [5], "slow": []}}),
            ),
            Invalid,
            "`grid.slow` must be a non-empty list",
        ),
        case(
            "sweep: a grid missing a parameter",
            sweep(json!({"dataset": "keep", "strategy": "sma_cross", "grid": {"fast": [5]}})),
            Invalid,
            "`grid` needs a list for `slow`",
        ),
        case(
            "sweep: a grid over --max-combos",
            sweep(
                json!({"dataset": "keep", "strategy": "sma_cross", "grid": {"fast": (1..=11).collect::<Vec<u32>>(), "slow": (1..=10).collect::<Vec<u32>>()}}),
            ),
            Invalid,
            "110 combos requested; this server allows at most 100 per call (--max-combos)",
        ),
        case(
            "sweep: a sample without a range",
            sweep(
                json!({"dataset": "keep", "strategy": "sma_cross", "sample": {"n": 5, "seed": 1, "ranges": {"fast": [2, 9]}}}),
            ),
            Invalid,
            "`sample` needs a range [lo, hi] for `slow`",
        ),
        case(
            "sweep: a sample whose lo > hi",
            sweep(
                json!({"dataset": "keep", "strategy": "donchian", "sample": {"n": 5, "seed": 1, "ranges": {"n": [9, 2]}}}),
            ),
            Invalid,
            "lo 9 > hi 2",
        ),
        case(
            "sweep: a sample with no valid combo",
            sweep(
                json!({"dataset": "keep", "strategy": "rsi_revert", "sample": {"n": 5, "seed": 1, "ranges": {"n": [2, 9], "lower": [60, 70], "upper": [10, 20]}}}),
            ),
            Invalid,
            "no valid combo",
        ),
        case(
            "sweep: a negative stop-loss",
            sweep(
                json!({"dataset": "keep", "strategy": "donchian", "params": [[5]], "stop_loss": -0.02}),
            ),
            Invalid,
            "`stop_loss` must be a finite fraction > 0",
        ),
        case(
            "sweep: a zero take-profit",
            sweep(json!({"dataset": "keep", "lengths": [6], "take_profit": 0})),
            Invalid,
            "`take_profit` must be a finite fraction > 0",
        ),
        case(
            "sweep: an unknown side",
            sweep(json!({"dataset": "keep", "lengths": [6], "side": "up"})),
            Invalid,
            "`side` must be",
        ),
        case(
            "sweep: a negative warm-up",
            sweep(json!({"dataset": "keep", "lengths": [6], "warmup": -5})),
            Invalid,
            "`warmup` must be an integer >= 0",
        ),
        case(
            "sweep: periods_per_year of 0",
            sweep(json!({"dataset": "keep", "lengths": [6], "periods_per_year": 0})),
            Invalid,
            "`periods_per_year` must be a finite number > 0",
        ),
        case(
            "sweep: one block",
            sweep(json!({"dataset": "keep", "lengths": [6], "blocks": 1})),
            Invalid,
            "`blocks` must be an integer from 2 to 64",
        ),
        case(
            "sweep: more blocks than evaluated rows",
            sweep(json!({"dataset": "keep", "lengths": [6], "blocks": 4, "rows": [0, 3]})),
            Invalid,
            "has only 3 evaluated rows",
        ),
        case(
            "trades: more combos than --max-trade-combos",
            Call::Action(
                "trades",
                json!({"dataset": "keep", "lengths": (1..=11).collect::<Vec<u32>>()})
                    .to_string()
                    .into_bytes(),
            ),
            Invalid,
            "--max-trade-combos",
        ),
        case(
            "equity: where on an unknown column",
            Call::Action(
                "equity",
                json!({"dataset": "keep", "lengths": [6], "where": {"sharp": [1, null]}})
                    .to_string()
                    .into_bytes(),
            ),
            Invalid,
            "unknown result column",
        ),
        case(
            "trades: a dataset that does not exist",
            Call::Action(
                "trades",
                json!({"dataset": "nope", "lengths": [6]})
                    .to_string()
                    .into_bytes(),
            ),
            NotFound,
            "nope",
        ),
        case(
            "sweep: where on an unknown column",
            sweep(json!({"dataset": "keep", "lengths": [6], "where": {"sharp": [1, null]}})),
            Invalid,
            "unknown result column",
        ),
        case(
            "sweep: where bounds that are not numbers",
            sweep(json!({"dataset": "keep", "lengths": [6], "where": {"pnl": ["0", null]}})),
            Invalid,
            "`where.pnl` must be [lo, hi]",
        ),
        case(
            "sweep: order_by an unknown column",
            sweep(json!({"dataset": "keep", "lengths": [6], "order_by": "series"})),
            Invalid,
            "unknown result column",
        ),
        case(
            "sweep: top 0",
            sweep(json!({"dataset": "keep", "lengths": [6], "top": 0})),
            Invalid,
            "`top` must be an integer >= 1",
        ),
        case(
            "sweep: descending without order_by",
            sweep(json!({"dataset": "keep", "lengths": [6], "descending": true})),
            Invalid,
            "give both",
        ),
        case(
            "sweep: top over --max-combos",
            sweep(json!({"dataset": "keep", "lengths": vec![6; 200], "top": 101})),
            Invalid,
            "(top x series); this server returns at most 100",
        ),
        case(
            "exchange: a session for an unknown strategy",
            Exchange(
                cmd(r#"{"op": "session", "strategy": "macd"}"#),
                vec![ten.clone()],
            ),
            Invalid,
            "unknown strategy",
        ),
        case(
            "sweep: body over --max-message-bytes",
            Action("sweep", vec![b' '; 2 << 20]),
            OutOfRange,
            "",
        ),
        // --- other actions
        case(
            "drop: unknown dataset",
            Action("drop", b"nope".to_vec()),
            NotFound,
            "`nope` not found",
        ),
        case(
            "drop: path in name",
            Action("drop", b"../x".to_vec()),
            Invalid,
            "character",
        ),
        case(
            "drop: not UTF-8",
            Action("drop", vec![0xff]),
            Invalid,
            "UTF-8",
        ),
        case(
            "action: unknown type",
            Action("explode", vec![]),
            Unimplemented,
            "explode",
        ),
        // --- DoGet tickets
        case(
            "get: not JSON",
            Get(b"x".to_vec()),
            Invalid,
            "not a sweepflight ticket",
        ),
        case(
            "get: empty ticket",
            Get(vec![]),
            Invalid,
            "not a sweepflight ticket",
        ),
        case(
            "get: ticket version 9",
            Get(br#"{"kind":"dataset","v":9,"name":"keep"}"#.to_vec()),
            Invalid,
            "version 9",
        ),
        case(
            "get: unknown kind",
            Get(br#"{"kind":"table","v":1,"name":"keep"}"#.to_vec()),
            Invalid,
            "",
        ),
        case(
            "get: extra field",
            Get(br#"{"kind":"dataset","v":1,"name":"keep","x":1}"#.to_vec()),
            Invalid,
            "",
        ),
        case(
            "get: bad name",
            Get(br#"{"kind":"dataset","v":1,"name":"a/b"}"#.to_vec()),
            Invalid,
            "character",
        ),
        case(
            "get: unknown dataset",
            Get(br#"{"kind":"dataset","v":1,"name":"nope"}"#.to_vec()),
            NotFound,
            "`nope` not found",
        ),
        // --- descriptors: GetFlightInfo, GetSchema, PollFlightInfo
        case(
            "info: unknown dataset",
            Info(path("nope")),
            NotFound,
            "`nope` not found",
        ),
        case("info: CMD descriptor", Info(cmd("keep")), Invalid, "PATH"),
        case("info: bad name", Info(path("a b")), Invalid, "character"),
        case(
            "schema: unknown dataset",
            Schema(path("nope")),
            NotFound,
            "`nope` not found",
        ),
        case(
            "schema: two-part path",
            Schema(FlightDescriptor::new_path(vec!["keep".into(), "x".into()])),
            Invalid,
            "exactly one",
        ),
        case(
            "poll: PATH descriptor",
            Poll(path("keep")),
            Invalid,
            "CMD descriptor",
        ),
        case(
            "poll: a body that is no job's",
            Poll(cmd(r#"{"dataset": "keep"}"#)),
            Invalid,
            "exactly one",
        ),
        case(
            "poll: unknown job",
            Poll(cmd(r#"{"job": "0000"}"#)),
            NotFound,
            "not found (unknown, or forgotten",
        ),
        case(
            "poll: unknown dataset",
            Poll(cmd(r#"{"dataset": "nope", "lengths": [6]}"#)),
            NotFound,
            "`nope` not found",
        ),
        // --- jobs
        case(
            "submit: unknown action",
            Action("submit", br#"{"dataset": "keep", "lengths": [6], "action": "drop"}"#.to_vec()),
            Invalid,
            "a job runs",
        ),
        case(
            "submit: a status body",
            Action("submit", br#"{"job": "x"}"#.to_vec()),
            Invalid,
            "status and cancel",
        ),
        case(
            "submit: unknown dataset",
            Action("submit", br#"{"dataset": "nope", "lengths": [6]}"#.to_vec()),
            NotFound,
            "`nope` not found",
        ),
        case(
            "submit: rows past the end",
            Action("submit", br#"{"dataset": "keep", "lengths": [6], "rows": [300, 400]}"#.to_vec()),
            Invalid,
            "`rows` starts at 300",
        ),
        case(
            "submit: over --max-combos",
            Action("submit", json!({"dataset": "keep", "lengths": (6..200).collect::<Vec<_>>()}).to_string().into_bytes()),
            Invalid,
            "--max-combos",
        ),
        case(
            "submit: unknown series",
            Action("submit", br#"{"dataset": "ukeep", "lengths": [6], "series": ["Z"], "action": "trades"}"#.to_vec()),
            NotFound,
            "no series",
        ),
        case(
            "submit: walk-forward without folds",
            Action("submit", br#"{"dataset": "keep", "lengths": [6], "action": "walk_forward"}"#.to_vec()),
            Invalid,
            "needs `folds`",
        ),
        case(
            "status: unknown job",
            Action("status", br#"{"job": "0123"}"#.to_vec()),
            NotFound,
            "not found",
        ),
        case(
            "status: not a job body",
            Action("status", br#"{"dataset": "keep"}"#.to_vec()),
            Invalid,
            "the ID `submit` answered",
        ),
        case(
            "status: a bad ID",
            Action("status", br#"{"job": "a b"}"#.to_vec()),
            Invalid,
            "not a job ID",
        ),
        case(
            "cancel: unknown job",
            Action("cancel", br#"{"job": "0123"}"#.to_vec()),
            NotFound,
            "not found",
        ),
        case(
            "CancelFlightInfo: not protobuf",
            Action("CancelFlightInfo", b"\xff\xff\xff".to_vec()),
            Invalid,
            "CancelFlightInfoRequest",
        ),
        case(
            "CancelFlightInfo: a dataset's FlightInfo",
            Action(
                "CancelFlightInfo",
                {
                    use prost::Message;
                    let info = arrow_flight::FlightInfo::new().with_endpoint(
                        arrow_flight::FlightEndpoint::new().with_ticket(Ticket::new(
                            br#"{"kind":"dataset","v":1,"name":"keep"}"#.to_vec(),
                        )),
                    );
                    arrow_flight::CancelFlightInfoRequest::new(info).encode_to_vec()
                },
            ),
            Invalid,
            "names no job",
        ),
        case(
            "get: unknown job",
            Get(br#"{"job": "0123"}"#.to_vec()),
            NotFound,
            "not found",
        ),
        case(
            "get: empty job ID",
            Get(br#"{"job": ""}"#.to_vec()),
            Invalid,
            "not a job ID",
        ),
        // --- compression of replies
        case(
            "sweep: unknown compression",
            sweep(json!({"dataset": "keep", "lengths": [6], "compression": "gzip"})),
            Invalid,
            "`compression` is",
        ),
        case(
            "session: compression",
            Session(vec![json!({"dataset": "keep", "lengths": [6], "compression": "zstd"})]),
            Invalid,
            "`compression` applies to action replies",
        ),
        // --- walk_forward
        case(
            "walk_forward: no folds",
            Action("walk_forward", br#"{"dataset": "keep", "lengths": [6]}"#.to_vec()),
            Invalid,
            "needs `folds`",
        ),
        case(
            "walk_forward: rows",
            Action("walk_forward", br#"{"dataset": "keep", "lengths": [6], "folds": {"train": 50, "test": 10}, "rows": [0, 100]}"#.to_vec()),
            Invalid,
            "`rows` is not part of a walk-forward body",
        ),
        case(
            "walk_forward: top",
            Action("walk_forward", br#"{"dataset": "keep", "lengths": [6], "folds": {"train": 50, "test": 10}, "top": 3}"#.to_vec()),
            Invalid,
            "`top`",
        ),
        case(
            "walk_forward: unknown select column",
            Action("walk_forward", br#"{"dataset": "keep", "lengths": [6], "folds": {"train": 50, "test": 10}, "select": {"by": "alpha"}}"#.to_vec()),
            Invalid,
            "select.by",
        ),
        case(
            "walk_forward: test range past every series",
            Action("walk_forward", br#"{"dataset": "keep", "lengths": [6], "folds": {"train": 250, "test": 100}}"#.to_vec()),
            Invalid,
            "no fold fits",
        ),
        case(
            "walk_forward: explicit fold wholly past the end",
            Action("walk_forward", br#"{"dataset": "keep", "lengths": [6], "folds": [[0, 50, 400, 500]]}"#.to_vec()),
            Invalid,
            "no fold fits",
        ),
        case(
            "walk_forward: train shorter than the longest window",
            Action("walk_forward", br#"{"dataset": "keep", "strategy": "sma_cross", "grid": {"fast": [5], "slow": [80]}, "folds": {"train": 50, "test": 10}}"#.to_vec()),
            Invalid,
            "shorter than the grid's longest window (80)",
        ),
        case(
            "walk_forward: more folds than --max-combos rows",
            Action("walk_forward", br#"{"dataset": "keep", "strategy": "sma_cross", "grid": {"fast": [1], "slow": [1]}, "folds": {"train": 1, "test": 1}}"#.to_vec()),
            Invalid,
            "--max-combos",
        ),
        case(
            "walk_forward: series on an unkeyed dataset",
            Action("walk_forward", br#"{"dataset": "keep", "lengths": [6], "series": ["A"], "folds": {"train": 50, "test": 10}}"#.to_vec()),
            Invalid,
            "not keyed",
        ),
        case(
            "walk_forward: unknown dataset",
            Action("walk_forward", br#"{"dataset": "nope", "lengths": [6], "folds": {"train": 50, "test": 10}}"#.to_vec()),
            NotFound,
            "`nope` not found",
        ),
        // --- DoExchange
        case(
            "exchange: PATH descriptor",
            Exchange(path("keep"), vec![ten.clone()]),
            Invalid,
            "",
        ),
        case(
            "exchange: unknown op",
            Exchange(cmd(r#"{"op": "dance"}"#), vec![ten.clone()]),
            Invalid,
            "",
        ),
        case(
            "exchange: no op",
            Exchange(cmd(r#"{"lengths": [6]}"#), vec![ten.clone()]),
            Invalid,
            "",
        ),
        case(
            "exchange: command not JSON",
            Exchange(cmd("{"), vec![ten.clone()]),
            Invalid,
            "",
        ),
        case(
            "exchange: bad close in the series",
            Exchange(
                cmd(r#"{"op": "sweep", "lengths": [6]}"#),
                vec![closes(vec![Some(1.0), Some(-2.0)])],
            ),
            Invalid,
            "row 1: is <= 0",
        ),
        case(
            "exchange: zero length",
            Exchange(cmd(r#"{"op": "sweep", "lengths": [0]}"#), vec![ten.clone()]),
            Invalid,
            "",
        ),
        case(
            "session: bad request after a good one",
            Session(vec![
                json!({"dataset": "keep", "lengths": [6]}),
                json!({"dataset": "keep", "lengths": [0]}),
            ]),
            Invalid,
            "",
        ),
        case(
            "session: unknown dataset",
            Session(vec![json!({"dataset": "nope", "lengths": [6]})]),
            NotFound,
            "`nope` not found",
        ),
        // --- v1.1 keyed puts
        case(
            "keyed put: null key",
            Put(
                keyed("k"),
                vec![keyed_rows(vec![Some("A"), None], vec![1.0, 2.0])],
            ),
            Invalid,
            "key column `sym` row 1: is null",
        ),
        case(
            "keyed put: empty key",
            Put(
                keyed("k"),
                vec![keyed_rows(vec![Some("A"), Some("")], vec![1.0, 2.0])],
            ),
            Invalid,
            "row 1: is empty",
        ),
        case(
            "keyed put: no such key column",
            Put(
                cmd(r#"{"dataset": "k", "key": "ticker"}"#),
                vec![keyed_rows(vec![Some("A")], vec![1.0])],
            ),
            Invalid,
            "key column `ticker` is not in the schema",
        ),
        case(
            "keyed put: key of another type",
            Put(
                cmd(r#"{"dataset": "k", "key": "close"}"#),
                vec![ten.clone()],
            ),
            Invalid,
            "has type Float64",
        ),
        case(
            "keyed put: a series breaks the close rules",
            Put(
                keyed("k"),
                vec![
                    keyed_rows(vec![Some("A"), Some("B")], vec![1.0, 2.0]),
                    keyed_rows(vec![Some("B"), Some("A"), Some("B")], vec![3.0, 4.0, -5.0]),
                ],
            ),
            Invalid,
            "B\\\" row 2 (upload row 4): is <= 0",
        ),
        case(
            "keyed put: CMD without a dataset",
            Put(cmd(r#"{"key": "sym"}"#), vec![ten.clone()]),
            Invalid,
            "dataset",
        ),
        case(
            "keyed put: empty key name",
            Put(cmd(r#"{"dataset": "k", "key": ""}"#), vec![ten.clone()]),
            Invalid,
            "must name a column",
        ),
        // --- v1.1 series and rows
        case(
            "sweep: unknown series",
            sweep(json!({"dataset": "ukeep", "lengths": [6], "series": ["A", "Z"]})),
            NotFound,
            "has no series",
        ),
        case(
            "sweep: series on an unkeyed dataset",
            sweep(json!({"dataset": "keep", "lengths": [6], "series": ["A"]})),
            Invalid,
            "not keyed",
        ),
        case(
            "sweep: empty series list",
            sweep(json!({"dataset": "ukeep", "lengths": [6], "series": []})),
            Invalid,
            "at least one",
        ),
        case(
            "sweep: a series listed twice",
            sweep(json!({"dataset": "ukeep", "lengths": [6], "series": ["A", "A"]})),
            Invalid,
            "listed twice",
        ),
        case(
            "sweep: rows start == end",
            sweep(json!({"dataset": "keep", "lengths": [6], "rows": [5, 5]})),
            Invalid,
            "start < end",
        ),
        case(
            "sweep: rows of one number",
            sweep(json!({"dataset": "keep", "lengths": [6], "rows": [5]})),
            Invalid,
            "`rows` must be [start, end]",
        ),
        case(
            "sweep: negative rows",
            sweep(json!({"dataset": "keep", "lengths": [6], "rows": [-1, 5]})),
            Invalid,
            "`rows` must be [start, end]",
        ),
        case(
            "sweep: rows as a string",
            sweep(json!({"dataset": "keep", "lengths": [6], "rows": "0:5"})),
            Invalid,
            "bad sweep body",
        ),
        case(
            "sweep: rows start past the series",
            sweep(json!({"dataset": "keep", "lengths": [6], "rows": [300, 400]})),
            Invalid,
            "has 300 rows",
        ),
        case(
            "sweep: rows start past one series of a universe",
            sweep(json!({"dataset": "ukeep", "lengths": [6], "rows": [3, 10]})),
            Invalid,
            "B\\\" has 3 rows",
        ),
        case(
            "session: series on an unkeyed dataset",
            Session(vec![
                json!({"dataset": "keep", "lengths": [6], "series": ["A"]}),
            ]),
            Invalid,
            "not keyed",
        ),
        case(
            "session: a keyed dataset on a plain session",
            Session(vec![json!({"dataset": "ukeep", "lengths": [6]})]),
            Invalid,
            "keyed",
        ),
        case(
            "exchange: series without key",
            Exchange(
                cmd(r#"{"op": "sweep", "lengths": [6], "series": ["A"]}"#),
                vec![ten.clone()],
            ),
            Invalid,
            "needs `key`",
        ),
        case(
            "exchange: keyed with an unknown series",
            Exchange(
                cmd(r#"{"op": "sweep", "lengths": [6], "key": "sym", "series": ["Z"]}"#),
                vec![keyed_rows(vec![Some("A")], vec![1.0])],
            ),
            NotFound,
            "has no series",
        ),
    ]
}

fn keyed(name: &str) -> FlightDescriptor {
    cmd(&json!({"dataset": name, "key": "sym"}).to_string())
}

/// A keyed upload's batch: `sym` (nullable strings) and `close`.
fn keyed_rows(syms: Vec<Option<&str>>, closes: Vec<f64>) -> RecordBatch {
    RecordBatch::try_from_iter_with_nullable([
        ("sym", Arc::new(StringArray::from(syms)) as ArrayRef, true),
        (
            "close",
            Arc::new(Float64Array::from(closes)) as ArrayRef,
            false,
        ),
    ])
    .unwrap()
}

/// Sends `call` and returns its error; panics if it succeeded.
async fn fail(c: &mut FlightClient, call: Call) -> FlightError {
    match call {
        Call::Put(descriptor, batches) => put_with(c, descriptor, batches).await.err(),
        Call::PutRaw(msgs) => {
            stream_error(
                c.do_put(futures::stream::iter(msgs.into_iter().map(Ok)))
                    .await,
            )
            .await
        }
        Call::Action(kind, body) => action(c, kind, body).await.err(),
        Call::Exchange(descriptor, batches) => {
            let req = FlightDataEncoderBuilder::new()
                .with_flight_descriptor(Some(descriptor))
                .build(futures::stream::iter(batches.into_iter().map(Ok)));
            stream_error(c.do_exchange(req).await).await
        }
        Call::Session(bodies) => {
            let first = FlightData::new().with_descriptor(cmd(r#"{"op": "session"}"#));
            let msgs = bodies
                .into_iter()
                .map(|b| FlightData::new().with_app_metadata(b.to_string()));
            let req = futures::stream::iter(std::iter::once(first).chain(msgs).map(Ok));
            stream_error(c.do_exchange(req).await).await
        }
        Call::Get(ticket) => stream_error(c.do_get(Ticket::new(ticket)).await).await,
        Call::Info(d) => c.get_flight_info(d).await.err(),
        Call::Schema(d) => c.get_schema(d).await.err(),
        Call::Poll(d) => c.poll_flight_info(d).await.err(),
    }
    .expect("the call should have failed")
}

/// The error of a streaming call, whether it failed at once or mid-stream; `None` if it
/// succeeded.
async fn stream_error<T, S>(call: Result<S, FlightError>) -> Option<FlightError>
where
    S: futures::Stream<Item = Result<T, FlightError>> + Unpin,
{
    match call {
        Ok(s) => s.try_collect::<Vec<T>>().await.err(),
        Err(e) => Some(e),
    }
}

/// What is stored: per dataset its name, rows and metadata (version), plus the files on disk.
async fn snapshot(c: &mut FlightClient, dir: &Path) -> (Vec<(String, i64, String)>, Vec<String>) {
    let listed = infos(c)
        .await
        .into_iter()
        .map(|i| {
            let meta = String::from_utf8(i.app_metadata.to_vec()).unwrap();
            (
                i.flight_descriptor.unwrap().path[0].clone(),
                i.total_records,
                meta,
            )
        })
        .collect();
    let mut files: Vec<String> = ["datasets", "tmp"]
        .iter()
        .flat_map(|sub| std::fs::read_dir(dir.join(sub)).unwrap())
        .map(|e| e.unwrap().path().display().to_string())
        .collect();
    files.sort();
    (listed, files)
}

#[tokio::test]
async fn every_bad_request_gets_its_code_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::with(|c| {
        c.data_dir = Some(dir.path().to_owned());
        c.max_dataset_bytes = 100_000;
        c.max_total_bytes = 60_000;
        c.max_combos = 100;
        c.max_trade_combos = 10;
        c.max_message_bytes = 1 << 20;
    })
    .await;
    let mut c = server.client().await;
    put(&mut c, "keep", vec![close_batch(&series(300))])
        .await
        .unwrap();
    // A universe: A has 8 rows, B 3.
    let syms = [vec![Some("A"); 5], vec![Some("B"); 3], vec![Some("A"); 3]].concat();
    put_with(&mut c, keyed("ukeep"), vec![keyed_rows(syms, series(11))])
        .await
        .unwrap();
    let before = snapshot(&mut c, dir.path()).await;
    let cases = cases();
    assert!(cases.len() >= 40, "{} cases", cases.len());
    for Case {
        what,
        call,
        code: want,
        says,
    } in cases
    {
        eprintln!("case: {what}");
        let err = fail(&mut c, call).await;
        assert_eq!(code(&err), want, "{what}: {err}");
        assert!(
            err.to_string().contains(says),
            "{what}: {err} does not say {says:?}"
        );
        assert_eq!(
            snapshot(&mut c, dir.path()).await,
            before,
            "{what}: stored datasets changed"
        );
        assert_eq!(
            action(&mut c, "echo", "ping").await.unwrap(),
            b"ping",
            "{what}: server stopped serving"
        );
    }
    // Still fully working: a sweep on the dataset that was there all along.
    let batch = crate::common::sweep(&mut c, json!({"dataset": "keep", "lengths": [6, 8]}))
        .await
        .unwrap();
    assert_eq!(batch.num_rows(), 2);
}

#[tokio::test]
async fn an_empty_put_stream_is_invalid() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let err = stream_error(c.do_put(futures::stream::empty()).await)
        .await
        .unwrap();
    assert_eq!(code(&err), Code::InvalidArgument, "{err}");
    assert_eq!(action(&mut c, "echo", "ping").await.unwrap(), b"ping");
}
