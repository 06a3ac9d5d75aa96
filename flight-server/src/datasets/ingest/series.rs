//! An upload's rows as they are validated and accumulated: the `close` rules checked per
//! batch (the first bad row named, counted over the whole upload and, keyed, within its
//! series), closes widened and copied once into one contiguous column (decompressed straight
//! into it when the client compressed them), the other columns kept per batch.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Float64Type;
use arrow_array::{Array, ArrayRef, Float64Array, RecordBatch, UInt32Array};
use arrow_schema::{DataType, SchemaRef};

use super::keys::KeyGrouper;
use crate::datasets::bars::bar_columns;
use crate::datasets::mapping::Mapping;
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

/// Accumulates validated batches, their widened closes and (keyed) each row's series.
///
/// Each batch's closes are copied once, into the upload's one contiguous close column
/// ([`CloseColumn`]), and the batch keeps only its other columns: a close-only upload's message
/// buffers are freed as soon as they are read, so the allocator hands the same memory to the
/// next message instead of faulting in fresh pages for every one.
pub(super) struct SeriesBuilder {
    limits: UploadLimits,
    pub(super) schema: SchemaRef,
    pub(super) close_index: usize,
    /// Each batch's row count and its columns but `close`.
    parts: Vec<(usize, Vec<ArrayRef>)>,
    closes: CloseColumn,
    rows: usize,
    bytes: u64,
    keys: Option<KeyGrouper>,
    /// Hand each batch back, whole, for a staged file.
    pub(super) emit: bool,
    /// The float64 bar columns (open, high, low, volume) copied into one contiguous column
    /// each as batches arrive, as `close` is.
    bars: Vec<Tracked>,
}

/// A float64 bar column gathered as the upload arrives: each batch's values are appended and
/// the batch keeps an empty placeholder, so a message's buffer is freed once every column of it
/// is copied (an OHLCV upload then reuses its message memory as a close-only one does). A batch
/// with nulls stops the copying: it and the later batches keep their arrays.
struct Tracked {
    /// Index among a batch's columns but `close`.
    index: usize,
    /// Its values so far, in the memory a close column takes (large ones in a pooled mapping).
    values: CloseColumn,
    /// The first batch that kept its array (`None`: none did).
    until: Option<usize>,
}

impl SeriesBuilder {
    pub(super) fn new(schema: &SchemaRef, limits: UploadLimits, key: Option<&str>) -> Result<Self> {
        let close_index = close_index(schema)?;
        let keys = key.map(|k| KeyGrouper::new(schema, k)).transpose()?;
        // Sweepflight's own file metadata is not part of the dataset's schema.
        let mut stored = widened_schema(schema, close_index);
        stored.metadata.remove(crate::datasets::KEY_METADATA);
        let key_index = keys.as_ref().map(|k| k.index);
        let bars = ["open", "high", "low", "volume"]
            .into_iter()
            .filter_map(|name| crate::datasets::bars::recognise(schema, name))
            .filter(|&i| {
                i != close_index
                    && Some(i) != key_index
                    && schema.field(i).data_type() == &DataType::Float64
            })
            .map(|i| Tracked {
                index: i - usize::from(i > close_index),
                values: CloseColumn::new(limits.max_bytes),
                until: None,
            })
            .collect();
        Ok(Self {
            bars,
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
    pub(super) fn push(&mut self, batch: RecordBatch) -> Result<Option<RecordBatch>> {
        let close = close_column(&batch, self.close_index)?;
        let mut others = batch.columns().to_vec();
        others.remove(self.close_index);
        self.push_part(batch.num_rows(), others, Close::Array(close))
    }

    /// One batch: its row count, its columns but `close`, and its closes; the whole batch back,
    /// close widened, if `emit`.
    pub(super) fn push_part(
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
        let mut others = others;
        for t in &mut self.bars {
            if t.until.is_some() {
                continue;
            }
            let column = others[t.index].as_primitive::<Float64Type>();
            if column.null_count() > 0 {
                t.until = Some(self.parts.len());
                continue;
            }
            t.values.push(column.clone())?;
            others[t.index] = arrow_array::new_empty_array(&DataType::Float64);
        }
        self.parts.push((rows, others));
        Ok(whole)
    }

    pub(super) fn finish(self) -> Result<NewDataset> {
        if self.rows == 0 {
            return Err(Error::invalid(
                "a dataset needs at least 1 row; the upload had 0",
            ));
        }
        let close = self.closes.finish()?;
        let close_index = self.close_index;
        let bars: Vec<(usize, Float64Array, Option<usize>)> = self
            .bars
            .into_iter()
            .map(|t| Ok((t.index, t.values.finish()?, t.until)))
            .collect::<Result<_>>()?;
        let mut offset = 0;
        let batches = self
            .parts
            .into_iter()
            .enumerate()
            .map(|(b, (rows, mut columns))| {
                // The stored batch's close column is a zero-copy slice of the contiguous column,
                // and so are the bar columns gathered as they arrived.
                for (index, array, until) in &bars {
                    if until.is_none_or(|u| b < u) {
                        columns[*index] = Arc::new(array.slice(offset, rows));
                    }
                }
                columns.insert(close_index, Arc::new(close.slice(offset, rows)));
                offset += rows;
                RecordBatch::try_new_with_options(
                    Arc::clone(&self.schema),
                    columns,
                    &arrow_array::RecordBatchOptions::new().with_row_count(Some(rows)),
                )
                .map_err(|e| Error::internal("rebuild a batch", e))
            })
            .collect::<Result<Vec<_>>>()?;
        // Whole columns for the sweeps, where every batch holds a slice of one.
        let whole = bars
            .into_iter()
            .filter(|(_, _, until)| until.is_none())
            .map(|(index, array, _)| {
                let at = index + usize::from(index >= close_index);
                (at, Arc::new(array) as ArrayRef)
            })
            .collect();
        let stored = StoredRows {
            schema: self.schema,
            close_index,
            batches,
            close,
            whole,
        };
        let (stored, universe) = match self.keys {
            None => (stored, None),
            Some(keys) => {
                let (universe, order) = keys.grouping()?;
                let stored = match order {
                    None => stored,
                    Some(order) => stored.gathered(&order)?,
                };
                (stored, Some(universe))
            }
        };
        stored.into_dataset(universe)
    }
}

/// Rows as they will be stored: batches and their contiguous close column.
struct StoredRows {
    schema: SchemaRef,
    close_index: usize,
    batches: Vec<RecordBatch>,
    close: Float64Array,
    /// Columns (by schema index) whose batches are consecutive slices of one array: that array.
    whole: Vec<(usize, ArrayRef)>,
}

impl StoredRows {
    /// The rows in `order` (one gather per column), their close column the gathered one.
    fn gathered(self, order: &UInt32Array) -> Result<Self> {
        let all = arrow_select::concat::concat_batches(&self.schema, &self.batches)
            .map_err(|e| Error::internal("concatenate the upload", e))?;
        let grouped = arrow_select::take::take_record_batch(&all, order)
            .map_err(|e| Error::internal("group the upload by key", e))?;
        let close = grouped.column(self.close_index).as_primitive().clone();
        Ok(Self {
            close,
            batches: vec![grouped],
            // One batch now: its columns are whole.
            whole: Vec::new(),
            ..self
        })
    }

    fn into_dataset(mut self, universe: Option<Universe>) -> Result<NewDataset> {
        let bars = bar_columns(
            &self.schema,
            &mut self.batches,
            &self.close,
            universe.as_ref(),
            &self.whole,
        )?;
        Ok(NewDataset {
            bytes: self.batches.iter().map(batch_bytes).sum(),
            schema: self.schema,
            batches: self.batches,
            close: self.close,
            universe,
            bars,
        })
    }
}

/// Closes of one upload this size or smaller are gathered in heap memory; larger ones in a
/// reserved mapping (see [`CloseColumn`]).
const HEAP_CLOSES: usize = 2 << 20;

/// Values of a column's first two decoded messages from which it goes to a mapping at once:
/// an upload sent in messages this large is a large one (a 400 MB OHLCV put's messages hold
/// ~200,000 rows each; doubling a vector to [`HEAP_CLOSES`] first cost four such columns
/// ~128 MB of copies and fresh pages).
const MAPPED_AT_ONCE: usize = 1 << 16;

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
            // Two large messages: a large upload, which goes to a mapping at once (as
            // `push_bytes` does) rather than through a doubling vector's copies and fresh pages.
            Storage::Single(first) if first.len() + close.len() >= MAPPED_AT_ONCE => {
                let (mut m, len) = self.mapped(Storage::Single(first))?;
                let len = m.append(len, close.values())?;
                Storage::Mapped(m, len)
            }
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
            held => {
                let (mut m, len) = self.mapped(held)?;
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
            held => {
                let (mut m, len) = self.mapped(held)?;
                let end = m.append_with(len, n, fill)?;
                Storage::Mapped(m, end)
            }
        };
        Ok(self.tail(n))
    }

    /// The column held so far (not empty) in a mapping, and its length: a mapping as it is, a
    /// first message's values copied into a new one.
    fn mapped(&self, held: Storage) -> Result<(Mapping, usize)> {
        if let Storage::Mapped(m, len) = held {
            return Ok((m, len));
        }
        let prefix: &[f64] = match &held {
            Storage::Single(a) => a.values(),
            Storage::Heap(v) => v,
            Storage::Mapped(..) | Storage::Empty => &[],
        };
        let mut m = Mapping::reserve(self.max_bytes)?;
        let len = m.append(0, prefix)?;
        Ok((m, len))
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
pub(super) enum Close<'a> {
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
