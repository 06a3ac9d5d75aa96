//! DoExchange: `echo` (every message back unchanged), the stateless `sweep` (the series
//! travels with the parameters; nothing is stored) and the `session` extension (many
//! params-only sweeps on one open stream, without a gRPC call each).

use std::sync::{Arc, Mutex};

use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::{FlightData, FlightDescriptor, SchemaAsIpc};
use arrow_ipc::writer::IpcWriteOptions;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

use super::put::upload_limits;
use super::{Inbound, State};
use crate::compute::{self, Series};
use crate::ingest::read_series;
use crate::request::{ExchangeCommand, exchange_command, sweep_request};
use crate::results::{SCHEMA, SessionEncoder, to_batch};
use crate::{Error, Result};

/// Answers an exchange whose first message carried `descriptor`.
pub(super) async fn exchange(
    state: &State,
    descriptor: Option<&FlightDescriptor>,
    data: Inbound,
) -> Result<BoxStream<'static, Result<FlightData>>> {
    match exchange_command(descriptor, state.config.max_combos)? {
        ExchangeCommand::Echo => Ok(data.map_err(Error::from).boxed()),
        ExchangeCommand::Session => Ok(session(state, data)),
        ExchangeCommand::Sweep(spec) => {
            let series = read_series(data, upload_limits(state)).await?;
            let results = compute::run(
                &state.sweeps,
                Series::Transient(Arc::new(series.close)),
                &spec,
            )
            .await?;
            let batch = to_batch(&spec.combos, &results)?;
            let out = FlightDataEncoderBuilder::new()
                .with_schema(batch.schema())
                .build(futures::stream::iter([Ok(batch)]))
                .map_err(Error::from);
            Ok(out.boxed())
        }
    }
}

/// The `session` exchange: the result schema first, then for each inbound message (its
/// app_metadata a `sweep` body) one result batch, in order, carrying the same app_metadata so
/// a client can match replies. A bad request ends the session with its error status.
///
/// The point is latency: a params-only call on an open stream costs one message each way,
/// where a DoAction costs a whole gRPC call (headers, trailers, a new HTTP/2 stream).
fn session(state: &State, data: Inbound) -> BoxStream<'static, Result<FlightData>> {
    let schema = SchemaAsIpc::new(&SCHEMA, &IpcWriteOptions::default()).into();
    let (store, sweeps, max_combos) = (
        Arc::clone(&state.store),
        Arc::clone(&state.sweeps),
        state.config.max_combos,
    );
    // Requests are answered one at a time and in order, so one encoder serves the session.
    let encoder = Arc::new(Mutex::new(SessionEncoder::default()));
    let replies = data.map_err(Error::from).and_then(move |msg| {
        let (store, sweeps, encoder) = (
            Arc::clone(&store),
            Arc::clone(&sweeps),
            Arc::clone(&encoder),
        );
        async move {
            let req = sweep_request(&msg.app_metadata, max_combos)?;
            let dataset = store.get(&req.dataset)?;
            let results = compute::run(&sweeps, Series::Stored(store, dataset), &req.spec).await?;
            let batch = to_batch(&req.spec.combos, &results)?;
            let mut reply = encoder
                .lock()
                .map_err(|_| Error::Internal("session encoder poisoned".into()))?
                .encode(&batch)?;
            reply.app_metadata = msg.app_metadata;
            Ok(reply)
        }
    });
    // A session could stay open forever; graceful shutdown waits for open streams, so a
    // session ends (after its current request) when the server starts shutting down.
    let replies = replies.take_until(state.shutting_down());
    futures::stream::iter([Ok(schema)]).chain(replies).boxed()
}
