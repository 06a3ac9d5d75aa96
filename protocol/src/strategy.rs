//! The v1.2 strategy vocabulary on the wire: strategy names and their parameters (the order of
//! `params` tuples, `grid` and result columns), the execution options (`side`, `stop_loss`,
//! `take_profit`, `warmup`) and the combo forms that are not plain lists (`grid`, `sample`).
//!
//! What a strategy *computes* is the kernel's (`sweepflight-kernel`, strategies.md); this is
//! what a client may send and what the reply's columns are. The built-ins are the kernel's
//! table (`sweepflight_kernel::builtins`: names, parameters, summaries, formula forms): this
//! crate keeps no list of its own. A strategy of the client's own (protocol v1.3: an object of
//! formulas) is parsed and bound by the kernel's language layer here, so its parameters
//! (names, order, kinds) are known where the body is decoded, as a built-in's are.

use std::fmt;
use std::sync::Arc;

use sweepflight_kernel::expr::{Field, Program};

use crate::portfolio::Portfolio;

/// A built-in strategy: the kernel's table (`sweepflight_kernel::builtins`) is the one list of
/// them, their names, parameters and formula forms.
pub use sweepflight_kernel::Strategy as Builtin;

/// A strategy: a built-in of protocol v1.2, formulas (v1.3), or a portfolio (v1.4).
#[derive(Debug, Clone, PartialEq)]
pub enum Strategy {
    /// A built-in by name.
    Builtin(Builtin),
    /// Formulas of the client's own, or a built-in with a `constraint` or stop formulas (v1.3).
    Formulas(Arc<Formulas>),
    /// A portfolio over a universe (v1.4): one result per combo, not per series.
    Portfolio(Arc<Portfolio>),
}

impl Default for Strategy {
    /// The paper's HMA / HMA3 stop-and-reverse (v1's strategy).
    fn default() -> Self {
        Self::Builtin(Builtin::HmaSar)
    }
}

impl From<Builtin> for Strategy {
    fn from(b: Builtin) -> Self {
        Self::Builtin(b)
    }
}

/// A strategy of formulas (docs/language.md), with its constraint, as sent and as bound.
#[derive(Debug, Clone)]
pub struct Formulas {
    /// The built-in it is the form of, when the body named one (with a `constraint`).
    pub builtin: Option<&'static str>,
    /// The strategy object's fields as sent (`long`, `short`, `exit_long`, `exit_short`); empty
    /// for a built-in.
    pub fields: Vec<(String, String)>,
    /// The body's `constraint`.
    pub constraint: Option<String>,
    /// The body's stop formulas (`stop_loss`, `take_profit`, `trailing_stop` given as text).
    pub stops: Vec<(Field, String)>,
    /// The strategy object's `inputs` (v1.4): dataset columns its formulas read as series.
    pub inputs: Vec<String>,
    /// The parameters in order of first appearance, with their kinds.
    pub params: Vec<(String, ParamKind)>,
    /// The formulas as the kernel binds them.
    pub program: Arc<Program>,
}

/// A strategy object's `inputs`: a list of column names (each checked by the binder).
pub(crate) fn decode_inputs(v: &serde_json::Value) -> crate::Result<Vec<String>> {
    let bad = || {
        crate::Error::new(format!(
            "`strategy.inputs` must be a list of column names ([\"pred\", \"vwap\"]), got {v}"
        ))
    };
    v.as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|n| n.as_str().map(str::to_owned).ok_or_else(bad))
        .collect()
}

impl PartialEq for Formulas {
    fn eq(&self, other: &Self) -> bool {
        (
            self.builtin,
            &self.fields,
            &self.constraint,
            &self.stops,
            &self.inputs,
        ) == (
            other.builtin,
            &other.fields,
            &other.constraint,
            &other.stops,
            &other.inputs,
        )
    }
}

/// Whether a parameter is a JSON integer (a window: a result column of int64) or any JSON
/// number (a threshold: float64): the kernel's binder decides it, for built-ins and formulas.
pub use sweepflight_kernel::expr::ParamKind;

impl Strategy {
    /// Every built-in, in the order `strategies` lists them.
    pub fn builtins() -> impl Iterator<Item = Self> {
        Builtin::ALL.into_iter().map(Self::Builtin)
    }

    /// The wire name (a built-in's; `formulas` for a strategy of the client's own).
    pub fn name(&self) -> &'static str {
        match self {
            Self::Builtin(b) => b.name(),
            Self::Formulas(f) => f.builtin.unwrap_or("formulas"),
            Self::Portfolio(_) => "portfolio",
        }
    }

    /// The portfolio, if this is one.
    pub fn portfolio(&self) -> Option<&Portfolio> {
        match self {
            Self::Portfolio(p) => Some(p),
            _ => None,
        }
    }

    /// The strategy of a body's `strategy` (a built-in name or an object of formulas, absent:
    /// hma_sar) and `constraint`.
    ///
    /// # Errors
    /// [`crate::Error`] for an unknown name, a field that is not a formula field, or a formula
    /// the language refuses (naming the field and the byte offset), or a constraint naming a
    /// parameter no formula uses.
    pub fn decode(
        strategy: Option<&serde_json::Value>,
        constraint: Option<&str>,
    ) -> crate::Result<Self> {
        Self::decode_with_stops(strategy, constraint, &[])
    }

    /// [`Strategy::decode`] with the body's stop formulas (`stop_loss`, `take_profit`,
    /// `trailing_stop` given as text, docs/language.md): they join the program, their parameters
    /// after the strategy's, so a built-in name with one runs as its formula form.
    ///
    /// # Errors
    /// As [`Strategy::decode`]; a stop formula that is a condition is refused.
    pub fn decode_with_stops(
        strategy: Option<&serde_json::Value>,
        constraint: Option<&str>,
        stops: &[(Field, String)],
    ) -> crate::Result<Self> {
        let mut inputs: Vec<String> = Vec::new();
        let (builtin, fields): (Option<Self>, Vec<(String, String)>) = match strategy {
            None => (Some(Self::default()), Vec::new()),
            Some(serde_json::Value::String(name)) => (Some(Self::from_name(name)?), Vec::new()),
            Some(serde_json::Value::Object(map)) if crate::portfolio::is_portfolio(map) => {
                if let Some((field, _)) = stops.first() {
                    return Err(crate::Error::new(format!(
                        "`{}` does not apply to a portfolio strategy (a portfolio holds target \
                         weights, rebalanced at its decision rows); leave it out",
                        field.name()
                    )));
                }
                return Ok(Self::Portfolio(Arc::new(Portfolio::decode(
                    map, constraint,
                )?)));
            }
            Some(serde_json::Value::Object(map)) => {
                if let Some(key) = map.keys().find(|k| {
                    crate::portfolio::PORTFOLIO_KEYS.contains(&k.as_str()) && *k != "inputs"
                }) {
                    return Err(crate::Error::new(format!(
                        "`strategy.{key}` is a key of a portfolio strategy, which needs `rank` (the \
                         formula the series are ranked by); a long / short strategy takes long, \
                         short, exit_long, exit_short and inputs"
                    )));
                }
                let mut fields = Vec::new();
                for (key, text) in map {
                    if key == "inputs" {
                        inputs = decode_inputs(text)?;
                        continue;
                    }
                    if !Field::STRATEGY.iter().any(|f| f.name() == key) {
                        return Err(crate::Error::new(format!(
                            "`strategy` has unknown field {key:?}; it takes long, short, exit_long, exit_short and inputs"
                        )));
                    }
                    let text = text.as_str().ok_or_else(|| {
                        crate::Error::new(format!("`strategy.{key}` must be a string (a formula)"))
                    })?;
                    fields.push((key.clone(), text.to_owned()));
                }
                (None, fields)
            }
            Some(_) => {
                return Err(crate::Error::new(
                    "`strategy` must be a built-in name or an object of formulas",
                ));
            }
        };
        if let (Some(b), None, true) = (&builtin, constraint, stops.is_empty()) {
            return Ok(b.clone());
        }
        let name = builtin.as_ref().map(Self::name);
        let texts: Vec<(Field, &str)> = match name {
            Some(n) => {
                let b = sweepflight_kernel::builtins::Builtin::named(n)
                    .ok_or_else(|| crate::Error::new(format!("no formula form of {n}")))?;
                vec![(Field::Long, b.long), (Field::Short, b.short)]
            }
            None => fields
                .iter()
                .map(|(k, t)| {
                    let f = Field::STRATEGY.into_iter().find(|f| f.name() == k);
                    (f.expect("checked above"), t.as_str())
                })
                .collect(),
        };
        let mut texts = texts;
        texts.extend(stops.iter().map(|(f, t)| (*f, t.as_str())));
        let mut all = texts.clone();
        if let Some(c) = constraint {
            all.push((Field::Constraint, c));
        }
        let program = Program::with_inputs(&[], &all, &inputs)
            .map_err(|e| crate::Error::new(e.to_string()))?;
        if constraint.is_some() {
            let without = Program::with_inputs(&[], &texts, &inputs)
                .map_err(|e| crate::Error::new(e.to_string()))?;
            if let Some(extra) = program.params.get(without.params.len()) {
                return Err(crate::Error::new(format!(
                    "`constraint` names `{}`, which no formula of the strategy uses",
                    extra.name
                )));
            }
        }
        let params = program
            .params
            .iter()
            .map(|p| (p.name.clone(), p.kind))
            .collect();
        Ok(Self::Formulas(Arc::new(Formulas {
            builtin: name,
            fields,
            constraint: constraint.map(str::to_owned),
            stops: stops.to_vec(),
            inputs,
            params,
            program: Arc::new(program),
        })))
    }

    /// The stop formula of `field` (`stop_loss`, `take_profit`, `trailing_stop`), if the
    /// body gave one as text.
    pub fn stop_formula(&self, field: Field) -> Option<&str> {
        match self {
            Self::Formulas(f) => f
                .stops
                .iter()
                .find(|(k, _)| *k == field)
                .map(|(_, t)| t.as_str()),
            _ => None,
        }
    }

    /// The body's `strategy` value of this strategy (a name, or the object of formulas).
    pub fn wire(&self) -> serde_json::Value {
        match self {
            Self::Formulas(f) if f.builtin.is_none() => {
                let mut map: serde_json::Map<String, serde_json::Value> = f
                    .fields
                    .iter()
                    .map(|(k, t)| (k.clone(), serde_json::Value::String(t.clone())))
                    .collect();
                if !f.inputs.is_empty() {
                    map.insert("inputs".into(), serde_json::Value::from(f.inputs.clone()));
                }
                serde_json::Value::Object(map)
            }
            Self::Portfolio(p) => p.wire(),
            s => serde_json::Value::String(s.name().to_owned()),
        }
    }

    /// The body's `constraint`, if any.
    pub fn constraint(&self) -> Option<&str> {
        match self {
            Self::Formulas(f) => f.constraint.as_deref(),
            Self::Portfolio(p) => p.constraint.as_deref(),
            Self::Builtin(_) => None,
        }
    }

    /// The largest window a combo may use: v1.2's for a built-in name, the language's for
    /// formulas of the client's own.
    pub fn max_window(&self) -> u32 {
        match self {
            Self::Formulas(f) if f.builtin.is_none() => sweepflight_kernel::expr::bind::MAX_WINDOW,
            Self::Portfolio(_) => sweepflight_kernel::expr::bind::MAX_WINDOW,
            _ => crate::MAX_WINDOW,
        }
    }

    /// The strategy as the kernel's program of formulas (a built-in's expression form), and
    /// whether it came from a built-in name.
    pub fn program(&self) -> (Arc<Program>, bool) {
        match self {
            Self::Formulas(f) => (Arc::clone(&f.program), f.builtin.is_some()),
            Self::Portfolio(p) => (Arc::clone(&p.program), false),
            Self::Builtin(b) => (b.builtin().program(), true),
        }
    }

    /// True for the paper's strategy by name (v1's `lengths` and six-window `params`).
    pub fn is_hma_sar(&self) -> bool {
        *self == Self::Builtin(Builtin::HmaSar)
    }

    /// The strategy of a wire name.
    ///
    /// # Errors
    /// [`crate::Error`] listing the known names.
    pub fn from_name(name: &str) -> crate::Result<Self> {
        Builtin::from_name(name).map(Self::Builtin).ok_or_else(|| {
            crate::Error::new(format!(
                "unknown strategy {name:?}; known: {}",
                Builtin::ALL.map(Builtin::name).join(", ")
            ))
        })
    }

    /// The parameters in wire order, with their kinds.
    pub fn params(&self) -> Vec<(&str, ParamKind)> {
        match self {
            Self::Formulas(f) => f.params.iter().map(|(n, k)| (n.as_str(), *k)).collect(),
            Self::Portfolio(p) => p.params.iter().map(|(n, k)| (n.as_str(), *k)).collect(),
            s => s.builtin_params().to_vec(),
        }
    }

    /// A built-in's parameters (none for formulas, whose are [`Strategy::params`]).
    fn builtin_params(&self) -> &'static [(&'static str, ParamKind)] {
        match self {
            Self::Builtin(b) => b.params(),
            Self::Formulas(_) | Self::Portfolio(_) => &[],
        }
    }

    /// Checks value `v` of parameter `k`: windows are integers in `1..=2147483647`, RSI bands
    /// numbers in `0..=100`; a formula strategy's windows integers in `1..=67108864`, its
    /// numbers any finite number.
    ///
    /// # Errors
    /// What is wrong, as a phrase to follow the parameter's name.
    pub fn check_value(&self, k: usize, v: f64) -> Result<(), String> {
        if let Self::Portfolio(p) = self {
            return p.check_value(k, v);
        }
        if let Self::Formulas(f) = self {
            let max = f64::from(self.max_window());
            return match f.params[k].1 {
                ParamKind::Int if v.fract() == 0.0 && (1.0..=max).contains(&v) => Ok(()),
                ParamKind::Int => Err(format!("must be an integer in 1..={max}, got {v}")),
                // A built-in's own parameters keep its rules; those of stop formulas after
                // them are any finite number.
                ParamKind::Number if v.is_finite() => match f.builtin.map(Self::from_name) {
                    Some(Ok(b)) if k < b.builtin_params().len() => b.check_value(k, v),
                    _ => Ok(()),
                },
                ParamKind::Number => Err(format!("must be a finite number, got {v}")),
            };
        }
        match self.builtin_params()[k].1 {
            ParamKind::Int
                if v.fract() == 0.0 && (1.0..=f64::from(crate::MAX_WINDOW)).contains(&v) =>
            {
                Ok(())
            }
            ParamKind::Int => Err(format!(
                "must be an integer in 1..={}, got {v}",
                crate::MAX_WINDOW
            )),
            ParamKind::Number if v.is_finite() && (0.0..=100.0).contains(&v) => Ok(()),
            ParamKind::Number => Err(format!("must be a number in 0..=100, got {v}")),
        }
    }

    /// The constraints between parameters: `lower < upper` for `rsi_revert`.
    ///
    /// # Errors
    /// The parameter and what is wrong with it.
    pub fn check_combo(&self, values: &[f64]) -> Result<(), (&'static str, String)> {
        if let Self::Portfolio(p) = self {
            if !sweepflight_kernel::plan::constraint_holds(&p.program, values) {
                return Err(("constraint", "breaks the constraint".to_owned()));
            }
            return Ok(());
        }
        if let Self::Formulas(f) = self {
            // A built-in's own parameters come first (stop formulas' after them).
            if let Some(Ok(b)) = f.builtin.map(Self::from_name) {
                b.check_combo(&values[..b.builtin_params().len().min(values.len())])?;
            }
            if !sweepflight_kernel::plan::constraint_holds(&f.program, values) {
                return Err(("constraint", "breaks the constraint".to_owned()));
            }
            return Ok(());
        }
        // The kernel's rules of its typed combos (`rsi_revert`'s `lower < upper`).
        match self {
            Self::Builtin(b) => match sweepflight_kernel::Params::new(*b, values) {
                Err(sweepflight_kernel::Error::InvalidParam { param, message }) => {
                    Err((param, message))
                }
                _ => Ok(()),
            },
            Self::Formulas(_) | Self::Portfolio(_) => Ok(()),
        }
    }

    /// What the strategy does, in one line (the `strategies` action).
    pub fn summary(&self) -> &'static str {
        match self {
            Self::Builtin(b) => b.builtin().summary,
            Self::Formulas(_) => "formulas of the client's own (docs/language.md)",
            Self::Portfolio(_) => "a portfolio over a universe (docs/portfolios.md)",
        }
    }
}

/// The `strategies` action's reply: every strategy, its parameters in wire order with their
/// JSON types, and what it does.
pub fn strategies_json() -> serde_json::Value {
    Strategy::builtins()
        .map(|s| {
            let params: Vec<serde_json::Value> = s
                .params()
                .iter()
                .map(|(name, kind)| serde_json::json!({"name": name, "type": kind.name()}))
                .collect();
            serde_json::json!({"name": s.name(), "params": params, "summary": s.summary()})
        })
        .collect()
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which positions a run may hold (`side`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Side {
    /// Both: stop-and-reverse (the default).
    #[default]
    Both,
    /// Long only.
    Long,
    /// Short only.
    Short,
}

impl Side {
    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Both => "both",
            Self::Long => "long",
            Self::Short => "short",
        }
    }

    /// The side of a wire name.
    ///
    /// # Errors
    /// [`crate::Error`] naming the three sides.
    pub fn from_name(name: &str) -> crate::Result<Self> {
        match name {
            "both" => Ok(Self::Both),
            "long" => Ok(Self::Long),
            "short" => Ok(Self::Short),
            other => Err(crate::Error::new(format!(
                "`side` must be \"both\", \"long\" or \"short\", got {other:?}"
            ))),
        }
    }
}

pub use sweepflight_kernel::{Fill, StopsOn};

/// The execution options of a sweep body (strategies.md, "Execution", "Execution, v1.3"; "The
/// range a strategy sees"). The defaults are the paper's loop.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Execution {
    /// Which positions may be held.
    pub side: Side,
    /// Stop-loss as a fraction of the entry (finite, > 0).
    pub stop_loss: Option<f64>,
    /// Take-profit as a fraction of the entry (finite, > 0).
    pub take_profit: Option<f64>,
    /// Trailing stop as a fraction of the best price since entry (finite, > 0; v1.3).
    pub trailing_stop: Option<f64>,
    /// Where decisions fill (v1.3; default the signal's close).
    pub fill: Fill,
    /// What stops are checked against (v1.3; default closes).
    pub stops: StopsOn,
    /// Slippage as a fraction of each fill price, in `[0, 0.5)` (v1.3; default 0).
    pub slippage: f64,
    /// Bars before `rows.start` the indicators warm up on.
    pub warmup: u64,
    /// `"warmup": "auto"` (v1.3): the server sets `warmup` to the strategy's largest lookback
    /// over the call's combos (when the request is read: `auto_warmup` in `sweep.rs`).
    pub warmup_auto: bool,
    /// Periods per year the per-bar Sharpe and Sortino ratios are annualised with (> 0;
    /// `None`: 1, per-bar figures).
    pub periods_per_year: Option<f64>,
    /// `"periods_per_year": "auto"` (v1.3): each series' own, from its time column; the server
    /// resolves it per series.
    pub periods_per_year_auto: bool,
    /// Blocks of the evaluated rows for the `block_pnl` column (2 to [`MAX_BLOCKS`]; `None`:
    /// no column).
    pub blocks: Option<u8>,
    /// `"ignore_time": true` (v1.4): the dataset's time is read as absent for the call, so bars
    /// whose time is out of order are swept in row order (refused without it).
    pub ignore_time: bool,
}

/// Most blocks a body may ask for (strategies.md, "Blocks").
pub const MAX_BLOCKS: u8 = 64;

impl Execution {
    /// The dataset columns the options read besides `close` (open, high, low in that order).
    pub fn columns(&self) -> &'static [&'static str] {
        sweepflight_kernel::Execution {
            fill: self.fill,
            stops: self.stops,
            ..sweepflight_kernel::Execution::default()
        }
        .columns()
    }

    /// True when every option is at its default.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// `"sample"`: `n` combos drawn uniformly from per-parameter ranges, reproducible for a seed.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// How many combos.
    pub n: u64,
    /// The seed.
    pub seed: u64,
    /// `[lo, hi]` per parameter, in the strategy's parameter order: integers drawn in
    /// `[lo, hi]`, numbers in `[lo, hi)`.
    pub ranges: Vec<(f64, f64)>,
}

/// Attempts per combo before a sample gives up on its constraint.
const SAMPLE_ATTEMPTS: u64 = 1_000;

impl Sample {
    /// Combo `i` of the sample: the first of its attempts that `valid` accepts. Each attempt's
    /// values come from a counter-based generator keyed by (seed, i, attempt), so any combo
    /// can be drawn on its own, in any order, and is the same on every call.
    ///
    /// # Errors
    /// [`crate::Error`] if no attempt is valid (ranges whose every draw breaks a constraint).
    pub fn draw(&self, i: u64, strategy: &Strategy) -> crate::Result<Vec<f64>> {
        let kinds = strategy.params();
        let valid = |v: &[f64]| strategy.check_combo(v).is_ok();
        let mut values = vec![0.0; self.ranges.len()];
        for attempt in 0..SAMPLE_ATTEMPTS {
            let mut state = splitmix(self.seed ^ splitmix(i ^ splitmix(attempt)));
            for (k, (&(lo, hi), v)) in self.ranges.iter().zip(&mut values).enumerate() {
                state = splitmix(state);
                *v = match kinds[k].1 {
                    ParamKind::Int => {
                        let span = (hi - lo) as u64 + 1;
                        lo + ((u128::from(state) * u128::from(span)) >> 64) as f64
                    }
                    ParamKind::Number => {
                        let u = (state >> 11) as f64 / (1u64 << 53) as f64;
                        let x = lo + (hi - lo) * u;
                        // Rounding can land on hi; the range is half-open.
                        if x >= hi && hi > lo { lo } else { x }
                    }
                };
            }
            if valid(&values) {
                return Ok(values);
            }
        }
        Err(crate::Error::new(format!(
            "`sample`: no valid combo in {SAMPLE_ATTEMPTS} draws for combo {i}; check the ranges against the strategy's constraints"
        )))
    }
}

/// SplitMix64's output function: a bijective mix of a 64-bit counter.
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_sides() {
        for s in Strategy::builtins() {
            assert_eq!(Strategy::from_name(s.name()).unwrap(), s);
        }
        let e = Strategy::from_name("macd").unwrap_err().to_string();
        assert!(e.contains("known: hma_sar, sma_cross"), "{e}");
        assert_eq!(Side::from_name("long").unwrap(), Side::Long);
        assert!(Side::from_name("up").is_err());
    }

    #[test]
    fn samples_are_reproducible_in_range_and_redrawn_on_constraints() {
        let rsi = Strategy::Builtin(Builtin::RsiRevert);
        let s = Sample {
            n: 100,
            seed: 7,
            ranges: vec![(2.0, 30.0), (0.0, 60.0), (40.0, 100.0)],
        };
        let a: Vec<Vec<f64>> = (0..100).map(|i| s.draw(i, &rsi).unwrap()).collect();
        let b: Vec<Vec<f64>> = (0..100).rev().map(|i| s.draw(i, &rsi).unwrap()).collect();
        assert_eq!(a, b.into_iter().rev().collect::<Vec<_>>());
        for v in &a {
            assert!(v[0].fract() == 0.0 && (2.0..=30.0).contains(&v[0]), "{v:?}");
            assert!(
                (0.0..60.0).contains(&v[1]) && (40.0..100.0).contains(&v[2]),
                "{v:?}"
            );
            assert!(v[1] < v[2]);
        }
        // Both ends of an integer range are drawn.
        let ints = Sample {
            n: 0,
            seed: 1,
            ranges: vec![(1.0, 2.0)],
        };
        let seen: std::collections::BTreeSet<u64> = (0..64)
            .map(|i| ints.draw(i, &Strategy::Builtin(Builtin::Donchian)).unwrap()[0] as u64)
            .collect();
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), [1, 2]);
        // Another seed, other combos.
        let other = Sample {
            seed: 8,
            ..s.clone()
        };
        assert_ne!(other.draw(0, &rsi).unwrap(), a[0]);
        // Nothing valid (every lower above every upper): an error, not a hang.
        let never = Sample {
            ranges: vec![(2.0, 3.0), (60.0, 70.0), (10.0, 20.0)],
            ..s
        };
        assert!(never.draw(0, &rsi).is_err());
    }
}
