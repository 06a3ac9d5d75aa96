//! Turning a `grpc://`, `grpc+tls://` or `grpc+unix://` address into a tonic channel.

use std::path::PathBuf;

use hyper_util::rt::TokioIo;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Uri};

use crate::{Error, Result};

/// How to reach and authenticate to the server, beyond its address.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    /// Sent as `authorization: Bearer TOKEN` on every call.
    pub token: Option<String>,
    /// PEM of the certificate authority to trust for `grpc+tls://` (default: the system's
    /// web PKI roots are not bundled, so give the CA of the server's certificate).
    pub tls_ca_pem: Option<Vec<u8>>,
    /// Largest message accepted from the server, in bytes (default 64 MiB).
    pub max_message_bytes: Option<usize>,
}

pub(crate) async fn channel(uri: &str, options: &ConnectOptions) -> Result<Channel> {
    let bad = |reason: &str| Error::BadUri {
        uri: uri.to_owned(),
        reason: reason.to_owned(),
    };
    let connect_err = |source| Error::Connect {
        uri: uri.to_owned(),
        source,
    };
    if let Some(path) = uri.strip_prefix("grpc+unix://") {
        if path.is_empty() {
            return Err(bad(
                "grpc+unix:// needs a socket path, e.g. grpc+unix:///tmp/sf.sock",
            ));
        }
        let path = PathBuf::from(path);
        // The authority of a Unix-socket channel is never resolved; `localhost` is what h2
        // servers accept.
        let endpoint = Endpoint::try_from("http://localhost").map_err(connect_err)?;
        return endpoint
            .connect_with_connector(tower::service_fn(move |_: Uri| {
                let path = path.clone();
                async move {
                    Ok::<_, std::io::Error>(TokioIo::new(
                        tokio::net::UnixStream::connect(path).await?,
                    ))
                }
            }))
            .await
            .map_err(connect_err);
    }
    let (scheme, rest) = if let Some(rest) = uri.strip_prefix("grpc+tls://") {
        ("https", rest)
    } else if let Some(rest) = uri
        .strip_prefix("grpc://")
        .or_else(|| uri.strip_prefix("grpc+tcp://"))
    {
        ("http", rest)
    } else {
        return Err(bad(
            "expected grpc://HOST:PORT, grpc+tls://HOST:PORT or grpc+unix://PATH",
        ));
    };
    let mut endpoint =
        Endpoint::from_shared(format!("{scheme}://{rest}")).map_err(|e| bad(&e.to_string()))?;
    if scheme == "https" {
        let mut tls = ClientTlsConfig::new();
        if let Some(pem) = &options.tls_ca_pem {
            tls = tls.ca_certificate(Certificate::from_pem(pem));
        }
        endpoint = endpoint.tls_config(tls).map_err(connect_err)?;
    }
    endpoint
        .tcp_nodelay(true)
        .connect()
        .await
        .map_err(connect_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn refuses_unknown_schemes() {
        let opts = ConnectOptions::default();
        for uri in ["http://x:1", "127.0.0.1:8815", "grpc+unix://"] {
            assert!(
                matches!(channel(uri, &opts).await, Err(Error::BadUri { .. })),
                "{uri}"
            );
        }
    }
}
