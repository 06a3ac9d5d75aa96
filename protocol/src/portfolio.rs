//! Portfolio strategies on the wire (protocol v1.4, docs/portfolios.md): the strategy object
//! with a `rank` key, its counts (`longs`, `shorts`, `keep`) and `rebalance`, each a number or
//! a parameter name, and the parameters they add (numbered after the weight's, before the
//! constraint's, each with the range its roles allow).
//!
//! What a portfolio computes (calendar, selection, accounting) is the kernel's
//! (`sweepflight_kernel::portfolio`); this is what a client may send and how a combo's values
//! become its counts.

use std::sync::Arc;

use serde_json::{Map, Value};
use sweepflight_kernel::expr::{Field, ParamKind, Program};

use crate::{Error, Result};

/// The largest `longs`, `shorts` or `keep`.
pub const MAX_COUNT: u32 = 100_000;

/// The largest `rebalance` every K rows (the language's largest window).
pub const MAX_REBALANCE: u32 = sweepflight_kernel::expr::bind::MAX_WINDOW;

/// The keys of a portfolio strategy object, in the order parameters are numbered.
pub const PORTFOLIO_KEYS: [&str; 8] = [
    "rank",
    "filter",
    "weight",
    "longs",
    "shorts",
    "keep",
    "rebalance",
    "inputs",
];

/// A count or a period: a number, or the value of a parameter in each combo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// The same for every combo.
    Fixed(u32),
    /// Parameter `k` of the program (an int parameter).
    Param(usize),
}

impl Count {
    /// The value in the combo of parameter `values`.
    pub fn of(self, values: &[f64]) -> u32 {
        match self {
            Self::Fixed(n) => n,
            // Checked integral and in range when the combo was decoded.
            Self::Param(k) => values[k] as u32,
        }
    }
}

/// When a portfolio decides (docs/portfolios.md, "Rebalances and selection").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rebalance {
    /// Every K calendar rows from the first.
    Every(Count),
    /// The first row of each UTC date.
    Daily,
    /// The first row of each ISO week.
    Weekly,
    /// The first row of each month.
    Monthly,
}

impl Rebalance {
    /// The wire word of a calendar period, if it is one.
    pub fn word(self) -> Option<&'static str> {
        match self {
            Self::Every(_) => None,
            Self::Daily => Some("daily"),
            Self::Weekly => Some("weekly"),
            Self::Monthly => Some("monthly"),
        }
    }
}

/// A portfolio strategy, as sent and as bound.
#[derive(Debug, Clone)]
pub struct Portfolio {
    /// The strategy object as sent (its wire form).
    pub object: Map<String, Value>,
    /// The formulas: `rank`, and `filter` / `weight` when given.
    pub formulas: Vec<(Field, String)>,
    /// Series held long.
    pub longs: Count,
    /// Series held short.
    pub shorts: Count,
    /// The buffer (`None`: none).
    pub keep: Option<Count>,
    /// When it decides.
    pub rebalance: Rebalance,
    /// The dataset columns its formulas read besides the bars.
    pub inputs: Vec<String>,
    /// The body's `constraint`.
    pub constraint: Option<String>,
    /// The parameters in order, with their kinds.
    pub params: Vec<(String, ParamKind)>,
    /// Per parameter, the integers it may take when it is a count or a period (`lo..=hi`);
    /// `None` for the formulas' own parameters (windows and numbers as the language says).
    pub ranges: Vec<Option<(u32, u32)>>,
    /// The formulas as the kernel binds them (the counts' parameters included).
    pub program: Arc<Program>,
}

impl PartialEq for Portfolio {
    fn eq(&self, other: &Self) -> bool {
        (&self.object, &self.constraint) == (&other.object, &other.constraint)
    }
}

/// The one combo's counts and period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Series held long.
    pub longs: u32,
    /// Series held short.
    pub shorts: u32,
    /// The buffer.
    pub keep: Option<u32>,
    /// Every K rows (`None`: a calendar period, [`Portfolio::rebalance`]).
    pub every: Option<u32>,
}

/// True when `object` (a strategy object) is a portfolio's: it has a `rank` key.
pub(crate) fn is_portfolio(object: &Map<String, Value>) -> bool {
    object.contains_key("rank")
}

impl Portfolio {
    /// Decodes a portfolio strategy object (it has `rank`) with the body's `constraint`.
    ///
    /// # Errors
    /// [`Error`] naming the key and what is wrong: a key of a long / short strategy, an
    /// unknown key, `null`, a formula that is not a string or of the wrong kind, a count that
    /// is not an integer in `0..=100000` nor a parameter name, a `rebalance` that is neither
    /// an integer in `1..=67108864`, `daily` / `weekly` / `monthly` nor a parameter name, a
    /// parameter named like a column, an input or a reply column.
    pub fn decode(object: &Map<String, Value>, constraint: Option<&str>) -> Result<Self> {
        for (key, value) in object {
            if Field::STRATEGY.iter().any(|f| f.name() == key) {
                return Err(Error::new(format!(
                    "`strategy.{key}` is a key of a long / short strategy; this object has \
                     `rank`, so it is a portfolio (rank, filter, weight, longs, shorts, keep, \
                     rebalance, inputs): send one kind or the other"
                )));
            }
            if !PORTFOLIO_KEYS.contains(&key.as_str()) {
                return Err(Error::new(format!(
                    "`strategy` has unknown field {key:?}; a portfolio strategy takes {}",
                    PORTFOLIO_KEYS.join(", ")
                )));
            }
            if value.is_null() {
                return Err(Error::new(format!(
                    "`strategy.{key}` is null; leave the key out for its default"
                )));
            }
        }
        let inputs = match object.get("inputs") {
            Some(v) => crate::strategy::decode_inputs(v)?,
            None => Vec::new(),
        };
        let mut formulas = Vec::new();
        for field in Field::PORTFOLIO {
            if let Some(v) = object.get(field.name()) {
                let text = v.as_str().ok_or_else(|| {
                    Error::new(format!(
                        "`strategy.{}` must be a string (a formula), got {v}",
                        field.name()
                    ))
                })?;
                formulas.push((field, text.to_owned()));
            }
        }
        if !object.contains_key("longs") && !object.contains_key("shorts") {
            return Err(Error::new(
                "a portfolio strategy needs `longs` or `shorts` (how many series to hold): an \
                 integer or a parameter name",
            ));
        }
        let mut names: Vec<String> = Vec::new();
        let mut count = |key: &str, lo: u64, hi: u32, words: bool| -> Result<Option<Named>> {
            let Some(v) = object.get(key) else {
                return Ok(None);
            };
            let wrong = || {
                let words = if words {
                    ", \"daily\", \"weekly\", \"monthly\""
                } else {
                    ""
                };
                Error::new(format!(
                    "`strategy.{key}` must be an integer in {lo}..={hi}{words} or a parameter \
                     name, got {v}"
                ))
            };
            match v {
                Value::Number(n) => {
                    let k = n
                        .as_u64()
                        .filter(|k| (lo..=u64::from(hi)).contains(k))
                        .ok_or_else(wrong)?;
                    Ok(Some(Named::Fixed(k as u32)))
                }
                Value::String(s)
                    if words && ["daily", "weekly", "monthly"].contains(&s.as_str()) =>
                {
                    Ok(Some(Named::Word(s.clone())))
                }
                Value::String(s) if sweepflight_kernel::expr::parse::is_name(s) => {
                    if inputs.contains(s)
                        || sweepflight_kernel::expr::Column::from_name(s).is_some()
                    {
                        return Err(Error::new(format!(
                            "`strategy.{key}` names the column {s:?}; a count or a period is \
                             an integer or a parameter name"
                        )));
                    }
                    if !names.contains(s) {
                        names.push(s.clone());
                    }
                    Ok(Some(Named::Param(s.clone())))
                }
                _ => Err(wrong()),
            }
        };
        let longs = count("longs", 0, MAX_COUNT, false)?;
        let shorts = count("shorts", 0, MAX_COUNT, false)?;
        let keep = count("keep", 0, MAX_COUNT, false)?;
        let rebalance = count("rebalance", 1, MAX_REBALANCE, true)?.ok_or_else(|| {
            Error::new(
                "a portfolio strategy needs `rebalance`: every K rows (an integer or a parameter \
                 name), or \"daily\", \"weekly\", \"monthly\"",
            )
        })?;
        let texts: Vec<(Field, &str)> = formulas.iter().map(|(f, t)| (*f, t.as_str())).collect();
        let mut all = texts.clone();
        if let Some(c) = constraint {
            all.push((Field::Constraint, c));
        }
        let counts: Vec<&str> = names.iter().map(String::as_str).collect();
        let bind = |t: &[(Field, &str)]| {
            Program::portfolio(t, &counts, &inputs).map_err(|e| Error::new(e.to_string()))
        };
        let program = bind(&all)?;
        if constraint.is_some()
            && let Some(extra) = program.params.get(bind(&texts)?.params.len())
        {
            return Err(Error::new(format!(
                "`constraint` names `{}`, which no formula or count of the strategy uses",
                extra.name
            )));
        }
        // The formulas' own windows (int there) keep the language's lower bound of 1.
        let windows =
            Program::portfolio(&texts, &[], &inputs).map_err(|e| Error::new(e.to_string()))?;
        let is_window = |name: &str| {
            windows
                .params
                .iter()
                .any(|p| p.name == name && p.kind == ParamKind::Int)
        };
        let roles = [
            (&longs, false),
            (&shorts, false),
            (&keep, false),
            (&Some(rebalance.clone()), true),
        ];
        let ranges = program
            .params
            .iter()
            .map(|p| {
                let mut range: Option<(u32, u32)> = None;
                for (named, period) in roles {
                    if matches!(named, Some(Named::Param(n)) if *n == p.name) {
                        let (lo, hi) = if period {
                            (1, MAX_REBALANCE)
                        } else {
                            (0, MAX_COUNT)
                        };
                        range = Some(range.map_or((lo, hi), |(a, b)| (a.max(lo), b.min(hi))));
                    }
                }
                range.map(|(lo, hi)| (if is_window(&p.name) { lo.max(1) } else { lo }, hi))
            })
            .collect();
        let at = |named: Named| -> Count {
            match named {
                Named::Fixed(k) => Count::Fixed(k),
                Named::Param(n) => Count::Param(
                    program
                        .params
                        .iter()
                        .position(|p| p.name == n)
                        .expect("a count's parameter is bound"),
                ),
                Named::Word(_) => unreachable!("only rebalance takes a word"),
            }
        };
        let rebalance = match rebalance {
            Named::Word(w) => match w.as_str() {
                "daily" => Rebalance::Daily,
                "weekly" => Rebalance::Weekly,
                _ => Rebalance::Monthly,
            },
            named => Rebalance::Every(at(named)),
        };
        Ok(Self {
            object: object.clone(),
            formulas,
            longs: longs.map_or(Count::Fixed(0), at),
            shorts: shorts.map_or(Count::Fixed(0), at),
            keep: keep.map(at),
            rebalance,
            inputs,
            constraint: constraint.map(str::to_owned),
            params: program
                .params
                .iter()
                .map(|p| (p.name.clone(), p.kind))
                .collect(),
            ranges,
            program: Arc::new(program),
        })
    }

    /// The counts and period of the combo of parameter `values`.
    pub fn counts(&self, values: &[f64]) -> Counts {
        Counts {
            longs: self.longs.of(values),
            shorts: self.shorts.of(values),
            keep: self.keep.map(|k| k.of(values)),
            every: match self.rebalance {
                Rebalance::Every(k) => Some(k.of(values)),
                _ => None,
            },
        }
    }

    /// Checks value `v` of parameter `k`: a count's or a period's integers in its range, else
    /// the language's rules (windows integers in `1..=67108864`, numbers finite).
    ///
    /// # Errors
    /// What is wrong, as a phrase to follow the parameter's name.
    pub fn check_value(&self, k: usize, v: f64) -> std::result::Result<(), String> {
        if let Some((lo, hi)) = self.ranges[k] {
            return if v.fract() == 0.0 && (f64::from(lo)..=f64::from(hi)).contains(&v) {
                Ok(())
            } else {
                Err(format!("must be an integer in {lo}..={hi}, got {v}"))
            };
        }
        let max = f64::from(sweepflight_kernel::expr::bind::MAX_WINDOW);
        match self.params[k].1 {
            ParamKind::Int if v.fract() == 0.0 && (1.0..=max).contains(&v) => Ok(()),
            ParamKind::Int => Err(format!("must be an integer in 1..={max}, got {v}")),
            ParamKind::Number if v.is_finite() => Ok(()),
            ParamKind::Number => Err(format!("must be a finite number, got {v}")),
        }
    }

    /// The strategy object as the body's `strategy`.
    pub fn wire(&self) -> Value {
        Value::Object(self.object.clone())
    }
}

/// A count as read, before the parameters are numbered.
#[derive(Debug, Clone, PartialEq)]
enum Named {
    Fixed(u32),
    Param(String),
    Word(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(json: &str, constraint: Option<&str>) -> Result<Portfolio> {
        let v: Value = serde_json::from_str(json).unwrap();
        Portfolio::decode(v.as_object().unwrap(), constraint)
    }

    #[test]
    fn parameters_number_rank_filter_weight_counts_then_the_constraint() {
        let p = decode(
            r#"{"rank": "roc(close, n)", "filter": "close > sma(close, m)",
                "weight": "1 / std(close, w) * s", "longs": "k", "shorts": 0, "keep": "k2",
                "rebalance": "r"}"#,
            Some("k2 >= k"),
        )
        .unwrap();
        let names: Vec<&str> = p.params.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["n", "m", "w", "s", "k", "k2", "r"]);
        assert_eq!(p.params[3].1, ParamKind::Number);
        assert_eq!(p.params[4].1, ParamKind::Int);
        assert_eq!(p.ranges[4], Some((0, MAX_COUNT)));
        assert_eq!(p.ranges[6], Some((1, MAX_REBALANCE)));
        assert_eq!(p.ranges[0], None);
        let c = p.counts(&[5.0, 10.0, 20.0, 1.0, 3.0, 6.0, 21.0]);
        assert_eq!(
            c,
            Counts {
                longs: 3,
                shorts: 0,
                keep: Some(6),
                every: Some(21)
            }
        );
        assert!(p.check_value(4, 0.0).is_ok());
        assert!(p.check_value(4, 2.5).unwrap_err().contains("0..=100000"));
        assert!(p.check_value(6, 0.0).unwrap_err().contains("1..=67108864"));
        // A count that is also a window starts at 1.
        let both = decode(
            r#"{"rank": "roc(close, n)", "longs": "n", "rebalance": 5}"#,
            None,
        )
        .unwrap();
        assert_eq!(both.ranges[0], Some((1, MAX_COUNT)));
        let words = decode(
            r#"{"rank": "close", "shorts": 2, "rebalance": "weekly"}"#,
            None,
        )
        .unwrap();
        assert_eq!(words.rebalance, Rebalance::Weekly);
        assert_eq!(words.longs, Count::Fixed(0));
    }

    #[test]
    fn refusals_name_the_key() {
        for (json, constraint, says) in [
            (
                r#"{"rank": "close", "long": "close > 1", "longs": 1, "rebalance": 1}"#,
                None,
                "`strategy.long` is a key of a long / short strategy",
            ),
            (
                r#"{"rank": "close", "longs": 1.5, "rebalance": 1}"#,
                None,
                "`strategy.longs` must be an integer in 0..=100000",
            ),
            (
                r#"{"rank": "close", "longs": 3.0, "rebalance": 1}"#,
                None,
                "`strategy.longs` must be an integer",
            ),
            (
                r#"{"rank": "close", "longs": -1, "rebalance": 1}"#,
                None,
                "`strategy.longs` must be an integer",
            ),
            (
                r#"{"rank": "close", "longs": 100001, "rebalance": 1}"#,
                None,
                "0..=100000",
            ),
            (
                r#"{"rank": "close", "longs": 1, "keep": true, "rebalance": 1}"#,
                None,
                "`strategy.keep` must be",
            ),
            (
                r#"{"rank": "close", "longs": 1, "rebalance": "yearly!"}"#,
                None,
                "`strategy.rebalance` must be an integer in 1..=67108864, \"daily\"",
            ),
            (
                r#"{"rank": "close", "longs": 1, "rebalance": 0}"#,
                None,
                "`strategy.rebalance` must be",
            ),
            (
                r#"{"rank": "close", "longs": 1}"#,
                None,
                "needs `rebalance`",
            ),
            (
                r#"{"rank": "close", "rebalance": 1}"#,
                None,
                "needs `longs` or `shorts`",
            ),
            (
                r#"{"rank": "close", "longs": "close", "rebalance": 1}"#,
                None,
                "names the column \"close\"",
            ),
            (
                r#"{"rank": "pred", "inputs": ["pred"], "longs": "pred", "rebalance": 1}"#,
                None,
                "names the column \"pred\"",
            ),
            (
                r#"{"rank": "close > 1", "longs": 1, "rebalance": 1}"#,
                None,
                "`rank` must be a number or a series",
            ),
            (
                r#"{"rank": "close", "filter": "close", "longs": 1, "rebalance": 1}"#,
                None,
                "`filter` must be a condition",
            ),
            (
                r#"{"rank": "close", "longs": 1, "rebalance": 1, "top": 3}"#,
                None,
                "unknown field \"top\"",
            ),
            (
                r#"{"rank": null, "longs": 1, "rebalance": 1}"#,
                None,
                "`strategy.rank` is null",
            ),
            (
                r#"{"rank": 3, "longs": 1, "rebalance": 1}"#,
                None,
                "`strategy.rank` must be a string",
            ),
            (
                r#"{"rank": "close", "longs": "turnover", "rebalance": 1}"#,
                None,
                "names a column of the reply",
            ),
            (
                r#"{"rank": "close * fees", "longs": 1, "rebalance": 1}"#,
                None,
                "names a column of the reply",
            ),
            (
                r#"{"rank": "close", "longs": 1, "rebalance": 1}"#,
                Some("z > 1"),
                "`constraint` names `z`",
            ),
        ] {
            let e = decode(json, constraint).unwrap_err().to_string();
            assert!(e.contains(says), "{json}: {e}");
        }
    }
}
