//! Bad input of every kind gets the contract's gRPC code, stores nothing, and leaves the server
//! serving with its datasets unchanged.

mod common;

use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, RecordBatch, StringArray};
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::{FlightClient, FlightDescriptor, Ticket};
use common::*;
use futures::TryStreamExt;
use serde_json::json;
use tonic::Code;

/// What is stored, to compare before and after each bad request.
async fn snapshot(c: &mut FlightClient) -> Vec<(String, i64, String)> {
    infos(c)
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
        .collect()
}

async fn assert_unchanged(c: &mut FlightClient, before: &[(String, i64, String)], what: &str) {
    assert_eq!(snapshot(c).await, before, "{what}: stored datasets changed");
    assert_eq!(
        action(c, "echo", "ping").await.unwrap(),
        b"ping",
        "{what}: server stopped serving"
    );
}

fn closes(values: Vec<Option<f64>>) -> RecordBatch {
    RecordBatch::try_from_iter([("close", Arc::new(Float64Array::from(values)) as ArrayRef)])
        .unwrap()
}

fn path(name: &str) -> FlightDescriptor {
    FlightDescriptor::new_path(vec![name.into()])
}

#[tokio::test]
async fn bad_puts_are_refused_and_store_nothing() {
    let server = TestServer::start(&["--max-dataset-bytes", "100000"]);
    let mut c = server.client().await;
    put(&mut c, "keep", vec![close_batch(&series(100))])
        .await
        .unwrap();
    let before = snapshot(&mut c).await;
    let good = close_batch(&series(10));
    let strings =
        RecordBatch::try_from_iter([("close", Arc::new(StringArray::from(vec!["1"])) as ArrayRef)])
            .unwrap();
    let no_close = RecordBatch::try_from_iter([(
        "price",
        Arc::new(Float64Array::from(vec![1.0])) as ArrayRef,
    )])
    .unwrap();
    let cases: Vec<(&str, FlightDescriptor, Vec<RecordBatch>, Code, &str)> = vec![
        (
            "cmd descriptor",
            FlightDescriptor::new_cmd("keep"),
            vec![good.clone()],
            Code::InvalidArgument,
            "PATH",
        ),
        (
            "two-part path",
            FlightDescriptor::new_path(vec!["a".into(), "b".into()]),
            vec![good.clone()],
            Code::InvalidArgument,
            "exactly one",
        ),
        (
            "empty name",
            path(""),
            vec![good.clone()],
            Code::InvalidArgument,
            "1-128",
        ),
        (
            "bad name",
            path("a/b"),
            vec![good.clone()],
            Code::InvalidArgument,
            "character",
        ),
        (
            "long name",
            path(&"x".repeat(129)),
            vec![good.clone()],
            Code::InvalidArgument,
            "1-128",
        ),
        (
            "no close column",
            path("keep"),
            vec![no_close],
            Code::InvalidArgument,
            "no column `close`",
        ),
        (
            "string close",
            path("keep"),
            vec![strings],
            Code::InvalidArgument,
            "type Utf8",
        ),
        (
            "zero rows",
            path("keep"),
            vec![good.slice(0, 0)],
            Code::InvalidArgument,
            "at least 1 row",
        ),
        (
            "null",
            path("keep"),
            vec![closes(vec![Some(1.0), None])],
            Code::InvalidArgument,
            "row 1: is null",
        ),
        (
            "NaN in 2nd batch",
            path("keep"),
            vec![good.clone(), closes(vec![Some(1.0), Some(f64::NAN)])],
            Code::InvalidArgument,
            "row 11: is NaN",
        ),
        (
            "inf",
            path("keep"),
            vec![closes(vec![Some(f64::INFINITY)])],
            Code::InvalidArgument,
            "row 0: is infinite",
        ),
        (
            "-inf",
            path("keep"),
            vec![closes(vec![Some(1.0), Some(f64::NEG_INFINITY)])],
            Code::InvalidArgument,
            "row 1: is infinite",
        ),
        (
            "zero",
            path("keep"),
            vec![closes(vec![Some(0.0)])],
            Code::InvalidArgument,
            "row 0: is <= 0",
        ),
        (
            "negative",
            path("keep"),
            vec![closes(vec![Some(2.0), Some(3.0), Some(-1.0)])],
            Code::InvalidArgument,
            "row 2: is <= 0",
        ),
        (
            "too big",
            path("keep"),
            vec![close_batch(&series(20_000))],
            Code::ResourceExhausted,
            "--max-dataset-bytes",
        ),
    ];
    for (what, descriptor, batches, want, message) in cases {
        let err = put_with(&mut c, descriptor, batches).await.expect_err(what);
        assert_eq!(code(&err), want, "{what}: {err}");
        assert!(err.to_string().contains(message), "{what}: {err}");
        assert_unchanged(&mut c, &before, what).await;
    }
    // A stream with nothing in it at all.
    let err = stream_error(c.do_put(futures::stream::empty()).await).await;
    assert_eq!(code(&err), Code::InvalidArgument, "{err}");
    assert_unchanged(&mut c, &before, "empty stream").await;
}

/// The error of a streaming call, whether it failed at once or mid-stream.
async fn stream_error<T, S>(call: Result<S, FlightError>) -> FlightError
where
    S: futures::Stream<Item = Result<T, FlightError>> + Unpin,
{
    match call {
        Ok(s) => match s.try_collect::<Vec<T>>().await {
            Ok(_) => panic!("the call succeeded"),
            Err(e) => e,
        },
        Err(e) => e,
    }
}

#[tokio::test]
async fn bad_sweeps_and_actions() {
    let server = TestServer::start(&["--max-combos", "100"]);
    let mut c = server.client().await;
    put(&mut c, "x", vec![close_batch(&series(300))])
        .await
        .unwrap();
    let before = snapshot(&mut c).await;
    let many: Vec<u32> = vec![6; 101];
    let cases: Vec<(&str, &str, Vec<u8>, Code)> = vec![
        (
            "unknown dataset",
            "sweep",
            json!({"dataset": "nope", "lengths": [6]})
                .to_string()
                .into(),
            Code::NotFound,
        ),
        (
            "not utf-8",
            "sweep",
            vec![0xff, 0xfe],
            Code::InvalidArgument,
        ),
        (
            "not json",
            "sweep",
            b"{dataset".to_vec(),
            Code::InvalidArgument,
        ),
        (
            "not an object",
            "sweep",
            b"[6, 8]".to_vec(),
            Code::InvalidArgument,
        ),
        (
            "dataset not a string",
            "sweep",
            br#"{"dataset": 1, "lengths": [6]}"#.to_vec(),
            Code::InvalidArgument,
        ),
        (
            "neither",
            "sweep",
            br#"{"dataset": "x"}"#.to_vec(),
            Code::InvalidArgument,
        ),
        (
            "both",
            "sweep",
            br#"{"dataset": "x", "lengths": [6], "params": [[1,1,1,1,1,1]]}"#.to_vec(),
            Code::InvalidArgument,
        ),
        (
            "short tuple",
            "sweep",
            br#"{"dataset": "x", "params": [[1,2,3,4,5]]}"#.to_vec(),
            Code::InvalidArgument,
        ),
        (
            "tuple not ints",
            "sweep",
            br#"{"dataset": "x", "params": [[1,2,3,4,5,"6"]]}"#.to_vec(),
            Code::InvalidArgument,
        ),
        (
            "zero window",
            "sweep",
            br#"{"dataset": "x", "params": [[1,2,3,4,5,0]]}"#.to_vec(),
            Code::InvalidArgument,
        ),
        (
            "length 0",
            "sweep",
            br#"{"dataset": "x", "lengths": [0]}"#.to_vec(),
            Code::InvalidArgument,
        ),
        (
            "length float",
            "sweep",
            br#"{"dataset": "x", "lengths": [6.5]}"#.to_vec(),
            Code::InvalidArgument,
        ),
        (
            "length too big",
            "sweep",
            br#"{"dataset": "x", "lengths": [2147483648]}"#.to_vec(),
            Code::InvalidArgument,
        ),
        (
            "negative fee",
            "sweep",
            br#"{"dataset": "x", "lengths": [6], "fee": -0.001}"#.to_vec(),
            Code::InvalidArgument,
        ),
        (
            "fee not a number",
            "sweep",
            br#"{"dataset": "x", "lengths": [6], "fee": "low"}"#.to_vec(),
            Code::InvalidArgument,
        ),
        (
            "too many combos",
            "sweep",
            json!({"dataset": "x", "lengths": many}).to_string().into(),
            Code::InvalidArgument,
        ),
        ("drop unknown", "drop", b"nope".to_vec(), Code::NotFound),
        (
            "drop bad name",
            "drop",
            b"../x".to_vec(),
            Code::InvalidArgument,
        ),
        ("drop not utf-8", "drop", vec![0xff], Code::InvalidArgument),
        ("unknown action", "explode", vec![], Code::Unimplemented),
    ];
    for (what, kind, body, want) in cases {
        let err = action(&mut c, kind, body).await.expect_err(what);
        assert_eq!(code(&err), want, "{what}: {err}");
        assert_unchanged(&mut c, &before, what).await;
    }
}

#[tokio::test]
async fn bad_descriptors_and_tickets() {
    let server = TestServer::start(&[]);
    let mut c = server.client().await;
    put(&mut c, "x", vec![close_batch(&series(30))])
        .await
        .unwrap();
    let before = snapshot(&mut c).await;

    let e = c.get_flight_info(path("nope")).await.unwrap_err();
    assert_eq!(code(&e), Code::NotFound);
    assert!(e.to_string().contains("`nope` not found"), "{e}");
    assert_eq!(
        code(
            &c.get_flight_info(FlightDescriptor::new_cmd("x"))
                .await
                .unwrap_err()
        ),
        Code::InvalidArgument
    );
    assert_eq!(
        code(&c.get_schema(path("nope")).await.unwrap_err()),
        Code::NotFound
    );
    assert_eq!(
        code(&c.get_schema(path("a b")).await.unwrap_err()),
        Code::InvalidArgument
    );
    assert_eq!(
        code(&c.poll_flight_info(path("x")).await.unwrap_err()),
        Code::Unimplemented
    );

    for bad in [&b"x"[..], b"", br#"{"kind":"dataset","v":9,"name":"x"}"#] {
        let err = stream_error(c.do_get(Ticket::new(bad.to_vec())).await).await;
        assert_eq!(code(&err), Code::InvalidArgument, "{bad:?}");
    }
    // A real ticket whose dataset has gone.
    let info = c.get_flight_info(path("x")).await.unwrap();
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    put(&mut c, "y", vec![close_batch(&series(30))])
        .await
        .unwrap();
    action(&mut c, "drop", "y").await.unwrap();
    let gone = Ticket::new(
        ticket
            .ticket
            .to_vec()
            .iter()
            .map(|&b| if b == b'x' { b'y' } else { b })
            .collect::<Vec<_>>(),
    );
    let err = stream_error(c.do_get(gone).await).await;
    assert_eq!(code(&err), Code::NotFound);
    assert_unchanged(&mut c, &before, "descriptors").await;
}

#[tokio::test]
async fn bad_exchanges() {
    let server = TestServer::start(&[]);
    let mut c = server.client().await;
    let before = snapshot(&mut c).await;
    let cases: Vec<(&str, FlightDescriptor, Vec<RecordBatch>)> = vec![
        ("path descriptor", path("x"), vec![close_batch(&[1.0])]),
        (
            "unknown op",
            FlightDescriptor::new_cmd(r#"{"op": "dance"}"#),
            vec![close_batch(&[1.0])],
        ),
        (
            "no op",
            FlightDescriptor::new_cmd(r#"{"lengths": [6]}"#),
            vec![close_batch(&[1.0])],
        ),
        (
            "bad json",
            FlightDescriptor::new_cmd("{"),
            vec![close_batch(&[1.0])],
        ),
        (
            "bad close",
            FlightDescriptor::new_cmd(r#"{"op": "sweep", "lengths": [6]}"#),
            vec![closes(vec![Some(1.0), Some(-2.0)])],
        ),
        (
            "zero length",
            FlightDescriptor::new_cmd(r#"{"op": "sweep", "lengths": [0]}"#),
            vec![close_batch(&[1.0])],
        ),
    ];
    for (what, descriptor, batches) in cases {
        let req = FlightDataEncoderBuilder::new()
            .with_flight_descriptor(Some(descriptor))
            .build(futures::stream::iter(batches.into_iter().map(Ok)));
        let err = stream_error(c.do_exchange(req).await).await;
        assert_eq!(code(&err), Code::InvalidArgument, "{what}: {err}");
        assert_unchanged(&mut c, &before, what).await;
    }
}

#[tokio::test]
async fn oversized_messages_are_resource_exhausted() {
    let server = TestServer::start(&["--max-message-bytes", "1048576"]);
    let mut c = server.client().await;
    let before = snapshot(&mut c).await;
    // One 2.4 MB batch, sent as a single message.
    let batch = close_batch(&series(300_000));
    let stream = FlightDataEncoderBuilder::new()
        .with_max_flight_data_size(usize::MAX)
        .with_flight_descriptor(Some(path("big")))
        .build(futures::stream::iter([Ok(batch)]));
    let err = stream_error(c.do_put(stream).await).await;
    assert_eq!(code(&err), Code::ResourceExhausted, "{err}");
    assert_unchanged(&mut c, &before, "oversized").await;
}
