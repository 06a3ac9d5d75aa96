//! The `FlightService` implementation: one method per verb, each a thin shell that decodes
//! the request, calls a handler in a submodule and converts the error once.
//!
//! - `catalog`: ListFlights, GetFlightInfo, GetSchema, DoGet.
//! - `put`: DoPut.
//! - `actions`: ListActions and DoAction (`sweep`, `echo`, `drop`).
//! - `exchange`: DoExchange (`echo`, stateless `sweep`).

mod actions;
mod catalog;
mod exchange;
mod put;

use std::sync::Arc;

use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::FlightService;
use arrow_flight::{
    Action, ActionType, Criteria, Empty, FlightData, FlightDescriptor, FlightInfo,
    HandshakeRequest, HandshakeResponse, PollInfo, PutResult, SchemaResult, Ticket,
};
use futures::stream::BoxStream;
use futures::{Stream, StreamExt, TryStreamExt};
use tonic::{Request, Response, Status, Streaming};
use tracing::instrument;

use crate::auth::Auth;
use crate::compute::SweepCounters;
use crate::ingest::check_ipc_bounds;
use crate::store::DatasetStore;
use crate::{Error, ServerConfig};

/// Shared by every call: configuration and the dataset store.
#[derive(Debug)]
pub struct State {
    /// The configuration the server started with.
    pub config: ServerConfig,
    /// The datasets and the WMA cache.
    pub store: Arc<DatasetStore>,
    /// Running / finished sweep counts.
    pub sweeps: Arc<SweepCounters>,
    /// Who may call.
    pub auth: Auth,
    /// Turns true when the server starts shutting down; long-lived streams end on it.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
}

impl State {
    /// Resolves once shutdown has begun (never, if the server outlives the sender).
    pub fn shutting_down(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut rx = self.shutdown.clone();
        async move {
            let _ = rx.wait_for(|&down| down).await;
        }
    }
}

/// The sweepflight Flight service.
#[derive(Debug, Clone)]
pub struct SweepFlightService {
    state: Arc<State>,
}

impl SweepFlightService {
    /// A service over `store` that never shuts down its long-lived streams.
    pub fn new(config: ServerConfig, store: Arc<DatasetStore>) -> Self {
        Self::with_shutdown(config, store, tokio::sync::watch::channel(false).1)
    }

    /// A service over `store` whose long-lived streams (DoExchange sessions) end when
    /// `shutdown` turns true.
    pub fn with_shutdown(
        config: ServerConfig,
        store: Arc<DatasetStore>,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> Self {
        Self {
            state: Arc::new(State {
                auth: config.token.as_deref().map_or_else(Auth::open, Auth::token),
                config,
                store,
                sweeps: Arc::default(),
                shutdown,
            }),
        }
    }

    /// The shared state (for embedding and tests).
    pub fn state(&self) -> &Arc<State> {
        &self.state
    }
}

type Stream_<T> = BoxStream<'static, Result<T, Status>>;

/// A client's stream of Flight data, as arrow-flight's decoder wants it.
type Inbound = BoxStream<'static, Result<FlightData, FlightError>>;

/// Adapts tonic's inbound stream and bounds-checks each message before any decoder sees it.
///
/// tonic reports an inbound message over `--max-message-bytes` as OUT_OF_RANGE; the gRPC
/// convention (and our contract) for a size limit is RESOURCE_EXHAUSTED.
fn inbound(s: Streaming<FlightData>) -> Inbound {
    s.map_err(|status| {
        let too_large =
            status.code() == tonic::Code::OutOfRange && status.message().contains("too large");
        let status = if too_large {
            Status::resource_exhausted(format!("{} (--max-message-bytes)", status.message()))
        } else {
            status
        };
        FlightError::Tonic(Box::new(status))
    })
    .and_then(|msg| futures::future::ready(check_ipc_bounds(&msg).map(|()| msg)))
    .boxed()
}

/// Takes the descriptor off the first message of an upload. The returned stream starts with
/// that message again only if it also carries data: pyarrow's DoPut sends descriptor and schema
/// together, its DoExchange sends the descriptor alone.
async fn split_descriptor(
    mut s: Inbound,
    verb: &str,
) -> crate::Result<(Option<FlightDescriptor>, Inbound)> {
    let mut first = s.next().await.ok_or_else(|| {
        Error::invalid(format!("empty {verb} stream: expected a descriptor first"))
    })??;
    let descriptor = first.flight_descriptor.take();
    if first.data_header.is_empty() && first.data_body.is_empty() && first.app_metadata.is_empty() {
        return Ok((descriptor, s));
    }
    Ok((
        descriptor,
        futures::stream::iter([Ok(first)]).chain(s).boxed(),
    ))
}

/// Boxes a stream of handler results, converting errors at the one conversion point.
fn boxed<T: Send + 'static>(
    s: impl Stream<Item = Result<T, Error>> + Send + 'static,
) -> Stream_<T> {
    s.map_err(Status::from).boxed()
}

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
        let bearer = self.state.auth.handshake(request.metadata())?;
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
        request: Request<Criteria>,
    ) -> Result<Response<Self::ListFlightsStream>, Status> {
        self.state.auth.check(request.metadata())?;
        let infos = catalog::list(&self.state).map_err(Status::from)?;
        Ok(Response::new(
            futures::stream::iter(infos.into_iter().map(Ok)).boxed(),
        ))
    }

    #[instrument(level = "debug", skip_all, fields(path = ?request.get_ref().path))]
    async fn get_flight_info(
        &self,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.state.auth.check(request.metadata())?;
        Ok(Response::new(catalog::info(
            &self.state,
            request.get_ref(),
        )?))
    }

    async fn poll_flight_info(
        &self,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<PollInfo>, Status> {
        self.state.auth.check(request.metadata())?;
        Err(Error::Unimplemented("PollFlightInfo").into())
    }

    #[instrument(level = "debug", skip_all, fields(path = ?request.get_ref().path))]
    async fn get_schema(
        &self,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<SchemaResult>, Status> {
        self.state.auth.check(request.metadata())?;
        Ok(Response::new(catalog::schema(
            &self.state,
            request.get_ref(),
        )?))
    }

    #[instrument(level = "debug", skip_all)]
    async fn do_get(
        &self,
        request: Request<Ticket>,
    ) -> Result<Response<Self::DoGetStream>, Status> {
        self.state.auth.check(request.metadata())?;
        let stream = catalog::rows(&self.state, &request.get_ref().ticket)?;
        Ok(Response::new(boxed(stream)))
    }

    #[instrument(level = "debug", skip_all)]
    async fn do_put(
        &self,
        request: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoPutStream>, Status> {
        self.state.auth.check(request.metadata())?;
        let (descriptor, data) = split_descriptor(inbound(request.into_inner()), "DoPut").await?;
        let result = put::put(&self.state, descriptor.as_ref(), data).await?;
        Ok(Response::new(futures::stream::iter([Ok(result)]).boxed()))
    }

    #[instrument(level = "debug", skip_all)]
    async fn do_exchange(
        &self,
        request: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoExchangeStream>, Status> {
        self.state.auth.check(request.metadata())?;
        let (descriptor, data) =
            split_descriptor(inbound(request.into_inner()), "DoExchange").await?;
        let stream = exchange::exchange(&self.state, descriptor.as_ref(), data).await?;
        Ok(Response::new(boxed(stream)))
    }

    #[instrument(level = "debug", skip_all, fields(action = %request.get_ref().r#type))]
    async fn do_action(
        &self,
        request: Request<Action>,
    ) -> Result<Response<Self::DoActionStream>, Status> {
        self.state.auth.check(request.metadata())?;
        let results = actions::run(&self.state, request.into_inner()).await?;
        Ok(Response::new(
            futures::stream::iter(results.into_iter().map(Ok)).boxed(),
        ))
    }

    #[instrument(level = "debug", skip_all)]
    async fn list_actions(
        &self,
        request: Request<Empty>,
    ) -> Result<Response<Self::ListActionsStream>, Status> {
        self.state.auth.check(request.metadata())?;
        Ok(Response::new(
            futures::stream::iter(actions::list().into_iter().map(Ok)).boxed(),
        ))
    }
}
