//! [`Session`]: the `session` DoExchange extension, many params-only sweeps on one open stream.
//!
//! A `sweep` action is a whole gRPC call (a new HTTP/2 stream, headers, trailers); on an open
//! session a sweep is one message each way, which for tiny sweeps is most of the round trip
//! (docs/benchmarks.md, "The params-only floor"). The contract (docs/protocol.md): the server
//! sends the result schema first, then answers each inbound message, whose `app_metadata` is a
//! `sweep` body, with one record batch carrying that same `app_metadata`; a bad request ends the
//! session with its error status. A session opened for `trades`, `equity` or `walk_forward`
//! answers each message as that action does (a `walk_forward` session's messages are
//! `walk_forward` bodies).

use arrow_flight::decode::{DecodedPayload, FlightDataDecoder};
use arrow_flight::error::FlightError;
use arrow_flight::{FlightClient, FlightData, FlightDescriptor};
use bytes::Bytes;
use futures::StreamExt;
use futures::channel::mpsc;

use arrow_array::RecordBatch;
use sweepflight_protocol::{
    ExchangeCommand, SessionReply, Strategy, SweepRequest, WalkForwardRequest,
};

use crate::types::SweepResult;
use crate::{Error, Result};

/// An open `session` exchange; see [`Client::session`](crate::Client::session).
///
/// Sweeps are answered one at a time, in order. Once a call returns an error the session is
/// over (the server ends it on a bad request, and at shutdown); open a new one to go on. A
/// sweep whose future is dropped after sending (a timeout, say) leaves its reply behind; the
/// next sweep skips it.
#[derive(Debug)]
pub struct Session {
    requests: mpsc::UnboundedSender<Result<FlightData, FlightError>>,
    replies: FlightDataDecoder,
    /// Requests sent whose replies have not been read.
    unanswered: usize,
    /// The action each message is answered as.
    reply: SessionReply,
}

impl Session {
    /// Opens a session (for keyed datasets if `keyed`) answering each message as `reply` on
    /// `flight`, and reads the schema the server sends first.
    pub(crate) async fn open(
        flight: &mut FlightClient,
        keyed: bool,
        strategy: Strategy,
        reply: SessionReply,
    ) -> Result<Self> {
        let (requests, outbound) = mpsc::unbounded();
        // The server reads the descriptor before it answers with headers, so it must be queued
        // before the call is awaited.
        let command = ExchangeCommand::Session {
            keyed,
            strategy,
            reply,
        }
        .encode();
        let open = FlightData::new().with_descriptor(FlightDescriptor::new_cmd(command));
        requests
            .unbounded_send(Ok(open))
            .map_err(|_| Error::Protocol("session request queue closed".into()))?;
        let mut replies = flight.do_exchange(outbound).await?.into_inner();
        match next_payload(&mut replies).await? {
            (DecodedPayload::Schema(_), _) => Ok(Self {
                requests,
                replies,
                unanswered: 0,
                reply,
            }),
            _ => Err(Error::Protocol(
                "a session must start with the result schema".into(),
            )),
        }
    }

    /// Runs one sweep on the session.
    ///
    /// # Errors
    /// [`Error::Status`] with NOT_FOUND or INVALID_ARGUMENT (the session is then over);
    /// [`Error::SessionEnded`] if the server had ended the session (at shutdown, or after an
    /// earlier error).
    pub async fn sweep(&mut self, request: &SweepRequest) -> Result<SweepResult> {
        SweepResult::check(self.call(SessionReply::Sweep, request.encode()).await?)
    }

    /// [`Client::trades`](crate::Client::trades) on a session opened for `trades`.
    ///
    /// # Errors
    /// As [`Session::sweep`]; [`Error::InvalidRequest`] on a session opened for another action.
    pub async fn trades(&mut self, request: &SweepRequest) -> Result<RecordBatch> {
        self.call(SessionReply::Trades, request.encode()).await
    }

    /// [`Client::equity`](crate::Client::equity) on a session opened for `equity`.
    ///
    /// # Errors
    /// As [`Session::trades`].
    pub async fn equity(&mut self, request: &SweepRequest) -> Result<RecordBatch> {
        self.call(SessionReply::Equity, request.encode()).await
    }

    /// [`Client::walk_forward`](crate::Client::walk_forward) on a session opened for
    /// `walk_forward`.
    ///
    /// # Errors
    /// As [`Session::trades`].
    pub async fn walk_forward(&mut self, request: &WalkForwardRequest) -> Result<RecordBatch> {
        self.call(SessionReply::WalkForward, request.encode()).await
    }

    /// One message out (`body`, of a call that `reply` answers), its record batch back.
    async fn call(&mut self, reply: SessionReply, body: Vec<u8>) -> Result<RecordBatch> {
        if reply != self.reply {
            return Err(Error::InvalidRequest(format!(
                "this session answers {}; open one for {}",
                self.reply.name(),
                reply.name()
            )));
        }
        let body = Bytes::from(body);
        let message = FlightData::new().with_app_metadata(body.clone());
        self.requests
            .unbounded_send(Ok(message))
            .map_err(|_| Error::SessionEnded)?;
        self.unanswered += 1;
        // Replies owed to dropped sweeps come first.
        while self.unanswered > 1 {
            next_payload(&mut self.replies).await?;
            self.unanswered -= 1;
        }
        let reply = next_payload(&mut self.replies).await?;
        self.unanswered -= 1;
        match reply {
            (DecodedPayload::RecordBatch(batch), metadata) if metadata == body => Ok(batch),
            (DecodedPayload::RecordBatch(_), _) => Err(Error::Protocol(
                "session reply does not carry its request".into(),
            )),
            _ => Err(Error::Protocol(
                "a session reply must be one record batch".into(),
            )),
        }
    }

    /// Ends the session: says so to the server and waits for it to close its side.
    ///
    /// # Errors
    /// [`Error::Status`] if the server ends the stream with an error.
    pub async fn close(mut self) -> Result<()> {
        self.requests.close_channel();
        while let Some(reply) = self.replies.next().await {
            reply?;
        }
        Ok(())
    }
}

/// The next decoded message and its app_metadata; the end of the stream is
/// [`Error::SessionEnded`].
async fn next_payload(replies: &mut FlightDataDecoder) -> Result<(DecodedPayload, Bytes)> {
    let decoded = replies.next().await.ok_or(Error::SessionEnded)??;
    Ok((decoded.payload, decoded.inner.app_metadata))
}
