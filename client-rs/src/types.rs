//! The typed values of the contract as the client returns them: sweep results and dataset
//! info. Requests, put summaries and the result schema are `sweepflight-protocol`'s.

use arrow_array::{Array, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::SchemaRef;
use serde::Serialize;
use sweepflight_protocol::{SERIES_COLUMN, check_result_schema};

use crate::{Error, Result};

/// One row of a sweep result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComboRow {
    /// The series (key value) on a keyed dataset; `None` otherwise.
    pub series: Option<String>,
    /// 0-based position in the request.
    pub combo: i64,
    /// The combo's parameters in the strategy's order (`strategy.params()`), as f64
    /// (windows are exact).
    pub params: Vec<f64>,
    /// PnL in percentage points.
    pub pnl: f64,
    /// Booked trades.
    pub trades: i64,
    /// Trades with a positive net return (0 if the server does not send the column).
    pub wins: i64,
    /// `wins / trades` (0 if absent).
    pub win_rate: f64,
    /// Largest fall of the cumulative PnL below its running peak (0 if absent).
    pub max_drawdown: f64,
}

/// A sweep's reply: the Arrow table as the server sent it.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepResult {
    /// One row per combo, in request order (per series, then combo, on a keyed dataset).
    pub batch: RecordBatch,
}

impl SweepResult {
    /// The rows, typed.
    ///
    /// # Panics
    /// Never for a batch that [`crate::Client::sweep`] returned: it checks the schema.
    pub fn rows(&self) -> Vec<ComboRow> {
        let int = |name| column::<Int64Array>(&self.batch, name);
        let float = |name| column::<Float64Array>(&self.batch, name);
        // The parameter columns: int64 windows or float64 numbers, between `combo` and `pnl`.
        let schema = self.batch.schema();
        let params: Vec<Box<dyn Fn(usize) -> f64 + '_>> = schema
            .fields()
            .iter()
            .skip_while(|f| f.name() != "combo")
            .skip(1)
            .take_while(|f| f.name() != "pnl")
            .map(|f| -> Box<dyn Fn(usize) -> f64 + '_> {
                match (int(f.name()), float(f.name())) {
                    (Some(c), _) => Box::new(move |i| c.value(i) as f64),
                    (None, Some(c)) => Box::new(move |i| c.value(i)),
                    (None, None) => unreachable!("checked: parameters are int64 or float64"),
                }
            })
            .collect();
        let series = column::<StringArray>(&self.batch, SERIES_COLUMN);
        let (combo, pnl, trades) = (
            int("combo").expect("checked"),
            float("pnl").expect("checked"),
            int("trades").expect("checked"),
        );
        let (wins, rate, dd) = (int("wins"), float("win_rate"), float("max_drawdown"));
        (0..self.batch.num_rows())
            .map(|i| ComboRow {
                series: series.map(|s| s.value(i).to_owned()),
                combo: combo.value(i),
                params: params.iter().map(|p| p(i)).collect(),
                pnl: pnl.value(i),
                trades: trades.value(i),
                wins: wins.map_or(0, |c| c.value(i)),
                win_rate: rate.map_or(0.0, |c| c.value(i)),
                max_drawdown: dd.map_or(0.0, |c| c.value(i)),
            })
            .collect()
    }

    /// True if the result has the `series` column (a keyed dataset).
    pub fn is_keyed(&self) -> bool {
        self.batch.schema().field(0).name() == SERIES_COLUMN
    }

    /// Checks the schema against the contract's (`sweepflight_protocol::result_schema`).
    pub(crate) fn check(batch: RecordBatch) -> Result<Self> {
        check_result_schema(&batch.schema()).map_err(|e| Error::Protocol(e.to_string()))?;
        Ok(Self { batch })
    }
}

fn column<'a, T: Array + 'static>(batch: &'a RecordBatch, name: &str) -> Option<&'a T> {
    batch.column_by_name(name)?.as_any().downcast_ref::<T>()
}

/// A stored dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct DatasetInfo {
    /// Dataset name.
    pub name: String,
    /// Rows.
    pub rows: i64,
    /// In-memory size in bytes.
    pub bytes: i64,
    /// Version, if the server reports it.
    pub version: Option<u64>,
    /// The key column of a keyed dataset.
    pub key: Option<String>,
    /// Its number of series (a keyed dataset).
    pub series: Option<u64>,
    /// The bar columns the server can use (v1.3), in the order open, high, low, close,
    /// volume, time.
    pub columns: Vec<String>,
    /// Recognised bar columns that break their rules, and why (v1.3): a sweep that needs one
    /// is refused.
    pub unusable: std::collections::BTreeMap<String, String>,
    /// Schema of the stored rows.
    pub schema: SchemaRef,
}

#[cfg(test)]
mod tests {
    use super::*;
    use sweepflight_protocol::{SweepRequest, result_schema};

    #[test]
    fn rows_of_a_keyed_result() {
        let schema = result_schema(true);
        let columns: Vec<std::sync::Arc<dyn Array>> = schema
            .fields()
            .iter()
            .map(|f| match f.data_type() {
                arrow_schema::DataType::Utf8 => {
                    std::sync::Arc::new(StringArray::from(vec!["A"])) as _
                }
                arrow_schema::DataType::Int64 => {
                    std::sync::Arc::new(Int64Array::from(vec![7])) as _
                }
                _ => std::sync::Arc::new(Float64Array::from(vec![0.5])) as _,
            })
            .collect();
        let r = SweepResult::check(RecordBatch::try_new(schema, columns).unwrap()).unwrap();
        assert!(r.is_keyed());
        let row = &r.rows()[0];
        assert_eq!(
            (row.series.as_deref(), row.combo, row.pnl),
            (Some("A"), 7, 0.5)
        );
        let c = SweepRequest::params(
            "p",
            [sweepflight_kernel::Combo::from_length(6).unwrap().windows()],
        );
        assert_eq!(
            String::from_utf8(c.encode()).unwrap(),
            r#"{"dataset":"p","params":[[3,6,2,1,2,3]]}"#
        );
    }
}
