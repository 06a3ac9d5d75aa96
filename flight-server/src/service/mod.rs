//! The `FlightService` implementation: one method per verb, each a thin shell that decodes
//! the request, calls a handler in a submodule and converts the error once.
//!
//! - `catalog`: ListFlights, GetFlightInfo, GetSchema, DoGet.
//! - `download`: DoGet's encoding of stored batches.
//! - `put`: DoPut.
//! - `actions`: ListActions and DoAction (`sweep`, `trades`, `equity`, `walk_forward`,
//!   `echo`, `drop`, `stats`, `strategies` and the job actions).
//! - `exchange`: DoExchange (`echo`, stateless `sweep`, `session`).
//! - `inbound`: every client stream's guard (message sizes, IPC bounds) and its descriptor.
//! - `jobs`: `submit`, `status`, `cancel`, PollFlightInfo, CancelFlightInfo and a job's DoGet.

mod actions;
mod catalog;
mod download;
mod exchange;
mod inbound;
mod jobs;
mod put;

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use arrow_flight::flight_service_server::FlightService;
use arrow_flight::{
    Action, ActionType, Criteria, Empty, FlightData, FlightDescriptor, FlightInfo,
    HandshakeRequest, HandshakeResponse, PollInfo, PutResult, SchemaResult, Ticket,
};
use futures::stream::BoxStream;
use futures::{Stream, StreamExt, TryStreamExt};
use tonic::{Request, Response, Status, Streaming};
use tracing::instrument;

use crate::Error;
use crate::ops::auth::Auth;
use crate::ops::metrics::Levels;
use crate::sweep::engine::Engine;

/// Shared by every call: the engine (configuration, datasets, the sweep runner, jobs), and
/// what the wire adds (who may call, open connections, shutdown).
#[derive(Debug)]
pub(crate) struct State {
    /// The datasets, the sweep runner and the jobs.
    pub engine: Arc<Engine>,
    /// Who may call (checked by [`crate::ops::auth::AuthLayer`]; Handshake uses it directly).
    pub auth: Arc<Auth>,
    /// Open client connections.
    pub connections: Arc<AtomicUsize>,
    /// Turns true when the server starts shutting down; long-lived streams end on it.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
}

impl State {
    /// A refused sweep body's error, with a hint where a parameter without values looks like a
    /// column of the body's dataset ([`crate::sweep::hints`]).
    pub(crate) fn hinted(&self, e: sweepflight_protocol::Error, body: &[u8]) -> crate::Error {
        crate::sweep::hints::with_hint(e, body, &|name| self.engine.store.get(name).ok())
    }

    /// Resolves once shutdown has begun (never, if the server outlives the sender).
    pub(crate) fn shutting_down(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut rx = self.shutdown.clone();
        async move {
            let _ = rx.wait_for(|&down| down).await;
        }
    }

    /// The levels metrics and `stats` report.
    pub(crate) fn levels(&self) -> Levels {
        Levels {
            connections: self.connections.load(std::sync::atomic::Ordering::SeqCst) as i64,
            ..self.engine.levels()
        }
    }

    /// The status for `e`, counted.
    fn status(&self, e: Error) -> Status {
        self.engine.metrics.error(e.code());
        e.into()
    }
}

/// The sweepflight Flight service.
#[derive(Debug, Clone)]
pub(crate) struct SweepFlightService {
    state: Arc<State>,
}

impl SweepFlightService {
    /// The service over `state`.
    pub(crate) fn new(state: Arc<State>) -> Self {
        Self { state }
    }

    fn fail(&self, e: Error) -> Status {
        self.state.status(e)
    }

    /// Boxes a stream of handler results, converting (and counting) errors at the one
    /// conversion point.
    fn boxed<T: Send + 'static>(
        &self,
        s: impl Stream<Item = Result<T, Error>> + Send + 'static,
    ) -> Stream_<T> {
        let state = Arc::clone(&self.state);
        s.map_err(move |e| state.status(e)).boxed()
    }
}

type Stream_<T> = BoxStream<'static, Result<T, Status>>;

#[cfg(feature = "testing")]
pub(crate) use inbound::check_ipc_bounds;
use inbound::{Inbound, inbound, split_descriptor};

// Authentication is not checked here: `AuthLayer` answers before any handler runs.
#[tonic::async_trait]
impl FlightService for SweepFlightService {
    type HandshakeStream = Stream_<HandshakeResponse>;
    type ListFlightsStream = Stream_<FlightInfo>;
    type DoGetStream = Stream_<FlightData>;
    type DoPutStream = Stream_<PutResult>;
    type DoExchangeStream = Stream_<FlightData>;
    type DoActionStream = Stream_<arrow_flight::Result>;
    type ListActionsStream = Stream_<ActionType>;

    #[instrument(level = "debug", skip_all)]
    async fn handshake(
        &self,
        request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<Self::HandshakeStream>, Status> {
        let bearer = self
            .state
            .auth
            .handshake(request.metadata())
            .map_err(|e| self.fail(e))?;
        let mut inbound = request.into_inner();
        let payload = inbound
            .message()
            .await?
            .map(|m| m.payload)
            .unwrap_or_default();
        // With a token: the bearer value, in the payload and the header. Without: an echo.
        let reply = HandshakeResponse {
            protocol_version: 0,
            payload: bearer.clone().map_or(payload, bytes::Bytes::from),
        };
        let mut response = Response::new(futures::stream::iter([Ok(reply)]).boxed());
        if let Some(bearer) = bearer {
            let value = bearer
                .parse()
                .map_err(|_| Status::internal("token is not a valid header value"))?;
            response.metadata_mut().insert("authorization", value);
        }
        Ok(response)
    }

    #[instrument(level = "debug", skip_all)]
    async fn list_flights(
        &self,
        _request: Request<Criteria>,
    ) -> Result<Response<Self::ListFlightsStream>, Status> {
        let infos = catalog::list(&self.state).map_err(|e| self.fail(e))?;
        Ok(Response::new(
            futures::stream::iter(infos.into_iter().map(Ok)).boxed(),
        ))
    }

    #[instrument(level = "debug", skip_all, fields(path = ?request.get_ref().path))]
    async fn get_flight_info(
        &self,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let info = catalog::info(&self.state, request.get_ref()).map_err(|e| self.fail(e))?;
        Ok(Response::new(info))
    }

    #[instrument(level = "debug", skip_all)]
    async fn poll_flight_info(
        &self,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<PollInfo>, Status> {
        let info = jobs::poll(&self.state, request.get_ref())
            .await
            .map_err(|e| self.fail(e))?;
        Ok(Response::new(info))
    }

    #[instrument(level = "debug", skip_all, fields(path = ?request.get_ref().path))]
    async fn get_schema(
        &self,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<SchemaResult>, Status> {
        let schema = catalog::schema(&self.state, request.get_ref()).map_err(|e| self.fail(e))?;
        Ok(Response::new(schema))
    }

    #[instrument(level = "debug", skip_all)]
    async fn do_get(
        &self,
        request: Request<Ticket>,
    ) -> Result<Response<Self::DoGetStream>, Status> {
        let stream =
            catalog::rows(&self.state, &request.get_ref().ticket).map_err(|e| self.fail(e))?;
        Ok(Response::new(self.boxed(stream)))
    }

    #[instrument(level = "debug", skip_all)]
    async fn do_put(
        &self,
        request: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoPutStream>, Status> {
        let result = async {
            let (descriptor, data) =
                split_descriptor(inbound(request.into_inner()), "DoPut").await?;
            put::put(&self.state, descriptor.as_ref(), data).await
        }
        .await
        .map_err(|e| self.fail(e))?;
        Ok(Response::new(futures::stream::iter([Ok(result)]).boxed()))
    }

    #[instrument(level = "debug", skip_all)]
    async fn do_exchange(
        &self,
        request: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoExchangeStream>, Status> {
        let stream = async {
            let (descriptor, data) =
                split_descriptor(inbound(request.into_inner()), "DoExchange").await?;
            exchange::exchange(&self.state, descriptor.as_ref(), data).await
        }
        .await
        .map_err(|e| self.fail(e))?;
        Ok(Response::new(self.boxed(stream)))
    }

    #[instrument(level = "debug", skip_all, fields(action = %request.get_ref().r#type))]
    async fn do_action(
        &self,
        request: Request<Action>,
    ) -> Result<Response<Self::DoActionStream>, Status> {
        let results = actions::run(&self.state, request.into_inner())
            .await
            .map_err(|e| self.fail(e))?;
        Ok(Response::new(
            futures::stream::iter(results.into_iter().map(Ok)).boxed(),
        ))
    }

    #[instrument(level = "debug", skip_all)]
    async fn list_actions(
        &self,
        _request: Request<Empty>,
    ) -> Result<Response<Self::ListActionsStream>, Status> {
        Ok(Response::new(
            futures::stream::iter(actions::list().into_iter().map(Ok)).boxed(),
        ))
    }
}
