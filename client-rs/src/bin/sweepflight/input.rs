//! Reading local files (Parquet, CSV, Arrow IPC) into a stream of batches with a `close`
//! column.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::{ArrowError, Schema, SchemaRef};
use futures::stream::BoxStream;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// A problem with the user's input: exit code 4.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct InputError(pub(crate) String);

type BatchIter = Box<dyn Iterator<Item = Result<RecordBatch, ArrowError>> + Send>;
type Batches = BoxStream<'static, sweepflight_client::Result<RecordBatch>>;

/// The file's batches (read lazily) and its row count when the format knows it up front.
pub(crate) fn read(path: &Path, close: &str) -> anyhow::Result<(Batches, Option<u64>)> {
    let file = File::open(path).map_err(|e| InputError(format!("{}: {e}", path.display())))?;
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let (schema, rows, iter): (SchemaRef, Option<u64>, BatchIter) = match ext.as_str() {
        "parquet" | "pq" => {
            let builder = ParquetRecordBatchReaderBuilder::try_new(file)
                .map_err(|e| InputError(e.to_string()))?;
            let rows = builder.metadata().file_metadata().num_rows() as u64;
            let reader = builder
                .with_batch_size(64 * 1024)
                .build()
                .map_err(|e| InputError(e.to_string()))?;
            (reader.schema(), Some(rows), Box::new(reader))
        }
        "csv" => {
            let format = arrow_csv::reader::Format::default().with_header(true);
            let (schema, _) = format
                .infer_schema(&file, Some(10_000))
                .map_err(|e| InputError(e.to_string()))?;
            let schema = pandas_index_named(schema);
            let file = File::open(path)?;
            let reader = arrow_csv::ReaderBuilder::new(Arc::new(schema))
                .with_format(format)
                .with_batch_size(64 * 1024)
                .build(file)?;
            (reader.schema(), None, Box::new(reader))
        }
        "arrow" | "arrows" | "ipc" | "feather" => {
            match arrow_ipc::reader::FileReader::try_new(file, None) {
                Ok(reader) => (reader.schema(), None, Box::new(reader)),
                Err(_) => {
                    let reader = arrow_ipc::reader::StreamReader::try_new(File::open(path)?, None)
                        .map_err(|e| {
                            InputError(format!("{}: not Arrow IPC: {e}", path.display()))
                        })?;
                    (reader.schema(), None, Box::new(reader))
                }
            }
        }
        other => {
            return Err(InputError(format!(
                "{}: unknown file type {other:?}; expected .parquet, .csv or .arrow",
                path.display()
            ))
            .into());
        }
    };
    let renamed = renamed(&schema, close)?;
    let batches = iter.map(move |b| {
        let b = b?;
        Ok(match &renamed {
            Some(s) => RecordBatch::try_new(Arc::clone(s), b.columns().to_vec())?,
            None => b,
        })
    });
    Ok((Box::pin(futures::stream::iter(batches)), rows))
}

/// A CSV written by pandas' `to_csv` has its index first under an empty header: when that
/// column holds dates or timestamps (and nothing else is named as a time), it goes as `time`,
/// so the bars keep their dates (the server would not recognise an unnamed column).
fn pandas_index_named(schema: Schema) -> Schema {
    let is_time = |t: &arrow_schema::DataType| {
        matches!(
            t,
            arrow_schema::DataType::Date32
                | arrow_schema::DataType::Date64
                | arrow_schema::DataType::Timestamp(..)
        )
    };
    let named_time = schema.fields().iter().any(|f| {
        ["time", "date", "datetime", "timestamp"]
            .iter()
            .any(|n| f.name().eq_ignore_ascii_case(n))
    });
    match schema.fields().first() {
        Some(first)
            if first.name().trim().is_empty() && is_time(first.data_type()) && !named_time =>
        {
            eprintln!("note: the file's first column has no header; its dates go as `time`");
            let fields: Vec<_> = schema
                .fields()
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let f = f.as_ref().clone();
                    if i == 0 { f.with_name("time") } else { f }
                })
                .collect();
            Schema::new(fields)
        }
        _ => schema,
    }
}

/// The schema with `close` as the name of the close column, or None if it already is.
fn renamed(schema: &Schema, close: &str) -> anyhow::Result<Option<SchemaRef>> {
    // yfinance's `Close` and the like: the server recognises the close column ignoring case,
    // as it does open, high, low, volume and a time column, so the file goes as it is.
    if close == "close"
        && schema.index_of(close).is_err()
        && schema
            .fields()
            .iter()
            .any(|f| f.name().eq_ignore_ascii_case(close))
    {
        return Ok(None);
    }
    let index = schema.index_of(close).map_err(|_| {
        let names: Vec<_> = schema.fields().iter().map(|f| f.name().clone()).collect();
        InputError(format!(
            "no column {close:?} in the file (columns: {names:?}); use --close-column"
        ))
    })?;
    if close == "close" {
        return Ok(None);
    }
    if schema.index_of("close").is_ok() {
        return Err(
            InputError(format!("the file has both {close:?} and \"close\" columns")).into(),
        );
    }
    let fields: Vec<_> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            if i == index {
                f.as_ref().clone().with_name("close")
            } else {
                f.as_ref().clone()
            }
        })
        .collect();
    Ok(Some(Arc::new(Schema::new_with_metadata(
        fields,
        schema.metadata().clone(),
    ))))
}
