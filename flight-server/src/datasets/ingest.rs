//! Turning an uploaded Flight stream into a validated [`NewDataset`], or a precise error.
//!
//! Used by DoPut and by the stateless DoExchange sweep, and by [`crate::datasets::persist`] for files read
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
use arrow_array::{
    Array, ArrayRef, Float64Array, RecordBatch, UInt32Array, downcast_dictionary_array,
};
use arrow_buffer::{ArrowNativeType, Buffer};
use arrow_flight::FlightData;
use arrow_flight::error::FlightError;
use arrow_ipc::MessageHeader;
use arrow_schema::{DataType, Schema, SchemaRef};
use futures::{Stream, StreamExt};

use crate::datasets::mapping::Mapping;
use crate::datasets::persist::{DataDir, Staged, StagedFile, upload_file_schema};
use crate::datasets::{
    NewDataset, RowOf, Universe, bad_close, close_column, close_index, first_bad_close,
    first_bad_value, widened_schema,
};
use crate::{Error, Result};

/// Limits an upload is checked against while it streams in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UploadLimits {
    /// Largest accepted dataset, in bytes of decoded Arrow data.
    pub max_bytes: u64,
}

impl UploadLimits {
    /// No limit (files the server wrote itself).
    pub(crate) const NONE: Self = Self {
        max_bytes: u64::MAX,
    };
}

/// Reads a whole upload: the schema, then every batch, validating as it goes; with `key`, the
/// rows are grouped into series by that column. With a data directory, each validated batch is
/// also written to a staged file as it arrives (by a blocking thread, so the network and the
/// disk overlap), and the staged file, fsynced, comes back with the dataset.
///
/// # Errors
/// [`Error::InvalidArgument`] / [`Error::BadValue`] for a stream that breaks the dataset rules,
/// [`Error::ResourceExhausted`] past `limits` or on a full disk, or the client's own stream
/// error. A staged file is deleted on any error.
pub(crate) async fn read_upload<S>(
    stream: S,
    limits: UploadLimits,
    key: Option<&str>,
    disk: Option<Arc<DataDir>>,
) -> Result<(NewDataset, Option<Staged>)>
where
    S: Stream<Item = std::result::Result<FlightData, FlightError>> + Send + 'static,
{
    let mut stream = Box::pin(stream);
    let mut decoder: Option<Decoder> = None;
    let read = read_messages(&mut stream, &mut decoder, limits, key, disk.as_ref()).await;
    let decoder = match (read, decoder) {
        (Ok(()), Some(d)) => d,
        (Ok(()), None) => return Err(Error::invalid("empty upload: the stream carried no schema")),
        (Err(e), d) => {
            // Remove a partial file before answering: a refused upload leaves no trace.
            if let Some(sink) = d.and_then(|d| d.sink) {
                sink.abort().await;
            }
            return Err(e);
        }
    };
    let Decoder { builder, sink, .. } = decoder;
    let dataset = match builder.finish() {
        Ok(d) => d,
        Err(e) => {
            if let Some(sink) = sink {
                sink.abort().await;
            }
            return Err(e);
        }
    };
    let staged = match sink {
        Some(sink) => Some(sink.finish().await?),
        None => None,
    };
    Ok((dataset, staged))
}

/// Feeds every message of `stream` to the decoder (made from the schema message).
async fn read_messages<S>(
    stream: &mut std::pin::Pin<Box<S>>,
    decoder: &mut Option<Decoder>,
    limits: UploadLimits,
    key: Option<&str>,
    disk: Option<&Arc<DataDir>>,
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
                if let Some(disk) = disk {
                    let file_schema = upload_file_schema(&d.builder.schema, key);
                    d.sink = Some(FileSink::start(disk.create(&file_schema)?));
                    d.builder.emit = true;
                }
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
                if let Some(batch) = d.batch(&msg, &message)?
                    && let Some(sink) = &mut d.sink
                {
                    sink.send(batch).await?;
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

/// A staged file written by a blocking thread from a bounded queue of batches.
struct FileSink {
    tx: tokio::sync::mpsc::Sender<RecordBatch>,
    /// Tells the writer to drop its file instead of finishing it.
    aborted: Arc<std::sync::atomic::AtomicBool>,
    /// The writer; taken when awaited.
    done: Option<tokio::task::JoinHandle<Result<Staged>>>,
}

impl FileSink {
    fn start(mut file: StagedFile) -> Self {
        // A few batches in flight: enough to keep the disk busy while the network delivers.
        let (tx, mut rx) = tokio::sync::mpsc::channel::<RecordBatch>(4);
        let aborted = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop = Arc::clone(&aborted);
        let done = tokio::task::spawn_blocking(move || {
            while let Some(batch) = rx.blocking_recv() {
                file.write(&batch)?;
            }
            if stop.load(std::sync::atomic::Ordering::SeqCst) {
                // Dropping the file deletes it.
                return Err(Error::Internal("upload abandoned".into()));
            }
            file.finish()
        });
        Self {
            tx,
            aborted,
            done: Some(done),
        }
    }

    /// Stops the writer and waits until its file is deleted.
    async fn abort(mut self) {
        self.aborted
            .store(true, std::sync::atomic::Ordering::SeqCst);
        drop(self.tx);
        if let Some(done) = self.done.take() {
            let _ = done.await;
        }
    }

    async fn send(&mut self, batch: RecordBatch) -> Result<()> {
        if self.tx.send(batch).await.is_ok() {
            return Ok(());
        }
        // The writer stops at its first error (a full disk, say) and drops the queue: that
        // error is the upload's.
        match self.join().await {
            Err(e) => Err(e),
            Ok(_) => Err(Error::Internal(
                "the dataset file writer stopped early".into(),
            )),
        }
    }

    async fn finish(mut self) -> Result<Staged> {
        let (tx, _) = tokio::sync::mpsc::channel(1);
        drop(std::mem::replace(&mut self.tx, tx));
        self.join().await
    }

    async fn join(&mut self) -> Result<Staged> {
        let done = self
            .done
            .take()
            .ok_or_else(|| Error::Internal("the dataset file writer was already joined".into()))?;
        done.await
            .map_err(|e| Error::internal("the dataset file writer", e))?
    }
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
    /// The staged file, for a durable put.
    sink: Option<FileSink>,
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
            sink: None,
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

/// Bytes of Arrow data a batch holds. Counts only the rows it covers: a decoded message's
/// columns share one body buffer, and stored batches share one close buffer, so per-array
/// capacities would count the same memory many times over.
pub(crate) fn batch_bytes(batch: &RecordBatch) -> u64 {
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

/// Accumulates validated batches, their widened closes and (keyed) each row's series.
///
/// Each batch's closes are copied once, into the upload's one contiguous close column
/// ([`CloseColumn`]), and the batch keeps only its other columns: a close-only upload's message
/// buffers are freed as soon as they are read, so the allocator hands the same memory to the
/// next message instead of faulting in fresh pages for every one.
struct SeriesBuilder {
    limits: UploadLimits,
    schema: SchemaRef,
    close_index: usize,
    /// Each batch's row count and its columns but `close`.
    parts: Vec<(usize, Vec<ArrayRef>)>,
    closes: CloseColumn,
    rows: usize,
    bytes: u64,
    keys: Option<KeyGrouper>,
    /// Hand each batch back, whole, for a staged file.
    emit: bool,
}

impl SeriesBuilder {
    fn new(schema: &SchemaRef, limits: UploadLimits, key: Option<&str>) -> Result<Self> {
        let close_index = close_index(schema)?;
        let keys = key.map(|k| KeyGrouper::new(schema, k)).transpose()?;
        // Sweepflight's own file metadata is not part of the dataset's schema.
        let mut stored = widened_schema(schema, close_index);
        stored.metadata.remove(crate::datasets::KEY_METADATA);
        Ok(Self {
            closes: CloseColumn::new(limits.max_bytes),
            limits,
            schema: Arc::new(stored),
            close_index,
            parts: Vec::new(),
            rows: 0,
            bytes: 0,
            keys,
            emit: false,
        })
    }

    /// A whole decoded batch (a file read back, or the general decoding path); the batch back,
    /// close widened, if `emit`.
    fn push(&mut self, batch: RecordBatch) -> Result<Option<RecordBatch>> {
        let close = close_column(&batch, self.close_index)?;
        let mut others = batch.columns().to_vec();
        others.remove(self.close_index);
        self.push_part(batch.num_rows(), others, Close::Array(close))
    }

    /// One batch: its row count, its columns but `close`, and its closes; the whole batch back,
    /// close widened, if `emit`.
    fn push_part(
        &mut self,
        rows: usize,
        others: Vec<ArrayRef>,
        close: Close<'_>,
    ) -> Result<Option<RecordBatch>> {
        let other_bytes: u64 = others
            .iter()
            .map(|c| c.to_data().get_slice_memory_size().unwrap_or(0) as u64)
            .sum();
        self.bytes += other_bytes + (rows * size_of::<f64>()) as u64;
        if self.bytes > self.limits.max_bytes {
            return Err(Error::ResourceExhausted(format!(
                "dataset exceeds the server's limit of {} bytes (--max-dataset-bytes)",
                self.limits.max_bytes
            )));
        }
        if let Some(keys) = &mut self.keys {
            // The key column's place among the other columns.
            let at = keys.index - usize::from(keys.index > self.close_index);
            keys.push(&others[at], self.rows)?;
        }
        let bad = match close {
            Close::Array(array) => {
                let bad = first_bad_close(&array);
                self.closes.push(array)?;
                bad
            }
            Close::Bytes(bytes) => first_bad_value(self.closes.push_bytes(bytes)?),
            Close::Compressed { codec, bytes, rows } => first_bad_value(
                self.closes
                    .push_with(rows, |dst| decompress(codec, bytes, dst))?,
            ),
        };
        if let Some((row, problem)) = bad {
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
        self.rows += rows;
        let whole = if self.emit {
            let mut columns = others.clone();
            let close = Float64Array::from(self.closes.tail(rows).to_vec());
            columns.insert(self.close_index, Arc::new(close));
            Some(
                RecordBatch::try_new_with_options(
                    Arc::clone(&self.schema),
                    columns,
                    &arrow_array::RecordBatchOptions::new().with_row_count(Some(rows)),
                )
                .map_err(|e| Error::internal("rebuild a batch", e))?,
            )
        } else {
            None
        };
        self.parts.push((rows, others));
        Ok(whole)
    }

    fn finish(self) -> Result<NewDataset> {
        if self.rows == 0 {
            return Err(Error::invalid(
                "a dataset needs at least 1 row; the upload had 0",
            ));
        }
        let close = self.closes.finish()?;
        let mut offset = 0;
        let batches = self
            .parts
            .into_iter()
            .map(|(rows, mut columns)| {
                // The stored batch's close column is a zero-copy slice of the contiguous column.
                columns.insert(self.close_index, Arc::new(close.slice(offset, rows)));
                offset += rows;
                RecordBatch::try_new_with_options(
                    Arc::clone(&self.schema),
                    columns,
                    &arrow_array::RecordBatchOptions::new().with_row_count(Some(rows)),
                )
                .map_err(|e| Error::internal("rebuild a batch", e))
            })
            .collect::<Result<Vec<_>>>()?;
        let stored = StoredRows {
            schema: self.schema,
            close_index: self.close_index,
            batches,
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
        NewDataset {
            bytes: self.batches.iter().map(batch_bytes).sum(),
            schema: self.schema,
            batches: self.batches,
            close: self.close,
            universe,
        }
    }
}

/// Closes of one upload this size or smaller are gathered in heap memory; larger ones in a
/// reserved mapping (see [`CloseColumn`]).
const HEAP_CLOSES: usize = 2 << 20;

/// An upload's close column, contiguous, filled one batch at a time.
///
/// A single batch's column is kept as it is (no copy: a file read back at start, or a small
/// put in one message). From the second batch on, values are copied in: into a `Vec` while the
/// column is small, and past [`HEAP_CLOSES`] values into an anonymous mapping reserved for the
/// largest dataset the server accepts, so the column grows in place without the copies of a
/// doubling buffer; only the pages written become memory, and the unused tail is unmapped at
/// the end.
struct CloseColumn {
    max_bytes: u64,
    storage: Storage,
}

enum Storage {
    Empty,
    Single(Float64Array),
    Heap(Vec<f64>),
    Mapped(Mapping, usize),
}

impl CloseColumn {
    fn new(max_bytes: u64) -> Self {
        Self {
            max_bytes,
            storage: Storage::Empty,
        }
    }

    fn push(&mut self, close: Float64Array) -> Result<()> {
        let storage = std::mem::replace(&mut self.storage, Storage::Empty);
        self.storage = match storage {
            Storage::Empty => Storage::Single(close),
            Storage::Single(first) => {
                let values = first.values();
                self.grow(
                    Vec::with_capacity(values.len() + close.len()),
                    values,
                    close.values(),
                )?
            }
            Storage::Heap(v) => self.grow(v, &[], close.values())?,
            Storage::Mapped(mut m, len) => {
                let len = m.append(len, close.values())?;
                Storage::Mapped(m, len)
            }
        };
        Ok(())
    }

    /// Appends little-endian f64 `bytes` (at any alignment); the values just appended.
    ///
    /// The first message's values go to an exact-size heap vector (a small put is usually one
    /// message); a second message means a larger upload, which moves to a mapping at once
    /// rather than growing (and copying) a vector.
    fn push_bytes(&mut self, bytes: &[u8]) -> Result<&[f64]> {
        let n = bytes.len() / size_of::<f64>();
        let storage = std::mem::replace(&mut self.storage, Storage::Empty);
        self.storage = match storage {
            Storage::Empty => {
                let mut v = Vec::with_capacity(n);
                extend_from_bytes(&mut v, bytes);
                Storage::Heap(v)
            }
            Storage::Mapped(mut m, len) => {
                let end = m.append_bytes(len, bytes)?;
                Storage::Mapped(m, end)
            }
            Storage::Single(_) | Storage::Heap(_) => {
                let prefix: &[f64] = match &storage {
                    Storage::Single(a) => a.values(),
                    Storage::Heap(v) => v,
                    _ => unreachable!("matched above"),
                };
                let mut m = Mapping::reserve(self.max_bytes)?;
                let len = m.append(0, prefix)?;
                let end = m.append_bytes(len, bytes)?;
                Storage::Mapped(m, end)
            }
        };
        Ok(self.tail(n))
    }

    /// Appends `n` values that `fill` writes as little-endian bytes, at the end of the column
    /// (in a mapping from the second message on, as [`Closes::push_bytes`]); the values just
    /// appended.
    fn push_with(
        &mut self,
        n: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<()>,
    ) -> Result<&[f64]> {
        let storage = std::mem::replace(&mut self.storage, Storage::Empty);
        self.storage = match storage {
            Storage::Empty => {
                let mut v = vec![0.0f64; n];
                // SAFETY: the bytes of `n` initialised f64s; any bit pattern is an f64.
                let bytes = unsafe {
                    std::slice::from_raw_parts_mut(
                        v.as_mut_ptr().cast::<u8>(),
                        n * size_of::<f64>(),
                    )
                };
                fill(bytes)?;
                Storage::Heap(v)
            }
            Storage::Mapped(mut m, len) => {
                let end = m.append_with(len, n, fill)?;
                Storage::Mapped(m, end)
            }
            Storage::Single(_) | Storage::Heap(_) => {
                let prefix: &[f64] = match &storage {
                    Storage::Single(a) => a.values(),
                    Storage::Heap(v) => v,
                    _ => unreachable!("matched above"),
                };
                let mut m = Mapping::reserve(self.max_bytes)?;
                let len = m.append(0, prefix)?;
                let end = m.append_with(len, n, fill)?;
                Storage::Mapped(m, end)
            }
        };
        Ok(self.tail(n))
    }

    /// The last `n` values.
    fn tail(&self, n: usize) -> &[f64] {
        let all: &[f64] = match &self.storage {
            Storage::Empty => &[],
            Storage::Single(a) => a.values(),
            Storage::Heap(v) => v,
            Storage::Mapped(m, len) => m.values(*len),
        };
        &all[all.len() - n..]
    }

    /// Appends `a` then `b` to the heap vector, moving to a mapping past [`HEAP_CLOSES`].
    fn grow(&self, mut v: Vec<f64>, a: &[f64], b: &[f64]) -> Result<Storage> {
        if v.len() + a.len() + b.len() <= HEAP_CLOSES {
            v.extend_from_slice(a);
            v.extend_from_slice(b);
            return Ok(Storage::Heap(v));
        }
        let mut m = Mapping::reserve(self.max_bytes)?;
        let mut len = m.append(0, &v)?;
        len = m.append(len, a)?;
        len = m.append(len, b)?;
        Ok(Storage::Mapped(m, len))
    }

    fn finish(self) -> Result<Float64Array> {
        Ok(match self.storage {
            Storage::Empty => Float64Array::from(Vec::<f64>::new()),
            Storage::Single(a) => a,
            Storage::Heap(v) => Float64Array::from(v),
            Storage::Mapped(m, len) => m.finish(len),
        })
    }
}

/// Appends little-endian f64 `bytes` (at any alignment) to `v`.
fn extend_from_bytes(v: &mut Vec<f64>, bytes: &[u8]) {
    v.extend(
        bytes
            .chunks_exact(size_of::<f64>())
            .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes"))),
    );
}

/// A batch's closes: decoded, the raw bytes of a message's values buffer, or that buffer
/// compressed.
enum Close<'a> {
    Array(Float64Array),
    Bytes(&'a [u8]),
    Compressed {
        codec: arrow_ipc::CompressionType,
        bytes: &'a [u8],
        rows: usize,
    },
}

/// Decompresses one IPC buffer body (`src`, after its length prefix) into `dst`, which must
/// come out exactly full.
///
/// # Errors
/// [`Error::InvalidArgument`] for a body that does not decode to `dst.len()` bytes, or a
/// codec the server cannot read (the client's data, not a server fault).
fn decompress(codec: arrow_ipc::CompressionType, src: &[u8], dst: &mut [u8]) -> Result<()> {
    use std::io::Read;
    let bad = |e: &dyn std::fmt::Display| {
        Error::invalid(format!(
            "invalid Arrow data: the close column's {} body does not decode: {e}",
            codec.variant_name().unwrap_or("compressed")
        ))
    };
    match codec {
        arrow_ipc::CompressionType::LZ4_FRAME => {
            let mut frames = lz4_flex::frame::FrameDecoder::new(src);
            frames.read_exact(dst).map_err(|e| bad(&e))?;
            // Nothing may follow the values (a longer frame is a broken header).
            let mut more = [0u8; 1];
            if frames.read(&mut more).map_err(|e| bad(&e))? != 0 {
                return Err(bad(&"more bytes than the batch's rows"));
            }
        }
        arrow_ipc::CompressionType::ZSTD => {
            let n = zstd::bulk::Decompressor::new()
                .and_then(|mut d| d.decompress_to_buffer(src, dst))
                .map_err(|e| bad(&e))?;
            if n != dst.len() {
                return Err(bad(&format!("{n} bytes for {} expected", dst.len())));
            }
        }
        other => {
            return Err(Error::invalid(format!(
                "IPC body compression {other:?} is not supported: send LZ4_FRAME, ZSTD or none"
            )));
        }
    }
    Ok(())
}

/// A key value, as hashed for grouping.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum KeyValue {
    Text(String),
    Int(i128),
}

/// Assigns each row of a keyed upload its series, in order of first appearance.
///
/// Rows are recorded as runs of equal keys: a key is hashed once per run, not once per row, and
/// an upload grouped by key (the usual output of a `group_by` or a sort) costs one comparison
/// per row and a handful of runs.
struct KeyGrouper {
    column: String,
    /// The key column's index in the schema.
    index: usize,
    groups: HashMap<KeyValue, u32>,
    names: Vec<String>,
    /// Runs of equal keys in arrival order: (series, rows). As many as the series iff the
    /// upload is grouped.
    runs: Vec<(u32, usize)>,
}

/// Runs of equal neighbours: (value, first index, length).
fn runs_of<T: PartialEq>(values: impl Iterator<Item = T>) -> Vec<(T, usize, usize)> {
    let mut runs: Vec<(T, usize, usize)> = Vec::new();
    for (i, v) in values.enumerate() {
        match runs.last_mut() {
            Some((last, _, len)) if *last == v => *len += 1,
            _ => runs.push((v, i, 1)),
        }
    }
    runs
}

/// [`runs_of`] for a slice of plain values: each run's end found by a tight scan, as key
/// columns hold long runs (a series is thousands of rows).
fn slice_runs<T: PartialEq + Copy>(values: &[T]) -> Vec<(T, usize, usize)> {
    let mut runs = Vec::new();
    let mut at = 0;
    while let Some(&v) = values.get(at) {
        let len = values[at..]
            .iter()
            .position(|&x| x != v)
            .unwrap_or(values.len() - at);
        runs.push((v, at, len));
        at += len;
    }
    runs
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
            runs: Vec::new(),
        })
    }

    /// Assigns the rows of a batch's key column `col` (the upload's rows `first_row..`).
    fn push(&mut self, col: &ArrayRef, first_row: usize) -> Result<()> {
        if let Some(nulls) = col.logical_nulls()
            && let Some(row) = (0..col.len()).find(|&i| nulls.is_null(i))
        {
            return Err(Error::invalid(format!(
                "key column `{}` row {}: is null",
                self.column,
                first_row + row
            )));
        }
        match col.data_type() {
            DataType::Utf8 => self.push_texts(runs_of(col.as_string::<i32>().iter()), first_row),
            DataType::LargeUtf8 => {
                self.push_texts(runs_of(col.as_string::<i64>().iter()), first_row)
            }
            DataType::Utf8View => self.push_texts(runs_of(col.as_string_view().iter()), first_row),
            DataType::Dictionary(..) => {
                let dict = col.as_any_dictionary();
                let values = arrow_cast::cast(dict.values(), &DataType::Utf8)
                    .map_err(|e| Error::internal("read the key dictionary", e))?;
                let values = values.as_string::<i32>();
                // Runs of equal dictionary indexes, read in their own integer type (widening
                // them first would allocate eight bytes a row), then each run's text. The
                // decoder has checked every index against the dictionary.
                let index_runs: Vec<(usize, usize, usize)> = downcast_dictionary_array!(
                    col => slice_runs(col.keys().values())
                        .into_iter()
                        .map(|(k, at, len)| (k.as_usize(), at, len))
                        .collect(),
                    t => unreachable!("matched a dictionary, not {t}")
                );
                let runs = index_runs
                    .into_iter()
                    .map(|(k, at, len)| (values.is_valid(k).then(|| values.value(k)), at, len))
                    .collect();
                self.push_texts(runs, first_row)
            }
            DataType::UInt64 => {
                let ints = col.as_primitive::<UInt64Type>().values().iter();
                self.push_ints(runs_of(ints.map(|&v| i128::from(v))));
                Ok(())
            }
            _ => {
                let ints = arrow_cast::cast(col, &DataType::Int64)
                    .map_err(|e| Error::internal("widen the key column", e))?;
                let ints = ints.as_primitive::<Int64Type>().values().iter();
                self.push_ints(runs_of(ints.map(|&v| i128::from(v))));
                Ok(())
            }
        }
    }

    fn push_texts(
        &mut self,
        runs: Vec<(Option<&str>, usize, usize)>,
        first_row: usize,
    ) -> Result<()> {
        for (text, at, len) in runs {
            let text = match text {
                Some("") | None => {
                    return Err(Error::invalid(format!(
                        "key column `{}` row {}: is {}",
                        self.column,
                        first_row + at,
                        if text.is_none() { "null" } else { "empty" }
                    )));
                }
                Some(t) => t,
            };
            let id = self.id_of(KeyValue::Text(text.to_owned()), || text.to_owned());
            self.record(id, len);
        }
        Ok(())
    }

    fn push_ints(&mut self, runs: Vec<(i128, usize, usize)>) {
        for (v, _, len) in runs {
            let id = self.id_of(KeyValue::Int(v), || v.to_string());
            self.record(id, len);
        }
    }

    fn id_of(&mut self, key: KeyValue, name: impl FnOnce() -> String) -> u32 {
        let next = self.names.len() as u32;
        *self.groups.entry(key).or_insert_with(|| {
            self.names.push(name());
            next
        })
    }

    fn record(&mut self, id: u32, rows: usize) {
        match self.runs.last_mut() {
            Some((last, len)) if *last == id => *len += rows,
            _ => self.runs.push((id, rows)),
        }
    }

    /// The series of upload row `row`, and the row's index within it.
    fn locate(&self, row: usize) -> (&str, usize) {
        let mut start = 0;
        let mut before: HashMap<u32, usize> = HashMap::new();
        for &(id, len) in &self.runs {
            if row < start + len {
                let within = before.get(&id).copied().unwrap_or(0) + (row - start);
                return (&self.names[id as usize], within);
            }
            *before.entry(id).or_default() += len;
            start += len;
        }
        unreachable!("row {row} was recorded")
    }

    /// The rows grouped by series (reordered only if they did not arrive grouped).
    fn group(self, rows: StoredRows) -> Result<(StoredRows, Option<Universe>)> {
        let mut counts = vec![0usize; self.names.len()];
        for &(id, len) in &self.runs {
            counts[id as usize] += len;
        }
        let mut offsets = Vec::with_capacity(counts.len() + 1);
        offsets.push(0);
        for c in &counts {
            offsets.push(offsets.last().copied().unwrap_or(0) + c);
        }
        let universe = Universe::new(self.column, self.names, offsets.clone());
        if self.runs.len() == counts.len() {
            return Ok((rows, Some(universe)));
        }
        // A stable counting sort: each series' rows in arrival order.
        let total = offsets.last().copied().unwrap_or(0);
        if u32::try_from(total).is_err() {
            return Err(Error::ResourceExhausted(
                "an interleaved keyed upload is limited to 4,294,967,295 rows; send it grouped by key".into(),
            ));
        }
        let mut next = offsets;
        let mut order = vec![0u32; total];
        let mut row = 0u32;
        for &(id, len) in &self.runs {
            let slot = next[id as usize];
            for (k, o) in order[slot..slot + len].iter_mut().enumerate() {
                *o = row + k as u32;
            }
            next[id as usize] += len;
            row += len as u32;
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
        assert_eq!(
            slice_runs(&[4u8, 4, 4, 1, 4, 4]),
            [(4, 0, 3), (1, 3, 1), (4, 4, 2)]
        );
        assert!(slice_runs::<i16>(&[]).is_empty());
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
