//! The dataset domain: what a stored dataset is, the `close` column rules, and universes (a
//! keyed dataset's series). Uploads ([`ingest`]), files ([`persist`]) and the store
//! ([`store`]) all build on these types; [`mapping`] holds large close columns.

pub(crate) mod bars;
pub(crate) mod ingest;
pub(crate) mod mapping;
pub(crate) mod persist;
pub(crate) mod store;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::{Array, Float64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use futures::future::BoxFuture;

use crate::{Error, Result};

/// The column every dataset must have.
pub(crate) const CLOSE: &str = "close";

/// Schema metadata key under which a keyed dataset's file records its key column.
pub(crate) const KEY_METADATA: &str = "sweepflight.key";

/// Where an upload's validated batches go as they arrive, besides memory: a put's sink from
/// the store ([`store::DatasetStore::begin_put`]: a durable store's staged file), or
/// [`InMemory`] for the stateless exchange's series. Ingest writes to it; whoever made it
/// commits or aborts what it holds.
pub(crate) trait UploadSink: Send {
    /// The upload's schema (`close` widened) is known, before any row; `key` for a universe.
    ///
    /// # Errors
    /// If the sink cannot start (a file that cannot be created).
    fn open(&mut self, schema: &Schema, key: Option<&str>) -> Result<()>;

    /// True if it wants each validated batch (ingest then rebuilds each one whole for it).
    fn wants_batches(&self) -> bool;

    /// One validated batch, in upload order.
    fn write(&mut self, batch: RecordBatch) -> BoxFuture<'_, Result<()>>;
}

/// The sink of an upload kept in memory only.
pub(crate) struct InMemory;

impl UploadSink for InMemory {
    fn open(&mut self, _schema: &Schema, _key: Option<&str>) -> Result<()> {
        Ok(())
    }

    fn wants_batches(&self) -> bool {
        false
    }

    fn write(&mut self, _batch: RecordBatch) -> BoxFuture<'_, Result<()>> {
        Box::pin(std::future::ready(Ok(())))
    }
}

/// A validated upload, before the store gives it a name and a version.
#[derive(Debug)]
pub struct NewDataset {
    /// Schema of the batches (`close` widened to float64).
    pub schema: SchemaRef,
    /// The rows, in stored order (a universe's series after series).
    pub batches: Vec<RecordBatch>,
    /// The close column, contiguous, in stored order; each batch's `close` is a slice of it.
    pub close: Float64Array,
    /// Bytes of Arrow data in the batches.
    pub bytes: u64,
    /// The series of a keyed upload.
    pub universe: Option<Universe>,
    /// The bar columns besides `close` (v1.3): usable ones for sweeps, unusable ones' reasons.
    pub bars: bars::BarColumns,
}

impl NewDataset {
    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.close.len()
    }

    /// The stored rows of series `index` (every row when the dataset is not keyed).
    pub fn range(&self, index: usize) -> std::ops::Range<usize> {
        match &self.universe {
            Some(u) => u.offsets[index]..u.offsets[index + 1],
            None => 0..self.rows(),
        }
    }
}

/// One stored dataset: an upload with its name, version and file. Immutable: a put makes a new
/// one, and sweeps hold an `Arc` to the version they started on.
#[derive(Debug)]
pub struct Dataset {
    /// The dataset's name.
    pub name: String,
    /// 1 for the first put of a name, +1 for each replacement.
    pub version: u64,
    /// Process-unique id of this upload; the kernel cache's key.
    pub id: u64,
    /// Its committed file in the data directory, when there is one.
    pub file: Option<PathBuf>,
    /// The data.
    pub data: NewDataset,
}

impl Dataset {
    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.data.rows()
    }

    /// Bytes of Arrow data.
    pub fn bytes(&self) -> u64 {
        self.data.bytes
    }

    /// The schema of the stored rows.
    pub fn schema(&self) -> &SchemaRef {
        &self.data.schema
    }

    /// The universe, if the dataset is keyed.
    pub fn universe(&self) -> Option<&Universe> {
        self.data.universe.as_ref()
    }

    /// What a put of it answers (the PutResult's JSON).
    pub fn summary(&self) -> sweepflight_protocol::PutSummary {
        sweepflight_protocol::PutSummary {
            dataset: self.name.clone(),
            rows: self.rows() as u64,
            bytes: self.bytes(),
            version: self.version,
            series: self.universe().map(|u| u.len() as u64),
            columns: self.data.bars.columns(),
            unusable: self.data.bars.unusable.clone(),
        }
    }

    /// The closes of series `index` (the whole dataset when it is not keyed).
    pub fn closes(&self, index: usize) -> &[f64] {
        &self.data.close.values()[self.data.range(index)]
    }
}

/// The series of a keyed dataset: their key values in order of first appearance and where each
/// one's rows start in the stored order.
#[derive(Debug, Clone, PartialEq)]
pub struct Universe {
    /// The key column.
    pub key: String,
    /// Key values as text, in series order.
    pub names: Vec<String>,
    /// `offsets[i]..offsets[i + 1]` are series `i`'s rows; `names.len() + 1` entries.
    pub offsets: Vec<usize>,
    index: HashMap<String, usize>,
}

impl Universe {
    /// A universe of `names` whose rows start at `offsets` (one more entry than names).
    pub fn new(key: String, names: Vec<String>, offsets: Vec<usize>) -> Self {
        debug_assert_eq!(offsets.len(), names.len() + 1);
        let index = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i))
            .collect();
        Self {
            key,
            names,
            offsets,
            index,
        }
    }

    /// Number of series.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True if there is no series (never, for a stored dataset).
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The series a request lists, in its order, or all of them.
    ///
    /// # Errors
    /// [`Error::SeriesNotFound`] for the first listed name that is not a series.
    pub fn select(&self, dataset: &str, listed: Option<&[String]>) -> Result<Vec<usize>> {
        match listed {
            None => Ok((0..self.len()).collect()),
            Some(names) => names
                .iter()
                .map(|n| {
                    self.index
                        .get(n)
                        .copied()
                        .ok_or_else(|| Error::SeriesNotFound {
                            dataset: dataset.to_owned(),
                            series: n.clone(),
                        })
                })
                .collect(),
        }
    }
}

/// Where a bad value is, for error messages: a row of the upload, or a row of a named series.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RowOf<'a> {
    /// Row of the whole upload.
    Upload(usize),
    /// Row of one series, and of the upload.
    Series {
        /// The series' key value.
        name: &'a str,
        /// Row within the series.
        row: usize,
        /// Row within the upload.
        upload_row: usize,
    },
}

/// Index of the `close` column.
///
/// # Errors
/// [`Error::InvalidArgument`] listing the columns there are.
pub(crate) fn close_index(schema: &Schema) -> Result<usize> {
    bars::recognise(schema, CLOSE).ok_or_else(|| {
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        Error::invalid(format!(
            "the schema has no column `{CLOSE}` (columns: {names:?}); `{CLOSE}` must be float64, float32 or an integer type"
        ))
    })
}

/// `schema` with `close` widened to float64.
pub(crate) fn widened_schema(schema: &Schema, index: usize) -> Schema {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let f = f.as_ref().clone();
            if i == index {
                f.with_data_type(DataType::Float64)
            } else {
                f
            }
        })
        .collect();
    Schema::new_with_metadata(fields, schema.metadata().clone())
}

/// The close column of one batch as float64 (float32 and integers are widened).
///
/// # Errors
/// [`Error::InvalidArgument`] for any other type.
pub(crate) fn close_column(batch: &RecordBatch, index: usize) -> Result<Float64Array> {
    let col = batch.column(index);
    let widened = match col.data_type() {
        DataType::Float64 => Arc::clone(col),
        t if t.is_integer() || *t == DataType::Float32 => arrow_cast::cast(col, &DataType::Float64)
            .map_err(|e| Error::Internal(format!("widen `{CLOSE}`: {e}")))?,
        t => {
            return Err(Error::invalid(format!(
                "column `{CLOSE}` has type {t}; expected float64 (float32 and integers are widened)"
            )));
        }
    };
    widened
        .as_any()
        .downcast_ref::<Float64Array>()
        .cloned()
        .ok_or_else(|| Error::Internal("cast to float64 gave another type".into()))
}

/// The first close that breaks the rules (null, not finite, not > 0): its index and what is
/// wrong with it.
pub(crate) fn first_bad_close(close: &Float64Array) -> Option<(usize, &'static str)> {
    if let Some(nulls) = close.nulls()
        && let Some(row) = (0..close.len()).find(|&i| nulls.is_null(i))
    {
        // Every value before the first null is valid; a bad one among them comes first.
        return Some(first_bad_value(&close.values()[..row]).unwrap_or((row, "is null")));
    }
    first_bad_value(close.values())
}

/// The first value that breaks the rules (not finite, not > 0) and what is wrong with it.
pub(crate) fn first_bad_value(values: &[f64]) -> Option<(usize, &'static str)> {
    let row = first_not_positive_finite(values)?;
    let v = values[row];
    let problem = if v.is_nan() {
        "is NaN"
    } else if v.is_infinite() {
        "is infinite"
    } else {
        "is <= 0"
    };
    Some((row, problem))
}

/// Index of the first value that is not finite and > 0.
///
/// Uploads are checked at memory speed: whole chunks are tested without branching on the bit
/// patterns (positive finite non-zero doubles are exactly the bit patterns `1..=0x7FEF...F`, one
/// unsigned comparison), compiled for AVX2 where the CPU has it (the baseline has no vector
/// 64-bit comparison); only a failing chunk is searched.
fn first_not_positive_finite(values: &[f64]) -> Option<usize> {
    #[inline(always)]
    fn search(values: &[f64]) -> Option<usize> {
        const CHUNK: usize = 256;
        const MAX_BITS: u64 = 0x7FEF_FFFF_FFFF_FFFF;
        let ok = |v: &f64| v.to_bits().wrapping_sub(1) < MAX_BITS;
        let chunk = values
            .chunks(CHUNK)
            .position(|c| c.iter().map(|v| usize::from(ok(v))).sum::<usize>() != c.len())?;
        let start = chunk * CHUNK;
        values[start..]
            .iter()
            .position(|v| !ok(v))
            .map(|i| start + i)
    }
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2")]
        fn avx2(values: &[f64]) -> Option<usize> {
            search(values)
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            return unsafe { avx2(values) };
        }
    }
    search(values)
}

/// The error for a bad close at `at`.
pub(crate) fn bad_close(at: RowOf<'_>, problem: &'static str) -> Error {
    match at {
        RowOf::Upload(row) => Error::BadValue {
            column: CLOSE.to_owned(),
            row,
            problem,
        },
        RowOf::Series {
            name,
            row,
            upload_row,
        } => Error::invalid(format!(
            "column `{CLOSE}` series {name:?} row {row} (upload row {upload_row}): {problem}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_bad_close_finds_the_earliest_problem() {
        let f = |v: Vec<Option<f64>>| first_bad_close(&Float64Array::from(v));
        assert_eq!(f(vec![Some(1.0), Some(2.0)]), None);
        assert_eq!(f(vec![Some(1.0), None]), Some((1, "is null")));
        assert_eq!(f(vec![Some(0.0), None]), Some((0, "is <= 0")));
        assert_eq!(f(vec![None, Some(f64::NAN)]), Some((0, "is null")));
        assert_eq!(f(vec![Some(1.0), Some(f64::NAN)]), Some((1, "is NaN")));
        assert_eq!(f(vec![Some(f64::NEG_INFINITY)]), Some((0, "is infinite")));
        assert_eq!(f(vec![Some(-1.0)]), Some((0, "is <= 0")));
        assert_eq!(f(vec![Some(-0.0)]), Some((0, "is <= 0")));
        assert_eq!(f(vec![Some(f64::MIN_POSITIVE / 2.0), Some(f64::MAX)]), None);
        // Past the first chunks of the fast check.
        let mut long = vec![Some(1.0); 1_000];
        long[777] = Some(f64::INFINITY);
        assert_eq!(f(long), Some((777, "is infinite")));
    }

    #[test]
    fn universe_selects_in_listed_order() {
        let u = Universe::new(
            "sym".into(),
            vec!["A".into(), "B".into(), "C".into()],
            vec![0, 2, 5, 6],
        );
        assert_eq!(u.select("d", None).unwrap(), [0, 1, 2]);
        assert_eq!(
            u.select("d", Some(&["C".into(), "A".into()])).unwrap(),
            [2, 0]
        );
        let e = u.select("d", Some(&["Z".into()])).unwrap_err();
        assert!(e.to_string().contains("\"Z\""), "{e}");
    }
}
