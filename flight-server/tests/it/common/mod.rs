//! Test fixtures: the server in-process on 127.0.0.1 port 0 ([`TestServer`]) or the real
//! binary ([`BinaryServer`], for signals and kill -9), plus helpers that speak to them with
//! arrow-rs's `FlightClient`.

#![allow(dead_code, unreachable_pub)]

use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, RecordBatch};
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::{Action, FlightClient, FlightData, FlightDescriptor};
use futures::{StreamExt, TryStreamExt};
use sweepflight_server::ServerConfig;
use sweepflight_server::testing::{ServerProcess, TestServer as InProcess};
use tonic::transport::Channel;

/// The server in this process, with a helper to connect arrow-rs's `FlightClient`.
pub struct TestServer(InProcess);

impl TestServer {
    /// The test configuration (port 0, in memory).
    pub async fn start() -> Self {
        Self(InProcess::start_default().await)
    }

    /// The test configuration changed by `configure`.
    pub async fn with(configure: impl FnOnce(&mut ServerConfig)) -> Self {
        Self(InProcess::start(configure).await)
    }

    /// `grpc://127.0.0.1:PORT`.
    pub fn uri(&self) -> &str {
        self.0.uri()
    }

    /// A fresh client on a new connection.
    pub async fn client(&self) -> FlightClient {
        connect(self.uri()).await
    }

    /// The metrics endpoint, if configured.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.0.metrics_addr()
    }

    /// The fixture, to shut the server down.
    pub fn inner(self) -> InProcess {
        self.0
    }
}

/// The real binary on 127.0.0.1 port 0.
pub struct BinaryServer(ServerProcess);

impl BinaryServer {
    /// Starts the binary with `--listen 127.0.0.1:0` and extra flags.
    pub fn start(extra: &[&str]) -> Self {
        Self(ServerProcess::start(
            Path::new(env!("CARGO_BIN_EXE_sweepflight-server")),
            extra,
        ))
    }

    /// The process, for signals.
    pub fn process(&mut self) -> &mut ServerProcess {
        &mut self.0
    }

    /// `grpc://127.0.0.1:PORT`.
    pub fn uri(&self) -> &str {
        &self.0.uri
    }

    /// Sends SIGTERM on a blocking thread and waits up to `limit` for the exit, so the async
    /// test can keep driving its clients meanwhile. The handle yields the exit status, or
    /// `None` if the server was still running at `limit` (it is then killed).
    pub fn terminate_in_background(
        mut self,
        limit: std::time::Duration,
    ) -> tokio::task::JoinHandle<Option<std::process::ExitStatus>> {
        tokio::task::spawn_blocking(move || self.0.terminate(limit))
    }

    /// A fresh client on a new connection.
    pub async fn client(&self) -> FlightClient {
        connect(self.uri()).await
    }
}

/// A `FlightClient` on a new connection to `uri` (`grpc://HOST:PORT`).
pub async fn connect(uri: &str) -> FlightClient {
    let uri = uri.replace("grpc://", "http://");
    let channel = Channel::from_shared(uri).unwrap().connect().await.unwrap();
    FlightClient::new(channel)
}

/// A one-column `close` batch.
pub fn close_batch(values: &[f64]) -> RecordBatch {
    RecordBatch::try_from_iter([(
        "close",
        Arc::new(Float64Array::from(values.to_vec())) as ArrayRef,
    )])
    .unwrap()
}

/// A positive, wiggly series of `n` bars.
pub fn series(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| 100.0 + (i as f64 * 0.3).sin() * 2.0 + (i as f64 * 0.017).cos() * 5.0)
        .collect()
}

/// The paper series fixture as record batches.
pub fn paper_batches() -> Vec<RecordBatch> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernel/testdata/paper-close.arrow");
    let file = std::fs::File::open(path).unwrap();
    arrow_ipc::reader::FileReader::try_new(file, None)
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// DoPut `batches` under `name`; the PutResult metadata as JSON.
pub async fn put(
    client: &mut FlightClient,
    name: &str,
    batches: Vec<RecordBatch>,
) -> Result<serde_json::Value, FlightError> {
    put_with(
        client,
        FlightDescriptor::new_path(vec![name.into()]),
        batches,
    )
    .await
}

/// DoPut with any descriptor.
pub async fn put_with(
    client: &mut FlightClient,
    descriptor: FlightDescriptor,
    batches: Vec<RecordBatch>,
) -> Result<serde_json::Value, FlightError> {
    let schema = batches.first().map(|b| b.schema());
    let mut builder = FlightDataEncoderBuilder::new().with_flight_descriptor(Some(descriptor));
    if let Some(schema) = schema {
        builder = builder.with_schema(schema);
    }
    let stream = builder.build(futures::stream::iter(batches.into_iter().map(Ok)));
    let results: Vec<_> = client.do_put(stream).await?.try_collect().await?;
    assert_eq!(results.len(), 1, "one PutResult per put");
    Ok(serde_json::from_slice(&results[0].app_metadata).unwrap())
}

/// Runs a DoAction and concatenates the Result bodies.
pub async fn action(
    client: &mut FlightClient,
    kind: &str,
    body: impl Into<bytes::Bytes>,
) -> Result<Vec<u8>, FlightError> {
    let bodies: Vec<_> = client
        .do_action(Action::new(kind, body.into()))
        .await?
        .try_collect()
        .await?;
    Ok(bodies.concat())
}

/// The `sweep` action, its reply decoded as one Arrow IPC stream into one batch.
pub async fn sweep(
    client: &mut FlightClient,
    body: serde_json::Value,
) -> Result<RecordBatch, FlightError> {
    table(client, "sweep", &body).await
}

/// An action whose reply is one Arrow IPC stream over its Result bodies (`sweep`, `trades`,
/// `equity`), decoded into one batch.
pub async fn table(
    client: &mut FlightClient,
    kind: &str,
    body: &serde_json::Value,
) -> Result<RecordBatch, FlightError> {
    let bytes = action(client, kind, body.to_string()).await?;
    let reader = arrow_ipc::reader::StreamReader::try_new(bytes.as_slice(), None).unwrap();
    let batches: Vec<RecordBatch> = reader.map(Result::unwrap).collect();
    Ok(arrow_select::concat::concat_batches(&batches[0].schema(), &batches).unwrap())
}

/// The stateless exchange sweep: `batches` streamed under the command `cmd`; the reply's batches.
pub async fn exchange_sweep(
    client: &mut FlightClient,
    cmd: serde_json::Value,
    batches: Vec<RecordBatch>,
) -> Vec<RecordBatch> {
    let req = FlightDataEncoderBuilder::new()
        .with_flight_descriptor(Some(FlightDescriptor::new_cmd(cmd.to_string())))
        .build(futures::stream::iter(batches.into_iter().map(Ok)));
    client
        .do_exchange(req)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

/// A `session` exchange opened with `cmd`, one message per body (its app_metadata); the
/// replies' batches, or the error that ended it.
pub async fn session(
    client: &mut FlightClient,
    cmd: &serde_json::Value,
    bodies: &[serde_json::Value],
) -> Result<Vec<RecordBatch>, FlightError> {
    let first = FlightData::new().with_descriptor(FlightDescriptor::new_cmd(cmd.to_string()));
    let msgs: Vec<FlightData> = bodies
        .iter()
        .map(|b| FlightData::new().with_app_metadata(b.to_string()))
        .collect();
    let inbound = futures::stream::iter(std::iter::once(first).chain(msgs).map(Ok));
    client.do_exchange(inbound).await?.try_collect().await
}

/// The gRPC code of a failed call.
pub fn code(e: &FlightError) -> tonic::Code {
    match e {
        FlightError::Tonic(s) => s.code(),
        other => panic!("expected a gRPC status, got {other:?}"),
    }
}

/// The code and message of a refused call (the status's own message, unescaped).
pub fn refused(result: Result<impl std::fmt::Debug, FlightError>) -> (tonic::Code, String) {
    match result.unwrap_err() {
        FlightError::Tonic(s) => (s.code(), s.message().to_owned()),
        other => panic!("expected a gRPC status, got {other:?}"),
    }
}

/// A float64 column by name.
pub fn f64s(b: &RecordBatch, name: &str) -> Vec<f64> {
    let c = b.column_by_name(name).unwrap();
    c.as_any()
        .downcast_ref::<Float64Array>()
        .unwrap()
        .values()
        .to_vec()
}

/// An int64 column by name.
pub fn i64s(b: &RecordBatch, name: &str) -> Vec<i64> {
    let c = b.column_by_name(name).unwrap();
    c.as_any()
        .downcast_ref::<arrow_array::Int64Array>()
        .unwrap()
        .values()
        .to_vec()
}

/// Every FlightInfo ListFlights returns.
pub async fn infos(client: &mut FlightClient) -> Vec<arrow_flight::FlightInfo> {
    let stream = client.list_flights(bytes::Bytes::new()).await.unwrap();
    stream.try_collect().await.unwrap()
}

/// The rows a FlightInfo's ticket serves (DoGet), concatenated into one batch.
pub async fn rows(client: &mut FlightClient, info: &arrow_flight::FlightInfo) -> RecordBatch {
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    let batches: Vec<RecordBatch> = client
        .do_get(ticket)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    arrow_select::concat::concat_batches(&batches[0].schema(), &batches).unwrap()
}

/// Names of the stored datasets.
pub async fn names(client: &mut FlightClient) -> Vec<String> {
    infos(client)
        .await
        .into_iter()
        .map(|i| i.flight_descriptor.unwrap().path[0].clone())
        .collect()
}

/// Drains a stream of results, for tests that only care that it ends.
pub async fn drain<T>(s: impl futures::Stream<Item = T> + Unpin) -> Vec<T> {
    s.collect().await
}
