//! Selection on the server (protocol v1.2): `where` (inclusive bounds on result columns),
//! `order_by` with `descending`, and `top` (per series on a keyed dataset), and the limits
//! that change with `top` (`--max-combos` counts the rows returned, `--max-grid-combos` the
//! combos evaluated).

use serde_json::{Map, Value};

use crate::schema::V12_METRIC_COLUMNS;
use crate::{Error, Result, Strategy};

/// The selection's body fields: `where`, `order_by`, `descending`, `top`.
pub(crate) type Fields = (
    Option<Map<String, Value>>,
    Option<String>,
    Option<bool>,
    Option<serde_json::Number>,
);

/// The combos a sweep with `top` may evaluate by default (series x combos).
pub const DEFAULT_MAX_GRID_COMBOS: usize = 100_000_000;

/// `--max-trade-combos` by default: combos x series a `trades` or `equity` call may return.
pub const DEFAULT_MAX_TRADE_COMBOS: usize = 1_000;

/// What a sweep keeps of its rows, and in which order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Selection {
    /// Inclusive bounds per column, by column name: `(column, lo, hi)`, `None` unbounded.
    pub filters: Vec<(String, Option<f64>, Option<f64>)>,
    /// The column rows are ordered by (ties by `combo` ascending, nulls last).
    pub order_by: Option<String>,
    /// Largest first (the default when `order_by` is given).
    pub descending: bool,
    /// Only the first `top` rows (per series).
    pub top: Option<u64>,
}

impl Selection {
    /// True if the selection keeps every row in request order.
    pub fn is_empty(&self) -> bool {
        self.filters.is_empty() && self.order_by.is_none() && self.top.is_none()
    }

    /// The selection fields of a body, checked against `strategy`'s result columns.
    ///
    /// # Errors
    /// [`Error`] for an unknown or non-numeric column, bounds that are not `[number | null,
    /// number | null]`, `descending` without `order_by`, a `top` that is not an integer >= 1.
    pub(crate) fn decode(
        strategy: &Strategy,
        filters: Option<&Map<String, Value>>,
        order_by: Option<String>,
        descending: Option<bool>,
        top: Option<&serde_json::Number>,
    ) -> Result<Self> {
        let known = |name: &str| -> Result<()> {
            if columns(strategy).any(|c| c == name) {
                return Ok(());
            }
            Err(Error::new(format!(
                "unknown result column {name:?}; a {strategy} result has {}",
                columns(strategy).collect::<Vec<_>>().join(", ")
            )))
        };
        let mut out = Self::default();
        for (name, bounds) in filters.into_iter().flatten() {
            known(name)?;
            let bad = || {
                Error::new(format!(
                    "`where.{name}` must be [lo, hi], each a number or null, got {bounds}"
                ))
            };
            let pair = bounds.as_array().filter(|a| a.len() == 2).ok_or_else(bad)?;
            let bound = |v: &Value| match v {
                Value::Null => Ok(None),
                Value::Number(n) => n.as_f64().map(Some).ok_or_else(bad),
                _ => Err(bad()),
            };
            out.filters
                .push((name.clone(), bound(&pair[0])?, bound(&pair[1])?));
        }
        if let Some(name) = &order_by {
            known(name)?;
        } else if descending.is_some() {
            return Err(Error::new("`descending` orders by `order_by`: give both"));
        }
        out.descending = order_by.is_some() && descending.unwrap_or(true);
        out.order_by = order_by;
        out.top = top
            .map(|t| {
                t.as_u64()
                    .filter(|&k| k >= 1)
                    .ok_or_else(|| Error::new(format!("`top` must be an integer >= 1, got {t}")))
            })
            .transpose()?;
        Ok(out)
    }

    /// The body fields, as [`Selection::decode`] reads them.
    pub(crate) fn encode(&self) -> Fields {
        let number = |v: Option<f64>| {
            v.and_then(serde_json::Number::from_f64)
                .map_or(Value::Null, Value::Number)
        };
        let filters = (!self.filters.is_empty()).then(|| {
            self.filters
                .iter()
                .map(|(name, lo, hi)| (name.clone(), Value::Array(vec![number(*lo), number(*hi)])))
                .collect()
        });
        let descending = self.order_by.is_some().then_some(self.descending);
        (
            filters,
            self.order_by.clone(),
            descending,
            self.top.map(serde_json::Number::from),
        )
    }

    /// Rows a sweep of `combos` per series over `series` series returns.
    pub fn rows(&self, series: usize, combos: usize) -> usize {
        let kept = self.top.map_or(combos, |t| {
            combos.min(usize::try_from(t).unwrap_or(usize::MAX))
        });
        series.saturating_mul(kept)
    }

    /// The most combos x series a call with this selection may evaluate: `max_grid` with
    /// `top` (the server selects as it goes), else `max_combos` (every row is returned).
    pub fn evaluated_cap(&self, max_combos: usize, max_grid: usize) -> usize {
        if self.top.is_some() {
            max_grid
        } else {
            max_combos
        }
    }

    /// The limits of a sweep of `combos` per series over `series` series: without `top`,
    /// `max_combos` counts what is evaluated; with it, what is returned, and `max_grid`
    /// what is evaluated.
    ///
    /// # Errors
    /// [`Error`] naming the count and the flag.
    pub fn check_limits(
        &self,
        series: usize,
        combos: usize,
        max_combos: usize,
        max_grid: usize,
    ) -> Result<()> {
        let evaluated = series.saturating_mul(combos);
        let per = |n: usize| {
            if series == 1 {
                format!("{n} combos")
            } else {
                format!("{series} series x {} combos = {n} runs", n / series.max(1))
            }
        };
        if self.top.is_some() {
            if evaluated > max_grid {
                return Err(Error::new(format!(
                    "{} requested; this server evaluates at most {max_grid} per call (--max-grid-combos)",
                    per(evaluated)
                )));
            }
            let returned = self.rows(series, combos);
            if returned > max_combos {
                return Err(Error::new(format!(
                    "{returned} rows requested (top x series); this server returns at most {max_combos} per call (--max-combos)"
                )));
            }
            return Ok(());
        }
        if evaluated > max_combos {
            return Err(Error::new(format!(
                "{} requested; this server allows at most {max_combos} per call (--max-combos)",
                per(evaluated)
            )));
        }
        Ok(())
    }
}

/// The numeric result columns of `strategy`, in order: what `where` and `order_by` may name.
fn columns(strategy: &Strategy) -> Box<dyn Iterator<Item = String> + '_> {
    if strategy.portfolio().is_some() {
        return Box::new(
            std::iter::once("combo".to_owned())
                .chain(strategy.params().into_iter().map(|p| p.0.to_owned()))
                .chain(
                    crate::schema::PORTFOLIO_METRIC_COLUMNS
                        .iter()
                        .map(|c| c.0.to_owned()),
                ),
        );
    }
    Box::new(
        std::iter::once("combo".to_owned())
            .chain(strategy.params().into_iter().map(|p| p.0.to_owned()))
            .chain(
                ["pnl", "trades", "wins", "win_rate", "max_drawdown"]
                    .into_iter()
                    .chain(V12_METRIC_COLUMNS)
                    .chain([crate::TOTAL_RETURN_COLUMN])
                    .map(str::to_owned),
            ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Builtin;

    fn decode(body: &str) -> Result<Selection> {
        let v: Value = serde_json::from_str(body).unwrap();
        Selection::decode(
            &Strategy::Builtin(Builtin::SmaCross),
            v.get("where").and_then(Value::as_object),
            v.get("order_by").and_then(Value::as_str).map(str::to_owned),
            v.get("descending").and_then(Value::as_bool),
            v.get("top").and_then(Value::as_number),
        )
    }

    #[test]
    fn fields_and_refusals() {
        let s = decode(r#"{"where": {"trades": [30, null], "fast": [null, 10]}, "order_by": "sharpe", "top": 5}"#).unwrap();
        assert!(s.filters.contains(&("trades".into(), Some(30.0), None)));
        assert!(s.filters.contains(&("fast".into(), None, Some(10.0))));
        assert_eq!(s.order_by.as_deref(), Some("sharpe"));
        assert!(s.descending);
        assert_eq!(s.top, Some(5));
        assert!(decode("{}").unwrap().is_empty());
        for (body, says) in [
            (
                r#"{"where": {"half": [1, 2]}}"#,
                "unknown result column \"half\"; a sma_cross result has combo, fast, slow",
            ),
            (r#"{"where": {"series": [1, 2]}}"#, "unknown result column"),
            (r#"{"where": {"pnl": [1]}}"#, "`where.pnl` must be [lo, hi]"),
            (
                r#"{"where": {"pnl": ["a", 2]}}"#,
                "`where.pnl` must be [lo, hi]",
            ),
            (r#"{"order_by": "nope"}"#, "unknown result column"),
            (r#"{"descending": false}"#, "give both"),
            (r#"{"top": 0}"#, "`top` must be an integer >= 1"),
            (r#"{"top": 2.5}"#, "`top` must be an integer >= 1"),
        ] {
            let e = decode(body).unwrap_err().to_string();
            assert!(e.contains(says), "{body}: {e}");
        }
    }

    #[test]
    fn limits_count_what_is_returned_with_top() {
        let plain = Selection::default();
        assert!(plain.check_limits(1, 10, 10, 100).is_ok());
        assert!(
            plain
                .check_limits(1, 11, 10, 100)
                .unwrap_err()
                .to_string()
                .contains("--max-combos")
        );
        let top = Selection {
            top: Some(3),
            ..Selection::default()
        };
        assert!(top.check_limits(2, 50, 10, 100).is_ok());
        let e = top.check_limits(4, 50, 10, 100).unwrap_err().to_string();
        assert!(
            e.contains("--max-grid-combos") && e.contains("4 series x 50 combos = 200"),
            "{e}"
        );
        let e = top.check_limits(4, 20, 10, 100).unwrap_err().to_string();
        assert!(e.contains("12 rows") && e.contains("--max-combos"), "{e}");
        assert_eq!(top.rows(2, 2), 4);
    }
}
