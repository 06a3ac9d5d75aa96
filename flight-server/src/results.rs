//! The sweep result table: its schema, building it from kernel results, and encoding it as
//! one Arrow IPC stream split over DoAction `Result` bodies or as `session` reply messages.

use std::sync::{Arc, LazyLock};

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch};
use arrow_flight::FlightData;
use arrow_ipc::writer::{
    DictionaryTracker, IpcDataGenerator, IpcWriteContext, IpcWriteOptions, StreamWriter,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use bytes::Bytes;
use sweepflight_kernel::{Combo, ComboResult};

use crate::Result;

/// Largest `Result` body of a sweep reply. gRPC clients refuse messages over 4 MiB by default
/// (arrow-rs `FlightClient` among them), and the protobuf framing needs a few bytes of its own.
pub const MAX_RESULT_BODY: usize = (4 << 20) - (16 << 10);

/// The result schema: the contract's nine columns, then the extra metrics.
pub static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let int = |name| Field::new(name, DataType::Int64, false);
    let float = |name| Field::new(name, DataType::Float64, false);
    let mut fields = vec![int("combo")];
    fields.extend(Combo::FIELDS.iter().map(|f| int(f)));
    fields.extend([
        float("pnl"),
        int("trades"),
        int("wins"),
        float("win_rate"),
        float("max_drawdown"),
    ]);
    Arc::new(Schema::new(fields))
});

/// One row per combo, in request order.
///
/// # Errors
/// Only if Arrow rejects the columns, which would be a bug.
pub fn to_batch(combos: &[Combo], results: &[ComboResult]) -> Result<RecordBatch> {
    let ints = |f: &dyn Fn(usize) -> i64| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values((0..combos.len()).map(f)))
    };
    let floats = |f: &dyn Fn(&ComboResult) -> f64| -> ArrayRef {
        Arc::new(Float64Array::from_iter_values(results.iter().map(f)))
    };
    let mut columns: Vec<ArrayRef> = vec![ints(&|i| i as i64)];
    for w in 0..6 {
        columns.push(ints(&|i| i64::from(combos[i].windows()[w])));
    }
    columns.extend([
        floats(&|r| r.pnl),
        ints(&|i| results[i].trades as i64),
        ints(&|i| results[i].wins as i64),
        floats(&ComboResult::win_rate),
        floats(&|r| r.max_drawdown),
    ]);
    Ok(RecordBatch::try_new(Arc::clone(&SCHEMA), columns)?)
}

/// `batch` as one Arrow IPC stream (schema, batch, end-of-stream), cut into bodies of at most
/// `max_body` bytes. Concatenated in order, the bodies are the stream.
///
/// # Errors
/// If IPC encoding fails.
pub fn ipc_stream_bodies(batch: &RecordBatch, max_body: usize) -> Result<Vec<Bytes>> {
    let mut writer = StreamWriter::try_new(Vec::new(), batch.schema_ref())?;
    writer.write(batch)?;
    writer.finish()?;
    let stream = Bytes::from(writer.into_inner()?);
    Ok((0..stream.len())
        .step_by(max_body.max(1))
        .map(|start| stream.slice(start..(start + max_body).min(stream.len())))
        .collect())
}

/// Encodes result batches as the record-batch messages of one open stream whose schema was
/// already sent ([`SCHEMA`]): a `session` reply. Keeps its flatbuffer builder and scratch
/// buffers between messages, so a reply costs no schema encoding and few allocations.
#[derive(Debug)]
pub struct SessionEncoder {
    generator: IpcDataGenerator,
    dictionaries: DictionaryTracker,
    options: IpcWriteOptions,
    context: IpcWriteContext,
}

impl Default for SessionEncoder {
    fn default() -> Self {
        Self {
            generator: IpcDataGenerator::default(),
            // The result schema has no dictionaries; a tracker that errs on replacement would
            // only matter if it did.
            dictionaries: DictionaryTracker::new(false),
            options: IpcWriteOptions::default(),
            context: IpcWriteContext::default(),
        }
    }
}

impl SessionEncoder {
    /// `batch` as one Flight message (header and body, no app_metadata).
    ///
    /// # Errors
    /// If IPC encoding fails.
    pub fn encode(&mut self, batch: &RecordBatch) -> Result<FlightData> {
        let (dictionaries, encoded) = self.generator.encode(
            batch,
            &mut self.dictionaries,
            &self.options,
            &mut self.context,
        )?;
        debug_assert!(
            dictionaries.is_empty(),
            "the result schema has no dictionaries"
        );
        Ok(encoded.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;

    #[test]
    fn one_session_encoder_encodes_reply_after_reply() {
        let mut encoder = SessionEncoder::default();
        for n in [1u32, 80, 3] {
            let combos: Vec<Combo> = (1..=n).map(|l| Combo::from_length(l).unwrap()).collect();
            let results: Vec<ComboResult> = (0..combos.len())
                .map(|i| ComboResult {
                    pnl: -(i as f64),
                    trades: 2 * i as u64,
                    wins: i as u64,
                    max_drawdown: 0.25,
                })
                .collect();
            let batch = to_batch(&combos, &results).unwrap();
            let msg = encoder.encode(&batch).unwrap();
            assert!(msg.app_metadata.is_empty() && msg.flight_descriptor.is_none());
            let back = arrow_flight::utils::flight_data_to_arrow_batch(
                &msg,
                Arc::clone(&SCHEMA),
                &Default::default(),
            )
            .unwrap();
            assert_eq!(back, batch, "reply of {n} rows");
        }
    }

    #[test]
    fn bodies_reassemble_into_the_stream() {
        let combos: Vec<Combo> = (1..2000).map(|l| Combo::from_length(l).unwrap()).collect();
        let results: Vec<ComboResult> = (0..combos.len())
            .map(|i| ComboResult {
                pnl: i as f64,
                trades: i as u64,
                wins: 1,
                max_drawdown: 0.5,
            })
            .collect();
        let batch = to_batch(&combos, &results).unwrap();
        let bodies = ipc_stream_bodies(&batch, 1000).unwrap();
        assert!(bodies.len() > 10 && bodies.iter().all(|b| b.len() <= 1000));
        let joined: Vec<u8> = bodies.concat();
        let mut reader = arrow_ipc::reader::StreamReader::try_new(joined.as_slice(), None).unwrap();
        let back = reader.next().unwrap().unwrap();
        assert!(reader.next().is_none());
        assert_eq!(back, batch);
        assert_eq!(back.schema().field(0).name(), "combo");
        let full = back
            .column(2)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(full.value(5), 6);
        assert_eq!(full.null_count(), 0);
    }
}
