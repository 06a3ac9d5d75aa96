//! Strategies of your own, typed: formula expressions over the bars (protocol v1.3) whose
//! `Display` is the strategy language's canonical text, and [`strategy`], which makes them a
//! [`Strategy`] a request can carry. The server parses and checks them; a mistake is named by
//! it with the field and the byte offset.
//!
//! ```
//! use sweepflight_client::formula::{close, param, rsi, sma, std, strategy};
//!
//! let (n, k) = (param("n"), param("k"));
//! let long = close().lt(sma(close(), &n) - k * std(close(), &n)).and(rsi(close(), 14).lt(35));
//! assert_eq!(long.to_string(), "close < sma(close, n) - k * std(close, n) and rsi(close, 14) < 35");
//! let s = strategy(Some(&long), None, Some(&close().gt(sma(close(), &n))), None, None).unwrap();
//! assert_eq!(s.params().len(), 2);
//! ```

use std::fmt;

use sweepflight_protocol::Strategy;

/// A formula node: its canonical text and how tightly it binds (`or` 1, `and` 2, `not` 3,
/// comparisons 4, `+ -` 5, `* /` 6, unary minus 7, atoms 8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expr {
    text: String,
    strength: u8,
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Expr {
    fn atom(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            strength: 8,
        }
    }

    fn wrap(&self, paren: bool) -> String {
        if paren {
            format!("({})", self.text)
        } else {
            self.text.clone()
        }
    }

    fn binary(self, op: &str, strength: u8, other: impl Into<Self>) -> Self {
        let other = other.into();
        // Left-associative: a left operand as strong stays bare, a right one needs parentheses;
        // comparisons do not chain, so neither side may be a comparison.
        let left = if strength == 4 {
            self.strength <= 4
        } else {
            self.strength < strength
        };
        Self {
            text: format!(
                "{} {op} {}",
                self.wrap(left),
                other.wrap(other.strength <= strength)
            ),
            strength,
        }
    }

    /// `self < other`.
    #[must_use]
    pub fn lt(self, other: impl Into<Self>) -> Self {
        self.binary("<", 4, other)
    }
    /// `self <= other`.
    #[must_use]
    pub fn le(self, other: impl Into<Self>) -> Self {
        self.binary("<=", 4, other)
    }
    /// `self > other`.
    #[must_use]
    pub fn gt(self, other: impl Into<Self>) -> Self {
        self.binary(">", 4, other)
    }
    /// `self >= other`.
    #[must_use]
    pub fn ge(self, other: impl Into<Self>) -> Self {
        self.binary(">=", 4, other)
    }
    /// `self == other`.
    #[must_use]
    pub fn eq_to(self, other: impl Into<Self>) -> Self {
        self.binary("==", 4, other)
    }
    /// `self != other` (false with a NaN side).
    #[must_use]
    pub fn ne_to(self, other: impl Into<Self>) -> Self {
        self.binary("!=", 4, other)
    }
    /// `self and other`.
    #[must_use]
    pub fn and(self, other: impl Into<Self>) -> Self {
        self.binary("and", 2, other)
    }
    /// `self or other`.
    #[must_use]
    pub fn or(self, other: impl Into<Self>) -> Self {
        self.binary("or", 1, other)
    }
    /// True where this crosses above `other`.
    #[must_use]
    pub fn cross_above(self, other: impl Into<Self>) -> Self {
        call("cross_above", &[self, other.into()])
    }
    /// True where this crosses below `other`.
    #[must_use]
    pub fn cross_below(self, other: impl Into<Self>) -> Self {
        call("cross_below", &[self, other.into()])
    }
}

impl From<f64> for Expr {
    fn from(v: f64) -> Self {
        let magnitude = Self::atom(sweepflight_kernel::expr::canon::number(v.abs()));
        if v.is_sign_negative() && v != 0.0 {
            -magnitude
        } else {
            magnitude
        }
    }
}

impl From<i64> for Expr {
    fn from(v: i64) -> Self {
        let magnitude = Self::atom(v.unsigned_abs().to_string());
        if v < 0 { -magnitude } else { magnitude }
    }
}

impl From<i32> for Expr {
    fn from(v: i32) -> Self {
        Self::from(i64::from(v))
    }
}

impl From<&Expr> for Expr {
    fn from(v: &Expr) -> Self {
        v.clone()
    }
}

macro_rules! arith {
    ($trait:ident, $method:ident, $op:literal, $strength:literal) => {
        impl<T: Into<Expr>> std::ops::$trait<T> for Expr {
            type Output = Expr;
            fn $method(self, other: T) -> Expr {
                self.binary($op, $strength, other)
            }
        }
        impl std::ops::$trait<Expr> for f64 {
            type Output = Expr;
            fn $method(self, other: Expr) -> Expr {
                Expr::from(self).binary($op, $strength, other)
            }
        }
    };
}
arith!(Add, add, "+", 5);
arith!(Sub, sub, "-", 5);
arith!(Mul, mul, "*", 6);
arith!(Div, div, "/", 6);

/// `!e` is the language's `not e`.
impl std::ops::Not for Expr {
    type Output = Expr;
    fn not(self) -> Expr {
        Expr {
            text: format!("not {}", self.wrap(self.strength < 3)),
            strength: 3,
        }
    }
}

impl std::ops::Neg for Expr {
    type Output = Expr;
    fn neg(self) -> Expr {
        Expr {
            text: format!("-{}", self.wrap(self.strength < 7)),
            strength: 7,
        }
    }
}

fn call(name: &str, args: &[Expr]) -> Expr {
    let args: Vec<String> = args.iter().map(ToString::to_string).collect();
    Expr::atom(format!("{name}({})", args.join(", ")))
}

/// A parameter, bound per combo by `params`, `grid` or `sample`.
pub fn param(name: &str) -> Expr {
    Expr::atom(name)
}

/// The bars' opens.
pub fn open() -> Expr {
    Expr::atom("open")
}
/// The bars' highs.
pub fn high() -> Expr {
    Expr::atom("high")
}
/// The bars' lows.
pub fn low() -> Expr {
    Expr::atom("low")
}
/// The bars' closes.
pub fn close() -> Expr {
    Expr::atom("close")
}
/// The bars' volumes.
pub fn volume() -> Expr {
    Expr::atom("volume")
}
/// Another column of the dataset read as a series (a model's predictions, a vendor's VWAP):
/// list it in the strategy's `inputs` too ([`strategy_with_inputs`]; protocol v1.4).
pub fn column(name: &str) -> Expr {
    Expr::atom(name)
}

macro_rules! windowed {
    ($($name:ident: $doc:literal),* $(,)?) => {$(
        #[doc = $doc]
        pub fn $name(x: impl Into<Expr>, n: impl Into<Expr>) -> Expr {
            call(stringify!($name), &[x.into(), n.into()])
        }
    )*};
}
windowed!(
    lag: "`x` `n` bars before.",
    change: "`x[i] - x[i-n]`.",
    roc: "Rate of change over `n` bars, in percent.",
    sum: "The sum of the last `n` values.",
    sma: "Simple moving average.",
    wma: "Linearly weighted moving average.",
    std: "Population standard deviation of the last `n` values.",
    highest: "The largest of the last `n` values.",
    lowest: "The smallest of the last `n` values.",
    ema: "Exponential moving average.",
    rma: "Wilder's smoothing.",
    rsi: "Wilder's RSI.",
    min: "The smaller of two series.",
    max: "The larger of two series.",
    cross_above: "True where the first crosses above the second.",
    cross_below: "True where the first crosses below the second.",
);

/// True range.
pub fn tr() -> Expr {
    call("tr", &[])
}
/// Average true range.
pub fn atr(n: impl Into<Expr>) -> Expr {
    call("atr", &[n.into()])
}
/// Hull moving average of length `n`.
pub fn hma(x: impl Into<Expr>, n: impl Into<Expr>) -> Expr {
    call("hma", &[x.into(), n.into()])
}
/// `a` where condition `c` holds, else `b`.
pub fn r#where(c: impl Into<Expr>, a: impl Into<Expr>, b: impl Into<Expr>) -> Expr {
    call("where", &[c.into(), a.into(), b.into()])
}
/// `abs(x)`.
pub fn abs(x: impl Into<Expr>) -> Expr {
    call("abs", &[x.into()])
}

macro_rules! timeframe {
    ($($name:ident: $doc:literal),* $(,)?) => {$(
        #[doc = $doc]
        ///
        /// A higher timeframe (protocol v1.4): `x` is computed on the bars gathered into these
        /// periods (open the first, high the largest, low the smallest, close the last, volume
        /// the sum) and each period's value is seen from the next period's first bar, so no
        /// bar reads its own unfinished period. Windows inside count periods; calls do not
        /// nest; the dataset needs a time of a timestamp or date type.
        pub fn $name(x: impl Into<Expr>) -> Expr {
            call(stringify!($name), &[x.into()])
        }
    )*};
}
timeframe!(
    daily: "`x` on UTC days: `daily(close)` is the previous day's close on intraday bars.",
    weekly: "`x` on ISO weeks: `close().gt(weekly(sma(close(), n)))` is a weekly trend filter.",
    monthly: "`x` on months.",
);

/// A strategy of these formulas and an optional constraint.
///
/// # Errors
/// A message naming the field and the byte offset of a formula the language refuses.
pub fn strategy(
    long: Option<&Expr>,
    short: Option<&Expr>,
    exit_long: Option<&Expr>,
    exit_short: Option<&Expr>,
    constraint: Option<&Expr>,
) -> Result<Strategy, String> {
    strategy_with_inputs(long, short, exit_long, exit_short, constraint, &[])
}

/// [`strategy`] whose formulas also read the dataset columns `inputs` ([`column`]).
///
/// # Errors
/// As [`strategy`]; an input that is not a name a formula can use, a bar column, a function's
/// name, or listed twice.
pub fn strategy_with_inputs(
    long: Option<&Expr>,
    short: Option<&Expr>,
    exit_long: Option<&Expr>,
    exit_short: Option<&Expr>,
    constraint: Option<&Expr>,
    inputs: &[&str],
) -> Result<Strategy, String> {
    let mut fields: serde_json::Map<String, serde_json::Value> = [
        ("long", long),
        ("short", short),
        ("exit_long", exit_long),
        ("exit_short", exit_short),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.map(|e| (k.to_owned(), serde_json::Value::String(e.to_string()))))
    .collect();
    if !inputs.is_empty() {
        fields.insert("inputs".into(), serde_json::Value::from(inputs.to_vec()));
    }
    let constraint = constraint.map(ToString::to_string);
    Strategy::decode(
        Some(&serde_json::Value::Object(fields)),
        constraint.as_deref(),
    )
    .map_err(|e| e.to_string())
}

/// A count or a period of a portfolio: an integer, or a parameter ([`param`]).
#[derive(Debug, Clone)]
pub enum Count {
    /// The same for every combo.
    Fixed(u32),
    /// A parameter's value in each combo.
    Param(Expr),
}

impl From<u32> for Count {
    fn from(n: u32) -> Self {
        Self::Fixed(n)
    }
}

impl From<Expr> for Count {
    fn from(e: Expr) -> Self {
        Self::Param(e)
    }
}

impl Count {
    fn wire(&self) -> serde_json::Value {
        match self {
            Self::Fixed(n) => serde_json::Value::from(*n),
            Self::Param(e) => serde_json::Value::String(e.to_string()),
        }
    }
}

/// When a portfolio rebalances: every K calendar rows, or a calendar period.
#[derive(Debug, Clone)]
pub enum Rebalance {
    /// Every K rows (an integer or a parameter).
    Every(Count),
    /// The first row of each UTC date.
    Daily,
    /// The first row of each ISO week.
    Weekly,
    /// The first row of each month.
    Monthly,
}

/// A portfolio strategy (protocol v1.4, docs/portfolios.md): rank every series of a universe at
/// each rebalance, hold the best `longs` (and the worst `shorts`) weighted by `weight`, the
/// cash shared. Build it with [`Portfolio::new`] and the setters, then [`Portfolio::build`].
#[derive(Debug, Clone)]
pub struct Portfolio {
    rank: Expr,
    rebalance: Rebalance,
    filter: Option<Expr>,
    weight: Option<Expr>,
    longs: Option<Count>,
    shorts: Option<Count>,
    keep: Option<Count>,
    inputs: Vec<String>,
}

impl Portfolio {
    /// Series ranked by `rank` (higher first), decided at `rebalance`.
    pub fn new(rank: impl Into<Expr>, rebalance: Rebalance) -> Self {
        Self {
            rank: rank.into(),
            rebalance,
            filter: None,
            weight: None,
            longs: None,
            shorts: None,
            keep: None,
            inputs: Vec::new(),
        }
    }

    /// Only series where `filter` holds are eligible.
    #[must_use]
    pub fn filter(mut self, filter: Expr) -> Self {
        self.filter = Some(filter);
        self
    }

    /// Weights by `weight` (finite and > 0 to be eligible) instead of equally.
    #[must_use]
    pub fn weight(mut self, weight: impl Into<Expr>) -> Self {
        self.weight = Some(weight.into());
        self
    }

    /// How many series to hold long.
    #[must_use]
    pub fn longs(mut self, n: impl Into<Count>) -> Self {
        self.longs = Some(n.into());
        self
    }

    /// How many series to hold short.
    #[must_use]
    pub fn shorts(mut self, n: impl Into<Count>) -> Self {
        self.shorts = Some(n.into());
        self
    }

    /// A held series stays while its rank position is within `n`.
    #[must_use]
    pub fn keep(mut self, n: impl Into<Count>) -> Self {
        self.keep = Some(n.into());
        self
    }

    /// Other dataset columns the formulas read ([`column`]).
    #[must_use]
    pub fn inputs(mut self, inputs: &[&str]) -> Self {
        self.inputs = inputs.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    /// The strategy object as a body carries it.
    pub fn wire(&self) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        map.insert("rank".into(), self.rank.to_string().into());
        for (k, v) in [("filter", &self.filter), ("weight", &self.weight)] {
            if let Some(e) = v {
                map.insert(k.into(), e.to_string().into());
            }
        }
        for (k, v) in [
            ("longs", &self.longs),
            ("shorts", &self.shorts),
            ("keep", &self.keep),
        ] {
            if let Some(c) = v {
                map.insert(k.into(), c.wire());
            }
        }
        map.insert(
            "rebalance".into(),
            match &self.rebalance {
                Rebalance::Every(c) => c.wire(),
                Rebalance::Daily => "daily".into(),
                Rebalance::Weekly => "weekly".into(),
                Rebalance::Monthly => "monthly".into(),
            },
        );
        if !self.inputs.is_empty() {
            map.insert(
                "inputs".into(),
                serde_json::Value::from(self.inputs.clone()),
            );
        }
        serde_json::Value::Object(map)
    }

    /// The strategy, checked as the server checks it (its parameters numbered and typed).
    ///
    /// # Errors
    /// What the contract refuses: a formula of the wrong kind, neither `longs` nor `shorts`,
    /// a count named like a column, a parameter named like a reply column.
    pub fn build(&self, constraint: Option<&Expr>) -> Result<Strategy, String> {
        let constraint = constraint.map(ToString::to_string);
        Strategy::decode(Some(&self.wire()), constraint.as_deref()).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_portfolio_builds_as_the_server_reads_it() {
        let n = param("n");
        let p = Portfolio::new(roc(close(), n.clone()), Rebalance::Monthly)
            .filter(close().gt(sma(close(), 200)))
            .longs(param("k"))
            .keep(20)
            .build(None)
            .unwrap();
        let names: Vec<&str> = p.params().iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["n", "k"]);
        assert_eq!(p.name(), "portfolio");
        let e = Portfolio::new(close().gt(1.0), Rebalance::Every(5.into()))
            .longs(2)
            .build(None)
            .unwrap_err();
        assert!(e.contains("`rank` must be a number or a series"), "{e}");
        let e = Portfolio::new(close(), Rebalance::Daily)
            .build(None)
            .unwrap_err();
        assert!(e.contains("needs `longs` or `shorts`"), "{e}");
    }

    #[test]
    fn a_higher_timeframe_prints_and_binds_as_the_server_reads_it() {
        let n = param("n");
        let trend = close().gt(weekly(sma(close(), &n)));
        assert_eq!(trend.to_string(), "close > weekly(sma(close, n))");
        assert_eq!(daily(close()).to_string(), "daily(close)");
        let s = strategy(
            Some(&trend.and(close().gt(monthly(close())))),
            None,
            None,
            None,
            None,
        )
        .unwrap();
        let names: Vec<&str> = s.params().iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["n"]);
        let e = strategy(
            Some(&close().gt(weekly(daily(close())))),
            None,
            None,
            None,
            None,
        )
        .unwrap_err();
        assert!(e.contains("do not nest"), "{e}");
    }

    #[test]
    fn canonical_text_as_the_server_prints_it() {
        let (fast, slow) = (param("fast"), param("slow"));
        assert_eq!(
            sma(close(), &fast)
                .cross_above(sma(close(), &slow))
                .to_string(),
            "cross_above(sma(close, fast), sma(close, slow))"
        );
        let e = (close() - (close() - 1))
            .gt(-close() * 2.5)
            .or(!close().lt(0.0001));
        assert_eq!(
            e.to_string(),
            "close - (close - 1) > -close * 2.5 or not close < 0.0001"
        );
        let parsed = sweepflight_kernel::expr::parse::parse(&e.to_string()).unwrap();
        assert_eq!(
            sweepflight_kernel::expr::canon::text(&parsed),
            e.to_string()
        );
        assert!(strategy(None, None, Some(&close().gt(1)), None, None).is_err());
    }

    #[test]
    fn inputs_are_columns_not_parameters() {
        let k = param("k");
        let long = column("pred").gt(&k);
        let s = strategy_with_inputs(Some(&long), None, None, None, None, &["pred"]).unwrap();
        assert_eq!(s.params(), [("k", sweepflight_protocol::ParamKind::Number)]);
        assert_eq!(s.wire()["inputs"], serde_json::json!(["pred"]));
        // Without inputs the name is a parameter; a bar column is refused as an input.
        let plain = strategy(Some(&long), None, None, None, None).unwrap();
        assert_eq!(plain.params().len(), 2);
        let e = strategy_with_inputs(Some(&long), None, None, None, None, &["close"]).unwrap_err();
        assert!(e.contains("is a bar column already"), "{e}");
    }
}
