//! Running the service on a TCP or Unix listener until a shutdown future resolves.

use std::future::Future;
use std::sync::Arc;

use arrow_flight::flight_service_server::FlightServiceServer;
use futures::StreamExt;
use tokio_stream::wrappers::{TcpListenerStream, UnixListenerStream};
use tonic::transport::{Identity, Server, ServerTlsConfig};

use crate::ServerConfig;
use crate::conn::ReadWake;
use crate::service::SweepFlightService;
use crate::store::DatasetStore;
use crate::uds::AuthorityFix;

/// Where to accept connections. Bind it before calling [`serve`] so that a caller that binds
/// port 0 knows the real address.
#[derive(Debug)]
pub enum Listener {
    /// TCP (`grpc://HOST:PORT`).
    Tcp(tokio::net::TcpListener),
    /// A Unix domain socket (`grpc+unix://PATH`).
    Unix(tokio::net::UnixListener),
}

/// Serves the Flight service over `store` (see [`DatasetStore::open`]) on `listener` until
/// `shutdown` resolves, then stops accepting, lets in-flight calls finish and returns.
///
/// # Errors
/// If the transport fails.
pub async fn serve(
    listener: Listener,
    config: ServerConfig,
    store: Arc<DatasetStore>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error> {
    // Shutdown flows: the caller's future resolves -> the watch turns true -> open sessions
    // end, and tonic stops accepting and waits for the calls in flight.
    let (down_tx, down_rx) = tokio::sync::watch::channel(false);
    let shutdown = async move {
        shutdown.await;
        let _ = down_tx.send(true);
    };
    let service = SweepFlightService::with_shutdown(config.clone(), store, down_rx);
    let svc = FlightServiceServer::new(service)
        .max_decoding_message_size(config.max_message_bytes)
        .max_encoding_message_size(config.max_message_bytes);
    let mut builder = Server::builder();
    if let Some(tls) = &config.tls {
        let identity = Identity::from_pem(&tls.cert_pem, &tls.key_pem);
        builder = builder.tls_config(ServerTlsConfig::new().identity(identity))?;
    }
    let router = builder
        // Params-only calls are tiny; the defaults' 64 KiB windows would make big uploads
        // wait on WINDOW_UPDATE round trips.
        .initial_stream_window_size(Some(8 << 20))
        .initial_connection_window_size(Some(16 << 20))
        // Uploads arrive as multi-megabyte messages; 16 KiB frames (the HTTP/2 default) cost
        // a frame header and a parser pass each.
        .max_frame_size(Some(1 << 20))
        .add_service(svc);
    match listener {
        Listener::Tcp(l) => {
            let incoming = TcpListenerStream::new(l).map(|conn| {
                conn.and_then(|s| {
                    // Small request/response pairs must not wait for Nagle's delayed ACK dance.
                    let _ = s.set_nodelay(true);
                    ReadWake::new(s)
                })
            });
            router
                .serve_with_incoming_shutdown(incoming, shutdown)
                .await
        }
        Listener::Unix(l) => {
            let incoming = UnixListenerStream::new(l)
                .map(|conn| conn.and_then(ReadWake::new).map(AuthorityFix::new));
            router
                .serve_with_incoming_shutdown(incoming, shutdown)
                .await
        }
    }
}
