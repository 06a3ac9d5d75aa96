//! Accepted connections: counted, capped (`--max-connections`) and closed when silent.
//!
//! File descriptors are finite, so a connection must earn its place:
//! - past `--max-connections` open, a new connection is closed at once (counted in the
//!   metrics) rather than left to queue;
//! - a connection that has not sent the HTTP/2 preface and the header of its first frame within
//!   `--handshake-timeout` is closed (a socket that never speaks, or sends only the preface);
//! - a connection that sends nothing for `--idle-timeout` is closed. Healthy clients are never
//!   that silent: the server pings idle connections more often than that (HTTP/2 keep-alive,
//!   set in [`crate::serve`]) and every HTTP/2 peer answers a ping.
//!
//! [`Guarded`] wraps each accepted stream to do this; a closed connection is a read error, which
//! makes hyper drop it.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};
use tonic::transport::server::Connected;

use crate::ops::metrics::Metrics;

/// The HTTP/2 client preface and one frame header: what a client must have sent to count as
/// having spoken.
const HANDSHAKE_BYTES: u64 = 24 + 9;

/// A byte stream hyper can serve (any accepted socket, wrapped or not).
pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

/// The connection limits, shared by every accepted connection of one server.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    /// Open connections now.
    pub open: Arc<AtomicUsize>,
    /// Most open connections.
    pub max: usize,
    /// Time to send the preface and a frame header.
    pub handshake: Duration,
    /// Longest silence.
    pub idle: Duration,
    /// Where refusals and timeouts are counted.
    pub metrics: Arc<Metrics>,
}

impl Limits {
    /// Takes `stream` into service, or closes it (returns `None`) if too many are open.
    pub(crate) fn admit(&self, stream: Box<dyn Io>) -> Option<Guarded> {
        let open = self.open.fetch_add(1, Ordering::SeqCst);
        if open >= self.max {
            self.open.fetch_sub(1, Ordering::SeqCst);
            self.metrics.connections_refused.inc();
            tracing::warn!(
                max = self.max,
                "connection refused: --max-connections are open"
            );
            return None;
        }
        Some(Guarded {
            inner: stream,
            limits: self.clone(),
            read: 0,
            deadline: Box::pin(tokio::time::sleep(self.handshake)),
        })
    }
}

/// An admitted connection; see the module docs.
pub(crate) struct Guarded {
    inner: Box<dyn Io>,
    limits: Limits,
    /// Bytes read so far (counted up to the handshake size).
    read: u64,
    deadline: Pin<Box<Sleep>>,
}

impl Drop for Guarded {
    fn drop(&mut self) {
        self.limits.open.fetch_sub(1, Ordering::SeqCst);
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let n = (buf.filled().len() - before) as u64;
                if n > 0 {
                    self.read = (self.read + n).min(HANDSHAKE_BYTES);
                    let wait = if self.read < HANDSHAKE_BYTES {
                        self.limits.handshake
                    } else {
                        self.limits.idle
                    };
                    // The handshake deadline is fixed from accept; the idle one restarts.
                    if self.read >= HANDSHAKE_BYTES {
                        self.deadline.as_mut().reset(Instant::now() + wait);
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                // Nothing to read: the deadline's timer wakes this task if it passes first.
                if self.deadline.as_mut().poll(cx).is_ready() {
                    let what = if self.read < HANDSHAKE_BYTES {
                        "handshake"
                    } else {
                        "idle"
                    };
                    self.limits.metrics.connections_timed_out.inc();
                    tracing::debug!(what, "closing a silent connection");
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("{what} timeout"),
                    )));
                }
                Poll::Pending
            }
        }
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl Connected for Guarded {
    type ConnectInfo = ();
    fn connect_info(&self) -> Self::ConnectInfo {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn limits(max: usize) -> Limits {
        Limits {
            open: Arc::default(),
            max,
            handshake: Duration::from_millis(50),
            idle: Duration::from_millis(150),
            metrics: Arc::default(),
        }
    }

    #[tokio::test]
    async fn caps_open_connections() {
        let l = limits(1);
        let (a, _b) = tokio::io::duplex(64);
        let first = l.admit(Box::new(a)).unwrap();
        let (c, _d) = tokio::io::duplex(64);
        assert!(l.admit(Box::new(c)).is_none());
        assert_eq!(l.metrics.connections_refused.get(), 1);
        drop(first);
        let (e, _f) = tokio::io::duplex(64);
        assert!(l.admit(Box::new(e)).is_some());
    }

    #[tokio::test]
    async fn silent_and_preface_only_connections_time_out_talking_ones_do_not() {
        let l = limits(8);
        // Never speaks.
        let (a, _peer_a) = tokio::io::duplex(64);
        let mut g = l.admit(Box::new(a)).unwrap();
        let e = g.read(&mut [0; 8]).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        // Sends the preface only: still inside the handshake, still times out.
        let (b, mut peer_b) = tokio::io::duplex(64);
        let mut g = l.admit(Box::new(b)).unwrap();
        peer_b.write_all(&[0; 24]).await.unwrap();
        let mut buf = [0; 64];
        assert_eq!(g.read(&mut buf).await.unwrap(), 24);
        assert!(g.read(&mut buf).await.is_err());
        // Finishes the handshake and keeps talking more often than the idle timeout.
        let (c, mut peer_c) = tokio::io::duplex(64);
        let mut g = l.admit(Box::new(c)).unwrap();
        peer_c.write_all(&[0; 33]).await.unwrap();
        assert_eq!(g.read(&mut buf).await.unwrap(), 33);
        for _ in 0..4 {
            tokio::time::sleep(Duration::from_millis(60)).await;
            peer_c.write_all(&[1]).await.unwrap();
            assert_eq!(g.read(&mut buf).await.unwrap(), 1);
        }
        // Then goes silent.
        let e = g.read(&mut buf).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(l.metrics.connections_timed_out.get(), 3);
    }
}
