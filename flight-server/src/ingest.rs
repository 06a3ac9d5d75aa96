//! Turning an uploaded Flight stream into a validated [`NewDataset`], or a precise error.
//!
//! Used by DoPut and by the stateless DoExchange sweep, and by [`crate::persist`] for files read
//! back at start. Nothing is stored here: the caller stores the result only once the whole stream
//! has arrived and passed, so a failed upload leaves no trace.
//!
//! A keyed upload (v1.1) is grouped into series by its key column: series in order of first
//! appearance, rows within a series in arrival order. Uploads that arrive grouped already (one
//! run per key, the usual output of a `group_by` or a sort) are kept as they are; interleaved
//! ones are reordered once, at the end, with one stable gather per column.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, UInt64Type};
use arrow_array::{Array, ArrayRef, Float64Array, RecordBatch, UInt32Array};
use arrow_flight::FlightData;
use arrow_flight::decode::FlightRecordBatchStream;
use arrow_flight::error::FlightError;
use arrow_schema::{DataType, SchemaRef};
use futures::{Stream, StreamExt};

use crate::dataset::{
    NewDataset, RowOf, Universe, bad_close, close_column, close_index, first_bad_close,
    widened_schema,
};
use crate::{Error, Result};

/// Limits an upload is checked against while it streams in.
#[derive(Debug, Clone, Copy)]
pub struct UploadLimits {
    /// Largest accepted dataset, in bytes of decoded Arrow data.
    pub max_bytes: u64,
}

impl UploadLimits {
    /// No limit (files the server wrote itself).
    pub const NONE: Self = Self {
        max_bytes: u64::MAX,
    };
}

/// Reads a whole upload: the schema, then every batch, validating as it goes; with `key`, the
/// rows are grouped into series by that column.
///
/// # Errors
/// [`Error::InvalidArgument`] / [`Error::BadValue`] for a stream that breaks the dataset rules,
/// [`Error::ResourceExhausted`] past `limits`, or the client's own stream error.
pub async fn read_upload<S>(
    stream: S,
    limits: UploadLimits,
    key: Option<&str>,
) -> Result<NewDataset>
where
    S: Stream<Item = std::result::Result<FlightData, FlightError>> + Send + 'static,
{
    let mut batches = FlightRecordBatchStream::new_from_flight_data(stream);
    let mut builder: Option<SeriesBuilder> = None;
    while let Some(batch) = batches.next().await {
        let batch = batch?;
        let b = match &mut builder {
            Some(b) => b,
            None => builder.insert(SeriesBuilder::new(batch.schema_ref(), limits, key)?),
        };
        b.push(batch)?;
    }
    match builder {
        Some(b) => b.finish(),
        None => {
            let schema = batches
                .schema()
                .cloned()
                .ok_or_else(|| Error::invalid("empty upload: the stream carried no schema"))?;
            SeriesBuilder::new(&schema, limits, key)?.finish()
        }
    }
}

/// Builds a dataset from batches already in memory (a file read back at start), with the same
/// checks as an upload.
///
/// # Errors
/// As [`read_upload`].
pub fn assemble(
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
    key: Option<&str>,
) -> Result<NewDataset> {
    let mut series = SeriesBuilder::new(schema, UploadLimits::NONE, key)?;
    for batch in batches {
        series.push(batch)?;
    }
    series.finish()
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

/// Accumulates validated batches, their widened closes and (keyed) each row's series.
struct SeriesBuilder {
    limits: UploadLimits,
    schema: SchemaRef,
    close_index: usize,
    batches: Vec<RecordBatch>,
    /// Each batch's close column, widened; concatenated once at the end (one exact-size
    /// allocation instead of a doubling Vec touching twice the memory).
    closes: Vec<Float64Array>,
    rows: usize,
    bytes: u64,
    keys: Option<KeyGrouper>,
}

impl SeriesBuilder {
    fn new(schema: &SchemaRef, limits: UploadLimits, key: Option<&str>) -> Result<Self> {
        let close_index = close_index(schema)?;
        let keys = key.map(|k| KeyGrouper::new(schema, k)).transpose()?;
        // Sweepflight's own file metadata is not part of the dataset's schema.
        let mut stored = widened_schema(schema, close_index);
        stored.metadata.remove(crate::dataset::KEY_METADATA);
        Ok(Self {
            limits,
            schema: Arc::new(stored),
            close_index,
            batches: Vec::new(),
            closes: Vec::new(),
            rows: 0,
            bytes: 0,
            keys,
        })
    }

    fn push(&mut self, batch: RecordBatch) -> Result<()> {
        self.bytes += batch_bytes(&batch);
        if self.bytes > self.limits.max_bytes {
            return Err(Error::ResourceExhausted(format!(
                "dataset exceeds the server's limit of {} bytes (--max-dataset-bytes)",
                self.limits.max_bytes
            )));
        }
        if let Some(keys) = &mut self.keys {
            keys.push(&batch, self.rows)?;
        }
        let close = close_column(&batch, self.close_index)?;
        if let Some((row, problem)) = first_bad_close(&close) {
            let upload_row = self.rows + row;
            return Err(match &self.keys {
                None => bad_close(RowOf::Upload(upload_row), problem),
                Some(keys) => {
                    let (name, row) = keys.locate(upload_row);
                    bad_close(
                        RowOf::Series {
                            name,
                            row,
                            upload_row,
                        },
                        problem,
                    )
                }
            });
        }
        self.rows += close.len();
        self.closes.push(close);
        self.batches.push(batch);
        Ok(())
    }

    fn finish(self) -> Result<NewDataset> {
        if self.rows == 0 {
            return Err(Error::invalid(
                "a dataset needs at least 1 row; the upload had 0",
            ));
        }
        let parts: Vec<&dyn Array> = self.closes.iter().map(|c| c as &dyn Array).collect();
        let close = match parts.as_slice() {
            [one] => one.as_primitive().clone(),
            _ => arrow_select::concat::concat(&parts)
                .map_err(|e| Error::internal("concatenate closes", e))?
                .as_primitive()
                .clone(),
        };
        let stored = StoredRows {
            schema: self.schema,
            close_index: self.close_index,
            batches: self.batches,
            close,
        };
        let (stored, universe) = match self.keys {
            None => (stored, None),
            Some(keys) => keys.group(stored)?,
        };
        Ok(stored.into_dataset(universe))
    }
}

/// Rows as they will be stored: batches and their contiguous close column.
struct StoredRows {
    schema: SchemaRef,
    close_index: usize,
    batches: Vec<RecordBatch>,
    close: Float64Array,
}

impl StoredRows {
    fn into_dataset(self, universe: Option<Universe>) -> NewDataset {
        let mut offset = 0;
        let batches: Vec<RecordBatch> = self
            .batches
            .into_iter()
            .map(|b| {
                // The stored batch's close column is a zero-copy slice of the contiguous column.
                let mut columns = b.columns().to_vec();
                columns[self.close_index] = Arc::new(self.close.slice(offset, b.num_rows()));
                offset += b.num_rows();
                RecordBatch::try_new(Arc::clone(&self.schema), columns)
                    .expect("same columns, close widened as the schema says")
            })
            .collect();
        NewDataset {
            bytes: batches.iter().map(batch_bytes).sum(),
            schema: self.schema,
            batches,
            close: self.close,
            universe,
        }
    }
}

/// A key value, as hashed for grouping.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum KeyValue {
    Text(String),
    Int(i128),
}

/// Assigns each row of a keyed upload its series, in order of first appearance.
struct KeyGrouper {
    column: String,
    index: usize,
    groups: HashMap<KeyValue, u32>,
    names: Vec<String>,
    /// The series of every row so far.
    ids: Vec<u32>,
    /// Runs of equal keys so far: equal to the number of series iff the upload is grouped.
    runs: usize,
}

impl KeyGrouper {
    fn new(schema: &SchemaRef, column: &str) -> Result<Self> {
        let index = schema.index_of(column).map_err(|_| {
            let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            Error::invalid(format!(
                "the key column `{column}` is not in the schema (columns: {names:?})"
            ))
        })?;
        let t = schema.field(index).data_type();
        let text =
            |t: &DataType| matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
        let ok = text(t) || t.is_integer() || matches!(t, DataType::Dictionary(_, v) if text(v));
        if !ok {
            return Err(Error::invalid(format!(
                "the key column `{column}` has type {t}; expected utf8, large_utf8, a dictionary of strings or an integer type"
            )));
        }
        Ok(Self {
            column: column.to_owned(),
            index,
            groups: HashMap::new(),
            names: Vec::new(),
            ids: Vec::new(),
            runs: 0,
        })
    }

    /// Assigns the rows of `batch` (the upload's rows `first_row..`).
    fn push(&mut self, batch: &RecordBatch, first_row: usize) -> Result<()> {
        let col = batch.column(self.index);
        if let Some(nulls) = col.logical_nulls()
            && let Some(row) = (0..col.len()).find(|&i| nulls.is_null(i))
        {
            return Err(Error::invalid(format!(
                "key column `{}` row {}: is null",
                self.column,
                first_row + row
            )));
        }
        self.ids.reserve(col.len());
        match col.data_type() {
            DataType::Utf8 => self.push_texts(col.as_string::<i32>().iter(), first_row),
            DataType::LargeUtf8 => self.push_texts(col.as_string::<i64>().iter(), first_row),
            DataType::Utf8View => self.push_texts(col.as_string_view().iter(), first_row),
            DataType::Dictionary(..) => {
                let dict = col.as_any_dictionary();
                let values = arrow_cast::cast(dict.values(), &DataType::Utf8)
                    .map_err(|e| Error::internal("read the key dictionary", e))?;
                let values = values.as_string::<i32>();
                let texts = dict
                    .normalized_keys()
                    .into_iter()
                    .map(|k| values.is_valid(k).then(|| values.value(k)));
                self.push_texts(texts, first_row)
            }
            DataType::UInt64 => {
                let ints = col.as_primitive::<UInt64Type>().values().iter();
                self.push_ints(ints.map(|&v| i128::from(v)));
                Ok(())
            }
            _ => {
                let ints = arrow_cast::cast(col, &DataType::Int64)
                    .map_err(|e| Error::internal("widen the key column", e))?;
                let ints = ints.as_primitive::<Int64Type>().values().iter();
                self.push_ints(ints.map(|&v| i128::from(v)));
                Ok(())
            }
        }
    }

    fn push_texts<'a>(
        &mut self,
        texts: impl Iterator<Item = Option<&'a str>>,
        first_row: usize,
    ) -> Result<()> {
        let mut last: Option<(&str, u32)> = None;
        for (row, text) in texts.enumerate() {
            let text = match text {
                Some("") | None => {
                    return Err(Error::invalid(format!(
                        "key column `{}` row {}: is {}",
                        self.column,
                        first_row + row,
                        if text.is_none() { "null" } else { "empty" }
                    )));
                }
                Some(t) => t,
            };
            // Grouped uploads repeat the previous key: one comparison, no hashing.
            let id = match last {
                Some((prev, id)) if prev == text => id,
                _ => {
                    let id = self.id_of(KeyValue::Text(text.to_owned()), || text.to_owned());
                    last = Some((text, id));
                    id
                }
            };
            self.record(id);
        }
        Ok(())
    }

    fn push_ints(&mut self, ints: impl Iterator<Item = i128>) {
        let mut last: Option<(i128, u32)> = None;
        for v in ints {
            let id = match last {
                Some((prev, id)) if prev == v => id,
                _ => {
                    let id = self.id_of(KeyValue::Int(v), || v.to_string());
                    last = Some((v, id));
                    id
                }
            };
            self.record(id);
        }
    }

    fn id_of(&mut self, key: KeyValue, name: impl FnOnce() -> String) -> u32 {
        let next = self.names.len() as u32;
        *self.groups.entry(key).or_insert_with(|| {
            self.names.push(name());
            next
        })
    }

    fn record(&mut self, id: u32) {
        if self.ids.last() != Some(&id) {
            self.runs += 1;
        }
        self.ids.push(id);
    }

    /// The series of upload row `row`, and the row's index within it.
    fn locate(&self, row: usize) -> (&str, usize) {
        let id = self.ids[row];
        let within = self.ids[..row].iter().filter(|&&i| i == id).count();
        (&self.names[id as usize], within)
    }

    /// The rows grouped by series (reordered only if they did not arrive grouped).
    fn group(self, rows: StoredRows) -> Result<(StoredRows, Option<Universe>)> {
        let mut counts = vec![0usize; self.names.len()];
        for &id in &self.ids {
            counts[id as usize] += 1;
        }
        let mut offsets = Vec::with_capacity(counts.len() + 1);
        offsets.push(0);
        for c in &counts {
            offsets.push(offsets.last().copied().unwrap_or(0) + c);
        }
        let universe = Universe::new(self.column, self.names, offsets.clone());
        if self.runs == counts.len() {
            return Ok((rows, Some(universe)));
        }
        // A stable counting sort: each series' rows in arrival order.
        let mut next = offsets;
        let mut order = vec![0u32; self.ids.len()];
        for (row, &id) in self.ids.iter().enumerate() {
            let slot = &mut next[id as usize];
            order[*slot] = u32::try_from(row).map_err(|_| {
                Error::ResourceExhausted(
                    "an interleaved keyed upload is limited to 4,294,967,295 rows; send it grouped by key".into(),
                )
            })?;
            *slot += 1;
        }
        let order = UInt32Array::from(order);
        let all = arrow_select::concat::concat_batches(&rows.schema, &rows.batches)
            .map_err(|e| Error::internal("concatenate the upload", e))?;
        let grouped = arrow_select::take::take_record_batch(&all, &order)
            .map_err(|e| Error::internal("group the upload by key", e))?;
        let close: ArrayRef = Arc::clone(grouped.column(rows.close_index));
        Ok((
            StoredRows {
                close: close.as_primitive().clone(),
                batches: vec![grouped],
                ..rows
            },
            Some(universe),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Float32Array, Int64Array, StringArray};
    use arrow_schema::{Field, Schema};

    fn batch(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(cols).unwrap()
    }

    fn build(batches: Vec<RecordBatch>, key: Option<&str>) -> Result<NewDataset> {
        let schema = batches[0].schema();
        assemble(&schema, batches, key)
    }

    #[test]
    fn widens_and_keeps_other_columns() {
        let b1 = batch(vec![
            ("t", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
            (
                "close",
                Arc::new(Float32Array::from(vec![1.5, 2.5])) as ArrayRef,
            ),
        ]);
        let b2 = batch(vec![
            ("t", Arc::new(Int64Array::from(vec![3])) as ArrayRef),
            ("close", Arc::new(Float32Array::from(vec![3.5])) as ArrayRef),
        ]);
        let d = build(vec![b1, b2], None).unwrap();
        assert_eq!(d.close.values().as_ref(), &[1.5, 2.5, 3.5]);
        assert_eq!(d.schema.field(1).data_type(), &DataType::Float64);
        assert_eq!(d.batches[1].num_rows(), 1);
        let c: &Float64Array = d.batches[1].column(1).as_primitive();
        assert_eq!(c.value(0), 3.5);
        assert!(d.universe.is_none());
    }

    #[test]
    fn first_bad_row_counts_across_batches() {
        let closes = |v: Vec<Option<f64>>| {
            batch(vec![("close", Arc::new(Float64Array::from(v)) as ArrayRef)])
        };
        let e = build(
            vec![
                closes(vec![Some(1.0), Some(2.0)]),
                closes(vec![Some(1.0), Some(0.0), Some(f64::NAN)]),
            ],
            None,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "column `close` row 3: is <= 0");
        let e = build(vec![closes(vec![Some(1.0), None])], None).unwrap_err();
        assert_eq!(e.to_string(), "column `close` row 1: is null");
    }

    #[test]
    fn wrong_type_missing_column_and_empty() {
        let e = build(
            vec![batch(vec![(
                "close",
                Arc::new(StringArray::from(vec!["1"])) as ArrayRef,
            )])],
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("has type Utf8"), "{e}");
        let e = build(
            vec![batch(vec![(
                "price",
                Arc::new(Float64Array::from(vec![1.0])) as ArrayRef,
            )])],
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("no column `close`"), "{e}");
        let schema = Arc::new(Schema::new(vec![Field::new(
            "close",
            DataType::Float64,
            false,
        )]));
        let e = assemble(&schema, vec![], None).unwrap_err();
        assert!(e.to_string().contains("at least 1 row"), "{e}");
    }

    #[test]
    fn byte_limit() {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "close",
            DataType::Float64,
            false,
        )]));
        let mut s = SeriesBuilder::new(&schema, UploadLimits { max_bytes: 10 }, None).unwrap();
        let e = s
            .push(batch(vec![(
                "close",
                Arc::new(Float64Array::from(vec![1.0; 100])) as ArrayRef,
            )]))
            .unwrap_err();
        assert!(matches!(e, Error::ResourceExhausted(_)));
    }

    fn keyed(keys: ArrayRef, closes: Vec<f64>) -> RecordBatch {
        batch(vec![
            ("sym", keys),
            ("close", Arc::new(Float64Array::from(closes)) as ArrayRef),
        ])
    }

    #[test]
    fn interleaved_keys_are_grouped_in_first_appearance_order() {
        let b1 = keyed(
            Arc::new(StringArray::from(vec!["B", "A", "B"])),
            vec![1.0, 10.0, 2.0],
        );
        let b2 = keyed(
            Arc::new(StringArray::from(vec!["C", "A"])),
            vec![100.0, 11.0],
        );
        let d = build(vec![b1, b2], Some("sym")).unwrap();
        let u = d.universe.as_ref().unwrap();
        assert_eq!(u.names, ["B", "A", "C"]);
        assert_eq!(u.offsets, [0, 2, 4, 5]);
        assert_eq!(d.close.values().as_ref(), &[1.0, 2.0, 10.0, 11.0, 100.0]);
        let syms: Vec<_> = d.batches[0]
            .column(0)
            .as_string::<i32>()
            .iter()
            .flatten()
            .collect();
        assert_eq!(syms, ["B", "B", "A", "A", "C"]);
    }

    #[test]
    fn grouped_uploads_are_kept_as_they_are() {
        let b1 = keyed(Arc::new(Int64Array::from(vec![7, 7])), vec![1.0, 2.0]);
        let b2 = keyed(Arc::new(Int64Array::from(vec![7, 3])), vec![3.0, 4.0]);
        let d = build(vec![b1, b2], Some("sym")).unwrap();
        assert_eq!(d.batches.len(), 2, "no reorder");
        let u = d.universe.unwrap();
        assert_eq!(
            (u.names, u.offsets),
            (vec!["7".into(), "3".into()], vec![0, 3, 4])
        );
    }

    #[test]
    fn keyed_refusals_name_the_series_and_row() {
        let strings = |v: Vec<Option<&str>>| Arc::new(StringArray::from(v)) as ArrayRef;
        let e = build(
            vec![keyed(
                strings(vec![Some("A"), Some("B"), Some("A")]),
                vec![1.0, 2.0, -1.0],
            )],
            Some("sym"),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "column `close` series \"A\" row 1 (upload row 2): is <= 0"
        );
        let e = build(
            vec![keyed(strings(vec![Some("A"), None]), vec![1.0, 2.0])],
            Some("sym"),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "key column `sym` row 1: is null");
        let e = build(vec![keyed(strings(vec![Some("")]), vec![1.0])], Some("sym")).unwrap_err();
        assert!(e.to_string().contains("is empty"), "{e}");
        let e = build(
            vec![keyed(strings(vec![Some("A")]), vec![1.0])],
            Some("nope"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("not in the schema"), "{e}");
        let e = build(
            vec![keyed(strings(vec![Some("A")]), vec![1.0])],
            Some("close"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("has type Float64"), "{e}");
    }
}
