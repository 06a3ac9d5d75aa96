//! Printing tables: aligned text, CSV or JSON, on stdout.

use std::io::Write;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray, UInt64Array};
use sweepflight_client::DatasetInfo;

/// How to print a table.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Format {
    /// Aligned columns for people.
    Table,
    /// CSV with a header row.
    Csv,
    /// A JSON array of row objects.
    Json,
}

pub(crate) fn write(batches: &[RecordBatch], format: Format) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match format {
        Format::Table => writeln!(
            out,
            "{}",
            arrow_cast::pretty::pretty_format_batches(batches)?
        )?,
        Format::Csv => {
            let mut w = arrow_csv::Writer::new(&mut out);
            for b in batches {
                w.write(b)?;
            }
        }
        Format::Json => {
            let mut w = arrow_json::ArrayWriter::new(&mut out);
            for b in batches {
                w.write(b)?;
            }
            w.finish()?;
            writeln!(out)?;
        }
    }
    Ok(())
}

/// The `ls` table.
pub(crate) fn datasets(list: &[DatasetInfo]) -> anyhow::Result<RecordBatch> {
    let names = StringArray::from_iter_values(list.iter().map(|d| d.name.as_str()));
    let rows = Int64Array::from_iter_values(list.iter().map(|d| d.rows));
    let bytes = Int64Array::from_iter_values(list.iter().map(|d| d.bytes));
    let versions: UInt64Array = list.iter().map(|d| d.version).collect();
    let columns = [
        ("dataset", Arc::new(names) as ArrayRef),
        ("rows", Arc::new(rows)),
        ("bytes", Arc::new(bytes)),
        ("version", Arc::new(versions)),
    ];
    Ok(RecordBatch::try_from_iter(columns)?)
}
