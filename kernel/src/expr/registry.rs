//! The function registry: every function of the strategy language, one entry each (its name,
//! its arguments' kinds, what it returns, the columns it reads, its lookback, its fast
//! computation and its oracle). The parser, the binder, the planner and the evaluator find all
//! they need here; none of them names a function. Adding a function is one entry below plus
//! its two computations in `crate::lines` and its rows in the tests.

use super::tree::Column;
use crate::lines::{Bars, Input, multi, plain, series};
use crate::timeframe::Timeframe;

/// The kind of one argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// A series or a constant (a constant is that value at every bar).
    Series,
    /// A window: an integer literal or a parameter, `1..=67108864`.
    Window,
    /// A condition.
    Cond,
}

/// What a call gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Returns {
    /// One float64 per bar.
    Series,
    /// One boolean per bar.
    Cond,
}

/// A function's fast computation over whole arrays.
#[derive(Clone, Copy)]
pub enum Compute {
    /// Writes one value per bar of `bars`.
    Series(fn(&Bars<'_>, &[Input<'_>], &mut [f64])),
    /// Writes one byte per bar of `from..from + out.len()` (the arguments are whole series).
    Cond(fn(&[Input<'_>], usize, &mut [u8])),
    /// A higher timeframe (protocol v1.4): its argument is computed on the bars gathered into
    /// this timeframe's periods and seen from the next period
    /// ([`crate::timeframe::seen_from_next`]). The planner keys the nodes inside by it and the
    /// evaluator gives them the period bars.
    Frame(Timeframe),
}

/// A function's oracle: the spec's definition bar by bar (`crate::lines::plain`).
#[derive(Clone, Copy)]
pub enum Plain {
    /// A series.
    Series(fn(&Bars<'_>, &[Input<'_>]) -> Vec<f64>),
    /// A condition.
    Cond(fn(&Bars<'_>, &[Input<'_>]) -> Vec<bool>),
    /// A higher timeframe: the oracle gathers its own period bars and evaluates the argument
    /// on them (`crate::eval::oracle`).
    Frame(Timeframe),
}

/// Which way a crossing goes: `a` crossing above `b` (`a[i] > b[i]` after `a[i-1] <= b[i-1]`)
/// or below (`a[i] < b[i]` after `a[i-1] >= b[i-1]`), false with a NaN among the four.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crossing {
    /// Above.
    Above,
    /// Below.
    Below,
}

/// A function's part in a channel breakout, `x > lag(highest(x, n), 1)` (`x` above the
/// highest of the `n` values before it) or `x < lag(lowest(x, n), 1)`: the evaluator reads
/// such a comparison from the channels' shared pass over `x` (the `donchian` built-in's),
/// never computing the two lines, where `x` is a column without NaN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Breakout {
    /// The value `n` bars before (the breakout's lag is 1).
    Lag,
    /// The highest of the window.
    Highest,
    /// The lowest of the window.
    Lowest,
}

/// A shared pass over one series for many windows: one line per window.
pub type Multi = fn(&[f64], &[usize], bool) -> Vec<std::sync::Arc<[f64]>>;

/// A function whose lines are computed from another function's lines of the same input and
/// windows (`std`'s means are `sma`'s, bit for bit): where a group computes both, the other's
/// lines are read, not computed a second time inside this one's pass.
#[derive(Debug, Clone, Copy)]
pub struct FromLines {
    /// The function whose lines it reads (same input, same window).
    pub of: &'static str,
    /// Its lines for each of the windows (strictly ascending) from that function's lines of
    /// the same windows, in the same order.
    pub pass: FromPass,
}

/// [`FromLines::pass`]: the input, the windows, the other function's lines, whether parallel.
pub type FromPass = fn(&[f64], &[usize], &[&[f64]], bool) -> Vec<std::sync::Arc<[f64]>>;

/// The windows of a full form from the one window of its short form.
pub type Derive = fn(u32) -> Vec<u32>;

/// One function of the language.
pub struct Function {
    /// The name formulas call it by.
    pub name: &'static str,
    /// Its arguments' kinds, in order.
    pub args: &'static [Arg],
    /// How a user sees the call, for messages: `sma(x, n)`.
    pub signature: &'static str,
    /// A series or a condition.
    pub returns: Returns,
    /// The columns it reads besides its arguments.
    pub reads: &'static [Column],
    /// The lookback (docs/language.md's column) from, per argument, the lookback of a series or
    /// condition argument or the value of a window argument.
    pub lookback: fn(&[usize]) -> usize,
    /// For a short form: the windows of the full form it stands for, and the full form's name
    /// (`hma(x, n)` is `hma(x, h, n, s)`).
    pub expands: Option<(Derive, &'static str)>,
    /// The fast computation.
    pub compute: Compute,
    /// A shared pass computing the function of one series for many windows at once (strictly
    /// ascending), where that costs less than one computation per window.
    pub multi: Option<Multi>,
    /// Its shared pass from another function's lines, where a group has them ([`FromLines`]).
    pub from_lines: Option<FromLines>,
    /// For a Hull-type line (`wma(scale * wma(x, w1) - wma(x, w2) [- ...], outer)`): its scale
    /// and how many first-level windows follow `x` (the last argument is the outer window).
    /// Calls over one input share their first-level WMAs ([`multi::hulls`]).
    pub hull: Option<(f64, usize)>,
    /// For a crossing of its two series arguments: which way. The evaluator reads such a
    /// call's value from the two lines' state bytes (`crate::eval`'s word path), where its
    /// operands are whole arrays.
    pub crossing: Option<Crossing>,
    /// Its part in a channel breakout ([`Breakout`]).
    pub breakout: Option<Breakout>,
    /// Its value at a bar is computed afresh from its inputs over its lookback (no running
    /// state: the same arithmetic wherever the series starts), so a row range's series is the
    /// whole series' with the range's lookback undefined (`crate::ArrayKey::of_range`: the
    /// folds of a walk-forward cut their lines from one computation). Held by a test.
    pub fresh: bool,
    /// The oracle.
    pub plain: Plain,
}

use Arg::{Cond as C, Series as S, Window as W};

fn window_fn(a: &[usize]) -> usize {
    a[0] + a[1] - 1
}

fn lagged(a: &[usize]) -> usize {
    a[0] + a[1]
}

fn elementwise(a: &[usize]) -> usize {
    a.iter().copied().max().unwrap_or(0)
}

fn crossing(a: &[usize]) -> usize {
    a[0].max(a[1]) + 1
}

/// `hma(x, n)`'s windows `[h, n, s]`: kernel.md's length rule.
fn hma_windows(n: u32) -> Vec<u32> {
    let round = |v: f64| (v.round_ties_even() as u32).max(1);
    let l = f64::from(n);
    vec![round(l / 2.0), n, round(l.sqrt())]
}

const HLC: &[Column] = &[Column::High, Column::Low, Column::Close];

macro_rules! function {
    ($name:literal, [$($arg:expr),*], $sig:literal, $ret:ident, $reads:expr, $lookback:expr, $fast:path, $plain:path) => {
        function!(short $name, [$($arg),*], $sig, $ret, $reads, $lookback, None, $fast, $plain)
    };
    (short $name:literal, [$($arg:expr),*], $sig:literal, $ret:ident, $reads:expr, $lookback:expr, $expands:expr, $fast:path, $plain:path) => {
        Function {
            name: $name,
            args: &[$($arg),*],
            signature: $sig,
            returns: Returns::$ret,
            reads: $reads,
            lookback: $lookback,
            expands: $expands,
            compute: Compute::$ret($fast),
            multi: None,
            from_lines: None,
            hull: None,
            crossing: None,
            breakout: None,
            fresh: false,
            plain: Plain::$ret($plain),
        }
    };
}

/// Every function, in the order the spec's table lists them.
pub static FUNCTIONS: &[Function] = &[
    Function {
        breakout: Some(Breakout::Lag),
        fresh: true,
        ..function!(
            "lag",
            [S, W],
            "lag(x, n)",
            Series,
            &[],
            lagged,
            series::lag,
            plain::lag
        )
    },
    Function {
        fresh: true,
        ..function!(
            "change",
            [S, W],
            "change(x, n)",
            Series,
            &[],
            lagged,
            series::change,
            plain::change
        )
    },
    Function {
        fresh: true,
        ..function!(
            "roc",
            [S, W],
            "roc(x, n)",
            Series,
            &[],
            lagged,
            series::roc,
            plain::roc
        )
    },
    Function {
        fresh: true,
        ..function!(
            "sum",
            [S, W],
            "sum(x, n)",
            Series,
            &[],
            window_fn,
            series::sum,
            plain::sum
        )
    },
    Function {
        multi: Some(multi::sma),
        fresh: true,
        ..function!(
            "sma",
            [S, W],
            "sma(x, n)",
            Series,
            &[],
            window_fn,
            series::sma,
            plain::sma
        )
    },
    Function {
        multi: Some(multi::wma),
        fresh: true,
        ..function!(
            "wma",
            [S, W],
            "wma(x, n)",
            Series,
            &[],
            window_fn,
            series::wma,
            plain::wma
        )
    },
    Function {
        multi: Some(multi::std),
        from_lines: Some(FromLines {
            of: "sma",
            pass: multi::std_from_means,
        }),
        fresh: true,
        ..function!(
            "std",
            [S, W],
            "std(x, n)",
            Series,
            &[],
            window_fn,
            series::std,
            plain::std
        )
    },
    Function {
        breakout: Some(Breakout::Highest),
        fresh: true,
        ..function!(
            "highest",
            [S, W],
            "highest(x, n)",
            Series,
            &[],
            window_fn,
            series::highest,
            plain::highest
        )
    },
    Function {
        breakout: Some(Breakout::Lowest),
        fresh: true,
        ..function!(
            "lowest",
            [S, W],
            "lowest(x, n)",
            Series,
            &[],
            window_fn,
            series::lowest,
            plain::lowest
        )
    },
    Function {
        multi: Some(multi::ema),
        ..function!(
            "ema",
            [S, W],
            "ema(x, n)",
            Series,
            &[],
            window_fn,
            series::ema,
            plain::ema
        )
    },
    function!(
        "rma",
        [S, W],
        "rma(x, n)",
        Series,
        &[],
        window_fn,
        series::rma,
        plain::rma
    ),
    function!(
        "rsi",
        [S, W],
        "rsi(x, n)",
        Series,
        &[],
        lagged,
        series::rsi,
        plain::rsi
    ),
    function!("tr", [], "tr()", Series, HLC, |_| 0, series::tr, plain::tr),
    function!(
        "atr",
        [W],
        "atr(n)",
        Series,
        HLC,
        |a| a[0],
        series::atr,
        plain::atr
    ),
    Function {
        hull: Some((2.0, 2)),
        fresh: true,
        ..function!(
            "hma",
            [S, W, W, W],
            "hma(x, half, full, sqrt)",
            Series,
            &[],
            |a| a[0] + a[1].max(a[2]) - 1 + a[3] - 1,
            series::hma,
            plain::hma
        )
    },
    function!(short "hma", [S, W], "hma(x, n)", Series, &[], |_| unreachable!("expanded"),
        Some((hma_windows, "hma")), series::hma, plain::hma),
    Function {
        hull: Some((3.0, 3)),
        fresh: true,
        ..function!(
            "hma3",
            [S, W, W, W],
            "hma3(x, p3, p2, p)",
            Series,
            &[],
            |a| a[0] + a[1].max(a[2]).max(a[3]) - 1 + a[3] - 1,
            series::hma3,
            plain::hma3
        )
    },
    Function {
        fresh: true,
        ..function!(
            "abs",
            [S],
            "abs(x)",
            Series,
            &[],
            elementwise,
            series::abs,
            plain::abs
        )
    },
    Function {
        fresh: true,
        ..function!(
            "sqrt",
            [S],
            "sqrt(x)",
            Series,
            &[],
            elementwise,
            series::sqrt,
            plain::sqrt
        )
    },
    Function {
        fresh: true,
        ..function!(
            "log",
            [S],
            "log(x)",
            Series,
            &[],
            elementwise,
            series::log,
            plain::log
        )
    },
    Function {
        fresh: true,
        ..function!(
            "min",
            [S, S],
            "min(a, b)",
            Series,
            &[],
            elementwise,
            series::min,
            plain::min
        )
    },
    Function {
        fresh: true,
        ..function!(
            "max",
            [S, S],
            "max(a, b)",
            Series,
            &[],
            elementwise,
            series::max,
            plain::max
        )
    },
    function!(
        "where",
        [C, S, S],
        "where(c, a, b)",
        Series,
        &[],
        elementwise,
        series::where_,
        plain::where_
    ),
    Function {
        crossing: Some(Crossing::Above),
        ..function!(
            "cross_above",
            [S, S],
            "cross_above(a, b)",
            Cond,
            &[],
            crossing,
            series::cross_above,
            plain::cross_above
        )
    },
    Function {
        crossing: Some(Crossing::Below),
        ..function!(
            "cross_below",
            [S, S],
            "cross_below(a, b)",
            Cond,
            &[],
            crossing,
            series::cross_below,
            plain::cross_below
        )
    },
    timeframe("daily", "daily(x)", Timeframe::Daily),
    timeframe("weekly", "weekly(x)", Timeframe::Weekly),
    timeframe("monthly", "monthly(x)", Timeframe::Monthly),
];

/// `daily(x)`, `weekly(x)`, `monthly(x)`: one entry each, all the same but for the period.
const fn timeframe(name: &'static str, signature: &'static str, tf: Timeframe) -> Function {
    Function {
        name,
        args: &[S],
        signature,
        returns: Returns::Series,
        reads: &[],
        // Not a number of bars (expressions.md): the binder marks the program, and
        // `warmup: "auto"` and explain's lookback read that mark instead.
        lookback: |_| 0,
        expands: None,
        compute: Compute::Frame(tf),
        multi: None,
        from_lines: None,
        hull: None,
        crossing: None,
        breakout: None,
        // Its periods depend on where the bars start.
        fresh: false,
        plain: Plain::Frame(tf),
    }
}

impl Function {
    /// The timeframe of a higher-timeframe function.
    pub fn timeframe(&self) -> Option<Timeframe> {
        match self.compute {
            Compute::Frame(tf) => Some(tf),
            _ => None,
        }
    }
}

/// The entry of function `id`.
pub fn function(id: u16) -> &'static Function {
    &FUNCTIONS[id as usize]
}

/// The full form a short form stands for (`hma(x, n)` for `hma(x, h, n, s)`), with its id.
pub(crate) fn full_form(f: &Function) -> Option<(u16, Derive)> {
    let (windows, name) = f.expands?;
    let id = FUNCTIONS
        .iter()
        .position(|g| g.name == name && g.expands.is_none())
        .expect("a short form names a full one");
    Some((id as u16, windows))
}

/// The function called `name` with `arity` arguments.
///
/// # Errors
/// A message naming what the function takes, or for an unknown name the closest known one.
pub fn lookup(name: &str, arity: usize) -> Result<u16, String> {
    let mut named = FUNCTIONS
        .iter()
        .enumerate()
        .filter(|(_, f)| f.name == name)
        .peekable();
    if named.peek().is_none() {
        // The closest within two edits, ties by the table's order (docs/language.md v1.4).
        let hint =
            closest(name, names()).map_or_else(String::new, |n| format!("did you mean `{n}`? "));
        return Err(format!(
            "unknown function `{name}`; {hint}(known: {})",
            names().join(", ")
        ));
    }
    let forms: Vec<(usize, &Function)> = named.collect();
    forms
        .iter()
        .find(|(_, f)| f.args.len() == arity)
        .map(|(i, _)| *i as u16)
        .ok_or_else(|| {
            format!(
                "{name} takes {}, got {arity} argument{}",
                forms
                    .iter()
                    .map(|(_, f)| f.signature)
                    .collect::<Vec<_>>()
                    .join(" or "),
                if arity == 1 { "" } else { "s" }
            )
        })
}

/// The function names, once each, in table order.
pub fn names() -> Vec<&'static str> {
    let mut out: Vec<&str> = Vec::new();
    for f in FUNCTIONS {
        if !out.contains(&f.name) {
            out.push(f.name);
        }
    }
    out
}

/// True if a function is called `name`.
pub fn is_function(name: &str) -> bool {
    FUNCTIONS.iter().any(|f| f.name == name)
}

/// Of `candidates`, the first at the smallest [`edit_distance`] from `name` if that is at most
/// two (docs/language.md v1.4: the hint for a mistyped function or column).
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        let d = edit_distance(name, c);
        if d <= 2 && best.is_none_or(|(b, _)| d < b) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

/// Edits between `a` and `b`: insertions, deletions, substitutions and swaps of two
/// neighbouring characters, each one edit (the optimal string alignment distance: `art` is
/// one edit from `atr`).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // d[i][j]: edits between a[..i] and b[..j].
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}
