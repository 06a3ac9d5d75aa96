//! Token authentication: `--token T` makes every call but Handshake require the header
//! `authorization: Bearer T`; Handshake trades HTTP Basic credentials whose password is `T`
//! for that bearer value (in the response header and payload), which is what pyarrow's
//! `authenticate_basic_token` and arrow-rs `FlightClient::handshake` expect.
//!
//! The check is one tower layer ([`AuthLayer`]) in front of the whole Flight service: it reads
//! the HTTP request's headers and answers UNAUTHENTICATED before any handler runs, so a refused
//! request costs no body read (the body is dropped unread, and HTTP/2 flow control stops the
//! client after its first window) and a new handler cannot forget the check. The gRPC health
//! service is open too (a probe has no token; it learns only up or down). Only Handshake
//! passes, by path; its handler checks the Basic credentials itself.
//!
//! Comparisons are constant-time in the secret's contents (`subtle`), so response timing does
//! not reveal how much of a guess was right.

use std::sync::Arc;
use std::task::{Context, Poll};

use base64::Engine;
use futures::future::{Either, Ready, ready};
use subtle::ConstantTimeEq;
use tonic::body::Body;
use tonic::codegen::http;
use tonic::metadata::MetadataMap;

use crate::ops::metrics::Metrics;
use crate::{Error, Result};

/// The one path that passes the layer without a bearer token.
pub(crate) const HANDSHAKE_PATH: &str = "/arrow.flight.protocol.FlightService/Handshake";

/// The gRPC health service's path prefix: probes (Kubernetes, load balancers) carry no token,
/// and the answer says only whether the server is up.
pub(crate) const HEALTH_PREFIX: &str = "/grpc.health.v1.Health/";

/// The server's secret, if one is configured.
#[derive(Clone, Default)]
pub(crate) struct Auth {
    bearer: Option<String>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = if self.bearer.is_some() {
            "token"
        } else {
            "open"
        };
        f.debug_tuple("Auth").field(&state).finish()
    }
}

impl Auth {
    /// No authentication: every call is allowed.
    pub(crate) fn open() -> Self {
        Self::default()
    }

    /// Calls must present `token`.
    pub(crate) fn token(token: &str) -> Self {
        Self {
            bearer: Some(format!("Bearer {token}")),
        }
    }

    /// Checks a call's `authorization` header value.
    ///
    /// # Errors
    /// [`Error::Unauthenticated`] when a token is configured and the header does not carry it.
    pub(crate) fn check(&self, authorization: Option<&[u8]>) -> Result<()> {
        let Some(bearer) = &self.bearer else {
            return Ok(());
        };
        let presented = authorization.unwrap_or_default();
        if bool::from(presented.ct_eq(bearer.as_bytes())) {
            Ok(())
        } else if presented.is_empty() {
            Err(Error::Unauthenticated(
                "this server requires `authorization: Bearer <token>`".into(),
            ))
        } else {
            Err(Error::Unauthenticated("invalid token".into()))
        }
    }

    /// The Handshake: Basic credentials (any user, the token as password) or the bearer value
    /// itself, in exchange for the bearer value. `None` when no token is configured.
    ///
    /// # Errors
    /// [`Error::Unauthenticated`] for missing or wrong credentials.
    pub(crate) fn handshake(&self, metadata: &MetadataMap) -> Result<Option<String>> {
        let Some(bearer) = &self.bearer else {
            return Ok(None);
        };
        let header = metadata
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let password_ok = header
            .strip_prefix("Basic ")
            .and_then(|b64| {
                base64::engine::general_purpose::STANDARD
                    .decode(b64.trim())
                    .ok()
            })
            .and_then(|raw| {
                let (_, password) = raw.split_at(raw.iter().position(|&b| b == b':')? + 1);
                let token = &bearer.as_bytes()["Bearer ".len()..];
                Some(bool::from(password.ct_eq(token)))
            })
            .unwrap_or(false);
        if password_ok || bool::from(header.as_bytes().ct_eq(bearer.as_bytes())) {
            Ok(Some(bearer.clone()))
        } else {
            Err(Error::Unauthenticated(
                "handshake needs HTTP Basic credentials whose password is the server's token"
                    .into(),
            ))
        }
    }
}

/// The tower layer that puts [`Auth`] in front of a service.
#[derive(Debug, Clone)]
pub(crate) struct AuthLayer {
    auth: Arc<Auth>,
    metrics: Arc<Metrics>,
}

impl AuthLayer {
    /// Checks every request but Handshake against `auth`; refusals are counted in `metrics`.
    pub(crate) fn new(auth: Arc<Auth>, metrics: Arc<Metrics>) -> Self {
        Self { auth, metrics }
    }
}

impl<S> tower::Layer<S> for AuthLayer {
    type Service = AuthService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AuthService {
            inner,
            layer: self.clone(),
        }
    }
}

/// [`AuthLayer`]'s service.
#[derive(Debug, Clone)]
pub(crate) struct AuthService<S> {
    inner: S,
    layer: AuthLayer,
}

impl<S> tower::Service<http::Request<Body>> for AuthService<S>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<Body>>,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = Either<S::Future, Ready<std::result::Result<Self::Response, Self::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<std::result::Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let presented = request
            .headers()
            .get(http::header::AUTHORIZATION)
            .map(http::HeaderValue::as_bytes);
        let path = request.uri().path();
        if path == HANDSHAKE_PATH || path.starts_with(HEALTH_PREFIX) {
            return Either::Left(self.inner.call(request));
        }
        match self.layer.auth.check(presented) {
            Ok(()) => Either::Left(self.inner.call(request)),
            Err(e) => {
                // The request (and its body, unread) is dropped here.
                self.layer.metrics.error(e.code());
                Either::Right(ready(Ok(tonic::Status::from(e).into_http())))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> MetadataMap {
        let mut m = MetadataMap::new();
        m.insert("authorization", value.parse().unwrap());
        m
    }

    #[test]
    fn bearer_and_basic() {
        let auth = Auth::token("s3cret");
        assert!(auth.check(Some(b"Bearer s3cret")).is_ok());
        assert!(auth.check(Some(b"Bearer s3cre")).is_err());
        assert!(auth.check(None).is_err());
        let basic = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("user:s3cret")
        );
        assert_eq!(
            auth.handshake(&headers(&basic)).unwrap().as_deref(),
            Some("Bearer s3cret")
        );
        let wrong = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("user:nope")
        );
        assert!(auth.handshake(&headers(&wrong)).is_err());
        assert!(auth.handshake(&headers("Basic !!!")).is_err());
        assert!(Auth::open().check(None).is_ok());
        assert_eq!(Auth::open().handshake(&MetadataMap::new()).unwrap(), None);
    }
}
