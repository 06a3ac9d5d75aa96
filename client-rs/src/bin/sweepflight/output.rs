//! Printing tables: aligned text, CSV or JSON, on stdout.

use std::io::Write;
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray, UInt64Array};
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
        Format::Table => {
            // Rounded for a terminal; `--output csv` and `json` keep every digit.
            let shown = batches.iter().map(rounded).collect::<Result<Vec<_>, _>>()?;
            writeln!(
                out,
                "{}",
                arrow_cast::pretty::pretty_format_batches(&shown)?
            )?;
        }
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

/// `batch` with its float64 columns as text rounded to what a terminal shows: four decimals
/// (trailing zeros dropped), or four significant digits in scientific form for magnitudes
/// below 0.001 or from 1e9.
fn rounded(batch: &RecordBatch) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let columns: Vec<(String, ArrayRef)> = batch
        .schema()
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(f, c)| {
            let c = match c.as_any().downcast_ref::<Float64Array>() {
                Some(values) => {
                    Arc::new(values.iter().map(|v| v.map(short)).collect::<StringArray>())
                        as ArrayRef
                }
                None => Arc::clone(c),
            };
            (f.name().clone(), c)
        })
        .collect();
    RecordBatch::try_from_iter(columns)
}

/// One value as [`rounded`] shows it.
fn short(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() || a == 0.0 {
        return if v == 0.0 { "0".into() } else { v.to_string() };
    }
    if !(1e-3..1e9).contains(&a) {
        return format!("{v:.3e}");
    }
    let t = format!("{v:.4}");
    let t = t.trim_end_matches('0').trim_end_matches('.');
    if t == "-0" { "0".into() } else { t.to_owned() }
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

#[cfg(test)]
mod tests {
    use super::short;

    #[test]
    fn table_values_are_rounded_for_a_terminal() {
        for (v, want) in [
            (-19043.123456789, "-19043.1235"),
            (1.5, "1.5"),
            (2.0, "2"),
            (0.0, "0"),
            (-0.00001, "-1.000e-5"),
            (0.00049, "4.900e-4"),
            (123.45678, "123.4568"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "inf"),
            (3.2e12, "3.200e12"),
            (-0.00004, "-4.000e-5"),
        ] {
            assert_eq!(short(v), want, "{v}");
        }
    }
}
