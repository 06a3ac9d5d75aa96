//! Accepted connections that wake the server only when there is something to read.
//!
//! tokio registers every socket for read and write readiness, edge-triggered. The kernel
//! signals write readiness each time the peer consumes bytes we sent, so on a connection that
//! carries request/reply pairs every reply wakes the server a second time, for nothing, as soon
//! as the client has read it. A wake-up is cheap on one core, but an idle core must be woken
//! by an interrupt, and on a VM that is a trip through the hypervisor: on the 2-vCPU machine
//! of docs/benchmarks.md a raw echo costs 36 us with both ends pinned to one CPU and 125 us
//! across two (the floor's placement table). For the params-only calls this service exists
//! for, that is most of the floor.
//!
//! [`ReadWake`] registers the socket for read readiness only and writes to it directly (it is
//! non-blocking). Only when the kernel's send buffer is full does it register a duplicate of
//! the descriptor for write readiness, and it drops that registration as soon as a write goes
//! through, so an idle connection wakes the server for requests and nothing else.
//!
//! Dropping that registration also drops the waker stored in it, and h2 counts on that waker.
//! Its connection task can get `Pending` from one blocked write (say, a PING reply), then finish
//! the same buffered bytes from another call later in the same poll, and still return `Pending`
//! on the strength of the first: tokio's own registration would wake it at the next
//! write-readiness edge, which a busy socket always brings. So whenever the registration goes,
//! [`ReadWake`] wakes the task itself, once; without that, a connection carrying large
//! interleaved echoes stalled with requests unread in its receive queue.

use std::io::{self, IoSlice, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tonic::transport::server::Connected;

/// A connection accepted by a tokio listener that [`ReadWake`] can take over.
pub(crate) trait Accepted: Connected {
    /// The same socket as a std type: non-blocking, no longer registered with tokio.
    type Std: AsRawFd + AsFd + Unpin + Send + Sync + 'static;
    /// Deregisters from tokio and hands over the socket.
    ///
    /// # Errors
    /// If tokio cannot deregister it.
    fn into_std(self) -> io::Result<Self::Std>;
}

impl Accepted for tokio::net::TcpStream {
    type Std = std::net::TcpStream;
    fn into_std(self) -> io::Result<Self::Std> {
        tokio::net::TcpStream::into_std(self)
    }
}

impl Accepted for tokio::net::UnixStream {
    type Std = std::os::unix::net::UnixStream;
    fn into_std(self) -> io::Result<Self::Std> {
        tokio::net::UnixStream::into_std(self)
    }
}

/// A stream socket registered with tokio for read readiness only.
#[derive(Debug)]
pub(crate) struct ReadWake<S: AsRawFd, I> {
    io: AsyncFd<S>,
    /// A duplicate descriptor registered for write readiness, only while a write waits for
    /// room in the send buffer.
    write_wait: Option<AsyncFd<OwnedFd>>,
    info: I,
}

impl<S, I> ReadWake<S, I>
where
    S: AsRawFd + AsFd + Unpin + Send + Sync + 'static,
    for<'a> &'a S: Write,
{
    /// Takes over a freshly accepted connection.
    ///
    /// # Errors
    /// If the socket cannot be moved from tokio's registration to ours.
    pub(crate) fn new<A: Accepted<Std = S, ConnectInfo = I>>(accepted: A) -> io::Result<Self> {
        let info = accepted.connect_info();
        let io = register(accepted.into_std()?, Interest::READABLE)?;
        Ok(Self {
            io,
            write_wait: None,
            info,
        })
    }

    /// Runs `write` until it does not block, waiting for write readiness in between.
    fn poll_write_with(
        &mut self,
        cx: &mut Context<'_>,
        write: impl Fn(&S) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        loop {
            match write(self.io.get_ref()) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => {
                    // Room again: stop hearing about it, but hand the caller the wake-up the
                    // registration owed to any earlier `Pending` (see the module docs).
                    if self.write_wait.take().is_some() {
                        cx.waker().wake_by_ref();
                    }
                    return Poll::Ready(done);
                }
            }
            if self.write_wait.is_none() {
                // Registration reports the current state, so a buffer that drained in the
                // meantime is not missed.
                let dup = self.io.get_ref().as_fd().try_clone_to_owned()?;
                self.write_wait = Some(register(dup, Interest::WRITABLE)?);
            }
            let waiter = self.write_wait.as_ref().expect("registered just above");
            let mut guard = ready!(waiter.poll_write_ready(cx))?;
            // Readiness is consumed here; if the next write blocks again, the edge that ends
            // it is still to come and will wake the task.
            guard.clear_ready();
        }
    }
}

/// Registers a descriptor that `inner` owns with the current runtime for `interest`.
fn register<T: AsFd + AsRawFd>(inner: T, interest: Interest) -> io::Result<AsyncFd<T>> {
    // SAFETY: `T: AsFd` here are owning types (std sockets, `OwnedFd`): their descriptor stays
    // open and the same until the `AsyncFd`, which owns them, is dropped.
    Ok(unsafe { AsyncFd::register_with_interest(inner, interest) }?)
}

impl<S, I> AsyncRead for ReadWake<S, I>
where
    S: AsRawFd + Unpin,
    I: Unpin,
{
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.io.poll_read_ready(cx))?;
            let fd = guard.get_inner().as_raw_fd();
            // SAFETY: `unfilled_mut` is writable memory of the given length; read(2) writes at
            // most that many bytes into it and initialises exactly the count it returns.
            let read = guard.try_io(|_| {
                let dst = unsafe { buf.unfilled_mut() };
                let n = unsafe { libc::read(fd, dst.as_mut_ptr().cast(), dst.len()) };
                usize::try_from(n).map_err(|_| io::Error::last_os_error())
            });
            match read {
                Ok(Ok(n)) => {
                    // SAFETY: the read above initialised these `n` bytes.
                    unsafe { buf.assume_init(n) };
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                // Would block: readiness was cleared; wait for the next edge.
                Err(_) => {}
            }
        }
    }
}

impl<S, I> AsyncWrite for ReadWake<S, I>
where
    S: AsRawFd + AsFd + Unpin + Send + Sync + 'static,
    for<'a> &'a S: Write,
    I: Unpin,
{
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_with(cx, |mut s| s.write(data))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut()
            .poll_write_with(cx, |mut s| s.write_vectored(bufs))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Writes go straight to the socket; nothing is buffered here.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // SAFETY: shutdown(2) on a descriptor this value owns; it touches no memory.
        let rc = unsafe { libc::shutdown(self.io.get_ref().as_raw_fd(), libc::SHUT_WR) };
        Poll::Ready(if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        })
    }
}

impl<S, I> Connected for ReadWake<S, I>
where
    S: AsRawFd,
    I: Clone + Send + Sync + 'static,
{
    type ConnectInfo = I;
    fn connect_info(&self) -> I {
        self.info.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures::task::{ArcWake, waker};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use tonic::transport::server::TcpConnectInfo;

    async fn pair() -> (
        ReadWake<std::net::TcpStream, TcpConnectInfo>,
        tokio::net::TcpStream,
    ) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, accepted) = tokio::join!(tokio::net::TcpStream::connect(addr), async {
            listener.accept().await.unwrap().0
        });
        (ReadWake::new(accepted).unwrap(), client.unwrap())
    }

    #[tokio::test]
    async fn echoes_through_a_full_send_buffer_and_shuts_down() {
        let (mut server, mut client) = pair().await;
        // Far more than the kernel buffers, written before the peer reads any of it: the
        // writer must wait for room (the write-readiness registration) and then finish.
        let sent: Vec<u8> = (0..32 << 20).map(|i: u32| (i % 251) as u8).collect();
        let expected = sent.clone();
        let writer = tokio::spawn(async move {
            server.write_all(&sent).await.unwrap();
            assert!(
                server.write_wait.is_none(),
                "registration dropped once written"
            );
            server.shutdown().await.unwrap();
            server
        });
        let mut got = Vec::new();
        client.read_to_end(&mut got).await.unwrap();
        assert!(got == expected, "bytes arrive in order and complete");
        let mut server = writer.await.unwrap();
        client.write_all(b"ping").await.unwrap();
        drop(client);
        let mut back = Vec::new();
        server.read_to_end(&mut back).await.unwrap();
        assert_eq!(back, b"ping");
        assert!(server.connect_info().local_addr().is_some());
    }

    /// Counts how often the task it stands for was woken.
    #[derive(Default)]
    struct Wakes(AtomicUsize);

    impl ArcWake for Wakes {
        fn wake_by_ref(this: &Arc<Self>) {
            this.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn a_write_that_goes_through_after_pending_wakes_the_task() {
        let (server, mut client) = std::os::unix::net::UnixStream::pair().unwrap();
        server.set_nonblocking(true).unwrap();
        client.set_nonblocking(true).unwrap();
        let mut conn = ReadWake::new(tokio::net::UnixStream::from_std(server).unwrap()).unwrap();
        let wakes = Arc::new(Wakes::default());
        let task = waker(Arc::clone(&wakes));
        let mut cx = Context::from_waker(&task);

        // Fill the send buffer until a write has to wait for room.
        let chunk = vec![7u8; 1 << 16];
        let mut sent = 0;
        while let Poll::Ready(n) = Pin::new(&mut conn).poll_write(&mut cx, &chunk) {
            sent += n.unwrap();
        }
        assert!(
            conn.write_wait.is_some(),
            "a blocked write waits on a registration"
        );

        // The peer drains it all. This test never yields, so the runtime cannot deliver the
        // write-readiness edge: the same situation as h2 finishing a blocked write later in
        // the same poll.
        let mut got = 0;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            match client.read(&mut buf) {
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(got, sent);
        assert_eq!(wakes.0.load(Ordering::SeqCst), 0);

        let Poll::Ready(Ok(1)) = Pin::new(&mut conn).poll_write(&mut cx, b"x") else {
            panic!("room in the buffer again, the write goes through")
        };
        assert!(
            conn.write_wait.is_none(),
            "registration dropped once written"
        );
        assert_eq!(
            wakes.0.load(Ordering::SeqCst),
            1,
            "the task that got Pending is woken in place of the dropped registration"
        );
    }
}
