//! Running the service: open the store, bind, serve until a shutdown future resolves, then
//! give open calls a grace period.
//!
//! [`Server::bind`] does everything that can fail at start (load the data directory, bind the
//! address) so a caller can print the address only once every dataset is served; [`Server::serve`]
//! then runs until `shutdown` resolves. The binary and the test fixture use the same two calls.
//!
//! Shutdown flows: the caller's future resolves -> the watch turns true -> open `session`
//! streams end after their current request, tonic stops accepting and waits for the calls in
//! flight -> after `shutdown_grace` the server returns anyway (dropping what is still open).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arrow_flight::flight_service_server::FlightServiceServer;
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio_stream::wrappers::{TcpListenerStream, UnixListenerStream};
use tonic::transport::{Identity, ServerTlsConfig};

use crate::datasets::store::DatasetStore;
use crate::ops::auth::{Auth, AuthLayer};
use crate::ops::config::Listen;
use crate::ops::metrics::{Metrics, MetricsLayer};
use crate::service::{State, SweepFlightService};
use crate::sweep::engine::Engine;
use crate::transport::conn::ReadWake;
use crate::transport::net::{Guarded, Io, Limits};
use crate::transport::uds::AuthorityFix;
use crate::{Error, Result, ServerConfig};

/// A bound listener: TCP or a Unix domain socket.
#[derive(Debug)]
enum Listener {
    Tcp(tokio::net::TcpListener),
    /// The socket, its path, and the path's (device, inode) when bound: on the way out the
    /// path is removed only if it is still this socket (another server may have replaced it).
    Unix(tokio::net::UnixListener, std::path::PathBuf, (u64, u64)),
}

/// A bound Unix socket's path and its (device, inode), removed on the way out if still ours.
type UnixSocket = (std::path::PathBuf, (u64, u64));

/// The layers in front of every service: metrics outermost, then auth.
type Layers = tower::layer::util::Stack<
    AuthLayer,
    tower::layer::util::Stack<MetricsLayer, tower::layer::util::Identity>,
>;

/// A path's (device, inode).
fn socket_id(path: &std::path::Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path)?;
    Ok((m.dev(), m.ino()))
}

/// A server that has loaded its datasets and bound its address, ready to [`Server::serve`].
#[derive(Debug)]
pub struct Server {
    config: ServerConfig,
    store: Arc<DatasetStore>,
    listener: Listener,
    metrics_listener: Option<tokio::net::TcpListener>,
    uri: String,
}

impl Server {
    /// Opens the store `config` describes (loading its data directory, off the async runtime)
    /// and binds `config.listen`.
    ///
    /// # Errors
    /// [`Error::Storage`] if the data directory cannot be opened or is in use;
    /// [`Error::Transport`] if an address (the service's, the metrics') cannot be bound.
    pub async fn bind(config: ServerConfig) -> Result<Self> {
        let started = std::time::Instant::now();
        let store = {
            let config = config.clone();
            tokio::task::spawn_blocking(move || DatasetStore::open(&config))
                .await
                .map_err(|e| Error::internal("open the data directory", e))??
        };
        if let Some(dir) = &config.data_dir {
            tracing::info!(
                dir = %dir.display(),
                datasets = store.list().len(),
                bytes = store.total_bytes(),
                elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
                "loaded"
            );
        }
        let (listener, uri) = match &config.listen {
            Listen::Tcp(addr) => {
                let l = tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|e| Error::Transport(format!("bind {addr}: {e}")))?;
                let local = l
                    .local_addr()
                    .map_err(|e| Error::Transport(format!("local address: {e}")))?;
                let scheme = if config.tls.is_some() {
                    "grpc+tls"
                } else {
                    "grpc"
                };
                (Listener::Tcp(l), format!("{scheme}://{local}"))
            }
            Listen::Unix(path) => {
                if config.tls.is_some() {
                    return Err(Error::Transport(
                        "TLS is served over TCP only, not on a Unix socket".into(),
                    ));
                }
                remove_stale_socket(path)?;
                let l = tokio::net::UnixListener::bind(path)
                    .map_err(|e| Error::Transport(format!("bind {}: {e}", path.display())))?;
                let id = socket_id(path)
                    .map_err(|e| Error::Transport(format!("stat {}: {e}", path.display())))?;
                (
                    Listener::Unix(l, path.clone(), id),
                    format!("grpc+unix://{}", path.display()),
                )
            }
        };
        let metrics_listener = match config.metrics_listen {
            Some(addr) => Some(
                crate::ops::metrics::bind(addr)
                    .await
                    .map_err(|e| Error::Transport(format!("bind --metrics-listen {addr}: {e}")))?,
            ),
            None => None,
        };
        Ok(Self {
            config,
            store: Arc::new(store),
            listener,
            metrics_listener,
            uri,
        })
    }

    /// The address of the metrics endpoint (`http://ADDR/metrics`), if serving one.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_listener
            .as_ref()
            .and_then(|l| l.local_addr().ok())
    }

    /// The address clients connect to: `grpc://HOST:PORT` (the port actually bound),
    /// `grpc+tls://HOST:PORT` or `grpc+unix://PATH`.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The TCP address bound, if serving TCP.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        match &self.listener {
            Listener::Tcp(l) => l.local_addr().ok(),
            Listener::Unix(..) => None,
        }
    }

    /// The datasets (loaded by [`Server::bind`]).
    pub fn store(&self) -> &Arc<DatasetStore> {
        &self.store
    }

    /// Serves until `shutdown` resolves, then lets calls in flight finish for up to the
    /// configured grace period and returns. A Unix socket file is removed on the way out.
    ///
    /// The steps: `state` (the engine and what the wire adds), `spawn_background` (idle
    /// trim, metrics endpoint), `router` (tonic, TLS, the layers, the Flight and health
    /// services), `incoming` (accepted connections within the caps), then serving until the
    /// shutdown future and the grace period.
    ///
    /// # Errors
    /// [`Error::Transport`] if the transport fails.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send) -> Result<()> {
        let Self {
            config,
            store,
            listener,
            metrics_listener,
            uri,
        } = self;
        let metrics = Arc::new(Metrics::default());
        let limits = Limits {
            open: Arc::default(),
            max: config.max_connections,
            handshake: config.handshake_timeout,
            idle: config.idle_timeout,
            metrics: Arc::clone(&metrics),
        };
        let (down_tx, down_rx) = tokio::sync::watch::channel(false);
        let state = state(&config, store, &metrics, &limits, down_rx.clone())?;
        tracing::info!(
            %uri,
            threads = state.engine.compute.threads(),
            ?config,
            "serving"
        );
        spawn_background(&state, metrics_listener, down_rx.clone());
        // grpc.health.v1 for the whole server (service name ""): SERVING from here on (every
        // dataset is loaded before `serve`), NOT_SERVING from the shutdown signal, so a load
        // balancer stops sending new calls while the open ones finish.
        let (health, health_service) = tonic_health::server::health_reporter();
        health
            .set_service_status("", tonic_health::ServingStatus::Serving)
            .await;
        let router = router(&state, &config, health_service)?;
        let grace = config.shutdown_grace;
        let mut signalled = down_rx;
        let jobs = Arc::clone(&state.engine.jobs);
        let shutdown = async move {
            shutdown.await;
            tracing::info!("shutdown requested");
            // Jobs live in memory only: a restart forgets them, so their work stops now.
            jobs.cancel_all();
            health
                .set_service_status("", tonic_health::ServingStatus::NotServing)
                .await;
            let _ = down_tx.send(true);
        };
        // Graceful shutdown waits for clients to close their connections; one that never does
        // must not keep the server up, so the grace period starts with the signal.
        let deadline = async move {
            let _ = signalled.wait_for(|&s| s).await;
            tokio::time::sleep(grace).await;
        };
        let (incoming, socket) = incoming(listener, limits, &config);
        let served = tokio::select! {
            r = router.serve_with_incoming_shutdown(incoming, shutdown) => r,
            () = deadline => {
                tracing::warn!(?grace, "calls still open after the grace period; stopping");
                Ok(())
            }
        };
        if let Some((path, id)) = socket
            && socket_id(&path).ok() == Some(id)
        {
            let _ = std::fs::remove_file(path);
        }
        tracing::info!("stopped");
        served.map_err(|e| Error::Transport(e.to_string()))
    }
}

/// What every call shares: the engine (store, compute pool and budget, jobs) built in one
/// place, who may call, the open connections, and the shutdown watch.
fn state(
    config: &ServerConfig,
    store: Arc<DatasetStore>,
    metrics: &Arc<Metrics>,
    limits: &Limits,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> Result<Arc<State>> {
    let engine = Engine::new(config.clone(), store, Arc::clone(metrics))?;
    Ok(Arc::new(State {
        engine: Arc::new(engine),
        auth: Arc::new(config.token.as_deref().map_or_else(Auth::open, Auth::token)),
        connections: Arc::clone(&limits.open),
        shutdown,
    }))
}

/// The tasks that live as long as the server: the idle trim, and the metrics endpoint if one
/// is bound; both end with the shutdown watch.
fn spawn_background(
    state: &Arc<State>,
    metrics_listener: Option<tokio::net::TcpListener>,
    mut down: tokio::sync::watch::Receiver<bool>,
) {
    tokio::spawn(crate::compute::trim::trim_when_idle(
        Arc::clone(&state.engine.compute),
        Arc::clone(&state.engine.metrics),
        state.shutting_down(),
    ));
    if let Some(listener) = metrics_listener {
        let render_state = Arc::clone(state);
        let render = Arc::new(move || render_state.engine.metrics.render(render_state.levels()));
        tokio::spawn(crate::ops::metrics::serve_metrics(
            listener,
            render,
            async move {
                let _ = down.wait_for(|&d| d).await;
            },
        ));
    }
}

/// tonic's router: HTTP/2 settings for bulk uploads and small calls alike, TLS if configured,
/// the metrics and auth layers in front of every service (so a refused call costs no body
/// read), the Flight service and the health service.
fn router(
    state: &Arc<State>,
    config: &ServerConfig,
    health: tonic_health::pb::health_server::HealthServer<
        impl tonic_health::pb::health_server::Health,
    >,
) -> Result<tonic::transport::server::Router<Layers>> {
    let svc = FlightServiceServer::new(SweepFlightService::new(Arc::clone(state)))
        .max_decoding_message_size(config.max_message_bytes)
        .max_encoding_message_size(config.max_message_bytes);
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = &config.tls {
        let identity = Identity::from_pem(&tls.cert_pem, &tls.key_pem);
        builder = builder
            .tls_config(ServerTlsConfig::new().identity(identity))
            .map_err(|e| Error::Transport(format!("TLS: {e}")))?;
    }
    let metrics = Arc::clone(&state.engine.metrics);
    Ok(builder
        // Params-only calls are tiny; the defaults' 64 KiB windows would make big uploads
        // wait on WINDOW_UPDATE round trips.
        .initial_stream_window_size(Some(8 << 20))
        .initial_connection_window_size(Some(16 << 20))
        // Uploads arrive as multi-megabyte messages; 16 KiB frames (the HTTP/2 default) cost
        // a frame header and a parser pass each.
        .max_frame_size(Some(1 << 20))
        // Idle connections are pinged more often than the idle timeout, so a live peer
        // always answers in time (see `transport::net`).
        .http2_keepalive_interval(Some(keepalive_interval(config.idle_timeout)))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
        .layer(MetricsLayer(Arc::clone(&metrics)))
        .layer(AuthLayer::new(Arc::clone(&state.auth), metrics))
        .add_service(svc)
        .add_service(health))
}

/// The listener's accepted connections, tuned (no Nagle; opt-in read wake-ups; the Unix
/// authority fix), past `--max-connections` closed at once (never handed to hyper); and the
/// Unix socket to remove on the way out.
fn incoming(
    listener: Listener,
    limits: Limits,
    config: &ServerConfig,
) -> (
    BoxStream<'static, std::io::Result<Guarded>>,
    Option<UnixSocket>,
) {
    let (read_wake, fix) = (config.read_wake, config.unix_authority_fix);
    let (accepted, socket): (BoxStream<'static, std::io::Result<Box<dyn Io>>>, _) = match listener {
        Listener::Tcp(l) => {
            let conns = TcpListenerStream::new(l).map(move |conn| {
                let s = conn?;
                // Small request/response pairs must not wait for Nagle's delayed-ACK dance.
                let _ = s.set_nodelay(true);
                Ok(if read_wake {
                    Box::new(ReadWake::new(s)?) as Box<dyn Io>
                } else {
                    Box::new(s)
                })
            });
            (conns.boxed(), None)
        }
        Listener::Unix(l, path, id) => {
            let conns = UnixListenerStream::new(l).map(move |conn| {
                let s = conn?;
                let io: Box<dyn Io> = match (read_wake, fix) {
                    (true, true) => Box::new(AuthorityFix::new(ReadWake::new(s)?)),
                    (true, false) => Box::new(ReadWake::new(s)?),
                    (false, true) => Box::new(AuthorityFix::new(s)),
                    (false, false) => Box::new(s),
                };
                Ok(io)
            });
            (conns.boxed(), Some((path, id)))
        }
    };
    let admitted = accepted
        .filter_map(move |conn| {
            let admitted = conn.map(|io| limits.admit(io)).transpose();
            futures::future::ready(admitted)
        })
        .boxed();
    (admitted, socket)
}

fn keepalive_interval(idle: Duration) -> Duration {
    (idle / 3).max(Duration::from_secs(1))
}

/// A socket file left by a previous run would make bind fail; anything else at that path is
/// not ours to delete.
fn remove_stale_socket(path: &std::path::Path) -> Result<()> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => match std::fs::remove_file(path) {
            // Gone meanwhile (its server removed it on the way out): nothing to do.
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Transport(format!(
                "remove stale socket {}: {e}",
                path.display()
            ))),
            _ => Ok(()),
        },
        Ok(_) => Err(Error::Transport(format!(
            "{} exists and is not a socket",
            path.display()
        ))),
        Err(_) => Ok(()),
    }
}

/// Binds and serves `config` until `shutdown` resolves (see [`Server`]).
///
/// # Errors
/// As [`Server::bind`] and [`Server::serve`].
pub async fn serve(config: ServerConfig, shutdown: impl Future<Output = ()> + Send) -> Result<()> {
    Server::bind(config).await?.serve(shutdown).await
}
