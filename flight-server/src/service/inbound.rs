//! The guard in front of every client stream (DoPut, DoExchange): each message's size and IPC
//! bounds are checked before any decoder sees it, and the first message's descriptor is taken
//! off. Uploads and exchanges read only what passed here.

use arrow_flight::error::FlightError;
use arrow_flight::{FlightData, FlightDescriptor};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use tonic::{Status, Streaming};

use crate::Error;

/// A client's stream of Flight data, as arrow-flight's decoder wants it.
pub(super) type Inbound = BoxStream<'static, Result<FlightData, FlightError>>;

/// Adapts tonic's inbound stream and bounds-checks each message before any decoder sees it.
///
/// tonic reports an inbound message over `--max-message-bytes` as OUT_OF_RANGE; the gRPC
/// convention (and our contract) for a size limit is RESOURCE_EXHAUSTED.
pub(super) fn inbound(s: Streaming<FlightData>) -> Inbound {
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
pub(super) async fn split_descriptor(
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

/// Checks that an inbound IPC message's body holds every buffer its header points at.
///
/// arrow-ipc's decoder trusts those offsets and panics on a body shorter than its header
/// claims (a truncated or hostile message), so every inbound message passes here first.
///
/// # Errors
/// [`FlightError::DecodeError`] naming what is out of bounds.
pub(crate) fn check_ipc_bounds(msg: &FlightData) -> std::result::Result<(), FlightError> {
    if msg.data_header.is_empty() {
        return Ok(());
    }
    let bad = |what: String| FlightError::DecodeError(format!("malformed IPC message: {what}"));
    let message = arrow_ipc::root_as_message(&msg.data_header).map_err(|e| bad(e.to_string()))?;
    let batch = match message.header_type() {
        arrow_ipc::MessageHeader::RecordBatch => message.header_as_record_batch(),
        arrow_ipc::MessageHeader::DictionaryBatch => {
            message.header_as_dictionary_batch().and_then(|d| d.data())
        }
        _ => return Ok(()),
    }
    .ok_or_else(|| bad("header without its record batch".into()))?;
    let body = msg.data_body.len() as i64;
    if !(0..=body).contains(&message.bodyLength()) {
        return Err(bad(format!(
            "the header announces a {}-byte body; {body} bytes arrived",
            message.bodyLength()
        )));
    }
    for (i, b) in batch.buffers().iter().flatten().enumerate() {
        let fits = b.offset() >= 0
            && b.length() >= 0
            && b.offset()
                .checked_add(b.length())
                .is_some_and(|end| end <= body);
        if !fits {
            return Err(bad(format!(
                "buffer {i} spans bytes {}..+{} of a {body}-byte body",
                b.offset(),
                b.length()
            )));
        }
    }
    Ok(())
}
