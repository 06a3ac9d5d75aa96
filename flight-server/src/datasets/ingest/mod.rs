//! Turning an uploaded Flight stream into a validated [`NewDataset`], or a precise error: the
//! message loop and its decoder here, the rows' validation and accumulation in [`series`], the
//! grouping of a keyed upload into series in [`keys`].
//!
//! Used by DoPut and by the stateless DoExchange sweep, and by the store for files read back at
//! start ([`assemble`]). Nothing is stored here: each validated batch goes to the caller's
//! [`UploadSink`] as it arrives (a durable store's staged file), and the caller stores the
//! dataset only once the whole stream has arrived and passed, so a failed upload leaves no
//! trace.
//!
//! A keyed upload (v1.1) is grouped into series by its key column: series in order of first
//! appearance, rows within a series in arrival order. Uploads that arrive grouped already (one
//! run per key, the usual output of a `group_by` or a sort) are kept as they are; interleaved
//! ones are reordered once, at the end, with one stable gather per column.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_buffer::Buffer;
use arrow_flight::FlightData;
use arrow_flight::error::FlightError;
use arrow_ipc::MessageHeader;
use arrow_schema::{DataType, Schema, SchemaRef};
use futures::{Stream, StreamExt};

use crate::datasets::{NewDataset, UploadSink};
use crate::{Error, Result};

mod keys;
mod series;

pub(crate) use series::UploadLimits;
use series::{Close, SeriesBuilder};

/// Reads a whole upload: the schema, then every batch, validating as it goes; with `key`, the
/// rows are grouped into series by that column. Each validated batch also goes to `sink` as it
/// arrives (a durable put's staged file is written while the network delivers).
///
/// # Errors
/// [`Error::InvalidArgument`] / [`Error::BadValue`] for a stream that breaks the dataset rules,
/// [`Error::ResourceExhausted`] past `limits` or on a full disk, or the client's own stream
/// error. What the sink holds is then the caller's to abort.
pub(crate) async fn read_upload<S>(
    stream: S,
    limits: UploadLimits,
    key: Option<&str>,
    sink: &mut dyn UploadSink,
) -> Result<NewDataset>
where
    S: Stream<Item = std::result::Result<FlightData, FlightError>> + Send + 'static,
{
    let mut stream = Box::pin(stream);
    let mut decoder: Option<Decoder> = None;
    read_messages(&mut stream, &mut decoder, limits, key, sink).await?;
    let decoder =
        decoder.ok_or_else(|| Error::invalid("empty upload: the stream carried no schema"))?;
    // The whole-column work of the end (the bar rules over every row, a universe's grouping)
    // takes tens of milliseconds on a large upload: off the runtime's workers, which serve
    // every other call meanwhile (an upload driven without a runtime, as the fuzz targets
    // drive one, finishes where it is).
    let builder = decoder.builder;
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => runtime
            .spawn_blocking(move || builder.finish())
            .await
            .map_err(|e| Error::Internal(format!("finishing the upload failed: {e}")))?,
        Err(_) => builder.finish(),
    }
}

/// Feeds every message of `stream` to the decoder (made from the schema message).
async fn read_messages<S>(
    stream: &mut std::pin::Pin<Box<S>>,
    decoder: &mut Option<Decoder>,
    limits: UploadLimits,
    key: Option<&str>,
    sink: &mut dyn UploadSink,
) -> Result<()>
where
    S: Stream<Item = std::result::Result<FlightData, FlightError>> + Send + 'static,
{
    while let Some(msg) = stream.next().await {
        let msg = msg?;
        // Messages with only app_metadata carry no data.
        if msg.data_header.is_empty() {
            continue;
        }
        let message = arrow_ipc::root_as_message(&msg.data_header).map_err(|e| {
            Error::invalid(format!("invalid Flight stream: malformed IPC message: {e}"))
        })?;
        match message.header_type() {
            MessageHeader::Schema => {
                if decoder.is_some() {
                    return Err(Error::invalid(
                        "invalid Flight stream: a second schema in one upload",
                    ));
                }
                let schema = Schema::try_from(&msg).map_err(Error::ClientData)?;
                let mut d = Decoder::new(Arc::new(schema), limits, key)?;
                sink.open(&d.builder.schema, key)?;
                d.builder.emit = sink.wants_batches();
                *decoder = Some(d);
            }
            MessageHeader::DictionaryBatch => decoder
                .as_mut()
                .ok_or_else(|| {
                    Error::invalid("invalid Flight stream: a dictionary before the schema")
                })?
                .dictionary(&msg, &message)?,
            MessageHeader::RecordBatch => {
                let d = decoder.as_mut().ok_or_else(|| {
                    Error::invalid("invalid Flight stream: a record batch before the schema")
                })?;
                if let Some(batch) = d.batch(&msg, &message)? {
                    sink.write(batch).await?;
                }
            }
            other => {
                return Err(Error::invalid(format!(
                    "invalid Flight stream: unexpected IPC message {}",
                    other.variant_name().unwrap_or("UNKNOWN")
                )));
            }
        }
    }
    Ok(())
}

/// Decodes an upload's IPC messages into a [`SeriesBuilder`].
///
/// The close column usually dominates an upload, and its values arrive at an arbitrary offset
/// in each message (after the protobuf framing), so a general decoder would copy each message
/// into a fresh aligned buffer before anything else copies it again. Here a float64 `close`
/// without nulls, in a schema whose columns up to it are flat, is read straight from the
/// message into the upload's close column (one copy), and only the other columns go through
/// arrow's decoder. Anything else takes the general path.
struct Decoder {
    schema: SchemaRef,
    builder: SeriesBuilder,
    dictionaries: HashMap<i64, ArrayRef>,
    /// Where the close column's node and values buffer are in each message, when the fast path
    /// applies.
    close_layout: Option<(usize, usize)>,
    /// Every column but `close`.
    others: Vec<usize>,
}

impl Decoder {
    fn new(schema: SchemaRef, limits: UploadLimits, key: Option<&str>) -> Result<Self> {
        let builder = SeriesBuilder::new(&schema, limits, key)?;
        let close = builder.close_index;
        let close_layout = (schema.field(close).data_type() == &DataType::Float64)
            .then(|| {
                // Buffers of each column before `close`; None for a column whose layout has
                // children or variadic buffers (the general path handles those).
                let mut buffers = 0;
                for f in &schema.fields()[..close] {
                    buffers += match f.data_type() {
                        t if t.is_primitive() || t == &DataType::Boolean => 2,
                        DataType::Utf8
                        | DataType::LargeUtf8
                        | DataType::Binary
                        | DataType::LargeBinary => 3,
                        DataType::FixedSizeBinary(_) | DataType::Null => 2,
                        DataType::Dictionary(k, _) if k.is_integer() => 2,
                        _ => return None,
                    };
                }
                // The close node is the close field's; its values follow its validity buffer.
                Some((close, buffers + 1))
            })
            .flatten();
        let others = (0..schema.fields().len()).filter(|&i| i != close).collect();
        Ok(Self {
            schema,
            builder,
            dictionaries: HashMap::new(),
            close_layout,
            others,
        })
    }

    fn dictionary(&mut self, msg: &FlightData, message: &arrow_ipc::Message<'_>) -> Result<()> {
        let batch = message.header_as_dictionary_batch().ok_or_else(|| {
            Error::invalid("invalid Flight stream: a dictionary message without its batch")
        })?;
        arrow_ipc::reader::read_dictionary_impl(
            &Buffer::from(msg.data_body.clone()),
            batch,
            &self.schema,
            &mut self.dictionaries,
            &message.version(),
            false,
            Default::default(),
        )
        .map_err(Error::ClientData)
    }

    /// Takes one record batch message; the validated batch, when a sink wants it.
    fn batch(
        &mut self,
        msg: &FlightData,
        message: &arrow_ipc::Message<'_>,
    ) -> Result<Option<RecordBatch>> {
        let header = message.header_as_record_batch().ok_or_else(|| {
            Error::invalid("invalid Flight stream: a record batch message without its batch")
        })?;
        let body = Buffer::from(msg.data_body.clone());
        let decode = |projection: Option<&[usize]>| {
            arrow_ipc::reader::RecordBatchDecoder::try_new(
                &body,
                header,
                Arc::clone(&self.schema),
                &self.dictionaries,
                &message.version(),
            )
            .map_err(Error::ClientData)?
            .with_projection(projection)
            .with_require_alignment(false)
            .read_record_batch()
            .map_err(Error::ClientData)
        };
        let rows = usize::try_from(header.length())
            .map_err(|_| Error::invalid("invalid Flight stream: a negative row count"))?;
        if let Some(close) = self.fast_close(msg, &header, rows) {
            let others = decode(Some(&self.others))?;
            return self
                .builder
                .push_part(rows, others.columns().to_vec(), close);
        }
        let batch = decode(None)?;
        self.builder.push(batch)
    }

    /// The close values of one message, if the fast path applies to it: a known layout, no
    /// nulls, a values buffer of exactly the batch's length; its bytes as they are, or for a
    /// compressed body (LZ4_FRAME, ZSTD) the compressed buffer, which the column decompresses
    /// into its own memory (no buffer of its own, no second copy).
    fn fast_close<'m>(
        &self,
        msg: &'m FlightData,
        header: &arrow_ipc::RecordBatch<'_>,
        rows: usize,
    ) -> Option<Close<'m>> {
        let (node, buffer) = self.close_layout?;
        let node = header.nodes()?.get(node);
        if node.null_count() != 0 || usize::try_from(node.length()).ok()? != rows {
            return None;
        }
        let b = header.buffers()?.get(buffer);
        // check_ipc_bounds has checked every buffer lies inside the body.
        let (offset, len) = (
            usize::try_from(b.offset()).ok()?,
            usize::try_from(b.length()).ok()?,
        );
        let bytes = &msg.data_body[offset..offset + len];
        let want = rows * size_of::<f64>();
        let Some(compression) = header.compression() else {
            return (len >= want).then(|| Close::Bytes(&bytes[..want]));
        };
        // Arrow's compressed buffer: the uncompressed length (i64, -1: not compressed), then
        // the bytes. Anything else goes to arrow-ipc's decoder, which says what is wrong.
        let (head, rest) = bytes.split_first_chunk::<8>()?;
        match i64::from_le_bytes(*head) {
            -1 => (rest.len() >= want).then(|| Close::Bytes(&rest[..want])),
            n if usize::try_from(n).ok() == Some(want) => Some(Close::Compressed {
                codec: compression.codec(),
                bytes: rest,
                rows,
            }),
            _ => None,
        }
    }
}

/// Builds a dataset from batches already in memory (a file read back at start), with the same
/// checks as an upload.
///
/// # Errors
/// As [`read_upload`].
pub(crate) fn assemble(
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

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Float64Array;
    use arrow_array::cast::AsArray;
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
    fn large_bar_columns_in_several_batches_read_back_whole_and_as_sent() {
        // Batches as large as a big upload's messages: the bar columns go to their mappings
        // from the second batch on.
        let rows = 70_000;
        let price = |b: usize, r: usize| 100.0 + (b * rows + r) as f64 * 1e-3;
        let batches: Vec<RecordBatch> = (0..3)
            .map(|b| {
                let col = |shift: f64| -> ArrayRef {
                    Arc::new(Float64Array::from_iter_values(
                        (0..rows).map(|r| price(b, r) + shift),
                    ))
                };
                batch(vec![
                    ("open", col(0.0)),
                    ("high", col(1.0)),
                    ("low", col(-1.0)),
                    ("close", col(0.5)),
                    ("volume", col(0.0)),
                ])
            })
            .collect();
        let d = build(batches, None).unwrap();
        assert!(d.bars.unusable.is_empty(), "{:?}", d.bars.unusable);
        let whole = |shift: f64| -> Vec<f64> {
            (0..3)
                .flat_map(|b| (0..rows).map(move |r| price(b, r) + shift))
                .collect()
        };
        for (column, shift) in [
            (&d.bars.open, 0.0),
            (&d.bars.high, 1.0),
            (&d.bars.low, -1.0),
            (&d.bars.volume, 0.0),
        ] {
            assert_eq!(column.as_ref().unwrap().values().as_ref(), whole(shift));
        }
        assert_eq!(d.close.values().as_ref(), whole(0.5));
        // Each stored batch holds its rows as sent.
        let high: &Float64Array = d.batches[2].column(1).as_primitive();
        assert_eq!(high.values().as_ref(), &whole(1.0)[2 * rows..]);
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
    fn dictionary_keys_of_any_index_type_group_like_text() {
        use arrow_array::DictionaryArray;
        use arrow_array::types::{Int8Type, UInt16Type};
        let want_names = ["B", "A", "C"];
        let closes = vec![1.0, 2.0, 10.0, 3.0, 100.0, 11.0];
        let keys = ["B", "B", "A", "B", "C", "A"];
        let small: DictionaryArray<Int8Type> = keys.iter().copied().collect();
        let wide: DictionaryArray<UInt16Type> = keys.iter().copied().collect();
        for col in [Arc::new(small) as ArrayRef, Arc::new(wide) as ArrayRef] {
            let d = build(vec![keyed(col, closes.clone())], Some("sym")).unwrap();
            let u = d.universe.as_ref().unwrap();
            assert_eq!(u.names, want_names);
            assert_eq!(u.offsets, [0, 3, 5, 6]);
            assert_eq!(
                d.close.values().as_ref(),
                &[1.0, 2.0, 3.0, 10.0, 11.0, 100.0]
            );
        }
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
