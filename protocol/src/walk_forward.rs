//! The `walk_forward` action body (protocol v1.2, "Walk-forward in one call"): a sweep body
//! without `rows`, `order_by`, `top` and `blocks`, plus `folds` and `select`; and the folds of
//! one series.

use serde_json::{Map, Number, Value};

use crate::{Error, Result, Selection, SweepRequest};

/// How the rows are cut into train and test ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Folds {
    /// Fold k trains on `[k*step, k*step + train)` (anchored: `[0, k*step + train)`) and tests
    /// on the `test` rows after that, while the test range fits in the series.
    Rolling {
        /// Train rows (of the first fold, if anchored).
        train: u64,
        /// Test rows.
        test: u64,
        /// Rows from one fold to the next (defaults to `test`).
        step: u64,
        /// Every train range starts at row 0.
        anchored: bool,
    },
    /// `[train_start, train_end, test_start, test_end]` per fold, clipped to each series like
    /// `rows`.
    Explicit(Vec<[u64; 4]>),
}

/// One fold of one series: its train and test rows (half-open, within the series).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fold {
    /// The fold's position in the body's list (or its k for rolling folds).
    pub index: u64,
    /// Train rows.
    pub train: (u64, u64),
    /// Test rows.
    pub test: (u64, u64),
}

impl Folds {
    /// The folds of a series of `len` rows: rolling ones while the test range fits; explicit
    /// ones clipped to the series, those whose test range is then empty left out (as are those
    /// whose train range is empty: nothing to choose a combo on).
    pub fn of_series(&self, len: u64) -> Vec<Fold> {
        match self {
            Self::Rolling {
                train,
                test,
                step,
                anchored,
            } => (0u64..)
                .map_while(|k| {
                    let start = k.checked_mul(*step)?;
                    let train_end = start.checked_add(*train)?;
                    let test_end = train_end.checked_add(*test)?;
                    (test_end <= len).then_some(Fold {
                        index: k,
                        train: (if *anchored { 0 } else { start }, train_end),
                        test: (train_end, test_end),
                    })
                })
                .collect(),
            Self::Explicit(list) => list
                .iter()
                .enumerate()
                .filter_map(|(k, &[a, b, c, d])| {
                    let (b, d) = (b.min(len), d.min(len));
                    (a < b && c < d).then_some(Fold {
                        index: k as u64,
                        train: (a, b),
                        test: (c, d),
                    })
                })
                .collect(),
        }
    }

    /// The most folds a series of `len` rows can have.
    pub fn count(&self, len: u64) -> usize {
        match self {
            Self::Rolling { .. } => self.of_series(len).len(),
            Self::Explicit(list) => list.len(),
        }
    }

    fn decode(v: &Value) -> Result<Self> {
        let int = |name: &str, v: Option<&Value>, min: u64| -> Result<Option<u64>> {
            v.map(|v| {
                v.as_u64().filter(|&n| n >= min).ok_or_else(|| {
                    Error::new(format!(
                        "`folds.{name}` must be an integer >= {min}, got {v}"
                    ))
                })
            })
            .transpose()
        };
        match v {
            Value::Object(map) => {
                if let Some(unknown) = map
                    .keys()
                    .find(|k| !["train", "test", "step", "anchored"].contains(&k.as_str()))
                {
                    return Err(Error::new(format!(
                        "`folds` has unknown field {unknown:?}; it takes train, test, step and anchored"
                    )));
                }
                let need = |name: &str| {
                    int(name, map.get(name), 1)?.ok_or_else(|| {
                        Error::new(format!("`folds` needs `{name}`, an integer >= 1"))
                    })
                };
                let (train, test) = (need("train")?, need("test")?);
                let step = int("step", map.get("step"), 1)?.unwrap_or(test);
                let anchored = match map.get("anchored") {
                    None => false,
                    Some(Value::Bool(b)) => *b,
                    Some(other) => {
                        return Err(Error::new(format!(
                            "`folds.anchored` must be true or false, got {other}"
                        )));
                    }
                };
                Ok(Self::Rolling {
                    train,
                    test,
                    step,
                    anchored,
                })
            }
            Value::Array(list) => {
                if list.is_empty() {
                    return Err(Error::new("`folds` must list at least one fold"));
                }
                list.iter()
                    .enumerate()
                    .map(|(k, f)| {
                        let bad = || {
                            Error::new(format!(
                                "`folds[{k}]` must be [train_start, train_end, test_start, test_end], integers with start < end, got {f}"
                            ))
                        };
                        let v: Vec<u64> = f
                            .as_array()
                            .filter(|a| a.len() == 4)
                            .ok_or_else(bad)?
                            .iter()
                            .map(|x| x.as_u64().ok_or_else(bad))
                            .collect::<Result<_>>()?;
                        if v[0] >= v[1] || v[2] >= v[3] {
                            return Err(bad());
                        }
                        Ok([v[0], v[1], v[2], v[3]])
                    })
                    .collect::<Result<_>>()
                    .map(Self::Explicit)
            }
            other => Err(Error::new(format!(
                "`folds` is {{\"train\": N, \"test\": M, \"step\"?: P, \"anchored\"?: bool}} or a list of [train_start, train_end, test_start, test_end], got {other}"
            ))),
        }
    }

    fn encode(&self) -> Value {
        match self {
            Self::Rolling {
                train,
                test,
                step,
                anchored,
            } => {
                let mut map = Map::new();
                map.insert("train".into(), (*train).into());
                map.insert("test".into(), (*test).into());
                if step != test {
                    map.insert("step".into(), (*step).into());
                }
                if *anchored {
                    map.insert("anchored".into(), true.into());
                }
                Value::Object(map)
            }
            Self::Explicit(list) => Value::Array(
                list.iter()
                    .map(|f| Value::Array(f.iter().map(|&x| Value::from(x)).collect()))
                    .collect(),
            ),
        }
    }
}

/// A `walk_forward` body.
#[derive(Debug, Clone, PartialEq)]
pub struct WalkForwardRequest {
    /// The dataset, strategy, combos, series, execution, warm-up, fee and `where`; its
    /// selection is `where` plus `select` as `order_by` with `top: 1` (what each fold's
    /// in-sample run keeps); never `rows` or `blocks`.
    pub sweep: SweepRequest,
    /// The folds.
    pub folds: Folds,
}

impl WalkForwardRequest {
    /// A walk-forward of `sweep`'s combos (its `where`, if any, kept) choosing by `by`.
    ///
    /// # Errors
    /// As [`WalkForwardRequest::decode`] for `rows`, `blocks`, `order_by` or `top` in `sweep`
    /// or an unknown `by`.
    pub fn new(sweep: SweepRequest, folds: Folds, by: &str, descending: bool) -> Result<Self> {
        let body = Self { sweep, folds };
        Self::decode(&body.encode_with(by, descending))
    }

    /// The column the in-sample best is chosen by.
    pub fn select_by(&self) -> &str {
        self.sweep.selection.order_by.as_deref().unwrap_or("pnl")
    }

    /// Largest score first.
    pub fn descending(&self) -> bool {
        self.sweep.selection.descending
    }

    /// The JSON body.
    pub fn encode(&self) -> Vec<u8> {
        self.encode_with(self.select_by(), self.descending())
    }

    fn encode_with(&self, by: &str, descending: bool) -> Vec<u8> {
        let sweep = SweepRequest {
            selection: Selection {
                order_by: None,
                descending: false,
                top: None,
                ..self.sweep.selection.clone()
            },
            ..self.sweep.clone()
        };
        let mut map: Map<String, Value> =
            serde_json::from_slice(&sweep.encode()).expect("a sweep body is a JSON object");
        map.insert("folds".into(), self.folds.encode());
        let mut select = Map::new();
        select.insert("by".into(), by.into());
        select.insert("descending".into(), descending.into());
        map.insert("select".into(), Value::Object(select));
        serde_json::to_vec(&map).expect("a walk-forward body serialises")
    }

    /// Decodes a `walk_forward` body.
    ///
    /// # Errors
    /// [`Error`] for anything a sweep body refuses, `rows`, `order_by`, `descending`, `top` or
    /// `blocks`, missing or bad `folds`, a bad `select` (an unknown column among them).
    pub fn decode(body: &[u8]) -> Result<Self> {
        let text =
            std::str::from_utf8(body).map_err(|e| Error::new(format!("body is not UTF-8: {e}")))?;
        let mut map: Map<String, Value> = match serde_json::from_str(text) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return Err(Error::new("body must be a JSON object")),
            Err(e) => return Err(Error::new(format!("body is not valid JSON: {e}"))),
        };
        for field in ["rows", "order_by", "descending", "top", "blocks"] {
            if map.contains_key(field) {
                return Err(Error::new(format!(
                    "`{field}` is not part of a walk-forward body: the folds choose the rows and `select` the combo"
                )));
            }
        }
        let folds = Folds::decode(
            &map.remove("folds")
                .ok_or_else(|| Error::new("a walk-forward body needs `folds`"))?,
        )?;
        // A portfolio's result has no `pnl`: its folds choose by `total_return`.
        let portfolio = matches!(map.get("strategy"), Some(Value::Object(o)) if crate::portfolio::is_portfolio(o));
        let default_by = if portfolio { "total_return" } else { "pnl" };
        let (by, descending) = match map.remove("select") {
            None => (default_by.to_owned(), true),
            Some(Value::Object(select)) => {
                if let Some(unknown) = select.keys().find(|k| *k != "by" && *k != "descending") {
                    return Err(Error::new(format!(
                        "`select` has unknown field {unknown:?}; it takes by and descending"
                    )));
                }
                let by = match select.get("by") {
                    None => default_by.to_owned(),
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => {
                        return Err(Error::new(format!(
                            "`select.by` must name a result column, got {other}"
                        )));
                    }
                };
                let descending = match select.get("descending") {
                    None => true,
                    Some(Value::Bool(b)) => *b,
                    Some(other) => {
                        return Err(Error::new(format!(
                            "`select.descending` must be true or false, got {other}"
                        )));
                    }
                };
                (by, descending)
            }
            Some(other) => {
                return Err(Error::new(format!(
                    "`select` is {{\"by\": COLUMN, \"descending\": bool}}, got {other}"
                )));
            }
        };
        // The in-sample runs keep the best row by `select` after `where`: the sweep's own
        // selection fields say exactly that, and are checked by its decoder.
        map.insert("order_by".into(), Value::String(by));
        map.insert("descending".into(), Value::Bool(descending));
        map.insert("top".into(), Value::Number(Number::from(1u8)));
        let body = serde_json::to_vec(&map).expect("a JSON object serialises");
        let sweep = SweepRequest::decode(&body).map_err(|e| {
            e.map_message(|m| {
                m.replace("`order_by`", "`select.by`").replace(
                    "unknown result column",
                    "`select.by`: unknown result column",
                )
            })
        })?;
        Ok(Self { sweep, folds })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Grid;

    #[test]
    fn rolling_and_anchored_folds() {
        let f = Folds::Rolling {
            train: 100,
            test: 20,
            step: 20,
            anchored: false,
        };
        let folds = f.of_series(165);
        assert_eq!(folds.len(), 3);
        assert_eq!(folds[0].train, (0, 100));
        assert_eq!(folds[0].test, (100, 120));
        assert_eq!(folds[2].train, (40, 140));
        assert_eq!(folds[2].test, (140, 160));
        let a = Folds::Rolling {
            train: 100,
            test: 20,
            step: 30,
            anchored: true,
        };
        let folds = a.of_series(1_000);
        assert_eq!(folds[1].train, (0, 130));
        assert_eq!(folds[1].test, (130, 150));
        assert!(f.of_series(119).is_empty());
        // Huge steps do not overflow.
        let big = Folds::Rolling {
            train: u64::MAX,
            test: 1,
            step: u64::MAX,
            anchored: false,
        };
        assert!(big.of_series(10).is_empty());
    }

    #[test]
    fn explicit_folds_are_clipped_and_empty_ones_left_out() {
        let f = Folds::Explicit(vec![[0, 50, 50, 80], [0, 50, 90, 120], [100, 200, 0, 10]]);
        let folds = f.of_series(85);
        assert_eq!(folds.len(), 1);
        assert_eq!(folds[0].test, (50, 80));
        let folds = f.of_series(100);
        assert_eq!(folds.len(), 2);
        assert_eq!((folds[1].index, folds[1].test), (1, (90, 100)));
    }

    #[test]
    fn bodies_decode_and_round_trip() {
        let r = WalkForwardRequest::decode(
            br#"{"dataset": "p", "strategy": "sma_cross", "grid": {"fast": [5, 10], "slow": [20]},
                "folds": {"train": 500, "test": 100}, "select": {"by": "sharpe"}, "warmup": 50,
                "where": {"trades": [3, null]}}"#,
        )
        .unwrap();
        assert_eq!(r.select_by(), "sharpe");
        assert!(r.descending());
        assert_eq!(r.sweep.selection.top, Some(1));
        assert_eq!(r.sweep.execution.warmup, 50);
        assert_eq!(
            r.sweep.grid,
            Grid::Product(vec![vec![5.0, 10.0], vec![20.0]])
        );
        assert_eq!(WalkForwardRequest::decode(&r.encode()).unwrap(), r);
        let d = WalkForwardRequest::decode(
            br#"{"dataset": "p", "lengths": [6], "folds": [[0, 10, 10, 20]]}"#,
        )
        .unwrap();
        assert_eq!(d.select_by(), "pnl");
        assert_eq!(WalkForwardRequest::decode(&d.encode()).unwrap(), d);
    }

    #[test]
    fn refusals_name_the_field() {
        for (body, says) in [
            (r#"{"dataset": "p", "lengths": [6]}"#, "needs `folds`"),
            (
                r#"{"dataset": "p", "lengths": [6], "folds": {"train": 5}}"#,
                "`test`",
            ),
            (
                r#"{"dataset": "p", "lengths": [6], "folds": {"train": 5, "test": 0}}"#,
                "folds.test",
            ),
            (
                r#"{"dataset": "p", "lengths": [6], "folds": {"train": 5, "test": 1, "x": 1}}"#,
                "unknown field",
            ),
            (
                r#"{"dataset": "p", "lengths": [6], "folds": []}"#,
                "at least one",
            ),
            (
                r#"{"dataset": "p", "lengths": [6], "folds": [[5, 5, 6, 7]]}"#,
                "folds[0]",
            ),
            (
                r#"{"dataset": "p", "lengths": [6], "folds": [[0, 5, 7, 6]]}"#,
                "folds[0]",
            ),
            (
                r#"{"dataset": "p", "lengths": [6], "folds": 3}"#,
                "`folds` is",
            ),
            (
                r#"{"dataset": "p", "lengths": [6], "folds": [[0, 5, 5, 6]], "rows": [0, 9]}"#,
                "`rows`",
            ),
            (
                r#"{"dataset": "p", "lengths": [6], "folds": [[0, 5, 5, 6]], "top": 1}"#,
                "`top`",
            ),
            (
                r#"{"dataset": "p", "lengths": [6], "folds": [[0, 5, 5, 6]], "blocks": 2}"#,
                "`blocks`",
            ),
            (
                r#"{"dataset": "p", "lengths": [6], "folds": [[0, 5, 5, 6]], "order_by": "pnl"}"#,
                "`order_by`",
            ),
            (
                r#"{"dataset": "p", "lengths": [6], "folds": [[0, 5, 5, 6]], "select": {"by": "nope"}}"#,
                "select.by",
            ),
            (
                r#"{"dataset": "p", "lengths": [6], "folds": [[0, 5, 5, 6]], "select": {"by": 1}}"#,
                "select.by",
            ),
            (
                r#"{"dataset": "p", "lengths": [6], "folds": [[0, 5, 5, 6]], "select": "pnl"}"#,
                "`select` is",
            ),
        ] {
            let e = WalkForwardRequest::decode(body.as_bytes())
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{body}: {e}");
        }
    }
}
