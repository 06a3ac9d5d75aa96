//! DoGet's encoding: a stored dataset as Flight data, its buffers sent as they are stored.
//!
//! arrow-flight's encoder copies each message body into a new vector (tonic then copies it
//! into the HTTP/2 frames), and it sizes messages by the memory a batch's buffers hold rather
//! than by the rows it has: a stored batch is a slice of the dataset's one contiguous close
//! column, so an 800 MB dataset went out as ~37,000 messages of 22 KB, and the per-message
//! work on both sides bounded the download (perf-notes.md, "DoGet"). Here each stored batch is
//! cut into messages of about [`MESSAGE_BYTES`] of rows, and a message whose body is one
//! buffer (a close-only dataset's) carries that buffer as it is, without a copy.
//!
//! The stream is the same as arrow-flight's: an IPC schema message, then record batch
//! messages, with dictionary columns sent as their values (the dataset's key column of a
//! universe arrives as text, as before).

use std::collections::VecDeque;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_flight::FlightData;
use arrow_ipc::writer::{IpcWriteOptions, StreamEncoder};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use bytes::Bytes;
use sweepflight_protocol::Compression;

use crate::{Error, Result};

/// Rows per message are chosen to make messages about this large: arrow-flight's target,
/// under the 4 MiB that gRPC clients accept by default.
pub(super) const MESSAGE_BYTES: usize = arrow_flight::encode::GRPC_TARGET_MAX_FLIGHT_SIZE_BYTES;

/// The Flight data of `batches` (all of `schema`), encoded as the stream is read.
pub(super) fn encode(
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
    compression: Option<Compression>,
) -> Result<impl Iterator<Item = Result<FlightData>> + Send + use<>> {
    let sent = Arc::new(values_schema(schema));
    // 8-byte alignment: a buffer of whole values needs no padding, so a body of one buffer
    // is that buffer alone (when not compressed).
    let options = IpcWriteOptions::try_new(8, false, arrow_ipc::MetadataVersion::V5)
        .and_then(|o| o.try_with_compression(crate::sweep::results::codec(compression)))
        .map_err(|e| Error::internal("IPC options", e))?;
    let encoder = StreamEncoder::try_new_with_options(&sent, options)
        .map_err(|e| Error::internal("encode the schema", e))?;
    let mut pieces = batches.into_iter().flat_map(pieces).peekable();
    // A stream with no rows still starts with its schema.
    let schema_only = pieces.peek().is_none().then(|| {
        FlightData::from(arrow_flight::SchemaAsIpc::new(
            &sent,
            &IpcWriteOptions::default(),
        ))
    });
    // Encoded piece by piece as the stream is read; the first error ends it.
    let messages = pieces
        .scan(Some(encoder), move |encoder, piece| {
            let mut working = encoder.take()?;
            let encoded = with_values(&sent, &piece).and_then(|piece| {
                working
                    .encode(&piece)
                    .map_err(|e| Error::internal("encode the rows", e))
                    .and_then(messages)
            });
            if encoded.is_ok() {
                *encoder = Some(working);
            }
            Some(encoded)
        })
        .flat_map(|encoded| match encoded {
            Ok(messages) => messages.into_iter().map(Ok).collect::<Vec<_>>(),
            Err(e) => vec![Err(e)],
        });
    Ok(schema_only.map(Ok).into_iter().chain(messages))
}

/// `batch` cut into runs of rows of about [`MESSAGE_BYTES`] each (zero-copy slices).
fn pieces(batch: RecordBatch) -> Vec<RecordBatch> {
    let rows = batch.num_rows();
    // The bytes of these rows, not of the buffers they are a slice of.
    let bytes: usize = batch
        .columns()
        .iter()
        .map(|c| c.to_data().get_slice_memory_size().unwrap_or(0))
        .sum();
    let per_piece = if bytes <= MESSAGE_BYTES {
        rows.max(1)
    } else {
        (rows * MESSAGE_BYTES / bytes).max(1)
    };
    (0..rows)
        .step_by(per_piece)
        .map(|start| batch.slice(start, per_piece.min(rows - start)))
        .collect()
}

/// The schema as sent: dictionary columns as their values.
fn values_schema(schema: &Schema) -> Schema {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Dictionary(_, values) => {
                f.as_ref().clone().with_data_type((**values).clone())
            }
            _ => f.as_ref().clone(),
        })
        .collect();
    Schema::new_with_metadata(fields, schema.metadata().clone())
}

/// `batch` with its dictionary columns cast to their values (a copy of those columns only).
fn with_values(sent: &SchemaRef, batch: &RecordBatch) -> Result<RecordBatch> {
    if batch.schema().fields() == sent.fields() {
        return RecordBatch::try_new(Arc::clone(sent), batch.columns().to_vec())
            .map_err(|e| Error::internal("rebuild a batch", e));
    }
    let columns = batch
        .columns()
        .iter()
        .zip(sent.fields())
        .map(|(c, f)| {
            if c.data_type() == f.data_type() {
                Ok(Arc::clone(c))
            } else {
                arrow_cast::cast(c, f.data_type())
                    .map_err(|e| Error::internal("decode a dictionary column", e))
            }
        })
        .collect::<Result<Vec<_>>>()?;
    RecordBatch::try_new(Arc::clone(sent), columns)
        .map_err(|e| Error::internal("rebuild a batch", e))
}

/// Splits framed IPC messages (continuation, metadata length, metadata, body) into Flight
/// data: the metadata as the header, the body as the body, a body that lies in one buffer
/// without a copy.
fn messages(buffers: Vec<Buffer>) -> Result<Vec<FlightData>> {
    let mut bytes = Framed(buffers.into());
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let prefix = bytes.take(8)?;
        if prefix[..4] != [0xff; 4] {
            return Err(Error::Internal("IPC framing without a continuation".into()));
        }
        let len = i32::from_le_bytes(prefix[4..8].try_into().expect("four bytes"));
        let len = usize::try_from(len)
            .map_err(|_| Error::Internal("IPC framing: negative metadata length".into()))?;
        if len == 0 {
            break; // end of stream
        }
        let header = bytes.take(len)?;
        let body_len = arrow_ipc::root_as_message(&header)
            .map_err(|e| Error::internal("IPC framing", e))?
            .bodyLength();
        let body = bytes.take(
            usize::try_from(body_len)
                .map_err(|_| Error::Internal("IPC framing: negative body length".into()))?,
        )?;
        out.push(FlightData {
            data_header: header,
            data_body: body,
            ..Default::default()
        });
    }
    Ok(out)
}

/// Encoded buffers read front to back as one run of bytes.
struct Framed(VecDeque<Buffer>);

impl Framed {
    fn is_empty(&self) -> bool {
        self.0.iter().all(|b| b.is_empty())
    }

    /// The next `n` bytes: a slice of one buffer when they lie in one, else a copy.
    fn take(&mut self, n: usize) -> Result<Bytes> {
        let short = || Error::Internal("IPC framing: a message past the end".into());
        while self.0.front().is_some_and(|b| b.is_empty()) {
            self.0.pop_front();
        }
        if n == 0 {
            return Ok(Bytes::new());
        }
        let front = self.0.front_mut().ok_or_else(short)?;
        if front.len() >= n {
            let head = front.slice_with_length(0, n);
            *front = front.slice(n);
            return Ok(Bytes::from_owner(head));
        }
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let front = self.0.front_mut().ok_or_else(short)?;
            let k = front.len().min(n - out.len());
            out.extend_from_slice(&front[..k]);
            *front = front.slice(k);
            if front.is_empty() {
                self.0.pop_front();
            }
        }
        Ok(Bytes::from(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::{
        Array, ArrayRef, DictionaryArray, Float64Array, Int64Array, StringArray, types::Int16Type,
    };
    use futures::TryStreamExt;

    fn decode(data: Vec<FlightData>) -> Vec<RecordBatch> {
        let stream = futures::stream::iter(data.into_iter().map(Ok));
        let decoded = arrow_flight::decode::FlightRecordBatchStream::new_from_flight_data(stream);
        futures::executor::block_on(decoded.try_collect()).unwrap()
    }

    fn all(batches: &[RecordBatch]) -> RecordBatch {
        arrow_select::concat::concat_batches(&batches[0].schema(), batches).unwrap()
    }

    #[test]
    fn a_close_column_goes_out_without_a_copy_in_messages_of_its_rows() {
        // Two stored batches, slices of one column of five messages' worth (as a put stores
        // them).
        let n = 5 * MESSAGE_BYTES / 8;
        let close = Float64Array::from_iter_values((0..n).map(|i| 1.0 + i as f64));
        let schema = Arc::new(Schema::new(vec![Field::new(
            "close",
            DataType::Float64,
            false,
        )]));
        let column: ArrayRef = Arc::new(close.clone());
        let stored: Vec<RecordBatch> = [(0, 1000), (1000, n - 1000)]
            .iter()
            .map(|&(at, len)| {
                RecordBatch::try_new(Arc::clone(&schema), vec![column.slice(at, len)]).unwrap()
            })
            .collect();
        let data: Vec<FlightData> = encode(&schema, stored, None)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        // The schema, the 1,000 rows, then the rest in messages of about MESSAGE_BYTES.
        assert_eq!(data.len(), 1 + 1 + 5);
        let values = close.values().inner().as_ptr() as usize;
        let bodies: Vec<_> = data[1..]
            .iter()
            .map(|d| d.data_body.as_ptr() as usize)
            .collect();
        assert_eq!(
            bodies[0], values,
            "the first body is the column's own memory"
        );
        assert_eq!(bodies[1], values + 8_000);
        assert!(data[2..].iter().all(|d| d.data_body.len() <= MESSAGE_BYTES));
        let got = all(&decode(data));
        assert_eq!(got.column(0).as_ref(), &close as &dyn Array);
    }

    #[test]
    fn columns_and_dictionaries_round_trip() {
        let keys = DictionaryArray::<Int16Type>::try_new(
            vec![0i16, 0, 1, 1].into(),
            Arc::new(StringArray::from(vec!["A", "B"])),
        )
        .unwrap();
        let batch = RecordBatch::try_from_iter([
            ("symbol", Arc::new(keys) as ArrayRef),
            (
                "t",
                Arc::new(Int64Array::from(vec![1, 2, 3, 4])) as ArrayRef,
            ),
            (
                "close",
                Arc::new(Float64Array::from(vec![1.0, 2.0, 3.0, 4.0])) as ArrayRef,
            ),
        ])
        .unwrap();
        let data: Vec<FlightData> = encode(
            &batch.schema(),
            vec![batch.clone(), batch.slice(1, 2)],
            None,
        )
        .unwrap()
        .map(Result::unwrap)
        .collect();
        let got = all(&decode(data));
        assert_eq!(got.schema().field(0).data_type(), &DataType::Utf8);
        let symbols: Vec<_> = got.column(0).as_string::<i32>().iter().flatten().collect();
        assert_eq!(symbols, ["A", "A", "B", "B", "A", "B"]);
        assert_eq!(
            got.column(2).as_ref(),
            &Float64Array::from(vec![1.0, 2.0, 3.0, 4.0, 2.0, 3.0]) as &dyn Array
        );
    }

    #[test]
    fn compressed_messages_decode_to_the_same_rows() {
        let close: Float64Array = (0..300_000).map(|i| 100.0 + f64::from(i % 97)).collect();
        let batch = RecordBatch::try_from_iter([("close", Arc::new(close) as ArrayRef)]).unwrap();
        for c in [Compression::Zstd, Compression::Lz4] {
            let data: Vec<FlightData> = encode(&batch.schema(), vec![batch.clone()], Some(c))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            let sent: usize = data.iter().map(|d| d.data_body.len()).sum();
            assert!(sent < 300_000 * 8 / 4, "{c:?}: {sent} bytes");
            assert_eq!(all(&decode(data)), batch, "{c:?}");
        }
    }

    #[test]
    fn no_rows_is_a_schema_alone() {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "close",
            DataType::Float64,
            false,
        )]));
        let data: Vec<FlightData> = encode(&schema, vec![], None)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(data.len(), 1);
        let stream = futures::stream::iter(data.into_iter().map(Ok));
        let mut decoded =
            arrow_flight::decode::FlightRecordBatchStream::new_from_flight_data(stream);
        assert!(
            futures::executor::block_on(decoded.try_next())
                .unwrap()
                .is_none()
        );
        assert_eq!(decoded.schema().unwrap().as_ref(), schema.as_ref());
    }
}
