//! The sweep result table: its schema, building it from kernel results, and encoding it as
//! one Arrow IPC stream split over DoAction `Result` bodies or as `session` reply messages.

use std::sync::Arc;

use arrow_array::builder::Float64Builder;
use arrow_array::{
    ArrayRef, FixedSizeListArray, Float64Array, Int64Array, RecordBatch, StringArray,
};
use arrow_flight::FlightData;
use arrow_ipc::CompressionType;
use arrow_ipc::writer::{
    DictionaryTracker, IpcDataGenerator, IpcWriteContext, IpcWriteOptions, StreamWriter,
};
use bytes::Bytes;
use sweepflight_kernel::{ComboResult, equity};
use sweepflight_protocol::{
    Compression, ParamKind, Selection, V12_METRIC_COLUMNS, equity_schema_timed, sweep_schema,
    trades_schema_timed,
};

use crate::compute::{Job, Runs};

use crate::{Error, Result};

/// Largest `Result` body of a sweep reply. gRPC clients refuse messages over 4 MiB by default
/// (arrow-rs `FlightClient` among them), and the protobuf framing needs a few bytes of its own.
pub const MAX_RESULT_BODY: usize = (4 << 20) - (16 << 10);

/// One row per combo, in request order, for each series in turn (`runs.results[i]` are series
/// `i`'s): the job's strategy schema ([`sweep_schema`]), with `block_pnl` last if the job
/// keeps blocks. A job with series names (a keyed dataset) starts with the `series` column.
///
/// # Errors
/// Only if Arrow rejects the columns, which would be a bug.
#[cfg(test)]
fn to_batch(job: &Job, runs: &Runs) -> Result<RecordBatch> {
    let all = job.combos.len() * runs.results.len();
    to_batch_rows(job, runs, &(0..all as u32).collect::<Vec<_>>())
}

/// [`to_batch`] of the rows `picked` only, in that order (indices into the series-major rows:
/// `series * combos + combo`), as [`select_results`] picks them.
///
/// # Errors
/// As [`to_batch`].
pub(crate) fn to_batch_rows(job: &Job, runs: &Runs, picked: &[u32]) -> Result<RecordBatch> {
    let series = job.names.as_deref();
    let combos = &job.combos;
    let n = combos.len().max(1);
    let at = |i: u32| (i as usize / n, i as usize % n);
    let result = |i: u32| {
        let (s, c) = at(i);
        &runs.results[s][c]
    };
    let rows = || picked.iter().map(|&i| result(i));
    let total = picked.len();
    let ints = |f: &dyn Fn(usize) -> i64| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(
            picked.iter().map(|&i| f(at(i).1)),
        ))
    };
    let floats = |f: &dyn Fn(&ComboResult) -> f64| -> ArrayRef {
        Arc::new(Float64Array::from_iter_values(rows().map(f)))
    };
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(16);
    if let Some(names) = series {
        let names = picked.iter().map(|&i| names[at(i).0].as_str());
        columns.push(Arc::new(StringArray::from_iter_values(names)));
    }
    columns.push(ints(&|c| job.position(c) as i64));
    for (k, (_, kind)) in job.strategy.params().iter().enumerate() {
        columns.push(match kind {
            // Windows are integers held exactly in f64.
            ParamKind::Int => ints(&|c| combos.value(c, k) as i64),
            ParamKind::Number => Arc::new(Float64Array::from_iter_values(
                picked.iter().map(|&i| combos.value(at(i).1, k)),
            )),
        });
    }
    columns.extend([
        floats(&|r| r.pnl),
        Arc::new(Int64Array::from_iter_values(
            rows().map(|r| r.trades as i64),
        )) as ArrayRef,
        Arc::new(Int64Array::from_iter_values(rows().map(|r| r.wins as i64))),
        floats(&ComboResult::win_rate),
        floats(&|r| r.max_drawdown),
    ]);
    // The v1.2 metrics, null where undefined: one pass computes all nine per row, straight
    // into their builders (no per-row array held for the whole table).
    let mut metrics: [Float64Builder; 9] =
        std::array::from_fn(|_| Float64Builder::with_capacity(total));
    for &i in picked {
        let (s, _) = at(i);
        for (b, v) in metrics
            .iter_mut()
            .zip(result(i).metrics(job.periods_per_year[s]).values())
        {
            b.append_option(v);
        }
    }
    columns.extend(metrics.iter_mut().map(|b| Arc::new(b.finish()) as ArrayRef));
    let schema = sweep_schema(&job.strategy, series.is_some(), job.keep.blocks);
    if let Some(blocks) = job.keep.blocks {
        let values: Float64Array = picked
            .iter()
            .flat_map(|&i| {
                let (s, c) = at(i);
                runs.records[s][c].block_pnl.iter().copied()
            })
            .collect();
        let arrow_schema::DataType::FixedSizeList(item, _) =
            schema.field(schema.fields().len() - 2).data_type()
        else {
            return Err(Error::Internal("block_pnl is not a fixed-size list".into()));
        };
        let list = FixedSizeListArray::try_new(
            Arc::clone(item),
            i32::from(blocks),
            Arc::new(values),
            None,
        )
        .map_err(|e| Error::internal("build the block_pnl column", e))?;
        columns.push(Arc::new(list));
    }
    columns.push(floats(&ComboResult::total_return));
    RecordBatch::try_new(schema, columns).map_err(|e| Error::internal("build the result table", e))
}

/// The rows of a sweep's table that `selection` keeps, in its order: per series (the table is
/// series-major, `series` blocks of equal length), the rows inside every `where` bound (a null
/// fails any real bound), ordered by `order_by` (ties by `combo` ascending, nulls last either
/// way), the first `top`.
///
/// # Errors
/// Only if the table lacks a column the selection names, which decoding rules out.
pub(crate) fn select(
    batch: RecordBatch,
    series: usize,
    selection: &Selection,
) -> Result<RecordBatch> {
    if selection.is_empty() {
        return Ok(batch);
    }
    let picked = select_rows(&batch, series, selection)?;
    arrow_select::take::take_record_batch(&batch, &arrow_array::UInt32Array::from(picked))
        .map_err(|e| Error::internal("select the result rows", e))
}

/// The rows of `batch` that [`select`] keeps, in its order.
///
/// # Errors
/// As [`select`].
fn select_rows(batch: &RecordBatch, series: usize, selection: &Selection) -> Result<Vec<u32>> {
    let values = |name: &str| -> Result<Vec<Option<f64>>> {
        let col = batch
            .column_by_name(name)
            .ok_or_else(|| Error::Internal(format!("no result column {name}")))?;
        let as_f64 = arrow_cast::cast(col, &arrow_schema::DataType::Float64)
            .map_err(|e| Error::internal("read a result column", e))?;
        let floats = as_f64
            .as_any()
            .downcast_ref::<Float64Array>()
            .ok_or_else(|| Error::Internal("a cast to float64 gave another type".into()))?;
        Ok(floats.iter().collect())
    };
    pick(batch.num_rows(), series, selection, &values)
}

/// The rows of a job's results that `selection` keeps, in its order, as indices into the
/// series-major rows ([`to_batch_rows`] builds the table of just those): the same rows as
/// [`select_rows`] on the whole table, without building it.
///
/// # Errors
/// Only for a column no result has, which decoding rules out.
pub(crate) fn select_results(job: &Job, runs: &Runs, selection: &Selection) -> Result<Vec<u32>> {
    let n = job.combos.len();
    let total = n * runs.results.len();
    if selection.is_empty() {
        return Ok((0..total as u32).collect());
    }
    let values = |name: &str| -> Result<Vec<Option<f64>>> {
        let of = column_of(job, name)?;
        Ok(runs
            .results
            .iter()
            .enumerate()
            .flat_map(|(s, series)| series.iter().enumerate().map(move |(c, r)| (s, c, r)))
            .map(|(s, c, r)| of(s, c, r))
            .collect())
    };
    pick(total, runs.results.len(), selection, &values)
}

/// Reads one result column of series `s`'s combo `c` with result `r` as a number (null:
/// `None`).
type Column<'a> = Box<dyn Fn(usize, usize, &ComboResult) -> Option<f64> + 'a>;

/// How to read result column `name`.
fn column_of<'a>(job: &'a Job, name: &str) -> Result<Column<'a>> {
    let ppy = &job.periods_per_year;
    let metric = V12_METRIC_COLUMNS.iter().position(|&m| m == name);
    let param = job.strategy.params().iter().position(|(p, _)| *p == name);
    Ok(match (name, metric, param) {
        ("combo", ..) => Box::new(|_, c, _| Some(job.position(c) as f64)),
        (_, _, Some(k)) => Box::new(move |_, c, _| Some(job.combos.value(c, k))),
        ("pnl", ..) => Box::new(|_, _, r| Some(r.pnl)),
        ("trades", ..) => Box::new(|_, _, r| Some(r.trades as f64)),
        ("wins", ..) => Box::new(|_, _, r| Some(r.wins as f64)),
        ("win_rate", ..) => Box::new(|_, _, r| Some(r.win_rate())),
        ("max_drawdown", ..) => Box::new(|_, _, r| Some(r.max_drawdown)),
        ("total_return", ..) => Box::new(|_, _, r| Some(r.total_return())),
        (_, Some(m), _) => Box::new(move |s, _, r| r.metrics(ppy[s]).values()[m]),
        _ => return Err(Error::Internal(format!("no result column {name}"))),
    })
}

/// The selection over `rows` rows in `series` equal series-major blocks, each column's values
/// from `values`.
fn pick(
    rows_total: usize,
    series: usize,
    selection: &Selection,
    values: &dyn Fn(&str) -> Result<Vec<Option<f64>>>,
) -> Result<Vec<u32>> {
    let filters = selection
        .filters
        .iter()
        .map(|(name, lo, hi)| Ok((values(name)?, *lo, *hi)))
        .collect::<Result<Vec<_>>>()?;
    let key = selection.order_by.as_deref().map(values).transpose()?;
    let combo = values("combo")?;
    let inside = |v: Option<f64>, lo: Option<f64>, hi: Option<f64>| match v {
        None => lo.is_none() && hi.is_none(),
        Some(x) => lo.is_none_or(|l| x >= l) && hi.is_none_or(|h| x <= h),
    };
    let per = rows_total / series.max(1);
    let mut picked: Vec<u32> = Vec::new();
    for s in 0..series.max(1) {
        let mut rows: Vec<usize> = (s * per..(s + 1) * per)
            .filter(|&r| filters.iter().all(|(v, lo, hi)| inside(v[r], *lo, *hi)))
            .collect();
        if let Some(key) = &key {
            rows.sort_by(|&a, &b| {
                let order = match (key[a], key[b]) {
                    (Some(x), Some(y)) if selection.descending => y.total_cmp(&x),
                    (Some(x), Some(y)) => x.total_cmp(&y),
                    (Some(_), None) => std::cmp::Ordering::Less,
                    (None, Some(_)) => std::cmp::Ordering::Greater,
                    (None, None) => std::cmp::Ordering::Equal,
                };
                order.then(combo[a].unwrap_or(0.0).total_cmp(&combo[b].unwrap_or(0.0)))
            });
        }
        if let Some(top) = selection.top {
            rows.truncate(usize::try_from(top).unwrap_or(usize::MAX));
        }
        picked.extend(rows.into_iter().map(|r| r as u32));
    }
    Ok(picked)
}

/// `batch` with `offset` added to its `combo` column: a step of a larger grid.
///
/// # Errors
/// Only if the batch has no int64 `combo` column, which would be a bug.
pub(crate) fn offset_combo(batch: RecordBatch, offset: usize) -> Result<RecordBatch> {
    if offset == 0 {
        return Ok(batch);
    }
    let schema = batch.schema();
    let at = schema
        .index_of("combo")
        .map_err(|e| Error::internal("find the combo column", e))?;
    let combo = batch
        .column(at)
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| Error::Internal("the combo column is not int64".into()))?;
    let shifted: Int64Array = combo.unary(|c| c + offset as i64);
    let mut columns = batch.columns().to_vec();
    columns[at] = Arc::new(shifted);
    RecordBatch::try_new(schema, columns).map_err(|e| Error::internal("offset the combos", e))
}

/// The rows `selection` keeps of one series' rows so far (`best`, already selected) and of
/// the next step's (`part`, already filtered by its `where`): ordered and cut again.
///
/// # Errors
/// As [`select`].
pub(crate) fn merge_selected(
    best: Option<RecordBatch>,
    part: RecordBatch,
    selection: &Selection,
) -> Result<RecordBatch> {
    let Some(best) = best else { return Ok(part) };
    let both = arrow_select::concat::concat_batches(&best.schema(), [&best, &part])
        .map_err(|e| Error::internal("join the kept rows", e))?;
    select(both, 1, selection)
}

/// The `trades` reply ([`trades_schema`]): for each series of `job` in turn, each chosen combo
/// (`chosen[i]`: positions in the request, ascending) and its trades as `runs` kept them
/// (`runs.records[i][k]` for `chosen[i][k]`), rows of the series.
///
/// # Errors
/// Only if Arrow rejects the columns, which would be a bug.
pub(crate) fn trades_batch(job: &Job, chosen: &[Vec<usize>], runs: &Runs) -> Result<RecordBatch> {
    let rows = runs.records.iter().flatten().map(|r| r.trades.len()).sum();
    let mut t = Columns::with_capacity(rows, 4, 3);
    let mut reasons = arrow_array::builder::StringBuilder::with_capacity(rows, rows * 6);
    // Rows of the dataset's time column, when it has a usable one.
    let timed = job.time_type();
    let room = if timed.is_some() { rows } else { 0 };
    let (mut entries, mut exits) = (Vec::with_capacity(room), Vec::with_capacity(room));
    for (i, input) in job.inputs.iter().enumerate() {
        for (&combo, record) in chosen[i].iter().zip(&runs.records[i]) {
            for (k, trade) in record.trades.iter().enumerate() {
                t.series.push(i);
                t.ints[0].push(combo as i64);
                t.ints[1].push(k as i64);
                t.sides.push(trade.side);
                t.ints[2].push(input.series_row(trade.entry_row) as i64);
                t.ints[3].push(input.series_row(trade.exit_row) as i64);
                t.floats[0].push(trade.entry_price);
                t.floats[1].push(trade.exit_price);
                t.floats[2].push(trade.net);
                reasons.append_value(trade.reason.name());
                if timed.is_some() {
                    entries.push(input.dataset_row(trade.entry_row) as u64);
                    exits.push(input.dataset_row(trade.exit_row) as u64);
                }
            }
        }
    }
    let [combo, trade, entry_row, exit_row] = t.ints;
    let [entry_price, exit_price, pnl] = t.floats;
    let mut columns: Vec<ArrayRef> = vec![
        int64(combo),
        int64(trade),
        Arc::new(arrow_array::Int8Array::from(t.sides)),
        int64(entry_row),
        int64(exit_row),
        float64(entry_price),
        float64(exit_price),
        float64(pnl),
        Arc::new(reasons.finish()),
    ];
    if timed.is_some() {
        columns.push(job.times(&entries)?);
        columns.push(job.times(&exits)?);
    }
    keyed_batch(
        job,
        &t.series,
        |k| trades_schema_timed(k, timed.as_ref()),
        columns,
    )
}

/// The `equity` reply ([`equity_schema`]): per series, chosen combo and evaluated bar, the
/// position after the bar and the mark-to-market equity, from the trades `runs` kept.
///
/// # Errors
/// As [`trades_batch`].
pub(crate) fn equity_batch(job: &Job, chosen: &[Vec<usize>], runs: &Runs) -> Result<RecordBatch> {
    let rows = job
        .inputs
        .iter()
        .zip(chosen)
        .map(|(input, c)| input.evaluated() * c.len())
        .sum();
    let mut t = Columns::with_capacity(rows, 2, 1);
    let timed = job.time_type();
    let mut at: Vec<u64> = Vec::with_capacity(if timed.is_some() { rows } else { 0 });
    for (i, input) in job.inputs.iter().enumerate() {
        let (close, start) = (input.closes(), input.start());
        for (&combo, record) in chosen[i].iter().zip(&runs.records[i]) {
            for (k, (position, q)) in equity(close, start, &record.trades).into_iter().enumerate() {
                t.series.push(i);
                t.ints[0].push(combo as i64);
                t.ints[1].push(input.series_row(start + k) as i64);
                t.sides.push(position);
                t.floats[0].push(q);
                if timed.is_some() {
                    at.push(input.dataset_row(start + k) as u64);
                }
            }
        }
    }
    let [combo, row, _, _] = t.ints;
    let [q, _, _] = t.floats;
    let mut columns: Vec<ArrayRef> = vec![
        int64(combo),
        int64(row),
        Arc::new(arrow_array::Int8Array::from(t.sides)),
        float64(q),
    ];
    if timed.is_some() {
        columns.push(job.times(&at)?);
    }
    keyed_batch(
        job,
        &t.series,
        |k| equity_schema_timed(k, timed.as_ref()),
        columns,
    )
}

/// Bytes of an `equity` reply of `rows` rows (before the series names).
pub(crate) const EQUITY_ROW_BYTES: u64 = 8 + 8 + 1 + 8;

/// Columns of a trades or equity table as they are filled.
struct Columns {
    series: Vec<usize>,
    ints: [Vec<i64>; 4],
    sides: Vec<i8>,
    floats: [Vec<f64>; 3],
}

impl Columns {
    /// Room for `rows` rows in the first `ints` and `floats` columns of each kind (a growing
    /// column would copy itself as it grows).
    fn with_capacity(rows: usize, ints: usize, floats: usize) -> Self {
        fn room<T>(rows: usize, used: bool) -> Vec<T> {
            Vec::with_capacity(if used { rows } else { 0 })
        }
        Self {
            series: room(rows, true),
            ints: std::array::from_fn(|k| room(rows, k < ints)),
            sides: room(rows, true),
            floats: std::array::from_fn(|k| room(rows, k < floats)),
        }
    }
}

fn int64(v: Vec<i64>) -> ArrayRef {
    Arc::new(Int64Array::from(v))
}

fn float64(v: Vec<f64>) -> ArrayRef {
    Arc::new(Float64Array::from(v))
}

/// `columns` under `schema`, after the `series` column (the names of `series`' indices) if the
/// job is keyed.
fn keyed_batch(
    job: &Job,
    series: &[usize],
    schema: impl Fn(bool) -> arrow_schema::SchemaRef,
    mut columns: Vec<ArrayRef>,
) -> Result<RecordBatch> {
    if let Some(names) = &job.names {
        let names = series.iter().map(|&i| names[i].as_str());
        columns.insert(0, Arc::new(StringArray::from_iter_values(names)));
    }
    RecordBatch::try_new(schema(job.names.is_some()), columns)
        .map_err(|e| Error::internal("build the reply table", e))
}

/// IPC write options with the body compression a reply asks for (none by default).
///
/// # Errors
/// Only if arrow-ipc was built without the codec, which the workspace rules out.
pub(crate) fn write_options(compression: Option<Compression>) -> Result<IpcWriteOptions> {
    IpcWriteOptions::default()
        .try_with_compression(codec(compression))
        .map_err(|e| Error::internal("IPC compression", e))
}

/// Arrow's codec for a wire compression.
pub(crate) fn codec(compression: Option<Compression>) -> Option<CompressionType> {
    compression.map(|c| match c {
        Compression::Zstd => CompressionType::ZSTD,
        Compression::Lz4 => CompressionType::LZ4_FRAME,
    })
}

/// `batch` as one Arrow IPC stream (schema, batch, end-of-stream), its bodies compressed if
/// asked, cut into bodies of at most `max_body` bytes. Concatenated in order, the bodies are
/// the stream.
///
/// # Errors
/// If IPC encoding fails.
pub fn ipc_stream_bodies(
    batch: &RecordBatch,
    max_body: usize,
    compression: Option<Compression>,
) -> Result<Vec<Bytes>> {
    let options = write_options(compression)?;
    let encode = || {
        // Sized up front: a growing buffer would copy a large reply several times over.
        let capacity = batch.get_array_memory_size() + (64 << 10);
        let mut writer = StreamWriter::try_new_with_options(
            Vec::with_capacity(capacity),
            batch.schema_ref(),
            options,
        )?;
        writer.write(batch)?;
        writer.finish()?;
        writer.into_inner()
    };
    let stream = Bytes::from(encode().map_err(|e| Error::internal("encode the result", e))?);
    Ok((0..stream.len())
        .step_by(max_body.max(1))
        .map(|start| stream.slice(start..(start + max_body).min(stream.len())))
        .collect())
}

/// Encodes result batches as the record-batch messages of one open stream whose schema was
/// already sent (the unkeyed `result_schema`): a `session` reply. Keeps its flatbuffer builder and scratch
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
        let (dictionaries, encoded) = self
            .generator
            .encode(
                batch,
                &mut self.dictionaries,
                &self.options,
                &mut self.context,
            )
            .map_err(|e| Error::internal("encode the result", e))?;
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
    use sweepflight_kernel::{Combo, Execution, Params};
    use sweepflight_protocol::Builtin;
    use sweepflight_protocol::{Strategy, result_schema};

    fn job(strategy: Strategy, params: Vec<Params>) -> Job {
        let width = strategy.params().len();
        let values: Vec<f64> = params
            .iter()
            .flat_map(|p| (0..width).map(|k| p.value(k)))
            .collect();
        let combos =
            sweepflight_kernel::Combos::of_program(strategy.program().0, values, params.len());
        Job {
            inputs: Vec::new(),
            names: None,
            strategy,
            combos,
            positions: None,
            exec: Execution::default(),
            // One per series of the results the tests make (they have no inputs).
            periods_per_year: vec![1.0; 4],
            keep: crate::compute::Keep::NOTHING,
            progress: None,
            keep_lines: false,
        }
    }

    fn runs(results: Vec<Vec<ComboResult>>) -> Runs {
        Runs {
            results,
            records: Vec::new(),
        }
    }

    fn hma(combos: &[Combo]) -> Job {
        job(
            Strategy::Builtin(Builtin::HmaSar),
            combos.iter().map(|&c| Params::HmaSar(c)).collect(),
        )
    }

    #[test]
    fn parameter_columns_follow_the_strategy() {
        let params = vec![
            Params::RsiRevert {
                n: 14,
                lower: 30.0,
                upper: 70.5,
            },
            Params::RsiRevert {
                n: 2,
                lower: 0.0,
                upper: 100.0,
            },
        ];
        let batch = to_batch(
            &job(Strategy::Builtin(Builtin::RsiRevert), params),
            &runs(vec![vec![ComboResult::default(); 2]]),
        )
        .unwrap();
        assert_eq!(
            batch.schema(),
            sweepflight_protocol::strategy_schema(&Strategy::Builtin(Builtin::RsiRevert), false)
        );
        let n = batch
            .column(1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(n.values().as_ref(), &[14, 2]);
        let upper = batch
            .column(3)
            .as_any()
            .downcast_ref::<Float64Array>()
            .unwrap();
        assert_eq!(upper.values().as_ref(), &[70.5, 100.0]);
    }

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
                    ..Default::default()
                })
                .collect();
            let batch = to_batch(&hma(&combos), &runs(vec![results])).unwrap();
            let msg = encoder.encode(&batch).unwrap();
            assert!(msg.app_metadata.is_empty() && msg.flight_descriptor.is_none());
            let back = arrow_flight::utils::flight_data_to_arrow_batch(
                &msg,
                result_schema(false),
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
                ..Default::default()
            })
            .collect();
        let batch = to_batch(&hma(&combos), &runs(vec![results])).unwrap();
        let bodies = ipc_stream_bodies(&batch, 1000, None).unwrap();
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

    #[test]
    fn keyed_results_are_series_then_combo() {
        let combos: Vec<Combo> = [6, 8]
            .iter()
            .map(|&l| Combo::from_length(l).unwrap())
            .collect();
        let r = |pnl| ComboResult {
            pnl,
            ..ComboResult::default()
        };
        let job = Job {
            names: Some(vec!["B".into(), "A".into()]),
            ..hma(&combos)
        };
        let batch = to_batch(
            &job,
            &runs(vec![vec![r(1.0), r(2.0)], vec![r(3.0), r(4.0)]]),
        )
        .unwrap();
        assert_eq!(batch.schema(), result_schema(true));
        let series: Vec<_> = batch
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap()
            .iter()
            .flatten()
            .collect();
        assert_eq!(series, ["B", "B", "A", "A"]);
        let combo = batch
            .column(1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(combo.values().as_ref(), &[0, 1, 0, 1]);
        let pnl = batch
            .column(8)
            .as_any()
            .downcast_ref::<Float64Array>()
            .unwrap();
        assert_eq!(pnl.values().as_ref(), &[1.0, 2.0, 3.0, 4.0]);
    }
}
