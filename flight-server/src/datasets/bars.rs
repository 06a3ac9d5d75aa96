//! A dataset's bars beyond `close` (protocol v1.3, "Datasets: OHLCV bars and time"): which
//! columns are recognised as `open`, `high`, `low`, `volume` and `time`, their rules, and the
//! columns a sweep reads, contiguous and widened to float64.
//!
//! A recognised column that breaks its rules does not fail the put: the column is *unusable*,
//! with the reason (its first bad row), and only a sweep that needs it is refused. So the checks
//! here never return an error for the data; they record it. The columns are computed from the
//! stored batches once the upload is whole (after a keyed upload's grouping), and again from a
//! durable dataset's file at start: nothing about them is written, so a data directory from a
//! server before v1.3 loads and gains them.
//!
//! Memory: a float64 column the sweep reads is the stored column itself (the batches are
//! re-sliced from one contiguous array, as `close` is); other numeric types are widened into a
//! copy for use, as the contract says, while the table keeps the type it was sent with.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Date32Type, Date64Type, Int64Type};
use arrow_array::{Array, ArrayRef, Float64Array, RecordBatch};
use arrow_schema::{DataType, Schema, SchemaRef, TimeUnit};

use super::{RowOf, Universe};
use crate::{Error, Result};

/// The price columns besides `close`, in the contract's order.
const PRICES: [&str; 3] = ["open", "high", "low"];

/// Names a `time` column may have (ignoring case), after the exact `time`.
const TIME_NAMES: [&str; 4] = ["time", "date", "datetime", "timestamp"];

/// The index of the column recognised as `name`: the exact lower-case name, else the first
/// whose name matches it ignoring case (`Close` from yfinance is `close`).
pub(crate) fn recognise(schema: &Schema, name: &str) -> Option<usize> {
    schema.index_of(name).ok().or_else(|| {
        schema
            .fields()
            .iter()
            .position(|f| f.name().eq_ignore_ascii_case(name))
    })
}

/// The index of the `time` column: `time`, else the first named time, date, datetime or
/// timestamp ignoring case.
fn time_index(schema: &Schema) -> Option<usize> {
    schema.index_of("time").ok().or_else(|| {
        schema
            .fields()
            .iter()
            .position(|f| TIME_NAMES.iter().any(|n| f.name().eq_ignore_ascii_case(n)))
    })
}

/// A usable time column: its values in the stored type, contiguous, and what one unit is.
#[derive(Debug, Clone)]
pub struct TimeColumn {
    /// The values as stored (a timestamp of any unit and zone, date32/date64 or int64).
    pub array: ArrayRef,
    /// Seconds per unit of the values read as i64 (`None` for int64: no unit).
    seconds: Option<f64>,
}

impl TimeColumn {
    /// The time between rows `a` and `b` in seconds, if the type has a unit.
    pub fn span_seconds(&self, a: usize, b: usize) -> Option<f64> {
        let unit = self.seconds?;
        let at = |i: usize| -> Option<i64> {
            let one = arrow_cast::cast(&self.array.slice(i, 1), &DataType::Int64).ok()?;
            Some(one.as_primitive::<Int64Type>().value(0))
        };
        // i128: the difference of two i64 cannot overflow.
        Some((i128::from(at(b)?) - i128::from(at(a)?)) as f64 * unit)
    }
}

/// The bar columns of a dataset besides `close`: those usable, contiguous in stored order and
/// widened to float64, and the reason each unusable one is.
#[derive(Debug, Clone, Default)]
pub struct BarColumns {
    /// Opens, highs, lows, volumes where usable.
    pub open: Option<Float64Array>,
    /// Highs.
    pub high: Option<Float64Array>,
    /// Lows.
    pub low: Option<Float64Array>,
    /// Volumes.
    pub volume: Option<Float64Array>,
    /// The time column, where usable.
    pub time: Option<TimeColumn>,
    /// Each recognised column that breaks its rules, and why (its first bad row).
    pub unusable: BTreeMap<String, String>,
}

impl BarColumns {
    /// The usable recognised columns in the contract's order (`close` always).
    pub fn columns(&self) -> Vec<String> {
        [
            ("open", self.open.is_some()),
            ("high", self.high.is_some()),
            ("low", self.low.is_some()),
            ("close", true),
            ("volume", self.volume.is_some()),
            ("time", self.time.is_some()),
        ]
        .into_iter()
        .filter(|(_, ok)| *ok)
        .map(|(n, _)| n.to_owned())
        .collect()
    }

    /// Column `name` (open, high, low or volume) of rows `range`, if usable.
    pub fn slice(&self, name: &str, range: std::ops::Range<usize>) -> Option<&[f64]> {
        let c = match name {
            "open" => &self.open,
            "high" => &self.high,
            "low" => &self.low,
            "volume" => &self.volume,
            _ => return None,
        };
        c.as_ref().map(|a| &a.values()[range])
    }

    /// Checks the columns a call reads are usable.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the first column that is unusable (with its reason)
    /// or absent, and what needs it.
    pub fn require(&self, columns: &[&str], what: &str) -> Result<()> {
        for c in columns {
            let usable = match *c {
                "close" => true,
                "time" => self.time.is_some(),
                other => self.slice(other, 0..0).is_some(),
            };
            if usable {
                continue;
            }
            return Err(Error::invalid(match self.unusable.get(*c) {
                Some(reason) => {
                    format!("{what} needs the column `{c}`, which is unusable: {reason}")
                }
                None => format!("{what} needs a column `{c}`, which this dataset does not have"),
            }));
        }
        Ok(())
    }
}

/// Finds, checks and gathers the bar columns of `batches` (in stored order, `close` the
/// contiguous `close`); float64 columns the sweep reads become one contiguous array each, the
/// batches holding slices of it.
///
/// # Errors
/// Only for a server fault (an array that cannot be concatenated or sliced).
pub(crate) fn bar_columns(
    schema: &SchemaRef,
    batches: &mut [RecordBatch],
    close: &Float64Array,
    universe: Option<&Universe>,
    gathered: &[(usize, ArrayRef)],
) -> Result<BarColumns> {
    let mut out = BarColumns::default();
    let close = close.values();
    // A column gathered as the upload arrived is whole already; any other is made so.
    let whole = |index: usize, batches: &mut [RecordBatch]| match gathered
        .iter()
        .find(|(i, _)| *i == index)
    {
        Some((_, array)) => Ok(Arc::clone(array)),
        None => contiguous(schema, batches, index),
    };
    let fail = |out: &mut BarColumns, name: &str, reason: String| {
        out.unusable.insert(name.to_owned(), reason);
    };
    // Each price column under its own rules, then its relation to the close.
    let mut prices: BTreeMap<&str, Float64Array> = BTreeMap::new();
    for name in PRICES.into_iter().chain(["volume"]) {
        let Some(index) = recognise(schema, name) else {
            continue;
        };
        let array = whole(index, batches)?;
        match numbers(&array) {
            Err(reason) => fail(&mut out, name, reason),
            Ok(values) => {
                let volume = name == "volume";
                let bad = first_row(
                    values.values(),
                    array.nulls(),
                    // NaN fails both comparisons: bad.
                    |v| {
                        if volume {
                            !(v.is_finite() && v >= 0.0)
                        } else {
                            !(v.is_finite() && v > 0.0)
                        }
                    },
                    |v| {
                        if volume {
                            format!("{name} {v} is not a finite number >= 0")
                        } else {
                            format!("{name} {v} is not a finite price > 0")
                        }
                    },
                );
                match bad {
                    Some((row, why)) => fail(&mut out, name, at(universe, row, &why)),
                    None if name == "volume" => out.volume = Some(values),
                    None => {
                        prices.insert(name, values);
                    }
                }
            }
        }
    }
    for name in ["high", "low"] {
        let Some(v) = prices.get(name).map(Float64Array::values) else {
            continue;
        };
        // Every value is finite and > 0 by now (its own rules and close's passed).
        let high = name == "high";
        let bad = first_where(close.len(), |i| {
            if high {
                v[i] < close[i]
            } else {
                v[i] > close[i]
            }
        });
        if let Some(row) = bad {
            let sign = if name == "high" { "<" } else { ">" };
            fail(
                &mut out,
                name,
                at(
                    universe,
                    row,
                    &format!("{name} {} {sign} close {}", v[row], close[row]),
                ),
            );
            prices.remove(name);
        }
    }
    if let Some(open) = prices.get("open").map(Float64Array::values) {
        let high = prices.get("high").map(Float64Array::values);
        let low = prices.get("low").map(Float64Array::values);
        let above = |i: usize| high.is_some_and(|h| open[i] > h[i]);
        let below = |i: usize| low.is_some_and(|l| open[i] < l[i]);
        let bad = first_where(open.len(), |i| above(i) | below(i)).map(|i| match (high, low) {
            (Some(h), _) if above(i) => (i, format!("open {} > high {}", open[i], h[i])),
            (_, Some(l)) => (i, format!("open {} < low {}", open[i], l[i])),
            _ => unreachable!("a row is bad against the high or the low"),
        });
        if let Some((row, why)) = bad {
            fail(&mut out, "open", at(universe, row, &why));
            prices.remove("open");
        }
    }
    for (name, values) in prices {
        let a = Some(values);
        match name {
            "open" => out.open = a,
            "high" => out.high = a,
            _ => out.low = a,
        }
    }
    if let Some(index) = time_index(schema) {
        let array = whole(index, batches)?;
        match time_check(&array, universe) {
            Ok(seconds) => {
                out.time = Some(TimeColumn { array, seconds });
            }
            Err(reason) => fail(&mut out, "time", reason),
        }
    }
    Ok(out)
}

/// Column `index` of `batches` as one array; when there are several batches, each batch's
/// column becomes a slice of it, so the dataset holds its bytes once.
fn contiguous(schema: &SchemaRef, batches: &mut [RecordBatch], index: usize) -> Result<ArrayRef> {
    if let [one] = batches {
        return Ok(Arc::clone(one.column(index)));
    }
    let parts: Vec<&dyn Array> = batches.iter().map(|b| b.column(index).as_ref()).collect();
    let whole =
        arrow_select::concat::concat(&parts).map_err(|e| Error::internal("gather a column", e))?;
    let mut offset = 0;
    for b in batches.iter_mut() {
        let rows = b.num_rows();
        let mut columns = b.columns().to_vec();
        columns[index] = whole.slice(offset, rows);
        offset += rows;
        *b = RecordBatch::try_new_with_options(
            Arc::clone(schema),
            columns,
            &arrow_array::RecordBatchOptions::new().with_row_count(Some(rows)),
        )
        .map_err(|e| Error::internal("re-slice a batch", e))?;
    }
    Ok(whole)
}

/// A numeric column as float64 (float32 and integers widened into a copy; a float64 column is
/// the stored array itself), or why it is not one.
fn numbers(array: &ArrayRef) -> std::result::Result<Float64Array, String> {
    let t = array.data_type();
    if !(t.is_floating() || t.is_integer()) || *t == DataType::Float16 {
        return Err(format!(
            "type {t} is not a number (float64, float32 or an integer)"
        ));
    }
    let cast = arrow_cast::cast(array, &DataType::Float64).map_err(|e| e.to_string())?;
    Ok(cast
        .as_primitive::<arrow_array::types::Float64Type>()
        .clone())
}

/// The first row that is null or that `bad` finds wrong, and why. Rows are tested a chunk at a
/// time without branching (so the test vectorises: a put is checked at memory speed), and only
/// a failing chunk is searched.
fn first_row(
    values: &[f64],
    nulls: Option<&arrow_buffer::NullBuffer>,
    bad: impl Fn(f64) -> bool,
    why: impl Fn(f64) -> String,
) -> Option<(usize, String)> {
    let null = nulls
        .filter(|n| n.null_count() > 0)
        .and_then(|n| (0..values.len()).find(|&i| n.is_null(i)));
    let scope = &values[..null.unwrap_or(values.len())];
    match first_where(scope.len(), |i| bad(scope[i])) {
        Some(i) => Some((i, why(scope[i]))),
        None => null.map(|i| (i, "null".to_owned())),
    }
}

/// The first index below `n` where `bad` holds, tested 256 at a time without branching.
fn first_where(n: usize, bad: impl Fn(usize) -> bool) -> Option<usize> {
    const CHUNK: usize = 256;
    let mut start = 0;
    while start < n {
        let end = (start + CHUNK).min(n);
        if (start..end).fold(false, |any, i| any | bad(i)) {
            return (start..end).find(|&i| bad(i));
        }
        start = end;
    }
    None
}

/// "row 17: ..." of a dataset row, "series AAPL row 17: ..." within a universe.
fn at(universe: Option<&Universe>, row: usize, why: &str) -> String {
    match locate(universe, row) {
        RowOf::Upload(r) => format!("row {r}: {why}"),
        RowOf::Series { name, row, .. } => format!("series {name} row {row}: {why}"),
    }
}

/// Where stored row `row` is.
fn locate(universe: Option<&Universe>, row: usize) -> RowOf<'_> {
    match universe {
        None => RowOf::Upload(row),
        Some(u) => {
            let s = u.offsets.partition_point(|&o| o <= row) - 1;
            RowOf::Series {
                name: &u.names[s],
                row: row - u.offsets[s],
                upload_row: row,
            }
        }
    }
}

/// Checks a time column: a timestamp, date32/date64 or int64, non-null, strictly increasing
/// within each series. Its seconds per unit, or why it is unusable.
fn time_check(
    array: &ArrayRef,
    universe: Option<&Universe>,
) -> std::result::Result<Option<f64>, String> {
    let seconds = match array.data_type() {
        DataType::Timestamp(unit, _) => Some(match unit {
            TimeUnit::Second => 1.0,
            TimeUnit::Millisecond => 1e-3,
            TimeUnit::Microsecond => 1e-6,
            TimeUnit::Nanosecond => 1e-9,
        }),
        DataType::Date32 => Some(86_400.0),
        DataType::Date64 => Some(1e-3),
        DataType::Int64 => None,
        t => {
            return Err(format!(
                "type {t} is not a time (a timestamp, date32, date64 or int64)"
            ));
        }
    };
    let values: Vec<i64> = match array.data_type() {
        DataType::Date32 => array
            .as_primitive::<Date32Type>()
            .values()
            .iter()
            .map(|&v| i64::from(v))
            .collect(),
        DataType::Int64 => array.as_primitive::<Int64Type>().values().to_vec(),
        DataType::Date64 => array.as_primitive::<Date64Type>().values().to_vec(),
        _ => arrow_cast::cast(array, &DataType::Int64)
            .map_err(|e| e.to_string())?
            .as_primitive::<Int64Type>()
            .values()
            .to_vec(),
    };
    // Rows where a series starts: the first row of each has no predecessor to follow.
    let mut starts = universe
        .map_or(&[0usize][..], |u| &u.offsets[..u.len()])
        .iter()
        .peekable();
    for i in 0..values.len() {
        if array.is_null(i) {
            return Err(at(universe, i, "time is null"));
        }
        while starts.next_if(|&&s| s < i).is_some() {}
        let first = starts.peek().is_some_and(|&&s| s == i);
        if i > 0 && !first && values[i] <= values[i - 1] {
            return Err(at(
                universe,
                i,
                &format!(
                    "time {} is not after the previous row's {}",
                    values[i],
                    values[i - 1]
                ),
            ));
        }
    }
    Ok(seconds)
}
