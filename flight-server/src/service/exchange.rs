//! DoExchange: `echo` (every message back unchanged), the stateless `sweep` (the series
//! travels with the parameters; nothing is stored) and the `session` extension (many
//! params-only sweeps, or `trades` / `equity` / `walk_forward` calls, on one open stream,
//! without a gRPC call each).

use std::sync::{Arc, Mutex};

use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::{FlightData, FlightDescriptor, SchemaAsIpc};
use arrow_ipc::writer::IpcWriteOptions;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use sweepflight_protocol::{
    ExchangeCommand, ExchangeSweep, SessionReply, Strategy, SweepRequest, WalkForwardRequest,
    equity_schema, portfolio_equity_schema, portfolio_trades_schema, strategy_schema,
    trades_schema, walk_forward_schema,
};
use tracing::Instrument;

use super::put::upload_limits;
use super::{Inbound, State};
use crate::datasets::InMemory;
use crate::datasets::ingest::read_upload;
use crate::sweep::Detail;
use crate::sweep::results::SessionEncoder;
use crate::{Error, Result};

/// Answers an exchange whose first message carried `descriptor`.
pub(super) async fn exchange(
    state: &Arc<State>,
    descriptor: Option<&FlightDescriptor>,
    data: Inbound,
) -> Result<BoxStream<'static, Result<FlightData>>> {
    let d = descriptor
        .ok_or_else(|| Error::invalid("DoExchange needs a CMD descriptor on its first message"))?;
    if d.r#type() != arrow_flight::flight_descriptor::DescriptorType::Cmd {
        return Err(Error::invalid(
            "DoExchange needs a CMD descriptor, got a PATH one",
        ));
    }
    match ExchangeCommand::decode(&d.cmd)? {
        ExchangeCommand::Echo => Ok(data.map_err(Error::from).boxed()),
        ExchangeCommand::Session {
            keyed,
            strategy,
            reply,
        } => Ok(session(state, data, keyed, strategy, reply)),
        ExchangeCommand::Sweep(sweep) => transient(state, *sweep, data).await,
    }
}

/// The stateless sweep: read the streamed series (grouped by `key` if given), then the sweep
/// use case on them; the reply is its table as Flight data.
async fn transient(
    state: &State,
    sweep: ExchangeSweep,
    data: Inbound,
) -> Result<BoxStream<'static, Result<FlightData>>> {
    // Refused before the upload is read: a grid past the limits costs no transfer.
    crate::sweep::check_exchange(&state.engine, &sweep)?;
    let upload = read_upload(
        data,
        upload_limits(state),
        sweep.key.as_deref(),
        &mut InMemory,
    )
    .await?;
    let batch = crate::sweep::transient(&state.engine, &sweep, &upload).await?;
    let out = FlightDataEncoderBuilder::new()
        .with_options(crate::sweep::results::write_options(sweep.compression)?)
        .with_schema(batch.schema())
        .build(futures::stream::iter([Ok(batch)]))
        .map_err(|e| Error::internal("encode the result", e));
    Ok(out.boxed())
}

/// The `session` exchange: the reply schema first, then for each inbound message (its
/// app_metadata a `sweep` body, or with `"action": "walk_forward"` a `walk_forward` body) one
/// reply batch, in order, carrying the same app_metadata so a client can match replies: the
/// sweep's rows, or with `"action"` the `trades`, `equity` or `walk_forward` action's. A bad
/// request ends the session with its error status.
///
/// The point is latency: a params-only call on an open stream costs one message each way,
/// where a DoAction costs a whole gRPC call (headers, trailers, a new HTTP/2 stream).
fn session(
    state: &Arc<State>,
    data: Inbound,
    keyed: bool,
    strategy: Strategy,
    reply: SessionReply,
) -> BoxStream<'static, Result<FlightData>> {
    // A portfolio's trades and equity are its own tables (one book, not one per series); a
    // session declares them without `time`, which its replies leave out (the dataset, and so
    // the time's type, is not known when the session opens).
    let portfolio = strategy.portfolio().is_some();
    let schema = match reply {
        SessionReply::Sweep => strategy_schema(&strategy, keyed),
        SessionReply::Trades if portfolio => portfolio_trades_schema(keyed, None),
        SessionReply::Equity if portfolio => portfolio_equity_schema(None),
        SessionReply::Trades => trades_schema(keyed),
        SessionReply::Equity => equity_schema(keyed),
        SessionReply::WalkForward => walk_forward_schema(&strategy, keyed),
    };
    let schema = SchemaAsIpc::new(&schema, &IpcWriteOptions::default()).into();
    // Requests are answered one at a time and in order, so one encoder serves the session.
    let encoder = Arc::new(Mutex::new(SessionEncoder::default()));
    let state_for_replies = Arc::clone(state);
    let replies = data.map_err(Error::from).and_then(move |msg| {
        let (state, encoder) = (Arc::clone(&state_for_replies), Arc::clone(&encoder));
        let strategy = strategy.clone();
        let span = tracing::info_span!(
            "session_sweep",
            dataset = tracing::field::Empty,
            combos = tracing::field::Empty
        );
        async move {
            // A walk-forward body is a sweep body plus its folds and selection.
            let (request, walk) = match reply {
                SessionReply::WalkForward => {
                    let walk = WalkForwardRequest::decode(&msg.app_metadata)
                        .map_err(|e| state.hinted(e, &msg.app_metadata))?;
                    (walk.sweep.clone(), Some(walk))
                }
                _ => (
                    SweepRequest::decode(&msg.app_metadata)
                        .map_err(|e| state.hinted(e, &msg.app_metadata))?,
                    None,
                ),
            };
            if request.compression.is_some() {
                return Err(Error::invalid(
                    "a session's replies are single messages on one stream: `compression` applies to action replies and DoGet",
                ));
            }
            if request.strategy != strategy {
                return Err(Error::invalid(format!(
                    "this session was opened for {strategy} (its replies' schema); a {} sweep needs a session opened with {{\"op\": \"session\", \"strategy\": \"{}\"}}",
                    request.strategy, request.strategy
                )));
            }
            let span = tracing::Span::current();
            span.record("dataset", request.dataset.as_str());
            span.record("combos", request.len());
            let keyed = Some(keyed);
            let batch = match (reply, walk) {
                (SessionReply::WalkForward, Some(walk)) => {
                    crate::sweep::walk_forward::run(&state.engine, &walk, keyed, None).await?
                }
                (SessionReply::WalkForward, None) => {
                    unreachable!("a walk-forward session decodes walk-forward bodies")
                }
                (SessionReply::Sweep, _) if request.execution.blocks.is_some() => {
                    return Err(Error::invalid(
                        "a session's replies share one schema and `blocks` adds a column: ask for blocks with the `sweep` action",
                    ));
                }
                (SessionReply::Sweep, _) => {
                    crate::sweep::run(&state.engine, &request, keyed, None).await?
                }
                (SessionReply::Trades, _) => {
                    crate::sweep::detail(&state.engine, &request, keyed, Detail::Trades, None).await?
                }
                (SessionReply::Equity, _) => {
                    crate::sweep::detail(&state.engine, &request, keyed, Detail::Equity, None).await?
                }
            };
            let batch = match batch.schema().index_of("time") {
                Ok(at) if request.strategy.portfolio().is_some() => {
                    let keep: Vec<usize> = (0..batch.num_columns()).filter(|&k| k != at).collect();
                    batch
                        .project(&keep)
                        .map_err(|e| Error::internal("leave out the time column", e))?
                }
                _ => batch,
            };
            let mut reply = encoder
                .lock()
                .map_err(|_| Error::Internal("session encoder poisoned".into()))?
                .encode(&batch)?;
            reply.app_metadata = msg.app_metadata;
            Ok(reply)
        }
        .instrument(span)
    });
    // A session could stay open forever; graceful shutdown waits for open streams, so a
    // session ends (after its current request) when the server starts shutting down.
    let replies = replies.take_until(state.shutting_down());
    futures::stream::iter([Ok(schema)]).chain(replies).boxed()
}
