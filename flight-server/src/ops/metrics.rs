//! Prometheus metrics: one registry per server, filled where things happen (a tower layer
//! counts requests, the error conversion counts codes, the compute path times sweeps, the
//! cache counts hits) and served as text at `/metrics` on `--metrics-listen`.
//!
//! Levels (datasets, bytes, running and queued sweeps, open connections) are read from the
//! server's state at scrape time rather than kept in step on every change.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tonic::body::Body;
use tonic::codegen::http;

/// A gRPC method, by the last part of its path (`DoAction`, `DoPut`, ...).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct MethodLabel {
    method: String,
}

/// A gRPC status code, by name (`NOT_FOUND`, ...).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct CodeLabel {
    code: String,
}

/// Levels read from the server at scrape time.
#[derive(Debug, Default, Clone, Copy)]
pub struct Levels {
    /// Stored datasets.
    pub datasets: i64,
    /// Bytes of Arrow data they hold.
    pub dataset_bytes: i64,
    /// Bytes held by the kernel cache.
    pub cache_bytes: i64,
    /// Sweeps running now.
    pub sweeps_running: i64,
    /// Sweeps waiting for memory.
    pub sweeps_queued: i64,
    /// Sweep memory reserved now.
    pub sweep_reserved_bytes: i64,
    /// Sweep memory a cache fill holds now (besides the sweeps').
    pub cache_fill_reserved_bytes: i64,
    /// Open client connections.
    pub connections: i64,
    /// Jobs waiting for sweep memory.
    pub jobs_queued: i64,
    /// Jobs running.
    pub jobs_running: i64,
    /// Done jobs whose results wait to be fetched (or expire).
    pub jobs_done: i64,
    /// Bytes those results hold.
    pub job_result_bytes: i64,
}

/// Every metric of one server.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<MethodLabel, Counter>,
    errors: Family<CodeLabel, Counter>,
    /// Wall time of each sweep's kernel run.
    pub sweep_seconds: Histogram,
    /// Sweeps that finished with a result.
    pub sweeps_completed: Counter,
    /// Sweeps stopped because their caller went away.
    pub sweeps_cancelled: Counter,
    /// Sweeps refused because the queue was full.
    pub sweeps_refused: Counter,
    /// Kernel arrays found in the cache.
    pub cache_hits: Counter,
    /// Kernel arrays computed because the cache did not hold them.
    pub cache_misses: Counter,
    /// Inputs whose arrays a fill kept, at an idle moment (see `compute::fill`).
    pub cache_fills: Counter,
    /// Bars whose line comparison was made on certified lines (the kernel's O(1) lines).
    pub certified_compared: Counter,
    /// Bars among them decided from the reference's recomputed values (the fallback).
    pub certified_recomputed: Counter,
    /// Connections closed at once because `--max-connections` were open.
    pub connections_refused: Counter,
    /// Connections closed for silence (`--handshake-timeout`, `--idle-timeout`).
    pub connections_timed_out: Counter,
    /// Calls received, all methods (not exported: [`crate::compute::trim`] watches it for quiet).
    pub calls: std::sync::atomic::AtomicU64,
    levels: [Gauge; 12],
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("sweepflight");
        let requests = Family::<MethodLabel, Counter>::default();
        registry.register("requests", "gRPC requests, by method", requests.clone());
        let errors = Family::<CodeLabel, Counter>::default();
        registry.register("errors", "Error answers, by gRPC code", errors.clone());
        let sweep_seconds = Histogram::new(exponential_buckets(0.0001, 2.5, 16));
        registry.register(
            "sweep_duration_seconds",
            "Kernel time of each sweep",
            sweep_seconds.clone(),
        );
        let counter = |registry: &mut Registry, name: &str, help: &str| {
            let c = Counter::default();
            registry.register(name, help, c.clone());
            c
        };
        let sweeps_completed = counter(&mut registry, "sweeps_completed", "Sweeps that finished");
        let sweeps_cancelled = counter(
            &mut registry,
            "sweeps_cancelled",
            "Sweeps stopped because their caller went away",
        );
        let sweeps_refused = counter(
            &mut registry,
            "sweeps_refused",
            "Sweeps refused with RESOURCE_EXHAUSTED because the queue was full",
        );
        let cache_hits = counter(
            &mut registry,
            "cache_hits",
            "Kernel arrays found in the cache",
        );
        let cache_misses = counter(&mut registry, "cache_misses", "Kernel arrays computed");
        let cache_fills = counter(
            &mut registry,
            "cache_fills",
            "Inputs whose arrays were kept at an idle moment",
        );
        let certified_compared = counter(
            &mut registry,
            "certified_compared_bars",
            "Bars whose line comparison was made on certified (running-sum) lines",
        );
        let certified_recomputed = counter(
            &mut registry,
            "certified_recomputed_bars",
            "Certified comparisons the bounds left open, decided from recomputed exact values",
        );
        let connections_refused = counter(
            &mut registry,
            "connections_refused",
            "Connections closed because --max-connections were open",
        );
        let connections_timed_out = counter(
            &mut registry,
            "connections_timed_out",
            "Connections closed for silence (handshake or idle timeout)",
        );
        let levels: [Gauge; 12] = Default::default();
        for (gauge, (name, help)) in levels.iter().zip([
            ("datasets", "Stored datasets"),
            ("dataset_bytes", "Bytes of Arrow data held by all datasets"),
            ("cache_bytes", "Bytes held by the kernel cache"),
            ("sweeps_running", "Sweeps running now"),
            ("sweeps_queued", "Sweeps waiting for memory"),
            ("sweep_reserved_bytes", "Sweep memory reserved now"),
            (
                "cache_fill_reserved_bytes",
                "Sweep memory a cache fill holds now",
            ),
            ("connections", "Open client connections"),
            ("jobs_queued", "Jobs waiting for sweep memory"),
            ("jobs_running", "Jobs running"),
            ("jobs_done", "Done jobs whose results are kept"),
            ("job_result_bytes", "Bytes of kept job results"),
        ]) {
            registry.register(name, help, gauge.clone());
        }
        Self {
            registry,
            requests,
            errors,
            sweep_seconds,
            sweeps_completed,
            sweeps_cancelled,
            sweeps_refused,
            cache_hits,
            cache_misses,
            cache_fills,
            certified_compared,
            certified_recomputed,
            connections_refused,
            connections_timed_out,
            calls: std::sync::atomic::AtomicU64::new(0),
            levels,
        }
    }
}

impl Metrics {
    /// Counts an error answer.
    pub fn error(&self, code: tonic::Code) {
        let code = format!("{code:?}");
        self.errors.get_or_create(&CodeLabel { code }).inc();
    }

    /// Errors answered so far with `code`.
    pub fn errors(&self, code: tonic::Code) -> u64 {
        let code = format!("{code:?}");
        self.errors.get_or_create(&CodeLabel { code }).get()
    }

    /// The text exposition, with `levels` as the gauges' values.
    pub fn render(&self, levels: Levels) -> String {
        let Levels {
            datasets,
            dataset_bytes,
            cache_bytes,
            sweeps_running,
            sweeps_queued,
            sweep_reserved_bytes,
            cache_fill_reserved_bytes,
            connections,
            jobs_queued,
            jobs_running,
            jobs_done,
            job_result_bytes,
        } = levels;
        for (gauge, v) in self.levels.iter().zip([
            datasets,
            dataset_bytes,
            cache_bytes,
            sweeps_running,
            sweeps_queued,
            sweep_reserved_bytes,
            cache_fill_reserved_bytes,
            connections,
            jobs_queued,
            jobs_running,
            jobs_done,
            job_result_bytes,
        ]) {
            gauge.set(v);
        }
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// Counts requests by method: a tower layer in front of the Flight service.
#[derive(Debug, Clone)]
pub(crate) struct MetricsLayer(pub Arc<Metrics>);

impl<S> tower::Layer<S> for MetricsLayer {
    type Service = MetricsService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        MetricsService {
            inner,
            metrics: Arc::clone(&self.0),
        }
    }
}

/// [`MetricsLayer`]'s service.
#[derive(Debug, Clone)]
pub(crate) struct MetricsService<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

impl<S> tower::Service<http::Request<Body>> for MetricsService<S>
where
    S: tower::Service<http::Request<Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let method = request.uri().path().rsplit('/').next().unwrap_or_default();
        self.metrics
            .calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.metrics
            .requests
            .get_or_create(&MethodLabel {
                method: method.to_owned(),
            })
            .inc();
        self.inner.call(request)
    }
}

/// Serves `GET /metrics` (HTTP/1.1) on `listener` until `shutdown` resolves; `render` makes the
/// page.
pub(crate) async fn serve_metrics(
    listener: tokio::net::TcpListener,
    render: Arc<dyn Fn() -> String + Send + Sync>,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "metrics listener");
                    continue;
                }
            },
        };
        let render = Arc::clone(&render);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: http::Request<_>| {
                let render = Arc::clone(&render);
                let reply: BoxFuture<'static, Result<http::Response<Full<Bytes>>, hyper::Error>> =
                    Box::pin(async move {
                        let started = Instant::now();
                        let (status, body) = if req.uri().path() == "/metrics" {
                            (http::StatusCode::OK, render())
                        } else {
                            (http::StatusCode::NOT_FOUND, "try /metrics\n".to_owned())
                        };
                        tracing::debug!(
                            elapsed_us = started.elapsed().as_micros() as u64,
                            "scrape"
                        );
                        Ok(http::Response::builder()
                            .status(status)
                            .header(
                                http::header::CONTENT_TYPE,
                                "text/plain; version=0.0.4; charset=utf-8",
                            )
                            .body(Full::new(Bytes::from(body)))
                            .expect("a valid response"))
                    });
                reply
            });
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(error = %e, "metrics connection");
            }
        });
    }
}

/// Binds the metrics listener.
///
/// # Errors
/// If the address cannot be bound.
pub(crate) async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_levels() {
        let m = Metrics::default();
        m.error(tonic::Code::NotFound);
        m.sweeps_completed.inc();
        let text = m.render(Levels {
            datasets: 3,
            ..Levels::default()
        });
        assert!(
            text.contains("sweepflight_errors_total{code=\"NotFound\"} 1"),
            "{text}"
        );
        assert!(text.contains("sweepflight_datasets 3"), "{text}");
        assert!(
            text.contains("sweepflight_sweeps_completed_total 1"),
            "{text}"
        );
        assert_eq!(m.errors(tonic::Code::NotFound), 1);
    }
}
