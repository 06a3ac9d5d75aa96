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
pub(crate) use sweepflight_protocol::{recognise, time_index};

/// The price columns besides `close`, in the contract's order.
const PRICES: [&str; 3] = ["open", "high", "low"];

/// A usable time column: its values in the stored type, contiguous, and what one unit is.
#[derive(Debug, Clone)]
pub struct TimeColumn {
    /// The values as stored (a timestamp of any unit and zone, date32/date64 or int64).
    pub array: ArrayRef,
    /// Seconds per unit of the values read as i64 (`None` for int64: no unit).
    seconds: Option<f64>,
}

impl TimeColumn {
    /// Each row's UTC date as days since 1970-01-01 (protocol v1.4's periods: a timestamp with
    /// a time zone is an instant, so its UTC date; one without is read as UTC; a date as it
    /// is). `None` for an int64 time, which has no unit.
    pub fn utc_days(&self) -> Option<Vec<i64>> {
        const DAY: i64 = 86_400;
        let per_day: i64 = match self.array.data_type() {
            DataType::Date32 => {
                let days = self.array.as_primitive::<Date32Type>().values();
                return Some(days.iter().map(|&d| i64::from(d)).collect());
            }
            DataType::Date64 => 1_000 * DAY,
            DataType::Timestamp(unit, _) => match unit {
                TimeUnit::Second => DAY,
                TimeUnit::Millisecond => 1_000 * DAY,
                TimeUnit::Microsecond => 1_000_000 * DAY,
                TimeUnit::Nanosecond => 1_000_000_000 * DAY,
            },
            _ => return None,
        };
        // A timestamp's values are UTC instants whatever its zone (Arrow's convention); floor
        // division puts a time before 1970 in its own day.
        let values = arrow_cast::cast(&self.array, &DataType::Int64).ok()?;
        Some(
            values
                .as_primitive::<Int64Type>()
                .values()
                .iter()
                .map(|&v| v.div_euclid(per_day))
                .collect(),
        )
    }

    /// Each row's time as an i64 in the stored unit (days for date32; an instant for a
    /// timestamp whatever its zone): comparable between series of one column.
    ///
    /// # Errors
    /// Only for a server fault (a cast Arrow refuses).
    pub fn keys(&self) -> Result<Vec<i64>> {
        if let DataType::Date32 = self.array.data_type() {
            let days = self.array.as_primitive::<Date32Type>().values();
            return Ok(days.iter().map(|&d| i64::from(d)).collect());
        }
        let values = arrow_cast::cast(&self.array, &DataType::Int64)
            .map_err(|e| Error::internal("read the time column", e))?;
        Ok(values.as_primitive::<Int64Type>().values().to_vec())
    }

    /// The UTC date (days since 1970-01-01) of a time read by [`TimeColumn::keys`]; `None`
    /// for an int64 time, which has no unit.
    pub fn day_of(&self, key: i64) -> Option<i64> {
        const DAY: i64 = 86_400;
        let per_day = match self.array.data_type() {
            DataType::Date32 => 1,
            DataType::Date64 => 1_000 * DAY,
            DataType::Timestamp(TimeUnit::Second, _) => DAY,
            DataType::Timestamp(TimeUnit::Millisecond, _) => 1_000 * DAY,
            DataType::Timestamp(TimeUnit::Microsecond, _) => 1_000_000 * DAY,
            DataType::Timestamp(TimeUnit::Nanosecond, _) => 1_000_000_000 * DAY,
            _ => return None,
        };
        Some(key.div_euclid(per_day))
    }

    /// Seconds per unit of [`TimeColumn::keys`] (`None` for int64).
    pub fn unit_seconds(&self) -> Option<f64> {
        self.seconds
    }

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
    /// Where the time column is unusable because a row's time is not after the row's before it
    /// in its series (bars shuffled, appended twice, concatenated out of order): that row, as
    /// [`BarColumns::unusable`] words it. Every call that sweeps refuses such a dataset unless
    /// it says `ignore_time` (protocol v1.4).
    pub out_of_order: Option<String>,
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
    // The time column first: its values name the rows of every other column's message.
    let time = match time_index(schema) {
        Some(index) => Some(whole(index, batches)?),
        None => None,
    };
    let label = Label::new(universe, time.as_ref());
    let at = |row: usize, why: &str| label.at(row, why);
    // Each price column under its own rules, then its relation to the close, then the open's
    // to the high and the low: every rule's first failing row found in one pass over the rows
    // (`Firsts`), and read here in that order.
    let mut numeric: BTreeMap<&str, (Float64Array, Option<usize>)> = BTreeMap::new();
    for name in PRICES.into_iter().chain(["volume"]) {
        let Some(index) = recognise(schema, name) else {
            continue;
        };
        let array = whole(index, batches)?;
        match numbers(&array) {
            Err(reason) => fail(&mut out, name, reason),
            Ok(values) => {
                let null = array
                    .nulls()
                    .filter(|n| n.null_count() > 0)
                    .and_then(|n| (0..values.len()).find(|&i| n.is_null(i)));
                numeric.insert(name, (values, null));
            }
        }
    }
    let column = |name: &str| numeric.get(name).map(|(v, _)| v.values().as_ref());
    let firsts = Firsts::of(
        close,
        [
            column("open"),
            column("high"),
            column("low"),
            column("volume"),
        ],
    );
    let mut prices: BTreeMap<&str, Float64Array> = BTreeMap::new();
    for (k, name) in ["open", "high", "low", "volume"].into_iter().enumerate() {
        let Some((values, null)) = numeric.remove(name) else {
            continue;
        };
        let volume = name == "volume";
        // The first row that breaks the column's own rule before its first null, else the null.
        let bad = match (firsts.own[k], null) {
            (Some(row), n) if n.is_none_or(|n| row < n) => {
                let v = values.value(row);
                Some((
                    row,
                    if volume {
                        format!("{name} {v} is not a finite number >= 0")
                    } else {
                        format!("{name} {v} is not a finite price > 0")
                    },
                ))
            }
            (_, Some(n)) => Some((n, "null".to_owned())),
            _ => None,
        };
        match bad {
            Some((row, why)) => fail(&mut out, name, at(row, &why)),
            None if volume => out.volume = Some(values),
            None => {
                prices.insert(name, values);
            }
        }
    }
    for (name, first) in [
        ("high", firsts.high_below_close),
        ("low", firsts.low_above_close),
    ] {
        let (Some(v), Some(row)) = (prices.get(name).map(Float64Array::values), first) else {
            continue;
        };
        let sign = if name == "high" { "<" } else { ">" };
        let why = format!("{name} {} {sign} close {}", v[row], close[row]);
        fail(&mut out, name, at(row, &why));
        prices.remove(name);
    }
    if let Some(open) = prices.get("open").map(Float64Array::values) {
        let high = prices.get("high").map(Float64Array::values);
        let low = prices.get("low").map(Float64Array::values);
        // The first row against a high or low still usable.
        let row = [
            high.and(firsts.open_above_high),
            low.and(firsts.open_below_low),
        ]
        .into_iter()
        .flatten()
        .min();
        if let Some(i) = row {
            let why = match (high, low) {
                (Some(h), _) if open[i] > h[i] => format!("open {} > high {}", open[i], h[i]),
                (_, Some(l)) => format!("open {} < low {}", open[i], l[i]),
                _ => unreachable!("a row is bad against the high or the low"),
            };
            fail(&mut out, "open", at(i, &why));
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
    if let Some(array) = &time {
        match time_check(array, &label) {
            Ok(seconds) => {
                out.time = Some(TimeColumn {
                    array: Arc::clone(array),
                    seconds,
                });
            }
            Err(TimeFault { reason, order }) => {
                // The put's warning says what follows: not only `time` is lost, every sweep is
                // refused until the bars come in order.
                let said = if order {
                    out.out_of_order = Some(reason.clone());
                    format!(
                        "{reason}: the bars are out of time order, and every sweep refuses them \
                         until they are put sorted by time (or is sent \"ignore_time\": true)"
                    )
                } else {
                    reason
                };
                fail(&mut out, "time", said);
            }
        }
    }
    Ok(out)
}

/// The strategy's own columns (protocol v1.4, `inputs`) of a dataset: each the column of
/// exactly that name, of an integer or floating-point type, widened to float64 over all stored
/// rows, a null read as NaN. Read per call (a copy of each column the call names).
///
/// # Errors
/// [`Error::InvalidArgument`] naming an input the dataset lacks (with its columns) or one that
/// is not numeric; [`Error::Internal`] for a cast that fails.
pub(crate) fn input_columns(
    schema: &Schema,
    batches: &[RecordBatch],
    names: &[String],
    what: &str,
) -> Result<Vec<Arc<[f64]>>> {
    input_indices(schema, names, what)?
        .into_iter()
        .map(|index| {
            let mut values: Vec<f64> =
                Vec::with_capacity(batches.iter().map(RecordBatch::num_rows).sum());
            for b in batches {
                let cast = arrow_cast::cast(b.column(index), &DataType::Float64)
                    .map_err(|e| Error::internal("widen an input column", e))?;
                let cast = cast.as_primitive::<arrow_array::types::Float64Type>();
                match cast.nulls().filter(|n| n.null_count() > 0) {
                    None => values.extend_from_slice(cast.values()),
                    Some(n) => values.extend(
                        cast.values()
                            .iter()
                            .enumerate()
                            .map(|(i, &v)| if n.is_null(i) { f64::NAN } else { v }),
                    ),
                }
            }
            Ok(Arc::from(values))
        })
        .collect()
}

/// The schema positions of the columns `names` (a strategy's `inputs`), each checked to be
/// there and numeric.
///
/// # Errors
/// As [`input_columns`].
pub(crate) fn input_indices(schema: &Schema, names: &[String], what: &str) -> Result<Vec<usize>> {
    names
        .iter()
        .map(|name| {
            let Ok(index) = schema.index_of(name) else {
                let columns: Vec<&str> =
                    schema.fields().iter().map(|f| f.name().as_str()).collect();
                return Err(Error::invalid(format!(
                    "`inputs` names `{name}`, which {what} does not have (its columns: {})",
                    columns.join(", ")
                )));
            };
            let t = schema.field(index).data_type();
            if !(t.is_integer() || t.is_floating()) {
                return Err(Error::invalid(format!(
                    "`inputs` names `{name}`, a column of type {t}: an input is a column of an \
                     integer or floating-point type (booleans, decimals and strings are not \
                     numbers here)"
                )));
            }
            Ok(index)
        })
        .collect()
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

/// The first row where each bar rule fails, over rows in chunks, the chunks shared among a
/// few threads: one pass over the columns (a chunk's columns are read while they are in
/// cache), each rule tested without branching within a chunk (so it vectorises) and searched
/// only in a chunk where it fails. Rows of a column's nulls are tested like any (the caller
/// takes a null before them). Rules: each column's own (`own`: open, high and low finite
/// and above 0, volume finite and not below 0), the high below the close, the low above it,
/// the open above the high or below the low.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Firsts {
    own: [Option<usize>; 4],
    high_below_close: Option<usize>,
    low_above_close: Option<usize>,
    open_above_high: Option<usize>,
    open_below_low: Option<usize>,
}

impl Firsts {
    /// Rows a chunk holds.
    const CHUNK: usize = 4096;

    /// The rules over `close` and the columns `[open, high, low, volume]` that are there.
    fn of(close: &[f64], columns: [Option<&[f64]>; 4]) -> Self {
        let n = close.len();
        let threads = std::thread::available_parallelism()
            .map_or(1, std::num::NonZero::get)
            .clamp(1, 8);
        // Rows per thread, whole chunks; a small upload on the calling thread only.
        let part = n.div_ceil(threads).next_multiple_of(Self::CHUNK);
        if threads == 1 || n <= 4 * Self::CHUNK {
            return Self::over(close, columns, 0..n);
        }
        let parts: Vec<Self> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..n)
                .step_by(part)
                .map(|from| {
                    scope.spawn(move || Self::over(close, columns, from..(from + part).min(n)))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a bar check does not panic"))
                .collect()
        });
        // Parts in row order: each rule's first is the earliest part's.
        parts.into_iter().fold(Self::default(), |a, b| a.or(b))
    }

    /// Each rule's first row, `self`'s if it has one, else `later`'s.
    fn or(self, later: Self) -> Self {
        let mut own = self.own;
        for (o, l) in own.iter_mut().zip(later.own) {
            *o = o.or(l);
        }
        Self {
            own,
            high_below_close: self.high_below_close.or(later.high_below_close),
            low_above_close: self.low_above_close.or(later.low_above_close),
            open_above_high: self.open_above_high.or(later.open_above_high),
            open_below_low: self.open_below_low.or(later.open_below_low),
        }
    }

    /// The rules over `rows`: with AVX2 where the CPU has it (four rows a compare, not the
    /// portable target's two: the pass is compute-bound, ~25 instructions a row, and was 44% of
    /// a server's time over OHLCV puts), else [`Firsts::rules`] as compiled.
    fn over(close: &[f64], columns: [Option<&[f64]>; 4], rows: std::ops::Range<usize>) -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx2")]
            fn avx2(
                close: &[f64],
                columns: [Option<&[f64]>; 4],
                rows: std::ops::Range<usize>,
            ) -> Firsts {
                Firsts::rules(close, columns, rows)
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2, checked just above.
                return unsafe { avx2(close, columns, rows) };
            }
        }
        Self::rules(close, columns, rows)
    }

    /// The rules over `rows`, compiled for the features of the caller it is inlined into.
    #[inline(always)]
    fn rules<'a>(
        close: &'a [f64],
        [open, high, low, volume]: [Option<&'a [f64]>; 4],
        rows: std::ops::Range<usize>,
    ) -> Self {
        /// Sets `found` to the first row from `start` where `bad` holds for the values of `a`
        /// and `b` (slices of one chunk), if none was found yet. The test of the whole chunk
        /// reads plain slices, without bounds checks, so it vectorises.
        #[inline(always)]
        fn first(
            found: &mut Option<usize>,
            start: usize,
            (a, b): (&[f64], &[f64]),
            bad: impl Fn(f64, f64) -> bool,
        ) {
            let pairs = || a.iter().zip(b).map(|(&x, &y)| (x, y));
            // An OR of the comparisons as wide as an f64 lane (a `u8` accumulator narrows every
            // lane, a `bool` one does not vectorise).
            if found.is_none() && pairs().fold(0u64, |any, (x, y)| any | u64::from(bad(x, y))) != 0
            {
                *found = pairs().position(|(x, y)| bad(x, y)).map(|k| start + k);
            }
        }
        // (`&`, not `&&`: no branch in the test of a chunk; comparisons, not `is_finite`, which
        // is a test of the bits the portable target does not vectorise. NaN fails both, +inf
        // the second, -inf the first.)
        let price = |v: f64, _| !((v > 0.0) & (v < f64::INFINITY));
        let mut f = Self::default();
        let mut start = rows.start;
        while start < rows.end {
            let chunk = start..(start + Self::CHUNK).min(rows.end);
            let of = |x: &'a [f64]| &x[chunk.clone()];
            let c = of(close);
            for (k, column) in [open, high, low].into_iter().enumerate() {
                if let Some(x) = column {
                    first(&mut f.own[k], start, (of(x), c), price);
                }
            }
            if let Some(x) = volume {
                first(&mut f.own[3], start, (of(x), c), |v, _| {
                    !(0.0..f64::INFINITY).contains(&v)
                });
            }
            if let Some(h) = high {
                first(&mut f.high_below_close, start, (of(h), c), |h, c| h < c);
            }
            if let Some(l) = low {
                first(&mut f.low_above_close, start, (of(l), c), |l, c| l > c);
            }
            if let Some(o) = open {
                if let Some(h) = high {
                    first(&mut f.open_above_high, start, (of(o), of(h)), |o, h| o > h);
                }
                if let Some(l) = low {
                    first(&mut f.open_below_low, start, (of(o), of(l)), |o, l| o < l);
                }
            }
            start = chunk.end;
        }
        f
    }
}

/// Names the rows of an upload in messages: by series and row within a universe, and by the
/// row's time (as a date or timestamp, not its raw number) where the upload has a time column
/// a person can read.
struct Label<'a> {
    universe: Option<&'a Universe>,
    time: Option<(&'a ArrayRef, arrow_cast::display::ArrayFormatter<'a>)>,
}

impl<'a> Label<'a> {
    fn new(universe: Option<&'a Universe>, time: Option<&'a ArrayRef>) -> Self {
        let time = time
            .filter(|a| {
                matches!(
                    a.data_type(),
                    DataType::Timestamp(..) | DataType::Date32 | DataType::Date64
                )
            })
            .and_then(|a| {
                let options = arrow_cast::display::FormatOptions::default();
                let f = arrow_cast::display::ArrayFormatter::try_new(a.as_ref(), &options).ok()?;
                Some((a, f))
            });
        Self { universe, time }
    }

    /// Row `row`'s time as text, if the upload has a readable one there (not a null).
    fn time(&self, row: usize) -> Option<String> {
        let (array, f) = self.time.as_ref()?;
        array.is_valid(row).then(|| f.value(row).to_string())
    }

    /// "row 17 (2020-01-03): ..." of a dataset row, "series AAPL row 17 (...): ..." within a
    /// universe.
    fn at(&self, row: usize, why: &str) -> String {
        let when = self
            .time(row)
            .map_or_else(String::new, |t| format!(" ({t})"));
        Self::place(self.universe, row, &when, why)
    }

    /// [`Label::at`] without the row's time (a message that says it already).
    fn at_plain(&self, row: usize, why: &str) -> String {
        Self::place(self.universe, row, "", why)
    }

    fn place(universe: Option<&Universe>, row: usize, when: &str, why: &str) -> String {
        match locate(universe, row) {
            RowOf::Upload(r) => format!("row {r}{when}: {why}"),
            RowOf::Series { name, row, .. } => format!("series {name} row {row}{when}: {why}"),
        }
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

/// Why a time column is unusable: the message, and whether it is a row out of order.
struct TimeFault {
    reason: String,
    order: bool,
}

/// Checks a time column: a timestamp, date32/date64 or int64, non-null, strictly increasing
/// within each series. Its seconds per unit, or why it is unusable (the first bad row decides
/// when there are several faults).
fn time_check(array: &ArrayRef, label: &Label<'_>) -> std::result::Result<Option<f64>, TimeFault> {
    let fault = |reason: String| TimeFault {
        reason,
        order: false,
    };
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
            return Err(fault(format!(
                "type {t} is not a time (a timestamp, date32, date64 or int64)"
            )));
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
            .map_err(|e| fault(e.to_string()))?
            .as_primitive::<Int64Type>()
            .values()
            .to_vec(),
    };
    // Rows where a series starts: the first row of each has no predecessor to follow.
    let mut starts = label
        .universe
        .map_or(&[0usize][..], |u| &u.offsets[..u.len()])
        .iter()
        .peekable();
    for i in 0..values.len() {
        if array.is_null(i) {
            return Err(fault(label.at(i, "time is null")));
        }
        while starts.next_if(|&&s| s < i).is_some() {}
        let first = starts.peek().is_some_and(|&&s| s == i);
        if i > 0 && !first && values[i] <= values[i - 1] {
            // Said as dates where the type has them, not as raw numbers.
            let time = |r: usize| label.time(r).unwrap_or_else(|| values[r].to_string());
            let what = format!(
                "time {} is not after the previous row's {}",
                time(i),
                time(i - 1)
            );
            return Err(TimeFault {
                reason: label.at_plain(i, &what),
                order: true,
            });
        }
    }
    Ok(seconds)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{
        ArrayRef, Date32Array, Date64Array, Int64Array, TimestampMicrosecondArray,
        TimestampSecondArray,
    };

    use super::{Firsts, TimeColumn};

    fn days_of(array: ArrayRef) -> Option<Vec<i64>> {
        TimeColumn {
            array,
            seconds: None,
        }
        .utc_days()
    }

    /// UTC dates of every time type: intraday bars across midnight, a zone east of UTC (its
    /// local midnight is the previous UTC day), times before 1970, dates as they are.
    #[test]
    fn utc_days_of_every_time_type() {
        let day = 86_400i64;
        // 2021-01-01 00:00 UTC is day 18,628.
        let d0 = 18_628;
        let intraday = TimestampSecondArray::from(vec![
            d0 * day - 1,
            d0 * day,
            d0 * day + 23 * 3600 + 3599,
            (d0 + 1) * day,
            -1,
        ]);
        assert_eq!(
            days_of(Arc::new(intraday)),
            Some(vec![d0 - 1, d0, d0, d0 + 1, -1])
        );
        // Local midnight in Tokyo (UTC+9) is 15:00 UTC the day before.
        let tokyo = TimestampMicrosecondArray::from(vec![(d0 * day - 9 * 3600) * 1_000_000])
            .with_timezone("Asia/Tokyo");
        assert_eq!(days_of(Arc::new(tokyo)), Some(vec![d0 - 1]));
        assert_eq!(
            days_of(Arc::new(Date32Array::from(vec![d0 as i32, -3]))),
            Some(vec![d0, -3])
        );
        assert_eq!(
            days_of(Arc::new(Date64Array::from(vec![d0 * day * 1000 + 5]))),
            Some(vec![d0])
        );
        assert_eq!(days_of(Arc::new(Int64Array::from(vec![1, 2]))), None);
    }

    /// Each rule's first failing row, read plainly row by row.
    fn plain(close: &[f64], [o, h, l, v]: [&[f64]; 4]) -> Firsts {
        let first = |bad: &dyn Fn(usize) -> bool| (0..close.len()).find(|&i| bad(i));
        let price = |x: f64| !(x.is_finite() && x > 0.0);
        Firsts {
            own: [
                first(&|i| price(o[i])),
                first(&|i| price(h[i])),
                first(&|i| price(l[i])),
                first(&|i| !(v[i].is_finite() && v[i] >= 0.0)),
            ],
            high_below_close: first(&|i| h[i] < close[i]),
            low_above_close: first(&|i| l[i] > close[i]),
            open_above_high: first(&|i| o[i] > h[i]),
            open_below_low: first(&|i| o[i] < l[i]),
        }
    }

    #[test]
    fn every_rules_first_row_is_found_across_chunks_and_threads() {
        let n = 100_003;
        let close: Vec<f64> = (0..n).map(|i| 100.0 + (i as f64 * 0.01).sin()).collect();
        let clean = || {
            let open = close.clone();
            let high: Vec<f64> = close.iter().map(|c| c + 1.0).collect();
            let low: Vec<f64> = close.iter().map(|c| c - 1.0).collect();
            (open, high, low, vec![5.0; n])
        };
        let (o, h, l, v) = clean();
        assert_eq!(
            Firsts::of(&close, [Some(&o), Some(&h), Some(&l), Some(&v)]),
            Firsts::default()
        );
        // Failures planted at a chunk's edges, in each thread's part, and twice in one rule
        // (the earlier wins); a NaN and an infinity fail their own rules.
        let rows = [0, 4095, 4096, 50_001, 77_777, n - 1];
        for (k, &row) in rows.iter().enumerate() {
            let (mut o, mut h, mut l, mut v) = clean();
            let later = (row + 30_011) % n;
            match k % 6 {
                0 => (o[row], o[later]) = (f64::NAN, -1.0),
                1 => (h[row], h[later]) = (close[row] - 0.5, close[later] - 0.5),
                2 => (l[row], l[later]) = (close[row] + 0.5, f64::INFINITY),
                3 => (v[row], v[later]) = (-1.0, f64::NAN),
                4 => (o[row], o[later]) = (h[row] + 0.5, l[later] - 0.5),
                _ => (o[row], l[row]) = (0.0, close[row] + 2.0),
            }
            let want = plain(&close, [&o, &h, &l, &v]);
            assert_ne!(want, Firsts::default(), "row {row}");
            let got = Firsts::of(&close, [Some(&o), Some(&h), Some(&l), Some(&v)]);
            assert_eq!(got, want, "row {row}");
            // The portable form too (`of` takes AVX2 where the CPU has it).
            let columns = [Some(&o[..]), Some(&h[..]), Some(&l[..]), Some(&v[..])];
            assert_eq!(Firsts::rules(&close, columns, 0..n), want, "row {row}");
            // Columns that are not there have no rules.
            let no_open = Firsts::of(&close, [None, Some(&h), Some(&l), None]);
            assert_eq!(no_open.own[0], None);
            assert_eq!(no_open.open_above_high, None);
            assert_eq!(no_open.high_below_close, want.high_below_close);
        }
    }
}
