//! Unix-socket compatibility with gRPC's C core (pyarrow, grpcio, and every binding on it).
//!
//! Over a Unix socket, gRPC core sends the socket path, percent-encoded, as the HTTP/2
//! `:authority` (`/tmp/sf.sock` becomes `tmp%2Fsf.sock`). The h2 server under tonic rejects a
//! `%` in an authority's host and resets the stream with PROTOCOL_ERROR, so a plain
//! `flight.connect("grpc+unix:///tmp/sf.sock")` would fail on every call.
//!
//! [`AuthorityFix`] wraps each accepted Unix stream and, in the inbound HEADERS and
//! CONTINUATION frames only, rewrites each `%` of a plain-literal `:authority` value to `-`.
//! The rewrite keeps every length: the HPACK dynamic table entry the client's encoder recorded
//! has the same size on our side, so later indexed references stay in step. Everything else
//! (the preface, DATA frames, what we send) passes through untouched, DATA without a copy.
//! The authority is not used for routing here, so its spelling does not matter to the service.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

/// The HTTP/2 client connection preface, passed through unchanged.
const PREFACE_LEN: usize = 24;
const FRAME_HEADER_LEN: usize = 9;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const FLAG_PADDED: u8 = 0x8;
const FLAG_PRIORITY: u8 = 0x20;
/// HPACK static table index of `:authority`.
const AUTHORITY_INDEX: u64 = 1;

/// Where the inbound parser is in the byte stream.
#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// Inside the connection preface, this many bytes to go.
    Preface(usize),
    /// At a frame boundary.
    FrameHeader,
    /// Inside a non-header frame's payload, this many bytes to go.
    Passthrough(usize),
}

/// A Unix stream whose inbound `:authority` values are made acceptable to h2.
#[derive(Debug)]
pub(crate) struct AuthorityFix<S> {
    inner: S,
    state: State,
    /// Raw bytes read but not yet parsed.
    pending: BytesMut,
    /// Parsed bytes ready for the reader.
    ready: BytesMut,
}

impl<S> AuthorityFix<S> {
    /// Wraps a freshly accepted connection.
    pub(crate) fn new(inner: S) -> Self {
        Self {
            inner,
            state: State::Preface(PREFACE_LEN),
            pending: BytesMut::new(),
            ready: BytesMut::new(),
        }
    }

    /// Moves as much of `pending` to `ready` as can be parsed now.
    fn process(&mut self) {
        loop {
            match self.state {
                State::Preface(n) | State::Passthrough(n) if n > 0 => {
                    let take = n.min(self.pending.len());
                    if take == 0 {
                        return;
                    }
                    self.ready.extend_from_slice(&self.pending.split_to(take));
                    self.state = match self.state {
                        State::Preface(_) => State::Preface(n - take),
                        _ => State::Passthrough(n - take),
                    };
                }
                State::Preface(_) | State::Passthrough(_) => self.state = State::FrameHeader,
                State::FrameHeader => {
                    if self.pending.len() < FRAME_HEADER_LEN {
                        return;
                    }
                    let len = usize::from(self.pending[0]) << 16
                        | usize::from(self.pending[1]) << 8
                        | usize::from(self.pending[2]);
                    let kind = self.pending[3];
                    if kind == HEADERS || kind == CONTINUATION {
                        if self.pending.len() < FRAME_HEADER_LEN + len {
                            return;
                        }
                        let mut frame = self.pending.split_to(FRAME_HEADER_LEN + len);
                        fix_header_frame(&mut frame);
                        self.ready.extend_from_slice(&frame);
                    } else {
                        self.ready
                            .extend_from_slice(&self.pending.split_to(FRAME_HEADER_LEN));
                        self.state = State::Passthrough(len);
                    }
                }
            }
        }
    }
}

/// Rewrites `%` in plain-literal `:authority` values of one HEADERS or CONTINUATION frame.
fn fix_header_frame(frame: &mut [u8]) {
    let (head, payload) = frame.split_at_mut(FRAME_HEADER_LEN);
    let (kind, flags) = (head[3], head[4]);
    let mut start = 0;
    let mut end = payload.len();
    if kind == HEADERS {
        if flags & FLAG_PADDED != 0 {
            let Some(&pad) = payload.first() else { return };
            start += 1;
            end = end.saturating_sub(usize::from(pad));
        }
        if flags & FLAG_PRIORITY != 0 {
            start += 5;
        }
    }
    if start < end {
        fix_header_block(&mut payload[start..end]);
    }
}

/// Walks an HPACK header block (RFC 7541 section 6). Stops quietly at anything it cannot
/// follow (a representation cut by a frame boundary, an oversized integer): the block is then
/// left as it is, which is no worse than not rewriting at all.
fn fix_header_block(block: &mut [u8]) {
    let mut pos = 0;
    while pos < block.len() {
        let b = block[pos];
        let index = if b & 0x80 != 0 {
            // Indexed field: no literal to look at.
            match integer(block, &mut pos, 7) {
                Some(_) => continue,
                None => return,
            }
        } else if b & 0xC0 == 0x40 {
            integer(block, &mut pos, 6)
        } else if b & 0xE0 == 0x20 {
            // Dynamic table size update.
            match integer(block, &mut pos, 5) {
                Some(_) => continue,
                None => return,
            }
        } else {
            integer(block, &mut pos, 4)
        };
        let Some(index) = index else { return };
        let is_authority = if index == 0 {
            match string(block, &mut pos) {
                Some((false, range)) => &block[range] == b":authority",
                Some((true, _)) => false,
                None => return,
            }
        } else {
            index == AUTHORITY_INDEX
        };
        match string(block, &mut pos) {
            Some((false, range)) if is_authority => {
                for byte in &mut block[range] {
                    if *byte == b'%' {
                        *byte = b'-';
                    }
                }
            }
            Some(_) => {}
            None => return,
        }
    }
}

/// An HPACK integer with an `n`-bit prefix at `block[*pos]`; advances `pos` past it.
fn integer(block: &[u8], pos: &mut usize, n: u32) -> Option<u64> {
    let mask = (1u64 << n) - 1;
    let mut value = u64::from(*block.get(*pos)?) & mask;
    *pos += 1;
    if value < mask {
        return Some(value);
    }
    let mut shift = 0;
    loop {
        let b = *block.get(*pos)?;
        *pos += 1;
        value = value.checked_add(u64::from(b & 0x7f).checked_shl(shift)?)?;
        shift += 7;
        if b & 0x80 == 0 || shift > 56 {
            return (b & 0x80 == 0).then_some(value);
        }
    }
}

/// An HPACK string literal at `block[*pos]`: (Huffman-coded?, byte range); advances `pos`.
fn string(block: &[u8], pos: &mut usize) -> Option<(bool, std::ops::Range<usize>)> {
    let huffman = block.get(*pos)? & 0x80 != 0;
    let len = usize::try_from(integer(block, pos, 7)?).ok()?;
    let range = *pos..pos.checked_add(len)?;
    if range.end > block.len() {
        return None;
    }
    *pos = range.end;
    Some((huffman, range))
}

impl<S: AsyncRead + Unpin> AsyncRead for AuthorityFix<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if !this.ready.is_empty() {
                let n = this.ready.len().min(buf.remaining());
                buf.put_slice(&this.ready[..n]);
                this.ready.advance(n);
                return Poll::Ready(Ok(()));
            }
            // Bulk DATA: read straight into the caller's buffer, no copy.
            if let State::Passthrough(n) = this.state
                && n > 0
                && this.pending.is_empty()
            {
                let mut limited = buf.take(n);
                ready!(Pin::new(&mut this.inner).poll_read(cx, &mut limited))?;
                let got = limited.filled().len();
                // SAFETY: `take` lends out `buf`'s unfilled part; the inner read initialised
                // the first `got` bytes of it.
                unsafe { buf.assume_init(got) };
                buf.advance(got);
                this.state = State::Passthrough(n - got);
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0u8; 16 << 10];
            let mut rb = ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut rb))?;
            if rb.filled().is_empty() {
                // EOF: hand over whatever is left unparsed (a truncated frame) and end.
                this.ready.extend_from_slice(&this.pending.split());
                if this.ready.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                continue;
            }
            this.pending.extend_from_slice(rb.filled());
            this.process();
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for AuthorityFix<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, data)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

impl<S: Connected> Connected for AuthorityFix<S> {
    type ConnectInfo = S::ConnectInfo;
    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// What gRPC core 1.81 sent for a DoAction over a Unix socket (trimmed).
    fn grpc_core_headers() -> Vec<u8> {
        let mut block = Vec::new();
        block.extend_from_slice(b"@\x05:path-/arrow.flight.protocol.FlightService/DoAction");
        block.extend_from_slice(b"@\x0a:authority\x0etmp%2Fcap.sock");
        block.extend_from_slice(b"\x83\x86");
        block.extend_from_slice(b"\x41\x06a%b%cd"); // indexed name :authority, literal value
        block.extend_from_slice(b"@\x02te\x08trailers");
        frame(HEADERS, 0x4, &block)
    }

    fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut f = vec![
            (len >> 16) as u8,
            (len >> 8) as u8,
            len as u8,
            kind,
            flags,
            0,
            0,
            0,
            1,
        ];
        f.extend_from_slice(payload);
        f
    }

    fn connection(headers: &[u8]) -> Vec<u8> {
        let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        bytes.extend(frame(0x4, 0, &[0, 3, 0, 0, 0, 100]));
        bytes.extend_from_slice(headers);
        bytes.extend(frame(0x0, 0x1, b"%%%% data is untouched %%%%"));
        bytes
    }

    fn replace(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
        let at = hay.windows(from.len()).position(|w| w == from).unwrap();
        [&hay[..at], to, &hay[at + from.len()..]].concat()
    }

    async fn through_fix(input: Vec<u8>, piece: usize) -> Vec<u8> {
        let (mut client, server) = tokio::io::duplex(64);
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for c in input.chunks(piece) {
                client.write_all(c).await.unwrap();
            }
        });
        let mut out = Vec::new();
        AuthorityFix::new(server)
            .read_to_end(&mut out)
            .await
            .unwrap();
        writer.await.unwrap();
        out
    }

    #[tokio::test]
    async fn rewrites_only_authority_values_in_header_frames() {
        let input = connection(&grpc_core_headers());
        let want = replace(
            &replace(&input, b"tmp%2Fcap.sock", b"tmp-2Fcap.sock"),
            b"a%b%cd",
            b"a-b-cd",
        );
        assert_ne!(input, want);
        for piece in [1, 3, 7, 64, 4096] {
            assert_eq!(
                through_fix(input.clone(), piece).await,
                want,
                "piece {piece}"
            );
        }
    }

    #[tokio::test]
    async fn padded_and_prioritised_headers_and_huffman_values() {
        let mut payload = vec![2u8]; // pad length
        payload.extend_from_slice(&[0, 0, 0, 0, 16]); // priority
        payload.extend_from_slice(b"\x41\x83%%%"); // Huffman-coded value: left alone
        payload.extend_from_slice(b"\x01\x03x%y"); // without indexing, name index 1
        payload.extend_from_slice(&[0, 0]); // padding
        let input = connection(&frame(HEADERS, 0x4 | FLAG_PADDED | FLAG_PRIORITY, &payload));
        let out = through_fix(input.clone(), 5).await;
        let s = String::from_utf8_lossy(&out);
        assert!(s.contains("\u{1}\u{3}x-y"), "{s:?}");
        assert!(s.contains("%%%%"), "DATA untouched");
        assert_eq!(out.len(), input.len());
    }

    #[test]
    fn malformed_blocks_are_left_alone() {
        for mut block in [
            vec![0x40, 0x85, b'a'],
            vec![0x7f],
            vec![0x41],
            b"\x41\x7f\xff\xff\xff\xff\xff\xff\xff\xff\xff".to_vec(),
        ] {
            let before = block.clone();
            fix_header_block(&mut block);
            assert_eq!(block, before);
        }
    }
}
