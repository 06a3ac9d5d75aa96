//! Turning an uploaded Flight stream into a validated [`NewDataset`], or a precise error.
//!
//! Used by DoPut and by the stateless DoExchange sweep. Nothing is stored here: the caller
//! stores the result only once the whole stream has arrived and passed, so a failed upload
//! leaves no trace.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Float64Array, RecordBatch};
use arrow_flight::FlightData;
use arrow_flight::decode::FlightRecordBatchStream;
use arrow_flight::error::FlightError;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use futures::{Stream, StreamExt};

use crate::store::NewDataset;
use crate::{Error, Result};

/// The column every dataset must have.
pub const CLOSE: &str = "close";

/// Limits an upload is checked against while it streams in.
#[derive(Debug, Clone, Copy)]
pub struct UploadLimits {
    /// Largest accepted dataset, in bytes of decoded Arrow data.
    pub max_bytes: u64,
}

/// Reads a whole upload: the schema, then every batch, validating as it goes.
///
/// # Errors
/// [`Error::InvalidArgument`] / [`Error::BadValue`] for a stream that breaks the dataset rules,
/// [`Error::ResourceExhausted`] past `limits`, or the client's own stream error.
pub async fn read_series<S>(stream: S, limits: UploadLimits) -> Result<NewDataset>
where
    S: Stream<Item = std::result::Result<FlightData, FlightError>> + Send + 'static,
{
    let mut batches = FlightRecordBatchStream::new_from_flight_data(stream);
    let mut series = SeriesBuilder::new(limits);
    while let Some(batch) = batches.next().await {
        series.push(batch?)?;
    }
    let schema = batches
        .schema()
        .cloned()
        .ok_or_else(|| Error::invalid("empty upload: the stream carried no schema"))?;
    series.finish(&schema)
}

/// Builds a dataset from batches already in memory (a file read back at start), with the same
/// checks as an upload.
///
/// # Errors
/// As [`read_series`].
pub fn assemble(schema: &SchemaRef, batches: Vec<RecordBatch>) -> Result<NewDataset> {
    let mut series = SeriesBuilder::new(UploadLimits {
        max_bytes: u64::MAX,
    });
    for batch in batches {
        series.push(batch)?;
    }
    series.finish(schema)
}

/// Bytes of Arrow data a batch holds. Counts only the rows it covers: a decoded message's
/// columns share one body buffer, and stored batches share one close buffer, so per-array
/// capacities would count the same memory many times over.
pub fn batch_bytes(batch: &RecordBatch) -> u64 {
    batch
        .columns()
        .iter()
        .map(|c| c.to_data().get_slice_memory_size().unwrap_or(0) as u64)
        .sum()
}

/// Checks that an inbound IPC message's body holds every buffer its header points at.
///
/// arrow-ipc's decoder trusts those offsets and panics on a body shorter than its header
/// claims (a truncated or hostile message), so every inbound message passes here first.
///
/// # Errors
/// [`FlightError::DecodeError`] naming what is out of bounds.
pub fn check_ipc_bounds(msg: &FlightData) -> std::result::Result<(), FlightError> {
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

/// Accumulates validated batches and the contiguous close column.
struct SeriesBuilder {
    limits: UploadLimits,
    batches: Vec<RecordBatch>,
    /// Each batch's close column, widened; concatenated once at the end (one exact-size
    /// allocation instead of a doubling Vec touching twice the memory).
    closes: Vec<Float64Array>,
    rows: usize,
    bytes: u64,
}

impl SeriesBuilder {
    fn new(limits: UploadLimits) -> Self {
        Self {
            limits,
            batches: Vec::new(),
            closes: Vec::new(),
            rows: 0,
            bytes: 0,
        }
    }

    fn push(&mut self, batch: RecordBatch) -> Result<()> {
        self.bytes += batch_bytes(&batch);
        if self.bytes > self.limits.max_bytes {
            return Err(Error::ResourceExhausted(format!(
                "dataset exceeds the server's limit of {} bytes (--max-dataset-bytes)",
                self.limits.max_bytes
            )));
        }
        let close = close_column(batch.schema_ref(), &batch)?;
        check_close(&close, self.rows)?;
        self.rows += close.len();
        self.closes.push(close);
        self.batches.push(batch);
        Ok(())
    }

    fn finish(self, schema: &SchemaRef) -> Result<NewDataset> {
        let index = close_index(schema)?;
        if self.rows == 0 {
            return Err(Error::invalid(
                "a dataset needs at least 1 row; the upload had 0",
            ));
        }
        let parts: Vec<&dyn Array> = self.closes.iter().map(|c| c as &dyn Array).collect();
        let close = match parts.as_slice() {
            [one] => one.as_any().downcast_ref::<Float64Array>().cloned(),
            _ => arrow_select::concat::concat(&parts)?
                .as_any()
                .downcast_ref::<Float64Array>()
                .cloned(),
        }
        .ok_or_else(|| Error::Internal("concatenated close is not float64".into()))?;
        let schema = Arc::new(widened_schema(schema, index));
        let mut offset = 0;
        let batches = self
            .batches
            .into_iter()
            .map(|b| {
                // The stored batch's close column is a zero-copy slice of the contiguous column.
                let mut columns = b.columns().to_vec();
                columns[index] = Arc::new(close.slice(offset, b.num_rows())) as ArrayRef;
                offset += b.num_rows();
                RecordBatch::try_new(Arc::clone(&schema), columns).map_err(Error::from)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(NewDataset {
            bytes: batches.iter().map(batch_bytes).sum(),
            schema,
            batches,
            close,
        })
    }
}

fn close_index(schema: &Schema) -> Result<usize> {
    schema.index_of(CLOSE).map_err(|_| {
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        Error::invalid(format!(
            "the schema has no column `{CLOSE}` (columns: {names:?}); `{CLOSE}` must be float64, float32 or an integer type"
        ))
    })
}

fn widened_schema(schema: &Schema, index: usize) -> Schema {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            if i == index {
                f.as_ref().clone().with_data_type(DataType::Float64)
            } else {
                f.as_ref().clone()
            }
        })
        .collect();
    Schema::new_with_metadata(fields, schema.metadata().clone())
}

/// The close column of one batch as float64 (float32 and integers are widened).
fn close_column(schema: &Schema, batch: &RecordBatch) -> Result<Float64Array> {
    let col = batch.column(close_index(schema)?);
    let widened = match col.data_type() {
        DataType::Float64 => Arc::clone(col),
        t if t.is_integer() || *t == DataType::Float32 => {
            arrow_cast::cast(col, &DataType::Float64)?
        }
        t => {
            return Err(Error::invalid(format!(
                "column `{CLOSE}` has type {t}; expected float64 (float32 and integers are widened)"
            )));
        }
    };
    Ok(widened
        .as_any()
        .downcast_ref::<Float64Array>()
        .ok_or_else(|| Error::Internal("cast to float64 gave another type".into()))?
        .clone())
}

/// Nulls, non-finite and non-positive closes are refused, naming the first bad row.
fn check_close(close: &Float64Array, first_row: usize) -> Result<()> {
    let bad = |row: usize, problem| Error::BadValue {
        column: CLOSE.to_owned(),
        row: first_row + row,
        problem,
    };
    if let Some(nulls) = close.nulls()
        && let Some(row) = (0..close.len()).find(|&i| nulls.is_null(i))
    {
        return Err(bad(row, "is null"));
    }
    if let Some((row, &v)) = close
        .values()
        .iter()
        .enumerate()
        .find(|&(_, &v)| !(v.is_finite() && v > 0.0))
    {
        let problem = if v.is_nan() {
            "is NaN"
        } else if v.is_infinite() {
            "is infinite"
        } else {
            "is <= 0"
        };
        return Err(bad(row, problem));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Float32Array, Int64Array, StringArray};

    fn limits() -> UploadLimits {
        UploadLimits {
            max_bytes: u64::MAX,
        }
    }

    fn batch(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(cols).unwrap()
    }

    #[test]
    fn widens_and_keeps_other_columns() {
        let mut s = SeriesBuilder::new(limits());
        let b1 = batch(vec![
            ("t", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
            (
                "close",
                Arc::new(Float32Array::from(vec![1.5, 2.5])) as ArrayRef,
            ),
        ]);
        let schema = b1.schema();
        s.push(b1).unwrap();
        s.push(batch(vec![
            ("t", Arc::new(Int64Array::from(vec![3])) as ArrayRef),
            ("close", Arc::new(Float32Array::from(vec![3.5])) as ArrayRef),
        ]))
        .unwrap();
        let d = s.finish(&schema).unwrap();
        assert_eq!(d.close.values().as_ref(), &[1.5, 2.5, 3.5]);
        assert_eq!(d.schema.field(1).data_type(), &DataType::Float64);
        assert_eq!(d.batches[1].num_rows(), 1);
        let c = d.batches[1]
            .column(1)
            .as_any()
            .downcast_ref::<Float64Array>()
            .unwrap();
        assert_eq!(c.value(0), 3.5);
    }

    #[test]
    fn first_bad_row_counts_across_batches() {
        let mut s = SeriesBuilder::new(limits());
        s.push(batch(vec![(
            "close",
            Arc::new(Float64Array::from(vec![1.0, 2.0])) as ArrayRef,
        )]))
        .unwrap();
        let e = s
            .push(batch(vec![(
                "close",
                Arc::new(Float64Array::from(vec![1.0, 0.0, f64::NAN])) as ArrayRef,
            )]))
            .unwrap_err();
        assert_eq!(e.to_string(), "column `close` row 3: is <= 0");
        let e = SeriesBuilder::new(limits())
            .push(batch(vec![(
                "close",
                Arc::new(Float64Array::from(vec![Some(1.0), None])) as ArrayRef,
            )]))
            .unwrap_err();
        assert_eq!(e.to_string(), "column `close` row 1: is null");
    }

    #[test]
    fn wrong_type_missing_column_and_empty() {
        let e = SeriesBuilder::new(limits())
            .push(batch(vec![(
                "close",
                Arc::new(StringArray::from(vec!["1"])) as ArrayRef,
            )]))
            .unwrap_err();
        assert!(e.to_string().contains("has type Utf8"), "{e}");
        let b = batch(vec![(
            "price",
            Arc::new(Float64Array::from(vec![1.0])) as ArrayRef,
        )]);
        let e = SeriesBuilder::new(limits()).push(b).unwrap_err();
        assert!(e.to_string().contains("no column `close`"), "{e}");
        let schema = Arc::new(Schema::new(vec![Field::new(
            "close",
            DataType::Float64,
            false,
        )]));
        let e = SeriesBuilder::new(limits()).finish(&schema).unwrap_err();
        assert!(e.to_string().contains("at least 1 row"), "{e}");
    }

    #[test]
    fn byte_limit() {
        let mut s = SeriesBuilder::new(UploadLimits { max_bytes: 10 });
        let e = s
            .push(batch(vec![(
                "close",
                Arc::new(Float64Array::from(vec![1.0; 100])) as ArrayRef,
            )]))
            .unwrap_err();
        assert!(matches!(e, Error::ResourceExhausted(_)));
    }
}
