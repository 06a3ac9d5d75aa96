//! The typed values of the contract: sweep requests and results, put summaries, dataset info.

use arrow_array::{Array, Float64Array, Int64Array, RecordBatch};
use arrow_schema::SchemaRef;
use serde::{Deserialize, Serialize};
use sweepflight_kernel::{Combo, ComboResult};

use crate::{Error, Result};

/// A `sweep` action body.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepRequest {
    /// The dataset to sweep.
    pub dataset: String,
    /// Lengths (each expands by the paper rule), in request order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lengths: Option<Vec<u32>>,
    /// Explicit `[half, full, sqrt, p3, p2, p]` tuples, in request order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub params: Option<Vec<[u32; 6]>>,
    /// Round-trip fee as a fraction; the server's default (0.0009) when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fee: Option<f64>,
}

impl SweepRequest {
    /// Combos derived from lengths by the paper rule.
    pub fn lengths(dataset: impl Into<String>, lengths: impl IntoIterator<Item = u32>) -> Self {
        Self {
            dataset: dataset.into(),
            lengths: Some(lengths.into_iter().collect()),
            params: None,
            fee: None,
        }
    }

    /// Explicit combos.
    pub fn combos(dataset: impl Into<String>, combos: &[Combo]) -> Self {
        Self {
            dataset: dataset.into(),
            lengths: None,
            params: Some(combos.iter().map(Combo::windows).collect()),
            fee: None,
        }
    }

    /// The same request with a fee.
    pub fn with_fee(mut self, fee: f64) -> Self {
        self.fee = Some(fee);
        self
    }

    /// Number of combos asked for.
    pub fn len(&self) -> usize {
        self.lengths.as_ref().map_or(0, Vec::len) + self.params.as_ref().map_or(0, Vec::len)
    }

    /// True if no combo is asked for.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The JSON body.
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] unless exactly one of lengths / params is set.
    pub fn to_body(&self) -> Result<Vec<u8>> {
        if self.lengths.is_some() == self.params.is_some() {
            return Err(Error::InvalidRequest(
                "give exactly one of lengths and params".into(),
            ));
        }
        serde_json::to_vec(self).map_err(|e| Error::InvalidRequest(e.to_string()))
    }

    /// Splits into requests of at most `max` combos each, in order.
    pub fn chunks(&self, max: usize) -> Vec<SweepRequest> {
        let max = max.max(1);
        let part = |lengths, params| SweepRequest {
            dataset: self.dataset.clone(),
            lengths,
            params,
            fee: self.fee,
        };
        match (&self.lengths, &self.params) {
            (Some(l), _) if l.len() > max => l
                .chunks(max)
                .map(|c| part(Some(c.to_vec()), None))
                .collect(),
            (_, Some(p)) if p.len() > max => p
                .chunks(max)
                .map(|c| part(None, Some(c.to_vec())))
                .collect(),
            _ => vec![self.clone()],
        }
    }
}

/// One row of a sweep result.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ComboRow {
    /// 0-based position in the request.
    pub combo: i64,
    /// `[half, full, sqrt, p3, p2, p]`.
    pub windows: [i64; 6],
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
    /// One row per combo, in request order.
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
        let windows: Vec<_> = Combo::FIELDS
            .iter()
            .map(|f| int(f).expect("checked"))
            .collect();
        let (combo, pnl, trades) = (
            int("combo").expect("checked"),
            float("pnl").expect("checked"),
            int("trades").expect("checked"),
        );
        let (wins, rate, dd) = (int("wins"), float("win_rate"), float("max_drawdown"));
        (0..self.batch.num_rows())
            .map(|i| ComboRow {
                combo: combo.value(i),
                windows: std::array::from_fn(|w| windows[w].value(i)),
                pnl: pnl.value(i),
                trades: trades.value(i),
                wins: wins.map_or(0, |c| c.value(i)),
                win_rate: rate.map_or(0.0, |c| c.value(i)),
                max_drawdown: dd.map_or(0.0, |c| c.value(i)),
            })
            .collect()
    }

    /// The rows as the kernel's result type (for comparing with an in-process sweep).
    pub fn results(&self) -> Vec<ComboResult> {
        self.rows()
            .iter()
            .map(|r| ComboResult {
                pnl: r.pnl,
                trades: r.trades as u64,
                wins: r.wins as u64,
                max_drawdown: r.max_drawdown,
            })
            .collect()
    }

    /// Checks the contract's first nine columns are there with the right types.
    pub(crate) fn check(batch: RecordBatch) -> Result<Self> {
        for name in ["combo", "half", "full", "sqrt", "p3", "p2", "p", "trades"] {
            column::<Int64Array>(&batch, name)
                .ok_or_else(|| Error::Protocol(format!("no int64 column `{name}`")))?;
        }
        column::<Float64Array>(&batch, "pnl")
            .ok_or_else(|| Error::Protocol("no float64 column `pnl`".into()))?;
        Ok(Self { batch })
    }
}

fn column<'a, T: Array + 'static>(batch: &'a RecordBatch, name: &str) -> Option<&'a T> {
    batch.column_by_name(name)?.as_any().downcast_ref::<T>()
}

/// What the server stored on a put.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct PutSummary {
    /// Dataset name.
    pub dataset: String,
    /// Rows stored.
    pub rows: u64,
    /// In-memory size in bytes.
    pub bytes: u64,
    /// 1 for a new name, +1 per replacement.
    pub version: u64,
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
    /// Schema of the stored rows.
    pub schema: SchemaRef,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_and_chunks() {
        let r = SweepRequest::lengths("p", [6, 8, 10]).with_fee(0.001);
        assert_eq!(
            String::from_utf8(r.to_body().unwrap()).unwrap(),
            r#"{"dataset":"p","lengths":[6,8,10],"fee":0.001}"#
        );
        let parts = r.chunks(2);
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[1].lengths, Some(vec![10]));
        assert_eq!(parts[1].fee, Some(0.001));
        let c = SweepRequest::combos("p", &[Combo::from_length(6).unwrap()]);
        assert_eq!(
            String::from_utf8(c.to_body().unwrap()).unwrap(),
            r#"{"dataset":"p","params":[[3,6,2,1,2,3]]}"#
        );
        let neither = SweepRequest { lengths: None, ..r };
        assert!(neither.to_body().is_err());
    }
}
